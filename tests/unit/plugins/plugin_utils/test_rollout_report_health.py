"""The rollout reports with the health gate: a host quarantined for its hardware (before its
tuning, or judged again after a failure past the gate) is no failure of the rollout, is never
reverted, and comes first - the Health section of the page, the health line of each host's
section, the health test case of each host's JUnit suite; a quarantined canary stops the rollout
(the gate leaves the later batches untouched, and the report says why); under
gpufleet_health_policy report a blocking verdict stays visible while the host is tuned.
"""

import copy
import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_report import (
    HOST_STATUSES, rollout_junit, rollout_markdown, rollout_result)
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils.test_rollout_report import (
    assert_junit_shape, changes, parse)

REMAP = {"rule": "gpu_remap_failure", "item": "GPU 0 (0000:41:00.0)", "action": "rma", "blocking": True,
         "message": "a row remapping failed: the GPU needs an RMA"}
XID = {"rule": "xid_events", "item": "GPU 1 (0000:42:00.0)", "action": "reset_gpu", "blocking": True,
       "message": "XID 79: the GPU fell off the bus"}
SRAM = {"rule": "gpu_sram_corrected", "item": "GPU 3", "action": "monitor", "blocking": False,
        "message": "12 corrected SRAM errors"}
ORDER = ("rma", "drain", "reboot", "reset_gpu", "monitor")


def health(status="healthy", findings=(), phase="before", policy="quarantine"):
    """A host's health as roles/rollout/vars/main.yml keeps it (__rollout_health)."""
    findings = [dict(f) for f in findings]
    return {"status": status, "policy": policy, "phase": phase,
            "actions": sorted(set(f["action"] for f in findings), key=ORDER.index),
            "blocking": status == "quarantined", "findings": findings}


def checks(health_status="passed", health_message="healthy", verify="passed", verify_message="",
           revert="skipped", revert_message="nothing failed"):
    """A host's checks in the order roles/rollout/tasks/host.yml records them: health after audit."""
    return [
        {"name": "reachable", "status": "passed", "message": "", "time_s": 0.4},
        {"name": "audit", "status": "passed", "message": "", "time_s": 3.1},
        {"name": "health", "status": health_status, "message": health_message, "time_s": 0.3},
        {"name": "tune", "status": "passed", "message": "", "time_s": 5.0},
        {"name": "verify", "status": verify, "message": verify_message, "time_s": 2.2},
        {"name": "serving", "status": "skipped", "message": "gpufleet_benchmark is false"},
        {"name": "revert", "status": revert, "message": revert_message},
    ]


def tuned(batch, verdict=None, host_checks=None):
    return {"status": "tuned", "batch": batch, "checks": host_checks or checks(), "changes": changes(),
            "verified": True, "verify_failures": [], "reverted": False, "revert": None, "failure": None, "drift": [],
            "health": verdict or health()}


def quarantined_before(batch, findings=(REMAP, XID)):
    """The gate's quarantine: health failed after reachable and audit, nothing tuned."""
    verdict = health("quarantined", findings)
    message = "quarantined: %s; %s" % (", ".join(verdict["actions"]), "; ".join(f["message"] for f in findings))
    return {"status": "quarantined", "batch": batch, "checks": checks("failed", message)[:3], "changes": [],
            "verified": None, "verify_failures": [], "reverted": False, "revert": None, "failure": None, "drift": [],
            "health": verdict}


def quarantined_after_failure(batch):
    """A host that failed verify past the gate, judged again: the hardware is at fault, the tuning
    is not reverted."""
    revert = {"name": "revert", "status": "skipped",
              "message": "quarantined for its hardware (reset_gpu): the tuning is not reverted as a regression"}
    return {"status": "quarantined", "batch": batch,
            "checks": checks(verify="failed", verify_message="p2p 0->1: 12 GB/s, wanted 300")[:5] + [revert],
            "changes": changes(), "verified": False, "verify_failures": ["p2p 0->1: 12 GB/s, wanted 300"],
            "reverted": False, "revert": None,
            "failure": {"stage": "verify", "task": "Fail on what did not hold", "message": "1 check failed"},
            "drift": [], "health": health("quarantined", [XID], phase="after_failure")}


