# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel sysctls through /proc/sys, without the sysctl binary.

Why not `sysctl -w`: procps 4.0.2 can exit 0 when the write failed, and its output needs
parsing. Writing the /proc/sys file and reading it back gives the errno and the value the
kernel actually kept. Keys are the dotted names operators write (`vm.swappiness`); values are
compared after folding whitespace, since the kernel prints multi-value keys with tabs.

What the kernel's integer handlers really do with a write (kernel/sysctl.c,
``__do_proc_dointvec`` and ``__do_proc_doulongvec_minmax``; checked on 6.18 in a throwaway
network namespace): the fields are parsed and stored ONE BY ONE into the live variable, so

- a field the handler rejects (out of its min/max, not a number) ends the write with EINVAL
  while the fields before it are already live: ``4097 131073 0`` to net.ipv4.tcp_rmem fails
  and leaves ``4097 131073 <old max>``;
- fewer fields than the vector holds succeed and leave the rest unchanged;
- extra fields are ignored (a short write count, no error);
- each field is parsed with base 0: ``010`` is octal (8), ``0x1000`` is 4096.

So a failed write is not proof that nothing changed (read the key back), and a value is
checked against the shape of what the kernel holds before it is written (``value_shape_error``).
"""

from __future__ import annotations

import errno
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

PROC_SYS = "/proc/sys"

# One dotted component: what kernel sysctl names use (interface names included). No '/',
# no empty component (so no '..'), no whitespace.
_COMPONENT = r"[A-Za-z0-9_][A-Za-z0-9_\-:+@]*"
_KEY_RE = re.compile(r"^%s(\.%s)+\Z" % (_COMPONENT, _COMPONENT))

# A field as the kernel prints integers: decimal, no leading zero, no '+'.
_CANONICAL_INT_RE = re.compile(r"^-?(0|[1-9][0-9]*)\Z")
# A field the kernel's integer parser would take (sign, base-0 prefixes, leading zeros).
_NUMERIC_RE = re.compile(r"^[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)\Z")

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
# net.* keys that belong to the initial network namespace: absent from any other one, or (on
# newer kernels: rmem_max, wmem_max, rmem_default, wmem_default) visible there read-only with
# the host's value. Host-wide despite the prefix. Listed from net/core/sysctl_net_core.c's
# global table and from comparing /proc/sys/net of the initial and a new namespace on 6.18.
_NET_INIT_ONLY = frozenset([
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.netdev_rss_key",
    "net.core.netdev_unregister_timeout_secs",
    "net.core.dev_weight",
    "net.core.dev_weight_rx_bias",
    "net.core.dev_weight_tx_bias",
    "net.core.devconf_inherit_init_net",
    "net.core.fb_tunnels_only_for_init_net",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.core.default_qdisc",
    "net.core.gro_normal_batch",
    "net.core.max_skb_frags",
    "net.core.mem_pcpu_rsv",
    "net.core.message_burst",
    "net.core.message_cost",
    "net.core.netdev_tstamp_prequeue",
    "net.core.rps_sock_flow_entries",
    "net.core.skb_defer_max",
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
    "net.ipv4.tcp_max_orphans",
    "net.ipv4.tcp_low_latency",
    "net.ipv4.tcp_available_ulp",
    "net.ipv4.fib_sync_mem",
    "net.ipv4.inet_peer_threshold",
    "net.ipv4.inet_peer_minttl",
    "net.ipv4.inet_peer_maxttl",
    "net.ipv4.ipfrag_secret_interval",
    "net.ipv6.ip6frag_secret_interval",
    "net.ipv6.mld_max_msf",
    "net.ipv6.mld_qrv",
    "net.netfilter.nf_log_all_netns",
    "net.nf_conntrack_max",
])

# Buffer and limit keys whose fields are never lowered by default (see raise_fields and the
# module's raise_only option). For each one a larger value only allows more (bytes of socket
# buffer, queued packets, pending connections, pages, open files, mappings, IPC objects), and
# the kernel often sizes the default from RAM or raises it between releases (tcp_rmem's
# default went from 87380 to 131072 in 4.20, its max to 32 MiB on current kernels), so a
# fixed number in a profile written years ago would cut a current kernel's value. Sources:
# Documentation/networking/ip-sysctl.rst, Documentation/admin-guide/sysctl/{net,fs,vm,kernel}.rst.
RAISE_ONLY_DEFAULT = (
    "fs.aio-max-nr",                    # max concurrent async I/O requests
    "fs.file-max",                      # sized from RAM at boot; systemd may raise it to LONG_MAX
    "fs.inotify.max_user_instances",
    "fs.inotify.max_user_watches",      # sized from RAM since 5.11
    "fs.nr_open",                       # per-process open-file ceiling
    "kernel.msgmax",
    "kernel.msgmnb",
    "kernel.msgmni",
    "kernel.pid_max",                   # sized from the CPU count; systemd raises it to 4194304
    "kernel.sem",                       # SEMMSL SEMMNS SEMOPM SEMMNI, all maxima
    "kernel.shmall",
    "kernel.shmmax",
    "kernel.shmmni",
    "kernel.threads-max",               # sized from RAM at boot
    "net.core.netdev_max_backlog",      # packets queued per CPU on input
    "net.core.optmem_max",              # ancillary buffer per socket
    "net.core.rmem_default",
    "net.core.rmem_max",                # SO_RCVBUF ceiling
    "net.core.somaxconn",               # listen() backlog ceiling; 4096 since 5.4
    "net.core.wmem_default",
    "net.core.wmem_max",                # SO_SNDBUF ceiling
    "net.ipv4.tcp_max_orphans",         # ip-sysctl.rst: "you _must_ not ... lower the limit"
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_max_tw_buckets",      # ip-sysctl.rst: "you _must_ not lower the limit"
    "net.ipv4.tcp_mem",                 # pages, host-wide, sized from RAM at boot
    "net.ipv4.tcp_rmem",                # min default max, bytes
    "net.ipv4.tcp_wmem",                # min default max, bytes
    "net.ipv4.udp_mem",                 # pages, host-wide, sized from RAM at boot
    "net.ipv4.udp_rmem_min",
    "net.ipv4.udp_wmem_min",
    "net.netfilter.nf_conntrack_max",   # sized from RAM
    "vm.max_map_count",
)


class SysctlError(Exception):
    """A bad key or value, or a failed read/write; the message names the key and value."""


def validate_key(key):
    """Return None when ``key`` is a well-formed dotted sysctl name, else the reason."""
    if key is None or key == "":
        return "empty key"
    if not isinstance(key, str):
        return "is a %s, not a string" % type(key).__name__
    if "/" in key:
        return "contains '/' (write keys dotted, e.g. vm.swappiness)"
    if ".." in key or key.startswith(".") or key.endswith("."):
        return "has an empty component ('..' or a leading/trailing dot)"
    if not _KEY_RE.fullmatch(key):
        return "is not a dotted sysctl name (letters, digits, '_', '-', ':', '+', '@' between dots)"
    return None


def normalize_value(value):
    """The canonical text of a desired value: whitespace folded to single spaces.

    Accepts int, bool (1/0), str, and lists for multi-value keys (`[4096, 131072, 134217728]`).
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
        for item in value:
            if isinstance(item, (list, tuple, dict)):
                raise SysctlError("%r: a list item must be a single value, not a %s" % (value, type(item).__name__))
        return " ".join(normalize_value(item) for item in value)
    if isinstance(value, str):
        if "\n" in value or "\r" in value or "\0" in value:
            raise SysctlError("%r contains a newline or NUL; a sysctl value is one line" % (value,))
        folded = " ".join(value.split())
        if folded == "":
            raise SysctlError("%r is empty; a sysctl value needs at least one character" % (value,))
        return folded
    raise SysctlError("%r has unsupported type %s" % (value, type(value).__name__))


