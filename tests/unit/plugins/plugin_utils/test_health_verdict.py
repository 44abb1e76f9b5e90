"""The health gate's judgement: health rules (severity H) with their actions, the verdict
(healthy, degraded, quarantined) under each policy, the shipped health rules on real-shaped
facts, and the Prometheus metrics of a verdict."""

import copy
import datetime
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import audit_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_metrics import health_metrics
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import health_verdict, summary_line

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
RULES = yaml.safe_load(open(REPO_ROOT + "/roles/audit/files/rules.yml"))
XID_CODES = yaml.safe_load(open(REPO_ROOT + "/roles/audit/vars/main/xid_codes.yml"))["__audit_xid_codes"]
THRESHOLDS = yaml.safe_load(open(REPO_ROOT + "/roles/audit/vars/main/main.yml"))["__audit_health_threshold_defaults"]
NOW = datetime.datetime(2026, 12, 7, 6, 0, 0, tzinfo=datetime.timezone.utc)


def env(value, source="/sys/x"):
    return {"value": value, "source": source}


def unknown(reason, source="nvml:x"):
    return {"value": None, "source": source, "unknown": reason}


def params(**overrides):
    health = dict(THRESHOLDS, xid_codes=XID_CODES, expected_gpus=None, expected_nvlinks=None)
    health.update(overrides)
    return {"health": health}


def gpu(index, bdf, **overrides):
    """A healthy H100 SXM as node_facts gives it, 18 NVLinks to NVSwitches."""
    links = [{"link": env(n), "active": env(True), "remote_type": env("switch"), "remote_bdf": unknown("vm"),
              "replay_errors": env(0), "recovery_errors": env(0), "crc_errors": env(0)} for n in range(18)]
    entry = {
        "index": env(index, "derived"), "bdf": env(bdf), "name": env("NVIDIA H100 80GB HBM3"),
        "device_id": env("10de:2330"), "nvml_status": env("ok"), "recovery_action": env("none"),
        "persistence_mode": env(True), "ecc_errors_uncorrected": env({"volatile": 0, "aggregate": 0}),
        "remapped_rows_pending": env(False), "remapped_rows_failure": env(False),
        "retired_pages": env({"multiple_single_bit_ecc": 0, "double_bit_ecc": 0}),
        "retired_pages_pending": env(False), "sram_uncorrected_volatile": env(0),
        "sram_uncorrected_aggregate": env(0), "sram_threshold_exceeded": env(False),
        "clock_event_reasons": env([]), "temperature_c": env(33),
        "pcie": {"link_width": env(16), "max_link_width": env(16), "link_speed_gts": env(32.0),
                 "max_link_speed_gts": env(32.0), "replay_count": env(0), "aer_correctable": env(0),
                 "aer_nonfatal": env(0), "aer_fatal": env(0), "aer_counts": env({}),
                 "path_aer": env([{"bdf": "0000:40:01.1", "correctable": 0, "nonfatal": 0, "fatal": 0}], "derived")},
        "nvlink": links, "nvlink_links": env(18, "derived"), "nvlink_active": env(18, "derived"),
        "nvlink_errors": env({"replay": 0, "recovery": 0, "crc": 0}, "derived"),
        "fabric_state": env("completed"), "fabric_status": env("ok"),
    }
    entry.update(overrides)
    return entry


def node(gpus=None, xid=None, **health):
    gpus = gpus if gpus is not None else [gpu(0, "0000:41:00.0"), gpu(1, "0000:c1:00.0")]
    section = {"gpus_pci": env(len(gpus)), "gpus_driver": env(len(gpus), "nvml:nvmlDeviceGetCount_v2"),
               "nvlink_most": env({"10de:2330": 18}, "derived"), "kernel_log": env("/dev/kmsg", "/dev/kmsg"),
               "kernel_log_complete": env(True, "/dev/kmsg"), "xid": env(xid or [], "/dev/kmsg"),
               "xid_total": env(sum(e["count"] for e in xid or []), "/dev/kmsg")}
    section.update(health)
    return {"gpus": gpus, "health": section,
            "driver": {"nvswitches": env(4), "fabricmanager_active": env(True), "persistenced_active": env(True),
                       "version": env("580.159.04"), "loaded": env(True)}}


