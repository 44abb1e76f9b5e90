"""gpufleet.tuning.audit_judge: the audit of one host judged in the controller process, the same
audit the filters give (audit_rules, audit_since, audit_report), its two files written on the
controller atomically, links refused and bad input named before anything is written, nothing
written in check mode; the rules file parsed once per process while unchanged."""

import json
import os
import stat

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.tuning.plugins.action import audit_judge
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_report import audit_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_since import audit_since
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_planned import audit_planned
from ansible_collections.gpufleet.tuning.tests.unit.helpers import result_of, run_playbook
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases

INVENTORY = {"all": {"hosts": {"node-a": {"ansible_connection": "local",
                                          "ansible_python_interpreter": "/usr/bin/python3"}}}}


def inputs(tmp_path, name="untuned"):
    """The task's arguments for fixture NAME, in a vars file (the facts are large)."""
    data = audit_cases.fixture(name)
    args = {"facts": data["facts"], "plan": audit_planned(data["results"]), "params": audit_cases.params()}
    path = tmp_path / ("%s-args.json" % name)
    path.write_text(json.dumps(args))
    return str(path), data


def play(folder, args_file, extra="", rules_file=audit_cases.RULES_FILE, task_extra=""):
    return """
- hosts: node-a
  gather_facts: false
  vars_files: [%s]
  tasks:
    - name: Judge
      gpufleet.tuning.audit_judge:
        host: node-a
        facts: "{{ facts }}"
        plan: "{{ plan }}"
        params: "{{ params }}"
        rules_file: %s
        path: %s
%s      register: audit_result
      check_mode: false
%s    - name: Show
      ansible.builtin.debug:
        msg: "RESULT {{ audit_result | to_json }}"
""" % (json.dumps(args_file), json.dumps(rules_file), json.dumps(folder), extra, task_extra)


AUDIT_KEYS = {"host", "time", "findings", "optimal", "unknown", "not_applicable", "counts", "worst", "rules",
              "planned", "facts", "since"}


def test_the_audit_is_the_filters_audit_and_its_files_are_written(tmp_path):
    args_file, data = inputs(tmp_path)
    folder = tmp_path / "artifacts" / "node-a"
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), args_file))
    assert rc == 0, out
    result = result_of(out)
    written = json.loads((folder / "audit.json").read_text())
    assert set(written) == AUDIT_KEYS
    assert {key: result[key] for key in AUDIT_KEYS} == written, "the registered result is the audit"
    expected = audit_cases.audit("untuned")
    for key in ("findings", "optimal", "unknown", "not_applicable", "counts", "worst", "rules", "planned", "facts"):
        assert written[key] == expected[key], key
    assert written["host"] == "node-a" and written["since"]["none"] is True
    # The report in the plan's order (the registered result keeps it; audit.json sorts keys).
    assert (folder / "system-improve.md").read_text() == audit_report({key: result[key] for key in AUDIT_KEYS})
    assert (folder / "audit.json").read_text() == json.dumps(written, indent=4, sort_keys=True) + "\n"
    for name in ("audit.json", "system-improve.md"):
        assert oct(stat.S_IMODE(os.stat(str(folder / name)).st_mode)) == "0o644"
    assert oct(stat.S_IMODE(os.stat(str(folder)).st_mode)) == "0o755"
    assert sorted(os.listdir(str(folder))) == ["audit.json", "system-improve.md"]
    assert [f["name"] for f in result["files"]] == ["audit.json", "system-improve.md"]


def test_a_second_audit_compares_with_the_first(tmp_path):
    args_file = inputs(tmp_path)[0]
    folder = tmp_path / "artifacts" / "node-a"
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), args_file))
    assert rc == 0, out
    first = json.loads((folder / "audit.json").read_text())
    tuned_file = inputs(tmp_path, "tuned")[0]
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), tuned_file))
    assert rc == 0, out
    second = json.loads((folder / "audit.json").read_text())
    assert second["since"] == audit_since(second, json.dumps(first))
    assert second["since"]["previous_time"] == first["time"] and second["since"]["fixed"], second["since"]


