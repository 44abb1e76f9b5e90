"""The serving_launch engine on a fake root: the drop-in it writes (read back the way systemd
merges it, by unit_file.load), idempotence, check mode, diff, state absent, a foreign file,
the inputs it refuses, and a recorded run that tuning_revert takes back."""

import hashlib
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_launch as sl
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.commands import CommandResult
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import unit_file
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot, write_tree

DROPIN = "etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf"
VENDOR = "usr/lib/systemd/system/vllm.service"
VENDOR_TEXT = ("[Unit]\nDescription=vLLM\n\n[Service]\nType=simple\nEnvironment=HF_HOME=/srv/hf\n"
               "ExecStart=/usr/bin/vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000\n"
               "Restart=on-failure\n\n[Install]\nWantedBy=multi-user.target\n")
ARGV = ["/usr/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000", "--max-num-seqs", "256"]
HEADER = ("# Managed by gpufleet.tuning (serving_launch): the launch command of vllm.service.\n"
          "# The unit file itself is untouched; remove this file (or run playbooks/revert.yml) and\n"
          "# daemon-reload to go back to its own command.\n")


@pytest.fixture(autouse=True)
def records_agree(monkeypatch):
    """Every run in this file: ``changes`` records of area serving_launch agree with ``changed``,
    and a failure claims none."""
    contract.checking_records(monkeypatch, sl)


@pytest.fixture
def root(tmp_path):
    write_tree(tmp_path, {VENDOR: VENDOR_TEXT})
    return tmp_path


def run(root, check_mode=False, **kw):
    params = dict(unit="vllm", argv=list(ARGV))
    params.update(kw)
    return sl.run(params, check_mode=check_mode, paths=sl.Paths(str(root)))


def effective(root, name="vllm.service"):
    """(argv, prefix, environment) the unit runs, merged and expanded the way systemd does."""
    unit = unit_file.load(name, str(root))
    assert len(unit.exec_start) == 1, unit.exec_start
    environment = unit_file.environment_of(unit)
    argv, unset = unit_file.expand(unit.exec_start[0], environment, unit.exec_start_prefix)
    assert unset == []
    return argv, unit.exec_start_prefix, environment


# ------------------------------------------------------------------------------ present

def test_writes_the_dropin_with_an_execstart_reset_and_the_command(root):
    result = run(root)
    path = str(root / DROPIN)
    assert read(path) == HEADER + "[Service]\nExecStart=\nExecStart=%s\n" % " ".join(ARGV)
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert result["changed"] is True and result["path"] == path and result["unit"] == "vllm.service"
    assert result["state"] == "present" and result["argv"] == ARGV
    assert result["restart_required"] is True and result["daemon_reload_required"] is True
    assert result["plan"] == ["write %s" % path]
    content = read(path).encode()
    assert result["changes"] == [{"area": "serving_launch", "kind": "file", "target": path, "before": None,
                                  "after": {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content),
                                            "mode": "0644"}}]
    assert read(root / VENDOR) == VENDOR_TEXT


def test_environment_lines_are_sorted_one_per_variable(root):
    run(root, environment={"VLLM_USE_V1": 1, "CUDA_VISIBLE_DEVICES": "0,1", "NOTE": "a b"})
    assert read(root / DROPIN).splitlines()[-3:] == [
        "Environment=CUDA_VISIBLE_DEVICES=0,1", 'Environment="NOTE=a b"', "Environment=VLLM_USE_V1=1"]
    _argv, _prefix, environment = effective(root)
    assert environment == {"HF_HOME": "/srv/hf", "CUDA_VISIBLE_DEVICES": "0,1", "NOTE": "a b", "VLLM_USE_V1": "1"}


def test_a_second_run_changes_nothing(root):
    run(root, environment={"A": "1"})
    before = snapshot(root)
    again = run(root, environment={"A": "1"})
    assert again["changed"] is False and again["changes"] == [] and again["plan"] == [] and again["diff"] == []
    assert again["restart_required"] is False and again["daemon_reload_required"] is False
    assert again["argv"] == ARGV
    assert snapshot(root) == before


