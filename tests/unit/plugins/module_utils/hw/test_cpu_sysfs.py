"""Reading /sys/devices/system/cpu: CPU lists, online CPUs, idle states and cpufreq policies."""

import errno
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import cpu_sysfs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, write_tree


@pytest.mark.parametrize("text, cpus", [
    ("0-3,8-11\n", [0, 1, 2, 3, 8, 9, 10, 11]),
    ("0", [0]),
    ("0,2,4-5", [0, 2, 4, 5]),
    ("", []),
    ("\n", []),
])
def test_parse_cpu_list(text, cpus):
    assert cpu_sysfs.parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["0-", "a", "3-1", "0,,1", "0 1"])
def test_parse_cpu_list_refuses_garbage(text):
    with pytest.raises(cpu_sysfs.CpuSysfsError) as exc:
        cpu_sysfs.parse_cpu_list(text)
    assert repr(text.strip()) in str(exc.value)


@pytest.mark.parametrize("cpus, text", [
    ([0, 1, 2, 3, 8, 9, 10, 11], "0-3,8-11"),
    ([5], "5"),
    ([3, 1, 2, 7], "1-3,7"),
    ([0, 2, 4], "0,2,4"),
    ([], ""),
])
def test_format_cpu_list(cpus, text):
    assert cpu_sysfs.format_cpu_list(cpus) == text
    assert cpu_sysfs.parse_cpu_list(text) == sorted(cpus)


def test_parse_cpu_words():
    assert cpu_sysfs.parse_cpu_words("4 0 1\n") == [0, 1, 4]
    assert cpu_sysfs.parse_cpu_words("") == []
    with pytest.raises(cpu_sysfs.CpuSysfsError):
        cpu_sysfs.parse_cpu_words("0-3")


def test_online_from_the_online_file(tmp_path):
    write_tree(tmp_path, {"online": "0-1,3\n", "cpu0": None, "cpu1": None, "cpu2": None, "cpu3": None,
                          "cpu2/online": "0\n", "cpufreq": None, "cpuidle": None})
    assert cpu_sysfs.online_cpus(str(tmp_path)) == [0, 1, 3]
    assert sorted(cpu_sysfs.cpu_dirs(str(tmp_path))) == [0, 1, 2, 3]


def test_online_without_the_online_file_reads_each_cpu(tmp_path):
    # cpu0 has no online file (it cannot go offline) and counts as online
    write_tree(tmp_path, {"cpu0/topology": None, "cpu1/online": "1\n", "cpu2/online": "0\n",
                          "cpu10/online": "1\n", "cpufreq": None, "cpuN": None})
    assert cpu_sysfs.online_cpus(str(tmp_path)) == [0, 1, 10]


def _state(root, cpu, index, name, latency, disable="0", residency="2"):
    base = "cpu%d/cpuidle/state%d/" % (cpu, index)
    write_tree(root, {base + "name": name + "\n", base + "desc": "desc of %s\n" % name,
                      base + "latency": "%d\n" % latency, base + "residency": residency + "\n",
                      base + "disable": disable + "\n", base + "usage": "12\n"})


def test_idle_states_in_index_order(tmp_path):
    for index, (name, latency) in enumerate([("POLL", 0), ("C1", 1), ("C1E", 2), ("C6", 170)]):
        _state(tmp_path, 0, index, name, latency, disable="1" if name == "C6" else "0")
    # state10 sorts after state2 by number, not by text
    _state(tmp_path, 0, 10, "C10", 2000)
    write_tree(tmp_path, {"cpuidle/current_driver": "intel_idle\n", "cpuidle/current_governor_ro": "menu\n",
                          "cpu0/cpuidle/driver/name": "intel_idle\n"})
    states = cpu_sysfs.idle_states(0, str(tmp_path))
    assert [(s.state, s.name, s.latency, s.disable) for s in states] == [
        ("state0", "POLL", 0, 0), ("state1", "C1", 1, 0), ("state2", "C1E", 2, 0), ("state3", "C6", 170, 1),
        ("state10", "C10", 2000, 0)]
    assert states[3].desc == "desc of C6" and states[3].residency == 2
    assert states[3].disable_path == str(tmp_path / "cpu0/cpuidle/state3/disable")
    assert cpu_sysfs.idle_driver(str(tmp_path)) == "intel_idle"
    assert cpu_sysfs.idle_governor(str(tmp_path)) == "menu"


