# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find processes by the cgroup they live in, from /proc alone.

Why: "the processes of LXC container 101" (on a host) and "the main process of vllm.service"
(inside a container) are both a cgroup question, and /proc/<pid>/cgroup answers it on cgroup
v1, v2 and hybrid hosts alike, with no D-Bus, no systemctl and no lxc-info. Paths are as the
reader's cgroup namespace sees them, which is what callers want: a host sees ``/lxc/101/...``,
a container sees its own ``/system.slice/vllm.service``.

The "top" of such a set is the member whose parent is outside it: the container's init (its
parent is the LXC monitor) or a service's main process (its parent is PID 1).
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops


def cgroup_paths(pid, proc_root="/proc"):
    """The cgroup path of each hierarchy line of ``/proc/<pid>/cgroup`` (empty when gone)."""
    text = fileops.read_quiet(os.path.join(proc_root, str(pid), "cgroup")) or ""
    paths = []
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) == 3:
            paths.append(fields[2].strip())
    return paths


def parent_pid(pid, proc_root="/proc"):
    """PPid from ``/proc/<pid>/stat`` (the command name may hold spaces and parentheses)."""
    stat = fileops.read_quiet(os.path.join(proc_root, str(pid), "stat"))
    if not stat or ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def members(matches, proc_root="/proc"):
    """``{pid: parent pid}`` of every process with a cgroup path for which ``matches(path)``."""
    found = {}
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        if any(matches(path) for path in cgroup_paths(entry, proc_root)):
            found[int(entry)] = parent_pid(entry, proc_root)
    return found


def top(found):
    """The member whose parent is not a member (the lowest PID if several), or None."""
    tops = sorted(pid for pid, parent in found.items() if parent not in found)
    return tops[0] if tops else None
