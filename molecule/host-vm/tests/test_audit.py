# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit on a real kernel (issue 17): untuned guest -> audit -> tune -> audit again.

prepare.yml puts the guest in the typical untuned state (numa_balancing 1, autogroup 1,
swappiness 60, the kernel's stock socket buffers, every idle state enabled) and audits it;
audit_after.yml audits the converged guest into the same folder. Both audits and the guest's
state read just before and after each (../resources/node_state.py) were saved as
results/host-vm/audit-before.json and audit-after.json.

Checked: each untuned setting is a P0 finding with its runtime fix; the audit planned exactly
the value changes the first converge then made; after the converge the same rules are
"already optimal" and the second report lists them as fixed since the first; neither audit
changed anything on the guest.
"""

from __future__ import annotations

import os

import pytest

UNTUNED = {
    # rule: (items, module that fixes it)
    "numa_balancing_on": ([None], "sysctl_profile"),
    "sched_autogroup_on": ([None], "sysctl_profile"),
    "swappiness_high": ([None], "sysctl_profile"),
    "net_buffers_low": (["net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"],
                        "sysctl_profile"),
    "cpu_deep_idle_states": (["C2", "C3"], "cpu_power"),
}
PLANNED_MODULES = ("sysctl_profile", "cpu_power")


@pytest.fixture(scope="module")
def before(results):
    return results("audit-before")


@pytest.fixture(scope="module")
def after(results):
    return results("audit-after")


def _entries(audit, key, rule):
    return [entry for entry in audit[key] if entry["rule"] == rule]


@pytest.mark.parametrize("rule", sorted(UNTUNED))
def test_the_untuned_guest_has_each_setting_as_a_p0_with_its_runtime_fix(before, rule):
    items, module = UNTUNED[rule]
    found = _entries(before["audit"], "findings", rule)
    assert sorted(str(entry["item"]) for entry in found) == sorted(str(item) for item in items), found
    for entry in found:
        assert entry["severity"] == "P0", entry
        assert entry["fix"]["class"] == "runtime" and entry["fix"]["tag"] == "runtime", entry
        assert entry["fix"]["module"] == "gpufleet.tuning." + module, entry


def test_the_untuned_findings_carry_the_measured_values(before):
    messages = dict((entry["rule"], entry["message"]) for entry in before["audit"]["findings"])
    assert "kernel.numa_balancing = 1" in messages["numa_balancing_on"]
    assert messages["swappiness_high"] == "vm.swappiness = 60, above 10"
    assert messages["sched_autogroup_on"] == "kernel.sched_autogroup_enabled = 1"


def _value_records(entry):
    return sorted((rec["target"], str(rec["after"])) for rec in entry["records"] if rec["kind"] == "value")


@pytest.mark.parametrize("module", PLANNED_MODULES)
def test_the_audit_planned_exactly_the_value_changes_the_converge_made(before, results, module):
    planned = before["audit"]["planned"]["runtime"][module]
    assert planned["status"] == "ok", planned
    made = results("converge-1")["__host_" + module]
    assert _value_records(planned), "the audit planned no %s change on the untuned guest" % module
    assert _value_records(planned) == sorted((rec["target"], str(rec["after"])) for rec in made["changes"]
                                             if rec["kind"] == "value")


@pytest.mark.parametrize("rule", sorted(UNTUNED))
def test_after_the_converge_each_finding_is_already_optimal(after, rule):
    items, _module = UNTUNED[rule]
    assert _entries(after["audit"], "findings", rule) == []
    optimal = [entry["item"] for entry in _entries(after["audit"], "optimal", rule)]
    for item in items:
        assert item in optimal, (rule, item, optimal)


def test_the_second_report_lists_them_as_fixed_since_the_first(before, after):
    since = after["audit"]["since"]
    assert since["none"] is False, since
    assert since["previous_time"] == before["audit"]["time"]
    fixed = set((entry["rule"], entry["item"]) for entry in since["fixed"] if entry["now"] == "optimal")
    for rule, (items, _module) in UNTUNED.items():
        for item in items:
            assert (rule, item) in fixed, (rule, item, since["fixed"])
    assert since["new"] == [], since["new"]
    report_path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "artifacts", "host-vm", "system-improve.md")
    with open(report_path) as handle:
        report = handle.read()
    assert "## Since the previous audit" in report
    assert "- Fixed P0: vm.swappiness (`swappiness_high`), now optimal" in report, report


def test_after_the_converge_nothing_is_left_to_change_at_runtime(after):
    for module in PLANNED_MODULES:
        entry = after["audit"]["planned"]["runtime"][module]
        assert entry["status"] == "ok" and entry["records"] == [], (module, entry)


@pytest.mark.parametrize("label", ["before", "after"])
def test_the_audit_changed_nothing_on_the_guest(results, label):
    saved = results("audit-" + label)
    node_before, node_after = saved["node_before"], saved["node_after"]
    assert node_before["sysctl"] and node_before["runtime"] and node_before["files"], "node_state.py read nothing"
    for key in sorted(set(node_before) | set(node_after)):
        if key == "files":
            moved = sorted(path for path in set(node_before["files"]) | set(node_after["files"])
                           if node_before["files"].get(path) != node_after["files"].get(path))
            assert moved == [], "the %s audit touched %s" % (label, moved)
        else:
            assert node_before.get(key) == node_after.get(key), "the %s audit changed %s" % (label, key)
