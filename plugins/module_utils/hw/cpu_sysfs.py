# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading and writing the CPU power knobs under /sys/devices/system/cpu.

Why sysfs and not a tool: cpupower is absent on the GPU machines, and the kernel's own files
are the interface the tools wrap anyway. Three groups of files matter:

- which CPUs are online: ``online`` holds a range list (``0-3,8-11``); each ``cpuN/online``
  says 1 or 0, and cpu0 often has no such file because it cannot be taken offline;
- cpuidle: ``cpuidle/current_driver`` (``none`` when no driver registered, as in VMs whose
  firmware offers no C-states) and per CPU ``cpuN/cpuidle/stateK/{name,desc,latency,residency,
  disable}``; ``latency`` is the exit latency in microseconds, and writing 1 to ``disable`` keeps
  that CPU out of the state until reboot;
- cpufreq: one ``cpufreq/policyN`` per group of CPUs sharing a clock, with ``affected_cpus``
  (the online ones), ``scaling_governor``/``scaling_available_governors`` and, with intel_pstate
  or amd-pstate in active mode, ``energy_performance_preference``/
  ``energy_performance_available_preferences``.

A policy whose CPUs are all offline stays in sysfs ("inactive"). Since Linux 5.19 ("cpufreq:
Allow sysfs access only for active policies", drivers/cpufreq/cpufreq.c show()/store():
``if (likely(!policy_is_inactive(policy))) ... else -EBUSY``) the kernel answers EBUSY to a
read or write of *every* attribute of such a policy, ``affected_cpus`` and ``related_cpus``
included; older kernels show an empty ``affected_cpus``. Both shapes read here as an inactive
policy (``Policy.active`` false, ``Policy.inactive_reason`` saying which), never as an error.
Its CPUs are then taken from the ``cpuN/cpufreq`` links, which the kernel keeps for offline
CPUs. cpuidle has no such rule: intel_idle and acpi_idle keep an offline CPU's ``cpuidle``
directory readable, and haltpoll unregisters the CPU's cpuidle device on offline, so the
directory is simply gone (drivers/cpuidle/cpuidle-haltpoll.c, haltpoll_cpu_offline()).

Every function takes the directory (``CPU_ROOT`` by default) so tests can point it at a fake
tree. Nothing here decides what to change: that is the cpu_power engine's job.
"""

from __future__ import annotations

import errno
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw.sysctl import describe_oserror

CPU_ROOT = "/sys/devices/system/cpu"

_CPU_DIR_RE = re.compile(r"^cpu(\d+)\Z")
_STATE_DIR_RE = re.compile(r"^state(\d+)\Z")
_POLICY_DIR_RE = re.compile(r"^policy(\d+)\Z")


# What the kernel answers for an attribute of a policy that has no online CPU (EBUSY, see
# above) or whose directory is being torn down (kernfs answers ENODEV for a removed node).
INACTIVE_ERRNOS = frozenset([errno.EBUSY, errno.ENODEV])


class CpuSysfsError(Exception):
    """A file that should be readable is not, or holds something unexpected.

    ``errno`` and ``path`` are set when the cause was an OSError reading ``path``.
    """

    def __init__(self, message, errno_=None, path=None):
        super().__init__(message)
        self.errno = errno_
        self.path = path


def read_attr(path):
    """Return a sysfs attribute's text without the trailing newline, or None when absent."""
    try:
        text = fileops.read_text(path)
    except (OSError, IOError) as exc:
        raise CpuSysfsError("cannot read %s: %s" % (path, describe_oserror(exc)),
                            getattr(exc, "errno", None), path)
    if text is None:
        return None
    return text.strip()


def write_attr(path, value):
    """Write ``value`` to a sysfs attribute in one write() (sysfs files cannot be renamed over).

    The kernel reports a refused value on write() or close(); both raise OSError here.
    """
    with open(path, "w") as handle:
        handle.write("%s\n" % value)


