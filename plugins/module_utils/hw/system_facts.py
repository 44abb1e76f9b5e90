# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host, kernel, CPU, memory, container and tuner facts of a node (docs/facts.md).

Everything comes from procfs, sysfs and files under /etc, /usr and /var; no tool is run and
nothing is written. Every leaf is an envelope of hw/facts.py: a value that cannot be read is
unknown with the reason, never guessed and never a failure. ``gather(paths)`` returns the six
sections; ``section(name, paths, ...)`` reads one of them (the node_facts engine times each).

Decisions worth knowing:

- ``host.virtualization`` is decided from files, as systemd-detect-virt decides from CPUID and
  DMI, in this order, the first that names a hypervisor winning:
  ``/sys/hypervisor/type`` (``xen``); the DMI strings ``sys_vendor``, ``product_name``,
  ``board_vendor`` and ``bios_vendor`` of ``/sys/class/dmi/id`` (QEMU -> ``qemu``, or ``kvm``
  when the guest also has the ``kvm-clock`` clocksource, which only KVM offers and which is
  how a KVM-accelerated QEMU differs from TCG; KVM, OpenStack, KubeVirt -> ``kvm``; VMware ->
  ``vmware``; Microsoft ``Virtual Machine`` or Hyper-V -> ``hyperv``; Xen -> ``xen``;
  VirtualBox -> ``virtualbox``; Amazon EC2 -> ``amazon``; Google Compute Engine -> ``google``;
  Parallels, BHYVE, Bochs by name); then the clocksources alone (``kvm-clock`` -> ``kvm``,
  ``hyperv_clocksource_*`` -> ``hyperv``, ``xen`` -> ``xen``: Firecracker guests, such as the
  CI and H200 machines, have no DMI at all but do have kvm-clock); then the ``hypervisor`` CPU
  flag of /proc/cpuinfo with nothing naming it -> ``vm-other``; ``none`` when none of these
  shows a hypervisor. Inside a container these files are the host's, so the value describes
  the machine the container runs on.
- ``host.proxmox`` is true on a Proxmox VE node: ``/etc/pve`` is a FUSE mount in
  /proc/self/mountinfo (pmxcfs), or ``/etc/pve/.version`` exists (a file only pmxcfs makes),
  or ``/usr/share/pve-manager`` exists (the pve-manager package, which only Proxmox VE ships:
  the ``/usr/share/perl5/PVE`` libraries are shared with Proxmox Mail Gateway and are not
  evidence). ``host.pmxcfs_mounted`` says whether the cluster filesystem is mounted, without
  which the containers' configs cannot be read.
- ``host.lxc_host`` is true when at least one container config was found (lxc_containers'
  discovery: /etc/pve/lxc and the LXC paths), not merely when LXC is installed.
