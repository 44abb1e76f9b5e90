"""Node facts of the platform shapes the profiles are chosen for, built in the shape
gpufleet.tuning.node_facts returns (docs/facts.md; a real one: docs/examples/h200-x2/audit.json).

Every leaf is an envelope ``{"source", "value"}`` (``{"source", "unknown", "value": None}`` when
it could not be read). Only what the profile selection and the expectations read is built (the
GPUs with their PCI path, NVLinks and memory bandwidth, the topology pairs, the NVSwitch count,
the host's kind, the CPUs); the rest of a node's facts is left out.

The shapes (``SHAPES``, ``shape(name)``) use the PCI device ids and NVML names these GPUs report
(``lspci -nn``, ``nvidia-smi -q``), their NVLink counts and ends (``nvidia-smi nvlink -s``,
``nvidia-smi topo -m``) and their memory bandwidth as node_facts derives it from NVML's bus width
and memory clock (width / 8 x clock x 2).
"""

import copy
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES_DIR = os.path.join(REPO, "roles", "profile", "files")
REAL_H200_X2 = os.path.join(REPO, "docs", "examples", "h200-x2", "audit.json")
DERIVED = "derived"
DEVICES = "/sys/bus/pci/devices"
NVML_STATE = "nvml:nvmlDeviceGetNvLinkState"
NVML_TYPE = "nvml:nvmlDeviceGetNvLinkRemoteDeviceType"
NVML_PCI = "nvml:nvmlDeviceGetNvLinkRemotePciInfo_v2"
NO_NVML = "NVML not loadable: libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
FAR_UNKNOWN = ("nvmlDeviceGetNvLinkRemotePciInfo_v2: answers FFFFFFFF:FF:FF.0: no PCI address for the far end "
               "(a device outside this machine's PCI tree, such as the NVSwitches of a board passed into a VM)")

# (device id, NVML name, architecture, memory bus width bits, memory max clock MHz)
H100_SXM = ("10de:2330", "NVIDIA H100 80GB HBM3", "hopper", 5120, 2619)
H200_SXM = ("10de:2335", "NVIDIA H200", "hopper", 6144, 3201)
H100_NVL = ("10de:2321", "NVIDIA H100 NVL", "hopper", 6144, 2619)
H100_PCIE = ("10de:2331", "NVIDIA H100 PCIe", "hopper", 5120, 1593)
L40S = ("10de:26b9", "NVIDIA L40S", "ada", 384, 9001)
RTX_PRO_6000 = ("10de:2bb5", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "blackwell", 512, 14001)
B200 = ("10de:2901", "NVIDIA B200", "blackwell", 8192, 3996)
A100_SXM4 = ("10de:20b0", "NVIDIA A100-SXM4-40GB", "ampere", 5120, 1215)


def env(value, source=DERIVED):
    """A fact that was read."""
    return {"source": source, "value": value}


def unknown(source, why):
    """A fact that could not be read, with the reason."""
    return {"source": source, "unknown": why, "value": None}


def bandwidth(width, clock):
    """memory_bandwidth_gbps as node_facts derives it (hw/gpu_facts.memory_bandwidth)."""
    return round(width / 8.0 * clock * 2e6 / 1e9, 1)


