# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.host_tuning: a host's whole tuning pass in one module call.

Why one call: a module run costs far more than the work it does. On the test machines a bare
``ansible.builtin.ping`` costs about 0.2 s of CPU on the node (AnsiballZ unpacking and compiling
ansible's own module_utils) and 0.05 s on the controller, and a fleet pays that per host and
per task. The host role used to make a call per module, and the audit a second one per module
to plan, and two more to record the before-state: about 17 calls per host for one pass
(benchmarks/runtime_pass.py). This engine runs the same engines, with the same arguments, in
one process:

1. validate every part's options against that module's own ARGUMENT_SPEC (nothing is read
   before every input is known good);
2. read the node's facts for the audit (``facts``, node_facts' options), before anything is
   written;
3. plan every part in check mode: the audit's plan, and the before-values the record needs;
4. record the before-state of what the parts in ``apply`` will change (tuning_state,
   ``planned``), when ``state_path`` is given;
5. apply those parts in order, each all or nothing (its own engine's transaction);
6. record what was really changed (tuning_state, ``applied`` and ``prune``), also when a part
   failed, so that a revert can undo the parts applied before it.

A part that fails stops the ones after it. The parts before it stay applied and recorded, as they
would after a failed task of a play that calls the modules one by one; ``modules`` says which
(their ``changes``), and playbooks/revert.yml or a rollout's rescue undoes them from the record.

Results are keyed by module name, the shape each module returns on its own, so the roles and
filters read ``modules.sysctl_profile`` where they read the module's registered result before.
The LXC part is two modules: ``lxc_containers`` (discovery) and ``lxc_memlock`` (a loop-shaped
result, ``results`` per container, each with its ``item``).

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)``; ``paths`` is a
Paths(root) that gives every engine its own Paths under the same root.
"""

from __future__ import annotations

import copy

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_targets
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

# The parts, in the order they run, with the phase (tag) each belongs to. The runtime order is
# the host role's (sysctls first: they cannot break a device; modules last).
RUNTIME_PARTS = ("sysctl_profile", "pcie_maxreadreq", "pcie_acs", "cpu_power", "lxc_memlock", "nvidia_peermem")
REBOOT_PARTS = ("nvidia_driver_options", "kernel_cmdline")
PARTS = RUNTIME_PARTS + REBOOT_PARTS
PHASE = dict([(name, "runtime") for name in RUNTIME_PARTS] + [(name, "reboot_required") for name in REBOOT_PARTS])
# Each part's own tag: `--tags sysctl` tunes the sysctls alone, `--skip-tags pcie` leaves the PCIe
# register out (the record areas' names, where a part has one of its own).
TAG = {"sysctl_profile": "sysctl", "pcie_maxreadreq": "pcie", "pcie_acs": "pcie_acs", "cpu_power": "cpu_power",
       "lxc_memlock": "lxc_memlock", "nvidia_peermem": "peermem", "nvidia_driver_options": "nvidia_options",
       "kernel_cmdline": "kernel_cmdline"}
# The module names of the results: the LXC part reports as the two modules it runs.
RESULT_NAMES = ("sysctl_profile", "pcie_maxreadreq", "pcie_acs", "cpu_power", "lxc_containers", "lxc_memlock",
                "nvidia_peermem", "nvidia_driver_options", "kernel_cmdline")
PART_OF = dict((name, "lxc_memlock" if name == "lxc_containers" else name) for name in RESULT_NAMES)

# ``audit`` is the controller's (plugins/action/host_tuning.py judges the facts there and never
# sends it to the node); it is in the spec so that the module's documentation and its spec agree.
AUDIT_SPEC = dict(
    facts=dict(type="dict", default={}),
    path=dict(type="path", required=True),
    host=dict(type="str"),
    params=dict(type="dict", default={}),
    rules_file=dict(type="path"),
    rules_extra=dict(type="list", elements="dict", default=[]),
    rules_disabled=dict(type="list", elements="str", default=[]),
    planned_modules=dict(type="dict"),
    plan_in_container=dict(type="bool", default=False),
    mode=dict(type="str", default="0644"),
)

ARGUMENT_SPEC = dict(
    parts=dict(type="dict", default={}),
    apply=dict(type="list", elements="str"),
    facts=dict(type="dict"),
    audit=dict(type="dict", options=AUDIT_SPEC),
    role_arguments=dict(type="list", elements="str"),
    state_path=dict(type="path"),
    run_id=dict(type="str"),
)


def selected(run_tags, skip_tags=()):
    """The parts a run applies, from its --tags and --skip-tags (ansible_run_tags and
    ansible_skip_tags): a part runs when ``all``, its phase or its own tag is asked for, and
    neither its phase nor its tag is skipped. The one task carries every phase and part tag,
    so Ansible runs it whenever any of them is asked for, and this decides which parts apply."""
    run_tags, skip_tags = set(run_tags or ["all"]), set(skip_tags or [])
    out = []
    for name in PARTS:
        wanted = bool(run_tags & {"all", PHASE[name], TAG[name]})
        if wanted and not skip_tags & {PHASE[name], TAG[name]}:
            out.append(name)
    return out


# What a part given as null reports: left out of this call on purpose (a switch of the role).
NOT_ENABLED = "not enabled here (not part of this call)"


def _engine(name):
    """The engine module of a part, imported when first needed: a call that reads the tuning
    back without facts does not compile the fact readers on the node. Plain import statements,
    so that Ansible's module packer sees every engine this module may use."""
    if name == "sysctl_profile":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as engine
    elif name == "pcie_maxreadreq":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_maxreadreq as engine
    elif name == "pcie_acs":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_acs as engine
    elif name == "cpu_power":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power as engine
    elif name == "lxc_containers":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_containers as engine
    elif name == "lxc_memlock":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock as engine
    elif name == "nvidia_peermem":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_peermem as engine
    elif name == "nvidia_driver_options":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options as engine
    elif name == "kernel_cmdline":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_cmdline as engine
    elif name == "node_facts":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import node_facts as engine
    elif name == "tuning_state":
        from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_state as engine
    else:
        raise KeyError(name)
    return engine


