"""The cpu_power engine against fake /sys/devices/system/cpu trees and a fake systemd dir."""

import errno
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power as cp
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import cpu_power_boot
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import cpu_sysfs
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot, write_tree

# A server part with intel_idle: latencies as on Ice Lake-SP (C6 170 us).
INTEL_STATES = (("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "MWAIT 0x00", 1, 1),
                ("C1E", "MWAIT 0x01", 4, 4), ("C6", "MWAIT 0x20", 170, 600))
EPP_CHOICES = "default performance balance_performance balance_power power"


def cpu_tree(root, cpus=4, offline=(), states=INTEL_STATES, idle_driver="intel_idle", policies="per-cpu",
             governor="powersave", governors="performance powersave", epp="balance_performance",
             driver="intel_pstate", disabled=()):
    """Build a fake /sys/devices/system/cpu under ``root``; return that directory.

    ``policies``: "per-cpu" (intel_pstate, acpi-cpufreq), None (no cpufreq driver).
    ``disabled``: (cpu, state index) pairs whose disable file starts at 1.
    """
    base = root / "sys/devices/system/cpu"
    online = [n for n in range(cpus) if n not in offline]
    files = {"online": cpu_sysfs.format_cpu_list(online) + "\n",
             "possible": "0-%d\n" % (cpus - 1),
             "cpuidle/current_driver": "%s\n" % (idle_driver or "none"),
             "cpuidle/current_governor_ro": "menu\n",
             "cpufreq": None}
    for n in range(cpus):
        files["cpu%d/topology/core_id" % n] = "%d\n" % n
        if n:
            files["cpu%d/online" % n] = "0\n" if n in offline else "1\n"
        for index, (name, desc, latency, residency) in enumerate(states if idle_driver else []):
            sdir = "cpu%d/cpuidle/state%d/" % (n, index)
            files[sdir + "name"] = name + "\n"
            files[sdir + "desc"] = desc + "\n"
            files[sdir + "latency"] = "%d\n" % latency
            files[sdir + "residency"] = "%d\n" % residency
            files[sdir + "disable"] = "1\n" if (n, index) in disabled else "0\n"
            files[sdir + "usage"] = "100\n"
        if policies == "per-cpu":
            pdir = "cpufreq/policy%d/" % n
            files[pdir + "related_cpus"] = "%d\n" % n
            files[pdir + "affected_cpus"] = "\n" if n in offline else "%d\n" % n
            if n not in offline:
                files[pdir + "scaling_driver"] = driver + "\n"
                files[pdir + "scaling_governor"] = governor + "\n"
                files[pdir + "scaling_available_governors"] = governors + "\n"
                if epp is not None:
                    files[pdir + "energy_performance_preference"] = epp + "\n"
                    files[pdir + "energy_performance_available_preferences"] = EPP_CHOICES + " \n"
    write_tree(base, files)
    return base


def make_paths(tmp_path):
    write_tree(tmp_path, {"proc/self/uid_map": "         0          0 4294967295\n", "etc/systemd/system": None})
    return cp.Paths(str(tmp_path))


def params(**kw):
    base = dict(max_idle_latency_us=10, enable_within_bound=False, governor="performance",
                energy_performance_preference="performance", persist=True)
    base.update(kw)
    return base


def disable(base, cpu, index):
    return read(base / ("cpu%d/cpuidle/state%d/disable" % (cpu, index))).strip()


def disable_matrix(base, cpus=4, nstates=4):
    return [[disable(base, c, i) for i in range(nstates)] for c in range(cpus)]


def policy_attr(base, n, name):
    return read(base / ("cpufreq/policy%d/%s" % (n, name))).strip()


@pytest.fixture(autouse=True)
def every_run_keeps_the_record_contract(monkeypatch):
    """changed is true iff ``changes`` holds a record, on every path below; failures carry none."""
    contract.checking_records(monkeypatch, cp)


@pytest.fixture
def host(tmp_path):
    base = cpu_tree(tmp_path)
    return tmp_path, base, make_paths(tmp_path)


def test_apply_disables_deep_states_sets_governor_and_epp_and_persists(host):
    tmp_path, base, paths = host
    result = cp.run(params(), paths=paths)
    assert result["changed"] is True
    # C6 (170 us) disabled on every CPU; POLL, C1, C1E (<= 10 us) kept
    assert disable_matrix(base) == [["0", "0", "0", "1"]] * 4
    for n in range(4):
        assert policy_attr(base, n, "scaling_governor") == "performance"
        assert policy_attr(base, n, "energy_performance_preference") == "performance"
    assert result["states"] == [
        {"state": "state0", "name": "POLL", "desc": "CPUIDLE CORE POLL IDLE", "latency_us": 0, "residency_us": 0,
         "action": "keep", "cpus": "0-3", "disabled_before": "none", "disabled_after": "none",
         "enabled_count": 4, "disabled_count": 0},
        {"state": "state1", "name": "C1", "desc": "MWAIT 0x00", "latency_us": 1, "residency_us": 1,
         "action": "keep", "cpus": "0-3", "disabled_before": "none", "disabled_after": "none",
         "enabled_count": 4, "disabled_count": 0},
        {"state": "state2", "name": "C1E", "desc": "MWAIT 0x01", "latency_us": 4, "residency_us": 4,
         "action": "keep", "cpus": "0-3", "disabled_before": "none", "disabled_after": "none",
         "enabled_count": 4, "disabled_count": 0},
        {"state": "state3", "name": "C6", "desc": "MWAIT 0x20", "latency_us": 170, "residency_us": 600,
         "action": "disable", "cpus": "0-3", "disabled_before": "none", "disabled_after": "0-3",
         "enabled_count": 0, "disabled_count": 4},
    ]
    assert result["governor_before"] == {"powersave": "0-3"}
    assert result["governor_after"] == {"performance": "0-3"}
    assert result["epp_before"] == {"balance_performance": "0-3"}
    assert result["epp_after"] == {"performance": "0-3"}
    assert result["policies"][0] == {
        "policy": "policy0", "active": True, "cpus": "0", "driver": "intel_pstate",
        "governor_before": "powersave", "governor_after": "performance",
        "available_governors": ["performance", "powersave"], "epp_before": "balance_performance",
        "epp_after": "performance", "available_epp": EPP_CHOICES.split()}
    assert result["idle_driver"] == "intel_idle" and result["idle_governor"] == "menu"
    assert result["online_cpus"] == "0-3" and result["offline_cpus"] == "none"
    assert result["not_applicable"] == {} and result["skipped_keys"] == {}
    assert result["persisted"] is True and result["reboot_required"] is False
    assert "skipped" not in result
    # the boot unit, its enable link and the script
    unit = tmp_path / "etc/systemd/system/gpufleet-cpu-power.service"
    assert read(unit) == cpu_power_boot.render_unit(paths.script_path)
    assert "ExecStart=%s\n" % paths.script_path in read(unit)
    assert "Type=oneshot\n" in read(unit) and "WantedBy=multi-user.target\n" in read(unit)
    link = tmp_path / "etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service"
    assert os.readlink(str(link)) == "../gpufleet-cpu-power.service"
    script = read(paths.script_path)
    assert script == cpu_power_boot.render_script(10, False, "performance", "performance")
    assert script.splitlines()[6:10] == ["max_idle_latency_us='10'", "enable_within_bound='0'",
                                         "governor='performance'", "epp='performance'"]
    assert os.stat(paths.script_path).st_mode & 0o777 == 0o755
    assert result["unit_path"] == str(unit) and result["script_path"] == paths.script_path


def test_diff_names_states_and_cpus(host):
    _tmp_path, _base, paths = host
    result = cp.run(params(), paths=paths)
    idle, gov, epp = result["diff"][:3]
    assert idle["before_header"] == "CPU idle states (before)"
    assert idle["before"] == ("state0 (POLL, 0us) disabled on CPUs = none\n"
                              "state1 (C1, 1us) disabled on CPUs = none\n"
                              "state2 (C1E, 4us) disabled on CPUs = none\n"
                              "state3 (C6, 170us) disabled on CPUs = none\n")
    assert idle["after"].splitlines()[3] == "state3 (C6, 170us) disabled on CPUs = 0-3"
    assert gov["before"] == "scaling_governor of CPUs 0-3 = powersave\n"
    assert gov["after"] == "scaling_governor of CPUs 0-3 = performance\n"
    assert epp["before"] == "energy_performance_preference of CPUs 0-3 = balance_performance\n"
    assert epp["after"] == "energy_performance_preference of CPUs 0-3 = performance\n"
    files = [d["after_header"] for d in result["diff"][3:]]
    assert files == [paths.script_path, os.path.join(paths.systemd_dir, "gpufleet-cpu-power.service"),
                     os.path.join(paths.systemd_dir, "multi-user.target.wants/gpufleet-cpu-power.service")]


def test_second_run_is_unchanged_and_writes_nothing(host):
    tmp_path, _base, paths = host
    cp.run(params(), paths=paths)
    before = snapshot(tmp_path)
    mtime = os.stat(paths.script_path).st_mtime_ns
    result = cp.run(params(), paths=paths)
    assert result["changed"] is False
    assert snapshot(tmp_path) == before
    assert os.stat(paths.script_path).st_mtime_ns == mtime
    assert [r["disabled_before"] for r in result["states"]] == ["none", "none", "none", "0-3"]
    assert result["governor_before"] == result["governor_after"] == {"performance": "0-3"}
    assert [d for d in result["diff"] if d["before"] != d["after"]] == []


def test_check_mode_writes_nothing_and_reports_the_plan(host):
    tmp_path, _base, paths = host
    before = snapshot(tmp_path)
    result = cp.run(params(), check_mode=True, paths=paths)
    assert snapshot(tmp_path) == before
    assert result["changed"] is True
    assert result["states"][3]["disabled_after"] == "0-3" and result["states"][3]["disabled_before"] == "none"
    assert result["governor_after"] == {"performance": "0-3"}
    assert result["epp_after"] == {"performance": "0-3"}
    assert result["persisted"] is True
    unit_diff = [d for d in result["diff"] if d["after_header"].endswith(".service")][0]
    assert unit_diff["before"] == "" and "ExecStart=" in unit_diff["after"]


def test_offline_cpus_are_left_alone_and_reported(tmp_path):
    base = cpu_tree(tmp_path, cpus=4, offline=(2, 3))
    paths = make_paths(tmp_path)
    result = cp.run(params(), paths=paths)
    assert disable_matrix(base) == [["0", "0", "0", "1"], ["0", "0", "0", "1"],
                                    ["0", "0", "0", "0"], ["0", "0", "0", "0"]]
    assert policy_attr(base, 0, "scaling_governor") == "performance"
    assert not (base / "cpufreq/policy2/scaling_governor").exists()
    assert result["online_cpus"] == "0-1" and result["offline_cpus"] == "2-3"
    assert result["states"][3]["cpus"] == "0-1" and result["states"][3]["disabled_count"] == 2
    assert "boot unit covers them" in result["skipped_keys"]["offline CPUs 2-3"]
    assert "inactive" in result["skipped_keys"]["cpufreq policy2, policy3"]
    assert [(p["policy"], p["active"], p["cpus"]) for p in result["policies"]] == [
        ("policy0", True, "0"), ("policy1", True, "1"), ("policy2", False, "2"), ("policy3", False, "3")]
    assert result["governor_after"] == {"performance": "0-1"}
    assert cp.run(params(), paths=paths)["changed"] is False


def test_missing_cpufreq_is_reported_and_idle_states_still_applied(tmp_path):
    base = cpu_tree(tmp_path, policies=None)
    paths = make_paths(tmp_path)
    result = cp.run(params(), paths=paths)
    assert result["changed"] is True
    assert disable_matrix(base)[0] == ["0", "0", "0", "1"]
    assert "no cpufreq policies" in result["not_applicable"]["governor"]
    assert "no cpufreq policies" in result["skipped_keys"]["energy_performance_preference"]
    assert result["governor_before"] == {} and result["policies"] == []
    assert len([d for d in result["diff"] if d["before_header"].startswith("cpufreq")]) == 0
    assert "skipped" not in result
    assert result["persisted"] is True


def test_no_cpuidle_and_no_cpufreq_is_a_clean_skip(tmp_path):
    # this dev machine, VMs, the GPU machines: current_driver none, no state dirs, no policies
    cpu_tree(tmp_path, idle_driver=None, policies=None)
    paths = make_paths(tmp_path)
    before = snapshot(tmp_path)
    result = cp.run(params(), paths=paths)
    assert result["changed"] is False and result["skipped"] is True
    assert snapshot(tmp_path) == before  # no boot unit either
    assert result["persisted"] is False
    assert result["idle_driver"] == "none"
    assert "cpuidle driver: none" in result["not_applicable"]["idle_states"]
    assert sorted(result["skipped_keys"]) == ["energy_performance_preference", "governor", "idle_states"]
    assert result["msg"].startswith("nothing to do on this machine: idle_states: no CPU idle states")
    assert result["diff"] == []


def test_nothing_requested_reads_and_reports_only(host):
    tmp_path, _base, paths = host
    before = snapshot(tmp_path)
    result = cp.run(params(max_idle_latency_us=None, governor=None, energy_performance_preference=None),
                    paths=paths)
    assert snapshot(tmp_path) == before
    assert result["changed"] is False and result["skipped"] is True
    assert [r["action"] for r in result["states"]] == ["unmanaged"] * 4
    assert result["governor_before"] == {"powersave": "0-3"}
    assert result["skipped_keys"] == {}
    assert result["not_applicable"]["idle_states"] == "not requested (max_idle_latency_us is null)"


def test_governor_not_offered_is_refused_with_the_list(host):
    tmp_path, _base, paths = host
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(governor="ondemand"), paths=paths)
    msg = exc.value.message
    assert "governor 'ondemand' is not offered by policy0 (CPUs 0, driver intel_pstate): available " \
           "performance, powersave" in msg
    assert "policy3" in msg and "nothing was changed" in msg
    assert snapshot(tmp_path) == before


