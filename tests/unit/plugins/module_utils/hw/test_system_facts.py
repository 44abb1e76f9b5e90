"""hw/system_facts against fake trees of the machines the audit meets: an untuned Intel host, an
AMD host with amd_pstate active, a VM without cpuidle or cpufreq, a Proxmox host with two
containers, the inside of an LXC container, and a host where tuned runs.

The builders here are shared with the node_facts engine and module tests. Every leaf of every
gather is checked to be an envelope (assert_all_facts), and an unknown always has a reason.
"""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import system_facts as sf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_rlimit import LIMITS_8M

UNLIMITED = LIMITS_8M.replace("Max locked memory         8388608              8388608",
                              "Max locked memory         unlimited            unlimited")
LIMITS_64K = LIMITS_8M.replace("Max locked memory         8388608              8388608",
                               "Max locked memory         65536                65536")

SYSCTLS = {"kernel.numa_balancing": "1\n", "vm.swappiness": "60\n", "net.ipv4.tcp_rmem": "4096\t131072\t6291456\n"}
INTEL_FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep ht constant_tsc nonstop_tsc avx2 avx512f"
MEMINFO = ("MemTotal:       527994112 kB\nMemFree:        500000000 kB\nSwapTotal:       8388604 kB\n"
           "SwapFree:        8388000 kB\nHugePages_Total:       0\nHugePages_Free:        0\n"
           "HugePages_Rsvd:        0\nHugePages_Surp:        0\nHugepagesize:       2048 kB\n")