def verdict(facts, policy="quarantine", **health_params):
    return health_verdict(facts, RULES, params=params(**health_params), policy=policy, host="gpu07", now=NOW)


def by_rule(result):
    return dict((f["rule"], f) for f in result["findings"])


# ------------------------------------------------------------------------------ the verdict

def test_a_healthy_node_is_healthy_and_every_health_rule_is_judged():
    result = verdict(node())
    assert result["status"] == "healthy" and result["actions"] == [] and not result["blocking"]
    assert result["proceed"] is True and result["quarantine"] is False
    assert result["counts"]["unknown"] == 0, result["unknown"]
    assert result["gpus"] == [
        {"index": 0, "bdf": "0000:41:00.0", "name": "NVIDIA H100 80GB HBM3", "status": "healthy", "actions": [],
         "findings": []},
        {"index": 1, "bdf": "0000:c1:00.0", "name": "NVIDIA H100 80GB HBM3", "status": "healthy", "actions": [],
         "findings": []}]
    assert result["time"] == "2026-12-07T06:00:00Z" and result["host"] == "gpu07"
    assert set(result["rules"]) >= {"gpu_remap_failure", "xid_events", "gpu_nvlink_down", "gpu_count_driver"}


def test_a_remapped_row_failure_quarantines_the_node_with_rma_on_that_gpu():
    facts = node(gpus=[gpu(0, "0000:41:00.0", remapped_rows_failure=env(True)), gpu(1, "0000:c1:00.0")])
    result = verdict(facts)
    assert result["status"] == "quarantined" and result["quarantine"] and not result["proceed"]
    assert result["actions"] == ["rma"]
    finding = by_rule(result)["gpu_remap_failure"]
    assert finding["severity"] == "H" and finding["action"] == "rma" and finding["blocking"] is True
    assert finding["item"] == "GPU 0 (0000:41:00.0)"
    assert [g["status"] for g in result["gpus"]] == ["quarantined", "healthy"]
    assert result["gpus"][0]["actions"] == ["rma"] and result["gpus"][0]["findings"] == ["gpu_remap_failure"]


def test_an_xid_79_quarantines_with_reboot_and_names_the_catalog_meaning():
    xid = [{"bdf": "0000:41:00.0", "gpu": 0, "code": 79, "count": 2, "first_s": 812.5, "last_s": 900.25,
            "last_message": "GPU has fallen off the bus."}]
    result = verdict(node(xid=xid))
    finding = by_rule(result)["xid_events"]
    assert finding["action"] == "reboot" and finding["blocking"]
    assert finding["item"] == "XID 79 on GPU 0 (0000:41:00.0)"
    assert "2 time(s), last at 900.25 s after boot" in finding["message"]
    assert "GPU has fallen off the bus." in finding["message"]
    assert XID_CODES["79"]["meaning"] in finding["message"]
    assert result["gpus"][0]["status"] == "quarantined"


def test_an_unknown_xid_code_is_reported_as_unknown_never_dropped():
    xid = [{"bdf": "0000:99:00.0", "gpu": None, "code": 9999, "count": 1, "first_s": 5.0, "last_s": 5.0,
            "last_message": "something new"}]
    result = verdict(node(xid=xid))
    finding = by_rule(result)["xid_events"]
    assert finding["action"] == "monitor" and finding["blocking"] is False
    assert "not in the XID catalog" in finding["message"]
    assert finding["item"] == "XID 9999 on 0000:99:00.0 (no GPU of this node has that address now)"
    assert result["status"] == "degraded" and result["proceed"] and not result["quarantine"]
    # the action of unknown codes is data
    assert by_rule(verdict(node(xid=xid), xid_unknown_action="drain"))["xid_events"]["action"] == "drain"


def test_xids_logged_before_xid_after_s_are_not_judged():
    xid = [{"bdf": "0000:41:00.0", "gpu": 0, "code": 48, "count": 1, "first_s": 100.0, "last_s": 100.0,
            "last_message": "DBE"}]
    assert by_rule(verdict(node(xid=xid)))["xid_events"]["action"] == "reset_gpu"
    result = verdict(node(xid=xid), xid_after_s=3600)
    assert "xid_events" not in by_rule(result) and result["status"] == "healthy"


