"""One source for the host role's tuning, the verify role's read-back and the audit's plan.

The host role tunes with one task per part (roles/host/tasks/<part>.yml, each calling the module
of that name); its plan entry point (tasks/plan.yml) includes the very same part files in check
mode, and both the verify role's read-back and the audit's plan go through it. These tests parse
the roles' YAML and fail when that contract breaks:

- a host task that calls a tuning module of this collection sits outside its part file (it
  would be applied and never read back), a part file does more than call its module (a notify
  would fire a handler from the read-back), or misses its phase or part tag;
- the plan entry point stops including the part files in check mode, or the verify role and the
  audit stop planning through it, or their lists of parts and the host role's disagree;
- a host variable passed by a part task is not declared in the host role's argument spec (entry
  point plan, the one the read-back and the audit validate against), or its default there and
  in defaults/ disagree;
- the verify role grows its own copy of a host option, or calls a tuning module itself;
- a role variable is not named after the module argument it sets (role prefix + argument).
"""

from __future__ import annotations

import ast
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.tuning.plugins.doc_fragments import state_record
from ansible_collections.gpufleet.tuning.tests.unit.helpers import role_base_defaults

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = os.path.join(REPO, "roles")
MODULES = os.path.join(REPO, "plugins", "modules")
COLLECTION = "gpufleet.tuning."
IMPORTS = ("ansible.builtin.import_tasks", "import_tasks")
ROLE_VAR = re.compile(r"(?<![A-Za-z0-9_.])((?:host|verify|container)_[a-z0-9_]+)")

# Each role's variable prefix per module: a variable setting argument ARG is PREFIX + ARG.
PREFIXES = {
    ("host", "sysctl_profile"): ("host_sysctl_",),
    ("host", "pcie_maxreadreq"): ("host_pcie_",),
    ("host", "pcie_acs"): ("host_pcie_acs_",),
    ("host", "cpu_power"): ("host_cpu_power_",),
    ("host", "lxc_containers"): ("host_lxc_memlock_",),  # which containers get the memlock limit
    ("host", "lxc_memlock"): ("host_lxc_memlock_",),
    ("host", "nvidia_peermem"): ("host_peermem_",),
    # host_nvidia_options is the options dict itself, host_nvidia_options_* the other arguments.
    ("host", "nvidia_driver_options"): ("host_nvidia_", "host_nvidia_options_"),
    ("host", "kernel_cmdline"): ("host_cmdline_",),
    ("verify", "p2p_bandwidth"): ("verify_p2p_",),
    ("container", "sysctl_profile"): ("container_sysctl_",),
    # The server's address and model are shared; the benchmark's load has its own prefix.
    ("serving", "serving_health"): ("serving_", "serving_ready_"),
    ("serving", "inference_benchmark"): ("serving_", "serving_benchmark_"),
    ("container", "memlock_info"): ("container_memlock_",),
    # The node's record of what the roles changed (state path and switch of each role).
    ("host", "tuning_state"): ("host_state_",),
    ("container", "tuning_state"): ("container_state_",),
    ("verify", "tuning_state"): ("verify_state_",),
    ("health", "health_textfile"): ("health_textfile_",),
}

# Modules that keep the node's record of what the roles changed; they tune nothing, so there is
# nothing of theirs for the verify role to read back (it reads the record itself, for drift).
RECORD_KEEPING = ("tuning_state", "tuning_revert")
# Actions that write the run's records on the controller, in the controller process, as
# ansible.builtin.copy would: no module of the node, so none of the rules below apply to them.
CONTROLLER_ACTIONS = ("artifact_files", "audit_judge", "fleet_report", "node_normal", "profile_select")