def test_check_mode_writes_nothing(tmp_path):
    args_file = inputs(tmp_path)[0]
    folder = tmp_path / "artifacts" / "node-a"
    text = play(str(folder), args_file).replace("      check_mode: false\n", "      check_mode: true\n")
    rc, out = run_playbook(tmp_path, INVENTORY, text)
    assert rc == 0, out
    assert result_of(out)["changed"] is True and result_of(out)["counts"]
    assert not (tmp_path / "artifacts").exists()


def test_a_planted_link_is_refused_before_anything_is_written(tmp_path):
    args_file = inputs(tmp_path)[0]
    folder = tmp_path / "artifacts" / "node-a"
    folder.mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("keep\n")
    os.symlink(str(secret), str(folder / "system-improve.md"))
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), args_file))
    assert rc != 0 and "symbolic link" in out, out
    assert secret.read_text() == "keep\n"
    assert sorted(os.listdir(str(folder))) == ["system-improve.md"], "audit.json not written either"


@pytest.mark.parametrize("change, message", [
    (lambda a: a.update(rules_file="/nonexistent/rules.yml"), "cannot read the rules file /nonexistent/rules.yml"),
    (lambda a: a.update(rules_file="rules.yml"), "rules_file must be an absolute path, got 'rules.yml'"),
    (lambda a: a.update(facts=[1, 2]), "facts must be the facts of gpufleet.tuning.node_facts (a mapping), got list"),
    (lambda a: a.update(path="relative/dir"), "path must be an absolute folder path, got 'relative/dir'"),
    (lambda a: a.update(rules_extra=[{"id": "broken"}]), "broken"),
])
def test_bad_input_is_named_and_nothing_is_written(tmp_path, change, message):
    args_file, data = inputs(tmp_path)
    args = {"host": "node-a", "facts": data["facts"], "rules_file": audit_cases.RULES_FILE,
            "path": str(tmp_path / "artifacts" / "node-a")}
    change(args)
    task = "\n".join("        %s: %s" % (key, json.dumps(value)) for key, value in args.items())
    text = """
- hosts: node-a
  gather_facts: false
  tasks:
    - name: Judge
      gpufleet.tuning.audit_judge:
%s
      check_mode: false
""" % task
    rc, out = run_playbook(tmp_path, INVENTORY, text)
    assert rc != 0, out
    assert message in " ".join(out.split()), out
    assert not (tmp_path / "artifacts").exists()
    assert not os.path.exists(os.path.join(str(tmp_path), "relative"))


def test_an_unknown_option_is_refused(tmp_path):
    args_file = inputs(tmp_path)[0]
    folder = tmp_path / "artifacts" / "node-a"
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), args_file, extra="        owner: root\n"))
    assert rc != 0 and "Invalid options for gpufleet.tuning.audit_judge: owner" in out, out
    assert not folder.exists()


