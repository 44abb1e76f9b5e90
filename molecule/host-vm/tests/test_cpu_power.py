# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's cpu_power task on a real kernel with ACPI C-states (issue 8).

The harness's SSDT gives every CPU a _CST, so acpi_idle registers POLL (0 us), C1 (1 us) and
two fake I/O-port states, C2 (50 us) and C3 (150 us). With the role's default bound
(host_cpu_power_max_idle_latency_us, 10) C2 and C3 must be disabled on every online CPU and
POLL and C1 kept. The VM has no cpufreq driver: governor and EPP are reported as not
applicable, not failed.

What the scenario's runs did is read from the saved results (converge-1, converge-2, check);
the live state is read from the rebooted guest, where only gpufleet-cpu-power.service can have
put the bound back: the scenario's reboot step disables the harness's own
gpufleet-vm-cstates.service (which otherwise disables C2/C3 first at every boot) for that boot.

"""

from __future__ import annotations

import re

import pytest

UNIT = "gpufleet-cpu-power.service"
UNIT_PATH = "/etc/systemd/system/" + UNIT
WANTS_LINK = "/etc/systemd/system/multi-user.target.wants/" + UNIT
SCRIPT = "/usr/local/sbin/gpufleet-cpu-power"
CPU = "/sys/devices/system/cpu"
DEEP_ENABLED_ARG = "gpufleet_vm.deep_cstates=enabled"


@pytest.fixture(scope="module")
def bound(host_defaults):
    value = host_defaults["host_cpu_power_max_idle_latency_us"]
    assert isinstance(value, int), "the role's default bound is %r" % (value,)
    return value


def _cpu_list(text):
    cpus = []
    for part in text.strip().split(","):
        if part:
            first, _sep, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


@pytest.fixture
def states(host):
    """{cpu: {index: {"name", "latency", "disable"}}} of the online CPUs, in one ssh round trip."""
    online = _cpu_list(host.file(CPU + "/online").content_string)
    out = host.check_output("grep -H . %s/cpu[0-9]*/cpuidle/state[0-9]*/name %s/cpu[0-9]*/cpuidle/state[0-9]*/latency "
                            "%s/cpu[0-9]*/cpuidle/state[0-9]*/disable" % (CPU, CPU, CPU))
    found = {}
    for line in out.splitlines():
        match = re.match(r"^%s/cpu(\d+)/cpuidle/state(\d+)/(\w+):(.*)$" % re.escape(CPU), line)
        assert match, "unexpected line %r" % line
        cpu, index, attr, value = int(match.group(1)), int(match.group(2)), match.group(3), match.group(4)
        if cpu in online:
            found.setdefault(cpu, {}).setdefault(index, {})[attr] = value if attr == "name" else int(value)
    assert sorted(found) == online, "online CPUs %s, CPUs with idle states %s" % (online, sorted(found))
    return found


def _split(states, bound):
    deep = [(c, i) for c, table in states.items() for i, s in table.items() if s["latency"] > bound]
    shallow = [(c, i) for c, table in states.items() for i, s in table.items() if s["latency"] <= bound]
    return deep, shallow


def _label(states, cpu, index):
    state = states[cpu][index]
    return "cpu%d/state%d (%s, %dus)" % (cpu, index, state["name"], state["latency"])


def _deep_booted_enabled(host):
    return DEEP_ENABLED_ARG in host.file("/proc/cmdline").content_string


def _harness_left_states_alone_this_boot(host):
    """True when nothing but the role's unit can have disabled deep states in this boot."""
    enabled = host.run("systemctl is-enabled gpufleet-vm-cstates.service").stdout.strip()
    return _deep_booted_enabled(host) or enabled == "disabled"


def test_vm_offers_states_on_both_sides_of_the_bound(host, states, bound):
    """Without this the other tests prove nothing: a deep state to disable, a shallow one to keep."""
    assert host.file(CPU + "/cpuidle/current_driver").content_string.strip() == "acpi_idle"
    for cpu, table in states.items():
        latencies = dict((s["name"], s["latency"]) for s in table.values())
        assert latencies.get("POLL") == 0 and "C1" in latencies, (cpu, latencies)
        assert any(lat > bound for lat in latencies.values()), (cpu, latencies)
        assert any(lat <= bound for lat in latencies.values()), (cpu, latencies)