# Module arguments that no role variable of that name sets, and why.
DERIVED_ARGUMENTS = {
    # The run's change records, as the role's summary publishes them (host_changes).
    ("tuning_state", "applied"): "the run's change records (host_changes, container_changes)",
    ("tuning_state", "planned"): "the audit's plan, or the files a role writes itself",
    # host_peermem_state auto|present|absent maps to the module's state and only_with_rdma.
    ("nvidia_peermem", "only_with_rdma"): "derived from host_peermem_state (auto)",
    # The container's memlock limit is written to pam_limits and systemd too; memlock_info
    # only compares against it.
    ("memlock_info", "want"): "container_memlock_limit, also written to pam_limits and systemd",
    ("memlock_info", "units"): "the one container_serving_unit, as a list",
    # The inventory's containers of this host (vars/main.yml, from gpufleet_lxc_host) and
    # host_lxc_containers, the hand-written list.
    ("lxc_memlock", "containers"): "the inventory's containers of the host and host_lxc_containers",
}

# Options of every tuning module (doc fragment gpufleet.tuning.state_record): the node's record,
# one file for every part (host_state_path, container_state_path), and the run's id.
RECORD_OPTIONS = {"state_path": ("host_state_path", "container_state_path"), "run_id": ()}

# The host role's parts: phase and own tag, in the order tasks/main.yml runs them.
PARTS = {
    "sysctl_profile": ("runtime", "sysctl"),
    "pcie_maxreadreq": ("runtime", "pcie"),
    "pcie_acs": ("runtime", "pcie_acs"),
    "cpu_power": ("runtime", "cpu_power"),
    "lxc_memlock": ("runtime", "lxc_memlock"),
    "nvidia_peermem": ("runtime", "peermem"),
    "nvidia_driver_options": ("reboot_required", "nvidia_options"),
    "kernel_cmdline": ("reboot_required", "kernel_cmdline"),
}
RUNTIME = [part for part, (phase, _tag) in PARTS.items() if phase == "runtime"]
REBOOT = [part for part, (phase, _tag) in PARTS.items() if phase == "reboot_required"]
# A part its role switch turns off is skipped by this condition, and by nothing else.
SWITCHES = {"pcie_maxreadreq": "host_pcie_mrrs_enabled | bool", "pcie_acs": "host_pcie_acs_enabled | bool"}


# ------------------------------------------------------------------------------ helpers

def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


class Task:
    """A task as the play runs it: its file, its own data, and what it inherits from the
    imports and blocks around it (tags and when)."""

    def __init__(self, role, path, data, tags, when):
        self.role = role
        self.path = path
        self.data = data
        self.tags = set(tags) | set(_as_list(data.get("tags")))
        self.when = list(when) + _as_list(data.get("when"))
        self.name = data.get("name", "(unnamed)")
        self.module = next((key[len(COLLECTION):] for key in data if key.startswith(COLLECTION)), None)

    @property
    def args(self):
        return (self.data[COLLECTION + self.module] or {}) if self.module else {}

    @property
    def where(self):
        return "%s: %r" % (os.path.relpath(self.path, REPO), self.name)


def _as_list(value):
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _import_target(data):
    for key in IMPORTS:
        if key in data:
            value = data[key]
            return value["file"] if isinstance(value, dict) else value
    return None


def tasks_of(role, filename, tags=(), when=(), folder="tasks"):
    """Every task reachable from roles/ROLE/FOLDER/FILENAME through static imports and blocks,
    in play order; import and block entries themselves are not returned."""
    path = os.path.join(ROLES, role, folder, filename)
    found = []
    for data in load(path) or []:
        target = _import_target(data)
        if target is not None:
            found.extend(tasks_of(role, target, set(tags) | set(_as_list(data.get("tags"))),
                                  list(when) + _as_list(data.get("when")), folder))
            continue
        if "block" in data:
            inner_tags = set(tags) | set(_as_list(data.get("tags")))
            inner_when = list(when) + _as_list(data.get("when"))
            for part in ("block", "rescue", "always"):
                for sub in data.get(part) or []:
                    found.extend(_expand(role, path, sub, inner_tags, inner_when, folder))
            continue
        found.append(Task(role, path, data, tags, when))
    return found