def test_a_rules_file_that_is_not_yaml_or_missing_is_named(tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text("rules: [\n")
    with pytest.raises(AnsibleActionFail, match="the rules file %s is not YAML" % rules):
        audit_judge.load_rules_file(str(rules))
    with pytest.raises(AnsibleActionFail, match="cannot read the rules file"):
        audit_judge.load_rules_file(str(tmp_path / "missing.yml"))
    with pytest.raises(AnsibleActionFail, match="must be an absolute path"):
        audit_judge.load_rules_file("rules.yml")


def test_a_previous_audit_that_is_not_a_plain_file_is_no_comparison(tmp_path):
    folder = tmp_path / "node-a"
    folder.mkdir()
    (folder / "audit.json").mkdir()
    assert audit_judge.previous_text(str(folder / "audit.json")) == ""
    assert audit_judge.previous_text(str(tmp_path / "missing.json")) == ""


def test_a_previous_audit_linked_to_a_private_file_or_a_fifo_is_never_read(tmp_path):
    """A link or FIFO planted in a shared folder as audit.json: never followed, never blocking."""
    secret = tmp_path / "id_ed25519"
    secret.write_text('{"findings": "PRIVATE KEY"}')
    folder = tmp_path / "node-a"
    folder.mkdir()
    os.symlink(str(secret), str(folder / "audit.json"))
    assert audit_judge.previous_text(str(folder / "audit.json")) == ""
    os.unlink(str(folder / "audit.json"))
    os.mkfifo(str(folder / "audit.json"))
    assert audit_judge.previous_text(str(folder / "audit.json")) == ""  # a blocking open would hang here
    linked = tmp_path / "linked"
    os.symlink(str(folder), str(linked))
    (folder / "audit.json").unlink()
    (folder / "audit.json").write_text("{}")
    assert audit_judge.previous_text(str(folder / "audit.json")) == "{}"
    assert audit_judge.previous_text(str(linked / "audit.json")) == ""  # a linked host folder


# ------------------------------------------------------------------------------ node text in the record

RAW_RMEM = "4096\t131072\t6291456"  # as the kernel gives it: tabs
# A site rule that fires only on the value as the node gave it (a tab in it), named by that value.
TAB_RULE = {"id": "site_tcp_rmem_tabs", "severity": "P2", "title": "tcp_rmem as read",
            "per": "items(memory.sysctls)[?@[0] == 'net.ipv4.tcp_rmem']", "label": "{key} = {have}",
            "facts": {"key": "item[0]", "have": "get(memory.sysctls, item[0])"},
            "when": "contains(have, `\"\\t\"`)", "message": "{key} is {have}\u202e<b>",
            "fix": {"class": "manual", "steps": "none"}, "rationale": "a test"}


def judged(previous=""):
    data = audit_cases.fixture("untuned")
    data["facts"]["memory"]["sysctls"]["net.ipv4.tcp_rmem"]["value"] = RAW_RMEM
    return audit_judge.judge("node-a", data["facts"], audit_planned(data["results"]), audit_cases.params(),
                             audit_cases.rules(), extra=[TAB_RULE], previous=previous)


def test_the_rules_judge_the_raw_facts_and_the_record_holds_clean_text():
    audit = judged()
    found = [f for f in audit["findings"] if f["rule"] == TAB_RULE["id"]]
    assert found, "the rule saw the tab: the facts were not cleaned before the rules"
    assert found[0]["item"] == "net.ipv4.tcp_rmem = 4096 131072 6291456"
    assert found[0]["message"] == "net.ipv4.tcp_rmem is 4096 131072 6291456<b>"
    assert audit["facts"]["memory"]["sysctls"]["net.ipv4.tcp_rmem"]["value"] == "4096 131072 6291456"
    files = audit_judge.render(audit)
    assert "\\t" not in files["audit.json"] and "\\u202e" not in files["audit.json"]
    assert "\t" not in files["system-improve.md"] and "\u202e" not in files["system-improve.md"]
    assert "- net.ipv4.tcp_rmem = 4096 131072 6291456: net.ipv4.tcp_rmem is 4096 131072 6291456&lt;b&gt;" \
        in files["system-improve.md"].splitlines()


def test_an_audit_with_a_tab_in_a_value_run_twice_has_nothing_new_since():
    first = audit_judge.render(judged())["audit.json"]
    second = judged(previous=first)
    assert second["since"]["none"] is False
    assert second["since"]["new"] == [] and second["since"]["fixed"] == [], second["since"]
    assert {"rule": TAB_RULE["id"], "item": "net.ipv4.tcp_rmem = 4096 131072 6291456", "severity": "P2",
            "title": "tcp_rmem as read"} in second["since"]["still"]


def test_an_audit_json_from_before_the_cleaning_compares_like_with_like():
    previous = json.loads(audit_judge.render(judged())["audit.json"])
    for finding in previous["findings"]:
        if finding["rule"] == TAB_RULE["id"]:
            finding["item"] = "net.ipv4.tcp_rmem = " + RAW_RMEM  # as an older version recorded it
    since = judged(previous=json.dumps(previous))["since"]
    assert since["new"] == [] and since["fixed"] == [], since