def lxc_part_spec():
    """The LXC part's options: discovery (lxc_containers), the limit (lxc_memlock) and the two
    lists the role adds to what discovery selects (lxc_targets.merge)."""
    containers = _engine("lxc_containers").ARGUMENT_SPEC
    memlock = _engine("lxc_memlock").ARGUMENT_SPEC
    spec = dict((key, copy.deepcopy(containers[key])) for key in ("select", "exclude"))
    spec.update((key, copy.deepcopy(memlock[key])) for key in ("limit", "backup", "on_locked"))
    spec.update(inventory=dict(type="list", elements="dict", default=[]),
                containers=dict(type="list", elements="dict", default=[]))
    return spec


def part_spec(name):
    """The argument spec a part's options are validated against: its module's own."""
    if name == "lxc_memlock":
        return lxc_part_spec()
    return _engine(name).ARGUMENT_SPEC


class Paths:
    """Every engine's Paths under one ``root`` (/ on a node, a temp tree in tests); ``nvml`` is
    node_facts' NVML stand-in for tests."""

    def __init__(self, root="/", nvml=None):
        self.root = root
        self.nvml = nvml

    def of(self, name):
        if name == "node_facts":
            return _engine(name).Paths(self.root, nvml=self.nvml)
        if name == "tuning_state":
            from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
            return state_items.Paths(self.root)
        return _engine(name).Paths(self.root)


# --------------------------------------------------------------------------------- validation

def _checked(where, spec, options, **constraints):
    """``options`` validated as AnsibleModule would (types, choices, defaults), a null option
    taken as not given (the role's way to leave one out); ModuleFailure naming each bad value."""
    if not isinstance(options, dict):
        raise ModuleFailure("%s must be a dict of that module's options, got %r" % (where, options))
    given = dict((key, value) for key, value in options.items() if value is not None)
    result = ArgumentSpecValidator(spec, **constraints).validate(given)
    if result.error_messages:
        raise ModuleFailure("%s: %s" % (where, "; ".join(str(message) for message in result.error_messages)))
    return result.validated_parameters


