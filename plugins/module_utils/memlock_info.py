# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The locked-memory limits processes actually run with, and whose job a shortfall is.

The module gpufleet.tuning.memlock_info is a thin shell over ``run()``. Why read the running
processes rather than the config: inside a container three layers decide the limit, and only
the kernel knows the result. The host gives the container's init (PID 1 here) a hard limit that
nothing inside can raise; systemd then gives each service its LimitMEMLOCK, clamped to that
ceiling without an error; and a service keeps the limit it was started with until restarted.
So PID 1's hard limit tells whether the host did its part, and the serving unit's main process
tells whether the container did its own.

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)`` returns the result or
raises ModuleFailure; ``paths`` is a Paths(root), ``tools`` is unused (nothing is run). It only
reads, so ``changes`` is always empty and check mode is the same run.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import proc_cgroups
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit

UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@-]{1,255}\Z")
UNIT_TYPES = (".service", ".scope", ".slice", ".socket", ".mount", ".swap", ".timer")

# The module's argument spec, read by the module, by validate() and by the tests.
ARGUMENT_SPEC = dict(
    want=dict(type="raw", default="unlimited"),
    pids=dict(type="list", elements="int", default=[1]),
    units=dict(type="list", elements="str", default=[]),
)


class Paths:
    """Where procfs and /run are, under ``root`` (``/`` on a host, a temp dir in tests)."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = self.under("/proc")
        self.run = self.under("/run")

    def under(self, path):
        if self.root in ("/", ""):
            return path
        return os.path.join(self.root, path.lstrip("/"))


def unit_name(text):
    """``vllm`` -> ``vllm.service``, as systemctl reads a bare name; invalid names refused."""
    if not isinstance(text, str) or not UNIT_RE.match(text) or "/" in text:
        raise ModuleFailure("unit %r is not a systemd unit name (letters, digits and : _ . \\ @ -)" % (text,))
    return text if text.endswith(UNIT_TYPES) else text + ".service"


def unit_processes(unit, proc_root="/proc"):
    """``{pid: parent}`` of the processes whose cgroup path has a component named ``unit``."""
    return proc_cgroups.members(lambda path: unit in path.strip("/").split("/"), proc_root)


def _entry(pid, source, want, proc_root):
    pair = rlimit.read_process_limit(pid, proc_root)
    if pair is None:
        return {"pid": pid, "source": source, "found": False, "comm": None, "soft": None, "hard": None,
                "covers_want": None}
    return {
        "pid": pid,
        "source": source,
        "found": True,
        "comm": rlimit.process_name(pid, proc_root),
        "soft": rlimit.format_value(pair[0]),
        "hard": rlimit.format_value(pair[1]),
        "covers_want": rlimit.covers(pair[0], want),
        "hard_covers_want": rlimit.covers(pair[1], want),
    }


def _who(entry):
    return "%s (PID %s%s)" % (entry["source"], entry["pid"], ", %s" % entry["comm"] if entry.get("comm") else "")


def validate(params):
    """Check every input before anything is read; return (want, pids, units)."""
    try:
        want = rlimit.parse_value(params.get("want", ARGUMENT_SPEC["want"]["default"]))
    except rlimit.LimitError as exc:
        raise ModuleFailure("want: %s" % exc)
    pids = params.get("pids")
    pids = list(ARGUMENT_SPEC["pids"]["default"]) if pids is None else pids
    for pid in pids:
        if isinstance(pid, bool) or not isinstance(pid, int) or pid < 1:
            raise ModuleFailure("pids: %r is not a process ID (a positive integer)" % (pid,))
    units = [unit_name(u) for u in (params.get("units") or [])]
    return want, list(pids), units


def run(params, check_mode=False, paths=None, tools=None):
    """Read the limits; return the module result or raise ModuleFailure. Never changes anything,
    so check mode is the same run and ``tools`` is unused."""
    paths = paths or Paths()
    want, pids, units = validate(params)
    try:
        return _report(want, pids, units, paths)
    except (OSError, IOError, rlimit.LimitError) as exc:
        detail = fileops.describe(exc) if isinstance(exc, (OSError, IOError)) else str(exc)
        raise ModuleFailure("cannot read the limits: %s" % detail)


def _report(want, pids, units, paths):
    want_text = rlimit.format_value(want)
    processes = [_entry(pid, "PID %d" % pid, want, paths.proc) for pid in pids]
    unit_results = {}
    for unit in units:
        main = proc_cgroups.top(unit_processes(unit, paths.proc))
        if main is None:
            unit_results[unit] = {"pid": None, "source": unit, "found": False, "comm": None, "soft": None,
                                  "hard": None, "covers_want": None}
            continue
        entry = _entry(main, unit, want, paths.proc)
        unit_results[unit] = entry
        processes.append(entry)

    pid1 = next((p for p in processes if p["pid"] == 1 and p["found"] and p["source"] == "PID 1"), None)
    host_limit_ok = pid1["hard_covers_want"] if pid1 else None
    # What a process here can get at most: the wanted limit, capped by the container's ceiling.
    attainable = min(want, rlimit.parse_value(pid1["hard"])) if pid1 else want
    for entry in unit_results.values():
        if entry["found"]:
            entry["restart_would_raise"] = rlimit.parse_value(entry["soft"]) < attainable
    findings = []
    if host_limit_ok is False:
        findings.append(
            "the host did not raise this container's memlock limit: PID 1 (%s) has a hard limit of %s, below "
            "the wanted %s, and nothing inside a container can raise it. On the host, set the container's "
            "lxc.prlimit.memlock (gpufleet.tuning.lxc_memlock, run by the gpufleet.tuning.host role) or start "
            "it with --ulimit memlock=-1:-1 (podman/docker), then restart the container"
            % (pid1["comm"] or "init", pid1["hard"], want_text))
    for unit in units:
        entry = unit_results[unit]
        if not entry["found"]:
            findings.append("%s has no running process to check (is it started?)" % unit)
        elif entry["restart_would_raise"]:
            findings.append("%s runs with a memlock limit of %s (soft) / %s (hard), below the %s it can have: "
                            "restart it so it starts with its LimitMEMLOCK"
                            % (_who(entry), entry["soft"], entry["hard"], rlimit.format_value(attainable)))
        elif not entry["covers_want"]:
            findings.append("%s runs with a memlock limit of %s (soft) / %s (hard), capped by the host's "
                            "limit" % (_who(entry), entry["soft"], entry["hard"]))
    for entry in processes[:len(pids)]:
        if entry["pid"] == 1:
            continue  # PID 1 speaks for the host above
        if not entry["found"]:
            findings.append("PID %s does not exist" % entry["pid"])
        elif not entry["covers_want"]:
            findings.append("%s has a memlock limit of %s (soft) / %s (hard), below the wanted %s"
                            % (_who(entry), entry["soft"], entry["hard"], want_text))
    ok = not findings
    if ok:
        msg = "memlock limits cover the wanted %s: %s" % (want_text, "; ".join(
            "%s soft %s, hard %s" % (_who(p), p["soft"], p["hard"]) for p in processes if p["found"]))
    else:
        msg = "; ".join(findings)
    return {
        "changed": False,
        "changes": [],
        "want": want_text,
        "processes": processes,
        "pid1": pid1,
        "units": unit_results,
        "host_limit_ok": host_limit_ok,
        "restart_required": any(e.get("restart_would_raise") for e in unit_results.values()),
        "ok": ok,
        "findings": findings,
        "systemd": os.path.isdir(os.path.join(paths.run, "systemd", "system")),
        "msg": msg,
    }
