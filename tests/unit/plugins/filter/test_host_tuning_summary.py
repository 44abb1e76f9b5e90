"""host_tuning_summary: the host role's end-of-run lines from the tuning call's result alone."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.host_tuning_summary import host_tuning_summary

SYSCTL = {
    "changed": True,
    "changes": [{"kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"},
                {"kind": "file", "target": "/etc/sysctl.d/90-gpufleet-inference.conf", "before": None,
                 "after": {"sha256": "ab"}}],
    "skipped_keys": {"kernel.nmi_watchdog": "the kernel refuses writes (no PMU)"},
}
CMDLINE = {"changed": True, "reboot_required": True,
           "changes": [{"kind": "value", "target": "iommu", "before": None, "after": "pt"}]}
DISCOVERY = {"changed": False, "lxc_host": True, "managers": ["proxmox"], "sources": ["/etc/pve/lxc"],
             "unmatched": [], "containers": [
                 {"id": "101", "manager": "proxmox", "vmid": 101, "container_name": "101", "hostname": "llm-01",
                  "path": "/etc/pve/lxc/101.conf", "lxc_path": None, "selected": True, "reason": "GPU passed through"}]}
MEMLOCK = {"changed": True, "results": [
    {"changed": True, "container_name": "101", "restart_required": True, "limit_running": "65536",
     "item": {"vmid": 101, "label": "101 (llm-01)", "source": "selected: GPU passed through"},
     "changes": [{"kind": "value", "target": "lxc.prlimit.memlock", "before": None, "after": "unlimited"}]}]}


def tuning(**modules):
    return {"changed": True, "modules": modules}


def test_parts_are_labelled_by_tag_in_role_order():
    lines = host_tuning_summary(tuning(kernel_cmdline=CMDLINE, sysctl_profile=SYSCTL))
    assert lines == [
        "sysctl: set vm.swappiness: 60 -> 10",
        "sysctl: wrote /etc/sysctl.d/90-gpufleet-inference.conf",
        "sysctl: skipped kernel.nmi_watchdog: the kernel refuses writes (no PMU)",
        "kernel_cmdline: set iommu: (none) -> pt",
        "kernel_cmdline: a reboot is required for this to take effect",
    ]


def test_check_mode_words_the_plan():
    lines = host_tuning_summary(tuning(sysctl_profile=SYSCTL), True)
    assert lines[0] == "sysctl: would set vm.swappiness: 60 -> 10"
    assert lines[1] == "sysctl: would write /etc/sysctl.d/90-gpufleet-inference.conf"


def test_containers_follow_the_changes_and_restart_ok_is_passed_on():
    held = host_tuning_summary(tuning(lxc_containers=DISCOVERY, lxc_memlock=MEMLOCK), False, False)
    allowed = host_tuning_summary(tuning(lxc_containers=DISCOVERY, lxc_memlock=MEMLOCK), False, True)
    assert held[0] == "lxc_memlock 101: set lxc.prlimit.memlock: (none) -> unlimited"
    assert held[-1] != allowed[-1]
    assert any("101" in line and "restart" in line for line in held[1:])
    assert any("restarted at the end of the play" in line for line in allowed[1:])


def test_nothing_ran_says_nothing_changed():
    assert host_tuning_summary({}) == ["nothing changed"]
    assert host_tuning_summary(None, True) == ["nothing to change"]
    # A part that did not run (its tags not selected) says nothing.
    skipped = {"skipped": True, "false_condition": "x", "skip_reason": "Conditional result was False"}
    assert host_tuning_summary(tuning(sysctl_profile=skipped)) == ["nothing changed"]


@pytest.mark.parametrize("bad, word", [(["x"], "list"), ({"modules": ["x"]}, "list")])
def test_not_a_result_is_refused_naming_the_type(bad, word):
    with pytest.raises(AnsibleFilterError, match=word):
        host_tuning_summary(bad)