def test_governor_missing_on_one_policy_only(tmp_path):
    base = cpu_tree(tmp_path)
    write_tree(base, {"cpufreq/policy2/scaling_available_governors": "powersave\n"})
    paths = make_paths(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "policy2 (CPUs 2, driver intel_pstate): available powersave" in exc.value.message
    assert "policy0" not in exc.value.message
    assert disable_matrix(base)[0] == ["0", "0", "0", "0"]


def test_epp_not_offered_is_refused_with_the_list(host):
    tmp_path, _base, paths = host
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(governor="powersave", energy_performance_preference="turbo"), paths=paths)
    assert "energy_performance_preference 'turbo' is not offered by policy0" in exc.value.message
    assert "available default, performance, balance_performance, balance_power, power" in exc.value.message
    assert snapshot(tmp_path) == before


def test_epp_pinned_by_the_performance_governor_is_refused(host):
    tmp_path, _base, paths = host
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(energy_performance_preference="balance_performance"), paths=paths)
    assert "hold EPP at performance" in exc.value.message and "nothing was changed" in exc.value.message
    assert snapshot(tmp_path) == before
    # with powersave the same preference is fine
    result = cp.run(params(governor="powersave", energy_performance_preference="balance_power"), paths=paths)
    assert result["epp_after"] == {"balance_power": "0-3"}