def test_no_cpuidle_directory_is_no_states(tmp_path):
    write_tree(tmp_path, {"cpu0/topology": None})
    assert cpu_sysfs.idle_states(0, str(tmp_path)) == []
    assert cpu_sysfs.idle_driver(str(tmp_path)) is None
    assert cpu_sysfs.idle_governor(str(tmp_path)) is None


def test_a_state_without_latency_is_an_error(tmp_path):
    write_tree(tmp_path, {"cpu0/cpuidle/state0/name": "POLL\n", "cpu0/cpuidle/state0/disable": "0\n"})
    with pytest.raises(cpu_sysfs.CpuSysfsError) as exc:
        cpu_sysfs.idle_states(0, str(tmp_path))
    assert "state0/latency is missing" in str(exc.value)


def test_a_non_integer_latency_is_an_error(tmp_path):
    _state(tmp_path, 0, 0, "POLL", 0)
    write_tree(tmp_path, {"cpu0/cpuidle/state0/latency": "fast\n"})
    with pytest.raises(cpu_sysfs.CpuSysfsError) as exc:
        cpu_sysfs.idle_states(0, str(tmp_path))
    assert "'fast', not an integer" in str(exc.value)


def test_policies_active_and_inactive(tmp_path):
    write_tree(tmp_path, {
        "cpufreq/policy0/affected_cpus": "0 1\n",
        "cpufreq/policy0/related_cpus": "0 1\n",
        "cpufreq/policy0/scaling_driver": "acpi-cpufreq\n",
        "cpufreq/policy0/scaling_governor": "schedutil\n",
        "cpufreq/policy0/scaling_available_governors": "conservative ondemand userspace powersave performance schedutil\n",
        # all CPUs of policy2 offline: affected empty, the rest would fail with EBUSY
        "cpufreq/policy2/affected_cpus": "\n",
        "cpufreq/policy2/related_cpus": "2 3\n",
        "cpufreq/policy10/affected_cpus": "10\n",
        "cpufreq/policy10/scaling_governor": "powersave\n",
        "cpufreq/policy10/scaling_available_governors": "performance powersave\n",
        "cpufreq/policy10/energy_performance_preference": "balance_performance\n",
        "cpufreq/policy10/energy_performance_available_preferences":
            "default performance balance_performance balance_power power \n",
        "cpufreq/ondemand": None,
    })
    found = cpu_sysfs.policies(str(tmp_path))
    assert [p.name for p in found] == ["policy0", "policy2", "policy10"]
    p0, p2, p10 = found
    assert p0.active and p0.cpus == [0, 1] and p0.driver == "acpi-cpufreq" and p0.governor == "schedutil"
    assert "performance" in p0.available_governors and p0.epp is None and p0.available_epp == []
    assert not p2.active and p2.related == [2, 3] and p2.governor is None
    assert p10.related == [10]  # no related_cpus file: the affected ones
    assert p10.epp == "balance_performance"
    assert p10.available_epp == ["default", "performance", "balance_performance", "balance_power", "power"]
    assert p10.attr_path("scaling_governor") == str(tmp_path / "cpufreq/policy10/scaling_governor")


def test_no_cpufreq_directory_is_no_policies(tmp_path):
    write_tree(tmp_path, {"cpu0": None})
    assert cpu_sysfs.policies(str(tmp_path)) == []


def test_write_attr_writes_one_line(tmp_path):
    path = tmp_path / "disable"
    path.write_text("0\n")
    cpu_sysfs.write_attr(str(path), 1)
    assert read(path) == "1\n"
    assert cpu_sysfs.read_attr(str(path)) == "1"
    assert cpu_sysfs.read_attr(str(tmp_path / "absent")) is None