def parse_cpu_list(text):
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``; an empty text is an empty list."""
    cpus = set()
    text = (text or "").strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        match = re.match(r"^(\d+)(?:-(\d+))?\Z", part)
        if not match:
            raise CpuSysfsError("cannot parse CPU list %r" % text)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise CpuSysfsError("cannot parse CPU list %r: range %s runs backwards" % (text, part))
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def parse_cpu_words(text):
    """``affected_cpus`` style ``"0 1 2"`` (space separated) -> ``[0, 1, 2]``."""
    words = (text or "").split()
    try:
        return sorted(int(word) for word in words)
    except ValueError:
        raise CpuSysfsError("cannot parse CPU numbers %r" % text)


def format_cpu_list(cpus):
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"`` (the kernel's own notation); empty -> ``""``."""
    runs = []  # [first, last] pairs of consecutive CPUs
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(first) if first == last else "%d-%d" % (first, last) for first, last in runs)


def cpu_dirs(root=CPU_ROOT):
    """``{N: path of cpuN}`` for every CPU the kernel lists (online or not)."""
    found = {}
    try:
        entries = os.listdir(root)
    except OSError as exc:
        raise CpuSysfsError("cannot list %s: %s" % (root, describe_oserror(exc)))
    for entry in entries:
        match = _CPU_DIR_RE.match(entry)
        if match and os.path.isdir(os.path.join(root, entry)):
            found[int(match.group(1))] = os.path.join(root, entry)
    return found


def online_cpus(root=CPU_ROOT):
    """Sorted online CPU numbers.

    ``root/online`` is the authority; without it each ``cpuN/online`` is read, a missing one
    (cpu0 on most machines) counting as online.
    """
    text = read_attr(os.path.join(root, "online"))
    if text is not None:
        return parse_cpu_list(text)
    online = []
    for number, path in sorted(cpu_dirs(root).items()):
        flag = read_attr(os.path.join(path, "online"))
        if flag is None or flag == "1":
            online.append(number)
    return online


def idle_driver(root=CPU_ROOT):
    """The registered cpuidle driver (``intel_idle``, ``acpi_idle``, ``none``), None without cpuidle."""
    return read_attr(os.path.join(root, "cpuidle", "current_driver"))


def idle_governor(root=CPU_ROOT):
    """The cpuidle governor (``menu``, ``teo``, ``ladder``, ``haltpoll``), None when not shown."""
    for name in ("current_governor_ro", "current_governor"):
        value = read_attr(os.path.join(root, "cpuidle", name))
        if value is not None:
            return value
    return None


class IdleState:
    """One idle state of one CPU, as sysfs shows it."""

    def __init__(self, cpu, index, path, name, desc, latency, residency, disable):
        self.cpu = cpu
        self.index = index
        self.path = path
        self.name = name
        self.desc = desc
        self.latency = latency      # exit latency, microseconds
        self.residency = residency  # target residency, microseconds (None when not shown)
        self.disable = disable      # 0 or 1: whether the user (not the driver) disabled it

    @property
    def state(self):
        return "state%d" % self.index

    @property
    def disable_path(self):
        return os.path.join(self.path, "disable")


def _int_attr(path, required=True):
    text = read_attr(path)
    if text is None:
        if required:
            raise CpuSysfsError("%s is missing" % path)
        return None
    try:
        return int(text)
    except ValueError:
        raise CpuSysfsError("%s holds %r, not an integer" % (path, text))


def _entries(base):
    """Names in ``base``; none when the directory does not exist (no cpuidle, no cpufreq)."""
    try:
        return os.listdir(base)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return []
        raise CpuSysfsError("cannot list %s: %s" % (base, describe_oserror(exc)))


