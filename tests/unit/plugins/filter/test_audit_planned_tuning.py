"""audit_planned_tuning: the audit's plan from one host_tuning result (plan, else result, else not run)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.audit_planned_tuning import audit_planned_tuning

MODULES = {"runtime": ["sysctl_profile", "lxc_memlock", "nvidia_peermem"], "reboot_required": ["kernel_cmdline"]}
SYSCTL_PLAN = {"changed": True, "changes": [{"kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}]}
CMDLINE_DONE = {"changed": True, "reboot_required": True, "pending": ["iommu=pt"],
                "changes": [{"kind": "value", "target": "iommu", "before": None, "after": "pt"}]}


def result(container=False, **kw):
    out = {"facts": {"host": {"container": {"detected": {"value": container}}}}}
    out.update(kw)
    return out


def test_plan_first_then_applied_result_then_not_run():
    planned = audit_planned_tuning(result(plan={"sysctl_profile": SYSCTL_PLAN},
                                          modules={"sysctl_profile": {"changed": False}, "kernel_cmdline": CMDLINE_DONE}),
                                   MODULES)
    assert list(planned) == ["runtime", "reboot_required"]
    assert planned["runtime"]["sysctl_profile"]["records"] == SYSCTL_PLAN["changes"]
    assert planned["runtime"]["lxc_memlock"]["status"] == "not_run"
    assert planned["reboot_required"]["kernel_cmdline"]["reboot_required"] is True
    assert planned["reboot_required"]["kernel_cmdline"]["pending"] == ["iommu=pt"]


def test_in_a_container_every_module_is_skipped_unless_asked():
    tuning = result(container=True, plan={"sysctl_profile": SYSCTL_PLAN})
    skipped = audit_planned_tuning(tuning, MODULES)
    assert {entry["status"] for phase in skipped.values() for entry in phase.values()} == {"skipped"}
    assert "host role runs this module on its host" in skipped["runtime"]["sysctl_profile"]["msg"]
    planned = audit_planned_tuning(tuning, MODULES, True)
    assert planned["runtime"]["sysctl_profile"]["records"] == SYSCTL_PLAN["changes"]


def test_no_result_reports_nothing_run():
    planned = audit_planned_tuning(None, {"runtime": ["sysctl_profile"]})
    assert planned == {"runtime": {"sysctl_profile": {
        "status": "not_run", "records": [], "reboot_required": False, "restart_required": False,
        "restart_required_for": [], "pending": [], "skipped_keys": {}, "msg": "the task did not run"}}}


@pytest.mark.parametrize("modules, word", [(["sysctl_profile"], "list"), ({"runtime": "sysctl_profile"}, "str")])
def test_bad_module_lists_are_refused_naming_the_type(modules, word):
    with pytest.raises(AnsibleFilterError, match=word):
        audit_planned_tuning(result(), modules)