MOUNTINFO_HOST = ("22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                  "25 22 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n")
MOUNTINFO_PVE = MOUNTINFO_HOST + ("48 22 0:41 / /etc/pve rw,nosuid,nodev,relatime shared:26 - fuse /dev/fuse "
                                  "rw,user_id=0,group_id=0,default_permissions,allow_other\n")


class Uname:
    def __init__(self, machine="x86_64"):
        self.machine = machine


def assert_all_facts(tree, where="facts"):
    """Every leaf under ``tree`` is an envelope (hw/facts.is_fact); an unknown says why.

    Dicts that are not envelopes and lists are walked; an envelope's value is not (a list of
    evidence is one fact). Returns the number of envelopes seen."""
    if isinstance(tree, dict) and "value" in tree:
        assert facts.is_fact(tree), (where, tree)
        assert isinstance(tree["source"], str) and tree["source"], (where, tree)
        if "unknown" in tree:
            assert tree["value"] is None and tree["unknown"], (where, tree)
        return 1
    if isinstance(tree, dict):
        return sum(assert_all_facts(value, "%s.%s" % (where, key)) for key, value in tree.items())
    if isinstance(tree, list):
        return sum(assert_all_facts(value, "%s[%d]" % (where, i)) for i, value in enumerate(tree))
    raise AssertionError("%s is a bare %r, not an envelope" % (where, tree))


def values(tree):
    """The same tree with each envelope replaced by its value (for compact assertions)."""
    if isinstance(tree, dict) and "value" in tree and facts.is_fact(tree):
        return tree["value"]
    if isinstance(tree, dict):
        return dict((key, values(value)) for key, value in tree.items())
    if isinstance(tree, list):
        return [values(value) for value in tree]
    return tree


def cpuinfo(vendor, model, layout, flags):
    """``layout``: list of (physical id, core id) per logical CPU."""
    blocks = []
    for number, (package, core) in enumerate(layout):
        blocks.append("processor\t: %d\nvendor_id\t: %s\nmodel name\t: %s\nphysical id\t: %d\ncore id\t\t: %d\n"
                      "flags\t\t: %s\n" % (number, vendor, model, package, core, flags))
    return "\n".join(blocks) + "\n"


def cpu_sysfs_tree(layout, idle=None, freq=None):
    """/sys/devices/system/cpu for ``layout`` (all online). ``idle``: (driver, governor,
    [(name, latency, residency, disabled CPUs)]); ``freq``: [(policy, cpus, driver, governor, epp)]."""
    base = "sys/devices/system/cpu/"
    last = len(layout) - 1
    files = {base + "online": "0-%d\n" % last, base + "offline": "\n", base + "possible": "0-%d\n" % last}
    for number, (package, core) in enumerate(layout):
        files[base + "cpu%d/topology/physical_package_id" % number] = "%d\n" % package
        files[base + "cpu%d/topology/core_id" % number] = "%d\n" % core
    if idle is not None:
        driver, governor, states = idle
        files[base + "cpuidle/current_driver"] = driver + "\n"
        files[base + "cpuidle/current_governor_ro"] = governor + "\n"
        for number in range(len(layout)):
            for index, (name, latency, residency, disabled) in enumerate(states):
                state = base + "cpu%d/cpuidle/state%d/" % (number, index)
                files.update({state + "name": name + "\n", state + "desc": name + " state\n",
                              state + "latency": "%d\n" % latency, state + "residency": "%d\n" % residency,
                              state + "disable": "1\n" if number in disabled else "0\n"})
    for policy, cpus, driver, governor, epp in freq or []:
        pol = base + "cpufreq/policy%d/" % policy
        files.update({pol + "affected_cpus": " ".join(map(str, cpus)) + "\n",
                      pol + "related_cpus": " ".join(map(str, cpus)) + "\n",
                      pol + "scaling_driver": driver + "\n", pol + "scaling_governor": governor + "\n",
                      pol + "scaling_available_governors": "performance powersave\n"})
        if epp:
            files[pol + "energy_performance_preference"] = epp + "\n"
            files[pol + "energy_performance_available_preferences"] = (
                "default performance balance_performance balance_power power\n")
    return files


def proc_entry(pid, ppid, comm, cgroup="0::/init.scope\n", limits=None):
    files = {"proc/%d/stat" % pid: "%d (%s) S %d %d 0\n" % (pid, comm, ppid, pid),
             "proc/%d/comm" % pid: comm + "\n", "proc/%d/cgroup" % pid: cgroup}
    if limits is not None:
        files["proc/%d/limits" % pid] = limits
    return files


def base_host(hostname="gpu-node-07", cmdline="BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda1 ro quiet",
              dmi=("Dell Inc.", "PowerEdge R760"), clocksources="tsc hpet acpi_pm", release="6.8.0-45-generic"):
    files = {
        "proc/sys/kernel/hostname": hostname + "\n",
        "proc/sys/kernel/osrelease": release + "\n",
        "proc/cmdline": cmdline + "\n",
        "proc/meminfo": MEMINFO,
        "proc/self/mountinfo": MOUNTINFO_HOST,
        "proc/self/uid_map": "         0          0 4294967295\n",
        "sys/devices/system/clocksource/clocksource0/available_clocksource": clocksources + " \n",
        "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
        "sys/kernel/mm/transparent_hugepage/defrag": "always defer defer+madvise [madvise] never\n",
        "sys/kernel/security/lockdown": "[none] integrity confidentiality\n",
        "etc/systemd/system/multi-user.target.wants": None,
    }
    if dmi:
        files["sys/class/dmi/id/sys_vendor"] = dmi[0] + "\n"
        files["sys/class/dmi/id/product_name"] = dmi[1] + "\n"
    for key, value in SYSCTLS.items():
        files["proc/sys/" + key.replace(".", "/")] = value
    files.update(proc_entry(1, 0, "systemd", limits=LIMITS_8M))
    return files


INTEL_LAYOUT = [(0, 0), (0, 1), (0, 0), (0, 1)]  # one socket, two cores, two threads each
AMD_LAYOUT = [(0, 0), (0, 1), (1, 0), (1, 1)]    # two sockets of two cores, no SMT


def intel_host(root):
    """Untuned Intel host: intel_idle with C6 on every CPU, intel_pstate powersave, irqbalance."""
    files = base_host(cmdline="BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on iommu=pt quiet")
    files["proc/cpuinfo"] = cpuinfo("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", INTEL_LAYOUT, INTEL_FLAGS)
    files.update(cpu_sysfs_tree(INTEL_LAYOUT, idle=("intel_idle", "menu", [
        ("POLL", 0, 0, ()), ("C1", 2, 2, ()), ("C1E", 10, 20, ()), ("C6", 170, 600, ())]),
        freq=[(n, [n], "intel_pstate", "powersave", "balance_performance") for n in range(4)]))
    files["sys/devices/system/node/node0/cpulist"] = "0-3\n"
    files["sys/devices/system/node/online"] = "0\n"
    files.update(proc_entry(900, 1, "irqbalance"))
    write_tree(root, files)
    os.symlink("/usr/lib/systemd/system/irqbalance.service",
               str(root / "etc/systemd/system/multi-user.target.wants/irqbalance.service"))
    return sf.Paths(str(root))


def amd_host(root):
    """AMD host: amd_pstate active (amd-pstate-epp), governors and EPP differ by CPU, acpi_idle,
    C2 disabled on CPUs 2-3 (what cpu_power leaves), two NUMA nodes."""
    files = base_host(cmdline="root=/dev/nvme0n1p2 ro amd_pstate=active amd_iommu=on iommu=pt,nopt",
                      dmi=("Supermicro", "AS -4125GS-TNRT"))
    files["proc/cpuinfo"] = cpuinfo("AuthenticAMD", "AMD EPYC 9654 96-Core Processor", AMD_LAYOUT,
                                    "fpu vme de pse tsc msr constant_tsc")
    files.update(cpu_sysfs_tree(AMD_LAYOUT, idle=("acpi_idle", "menu", [
        ("POLL", 0, 0, ()), ("C1", 1, 2, ()), ("C2", 800, 1600, (2, 3))]),
        freq=[(0, [0], "amd-pstate-epp", "performance", "performance"),
              (1, [1], "amd-pstate-epp", "performance", "performance"),
              (2, [2], "amd-pstate-epp", "powersave", "balance_performance"),
              (3, [3], "amd-pstate-epp", "powersave", "balance_performance")]))
    files["sys/devices/system/cpu/amd_pstate/status"] = "active\n"
    files["sys/devices/system/node/node0/cpulist"] = "0-1\n"
    files["sys/devices/system/node/node1/cpulist"] = "2-3\n"
    write_tree(root, files)
    return sf.Paths(str(root))


def vm_host(root, dmi=("QEMU", "Standard PC (Q35 + ICH9, 2009)"), clocksources="tsc kvm-clock"):
    """A KVM guest: no cpuidle, no cpufreq, no NUMA directory, no lockdown, the hypervisor flag."""
    files = base_host(dmi=dmi, clocksources=clocksources, hostname="vm")
    files["proc/cpuinfo"] = cpuinfo("GenuineIntel", "Intel(R) Xeon(R) Processor", [(0, 0), (0, 1)],
                                    INTEL_FLAGS + " hypervisor")
    files.update(cpu_sysfs_tree([(0, 0), (0, 1)]))
    del files["sys/kernel/security/lockdown"]
    write_tree(root, files)
    return sf.Paths(str(root))


PVE_GPU_CAPPED = (b"arch: amd64\nhostname: llm-serve-01\nmemory: 262144\nostype: debian\n"
                  b"rootfs: local-zfs:subvol-101-disk-0,size=64G\nunprivileged: 1\n"
                  b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
                  b"lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
                  b"lxc.prlimit.memlock: 65536\n")
PVE_LOCKED = (b"arch: amd64\nhostname: web-01\nlock: backup\nmemory: 4096\nostype: debian\n"
              b"rootfs: local-lvm:vm-102-disk-0,size=8G\n")


def proxmox_host(root):
    """A Proxmox node (pmxcfs mounted, pve-manager installed) with container 101 (GPU, memlock
    capped at 64 KiB, running) and 102 (locked by a backup, stopped)."""
    files = base_host(hostname="pve-gpu-01", dmi=("Supermicro", "SYS-421GE-TNRT"))
    files["proc/cpuinfo"] = cpuinfo("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", INTEL_LAYOUT, INTEL_FLAGS)
    files.update(cpu_sysfs_tree(INTEL_LAYOUT))
    files.update({
        "proc/self/mountinfo": MOUNTINFO_PVE,
        "etc/pve/nodes/pve-gpu-01/lxc/101.conf": PVE_GPU_CAPPED,
        "etc/pve/nodes/pve-gpu-01/lxc/102.conf": PVE_LOCKED,
        "etc/pve/.version": "1\n",
        "usr/share/pve-manager/index.html.tpl": "<html/>\n",
        "proc/devices": "Character devices:\n195 nvidia-frontend\n508 nvidia-uvm\n\nBlock devices:\n8 sd\n",
    })
    files.update(proc_entry(500, 1, "lxc-start", "0::/lxc.monitor/101\n"))
    files.update(proc_entry(501, 500, "systemd", "0::/lxc/101/ns/init.scope\n", LIMITS_64K))
    files.update(proc_entry(502, 501, "python3", "0::/lxc/101/ns/system.slice/vllm.service\n", LIMITS_64K))
    write_tree(root, files)
    os.symlink("nodes/pve-gpu-01/lxc", str(root / "etc/pve/lxc"))
    return sf.Paths(str(root))


def inside_lxc(root, serving_limits=UNLIMITED):
    """Inside an unprivileged LXC container: PID 1 with the host's 8 MiB ceiling, vllm.service."""
    files = base_host(hostname="llm-serve-01")
    files["proc/cpuinfo"] = cpuinfo("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", INTEL_LAYOUT, INTEL_FLAGS)
    files.update(cpu_sysfs_tree(INTEL_LAYOUT))
    files["proc/self/uid_map"] = "         0     100000      65536\n"
    files["proc/1/environ"] = "container=lxc\0PATH=/usr/bin\0"
    files.update(proc_entry(321, 1, "python3", "0::/system.slice/vllm.service\n", serving_limits))
    files.update(proc_entry(322, 321, "python3", "0::/system.slice/vllm.service\n", serving_limits))
    write_tree(root, files)
    return sf.Paths(str(root))


def tuned_host(root):
    """tuned runs with throughput-performance; power-profiles-daemon installed, not running;
    cpupower enabled; irqbalance masked."""
    paths = intel_host(root)
    files = proc_entry(800, 1, "tuned")
    files.update({
        "etc/tuned/active_profile": "throughput-performance\n",
        "var/lib/power-profiles-daemon/state.ini": "[State]\nCpuDriver=intel_pstate\nProfile=performance\n",
    })
    write_tree(root, files)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    os.symlink("/usr/lib/systemd/system/tuned.service", str(wants / "tuned.service"))
    os.symlink("/usr/lib/systemd/system/cpupower.service", str(wants / "cpupower.service"))
    os.symlink("/dev/null", str(root / "etc/systemd/system/irqbalance.service"))
    return paths


def gather(paths, **options):
    paths.uname = Uname
    found = sf.gather(paths, sysctl_keys=options.pop("sysctl_keys", list(SYSCTLS) + ["vm.nope"]), **options)
    assert_all_facts(found)
    return found


# ---------------------------------------------------------------------------------------------


def test_untuned_intel_host(tmp_path):
    paths = intel_host(tmp_path)
    before = snapshot(tmp_path)
    found = gather(paths)
    assert snapshot(tmp_path) == before  # read-only
    assert values(found["host"]) == {
        "hostname": "gpu-node-07", "machine": "x86_64", "virtualization": "none",
        "container": {"detected": False, "kind": None, "evidence": [], "ignored": []},
        "proxmox": False, "pmxcfs_mounted": False, "lxc_host": False}
    kernel = found["kernel"]
    assert values(kernel["iommu_args"]) == {"iommu": "pt", "intel_iommu": "on", "amd_iommu": None,
                                            "iommu.passthrough": None}
    assert kernel["iommu_passthrough_forced"]["value"] is True and kernel["lockdown"]["value"] == "none"
    assert kernel["release"] == {"value": "6.8.0-45-generic", "source": str(tmp_path / "proc/sys/kernel/osrelease")}
    assert "no amd_pstate driver here" in kernel["amd_pstate_status"]["unknown"]
    cpu = values(found["cpu"])
    assert (cpu["vendor"], cpu["sockets"], cpu["cores"], cpu["threads"]) == ("GenuineIntel", 1, 2, 4)
    assert cpu["numa_nodes"] == [{"node": 0, "cpus": "0-3"}] and (cpu["online"], cpu["offline"]) == ("0-3", "")
    assert cpu["cpuidle"]["driver"] == "intel_idle" and cpu["cpuidle"]["governor"] == "menu"
    assert cpu["cpuidle"]["states"][3] == {"state": "state3", "name": "C6", "latency_us": 170, "residency_us": 600,
                                           "enabled_cpus": "0-3", "disabled_cpus": ""}
    assert [s["name"] for s in cpu["cpuidle"]["states"]] == ["POLL", "C1", "C1E", "C6"]
    assert cpu["cpufreq"] == {"driver": "intel_pstate", "governors": {"powersave": "0-3"},
                              "epp": {"balance_performance": "0-3"}}
    memory = found["memory"]
    assert values(memory)["total_kib"] == 527994112 and values(memory)["swap_used_kib"] == 604
    assert (values(memory)["thp_enabled"], values(memory)["thp_defrag"]) == ("always", "madvise")
    assert memory["sysctls"]["net.ipv4.tcp_rmem"]["value"] == "4096 131072 6291456"  # tabs folded
    assert memory["sysctls"]["vm.nope"]["unknown"].startswith("unknown key vm.nope")
    tuners = values(found["tuners"])
    assert tuners["irqbalance"]["active"] is True and tuners["irqbalance"]["enabled"] is True
    assert tuners["tuned"]["active"] is False and tuners["tuned"]["profile"] is None
    assert "never applied a profile" in found["tuners"]["tuned"]["profile"]["unknown"]
    assert found["tuners"]["irqbalance"]["enabled"]["source"].endswith(
        "multi-user.target.wants/irqbalance.service")
    assert "IRQ affinity" in tuners["irqbalance"]["fights"]
    assert values(found["containers"]) == {"lxc": [], "inside": None}


def test_amd_host_with_amd_pstate_active(tmp_path):
    found = gather(amd_host(tmp_path))
    assert found["kernel"]["amd_pstate_status"]["value"] == "active"
    # iommu=pt,nopt: the kernel takes pt as passthrough (any item starting with pt)
    assert values(found["kernel"]["iommu_args"])["iommu"] == "pt,nopt"
    assert values(found["kernel"]["iommu_args"])["amd_iommu"] == "on"
    cpu = values(found["cpu"])
    assert (cpu["vendor"], cpu["sockets"], cpu["cores"], cpu["threads"]) == ("AuthenticAMD", 2, 4, 4)
    assert cpu["numa_nodes"] == [{"node": 0, "cpus": "0-1"}, {"node": 1, "cpus": "2-3"}]
    assert cpu["cpufreq"] == {"driver": "amd-pstate-epp", "governors": {"performance": "0-1", "powersave": "2-3"},
                              "epp": {"performance": "0-1", "balance_performance": "2-3"}}
    c2 = cpu["cpuidle"]["states"][2]
    assert (c2["name"], c2["enabled_cpus"], c2["disabled_cpus"]) == ("C2", "0-1", "2-3")
    assert found["cpu"]["cpuidle"]["states"][2]["latency_us"]["source"] == str(
        tmp_path / "sys/devices/system/cpu/cpu*/cpuidle/state2/latency")


def test_vm_without_cpuidle_or_cpufreq(tmp_path):
    found = gather(vm_host(tmp_path))
    assert found["host"]["virtualization"] == {
        "value": "kvm", "source": str(tmp_path / "sys/devices/system/clocksource/clocksource0/available_clocksource")}
    cpu = found["cpu"]
    assert cpu["cpuidle"]["driver"]["value"] is None and "does not exist" in cpu["cpuidle"]["driver"]["unknown"]
    assert "has no cpuidle" in cpu["cpuidle"]["states"]["unknown"]
    for key in ("driver", "governors", "epp"):
        assert "no active cpufreq policy" in cpu["cpufreq"][key]["unknown"], key
    assert "without NUMA" in cpu["numa_nodes"]["unknown"]
    assert "no lockdown LSM" in found["kernel"]["lockdown"]["unknown"]
    assert values(cpu)["threads"] == 2 and values(cpu)["cores"] == 2


@pytest.mark.parametrize("dmi, clocks, flag, kind, source", [
    (("QEMU", "Standard PC (i440FX + PIIX, 1996)"), "tsc acpi_pm", True, "qemu", "sys_vendor"),  # TCG
    (("QEMU", "Standard PC (Q35 + ICH9, 2009)"), "tsc kvm-clock", True, "kvm", "clocksource"),
    (("Red Hat", "KVM"), "kvm-clock tsc", True, "kvm", "product_name"),
    (("OpenStack Foundation", "OpenStack Nova"), "kvm-clock", True, "kvm", "sys_vendor"),
    (("VMware, Inc.", "VMware7,1"), "tsc", True, "vmware", "sys_vendor"),
    (("Microsoft Corporation", "Virtual Machine"), "hyperv_clocksource_tsc_page", True, "hyperv", "sys_vendor"),
    (("Microsoft Corporation", "Surface Pro"), "tsc hpet", False, "none", "cpuinfo"),
    (("Xen", "HVM domU"), "xen tsc", True, "xen", "sys_vendor"),
    (("Xenon Systems", "Workstation"), "tsc hpet", False, "none", "cpuinfo"),  # a vendor, not Xen
    (("innotek GmbH", "VirtualBox"), "tsc", True, "virtualbox", "sys_vendor"),
    (("Amazon EC2", "m7i.48xlarge"), "kvm-clock tsc", True, "amazon", "sys_vendor"),
    (None, "tsc kvm-clock", True, "kvm", "clocksource"),   # Firecracker: no DMI at all
    (None, "tsc", True, "vm-other", "cpuinfo"),
    (("Dell Inc.", "PowerEdge R760"), "tsc hpet acpi_pm", False, "none", "cpuinfo"),
])
def test_virtualization(tmp_path, dmi, clocks, flag, kind, source):
    files = base_host(dmi=dmi, clocksources=clocks)
    files["proc/cpuinfo"] = cpuinfo("GenuineIntel", "x", [(0, 0)], INTEL_FLAGS + (" hypervisor" if flag else ""))
    write_tree(tmp_path, files)
    found = sf.virtualization(sf.Paths(str(tmp_path)))
    assert found["value"] == kind
    assert os.path.basename(found["source"]).startswith(source) or found["source"].endswith(source)


def test_xen_from_sys_hypervisor(tmp_path):
    write_tree(tmp_path, {"sys/hypervisor/type": "xen\n"})
    assert sf.virtualization(sf.Paths(str(tmp_path)))["value"] == "xen"
    missing = sf.virtualization(sf.Paths(str(tmp_path / "empty")))
    assert missing["value"] is None and "does not exist" in missing["unknown"]


def test_proxmox_host_with_two_containers(tmp_path):
    paths = proxmox_host(tmp_path)
    before = snapshot(tmp_path)
    found = gather(paths)
    assert snapshot(tmp_path) == before
    host = found["host"]
    assert host["proxmox"] == {"value": True, "source": str(tmp_path / "proc/self/mountinfo")}
    assert host["pmxcfs_mounted"]["value"] is True and host["lxc_host"]["value"] is True
    lxc = found["containers"]["lxc"]
    assert values(lxc) == [
        {"id": "101", "name": "llm-serve-01", "manager": "proxmox", "path": str(tmp_path / "etc/pve/lxc/101.conf"),
         "template": False, "gpu": True, "gpu_evidence": [
             "lxc.cgroup2.devices.allow: c 195:* rwm (nvidia-frontend)",
             "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file"],
         "memlock_limit": "65536", "locked": False, "lock": None, "running": True, "memlock_running": "65536"},
        {"id": "102", "name": "web-01", "manager": "proxmox", "path": str(tmp_path / "etc/pve/lxc/102.conf"),
         "template": False, "gpu": False, "gpu_evidence": [], "memlock_limit": None, "locked": True,
         "lock": "backup", "running": False, "memlock_running": None}]
    assert lxc[0]["memlock_running"]["source"] == str(tmp_path / "proc/501/limits")
    assert lxc[1]["memlock_running"]["unknown"].startswith("not running (no process in a cgroup named")
    assert found["containers"]["inside"] == {"value": None, "source": "derived"}


@pytest.mark.parametrize("mountinfo, version, manager, proxmox, mounted", [
    (MOUNTINFO_PVE, False, False, True, True),
    (MOUNTINFO_HOST, True, False, True, False),    # .version without the mount line (odd, but pmxcfs)
    (MOUNTINFO_HOST, False, True, True, False),    # pve-manager installed, pmxcfs not running
    (MOUNTINFO_HOST, False, False, False, False),
])
def test_proxmox_decision(tmp_path, mountinfo, version, manager, proxmox, mounted):
    files = {"proc/self/mountinfo": mountinfo, "etc/pve": None}
    if version:
        files["etc/pve/.version"] = "1\n"
    if manager:
        files["usr/share/pve-manager/index.html.tpl"] = "x\n"
    write_tree(tmp_path, files)
    is_proxmox, is_mounted = sf.proxmox(sf.Paths(str(tmp_path)))
    assert (is_proxmox["value"], is_mounted["value"]) == (proxmox, mounted)


def test_an_unreadable_config_makes_its_facts_unknown(tmp_path):
    paths = proxmox_host(tmp_path)
    os.mkfifo(str(tmp_path / "etc/pve/nodes/pve-gpu-01/lxc/150.conf"))
    section, warnings = sf.containers(paths)
    assert_all_facts(section)
    broken = section["lxc"][2]
    assert broken["id"]["value"] == "150" and "is a FIFO" in broken["gpu"]["unknown"]
    assert "is a FIFO" in broken["memlock_limit"]["unknown"]
    assert any("150.conf: is a FIFO" in w for w in warnings)


def test_inside_an_lxc_container(tmp_path):
    paths = inside_lxc(tmp_path)
    found = gather(paths, serving_unit="vllm")
    container = values(found["host"]["container"])
    assert container["detected"] is True and container["kind"] == "lxc"
    inside = found["containers"]["inside"]
    assert values(inside) == {"pid1_memlock": "8388608", "serving_unit": "vllm.service",
                              "serving_unit_memlock": "unlimited"}
    assert inside["serving_unit_memlock"]["source"] == str(tmp_path / "proc/321/limits")
    assert inside["serving_unit"]["source"] == "option:serving_unit"
    assert found["containers"]["lxc"] == []
    # without a unit, and with one that does not run
    assert "no serving_unit given" in sf.containers(paths)[0]["inside"]["serving_unit_memlock"]["unknown"]
    gone = sf.containers(paths, "ollama")[0]["inside"]["serving_unit_memlock"]
    assert gone["unknown"] == "no process of ollama.service runs (is it started?)"


def test_tuned_active(tmp_path):
    found = gather(tuned_host(tmp_path))
    tuners = values(found["tuners"])
    assert tuners["tuned"] == {"active": True, "enabled": True, "profile": "throughput-performance",
                               "fights": sf.TUNERS["tuned"]["fights"]}
    assert tuners["power_profiles_daemon"]["active"] is False
    assert tuners["power_profiles_daemon"]["profile"] == "performance"
    assert tuners["cpupower"] == {"enabled": True, "fights": sf.TUNERS["cpupower"]["fights"]}
    # masked: a wants link would not start it
    assert tuners["irqbalance"]["enabled"] is False and tuners["irqbalance"]["active"] is True
    assert found["tuners"]["irqbalance"]["enabled"]["source"] == str(tmp_path / "etc/systemd/system/irqbalance.service")


def test_ppd_runs_under_its_truncated_name(tmp_path):
    paths = intel_host(tmp_path)
    write_tree(tmp_path, proc_entry(810, 1, "power-profiles-"))  # comm holds 15 characters
    tuners = sf.tuners(paths)
    assert tuners["power_profiles_daemon"]["active"]["value"] is True
    assert "power-profiles-daemon is not installed" in tuners["power_profiles_daemon"]["profile"]["unknown"]


def test_no_systemd_and_no_proc(tmp_path):
    tuners = sf.tuners(sf.Paths(str(tmp_path)))
    assert_all_facts(tuners)
    assert "not a systemd system" in tuners["tuned"]["enabled"]["unknown"]
    assert "No such file or directory" in tuners["tuned"]["active"]["unknown"]


def test_an_empty_tree_is_all_unknown_never_a_failure(tmp_path):
    paths = sf.Paths(str(tmp_path))
    found = sf.gather(paths, sysctl_keys=["vm.swappiness"], serving_unit="vllm")
    total = assert_all_facts(found)
    assert total > 40
    assert found["host"]["machine"]["unknown"].startswith("not read: these paths are a tree under")
    assert found["cpu"]["vendor"]["value"] is None and found["memory"]["total_kib"]["value"] is None
    assert found["memory"]["sysctls"]["vm.swappiness"]["unknown"].startswith("unknown key vm.swappiness")


def test_a_reader_that_breaks_makes_its_section_unknown(tmp_path, monkeypatch):
    def broken(_paths):
        raise RuntimeError("surprise")
    monkeypatch.setattr(sf, "kernel", broken)
    section, warnings = sf.section("kernel", sf.Paths(str(tmp_path)))
    assert section == {"value": None, "source": "derived",
                       "unknown": "reading the kernel facts failed: RuntimeError: surprise"}
    assert warnings == ["kernel facts: RuntimeError: surprise"]
    with pytest.raises(ValueError):
        sf.section("gpus", sf.Paths(str(tmp_path)))


@pytest.mark.parametrize("text, word", [
    ("always [madvise] never", "madvise"), ("[none] integrity confidentiality", "none"),
    ("none [integrity] confidentiality\n", "integrity")])
def test_bracketed(text, word):
    assert sf.bracketed(text) == word


def test_parsers_refuse_what_they_cannot_read(tmp_path):
    with pytest.raises(ValueError):
        sf.bracketed("always madvise never")
    with pytest.raises(ValueError):
        sf.parse_ppd_state("[Other]\nProfile=balanced\n")
    assert sf.parse_ppd_state("# c\n[State]\nDriver=x\nProfile = balanced\n") == "balanced"
    assert sf.mount_fstype(MOUNTINFO_PVE, "/etc/pve") == "fuse"
    assert sf.mount_fstype("36 1 0:3 / /my\\040dir rw - tmpfs t rw\n", "/my dir") == "tmpfs"
    assert sf.mount_fstype(MOUNTINFO_HOST, "/etc/pve") is None
    write_tree(tmp_path, {"sys/kernel/mm/transparent_hugepage/enabled": "always madvise never\n"})
    thp = sf.memory(sf.Paths(str(tmp_path)))["thp_enabled"]
    assert "cannot parse 'always madvise never': no [selected] word" in thp["unknown"]


def test_cores_from_sysfs_when_cpuinfo_has_no_ids(tmp_path):
    # arm64: /proc/cpuinfo has no physical or core id
    files = {"proc/cpuinfo": "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\n"
                             "processor\t: 1\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n"}
    files.update(cpu_sysfs_tree([(0, 0), (0, 1)]))
    write_tree(tmp_path, files)
    cpu = sf.cpu(sf.Paths(str(tmp_path)))
    assert_all_facts(cpu)
    assert (cpu["sockets"]["value"], cpu["cores"]["value"], cpu["threads"]["value"]) == (1, 2, 2)
    assert cpu["cores"]["source"].endswith("cpu*/topology/physical_package_id")
    assert cpu["vendor"]["unknown"] == "no 'vendor_id' line in %s" % (tmp_path / "proc/cpuinfo")
