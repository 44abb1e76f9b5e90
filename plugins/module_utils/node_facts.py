# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node facts the audit's rules read: one gather of the host, its CPUs, memory, GPUs,
containers and tuners, in the shape docs/facts.md fixes.

The module gpufleet.tuning.node_facts is a thin shell over ``run()``. Engine contract:
``run(params, check_mode=False, paths=None, tools=None)`` returns the result or raises
ModuleFailure (only for bad options); ``paths`` is a Paths(root); ``tools`` is unused: nothing
is run, every fact is read from procfs, sysfs, /etc and NVML. It only reads, so ``changes`` is
always empty and check mode is the same run.

hw/system_facts reads host, kernel, cpu, memory, containers and tuners, one section at a
time; hw/gpu_facts reads gpus, topology, driver and health in one pass (the NVML session is shared),
so its time is reported once, under ``gpu_facts`` in ``timings_ms``. A fact that cannot be
read is an envelope with ``unknown`` and the reason, never a failure.
"""

from __future__ import annotations

import time

from ansible_collections.gpufleet.tuning.plugins.module_utils import memlock_info
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import system_facts

# Every section, in the order of docs/facts.md (and of the facts returned).
SECTIONS = ("host", "kernel", "cpu", "memory", "gpus", "topology", "driver", "health", "containers", "tuners")
GPU_SECTIONS = ("gpus", "topology", "driver", "health")

# The sysctls reported under memory.sysctls by default: the keys of the host role's sysctl
# profile (roles/host/defaults/main/sysctl_profile.yml), and those tuned's HPC and latency
# profiles set which bear on a GPU server (NUMA reclaim, timer migration, map count, listen
# backlog). Nothing is read at run time to find them; the audit role passes its profile's keys.
DEFAULT_SYSCTL_KEYS = (
    "kernel.numa_balancing",
    "kernel.nmi_watchdog",
    "kernel.sched_autogroup_enabled",
    "vm.swappiness",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "vm.zone_reclaim_mode",
    "kernel.timer_migration",
    "vm.max_map_count",
    "net.core.somaxconn",
)

# The module's argument spec, read by the module, by validate() and by the tests.
ARGUMENT_SPEC = dict(
    sections=dict(type="list", elements="str", default=list(SECTIONS), choices=list(SECTIONS)),
    # sysctl names, not secrets (validate-modules guesses from "keys" in the name)
    sysctl_keys=dict(type="list", elements="str", default=list(DEFAULT_SYSCTL_KEYS), no_log=False),
    serving_unit=dict(type="str", default=None),
)


class Paths:
    """Where to read, under ``root`` (``/`` on a host, a temp dir in tests). ``nvml`` is handed
    to hw/gpu_facts (None: it loads the library itself)."""

    def __init__(self, root="/", nvml=None):
        self.root = root
        self.system = system_facts.Paths(root)
        self.nvml = nvml


def validate(params):
    """Check every option before anything is read; return (sections, sysctl keys, serving unit)."""
    sections = params.get("sections")
    if not isinstance(sections, (list, tuple)):
        raise ModuleFailure("sections must be a list of section names (%s), got %r" % (", ".join(SECTIONS), sections))
    for name in sections:
        if name not in SECTIONS:
            raise ModuleFailure("sections: %r is not a section; use %s" % (name, ", ".join(SECTIONS)))
    keys = params.get("sysctl_keys")
    if not isinstance(keys, (list, tuple)):
        raise ModuleFailure("sysctl_keys must be a list of dotted sysctl names such as vm.swappiness, got %r"
                            % (keys,))
    for key in keys:
        reason = sysctl.validate_key(key)
        if reason:
            raise ModuleFailure("sysctl_keys: %r %s" % (key, reason))
    unit = params.get("serving_unit")
    if unit:
        try:
            unit = memlock_info.unit_name(unit)
        except ModuleFailure as exc:
            raise ModuleFailure("serving_unit: %s" % exc.message)
    return [name for name in SECTIONS if name in sections], list(dict.fromkeys(keys)), unit or None


def _gather_gpus(paths, wanted):
    """``({section: facts}, warnings)`` for the GPU sections in ``wanted``, from one pass of
    hw/gpu_facts (which promises not to raise; an error it did not expect still leaves the
    other sections standing)."""
    try:
        found = gpu_facts.gather(gpu_facts.Paths(paths.root), nvml=paths.nvml)
    except Exception as exc:  # pylint: disable=broad-except  # a fact never fails the module
        detail = "reading the GPU facts failed: %s: %s" % (type(exc).__name__, exc)
        return dict((name, facts.unknown("derived", detail)) for name in wanted), [detail]
    return dict((name, found.get(name, facts.unknown("derived", "hw/gpu_facts returned no %s" % name)))
                for name in wanted), []


def count_unknown(item):
    """How many envelopes under ``item`` are unknown."""
    if facts.is_fact(item):
        return 1 if "unknown" in item else 0
    if isinstance(item, dict):
        return sum(count_unknown(value) for value in item.values())
    if isinstance(item, list):
        return sum(count_unknown(value) for value in item)
    return 0


def _ms(start):
    return round((time.monotonic() - start) * 1000.0, 1)


def run(params, check_mode=False, paths=None, tools=None):
    """Gather the facts; return the module result. Raises ModuleFailure only for bad options,
    before anything is read. Never changes anything, so check mode is the same run."""
    sections, sysctl_keys, serving_unit = validate(spec.with_defaults(ARGUMENT_SPEC, params))
    paths = paths or Paths()
    began = time.monotonic()
    found = {}
    timings = {}
    warnings = []
    for name in sections:
        if name in GPU_SECTIONS:
            if name in found:
                continue
            start = time.monotonic()
            gpu, gpu_warnings = _gather_gpus(paths, [n for n in GPU_SECTIONS if n in sections])
            timings["gpu_facts"] = _ms(start)
            found.update(gpu)
            warnings.extend(gpu_warnings)
            continue
        start = time.monotonic()
        found[name], section_warnings = system_facts.section(name, paths.system, sysctl_keys, serving_unit)
        timings[name] = _ms(start)
        warnings.extend(section_warnings)
    timings["total"] = _ms(began)
    ordered = dict((name, found[name]) for name in sections)
    unknown = count_unknown(ordered)
    return {
        "changed": False,
        "changes": [],
        "facts": ordered,
        "timings_ms": timings,
        "msg": "gathered %s in %s ms; %d fact(s) unknown" % (", ".join(sections) or "nothing", timings["total"],
                                                             unknown),
        "warnings": warnings,
    }
