"""One source for the host role's tuning, the verify role's read-back and the audit's plan.

The host role tunes in one call of gpufleet.tuning.host_tuning (roles/host/tasks/host_tuning.yml);
the verify role reads the runtime parts back by running that very task again in check mode
(include_role tasks_from host_tuning), and the audit plans through it. These tests parse the
roles' YAML and fail when that contract breaks:

- a host task that calls a tuning module of this collection sits outside host_tuning.yml (it
  would be applied and never read back), or the verify role stops including that file in
  check mode, for the engine's runtime parts;
- host_tuning.yml does more than call the module (a notify would fire a handler from the
  read-back, an always-tagged task would print twice), misses a phase or part tag, or its
  results do not reach the report;
- a host variable passed by the task is not declared in the host role's argument spec (entry
  point host_tuning, the one the read-back validates against), or its default there and in
  defaults/ disagree;
- the verify role grows its own copy of a host option, or calls a tuning module itself;
- a role variable is not named after the module argument it sets (role prefix + argument),
  inside each part of the call as for a module of its own.
"""

from __future__ import annotations

import ast
import os
import re

import jinja2
import pytest
import yaml

from ansible_collections.gpufleet.tuning.plugins.module_utils import host_tuning as engine

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
    # The one tuning call: its record's path is the host role's state path; its parts are checked
    # part by part (test_each_part_s_options_are_its_module_s_and_named_after_them).
    ("host", "host_tuning"): ("host_",),
    ("container", "tuning_state"): ("container_state_",),
    ("verify", "tuning_state"): ("verify_state_",),
}

# Modules that keep the node's record of what the roles changed; they tune nothing, so there is
# nothing of theirs for the verify role to read back (it reads the record itself, for drift).
RECORD_KEEPING = ("tuning_state", "tuning_revert")
# Actions that write the run's records on the controller, in the controller process, as
# ansible.builtin.copy would: no module of the node, so none of the rules below apply to them.
CONTROLLER_ACTIONS = ("artifact_files", "audit_judge", "role_arguments")

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
}


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
    merged = {}
    folder = os.path.join(ROLES, role, "defaults", "main")
    for name in sorted(os.listdir(folder)):
        if name.endswith((".yml", ".yaml")):
            merged.update(load(os.path.join(folder, name)) or {})
    return merged


def argument_specs(role):
    return load(os.path.join(ROLES, role, "meta", "argument_specs.yml"))["argument_specs"]


def module_options(module):
    """{option: its aliases} from the module's DOCUMENTATION."""
    with open(os.path.join(MODULES, module + ".py")) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            options = yaml.safe_load(node.value.value).get("options") or {}
            return dict((name, set(spec.get("aliases") or [])) for name, spec in options.items())
    raise AssertionError("no DOCUMENTATION in plugins/modules/%s.py" % module)


def host_main():
    return tasks_of("host", "main.yml")


def host_tuning_tasks():
    return tasks_of("host", "host_tuning.yml")


def host_tuning_task():
    tasks = host_tuning_tasks()
    assert len(tasks) == 1 and tasks[0].module == "host_tuning", "host_tuning.yml is the one call of host_tuning"
    return tasks[0]


def part_args(task):
    """{part: {option: the variables its value reads, as text}} of a host_tuning task: each part
    is one Jinja dict expression in the task's vars (one template per part, not per option)."""
    env = jinja2.Environment()
    found = {}
    for part, text in task.data["vars"]["__host_tuning_parts"].items():
        body = env.parse(text).body
        assert len(body) == 1 and isinstance(body[0], jinja2.nodes.Output), "%s: one expression" % part
        [expression] = [n for n in body[0].nodes if not isinstance(n, jinja2.nodes.TemplateData) or n.data.strip()]
        assert isinstance(expression, jinja2.nodes.Dict), "%s must be a dict of the module's options" % part
        options = {}
        for pair in expression.items:
            assert isinstance(pair.key, jinja2.nodes.Const), "%s: option names are plain strings" % part
            names = sorted(set(n.name for n in pair.value.find_all(jinja2.nodes.Name)))
            options[pair.key.value] = " ".join("{{ %s }}" % name for name in names)
        found[part] = options
    return found


def verify_tasks():
    return tasks_of("verify", "main.yml")


def readback_include():
    includes = [t for t in verify_tasks()
                if "ansible.builtin.include_role" in t.data
                and t.data["ansible.builtin.include_role"].get("name") == "gpufleet.tuning.host"]
    assert len(includes) == 1, "the verify role must include gpufleet.tuning.host once, found %d" % len(includes)
    return includes[0]


def _key(task):
    return (os.path.relpath(task.path, REPO), task.name)


# ------------------------------------------------------------------------------ the shared task

def test_the_host_role_applies_the_shared_tuning_task():
    applied = set(_key(t) for t in host_main())
    assert _key(host_tuning_task()) in applied, (
        "roles/host/tasks/main.yml must import host_tuning.yml (what the verify role reads back)")


