# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI Express extended capabilities (config space 0x100-0xFFF) and Access Control Services.

Why ACS matters for GPUs: a PCIe switch can pass a peer-to-peer request from one downstream
port straight to another, or, with ACS P2P Request Redirect set on the ingress port, send it
up to the root complex first (where the IOMMU sees it, and where many chipsets route it
slowly or not at all). Whether GPU pairs under one switch talk at switch speed is decided by
these bits, so the node facts report them for every bridge between two GPUs.

The extended capability list (PCI Express Base Specification, "PCI Express Extended
Capabilities"; the kernel's include/uapi/linux/pci_regs.h PCI_EXT_CAP_*): it starts at 0x100,
and each entry begins with a 32-bit header, bits 15:0 the capability ID, 19:16 its version,
31:20 the offset of the next entry (0 ends the list; the low 2 bits are reserved and masked,
as the kernel's PCI_EXT_CAP_NEXT does with 0xffc). A header of 0 at 0x100 means no extended
capabilities; an entry with ID 0 and a next pointer is a placeholder that is skipped (the H200
GPUs start their list that way). Guards: a pointer must land at 0x100 or above and leave room
for the header inside what was read; a pointer seen twice, or more entries than 3840 bytes can
hold at 8 bytes each, is a loop; all ones means the device does not answer.

ACS (capability ID 0x000D, pci_regs.h PCI_EXT_CAP_ID_ACS): the ACS Capability register is the
16-bit word at +4 (PCI_ACS_CAP), ACS Control the 16-bit word at +6 (PCI_ACS_CTRL). Both use the
same bits (pci_regs.h PCI_ACS_SV .. PCI_ACS_DT, checked against torvalds/linux
include/uapi/linux/pci_regs.h): 0x01 Source Validation, 0x02 Translation Blocking, 0x04 P2P
Request Redirect, 0x08 P2P Completion Redirect, 0x10 Upstream Forwarding, 0x20 P2P Egress
Control, 0x40 Direct Translated P2P.

Reading: extended config space exists only when the sysfs ``config`` file is 4096 bytes long
(PCI Express; conventional PCI functions have 256). A reader without CAP_SYS_ADMIN gets only
the first 64 bytes of either: that is "needs root", never "no capability". ``ConfigSpace``
reads the standard 256 bytes once and each extended dword only when the walk asks for it,
with unbuffered preads: the kernel turns a read into one config cycle per dword, and in a VM
each traps to the hypervisor (measured on the H200 machines: about 20 us per dword, so 21 ms
for a buffered read, which fetches all 4096 bytes, against 0.03 ms for one dword).
"""

from __future__ import annotations

import os
import struct

EXT_START = 0x100
EXT_END = 4096
STANDARD_BYTES = 256
UNPRIVILEGED_BYTES = 64
MAX_ENTRIES = (EXT_END - EXT_START) // 8  # every entry takes at least 8 bytes

EXT_CAP_ID_ACS = 0x000D
ACS_CAP = 0x04
ACS_CTRL = 0x06
ACS_BYTES = 0x08  # header, Capability and Control must be readable

# (name in the node facts, bit) for the ACS Capability and Control registers.
ACS_BITS = (
    ("source_validation", 0x0001),
    ("translation_blocking", 0x0002),
    ("request_redirect", 0x0004),
    ("completion_redirect", 0x0008),
    ("upstream_forwarding", 0x0010),
    ("egress_control", 0x0020),
    ("direct_translated", 0x0040),
)


class ExtCapError(Exception):
    """The extended capability list cannot be read (needs root, no answer) or is corrupt."""


def needs_root_reason(readable):
    return ("only the first %d bytes of config space are readable: reading the extended "
            "capabilities needs root (CAP_SYS_ADMIN)" % readable)


class ConfigSpace:
    """The config space of one PCI function: given bytes, or a sysfs ``config`` file read lazily.

    ``head`` holds the readable part of the first 256 bytes (what pci_config's standard
    capability walk takes); ``size`` is the space the function has (256 or 4096, the file's
    size); ``u32(offset)`` reads an extended dword, from the bytes or with one pread.
    """

    def __init__(self, data=None, path=None):
        self.path = path
        self._cache = {}
        if path is None:
            data = bytes(data or b"")
            self._data = data
            self.size = len(data)
            self.head = data[:STANDARD_BYTES]
            return
        self._data = None
        fd = os.open(path, os.O_RDONLY)
        try:
            self.size = os.fstat(fd).st_size or STANDARD_BYTES
            head = b""
            while len(head) < STANDARD_BYTES:
                chunk = os.pread(fd, STANDARD_BYTES - len(head), len(head))
                if not chunk:
                    break
                head += chunk
            self.head = head
        finally:
            os.close(fd)

    @property
    def restricted(self):
        """True when less than the 256 bytes every PCI function has are readable (not root)."""
        return len(self.head) < STANDARD_BYTES

    def u16(self, offset):
        return self._read(offset, 2, "<H")

    def u32(self, offset):
        return self._read(offset, 4, "<I")

    def _read(self, offset, width, fmt):
        if offset + width <= len(self.head) and offset >= 0:
            return struct.unpack_from(fmt, self.head, offset)[0]
        if self.restricted:
            raise ExtCapError(needs_root_reason(len(self.head)))
        if offset < 0 or offset + width > self.size:
            raise ExtCapError("config offset 0x%x is outside the %d bytes of config space"
                              % (offset, self.size))
        if self._data is not None:
            raw = self._data[offset:offset + width]
        else:
            raw = self._pread(offset, width)
        if len(raw) != width:
            raise ExtCapError("reading config offset 0x%x returned %d of %d bytes" % (offset, len(raw), width))
        return struct.unpack(fmt, raw)[0]

    def _pread(self, offset, width):
        key = (offset, width)
        if key not in self._cache:
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    self._cache[key] = os.pread(fd, width, offset)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise ExtCapError("%s: %s" % (self.path, exc.strerror or exc))
        return self._cache[key]


def walk(space):
    """Yield ``(cap_id, version, offset)`` along the extended capability list.

    Nothing for a function without extended config space (256 bytes: conventional PCI) or an
    empty list (header 0 at 0x100). Raises ExtCapError when the space cannot be read (not
    root, device not answering) or the list is corrupt (a pointer below 0x100 or past the
    end, a loop), naming the offset.
    """
    if space.restricted:
        raise ExtCapError(needs_root_reason(len(space.head)))
    if space.size <= STANDARD_BYTES:
        return
    offset = EXT_START
    seen = set()
    while True:
        header = space.u32(offset)
        if header == 0xFFFFFFFF:
            raise ExtCapError("the extended capability header at 0x%03x reads as all ones: the "
                              "device does not respond" % offset)
        if offset == EXT_START and header == 0:
            return
        seen.add(offset)
        cap_id, version, nxt = header & 0xFFFF, (header >> 16) & 0xF, (header >> 20) & 0xFFC
        if cap_id:
            yield cap_id, version, offset
        if not nxt:
            return
        if nxt < EXT_START or nxt + 4 > space.size:
            raise ExtCapError("the extended capability at 0x%03x points to 0x%03x, outside the "
                              "extended space (0x100-0x%03x): the list is corrupt"
                              % (offset, nxt, space.size - 1))
        if nxt in seen or len(seen) >= MAX_ENTRIES:
            raise ExtCapError("the extended capability list loops back to 0x%03x: config space "
                              "is corrupt or the device is misbehaving" % nxt)
        offset = nxt


def find(space, cap_id):
    """Offset of the first extended capability ``cap_id``, or None (ExtCapError as walk)."""
    for found, _version, offset in walk(space):
        if found == cap_id:
            return offset
    return None


def decode_acs(word):
    """``{name: bool}`` for the ACS bits of a Capability or Control word."""
    return dict((name, bool(word & bit)) for name, bit in ACS_BITS)


def acs(space):
    """The ACS capability of a function: None when it has none, else ``{"offset",
    "capable", "ctrl", <flag>: bool, ...}`` where each flag is that bit of ACS Control (the
    control bit of a feature the port does not implement reads 0). ExtCapError as walk, or
    when the capability is cut off."""
    offset = find(space, EXT_CAP_ID_ACS)
    if offset is None:
        return None
    if offset + ACS_BYTES > space.size:
        raise ExtCapError("the ACS capability at 0x%03x is cut off at %d bytes" % (offset, space.size))
    capable = space.u16(offset + ACS_CAP)
    ctrl = space.u16(offset + ACS_CTRL)
    found = {"offset": offset, "capable": capable, "ctrl": ctrl}
    found.update(decode_acs(ctrl))
    return found
