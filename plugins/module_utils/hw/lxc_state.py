# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is an LXC container running, and what is its init process? Read from the host's kernel.

Why not ``pct status`` or ``lxc-info`` first: they are slow (Perl, or a socket to the monitor),
absent on hosts without those packages, and a config edit only needs a yes/no plus the init
PID. The kernel already says it: every process of a running container sits in the container's
cgroup, named ``lxc.payload.<name>`` by LXC 4+ and ``lxc/<vmid>`` by Proxmox (``lxc/<name>`` by
older LXC), which shows up in ``/proc/<pid>/cgroup`` (one line per hierarchy, v1 or v2) and as
a directory under ``/sys/fs/cgroup``. The init is the one member whose parent is outside the
container (the LXC monitor). Reading its ``/proc/<pid>/limits`` tells what the running
container actually got, which a changed config only reaches at the next start.

The tools are asked only when the kernel shows nothing (a custom ``lxc.cgroup.dir`` layout),
and only when present.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import proc_cgroups

_STATE_WORD = re.compile(r"^\s*(?:State|status):\s*(\S+)", re.IGNORECASE | re.MULTILINE)
_PID_LINE = re.compile(r"^\s*PID:\s*([0-9]+)", re.MULTILINE)


def container_of_cgroup_path(path):
    """Name of the outermost LXC container a cgroup path belongs to, or None.

    ``/lxc.payload.web/...`` -> ``web``; ``/lxc/101/ns/init.scope`` -> ``101``. Only the first
    LXC component counts, so a container nested inside another is not taken for a host one.
    Monitor cgroups (``lxc.monitor.<name>``, ``lxc.monitor/<vmid>``) are not payloads.
    """
    parts = [p for p in path.strip().split("/") if p]
    for index, part in enumerate(parts):
        if part.startswith("lxc.payload.") and len(part) > len("lxc.payload."):
            return part[len("lxc.payload."):]
        if part == "lxc" and index + 1 < len(parts):
            return parts[index + 1]
    return None


def payload_processes(name, proc_root="/proc"):
    """``{pid: parent pid}`` of every process in container ``name``'s payload cgroup."""
    return proc_cgroups.members(lambda path: container_of_cgroup_path(path) == name, proc_root)


def payloads(proc_root="/proc"):
    """``{container name: {pid: parent pid}}`` of every running container, from one pass over /proc.

    The same membership as payload_processes(name) for each name, for a caller that asks about
    every container of a host: payload_processes reads every /proc/<pid>/cgroup once per
    container, this reads them once in all.
    """
    found = {}
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        names = set(container_of_cgroup_path(path) for path in proc_cgroups.cgroup_paths(entry, proc_root))
        names.discard(None)
        if not names:
            continue
        parent = proc_cgroups.parent_pid(entry, proc_root)
        for name in names:
            found.setdefault(name, {})[int(entry)] = parent
    return found


def init_pid(members):
    """The container's init: the member whose parent (the LXC monitor) is not a member."""
    return proc_cgroups.top(members)


def cgroup_dirs(name, cgroup_root="/sys/fs/cgroup"):
    """Existing payload cgroup directories of ``name`` (v2 root, and each v1 hierarchy)."""
    bases = [cgroup_root]
    try:
        bases.extend(os.path.join(cgroup_root, d) for d in sorted(os.listdir(cgroup_root))
                     if os.path.isdir(os.path.join(cgroup_root, d)) and not d.startswith("lxc"))
    except OSError:
        pass
    found = []
    for base in bases:
        for candidate in (os.path.join(base, "lxc.payload." + name), os.path.join(base, "lxc", name)):
            if os.path.isdir(candidate):
                found.append(candidate)
    return found


def cgroup_has_processes(directory, max_dirs=4096):
    """True when ``cgroup.procs`` of ``directory`` or of a cgroup below it lists a process."""
    seen = 0
    for dirpath, _dirs, files in os.walk(directory):
        seen += 1
        if "cgroup.procs" in files and (fileops.read_quiet(os.path.join(dirpath, "cgroup.procs")) or "").strip():
            return True
        if seen >= max_dirs:
            break
    return False


def ask_tools(name, tools, proxmox, lxcpath=None):
    """``(running, init pid, evidence)`` from ``pct status`` or ``lxc-info``; None when neither exists."""
    if tools is None:
        return None
    if proxmox and tools.which("pct"):
        argv = [tools.which("pct"), "status", name]
    elif tools.which("lxc-info"):
        argv = [tools.which("lxc-info"), "-n", name]
        if lxcpath:
            argv[1:1] = ["-P", lxcpath]
    else:
        return None
    ran = tools.run(argv)
    out = ran.stdout
    match = _STATE_WORD.search(out)
    if not ran.ok or not match:
        return None, None, "%s gave no state (exit status %s): %s" % (ran.command, ran.rc, ran.output)
    state = match.group(1).lower()
    pid_match = _PID_LINE.search(out)
    pid = int(pid_match.group(1)) if pid_match else None
    return state == "running", pid, "%s says %s" % (ran.command, match.group(1))


def container_state(name, proc_root="/proc", cgroup_root="/sys/fs/cgroup", tools=None,
                    proxmox=False, lxcpath=None, known_payloads=None):
    """``{"running": bool or None, "init_pid": int or None, "evidence": str}``.

    ``running`` is None only when nothing can tell (no name for the container and no tool).
    ``known_payloads`` is what payloads() returned, for a caller that asks about many
    containers; without it /proc is read for this container alone.
    """
    if not name:
        return {"running": None, "init_pid": None,
                "evidence": "the container's name cannot be told from the config path"}
    if known_payloads is not None:
        members = known_payloads.get(name, {})
    else:
        members = payload_processes(name, proc_root)
    if members:
        pid = init_pid(members)
        return {"running": True, "init_pid": pid,
                "evidence": "%d process(es) in the payload cgroup of %s (init PID %s)" % (len(members), name, pid)}
    busy = [d for d in cgroup_dirs(name, cgroup_root) if cgroup_has_processes(d)]
    if busy:
        return {"running": True, "init_pid": None, "evidence": "cgroup %s has processes" % busy[0]}
    answer = ask_tools(name, tools, proxmox, lxcpath)
    if answer is not None and answer[0] is not None:
        return {"running": answer[0], "init_pid": answer[1], "evidence": answer[2]}
    evidence = "no process in a cgroup named lxc.payload.%s or lxc/%s" % (name, name)
    if answer is not None:
        evidence += "; " + answer[2]
    return {"running": False, "init_pid": None, "evidence": evidence}
