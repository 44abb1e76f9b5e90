"""host_tuning's audit option (plugins/plugin_utils/tuning_audit.py): checked before the module
runs, with the bad value named; the audit it judges from the call's result is the audit the
audit_judge action judges from the same facts and plan, its two files written on the
controller (a planted link refused); and through ansible-playbook, the call in check mode reads
this machine, judges it, and changes nothing on it."""

import json
import os
import sys

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.tuning.plugins.action import audit_judge
from ansible_collections.gpufleet.tuning.plugins.filter.audit_planned_tuning import audit_planned_tuning
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import tuning_audit
from ansible_collections.gpufleet.tuning.tests.unit.helpers import result_of, run_playbook
from ansible_collections.gpufleet.tuning.tests.unit.plugins.filter import audit_cases

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLANNED = audit_cases.load_yaml(os.path.join(REPO, "roles", "audit", "vars", "main.yml"))["__audit_planned_modules"]


def call_result(name="untuned"):
    """A host_tuning result shaped from fixture NAME: its facts, every module planned."""
    data = audit_cases.fixture(name)
    plan = {}
    for modules in data["results"].values():
        plan.update(modules)
    return {"facts": data["facts"], "plan": plan, "modules": {}, "changed": False}


def test_no_option_no_audit():
    assert tuning_audit.options(None, "node-a") is None


def test_the_defaults_are_the_audit_role_s(tmp_path):
    audit = tuning_audit.options({"path": str(tmp_path)}, "node-a")
    assert audit["host"] == "node-a", "the inventory name"
    assert os.path.samefile(audit["rules_file"], audit_cases.RULES_FILE)
    assert audit["planned_modules"] == PLANNED, "every result of the call, by phase, as the audit role lists them"
    assert audit["facts"] == {} and audit["params"] == {} and audit["mode"] == 0o644
    assert audit["rules_extra"] == [] and audit["rules_disabled"] == [] and audit["plan_in_container"] is False


@pytest.mark.parametrize("value, words", [
    ([1], "audit: must be a mapping (the audit's options), got list"),
    ({}, "missing required arguments: path"),
    ({"path": "relative/folder"}, "path must be an absolute path (the host's audit folder), got 'relative/folder'"),
    ({"path": "/tmp/x", "mode": "rw"}, "audit.mode must be an octal mode such as '0644', got 'rw'"),
    ({"path": "/tmp/x", "rules_file": "/nonexistent/rules.yml"}, "cannot read the rules file /nonexistent/rules.yml"),
    ({"path": "/tmp/x", "owner": "root"}, "owner"),
    ({"path": "/tmp/x", "rules_disabled": {"a": 1}}, "rules_disabled"),
])
def test_bad_options_are_named(value, words):
    with pytest.raises(AnsibleActionFail) as raised:
        tuning_audit.options(value, "node-a")
    assert words in str(raised.value)


def test_the_audit_is_the_audit_judge_s_and_its_files_are_written(tmp_path):
    folder = tmp_path / "artifacts" / "node-a"
    audit = tuning_audit.options({"path": str(folder), "params": audit_cases.params()}, "node-a")
    result = call_result()
    judged = tuning_audit.judge(result, audit)
    plan = audit_planned_tuning(result, PLANNED)
    expected = audit_judge.judge("node-a", result["facts"], plan, audit_cases.params(), audit_cases.rules())
    for key in ("findings", "optimal", "unknown", "not_applicable", "counts", "worst", "rules", "planned", "facts", "host"):
        assert judged[key] == expected[key], key
    assert judged["since"]["none"] is True, "no previous audit"
    written = json.loads((folder / "audit.json").read_text())
    assert written == json.loads(json.dumps(dict((k, v) for k, v in judged.items() if k not in ("path", "files"))))
    assert (folder / "system-improve.md").read_text().startswith("# System improvement report: node-a\n")
    assert judged["path"] == str(folder) and [f["name"] for f in judged["files"]] == ["audit.json", "system-improve.md"]
    # A second judgement compares with the first.
    again = tuning_audit.judge(call_result("tuned"), audit)
    assert again["since"]["previous_time"] == written["time"] and again["since"]["fixed"]


def test_a_planted_link_is_refused_and_nothing_is_written(tmp_path):
    folder = tmp_path / "node-a"
    folder.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("keep\n")
    os.symlink(str(secret), str(folder / "audit.json"))
    audit = tuning_audit.options({"path": str(folder)}, "node-a")
    with pytest.raises(AnsibleActionFail) as raised:
        tuning_audit.judge(call_result(), audit)
    assert "symbolic link" in str(raised.value)
    assert secret.read_text() == "keep\n" and sorted(os.listdir(str(folder))) == ["audit.json"]


PLAY = """
- hosts: node-a
  gather_facts: false
  tasks:
    - name: Read, plan and judge
      gpufleet.tuning.host_tuning:
        parts:
          sysctl_profile:
            name: gpufleet-unit-test-audit
            settings: {kernel.shmmni: %(shmmni)s}
            persist: false
        apply: [sysctl_profile]
        audit: %(audit)s
%(extra)s      check_mode: true
      register: tuned
    - name: Show
      ansible.builtin.debug:
        msg: "RESULT {{ tuned | to_json }}"
"""
INVENTORY = {"all": {"hosts": {"node-a": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}


def shmmni():
    with open("/proc/sys/kernel/shmmni") as handle:
        return handle.read().strip()


def test_the_call_judges_what_it_read_and_changes_nothing_on_the_node(tmp_path):
    folder = tmp_path / "artifacts" / "node-a"
    before = shmmni()
    audit = {"facts": {"sysctl_keys": ["kernel.shmmni"]}, "path": str(folder)}
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY % {"shmmni": before, "audit": json.dumps(audit), "extra": ""})
    assert rc == 0, out
    result = result_of(out)
    assert result["audit"]["host"] == "node-a" and result["audit"]["facts"]["kernel"]
    assert "facts" not in result, "the facts are the audit's, not twice in the result"
    assert "sysctl_profile" in result["audit"]["planned"]["runtime"]
    assert json.loads((folder / "audit.json").read_text())["time"] == result["audit"]["time"]
    assert result["changed"] is False, "the record on the controller is not a change to the host"
    assert shmmni() == before


def test_a_bad_audit_option_fails_before_the_module_runs(tmp_path):
    audit = {"path": "relative"}
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY % {"shmmni": shmmni(), "audit": json.dumps(audit), "extra": ""})
    assert rc != 0 and "host_tuning: audit: path must be an absolute path" in out, out
    assert "RESULT" not in out


def test_facts_and_audit_facts_are_not_both_given(tmp_path):
    audit = {"path": str(tmp_path / "a")}
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY % {"shmmni": shmmni(), "audit": json.dumps(audit),
                                                        "extra": "        facts: {}\n"})
    assert rc != 0 and "give the node_facts options once, as facts or as audit.facts, not both" in out, out
    assert not (tmp_path / "a").exists()