def validate(params):
    params = dict((key, params.get(key, copy.deepcopy(spec.get("default")))) for key, spec in ARGUMENT_SPEC.items())
    parts = params["parts"] or {}
    unknown = sorted(str(name) for name in parts if name not in PARTS)
    if unknown:
        raise ModuleFailure("parts: unknown part(s) %s; the parts are %s" % (", ".join(unknown), ", ".join(PARTS)))
    checked = {}
    for name in PARTS:
        if name in parts:
            checked[name] = None if parts[name] is None else _checked("parts.%s" % name, part_spec(name), parts[name])
    apply = list(params["apply"]) if params["apply"] is not None else [name for name in PARTS if name in checked]
    bad = [name for name in apply if name not in PARTS]
    if bad:
        raise ModuleFailure("apply: unknown part(s) %s; the parts are %s" % (", ".join(bad), ", ".join(PARTS)))
    missing = [name for name in apply if name not in checked]
    if missing:
        raise ModuleFailure("apply names part(s) %s that parts does not give: give their options in parts, "
                            "or leave them out of apply" % ", ".join(missing))
    facts = None
    if params["facts"] is not None:
        facts = _checked("facts", _engine("node_facts").ARGUMENT_SPEC, params["facts"])
    if params["run_id"] is not None and not params["run_id"].strip():
        raise ModuleFailure("run_id=%r is empty: leave it out for a new one" % params["run_id"])
    if params["state_path"] is not None:
        # tuning_state's own checks (an absolute path), before anything is read.
        _engine("tuning_state").validate({"path": params["state_path"], "run_id": params["run_id"]})
    return {"parts": checked, "apply": [name for name in PARTS if name in apply and checked.get(name) is not None],
            "facts": facts, "state_path": params["state_path"], "run_id": params["run_id"]}


# ---------------------------------------------------------------------------------- the parts

def _failed(exc):
    """A failure as a registered result would show it: msg, what the engine had learnt, no
    change records (the engine restored what it had applied)."""
    entry = dict((key, value) for key, value in exc.partial.items() if key not in ("changed", "changes", "diff"))
    entry.update(failed=True, msg=exc.message, changed=False, changes=[])
    return entry


def _call(name, options, check_mode, paths, tools):
    """Run one part; returns {module name: result} (two for the LXC part). PartFailure when it
    fails, holding the results it did make and its failed entry."""
    if name == "lxc_memlock":
        return _lxc(options, check_mode, paths, tools)
    try:
        return {name: _engine(name).run(options, check_mode, paths.of(name), tools)}
    except ModuleFailure as exc:
        raise PartFailure(name, exc, {name: _failed(exc)})


def _lxc(options, check_mode, paths, tools):
    """Discovery, the targets, and lxc_memlock once per target (a loop: every container is
    tried, each all or nothing, and the part fails after the loop when one failed)."""
    try:
        discovery = _engine("lxc_containers").run(dict((key, options[key]) for key in ("select", "exclude")),
                                                  check_mode, paths.of("lxc_containers"), tools)
    except ModuleFailure as exc:
        raise PartFailure("lxc_memlock", exc, {"lxc_containers": _failed(exc), "lxc_memlock": _failed(exc)})
    try:
        targets = lxc_targets.merge(discovery, options["inventory"], options["containers"])
    except lxc_targets.TargetError as exc:
        failure = ModuleFailure(str(exc))
        raise PartFailure("lxc_memlock", failure, {"lxc_containers": discovery, "lxc_memlock": _failed(failure)})
    engine = _engine("lxc_memlock")
    items = []
    for target in targets:
        args = dict((key, target[key]) for key in engine.TARGET_OPTIONS if key in target)
        args.update(limit=target.get("limit", options["limit"]), backup=options["backup"], on_locked=options["on_locked"])
        try:
            args = _checked("lxc_memlock %s" % target["label"], engine.ARGUMENT_SPEC, args,
                            mutually_exclusive=[list(engine.TARGET_OPTIONS)], required_one_of=[list(engine.TARGET_OPTIONS)])
            item = engine.run(args, check_mode, paths.of("lxc_memlock"), tools)
        except ModuleFailure as exc:
            item = _failed(exc)
        item["item"] = target
        items.append(item)
    # Shaped as Ansible registers a looped task: ``results`` per item, no records of its own (a
    # reader that sums a result's and its items' records counts each once).
    loop = {"changed": any(item.get("changed") for item in items),
            "results": items,
            "msg": "%d container(s)" % len(items) if items else "no container to raise",
            "restart_required": any(item.get("restart_required") for item in items),
            "warnings": [w for item in items for w in item.pop("warnings", [])]}
    failed = [item for item in items if item.get("failed")]
    if failed:
        message = "; ".join("%s: %s" % (item["item"]["label"], item["msg"]) for item in failed)
        loop.update(failed=True, msg="%d of %d container(s) failed: %s" % (len(failed), len(items), message))
        raise PartFailure("lxc_memlock", ModuleFailure(loop["msg"]), {"lxc_containers": discovery, "lxc_memlock": loop})
    return {"lxc_containers": discovery, "lxc_memlock": loop}