def test_another_command_rewrites_the_file_with_a_diff(root):
    run(root)
    old = read(root / DROPIN)
    argv = ARGV[:-1] + ["512"]
    result = run(root, argv=argv)
    assert result["changed"] is True and result["restart_required"] is True
    assert len(result["diff"]) == 1
    diff = result["diff"][0]
    assert diff["before"] == old and diff["after"] == read(root / DROPIN)
    assert diff["after"].endswith("--max-num-seqs 512\n") and diff["before"].endswith("--max-num-seqs 256\n")
    change = result["changes"][0]
    assert change["before"]["sha256"] == hashlib.sha256(old.encode()).hexdigest()
    assert change["after"]["sha256"] == hashlib.sha256(diff["after"].encode()).hexdigest()


def test_check_mode_writes_nothing_and_plans_what_a_real_run_does(root):
    before = snapshot(root)
    checked = run(root, check_mode=True, environment={"A": "x"})
    assert snapshot(root) == before and not (root / "etc/systemd/system/vllm.service.d").exists()
    assert checked["changed"] is True and checked["restart_required"] is True
    assert checked["diff"][0]["before_header"].endswith("90-gpufleet-launch.conf (absent)")
    real = run(root, environment={"A": "x"})
    for key in ("plan", "diff", "changes", "changed", "path", "argv", "restart_required"):
        assert checked[key] == real[key], key
    assert real["diff"][0]["after"] == read(root / DROPIN)


def test_check_mode_of_absent_leaves_the_file(root):
    run(root)
    before = snapshot(root)
    checked = run(root, check_mode=True, state="absent", argv=[])
    assert checked["changed"] is True and checked["plan"] == ["remove %s" % (root / DROPIN)]
    assert snapshot(root) == before


def test_prefix_and_template_instance(root):
    write_tree(root, {"etc/systemd/system/serve@.service": "[Service]\nExecStart=/usr/bin/llama-server -m x\n"})
    argv = ["/usr/bin/llama-server", "-m", "/models/a model.gguf", "--parallel", "4"]
    result = run(root, unit="serve@gpu0", argv=argv, prefix="-")
    assert result["path"] == str(root / "etc/systemd/system/serve@gpu0.service.d/90-gpufleet-launch.conf")
    assert read(result["path"]).splitlines()[-1] == 'ExecStart=-/usr/bin/llama-server -m "/models/a model.gguf" --parallel 4'
    assert effective(root, "serve@gpu0.service")[:2] == (argv, "-")


def test_another_dropin_name(root):
    result = run(root, dropin_name="95-gpufleet-tuned.conf")
    assert result["path"] == str(root / "etc/systemd/system/vllm.service.d/95-gpufleet-tuned.conf")
    assert os.path.isfile(result["path"]) and not (root / DROPIN).exists()


# ------------------------------------------------------------------------------ round trip

@pytest.mark.parametrize("vendor", [VENDOR, "etc/systemd/system/vllm.service"])
def test_round_trip_through_unit_file_gives_back_the_argv(tmp_path, vendor):
    write_tree(tmp_path, {vendor: VENDOR_TEXT})
    vendor_bytes = (tmp_path / vendor).read_bytes()
    argv = ["/opt/venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
            "--model", "/models/my model",                      # a blank
            "--chat-template", '{{ "x" }}',                      # double quotes
            "--served-model-name", "it's",                       # a single quote
            "--api-key", "$SECRET", "--root-path", "${PREFIX}/v1",   # dollars, never expanded
            "--max-model-len", "50%", "--note", "%n %%",        # specifiers, never resolved
            "--json", '{"a": [1, 2], "b": "c\\d"}',             # a backslash in JSON
            "--tab", "a\tb", "--empty", "", "--semi", ";", "--unicode", "mod\u00e8le"]
    result = sl.run(dict(unit="vllm.service", argv=argv, environment={"PREFIX": "/srv", "SECRET": "s"}),
                    paths=sl.Paths(str(tmp_path)))
    assert result["argv"] == argv
    unit = unit_file.load("vllm.service", str(tmp_path))
    assert unit.fragment_path == "/" + vendor
    assert unit.dropins == ["/" + DROPIN]
    assert unit.exec_start_sources == ["/%s:6" % DROPIN]
    got, prefix, environment = effective(tmp_path)
    assert got == argv and prefix == ""
    assert environment["PREFIX"] == "/srv"  # set, and still the $ words stayed as written
    assert (tmp_path / vendor).read_bytes() == vendor_bytes