def test_driver_without_epp_reports_it(tmp_path):
    base = cpu_tree(tmp_path, driver="acpi-cpufreq", epp=None,
                    governors="conservative ondemand userspace powersave performance schedutil")
    paths = make_paths(tmp_path)
    result = cp.run(params(), paths=paths)
    assert policy_attr(base, 1, "scaling_governor") == "performance"
    assert "acpi-cpufreq" in result["not_applicable"]["energy_performance_preference"]
    assert result["epp_before"] == {} and result["epp_after"] == {}


class KernelStub:
    """Stands in for sysfs attributes that do not behave like plain files."""

    def __init__(self, monkeypatch, ignore=(), fail=(), pin_epp=False):
        self.real = cpu_sysfs.write_attr
        self.ignore = ignore   # path suffixes whose writes do not stick
        self.fail = fail       # path suffixes whose writes raise EBUSY
        self.pin_epp = pin_epp
        self.writes = []
        monkeypatch.setattr(cpu_sysfs, "write_attr", self)

    def __call__(self, path, value):
        self.writes.append((path, str(value)))
        if any(path.endswith(s) for s in self.fail):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        if any(path.endswith(s) for s in self.ignore):
            return None
        self.real(path, value)
        if self.pin_epp and path.endswith("scaling_governor") and str(value) == "performance":
            # intel_pstate: the performance governor forces EPP to performance
            self.real(os.path.join(os.path.dirname(path), "energy_performance_preference"), "performance")
        return None


def test_a_disable_write_that_does_not_stick_restores_everything(host, monkeypatch):
    tmp_path, base, paths = host
    before = snapshot(tmp_path)
    KernelStub(monkeypatch, ignore=("cpu2/cpuidle/state3/disable",))
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    msg = exc.value.message
    assert "cpu2/cpuidle/state3/disable did not take 1: it reads '0' after the write" in msg
    assert "everything applied before it was restored" in msg
    assert snapshot(tmp_path) == before
    assert disable_matrix(base) == [["0"] * 4] * 4


def test_a_governor_write_that_does_not_stick_restores_the_states(host, monkeypatch):
    tmp_path, base, paths = host
    before = snapshot(tmp_path)
    stub = KernelStub(monkeypatch, ignore=("policy3/scaling_governor",))
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "policy3/scaling_governor did not take performance: it reads 'powersave'" in exc.value.message
    assert snapshot(tmp_path) == before
    # the C6 flags were set and then put back, and policies 0-2 went back to powersave
    assert (str(base / "cpu0/cpuidle/state3/disable"), "0") in stub.writes
    assert (str(base / "cpufreq/policy0/scaling_governor"), "powersave") in stub.writes


def test_a_refused_epp_write_restores_governor_then_epp(host, monkeypatch):
    tmp_path, base, paths = host
    before = snapshot(tmp_path)
    stub = KernelStub(monkeypatch, fail=("policy1/energy_performance_preference",))
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(governor=None), paths=paths)
    assert "cannot write performance to" in exc.value.message and "EBUSY 16" in exc.value.message
    assert snapshot(tmp_path) == before
    undo = [w for w in stub.writes if w[0].endswith("policy0/energy_performance_preference")]
    assert undo[-1][1] == "balance_performance"


