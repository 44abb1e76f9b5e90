"""The before-state record and the revert, driven by real engines on fake trees.

The chain a rollout runs on a node: the audit's check-mode plan -> tuning_state(planned) ->
the tuning -> tuning_state(applied) -> ... -> tuning_revert. Each test runs the real modules'
engines where they exist (sysctl_profile), so a change in their records that the state layer
cannot follow fails here.
"""

import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_state
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree


def _node(tmp_path):
    write_tree(tmp_path, {
        "proc/sys/vm/swappiness": "60\n",
        "proc/sys/kernel/numa_balancing": "1\n",
        "proc/self/uid_map": "0 0 4294967295\n",
        "sys/devices/system/cpu/cpu0/cpuidle/state3/disable": "0\n",
        "sys/devices/system/cpu/cpu1/cpuidle/state3/disable": "0\n",
        "sys/devices/system/cpu/cpufreq/policy0/scaling_governor": "powersave\n",
        "etc/pve/lxc/101.conf": "arch: amd64\nhostname: serve\nlxc.environment: HF_TOKEN=secret\n",
    })
    os.chmod(str(tmp_path / "etc/pve/lxc/101.conf"), 0o640)
    return state_items.Paths(str(tmp_path))


def _state_path(tmp_path):
    return str(tmp_path / "var/lib/gpufleet-tuning/state.json")


def _sysctl(tmp_path, check_mode):
    params = {"name": "t", "settings": {"vm.swappiness": 10, "kernel.numa_balancing": 0}}
    return sp.run(params, check_mode=check_mode, paths=sp.Paths(str(tmp_path)))


def _files_only(tree, tmp_path):
    state = os.path.relpath(_state_path(tmp_path), str(tmp_path))
    return {k: v for k, v in tree.items() if not str(v).startswith("<dir") and not k.startswith(state)}


def _tune(tmp_path, paths, run_id="run-1"):
    """Plan, record, apply, record: what the host role does."""
    plan = _sysctl(tmp_path, check_mode=True)["changes"]
    state = tuning_state.run({"path": _state_path(tmp_path), "run_id": run_id, "planned": plan}, paths=paths)
    applied = _sysctl(tmp_path, check_mode=False)["changes"]
    done = tuning_state.run({"path": _state_path(tmp_path), "run_id": run_id, "applied": applied}, paths=paths)
    return plan, state, applied, done


def test_plan_then_apply_records_first_before_and_after(tmp_path):
    paths = _node(tmp_path)
    plan, state, applied, done = _tune(tmp_path, paths)
    assert state["changed"] and "sysctl:vm.swappiness" in state["recorded"]
    saved = json.loads((tmp_path / "var/lib/gpufleet-tuning/state.json").read_text())
    swap = saved["items"]["sysctl:vm.swappiness"]
    assert (swap["before"], swap["after"], swap["applied"], swap["first_run"]) == ("60", "10", True, "run-1")
    conf = saved["items"]["file:%s" % (tmp_path / "etc/sysctl.d/90-gpufleet-t.conf")]
    assert conf["before"] is None and conf["applied"] and conf["after"]["sha256"]
    assert oct(os.stat(_state_path(tmp_path)).st_mode & 0o777) == "0o600"
    assert done["changed"] and set(done["updated"]) >= {"sysctl:vm.swappiness"}


def test_a_later_run_keeps_the_first_before(tmp_path):
    paths = _node(tmp_path)
    _tune(tmp_path, paths, "run-1")
    (tmp_path / "proc/sys/vm/swappiness").write_text("30\n")
    _tune(tmp_path, paths, "run-2")
    saved = json.loads((tmp_path / "var/lib/gpufleet-tuning/state.json").read_text())
    swap = saved["items"]["sysctl:vm.swappiness"]
    # run-2 found 30 (set by hand) and set 10 again: the first before stays, and undoing run-2
    # alone (a rollout's revert) puts back what it found.
    assert (swap["before"], swap["first_run"], swap["last_run"]) == ("60", "run-1", "run-2")
    assert store.run_target(swap, "run-2") == ("30", True)
    assert store.run_target(swap, "run-1") == ("60", True)