def gpu(bdf, model, links=0, active=None, remote="switch", remote_bdf=None, pci_path=None, nvml=True):
    """One entry of ``gpus``. ``model``: one of the tuples above. ``links``: the NVLinks NVML
    lists, ``active`` of them up (all by default) ending at ``remote`` (switch or gpu, the far
    address ``remote_bdf`` or unknown as a VM sees a switch). ``pci_path``: the path from the root
    bus (``["pci0000:00", root port, ..., bdf]``; root port then GPU by default). ``nvml`` False:
    NVML could not be loaded (name, NVLinks and bandwidth unknown, sysfs facts kept)."""
    device_id, name, arch, width, clock = model
    active = links if active is None else active
    root_bus = "%s:%02x" % (bdf[:4], int(bdf[5:7], 16) - 1)
    path = pci_path or ["pci" + root_bus, root_bus + ":01.0", bdf]
    entry = {
        "bdf": env(bdf, "%s/%s" % (DEVICES, bdf)),
        "device_id": env(device_id, "%s/%s/device" % (DEVICES, bdf)),
        "architecture": env(arch),
        "pci_path": env(path, "%s/%s" % (DEVICES, bdf)),
    }
    if not nvml:
        entry.update(name=unknown("nvml:nvmlDeviceGetName", NO_NVML),
                     memory_bandwidth_gbps=unknown(DERIVED, "the memory bus width or clock is unknown: " + NO_NVML),
                     nvlink=unknown(NVML_STATE, NO_NVML), nvlink_links=unknown(DERIVED, NO_NVML),
                     nvlink_active=unknown(DERIVED, NO_NVML))
        return entry
    nvlinks = []
    for link in range(links):
        up = link < active
        if not up:
            far_type, far_bdf = env(None, NVML_TYPE), env(None, NVML_PCI)
        elif remote == "switch" and remote_bdf is None:
            far_type, far_bdf = env("switch", NVML_TYPE), unknown(NVML_PCI, FAR_UNKNOWN)
        else:
            far_type, far_bdf = env(remote, NVML_TYPE), env(remote_bdf, NVML_PCI)
        nvlinks.append({"link": env(link, NVML_STATE), "active": env(up, NVML_STATE),
                        "remote_type": far_type, "remote_bdf": far_bdf})
    entry.update(name=env(name, "nvml:nvmlDeviceGetName"),
                 memory_bus_width_bits=env(width, "nvml:nvmlDeviceGetMemoryBusWidth"),
                 memory_max_clock_mhz=env(clock, "nvml:nvmlDeviceGetMaxClockInfo"),
                 memory_bandwidth_gbps=env(bandwidth(width, clock)),
                 nvlink=nvlinks, nvlink_links=env(len(nvlinks)), nvlink_active=env(active if links else 0))
    return entry


def _pairs(gpus):
    """topology.pairs: nvlink_via nvswitch where both GPUs' links end at switches, direct where
    they end at each other, none otherwise."""
    pairs = []
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            links = [gpus[a]["nvlink"], gpus[b]["nvlink"]]
            ends = [set(link["remote_type"]["value"] for link in each if link["active"]["value"])
                    for each in links if isinstance(each, list)]
            if len(ends) < 2:
                via, link, count = unknown(DERIVED, NO_NVML), env("unknown"), unknown(DERIVED, NO_NVML)
            elif "switch" in ends[0] and "switch" in ends[1]:
                via, link = env("nvswitch"), env("nvlink")
                count = env(min(gpus[a]["nvlink_active"]["value"], gpus[b]["nvlink_active"]["value"]))
            elif "gpu" in ends[0]:
                via, link, count = env("direct"), env("nvlink"), env(gpus[a]["nvlink_active"]["value"])
            else:
                via, link, count = env("none"), env("pcie"), env(0)
            pairs.append({"a": env(a), "b": env(b), "link": link, "nvlink_count": count, "nvlink_via": via,
                          "peer_access": env("ok", "nvml:nvmlDeviceGetP2PStatus"), "bridges": []})
    return pairs