- ``tuners``: a daemon is active when a process of its name runs (/proc/*/comm, which holds at
  most 15 characters: power-profiles-daemon shows as ``power-profiles-``) and enabled when a
  ``/etc/systemd/system/*.wants/<unit>`` link exists and the unit is not masked.
"""

from __future__ import annotations

import glob
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_containers
from ansible_collections.gpufleet.tuning.plugins.module_utils import memlock_info
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import kernel_args
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container as container_detect
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import cpu_sysfs
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import lxc_state
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import proc_cgroups
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl

SECTIONS = ("host", "kernel", "cpu", "memory", "containers", "tuners")

# The IOMMU arguments of the kernel command line reported under kernel.iommu_args.
IOMMU_KEYS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough")

# What hw/container.detect reads (the source of host.container's facts).
CONTAINER_SOURCE = "/proc/1/environ,/proc/self/uid_map,/proc/1/cgroup,/proc/sys"
PROCESS_SOURCE = "/proc/*/comm"

# DMI strings (lower case, matched as a prefix or whole word) to the hypervisor they name,
# after systemd's src/basic/virt.c dmi_vendor_table. QEMU is refined with the clocksource.
_DMI_VENDORS = (
    ("kvm", "kvm"),
    ("openstack", "kvm"),
    ("kubevirt", "kvm"),
    ("qemu", "qemu"),
    ("vmware", "vmware"),
    ("vmw", "vmware"),
    ("innotek gmbh", "virtualbox"),
    ("virtualbox", "virtualbox"),
    ("xen", "xen"),
    ("hvm domu", "xen"),
    ("amazon ec2", "amazon"),
    ("google compute engine", "google"),
    ("bochs", "bochs"),
    ("parallels", "parallels"),
    ("bhyve", "bhyve"),
    ("hyper-v", "hyperv"),
)
_DMI_FILES = ("sys_vendor", "product_name", "board_vendor", "bios_vendor")
_CLOCKSOURCES = (("kvm-clock", "kvm"), ("hyperv_clocksource", "hyperv"), ("xen", "xen"))

# Each tuner: its process name as /proc/<pid>/comm shows it (15 characters at most), its unit,
# and what it would undo of this collection's tuning.
TUNERS = {
    "tuned": {
        "comm": "tuned",
        "unit": "tuned.service",
        "fights": "sets the CPU governor and EPP, sysctls and C-state latency (force_latency) from its "
                  "profile, undoing cpu_power and sysctl_profile whenever it reapplies it",
    },
    "power_profiles_daemon": {
        "comm": "power-profiles-",
        "unit": "power-profiles-daemon.service",
        "fights": "sets the energy performance preference (and governor or platform profile) of its "
                  "profile, undoing cpu_power's EPP and governor",
    },
    "cpupower": {
        "comm": None,  # a oneshot unit: no process stays
        "unit": "cpupower.service",
        "fights": "sets the CPU governor (and frequency limits) from its config at boot, overriding "
                  "cpu_power's governor",
    },
    "irqbalance": {
        "comm": "irqbalance",
        "unit": "irqbalance.service",
        "fights": "moves IRQ affinity, the GPUs' and NICs' interrupts included, undoing any pinning",
    },
}

_NODE_RE = re.compile(r"^node(\d+)\Z")
_BRACKETED = re.compile(r"\[([^\]]+)\]")


class Paths:
    """Where procfs, sysfs and the config files are, under ``root`` (``/`` on a host, a temp dir
    in tests). ``uname`` is os.uname on the real root; tests set their own (None: unknown)."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = self.under("/proc")
        self.proc_sys = self.under("/proc/sys")
        self.cpuinfo = self.under("/proc/cpuinfo")
        self.meminfo = self.under("/proc/meminfo")
        self.cmdline = self.under("/proc/cmdline")
        self.mountinfo = self.under("/proc/self/mountinfo")
        self.cpu = self.under("/sys/devices/system/cpu")
        self.node = self.under("/sys/devices/system/node")
        self.dmi = self.under("/sys/class/dmi/id")
        self.hypervisor_type = self.under("/sys/hypervisor/type")
        self.clocksources = self.under("/sys/devices/system/clocksource/clocksource0/available_clocksource")
        self.lockdown = self.under("/sys/kernel/security/lockdown")
        self.thp = self.under("/sys/kernel/mm/transparent_hugepage")
        self.cgroup = self.under("/sys/fs/cgroup")
        self.systemd_system = self.under("/etc/systemd/system")
        self.tuned_profile = self.under("/etc/tuned/active_profile")
        self.ppd_state = self.under("/var/lib/power-profiles-daemon/state.ini")
        self.pve = self.under("/etc/pve")
        self.pve_version = self.under("/etc/pve/.version")
        self.pve_manager = self.under("/usr/share/pve-manager")
        self.uname = os.uname if root in ("/", "") else None

    def under(self, path):
        if self.root in ("/", ""):
            return path
        return os.path.join(self.root, path.lstrip("/"))


# ---------------------------------------------------------------------------------------------
# Parsers (ValueError for text they cannot read: facts.read makes that an unknown)


def bracketed(text):
    """The selected word of a sysfs choice file: ``always [madvise] never`` -> ``madvise``."""
    match = _BRACKETED.search(text)
    if not match:
        raise ValueError("no [selected] word")
    return match.group(1)


def parse_cpuinfo(text):
    """/proc/cpuinfo as a list of ``{field: value}``, one per processor block."""
    blocks = []
    current = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        if ":" in line:
            key, value = line.split(":", 1)
            current.setdefault(key.strip(), value.strip())
    if current:
        blocks.append(current)
    return blocks


def parse_meminfo(text):
    """/proc/meminfo as ``{field: number}`` (kB for the sized fields, a count for HugePages_*)."""
    found = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        key, rest = line.split(":", 1)
        fields = rest.split()
        if fields and fields[0].isdigit():
            found[key.strip()] = int(fields[0])
    return found


def parse_ppd_state(text):
    """``Profile`` of the ``[State]`` group of power-profiles-daemon's state.ini (a GKeyFile)."""
    group = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1]
            continue
        if group == "State" and "=" in line:
            key, value = line.split("=", 1)
            if key.strip() == "Profile":
                return value.strip()
    raise ValueError("no Profile in its [State] group")


