# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI configuration space through sysfs: the capability list, PCI Express Device Control, link.

Why pure Python over ``/sys/bus/pci/devices/*/config``: the GPU machines have neither lspci
nor setpci, and parsing their output would be fragile anyway. The kernel exposes each
function's config space as a binary file: reads and writes at an offset become config cycles
of that width, so a 2-byte ``os.pwrite`` at an even offset is one 16-bit config write.

Why a 16-bit masked write, done here and nowhere else: Device Control (PCI Express capability
+ 0x08) holds Max Read Request Size in bits 14:12, and its neighbours matter. Bit 15 starts a
function-level reset on an endpoint (and is Bridge Configuration Retry Enable on a bridge);
bits 7:5 are Max Payload Size, which must match the rest of the hierarchy; the next word is
Device Status, whose error bits are write-1-to-clear, so a 32-bit write would clear them.
``set_mrrs`` reads the word right before writing, changes bits 14:12 only, reads back, and
puts the old word back when the device did not take the new value (QEMU's emulated devices
accept the write and keep 128).

Why this file imports only the standard library: the pcie_maxreadreq module installs a small
helper that a udev rule runs when a GPU appears or its driver binds, and that helper is this
file's source followed by a call to ``cli_main``. One implementation serves both, so the boot
path cannot drift from what the module tested.

Readers without CAP_SYS_ADMIN get only the first 64 bytes of config space (no capability list
at all): that is reported as "needs root", never as "no PCI Express capability".
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import struct
import sys

SYSFS = "/sys"

# Common header.
PCI_VENDOR_ID = 0x00
PCI_STATUS = 0x06
PCI_STATUS_CAP_LIST = 0x10  # Status bit 4: a capability list exists
PCI_HEADER_TYPE = 0x0E
PCI_CAPABILITY_LIST = 0x34
PCI_CB_CAPABILITY_LIST = 0x14  # CardBus bridges (header type 2) keep the pointer here
HEADER_BYTES = 0x40
UNPRIVILEGED_BYTES = 64  # what the kernel lets a reader without CAP_SYS_ADMIN see
STANDARD_BYTES = 256  # capabilities of the standard list live below this
MAX_CONFIG_BYTES = 4096

# PCI Express capability and its registers (offsets from the capability).
CAP_ID_EXP = 0x10
EXP_FLAGS = 0x02  # bits 7:4 device/port type
EXP_DEVCAP = 0x04  # bits 2:0 Max Payload Size Supported
EXP_DEVCTL = 0x08  # bits 14:12 MRRS, bits 7:5 MPS
EXP_LNKCAP = 0x0C  # bits 3:0 max speed, 9:4 max width
EXP_LNKSTA = 0x12  # bits 3:0 current speed, 9:4 negotiated width
EXP_MIN_BYTES = 0x14  # the capability must be readable up to the end of Link Status

DEVCTL_MRRS_MASK = 0x7000
DEVCTL_MRRS_SHIFT = 12
DEVCTL_MPS_MASK = 0x00E0
DEVCTL_MPS_SHIFT = 5

# Encodings 0..5 of MRRS and MPS; 6 and 7 are reserved.
SIZES = (128, 256, 512, 1024, 2048, 4096)

LINK_SPEEDS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}  # GT/s by encoding (= gen)

PORT_TYPES = {
    0: "endpoint",
    1: "legacy endpoint",
    4: "root port",
    5: "switch upstream port",
    6: "switch downstream port",
    7: "PCIe to PCI bridge",
    8: "PCI to PCIe bridge",
    9: "root complex integrated endpoint",
    10: "root complex event collector",
}

# User input: DDDD:BB:DD.F or BB:DD.F (device 0-1f, function 0-7); the domain has 4 to 8 hex
# digits (VMD domains have five, NVML and the CUDA driver print eight).
_BDF_RE = re.compile(r"^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([01][0-9a-f])\.([0-7])\Z")
# Names the kernel gives (VMD domains have five hex digits).
_SYSFS_BDF_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]\Z")
LINK_ATTRS = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


class PciError(Exception):
    """A PCI access failed or an input is invalid; the message says which device and why."""


class Unsupported(PciError):
    """The device cannot be handled (no root, no Express capability, broken list): skip it."""


class NotTaken(PciError):
    """The device kept another value after a write; the old word was written back."""


# ---------------------------------------------------------------- names and sysfs identity

def parse_bdf(text):
    """Normalize a BDF to ``dddd:bb:dd.f`` as sysfs names it (lower case, the domain with at
    least 4 digits: ``00000000:1B:00.0`` is ``0000:1b:00.0``); raise PciError naming what is
    accepted."""
    value = text.strip().lower() if isinstance(text, str) else None
    match = _BDF_RE.match(value) if value else None
    if not match:
        raise PciError("device %r is not a PCI address: use DDDD:BB:DD.F or BB:DD.F in hex "
                       "(domain 4 to 8 digits, bus 2, device 00-1f, function 0-7), e.g. 0000:41:00.0"
                       % (text,))
    return "%04x:%s:%s.%s" % (int(match.group(1) or "0", 16), match.group(2), match.group(3), match.group(4))


def is_sysfs_bdf(name):
    return bool(_SYSFS_BDF_RE.match(name))


_ROOT_BUS_RE = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}\Z")


def device_chain(sysfs, bdf):
    """``["pci0000:00", <bridge>, ..., bdf]`` from the device's real path under
    /sys/devices/pci*, or None when it does not resolve there. A nested root bus (a VMD domain)
    is passed through: only PCI functions are kept below the root bus."""
    parts = os.path.realpath(device_dir(sysfs, bdf)).split(os.sep)
    for index, name in enumerate(parts):
        if _ROOT_BUS_RE.match(name) and index + 1 < len(parts) and is_sysfs_bdf(parts[index + 1]):
            below = [p for p in parts[index + 1:] if is_sysfs_bdf(p)]
            if below and below[-1] == bdf:
                return [name] + below
            return None
    return None


def shared_bridges(chain_a, chain_b):
    """How many bridges two chains (from device_chain) share from the top: 0 under different
    root buses or when they part right below the root bus."""
    if chain_a[0] != chain_b[0]:
        return 0
    shared = 0
    for x, y in zip(chain_a[1:-1], chain_b[1:-1]):
        if x != y:
            break
        shared += 1
    return shared


def path_bridges(chain_a, chain_b):
    """The bridges between two endpoints (chains from device_chain), below their lowest common
    ancestor: A's side first, then B's. A shared bridge is where peer traffic turns around."""
    shared = shared_bridges(chain_a, chain_b)
    return chain_a[1 + shared:-1] + chain_b[1 + shared:-1]


def write_failure(register, label, exc, sysfs=SYSFS):
    """Why a config-space write of ``register`` on the device ``label`` names failed, for people:
    an OSError with kernel lockdown or missing privileges named, anything else as it says."""
    if isinstance(exc, (OSError, IOError)):
        text = "failed to write %s of %s: %s" % (register, label, exc.strerror or exc)
        mode = lockdown(sysfs)
        if mode:
            text += " (kernel lockdown is %s: it forbids config space writes from user space)" % mode
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            text += " (needs root and a read-write /sys)"
        return text
    return "%s %s" % (label, exc)


def devices_dir(sysfs=SYSFS):
    return os.path.join(sysfs, "bus", "pci", "devices")


def device_dir(sysfs, bdf):
    return os.path.join(devices_dir(sysfs), bdf)


def config_path(sysfs, bdf):
    return os.path.join(device_dir(sysfs, bdf), "config")


def list_devices(sysfs=SYSFS):
    """Every PCI function the kernel knows, sorted by address."""
    try:
        names = os.listdir(devices_dir(sysfs))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        raise
    return sorted(name for name in names if is_sysfs_bdf(name))


def exists(sysfs, bdf):
    return os.path.isdir(device_dir(sysfs, bdf))


def read_attr(sysfs, bdf, name):
    """A sysfs attribute of the device, stripped; None when absent or unreadable."""
    try:
        with open(os.path.join(device_dir(sysfs, bdf), name), "rb") as handle:
            return handle.read().decode("ascii", "replace").strip()
    except (OSError, IOError):
        return None


def identity(sysfs, bdf):
    """vendor, device, class (as sysfs prints them, 0x...), bound driver, NUMA node."""
    try:
        driver = os.path.basename(os.readlink(os.path.join(device_dir(sysfs, bdf), "driver")))
    except OSError:
        driver = None
    numa = read_attr(sysfs, bdf, "numa_node")
    try:
        numa_node = int(numa) if numa is not None else None
    except ValueError:
        numa_node = None
    return {
        "vendor": read_attr(sysfs, bdf, "vendor"),
        "device": read_attr(sysfs, bdf, "device"),
        "class": read_attr(sysfs, bdf, "class"),
        "driver": driver,
        "numa_node": numa_node,
    }


def upstream_bridges(sysfs, bdf):
    """The PCI bridges above a device (root port first), from its path under /sys/devices.

    /sys/bus/pci/devices/X links to /sys/devices/pci0000:00/<root port>/<switch up>/<switch
    down>/X: every component between the host bridge and the device that names a PCI function
    is a bridge the device's requests pass through.
    """
    real = os.path.realpath(device_dir(sysfs, bdf))
    parts = real.split(os.sep)
    found = []
    for index, name in enumerate(parts[:-1]):
        if not name.startswith("pci") or not is_sysfs_bdf(parts[index + 1]):
            continue
        for component in parts[index + 1:-1]:
            if is_sysfs_bdf(component) and exists(sysfs, component):
                found.append(component)
        break
    return found


def lockdown(sysfs=SYSFS):
    """The kernel lockdown mode in force ("integrity", "confidentiality"), or None."""
    try:
        with open(os.path.join(sysfs, "kernel", "security", "lockdown")) as handle:
            text = handle.read()
    except (OSError, IOError):
        return None
    match = re.search(r"\[(\w+)\]", text)
    if not match or match.group(1) == "none":
        return None
    return match.group(1)


# ------------------------------------------------------------------ reading config space

def read_config(sysfs, bdf):
    """The bytes of the device's config space the kernel lets this process read."""
    chunks = []
    total = 0
    with open(config_path(sysfs, bdf), "rb") as handle:
        while total < MAX_CONFIG_BYTES:
            chunk = handle.read(MAX_CONFIG_BYTES - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks)


def u8(data, offset):
    if offset < 0 or offset + 1 > len(data):
        raise PciError("config offset 0x%x is outside the %d readable bytes" % (offset, len(data)))
    return data[offset]


def u16(data, offset):
    if offset < 0 or offset + 2 > len(data):
        raise PciError("config offset 0x%x is outside the %d readable bytes" % (offset, len(data)))
    return struct.unpack_from("<H", data, offset)[0]


def u32(data, offset):
    if offset < 0 or offset + 4 > len(data):
        raise PciError("config offset 0x%x is outside the %d readable bytes" % (offset, len(data)))
    return struct.unpack_from("<I", data, offset)[0]


def _check_readable(data):
    if len(data) <= UNPRIVILEGED_BYTES:
        raise Unsupported("only the first %d bytes of config space are readable: reading the "
                          "capability list needs root (CAP_SYS_ADMIN)" % len(data))
    if u16(data, PCI_VENDOR_ID) == 0xFFFF:
        raise Unsupported("config space reads as all ones: the device does not respond "
                          "(removed, powered off or in error recovery)")


def walk_capabilities(data):
    """Yield ``(cap_id, offset)`` along the standard capability list.

    Guards: the list exists only when Status bit 4 is set; the low 2 bits of every pointer are
    reserved and masked; a pointer must land after the 64-byte header and leave room for the
    ID and next bytes inside what was read; a pointer seen twice, or more entries than the
    standard space can hold, is a loop. Each violation raises Unsupported with the offset.
    """
    _check_readable(data)
    if not u16(data, PCI_STATUS) & PCI_STATUS_CAP_LIST:
        return
    header_type = u8(data, PCI_HEADER_TYPE) & 0x7F
    pointer = u8(data, PCI_CB_CAPABILITY_LIST if header_type == 2 else PCI_CAPABILITY_LIST) & 0xFC
    limit = min(len(data), STANDARD_BYTES)
    seen = set()
    while pointer:
        if pointer < HEADER_BYTES or pointer + 2 > limit:
            raise Unsupported("capability pointer 0x%02x is outside the capability area "
                              "(0x40-0x%x): the capability list is corrupt" % (pointer, limit - 1))
        if pointer in seen or len(seen) >= (STANDARD_BYTES - HEADER_BYTES) // 4:
            raise Unsupported("the capability list loops back to 0x%02x: config space is corrupt "
                              "or the device is misbehaving" % pointer)
        seen.add(pointer)
        yield data[pointer], pointer
        pointer = data[pointer + 1] & 0xFC


def express_capability(data):
    """Offset of the PCI Express capability; raise Unsupported saying why there is none."""
    _check_readable(data)
    if not u16(data, PCI_STATUS) & PCI_STATUS_CAP_LIST:
        raise Unsupported("no capability list (Status bit 4 clear): not a PCI Express device")
    for cap_id, offset in walk_capabilities(data):
        if cap_id == CAP_ID_EXP:
            if offset + EXP_MIN_BYTES > len(data):
                raise Unsupported("PCI Express capability at 0x%02x is cut off at %d bytes"
                                  % (offset, len(data)))
            return offset
    raise Unsupported("no PCI Express capability (ID 0x10) in the capability list: a "
                      "conventional PCI device has no Max Read Request Size")


def port_type(data, cap):
    code = (u16(data, cap + EXP_FLAGS) >> 4) & 0xF
    return PORT_TYPES.get(code, "type %d" % code)


# -------------------------------------------------------------- Device Control encodings

def decode_size(code):
    """Bytes for an MRRS/MPS encoding 0-5; None for the reserved 6 and 7."""
    return SIZES[code] if 0 <= code < len(SIZES) else None


def encode_size(size):
    """Encoding 0-5 of a size in bytes; anything else (6 and 7 are reserved) is refused."""
    if isinstance(size, bool) or size not in SIZES:
        raise PciError("size %r is not valid: use one of %s (bytes)"
                       % (size, ", ".join(str(s) for s in SIZES)))
    return SIZES.index(size)


def mrrs_of(devctl):
    return decode_size((devctl & DEVCTL_MRRS_MASK) >> DEVCTL_MRRS_SHIFT)


def mps_of(devctl):
    return decode_size((devctl & DEVCTL_MPS_MASK) >> DEVCTL_MPS_SHIFT)


def with_mrrs(devctl, size):
    """Device Control with MRRS set to ``size`` and every other bit (15 included) as given."""
    return (devctl & ~DEVCTL_MRRS_MASK & 0xFFFF) | (encode_size(size) << DEVCTL_MRRS_SHIFT)


# --------------------------------------------------------------------------------- link

def _speed_text(gts):
    return None if gts is None else "%.1f GT/s" % gts


def _parse_sysfs_speed(text):
    match = re.match(r"^\s*([0-9.]+)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


def _parse_int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def link_report(data=None, cap=None, sysfs_attrs=None):
    """Current and capable speed/width, and whether the link trained below what it can do.

    From Link Capabilities and Link Status when the capability is readable; from sysfs
    (current_link_speed, ... which any user can read) otherwise. The sysfs values are returned
    as read, for cross-checking. ``degraded`` compares the current link with the device's own
    maximum; a link limited by the slot shows as degraded too, which is worth knowing. GPUs
    lower their link speed when idle to save power: a speed-only degradation on an idle GPU
    is expected, a narrower width is not.
    """
    sysfs_attrs = dict(sysfs_attrs or {})
    report = {"speed": None, "width": None, "gen": None, "capable_speed": None, "capable_width": None,
              "capable_gen": None, "degraded": False, "degraded_reason": None, "source": None,
              "sysfs": sysfs_attrs}
    speed = width = max_speed = max_width = None
    if data is not None and cap is not None:
        lnkcap = u32(data, cap + EXP_LNKCAP)
        lnksta = u16(data, cap + EXP_LNKSTA)
        max_speed, max_width = LINK_SPEEDS.get(lnkcap & 0xF), (lnkcap >> 4) & 0x3F
        speed, width = LINK_SPEEDS.get(lnksta & 0xF), (lnksta >> 4) & 0x3F
        report["source"] = "config"
        if not max_width:  # no link (root complex integrated endpoint)
            return report
    elif sysfs_attrs:
        speed = _parse_sysfs_speed(sysfs_attrs.get("current_link_speed"))
        width = _parse_int(sysfs_attrs.get("current_link_width"))
        max_speed = _parse_sysfs_speed(sysfs_attrs.get("max_link_speed"))
        max_width = _parse_int(sysfs_attrs.get("max_link_width"))
        report["source"] = "sysfs"
    else:
        return report
    gens = dict((v, k) for k, v in LINK_SPEEDS.items())
    report.update(speed=_speed_text(speed), width=width, gen=gens.get(speed),
                  capable_speed=_speed_text(max_speed), capable_width=max_width, capable_gen=gens.get(max_speed))
    reasons = []
    if width is not None and max_width and width < max_width:
        reasons.append("width x%d below capable x%d" % (width, max_width))
    if speed is not None and max_speed is not None and speed < max_speed:
        reasons.append("speed %s below capable %s (GPUs lower it when idle: check under load)"
                       % (_speed_text(speed), _speed_text(max_speed)))
    if reasons:
        report["degraded"] = True
        report["degraded_reason"] = "; ".join(reasons)
    return report


def read_link_attrs(sysfs, bdf):
    """The kernel's own view of the link (current_link_speed, ...), for cross-checking."""
    found = {}
    for name in LINK_ATTRS:
        value = read_attr(sysfs, bdf, name)
        if value is not None:
            found[name] = value
    return found


# ---------------------------------------------------------------------------- writing

def _pwrite(fd, payload, offset):
    """The one write syscall; a seam for tests that emulate a device ignoring writes."""
    return os.pwrite(fd, payload, offset)


def read_word(sysfs, bdf, offset):
    """A 16-bit config register read now from the device (a fresh 2-byte config read)."""
    fd = os.open(config_path(sysfs, bdf), os.O_RDONLY)
    try:
        raw = os.pread(fd, 2, offset)
    finally:
        os.close(fd)
    if len(raw) != 2:
        raise PciError("reading config offset 0x%x returned %d bytes (needs root)" % (offset, len(raw)))
    return struct.unpack("<H", raw)[0]


def write_word(sysfs, bdf, offset, value):
    """One 16-bit config write of ``value`` at ``offset`` (little-endian, as config space is)."""
    fd = os.open(config_path(sysfs, bdf), os.O_WRONLY)
    try:
        written = _pwrite(fd, struct.pack("<H", value & 0xFFFF), offset)
    finally:
        os.close(fd)
    if written != 2:
        raise PciError("a 2-byte write at config offset 0x%x wrote %s bytes" % (offset, written))


def writable(sysfs, bdf):
    """Whether this process may write the device's config space (root, sysfs read-write)."""
    return os.access(config_path(sysfs, bdf), os.W_OK)


def set_mrrs(sysfs, bdf, cap, size):
    """Set MRRS of one device, changing Device Control bits 14:12 only; return (old, new) words.

    The word is read right before the write so every other bit goes back exactly as the
    device holds it now (bit 15, Initiate FLR on an endpoint, reads as 0 and is written as 0).
    After the write the word is read back; when MRRS is not the requested size, the old word
    is written back and NotTaken gives both words (callers prefix the device's name). A device whose current
    encoding is reserved (6 or 7) is left alone (Unsupported).
    """
    encode_size(size)
    offset = cap + EXP_DEVCTL
    old = read_word(sysfs, bdf, offset)
    if mrrs_of(old) is None:
        raise Unsupported("Device Control 0x%04x holds the reserved MRRS encoding %d: left alone"
                          % (old, (old & DEVCTL_MRRS_MASK) >> DEVCTL_MRRS_SHIFT))
    new = with_mrrs(old, size)
    if new == old:
        return old, old
    write_word(sysfs, bdf, offset, new)
    got = read_word(sysfs, bdf, offset)
    if mrrs_of(got) == size:
        return old, got
    try:
        write_word(sysfs, bdf, offset, old)
        back = read_word(sysfs, bdf, offset)
        restored = ("the old word 0x%04x was written back" % old if back == old else
                    "writing the old word 0x%04x back left 0x%04x" % (old, back))
    except (OSError, PciError) as exc:
        restored = "writing the old word 0x%04x back ALSO failed: %s" % (old, exc)
    raise NotTaken("did not take MRRS %d: Device Control reads 0x%04x (MRRS %s) after writing "
                   "0x%04x; %s" % (size, got, mrrs_of(got), new, restored))


# ------------------------------------------------------------------ the boot/hotplug helper

def reapply(sysfs, bdfs, size, include_bridges=False, out=None):
    """What the installed helper does when udev reports a device: set MRRS again.

    Each named device (and, with ``include_bridges``, the bridges above it) gets ``size``;
    devices that cannot take it are restored and reported. Returns the exit status: 0 when
    every device holds the size or was skipped for a reason, 1 when one failed.
    """
    out = out or sys.stdout
    encode_size(size)
    targets = []
    for bdf in bdfs:
        chain = (upstream_bridges(sysfs, bdf) if include_bridges else []) + [bdf]
        targets.extend(b for b in chain if b not in targets)
    status = 0
    for bdf in targets:
        try:
            cap = express_capability(read_config(sysfs, bdf))
            old, new = set_mrrs(sysfs, bdf, cap, size)
            if old == new:
                out.write("%s: MRRS already %d\n" % (bdf, size))
            else:
                out.write("%s: MRRS %s -> %d (Device Control 0x%04x -> 0x%04x)\n" % (bdf, mrrs_of(old), size, old, new))
        except Unsupported as exc:
            out.write("%s: skipped: %s\n" % (bdf, exc))
        except (OSError, PciError) as exc:
            out.write("%s: FAILED: %s\n" % (bdf, exc))
            status = 1
    return status


def cli_main(argv=None):
    """Command line of the installed helper (udev runs it with the device's kernel name)."""
    parser = argparse.ArgumentParser(
        description="Set PCIe Max Read Request Size on PCI devices (installed by "
                    "gpufleet.tuning.pcie_maxreadreq; run by its udev rule).")
    parser.add_argument("--size", type=int, required=True, choices=SIZES, help="bytes")
    parser.add_argument("--include-bridges", action="store_true",
                        help="also the bridges above each device")
    parser.add_argument("--sysfs", default=SYSFS, help=argparse.SUPPRESS)
    parser.add_argument("devices", nargs="+", metavar="BDF", help="e.g. 0000:41:00.0")
    args = parser.parse_args(argv)
    bad = [name for name in args.devices if not is_sysfs_bdf(name)]
    if bad:
        parser.error("not a PCI address: %s" % ", ".join(bad))
    return reapply(args.sysfs, args.devices, args.size, args.include_bridges)
