# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU idle-state bound, cpufreq governor and EPP: applied now, read back, kept across boots.

The module gpufleet.tuning.cpu_power is a thin shell over ``run()``. Deep idle states add
their exit latency to every wake-up of the threads that feed the GPUs; tuned keeps CPUs out of
them with a daemon holding /dev/cpu_dma_latency open. Here the same effect is made explicit
and visible: every idle state whose exit latency is above the bound is disabled on every
online CPU through its sysfs ``disable`` file, and the governor and EPP are written per cpufreq
policy. A small boot unit (cpu_power_boot) reapplies the rule after a reboot.

Three parts (idle states, governor, EPP) are planned independently: a part whose sysfs does
not exist here (no cpuidle driver in a VM, no cpufreq driver on the GPU machines) is reported
with its reason and is not an error. The contract is the collection's: validate, read, plan,
stop in check mode, write and read back each file inside a Transaction, restore everything on
the first failure.

Inside a container (container.detect: live evidence, never a marker file alone) reading is
always allowed and only writing is refused, unless ``allow_in_container`` says this really is
the host:

- runtime writes (a ``disable`` flag, a governor, an EPP) would change the host's CPUs from a
  privileged container or fail in an unprivileged one: the call fails, naming every state and
  policy that would change, and writes nothing (check mode reports the same refusal);
- the boot unit is left out of the plan and reported in ``skipped_keys["boot unit"]``: a unit
  written inside a container runs when the container's systemd starts, not when the host
  boots, so it would persist nothing for the host (and a privileged container would apply it
  to the host at every container start);
- with nothing to write, the call is ok and unchanged, and returns what it found.

Offline CPUs and inactive cpufreq policies are left alone and reported; see cpu_sysfs for what
the kernel shows for them (EBUSY from every attribute of an inactive policy since 5.19).
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import cpu_power_boot
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import cpu_sysfs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec as argspec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw.cpu_sysfs import describe_oserror
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

# Governor and EPP names are short kernel identifiers (CPUFREQ_NAME_LEN is 16); checking the
# form first also makes them safe to embed in the boot script.
_WORD_RE = re.compile(r"^[a-z0-9_]{1,32}\Z")
# Latencies are microseconds in an int; a bound past an hour means "no bound" and is a typo.
_MAX_BOUND_US = 3600 * 1000 * 1000

# Drivers that pin EPP at "performance" while the governor is performance and refuse any other
# value then with EBUSY (intel_pstate and amd-pstate in active mode).
_EPP_PINNING_DRIVERS = ("intel_pstate", "amd-pstate-epp")

PARTS = ("idle_states", "governor", "energy_performance_preference")

# skipped_keys entry for a boot unit left out of the plan inside a container.
BOOT_UNIT_KEY = "boot unit"

# The ``area`` of this module's change records (common/records.py).
AREA = "cpu_power"

# The module's argument spec, read by the module, validate() and the tests (one engine contract).
ARGUMENT_SPEC = dict(
    max_idle_latency_us=dict(type="int"),
    enable_within_bound=dict(type="bool", default=False),
    governor=dict(type="str"),
    energy_performance_preference=dict(type="str"),
    persist=dict(type="bool", default=True),
    allow_in_container=dict(type="bool", default=False),
)


def with_defaults(params):
    """``params`` with every option it leaves out at its ARGUMENT_SPEC default."""
    return argspec.with_defaults(ARGUMENT_SPEC, params)