def mount_fstype(text, mount_point):
    """The filesystem type mounted at ``mount_point`` (the last such mount), from mountinfo text."""
    found = None
    for line in text.splitlines():
        if " - " not in line:
            continue
        before, after = line.split(" - ", 1)
        fields = before.split()
        if len(fields) >= 5 and fields[4].replace("\\040", " ") == mount_point:
            found = (after.split() or [None])[0]
    return found


def _cpu_list_of(cpus):
    return cpu_sysfs.format_cpu_list(cpus)


def read_or(path, parse=None, absent=None):
    """facts.read, with ``absent`` as the reason when the file does not exist (what its absence
    means is worth more than "does not exist")."""
    found = facts.read(path, parse)
    if absent and found["value"] is None and not os.path.lexists(path):
        return facts.unknown(path, absent)
    return found


def _read_text(path):
    """Text of a file, or (None, reason)."""
    try:
        text = fileops.read_text(path)
    except (OSError, IOError) as exc:
        return None, fileops.describe(exc)
    if text is None:
        return None, "%s does not exist" % path
    return text, None


# ---------------------------------------------------------------------------------------------
# host


def virtualization(paths):
    """The hypervisor this machine runs under (see the module docstring), as an envelope."""
    xen = fileops.read_quiet(paths.hypervisor_type)
    if xen and xen.strip():
        return facts.fact(xen.strip().lower(), paths.hypervisor_type)
    clocks = (fileops.read_quiet(paths.clocksources) or "").split()
    clock_kind = None
    for clock in clocks:
        for prefix, kind in _CLOCKSOURCES:
            if clock.startswith(prefix):
                clock_kind = clock_kind or kind
    for name in _DMI_FILES:
        path = os.path.join(paths.dmi, name)
        text = (fileops.read_quiet(path) or "").strip().lower()
        if not text:
            continue
        if text.startswith("microsoft") and name == "sys_vendor":
            product = (fileops.read_quiet(os.path.join(paths.dmi, "product_name")) or "").strip().lower()
            if product == "virtual machine":
                return facts.fact("hyperv", path)
            continue
        for word, kind in _DMI_VENDORS:
            if text == word or text.startswith(word + " ") or text.startswith(word + ","):
                if kind == "qemu" and clock_kind == "kvm":
                    return facts.fact("kvm", paths.clocksources)
                return facts.fact(kind, path)
    if clock_kind:
        return facts.fact(clock_kind, paths.clocksources)
    text, reason = _read_text(paths.cpuinfo)
    if text is None:
        return facts.unknown(paths.cpuinfo, reason)
    flags = next((block.get("flags", "") for block in parse_cpuinfo(text) if "flags" in block), "")
    if "hypervisor" in flags.split():
        return facts.fact("vm-other", paths.cpuinfo)
    return facts.fact("none", paths.cpuinfo)