def test_every_tuning_module_task_of_the_host_role_is_the_shared_one():
    """A host task calling a tuning module of this collection, anywhere in the role, must be the
    host_tuning call: only that is read back by the verify role. The reboot contract's re-read
    after a reboot (check mode, the same part's arguments) is the one other call."""
    calls = [t for t in host_main() if t.module and t.module not in RECORD_KEEPING]
    others = sorted(t.where for t in calls if _key(t) != _key(host_tuning_task())
                    and not (t.path.endswith("/reboot.yml") and t.data.get("check_mode") is True))
    assert not others, "tuning module tasks of the host role outside host_tuning.yml: %s" % others
    assert any(_key(t) == _key(host_tuning_task()) for t in calls), "the host role must apply host_tuning.yml"


def test_the_shared_task_carries_every_phase_and_part_tag():
    tags = host_tuning_task().tags
    assert {"runtime", "reboot_required"} <= tags
    assert set(engine.TAG.values()) <= tags, "part tags missing: %s" % sorted(set(engine.TAG.values()) - tags)
    assert sorted(part_args(host_tuning_task())) == sorted(engine.PARTS), "every part of the engine, each with its options"


def test_the_verify_role_runs_that_very_task_in_check_mode_for_the_runtime_parts():
    include = readback_include()
    args = include.data["ansible.builtin.include_role"]
    assert args.get("tasks_from") == "host_tuning", (
        "%s: tasks_from must be 'host_tuning' (no .yml: the name also selects the argument spec entry point)" % include.where)
    apply = args.get("apply") or {}
    assert apply.get("check_mode") is True, "%s: apply.check_mode must be true: the read-back changes nothing" % include.where
    assert "verify" in _as_list(apply.get("tags")), "%s: apply.tags must hold verify (--tags verify alone)" % include.where
    assert not apply.get("ignore_errors"), "%s: ignore_errors would hide the argument validation" % include.where
    assert {"verify", "runtime"} <= include.tags, "%s: the include itself must carry verify and runtime" % include.where
    assert any("verify_readback_enabled" in str(cond) for cond in include.when), (
        "%s: the read-back must follow verify_readback_enabled" % include.where)
    verify_vars = load(os.path.join(ROLES, "verify", "vars", "main.yml"))
    assert verify_vars["__verify_readback_parts"] == list(engine.RUNTIME_PARTS)
    assert include.data["vars"]["__host_tuning_plan"] == "{{ __verify_readback_parts }}"
    assert include.data["vars"]["__host_tuning_apply"] == "{{ __verify_readback_parts }}"


def test_the_shared_task_only_calls_the_module():
    """No notify (a handler must not fire from the read-back), no always tag (it would print
    twice), no keyword that would differ between the apply and the read-back."""
    task = host_tuning_task()
    assert "notify" not in task.data, "%s: a notify would fire from the read-back" % task.where
    assert "always" not in task.tags, "%s: an always-tagged task runs twice" % task.where
    for keyword in ("check_mode", "ignore_errors", "changed_when", "failed_when", "delegate_to", "when"):
        assert keyword not in task.data, "%s: %s would differ between the apply and the read-back" % (task.where, keyword)
    assert task.data.get("register") == "__host_tuning", "%s: register as __host_tuning" % task.where


def test_every_read_back_result_reaches_the_report():
    listed = load(os.path.join(ROLES, "verify", "vars", "main.yml"))["__verify_readback_modules"]
    runtime = [name for name in engine.RESULT_NAMES if engine.PHASE[engine.PART_OF[name]] == "runtime"]
    assert listed == runtime, ("roles/verify/vars/main.yml __verify_readback_modules must list the results of the "
                               "engine's runtime parts in their order: %s, not %s" % (runtime, listed))
    readback = open(os.path.join(ROLES, "verify", "tasks", "readback.yml")).read()
    report = open(os.path.join(ROLES, "verify", "tasks", "report.yml")).read()
    assert "__verify_readback_modules" in readback and "__verify_readback:" in readback
    assert re.search(r"readback: .*__verify_readback\b", report), "verify.json must keep the read-back per module"
    assert re.search(r"'readback': __verify_readback\b", report), "the judgement must read the read-back"


def test_nothing_after_the_read_back_reads_the_result_it_replaced():
    """The read-back re-registers __host_tuning (and with it the __host_<module> views of
    vars/main.yml); the host role's handlers run at the end of the play, after it, so they must
    not read those."""
    views = set(load(os.path.join(ROLES, "host", "vars", "main.yml")))
    for name in os.listdir(os.path.join(ROLES, "host", "handlers")):
        text = yaml.safe_dump(load(os.path.join(ROLES, "host", "handlers", name)), width=1 << 20)  # no comments
        for var in {"__host_tuning"} | set(v for v in views if v.startswith("__host_")):
            assert not re.search(r"\b%s\b" % re.escape(var), text), (
                "roles/host/handlers/%s reads %s, which the verify role's read-back replaces before handlers run"
                % (name, var))