def test_an_inventory_catalog_entry_changes_a_code_s_action_and_a_bad_one_is_refused():
    xid = [{"bdf": "0000:41:00.0", "gpu": 0, "code": 13, "count": 4, "first_s": 1.0, "last_s": 2.0,
            "last_message": "Graphics SM Warp Exception"}]
    codes = copy.deepcopy(XID_CODES)
    assert by_rule(verdict(node(xid=xid), xid_codes=codes))["xid_events"]["action"] == "monitor"
    codes["13"]["action"] = "drain"
    assert by_rule(verdict(node(xid=xid), xid_codes=codes))["xid_events"]["action"] == "drain"
    codes["13"]["action"] = "panic"
    with pytest.raises(AnsibleFilterError, match=r"xid_events.*XID 13 on GPU 0.*'panic', not one of monitor"):
        verdict(node(xid=xid), xid_codes=codes)


@pytest.mark.parametrize("recovery, action", [("gpu_reset", "reset_gpu"), ("drain_and_reset", "reset_gpu"),
                                              ("node_reboot", "reboot"), ("drain_p2p", "drain"),
                                              ("recover_imex_domain", "drain"), ("action_9", "drain")])
def test_the_driver_s_recovery_action_maps_to_an_action(recovery, action):
    facts = node(gpus=[gpu(0, "0000:41:00.0", recovery_action=env(recovery, "nvml:nvmlDeviceGetFieldValues"))])
    assert by_rule(verdict(facts))["gpu_recovery_action"]["action"] == action


def test_a_gpu_the_driver_lost_and_a_missing_gpu_ask_for_a_reboot():
    facts = node(gpus=[gpu(0, "0000:41:00.0", nvml_status=env("gpu_is_lost"))])
    facts["health"]["gpus_driver"] = env(0, "nvml:nvmlDeviceGetCount_v2")
    found = by_rule(verdict(facts))
    assert found["gpu_lost"]["action"] == "reboot" and found["gpu_count_driver"]["action"] == "reboot"
    assert "the driver sees 0 of the 1 NVIDIA GPUs" in found["gpu_count_driver"]["message"]
    assert "gpu_count_expected" not in found  # no expectation given
    found = by_rule(verdict(node(), expected_gpus=8))
    assert "2 NVIDIA GPUs on the PCI bus, the inventory expects 8" in found["gpu_count_expected"]["message"]


def test_nvlink_down_against_the_switch_board_and_against_peers():
    sick = gpu(1, "0000:c1:00.0", nvlink_active=env(16, "derived"))
    found = by_rule(verdict(node(gpus=[gpu(0, "0000:41:00.0"), sick])))
    assert found["gpu_nvlink_down"]["action"] == "drain"
    assert found["gpu_nvlink_down"]["item"] == "GPU 1 (0000:c1:00.0)"
    assert "16 of its 18 NVLinks are active, 18 expected" in found["gpu_nvlink_down"]["message"]
    # without NVSwitches (a VM, NVL bridges) the peers' most is the expectation: 16 of 16 seen on all is fine
    facts = node(gpus=[gpu(0, "0000:41:00.0", nvlink_active=env(12, "derived")),
                       gpu(1, "0000:c1:00.0", nvlink_active=env(12, "derived"))])
    facts["driver"]["nvswitches"] = env(0)
    facts["health"]["nvlink_most"] = env({"10de:2330": 12}, "derived")
    assert "gpu_nvlink_down" not in by_rule(verdict(facts))
    assert "gpu_nvlink_down" in by_rule(verdict(facts, expected_nvlinks=18))


def test_pcie_aer_thresholds_are_data_and_bridges_above_count():
    path = env([{"bdf": "0000:40:01.1", "correctable": 150, "nonfatal": 0, "fatal": 1}], "derived")
    sick = gpu(0, "0000:41:00.0")
    sick["pcie"] = dict(sick["pcie"], path_aer=path, aer_correctable=env(5))
    found = by_rule(verdict(node(gpus=[sick])))
    assert found["gpu_pcie_aer_fatal"]["action"] == "drain" and found["gpu_pcie_aer_fatal"]["blocking"]
    assert found["gpu_pcie_aer_correctable"]["action"] == "monitor"
    assert not found["gpu_pcie_aer_correctable"]["blocking"]
    found = by_rule(verdict(node(gpus=[sick]), aer_correctable_max=1000, aer_fatal_max=1))
    assert "gpu_pcie_aer_correctable" not in found and "gpu_pcie_aer_fatal" not in found