def health_rollout():
    """Canary fleet-h1; fleet-h3 quarantined by the gate, fleet-h4 after failing verify; fleet-h2
    degraded (tuned), the others healthy and tuned."""
    return {
        "run_id": "20261207T050000Z-health", "canary": 1, "serial": 2, "revert_on_failure": True,
        "batches": [["fleet-h1"], ["fleet-h2", "fleet-h3"], ["fleet-h4", "fleet-h5"]],
        "stopped_after_batch": None, "stop_reason": None,
        "hosts": {
            "fleet-h1": tuned(1),
            "fleet-h2": tuned(2, health("degraded", [SRAM]),
                              checks(health_message="degraded: monitor; 12 corrected SRAM errors")),
            "fleet-h3": quarantined_before(2),
            "fleet-h4": quarantined_after_failure(3),
            "fleet-h5": tuned(3),
        },
    }


def sick_canary_rollout():
    """The canary quarantined: the gate leaves batch 2 untouched; report.yml stops after batch 1."""
    return {
        "run_id": "20261207T050000Z-canary", "canary": 1, "serial": 2,
        "batches": [["fleet-h1"], ["fleet-h2", "fleet-h3"]],
        "stopped_after_batch": 1, "stop_reason": "fleet-h1 quarantined",
        "hosts": {"fleet-h1": quarantined_before(1, [REMAP]),
                  "fleet-h2": {"status": "untouched", "batch": None, "checks": []},
                  "fleet-h3": {"status": "untouched", "batch": None, "checks": []}},
    }


# ------------------------------------------------------------------------------ rollout_result

def test_quarantined_hosts_are_no_failure_of_the_rollout():
    result = rollout_result(health_rollout())
    assert result["status"] == "completed"
    assert result["verdict"] == ("fleet-h3 quarantined (rma, reset_gpu), fleet-h4 quarantined at verify (reset_gpu), "
                                 "not reverted; the other 3 hosts tuned and verified")
    assert result["counts"] == {"tuned": 3, "unchanged": 0, "quarantined": 2, "failed": 0, "unreachable": 0,
                                "untouched": 0, "total": 5}
    assert list(result["counts"])[:3] == ["tuned", "unchanged", "quarantined"] and "quarantined" in HOST_STATUSES
    assert [b["outcome"] for b in result["batch_outcomes"]] == [
        "passed: 1 tuned", "quarantined: fleet-h3 (rma, reset_gpu); 1 tuned", "quarantined: fleet-h4 (reset_gpu); 1 tuned"]
    assert result["batch_outcomes"][1]["counts"]["quarantined"] == 1
    hosts = result["hosts"]
    assert hosts["fleet-h3"]["failed_check"] == "health" and hosts["fleet-h4"]["failed_check"] == "verify"
    assert hosts["fleet-h3"]["reverted"] is False and hosts["fleet-h4"]["reverted"] is False
    assert hosts["fleet-h4"]["health"]["phase"] == "after_failure"


def test_the_json_lists_the_quarantined_hosts_first_with_their_actions_and_findings():
    summary = rollout_result(health_rollout())["health"]
    assert list(summary) == ["counts", "quarantined", "tuned_anyway", "degraded"]
    assert summary["counts"] == {"healthy": 2, "degraded": 1, "quarantined": 2, "not_judged": 0}
    assert [(e["host"], e["actions"], e["at"], e["phase"]) for e in summary["quarantined"]] == [
        ("fleet-h3", ["rma", "reset_gpu"], None, "before"), ("fleet-h4", ["reset_gpu"], "verify", "after_failure")]
    assert summary["quarantined"][0]["findings"] == [REMAP, XID]
    assert summary["quarantined"][1]["reverted"] is False and summary["quarantined"][1]["status"] == "quarantined"
    assert [e["host"] for e in summary["degraded"]] == ["fleet-h2"] and summary["tuned_anyway"] == []