def _expand(role, path, data, tags, when, folder):
    target = _import_target(data)
    if target is not None:
        return tasks_of(role, target, set(tags) | set(_as_list(data.get("tags"))),
                        list(when) + _as_list(data.get("when")), folder)
    if "block" in data:
        out = []
        for part in ("block", "rescue", "always"):
            for sub in data.get(part) or []:
                out.extend(_expand(role, path, sub, set(tags) | set(_as_list(data.get("tags"))),
                                   list(when) + _as_list(data.get("when")), folder))
        return out
    return [Task(role, path, data, tags, when)]


def role_vars_in(value):
    """The role variables (host_*, verify_*, container_*) a task value refers to."""
    return set(ROLE_VAR.findall(yaml.safe_dump(value, default_flow_style=True, width=1 << 20)))


def role_defaults(role):
    """The role's defaults; one that reads the node's profile (profile_settings) as its base value."""
    return role_base_defaults(os.path.dirname(ROLES), role)


def argument_specs(role):
    return load(os.path.join(ROLES, role, "meta", "argument_specs.yml"))["argument_specs"]


def module_options(module):
    """{option: its aliases} from the module's DOCUMENTATION."""
    with open(os.path.join(MODULES, module + ".py")) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            documentation = yaml.safe_load(node.value.value)
            options = dict(documentation.get("options") or {})
            if "gpufleet.tuning.state_record" in (documentation.get("extends_documentation_fragment") or []):
                options.update(yaml.safe_load(state_record.ModuleDocFragment.DOCUMENTATION)["options"])
            return dict((name, set(spec.get("aliases") or [])) for name, spec in options.items())
    raise AssertionError("no DOCUMENTATION in plugins/modules/%s.py" % module)


def host_main():
    return tasks_of("host", "main.yml")


def part_task(part):
    tasks = tasks_of("host", part + ".yml")
    assert len(tasks) == 1 and tasks[0].module == part, "roles/host/tasks/%s.yml is one task calling %s" % (part, part)
    return tasks[0]


def verify_tasks():
    """The verify role's tasks: main.yml's, and the P2P file it includes when P2P is on."""
    return tasks_of("verify", "main.yml") + tasks_of("verify", "p2p_bandwidth.yml")


def plan_include(role, filename):
    includes = [t for t in tasks_of(role, filename)
                if "ansible.builtin.include_role" in t.data
                and t.data["ansible.builtin.include_role"].get("name") == "gpufleet.tuning.host"]
    assert len(includes) == 1, "the %s role must include gpufleet.tuning.host once, found %d" % (role, len(includes))
    include = includes[0]
    args = include.data["ansible.builtin.include_role"]
    assert args.get("tasks_from") == "plan", (
        "%s: tasks_from must be 'plan' (no .yml: the name also selects the argument spec entry point)" % include.where)
    return include


def _key(task):
    return (os.path.relpath(task.path, REPO), task.name)


# ------------------------------------------------------------------------------ the part tasks

def test_the_host_role_applies_one_task_per_part_in_order():
    applied = [t.module for t in host_main() if t.module in PARTS and t.data.get("check_mode") is not True]
    assert applied == list(PARTS), "roles/host/tasks/main.yml must apply the parts in order: %s" % applied
    parts = load(os.path.join(ROLES, "host", "vars", "main.yml"))["__host_parts"]
    assert parts == {"runtime": RUNTIME, "reboot_required": REBOOT}


def test_every_tuning_module_task_of_the_host_role_is_a_part_task():
    """A host task calling a tuning module of this collection must be its part's task: only
    those are planned and read back. The reboot contract's re-read after a reboot (check mode,
    the part's own arguments) is the one other call."""
    parts = set(_key(part_task(part)) for part in PARTS)
    calls = [t for t in host_main() if t.module and t.module not in RECORD_KEEPING]
    others = sorted(t.where for t in calls if _key(t) not in parts
                    and not (t.path.endswith("/reboot.yml") and t.data.get("check_mode") is True))
    assert not others, "tuning module tasks of the host role outside their part files: %s" % others