def proxmox(paths):
    """``(proxmox, pmxcfs_mounted)`` envelopes (see the module docstring)."""
    text, reason = _read_text(paths.mountinfo)
    if text is None:
        mounted = facts.unknown(paths.mountinfo, reason)
    else:
        fstype = mount_fstype(text, "/etc/pve")
        mounted = facts.fact(bool(fstype) and fstype.startswith("fuse"), paths.mountinfo)
    if mounted["value"]:
        return facts.fact(True, paths.mountinfo), mounted
    if os.path.exists(paths.pve_version):
        return facts.fact(True, paths.pve_version), mounted
    return facts.fact(os.path.isdir(paths.pve_manager), paths.pve_manager), mounted


def _machine(paths):
    if paths.uname is None:
        return facts.unknown("uname(2)", "not read: these paths are a tree under %s, not this machine" % paths.root)
    try:
        return facts.fact(paths.uname().machine, "uname(2)")
    except (OSError, AttributeError) as exc:
        return facts.unknown("uname(2)", exc)


def _container(paths):
    found = container_detect.detect(proc_root=paths.proc, root=paths.root)
    return found, dict((key, facts.fact(found[key], CONTAINER_SOURCE))
                       for key in ("detected", "kind", "evidence", "ignored"))


def _discover(paths):
    """lxc_containers' records and warnings for the same root."""
    warnings = []
    records, found = lxc_containers.discover(lxc_containers.Paths(paths.root), warnings)
    return records, found, warnings


def host(paths):
    is_proxmox, mounted = proxmox(paths)
    records, found, _warnings = _discover(paths)
    lxc_paths = lxc_containers.Paths(paths.root)
    sources = ",".join(found["sources"]) or ",".join((lxc_paths.pve_lxc, lxc_paths.lxc_path))
    return {
        "hostname": facts.read(os.path.join(paths.proc_sys, "kernel", "hostname")),
        "machine": _machine(paths),
        "virtualization": virtualization(paths),
        "container": _container(paths)[1],
        "proxmox": is_proxmox,
        "pmxcfs_mounted": mounted,
        "lxc_host": facts.fact(bool(records), sources),
    }


# ---------------------------------------------------------------------------------------------
# kernel


def _iommu_args(cmdline):
    """``({key: value envelope}, identity domains forced)`` for the running line: the IOMMU
    arguments (null when absent; several of one key joined by a space in line order; a bare flag
    is ""), and whether one of them asks for passthrough (kernel_args.forces_identity_iommu)."""
    args = [kernel_args.Arg(token) for token in kernel_args.kernel_part(kernel_args.split(cmdline["value"]))]
    found = {}
    for key in IOMMU_KEYS:
        values = [("" if arg.value is None else arg.value) for arg in args
                  if arg.key == kernel_args.normalize_key(key)]
        found[key] = facts.fact(" ".join(values) if values else None, cmdline["source"])
    return found, any(kernel_args.forces_identity_iommu(arg) for arg in args)


def kernel(paths):
    cmdline = facts.read(paths.cmdline)
    if cmdline["value"] is None:
        iommu = dict((key, facts.unknown(paths.cmdline, cmdline["unknown"])) for key in IOMMU_KEYS)
        passthrough = facts.unknown(paths.cmdline, cmdline["unknown"])
    else:
        iommu, forced = _iommu_args(cmdline)
        passthrough = facts.fact(forced, paths.cmdline)
    return {
        "release": facts.read(os.path.join(paths.proc_sys, "kernel", "osrelease")),
        "cmdline": cmdline,
        "iommu_args": iommu,
        "iommu_passthrough_forced": passthrough,
        "amd_pstate_status": read_or(os.path.join(paths.cpu, "amd_pstate", "status"), absent=(
            "no amd_pstate driver here (not an AMD CPU, a VM, or amd_pstate not enabled in this kernel)")),
        "lockdown": read_or(paths.lockdown, bracketed, absent=(
            "no lockdown LSM in this kernel, or securityfs is not mounted")),
    }


# ---------------------------------------------------------------------------------------------
# cpu


def _sysfs_topology(paths, cpus):
    """``[(package, core)]`` of ``cpus`` from their topology directories (None when unreadable)."""
    pairs = []
    for cpu in cpus:
        base = os.path.join(paths.cpu, "cpu%d" % cpu, "topology")
        package = fileops.read_quiet(os.path.join(base, "physical_package_id"))
        core = fileops.read_quiet(os.path.join(base, "core_id"))
        if package is None or core is None:
            return None
        pairs.append((package.strip(), core.strip()))
    return pairs