def test_a_failing_unit_file_write_restores_runtime_values(host, monkeypatch):
    tmp_path, _base, paths = host
    before = snapshot(tmp_path)
    from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
    real = fileops.write_atomic

    def failing(path, content, **kw):
        if path.endswith(".service"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real(path, content, **kw)
    monkeypatch.setattr(fileops, "write_atomic", failing)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "ENOSPC" in exc.value.message
    assert snapshot(tmp_path) == before


def test_epp_moved_by_the_governor_is_not_written_again(host, monkeypatch):
    _tmp_path, base, paths = host
    stub = KernelStub(monkeypatch, pin_epp=True)
    result = cp.run(params(), paths=paths)
    assert policy_attr(base, 0, "energy_performance_preference") == "performance"
    # the governor switch already moved EPP (the stub's pinning): the module wrote none itself
    assert [w for w in stub.writes if w[0].endswith("energy_performance_preference")] == []
    assert len([w for w in stub.writes if w[0].endswith("scaling_governor")]) == 4
    assert result["epp_after"] == {"performance": "0-3"}


def test_governor_only_reports_an_epp_moved_by_the_kernel(host, monkeypatch):
    _tmp_path, _base, paths = host
    KernelStub(monkeypatch, pin_epp=True)
    result = cp.run(params(energy_performance_preference=None), paths=paths)
    assert result["epp_before"] == {"balance_performance": "0-3"}
    assert result["epp_after"] == {"performance": "0-3"}
    epp_diff = [d for d in result["diff"] if d["before_header"].startswith("cpufreq energy")][0]
    assert epp_diff["after"] == "energy_performance_preference of CPUs 0-3 = performance\n"


def test_shallow_states_disabled_by_someone_else_are_kept_by_default(tmp_path):
    base = cpu_tree(tmp_path, disabled=[(0, 2), (1, 2)])
    paths = make_paths(tmp_path)
    result = cp.run(params(), paths=paths)
    assert disable_matrix(base) == [["0", "0", "1", "1"], ["0", "0", "1", "1"],
                                    ["0", "0", "0", "1"], ["0", "0", "0", "1"]]
    c1e = result["states"][2]
    assert (c1e["action"], c1e["disabled_before"], c1e["disabled_after"]) == ("keep", "0-1", "0-1")
    assert (c1e["enabled_count"], c1e["disabled_count"]) == (2, 2)
    result = cp.run(params(enable_within_bound=True), paths=paths)
    assert result["changed"] is True
    assert disable_matrix(base) == [["0", "0", "0", "1"]] * 4
    assert result["states"][2]["action"] == "enable" and result["states"][2]["disabled_after"] == "none"
    assert "enable_within_bound='1'" in read(paths.script_path)


def test_bound_zero_keeps_only_poll(host):
    _tmp_path, base, paths = host
    cp.run(params(max_idle_latency_us=0), paths=paths)
    assert disable_matrix(base) == [["0", "1", "1", "1"]] * 4


def test_hybrid_cpus_get_their_own_rows(tmp_path):
    base = cpu_tree(tmp_path, cpus=4)
    # CPUs 2-3 (E-cores) leave C6 faster: a separate row, still above the bound
    write_tree(base, {"cpu2/cpuidle/state3/latency": "60\n", "cpu3/cpuidle/state3/latency": "60\n",
                      "cpu3/cpuidle/state2/latency": "20\n"})
    paths = make_paths(tmp_path)
    result = cp.run(params(), paths=paths)
    rows = [(r["state"], r["latency_us"], r["cpus"], r["action"]) for r in result["states"]]
    assert rows == [("state0", 0, "0-3", "keep"), ("state1", 1, "0-3", "keep"), ("state2", 4, "0-2", "keep"),
                    ("state2", 20, "3", "disable"), ("state3", 60, "2-3", "disable"),
                    ("state3", 170, "0-1", "disable")]
    assert disable_matrix(base) == [["0", "0", "0", "1"], ["0", "0", "0", "1"],
                                    ["0", "0", "0", "1"], ["0", "0", "1", "1"]]


def test_persist_false_removes_the_boot_unit(host):
    tmp_path, _base, paths = host
    cp.run(params(), paths=paths)
    result = cp.run(params(persist=False), paths=paths)
    assert result["changed"] is True and result["persisted"] is False
    assert not os.path.exists(paths.script_path)
    assert os.listdir(os.path.join(paths.systemd_dir, "multi-user.target.wants")) == []
    assert not os.path.exists(os.path.join(paths.systemd_dir, "gpufleet-cpu-power.service"))
    removed = [d["before_header"] for d in result["diff"] if d["after_header"].endswith("(absent)")]
    assert len(removed) == 3
    assert cp.run(params(persist=False), paths=paths)["changed"] is False


def test_script_and_unit_follow_the_settings(host):
    _tmp_path, _base, paths = host
    cp.run(params(), paths=paths)
    result = cp.run(params(max_idle_latency_us=50, energy_performance_preference=None), paths=paths)
    assert result["changed"] is True
    script = read(paths.script_path)
    assert "max_idle_latency_us='50'\n" in script and "epp=''\n" in script


@pytest.mark.parametrize("kw, fragment", [
    (dict(max_idle_latency_us=-1), "max_idle_latency_us -1 is not valid"),
    (dict(max_idle_latency_us=True), "max_idle_latency_us True is not valid"),
    (dict(max_idle_latency_us="10"), "max_idle_latency_us '10' is not valid"),
    (dict(max_idle_latency_us=10 ** 12), "an integer from 0 to"),
    (dict(governor="Performance"), "governor 'Performance' is not valid"),
    (dict(governor="perf'; reboot"), "is not valid"),
    (dict(governor=""), "governor '' is not valid"),
    (dict(energy_performance_preference="balance performance"), "energy_performance_preference 'balance"),
    (dict(energy_performance_preference="default"), "'default' is not accepted"),
])
def test_bad_input_fails_before_reading(tmp_path, kw, fragment):
    paths = make_paths(tmp_path)
    paths.cpu_root = str(tmp_path / "does-not-exist")  # validation comes before any read
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(**kw), paths=paths)
    assert fragment in exc.value.message


def test_unreadable_cpu_tree_fails_cleanly(tmp_path):
    paths = make_paths(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "cannot tell which CPUs are online" in exc.value.message


def test_a_broken_state_fails_only_when_idle_states_are_requested(host):
    tmp_path, base, paths = host
    write_tree(base, {"cpu1/cpuidle/state2/latency": "n/a\n"})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "cannot read the CPU idle states, nothing was changed" in exc.value.message
    assert snapshot(tmp_path) == before
    result = cp.run(params(max_idle_latency_us=None), paths=paths)
    assert result["governor_after"] == {"performance": "0-3"}
    assert "reading them failed" in result["not_applicable"]["idle_states"]


def test_refuses_to_write_inside_a_container(host):
    tmp_path, _base, paths = host
    write_tree(tmp_path, {"proc/1/environ": "PATH=/sbin\0container=lxc\0"})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "inside a container (PID 1 environment has container=lxc)" in exc.value.message
    assert snapshot(tmp_path) == before
    assert exc.value.partial["container"]["detected"] is True


def test_a_stale_dockerenv_alone_is_not_a_container(host):
    tmp_path, _base, paths = host
    write_tree(tmp_path, {".dockerenv": ""})
    result = cp.run(params(), paths=paths)
    assert result["changed"] is True
    assert result["container"]["ignored"] == ["/.dockerenv exists"]


def test_unwritable_files_fail_before_any_write(host, monkeypatch):
    tmp_path, _base, paths = host
    before = snapshot(tmp_path)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if p.endswith("/disable") else real(p, mode))
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "cpu0/cpuidle/state3/disable" in exc.value.message and "and 1 more" in exc.value.message
    assert snapshot(tmp_path) == before


# --- the boot script itself, run by /bin/sh against the fake tree -----------------------------

SH = shutil.which("dash") or "/bin/sh"


def run_script(paths, base):
    env = dict(os.environ, GPUFLEET_CPU_SYSFS=str(base))
    return subprocess.run([SH, paths.script_path], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)


def test_boot_script_reapplies_after_a_reboot(host):
    tmp_path, base, paths = host
    cp.run(params(), paths=paths)
    shutil.rmtree(str(base))  # "reboot": a fresh tree with every state enabled, powersave
    base = cpu_tree(tmp_path, cpus=4, offline=(3,))
    proc = run_script(paths, base)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == ("gpufleet-cpu-power: disabled 3 and enabled 0 idle state(s), set the governor of 3 "
                           "and the EPP of 3 cpufreq polic(ies)\n")
    assert disable_matrix(base) == [["0", "0", "0", "1"]] * 3 + [["0", "0", "0", "0"]]
    assert [policy_attr(base, n, "scaling_governor") for n in range(3)] == ["performance"] * 3
    assert [policy_attr(base, n, "energy_performance_preference") for n in range(3)] == ["performance"] * 3
    # and the module then finds nothing to do
    assert cp.run(params(), paths=paths)["changed"] is False
    # a second run of the script writes nothing
    before = snapshot(tmp_path)
    proc = run_script(paths, base)
    assert proc.returncode == 0
    assert proc.stdout.startswith("gpufleet-cpu-power: disabled 0 and enabled 0 idle state(s), set the governor of 0 ")
    assert snapshot(tmp_path) == before