class Paths:
    """Where the module reads and writes, all under ``root`` (/ on a node; a temp tree in tests)."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.cpu_root = os.path.join(root, cpu_sysfs.CPU_ROOT.lstrip("/"))
        self.systemd_dir = os.path.join(root, cpu_power_boot.SYSTEMD_DIR.lstrip("/"))
        self.script_path = os.path.join(root, cpu_power_boot.SCRIPT_PATH.lstrip("/"))


def validate(params):
    """Check every input before anything is read; return the normalized settings."""
    params = with_defaults(params)
    bound = params.get("max_idle_latency_us")
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)
                              or not 0 <= bound <= _MAX_BOUND_US):
        raise ModuleFailure("max_idle_latency_us %r is not valid: an integer from 0 to %d "
                            "(microseconds of exit latency), or null to leave idle states alone"
                            % (bound, _MAX_BOUND_US))
    out = {"max_idle_latency_us": bound,
           "enable_within_bound": bool(params.get("enable_within_bound")),
           "persist": bool(params.get("persist")),
           "allow_in_container": bool(params.get("allow_in_container"))}
    for key in ("governor", "energy_performance_preference"):
        value = params.get(key)
        if value is not None and (not isinstance(value, str) or not _WORD_RE.match(value)):
            raise ModuleFailure("%s %r is not valid: a kernel name of 1-32 characters from a-z, "
                                "0-9 and '_' (such as performance), or null to leave it alone"
                                % (key, value))
        out[key] = value
    if out["energy_performance_preference"] == "default":
        raise ModuleFailure("energy_performance_preference 'default' is not accepted: the kernel "
                            "reads it back as the firmware's value, so the write cannot be "
                            "checked; name the preference (such as performance)")
    return out


def _cpus(cpus):
    return cpu_sysfs.format_cpu_list(cpus) or "none"


# --- idle states -----------------------------------------------------------------------------

def _wanted_disable(state, settings):
    """1 or 0 for the state's ``disable`` file, or None when this state is left as it is."""
    bound = settings["max_idle_latency_us"]
    if bound is None:
        return None
    if state.latency > bound:
        return 1
    if settings["enable_within_bound"]:
        return 0
    return None


def _idle_states_unless_gone(cpu, root):
    """The CPU's idle states, or None when it went offline while they were read.

    haltpoll unregisters an offline CPU's cpuidle device, so its files vanish under the reader;
    any other read error of a CPU that is still online is a CpuSysfsError.
    """
    try:
        return cpu_sysfs.idle_states(cpu, root)
    except cpu_sysfs.CpuSysfsError:
        if cpu in cpu_sysfs.online_cpus(root):
            raise
        return None


def _read_idle(settings, root, online):
    """Read the idle states of the online CPUs; return the idle plan dict."""
    plan = {"driver": None, "governor": None, "per_cpu": {}, "writes": [], "reason": None,
            "without_states": [], "went_offline": []}
    requested = settings["max_idle_latency_us"] is not None
    try:
        plan["driver"] = cpu_sysfs.idle_driver(root)
        plan["governor"] = cpu_sysfs.idle_governor(root)
        for cpu in online:
            states = _idle_states_unless_gone(cpu, root)
            if states is None:
                plan["went_offline"].append(cpu)
            else:
                plan["per_cpu"][cpu] = states
    except cpu_sysfs.CpuSysfsError as exc:
        if requested:
            raise ModuleFailure("cannot read the CPU idle states, nothing was changed: %s" % exc)
        plan["reason"] = "not requested; reading them failed: %s" % exc
        plan["per_cpu"] = {}
        return plan
    online = [cpu for cpu in online if cpu in plan["per_cpu"]]
    with_states = [cpu for cpu in online if plan["per_cpu"][cpu]]
    plan["without_states"] = [cpu for cpu in online if not plan["per_cpu"][cpu]]
    if not with_states:
        plan["reason"] = (
            "no CPU idle states in sysfs (cpuidle driver: %s), as in VMs whose firmware offers "
            "no C-states or with cpuidle.off=1; nothing to disable" % (plan["driver"] or "absent"))
        return plan
    if not requested:
        plan["reason"] = "not requested (max_idle_latency_us is null)"
        return plan
    for cpu in with_states:
        for state in plan["per_cpu"][cpu]:
            want = _wanted_disable(state, settings)
            if want is not None and want != state.disable:
                plan["writes"].append((state, want))
    return plan