def _counts(paths, blocks, online, cpuinfo_source):
    """sockets, cores and threads: from /proc/cpuinfo when it has physical and core IDs (x86),
    else from the topology directories of the online CPUs."""
    topology_source = os.path.join(paths.cpu, "cpu*", "topology", "physical_package_id")
    if blocks is not None and blocks and all("physical id" in b and "core id" in b for b in blocks):
        pairs = [(b["physical id"], b["core id"]) for b in blocks]
        source = cpuinfo_source
    else:
        pairs = _sysfs_topology(paths, online) if online else None
        source = topology_source
    if not pairs:
        reason = "neither /proc/cpuinfo nor the CPUs' topology directories give physical package and core IDs"
        return facts.unknown(source, reason), facts.unknown(source, reason)
    return facts.fact(len(set(p for p, _c in pairs)), source), facts.fact(len(set(pairs)), source)


def _numa_nodes(paths):
    try:
        entries = os.listdir(paths.node)
    except OSError as exc:
        return facts.unknown(paths.node, "%s (a kernel without NUMA support shows no nodes)" % fileops.describe(exc))
    found = []
    for number in sorted(int(m.group(1)) for m in (_NODE_RE.match(e) for e in entries) if m):
        base = os.path.join(paths.node, "node%d" % number)
        found.append({"node": facts.fact(number, base), "cpus": facts.read(os.path.join(base, "cpulist"))})
    return found


def _cpuidle(paths, online):
    base = os.path.join(paths.cpu, "cpuidle")
    driver = facts.read(os.path.join(base, "current_driver"))
    governor = facts.read(os.path.join(base, "current_governor_ro"))
    if governor["value"] is None and os.path.exists(os.path.join(base, "current_governor")):
        governor = facts.read(os.path.join(base, "current_governor"))
    states_source = os.path.join(paths.cpu, "cpu*", "cpuidle")
    if not os.path.isdir(base):
        return {"driver": driver, "governor": governor,
                "states": facts.unknown(states_source, "%s does not exist: this kernel or VM has no cpuidle" % base)}
    if online is None:
        return {"driver": driver, "governor": governor,
                "states": facts.unknown(states_source, "the online CPUs are not known")}
    groups = {}
    try:
        for cpu in online:
            for state in cpu_sysfs.idle_states(cpu, paths.cpu):
                key = (state.index, state.name, state.latency, state.residency)
                groups.setdefault(key, ([], []))[1 if state.disable else 0].append(cpu)
    except cpu_sysfs.CpuSysfsError as exc:
        return {"driver": driver, "governor": governor, "states": facts.unknown(states_source, exc)}
    states = []
    for (index, name, latency, residency), (enabled, disabled) in sorted(groups.items(), key=lambda i: i[0][:2]):
        where = os.path.join(paths.cpu, "cpu*", "cpuidle", "state%d" % index)
        states.append({
            "state": facts.fact("state%d" % index, where),
            "name": facts.fact(name, os.path.join(where, "name")),
            "latency_us": facts.fact(latency, os.path.join(where, "latency")),
            "residency_us": (facts.fact(residency, os.path.join(where, "residency")) if residency is not None
                             else facts.unknown(os.path.join(where, "residency"), "not shown by this kernel")),
            "enabled_cpus": facts.fact(_cpu_list_of(enabled), os.path.join(where, "disable")),
            "disabled_cpus": facts.fact(_cpu_list_of(disabled), os.path.join(where, "disable")),
        })
    return {"driver": driver, "governor": governor, "states": states}


