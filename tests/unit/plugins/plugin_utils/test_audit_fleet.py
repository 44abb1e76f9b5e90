"""gpufleet.tuning.audit_fleet: each finding with the hosts that have it, and the hosts ranked
by their worst finding, from the per-host audits."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_fleet import audit_fleet
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases as cases


def host(name, worst, counts, findings=(), time="2026-03-02T09:00:00Z"):
    return {"host": name, "time": time, "worst": worst, "counts": counts, "findings": list(findings),
            "unknown": [], "planned": {}}


def finding(rule, severity, item=None):
    return {"rule": rule, "severity": severity, "title": rule, "item": item, "fix": {"class": "manual", "steps": "x"}}


def test_the_fixture_fleet():
    fleet = audit_fleet([cases.audit(name) for name in ("h200-nvlink", "blackwell-pcie", "untuned")])
    assert [h["host"] for h in fleet["hosts"]] == ["pve-gpu-01.example.net", "ws-gpu-07", "gpu-h200-x2"]
    assert [h["worst"] for h in fleet["hosts"]] == ["H", "P0", "P0"]  # the untuned node has a GPU at x8
    mrrs = [f for f in fleet["findings"] if f["rule"] == "gpu_mrrs_low"][0]
    assert mrrs["hosts"] == [{"host": "pve-gpu-01.example.net", "items": ["GPU 0 (0000:01:00.0)", "GPU 1 (0000:41:00.0)",
                                                                          "GPU 2 (0000:81:00.0)", "GPU 3 (0000:c1:00.0)"]},
                             {"host": "ws-gpu-07", "items": ["GPU 0 (0000:17:00.0)", "GPU 1 (0000:18:00.0)"]}]
    swappiness = [f for f in fleet["findings"] if f["rule"] == "swappiness_high"][0]
    assert [h["host"] for h in swappiness["hosts"]] == ["gpu-h200-x2", "pve-gpu-01.example.net", "ws-gpu-07"]
    assert [f["severity"] for f in fleet["findings"]] == sorted(f["severity"] for f in fleet["findings"])
    assert fleet["hosts"][0]["planned"] == {"runtime": 27, "reboot_required": 3}
    assert (fleet["first"], fleet["last"]) == ("2026-03-02T09:15:00Z", "2026-03-02T12:00:00Z")


def test_hosts_rank_by_worst_then_by_counts_then_by_name():
    fleet = audit_fleet([
        host("a", None, {}),
        host("b", "P2", {"P2": 5}),
        host("c", "P1", {"P1": 1, "P2": 9}),
        host("d", "P0", {"P0": 1}),
        host("e", "P0", {"P0": 3}),
        host("f", "P1", {"P1": 2}),
    ])
    assert [h["host"] for h in fleet["hosts"]] == ["e", "d", "f", "c", "b", "a"]


def test_a_report_link_is_the_host_folder_artifact_dir_gives():
    fleet = audit_fleet([host("../escape", "P2", {"P2": 1}, [finding("x", "P2")])])
    assert fleet["hosts"][0]["report"] == "..%2Fescape/system-improve.md"


def test_what_is_not_an_audit_is_left_out():
    fleet = audit_fleet([None, {"host": "failed-early"}, host("ok", None, {})])
    assert [h["host"] for h in fleet["hosts"]] == ["ok"]


def test_bad_input_is_refused():
    with pytest.raises(AnsibleFilterError) as exc:
        audit_fleet({"host": "x"})
    assert "audit_fleet expects a list of per-host audits" in str(exc.value)
