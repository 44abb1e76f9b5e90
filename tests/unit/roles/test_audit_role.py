"""The audit role (issue 17): it reads and plans through the host role's own tuning task (one
gpufleet.tuning.host_tuning call, in check mode when it reads alone), writes only on the
controller, and leaves the play as it found it.

The first tests read the roles' YAML: the modules the audit reports as planned are the
engine's results, the audit alone includes the host role's tuning task in check mode with the
read-back's care (roles/verify/tasks/readback.yml), and in playbooks/tune.yml it leaves the read
to the host role's own call (issue 21: one module run per host and pass) and is judged after
it, in the same call (its audit option); nothing but the controller is written. The last ones run the role with ansible-playbook on
this machine, with the host role's defaults (everything in check mode), and prove that the
node's files, sysctls, CPU settings and PCI config space are what they were.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys

import jinja2
import jinja2.nativetypes
import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import host_tuning as engine

from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot
from ansible_collections.gpufleet.tuning.tests.unit.plugins.filter import audit_cases
from ansible_collections.gpufleet.tuning.tests.unit.roles.test_host_verify_one_source import argument_specs
from ansible_collections.gpufleet.tuning.tests.unit.roles.test_host_verify_one_source import role_defaults
from ansible_collections.gpufleet.tuning.tests.unit.roles.test_host_verify_one_source import tasks_of

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = os.path.join(REPO, "roles")
AUDIT_VARS = audit_cases.load_yaml(os.path.join(ROLES, "audit", "vars", "main.yml"))
PLANNED = AUDIT_VARS["__audit_planned_modules"]
WRITERS = ("ansible.builtin.copy", "ansible.builtin.file", "ansible.builtin.template", "ansible.builtin.lineinfile")


def audit_tasks():
    """Every task of the audit role once (main.yml imports the others)."""
    found = {}
    for name in sorted(os.listdir(os.path.join(ROLES, "audit", "tasks"))):
        for task in tasks_of("audit", name):
            found.setdefault((task.path, task.name), task)
    return list(found.values())


def includes():
    return [t for t in audit_tasks() if "ansible.builtin.include_role" in t.data]


# ------------------------------------------------------------------------------ what is planned

def test_the_planned_modules_are_the_engine_s_results_by_phase():
    by_phase = {"runtime": [], "reboot_required": []}
    for name in engine.RESULT_NAMES:
        by_phase[engine.PHASE[engine.PART_OF[name]]].append(name)
    assert PLANNED == by_phase, "roles/audit/vars/main.yml __audit_planned_modules must list the engine's results"
    verify = audit_cases.load_yaml(os.path.join(ROLES, "verify", "vars", "main.yml"))["__verify_readback_modules"]
    assert PLANNED["runtime"] == verify


def test_the_audit_alone_reads_through_the_host_role_s_tuning_task_in_check_mode():
    [task] = includes()
    args = task.data["ansible.builtin.include_role"]
    assert args["name"] == "gpufleet.tuning.host" and args["tasks_from"] == "host_tuning"
    assert args.get("public") is True, "the host role's defaults stay visible for the rules' params"
    apply = args.get("apply") or {}
    assert apply.get("check_mode") is True, "%s: the read runs in check mode" % task.where
    assert {"audit", "always"} <= set(apply.get("tags") or []), "%s: the included task runs whenever it runs" % task.where
    assert task.data["vars"] == {"__audit_read_by_host": "{{ __audit_judge }}"}, "the read asks for the facts and the judgement"
    judge = " ".join(AUDIT_VARS["__audit_judge"].split())
    assert "'facts': {'sysctl_keys': audit_sysctl_keys," in judge, "the read's options are the audit role's"
    assert "'path': __audit_host_dir," in judge, "this host's folder, its name checked"
    main = tasks_of("audit", "main.yml")
    assert [t.data.get("when") for t in main] == ["__audit_read_by_host is none"], (
        "the audit reads alone only when the host role's call does not read for it")


def test_the_host_role_s_result_is_kept_before_and_put_back_after_the_judgement():
    names = [t.name for t in tasks_of("audit", "read.yml")]
    read = tasks_of("audit", "read.yml")
    saved = [t for t in read if "__audit_saved_tuning" in (t.data.get("ansible.builtin.set_fact") or {})]
    restore = [t for t in read if (t.data.get("ansible.builtin.set_fact") or {}).get("__host_tuning") == "{{ __audit_saved_tuning }}"]
    fleet = [t for t in read if t.name == "Show the audit's findings"]
    assert len(saved) == 1 and len(restore) == 1 and len(fleet) == 1
    # The audit is kept under its own name for what reads it later (the serving role's benchmark).
    assert restore[0].data["ansible.builtin.set_fact"]["audit_result"] == "{{ __host_tuning.audit }}"
    order = [names.index(t.name) for t in (saved[0], includes()[0], fleet[0], restore[0])]
    assert order == sorted(order), "keep, read and judge, record the fleet, put back: %s" % names


def test_the_tuning_call_reads_for_the_audit_and_judges_it():
    """playbooks/tune.yml: the audit's read is the host role's own call (its audit option), which
    judges it in the same task, also when a part failed; the fleet's record is made in an always
    section, so a failed tuning still reports."""
    task = [t for t in tasks_of("host", "host_tuning.yml") if t.module == "host_tuning"][0]
    assert task.args["audit"] == "{{ __audit_read_by_host | default(none) }}"
    assert "facts" not in task.args, "the read's options are the audit option's"
    assert "'audit' not in ansible_skip_tags" in AUDIT_VARS["__audit_with_tuning"], "--skip-tags audit: no judgement"
    assert "gpufleet_audit_in_tuning" in AUDIT_VARS["__audit_with_tuning"]
    assert "host_tuning_apply" in AUDIT_VARS["__audit_with_tuning"], "deferred only when the run applies a part"
    main = audit_cases.load_yaml(os.path.join(ROLES, "host", "tasks", "main.yml"))
    block = [entry for entry in main if "block" in entry][0]
    [fleet] = block["always"]
    assert fleet["ansible.builtin.import_role"] == {"name": "gpufleet.tuning.audit", "tasks_from": "fleet"}
    # The call returns an audit only when the audit role asked for one (its audit option).
    assert fleet["when"] == "(__host_tuning | default({})).audit is defined"
    for name in ("tune.yml", "rollout.yml"):
        plays = audit_cases.load_yaml(os.path.join(REPO, "playbooks", name))
        assert any("gpufleet_audit_in_tuning" in (play.get("vars") or {}) for play in plays), name


def test_the_audit_writes_only_on_the_controller_and_notifies_nothing():
    for task in audit_tasks():
        assert "audit" in task.tags, "%s: every audit task is tagged audit" % task.where
        assert "notify" not in task.data, "%s: the audit notifies no handler" % task.where
        writer = [key for key in task.data if key in WRITERS]
        if writer:
            delegated = task.data.get("delegate_to")
            if delegated is None:  # from the block around it
                block = [b for b in audit_cases.load_yaml(task.path) if "block" in b
                         and any(sub.get("name") == task.name for sub in b["block"])]
                delegated = block[0].get("delegate_to") if block else None
            assert delegated == "localhost", "%s writes with %s, not on the controller" % (task.where, writer[0])
    modules = set(t.module for t in audit_tasks() if t.module)
    # artifact_files is an action: it writes in the controller process, whatever the task's host
    # (the judgement is the host_tuning call's audit option, also on the controller).
    assert modules == {"artifact_files"}, "the audit calls no module of the node itself: %s" % sorted(modules)


def test_tune_runs_the_audit_first_in_every_run():
    plays = audit_cases.load_yaml(os.path.join(REPO, "playbooks", "tune.yml"))
    hosts = [p for p in plays if p["hosts"] == "gpu_hosts"][0]
    first = hosts["tasks"][0]
    # The roles' variables are checked by the tuning call, before it reads anything, in every run
    # that reads or tunes (the audit alone included): no task of its own.
    assert hosts["vars"]["__host_role_arguments"] == ["gpufleet.tuning.audit", "gpufleet.tuning.host"]
    [call] = [t for t in tasks_of("host", "host_tuning.yml") if t.module == "host_tuning"]
    assert call.args["role_arguments"] == "{{ __host_role_arguments | default(none) }}"
    assert first["ansible.builtin.import_role"]["name"] == "gpufleet.tuning.audit"
    assert first["ansible.builtin.import_role"]["rolespec_validate"] is False, "checked by the tuning call"
    assert set(first["tags"]) == {"audit", "always"}
    standalone = audit_cases.load_yaml(os.path.join(REPO, "playbooks", "audit.yml"))
    assert [r["role"] for r in standalone[0]["roles"]] == ["gpufleet.tuning.audit"]


def test_defaults_and_argument_spec_agree():
    defaults = role_defaults("audit")
    options = argument_specs("audit")["main"]["options"]
    assert sorted(defaults) == sorted(options)
    for name, spec in options.items():
        if isinstance(defaults[name], str) and "{{" in defaults[name]:
            continue
        assert spec.get("default") == defaults[name], name


def test_the_params_are_the_host_role_s_settings():
    """__audit_host_params rendered with the host role's defaults is what the fixture tests use,
    and every params.X a shipped rule reads is there."""
    env = jinja2.nativetypes.NativeEnvironment(undefined=jinja2.StrictUndefined)
    env.filters["combine"] = lambda a, b: dict(a, **b)
    host = audit_cases.host_defaults()
    rendered = env.from_string(AUDIT_VARS["__audit_host_params"].strip()).render(**host)
    expected = audit_cases.params()
    assert rendered == expected
    with open(audit_cases.RULES_FILE) as handle:
        read = set(re.findall(r"params\.([a-z_]+)", handle.read()))
    assert read <= set(expected), "rules read params the role does not pass: %s" % sorted(read - set(expected))


# ------------------------------------------------------------------------------ the role, run

PLAYBOOK = """
- name: Audit, then the host role, as playbooks/tune.yml runs them
  hosts: all
  gather_facts: false
  roles:
    - role: gpufleet.tuning.audit
      tags: [audit, always]
    - role: gpufleet.tuning.host