def test_second_record_of_the_same_run_changes_nothing(tmp_path):
    paths = _node(tmp_path)
    applied = _tune(tmp_path, paths)[2]
    again = tuning_state.run({"path": _state_path(tmp_path), "run_id": "run-1", "applied": applied}, paths=paths)
    assert again["changed"] is False and again["changes"] == []


def test_check_mode_records_nothing(tmp_path):
    paths = _node(tmp_path)
    plan = _sysctl(tmp_path, check_mode=True)["changes"]
    result = tuning_state.run({"path": _state_path(tmp_path), "planned": plan}, check_mode=True, paths=paths)
    assert result["changed"] and result["recorded"]
    assert not os.path.exists(_state_path(tmp_path))


def test_revert_puts_every_byte_back_and_a_second_revert_changes_nothing(tmp_path):
    paths = _node(tmp_path)
    untouched = _files_only(snapshot(tmp_path), tmp_path)
    _tune(tmp_path, paths)
    assert (tmp_path / "proc/sys/vm/swappiness").read_text().strip() == "10"
    check = tuning_revert.run({"path": _state_path(tmp_path)}, check_mode=True, paths=paths)
    assert check["changed"] and {r["target"] for r in check["restored"]} >= {"vm.swappiness", "kernel.numa_balancing"}
    assert (tmp_path / "proc/sys/vm/swappiness").read_text().strip() == "10"
    result = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert result["changed"] and not result["reboot_required"]
    assert _files_only(snapshot(tmp_path), tmp_path) == {
        k: (v if not k.startswith("proc/sys/") else v.replace(b"\n", b"") if isinstance(v, bytes) else v)
        for k, v in untouched.items()}
    again = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert again["changed"] is False and again["restored"] == []


def test_drift_names_the_setting_changed_by_hand(tmp_path):
    paths = _node(tmp_path)
    _tune(tmp_path, paths)
    clean = tuning_state.run({"path": _state_path(tmp_path), "mode": "drift"}, paths=paths)
    assert clean["drift"] == [] and clean["checked"] >= 3 and clean["changed"] is False
    (tmp_path / "proc/sys/vm/swappiness").write_text("60\n")
    found = tuning_state.run({"path": _state_path(tmp_path), "mode": "drift"}, paths=paths)
    assert [(d["target"], d["recorded"], d["current"]) for d in found["drift"]] == [("vm.swappiness", "10", "60")]


