import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.changes import change_summary
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records


SYSCTL_RESULT = {
    "changed": True,
    # The rendered diff says something else on purpose: the summary reads the records only.
    "diff": [{"before_header": "x (before)", "after_header": "x (after)", "before": "a = 1\n", "after": "a = 2\n"}],
    "changes": [
        records.value("sysctl", "vm.swappiness", "60", "10"),
        records.file_change("sysctl", "/etc/sysctl.d/90-gpufleet-x.conf", None, "vm.swappiness = 10\n"),
        records.file_change("sysctl", "/etc/sysctl.d/80-gpufleet-x.conf", "vm.swappiness = 10\n", None),
    ],
    "skipped_keys": {"kernel.nmi_watchdog": "the kernel refused the write"},
}


def test_lines_for_changes_files_and_skips():
    lines = change_summary({"sysctl": SYSCTL_RESULT})
    assert lines == [
        "sysctl: set vm.swappiness: 60 -> 10",
        "sysctl: wrote /etc/sysctl.d/90-gpufleet-x.conf",
        "sysctl: removed /etc/sysctl.d/80-gpufleet-x.conf",
        "sysctl: skipped kernel.nmi_watchdog: the kernel refused the write",
    ]


def test_check_mode_wording_and_pending_reboot():
    lines = change_summary({"cmdline": {"changed": True, "reboot_required": True, "changes": [
        records.file_change("kernel_cmdline", "/etc/default/grub", "a", "b")]}}, True)
    assert lines == ["cmdline: would write /etc/default/grub", "cmdline: a reboot is required for this to take effect"]


def test_not_run_and_nothing_changed():
    assert change_summary({"a": {}, "b": {"skipped": True, "false_condition": "x"}}) == ["nothing changed"]
    assert change_summary({"a": {"changed": False, "diff": []}}, True) == ["nothing to change"]


def test_module_level_skip_and_failure():
    lines = change_summary({"p2p": {"skipped": True, "msg": "no NVIDIA driver"},
                            "pcie": {"failed": True, "msg": "device 0000:01:00.0 did not take MRRS 4096"}})
    assert lines == ["p2p: skipped: no NVIDIA driver", "pcie: FAILED: device 0000:01:00.0 did not take MRRS 4096"]


def test_rejects_non_dict():
    with pytest.raises(AnsibleFilterError):
        change_summary(["x"])


def test_looped_results_are_summarized_item_by_item():
    looped = {"changed": True, "results": [
        {"changed": True, "restart_required": True, "changes": [
            records.file_change("lxc_memlock", "/etc/pve/lxc/101.conf", "a", "b")]},
        {"changed": False, "diff": []},
        {"skipped": True, "false_condition": "x"},
    ]}
    assert change_summary({"lxc_memlock": looped}) == [
        "lxc_memlock: wrote /etc/pve/lxc/101.conf",
        "lxc_memlock: a restart is required for this to take effect",
    ]


def test_module_service_and_link_records():
    result = {"changed": True, "changes": [
        records.module_change("peermem", "nvidia_peermem", False, True),
        records.record("cpu_power", "file", "/etc/systemd/system/multi-user.target.wants/u.service",
                       None, {"link": "../u.service"}),
        records.service_change("cpu_power", "u.service", "disabled", "enabled"),
        records.value("pcie", "0000:41:00.0 MRRS", "512", None),
    ]}
    assert change_summary({"x": result}, True) == [
        "x: would load nvidia_peermem",
        "x: would link /etc/systemd/system/multi-user.target.wants/u.service -> ../u.service",
        "x: would change u.service: disabled -> enabled",
        "x: would set 0000:41:00.0 MRRS: 512 -> (none)",
    ]