def _not_enabled(name):
    names = ("lxc_containers", "lxc_memlock") if name == "lxc_memlock" else (name,)
    return dict((result, {"changed": False, "changes": [], "skipped": True, "msg": NOT_ENABLED}) for result in names)


def records_of(results):
    """Every change record of ``results`` ({module: result}), loop items included, in order. A
    failed part claims none (it restored what it had applied); a loop's items that did change
    keep theirs, also when another item failed."""
    found = []
    for name in RESULT_NAMES:
        result = results.get(name)
        if not isinstance(result, dict):
            continue
        if isinstance(result.get("results"), list):
            for item in result["results"]:
                if isinstance(item, dict) and not item.get("failed"):
                    found.extend(item.get("changes") or [])
        elif not result.get("failed"):
            found.extend(result.get("changes") or [])
    return found


# ------------------------------------------------------------------------------------ the run

def run(params, check_mode=False, paths=None, tools=None):
    params = validate(params)
    paths = paths or Paths()
    warnings = []
    apply = params["apply"]
    out = {"changed": False, "changes": [], "diff": [], "modules": {}, "plan": {}, "applied": [],
           "run_id": params["run_id"] or _engine("tuning_state").new_run_id(),
           "reboot_required": False, "restart_required": False, "warnings": warnings}
    params["run_id"] = out["run_id"]

    if params["facts"] is not None:
        facts = _engine("node_facts").run(params["facts"], True, paths.of("node_facts"), tools)
        out["facts"] = facts["facts"]
        out["facts_timings_ms"] = facts.get("timings_ms", {})
        warnings.extend("node_facts: %s" % w for w in facts.get("warnings", []))

    # The plan: every part in check mode. One the run must apply and cannot plan fails the call
    # before anything is written; one only planned (for the audit) is reported as failed.
    for name in PARTS:
        if name not in params["parts"]:
            continue
        if params["parts"][name] is None:
            out["plan"].update(_not_enabled(name))
            continue
        try:
            out["plan"].update(_call(name, params["parts"][name], True, paths, tools))
        except PartFailure as exc:
            out["plan"].update(exc.results)
            if name in apply:
                raise exc.module_failure(out)
        if name not in apply:
            for result_name in _result_names(name):
                warnings.extend("%s (planned only): %s" % (result_name, w) for w in _pop_warnings(out["plan"][result_name]))

    planned = dict((result_name, out["plan"][result_name]) for name in apply for result_name in _result_names(name))
    if check_mode:
        out["modules"] = planned
        out["applied"] = list(apply)
        _collect_warnings(planned, warnings)
        if params["state_path"] is not None:
            out["state"] = _record(params, paths, True, planned=records_of(planned), applied=records_of(planned))
        return _finish(out)

    if params["state_path"] is not None:
        out["state_before"] = _record(params, paths, False, planned=records_of(planned))
    failure = None
    try:
        for name in apply:
            try:
                made = _call(name, params["parts"][name], False, paths, tools)
            except PartFailure as exc:
                out["modules"].update(exc.results)
                failure = exc
                break
            out["modules"].update(made)
            out["applied"].append(name)
        _collect_warnings(out["modules"], warnings)
    finally:
        if params["state_path"] is not None:
            # Also after a failed part: what the parts before it changed must be in the record.
            try:
                out["state"] = _record(params, paths, False, applied=records_of(out["modules"]), prune=True)
            except ModuleFailure as exc:
                if failure is None:
                    raise ModuleFailure("the tuning was applied, but the record of what it changed was not written: "
                                        "%s" % exc.message, _finish(out))
    if failure is not None:
        raise failure.module_failure(_finish(out))
    return _finish(out)


