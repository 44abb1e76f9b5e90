"""gpufleet.tuning.audit_since: what moved between two audits of the same host, on the fixture
nodes (untuned, then tuned: the P0s of the untuned node are fixed), and the previous audit as
data that can be missing or damaged without failing the audit.
"""

import copy
import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_report import audit_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_since import audit_since
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases as cases

TUNED_BY_RUNTIME = {"numa_balancing_on", "nmi_watchdog_on", "sched_autogroup_on", "swappiness_high",
                    "net_buffers_low", "cpu_deep_idle_states", "gpu_mrrs_low", "peermem_not_loaded",
                    "lxc_memlock_capped"}


@pytest.fixture(scope="module")
def untuned():
    return cases.audit("untuned")


@pytest.fixture(scope="module")
def tuned():
    return cases.audit("tuned")


def keys(entries):
    return set((entry["rule"], entry["item"]) for entry in entries)


def test_tuning_fixes_the_untuned_node_s_runtime_findings(untuned, tuned):
    since = audit_since(tuned, json.dumps(untuned))
    assert since["none"] is False
    assert since["previous_time"] == untuned["time"]
    fixed_rules = set(entry["rule"] for entry in since["fixed"])
    assert TUNED_BY_RUNTIME <= fixed_rules, TUNED_BY_RUNTIME - fixed_rules
    assert keys(since["fixed"]) == cases.found(untuned) - cases.found(tuned)
    assert keys(since["new"]) == cases.found(tuned) - cases.found(untuned)
    assert keys(since["still"]) == cases.found(untuned) & cases.found(tuned)
    for entry in since["fixed"]:
        where = [name for name in ("optimal", "not_applicable", "unknown")
                 if (entry["rule"], entry["item"]) in cases.found(tuned, name)]
        assert entry["now"] == (where[0] if where else "gone"), entry


def test_the_same_node_twice_moves_nothing(untuned):
    since = audit_since(untuned, copy.deepcopy(untuned))
    assert since["fixed"] == [] and since["new"] == []
    assert keys(since["still"]) == cases.found(untuned)


def test_going_back_to_untuned_is_new_findings(untuned, tuned):
    since = audit_since(untuned, tuned)
    assert TUNED_BY_RUNTIME <= set(entry["rule"] for entry in since["new"])


def test_a_finding_is_its_rule_and_item(untuned):
    """The same rule on another GPU is another finding."""
    mrrs = [f for f in untuned["findings"] if f["rule"] == "gpu_mrrs_low"]
    assert len(mrrs) > 1
    previous = copy.deepcopy(untuned)
    previous["findings"] = [f for f in previous["findings"] if not (
        f["rule"] == "gpu_mrrs_low" and f["item"] != mrrs[0]["item"])]
    since = audit_since(untuned, previous)
    assert keys(since["new"]) == set(("gpu_mrrs_low", f["item"]) for f in mrrs[1:])


@pytest.mark.parametrize("previous", [None, "", "  \n"])
def test_no_previous_audit_is_no_comparison(untuned, previous):
    assert audit_since(untuned, previous) == {"none": True, "reason": "no previous audit"}


@pytest.mark.parametrize("previous, reason", [
    ("{not json", "is not JSON"),
    ("[1, 2]", "is not an audit (a list)"),
    ('"text"', "is not an audit (a str)"),
    ('{"findings": "x"}', "has no list of findings"),
    ('{"findings": [{"item": null}]}', "has no list of findings with rule ids"),
    ('{"host": "n"}', "has no list of findings"),
])
def test_a_damaged_previous_audit_is_no_comparison_with_the_reason(untuned, previous, reason):
    since = audit_since(untuned, previous)
    assert since["none"] is True
    assert reason in since["reason"], since["reason"]


@pytest.mark.parametrize("audit", [None, "text", {"findings": None}, {"findings": [{"rule": 1}]}])
def test_a_bad_current_audit_is_an_error(audit):
    with pytest.raises(AnsibleFilterError, match="audit_since"):
        audit_since(audit, None)


def test_the_report_says_what_moved(untuned, tuned):
    audit = dict(tuned, since=audit_since(tuned, untuned))
    lines = audit_report(audit).splitlines()
    sections = [line for line in lines if line.startswith("## ")]
    assert sections[:2] == ["## Since the previous audit", "## Findings"]
    fixed = audit["since"]["fixed"]
    head = "Previous audit %s: %d fixed, %d new, %d still open." % (
        untuned["time"], len(fixed), len(audit["since"]["new"]), len(audit["since"]["still"]))
    assert head in lines
    assert "- Fixed P0: Automatic NUMA balancing (`numa_balancing_on`), now optimal" in lines, \
        [line for line in lines if "numa" in line.lower()]
    mrrs = [line for line in lines if line.startswith("- Fixed P0:") and "`gpu_mrrs_low`" in line]
    assert len(mrrs) == len([f for f in untuned["findings"] if f["rule"] == "gpu_mrrs_low"])


def test_the_report_says_when_there_is_nothing_to_compare(tuned):
    lines = audit_report(dict(tuned, since=audit_since(tuned, "{bad"))).splitlines()
    assert lines[lines.index("## Since the previous audit") + 2].startswith("No comparison: the previous audit.json is not JSON")
    assert "## Since the previous audit" not in audit_report(tuned)
