"""The audit role (issue 17): it reads the node with gpufleet.tuning.node_facts, plans through the
host role's own part tasks in check mode (the host role's plan entry point), judges and writes
only on the controller.

The first tests read the roles' YAML: the parts the audit reports are the host role's by phase,
the audit plans through the host role's plan entry point (no copy of a part's options), and in
playbooks/tune.yml and the rollout it reads the node first and is judged after the host role,
in an always section (a failed tuning still reports), with the plan of what the run applied
taken from that apply; nothing but the controller is written. The last ones run the role with
ansible-playbook on this machine, with the host role's defaults (everything in check mode), and
prove that the node's files, sysctls, CPU settings and PCI config space are what they were.
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

from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases
from ansible_collections.gpufleet.tuning.tests.unit.roles.test_host_verify_one_source import argument_specs
from ansible_collections.gpufleet.tuning.tests.unit.roles.test_host_verify_one_source import role_defaults
from ansible_collections.gpufleet.tuning.tests.unit.roles.test_host_verify_one_source import tasks_of

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = os.path.join(REPO, "roles")
AUDIT_VARS = audit_cases.load_yaml(os.path.join(ROLES, "audit", "vars", "main", "main.yml"))
PLANNED = AUDIT_VARS["__audit_parts"]
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

def test_the_planned_parts_are_the_host_role_s_by_phase():
    host = audit_cases.load_yaml(os.path.join(ROLES, "host", "vars", "main.yml"))["__host_parts"]
    assert PLANNED == host, "roles/audit/vars/main/main.yml __audit_parts must list the host role's parts by phase"
    verify = audit_cases.load_yaml(os.path.join(ROLES, "verify", "vars", "main.yml"))["__verify_readback_parts"]
    assert PLANNED["runtime"] == verify


def test_the_audit_plans_through_the_host_role_s_plan_entry_point():
    [task] = [t for t in includes() if t.data["ansible.builtin.include_role"]["name"] == "gpufleet.tuning.host"]
    args = task.data["ansible.builtin.include_role"]
    assert args["name"] == "gpufleet.tuning.host" and args["tasks_from"] == "plan"
    assert args.get("public") is True, "the host role's defaults stay visible for the rules' params"
    assert {"audit", "always"} <= set((args.get("apply") or {}).get("tags") or []), (
        "%s: the included tasks run whenever the include runs" % task.where)
    assert "__audit_in_container" in task.data["vars"]["host_plan_parts"], "nothing planned in a container"
    assert task.when == [
        "audit_node_facts.facts is defined and (__audit_plan_todo | length > 0 or host_sysctl_settings is not defined)"], (
        "planned only for a node that was read, and only what is left to plan")


def test_the_audit_reads_first_and_judges_after_the_plan():
    names = [t.name for t in tasks_of("audit", "main.yml")]
    read = [t for t in tasks_of("audit", "main.yml") if t.module == "node_facts"]
    judge = [t for t in tasks_of("audit", "main.yml") if t.module == "audit_judge"]
    assert len(read) == 1 and len(judge) == 1
    assert read[0].data["register"] == "audit_node_facts" and judge[0].data["register"] == "audit_result"
    plan = [t for t in includes() if t.data["ansible.builtin.include_role"]["name"] == "gpufleet.tuning.host"]
    order = [names.index(t.name) for t in (read[0], plan[0], judge[0])]
    assert order == sorted(order), "read, plan, judge: %s" % names
    args = judge[0].args
    assert args["facts"] == "{{ audit_node_facts.facts }}"
    assert "gpufleet.tuning.audit_planned_host(host_plan" in args["plan"] and args["plan"].startswith("{{ host_results")
    assert args["path"] == "{{ __audit_host_dir }}", "this host's folder, its name checked"
    assert judge[0].data.get("check_mode") is False, "the audit is recorded on the controller in a --check run too"
    # The folder name is checked before the node is read.
    assert read[0].when == ["__audit_host_dir is string"]


@pytest.mark.parametrize("playbook, tasks", [("tune.yml", None), ("rollout.yml", "host.yml")])
def test_a_tuning_play_reads_before_the_host_role_and_judges_in_its_always_section(playbook, tasks):
    """playbooks/tune.yml and the rollout: the node is read before anything changes (node_facts),
    the host role tunes, and the audit is judged after it in the block's always section, so a
    failed tuning still reports; what the run applied is its own plan (host_results)."""
    if tasks is None:
        plays = audit_cases.load_yaml(os.path.join(REPO, "playbooks", playbook))
        entries = [p for p in plays if p["hosts"] == "gpu_hosts"][0]["tasks"]
    else:
        entries = [e for e in audit_cases.load_yaml(os.path.join(ROLES, "rollout", "tasks", tasks)) if "block" in e][0]["block"]
    imports = [e for e in entries if "ansible.builtin.import_role" in e]
    first = [e for e in imports if e["ansible.builtin.import_role"]["name"] == "gpufleet.tuning.audit"][0]
    assert first["ansible.builtin.import_role"]["tasks_from"] == "node_facts"
    assert set(first["tags"]) == {"audit", "always"}
    [tune] = [e for e in entries if "block" in e and "always" in e]
    assert tune["block"][0]["ansible.builtin.import_role"]["name"] == "gpufleet.tuning.host"
    [after] = tune["always"]
    assert after["ansible.builtin.import_role"] == {"name": "gpufleet.tuning.audit", "tasks_from": "report",
                                                    "rolespec_validate": False}
    assert set(after["tags"]) == {"audit", "always"}
    assert entries.index(first) < entries.index(tune)


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
    # node_facts reads the node (read-only); artifact_files, audit_judge and health_judge are
    # actions that write in the controller process, whatever the task's host.
    assert modules == {"node_facts", "audit_judge", "health_judge", "artifact_files"}, (
        "the audit's modules: %s" % sorted(modules))


def test_the_audit_alone_is_the_whole_role():
    standalone = audit_cases.load_yaml(os.path.join(REPO, "playbooks", "audit.yml"))
    assert [r["role"] for r in standalone[0]["roles"]] == ["gpufleet.tuning.audit"]


def test_defaults_and_argument_spec_agree():
    defaults = role_defaults("audit")
    specs = argument_specs("audit")
    assert sorted(specs) == ["health_judge", "main", "node_facts", "report"]
    for entry in specs.values():
        options = entry["options"]
        assert sorted(defaults) == sorted(options)
        for name, spec in options.items():
            if isinstance(defaults[name], str) and "{{" in defaults[name]:
                continue
            assert spec.get("default") == defaults[name], name


def test_the_params_are_the_host_role_s_settings():
    """__audit_host_params rendered with the host role's defaults is what the fixture tests use,
    and every params.X a shipped rule reads is there."""
    env = jinja2.nativetypes.NativeEnvironment(undefined=jinja2.StrictUndefined)
    env.filters["combine"] = lambda a, b, recursive=False: dict(a, **b)
    host = audit_cases.host_defaults()
    # the health params: the shipped thresholds and XID catalog, nothing from the inventory
    health = env.from_string(AUDIT_VARS["__audit_health_params"]["health"].strip()).render(
        __audit_health_threshold_defaults=AUDIT_VARS["__audit_health_threshold_defaults"],
        audit_health_thresholds={}, audit_xid_codes_extra={},
        __audit_xid_codes=audit_cases.load_yaml(os.path.join(ROLES, "audit", "vars", "main", "xid_codes.yml"))[
            "__audit_xid_codes"])
    host["__audit_health_params"] = {"health": health}
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
  tasks:
    - name: Read
      ansible.builtin.import_role:
        name: gpufleet.tuning.audit
        tasks_from: node_facts
      tags: [audit, always]
    - name: Tune, then judge
      block:
        - name: Tune
          ansible.builtin.import_role:
            name: gpufleet.tuning.host
      always:
        - name: Judge
          ansible.builtin.import_role:
            name: gpufleet.tuning.audit
            tasks_from: report
          tags: [audit, always]
"""


