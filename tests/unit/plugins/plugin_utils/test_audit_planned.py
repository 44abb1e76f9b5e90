"""gpufleet.tuning.audit_planned: what each tag would change is the check-mode results' change
records, item by item for a looped task, and nothing else of a result (never the diff)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_planned import audit_planned
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases as cases


def one(result, phase="runtime", module="m"):
    return audit_planned({phase: {module: result}})[phase][module]


def test_the_records_are_the_plan_and_the_diff_is_never_read():
    swappiness = records.value("sysctl", "vm.swappiness", "60", "10")
    entry = one({"changed": True, "changes": [swappiness],
                 "diff": [{"before": "vm.swappiness = 60\n", "after": "vm.swappiness = 10\nkernel.x = 1\n"}]})
    assert entry == {"status": "ok", "records": [swappiness], "reboot_required": False, "restart_required": False,
                     "restart_required_for": [], "pending": [], "skipped_keys": {}, "msg": None}
    # changed without records: no record is made up
    assert one({"changed": True, "diff": [{"before": "a", "after": "b"}]})["records"] == []


def test_a_looped_task_gives_every_item_its_records_and_names_who_restarts():
    first = records.value("lxc_memlock", "/etc/pve/lxc/101.conf lxc.prlimit.memlock", None, "unlimited")
    second = records.value("lxc_memlock", "/etc/pve/lxc/103.conf lxc.prlimit.memlock", None, "unlimited")
    entry = one({"changed": True, "results": [
        {"changes": [first], "container_name": "101", "restart_required": True, "pending": False},
        {"changes": [second], "container_name": "103", "restart_required": False, "pending": False},
        {"changes": [], "container_name": "104", "pending": True, "pending_reason": "locked by backup"},
    ]})
    assert entry["records"] == [first, second]
    assert entry["restart_required"] is True and entry["restart_required_for"] == ["101"]
    assert entry["pending"] == ["104: locked by backup"]
    assert entry["status"] == "ok"


@pytest.mark.parametrize("result, status, msg", [
    ({}, "not_run", "the task did not run"),
    ({"skipped": True, "false_condition": "host_pcie_mrrs_enabled | bool"}, "skipped",
     "not enabled here (host_pcie_mrrs_enabled | bool)"),
    ({"skipped": True, "changed": False, "changes": [], "msg": "no boot loader configuration found"}, "skipped",
     "no boot loader configuration found"),
    ({"failed": True, "msg": "MLNX_OFED ib_core is missing"}, "failed", "MLNX_OFED ib_core is missing"),
    ({"skipped": True, "results": []}, "skipped", "nothing to do (an empty loop)"),
    ({"results": [{"failed": True, "msg": "locked", "container_name": "101"}, {"changes": []}]}, "failed", "101: locked"),
    ({"results": [{"skipped": True, "false_condition": "x"}, {"skipped": True, "false_condition": "x"}]}, "skipped",
     "not enabled here (x)"),
])
def test_why_nothing_could_be_planned(result, status, msg):
    entry = one(result)
    assert (entry["status"], entry["msg"]) == (status, msg)


def test_pending_reboots_and_what_was_left_out_are_kept():
    entry = one({"changes": [], "reboot_required": True, "pending": ["iommu=pt (running: not set)"],
                 "skipped_keys": {"iommu=pt": "refused on NVIDIA Blackwell GPU"}}, "reboot_required", "kernel_cmdline")
    assert entry["reboot_required"] is True
    assert entry["pending"] == ["iommu=pt (running: not set)"]
    assert entry["skipped_keys"] == {"iommu=pt": "refused on NVIDIA Blackwell GPU"}


def test_the_fixture_plans():
    plan = audit_planned(cases.fixture("untuned")["results"])
    assert sorted(plan) == ["reboot_required", "runtime"]
    assert len(plan["runtime"]["sysctl_profile"]["records"]) == 10
    assert plan["reboot_required"]["kernel_cmdline"]["reboot_required"] is True
    plan = audit_planned(cases.fixture("h200-nvlink")["results"])
    assert plan["reboot_required"]["kernel_cmdline"]["status"] == "skipped"
    assert plan["runtime"]["lxc_memlock"]["status"] == "skipped"


@pytest.mark.parametrize("data, fragment", [
    ([], "audit_planned expects {phase: {module: result}}"),
    ({"runtime": []}, "phase 'runtime' must map module names to results"),
    ({"runtime": {"m": {"changes": "x"}}}, "a result's changes must be a list of records"),
])
def test_bad_input_is_refused(data, fragment):
    with pytest.raises(AnsibleFilterError) as exc:
        audit_planned(data)
    assert fragment in str(exc.value)