def test_file_content_planned_first_is_restored_exactly_even_on_a_no_chmod_path(tmp_path, monkeypatch):
    paths = _node(tmp_path)
    conf = str(tmp_path / "etc/pve/lxc/101.conf")
    original = open(conf, "rb").read()
    new = original + b"lxc.prlimit.memlock: unlimited\n"
    record = records.file_change("lxc_memlock", conf, original, new, 0o640, 0o640)
    tuning_state.run({"path": _state_path(tmp_path), "planned": [record]}, paths=paths)
    with open(conf, "wb") as handle:
        handle.write(new)
    tuning_state.run({"path": _state_path(tmp_path), "applied": [record]}, paths=paths)
    saved = open(_state_path(tmp_path)).read()
    assert "HF_TOKEN" not in json.dumps(tuning_state.run({"path": _state_path(tmp_path), "mode": "drift"},
                                                         paths=paths))
    assert "secret" not in saved  # the content is kept, but base64, and the file is 0600
    monkeypatch.setattr(state_items, "PMXCFS", str(tmp_path / "etc/pve") + "/")
    calls = []
    monkeypatch.setattr(os, "chmod", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(os, "fchmod", lambda *a, **k: calls.append(a))
    result = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert result["changed"] and open(conf, "rb").read() == original
    assert [call[1] for call in calls] == [store.MODE]  # only the state file's own write


def test_a_file_changed_without_a_plan_is_reported_not_restorable(tmp_path):
    paths = _node(tmp_path)
    conf = str(tmp_path / "etc/pve/lxc/101.conf")
    original = open(conf, "rb").read()
    record = records.file_change("lxc_memlock", conf, original, original + b"lxc.x: 1\n", 0o640, 0o640)
    with open(conf, "ab") as handle:
        handle.write(b"lxc.x: 1\n")
    result = tuning_state.run({"path": _state_path(tmp_path), "applied": [record]}, paths=paths)
    assert result["not_restorable"] == ["file:" + conf] and result["warnings"]
    revert = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert [i["target"] for i in revert["not_restorable"]] == [conf] and open(conf, "rb").read().endswith(b"lxc.x: 1\n")


def test_cpu_power_records_become_one_item_per_cpu_and_policy(tmp_path):
    paths = _node(tmp_path)
    recs = [records.value("cpu_power", "cpu0-1/state3 (C6) disable", "0", "1"),
            records.value("cpu_power", "policy0/scaling_governor", "powersave", "performance")]
    tuning_state.run({"path": _state_path(tmp_path), "planned": recs}, paths=paths)
    for cpu in (0, 1):
        (tmp_path / ("sys/devices/system/cpu/cpu%d/cpuidle/state3/disable" % cpu)).write_text("1\n")
    (tmp_path / "sys/devices/system/cpu/cpufreq/policy0/scaling_governor").write_text("performance\n")
    tuning_state.run({"path": _state_path(tmp_path), "applied": recs}, paths=paths)
    result = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert len(result["restored"]) == 3
    assert (tmp_path / "sys/devices/system/cpu/cpu1/cpuidle/state3/disable").read_text() == "0"
    assert (tmp_path / "sys/devices/system/cpu/cpufreq/policy0/scaling_governor").read_text() == "powersave"


def test_a_failed_restore_puts_back_what_the_revert_had_done(tmp_path):
    paths = _node(tmp_path)
    _tune(tmp_path, paths)
    swap = tmp_path / "proc/sys/vm/swappiness"
    numa = tmp_path / "proc/sys/kernel/numa_balancing"
    os.remove(str(numa))
    os.mkdir(str(numa))  # the write of the second sysctl fails: EISDIR
    before = _files_only(snapshot(tmp_path), tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert "kernel.numa_balancing" in exc.value.message
    assert swap.read_text().strip() == "10"
    assert _files_only(snapshot(tmp_path), tmp_path) == before


def test_reboot_items_are_reported_pending_and_can_be_left_out(tmp_path):
    paths = _node(tmp_path)
    grub = str(tmp_path / "etc/default/grub")
    write_tree(tmp_path, {"etc/default/grub": 'GRUB_CMDLINE_LINUX=""\n'})
    record = records.file_change("kernel_cmdline", grub, 'GRUB_CMDLINE_LINUX=""\n', 'GRUB_CMDLINE_LINUX="iommu=pt"\n',
                                 0o644, 0o644)
    tuning_state.run({"path": _state_path(tmp_path), "planned": [record]}, paths=paths)
    write_tree(tmp_path, {"etc/default/grub": 'GRUB_CMDLINE_LINUX="iommu=pt"\n'})
    tuning_state.run({"path": _state_path(tmp_path), "applied": [record]}, paths=paths)
    skip = tuning_revert.run({"path": _state_path(tmp_path), "reboot_required": False}, paths=paths)
    assert skip["restored"] == [] and skip["changed"] is False
    done = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert done["pending_reboot"] == [grub] and done["reboot_required"] is True
    assert open(grub).read() == 'GRUB_CMDLINE_LINUX=""\n'


@pytest.mark.parametrize("params, words", [
    ({"planned": [{"area": "sysctl"}]}, "planned[0] is not a change record"),
    ({"mode": "drift", "applied": [records.value("sysctl", "vm.swappiness", "1", "2")]}, "mode=drift only reads"),
    ({"path": "relative/state.json"}, "path='relative/state.json'"),
    ({"run_id": " "}, "run_id=' '"),
])
def test_bad_input_is_named_and_nothing_is_written(tmp_path, params, words):
    paths = _node(tmp_path)
    before = snapshot(tmp_path)
    params = dict({"path": _state_path(tmp_path)}, **params)
    with pytest.raises(ModuleFailure) as exc:
        tuning_state.run(params, paths=paths)
    assert words in exc.value.message
    assert snapshot(tmp_path) == before


def test_unknown_record_shape_and_corrupt_state_are_refused(tmp_path):
    paths = _node(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        tuning_state.run({"path": _state_path(tmp_path),
                          "planned": [records.value("cpu_power", "mystery", "0", "1")]}, paths=paths)
    assert "'mystery'" in exc.value.message
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/state.json": "{not json"})
    with pytest.raises(ModuleFailure) as exc:
        tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert "not valid JSON" in exc.value.message
    with pytest.raises(ModuleFailure) as exc:
        tuning_revert.run({"path": _state_path(tmp_path), "areas": ["sysctl", "gpu"]}, paths=paths)
    assert "'gpu'" in exc.value.message


def test_module_records_and_unloads_with_modprobe(tmp_path):
    class Tools:
        def __init__(self):
            self.ran = []

        def which(self, name):
            return "/sbin/" + name if name == "modprobe" else None

        def run(self, argv):
            self.ran.append(argv)
            (tmp_path / "proc/modules").write_text("")
            from ansible_collections.gpufleet.tuning.plugins.module_utils.common.commands import CommandResult
            return CommandResult(argv, 0, "", "")

    paths = _node(tmp_path)
    write_tree(tmp_path, {"proc/modules": ""})
    record = records.module_change("peermem", "nvidia_peermem", False, True)
    tuning_state.run({"path": _state_path(tmp_path), "planned": [record]}, paths=paths)
    write_tree(tmp_path, {"proc/modules": "nvidia_peermem 16384 0 - Live 0x0\n"})
    tuning_state.run({"path": _state_path(tmp_path), "applied": [record]}, paths=paths)
    tools = Tools()
    result = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths, tools=tools)
    assert tools.ran == [["/sbin/modprobe", "-r", "nvidia_peermem"]]
    assert result["changes"] == [records.record("peermem", "module", "nvidia_peermem", "loaded", "not loaded")]
    assert store.load(_state_path(tmp_path))["items"] == {}


def test_prune_drops_what_the_run_planned_and_did_not_apply(tmp_path):
    paths = _node(tmp_path)
    grub = str(tmp_path / "etc/default/grub")
    write_tree(tmp_path, {"etc/default/grub": "GRUB_CMDLINE_LINUX=\"\"\n"})
    planned = _sysctl(tmp_path, check_mode=True)["changes"] + [
        records.file_change("kernel_cmdline", grub, "a", "b", 0o644, 0o644)]
    tuning_state.run({"path": _state_path(tmp_path), "run_id": "r", "planned": planned}, paths=paths)
    applied = _sysctl(tmp_path, check_mode=False)["changes"]
    result = tuning_state.run({"path": _state_path(tmp_path), "run_id": "r", "applied": applied, "prune": True},
                              paths=paths)
    assert result["dropped"] == ["file:" + grub]
    assert "file:" + grub not in store.load(_state_path(tmp_path))["items"]
    with pytest.raises(ModuleFailure) as exc:
        tuning_state.run({"path": _state_path(tmp_path), "prune": True}, paths=paths)
    assert "run_id" in exc.value.message


def test_only_run_undoes_one_run_and_keeps_what_earlier_runs_tuned(tmp_path):
    paths = _node(tmp_path)
    _tune(tmp_path, paths, "run-1")  # vm.swappiness 60 -> 10, numa 1 -> 0
    params = {"name": "t", "settings": {"vm.swappiness": 5, "kernel.numa_balancing": 0}}
    conf = tmp_path / "etc/sysctl.d/90-gpufleet-t.conf"
    conf_run1 = conf.read_bytes()
    plan = sp.run(params, check_mode=True, paths=sp.Paths(str(tmp_path)))["changes"]
    tuning_state.run({"path": _state_path(tmp_path), "run_id": "run-2", "planned": plan}, paths=paths)
    applied = sp.run(params, paths=sp.Paths(str(tmp_path)))["changes"]
    tuning_state.run({"path": _state_path(tmp_path), "run_id": "run-2", "applied": applied, "prune": True},
                     paths=paths)
    assert (tmp_path / "proc/sys/vm/swappiness").read_text().strip() == "5"
    result = tuning_revert.run({"path": _state_path(tmp_path), "only_run": "run-2"}, paths=paths)
    assert {r["target"]: r["before"] for r in result["restored"] if r["kind"] == "sysctl"} == {"vm.swappiness": "10"}
    assert (tmp_path / "proc/sys/vm/swappiness").read_text().strip() == "10"
    assert conf.read_bytes() == conf_run1  # the profile file as run-1 left it, planned by run-2
    assert tuning_state.run({"path": _state_path(tmp_path), "mode": "drift"}, paths=paths)["drift"] == []
    assert tuning_revert.run({"path": _state_path(tmp_path), "only_run": "run-2"}, paths=paths)["changed"] is False
    full = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths)
    assert {r["target"]: r["before"] for r in full["restored"] if r["kind"] == "sysctl"} == {
        "vm.swappiness": "60", "kernel.numa_balancing": "1"}
    assert not conf.exists()


def test_a_rerun_that_changes_nothing_leaves_the_record_as_it_is(tmp_path):
    paths = _node(tmp_path)
    _tune(tmp_path, paths, "run-1")
    record = open(_state_path(tmp_path), "rb").read()
    plan, state, applied, done = _tune(tmp_path, paths, "run-2")
    assert plan == [] or not state["changed"]
    assert applied == [] and not done["changed"]
    conf = tmp_path / "etc/sysctl.d/90-gpufleet-t.conf"
    planned = [records.file_change("sysctl", str(conf), conf.read_bytes(), b"x", 0o644, 0o644)]
    again = tuning_state.run({"path": _state_path(tmp_path), "run_id": "run-3", "planned": planned}, paths=paths)
    assert again["changed"] is False and open(_state_path(tmp_path), "rb").read() == record


@pytest.mark.parametrize("booted", [True, False])
def test_systemd_reads_restored_defaults_only_where_it_is_the_init(tmp_path, booted):
    """A restored systemd manager default is re-read (daemon-reexec) where systemd is the init;
    where it is not (a container or chroot without /run/systemd/system) systemctl would fail
    ("not booted with systemd") and with it the whole revert, so it is not run."""
    class Tools:
        def __init__(self):
            self.ran = []

        def which(self, name):
            return "/bin/" + name if name == "systemctl" else None

        def run(self, argv):
            self.ran.append(argv)
            from ansible_collections.gpufleet.tuning.plugins.module_utils.common.commands import CommandResult
            return CommandResult(argv, 0, "", "")

    paths = _node(tmp_path)
    if booted:
        os.makedirs(str(tmp_path / "run/systemd/system"))
    conf = str(tmp_path / "etc/systemd/system.conf.d/90-gpufleet-memlock.conf")
    record = records.file_change("container_memlock", conf, None, b"[Manager]\nDefaultLimitMEMLOCK=infinity\n", None,
                                 0o644)
    tuning_state.run({"path": _state_path(tmp_path), "planned": [record]}, paths=paths)
    write_tree(tmp_path, {"etc/systemd/system.conf.d/90-gpufleet-memlock.conf": "[Manager]\nDefaultLimitMEMLOCK=infinity\n"})
    tuning_state.run({"path": _state_path(tmp_path), "applied": [record]}, paths=paths)
    tools = Tools()
    result = tuning_revert.run({"path": _state_path(tmp_path)}, paths=paths, tools=tools)
    assert result["changed"] and not os.path.exists(conf)
    assert tools.ran == ([["/bin/systemctl", "daemon-reexec"]] if booted else [])