@pytest.mark.parametrize("part", list(PARTS))
def test_each_part_task_carries_its_phase_and_its_own_tag(part):
    phase, tag = PARTS[part]
    task = part_task(part)
    assert set(_as_list(task.data.get("tags"))) == {phase, tag}, "%s: tags %s" % (task.where, task.data.get("tags"))


@pytest.mark.parametrize("part", list(PARTS))
def test_each_part_task_only_calls_its_module(part):
    """No notify (a handler must not fire from the read-back), no always tag (it would print
    twice), no keyword that would differ between the apply and the plan; a condition only where
    a role switch turns the part off; registered as __host_<part>; its record kept by the module."""
    task = part_task(part)
    assert "notify" not in task.data, "%s: a notify would fire from the read-back" % task.where
    assert "always" not in task.tags, "%s: an always-tagged task runs twice" % task.where
    for keyword in ("check_mode", "ignore_errors", "changed_when", "failed_when", "delegate_to", "loop"):
        assert keyword not in task.data, "%s: %s would differ between the apply and the plan" % (task.where, keyword)
    assert _as_list(task.data.get("when")) == _as_list(SWITCHES.get(part)), "%s: when %r" % (task.where, task.data.get("when"))
    assert task.data.get("register") == "__host_" + part, "%s: register as __host_%s" % (task.where, part)
    assert task.args.get("state_path") == "{{ host_state_path if host_state_record | bool else omit }}", task.where
    assert task.args.get("run_id") == "{{ __host_run_id | default(omit) }}", task.where


def test_the_plan_entry_point_includes_the_very_part_files_in_check_mode():
    tasks = tasks_of("host", "plan.yml")
    include = [t for t in tasks if "ansible.builtin.include_tasks" in t.data]
    assert len(include) == 1, "roles/host/tasks/plan.yml includes the part files once"
    args = include[0].data["ansible.builtin.include_tasks"]
    assert args["file"] == "{{ __host_part }}.yml" and include[0].data["loop_control"]["loop_var"] == "__host_part"
    assert args["apply"]["check_mode"] is True, "the plan changes nothing"
    assert args["apply"]["ignore_errors"] is True, "a part that cannot plan is a failed result, judged by the caller"
    assert "always" in _as_list(args["apply"]["tags"]), "the included tasks run whatever the tags that ran the include"
    assert "host_plan_parts" in include[0].data["vars"]["__host_plan_todo"]
    assert any("host_plan:" in yaml.safe_dump(t.data) for t in tasks), "the plan is published as host_plan"


@pytest.mark.parametrize("role, filename, parts", [
    ("verify", "readback.yml", "{{ __verify_readback_parts }}"),
    ("audit", "report.yml", "{{ [] if __audit_in_container else __audit_parts.runtime + __audit_parts.reboot_required }}"),
])
def test_the_verify_role_and_the_audit_plan_through_the_host_role(role, filename, parts):
    include = plan_include(role, filename)
    assert include.data["vars"]["host_plan_parts"] == parts
    apply = include.data["ansible.builtin.include_role"].get("apply") or {}
    assert "check_mode" not in apply, "%s: the plan entry point sets check mode itself" % include.where
    tag = "verify" if role == "verify" else "audit"
    assert tag in _as_list(apply.get("tags")) and tag in include.tags, "%s: tagged %s" % (include.where, tag)
    if role == "verify":
        assert any("verify_readback_enabled" in str(cond) for cond in include.when), (
            "%s: the read-back must follow verify_readback_enabled" % include.where)
        assert load(os.path.join(ROLES, "verify", "vars", "main.yml"))["__verify_readback_parts"] == RUNTIME
    else:
        assert load(os.path.join(ROLES, "audit", "vars", "main", "main.yml"))["__audit_parts"] == {
            "runtime": RUNTIME, "reboot_required": REBOOT}