def _state_groups(per_cpu):
    """Group the states of all CPUs by (index, name, latency): CPUs that agree share a row."""
    groups = {}
    for cpu in sorted(per_cpu):
        for state in per_cpu[cpu]:
            groups.setdefault((state.index, state.name, state.latency), []).append(state)
    return [groups[key] for key in sorted(groups)]


def _state_label(first):
    return "%s (%s, %dus)" % (first.state, first.name, first.latency)


def _idle_summary(plan, settings, after_disable):
    """The per-state rows returned as ``states`` and the values diff of the idle part."""
    rows = []
    before_diff = {}
    after_diff = {}
    for group in _state_groups(plan["per_cpu"]):
        first = group[0]
        want = _wanted_disable(first, settings)
        if settings["max_idle_latency_us"] is None:
            action = "unmanaged"
        elif want == 1:
            action = "disable"
        elif want == 0:
            action = "enable"
        else:
            action = "keep"
        cpus = [s.cpu for s in group]
        dis_before = [s.cpu for s in group if s.disable]
        dis_after = [s.cpu for s in group if after_disable.get((s.cpu, s.index), s.disable)]
        rows.append({
            "state": first.state,
            "name": first.name,
            "desc": first.desc,
            "latency_us": first.latency,
            "residency_us": first.residency,
            "action": action,
            "cpus": _cpus(cpus),
            "disabled_before": _cpus(dis_before),
            "disabled_after": _cpus(dis_after),
            "enabled_count": len(cpus) - len(dis_after),
            "disabled_count": len(dis_after),
        })
        key = "%s disabled on CPUs" % _state_label(first)
        before_diff[key] = _cpus(dis_before)
        after_diff[key] = _cpus(dis_after)
    return rows, before_diff, after_diff


# --- cpufreq: governor and EPP ---------------------------------------------------------------

def _read_freq(settings, root, skipped):
    """Read the cpufreq policies and plan governor and EPP writes; refuse unavailable values."""
    governor = settings["governor"]
    epp = settings["energy_performance_preference"]
    try:
        policies = cpu_sysfs.policies(root)
    except cpu_sysfs.CpuSysfsError as exc:
        if governor is None and epp is None:
            return {"policies": [], "governor_reason": "not requested", "epp_reason": "not requested",
                    "governor_writes": [], "epp_writes": []}
        raise ModuleFailure("cannot read the cpufreq policies, nothing was changed: %s" % exc)
    active = [p for p in policies if p.active]
    plan = {"policies": policies, "governor_reason": None, "epp_reason": None,
            "governor_writes": [], "epp_writes": []}
    no_cpufreq = ("no cpufreq policies in sysfs (no cpufreq driver, as in most VMs): the "
                  "firmware or hypervisor sets the CPU speed")
    inactive = [p for p in policies if not p.active]
    if inactive and (governor is not None or epp is not None):
        reasons = sorted(set(p.inactive_reason for p in inactive if p.inactive_reason))
        skipped["cpufreq %s" % ", ".join(p.name for p in inactive)] = (
            "inactive (all CPUs of the policy are offline, CPUs %s); left alone%s"
            % (_cpus(sum((p.related for p in inactive), [])),
               " (%s)" % "; ".join(reasons) if reasons else ""))

    if governor is None:
        plan["governor_reason"] = "not requested (governor is null)"
    elif not active:
        plan["governor_reason"] = no_cpufreq
    else:
        missing = [p for p in active if governor not in p.available_governors]
        if missing:
            raise ModuleFailure("governor %r is not offered by %s; nothing was changed" % (
                governor, "; ".join("%s (CPUs %s, driver %s): available %s" % (
                    p.name, _cpus(p.cpus), p.driver, ", ".join(p.available_governors) or "none")
                    for p in missing)))
        plan["governor_writes"] = [p for p in active if p.governor != governor]

    if epp is None:
        plan["epp_reason"] = "not requested (energy_performance_preference is null)"
    elif not active:
        plan["epp_reason"] = no_cpufreq
    else:
        exposing = [p for p in active if p.epp is not None]
        hidden = [p for p in active if p.epp is None]
        if not exposing:
            plan["epp_reason"] = (
                "the cpufreq driver (%s) does not expose energy_performance_preference; "
                "intel_pstate and amd-pstate do in active mode"
                % ", ".join(sorted(set(p.driver or "unknown" for p in active))))
        else:
            if hidden:
                skipped["energy_performance_preference of CPUs %s" % _cpus(sum((p.cpus for p in hidden), []))] = (
                    "not exposed by %s" % ", ".join(p.name for p in hidden))
            missing = [p for p in exposing if epp not in p.available_epp]
            if missing:
                raise ModuleFailure("energy_performance_preference %r is not offered by %s; nothing "
                                    "was changed" % (epp, "; ".join("%s (CPUs %s, driver %s): available %s" % (
                                        p.name, _cpus(p.cpus), p.driver, ", ".join(p.available_epp) or "none")
                                        for p in missing)))
            pinned = [p for p in exposing if p.driver in _EPP_PINNING_DRIVERS and epp != "performance"
                      and (governor or p.governor) == "performance"]
            if pinned:
                raise ModuleFailure(
                    "energy_performance_preference %r cannot be set on %s: with the performance "
                    "governor, %s hold EPP at performance and refuse other values (EBUSY); choose "
                    "governor powersave or EPP performance; nothing was changed"
                    % (epp, ", ".join(p.name for p in pinned), " and ".join(_EPP_PINNING_DRIVERS)))
            plan["epp_writes"] = [p for p in exposing if p.epp != epp]
    return plan