class PartFailure(Exception):
    """A part failed: ``results`` holds what it returned (its failed entry included)."""

    def __init__(self, name, exc, results):
        super().__init__(exc.message)
        self.name = name
        self.message = exc.message if exc.message.startswith(name + ":") else "%s: %s" % (name, exc.message)
        self.partial = dict((k, v) for k, v in exc.partial.items() if k not in ("changed", "changes", "diff"))
        self.results = results

    def module_failure(self, out):
        partial = dict(out)
        partial.update(self.partial)
        partial["failed_part"] = self.name
        return ModuleFailure(self.message, partial)


def _result_names(name):
    return ("lxc_containers", "lxc_memlock") if name == "lxc_memlock" else (name,)


def _collect_warnings(results, warnings):
    for result_name, result in results.items():
        warnings.extend("%s: %s" % (result_name, w) for w in _pop_warnings(result))


def _record(params, paths, check_mode, planned=(), applied=(), prune=False):
    return _engine("tuning_state").run({"path": params["state_path"], "run_id": params["run_id"], "planned": list(planned),
                                        "applied": list(applied), "prune": prune}, check_mode, paths.of("tuning_state"))


def _pop_warnings(result):
    return result.pop("warnings", []) if isinstance(result, dict) else []


def _finish(out):
    """Top-level changed, changes, diff, reboot_required and restart_required from the parts
    that ran (and the state file's record, when it changed)."""
    results = out["modules"]
    out["changes"] = records_of(results)
    # The record file, written up to twice (before and after the parts): one file record from
    # what it held before the call to what it holds now.
    written = ((out.get("state_before") or {}).get("changes") or []) + ((out.get("state") or {}).get("changes") or [])
    state_record = None
    if written:
        state_record = dict(written[0], after=written[-1]["after"])
    out["state_changed"] = state_record is not None and state_record["before"] != state_record["after"]
    if out["state_changed"]:
        out["changes"] = out["changes"] + [state_record]
    out["changed"] = bool(out["changes"])
    for name in RESULT_NAMES:
        result = results.get(name)
        if not isinstance(result, dict):
            continue
        for piece in [result] + [item for item in result.get("results") or [] if isinstance(item, dict)]:
            diff = piece.pop("diff", None)
            if isinstance(diff, dict):
                out["diff"].append(diff)
            elif isinstance(diff, list):
                out["diff"].extend(d for d in diff if isinstance(d, dict))
        out["reboot_required"] = out["reboot_required"] or bool(result.get("reboot_required"))
        out["restart_required"] = out["restart_required"] or bool(result.get("restart_required"))
    # The rendered diffs are for people (the top-level diff, shown with --diff); the records
    # say the same for programs. Kept once: the registered result is templated by every later
    # task that reads it, and a file's diff is its whole text. For the same reason the plan
    # keeps only the parts whose result is not in ``modules`` (planned only, or after a failure
    # never reached): an applied part's plan is its result there.
    for result in out["plan"].values():
        for piece in [result] + [item for item in result.get("results") or [] if isinstance(item, dict)]:
            piece.pop("diff", None)
    out["plan"] = dict((name, result) for name, result in out["plan"].items() if name not in results)
    out["msg"] = "applied: %s" % (", ".join(out["applied"]) or "nothing")
    return out
