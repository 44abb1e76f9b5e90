# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel sysctls through /proc/sys, without the sysctl binary.

Why not `sysctl -w`: procps 4.0.2 can exit 0 when the write failed, and its output needs
parsing. Writing the /proc/sys file and reading it back gives the errno and the value the
kernel actually kept. Keys are the dotted names operators write (`vm.swappiness`); values are
compared after folding whitespace, since the kernel prints multi-value keys with tabs.
"""

from __future__ import annotations

import errno
import os
import re

PROC_SYS = "/proc/sys"

# One dotted component: what kernel sysctl names use (interface names included). No '/',
# no empty component (so no '..'), no whitespace.
_COMPONENT = r"[A-Za-z0-9_][A-Za-z0-9_\-:+@]*"
_KEY_RE = re.compile(r"^%s(\.%s)+\Z" % (_COMPONENT, _COMPONENT))

# errno 524 is the kernel-internal ENOTSUPP, which leaks to userspace from some handlers
# (kernel.nmi_watchdog without a PMU, for one); Python's errno module does not name it.
ENOTSUPP = 524
_ERRNO_NAMES = {ENOTSUPP: "ENOTSUPP"}

# A write failing with one of these means "this host (or namespace) cannot set the key",
# as opposed to "the value is wrong" (EINVAL, ERANGE), which is always the caller's error.
UNWRITABLE_ERRNOS = frozenset([errno.EACCES, errno.EPERM, errno.EROFS, errno.EOPNOTSUPP, ENOTSUPP])

# Keys that live in a per-container namespace (network, IPC, UTS, user). Everything else
# (kernel.*, vm.*, fs.*, dev.*, ...) is host-wide: read-only inside a container, and a write
# from a privileged container lands on the host.
_NAMESPACED_PREFIXES = (
    "net.",
    "fs.mqueue.",
    "user.",
)
_NAMESPACED_KEYS = frozenset([
    "kernel.hostname",
    "kernel.domainname",
    "kernel.shmmax",
    "kernel.shmall",
    "kernel.shmmni",
    "kernel.shm_rmid_forced",
    "kernel.msgmax",
    "kernel.msgmnb",
    "kernel.msgmni",
    "kernel.sem",
    "kernel.auto_msgmni",
])
# net.* keys that exist only in the initial network namespace (net/core/sysctl_net_core.c's
# global table, and a few ipv4 memory-pressure keys): host-wide despite the prefix.
_NET_INIT_ONLY = frozenset([
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.dev_weight",
    "net.core.dev_weight_rx_bias",
    "net.core.dev_weight_tx_bias",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.core.default_qdisc",
    "net.core.message_burst",
    "net.core.message_cost",
    "net.core.netdev_tstamp_prequeue",
    "net.core.rps_sock_flow_entries",
    "net.core.flow_limit_cpu_bitmap",
    "net.core.flow_limit_table_len",
    "net.core.bpf_jit_enable",
    "net.core.bpf_jit_harden",
    "net.core.bpf_jit_kallsyms",
    "net.core.bpf_jit_limit",
    "net.core.warnings",
    "net.core.high_order_alloc_disable",
    "net.ipv4.tcp_mem",
    "net.ipv4.udp_mem",
])


class SysctlError(Exception):
    """A bad key or value, or a failed read/write; the message names the key and value."""


def validate_key(key):
    """Return None when ``key`` is a well-formed dotted sysctl name, else the reason."""
    if not isinstance(key, str) or key == "":
        return "empty key"
    if "/" in key:
        return "contains '/' (write keys dotted, e.g. vm.swappiness)"
    if ".." in key or key.startswith(".") or key.endswith("."):
        return "has an empty component ('..' or a leading/trailing dot)"
    if not _KEY_RE.fullmatch(key):
        return "is not a dotted sysctl name (letters, digits, '_', '-', ':', '+', '@' between dots)"
    return None


def normalize_value(value):
    """The canonical text of a desired value: whitespace folded to single spaces.

    Accepts int, bool (1/0), str, and lists for multi-value keys (`[4096, 87380, 134217728]`).
    Raises SysctlError for anything that cannot be written to a /proc/sys file as one line.
    """
    if value is None:
        raise SysctlError("no value given")
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        raise SysctlError("%r is a float; sysctls take integers or strings" % (value,))
    if isinstance(value, (list, tuple)):
        if not value:
            raise SysctlError("empty list")
        return " ".join(normalize_value(item) for item in value)
    if isinstance(value, str):
        if "\n" in value or "\r" in value or "\0" in value:
            raise SysctlError("%r contains a newline or NUL; a sysctl value is one line" % (value,))
        return " ".join(value.split())
    raise SysctlError("%r has unsupported type %s" % (value, type(value).__name__))


def normalize_read(text):
    """Fold what the kernel printed (tabs, trailing newline) the same way as desired values."""
    return " ".join(text.split())


def key_path(key, root=PROC_SYS):
    """/proc/sys path of a dotted key (call validate_key first)."""
    return os.path.join(root, *key.split("."))


def is_namespaced(key):
    """True for keys a container has its own copy of (network, IPC, UTS, user namespaces)."""
    if key in _NET_INIT_ONLY:
        return False
    if key in _NAMESPACED_KEYS:
        return True
    return key.startswith(_NAMESPACED_PREFIXES)


def errno_name(number):
    if number in _ERRNO_NAMES:
        return _ERRNO_NAMES[number]
    return errno.errorcode.get(number, "errno %s" % number)


def describe_oserror(exc):
    """'EINVAL (Invalid argument)' style text for an OSError."""
    number = getattr(exc, "errno", None)
    if number is None:
        return str(exc)
    text = exc.strerror or os.strerror(number)
    if number == ENOTSUPP:
        text = "operation not supported by this kernel/hardware"
    return "%s %d (%s)" % (errno_name(number), number, text)


def read_value(key, root=PROC_SYS):
    """Current normalized value of ``key``; SysctlError when absent or unreadable."""
    path = key_path(key, root)
    try:
        with open(path, "r") as handle:
            return normalize_read(handle.read())
    except (OSError, IOError) as exc:
        if exc.errno == errno.ENOENT:
            raise SysctlError("unknown key %s: %s does not exist" % (key, path))
        raise SysctlError("cannot read %s (%s): %s" % (key, path, describe_oserror(exc)))


def exists(key, root=PROC_SYS):
    return os.path.isfile(key_path(key, root))


def writable(key, root=PROC_SYS):
    """Best guess, before writing, whether this process may write ``key``.

    Returns (bool, reason). A read-only /proc/sys mount (unprivileged containers) or a file
    without write permission is a clear no; the kernel can still refuse at write time.
    """
    path = key_path(key, root)
    try:
        st = os.statvfs(path)
        if st.f_flag & os.ST_RDONLY:
            return False, "%s is on a read-only mount (inside a container the host owns it)" % path
    except OSError:
        pass
    if not os.access(path, os.W_OK):
        return False, "%s is not writable by this user" % path
    return True, None


def write_value(key, value, root=PROC_SYS):
    """Write the normalized ``value``; OSError propagates so callers can classify its errno."""
    path = key_path(key, root)
    with open(path, "w") as handle:
        handle.write(value)
