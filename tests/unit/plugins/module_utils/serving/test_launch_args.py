"""A server's command line as data: which server behind which wrappers, one flag read or set in
either spelling and style, and ExecStart= text that systemd splits back to the same argv."""

import random

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import launch_args as la
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import unit_file as uf

PY = "/opt/x/venv/bin/python"


@pytest.mark.parametrize("argv, kind, start, program", [
    ([PY, "-m", "sglang.launch_server", "--port", "1"], "sglang", 3, 0),
    (["python3", "-u", "-W", "ignore", "-X", "dev", "-m", "sglang.launch_server"], "sglang", 8, 0),
    (["/usr/bin/python3.11", "-uBmsglang.launch_server", "--tp", "2"], "sglang", 2, 0),
    (["/usr/local/bin/sglang", "serve", "--model-path", "m"], "sglang", 2, 0),
    (["/usr/local/bin/vllm", "serve", "org/model", "--port", "8000"], "vllm", 2, 0),
    (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm", 3, 0),
    (["python", "-m", "vllm.entrypoints.cli.main", "serve", "m"], "vllm", 4, 0),
    (["/opt/llama.cpp/build/bin/llama-server", "-m", "m.gguf", "--port", "8080"], "llama_cpp", 1, 0),
    ([PY, "-m", "llama_cpp.server", "--n_ctx", "4096"], "llama_cpp_python", 3, 0),
    (["/usr/bin/env", "CUDA_VISIBLE_DEVICES=0,1", "HF_HOME=/x", PY, "-m", "sglang.launch_server"], "sglang", 6, 3),
    (["env", "-i", "-u", "HOME", "--chdir=/srv", "A=1", "vllm", "serve", "m"], "vllm", 8, 6),
    (["numactl", "--cpunodebind=0", "--membind", "0", "--", PY, "-m", "sglang.launch_server"], "sglang", 8, 5),
    (["/usr/bin/numactl", "-N", "1", "-m1", "-l", "vllm", "serve", "m"], "vllm", 7, 5),
    (["taskset", "-c", "0-7", "vllm", "serve", "m"], "vllm", 5, 3),
    (["taskset", "0xff", "llama-server", "-c", "4096"], "llama_cpp", 3, 2),
    (["nice", "-n", "-5", "ionice", "-c", "2", "-n", "0", "chrt", "-f", "50", "vllm", "serve", "m"], "vllm", 13, 11),
    (["stdbuf", "-oL", "-e", "0", "prlimit", "--memlock=unlimited", "vllm", "serve"], "vllm", 8, 6),
    (["/opt/conda/bin/conda", "run", "-n", "llm", "--no-capture-output", "vllm", "serve", "m"], "vllm", 7, 5),
    (["uv", "run", "--python", "3.12", "--with", "vllm", "--", "vllm", "serve", "m"], "vllm", 9, 7),
    (["runuser", "-u", "llm", "--", "env", "X=1", PY, "-m", "sglang.launch_server"], "sglang", 9, 6),
])
def test_locate_recognises_servers_behind_wrappers(argv, kind, start, program):
    assert la.locate(argv) == (kind, start, program)
    assert la.kind_of(argv) == (kind, start)


@pytest.mark.parametrize("argv, start, program", [
    (["/bin/sh", "-c", "exec vllm serve m"], 1, 0),
    (["/usr/bin/env", "-S", "vllm serve m"], 1, 0),
    (["runuser", "-u", "x", "-c", "vllm serve m"], 1, 0),
    (["/usr/bin/docker", "run", "--gpus", "all", "img", "vllm", "serve"], 1, 0),
    (["python3", "-c", "import sglang"], 1, 0),
    (["python3", "/srv/vllm/entrypoints/openai/api_server.py", "--port", "1"], 1, 0),
    (["python3", "-m", "http.server", "8000"], 3, 0),
    (["vllm", "bench", "serve"], 1, 0),
    (["taskset", "-p", "1234"], 1, 0),
    (["numactl", "--hardware"], 1, 0),
    (["env"], 1, 0),
    (["python3", "-m"], 2, 0),
])
def test_generic_commands(argv, start, program):
    assert la.locate(argv) == ("generic", start, program)


SERVE = ["/opt/vllm/bin/vllm", "serve", "org/m", "--max_num_seqs", "4", "--gpu-memory-utilization=0.9",
         "--enable-prefix-caching", "--temperature", "-0.5", "--port", "8000"]


def test_flag_value_in_both_spellings_and_styles():
    assert la.flag_value(SERVE, "--max-num-seqs", 2) == "4"
    assert la.flag_value(SERVE, "--max_num_seqs", 2) == "4"
    assert la.flag_value(SERVE, "--gpu_memory_utilization", 2) == "0.9"
    assert la.flag_value(SERVE, "--enable-prefix-caching", 2) is True
    assert la.flag_value(SERVE, "--temperature", 2) == "-0.5"  # a negative number is a value
    assert la.flag_value(SERVE, "--absent", 2) is None
    assert la.flag_value(["x", "--port", "1", "--port=2"], "--port") == "2"  # the last one wins
    assert la.flag_value(["llama-server", "-m", "a.gguf", "-fa"], "-m") == "a.gguf"
    assert la.flag_value(["x", "--", "--port", "1"], "--port") is None  # after "--" nothing is a flag
    assert la.flag_value(["x", "--a", "--b"], "--a") is True


def test_flag_value_ignores_words_before_start():
    argv = ["/usr/bin/env", "--port", "9", "vllm", "serve", "m"]
    assert la.flag_value(argv, "--port", 5) is None and la.flag_value(argv, "--port", 0) == "9"


def test_with_flag_replaces_in_place_keeping_spelling_and_style():
    assert la.with_flag(SERVE, "--max-num-seqs", 8, 2)[3:5] == ["--max_num_seqs", "8"]
    assert la.with_flag(SERVE, "--gpu_memory_utilization", 0.85, 2)[5] == "--gpu-memory-utilization=0.85"
    assert la.with_flag(SERVE, "--enable-prefix-caching", False, 2) == SERVE[:6] + SERVE[7:]
    assert la.with_flag(SERVE, "--enable-prefix-caching", True, 2) == SERVE
    assert la.with_flag(SERVE, "--max-num-seqs", "4", 2) == SERVE  # nothing to change: the same argv
    assert la.with_flag(SERVE, "--max-num-seqs", None, 2) == SERVE[:3] + SERVE[5:]
    assert la.with_flag(SERVE, "--temperature", None, 2) == SERVE[:7] + SERVE[9:]
    assert la.with_flag(SERVE, "--enable-prefix-caching", "yes", 2)[6:8] == ["--enable-prefix-caching", "yes"]
    assert la.with_flag(SERVE, "--max-num-seqs", True, 2)[3:5] == ["--max_num_seqs", "--gpu-memory-utilization=0.9"]


def test_with_flag_appends_a_new_flag():
    assert la.with_flag(SERVE, "--kv-cache-dtype", "fp8", 2) == SERVE + ["--kv-cache-dtype", "fp8"]
    assert la.with_flag(SERVE, "--async-scheduling", True, 2) == SERVE + ["--async-scheduling"]
    assert la.with_flag(["x", "--a", "1", "--", "file"], "--b", "2") == ["x", "--a", "1", "--b", "2", "--", "file"]
    assert la.with_flag(SERVE, "--absent", None, 2) == SERVE


def test_a_value_starting_with_a_dash_is_attached():
    assert la.with_flag(SERVE, "--max-num-seqs", "-1", 2)[3] == "--max_num_seqs=-1"
    assert la.with_flag(SERVE, "--seed", "-x", 2)[-1] == "--seed=-x"
    changed = la.with_flag(SERVE, "--seed", "-x", 2)
    assert la.flag_value(changed, "--seed", 2) == "-x"
    with pytest.raises(ValueError, match="a short option cannot take a value starting with '-'"):
        la.with_flag(["llama-server", "-c", "1"], "-c", "-1", 1)


def test_duplicates_collapse_into_the_first():
    argv = ["x", "--port", "1", "--a", "--port=2", "--port", "3"]
    assert la.with_flag(argv, "--port", "9") == ["x", "--port", "9", "--a"]
    assert la.with_flag(argv, "--port", None) == ["x", "--a"]


def test_nothing_before_start_changes():
    argv = ["/usr/bin/env", "--port", "9", "--", "/bin/vllm", "serve", "m", "--port", "1"]
    assert la.with_flag(argv, "--port", "2", 7) == argv[:8] + ["2"]
    assert la.with_flag(argv, "--port", None, 7) == argv[:7]
    assert la.with_flag(["/bin/x", "--port", "1"], "--port", "2", 3) == ["/bin/x", "--port", "1", "--port", "2"]


@pytest.mark.parametrize("flag, value, start", [
    ("port", "1", 1), ("--", "1", 1), ("--a b", "1", 1), ("--a", object(), 1), ("--a", [1], 1),
    ("--a", "1", 9), ("--a", "1", -1), ("--a", "1", True),
])
def test_with_flag_refuses_what_it_cannot_write(flag, value, start):
    with pytest.raises(ValueError):
        la.with_flag(["x", "--b"], flag, value, start)


def test_flags_of_normalises_and_keeps_the_last_value():
    assert la.flags_of(SERVE + ["--max-num-seqs", "16", "-x", "--", "--after"], 2) == {
        "--max-num-seqs": "16", "--gpu-memory-utilization": "0.9", "--enable-prefix-caching": True,
        "--temperature": "-0.5", "--port": "8000"}


# ------------------------------------------------------------------------------ rendering

def test_render_exec_quotes_only_what_needs_it():
    assert la.render_exec(["/bin/x", "--port", "8000", "a b", "", "50%", "$HOME", ";", 'q"', "tab\t"]) == (
        '/bin/x --port 8000 "a b" "" 50%% $$HOME ";" "q\\"" "tab\\t"')
    assert la.render_exec(["/opt/my models/python", "-m", "x"], "-") == '-"/opt/my models/python" -m x'
    assert la.render_exec(["/bin/x", "$A"], ":") == ":/bin/x $A"
    assert la.render_exec(["/bin/x", "shown", "a"], "@") == "@/bin/x shown a"


@pytest.mark.parametrize("argv, prefix", [
    ([], ""), (["-/bin/x"], ""), (["relative/x"], ""), (["/bin/x'y"], ""), (["/bin/${A}"], ""),
    (["/bin/x", "a\x00b"], ""), (["/bin/x"], "?"), (["/bin/x"], "++"), (["/bin/x"], "@"), ("/bin/x", ""),
])
def test_render_exec_refuses_what_systemd_would_not_split_back(argv, prefix):
    with pytest.raises(ValueError):
        la.render_exec(argv, prefix)


ALPHABET = (list("abcXYZ019-_=./,:@+!#&*?()[]{}<>|~^") + [" ", "\t", "\n", "\r", "\\", '"', "'", "$", "%", ";",
            "é", "€", "Ω", "😀", "\u2028", "\x85", "\x01", "\x7f", "\udcff", "\udc80", "{", "}"])


def _word(rng):
    return "".join(rng.choice(ALPHABET) for _char in range(rng.randint(0, 8)))


@pytest.mark.parametrize("seed", range(40))
def test_render_exec_round_trips_through_split_command(seed):
    rng = random.Random(seed)
    for _round in range(50):
        program = rng.choice(["/usr/bin/python3", "/opt/my venv/bin/python", "/opt/Документы/vllm", "llama-server"])
        argv = [program] + [_word(rng) for _index in range(rng.randint(0, 8))]
        prefix = rng.choice(["", "-", "+", "!!", "-!", ":", "@"] if len(argv) > 1 else ["", "-", "+", ":"])
        text = la.render_exec(argv, prefix)
        assert "\n" not in text and "\r" not in text and not text.endswith("\\")
        assert uf.split_command(text, environment={}) == (argv, prefix), text
        # ... and as a unit file line, through the parser, specifiers and expansion.
        parsed = uf.parse("[Service]\nExecStart=%s\n" % text, "/u.service")
        assert parsed == [("Service", "ExecStart", text.strip(uf.WHITESPACE), 2)]


@pytest.mark.parametrize("seed", range(10))
def test_render_environment_round_trips(seed):
    rng = random.Random(seed)
    for _round in range(50):
        environment = dict(("V%d_%s" % (i, rng.choice("AbZ_")), _word(rng)) for i in range(rng.randint(1, 5)))
        text = la.render_environment(environment)
        assert uf.split_environment(text, "u.service") == environment, text


def test_render_environment_refuses_bad_names():
    for bad in ({"1A": "x"}, {"A B": "x"}, {"A": 1}):
        with pytest.raises(ValueError):
            la.render_environment(bad)