def _cpufreq(paths):
    base = os.path.join(paths.cpu, "cpufreq")
    driver_source = os.path.join(base, "policy*", "scaling_driver")
    governor_source = os.path.join(base, "policy*", "scaling_governor")
    epp_source = os.path.join(base, "policy*", "energy_performance_preference")
    try:
        active = [policy for policy in cpu_sysfs.policies(paths.cpu) if policy.active]
    except cpu_sysfs.CpuSysfsError as exc:
        return dict((key, facts.unknown(source, exc)) for key, source in (
            ("driver", driver_source), ("governors", governor_source), ("epp", epp_source)))
    if not active:
        reason = ("no active cpufreq policy under %s: no cpufreq driver (a VM, or firmware that keeps "
                  "P-states to itself)" % base)
        return {"driver": facts.unknown(driver_source, reason), "governors": facts.unknown(governor_source, reason),
                "epp": facts.unknown(epp_source, reason)}
    drivers = sorted(set(p.driver for p in active if p.driver))
    governors = {}
    epp = {}
    for policy in active:
        if policy.governor:
            governors.setdefault(policy.governor, []).extend(policy.cpus)
        if policy.epp:
            epp.setdefault(policy.epp, []).extend(policy.cpus)
    result = {
        "driver": (facts.fact(",".join(drivers), driver_source) if drivers
                   else facts.unknown(driver_source, "no policy shows scaling_driver")),
        "governors": dict((name, facts.fact(_cpu_list_of(cpus), governor_source)) for name, cpus in governors.items()),
        "epp": dict((name, facts.fact(_cpu_list_of(cpus), epp_source)) for name, cpus in epp.items()),
    }
    if not epp:
        result["epp"] = facts.unknown(epp_source, "the %s driver shows no energy_performance_preference (only "
                                                  "intel_pstate and amd-pstate in active mode do)"
                                      % (",".join(drivers) or "cpufreq"))
    return result


def cpu(paths):
    text, reason = _read_text(paths.cpuinfo)
    blocks = parse_cpuinfo(text) if text is not None else None
    first = next((b for b in blocks or [] if "vendor_id" in b or "model name" in b), {})

    def field(name):
        if blocks is None:
            return facts.unknown(paths.cpuinfo, reason)
        if name not in first:
            return facts.unknown(paths.cpuinfo, "no %r line in %s" % (name, paths.cpuinfo))
        return facts.fact(first[name], paths.cpuinfo)

    try:
        online = cpu_sysfs.online_cpus(paths.cpu)
    except cpu_sysfs.CpuSysfsError:
        online = None
    sockets, cores = _counts(paths, blocks, online, paths.cpuinfo)
    if blocks:
        threads = facts.fact(sum(1 for b in blocks if "processor" in b), paths.cpuinfo)
    elif online is not None:
        threads = facts.fact(len(online), os.path.join(paths.cpu, "online"))
    else:
        threads = facts.unknown(paths.cpuinfo, reason or "no processor in %s" % paths.cpuinfo)
    return {
        "vendor": field("vendor_id"),
        "model_name": field("model name"),
        "sockets": sockets,
        "cores": cores,
        "threads": threads,
        "numa_nodes": _numa_nodes(paths),
        "online": facts.read(os.path.join(paths.cpu, "online")),
        "offline": facts.read(os.path.join(paths.cpu, "offline")),
        "cpuidle": _cpuidle(paths, online),
        "cpufreq": _cpufreq(paths),
    }


# ---------------------------------------------------------------------------------------------
# memory


def memory(paths, sysctl_keys=()):
    text, reason = _read_text(paths.meminfo)
    info = parse_meminfo(text) if text is not None else None

    def field(*names):
        if info is None:
            return facts.unknown(paths.meminfo, reason)
        missing = [name for name in names if name not in info]
        if missing:
            return facts.unknown(paths.meminfo, "no %s line in %s" % (missing[0], paths.meminfo))
        return facts.fact(info[names[0]] if len(names) == 1 else info[names[0]] - info[names[1]], paths.meminfo)

    sysctls = {}
    for key in sysctl_keys:
        try:
            source = sysctl.key_path(key, paths.proc_sys)
        except sysctl.SysctlError as exc:
            sysctls[key] = facts.unknown(paths.proc_sys, exc)
            continue
        try:
            sysctls[key] = facts.fact(sysctl.read_value(key, paths.proc_sys), source)
        except sysctl.SysctlError as exc:
            sysctls[key] = facts.unknown(source, exc)
    return {
        "total_kib": field("MemTotal"),
        "thp_enabled": facts.read(os.path.join(paths.thp, "enabled"), bracketed),
        "thp_defrag": facts.read(os.path.join(paths.thp, "defrag"), bracketed),
        "hugepages_total": field("HugePages_Total"),
        "hugepages_free": field("HugePages_Free"),
        "hugepage_size_kib": field("Hugepagesize"),
        "swap_total_kib": field("SwapTotal"),
        "swap_used_kib": field("SwapTotal", "SwapFree"),
        "sysctls": sysctls,
    }


