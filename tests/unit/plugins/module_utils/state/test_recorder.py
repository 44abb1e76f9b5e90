"""recorder.run: a tuning module records its own before-state around its engine.

Proves, with the real sysctl_profile engine on a fake /proc/sys tree (and small hand-written
engines where a failure or a loop-shaped result is needed), that: without state_path the engine
runs once and nothing is written; with it the plan's before is in the state file before the
apply writes anything, the applied items get their after, a rerun writes nothing and the first
before wins; check mode writes nothing and says what it would record; a failed apply drops the
planned items again (only this call's) and re-raises with ``state_record``; a loop-shaped result
keeps the records of its items that did not fail; bad record options are refused before the
engine runs, and ``spec`` refuses an engine spec that already has the record's options.
"""

import base64
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import record as state_record
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree

PARAMS = {"name": "t", "settings": {"vm.swappiness": 10}}


@pytest.fixture
def node(tmp_path):
    """A fake node: swappiness 60, no sysctl.d file; returns (root, state file, state Paths)."""
    write_tree(tmp_path, {"proc/sys/vm/swappiness": "60\n", "proc/self/uid_map": "0 0 4294967295\n"})
    return tmp_path, str(tmp_path / "var/lib/gpufleet-tuning/state.json"), state_items.Paths(str(tmp_path))


def sysctl_engine(root, params=None):
    params = PARAMS if params is None else params
    return lambda check: sp.run(params, check, sp.Paths(str(root)))


def conf_key(root):
    return "file:%s" % (root / "etc/sysctl.d/90-gpufleet-t.conf")


def profile_state_key(root):
    return "file:%s" % (root / "var/lib/gpufleet-tuning/sysctl/t.json")


def saved(state_path):
    with open(state_path) as handle:
        return json.load(handle)


def raw(state_path):
    with open(state_path, "rb") as handle:
        return handle.read()


def option(state_path, run_id="r1"):
    return {"state_path": state_path, "run_id": run_id}


# --- (a) no state_path: the engine alone ---------------------------------------------------------

@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("record", [None, {"state_path": None, "run_id": "r1"}])
def test_without_state_path_the_engine_runs_once_and_nothing_is_recorded(node, check_mode, record):
    root, state_path, paths = node
    calls = []

    def engine(check):
        calls.append(check)
        return sysctl_engine(root)(check)

    result = recorder.run(engine, check_mode, record, paths)
    assert calls == [check_mode]
    assert "state_record" not in result
    assert result["changed"] is True
    assert not os.path.exists(state_path)
    assert (root / "proc/sys/vm/swappiness").read_text().strip() == ("60" if check_mode else "10")


# --- (b) the before is on the node before the apply writes anything ------------------------------

def test_the_before_is_recorded_before_the_apply_writes_anything(node):
    root, state_path, paths = node
    seen = {}

    def engine(check):
        if not check:
            # The apply: nothing of the engine written yet, the plan already on record.
            assert (root / "proc/sys/vm/swappiness").read_text() == "60\n"
            assert not (root / "etc/sysctl.d/90-gpufleet-t.conf").exists()
            seen["items"] = saved(state_path)["items"]
        return sysctl_engine(root)(check)

    result = recorder.run(engine, False, option(state_path), paths)
    items = seen["items"]
    assert set(items) == {"sysctl:vm.swappiness", conf_key(root), profile_state_key(root)}
    swap = items["sysctl:vm.swappiness"]
    assert (swap["before"], swap["applied"], swap["first_run"]) == ("60", False, "r1")
    assert items[conf_key(root)]["before"] is None and items[conf_key(root)]["applied"] is False
    assert result["state_record"]["dropped"] == []  # everything planned was applied


def test_an_existing_files_content_is_recorded_before_the_apply(node):
    """A file that existed is restorable only if its content was read before it was replaced."""
    root, state_path, paths = node
    target = root / "etc/sysctl.d/90-gpufleet-app.conf"
    write_tree(root, {"etc/sysctl.d/90-gpufleet-app.conf": "old = 1\n"})
    os.chmod(str(target), 0o640)

    def engine(check):
        rec = records.file_change("sysctl", str(target), b"old = 1\n", b"new = 2\n", 0o640, 0o640)
        if not check:
            fileops.write_atomic(str(target), b"new = 2\n", mode=0o640)
        return {"changed": True, "changes": [rec]}

    result = recorder.run(engine, False, option(state_path), paths)
    entry = saved(state_path)["items"]["file:%s" % target]
    assert entry["applied"] is True
    assert base64.b64decode(entry["before"]["content_b64"]) == b"old = 1\n"
    assert entry["before"]["mode"] == "0640"
    assert result["state_record"]["recorded"] == ["file:%s" % target]