def test_every_read_back_result_reaches_the_report():
    readback = open(os.path.join(ROLES, "verify", "tasks", "readback.yml")).read()
    verify_vars = open(os.path.join(ROLES, "verify", "vars", "main.yml")).read()
    report = open(os.path.join(ROLES, "verify", "tasks", "report.yml")).read()
    assert "__verify_readback_parts" in readback and "__verify_readback_todo" in readback
    assert "__verify_readback:" in verify_vars and "host_plan" in verify_vars
    assert re.search(r"readback: .*__verify_readback\b", report), "verify.json must keep the read-back per part"
    assert re.search(r"'readback': __verify_readback\b", report), "the judgement must read the read-back"


def test_handlers_read_the_published_results_not_the_registers():
    """The plan entry point re-registers __host_<part> in check mode (the audit, the read-back)
    before the handlers run at the end of the play: they read host_lxc_memlock, published by the
    summary after the apply."""
    for name in os.listdir(os.path.join(ROLES, "host", "handlers")):
        text = yaml.safe_dump(load(os.path.join(ROLES, "host", "handlers", name)), width=1 << 20)  # no comments
        assert not re.search(r"\b__host_", text), "roles/host/handlers/%s reads a register of the part tasks" % name


def test_the_verify_role_calls_no_tuning_module_itself():
    """Per-module read-back tasks with their own arguments are what drifted from the host role."""
    direct = sorted(set(t.module for t in verify_tasks() if t.module and t.module not in RECORD_KEEPING + CONTROLLER_ACTIONS))
    assert direct == ["p2p_bandwidth"], "the verify role calls %s itself; read back through the host role's plan" % direct


# ------------------------------------------------------------------------------ options, once

def part_host_vars():
    found = {}
    for part in PARTS:
        task = part_task(part)
        data = dict((k, v) for k, v in task.data.items() if k not in ("name", "register", "tags"))
        for var in role_vars_in(data):
            found.setdefault(var, task.where)
    # The LXC part's inventory containers (vars/main.yml, __host_lxc_memlock_inventory).
    for var in role_vars_in(load(os.path.join(ROLES, "host", "vars", "main.yml"))["__host_lxc_memlock_inventory"]):
        found.setdefault(var, "roles/host/vars/main.yml")
    return found


def test_every_part_option_is_declared_in_the_plan_entry_point():
    specs = argument_specs("host")
    declared = specs["plan"]["options"]
    used = part_host_vars()
    undeclared = sorted("%s (%s)" % (var, where) for var, where in used.items() if var not in declared)
    assert not undeclared, ("host variables passed by the part tasks but missing from the plan entry point of "
                            "roles/host/meta/argument_specs.yml: %s" % undeclared)
    unused = sorted(set(declared) - set(used) - {"host_plan_parts"})
    assert not unused, "the plan entry point declares options no part task uses: %s" % unused


def test_the_main_entry_point_takes_the_part_options_as_they_are():
    specs = argument_specs("host")
    main, plan = specs["main"]["options"], specs["plan"]["options"]
    for name, spec in plan.items():
        assert main.get(name) == spec, "host option %s differs between the main and plan entry points" % name


def _comparable(value):
    return yaml.safe_load(yaml.safe_dump(value))


@pytest.mark.parametrize("role", ["host", "verify", "container", "audit"])
def test_defaults_and_argument_spec_agree(role):
    defaults = role_defaults(role)
    options = {}
    for entry in argument_specs(role).values():
        options.update(entry.get("options") or {})
    assert sorted(set(defaults) - set(options)) == [], "%s defaults without an argument spec" % role
    assert sorted(set(options) - set(defaults)) == [], "%s argument spec options without a default" % role
    for name, spec in options.items():
        value = defaults[name]
        if isinstance(value, str) and "{{" in value:
            continue  # computed at run time (gpufleet_reboot_ok, the artifacts folder)
        assert _comparable(spec.get("default")) == _comparable(value), (
            "%s: default %r in meta/argument_specs.yml, %r in defaults/" % (name, spec.get("default"), value))