def validate_stored_value(value):
    """Reason why ``value`` (read from a state file) is not a value this module could have
    stored, or None. Stored values are always one-line strings, whitespace folded."""
    if not isinstance(value, str):
        return "is %s, not a string" % ("null" if value is None else "a %s" % type(value).__name__)
    if "\n" in value or "\r" in value or "\0" in value:
        return "contains a newline or NUL"
    if value != " ".join(value.split()):
        return "is not whitespace-folded (tabs, doubled or edge spaces)"
    return None


def normalize_read(text):
    """Fold what the kernel printed (tabs, trailing newline) the same way as desired values."""
    return " ".join(text.split())


def int_fields(value):
    """The integers of a folded value when every field is printed as the kernel prints an
    integer (decimal, no leading zero); None otherwise (strings, cpumasks such as ``00``)."""
    fields = value.split(" ") if value else []
    if not fields or not all(_CANONICAL_INT_RE.fullmatch(field) for field in fields):
        return None
    return [int(field) for field in fields]


def value_shape_error(key, current, desired):
    """Reason why ``desired`` cannot be written to ``key`` as the kernel holds it now, or None.

    Only decided for integer keys (the kernel prints ``current`` as decimal integers) and a
    desired value made of numbers: the count of fields must match (fewer fields leave the
    rest unchanged, more are ignored) and each field must be plain decimal (the kernel reads
    ``010`` as octal 8 and accepts ``0x10``, so the value read back would never match).
    Anything else (strings, lists such as ``0-3`` or ``8080,9148``) is left to the read-back.
    """
    have = int_fields(current) if current is not None else None
    if have is None:
        return None
    fields = desired.split(" ")
    if not all(_NUMERIC_RE.fullmatch(field) for field in fields):
        return None
    for field in fields:
        if not _CANONICAL_INT_RE.fullmatch(field):
            hint = ""
            digits = field.lstrip("+-")
            if digits.lower().startswith("0x"):
                hint = " (the kernel would store %d)" % int(field, 16)
            elif len(digits) > 1 and digits.startswith("0"):
                try:
                    hint = " (the kernel reads a leading 0 as octal: it would store %d)" % int(field, 8)
                except ValueError:
                    hint = " (the kernel reads a leading 0 as octal and would refuse it)"
            return ("field %r of %r is not a plain decimal integer%s; write it as the kernel prints it"
                    % (field, desired, hint))
    if len(fields) != len(have):
        return ("%s holds %d integer%s (now %r) but %r has %d: the kernel would leave the missing "
                "fields unchanged or ignore the extra ones" % (
                    key, len(have), "" if len(have) == 1 else "s", current, desired, len(fields)))
    return None