# --- (c) after: applied, with the after; a rerun writes nothing -----------------------------------

def test_after_the_run_the_items_are_applied_with_their_after(node):
    root, state_path, paths = node
    result = recorder.run(sysctl_engine(root), False, option(state_path), paths)
    assert result["changed"] is True
    assert (root / "proc/sys/vm/swappiness").read_text().strip() == "10"
    items = saved(state_path)["items"]
    keys = {"sysctl:vm.swappiness", conf_key(root), profile_state_key(root)}
    assert set(items) == keys
    swap = items["sysctl:vm.swappiness"]
    assert (swap["before"], swap["after"], swap["applied"], swap["first_run"], swap["last_run"]) == (
        "60", "10", True, "r1", "r1")
    conf = items[conf_key(root)]
    assert conf["before"] is None and conf["applied"] is True
    written = (root / "etc/sysctl.d/90-gpufleet-t.conf").read_bytes()
    assert conf["after"]["sha256"] == records.file_state(written)["sha256"]
    state = result["state_record"]
    assert state["path"] == state_path and state["run_id"] == "r1" and state["written"] is True
    assert set(state["recorded"]) == keys
    assert oct(os.stat(state_path).st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("run_id", ["r1", "r2"])
def test_a_second_run_that_changes_nothing_writes_nothing(node, run_id):
    root, state_path, paths = node
    recorder.run(sysctl_engine(root), False, option(state_path), paths)
    before = raw(state_path)
    mtime = os.stat(state_path).st_mtime_ns
    again = recorder.run(sysctl_engine(root), False, option(state_path, run_id), paths)
    assert again["changed"] is False and again["changes"] == []
    assert again.get("state_record", {"written": False})["written"] is False
    assert raw(state_path) == before and os.stat(state_path).st_mtime_ns == mtime


def test_a_new_run_id_is_made_when_none_is_given(node):
    root, state_path, paths = node
    result = recorder.run(sysctl_engine(root), False, {"state_path": state_path, "run_id": None}, paths)
    run_id = result["state_record"]["run_id"]
    assert run_id and saved(state_path)["items"]["sysctl:vm.swappiness"]["first_run"] == run_id


# --- (d) the first before wins --------------------------------------------------------------------

def test_the_first_before_wins_over_a_later_run(node):
    root, state_path, paths = node
    recorder.run(sysctl_engine(root), False, option(state_path, "r1"), paths)
    (root / "proc/sys/vm/swappiness").write_text("30\n")
    result = recorder.run(sysctl_engine(root), False, option(state_path, "r2"), paths)
    assert result["changed"] is True and (root / "proc/sys/vm/swappiness").read_text().strip() == "10"
    swap = saved(state_path)["items"]["sysctl:vm.swappiness"]
    assert (swap["before"], swap["after"], swap["first_run"]) == ("60", "10", "r1")
    # what the second run found is kept as that run's own before
    assert swap["run_before"] == {"run": "r2", "value": "30"}


# --- (e) check mode -------------------------------------------------------------------------------

def test_check_mode_writes_nothing_and_says_what_would_be_recorded(node):
    root, state_path, paths = node
    untouched = snapshot(root)
    calls = []

    def engine(check):
        calls.append(check)
        return sysctl_engine(root)(check)

    result = recorder.run(engine, True, option(state_path), paths)
    assert calls == [True]  # the plan only
    assert snapshot(root) == untouched
    assert result["changed"] is True
    state = result["state_record"]
    assert state["path"] == state_path and state["run_id"] == "r1" and state["written"] is True
    assert set(state["recorded"]) == {"sysctl:vm.swappiness", conf_key(root), profile_state_key(root)}
    assert state["dropped"] == []


def test_check_mode_with_nothing_to_change_has_no_state_record(node):
    root, state_path, paths = node
    recorder.run(sysctl_engine(root), False, option(state_path), paths)
    untouched = snapshot(root)
    result = recorder.run(sysctl_engine(root), True, option(state_path, "r2"), paths)
    assert result["changed"] is False and "state_record" not in result
    assert snapshot(root) == untouched


# --- (f) a failed apply ---------------------------------------------------------------------------

def test_a_failed_apply_drops_the_planned_items_and_reraises_with_the_record(node, monkeypatch):
    root, state_path, paths = node
    real = fileops.write_atomic

    def no_space_in_sysctl_d(path, content, **kw):
        if "/etc/sysctl.d/" in path:
            raise OSError(28, "No space left on device", path)
        return real(path, content, **kw)

    monkeypatch.setattr(fileops, "write_atomic", no_space_in_sysctl_d)
    with pytest.raises(ModuleFailure) as exc:
        recorder.run(sysctl_engine(root), False, option(state_path), paths)
    assert "No space left on device" in exc.value.message
    # the engine restored what it had changed; the record keeps nothing of this call
    assert (root / "proc/sys/vm/swappiness").read_text().strip() == "60"
    assert saved(state_path)["items"] == {}
    state = exc.value.partial["state_record"]
    assert state["path"] == state_path and state["run_id"] == "r1" and state["written"] is True
    assert set(state["dropped"]) == {"sysctl:vm.swappiness", conf_key(root), profile_state_key(root)}
    assert "state_record_error" not in exc.value.partial


def test_a_failure_in_the_plan_records_nothing(node):
    root, state_path, paths = node
    calls = []

    def engine(check):
        calls.append(check)
        raise ModuleFailure("invalid settings, nothing was changed")

    with pytest.raises(ModuleFailure, match="invalid settings"):
        recorder.run(engine, False, option(state_path), paths)
    assert calls == [True] and not os.path.exists(state_path)


# --- (g) a loop-shaped result ---------------------------------------------------------------------

def _two_files(root):
    write_tree(root, {"var/lib/lxc/a/config": "lxc.a = old\n", "var/lib/lxc/b/config": "lxc.b = old\n"})
    a, b = str(root / "var/lib/lxc/a/config"), str(root / "var/lib/lxc/b/config")
    rec_a = records.file_change("lxc_memlock", a, b"lxc.a = old\n", b"lxc.a = new\n", 0o644, 0o644)
    rec_b = records.file_change("lxc_memlock", b, b"lxc.b = old\n", b"lxc.b = new\n", 0o644, 0o644)
    return a, b, rec_a, rec_b


@pytest.mark.parametrize("how", ["raised", "returned"])
def test_a_loop_result_keeps_the_records_of_its_items_that_did_not_fail(node, how):
    root, state_path, paths = node
    a, b, rec_a, rec_b = _two_files(root)
    for path in (a, b):
        os.chmod(path, 0o644)

    def engine(check):
        if check:
            return {"changed": True, "changes": [rec_a, rec_b],
                    "results": [{"item": "a", "changed": True, "changes": [rec_a]},
                                {"item": "b", "changed": True, "changes": [rec_b]}]}
        fileops.write_atomic(a, b"lxc.a = new\n", mode=0o644)
        results = [{"item": "a", "changed": True, "changes": [rec_a]},
                   {"item": "b", "failed": True, "changed": False, "changes": [], "msg": "b: locked"}]
        if how == "raised":
            raise ModuleFailure("1 of 2 container(s) failed: b: locked", {"results": results})
        # a result that reports a failed item without raising: its records are not claimed even
        # if it carried them
        results[1]["changes"] = [rec_b]
        return {"changed": True, "changes": [rec_a], "results": results}

    if how == "raised":
        with pytest.raises(ModuleFailure) as exc:
            recorder.run(engine, False, option(state_path), paths)
        state = exc.value.partial["state_record"]
    else:
        state = recorder.run(engine, False, option(state_path), paths)["state_record"]
    items = saved(state_path)["items"]
    entry = items["file:%s" % a]
    assert entry["applied"] is True and entry["last_run"] == "r1"
    assert entry["after"] == records.file_state(b"lxc.a = new\n", 0o644)
    assert "file:%s" % b not in items  # planned, not applied: dropped again
    assert "file:%s" % b in state["dropped"]


# --- (h) prune scope ------------------------------------------------------------------------------

def test_another_calls_planned_items_of_the_same_run_are_not_dropped(node):
    root, state_path, paths = node
    other = str(root / "etc/default/grub")
    write_tree(root, {"etc/default/grub": "x = 1\n"})
    rec = records.file_change("kernel_cmdline", other, b"x = 1\n", b"x = 2\n")
    # Another module of run r1 planned its change and has not applied it (yet, or at all).
    state_record.record(state_path, "r1", [rec], [], (), False, paths)
    assert saved(state_path)["items"]["file:%s" % other]["applied"] is False

    result = recorder.run(sysctl_engine(root), False, option(state_path, "r1"), paths)
    items = saved(state_path)["items"]
    assert "file:%s" % other in items and items["file:%s" % other]["applied"] is False
    assert base64.b64decode(items["file:%s" % other]["before"]["content_b64"]) == b"x = 1\n"
    assert "file:%s" % other not in result["state_record"]["dropped"]
    assert items["sysctl:vm.swappiness"]["applied"] is True


def test_a_failed_apply_drops_only_its_own_plan(node):
    """The after-record of a failure prunes only the keys this call planned."""
    root, state_path, paths = node
    other = str(root / "etc/default/grub")
    write_tree(root, {"etc/default/grub": "x = 1\n"})
    theirs = records.file_change("kernel_cmdline", other, b"x = 1\n", b"x = 2\n")
    mine = records.value("sysctl", "vm.swappiness", "60", "10")

    def engine(check):
        if check:
            # The other module's plan lands between this call's two records (as a rollout's
            # host role may run modules of one run around each other).
            return {"changed": True, "changes": [mine]}
        state_record.record(state_path, "r1", [theirs], [], (), False, paths)
        raise ModuleFailure("boom; everything applied before it was restored")

    with pytest.raises(ModuleFailure) as exc:
        recorder.run(engine, False, option(state_path, "r1"), paths)
    items = saved(state_path)["items"]
    assert "sysctl:vm.swappiness" not in items
    assert "file:%s" % other in items and items["file:%s" % other]["applied"] is False
    assert "file:%s" % other not in exc.value.partial["state_record"]["dropped"]


# --- (i) bad record options -----------------------------------------------------------------------

@pytest.mark.parametrize("record, named", [
    ({"run_id": "", "state_path": "ABS"}, "run_id=''"),
    ({"run_id": "   ", "state_path": "ABS"}, "run_id='   '"),
    ({"run_id": "r1", "state_path": "state.json"}, "'state.json'"),
    ({"run_id": "r1", "state_path": "var/lib/gpufleet-tuning/state.json"}, "'var/lib/gpufleet-tuning/state.json'"),
])
def test_bad_record_options_are_refused_before_the_engine_runs(node, record, named):
    root, state_path, paths = node
    if record["state_path"] == "ABS":
        record = dict(record, state_path=state_path)
    calls = []

    def engine(params, check):
        calls.append((params, check))
        return sp.run(params, check, sp.Paths(str(root)))

    untouched = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        recorder.run_module(dict(PARAMS, **record), False, engine, paths)
    assert named in exc.value.message
    assert calls == [] and snapshot(root) == untouched


def test_run_module_hands_the_engine_its_own_parameters(node):
    root, state_path, paths = node
    seen = []

    def engine(params, check):
        seen.append((dict(params), check))
        return sp.run(params, check, sp.Paths(str(root)))

    result = recorder.run_module(dict(PARAMS, state_path=state_path, run_id="r1"), False, engine, paths)
    assert seen == [(PARAMS, True), (PARAMS, False)]
    assert result["state_record"]["run_id"] == "r1"
    assert saved(state_path)["items"]["sysctl:vm.swappiness"]["applied"] is True


# --- (j) spec -------------------------------------------------------------------------------------

def test_spec_adds_the_record_options_and_refuses_an_engine_that_has_them():
    both = recorder.spec(sp.ARGUMENT_SPEC)
    assert set(both) == set(sp.ARGUMENT_SPEC) | {"state_path", "run_id"}
    assert both["state_path"] == {"type": "path"} and both["run_id"] == {"type": "str"}
    assert "state_path" not in sp.ARGUMENT_SPEC  # the engine's own spec is left as it was
    with pytest.raises(ValueError, match="state_path"):
        recorder.spec(dict(sp.ARGUMENT_SPEC, state_path=dict(type="path")))
    with pytest.raises(ValueError, match="run_id"):
        recorder.spec({"run_id": dict(type="str")})