@pytest.fixture(scope="module")
def audited_in_tuning(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit-in-tuning")
    before = node_state()
    inventory = {"all": {"hosts": {"node1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                             "audit_artifacts_dir": str(tmp / "artifacts")}}}}
    rc, out = run_playbook(tmp, inventory, TUNE_PLAYBOOK, ["--tags", "runtime", "--check"])
    return tmp, rc, out, before, node_state()


def test_with_the_tuning_the_runtime_plan_is_the_apply_and_only_the_rest_is_planned(audited_in_tuning):
    tmp, rc, out, before, after = audited_in_tuning
    assert rc == 0, out
    result = json.loads((tmp / "artifacts" / "node1" / "audit.json").read_text())
    assert result["facts"]["kernel"] and sorted(result["planned"]["runtime"]) == sorted(PLANNED["runtime"])
    assert sorted(result["planned"]["reboot_required"]) == sorted(PLANNED["reboot_required"])
    # The runtime parts ran once (the host role's, in this --check run); the audit planned only
    # the reboot-required ones, which --tags runtime did not run.
    assert out.count("TASK [gpufleet.tuning.host : Sysctl profile]") == 1, out
    planned = out.split("TASK [gpufleet.tuning.host : Plan the parts in check mode]")[1].split("TASK [gpufleet.tuning.host : Publish the plan]")[0]
    assert "item=kernel_cmdline" in planned and "item=nvidia_driver_options" in planned
    assert "item=sysctl_profile" not in planned
    assert out.index("TASK [gpufleet.tuning.host : Sysctl profile]") < out.index("Judge the node and record its audit")
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    assert not changed, "check mode changed %s" % changed
