import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.change_summary import change_summary


SYSCTL_RESULT = {
    "changed": True,
    "diff": [
        {"before_header": "sysctl runtime values (before)", "after_header": "sysctl runtime values (after)",
         "before": "kernel.numa_balancing = 0\nvm.swappiness = 60\n",
         "after": "kernel.numa_balancing = 0\nvm.swappiness = 10\n"},
        {"before_header": "/etc/sysctl.d/90-gpufleet-x.conf (absent)", "after_header": "/etc/sysctl.d/90-gpufleet-x.conf",
         "before": "", "after": "vm.swappiness = 10\n"},
        {"before_header": "/etc/sysctl.d/80-gpufleet-x.conf", "after_header": "/etc/sysctl.d/80-gpufleet-x.conf (absent)",
         "before": "vm.swappiness = 10\n", "after": ""},
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
    lines = change_summary({"cmdline": {"changed": True, "reboot_required": True, "diff": {
        "before_header": "/etc/default/grub", "after_header": "/etc/default/grub", "before": "a", "after": "b"}}}, True)
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
        {"changed": True, "restart_required": True, "diff": [
            {"before_header": "/etc/pve/lxc/101.conf", "after_header": "/etc/pve/lxc/101.conf", "before": "a", "after": "b"}]},
        {"changed": False, "diff": []},
        {"skipped": True, "false_condition": "x"},
    ]}
    assert change_summary({"lxc_memlock": looped}) == [
        "lxc_memlock: wrote /etc/pve/lxc/101.conf",
        "lxc_memlock: a restart is required for this to take effect",
    ]