# ---------------------------------------------------------------------------------------------
# containers


def _process_memlock(pid, proc):
    path = os.path.join(proc, str(pid), "limits")
    try:
        pair = rlimit.read_process_limit(pid, proc)
    except (OSError, IOError) as exc:
        return facts.unknown(path, fileops.describe(exc))
    except rlimit.LimitError as exc:
        return facts.unknown(path, exc)
    if pair is None:
        return facts.unknown(path, "process %s does not exist" % pid)
    return facts.fact(rlimit.format_pair(pair), path)


def _lxc_entry(record, paths, running):
    source = record["path"]
    entry = {
        "id": facts.fact(record["id"], source),
        "name": facts.fact(record["hostname"] or record["container_name"], source),
        "manager": facts.fact(record["manager"], source),
        "path": facts.fact(source, source),
    }
    if record["error"]:
        for key in ("template", "gpu", "gpu_evidence", "memlock_limit", "locked", "lock"):
            entry[key] = facts.unknown(source, record["error"])
    else:
        entry.update({
            "template": facts.fact(record["template"], source),
            "gpu": facts.fact(record["gpu"], source),
            "gpu_evidence": facts.fact(list(record["gpu_evidence"]), source),
            "memlock_limit": facts.fact(record["memlock"], source),
            "locked": facts.fact(bool(record["lock"]), source),
            "lock": facts.fact(record["lock"], source),
        })
    cgroup_source = os.path.join(paths.proc, "*", "cgroup")
    state = lxc_state.container_state(record["container_name"], proc_root=paths.proc, cgroup_root=paths.cgroup,
                                      tools=None, proxmox=record["manager"] == "proxmox",
                                      lxcpath=record["lxc_path"], known_payloads=running)
    entry["running"] = (facts.fact(state["running"], cgroup_source) if state["running"] is not None
                        else facts.unknown(cgroup_source, state["evidence"]))
    if state["init_pid"] is not None:
        entry["memlock_running"] = _process_memlock(state["init_pid"], paths.proc)
    elif state["running"]:
        entry["memlock_running"] = facts.unknown(cgroup_source, "running (%s), but its init process is not "
                                                                "visible here" % state["evidence"])
    else:
        entry["memlock_running"] = facts.unknown(cgroup_source, "not running (%s)" % state["evidence"])
    return entry


def _inside(paths, serving_unit):
    unit_source = "option:serving_unit"
    found = {"pid1_memlock": _process_memlock(1, paths.proc), "serving_unit": facts.fact(serving_unit, unit_source)}
    if not serving_unit:
        found["serving_unit_memlock"] = facts.unknown(unit_source, "no serving_unit given")
        return found
    try:
        unit = memlock_info.unit_name(serving_unit)
    except ModuleFailure as exc:
        found["serving_unit_memlock"] = facts.unknown(unit_source, exc.message)
        return found
    found["serving_unit"] = facts.fact(unit, unit_source)
    main = proc_cgroups.top(memlock_info.unit_processes(unit, paths.proc))
    if main is None:
        found["serving_unit_memlock"] = facts.unknown(
            os.path.join(paths.proc, "*", "cgroup"), "no process of %s runs (is it started?)" % unit)
    else:
        found["serving_unit_memlock"] = _process_memlock(main, paths.proc)
    return found


