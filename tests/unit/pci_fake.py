"""Builders for PCI config space bytes and fake /sys/bus/pci trees.

Config space is built byte by byte (header, Status bit 4, the capability chain, the Express
registers), so every test states exactly what the device holds.
"""

import os
import struct

GPU_DEVCTL = 0x2134  # MRRS 512 (bits 14:12 = 2), MPS 256 (bits 7:5 = 1), relaxed ordering, error reporting
LNK_GEN5_X16 = (16 << 4) | 5
# ACS (extended capability 0x000D): what a switch downstream port typically offers (source
# validation, translation blocking, request and completion redirect, upstream forwarding,
# direct translated P2P; no egress control) and what the kernel enables with an IOMMU on
# (pci_std_enable_acs: SV, RR, CR, UF).
EXT_CAP_ID_AER = 0x0001
EXT_CAP_ID_ACS = 0x000D
ACS_CAPABLE = 0x005F
ACS_REDIRECT = 0x001D
FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pci")


class Config:
    """A device's config space under construction."""

    def __init__(self, vendor=0x10DE, device=0x2335, class_code=0x030200, header_type=0, size=4096):
        self.data = bytearray(size)
        self.u16(0x00, vendor)
        self.u16(0x02, device)
        self.u8(0x09, class_code & 0xFF)
        self.u8(0x0A, (class_code >> 8) & 0xFF)
        self.u8(0x0B, (class_code >> 16) & 0xFF)
        self.u8(0x0E, header_type)

    def u8(self, offset, value):
        self.data[offset] = value & 0xFF
        return self

    def u16(self, offset, value):
        struct.pack_into("<H", self.data, offset, value)
        return self

    def u32(self, offset, value):
        struct.pack_into("<I", self.data, offset, value)
        return self

    def word(self, offset):
        return struct.unpack_from("<H", self.data, offset)[0]

    def chain(self, *caps):
        """Capabilities ``(offset, cap_id)`` linked in the order given; sets Status bit 4."""
        self.u16(0x06, self.word(0x06) | 0x10)
        self.u8(0x34, caps[0][0] if caps else 0)
        for index, (offset, cap_id) in enumerate(caps):
            nxt = caps[index + 1][0] if index + 1 < len(caps) else 0
            self.u8(offset, cap_id).u8(offset + 1, nxt)
        return self

    def express(self, offset, devctl=GPU_DEVCTL, port_type=0, devcap=0x1, lnkcap=LNK_GEN5_X16,
                lnksta=LNK_GEN5_X16, devsta=0x0009):
        """Fill the PCI Express registers at ``offset`` (the capability must be in the chain)."""
        self.u16(offset + 0x02, 0x0002 | (port_type << 4))
        self.u32(offset + 0x04, devcap)
        self.u16(offset + 0x08, devctl)
        self.u16(offset + 0x0A, devsta)
        self.u32(offset + 0x0C, lnkcap)
        self.u16(offset + 0x12, lnksta)
        return self

    def extended(self, *caps):
        """Extended capabilities ``(offset, cap_id)`` or ``(offset, cap_id, version)`` linked in
        the order given (the first belongs at 0x100): header bits 15:0 ID, 19:16 version,
        31:20 next offset."""
        for index, cap in enumerate(caps):
            offset, cap_id = cap[0], cap[1]
            version = cap[2] if len(cap) > 2 else 1
            nxt = caps[index + 1][0] if index + 1 < len(caps) else 0
            self.u32(offset, (cap_id & 0xFFFF) | ((version & 0xF) << 16) | (nxt << 20))
        return self

    def acs(self, offset, capable=ACS_CAPABLE, ctrl=0):
        """ACS Capability (+4) and Control (+6) of an ACS capability at ``offset``."""
        self.u16(offset + 0x04, capable)
        self.u16(offset + 0x06, ctrl)
        return self

    def bytes(self):
        return bytes(self.data)


def gpu_config(devctl=GPU_DEVCTL, **kw):
    """An H200-like GPU: power management at 0x40, MSI at 0x48, Express at 0x60, MSI-X at 0x9c."""
    config = Config(**kw).chain((0x40, 0x01), (0x48, 0x05), (0x60, 0x10), (0x9C, 0x11))
    return config.express(0x60, devctl=devctl).bytes()


def bridge_config(devctl=0x0020 | 0x8000, port_type=4, **kw):
    """A root port (header type 1) with Express at 0x40; bit 15 (bridge config retry) set."""
    kw.setdefault("vendor", 0x8086)
    kw.setdefault("device", 0x3c04)
    kw.setdefault("class_code", 0x060400)
    config = Config(header_type=1, **kw).chain((0x40, 0x10), (0x80, 0x05))
    return config.express(0x40, devctl=devctl, port_type=port_type).bytes()