def raise_fields(current, desired):
    """Field-wise maximum of two integer values of the same shape.

    Returns ``(effective, kept)``: the folded value to apply, and the 1-based positions of the
    fields where ``current`` was higher than ``desired`` and was kept. None when either value is
    not an integer vector or their field counts differ (see value_shape_error).
    """
    have = int_fields(current) if current is not None else None
    want = int_fields(desired)
    if have is None or want is None or len(have) != len(want):
        return None
    effective = []
    kept = []
    for position, (old, new) in enumerate(zip(have, want), 1):
        if old > new:
            kept.append(position)
        effective.append(max(old, new))
    return " ".join(str(value) for value in effective), kept


def key_path(key, root=PROC_SYS):
    """/proc/sys path of a dotted key; SysctlError for a key that is not one, or whose path
    would resolve outside ``root`` (a key read from a state file is data, not a path)."""
    reason = validate_key(key)
    if reason:
        raise SysctlError("key %r %s" % (key, reason))
    path = os.path.join(root, *key.split("."))
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise SysctlError("key %r resolves to %s, outside %s" % (key, real, root))
    return path


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
    """'EINVAL 22 (Invalid argument)' style text for an OSError from a /proc/sys write; the
    caller names the key (for files use fileops.describe, which names the path)."""
    number = getattr(exc, "errno", None)
    if number is None:
        return str(exc)
    text = exc.strerror or os.strerror(number)
    if number == ENOTSUPP:
        text = "operation not supported by this kernel/hardware"
    return "%s %d (%s)" % (errno_name(number), number, text)


def read_value(key, root=PROC_SYS):
    """Current normalized value of ``key``; SysctlError naming the key and path when it is
    absent, a directory of keys, unreadable or not UTF-8 text."""
    path = key_path(key, root)
    if os.path.isdir(path):
        raise SysctlError("%s is a directory of keys (%s), not a key" % (key, path))
    try:
        data = fileops.read_bytes(path)
        if data is None:
            raise SysctlError("unknown key %s: %s does not exist" % (key, path))
        return normalize_read(fileops.decode(data, path))
    except (OSError, IOError) as exc:
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
    """Write the normalized ``value`` in one write(2); OSError propagates so callers can
    classify its errno. The kernel may have taken part of a multi-value write even when it
    fails (see the module docstring): read the key back."""
    path = key_path(key, root)
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    try:
        os.write(fd, value.encode("utf-8", "surrogateescape"))
    finally:
        os.close(fd)
