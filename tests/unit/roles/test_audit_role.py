"""The audit role (issue 17): it plans through the host role's own tasks in check mode, writes
only on the controller, and leaves the play as it found it.

The first tests read the roles' YAML: the modules the audit plans are those of the host role's
runtime.yml and reboot_required task files, included in check mode with the read-back's care
(roles/verify/tasks/readback.yml); nothing but the controller is written; playbooks/tune.yml
runs the audit first, in every run. The last ones run the role itself with ansible-playbook
on this machine, with the host role's defaults (everything in check mode), and prove that the
node's files, sysctls, CPU settings and PCI config space are what they were; they need
gpufleet.tuning.node_facts and skip until plugins/modules/node_facts.py exists.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys

import jinja2
import pytest

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

def test_the_runtime_plan_is_the_verify_read_back_s_modules():
    verify = audit_cases.load_yaml(os.path.join(ROLES, "verify", "vars", "main.yml"))["__verify_readback_modules"]
    assert PLANNED["runtime"] == verify, "roles/audit/vars/main.yml runtime must list the modules of roles/host/tasks/runtime.yml"


def test_the_reboot_required_plan_is_the_host_role_s_reboot_required_modules():
    host = [t for t in tasks_of("host", "main.yml") if t.module and "reboot_required" in t.tags
            and not t.path.endswith("reboot.yml") and t.module != "tuning_state"]  # the record, not a tuning
    assert PLANNED["reboot_required"] == [t.module for t in host]
    for module in PLANNED["reboot_required"]:
        tasks = tasks_of("host", module + ".yml")
        assert [t.module for t in tasks] == [module], "roles/host/tasks/%s.yml must be that module's call alone" % module
        assert tasks[0].data.get("register") == "__host_" + module
        assert "notify" not in tasks[0].data, "a notify would fire from the audit's check-mode run"


def test_the_host_role_s_tasks_run_in_check_mode_with_the_read_back_s_care():
    found = sorted(includes(), key=lambda t: t.data["ansible.builtin.include_role"]["tasks_from"] != "runtime")
    assert len(found) == 2
    runtime, reboot = found
    for task in found:
        args = task.data["ansible.builtin.include_role"]
        assert args["name"] == "gpufleet.tuning.host"
        apply = args.get("apply") or {}
        assert apply.get("check_mode") is True, "%s: the plan must run in check mode" % task.where
        assert {"audit", "always"} <= set(apply.get("tags") or []), "%s: the included tasks run whenever it runs" % task.where
        assert apply.get("ignore_errors") is True, "%s: a module that cannot plan is reported, not fatal" % task.where
        assert "audit" in task.tags
    assert runtime.data["ansible.builtin.include_role"]["tasks_from"] == "runtime"
    assert runtime.data["ansible.builtin.include_role"].get("public") is True
    assert "__audit_planned_modules.reboot_required" in reboot.data["loop"]
    assert reboot.data["ansible.builtin.include_role"]["tasks_from"] == "{{ __audit_module }}"


def test_the_host_role_s_results_are_kept_before_and_put_back_after():
    names = [t.name for t in tasks_of("audit", "plan.yml")]
    saved = [t for t in tasks_of("audit", "plan.yml") if "__audit_saved" in (t.data.get("ansible.builtin.set_fact") or {})]
    restore = [t for t in tasks_of("audit", "plan.yml") if t.data.get("loop") == "{{ __audit_saved | dict2items }}"]
    assert len(saved) == 1 and len(restore) == 1
    first_include = names.index(includes()[0].name)
    assert names.index(saved[0].name) < first_include < names.index(restore[0].name)
    assert restore[0].data["ansible.builtin.set_fact"] == {"{{ item.key }}": "{{ item.value }}"}


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
    # artifact_files is an action: it writes in the controller process, whatever the task's host.
    assert modules == {"node_facts", "artifact_files"}, "the audit calls no tuning module itself: %s" % sorted(modules)


def test_tune_runs_the_audit_first_in_every_run():
    plays = audit_cases.load_yaml(os.path.join(REPO, "playbooks", "tune.yml"))
    hosts = [p for p in plays if p["hosts"] == "gpu_hosts"][0]
    first = hosts["roles"][0]
    assert first["role"] == "gpufleet.tuning.audit" and set(first["tags"]) == {"audit", "always"}
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
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["combine"] = lambda a, b: dict(a, **b)
    host = audit_cases.host_defaults()
    rendered = dict((key, env.from_string(text).render(**host)) for key, text in AUDIT_VARS["__audit_host_params"].items())
    expected = audit_cases.params()
    assert sorted(rendered) == sorted(expected)
    for key, value in expected.items():
        assert rendered[key] == str(value), key
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