def test_unreadable_attribute_names_the_errno(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(cpu_sysfs.CpuSysfsError) as exc:
        cpu_sysfs.read_attr(str(tmp_path / "dir"))
    assert "EISDIR 21" in str(exc.value)


def _policy_tree(tmp_path):
    write_tree(tmp_path, {
        "cpu0": None, "cpu1": None, "cpu2": None,
        "cpufreq/policy0/affected_cpus": "0\n",
        "cpufreq/policy0/related_cpus": "0\n",
        "cpufreq/policy0/scaling_governor": "powersave\n",
        "cpufreq/policy1/affected_cpus": "1\n",
        "cpufreq/policy1/related_cpus": "1 2\n",
        "cpufreq/policy1/scaling_governor": "powersave\n",
    })
    os.symlink("../cpufreq/policy1", str(tmp_path / "cpu1/cpufreq"))
    os.symlink("../cpufreq/policy1", str(tmp_path / "cpu2/cpufreq"))
    os.symlink("../cpufreq/policy0", str(tmp_path / "cpu0/cpufreq"))


def _refuse(monkeypatch, fragment, number):
    real = fileops.read_text

    def reader(path):
        if fragment in path:
            raise OSError(number, os.strerror(number), path)
        return real(path)
    monkeypatch.setattr(fileops, "read_text", reader)


@pytest.mark.parametrize("number", [errno.EBUSY, errno.ENODEV])
def test_a_policy_answering_ebusy_is_inactive(tmp_path, monkeypatch, number):
    # Linux 5.19+: every attribute of a policy whose CPUs are all offline answers EBUSY
    _policy_tree(tmp_path)
    _refuse(monkeypatch, "/policy1/", number)
    p0, p1 = cpu_sysfs.policies(str(tmp_path))
    assert p0.active and p0.inactive_reason is None
    assert not p1.active and p1.cpus == [] and p1.governor is None
    assert p1.related == [1, 2]  # from the cpuN/cpufreq links
    assert p1.inactive_reason == "the kernel refuses to show it: cannot read %s: %s %d (%s)" % (
        tmp_path / "cpufreq/policy1/affected_cpus", errno.errorcode[number], number, os.strerror(number))


def test_a_busy_policy_without_links_is_named_by_its_number(tmp_path, monkeypatch):
    write_tree(tmp_path, {"cpu0": None, "cpufreq/policy4/affected_cpus": "4\n"})
    _refuse(monkeypatch, "/policy4/", errno.EBUSY)
    (policy,) = cpu_sysfs.policies(str(tmp_path))
    assert not policy.active and policy.related == [4]


def test_a_policy_going_inactive_between_two_reads(tmp_path, monkeypatch):
    # affected_cpus still read, the governor not: the CPU went offline in between
    _policy_tree(tmp_path)
    _refuse(monkeypatch, "/policy1/scaling_governor", errno.EBUSY)
    _p0, p1 = cpu_sysfs.policies(str(tmp_path))
    assert not p1.active and "scaling_governor: EBUSY 16" in p1.inactive_reason


def test_an_empty_affected_cpus_says_why(tmp_path):
    _policy_tree(tmp_path)
    write_tree(tmp_path, {"cpufreq/policy1/affected_cpus": "\n"})
    _p0, p1 = cpu_sysfs.policies(str(tmp_path))
    assert not p1.active and p1.inactive_reason == "affected_cpus is empty" and p1.related == [1, 2]


@pytest.mark.parametrize("number", [errno.EIO, errno.EACCES])
def test_other_policy_read_errors_are_errors(tmp_path, monkeypatch, number):
    _policy_tree(tmp_path)
    _refuse(monkeypatch, "/policy1/affected_cpus", number)
    with pytest.raises(cpu_sysfs.CpuSysfsError) as exc:
        cpu_sysfs.policies(str(tmp_path))
    assert exc.value.errno == number
    assert exc.value.path == str(tmp_path / "cpufreq/policy1/affected_cpus")
    assert str(exc.value).startswith("cannot read %s: %s" % (exc.value.path, errno.errorcode[number]))
