"""cpu_power against this machine's real /sys/devices/system/cpu, putting every state back.

Runs only where the kernel shows cpuidle states and the test runs as root outside a container;
everywhere else it is skipped with the reason (the CI VM has had cpuidle driver "none"). The
host-vm molecule scenario is where real states are exercised on every run. The boot unit goes
to a temp dir, never to /etc; the governor and EPP are not touched.
"""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container
from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power as cp
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import cpu_sysfs


def _real_states():
    """(online CPUs, {(cpu, index): IdleState}) or a skip reason."""
    if not os.path.isdir(cpu_sysfs.CPU_ROOT):
        return None, "no %s" % cpu_sysfs.CPU_ROOT
    if os.geteuid() != 0:
        return None, "needs root to write the cpuidle disable files"
    if container.detect()["detected"]:
        return None, "runs in a container: the idle states belong to the host"
    online = cpu_sysfs.online_cpus()
    states = {}
    for cpu in online:
        for state in cpu_sysfs.idle_states(cpu):
            states[(cpu, state.index)] = state
    if not states:
        return None, ("this machine shows no cpuidle states (cpuidle driver: %s); the host-vm molecule "
                      "scenario exercises real ones" % cpu_sysfs.idle_driver())
    if len(set(s.latency for s in states.values())) < 2:
        return None, "every idle state here has the same exit latency: nothing to keep apart"
    return states, None


@pytest.fixture
def real_states():
    states, reason = _real_states()
    if states is None:
        pytest.skip(reason)
    yield states
    # put every disable flag back as it was, whatever the test did
    for state in states.values():
        if cpu_sysfs.read_attr(state.disable_path) != str(state.disable):
            cpu_sysfs.write_attr(state.disable_path, state.disable)


def test_real_sysfs_bound_applied_and_restored(real_states, tmp_path):
    states = real_states
    bound = min(s.latency for s in states.values())  # keeps the shallowest, disables the rest
    # the real /sys and /proc; the boot unit and its script in the temp tree
    os.symlink("/sys", str(tmp_path / "sys"))
    os.symlink("/proc", str(tmp_path / "proc"))
    paths = cp.Paths(str(tmp_path))
    assert os.path.realpath(paths.cpu_root) == cpu_sysfs.CPU_ROOT
    params = dict(max_idle_latency_us=bound, enable_within_bound=False, governor=None,
                  energy_performance_preference=None, persist=True)

    planned = cp.run(params, check_mode=True, paths=paths)
    assert all(cpu_sysfs.read_attr(s.disable_path) == str(s.disable) for s in states.values())
    assert not os.path.exists(paths.script_path)

    result = cp.run(params, paths=paths)
    assert result["changed"] is True and planned["changed"] is True
    for (cpu, index), state in states.items():
        now = cpu_sysfs.read_attr(state.disable_path)
        if state.latency > bound:
            assert now == "1", "cpu%d/state%d (%s) not disabled" % (cpu, index, state.name)
        else:
            assert now == str(state.disable), "cpu%d/state%d (%s) changed" % (cpu, index, state.name)
    assert [r["disabled_after"] for r in result["states"]] == [r["disabled_after"] for r in planned["states"]]
    assert result["changes"] == planned["changes"] and result["changes"]
    again = cp.run(params, paths=paths)
    assert again["changed"] is False and again["changes"] == []