def test_first_converge_disabled_the_deep_states_on_every_cpu(host, results, bound):
    first = results("converge-1")["__host_cpu_power"]
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] is True
    assert first["idle_driver"] == "acpi_idle"
    assert first["max_idle_latency_us"] == bound
    online = first["online_cpus"]
    for row in first["states"]:
        assert row["cpus"] == online, row
        if row["latency_us"] > bound:
            assert (row["action"], row["disabled_after"], row["enabled_count"]) == ("disable", online, 0), row
        else:
            assert (row["action"], row["disabled_after"], row["disabled_count"]) == ("keep", "none", 0), row
        if _deep_booted_enabled(host):
            assert row["disabled_before"] == "none", row  # the kernel's state at boot: all enabled
    assert sorted(r["name"] for r in first["states"] if r["action"] == "disable") == ["C2", "C3"]
    # no cpufreq driver in this VM: reported, not failed
    assert "no cpufreq policies" in first["not_applicable"]["governor"]
    assert "no cpufreq policies" in first["skipped_keys"]["energy_performance_preference"]
    assert first["persisted"] is True
    assert (first["unit_path"], first["script_path"]) == (UNIT_PATH, SCRIPT)


def test_second_converge_changed_nothing(results):
    second = results("converge-2")["__host_cpu_power"]
    assert second["changed"] is False and second["changes"] == [], second["changes"]


def test_check_mode_converge_plans_nothing(results):
    check = results("check")["__host_cpu_power"]
    assert check["changed"] is False, check.get("diff")


def test_deep_states_disabled_on_every_cpu_after_the_reboot(rebooted, states, bound):
    deep, _shallow = _split(states, bound)
    assert deep
    left = [_label(states, c, i) for c, i in deep if states[c][i]["disable"] != 1]
    assert left == [], "deep states enabled after the reboot: %s" % ", ".join(left)


def test_shallow_states_kept_after_the_reboot(rebooted, states, bound):
    _deep, shallow = _split(states, bound)
    assert shallow
    off = [_label(states, c, i) for c, i in shallow if states[c][i]["disable"] != 0]
    assert off == [], "shallow states disabled: %s" % ", ".join(off)


def test_boot_unit_installed_enabled_and_ran_in_this_boot(host, rebooted, bound):
    assert host.file(UNIT_PATH).is_file
    assert host.file(WANTS_LINK).linked_to == UNIT_PATH
    script = host.file(SCRIPT)
    assert script.is_file and script.mode == 0o755
    assert "max_idle_latency_us='%d'" % bound in script.content_string
    assert host.run("systemctl is-enabled %s" % UNIT).stdout.strip() == "enabled"
    show = host.check_output("systemctl show -p ActiveState -p Result -p ExecMainStatus %s" % UNIT)
    assert sorted(show.splitlines()) == ["ActiveState=active", "ExecMainStatus=0", "Result=success"]
    assert "gpufleet-cpu-power: disabled " in host.check_output("journalctl -b -o cat -u %s" % UNIT)


def test_boot_unit_alone_put_the_deep_states_back(host, rebooted, states, bound):
    if not _harness_left_states_alone_this_boot(host):
        pytest.skip("the harness's own gpufleet-vm-cstates.service ran in this boot and disabled C2/C3 "
                    "first, so this boot cannot show what gpufleet-cpu-power did (the scenario's "
                    "reboot step disables it; run that step)")
    deep, _shallow = _split(states, bound)
    # the kernel booted with every state enabled; the unit disabled each deep one and counted them
    journal = host.check_output("journalctl -b -o cat -u %s" % UNIT)
    assert "gpufleet-cpu-power: disabled %d and enabled 0 idle state(s)" % len(deep) in journal, journal


def test_unit_restart_disables_a_state_enabled_by_hand(host, states, bound):
    deep, _shallow = _split(states, bound)
    cpu, index = deep[0]
    path = "%s/cpu%d/cpuidle/state%d/disable" % (CPU, cpu, index)
    cursor = host.check_output("journalctl -n 0 --show-cursor").split("cursor: ", 1)[1].strip()
    try:
        host.check_output("echo 0 > %s" % path)
        assert host.file(path).content_string.strip() == "0"
        host.check_output("systemctl restart %s" % UNIT)
        assert host.file(path).content_string.strip() == "1"
        journal = host.check_output("journalctl -o cat -u %s --after-cursor '%s'" % (UNIT, cursor))
        assert "gpufleet-cpu-power: disabled 1 and enabled 0 idle state(s)" in journal, journal
    finally:
        # the fake deep states busy-loop a host core: never leave one enabled
        host.run("echo 1 > %s" % path)