def test_hardware_slowdown_is_health_and_the_software_power_cap_is_not():
    hw = gpu(0, "0000:41:00.0", clock_event_reasons=env(["hw_power_brake_slowdown", "sw_power_cap"]))
    found = by_rule(verdict(node(gpus=[hw])))
    assert found["gpu_hw_slowdown"]["action"] == "drain"
    assert "hw_power_brake_slowdown" in found["gpu_hw_slowdown"]["message"]
    sw = gpu(0, "0000:41:00.0", clock_event_reasons=env(["sw_power_cap"]))
    assert "gpu_hw_slowdown" not in by_rule(verdict(node(gpus=[sw])))


def test_unknown_facts_leave_rules_unknown_never_a_finding():
    facts = node(gpus=[gpu(0, "0000:41:00.0", remapped_rows_failure=unknown("Not Supported"),
                           nvml_status=unknown("NVML unavailable"))])
    facts["health"]["xid"] = unknown("/dev/kmsg: Operation not permitted", "/dev/kmsg")
    result = verdict(facts)
    assert result["status"] == "healthy"
    unknown_rules = set(u["rule"] for u in result["unknown"])
    assert {"gpu_remap_failure", "gpu_lost", "xid_events"} <= unknown_rules
    assert summary_line(result) == "healthy (%d health rule(s) could not be judged)" % result["counts"]["unknown"]


@pytest.mark.parametrize("policy, quarantine, proceed", [("quarantine", True, False), ("stop", True, False),
                                                         ("report", False, True)])
def test_policies(policy, quarantine, proceed):
    facts = node(gpus=[gpu(0, "0000:41:00.0", remapped_rows_pending=env(True))])
    result = verdict(facts, policy=policy)
    assert result["status"] == "quarantined" and result["blocking"]
    assert (result["quarantine"], result["proceed"], result["policy"]) == (quarantine, proceed, policy)


def test_bad_policy_and_phase_are_refused():
    with pytest.raises(AnsibleFilterError, match="gpufleet_health_policy must be one of quarantine, stop, report, got 'maybe'"):
        verdict(node(), policy="maybe")
    with pytest.raises(AnsibleFilterError, match="health phase must be one of"):
        health_verdict(node(), RULES, params=params(), phase="later")


def test_actions_are_heaviest_first_and_counted():
    facts = node(gpus=[gpu(0, "0000:41:00.0", remapped_rows_failure=env(True), remapped_rows_pending=env(True)),
                       gpu(1, "0000:c1:00.0", nvml_status=env("gpu_is_lost"))])
    result = verdict(facts)
    assert result["actions"] == ["rma", "reboot", "reset_gpu"]
    assert result["counts"]["by_action"] == {"monitor": 0, "reset_gpu": 1, "reboot": 1, "drain": 0, "rma": 1}
    assert summary_line(result) == "quarantined: rma, reboot, reset_gpu (3 finding(s))"


# ------------------------------------------------------------------------------ rules with actions

def _rule(**overrides):
    base = {"id": "test_health", "severity": "H", "action": "reboot", "title": "T", "facts": {"v": "x.v"},
            "when": "v == `1`", "message": "v {v}", "fix": {"class": "manual", "steps": "do"}, "rationale": "r"}
    base.update(overrides)
    return dict((k, v) for k, v in base.items() if v is not None)