def port_config(port_type=6, acs_ctrl=None, acs_capable=ACS_CAPABLE, **kw):
    """A PCIe switch port (6 downstream, 5 upstream) or root port (4), header type 1, Express
    at 0x40; AER at 0x100, then ACS at 0x148 when ``acs_ctrl`` is given (else no ACS)."""
    kw.setdefault("vendor", 0x1000)
    kw.setdefault("device", 0xC030)
    kw.setdefault("class_code", 0x060400)
    config = Config(header_type=1, **kw).chain((0x40, 0x10), (0x80, 0x05))
    config.express(0x40, devctl=0x0020, port_type=port_type)
    if acs_ctrl is None:
        config.extended((0x100, EXT_CAP_ID_AER, 2))
    else:
        config.extended((0x100, EXT_CAP_ID_AER, 2), (0x148, EXT_CAP_ID_ACS, 1))
        config.acs(0x148, capable=acs_capable, ctrl=acs_ctrl)
    return config.bytes()


def conventional_config(**kw):
    """A conventional PCI device: power management only, no Express capability, 256 bytes."""
    kw.setdefault("size", 256)
    return Config(**kw).chain((0x40, 0x01), (0x50, 0x05)).bytes()


def add_device(root, bdf, config, parents=(), vendor=None, device=None, class_code=None,
               driver=None, numa_node=0, link=None):
    """Create /sys/devices/pci<dom:bus>/<parents...>/<bdf> with its files and the bus link.

    ``link``: dict of sysfs link attributes (current_link_speed, ...). Identity attributes
    default to what the config bytes say.
    """
    root = str(root)
    domain_bus = bdf.rsplit(":", 1)[0] if not parents else parents[0].rsplit(":", 1)[0]
    rel = os.path.join("sys", "devices", "pci%s" % domain_bus, *(list(parents) + [bdf]))
    path = os.path.join(root, rel)
    os.makedirs(path, exist_ok=True)
    raw = bytes(config)
    if vendor is None and len(raw) >= 4:
        vendor = "0x%04x" % struct.unpack_from("<H", raw, 0)[0]
        device = "0x%04x" % struct.unpack_from("<H", raw, 2)[0]
    if class_code is None and len(raw) >= 12:
        class_code = "0x%02x%02x%02x" % (raw[0x0B], raw[0x0A], raw[0x09])
    files = {"config": raw, "vendor": "%s\n" % vendor, "device": "%s\n" % device,
             "class": "%s\n" % class_code, "numa_node": "%d\n" % numa_node}
    for name, value in (link or {}).items():
        files[name] = "%s\n" % value
    for name, content in files.items():
        with open(os.path.join(path, name), "wb") as handle:
            handle.write(content if isinstance(content, bytes) else content.encode())
    if driver:
        drv = os.path.join(root, "sys", "bus", "pci", "drivers", driver)
        os.makedirs(drv, exist_ok=True)
        os.symlink(os.path.relpath(drv, path), os.path.join(path, "driver"))
    bus = os.path.join(root, "sys", "bus", "pci", "devices")
    os.makedirs(bus, exist_ok=True)
    os.symlink(os.path.relpath(path, bus), os.path.join(bus, bdf))
    return os.path.join(path, "config")


def add_iommu_group(root, bdf, group, kind="DMA"):
    """/sys/kernel/iommu_groups/<group>/type holding ``kind`` and the device's iommu_group link."""
    root = str(root)
    group_dir = os.path.join(root, "sys", "kernel", "iommu_groups", str(group))
    os.makedirs(group_dir, exist_ok=True)
    with open(os.path.join(group_dir, "type"), "w") as handle:
        handle.write("%s\n" % kind)
    device = os.path.realpath(os.path.join(root, "sys", "bus", "pci", "devices", bdf))
    os.symlink(os.path.relpath(group_dir, device), os.path.join(device, "iommu_group"))


def h200_fixtures():
    """``{bdf: (config bytes, sysfs attributes)}`` of the two GPUs of nvidia-h200-x2 as read
    there (tests/unit/fixtures/pci), or {} before those files exist."""
    found = {}
    if not os.path.isdir(FIXTURE_DIR):
        return found
    for name in sorted(os.listdir(FIXTURE_DIR)):
        if not (name.startswith("h200-") and name.endswith(".config")):
            continue
        stem = name[:-len(".config")]
        with open(os.path.join(FIXTURE_DIR, stem + ".attrs")) as handle:
            attrs = dict(line.strip().split("=", 1) for line in handle if "=" in line)
        found[stem[len("h200-"):].replace("_", ":")] = (read_bytes(os.path.join(FIXTURE_DIR, name)), attrs)
    return found


def read_bytes(path):
    with open(str(path), "rb") as handle:
        return handle.read()


def with_word(data, offset, value):
    """``data`` with the 16-bit word at ``offset`` replaced: the expected whole file after a write."""
    out = bytearray(data)
    struct.pack_into("<H", out, offset, value)
    return bytes(out)