def _value_groups(policies, before, after, attr):
    """Values diff for one cpufreq attribute: policies with the same before/after share a line."""
    groups = {}
    for policy in policies:
        if before.get(policy.name) is None:
            continue
        groups.setdefault((before[policy.name], after[policy.name]), []).extend(policy.cpus)
    before_diff = {}
    after_diff = {}
    for (old, new), cpus in groups.items():
        key = "%s of CPUs %s" % (attr, _cpus(cpus))
        before_diff[key] = old
        after_diff[key] = new
    return before_diff, after_diff


def _by_value(policies, values):
    """``{value: "cpu list"}`` summary of a per-policy map."""
    out = {}
    for policy in policies:
        value = values.get(policy.name)
        if value is not None:
            out.setdefault(value, []).extend(policy.cpus)
    return dict((value, _cpus(cpus)) for value, cpus in out.items())


# --- apply -----------------------------------------------------------------------------------

def _check_writable(paths_to_write):
    blocked = []
    for path in paths_to_write:
        if not os.access(path, os.W_OK):
            blocked.append(path)
    if blocked:
        more = " and %d more" % (len(blocked) - 3) if len(blocked) > 3 else ""
        raise ModuleFailure("cannot write %s%s (not root, or a read-only /sys); nothing was changed"
                            % (", ".join(blocked[:3]), more))


def _write_checked(path, value):
    """Write, read back, and raise ModuleFailure when the kernel shows something else."""
    try:
        cpu_sysfs.write_attr(path, value)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot write %s to %s: %s" % (value, path, describe_oserror(exc)))
    got = cpu_sysfs.read_attr(path)
    if got != str(value):
        raise ModuleFailure("%s did not take %s: it reads %r after the write" % (path, value, got))


def _state_undo(state, value):
    return lambda: cpu_sysfs.write_attr(state.disable_path, value)