def test_boot_script_enable_within_bound_and_a_missing_governor(host):
    tmp_path, base, paths = host
    cp.run(params(enable_within_bound=True, max_idle_latency_us=2), paths=paths)
    shutil.rmtree(str(base))
    base = cpu_tree(tmp_path, disabled=[(0, 1)], governors="powersave")
    proc = run_script(paths, base)
    assert proc.returncode == 1
    assert "does not offer governor performance (available: powersave)" in proc.stderr
    assert disable_matrix(base) == [["0", "0", "1", "1"]] * 4  # C1 re-enabled on cpu0, C1E/C6 off
    assert "disabled 8 and enabled 1 idle state(s), set the governor of 0 and the EPP of 4" in proc.stdout
    # EPP still applied where offered, the script keeps going after an error
    assert policy_attr(base, 0, "energy_performance_preference") == "performance"


def test_boot_script_without_cpuidle_or_cpufreq_is_quiet(tmp_path):
    base = cpu_tree(tmp_path)
    paths = make_paths(tmp_path)
    cp.run(params(), paths=paths)
    shutil.rmtree(str(base))
    base = cpu_tree(tmp_path, idle_driver=None, policies=None)
    proc = run_script(paths, base)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == ("gpufleet-cpu-power: disabled 0 and enabled 0 idle state(s), set the governor of 0 "
                           "and the EPP of 0 cpufreq polic(ies)\n")


def test_boot_script_reports_a_write_that_does_not_stick(host):
    tmp_path, base, paths = host
    cp.run(params(governor=None, energy_performance_preference=None), paths=paths)
    shutil.rmtree(str(base))
    base = cpu_tree(tmp_path)
    # a directory where the disable file should be: the write fails
    os.unlink(str(base / "cpu1/cpuidle/state3/disable"))
    os.mkdir(str(base / "cpu1/cpuidle/state3/disable"))
    proc = run_script(paths, base)
    assert proc.returncode == 1
    assert "cannot write 1 to %s" % (base / "cpu1/cpuidle/state3/disable") in proc.stderr
    assert "disabled 3 and enabled 0 idle state(s)" in proc.stdout
    assert disable(base, 0, 3) == "1" and disable(base, 2, 3) == "1"


# --- inside a container: a refusal to write, not to look ---------------------------------------