def test_without_the_dropin_the_unit_runs_its_own_command_again(root):
    run(root)
    assert effective(root)[0] == ARGV
    run(root, state="absent", argv=[])
    assert effective(root)[0] == ["/usr/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"]


def test_a_command_systemd_cannot_take_fails_writing_nothing(root):
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root, argv=["bin/relative", "x"])
    assert "nothing was changed" in exc.value.message and "bin/relative" in exc.value.message
    assert snapshot(root) == before


# ------------------------------------------------------------------------------ absent

def test_absent_removes_the_dropin_then_changes_nothing(root):
    run(root)
    vendor = (root / VENDOR).read_bytes()
    removed = run(root, state="absent", argv=[])
    assert removed["changed"] is True and removed["restart_required"] is True and removed["argv"] is None
    assert removed["plan"] == ["remove %s" % (root / DROPIN)]
    assert removed["changes"][0]["after"] is None and removed["changes"][0]["before"]["sha256"]
    assert not (root / DROPIN).exists()
    assert (root / VENDOR).read_bytes() == vendor
    before = snapshot(root)
    again = run(root, state="absent", argv=[])
    assert again["changed"] is False and again["changes"] == [] and again["restart_required"] is False
    assert snapshot(root) == before


def test_absent_without_a_dropin_changes_nothing(root):
    before = snapshot(root)
    result = run(root, state="absent", argv=[])
    assert result["changed"] is False and result["plan"] == [] and snapshot(root) == before


def test_absent_with_argv_is_refused(root):
    with pytest.raises(ModuleFailure) as exc:
        run(root, state="absent")
    assert "state=absent removes the drop-in" in exc.value.message


# ------------------------------------------------------------------------------ a foreign file

@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_file_without_the_marker_is_refused_and_left(root, state):
    foreign = "[Service]\nExecStart=\nExecStart=/usr/bin/vllm serve mine\n"
    write_tree(root, {DROPIN: foreign})
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root, state=state, argv=ARGV if state == "present" else [])
    verb = "overwrite" if state == "present" else "remove"
    assert exc.value.message.startswith("refusing to %s %s: it was not written by gpufleet.tuning" % (verb, root / DROPIN))
    assert "choose another dropin_name" in exc.value.message
    assert snapshot(root) == before and read(root / DROPIN) == foreign


def test_a_file_with_the_marker_is_taken_over(root):
    write_tree(root, {DROPIN: "# gpufleet.tuning: an older launch drop-in\n[Service]\nExecStart=\nExecStart=/bin/x\n"})
    result = run(root)
    assert result["changed"] is True and read(root / DROPIN).startswith(HEADER)


# ------------------------------------------------------------------------------ bad inputs

