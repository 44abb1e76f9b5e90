"""A service unit read as systemd merges it: unit file syntax, command-line splitting, the
environment, the fragment and drop-in search, on trees built in tmp_path and on real units."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import unit_file as uf
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import launch_args
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "serving_units")
ETC = "etc/systemd/system/"
LIB = "usr/lib/systemd/system/"


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def load(root, name="srv.service", **kw):
    return uf.load(name, str(root), **kw)


def argv_of(root, name="srv.service"):
    unit = load(root, name)
    assert len(unit.exec_start) == 1, unit.exec_start
    return uf.expand(unit.exec_start[0], uf.environment_of(unit), unit.exec_start_prefix)[0]


# ------------------------------------------------------------------------------ unit file syntax

def test_continuations_comments_and_blanks():
    text = ("[Unit]\nDescription=x\n\n[Service]\n  # a comment\n; another\n"
            "ExecStart=/bin/srv \\\n  --a 1 \\\n# inside the continuation: dropped\n  ; this too\n  --b 2\n"
            "Environment=  A=1  \n  User = me \n")
    found = uf.parse(text, "/x.service")
    assert found == [("Unit", "Description", "x", 2), ("Service", "ExecStart", "/bin/srv    --a 1    --b 2", 7),
                     ("Service", "Environment", "A=1", 12), ("Service", "User", "me", 13)]


def test_even_backslashes_do_not_continue_and_a_blank_line_ends_a_continuation():
    found = uf.parse("[Service]\nA=x\\\\\nB=y \\\n\nC=z \\", "/x")
    assert found == [("Service", "A", "x\\\\", 2), ("Service", "B", "y", 3), ("Service", "C", "z", 5)]


def test_lines_outside_sections_and_without_equals_are_warned_and_skipped():
    warnings = []
    found = uf.parse("vi /etc/thing\n[Service]\nnonsense\nX=1\r\nY=2\rZ=\n", "/u", warnings)
    assert found == [("Service", "X", "1", 4), ("Service", "Y", "2", 5), ("Service", "Z", "", 6)]
    assert warnings == ["/u:1: assignment outside of any section, ignored", "/u:3: no Key=Value, line ignored"]


def test_bad_section_header_names_file_and_line():
    with pytest.raises(uf.UnitFileError) as exc:
        uf.parse("[Unit]\n[Service\n", "/etc/x.service")
    assert str(exc.value) == "/etc/x.service:2: invalid section header '[Service'"


def test_byte_order_mark_and_bad_utf8_line():
    warnings = []
    text = b"\xef\xbb\xbf[Service]\nA=\xff\nB=ok\n".decode("utf-8", "surrogateescape")
    assert uf.parse(text, "/u", warnings) == [("Service", "B", "ok", 3)]
    assert warnings == ["/u:2: invalid UTF-8, line ignored"]


# ------------------------------------------------------------------------------ command lines

@pytest.mark.parametrize("text, argv", [
    ('/bin/x "a b" \'c d\' e"f g"h', ["/bin/x", "a b", "c d", "ef gh"]),
    ("/bin/x 'it''s' \"\" ''", ["/bin/x", "its", "", ""]),
    (r'/bin/x \x41\x42 \101 \u00e9 \U0001F600 "\t" \s \\ \" \'', ["/bin/x", "AB", "A", "é", "😀", "\t", " ", "\\", '"', "'"]),
    (r"/bin/x \xc3\xa9", ["/bin/x", "é"]),
    (r"/bin/x a\qb c\ d", ["/bin/x", "a\\qb", "c\\ d"]),  # unknown escapes kept as written
    ("/bin/x c\\", ["/bin/x", "c\\"]),  # and a trailing backslash
    ("/bin/x \\; \";\" a;b", ["/bin/x", ";", ";", "a;b"]),
    ("/bin/x\t\ta   b", ["/bin/x", "a", "b"]),
    ("/bin/x 100%% %n %N %p %i %I %j %f %t %S", ["/bin/x", "100%", "srv-a@b\\x2dc.service", "srv-a@b\\x2dc", "srv-a",
                                                 "b\\x2dc", "b-c", "a", "/b-c", "/run", "/var/lib"]),
    ("/bin/x %- 50%", ["/bin/x", "%-", "50%"]),
])
def test_split_command(text, argv):
    assert uf.split_command(text, unit_name="srv-a@b\\x2dc.service") == (argv, "")


@pytest.mark.parametrize("text, prefix, argv", [
    ("-/bin/x a", "-", ["/bin/x", "a"]),
    ("@/bin/x shown a", "@", ["/bin/x", "shown", "a"]),
    (":/bin/x $A", ":", ["/bin/x", "$A"]),
    ("+-/bin/x", "+-", ["/bin/x"]),
    ("!!/bin/x", "!!", ["/bin/x"]),
    ("-!/bin/x", "-!", ["/bin/x"]),
])
def test_prefixes_are_returned_apart(text, prefix, argv):
    assert uf.split_command(text, environment={"A": "1"}) == (argv, prefix)


@pytest.mark.parametrize("text", ["--/bin/x", "+!/bin/x", "!+/bin/x", "!!!/bin/x"])
def test_a_prefix_given_twice_is_part_of_the_program_which_then_is_refused(text):
    with pytest.raises(uf.UnitFileError, match="neither an absolute path nor a file name"):
        uf.split_command(text)


@pytest.mark.parametrize("text, why", [
    ('/bin/x "open', "unbalanced quoting"),
    ("/bin/x 'a\\", "a trailing backslash"),
    ("", "holds 0 commands"),
    ("/bin/a ; /bin/b", "holds 2 commands, not one (a lone ';' separates commands)"),
    ("/bin/x %H", "the specifier %H"),
    ("/bin/x %n", "the specifier %n"),  # no unit name given
    ('"/bin/x\'y"', "special characters"),
    ("bin/x", "neither an absolute path nor a file name"),
    ("/bin/", "neither an absolute path nor a file name"),
    ("@/bin/x", "the @ prefix needs the name"),
    ("-", "empty program"),
])
def test_refused_command_lines(text, why):
    with pytest.raises(uf.UnitFileError) as exc:
        uf.split_command(text)
    assert why in str(exc.value)


def test_several_commands_and_bare_program_names():
    assert uf.split_commands("/bin/a 1 ; ; /bin/b \\; 2;3 ;") == [(["/bin/a", "1"], ""), (["/bin/b", ";", "2;3"], "")]
    assert uf.split_command("vllm serve m") == (["vllm", "serve", "m"], "")


def test_environment_expansion():
    env = {"ARGS": "--a 1 \"two words\" 'x y'", "ONE": "v a l", "EMPTY": ""}
    argv, prefix = uf.split_command(
        "/bin/x $ARGS ${ONE} pre${ONE}post $$ARGS $$ $MISSING $EMPTY ${MISSING} a$ONE ${ONE:-d} $ ${ONE",
        environment=env)
    assert prefix == "" and argv == ["/bin/x", "--a", "1", "two words", "x y", "v a l", "prev a lpost", "$ARGS", "$",
                                     "", "a$ONE", "${ONE:-d}", "${ONE"]
    assert uf.expand(["/bin/$ONE", "$ONE", "${NOPE}", "$bad-name"], env) == (["/bin/$ONE", "v", "a", "l", ""],
                                                                             ["NOPE", "bad-name"])
    assert uf.expand(["/bin/x", "$ONE"], env, ":") == (["/bin/x", "$ONE"], [])


def test_environment_assignments():
    warnings = []
    assert uf.split_environment('A=1 "B=two words" C=\'x\'y D= %%E=bad F=%n', "u.service", warnings) == {
        "A": "1", "B": "two words", "C": "xy", "D": "", "F": "u.service"}
    assert warnings == ["Environment= word '%E=bad' ignored: not NAME=value"]
    assert uf.split_environment(r"A=1 B=\d", "u.service", warnings) == {}  # a bad escape drops the line
    assert "ignored: an unknown escape \\d" in warnings[-1]


# ------------------------------------------------------------------------------ environment files

def test_environment_file_syntax(tmp_path):
    path = tmp_path / "env"
    path.write_text(
        "# comment\n; comment\n\n  A = 1  \nB=\"quoted \\\"x\\\" \\$y \\n\"\nC='single\nline'\n"
        "D=a\\\nb\nE=unquoted 'kept' \"too\"  \nexport F=1\nG\nH=\nI=\"a\" \"b\"\nJ=x\\ \n#K=1 \\\nL=2\n")
    warnings = []
    assert uf.read_environment_file(str(path), warnings) == {
        "A": "1", "B": 'quoted "x" $y \\n', "C": "single\nline", "D": "ab", "E": "unquoted 'kept' \"too\"",
        "H": "", "I": "ab", "J": "x ", "L": "2"}
    assert warnings == ["%s: 'export F' is not a variable name, ignored" % path]


@pytest.mark.parametrize("text, found", [
    ("A=1", {"A": "1"}), ("A=1  ", {"A": "1"}), ("A=x\\", {"A": "x"}), ("A='open", {"A": "open"}),
    ("A=\"open\n", {"A": "open\n"}), ("A", {}), ("A=", {"A": ""}), ("A=1\nA=2\n", {"A": "2"}),
])
def test_environment_file_last_line(tmp_path, text, found):
    (tmp_path / "env").write_text(text)
    assert uf.read_environment_file(str(tmp_path / "env")) == found


def test_environment_file_invalid_utf8(tmp_path):
    (tmp_path / "env").write_bytes(b"# caf\xe9 in a comment is fine\nB=1\n")
    assert uf.read_environment_file(str(tmp_path / "env")) == {"B": "1"}
    (tmp_path / "env").write_bytes(b"B=1\nA=caf\xe9\n")
    with pytest.raises(uf.UnitFileError, match="invalid UTF-8 in 'A'"):
        uf.read_environment_file(str(tmp_path / "env"))


def test_files_override_environment_in_order_and_optional_ones_may_be_missing(tmp_path):
    write_tree(tmp_path, {
        ETC + "srv.service": "[Service]\nEnvironment=A=unit B=unit C=unit\nEnvironmentFile=/etc/srv/one\n"
                             "EnvironmentFile=-/etc/srv/missing\nEnvironmentFile=-/etc/srv/g*.env\n"
                             "ExecStart=/bin/srv $A $B $C $D\n",
        "etc/srv/one": "B=one\nD=one\n", "etc/srv/g1.env": "C=g1\nD=g1\n", "etc/srv/g2.env": "D=g2\n"})
    assert argv_of(tmp_path) == ["/bin/srv", "unit", "one", "g1", "g2"]


def test_a_missing_required_environment_file_is_an_error(tmp_path):
    write_tree(tmp_path, {ETC + "srv.service": "[Service]\nEnvironmentFile=/etc/none\nExecStart=/bin/srv\n"})
    with pytest.raises(uf.UnitFileError, match="EnvironmentFile=/etc/none does not exist: systemd would not start"):
        uf.environment_of(load(tmp_path))


def test_empty_assignments_reset(tmp_path):
    write_tree(tmp_path, {
        ETC + "srv.service": "[Service]\nEnvironment=A=1\nEnvironmentFile=/etc/e\nExecStart=/bin/a\n",
        ETC + "srv.service.d/10.conf": "[Service]\nEnvironment=\nEnvironment=B=2\nEnvironmentFile=\n"
                                       "ExecStart=\nExecStart=/bin/b $B\n"})
    unit = load(tmp_path)
    assert (unit.environment, unit.environment_files, unit.exec_start) == ({"B": "2"}, [], [["/bin/b", "$B"]])
    assert argv_of(tmp_path) == ["/bin/b", "2"]


# ------------------------------------------------------------------------------ fragment and drop-ins

def test_a_dropin_resets_execstart_and_the_order_is_by_file_name(tmp_path):
    write_tree(tmp_path, {
        LIB + "srv.service": "[Service]\nExecStart=/usr/bin/srv --vendor\nUser=vendor\n",
        ETC + "srv.service.d/20-b.conf": "[Service]\nExecStart=\nExecStart=/usr/bin/srv --b\n",
        LIB + "srv.service.d/10-a.conf": "[Service]\nExecStart=\nExecStart=/usr/bin/srv --a\nUser=a\n",
        "run/systemd/system/srv.service.d/30-c.conf": "[Service]\nEnvironment=C=3\n",
        LIB + "srv.service.d/notes.txt": "[Service]\nUser=ignored\n"})
    unit = load(tmp_path)
    assert unit.fragment_path == "/usr/lib/systemd/system/srv.service"
    assert unit.dropins == ["/usr/lib/systemd/system/srv.service.d/10-a.conf",
                            "/etc/systemd/system/srv.service.d/20-b.conf", "/run/systemd/system/srv.service.d/30-c.conf"]
    assert unit.exec_start == [["/usr/bin/srv", "--b"]] and unit.user == "a" and unit.environment == {"C": "3"}
    assert unit.exec_start_sources == ["/etc/systemd/system/srv.service.d/20-b.conf:3"]


def test_etc_hides_the_same_dropin_name_and_masks_it(tmp_path):
    write_tree(tmp_path, {
        LIB + "srv.service": "[Service]\nExecStart=/usr/bin/srv\n",
        LIB + "srv.service.d/50-tune.conf": "[Service]\nEnvironment=FROM=lib\n",
        ETC + "srv.service.d/50-tune.conf": "[Service]\nEnvironment=FROM=etc\n",
        LIB + "srv.service.d/60-off.conf": "[Service]\nEnvironment=OFF=1\n",
        LIB + "srv.service.d/70-empty.conf": "[Service]\nEnvironment=EMPTY=1\n",
        ETC + "srv.service.d/70-empty.conf": ""})
    os.symlink("/dev/null", str(tmp_path / ETC / "srv.service.d/60-off.conf"))
    unit = load(tmp_path)
    assert unit.dropins == ["/etc/systemd/system/srv.service.d/50-tune.conf"]
    assert unit.environment == {"FROM": "etc"}


def test_an_etc_unit_file_hides_the_vendor_one(tmp_path):
    write_tree(tmp_path, {LIB + "srv.service": "[Service]\nExecStart=/bin/vendor\n",
                          ETC + "srv.service": "[Service]\nExecStart=/bin/local\n"})
    assert argv_of(tmp_path) == ["/bin/local"]


def test_template_dash_prefix_and_type_level_dropins(tmp_path):
    write_tree(tmp_path, {
        LIB + "llm-serve@.service": "[Service]\nExecStart=/bin/serve %i\nEnvironment=T=template\n",
        LIB + "llm-serve@.service.d/10-template.conf": "[Service]\nEnvironment=A=template-dir\n",
        ETC + "llm-serve@gpu0.service.d/20-instance.conf": "[Service]\nEnvironment=B=instance-dir\n",
        ETC + "llm-.service.d/30-dash.conf": "[Service]\nEnvironment=C=dash-dir\n",
        ETC + "service.d/40-all.conf": "[Service]\nEnvironment=D=all-services\n",
        LIB + "service.d/10-template.conf": "[Service]\nEnvironment=A=hidden-by-the-unit-s-own\n",
        ETC + "other-.service.d/50.conf": "[Service]\nEnvironment=E=not-ours\n"})
    unit = load(tmp_path, "llm-serve@gpu0.service")
    assert unit.name == "llm-serve@gpu0.service" and unit.fragment_path == "/usr/lib/systemd/system/llm-serve@.service"
    assert unit.dropins == ["/usr/lib/systemd/system/llm-serve@.service.d/10-template.conf",
                            "/etc/systemd/system/llm-serve@gpu0.service.d/20-instance.conf",
                            "/etc/systemd/system/llm-.service.d/30-dash.conf", "/etc/systemd/system/service.d/40-all.conf"]
    assert unit.environment == {"T": "template", "A": "template-dir", "B": "instance-dir", "C": "dash-dir",
                                "D": "all-services"}
    assert unit.exec_start == [["/bin/serve", "gpu0"]]


def test_dash_prefix_directories_in_systemd_order():
    assert uf._dir_names("foo-bar-baz.service") == ["foo-bar-baz.service", "foo-bar-.service", "foo-.service"]
    assert uf._dir_names("foo-bar@x.service") == ["foo-bar@x.service", "foo-bar@.service", "foo-.service",
                                                  "foo-@x.service", "foo-@.service"]
    assert uf._dir_names("-foo.service") == ["-foo.service"]


def test_links_are_followed_inside_the_root(tmp_path):
    write_tree(tmp_path, {"opt/srv/srv.service": "[Service]\nExecStart=/opt/srv/run\n",
                          "opt/srv/conf.d/10.conf": "[Service]\nEnvironment=X=1\n",
                          "opt/shared/20.conf": "[Service]\nEnvironment=Y=2\n"})
    os.makedirs(str(tmp_path / ETC))
    os.symlink("/opt/srv/srv.service", str(tmp_path / ETC / "srv.service"))
    os.symlink("../../../opt/srv/conf.d", str(tmp_path / ETC / "srv.service.d"))
    os.symlink("/opt/shared/20.conf", str(tmp_path / "opt/srv/conf.d/20.conf"))  # absolute: inside the root
    unit = load(tmp_path)
    assert unit.fragment_path == "/opt/srv/srv.service"
    assert unit.dropins == ["/opt/srv/conf.d/10.conf", "/opt/srv/conf.d/20.conf"]
    assert unit.environment == {"X": "1", "Y": "2"}


def test_an_alias_takes_the_target_name_and_both_names_dropins(tmp_path):
    write_tree(tmp_path, {LIB + "real.service": "[Service]\nExecStart=/bin/real %n\n",
                          ETC + "real.service.d/1.conf": "[Service]\nEnvironment=A=1\n",
                          ETC + "alias.service.d/2.conf": "[Service]\nEnvironment=B=2\n"})
    os.symlink("real.service", str(tmp_path / LIB / "alias.service"))
    unit = load(tmp_path, "alias.service")
    assert (unit.name, unit.names) == ("real.service", ["real.service", "alias.service"])
    assert unit.exec_start == [["/bin/real", "real.service"]] and unit.environment == {"A": "1", "B": "2"}


@pytest.mark.parametrize("how", ["link", "empty"])
def test_masked_unit(tmp_path, how):
    write_tree(tmp_path, {LIB + "srv.service": "[Service]\nExecStart=/bin/srv\n"})
    if how == "link":
        os.makedirs(str(tmp_path / ETC))
        os.symlink("/dev/null", str(tmp_path / ETC / "srv.service"))
    else:
        write_tree(tmp_path, {ETC + "srv.service": ""})
    with pytest.raises(uf.UnitMasked) as exc:
        load(tmp_path)
    assert "srv.service is masked (/etc/systemd/system/srv.service %s)" % (
        "links to /dev/null" if how == "link" else "is empty") in str(exc.value)


def test_missing_unit_lists_where_it_looked(tmp_path):
    with pytest.raises(uf.UnitNotFound) as exc:
        load(tmp_path, "nope.service")
    assert exc.value.looked == list(uf.SEARCH_PATH)
    assert str(exc.value).startswith("no unit file nope.service in /etc/systemd/system.control, ")


def test_excluded_dropins_are_left_out_and_uncover_what_they_hid(tmp_path):
    write_tree(tmp_path, {LIB + "srv.service": "[Service]\nExecStart=/bin/srv --vendor\n",
                          LIB + "srv.service.d/90-gpufleet-launch.conf": "[Service]\nEnvironment=V=lib\n",
                          ETC + "srv.service.d/90-gpufleet-launch.conf": "[Service]\nExecStart=\nExecStart=/bin/srv --ours\n"})
    mine = "/etc/systemd/system/srv.service.d/90-gpufleet-launch.conf"
    assert load(tmp_path).exec_start == [["/bin/srv", "--ours"]]
    vendor = load(tmp_path, exclude=(mine,))
    assert vendor.exec_start == [["/bin/srv", "--vendor"]] and vendor.environment == {"V": "lib"}


def test_a_bad_execstart_names_its_file_and_line(tmp_path):
    write_tree(tmp_path, {ETC + "srv.service": "[Service]\nType=simple\nExecStart=/bin/srv \"open\n"})
    with pytest.raises(uf.UnitFileError) as exc:
        load(tmp_path)
    assert str(exc.value).startswith("/etc/systemd/system/srv.service:3: ExecStart=: unbalanced quoting")


def test_oneshot_commands_are_all_reported(tmp_path):
    write_tree(tmp_path, {ETC + "srv.service": "[Service]\nType=oneshot\nExecStart=/bin/a\nExecStart=/bin/b ; /bin/c\n"})
    unit = load(tmp_path)
    assert unit.exec_start == [["/bin/a"], ["/bin/b"], ["/bin/c"]] and unit.type == "oneshot"
    assert unit.exec_start_sources == ["/etc/systemd/system/srv.service:3"] + ["/etc/systemd/system/srv.service:4"] * 2


def test_invalid_names_are_refused(tmp_path):
    for name in ("srv", "a b.service", "srv.socket", "../x.service", "a@b@.service" * 30):
        with pytest.raises(uf.UnitFileError, match="is not a service unit name"):
            uf.load(name, str(tmp_path))


# ------------------------------------------------------------------------------ real units

REAL = [
    ("sglang-venv.service", "sglang", 3, [
        "/srv/llm/.venv/bin/python", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-14B", "--reasoning-parser", "qwen3", "--host", "0.0.0.0", "--port", "8000",
        "--tensor-parallel-size", "2", "--mem-fraction-static", "0.65", "--max-running-requests", "1",
        "--log-level", "info"]),
    ("sglang-hardened.service", "sglang", 3, [
        "/opt/sglang/venv/bin/python", "-m", "sglang.launch_server",
        "--model-path", "/models/qwen2.5-7b-fp8", "--served-model-name", "qwen2.5-7b", "--host", "0.0.0.0",
        "--port", "30000", "--mem-fraction-static", "0.80", "--context-length", "16384", "--enable-mixed-chunk",
        "--attention-backend", "triton"]),
    ("sglang-envfile.service", "sglang", 3, [
        "/usr/bin/python", "-m", "sglang.launch_server", "--host",
        "127.0.0.1", "--port", "30000", "--model-path", "/var/lib/sglang/models/Qwen3-8B", "--tp", "2",
        "--chat-template", "/etc/sglang/chat template.jinja"]),
    ("vllm-serve-nvme.service", "vllm", 2, [
        "/usr/local/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
        "--download-dir", "/mnt/nvme/models", "--gpu-memory-utilization", "0.90", "--port", "8000", "--host",
        "0.0.0.0", "--tensor-parallel-size", "1", "--max-model-len", "8192"]),
    ("vllm-api-server-unicode.service", "vllm", 3, [
        "/home/ai/Документы/vllm/venv/bin/python", "-m",
        "vllm.entrypoints.openai.api_server", "--model", "models/Qwen3-30B-A3B-Instruct-AWQ", "--dtype", "float16",
        "--max-model-len", "16384", "--gpu-memory-utilization", "0.8", "--max-num-seqs", "1", "--host", "0.0.0.0",
        "--port", "8000"]),
    ("vllm-json-args.service", "vllm", 2, [
        "/home/ubuntu/lab/venv/bin/vllm", "serve", "org/Qwen3.5-4B-AWQ",
        "--port", "8007", "--max-model-len", "32768", "--gpu-memory-utilization", "0.75", "--limit-mm-per-prompt",
        '{"image": 1, "video": 0}', "--mm-processor-kwargs", '{"max_pixels": 602112}', "--allowed-local-media-path",
        "/tmp", "--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8]}']),
    ("vllm-stray-line.service", "vllm", 2, [
        "/opt/vllm/.venv/bin/vllm", "serve", "org/Qwen3-27B-GPTQ-Int4",
        "--host", "0.0.0.0", "--port", "8000", "--quantization", "gptq", "--max-model-len", "131072",
        "--kv-cache-dtype", "fp8", "--enable-prefix-caching", "--reasoning-parser", "qwen3",
        "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder"]),
    ("llama-cpp-python.service", "llama_cpp_python", 3, [
        "/opt/gpufleet-serving/venv/bin/python", "-m",
        "llama_cpp.server", "--model", "/opt/gpufleet-serving/model/tiny.gguf", "--model_alias", "tiny", "--host",
        "127.0.0.1", "--port", "8000", "--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "1",
        "--interrupt_requests", "False"]),
]
# The server arguments of the Arch package's unit come from /etc/sglang.conf (written here).
SGLANG_CONF = ('# extra arguments for sglang.launch_server\n'
               'SGLANG_ARGS="--model-path /var/lib/sglang/models/Qwen3-8B --tp 2 '
               '--chat-template \'/etc/sglang/chat template.jinja\'"\n')


@pytest.mark.parametrize("name, kind, start, argv", REAL, ids=[r[0] for r in REAL])
def test_real_units(tmp_path, name, kind, start, argv):
    write_tree(tmp_path, {ETC + "srv.service": fixture(name), "etc/sglang.conf": SGLANG_CONF})
    unit = load(tmp_path)
    assert argv_of(tmp_path) == argv
    assert launch_args.kind_of(argv) == (kind, start) and unit.type == "simple"
    assert uf.split_command(launch_args.render_exec(argv), environment={}) == (argv, "")
    stray = [w for w in unit.warnings if "outside of any section" in w]
    assert stray == (["/etc/systemd/system/srv.service:4: assignment outside of any section, ignored"]
                     if name == "vllm-stray-line.service" else [])


def test_real_unit_environment(tmp_path):
    write_tree(tmp_path, {ETC + "srv.service": fixture("vllm-api-server-unicode.service")})
    unit = load(tmp_path)
    assert unit.environment == {"PATH": "/home/ai/Документы/vllm/venv/bin:/usr/local/bin:/usr/bin",
                                "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "0"}
    assert (unit.user, unit.working_directory) == ("ai", "/home/ai/Документы/vllm")


def test_the_arch_unit_without_its_optional_file(tmp_path):
    write_tree(tmp_path, {ETC + "srv.service": fixture("sglang-envfile.service")})
    unit = load(tmp_path)
    assert unit.environment_files == [{"path": "/etc/sglang.conf", "optional": True}]
    assert uf.expand(unit.exec_start[0], uf.environment_of(unit)) == (
        ["/usr/bin/python", "-m", "sglang.launch_server", "--host", "127.0.0.1", "--port", "30000"], ["SGLANG_ARGS"])
