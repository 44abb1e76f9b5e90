"""Issue 17: the audit from inside the serving container (audit.yml, after converge).

The container's view: node_facts finds it is a container, reads the ceiling PID 1 was given
(the host's to raise: podman --ulimit here, lxc.prlimit.memlock under LXC) and the limit the
serving unit (the probe service of prepare_memlock.yml) really runs with, and the rules judge
them against the unlimited memlock the collection wants. The host role's modules act on the
kernel, hardware and boot of the machine, which is the container's host: the audit plans none
of them here and says so. The audit changes nothing in the container.
"""

import json
import os

import pytest

UNIT = "gpufleet-memlock-probe.service"


def _text(pair):
    """The limit as node_facts spells it: one value when soft and hard match, else soft:hard."""
    soft, hard = pair
    return soft if soft == hard else "%s:%s" % (soft, hard)


@pytest.fixture(scope="module")
def saved(results):
    return results("audit-container")


@pytest.fixture(scope="module")
def audit(saved):
    return saved["audit"]


def _entry(audit, rule):
    for key in ("findings", "optimal", "unknown", "not_applicable"):
        for entry in audit[key]:
            if entry["rule"] == rule:
                return key, entry
    raise AssertionError("rule %s is in none of the audit's lists" % rule)


def test_the_audit_knows_it_runs_in_a_container(audit):
    container = audit["facts"]["host"]["container"]
    assert container["detected"]["value"] is True, container
    assert container["kind"]["value"] == "podman", container


def test_the_container_ceiling_is_judged_from_pid_1(audit, process_memlock):
    soft, hard = process_memlock(1)
    pid1 = _text((soft, hard))
    assert audit["facts"]["containers"]["inside"]["pid1_memlock"]["value"] == pid1
    where, entry = _entry(audit, "container_memlock_capped")
    if hard == "unlimited":  # the hard half is the ceiling
        assert where == "optimal", entry
    else:
        assert where == "findings" and entry["severity"] == "P0", entry
        assert "memlock %s, not unlimited" % pid1 in entry["message"], entry
        assert entry["fix"]["class"] == "manual" and "container's host" in entry["fix"]["steps"], entry


def test_the_serving_unit_runs_at_the_ceiling_after_converge(host, audit, process_memlock):
    main_pid = host.check_output("systemctl show --property MainPID --value %s" % UNIT).strip()
    live = _text(process_memlock(main_pid))
    inside = audit["facts"]["containers"]["inside"]
    assert inside["serving_unit"]["value"] == UNIT
    assert inside["serving_unit_memlock"]["value"] == live
    where, entry = _entry(audit, "container_serving_unit_memlock")
    assert where == "optimal", entry
    assert entry["ok"] == "%s runs with memlock %s, the container's ceiling" % (UNIT, live)


def test_the_host_role_is_left_to_the_container_s_host(audit):
    for phase in ("runtime", "reboot_required"):
        assert audit["planned"][phase], phase
        for module, entry in audit["planned"][phase].items():
            assert entry["status"] == "skipped" and entry["records"] == [], (module, entry)
            assert "this is a container" in entry["msg"], (module, entry)


def test_the_report_is_written_on_the_controller(audit):
    folder = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "artifacts", "gpufleet-serving")
    with open(os.path.join(folder, "audit.json")) as handle:
        assert json.load(handle)["host"] == "gpufleet-serving"
    with open(os.path.join(folder, "system-improve.md")) as handle:
        report = handle.read()
    assert report.startswith("# System improvement report: gpufleet-serving\n")
    assert "sysctl_profile: skipped: this is a container" in report


def test_the_audit_changed_nothing_in_the_container(saved):
    node_before, node_after = saved["node_before"], saved["node_after"]
    assert node_before["files"] and node_before["sysctl"], "node_state.py read nothing"
    for key in sorted(set(node_before) | set(node_after)):
        assert node_before.get(key) == node_after.get(key), "the audit changed %s" % key