@pytest.mark.parametrize("params, words", [
    (dict(unit="a/b"), "unit='a/b' is not a systemd unit name"),
    (dict(unit="x.socket"), "unit='x.socket' is a .socket unit"),
    (dict(unit="x.timer"), "unit='x.timer' is a .timer unit"),
    (dict(unit="session-1.scope"), "unit='session-1.scope' is a .scope unit"),
    (dict(unit="dev-sda.device"), "unit='dev-sda.device' is a .device unit"),
    (dict(unit=".."), "unit='..': the collection records drop-ins only of units named"),
    (dict(unit=""), "unit='' is empty"),
    (dict(unit="a b"), "unit='a b' is not a systemd unit name"),
    (dict(dropin_name="../x.conf"), "dropin_name='../x.conf' must look like NN-gpufleet-NAME.conf"),
    (dict(dropin_name="90-local.conf"), "dropin_name='90-local.conf' must look like NN-gpufleet-NAME.conf"),
    (dict(dropin_name="90-gpufleet-Launch.conf"), "dropin_name='90-gpufleet-Launch.conf'"),
    (dict(dropin_name="90-gpufleet-launch.conf/x"), "dropin_name='90-gpufleet-launch.conf/x'"),
    (dict(argv=[]), "argv is empty"),
    (dict(argv=["/usr/bin/vllm", "serve", "a\nExecStartPre=/bin/sh"]), "argv[2]='a\\nExecStartPre=/bin/sh'"),
    (dict(argv=["/usr/bin/vllm", "a\rb"]), "argv[1]='a\\rb'"),
    (dict(argv=["/usr/bin/vllm", "a\0b"]), "argv[1]='a\\x00b'"),
    (dict(argv=[" /usr/bin/vllm", "serve"]), "argv[0]=' /usr/bin/vllm' is not a program"),
    (dict(argv=["", "serve"]), "argv[0]='' is not a program"),
    (dict(environment={"1X": "a"}), "environment: '1X' is not a variable name"),
    (dict(environment={"A-B": "a"}), "environment: 'A-B' is not a variable name"),
    (dict(environment={"A": "x\nExecStartPre=/bin/sh"}), "environment: A='x\\nExecStartPre=/bin/sh' holds NUL or a line break"),
    (dict(environment={"A": None}), "environment: A=None is not a text value"),
    (dict(environment={"A": ["x"]}), "environment: A=['x'] is not a text value"),
    (dict(prefix="x"), "prefix='x'"),
])
def test_bad_input_fails_naming_the_value_and_changes_nothing(root, params, words):
    run(root)  # a drop-in already there must stay exactly as it is
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root, **params)
    assert words in exc.value.message, exc.value.message
    assert snapshot(root) == before


def test_too_many_or_too_long_words_are_refused(root):
    with pytest.raises(ModuleFailure) as exc:
        run(root, argv=["/bin/x"] * (sl.MAX_ARGS + 1))
    assert "argv has %d words, more than %d" % (sl.MAX_ARGS + 1, sl.MAX_ARGS) in exc.value.message
    with pytest.raises(ModuleFailure) as exc:
        run(root, argv=["/bin/x", "y" * (sl.MAX_ARG + 1)])
    assert "argv[1]=" in exc.value.message and "nor pass %d characters" % sl.MAX_ARG in exc.value.message
    assert not (root / DROPIN).exists()


def test_a_unit_name_without_suffix_gets_service():
    assert sl.unit_name("vllm") == "vllm.service"
    assert sl.unit_name("vllm.service") == "vllm.service"
    assert sl.unit_name("serve@gpu0") == "serve@gpu0.service"
    assert sl.unit_name("llama.cpp") == "llama.cpp.service"


# ------------------------------------------------------------------------------ recorded, reverted

class Tools:
    """systemctl "installed" on the fake tree; every command it is asked to run is noted."""

    def __init__(self):
        self.ran = []

    def which(self, name):
        return "/bin/" + name if name == "systemctl" else None

    def run(self, argv):
        self.ran.append(argv)
        return CommandResult(argv, 0, "", "")


def _files(tree):
    return {k: v for k, v in tree.items() if not str(v).startswith("<dir") and not k.startswith("var/lib/gpufleet-tuning")}


def _recorded(root, params, run_id="r1"):
    state_path = str(root / "var/lib/gpufleet-tuning/state.json")
    paths = state_items.Paths(str(root))
    result = recorder.run(lambda check: sl.run(params, check, sl.Paths(str(root))), False,
                          {"state_path": state_path, "run_id": run_id}, paths)
    return result, state_path, paths


