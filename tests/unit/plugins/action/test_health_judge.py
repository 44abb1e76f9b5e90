"""gpufleet.tuning.health_judge: one host's health verdict judged in the controller process, the
same verdict the filter health_verdict gives, health.json written atomically on the controller,
a link refused and bad input named before anything is written, nothing written in check mode."""

import copy
import json
import os

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.tuning.plugins.action import health_judge
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import health_verdict
from ansible_collections.gpufleet.tuning.tests.unit.helpers import result_of, run_playbook
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases

INVENTORY = {"all": {"hosts": {"node-a": {"ansible_connection": "local",
                                          "ansible_python_interpreter": "/usr/bin/python3"}}}}


def sick_facts():
    """The tuned fixture node with a remapped-row failure on GPU 0."""
    facts = copy.deepcopy(audit_cases.fixture("tuned")["facts"])
    facts["gpus"][0]["remapped_rows_failure"] = {"value": True, "source": "nvml:nvmlDeviceGetRemappedRows"}
    return facts


def args(folder, node_facts, **extra):
    found = {"host": "node-a", "facts": node_facts, "params": {"health": audit_cases.health_params()},
             "rules_file": audit_cases.RULES_FILE, "path": str(folder)}
    found.update(extra)
    return found


def test_the_verdict_is_the_filter_s_and_health_json_holds_it(tmp_path):
    folder = tmp_path / "node-a"
    verdict, changed = health_judge.judge_and_write(args(folder, sick_facts()), 0o644, False)
    assert changed is True
    assert verdict["status"] == "quarantined" and verdict["actions"] == ["rma", "drain"]
    written = json.loads((folder / "health.json").read_text())
    assert written["status"] == "quarantined" and written["host"] == "node-a"
    expected = health_verdict(sick_facts(), audit_cases.rules(), params={"health": audit_cases.health_params()},
                              host="node-a")
    assert [f["rule"] for f in written["findings"]] == [f["rule"] for f in expected["findings"]]
    assert oct(os.stat(folder / "health.json").st_mode & 0o777) == "0o644"
    # the same verdict again: nothing to write (the time is the only thing that moves, to the second)
    assert verdict["files"][0]["name"] == "health.json"


def test_check_mode_writes_nothing(tmp_path):
    folder = tmp_path / "node-a"
    verdict, changed = health_judge.judge_and_write(args(folder, sick_facts()), 0o644, True)
    assert changed is True and verdict["status"] == "quarantined"
    assert not folder.exists()


def test_a_link_where_health_json_goes_is_refused_and_its_target_untouched(tmp_path):
    folder = tmp_path / "node-a"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(str(victim), str(folder / "health.json"))
    with pytest.raises(AnsibleActionFail, match="health.json.*symbolic link"):
        health_judge.judge_and_write(args(folder, sick_facts()), 0o644, False)
    assert victim.read_text() == "keep"


@pytest.mark.parametrize("extra, message", [
    ({"policy": "maybe"}, "gpufleet_health_policy must be one of quarantine, stop, report, got 'maybe'"),
    ({"phase": "later"}, "health phase must be one of before, after_reboot, after_failure, audit, got 'later'"),
    ({"host": ""}, "host must be the inventory name"),
    ({"facts": ["not", "facts"]}, "facts must be the facts of gpufleet.tuning.node_facts"),
    ({"rules_file": "rules.yml"}, "rules_file must be an absolute path"),
    ({"rules_extra": {"id": "x"}}, "rules_extra must be a list"),
])
def test_bad_input_is_named_and_nothing_is_written(tmp_path, extra, message):
    folder = tmp_path / "node-a"
    with pytest.raises(AnsibleActionFail, match="health_judge: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        health_judge.judge_and_write(args(folder, sick_facts(), **extra), 0o644, False)
    assert not folder.exists()


def test_through_a_playbook_the_result_is_the_verdict(tmp_path):
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps({"facts": sick_facts(), "params": {"health": audit_cases.health_params()}}))
    playbook = """
- hosts: node-a
  gather_facts: false
  vars_files: [%s]
  tasks:
    - name: Judge
      gpufleet.tuning.health_judge:
        host: node-a
        facts: "{{ facts }}"
        params: "{{ params }}"
        rules_file: %s
        policy: report
        path: %s
      register: verdict
      check_mode: false
    - name: Show
      ansible.builtin.debug:
        msg: "RESULT {{ verdict | to_json }}"
""" % (facts_file, audit_cases.RULES_FILE, tmp_path / "out" / "node-a")
    rc, out = run_playbook(tmp_path, INVENTORY, playbook)
    assert rc == 0, out
    verdict = result_of(out)
    assert verdict["status"] == "quarantined" and verdict["policy"] == "report"
    assert verdict["quarantine"] is False and verdict["proceed"] is True
    assert (tmp_path / "out" / "node-a" / "health.json").exists()