def _policy_undo(policy):
    """Put governor, then EPP back. The governor goes first because intel_pstate and
    amd-pstate refuse an EPP other than performance while the governor is performance."""
    def undo():
        if policy.governor is not None and cpu_sysfs.read_attr(policy.attr_path("scaling_governor")) != policy.governor:
            cpu_sysfs.write_attr(policy.attr_path("scaling_governor"), policy.governor)
        if policy.epp is not None and cpu_sysfs.read_attr(
                policy.attr_path("energy_performance_preference")) != policy.epp:
            cpu_sysfs.write_attr(policy.attr_path("energy_performance_preference"), policy.epp)
    return undo


def _refused_writes(idle_writes, freq, settings):
    """What a refused call would have changed: one phrase per state row and per setting."""
    what = []
    groups = {}
    for state, want in idle_writes:
        groups.setdefault((want, state.index, state.name, state.latency), []).append(state.cpu)
    for (want, index, name, latency), cpus in sorted(groups.items()):
        action = "disable" if want else "enable"
        what.append("%s state%d (%s, %dus) on CPUs %s" % (action, index, name, latency, _cpus(cpus)))
    for attr, key, policies in (("scaling_governor", "governor", freq["governor_writes"]),
                                ("energy_performance_preference", "energy_performance_preference",
                                 freq["epp_writes"])):
        if policies:
            names = ", ".join(p.name for p in policies)
            cpus = _cpus(sum((p.cpus for p in policies), []))
            what.append("set %s %s on %s (CPUs %s)" % (attr, settings[key], names, cpus))
    return what


def _boot_unit_skip_reason(container, changes, problem):
    """skipped_keys text for boot unit files left alone inside a container."""
    would = ("replace a file it does not own: %s" % problem) if problem else \
        ", ".join(change.describe() for change in changes)
    return container_mod.persistence_left_alone(container, "a systemd unit", would)


def _number_list(names, prefix):
    """Names ``policy0``, ``policy1``, ``policy4`` with ``prefix`` ``policy`` as ``0-1,4``."""
    return _cpus([int(name[len(prefix):]) for name in names])


def _idle_records(writes):
    """One value record per idle state and disable change, naming the CPUs it was made on:
    ``cpu0-3/state3 (C6) disable`` from ``0`` to ``1``. The CPUs of a record all had the same
    value before, so a revert writes ``before`` back to each (cpuN/cpuidle/stateK/disable)."""
    groups = {}
    for state, want in writes:
        groups.setdefault((state.index, state.name, state.disable, want), []).append(state.cpu)
    return [records.value(AREA, "cpu%s/state%d (%s) disable" % (_cpus(cpus), index, name), before, after)
            for (index, name, before, after), cpus in sorted(groups.items())]


def _policy_records(policies, before, after, attr):
    """One value record per change of a cpufreq attribute, naming the policies it was made on:
    ``policy0-3/scaling_governor`` from ``powersave`` to ``performance`` (cpufreq/policyN/ATTR).
    ``policies`` come in number order, so the records do too."""
    groups = {}
    for policy in policies:
        old, new = before.get(policy.name), after.get(policy.name)
        if old != new:
            groups.setdefault((old, new), []).append(policy.name)
    return [records.value(AREA, "policy%s/%s" % (_number_list(names, "policy"), attr), old, new)
            for (old, new), names in groups.items()]