def idle_states(cpu, root=CPU_ROOT):
    """The idle states of ``cpu`` in index order; empty when the CPU has no cpuidle directory."""
    base = os.path.join(root, "cpu%d" % cpu, "cpuidle")
    entries = _entries(base)
    states = []
    for entry in entries:
        match = _STATE_DIR_RE.match(entry)
        if not match:
            continue
        path = os.path.join(base, entry)
        disable = _int_attr(os.path.join(path, "disable"))
        states.append(IdleState(
            cpu=cpu,
            index=int(match.group(1)),
            path=path,
            name=read_attr(os.path.join(path, "name")) or entry,
            desc=read_attr(os.path.join(path, "desc")),
            latency=_int_attr(os.path.join(path, "latency")),
            residency=_int_attr(os.path.join(path, "residency"), required=False),
            disable=1 if disable else 0,
        ))
    return sorted(states, key=lambda s: s.index)


class Policy:
    """One cpufreq policy: the CPUs it drives and its governor and EPP settings."""

    def __init__(self, name, path, cpus, related, driver, governor, available_governors, epp, available_epp,
                 inactive_reason=None):
        self.name = name
        self.path = path
        self.cpus = cpus                      # affected (online) CPUs
        self.related = related                # every CPU of the policy, online or not
        self.driver = driver
        self.governor = governor
        self.available_governors = available_governors
        self.epp = epp                        # None when the driver does not expose EPP
        self.available_epp = available_epp
        self.inactive_reason = inactive_reason  # why it counts as inactive; None when active

    @property
    def active(self):
        return bool(self.cpus)

    def attr_path(self, name):
        return os.path.join(self.path, name)


def _linked_cpus(root, name):
    """CPUs whose ``cpuN/cpufreq`` link points at policy ``name`` (kept while they are offline)."""
    cpus = []
    for number, path in cpu_dirs(root).items():
        link = os.path.join(path, "cpufreq")
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if os.path.basename(os.path.normpath(target)) == name:
            cpus.append(number)
    return sorted(cpus)


def _read_policy(entry, path):
    """Read one policy; CpuSysfsError (with errno) when an attribute cannot be read."""
    cpus = parse_cpu_words(read_attr(os.path.join(path, "affected_cpus")))
    related = parse_cpu_words(read_attr(os.path.join(path, "related_cpus")))
    policy = Policy(entry, path, cpus, related or list(cpus), None, None, [], None, [])
    if not cpus:
        policy.inactive_reason = "affected_cpus is empty"
        return policy
    policy.driver = read_attr(os.path.join(path, "scaling_driver"))
    policy.governor = read_attr(os.path.join(path, "scaling_governor"))
    policy.available_governors = (read_attr(os.path.join(path, "scaling_available_governors")) or "").split()
    policy.epp = read_attr(os.path.join(path, "energy_performance_preference"))
    policy.available_epp = (read_attr(os.path.join(path, "energy_performance_available_preferences"))
                            or "").split()
    return policy


def policies(root=CPU_ROOT):
    """Every ``cpufreq/policyN`` in number order.

    An inactive policy (all its CPUs offline) has ``cpus`` [] and None for everything the
    kernel does not show then; an attribute read answered with EBUSY or ENODEV (see the module
    docstring) makes the policy inactive too, since that is how the kernel says so. Any other
    read error is a CpuSysfsError.
    """
    base = os.path.join(root, "cpufreq")
    entries = _entries(base)
    found = []
    for entry in entries:
        match = _POLICY_DIR_RE.match(entry)
        if not match:
            continue
        path = os.path.join(base, entry)
        try:
            policy = _read_policy(entry, path)
        except CpuSysfsError as exc:
            if exc.errno not in INACTIVE_ERRNOS:
                raise
            related = _linked_cpus(root, entry) or [int(match.group(1))]
            policy = Policy(entry, path, [], related, None, None, [], None, [],
                            inactive_reason="the kernel refuses to show it: %s" % exc)
        found.append((int(match.group(1)), policy))
    return [policy for _number, policy in sorted(found, key=lambda item: item[0])]
