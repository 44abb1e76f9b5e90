"""verify_failures reads the read-backs' structured change records, and nothing else, for drift.

Fixtures are results as the modules return them in check mode: ``changes`` built with
module_utils/common/records.py, beside the other fields (a rendered ``diff``, ``skipped_keys``,
``restart_required``...) that must not turn into drift lines.
"""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.verify_failures import verify_failures
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records


def judge(readback, skipped_in_run=None, p2p=None):
    data = {"p2p": p2p or {}, "readback": readback}
    if skipped_in_run is not None:
        data["skipped_in_run"] = skipped_in_run
    return verify_failures(data)


def test_each_record_is_one_drift_line_worded_as_a_planned_change():
    result = {"changed": True, "changes": [
        records.value("sysctl", "vm.swappiness", "60", "10"),
        records.file_change("sysctl", "/etc/sysctl.d/90-gpufleet-inference.conf", None, "vm.swappiness = 10\n"),
    ]}
    peermem = {"changed": True, "changes": [records.module_change("peermem", "nvidia_peermem", False, True)]}
    cpu = {"changed": True, "changes": [records.service_change("cpu_power", "gpufleet-cpu-power.service",
                                                               "disabled", "enabled")]}
    assert judge({"sysctl_profile": result, "nvidia_peermem": peermem, "cpu_power": cpu}) == [
        "drift: cpu_power: would change gpufleet-cpu-power.service: disabled -> enabled",
        "drift: nvidia_peermem: would load nvidia_peermem",
        "drift: sysctl_profile: would set vm.swappiness: 60 -> 10",
        "drift: sysctl_profile: would write /etc/sysctl.d/90-gpufleet-inference.conf",
    ]


def test_nothing_but_the_records_becomes_drift():
    """The rendered diff, skipped keys, a pending reboot or restart: not drift lines."""
    result = {
        "changed": True,
        "changes": [records.value("pcie", "0000:17:00.0 max_read_request_size", "512", "4096")],
        "diff": [{"before": "vm.swappiness = 1\n", "after": "vm.swappiness = 99\n", "before_header": "x"}],
        "skipped_keys": {"kernel.nmi_watchdog": "cannot be written here"},
        "reboot_required": True,
        "restart_required": True,
        "msg": "would set vm.swappiness",
    }
    assert judge({"pcie_maxreadreq": result}) == [
        "drift: pcie_maxreadreq: would set 0000:17:00.0 max_read_request_size: 512 -> 4096"]


def test_no_record_no_drift_even_with_a_pending_restart():
    assert judge({"lxc_memlock": {"changed": False, "changes": [], "restart_required": True,
                                  "diff": [{"before": "a", "after": "b"}]}}) == []


def test_a_change_without_records_is_reported_not_passed():
    """A module that says it would change something must say what; it never passes silently."""
    assert judge({"cpu_power": {"changed": True, "diff": [{"before": "a", "after": "b"}]}}) == [
        "drift: cpu_power: the read-back reports a change but returned no change records"]


def test_a_looped_read_back_names_each_container():
    looped = {"changed": True, "results": [
        {"changed": True, "container_name": "web", "item": {"label": "101"},
         "changes": [records.value("lxc_memlock", "/etc/pve/lxc/101.conf lxc.prlimit.memlock", None, "unlimited")]},
        {"changed": False, "container_name": "db", "changes": []},
        {"failed": True, "msg": "cannot read /etc/pve/lxc/103.conf", "container_name": "batch"},
        {"skipped": True, "false_condition": "x"},
    ]}
    assert judge({"lxc_memlock": looped}) == [
        "drift: lxc_memlock web: would set /etc/pve/lxc/101.conf lxc.prlimit.memlock: (none) -> unlimited",
        "lxc_memlock batch: read-back failed: cannot read /etc/pve/lxc/103.conf",
    ]


def test_keys_the_apply_skipped_are_not_drift_again():
    """The host role's summary reported them (a kernel that refuses the write); other records
    of the same module still count."""
    result = {"changed": True, "changes": [records.value("sysctl", "kernel.nmi_watchdog", "1", "0"),
                                           records.value("sysctl", "vm.swappiness", "60", "10")]}
    skipped = {"sysctl_profile": {"kernel.nmi_watchdog": "the kernel refused the write: ENOTSUPP"}}
    assert judge({"sysctl_profile": result}, skipped) == ["drift: sysctl_profile: would set vm.swappiness: 60 -> 10"]
    only = {"changed": True, "changes": [records.value("sysctl", "kernel.nmi_watchdog", "1", "0")]}
    assert judge({"sysctl_profile": only}, skipped) == []
    # Another module's skipped keys do not excuse this one's record.
    assert judge({"sysctl_profile": only}, {"cpu_power": {"kernel.nmi_watchdog": "x"}}) == [
        "drift: sysctl_profile: would set kernel.nmi_watchdog: 1 -> 0"]


def test_read_backs_that_did_not_run_or_failed():
    assert judge({"pcie_maxreadreq": {"changed": False, "skipped": True, "false_condition": "host_pcie_mrrs_enabled | bool"},
                  "cpu_power": {"skipped": True, "msg": "nothing to do on this machine"},
                  "sysctl_profile": {}}) == []
    assert judge({"nvidia_peermem": {"failed": True, "msg": "ib_core lacks ib_register_peer_memory_client",
                                     "changes": [records.module_change("peermem", "nvidia_peermem", False, True)]}}) == [
        "nvidia_peermem: read-back failed: ib_core lacks ib_register_peer_memory_client"]


def test_p2p_lines_come_first():
    p2p = {"shortfalls": [{"pair": "0->1", "reason": "120.0 GB/s over nvlink is below the 380.0 GB/s floor"}]}
    drift = {"changed": True, "changes": [records.value("sysctl", "vm.swappiness", "60", "10")]}
    assert judge({"sysctl_profile": drift}, p2p=p2p) == [
        "p2p 0->1: 120.0 GB/s over nvlink is below the 380.0 GB/s floor",
        "drift: sysctl_profile: would set vm.swappiness: 60 -> 10",
    ]


@pytest.mark.parametrize("data, fragment", [
    ([], "expects a dict"),
    ({"readback": [{"changed": True}]}, "readback must be a dict"),
    ({"readback": {}, "skipped_in_run": ["vm.swappiness"]}, "skipped_in_run must be a dict"),
    ({"readback": {"sysctl_profile": {"changed": True, "changes": "vm.swappiness 60 -> 10"}}}, "must be a list of records"),
])
def test_malformed_input_is_refused(data, fragment):
    with pytest.raises(AnsibleFilterError) as exc:
        verify_failures(data)
    assert fragment in str(exc.value)
