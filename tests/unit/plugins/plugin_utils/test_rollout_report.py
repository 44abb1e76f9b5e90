"""gpufleet.tuning.rollout_result, rollout_markdown and rollout_junit: the fleet rollout's JSON,
page and JUnit file, from the one dict playbooks/rollout.yml hands them.

The JUnit file is parsed back and held to what a JUnit consumer reads (every count equal to the
children it counts, one outcome per testcase, suites' children in schema order); the page is
read for what an operator needs (the stopped batch, the failed host, what the revert restored,
the hosts not touched); malformed input fails naming the key and the value.
"""

import copy
import json
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.rollout import FilterModule
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_report import (
    rollout_junit, rollout_markdown, rollout_result)
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

SHA = "ab12cd34ef56" + "0" * 52


def checks(verify="passed", verify_message="", revert="skipped", revert_message="nothing failed"):
    return [
        {"name": "reachable", "status": "passed", "message": "", "time_s": 0.4},
        {"name": "audit", "status": "passed", "message": "", "time_s": 3.1},
        {"name": "tune", "status": "passed", "message": "", "time_s": 5.0},
        {"name": "verify", "status": verify, "message": verify_message, "time_s": 2.2},
        {"name": "serving", "status": "skipped", "message": "gpufleet_benchmark is false"},
        {"name": "revert", "status": revert, "message": revert_message},
    ]