def run(params, check_mode=False, paths=None, tools=None):
    """Plan and apply; return the module result dict or raise ModuleFailure.

    ``tools`` (the command runner every engine takes) is not used: sysfs needs no binary.
    """
    paths = paths or Paths()
    settings = validate(params)
    root = paths.cpu_root
    container = container_mod.detect(proc_root=paths.proc, root=paths.root)
    # Reading is always allowed; writing inside a container only with allow_in_container.
    guarded = container_mod.guarded(container, settings["allow_in_container"])
    try:
        online = cpu_sysfs.online_cpus(root)
        offline = sorted(set(cpu_sysfs.cpu_dirs(root)) - set(online))
    except cpu_sysfs.CpuSysfsError as exc:
        raise ModuleFailure("cannot tell which CPUs are online, nothing was changed: %s" % exc,
                            {"container": container})
    skipped = {}
    idle = _read_idle(settings, root, online)
    freq = _read_freq(settings, root, skipped)

    reasons = {"idle_states": idle["reason"], "governor": freq["governor_reason"],
               "energy_performance_preference": freq["epp_reason"]}
    applicable = [part for part in PARTS if reasons[part] is None]
    requested = {"idle_states": settings["max_idle_latency_us"] is not None,
                 "governor": settings["governor"] is not None,
                 "energy_performance_preference": settings["energy_performance_preference"] is not None}
    for part in PARTS:
        if requested[part] and reasons[part] is not None:
            skipped[part] = reasons[part]
    if "idle_states" in applicable and idle["without_states"]:
        skipped["idle states of CPUs %s" % _cpus(idle["without_states"])] = "these online CPUs show no cpuidle states"
    if offline and any(requested.values()):
        skipped["offline CPUs %s" % _cpus(offline)] = (
            "left alone (their files may be absent); the boot unit covers them when they are "
            "online at boot, or run %s after bringing them online" % paths.script_path)
    if idle["went_offline"]:
        skipped["CPUs %s" % _cpus(idle["went_offline"])] = (
            "went offline while their idle states were read; left alone")

    present = settings["persist"] and bool(applicable)
    wanted = cpu_power_boot.wanted(
        present,
        (settings["max_idle_latency_us"], settings["enable_within_bound"], settings["governor"],
         settings["energy_performance_preference"]),
        systemd_dir=paths.systemd_dir, script_path=paths.script_path)
    file_problem = None
    try:
        file_changes = managed_files.plan(wanted)
    except (OSError, IOError) as exc:
        if not guarded:
            raise ModuleFailure("cannot plan the boot unit files, nothing was changed: %s" % fileops.describe(exc),
                                {"container": container})
        file_changes, file_problem = [], fileops.describe(exc)
    boot_unit_left_alone = guarded and bool(file_changes or file_problem)
    if boot_unit_left_alone:
        skipped[BOOT_UNIT_KEY] = _boot_unit_skip_reason(container, file_changes, file_problem)
        file_changes = []

    policies = freq["policies"]
    gov_before = dict((p.name, p.governor) for p in policies)
    epp_before = dict((p.name, p.epp) for p in policies)
    gov_after = dict(gov_before)
    epp_after = dict(epp_before)
    after_disable = {}
    for state, want in idle["writes"]:
        after_disable[(state.cpu, state.index)] = want
    for policy in freq["governor_writes"]:
        gov_after[policy.name] = settings["governor"]
    for policy in freq["epp_writes"]:
        epp_after[policy.name] = settings["energy_performance_preference"]

    runtime_writes = bool(idle["writes"] or freq["governor_writes"] or freq["epp_writes"])

    result = {
        "changed": False,
        "container": container,
        "online_cpus": _cpus(online),
        "offline_cpus": _cpus(offline),
        "idle_driver": idle["driver"],
        "idle_governor": idle["governor"],
        "max_idle_latency_us": settings["max_idle_latency_us"],
        "skipped_keys": skipped,
        "not_applicable": dict((part, reasons[part]) for part in PARTS if reasons[part] is not None),
        "unit_path": os.path.join(paths.systemd_dir, cpu_power_boot.UNIT_NAME),
        "script_path": paths.script_path,
        "reboot_required": False,
    }

    if guarded and runtime_writes:
        rows, _before, _after = _idle_summary(idle, settings, {})
        partial = dict(result, states=rows)
        raise ModuleFailure(container_mod.refusal(_refused_writes(idle["writes"], freq, settings), container,
                                                  "CPU idle states and cpufreq"), partial)

    if not check_mode and (runtime_writes or file_changes):
        _check_writable([s.disable_path for s, _w in idle["writes"]]
                        + [p.attr_path("scaling_governor") for p in freq["governor_writes"]]
                        + [p.attr_path("energy_performance_preference") for p in freq["epp_writes"]])
        tx = Transaction()
        try:
            for state, want in idle["writes"]:
                tx.record("%s/%s disable" % ("cpu%d" % state.cpu, state.state), _state_undo(state, state.disable))
                _write_checked(state.disable_path, want)
            touched = []
            for policy in policies:
                wants_gov = policy in freq["governor_writes"]
                if not wants_gov and policy not in freq["epp_writes"]:
                    continue
                tx.record("cpufreq %s" % policy.name, _policy_undo(policy))
                touched.append(policy)
                if wants_gov:
                    _write_checked(policy.attr_path("scaling_governor"), settings["governor"])
                if policy in freq["epp_writes"]:
                    # a governor change may already have moved EPP (intel_pstate pins it)
                    if cpu_sysfs.read_attr(policy.attr_path("energy_performance_preference")) != \
                            settings["energy_performance_preference"]:
                        _write_checked(policy.attr_path("energy_performance_preference"),
                                       settings["energy_performance_preference"])
            managed_files.apply(file_changes, tx)
        except (ModuleFailure, cpu_sysfs.CpuSysfsError, OSError, IOError) as exc:
            text = exc.message if isinstance(exc, ModuleFailure) else (
                fileops.describe(exc) if isinstance(exc, (OSError, IOError)) else str(exc))
            err = tx.abort(text)
            raise ModuleFailure(err.full_message(), result)
        # what the kernel shows now: a governor switch can move EPP on its own
        for policy in policies:
            if policy.active and policy.epp is not None:
                epp_after[policy.name] = cpu_sysfs.read_attr(policy.attr_path("energy_performance_preference"))

    rows, idle_before, idle_after = _idle_summary(idle, settings, after_disable)
    diff = []
    if "idle_states" in applicable:
        diff.append(diffs.values_diff(idle_before, idle_after, "CPU idle states"))
    active = [p for p in policies if p.active]
    if "governor" in applicable:
        diff.append(diffs.values_diff(*(_value_groups(active, gov_before, gov_after, "scaling_governor")
                                        + ("cpufreq governor",))))
    if "energy_performance_preference" in applicable or epp_after != epp_before:
        diff.append(diffs.values_diff(*(_value_groups(active, epp_before, epp_after,
                                                      "energy_performance_preference")
                                        + ("cpufreq energy_performance_preference",))))
    diff.extend(managed_files.diff_entries(file_changes))

    result.update({
        "changed": runtime_writes or bool(file_changes),
        "states": rows,
        "policies": [{
            "policy": p.name,
            "active": p.active,
            "cpus": _cpus(p.cpus if p.active else p.related),
            "driver": p.driver,
            "governor_before": gov_before[p.name],
            "governor_after": gov_after[p.name],
            "available_governors": p.available_governors,
            "epp_before": epp_before[p.name],
            "epp_after": epp_after[p.name],
            "available_epp": p.available_epp,
        } for p in policies],
        "governor_before": _by_value(active, gov_before),
        "governor_after": _by_value(active, gov_after),
        "epp_before": _by_value(active, epp_before),
        "epp_after": _by_value(active, epp_after),
        # installed as wanted after this run; a boot unit left alone in a container is
        # installed only if it was to be removed (and so is still there)
        "persisted": (not present) if boot_unit_left_alone else present,
        "diff": diff,
        "changes": (_idle_records(idle["writes"])
                    + _policy_records(active, gov_before, gov_after, "scaling_governor")
                    + _policy_records(active, epp_before, epp_after, "energy_performance_preference")
                    + records.from_managed(AREA, file_changes)),
    })
    if not applicable and not result["changed"]:
        result["skipped"] = True
        result["msg"] = "nothing to do on this machine: " + "; ".join(
            "%s: %s" % (part, reasons[part]) for part in PARTS)
    return result