"""

WATCHED = ["/etc/sysctl.d", "/etc/udev/rules.d", "/etc/modprobe.d", "/etc/modules-load.d", "/etc/systemd/system",
           "/etc/default", "/etc/kernel", "/etc/pve/lxc", "/etc/security/limits.d", "/var/lib/gpufleet-tuning",
           "/usr/local/libexec/gpufleet", "/usr/local/sbin"]


def node_state():
    """What the audit must leave alone on this machine."""
    state = {}
    for folder in WATCHED:
        if os.path.isdir(folder):
            state[folder] = snapshot(folder)
    state["/run/reboot-required"] = os.path.exists("/run/reboot-required")
    for key in audit_cases.host_defaults()["host_sysctl_settings"]:
        path = "/proc/sys/" + key.replace(".", "/")
        if os.path.exists(path):
            with open(path) as handle:
                state[path] = handle.read()
    for path in sorted(glob.glob("/sys/devices/system/cpu/cpu*/cpuidle/state*/disable")
                       + glob.glob("/sys/devices/system/cpu/cpufreq/policy*/scaling_governor")
                       + glob.glob("/sys/devices/system/cpu/cpufreq/policy*/energy_performance_preference")
                       + glob.glob("/sys/bus/pci/devices/*/config")):
        try:
            with open(path, "rb") as handle:
                state[path] = handle.read(256)
        except OSError:
            state[path] = None
    if os.path.exists("/proc/modules"):
        with open("/proc/modules") as handle:
            state["/proc/modules"] = sorted(line.split()[0] for line in handle)
    return state


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit-role")
    # A previous audit of node1 with a finding of a rule that no longer exists: this run must
    # report it fixed ("gone") and everything it finds itself as new.
    (tmp / "artifacts" / "node1").mkdir(parents=True)
    (tmp / "artifacts" / "node1" / "audit.json").write_text(json.dumps(
        {"host": "node1", "time": "2026-01-01T00:00:00Z", "findings": [PREVIOUS_FINDING]}))
    before = node_state()
    inventory = {"all": {"hosts": {"node1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                             "audit_artifacts_dir": str(tmp / "artifacts")}}}}
    rc, out = run_playbook(tmp, inventory, PLAYBOOK, ["--tags", "audit"])
    return tmp, rc, out, before, node_state()


PREVIOUS_FINDING = {"rule": "retired_rule", "item": None, "severity": "P0", "title": "A rule of an older release"}


def test_the_audit_changes_nothing_on_the_node(audited):
    tmp, rc, out, before, after = audited
    assert rc == 0, out
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    assert not changed, "the audit changed %s" % changed


def test_the_audit_writes_its_files_on_the_controller(audited):
    tmp, rc, out, before, after = audited
    folder = tmp / "artifacts" / "node1"
    result = json.loads((folder / "audit.json").read_text())
    assert result["host"] == "node1"
    for key in ("findings", "optimal", "unknown", "not_applicable", "counts", "planned", "facts", "rules"):
        assert key in result, key
    assert sorted(result["planned"]) == ["reboot_required", "runtime"]
    assert sorted(result["planned"]["runtime"]) == sorted(PLANNED["runtime"])  # to_nice_json sorts keys
    report = (folder / "system-improve.md").read_text()
    assert report.startswith("# System improvement report: node1\n")
    since = result["since"]
    assert since["previous_time"] == "2026-01-01T00:00:00Z"
    assert since["fixed"] == [dict(PREVIOUS_FINDING, now="gone")]
    assert len(since["new"]) == len(result["findings"]) and since["still"] == []
    assert "- Fixed P0: A rule of an older release (`retired_rule`), rule no longer evaluated\n" in report
    fleet = json.loads((tmp / "artifacts" / "fleet-audit.json").read_text())
    assert [h["host"] for h in fleet["hosts"]] == ["node1"]
    assert (tmp / "artifacts" / "fleet-audit.md").read_text().startswith("# Fleet audit\n")


def test_the_host_role_reports_nothing_of_the_audit_s_plan(audited):
    tmp, rc, out, before, after = audited
    summary = out.split("Summarize what this run changed on the host]")[1].split("TASK [")[0]
    assert "nothing changed" in summary, summary
    assert "RUNNING HANDLER" not in out


TUNE_PLAYBOOK = """
- name: Audit and tune, as playbooks/tune.yml runs them
  hosts: all
  gather_facts: false
  vars:
    gpufleet_audit_in_tuning: true
  roles:
    - role: gpufleet.tuning.audit
      tags: [audit, always]
    - role: gpufleet.tuning.host
"""


@pytest.fixture(scope="module")
def audited_in_tuning(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit-in-tuning")
    before = node_state()
    inventory = {"all": {"hosts": {"node1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                             "audit_artifacts_dir": str(tmp / "artifacts")}}}}
    rc, out = run_playbook(tmp, inventory, TUNE_PLAYBOOK, ["--tags", "runtime", "--check"])
    return tmp, rc, out, before, node_state()


def test_with_the_tuning_the_audit_is_read_by_its_one_call_and_judged_after(audited_in_tuning):
    tmp, rc, out, before, after = audited_in_tuning
    assert rc == 0, out
    assert out.count("TASK [gpufleet.tuning.host : Tune the host in one call") == 1, "one module run for the tuning and the audit"
    assert "Read the node and plan every tuning part" not in out, "the audit made a call of its own"
    result = json.loads((tmp / "artifacts" / "node1" / "audit.json").read_text())
    assert result["facts"]["kernel"] and sorted(result["planned"]["runtime"]) == sorted(PLANNED["runtime"])
    assert "Judge the node" not in out, "judged by the tuning call itself"
    assert out.index("Tune the host in one call") < out.index("Show the audit's findings")
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    assert not changed, "check mode changed %s" % changed