def test_the_result_with_health_is_json_and_accepted_again():
    result = rollout_result(health_rollout())
    assert json.loads(json.dumps(result)) == result
    assert rollout_result(copy.deepcopy(result)) == result
    assert rollout_markdown(result) == rollout_markdown(health_rollout())
    assert rollout_junit(result) == rollout_junit(health_rollout())


def test_a_quarantined_canary_stops_the_rollout_and_says_why():
    rollout = sick_canary_rollout()
    result = rollout_result(rollout)
    assert result["status"] == "stopped"
    assert result["verdict"] == "Stopped after batch 1 of 2: fleet-h1 quarantined (rma); 2 hosts not touched"
    assert result["batch_outcomes"][0]["outcome"] == "quarantined: fleet-h1 (rma); the rollout stopped here"
    assert result["hosts"]["fleet-h2"]["reason"] == ("the rollout stopped after batch 1 of 2 (fleet-h1 quarantined); "
                                                     "this host was in batch 2")
    assert result["health"]["counts"] == {"healthy": 0, "degraded": 0, "quarantined": 1, "not_judged": 0}
    page = rollout_markdown(rollout)
    assert "Stop reason: fleet-h1 quarantined" in page
    assert "The rollout stopped after batch 1 of 2: fleet-h1 quarantined; these hosts were left as they were:" in page
    assert "- batch 2 (2): fleet-h2, fleet-h3" in page
    assert "- Quarantined (not tuned further, not reverted; the rollout went on until it stopped): fleet-h1 (rma)" in page
    root = parse(rollout_junit(rollout))
    assert_junit_shape(root)
    assert root.find("testsuite[@name='fleet-h1']/testcase")[0].tag == "failure"
    skipped = root.find("testsuite[@name='fleet-h2']/testcase[@name='rollout']/skipped")
    assert "fleet-h1 quarantined" in skipped.get("message")


def test_policy_report_tunes_a_blocking_host_and_keeps_it_visible():
    rollout = health_rollout()
    verdict = health("quarantined", [REMAP], policy="report")
    rollout["hosts"]["fleet-h5"] = tuned(3, verdict, checks(
        "failed", "quarantined: rma; a row remapping failed: the GPU needs an RMA; tuned anyway (gpufleet_health_policy report)"))
    result = rollout_result(rollout)
    assert result["status"] == "completed" and result["hosts"]["fleet-h5"]["status"] == "tuned"
    assert result["verdict"].endswith("; tuned despite a blocking health verdict (gpufleet_health_policy report): "
                                      "fleet-h5 (rma)")
    assert [e["host"] for e in result["health"]["tuned_anyway"]] == ["fleet-h5"]
    page = rollout_markdown(rollout)
    section = page[page.index("## Tuned hosts to look at"):page.index("## Tuned and verified")]
    lines = section.split("\n")
    assert lines[2] == "### fleet-h5" and lines[4] == (
        "- Health: **quarantined**: rma; tuned anyway (gpufleet_health_policy report)")
    assert "- Look at: health quarantined, tuned anyway; check health did not pass" in section
    assert "- Tuned despite a blocking verdict (gpufleet_health_policy report): fleet-h5 (rma)" in page
    root = parse(rollout_junit(rollout))
    assert_junit_shape(root)
    suite = root.find("testsuite[@name='fleet-h5']")
    cases = suite.findall("testcase")
    assert cases[0].get("name") == "health" and cases[0].find("failure").get("type") == "health"
    assert "tuned anyway (gpufleet_health_policy report)" in cases[0].find("failure").get("message")
    assert [c.find("failure") for c in cases[1:]] == [None] * (len(cases) - 1), "the host's other cases pass"
    assert suite.get("failures") == "1"