def containers(paths, serving_unit=None):
    """``{"lxc": [...], "inside": {...}}`` and the discovery's warnings, as ``(section, warnings)``."""
    records, _found, warnings = _discover(paths)
    records.sort(key=lambda r: (0, r["vmid"], "") if r["manager"] == "proxmox" else (1, 0, r["container_name"]))
    running = lxc_state.payloads(paths.proc) if records else {}
    detected = container_detect.detect(proc_root=paths.proc, root=paths.root)
    section = {
        "lxc": [_lxc_entry(record, paths, running) for record in records],
        "inside": _inside(paths, serving_unit) if detected["detected"] else facts.fact(None, "derived"),
    }
    return section, warnings


# ---------------------------------------------------------------------------------------------
# tuners


def process_names(proc):
    """The names (comm) of every process in ``proc``; OSError when it cannot be listed."""
    names = set()
    for entry in os.listdir(proc):
        if entry.isdigit():
            name = fileops.read_quiet(os.path.join(proc, entry, "comm"))
            if name:
                names.add(name.strip())
    return names


def unit_enabled(paths, unit):
    """Envelope: a ``*.wants/<unit>`` link in /etc/systemd/system, and the unit not masked."""
    base = paths.systemd_system
    if not os.path.isdir(base):
        return facts.unknown(base, "%s does not exist: not a systemd system" % base)
    mask = os.path.join(base, unit)
    if os.path.islink(mask) and os.readlink(mask) == "/dev/null":
        return facts.fact(False, mask)
    links = sorted(glob.glob(os.path.join(glob.escape(base), "*.wants", unit)))
    if links:
        return facts.fact(True, links[0])
    return facts.fact(False, os.path.join(base, "*.wants", unit))


def tuners(paths):
    try:
        names = process_names(paths.proc)
        reason = None
    except OSError as exc:
        names, reason = None, fileops.describe(exc)

    def active(comm):
        if names is None:
            return facts.unknown(PROCESS_SOURCE, reason)
        return facts.fact(comm in names, PROCESS_SOURCE)

    found = {}
    for key, tuner in TUNERS.items():
        entry = {"enabled": unit_enabled(paths, tuner["unit"]),
                 "fights": facts.fact(tuner["fights"], "derived")}
        if tuner["comm"]:
            entry["active"] = active(tuner["comm"])
        found[key] = entry
    found["tuned"]["profile"] = read_or(paths.tuned_profile, lambda text: text or None, absent=(
        "no active_profile: tuned is not installed, or never applied a profile"))
    found["power_profiles_daemon"]["profile"] = read_or(paths.ppd_state, parse_ppd_state, absent=(
        "no state file: power-profiles-daemon is not installed, or never saved a profile (it starts in "
        "balanced)"))
    return found


# ---------------------------------------------------------------------------------------------
# gather


def section(name, paths, sysctl_keys=(), serving_unit=None):
    """One section, and the warnings its reading gave: ``(section, warnings)``.

    Never raises for what the machine holds: an error no reader expected makes the whole
    section one unknown envelope with the reason.
    """
    readers = {
        "host": lambda: (host(paths), []),
        "kernel": lambda: (kernel(paths), []),
        "cpu": lambda: (cpu(paths), []),
        "memory": lambda: (memory(paths, sysctl_keys), []),
        "containers": lambda: containers(paths, serving_unit),
        "tuners": lambda: (tuners(paths), []),
    }
    if name not in readers:
        raise ValueError("unknown section %r: use one of %s" % (name, ", ".join(SECTIONS)))
    try:
        return readers[name]()
    except Exception as exc:  # pylint: disable=broad-except  # a fact never fails the module
        detail = fileops.describe(exc) if isinstance(exc, (OSError, IOError)) else "%s: %s" % (
            type(exc).__name__, exc)
        return facts.unknown("derived", "reading the %s facts failed: %s" % (name, detail)), [
            "%s facts: %s" % (name, detail)]


def gather(paths=None, sections=SECTIONS, sysctl_keys=(), serving_unit=None):
    """``{"host", "kernel", "cpu", "memory", "containers", "tuners"}`` (those of ``sections``)."""
    paths = paths or Paths()
    return dict((name, section(name, paths, sysctl_keys, serving_unit)[0]) for name in sections)