def build_facts(gpus=(), kind="bare_metal", cpu_vendor="GenuineIntel", online="0-127", sockets=2, nvswitches=0,
                virtualization=None, model_name=None):
    """The facts of a node. ``kind``: bare_metal, vm, proxmox (a Proxmox VE host), lxc (an LXC
    guest) or docker (another container); ``virtualization`` the hypervisor read (kvm in a VM,
    none elsewhere by default). ``online``: the kernel's list of online CPUs (None: unknown)."""
    gpus = [copy.deepcopy(g) for g in gpus]
    for index, entry in enumerate(gpus):
        entry["index"] = env(index)
    container_kind = {"lxc": "lxc", "docker": "docker"}.get(kind)
    where = "/proc/1/environ,/proc/self/uid_map,/proc/1/cgroup,/proc/sys"
    virt = virtualization or ("kvm" if kind == "vm" else "none")
    virt_source = ("/sys/devices/system/clocksource/clocksource0/available_clocksource" if virt == "kvm"
                   else "/proc/cpuinfo")
    return {
        "host": {
            "hostname": env("node", "/proc/sys/kernel/hostname"),
            "machine": env("x86_64", "uname(2)"),
            "virtualization": env(virt, virt_source),
            "container": {
                "detected": env(container_kind is not None, where),
                "kind": env(container_kind, where),
                "evidence": env(["PID 1 environment has container=%s" % container_kind] if container_kind else [], where),
                "ignored": env([], where),
            },
            "proxmox": env(kind == "proxmox", "/usr/share/pve-manager"),
            "lxc_host": env(kind == "proxmox", "/etc/pve/lxc,/var/lib/lxc"),
        },
        "cpu": {
            "vendor": env(cpu_vendor, "/proc/cpuinfo"),
            "model_name": env(model_name or ("AMD EPYC 9354 32-Core Processor" if cpu_vendor == "AuthenticAMD"
                                             else "Intel(R) Xeon(R) Platinum 8480C"), "/proc/cpuinfo"),
            "sockets": env(sockets, "/proc/cpuinfo"),
            "online": (env(online, "/sys/devices/system/cpu/online") if online is not None
                       else unknown("/sys/devices/system/cpu/online", "Permission denied")),
            "offline": env("", "/sys/devices/system/cpu/offline"),
        },
        "gpus": gpus,
        "topology": {"pairs": _pairs(gpus)},
        "driver": {
            "loaded": env(bool(gpus), "/sys/module/nvidia"),
            "nvswitches": env(nvswitches, DEVICES),
            "fabricmanager_active": env(nvswitches > 0, "/proc/*/comm"),
        },
        "kernel": {"cmdline": env("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro", "/proc/cmdline")},
    }


def switch_path(bdf, root="0000:00:01.1", up="0000:01:00.0", down="0000:02:00.0"):
    """The pci_path of a GPU behind a PCIe switch: root port, switch upstream port, switch
    downstream port, the GPU."""
    return ["pci%s" % root[:7], root, up, down, bdf]


# The 8 GPU addresses of an HGX H100/H200/B200 board (DGX H100 numbering), each behind the
# board's PCIe switch.
HGX_BDFS = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
            "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0")


def hgx_path(bdf):
    """The pci_path of an HGX GPU: a root port three buses up, the board's PCIe switch (upstream
    and downstream port) between them."""
    bus = int(bdf[5:7], 16)
    return switch_path(bdf, "0000:%02x:01.0" % (bus - 3), "0000:%02x:00.0" % (bus - 2), "0000:%02x:00.0" % (bus - 1))


def _hgx(model, nvswitches):
    gpus = [gpu(bdf, model, links=18, pci_path=hgx_path(bdf)) for bdf in HGX_BDFS]
    return build_facts(gpus, kind="bare_metal", cpu_vendor="GenuineIntel", online="0-223", sockets=2,
                       nvswitches=nvswitches)


def hgx_h100():
    """HGX H100 8-GPU on bare metal: 18 NVLink 4 links per GPU to the board's 4 NVSwitches (4
    NVSwitch functions on the bus, fabric manager running), 2 Xeon Platinum 8480C sockets."""
    return _hgx(H100_SXM, 4)


def hgx_h200():
    """HGX H200 8-GPU on bare metal: as the H100 board, with H200 SXM GPUs."""
    return _hgx(H200_SXM, 4)


def hgx_b200():
    """HGX B200 8-GPU on bare metal: 18 NVLink 5 links per GPU to the board's two NVSwitch
    chips."""
    return build_facts([gpu(bdf, B200, links=18, pci_path=hgx_path(bdf)) for bdf in HGX_BDFS],
                       cpu_vendor="GenuineIntel", online="0-223", nvswitches=2,
                       model_name="INTEL(R) XEON(R) PLATINUM 8570")


def vm_h100_x1(nvml=True):
    """The CI/device machines: a KVM guest given one H100 SXM of an HGX board; no NVSwitch
    function and its NVLinks inactive (or NVML not loadable: ``nvml`` False)."""
    return build_facts([gpu("0000:00:06.0", H100_SXM, links=18, active=0, nvml=nvml,
                            pci_path=["pci0000:00", "0000:00:06.0"])],
                       kind="vm", online="0-15", sockets=1, model_name="Intel(R) Xeon(R) Platinum 8480+")