def test_the_verify_role_has_no_copy_of_a_host_option():
    host_options = argument_specs("host")["main"]["options"]
    verify_options = argument_specs("verify")["main"]["options"]
    suffixes = set(name[len("host_"):] for name in host_options)
    # state_path: where the node's record lives, one file for every role (gpufleet_state_path)
    copies = sorted(name for name in verify_options if name[len("verify_"):] in suffixes and name != "verify_state_path")
    assert not copies, "verify options that copy host options (read back through the host role instead): %s" % copies
    for name, value in role_defaults("verify").items():
        assert not re.search(r"(?<![A-Za-z0-9_])host_", str(value)), (
            "verify default %s reads a host variable: the read-back takes the host role's own" % name)


def test_renamed_variables_are_refused_by_their_new_names():
    """The roles fail, naming the new variable, while a former name is set."""
    for role, var in (("host", "__host_renamed"), ("container", "__container_renamed")):
        guard = [t for t in tasks_of(role, "main.yml") if var in (t.data.get("vars") or {})]
        assert len(guard) == 1 and "always" in guard[0].tags, "%s: one always-tagged guard for renamed variables" % role
        options = argument_specs(role)["main"]["options"]
        for old, new in guard[0].data["vars"][var].items():
            assert new in options and old not in options, "%s: %s -> %s" % (role, old, new)


# ------------------------------------------------------------------------------ names end to end

def module_tasks_of_every_role():
    """Every module task of every role's task files, once (a file imported by others is read
    on its own too)."""
    found = {}
    for role in sorted(os.listdir(ROLES)):
        folder = os.path.join(ROLES, role, "tasks")
        for name in sorted(os.listdir(folder)):
            for task in tasks_of(role, name):
                if task.module and task.module not in CONTROLLER_ACTIONS:
                    found.setdefault(_key(task), task)
    return list(found.values())


def test_task_files_are_named_after_their_module():
    """roles/ROLE/tasks/M.yml (or M_<when>.yml) calls module M. The revert, rollout and
    experiments roles are one job each around other roles' parts."""
    for task in module_tasks_of_every_role():
        stem = os.path.splitext(os.path.basename(task.path))[0]
        if task.role in ("revert", "rollout", "serving_experiments") or stem.startswith(task.module + "_"):
            continue
        if task.path.endswith("/reboot.yml"):
            continue  # the reboot contract reads the command line again
        if task.role == "container" and stem == "memlock":
            continue  # memlock inside the container: pam_limits and systemd files, then memlock_info
        assert stem == task.module, "%s calls %s" % (task.where, task.module)


def test_role_variables_are_named_after_the_module_arguments_they_set():
    """host_pcie_size sets size, verify_p2p_min_speedup sets min_speedup: a variable passed to a
    module argument is the role's prefix for that module and the argument, and the argument is
    the module's own name for it, not an alias."""
    wrong = []
    for task in module_tasks_of_every_role():
        options = module_options(task.module)
        for arg, value in task.args.items():
            if arg not in options:
                aliased = [name for name, aliases in options.items() if arg in aliases]
                wrong.append("%s: %s is %s" % (task.where, arg, "an alias of %s" % aliased[0] if aliased else "not an option"))
                continue
            refs = role_vars_in(value)
            if not refs or (task.module, arg) in DERIVED_ARGUMENTS:
                continue
            if arg in RECORD_OPTIONS:
                if not refs <= set(RECORD_OPTIONS[arg]) | {"host_state_record", "container_state_record"}:
                    wrong.append("%s: %s from %s" % (task.where, arg, sorted(refs)))
                continue
            prefixes = PREFIXES.get((task.role, task.module))
            assert prefixes, "%s: declare the %s role's variable prefix for %s in PREFIXES" % (
                task.where, task.role, task.module)
            if not refs & set(prefix + arg for prefix in prefixes):
                wrong.append("%s: %s from %s, not %s" % (task.where, arg, sorted(refs), prefixes[-1] + arg))
    assert not wrong, "role variables not named after the module argument they set: %s" % wrong