def test_many_quarantined_hosts_are_counted_not_listed():
    names = ["gpu-%02d" % index for index in range(8)]
    hosts = dict((name, quarantined_before(2)) for name in names[1:])
    hosts[names[0]] = tuned(1)
    result = rollout_result({"run_id": "sick", "batches": [names[:1], names[1:]], "hosts": hosts})
    assert result["status"] == "completed"
    assert result["verdict"] == ("gpu-01 quarantined (rma, reset_gpu), gpu-02 quarantined (rma, reset_gpu), "
                                 "gpu-03 quarantined (rma, reset_gpu), 4 more hosts quarantined; gpu-00 tuned and verified")


def test_a_failure_and_a_quarantine_in_the_last_batch():
    rollout = health_rollout()
    failed = tuned(3)
    failed.update(status="failed", verified=False, failure={"stage": "tune", "task": "Apply", "message": "denied"},
                  checks=checks()[:3] + [{"name": "tune", "status": "failed", "message": "denied"}], changes=[])
    rollout["hosts"]["fleet-h5"] = failed
    result = rollout_result(rollout)
    assert result["status"] == "failed"
    assert result["verdict"] == ("Completed all 3 batches with failures: fleet-h5 failed tune; nothing to revert on "
                                 "fleet-h5; fleet-h3 quarantined (rma, reset_gpu), fleet-h4 quarantined at verify "
                                 "(reset_gpu), not reverted")
    assert result["batch_outcomes"][2]["outcome"] == "failed: fleet-h5 (tune); quarantined: fleet-h4 (reset_gpu)"


def test_a_rollout_without_health_has_no_health_section():
    rollout = health_rollout()
    for host in rollout["hosts"].values():
        host.pop("health")
        host["checks"] = [c for c in host["checks"] if c["name"] != "health"]
    del rollout["hosts"]["fleet-h3"], rollout["hosts"]["fleet-h4"]
    rollout["batches"] = [["fleet-h1"], ["fleet-h2"], ["fleet-h5"]]
    result = rollout_result(rollout)
    assert result["health"]["counts"] == {"healthy": 0, "degraded": 0, "quarantined": 0, "not_judged": 3}
    assert result["verdict"] == "All 3 hosts tuned and verified"
    assert "## Health" not in rollout_markdown(rollout) and "Health:" not in rollout_markdown(rollout)
    root = parse(rollout_junit(rollout))
    assert "health" not in [c.get("name") for c in root.iter("testcase")]


# ------------------------------------------------------------------------------ rollout_markdown