def vm_h200_x2():
    """A KVM guest with two H200 SXM of an HGX board (docs/examples/h200-x2): every link ends at
    a switch whose address NVML cannot give, no NVSwitch function in the guest."""
    return build_facts([gpu(bdf, H200_SXM, links=18, pci_path=["pci0000:00", bdf])
                        for bdf in ("0000:00:06.0", "0000:00:07.0")],
                       kind="vm", online="0-31", sockets=1, model_name="Intel(R) Xeon(R) Processor")


def h100_nvl_pair():
    """Two H100 NVL cards joined by three NVLink bridges: 12 links each, to the other GPU."""
    bdfs = ("0000:41:00.0", "0000:c1:00.0")
    return build_facts([gpu(bdfs[0], H100_NVL, links=12, remote="gpu", remote_bdf=bdfs[1]),
                        gpu(bdfs[1], H100_NVL, links=12, remote="gpu", remote_bdf=bdfs[0])],
                       cpu_vendor="AuthenticAMD", online="0-127")


def h100_pcie_unbridged(count=2):
    """H100 PCIe cards without bridges: their 12 NVLinks listed, none active."""
    bdfs = ("0000:41:00.0", "0000:c1:00.0", "0000:01:00.0", "0000:81:00.0")[:count]
    return build_facts([gpu(bdf, H100_PCIE, links=12, active=0) for bdf in bdfs], online="0-63")


def l40s_x4():
    """Four L40S on CPU root ports (no switch), no NVLink."""
    return build_facts([gpu(bdf, L40S) for bdf in ("0000:17:00.0", "0000:31:00.0", "0000:b1:00.0", "0000:ca:00.0")],
                       online="0-127")


def rtx_pro_6000_x8():
    """Eight RTX PRO 6000 Blackwell Server Edition behind two PCIe switches on AMD EPYC, a
    Proxmox VE host."""
    gpus = []
    for index in range(8):
        bus = 0x41 + index if index < 4 else 0xc1 + index - 4
        bdf = "0000:%02x:00.0" % bus
        root, up, down_bus = ("0000:3e:01.1", "0000:3f:00.0", 0x40) if index < 4 else ("0000:be:01.1", "0000:bf:00.0", 0xc0)
        gpus.append(gpu(bdf, RTX_PRO_6000, pci_path=switch_path(bdf, root, up, "0000:%02x:%02x.0" % (down_bus, index % 4))))
    return build_facts(gpus, kind="proxmox", cpu_vendor="AuthenticAMD", online="0-127", sockets=2)


def unknown_gpu():
    """An A100 SXM4 (no shipped platform holds it): 12 NVLink 3 links to switches."""
    return build_facts([gpu(bdf, A100_SXM4, links=12, pci_path=hgx_path(bdf)) for bdf in ("0000:07:00.0", "0000:0f:00.0")],
                       cpu_vendor="AuthenticAMD", online="0-255", nvswitches=6)


def mixed():
    """An H100 PCIe beside an L40S."""
    return build_facts([gpu("0000:41:00.0", H100_PCIE, links=12, active=0), gpu("0000:c1:00.0", L40S)], online="0-63")


def no_gpu():
    """A node without an NVIDIA GPU."""
    return build_facts([], online="0-63")


def lxc_l40s():
    """An LXC guest (on a Proxmox host) given two L40S."""
    return build_facts([gpu(bdf, L40S) for bdf in ("0000:17:00.0", "0000:31:00.0")], kind="lxc", online="0-63")


SHAPES = {
    "hgx-h100": hgx_h100,
    "hgx-h200": hgx_h200,
    "hgx-b200": hgx_b200,
    "vm-h100-x1": vm_h100_x1,
    "vm-h100-x1-no-nvml": lambda: vm_h100_x1(nvml=False),
    "vm-h200-x2": vm_h200_x2,
    "h100-nvl-pair": h100_nvl_pair,
    "h100-pcie": h100_pcie_unbridged,
    "l40s-x4": l40s_x4,
    "rtx-pro-6000-x8": rtx_pro_6000_x8,
    "a100": unknown_gpu,
    "mixed": mixed,
    "no-gpu": no_gpu,
    "lxc-l40s": lxc_l40s,
}


def shape(name):
    """The facts of one shape, a new copy each call."""
    return SHAPES[name]()