def test_the_verify_role_calls_no_tuning_module_itself():
    """Per-module read-back tasks with their own arguments are what drifted from the host role."""
    direct = sorted(set(t.module for t in verify_tasks() if t.module and t.module not in RECORD_KEEPING + CONTROLLER_ACTIONS))
    assert direct == ["p2p_bandwidth"], "the verify role calls %s itself; read back through host_tuning.yml" % direct


# ------------------------------------------------------------------------------ options, once

def tuning_host_vars():
    found = {}
    task = host_tuning_task()
    data = dict((k, v) for k, v in task.data.items() if k not in ("name", "register", "tags"))
    for var in role_vars_in(data):
        found.setdefault(var, task.where)
    # The LXC part's inventory containers (vars/main.yml, __host_lxc_memlock_inventory).
    for var in role_vars_in(load(os.path.join(ROLES, "host", "vars", "main.yml"))["__host_lxc_memlock_inventory"]):
        found.setdefault(var, "roles/host/vars/main.yml")
    return found


def test_every_tuning_option_is_declared_in_the_host_tuning_entry_point():
    specs = argument_specs("host")
    declared = specs["host_tuning"]["options"]
    used = tuning_host_vars()
    undeclared = sorted("%s (%s)" % (var, where) for var, where in used.items() if var not in declared)
    assert not undeclared, ("host variables passed by the tuning task but missing from the host_tuning entry point "
                            "of roles/host/meta/argument_specs.yml: %s" % undeclared)
    unused = sorted(set(declared) - set(used))
    assert not unused, "the host_tuning entry point declares options the tuning task does not use: %s" % unused


def test_the_main_entry_point_takes_the_tuning_options_as_they_are():
    specs = argument_specs("host")
    main, tuning = specs["main"]["options"], specs["host_tuning"]["options"]
    for name, spec in tuning.items():
        assert main.get(name) == spec, "host option %s differs between the main and host_tuning entry points" % name


def _comparable(value):
    return yaml.safe_load(yaml.safe_dump(value))


@pytest.mark.parametrize("role", ["host", "verify", "container"])
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
    """roles/ROLE/tasks/M.yml (or M_<when>.yml) calls module M. The revert and rollout roles are
    one job each around other roles."""
    for task in module_tasks_of_every_role():
        stem = os.path.splitext(os.path.basename(task.path))[0]
        if task.role in ("revert", "rollout") or stem.startswith(task.module + "_"):
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
            prefixes = PREFIXES.get((task.role, task.module))
            assert prefixes, "%s: declare the %s role's variable prefix for %s in PREFIXES" % (
                task.where, task.role, task.module)
            if not refs & set(prefix + arg for prefix in prefixes):
                wrong.append("%s: %s from %s, not %s" % (task.where, arg, sorted(refs), prefixes[-1] + arg))
    assert not wrong, "role variables not named after the module argument they set: %s" % wrong


# The LXC part's options, as host_tuning takes them: discovery's (lxc_containers), the limit's
# (lxc_memlock) and the two lists it merges.
LXC_PART_MODULES = ("lxc_containers", "lxc_memlock")
LXC_PART_DERIVED = {
    "inventory": "the inventory's containers of this host (vars/main.yml, from gpufleet_lxc_host)",
    "containers": "host_lxc_containers, the hand-written list",
}


def test_each_part_s_options_are_its_module_s_and_named_after_them():
    """Inside the host_tuning call each part is its module: an option of that module (not an
    alias), set by the role's variable of that module's prefix and the option's name."""
    wrong = []
    task = host_tuning_task()
    for part, options in part_args(task).items():
        modules = LXC_PART_MODULES if part == "lxc_memlock" else (part,)
        known = {}
        for module in modules:
            known.update(module_options(module))
        for arg, value in options.items():
            if part == "lxc_memlock" and arg in LXC_PART_DERIVED:
                continue
            if arg not in known:
                aliased = [name for name, aliases in known.items() if arg in aliases]
                wrong.append("%s: %s is %s" % (part, arg, "an alias of %s" % aliased[0] if aliased else "not an option"))
                continue
            refs = role_vars_in(value)
            if not refs or (part, arg) in DERIVED_ARGUMENTS:
                continue
            prefixes = sum((PREFIXES.get(("host", module), ()) for module in modules), ())
            assert prefixes, "declare the host role's variable prefix for %s in PREFIXES" % part
            if not refs & set(prefix + arg for prefix in prefixes):
                wrong.append("%s: %s from %s, not %s" % (part, arg, sorted(refs), prefixes[-1] + arg))
    assert not wrong, "host variables not named after the option they set: %s" % wrong
