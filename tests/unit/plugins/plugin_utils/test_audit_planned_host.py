"""audit_planned_host: the audit's plan from the host role's results and plan (applied, else
planned, else not run; every part skipped in a container)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_planned import audit_planned_host

PARTS = {"runtime": ["sysctl_profile", "lxc_memlock", "nvidia_peermem"], "reboot_required": ["kernel_cmdline"]}
SYSCTL_APPLIED = {"changed": True, "changes": [{"kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}]}
SYSCTL_PLAN = {"changed": True, "changes": [{"kind": "value", "target": "vm.swappiness", "before": "30", "after": "10"}]}
CMDLINE_PLAN = {"changed": True, "reboot_required": True, "pending": ["iommu=pt"],
                "changes": [{"kind": "value", "target": "iommu", "before": None, "after": "pt"}]}
MEMLOCK_APPLIED = {"changed": True, "changes": [{"kind": "value", "target": "a"}],
                   "results": [{"container_name": "101", "changed": True, "restart_required": True,
                                "changes": [{"kind": "value", "target": "/etc/pve/lxc/101.conf lxc.prlimit.memlock",
                                             "before": None, "after": "unlimited"}]}]}


def test_applied_first_then_plan_then_not_run():
    planned = audit_planned_host({"sysctl_profile": SYSCTL_APPLIED, "lxc_memlock": MEMLOCK_APPLIED},
                                 {"sysctl_profile": SYSCTL_PLAN, "kernel_cmdline": CMDLINE_PLAN}, PARTS)
    assert list(planned) == ["runtime", "reboot_required"]
    assert planned["runtime"]["sysctl_profile"]["records"] == SYSCTL_APPLIED["changes"]
    assert planned["runtime"]["nvidia_peermem"]["status"] == "not_run"
    assert planned["reboot_required"]["kernel_cmdline"]["reboot_required"] is True
    assert planned["reboot_required"]["kernel_cmdline"]["pending"] == ["iommu=pt"]


def test_a_selection_of_containers_reports_each_containers_records_once():
    memlock = audit_planned_host({"lxc_memlock": MEMLOCK_APPLIED}, {}, {"runtime": ["lxc_memlock"]})["runtime"]["lxc_memlock"]
    assert memlock["records"] == MEMLOCK_APPLIED["results"][0]["changes"]
    assert memlock["restart_required_for"] == ["101"]


def test_in_a_container_every_part_is_skipped():
    skipped = audit_planned_host({}, {"sysctl_profile": SYSCTL_PLAN}, PARTS, True)
    assert {entry["status"] for phase in skipped.values() for entry in phase.values()} == {"skipped"}
    assert "host role runs this module on its host" in skipped["runtime"]["sysctl_profile"]["msg"]


def test_nothing_reports_nothing_run():
    planned = audit_planned_host(None, None, {"runtime": ["sysctl_profile"]})
    assert planned == {"runtime": {"sysctl_profile": {
        "status": "not_run", "records": [], "reboot_required": False, "restart_required": False,
        "restart_required_for": [], "pending": [], "skipped_keys": {}, "msg": "the task did not run"}}}


@pytest.mark.parametrize("parts, word", [(["sysctl_profile"], "list"), ({"runtime": "sysctl_profile"}, "str")])
def test_bad_part_lists_are_refused_naming_the_type(parts, word):
    with pytest.raises(AnsibleFilterError, match=word):
        audit_planned_host({}, {}, parts)