# The CI machines that have cpuidle: haltpoll, both states within the default 10 us bound.
HALTPOLL_STATES = (("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("haltpoll idle", "haltpoll idle", 1, 1))
SHAPES = {
    "no-states": dict(idle_driver=None, policies=None),
    "within-bound": dict(states=HALTPOLL_STATES, idle_driver="haltpoll", policies=None),
    "above-bound": dict(policies=None),  # intel_idle with C6 at 170 us
}
PODMAN = {"proc/1/environ": "container=podman\0", "run/.containerenv": ""}


def in_container(tmp_path):
    """The privileged podman container of the molecule host scenario: identity uid_map, a
    read-write /proc/sys, container=podman in PID 1's environment, /run/.containerenv."""
    write_tree(tmp_path, PODMAN)


def unit_files(paths):
    return [paths.script_path, os.path.join(paths.systemd_dir, "gpufleet-cpu-power.service"),
            os.path.join(paths.systemd_dir, "multi-user.target.wants/gpufleet-cpu-power.service")]


@pytest.mark.parametrize("allow", [False, True], ids=["guarded", "allow_in_container"])
@pytest.mark.parametrize("persist", [True, False], ids=["persist", "runtime-only"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("container", [False, True], ids=["host", "container"])
def test_container_matrix(tmp_path, container, shape, persist, allow):
    base = cpu_tree(tmp_path, **SHAPES[shape])
    paths = make_paths(tmp_path)
    if container:
        in_container(tmp_path)
    before = snapshot(tmp_path)
    cpu_before = snapshot(base)
    args = params(persist=persist, allow_in_container=allow)
    writes_allowed = not container or allow

    if shape == "above-bound" and not writes_allowed:
        for check_mode in (True, False):
            with pytest.raises(ModuleFailure) as exc:
                cp.run(args, check_mode=check_mode, paths=paths)
            msg = exc.value.message
            assert msg.startswith("refusing to disable state3 (C6, 170us) on CPUs 0-3 from inside a container "
                                  "(PID 1 environment has container=podman; /run/.containerenv exists): CPU idle "
                                  "states and cpufreq belong to the host"), msg
            assert "nothing was changed" in msg and "allow_in_container=true" in msg
            assert snapshot(tmp_path) == before
            partial = exc.value.partial
            assert partial["container"]["detected"] is True and partial["container"]["kind"] == "podman"
            # what was found comes back with the failure: the state as it is, not as planned
            c6 = partial["states"][3]
            assert (c6["action"], c6["disabled_before"], c6["disabled_after"]) == ("disable", "none", "none")
            if persist:
                assert "would write %s" % paths.script_path in partial["skipped_keys"]["boot unit"]
        return

    result = cp.run(args, paths=paths)
    assert result["container"]["detected"] is container
    runtime_change = shape == "above-bound"
    unit_wanted = persist and shape != "no-states"
    unit_written = unit_wanted and writes_allowed
    assert result["changed"] is (runtime_change or unit_written)
    assert [os.path.exists(p) for p in unit_files(paths)] == [unit_written] * 3
    assert result["persisted"] is unit_written
    if runtime_change:
        assert disable_matrix(base) == [["0", "0", "0", "1"]] * 4
    elif not unit_written:
        assert snapshot(tmp_path) == before  # nothing written at all
    else:
        assert snapshot(base) == cpu_before  # the unit only
    if unit_wanted and not writes_allowed:
        reason = result["skipped_keys"]["boot unit"]
        assert reason.startswith("inside a container (PID 1 environment has container=podman; "
                                 "/run/.containerenv exists): a systemd unit written here acts when the "
                                 "container starts, not when the host boots"), reason
        assert "would write %s, write %s, link %s -> ../gpufleet-cpu-power.service" % tuple(unit_files(paths)) in reason
    else:
        assert "boot unit" not in result["skipped_keys"]
    if shape == "no-states":
        assert result["skipped"] is True and "cpuidle driver: none" in result["not_applicable"]["idle_states"]
    else:
        assert "skipped" not in result
        assert [r["action"] for r in result["states"]][-1] == ("disable" if runtime_change else "keep")
    # and a second run changes nothing
    assert cp.run(args, paths=paths)["changed"] is False


def test_haltpoll_in_a_container_reports_what_it_found(tmp_path):
    """The failure seen on a fresh CI machine: both haltpoll states within the bound, the plan
    held only the boot unit, and the module refused inside the privileged host container."""
    base = cpu_tree(tmp_path, cpus=2, states=HALTPOLL_STATES, idle_driver="haltpoll", policies=None)
    write_tree(base, {"cpuidle/current_governor_ro": "haltpoll\n"})
    paths = make_paths(tmp_path)
    in_container(tmp_path)
    before = snapshot(tmp_path)
    for check_mode in (True, False):
        result = cp.run(params(), check_mode=check_mode, paths=paths)
        assert snapshot(tmp_path) == before
        assert result["changed"] is False and result["persisted"] is False
        assert (result["idle_driver"], result["idle_governor"]) == ("haltpoll", "haltpoll")
        assert [(r["name"], r["latency_us"], r["action"], r["disabled_after"]) for r in result["states"]] == [
            ("POLL", 0, "keep", "none"), ("haltpoll idle", 1, "keep", "none")]
        assert sorted(result["skipped_keys"]) == ["boot unit", "energy_performance_preference", "governor"]
        assert [d for d in result["diff"] if d["before"] != d["after"]] == []


def test_container_refusal_names_the_policies_and_states(tmp_path):
    cpu_tree(tmp_path, disabled=[(1, 2)])
    paths = make_paths(tmp_path)
    in_container(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(max_idle_latency_us=3, enable_within_bound=True, governor="performance",
                      energy_performance_preference=None, persist=False), paths=paths)
    assert exc.value.message.startswith(
        "refusing to disable state2 (C1E, 4us) on CPUs 0,2-3; disable state3 (C6, 170us) on CPUs 0-3; "
        "set scaling_governor performance on policy0, policy1, policy2, policy3 (CPUs 0-3) from inside a "
        "container")
    assert snapshot(tmp_path) == before
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(max_idle_latency_us=None, governor="powersave", energy_performance_preference="power"),
               paths=paths)
    assert exc.value.message.startswith("refusing to set energy_performance_preference power on policy0, "
                                        "policy1, policy2, policy3 (CPUs 0-3) from inside a container")
    enable = cp.run(params(max_idle_latency_us=None, governor=None, energy_performance_preference=None,
                           persist=False), paths=paths)
    assert enable["changed"] is False and enable["governor_before"] == {"powersave": "0-3"}


def test_container_leaves_an_installed_unit_alone_both_ways(tmp_path):
    cpu_tree(tmp_path, states=HALTPOLL_STATES, idle_driver="haltpoll", policies=None)
    paths = make_paths(tmp_path)
    cp.run(params(), paths=paths)  # installed on the host, or with allow_in_container
    in_container(tmp_path)
    before = snapshot(tmp_path)
    result = cp.run(params(), paths=paths)  # as wanted: nothing to leave alone, nothing to report
    assert result["changed"] is False and result["persisted"] is True
    assert "boot unit" not in result["skipped_keys"]
    result = cp.run(params(persist=False), paths=paths)  # removing is a write too
    assert result["changed"] is False and result["persisted"] is True
    assert "would remove %s" % unit_files(paths)[2] in result["skipped_keys"]["boot unit"]
    result = cp.run(params(max_idle_latency_us=5), paths=paths)  # a new script is a write
    assert result["changed"] is False and result["persisted"] is False
    assert "would write %s" % paths.script_path in result["skipped_keys"]["boot unit"]
    assert snapshot(tmp_path) == before


def test_container_with_a_foreign_unit_reports_it_instead_of_failing(tmp_path):
    cpu_tree(tmp_path, states=HALTPOLL_STATES, idle_driver="haltpoll", policies=None)
    paths = make_paths(tmp_path)
    write_tree(tmp_path, {"etc/systemd/system/gpufleet-cpu-power.service": "[Unit]\nDescription=mine\n"})
    with pytest.raises(ModuleFailure) as exc:  # on the host: the marker rule refuses it
        cp.run(params(), paths=paths)
    assert exc.value.message.startswith("cannot plan the boot unit files, nothing was changed: %s: exists and "
                                        "was not written by gpufleet.tuning" % unit_files(paths)[1])
    in_container(tmp_path)
    result = cp.run(params(), paths=paths)
    assert result["changed"] is False
    assert "would replace a file it does not own: %s: exists" % unit_files(paths)[1] in \
        result["skipped_keys"]["boot unit"]


# --- offline CPUs and inactive cpufreq policies ------------------------------------------------

class BusyPolicies:
    """Linux 5.19+: every attribute of a policy whose CPUs are all offline answers EBUSY
    (drivers/cpufreq/cpufreq.c show(): ``if (likely(!policy_is_inactive(policy)))``, else
    -EBUSY), affected_cpus and related_cpus included. Patches the one reader cpu_sysfs uses."""

    def __init__(self, monkeypatch, names, number=errno.EBUSY):
        from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
        self.real = fileops.read_text
        self.names = names
        self.number = number
        self.refused = []
        monkeypatch.setattr(fileops, "read_text", self)

    def __call__(self, path):
        parts = str(path).split(os.sep)
        if "cpufreq" in parts and any(name in parts for name in self.names):
            self.refused.append(path)
            raise OSError(self.number, os.strerror(self.number), path)
        return self.real(path)


def link_policies(base, links):
    """``cpuN/cpufreq -> ../cpufreq/policyM``, as the kernel keeps them for offline CPUs too."""
    for cpu, policy in links.items():
        os.symlink("../cpufreq/%s" % policy, str(base / ("cpu%d/cpufreq" % cpu)))


def test_inactive_policies_answering_ebusy_are_left_alone(tmp_path, monkeypatch):
    base = cpu_tree(tmp_path, cpus=4, offline=(2, 3))
    link_policies(base, {0: "policy0", 1: "policy1", 2: "policy2", 3: "policy3"})
    busy = BusyPolicies(monkeypatch, ("policy2", "policy3"))
    paths = make_paths(tmp_path)
    result = cp.run(params(), paths=paths)
    assert busy.refused, "the fake kernel was never asked"
    assert [policy_attr(base, n, "scaling_governor") for n in (0, 1)] == ["performance"] * 2
    assert [policy_attr(base, n, "energy_performance_preference") for n in (0, 1)] == ["performance"] * 2
    reason = result["skipped_keys"]["cpufreq policy2, policy3"]
    assert reason.startswith("inactive (all CPUs of the policy are offline, CPUs 2-3); left alone (the kernel "
                             "refuses to show it: cannot read %s: EBUSY 16" % (base / "cpufreq/policy2/affected_cpus"))
    assert [(p["policy"], p["active"], p["cpus"], p["governor_before"]) for p in result["policies"]] == [
        ("policy0", True, "0", "powersave"), ("policy1", True, "1", "powersave"),
        ("policy2", False, "2", None), ("policy3", False, "3", None)]
    assert result["governor_after"] == {"performance": "0-1"}
    assert "offline CPUs 2-3" in result["skipped_keys"]
    second = cp.run(params(), paths=paths)
    assert second["changed"] is False


def test_a_shared_inactive_policy_takes_its_cpus_from_the_links(tmp_path, monkeypatch):
    base = cpu_tree(tmp_path, cpus=4, offline=(2, 3))
    shutil.rmtree(str(base / "cpufreq/policy3"))
    write_tree(base, {"cpufreq/policy2/related_cpus": "2 3\n"})
    link_policies(base, {2: "policy2", 3: "policy2"})
    BusyPolicies(monkeypatch, ("policy2",), number=errno.ENODEV)  # a policy being torn down
    result = cp.run(params(energy_performance_preference=None), paths=make_paths(tmp_path))
    assert "inactive (all CPUs of the policy are offline, CPUs 2-3)" in result["skipped_keys"]["cpufreq policy2"]
    assert "ENODEV" in result["skipped_keys"]["cpufreq policy2"]


def test_other_read_errors_of_a_policy_still_fail(tmp_path, monkeypatch):
    cpu_tree(tmp_path, cpus=2)
    BusyPolicies(monkeypatch, ("policy1",), number=errno.EIO)
    paths = make_paths(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert exc.value.message.startswith("cannot read the cpufreq policies, nothing was changed: cannot read ")
    assert "policy1/affected_cpus: EIO 5" in exc.value.message
    assert snapshot(tmp_path) == before


def test_inactive_policies_do_not_matter_when_cpufreq_is_not_requested(tmp_path, monkeypatch):
    base = cpu_tree(tmp_path, cpus=4, offline=(3,))
    BusyPolicies(monkeypatch, ("policy3",))
    result = cp.run(params(governor=None, energy_performance_preference=None), paths=make_paths(tmp_path))
    assert disable_matrix(base)[:3] == [["0", "0", "0", "1"]] * 3
    assert not any(key.startswith("cpufreq") for key in result["skipped_keys"])


def test_a_cpu_going_offline_while_read_is_left_alone(tmp_path, monkeypatch):
    # haltpoll unregisters an offline CPU's cpuidle device: its files vanish under the reader
    base = cpu_tree(tmp_path, cpus=4, states=HALTPOLL_STATES + (("deep", "fake deep", 50, 100),),
                    idle_driver="haltpoll", policies=None)
    real = cpu_sysfs.idle_states

    def vanishing(cpu, root):
        if cpu == 3:
            write_tree(base, {"online": "0-2\n", "cpu3/online": "0\n"})
            shutil.rmtree(str(base / "cpu3/cpuidle"))
            raise cpu_sysfs.CpuSysfsError("%s is missing" % (base / "cpu3/cpuidle/state0/latency"))
        return real(cpu, root)
    monkeypatch.setattr(cpu_sysfs, "idle_states", vanishing)
    result = cp.run(params(), paths=make_paths(tmp_path))
    assert result["skipped_keys"]["CPUs 3"] == "went offline while their idle states were read; left alone"
    assert [(r["name"], r["cpus"], r["disabled_after"]) for r in result["states"]] == [
        ("POLL", "0-2", "none"), ("haltpoll idle", "0-2", "none"), ("deep", "0-2", "0-2")]


def test_a_read_error_of_a_cpu_still_online_fails(tmp_path, monkeypatch):
    cpu_tree(tmp_path, cpus=2)

    def broken(cpu, root):
        raise cpu_sysfs.CpuSysfsError("cannot read cpu%d: EIO 5" % cpu)
    monkeypatch.setattr(cpu_sysfs, "idle_states", broken)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=make_paths(tmp_path))
    assert "cannot read the CPU idle states, nothing was changed: cannot read cpu0: EIO 5" in exc.value.message


def fake_cat_refusing(tmp_path, policies):
    """A ``cat`` first on PATH that answers EBUSY for the files of ``policies``, as the kernel
    does for an inactive policy (regular files cannot refuse a read by themselves)."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    pattern = "|".join("*/cpufreq/%s/*" % name for name in policies)
    (bindir / "cat").write_text(
        "#!/bin/sh\n"
        "for f in \"$@\"; do\n"
        "    case \"$f\" in\n"
        "        %s) echo \"cat: $f: Device or resource busy\" >&2; exit 1 ;;\n"
        "    esac\n"
        "done\n"
        "exec %s \"$@\"\n" % (pattern, shutil.which("cat")))
    os.chmod(str(bindir / "cat"), 0o755)
    return str(bindir)


def test_boot_script_leaves_an_inactive_policy_alone(host):
    tmp_path, base, paths = host
    cp.run(params(), paths=paths)
    shutil.rmtree(str(base))
    base = cpu_tree(tmp_path, cpus=4, offline=(2, 3))
    # the kernel's inactive policies: files there, every read refused
    write_tree(base, {"cpufreq/policy2/scaling_governor": "powersave\n",
                      "cpufreq/policy2/energy_performance_preference": "balance_performance\n",
                      "cpufreq/policy2/affected_cpus": "2\n"})
    fakebin = fake_cat_refusing(tmp_path, ("policy2", "policy3"))
    env = dict(os.environ, GPUFLEET_CPU_SYSFS=str(base), PATH=fakebin + os.pathsep + os.environ["PATH"])
    proc = subprocess.run([SH, paths.script_path], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "set the governor of 2 and the EPP of 2 cpufreq polic(ies)" in proc.stdout
    assert policy_attr(base, 2, "scaling_governor") == "powersave"  # untouched
    assert [policy_attr(base, n, "scaling_governor") for n in (0, 1)] == ["performance"] * 2


def test_boot_script_with_haltpoll_and_an_offline_cpu_without_cpuidle(tmp_path):
    base = cpu_tree(tmp_path, cpus=2, states=HALTPOLL_STATES + (("deep", "fake deep", 50, 100),),
                    idle_driver="haltpoll", policies=None)
    paths = make_paths(tmp_path)
    cp.run(params(), paths=paths)
    shutil.rmtree(str(base))
    base = cpu_tree(tmp_path, cpus=3, offline=(2,), states=HALTPOLL_STATES + (("deep", "fake deep", 50, 100),),
                    idle_driver="haltpoll", policies=None)
    shutil.rmtree(str(base / "cpu2/cpuidle"))  # haltpoll_cpu_offline() unregistered it
    proc = run_script(paths, base)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith("gpufleet-cpu-power: disabled 2 and enabled 0 idle state(s)")
    assert disable_matrix(base, cpus=2, nstates=3) == [["0", "0", "1"]] * 2


# --- the boot unit runs as root: only where root alone can change it ------------------------------

USER = 1000


@pytest.mark.parametrize("where, how", [
    ("usr/local", lambda p: os.chown(p, USER, USER)),
    ("usr/local/sbin", lambda p: os.chmod(p, 0o775)),
    ("etc/systemd", lambda p: os.chmod(p, 0o1777)),
    ("etc/systemd/system", lambda p: os.chmod(p, 0o757)),
])
def test_boot_unit_where_another_user_could_change_it_is_refused_before_any_write(host, where, how):
    tmp_path, base, paths = host
    os.makedirs(str(tmp_path / "usr/local/sbin"))
    how(str(tmp_path / where))
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    message = exc.value.message
    assert message.startswith("cannot plan the boot unit files, nothing was changed: %s: is " % (tmp_path / where)), \
        message
    st = os.stat(str(tmp_path / where))
    assert "mode %04o" % (st.st_mode & 0o7777) in message and "must be changeable by root only" in message
    assert snapshot(tmp_path) == before  # no idle state, governor or file written
    # the runtime part alone is fine
    assert cp.run(params(persist=False), paths=paths)["changed"] is True


def test_boot_unit_files_left_owned_by_a_user_are_given_back_to_root(host):
    tmp_path, _base, paths = host
    cp.run(params(), paths=paths)
    script, unit, link = unit_files(paths)
    os.chown(script, USER, USER)
    os.chown(unit, USER, USER)
    os.lchown(link, USER, USER)
    result = cp.run(params(), paths=paths)
    assert result["changed"] is True
    assert [os.lstat(p).st_uid for p in (script, unit, link)] == [0, 0, 0]
    assert [d["before"] for d in result["diff"] if d["before_header"].endswith("owner and mode (before)")] == \
        ["owner = 1000:1000\n"] * 3
    assert cp.run(params(), paths=paths)["changed"] is False


def test_umask_000_still_installs_the_boot_unit_in_root_owned_0755_directories(host):
    tmp_path, _base, paths = host
    old = os.umask(0)
    try:
        cp.run(params(), paths=paths)
    finally:
        os.umask(old)
    for rel in ("usr", "usr/local", "usr/local/sbin", "etc/systemd/system/multi-user.target.wants"):
        st = os.stat(str(tmp_path / rel))
        assert (rel, st.st_mode & 0o7777, st.st_uid) == (rel, 0o755, 0)
    script, unit, link = unit_files(paths)
    assert [(os.stat(p).st_mode & 0o7777, os.stat(p).st_uid) for p in (script, unit)] == [(0o755, 0), (0o644, 0)]
    assert os.lstat(link).st_uid == 0


# ------------------------------------------------------------------ change records

def value(target, before, after):
    return {"area": "cpu_power", "kind": "value", "target": target, "before": before, "after": after}


def test_records_name_each_change_with_its_cpus_and_policies(host):
    tmp_path, _base, paths = host
    result = cp.run(params(), paths=paths)
    script, unit, link = unit_files(paths)
    assert result["changes"] == [
        value("cpu0-3/state3 (C6) disable", "0", "1"),
        value("policy0-3/scaling_governor", "powersave", "performance"),
        value("policy0-3/energy_performance_preference", "balance_performance", "performance"),
        {"area": "cpu_power", "kind": "file", "target": script, "before": None,
         "after": records.file_state(read(script), 0o755)},
        {"area": "cpu_power", "kind": "file", "target": unit, "before": None,
         "after": records.file_state(read(unit), 0o644)},
        {"area": "cpu_power", "kind": "file", "target": link, "before": None,
         "after": {"link": "../gpufleet-cpu-power.service"}},
    ]
    assert cp.run(params(), paths=paths)["changes"] == []


def test_check_mode_records_are_the_ones_the_run_then_makes(host):
    _tmp_path, _base, paths = host
    planned = cp.run(params(enable_within_bound=True), check_mode=True, paths=paths)
    assert cp.run(params(enable_within_bound=True), paths=paths)["changes"] == planned["changes"]
    planned = cp.run(params(persist=False), check_mode=True, paths=paths)
    done = cp.run(params(persist=False), paths=paths)
    assert done["changes"] == planned["changes"]
    script, unit, link = unit_files(paths)
    assert [(c["kind"], c["target"], c["after"]) for c in done["changes"]] == [
        ("file", link, None), ("file", unit, None), ("file", script, None)]
    assert done["changes"][0]["before"] == {"link": "../gpufleet-cpu-power.service"}


def test_records_group_the_cpus_that_had_the_same_value(tmp_path):
    """CPUs 0 and 1 had C1E disabled by hand: enabling it within the bound is one record for
    them; C6 is another for all four; a revert writes each record's before back."""
    base = cpu_tree(tmp_path, disabled=[(0, 2), (1, 2), (2, 3)])
    paths = make_paths(tmp_path)
    result = cp.run(params(enable_within_bound=True, governor=None, energy_performance_preference=None,
                           persist=False), paths=paths)
    assert result["changes"] == [
        value("cpu0-1/state2 (C1E) disable", "1", "0"),
        value("cpu0-1,3/state3 (C6) disable", "0", "1"),
    ]
    assert disable_matrix(base) == [["0", "0", "0", "1"]] * 4


def test_policies_are_grouped_by_their_change(tmp_path):
    base = cpu_tree(tmp_path)
    write_tree(base, {"cpufreq/policy2/scaling_governor": "performance\n"})
    paths = make_paths(tmp_path)
    result = cp.run(params(max_idle_latency_us=None, energy_performance_preference=None, persist=False),
                    paths=paths)
    assert result["changes"] == [value("policy0-1,3/scaling_governor", "powersave", "performance")]


def test_an_epp_the_kernel_moved_with_the_governor_is_recorded(host, monkeypatch):
    _tmp_path, _base, paths = host
    KernelStub(monkeypatch, pin_epp=True)
    result = cp.run(params(energy_performance_preference=None, max_idle_latency_us=None, persist=False),
                    paths=paths)
    assert result["changes"] == [
        value("policy0-3/scaling_governor", "powersave", "performance"),
        value("policy0-3/energy_performance_preference", "balance_performance", "performance")]


def test_a_refused_or_failed_run_returns_no_records(host, monkeypatch):
    tmp_path, _base, paths = host
    KernelStub(monkeypatch, ignore=("cpu2/cpuidle/state3/disable",))
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), paths=paths)
    assert "changes" not in exc.value.partial
    monkeypatch.undo()
    in_container(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        cp.run(params(), check_mode=True, paths=paths)
    assert "changes" not in exc.value.partial and exc.value.message.startswith("refusing")


def test_a_boot_unit_left_alone_in_a_container_has_no_record(tmp_path):
    haltpoll = (("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("haltpoll idle", "haltpoll idle", 1, 1))
    cpu_tree(tmp_path, states=haltpoll, idle_driver="haltpoll", policies=None)
    paths = make_paths(tmp_path)
    in_container(tmp_path)
    result = cp.run(params(), paths=paths)
    assert "boot unit" in result["skipped_keys"] and result["changes"] == []