def test_the_page_puts_the_health_first():
    page = rollout_markdown(health_rollout())
    lines = page.split("\n")
    assert lines[2] == ("**fleet-h3 quarantined (rma, reset_gpu), fleet-h4 quarantined at verify (reset_gpu), "
                        "not reverted; the other 3 hosts tuned and verified**")
    assert "- Hosts: 5 (3 tuned, 2 quarantined)" in lines
    assert page.index("## Health") < page.index("## Batches") < page.index("## Tuned and verified")
    assert "## Failed and unreachable hosts" not in page
    health = page[page.index("## Health"):page.index("## Batches")]
    assert "- Judged: 5 hosts: 2 healthy, 1 degraded, 2 quarantined\n" in health
    assert ("- Quarantined (not tuned further, not reverted; the rollout went on): fleet-h3 (rma, reset_gpu), "
            "fleet-h4 (reset_gpu)") in health
    assert "- Degraded (not blocking, tuned): fleet-h2\n  - fleet-h2: GPU 3: 12 corrected SRAM errors " \
        "(`gpu_sram_corrected`: monitor)" in health
    h3 = health[health.index("### fleet-h3"):health.index("### fleet-h4")].split("\n")
    assert h3[2] == ("- Health: **quarantined** before the tuning: rma, reset_gpu; not tuned, not benchmarked, "
                     "nothing reverted")
    assert h3[3] == "  - GPU 0 (0000:41:00.0): a row remapping failed: the GPU needs an RMA (`gpu_remap_failure`: rma, blocking)"
    assert h3[4] == "  - GPU 1 (0000:42:00.0): XID 79: the GPU fell off the bus (`xid_events`: reset_gpu, blocking)"
    assert h3[5] == "- Status: **quarantined** in batch 2"
    assert "- Reverted: nothing to revert (nothing changed)" in h3
    h4 = health[health.index("### fleet-h4"):].split("\n")
    assert h4[2] == ("- Health: **quarantined** at verify, judged again after the failure: reset_gpu; the tuning is "
                     "not reverted as a regression")
    assert '- Failure: at verify, task "Fail on what did not hold": 1 check failed' in h4
    assert "| verify | FAILED | 2.2 s | p2p 0-&gt;1: 12 GB/s, wanted 300 |" in h4
    assert "- Reverted: no: quarantined for its hardware, the tuning is not reverted as a regression" in h4
    assert "  - restored" not in health
    assert "| 2 | fleet-h2, fleet-h3 | quarantined: fleet-h3 (rma, reset_gpu); 1 tuned |" in lines
    assert "| fleet-h2 | 2 | tuned | 2 | 5 passed, 2 skipped | 11.0 s |" in lines


def test_health_text_is_escaped_on_the_page():
    rollout = health_rollout()
    verdict = rollout["hosts"]["fleet-h3"]["health"]
    verdict["findings"][0].update(item="<img src=x onerror=alert(1)>", message="[x](javascript:alert(1)) | *em*\nline",
                                  rule="r`1")
    page = rollout_markdown(rollout)
    assert ("  - &lt;img src=x onerror=alert(1)&gt;: \\[x\\](javascript:alert(1)) \\| \\*em\\* line "
            "(`` r`1 ``: rma, blocking)") in page
    assert "<img" not in page
    root = parse(rollout_junit(rollout))
    failure = root.find("testsuite[@name='fleet-h3']/testcase[@name='health']/failure")
    assert "<img src=x onerror=alert(1)>: [x](javascript:alert(1)) | *em* line (`` r`1 ``: rma, blocking)" in \
        failure.get("message")


# ------------------------------------------------------------------------------ rollout_junit