def changes():
    return [
        {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"},
        {"area": "sysctl", "kind": "file", "target": "/etc/sysctl.d/90-gpufleet.conf", "before": None,
         "after": {"sha256": SHA, "size": 120, "mode": "0644"}},
    ]


def tuned(batch):
    return {"status": "tuned", "batch": batch, "checks": checks(), "changes": changes(), "verified": True,
            "verify_failures": [], "reverted": False, "revert": None, "failure": None, "drift": []}


def failed_verify(batch):
    return {
        "status": "failed", "batch": batch,
        "checks": checks("failed", "sysctl vm.swappiness: 60, wanted 10", "passed", "3 items restored"),
        "changes": changes() + [{"area": "cpu_power", "kind": "service", "target": "gpufleet-cpu.service",
                                 "before": "disabled", "after": "enabled"}],
        "verified": False,
        "verify_failures": ["sysctl vm.swappiness: 60, wanted 10", "pcie 0000:1b:00.0 MRRS: 512, wanted 4096"],
        "reverted": True,
        "revert": {
            "restored": [
                {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "current": "60"},
                {"area": "sysctl", "kind": "file", "target": "/etc/sysctl.d/90-gpufleet.conf", "before": None,
                 "current": None},
            ],
            "failed": [{"target": "gpufleet-cpu.service", "message": "systemctl disable: unit is masked"}],
            "pending_reboot": ["/etc/default/grub"],
        },
        "failure": {"task": "gpufleet.tuning.verify : Fail on what did not hold", "message": "2 checks failed"},
        "drift": [],
    }


def stopped_rollout():
    """The brief's rollout: canary fleet-h1, then fleet-h3 fails verify in batch 2 and is reverted."""
    return {
        "run_id": "20261201T070000Z-1a2b",
        "started": "2026-12-01T07:00:00Z",
        "finished": "2026-12-01T07:05:00Z",
        "canary": 1,
        "serial": 2,
        "revert_on_failure": True,
        "batches": [["fleet-h1"], ["fleet-h2", "fleet-h3"], ["fleet-h4", "fleet-h5"], ["fleet-h6"]],
        "stopped_after_batch": 2,
        "stop_reason": "fleet-h3 failed at verify",
        "hosts": {
            "fleet-h1": tuned(1),
            "fleet-h2": dict(tuned(2), status="unchanged", changes=[]),
            "fleet-h3": failed_verify(2),
            # The planned batch or null: both mean the same for a host the rollout never reached.
            "fleet-h4": {"status": "untouched", "batch": None},
            "fleet-h5": {"status": "untouched", "batch": 3},
            "fleet-h6": {"status": "untouched"},
        },
    }


def completed_rollout(count=6, serial=2):
    names = ["fleet-h%d" % (index + 1) for index in range(count)]
    batches = [names[:1]] + [names[index:index + serial] for index in range(1, count, serial)]
    hosts = {}
    for number, batch in enumerate(batches, 1):
        for name in batch:
            hosts[name] = tuned(number)
    return {"run_id": "run-1", "canary": 1, "serial": serial, "batches": batches, "stopped_after_batch": None,
            "stop_reason": None, "hosts": hosts}


# ------------------------------------------------------------------------------ rollout_result

def test_the_result_of_a_stopped_rollout():
    result = rollout_result(stopped_rollout())
    assert result["status"] == "stopped"
    assert result["verdict"] == ("Stopped after batch 2 of 4: fleet-h3 failed verify; "
                                 "fleet-h3 revert incomplete; 3 hosts not touched")
    assert result["counts"] == {"tuned": 1, "unchanged": 1, "quarantined": 0, "failed": 1, "unreachable": 0,
                                "untouched": 3, "total": 6}
    assert [b["outcome"] for b in result["batch_outcomes"]] == [
        "passed: 1 tuned",
        "failed: fleet-h3 (verify); 1 unchanged; the rollout stopped here",
        "not run (stopped after batch 2)",
        "not run (stopped after batch 2)",
    ]
    assert [b["ran"] for b in result["batch_outcomes"]] == [True, True, False, False]
    assert result["batch_outcomes"][0]["canary"] is True
    hosts = result["hosts"]
    assert hosts["fleet-h3"]["failed_check"] == "verify"
    # Untouched hosts carry their planned batch and why they were left alone.
    assert [hosts[h]["batch"] for h in ("fleet-h4", "fleet-h5", "fleet-h6")] == [3, 3, 4]
    assert hosts["fleet-h6"]["reason"] == ("the rollout stopped after batch 2 of 4 (fleet-h3 failed at verify); "
                                           "this host was in batch 4")
    assert hosts["fleet-h6"]["checks"] == [] and hosts["fleet-h6"]["verified"] is None
    assert hosts["fleet-h1"]["reason"] is None and hosts["fleet-h1"]["failed_check"] is None
    # Defaults: a check's message, a check's time.
    assert hosts["fleet-h1"]["checks"][4] == {"name": "serving", "status": "skipped",
                                              "message": "gpufleet_benchmark is false", "time_s": None}


def test_the_brief_verdict_word_for_word():
    rollout = stopped_rollout()
    rollout["hosts"]["fleet-h3"]["revert"]["failed"] = []
    assert rollout_result(rollout)["verdict"] == ("Stopped after batch 2 of 4: fleet-h3 failed verify; "
                                                  "fleet-h3 reverted; 3 hosts not touched")


def test_the_result_is_json_and_is_accepted_again_unchanged():
    result = rollout_result(stopped_rollout())
    assert json.loads(json.dumps(result)) == result
    assert rollout_result(copy.deepcopy(result)) == result
    assert rollout_markdown(result) == rollout_markdown(stopped_rollout())
    assert rollout_junit(result) == rollout_junit(stopped_rollout())


def test_the_input_is_not_modified():
    rollout = stopped_rollout()
    kept = copy.deepcopy(rollout)
    rollout_result(rollout)
    rollout_markdown(rollout)
    rollout_junit(rollout)
    assert rollout == kept


def test_defaults_are_filled_in():
    rollout = completed_rollout(3)
    del rollout["canary"]
    rollout["hosts"]["fleet-h2"] = {"status": "unchanged", "batch": 2}
    result = rollout_result(rollout)
    assert result["canary"] == 1
    assert result["revert_on_failure"] is True
    assert result["started"] is None and result["finished"] is None
    assert result["hosts"]["fleet-h2"] == {
        "status": "unchanged", "batch": 2, "checks": [], "changes": [], "verified": True, "verify_failures": [],
        "reverted": False, "revert": None, "failure": None, "drift": [], "health": None, "failed_check": None,
        "reason": None}


@pytest.mark.parametrize("count, unchanged, verdict", [
    (6, 0, "All 6 hosts tuned and verified"),
    (6, 2, "All 6 hosts tuned and verified (2 already tuned)"),
    (2, 2, "All 2 hosts already tuned and verified"),
    (1, 0, "fleet-h1 tuned and verified"),
])
def test_a_completed_rollout(count, unchanged, verdict):
    rollout = completed_rollout(count)
    for name in list(rollout["hosts"])[:unchanged]:
        rollout["hosts"][name]["status"] = "unchanged"
    result = rollout_result(rollout)
    assert (result["status"], result["verdict"]) == ("completed", verdict)
    assert all(b["outcome"].startswith("passed: ") for b in result["batch_outcomes"])


def test_a_rollout_with_no_host():
    rollout = {"run_id": "empty", "canary": 0, "batches": [], "stopped_after_batch": None, "hosts": {}}
    result = rollout_result(rollout)
    assert (result["status"], result["verdict"], result["counts"]["total"]) == ("completed", "No host to roll out to", 0)
    assert "No batch." in rollout_markdown(rollout)
    root = parse(rollout_junit(rollout))
    assert_junit_shape(root)
    assert len(root) == 0 and root.get("tests") == "0"


def test_a_host_in_no_batch_is_not_touched_and_said_so():
    rollout = completed_rollout(3)
    rollout["hosts"]["spare-1"] = {"status": "untouched", "batch": None}
    result = rollout_result(rollout)
    assert result["status"] == "completed"
    assert result["verdict"] == "All 3 hosts tuned and verified; 1 host not touched"
    assert result["hosts"]["spare-1"]["reason"] == "in no batch of this rollout"


def test_a_failure_in_the_last_batch_leaves_nothing_to_stop_before():
    rollout = completed_rollout(4)
    rollout["hosts"]["fleet-h4"] = failed_verify(3)
    rollout["hosts"]["fleet-h4"]["revert"]["failed"] = []
    result = rollout_result(rollout)
    assert result["status"] == "failed"
    assert result["verdict"] == "Completed all 3 batches with failures: fleet-h4 failed verify; fleet-h4 reverted"


def test_an_unreachable_host_and_a_host_that_failed_before_changing_anything():
    rollout = stopped_rollout()
    rollout["hosts"]["fleet-h2"] = {
        "status": "unreachable", "batch": 2,
        "checks": [{"name": "reachable", "status": "error", "message": "ssh: connect to host fleet-h2 port 22: timed out"}],
        "failure": {"task": "reachable", "message": "timed out"}}
    rollout["hosts"]["fleet-h3"] = {
        "status": "failed", "batch": 2, "verified": None,
        "checks": [{"name": "reachable", "status": "passed"}, {"name": "audit", "status": "failed",
                                                               "message": "no NVIDIA GPU"}]}
    result = rollout_result(rollout)
    assert result["verdict"] == ("Stopped after batch 2 of 4: fleet-h2 unreachable, fleet-h3 failed audit; "
                                 "nothing to revert on fleet-h3; 3 hosts not touched")
    assert result["batch_outcomes"][1]["outcome"] == ("failed: fleet-h2 (unreachable), fleet-h3 (audit); "
                                                      "the rollout stopped here")


def test_a_failed_host_without_a_failed_check_names_the_task():
    rollout = stopped_rollout()
    host = rollout["hosts"]["fleet-h3"]
    host["checks"] = [{"name": "reachable", "status": "passed"}]
    host["failure"] = {"task": "Apply the sysctl profile", "message": "permission denied"}
    host["reverted"], host["revert"] = False, None
    result = rollout_result(rollout)
    assert result["verdict"] == ('Stopped after batch 2 of 4: fleet-h3 failed at task "Apply the sysctl profile"; '
                                 "fleet-h3 not reverted; 3 hosts not touched")
    assert result["hosts"]["fleet-h3"]["failed_check"] is None


def test_a_failed_host_without_a_failed_check_names_its_stage():
    rollout = stopped_rollout()
    host = rollout["hosts"]["fleet-h3"]
    host["checks"] = [{"name": "reachable", "status": "passed"}]
    host["failure"] = {"stage": "tune", "task": "Apply the sysctl profile", "message": "permission denied"}
    result = rollout_result(rollout)
    assert result["verdict"].startswith("Stopped after batch 2 of 4: fleet-h3 failed tune; ")
    assert result["batch_outcomes"][1]["outcome"].startswith("failed: fleet-h3 (tune)")
    assert '- Failure: at tune, task "Apply the sysctl profile": permission denied' in rollout_markdown(rollout)


def test_serving_containers_follow_their_hosts_outside_the_batches():
    rollout = completed_rollout(3)
    rollout["hosts"]["ct-101"] = dict(tuned(None), changes=changes()[:1])
    rollout["hosts"]["ct-102"] = {"status": "untouched", "batch": None, "checks": []}
    rollout["hosts"]["ct-103"] = {
        "status": "failed", "batch": None, "checks": [{"name": "reachable", "status": "passed", "time_s": 0.0},
                                                      {"name": "tune", "status": "failed", "message": "locked"}],
        "changes": [], "verified": None, "failure": {"stage": "tune", "task": "Raise memlock", "message": "locked"}}
    result = rollout_result(rollout)
    assert result["status"] == "failed"
    assert result["counts"] == {"tuned": 4, "unchanged": 0, "quarantined": 0, "failed": 1, "unreachable": 0,
                                "untouched": 1, "total": 6}
    assert result["verdict"] == ("Completed all 2 batches with failures: ct-103 failed tune; nothing to revert on ct-103; "
                                 "1 host not touched")
    assert [b["hosts"] for b in result["batch_outcomes"]] == [["fleet-h1"], ["fleet-h2", "fleet-h3"]]
    assert result["hosts"]["ct-102"]["reason"] == "in no batch of this rollout"
    page = rollout_markdown(rollout)
    assert "| no batch | ct-101, ct-103 | failed: ct-103 (tune); 1 tuned |" in page
    assert "### ct-103" in page and "| ct-101 | - | tuned | 1 |" in page
    assert "- in no batch (1): ct-102" in page
    assert_junit_shape(parse(rollout_junit(rollout)))


def test_drift_and_revert_items_as_the_state_modules_give_them():
    """tuning_state (drift) and tuning_revert (restored) name an item's kind by its way back,
    show a file's state as text, and carry key, reboot and recorded_by: all kept."""
    rollout = stopped_rollout()
    host = rollout["hosts"]["fleet-h3"]
    host["revert"]["restored"] = [
        {"key": "sysctl:vm.swappiness", "area": "sysctl", "kind": "sysctl", "target": "vm.swappiness",
         "before": "60", "current": "60", "reboot": False, "recorded_by": "run-0"},
        {"key": "file:/etc/default/grub", "area": "kernel_cmdline", "kind": "file", "target": "/etc/default/grub",
         "before": "sha256:ab12cd34ef56 size 120 mode 0644", "current": "sha256:ab12cd34ef56 size 120 mode 0644",
         "reboot": True, "recorded_by": "run-0"},
        {"key": "kmod:nvidia_peermem", "area": "peermem", "kind": "kmod", "target": "nvidia_peermem",
         "before": "not loaded", "current": "loaded", "reboot": False, "recorded_by": "run-0"},
    ]
    rollout["hosts"]["fleet-h1"]["drift"] = [
        {"key": "pcie_mrrs:0000:1b:00.0", "area": "pcie", "kind": "pcie_mrrs", "target": "0000:1b:00.0",
         "recorded": "4096", "current": "512", "recorded_by": "run-0"},
        {"key": "file:/etc/sysctl.d/90-gpufleet.conf", "area": "sysctl", "kind": "file",
         "target": "/etc/sysctl.d/90-gpufleet.conf", "recorded": "sha256:ab12cd34ef56", "current": "absent",
         "recorded_by": "run-0"},
    ]
    result = rollout_result(rollout)
    assert result["hosts"]["fleet-h3"]["revert"]["restored"][1]["reboot"] is True
    assert result["hosts"]["fleet-h1"]["drift"][0]["key"] == "pcie_mrrs:0000:1b:00.0"
    assert rollout_result(result) == result
    page = rollout_markdown(rollout)
    assert "  - restored sysctl `vm.swappiness`: back to 60" in page
    assert "  - restored kernel_cmdline `/etc/default/grub`: back to sha256:ab12cd34ef56 size 120 mode 0644" in page
    assert "  - restored peermem `nvidia_peermem`: restored to not loaded, but reads loaded" in page
    assert "  - pcie `0000:1b:00.0`: recorded 4096, now 512" in page
    assert "  - sysctl `/etc/sysctl.d/90-gpufleet.conf`: recorded sha256:ab12cd34ef56, now absent" in page


def test_a_check_mode_rollout_says_so():
    rollout = completed_rollout(3)
    rollout["check_mode"] = True
    result = rollout_result(rollout)
    assert result["check_mode"] is True
    assert result["verdict"] == "Check mode: All 3 hosts tuned and verified"
    page = rollout_markdown(rollout)
    assert page.startswith("# Fleet rollout run-1 (check mode)\n")
    assert "check mode: nothing was changed" in page
    assert rollout_result(completed_rollout(3))["check_mode"] is False


def test_a_stop_without_a_failed_host_gives_the_stop_reason():
    rollout = stopped_rollout()
    rollout["hosts"]["fleet-h3"] = tuned(2)
    rollout["stop_reason"] = "the operator ended the play"
    assert rollout_result(rollout)["verdict"] == ("Stopped after batch 2 of 4: the operator ended the play; "
                                                  "3 hosts not touched")


def test_many_failed_hosts_are_counted_not_listed():
    names = ["gpu-%03d" % index for index in range(40)]
    hosts = dict((name, failed_verify(2)) for name in names[1:])
    hosts[names[0]] = tuned(1)
    for name in names[1:6]:
        hosts[name]["reverted"], hosts[name]["revert"] = False, None
    for name in names[6:]:
        hosts[name]["revert"]["failed"] = []
    rollout = {"run_id": "big", "batches": [names[:1], names[1:]], "stopped_after_batch": None, "hosts": hosts}
    result = rollout_result(rollout)
    assert result["verdict"] == ("Completed all 2 batches with failures: gpu-001 failed verify, gpu-002 failed verify, "
                                 "gpu-003 failed verify, 36 more hosts failed or unreachable; "
                                 "34 reverted, 5 not reverted")
    assert result["batch_outcomes"][1]["outcome"].endswith("gpu-010 (verify) and 29 more")


MALFORMED = [
    # (change to the stopped rollout, words the message must hold)
    (lambda r: r["hosts"]["fleet-h1"].update(status="tunned"),
     ["hosts.fleet-h1.status='tunned'", "tuned, unchanged, quarantined, failed, unreachable, untouched"]),
    (lambda r: r["hosts"]["fleet-h1"]["checks"][0].update(status="ok"),
     ["hosts.fleet-h1.checks[0].status='ok'", "passed, failed, error, skipped"]),
    (lambda r: r["hosts"].pop("fleet-h5"), ["batches[2]='fleet-h5'", "is not in hosts"]),
    (lambda r: r["batches"][3].append("fleet-h1"), ["batches[3]='fleet-h1'", "also in batches[0]"]),
    (lambda r: r["batches"].append([]), ["batches[4]=[]", "non-empty list"]),
    (lambda r: r.update(run_id="20261201 run"), ["run_id='20261201 run'"]),
    (lambda r: r.update(run_id="run-1\n"), ["run_id='run-1\\n'"]),
    (lambda r: r.pop("run_id"), ["run_id=None", "required"]),
    (lambda r: r.update(stopped_after_batch=5), ["stopped_after_batch=5", "from 1 to 4"]),
    (lambda r: r.update(stopped_after_batch=True), ["stopped_after_batch=True"]),
    (lambda r: r.update(stoped_after_batch=2), ["unknown key 'stoped_after_batch'"]),
    (lambda r: r["hosts"]["fleet-h2"].update(status="untouched", checks=[], changes=[], verified=None),
     ["hosts.fleet-h2.status='untouched'", "its batch 2 ran"]),
    (lambda r: r["hosts"].update({"fleet-h4": tuned(3)}),
     ["hosts.fleet-h4.status='tuned'", "batch 3 comes after the stop"]),
    (lambda r: r["hosts"]["fleet-h1"].update(batch=2), ["hosts.fleet-h1.batch=2", "batch 1"]),
    (lambda r: r.update(stopped_after_batch=None, stop_reason=None, hosts=dict(
        r["hosts"], **{"fleet-h4": tuned(3), "fleet-h5": tuned(3), "fleet-h6": tuned(4)})),
     ["hosts.fleet-h3.status='failed'", "went on to batch 3"]),
    (lambda r: r["hosts"]["fleet-h1"].update(verified=False), ["hosts.fleet-h1.verified=False", "status tuned"]),
    (lambda r: r["hosts"]["fleet-h1"].update(reverted=True), ["hosts.fleet-h1.reverted=True", "status tuned"]),
    (lambda r: r["hosts"]["fleet-h6"].update(changes=changes()), ["hosts.fleet-h6.changes=", "untouched"]),
    (lambda r: r["hosts"]["fleet-h1"]["changes"][0].update(kind="register"),
     ["hosts.fleet-h1.changes[0].kind='register'", "value, file, module, service"]),
    (lambda r: r["hosts"]["fleet-h1"]["changes"][1].update(after={"digest": "x"}),
     ["hosts.fleet-h1.changes[1].after={'digest': 'x'}", "sha256"]),
    (lambda r: r["hosts"]["fleet-h1"]["changes"][0].pop("before"), ["hosts.fleet-h1.changes[0] lacks 'before'"]),
    (lambda r: r["hosts"]["fleet-h1"]["checks"][0].update(time_s=-1), ["hosts.fleet-h1.checks[0].time_s=-1"]),
    (lambda r: r["hosts"]["fleet-h1"]["checks"][0].update(time_s="fast"), ["hosts.fleet-h1.checks[0].time_s='fast'"]),
    (lambda r: r["hosts"]["fleet-h1"]["checks"][0].update(time_s=float("nan")), ["hosts.fleet-h1.checks[0].time_s=nan"]),
    (lambda r: r["hosts"]["fleet-h3"]["revert"].update(undone=[]), ["hosts.fleet-h3.revert has an unknown key 'undone'"]),
    (lambda r: r["hosts"]["fleet-h3"]["revert"]["failed"][0].pop("target"), ["hosts.fleet-h3.revert.failed[0].target=None"]),
    (lambda r: r["hosts"]["fleet-h1"].update(drift=[{"area": "sysctl", "kind": "sysctl", "recorded": "10"}]),
     ["hosts.fleet-h1.drift[0].target=None"]),
    (lambda r: r["hosts"]["fleet-h3"]["failure"].update(line=12), ["hosts.fleet-h3.failure has an unknown key 'line'"]),
    (lambda r: r.update(check_mode="no"), ["check_mode='no'"]),
    (lambda r: r.update(serial=0), ["serial=0"]),
    (lambda r: r.update(canary=0), ["canary=0"]),
    (lambda r: r.update(revert_on_failure="yes"), ["revert_on_failure='yes'", "true or false"]),
    (lambda r: r.update(hosts=["fleet-h1"]), ["hosts=['fleet-h1']", "is not a dict"]),
]


@pytest.mark.parametrize("change, words", MALFORMED, ids=[words[0] for _change, words in MALFORMED])
@pytest.mark.parametrize("render", [rollout_result, rollout_markdown, rollout_junit])
def test_malformed_input_is_refused_naming_the_key_and_value(render, change, words):
    rollout = stopped_rollout()
    change(rollout)
    with pytest.raises(AnsibleFilterError) as exc:
        render(rollout)
    message = str(exc.value)
    assert message.startswith(render.__name__ + ": "), message
    for word in words:
        assert word in message, message


def test_a_rollout_that_is_not_a_dict():
    with pytest.raises(AnsibleFilterError) as exc:
        rollout_result(["fleet-h1"])
    assert "rollout=['fleet-h1'] is not a dict" in str(exc.value)


def test_a_time_given_as_text_is_a_number():
    rollout = stopped_rollout()
    rollout["hosts"]["fleet-h1"]["checks"][0]["time_s"] = "0.25"
    rollout["hosts"]["fleet-h1"]["checks"][1]["time_s"] = 3
    checks = rollout_result(rollout)["hosts"]["fleet-h1"]["checks"]
    assert [checks[0]["time_s"], checks[1]["time_s"]] == [0.25, 3.0]


def test_serial_as_the_user_gave_it():
    for serial in (2, "25%", [1, 5, "20%"], None):
        rollout = stopped_rollout()
        rollout["serial"] = serial
        assert rollout_result(rollout)["serial"] == serial


# ------------------------------------------------------------------------------ rollout_markdown

def test_the_page_of_a_stopped_rollout():
    page = rollout_markdown(stopped_rollout())
    lines = page.split("\n")
    assert lines[0] == "# Fleet rollout 20261201T070000Z-1a2b"
    # The verdict is the first thing after the title.
    assert lines[2] == ("**Stopped after batch 2 of 4: fleet-h3 failed verify; fleet-h3 revert incomplete; "
                        "3 hosts not touched**")
    assert page.index("**Stopped after") < page.index("## Batches") < page.index("## Failed and unreachable hosts")
    assert "| 2 | fleet-h2, fleet-h3 | failed: fleet-h3 (verify); 1 unchanged; the rollout stopped here |" in lines
    assert "| 3 | fleet-h4, fleet-h5 | not run (stopped after batch 2) |" in lines
    assert "| 1 (canary) | fleet-h1 | passed: 1 tuned |" in lines
    failed = page[page.index("### fleet-h3"):page.index("## Tuned and verified")]
    assert "- Status: **failed** in batch 2" in failed
    assert "| verify | FAILED | 2.2 s | sysctl vm.swappiness: 60, wanted 10 |" in failed
    assert "  - sysctl `vm.swappiness`: 60 -> 10" in failed
    assert ("  - sysctl `/etc/sysctl.d/90-gpufleet.conf`: absent -> sha256 ab12cd34ef56, 120 B, mode 0644"
            in failed)
    assert "  - cpu_power `gpufleet-cpu.service`: disabled -> enabled" in failed
    assert "- Verified: no\n  - sysctl vm.swappiness: 60, wanted 10\n  - pcie 0000:1b:00.0 MRRS: 512, wanted 4096" in failed
    assert "- Reverted: incomplete: 1 item could not be restored" in failed
    assert "  - restored sysctl `vm.swappiness`: back to 60" in failed
    assert "  - restored sysctl `/etc/sysctl.d/90-gpufleet.conf`: back to absent" in failed
    assert "  - could not restore `gpufleet-cpu.service`: systemctl disable: unit is masked" in failed
    assert "  - restored, takes effect at the next reboot: `/etc/default/grub`" in failed
    untouched = page[page.index("## Not touched"):]
    assert "The rollout stopped after batch 2 of 4: fleet-h3 failed at verify;" in untouched
    assert "- batch 3 (2): fleet-h4, fleet-h5" in untouched
    assert "- batch 4 (1): fleet-h6" in untouched
    assert page.endswith("fleet-h6\n")


def test_tuned_hosts_share_a_table_and_their_changes_are_grouped():
    page = rollout_markdown(stopped_rollout())
    assert "### fleet-h1" not in page and "### fleet-h2" not in page
    assert "| fleet-h1 | 1 | tuned | 2 | 4 passed, 2 skipped | 10.7 s |" in page
    assert "| fleet-h2 | 2 | unchanged | 0 | 4 passed, 2 skipped | 10.7 s |" in page
    assert "- sysctl `vm.swappiness`: 60 -> 10 (fleet-h1)" in page


def test_a_tuned_host_with_drift_gets_its_own_section():
    rollout = stopped_rollout()
    rollout["hosts"]["fleet-h1"]["drift"] = [
        {"area": "pcie", "kind": "value", "target": "0000:1b:00.0 MRRS", "recorded": "4096", "current": "512"}]
    result = rollout_result(rollout)
    assert result["verdict"].endswith("; drift on fleet-h1")
    page = rollout_markdown(rollout)
    section = page[page.index("## Tuned hosts to look at"):page.index("## Tuned and verified")]
    assert "### fleet-h1" in section and "- Look at: drift" in section
    assert "- Drift (settings that no longer hold): 1 item\n  - pcie `0000:1b:00.0 MRRS`: recorded 4096, now 512" in section
    assert "| fleet-h1 | 1 | tuned |" not in page


def test_a_completed_rollout_page():
    page = rollout_markdown(completed_rollout(6))
    assert page.split("\n")[2] == "**All 6 hosts tuned and verified**"
    assert "## Failed" not in page and "## Not touched" not in page
    assert "- sysctl `vm.swappiness`: 60 -> 10 (all 6 hosts)" in page


def test_hundreds_of_hosts_stay_grouped():
    rollout = completed_rollout(400, serial=50)
    last = rollout["batches"][-1][-1]
    rollout["hosts"][last] = failed_verify(len(rollout["batches"]))
    page = rollout_markdown(rollout)
    assert page.count("\n### fleet-h") == 1 and "### %s" % last in page
    assert "**Completed all 9 batches with failures: %s failed verify; %s revert incomplete**" % (last, last) in page
    assert "| 2 | 50 hosts: fleet-h2, fleet-h3, " in page and " and 40 more | passed: 50 tuned |" in page
    assert "- sysctl `vm.swappiness`: 60 -> 10 (all 399 hosts)" in page
    assert page.count("\n| fleet-h") == 399
    assert len(page) < 400 * 100


def test_table_cells_and_lines_survive_pipes_newlines_and_backticks():
    rollout = stopped_rollout()
    host = rollout["hosts"]["fleet-h3"]
    host["checks"][3]["message"] = "a | b\nc"
    host["changes"][0]["target"] = "odd`name"
    page = rollout_markdown(rollout)
    assert "| verify | FAILED | 2.2 s | a \\| b c |" in page
    assert "  - sysctl `` odd`name ``: 60 -> 10" in page


# ------------------------------------------------------------------------------ rollout_junit

def parse(text):
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    return ET.fromstring(text.encode("utf-8"))


def assert_junit_shape(root):
    """What a JUnit consumer (and the Jenkins/Ant schema) relies on: counts equal the children
    they count, at most one outcome per testcase, the suite's children in schema order."""
    assert root.tag == "testsuites" and root.get("name") == "gpufleet-rollout"
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in root:
        assert suite.tag == "testsuite"
        tags = [child.tag for child in suite]
        assert tags == ["properties"] + ["testcase"] * (len(tags) - 2) + ["system-out"], tags
        cases = suite.findall("testcase")
        counted = {"tests": len(cases),
                   "failures": sum(1 for c in cases if c.find("failure") is not None),
                   "errors": sum(1 for c in cases if c.find("error") is not None),
                   "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
        for key, value in counted.items():
            assert suite.get(key) == str(value), (suite.get("name"), key)
            totals[key] += value
        for case in cases:
            assert case.get("classname") == "gpufleet.rollout." + suite.get("name")
            assert len([c for c in case if c.tag in ("failure", "error", "skipped")]) <= 1
        times = [float(c.get("time")) for c in cases if c.get("time") is not None]
        if times:
            assert float(suite.get("time")) == pytest.approx(sum(times), abs=0.001)
        else:
            assert suite.get("time") is None
    for key, value in totals.items():
        assert root.get(key) == str(value), key


def test_the_junit_file_of_a_stopped_rollout():
    root = parse(rollout_junit(stopped_rollout()))
    assert_junit_shape(root)
    assert [s.get("name") for s in root] == ["fleet-h1", "fleet-h2", "fleet-h3", "fleet-h4", "fleet-h5", "fleet-h6"]
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("21", "1", "0", "8")
    assert root.get("time") == "32.100"
    h3 = root.find("testsuite[@name='fleet-h3']")
    assert [c.get("name") for c in h3.findall("testcase")] == ["reachable", "audit", "tune", "verify", "serving", "revert"]
    verify = h3.find("testcase[@name='verify']")
    assert verify.get("time") == "2.200"
    failure = verify.find("failure")
    assert failure.get("message") == "sysctl vm.swappiness: 60, wanted 10"
    assert failure.text == "sysctl vm.swappiness: 60, wanted 10\npcie 0000:1b:00.0 MRRS: 512, wanted 4096"
    assert h3.find("testcase[@name='serving']/skipped").get("message") == "gpufleet_benchmark is false"
    assert h3.find("testcase[@name='revert']").find("*") is None
    props = dict((p.get("name"), p.get("value")) for p in h3.find("properties"))
    assert props == {"run_id": "20261201T070000Z-1a2b", "status": "failed", "batch": "2", "verified": "no",
                     "reverted": "yes"}
    out = h3.find("system-out").text
    assert "could not restore `gpufleet-cpu.service`: systemctl disable: unit is masked" in out
    assert "changed: sysctl `vm.swappiness`: 60 -> 10" in out


def test_a_host_not_touched_is_one_skipped_testcase_with_the_reason():
    root = parse(rollout_junit(stopped_rollout()))
    suite = root.find("testsuite[@name='fleet-h6']")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [("gpufleet.rollout.fleet-h6", "rollout")]
    message = cases[0].find("skipped").get("message")
    assert "stopped after batch 2 of 4" in message and "this host was in batch 4" in message
    assert (suite.get("tests"), suite.get("skipped")) == ("1", "1")


def test_errors_and_a_host_whose_checks_do_not_show_its_failure():
    rollout = stopped_rollout()
    rollout["hosts"]["fleet-h2"] = {
        "status": "unreachable", "batch": 2, "checks": [],
        "failure": {"stage": "reachable", "task": "", "message": "ssh: connect to host fleet-h2 port 22: timed out"}}
    rollout["hosts"]["fleet-h3"]["checks"][3]["status"] = "error"
    rollout["hosts"]["fleet-h1"]["checks"] = []
    root = parse(rollout_junit(rollout))
    assert_junit_shape(root)
    h2 = root.find("testsuite[@name='fleet-h2']")
    error = h2.find("testcase[@name='rollout']/error")
    assert error.get("type") == "unreachable"
    assert error.get("message") == "at reachable: ssh: connect to host fleet-h2 port 22: timed out"
    assert root.find("testsuite[@name='fleet-h3']/testcase[@name='verify']/error") is not None
    # A host with no check still has one (passing) testcase.
    h1 = root.find("testsuite[@name='fleet-h1']")
    assert [c.get("name") for c in h1.findall("testcase")] == ["rollout"] and h1.get("tests") == "1"
    assert (root.get("errors"), root.get("failures")) == ("2", "0")


def test_a_failed_host_with_only_passing_checks_still_fails_in_junit():
    rollout = stopped_rollout()
    host = rollout["hosts"]["fleet-h3"]
    host["checks"] = [{"name": "reachable", "status": "passed"}]
    root = parse(rollout_junit(rollout))
    assert_junit_shape(root)
    failure = root.find("testsuite[@name='fleet-h3']/testcase[@name='rollout']/failure")
    assert failure.get("message") == 'task "gpufleet.tuning.verify : Fail on what did not hold": 2 checks failed'


def test_markup_and_control_characters_are_escaped():
    rollout = stopped_rollout()
    text = 'wanted <10> & "quoted" \x1b[31mred\x1b[0m\nline two \x00 é \udcff'
    rollout["hosts"]["fleet-h3"]["checks"][3]["message"] = text
    rollout["hosts"]["fleet-h3"]["verify_failures"] = []
    xml = rollout_junit(rollout)
    assert "\x1b" not in xml and "\x00" not in xml
    root = parse(xml)
    assert_junit_shape(root)
    failure = root.find("testsuite[@name='fleet-h3']/testcase[@name='verify']/failure")
    # Control characters and a lone surrogate are dropped (node_text), the newline is a space.
    shown = 'wanted <10> & "quoted" [31mred[0m line two  é '
    assert failure.get("message") == shown
    assert failure.text == shown
    page = rollout_markdown(rollout)
    assert '| verify | FAILED | 2.2 s | wanted &lt;10&gt; &amp; "quoted" \\[31mred\\[0m line two é |' in page
    page.encode("utf-8")


def test_a_completed_rollout_in_junit_has_no_failure():
    root = parse(rollout_junit(completed_rollout(5)))
    assert_junit_shape(root)
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("30", "0", "0", "10")


# ------------------------------------------------------------------------------ through Ansible

def test_the_filters_are_exported():
    assert sorted(FilterModule().filters()) == ["play_serial", "rollout_junit", "rollout_markdown", "rollout_plan",
                                                "rollout_result"]


def test_a_play_writes_the_three_files(tmp_path):
    """Through Ansible's templating (its lazy containers and tagged strings), as rollout.yml
    writes them."""
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({"rollout": stopped_rollout()}))
    playbook = """
- name: Write the rollout reports
  hosts: localhost
  gather_facts: false
  vars_files:
    - vars.yml
  tasks:
    - name: Write them
      ansible.builtin.copy:
        content: "{{ item.content }}"
        dest: "{{ playbook_dir }}/rollout-{{ rollout.run_id }}.{{ item.ext }}"
        mode: "0644"
      loop:
        - {ext: json, content: "{{ rollout | gpufleet.tuning.rollout_result | to_nice_json }}"}
        - {ext: md, content: "{{ rollout | gpufleet.tuning.rollout_markdown }}"}
        - {ext: xml, content: "{{ rollout | gpufleet.tuning.rollout_junit }}"}
      loop_control:
        label: "{{ item.ext }}"
"""
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    rc, out = run_playbook(tmp_path, inventory, playbook)
    assert rc == 0, out
    stem = tmp_path / "rollout-20261201T070000Z-1a2b"
    assert json.loads((stem.with_suffix(".json")).read_text()) == rollout_result(stopped_rollout())
    assert (stem.with_suffix(".md")).read_text() == rollout_markdown(stopped_rollout())
    assert_junit_shape(parse((stem.with_suffix(".xml")).read_text()))