def test_a_health_rule_needs_a_known_action_and_only_health_rules_have_one():
    with pytest.raises(AnsibleFilterError, match=r"'test_health': a health rule needs an action.*got None"):
        audit_rules.load_rules([_rule(action=None)])
    with pytest.raises(AnsibleFilterError, match=r"got 'explode'"):
        audit_rules.load_rules([_rule(action="explode")])
    with pytest.raises(AnsibleFilterError, match=r"action '\{nope\}' names no fact or value"):
        audit_rules.load_rules([_rule(action="{nope}")])
    with pytest.raises(AnsibleFilterError, match=r"only a health rule \(severity H\) has an action"):
        audit_rules.load_rules([_rule(severity="P1")])
    with pytest.raises(AnsibleFilterError, match=r"blocking must be true or false, got 'yes'"):
        audit_rules.load_rules([_rule(blocking="yes")])


def test_blocking_defaults_by_action_and_can_be_set():
    facts = {"x": {"v": env(1)}}
    found = audit_rules.audit_rules(facts, [_rule()])["findings"][0]
    assert (found["action"], found["blocking"]) == ("reboot", True)
    found = audit_rules.audit_rules(facts, [_rule(action="monitor")])["findings"][0]
    assert (found["action"], found["blocking"]) == ("monitor", False)
    found = audit_rules.audit_rules(facts, [_rule(blocking=False)])["findings"][0]
    assert (found["action"], found["blocking"]) == ("reboot", False)


def test_health_findings_come_first_and_are_counted():
    facts = {"x": {"v": env(1)}}
    result = audit_rules.audit_rules(facts, [_rule(id="p", severity="P0", action=None), _rule()])
    assert [f["severity"] for f in result["findings"]] == ["H", "P0"]
    assert result["counts"]["H"] == 1 and result["worst"] == "H"


# ------------------------------------------------------------------------------ metrics

def test_metrics_of_a_quarantined_node_keep_every_series():
    xid = [{"bdf": "0000:41:00.0", "gpu": 0, "code": 79, "count": 2, "first_s": 1.0, "last_s": 2.0,
            "last_message": "GPU has fallen off the bus."}]
    result = verdict(node(xid=xid))
    out = health_metrics(result, audit={"counts": {"H": 1, "P0": 3, "P1": 0, "P2": 2}},
                         verify={"recorded_drift": [{"target": "vm.swappiness"}]}, tuned=True)
    metrics = dict((m["name"], m["samples"]) for m in out["metrics"])
    assert metrics["gpufleet_health_status"] == [{"labels": {"status": "healthy"}, "value": 0},
                                                 {"labels": {"status": "degraded"}, "value": 0},
                                                 {"labels": {"status": "quarantined"}, "value": 1}]
    assert {s["labels"]["action"]: s["value"] for s in metrics["gpufleet_health_findings"]} == {
        "monitor": 0, "reset_gpu": 0, "reboot": 1, "drain": 0, "rma": 0}
    assert metrics["gpufleet_gpu_xid_events"] == [{"labels": {"gpu": "0", "bdf": "0000:41:00.0", "code": "79"},
                                                   "value": 2}]
    assert {s["labels"]["severity"]: s["value"] for s in metrics["gpufleet_audit_findings"]} == {
        "H": 1, "P0": 3, "P1": 0, "P2": 2}
    assert metrics["gpufleet_drift_items"] == [{"labels": {}, "value": 1}]
    epoch = int(NOW.timestamp())
    assert metrics["gpufleet_last_audit_timestamp_seconds"][0]["value"] == epoch
    assert metrics["gpufleet_last_tuning_timestamp_seconds"][0]["value"] == epoch
    assert out["heartbeat"] == ["gpufleet_last_audit_timestamp_seconds", "gpufleet_last_tuning_timestamp_seconds"]
    statuses = [s for s in metrics["gpufleet_gpu_health_status"] if s["value"] == 1]
    assert [(s["labels"]["gpu"], s["labels"]["status"]) for s in statuses] == [("0", "quarantined"), ("1", "healthy")]


def test_metrics_without_an_audit_or_a_tuning_leave_those_out_and_refuse_a_non_verdict():
    names = [m["name"] for m in health_metrics(verdict(node()))["metrics"]]
    assert "gpufleet_audit_findings" not in names and "gpufleet_drift_items" not in names
    assert "gpufleet_last_tuning_timestamp_seconds" not in names
    assert "gpufleet_last_audit_timestamp_seconds" in names
    with pytest.raises(AnsibleFilterError, match="expects a gpufleet.tuning.health_judge result"):
        health_metrics({"status": "fine"})