def test_junit_puts_the_health_case_first_and_fails_it_for_each_quarantined_host():
    root = parse(rollout_junit(health_rollout()))
    assert_junit_shape(root)
    for suite in root:
        assert suite.findall("testcase")[0].get("name") == "health", suite.get("name")
    names = [c.get("name") for c in root.find("testsuite[@name='fleet-h1']").findall("testcase")]
    assert names == ["health", "reachable", "audit", "tune", "verify", "serving", "revert"]
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("30", "3", "0", "7")
    h3 = root.find("testsuite[@name='fleet-h3']")
    assert [c.get("name") for c in h3.findall("testcase")] == ["health", "reachable", "audit"]
    failure = h3.find("testcase[@name='health']/failure")
    assert failure.get("type") == "health"
    assert failure.get("message") == (
        "quarantined before the tuning: rma, reset_gpu; not tuned, not benchmarked, nothing reverted; "
        "GPU 0 (0000:41:00.0): a row remapping failed: the GPU needs an RMA (`gpu_remap_failure`: rma, blocking); "
        "GPU 1 (0000:42:00.0): XID 79: the GPU fell off the bus (`xid_events`: reset_gpu, blocking)")
    assert failure.text.split("\n")[1:3] == [
        "GPU 0 (0000:41:00.0): a row remapping failed: the GPU needs an RMA (`gpu_remap_failure`: rma, blocking)",
        "GPU 1 (0000:42:00.0): XID 79: the GPU fell off the bus (`xid_events`: reset_gpu, blocking)"]
    props = dict((p.get("name"), p.get("value")) for p in h3.find("properties"))
    assert props["status"] == "quarantined" and props["health"] == "quarantined" and props["reverted"] == "no"
    assert h3.find("testcase[@name='rollout']") is None, "a quarantined host's health case carries it"
    assert h3.find("system-out").text.startswith("health: quarantined before the tuning: rma, reset_gpu;")
    # Judged healthy before the tuning, quarantined after failing verify: its health case fails with
    # the later verdict, its verify case fails, its revert was skipped, nothing was restored.
    h4 = root.find("testsuite[@name='fleet-h4']")
    assert [c.get("name") for c in h4.findall("testcase")] == ["health", "reachable", "audit", "tune", "verify", "revert"]
    failure = h4.find("testcase[@name='health']/failure")
    assert failure.get("message").startswith("quarantined at verify, judged again after the failure: reset_gpu;")
    assert "XID 79: the GPU fell off the bus" in failure.get("message") and "healthy" not in failure.text
    assert h4.find("testcase[@name='verify']/failure") is not None
    assert "not reverted as a regression" in h4.find("testcase[@name='revert']/skipped").get("message")
    assert dict((p.get("name"), p.get("value")) for p in h4.find("properties"))["reverted"] == "no"
    h2 = root.find("testsuite[@name='fleet-h2']")
    assert h2.get("failures") == "0" and h2.find("testcase[@name='health']").find("*") is None
    assert "health: degraded: monitor (not blocking)" in h2.find("system-out").text


def test_a_health_verdict_without_its_check_gets_a_health_case():
    rollout = health_rollout()
    host = rollout["hosts"]["fleet-h3"]
    host["checks"] = [c for c in host["checks"] if c["name"] != "health"]
    rollout["hosts"]["fleet-h1"]["checks"] = [c for c in rollout["hosts"]["fleet-h1"]["checks"] if c["name"] != "health"]
    root = parse(rollout_junit(rollout))
    assert_junit_shape(root)
    h3 = root.find("testsuite[@name='fleet-h3']").findall("testcase")
    assert [c.get("name") for c in h3] == ["health", "reachable", "audit"] and h3[0].find("failure") is not None
    h1 = root.find("testsuite[@name='fleet-h1']").findall("testcase")
    assert h1[0].get("name") == "health" and h1[0].find("*") is None


# ------------------------------------------------------------------------------ the contract