def test_a_recorded_launch_is_removed_by_revert_which_names_the_unit_to_restart(root):
    write_tree(root, {"run/systemd/system": None})
    untouched = snapshot(root)
    result, state_path, paths = _recorded(root, dict(unit="vllm", argv=ARGV, environment={"A": "1"}))
    assert result["changed"] is True and result["state_record"]["recorded"] == ["file:%s" % (root / DROPIN)]
    loaded = store.load(state_path, str(root))
    assert loaded["refused"] == {} and loaded["items"]["file:%s" % (root / DROPIN)]["area"] == "serving_launch"

    tools = Tools()
    checked = tuning_revert.run({"path": state_path}, check_mode=True, paths=paths, tools=tools)
    assert checked["restart_units"] == ["vllm.service"] and (root / DROPIN).exists()

    reverted = tuning_revert.run({"path": state_path}, paths=paths, tools=tools)
    assert reverted["changed"] is True and reverted["refused"] == []
    assert reverted["restart_units"] == ["vllm.service"]
    assert [r["target"] for r in reverted["restored"]] == [str(root / DROPIN)]
    assert reverted["commands"] == ["/bin/systemctl daemon-reload"] and tools.ran == [["/bin/systemctl", "daemon-reload"]]
    assert not (root / DROPIN).exists()
    # every file is as it was (the record aside); the emptied <unit>.d folder is left, systemd ignores it
    assert _files(snapshot(root)) == _files(untouched)
    assert os.listdir(str(root / "etc/systemd/system/vllm.service.d")) == []
    assert effective(root)[0] == ["/usr/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"]

    again = tuning_revert.run({"path": state_path}, paths=paths, tools=tools)
    assert again["changed"] is False and again["restart_units"] == []


def test_revert_puts_back_the_launch_dropin_found_before(root):
    """A drop-in of the collection from before the first recorded run (the content a record
    holds): serving_launch replaces it, the revert writes it back byte for byte."""
    older = HEADER + "[Service]\nExecStart=\nExecStart=/usr/bin/vllm serve m --max-num-seqs 64\nEnvironment=\"B=x y\"\n"
    write_tree(root, {DROPIN: older})
    _result, state_path, paths = _recorded(root, dict(unit="vllm", argv=ARGV))
    assert read(root / DROPIN) != older
    reverted = tuning_revert.run({"path": state_path}, paths=paths)
    assert reverted["refused"] == [] and reverted["restart_units"] == ["vllm.service"]
    assert reverted["commands"] == []  # no tools: nothing to run
    assert read(root / DROPIN) == older


def test_revert_of_another_area_names_no_unit(root):
    _result, state_path, paths = _recorded(root, dict(unit="vllm", argv=ARGV))
    reverted = tuning_revert.run({"path": state_path, "areas": ["sysctl"]}, paths=paths)
    assert reverted["restart_units"] == [] and (root / DROPIN).exists()


def test_every_accepted_unit_name_can_be_recorded(root):
    """What the engine writes, the state layer must accept: a unit name the engine takes but
    managed_paths refuses would make the recorded module fail after validation passed."""
    for unit in ("vllm", "serve@gpu0", "llama.cpp", "a:b", "a_b-c"):
        result, state_path, _paths = _recorded(root, dict(unit=unit, argv=ARGV), run_id="r-" + unit)
        assert result["changed"] is True, unit
        assert store.load(state_path, str(root))["refused"] == {}
    with open(str(root / "var/lib/gpufleet-tuning/state.json")) as handle:
        assert len(json.load(handle)["items"]) == 5


@pytest.mark.parametrize("unit", ["serve\\x2dgpu0", ".service"])
def test_a_unit_name_the_engine_takes_is_one_the_record_takes(root, unit):
    before = snapshot(root)
    try:
        result, state_path, _paths = _recorded(root, dict(unit=unit, argv=ARGV))
    except ModuleFailure as exc:
        # refusing it is fine, but up front, naming the unit, as for any other bad name
        assert exc.message.startswith("unit=%r" % (unit,)), exc.message
        assert snapshot(root) == before
        return
    assert result["changed"] is True and store.load(state_path, str(root))["refused"] == {}
