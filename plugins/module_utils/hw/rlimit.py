# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Resource limits (rlimits) as numbers, and where a running process's limits are read.

Why a file of its own: the host side (an LXC container's ``lxc.prlimit.*``) and the container
side (what PID 1 and the model server actually run with) speak about the same values in
different spellings (``unlimited``, ``infinity``, ``-1``, bytes, KiB for ``ulimit -l``). Here a
limit is always a pair of integers ``(soft, hard)`` with ``INFINITY`` (the kernel's
RLIM_INFINITY, 2**64-1) for unlimited, so both sides compare numbers, never spellings.

``/proc/<pid>/limits`` is the one place the kernel shows another process's limits without
ptrace or prlimit(2) rights beyond reading procfs; its rows are fixed-width text.
"""

from __future__ import annotations

import errno
import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

# RLIM_INFINITY on Linux: all 64 bits set (also what LXC's strtoull makes of "-1").
INFINITY = (1 << 64) - 1

# Row titles in /proc/<pid>/limits (fs/proc/base.c lnames[]).
MEMLOCK_ROW = "Max locked memory"


class LimitError(Exception):
    """A limit value or a limits file that cannot be understood."""


def format_value(value):
    """``unlimited`` for INFINITY, else the decimal number."""
    return "unlimited" if value == INFINITY else str(value)


def format_pair(pair):
    """Canonical text of ``(soft, hard)``: one value when both halves match, else ``soft:hard``.

    This is also the spelling LXC reads (a single value sets both halves), so the canonical
    text can be written into a container config as is.
    """
    soft, hard = pair
    if soft == hard:
        return format_value(soft)
    return "%s:%s" % (format_value(soft), format_value(hard))


def parse_value(value):
    """One limit value as a number: ``unlimited``/``infinity`` (any case) or bytes.

    The spellings of both sides are accepted here because this reads what an operator wants,
    whether they think in LXC (``unlimited``) or systemd (``infinity``) terms.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise LimitError("%r is not a limit: use 'unlimited' or a number of bytes" % (value,))
    text = str(value).strip().lower()
    if text in ("unlimited", "infinity"):
        return INFINITY
    if text.isdigit() and text.isascii() and int(text) <= INFINITY:
        return int(text)
    raise LimitError("%r is not a limit: use 'unlimited' or a number of bytes" % (value,))


def covers(have, want):
    """True when the limit ``have`` allows at least ``want`` (INFINITY is the largest value)."""
    return have >= want


def parse_proc_limits(text, row=MEMLOCK_ROW):
    """Return ``(soft, hard)`` of ``row`` from the text of a /proc/<pid>/limits file.

    The kernel pads the title to 26 columns and prints ``unlimited`` for RLIM_INFINITY.
    """
    for line in text.splitlines():
        if not line.startswith(row):
            continue
        fields = line[len(row):].split()
        if len(fields) < 2:
            break
        try:
            return tuple(INFINITY if f == "unlimited" else int(f) for f in fields[:2])
        except ValueError:
            break
    raise LimitError("no readable %r row in the limits text" % row)


def read_process_limit(pid, proc_root="/proc", row=MEMLOCK_ROW):
    """``(soft, hard)`` of ``row`` for process ``pid``, or None when the process is gone."""
    path = os.path.join(proc_root, str(pid), "limits")
    try:
        data = fileops.read_bytes(path)  # never blocks, whatever sits at the path
    except (OSError, IOError) as exc:
        if exc.errno == errno.ESRCH:  # the process exited while it was being read
            return None
        raise
    if data is None:
        return None
    text = data.decode("ascii", "replace")
    try:
        return parse_proc_limits(text, row)
    except LimitError as exc:
        raise LimitError("%s: %s" % (path, exc))


def process_name(pid, proc_root="/proc"):
    """The ``comm`` of a process (what ps shows), or None when it cannot be read."""
    return (fileops.read_quiet(os.path.join(proc_root, str(pid), "comm")) or "").strip() or None