MALFORMED = [
    (lambda r: r["hosts"]["fleet-h3"].pop("health"), ["hosts.fleet-h3.health=None", "quarantined"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"].update(status="sick"),
     ["hosts.fleet-h3.health.status='sick'", "healthy, degraded, quarantined"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"].update(actions=["replace"]),
     ["hosts.fleet-h3.health.actions[0]='replace'", "monitor, reset_gpu, reboot, drain, rma"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"].update(actions="rma"), ["hosts.fleet-h3.health.actions='rma'", "list"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"].update(policy="ignore"), ["hosts.fleet-h3.health.policy='ignore'"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"].update(phase="later"), ["hosts.fleet-h3.health.phase='later'"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"].update(blocking=False),
     ["hosts.fleet-h3.health.blocking=False", "contradicts status quarantined"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"].update(counts={}), ["hosts.fleet-h3.health has an unknown key 'counts'"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"]["findings"][0].pop("rule"),
     ["hosts.fleet-h3.health.findings[0].rule=None"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"]["findings"][0].update(blocking="yes"),
     ["hosts.fleet-h3.health.findings[0].blocking='yes'"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"]["findings"][0].update(message=["a"]),
     ["hosts.fleet-h3.health.findings[0].message=['a']"]),
    (lambda r: r["hosts"]["fleet-h3"]["health"]["findings"][0].update(fix={}),
     ["hosts.fleet-h3.health.findings[0] has an unknown key 'fix'"]),
    (lambda r: r["hosts"]["fleet-h2"]["health"].update(status="quarantined", blocking=True),
     []),  # accepted: gpufleet_health_policy report (a blocking verdict on a tuned host)
    (lambda r: r["hosts"]["fleet-h1"].update(health="healthy"), ["hosts.fleet-h1.health='healthy'", "not a dict"]),
    (lambda r: r["hosts"]["fleet-h4"].update(reverted=True),
     ["hosts.fleet-h4.reverted=True", "status quarantined", "left for its repair"]),
    (lambda r: r["hosts"]["fleet-h1"]["health"].update(status="degraded", blocking=True),
     ["hosts.fleet-h1.health.blocking=True", "contradicts status degraded"]),
]


@pytest.mark.parametrize("change, words", MALFORMED, ids=[str(n) for n in range(len(MALFORMED))])
@pytest.mark.parametrize("render", [rollout_result, rollout_markdown, rollout_junit])
def test_a_malformed_health_is_refused_naming_the_key_and_value(render, change, words):
    rollout = health_rollout()
    change(rollout)
    if not words:
        render(rollout)
        return
    with pytest.raises(AnsibleFilterError) as exc:
        render(rollout)
    message = str(exc.value)
    assert message.startswith(render.__name__ + ": "), message
    for word in words:
        assert word in message, message


def test_an_untouched_host_has_no_health():
    rollout = sick_canary_rollout()
    rollout["hosts"]["fleet-h2"]["health"] = health()
    with pytest.raises(AnsibleFilterError) as exc:
        rollout_result(rollout)
    assert "hosts.fleet-h2.health=" in str(exc.value) and "untouched" in str(exc.value)
    rollout["hosts"]["fleet-h2"]["health"] = None
    assert rollout_result(rollout)["hosts"]["fleet-h2"]["health"] is None


def test_a_quarantined_host_after_its_batch_is_impossible():
    rollout = sick_canary_rollout()
    rollout["hosts"]["fleet-h2"] = quarantined_before(2)
    with pytest.raises(AnsibleFilterError) as exc:
        rollout_result(rollout)
    assert "hosts.fleet-h2.status='quarantined' is impossible: its batch 2 comes after the stop" in str(exc.value)


def test_a_quarantined_host_before_the_last_batch_does_not_stop_the_rollout():
    """Unlike a failed host (the gate stops after it), a quarantined host outside the canary lets
    the rollout go on: no stopped_after_batch is asked for."""
    result = rollout_result(health_rollout())
    assert result["stopped_after_batch"] is None and result["batch_outcomes"][2]["ran"]


def test_the_gate_s_reason_for_an_untouched_host_is_kept():
    """The gate notes why it left a host alone (a quarantined canary, policy stop): the report keeps
    those words after the stop, once, also when its own result is read again."""
    rollout = sick_canary_rollout()
    gate = ("fleet-h1 quarantined for its hardware (rma): a canary must be healthy (choose another with "
            "gpufleet_canary_hosts)")
    for name in ("fleet-h2", "fleet-h3"):
        rollout["hosts"][name]["reason"] = gate
    result = rollout_result(rollout)
    assert result["hosts"]["fleet-h3"]["reason"] == (
        "the rollout stopped after batch 1 of 2 (fleet-h1 quarantined): %s; this host was in batch 2" % gate)
    assert rollout_result(copy.deepcopy(result)) == result
    skipped = parse(rollout_junit(rollout)).find("testsuite[@name='fleet-h2']/testcase[@name='rollout']/skipped")
    assert "a canary must be healthy" in skipped.get("message")
    rollout["hosts"]["fleet-h2"]["reason"] = 7
    with pytest.raises(AnsibleFilterError, match="hosts.fleet-h2.reason=7"):
        rollout_result(rollout)
