# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The write side of PCIe Access Control Services: which bridges, which bits, the masked write.

Reading the ACS capability is pcie_ext's (``pcie_ext.acs``, the one parser, also used by the
node facts); config reads and writes of one 16-bit word are pci_config's (``read_word``,
``write_word``, whose ``_pwrite`` is the seam tests use for devices that ignore writes). This
file adds only what the pcie_acs module and its boot helper both need:

- ``bridges_between``: the bridges between every two endpoints, below their lowest common
  ancestor (pci_config ``device_chain`` and ``path_bridges``, as the node facts find them):
  the real path under /sys/devices is
  ``pci<domain:bus>/<root port>/<switch up>/<switch down>/<endpoint>``; two endpoints under
  different root buses have both whole paths, two under one root bus the parts below the last
  bridge they share. A shared bridge is where peer traffic turns around, so its ACS does not
  matter for that pair; every bridge below it (the switch downstream ports, or the two root
  ports) is an ingress port whose P2P Request Redirect sends the traffic up.
- ``write_ctrl``: a masked read-modify-write of ACS Control (capability + 6) that changes only
  the bits in ``mask``, reads back, and writes the old word back when the device did not take
  the new one (NotTaken, with the word read back).
- the checks both callers make before writing: a device bound to vfio-pci below a bridge, and
  the endpoints' IOMMU domain type.
- ``reapply`` and ``cli_main``: what the installed helper runs on a udev event.

Why this file imports only the standard library (and pci_config, pcie_ext, which do too): the
pcie_acs module installs a helper that udev runs as root, and that helper is pci_config's,
pcie_ext's and this file's source, pasted in that order (pcie_acs.render_helper), followed by a
call of ``cli_main``. The two imports below are the only lines the paste replaces: in the
helper both names are bound to the helper's own namespace, so every ``pci_config.X`` and
``pcie_ext.X`` here means the same function in both places. This file therefore defines no
top-level name that pci_config or pcie_ext define (a test checks it), except ``cli_main``.
"""

from __future__ import annotations

import argparse
import os
import sys

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pcie_ext

# The bits the pcie_acs module may clear (pcie_ext.ACS_BITS names them): Source Validation,
# Translation Blocking, P2P Request Redirect, P2P Completion Redirect, Upstream Forwarding.
# P2P Egress Control and Direct Translated P2P are never touched: the kernel does not enable
# them by default, egress control has a vector register of its own, and direct translated P2P
# only matters with ATS, where clearing it would send translated requests the other way.
CLEARABLE = ("source_validation", "translation_blocking", "request_redirect", "completion_redirect",
             "upstream_forwarding")
DEFAULT_CLEAR = ("request_redirect", "completion_redirect", "upstream_forwarding")
CLEARABLE_MASK = 0x001F

# The IOMMU domain types (sysfs iommu_group/type) that translate every DMA: peer writes whose
# redirect is cleared reach the peer untranslated, so the IOMMU either rejects them or the
# addresses are wrong; "identity" (iommu=pt) and "blocked" do not translate.
TRANSLATING_DOMAINS = ("DMA", "DMA-FQ")
VFIO_DRIVER = "vfio-pci"


class AcsNotTaken(pci_config.PciError):
    """ACS Control kept another value after a write; ``got`` is the word read back."""

    def __init__(self, message, got):
        super().__init__(message)
        self.got = got


def mask_of(names):
    """The ACS bit mask of ``names`` (pcie_ext.ACS_BITS names)."""
    bits = dict(pcie_ext.ACS_BITS)
    mask = 0
    for name in names:
        mask |= bits[name]
    return mask


def names_of(mask):
    """The pcie_ext.ACS_BITS names set in ``mask``, in register order."""
    return [name for name, bit in pcie_ext.ACS_BITS if mask & bit]


# --------------------------------------------------------------------- where the bridges are

def bridges_between(sysfs, endpoints):
    """``({bridge: [endpoint, ...]}, {endpoint: reason})`` for every pair of ``endpoints``: each
    bridge on the path between two of them with the endpoints whose paths it is on, and the
    endpoints whose place in the tree is unknown."""
    chains, unknown = {}, {}
    for bdf in endpoints:
        chain = pci_config.device_chain(sysfs, bdf)
        if chain is None:
            unknown[bdf] = ("%s does not resolve to a path under /sys/devices/pci*"
                            % pci_config.device_dir(sysfs, bdf))
        else:
            chains[bdf] = chain
    found = {}
    known = [bdf for bdf in endpoints if bdf in chains]
    for i, a in enumerate(known):
        for b in known[i + 1:]:
            for bridge in pci_config.path_bridges(chains[a], chains[b]):
                users = found.setdefault(bridge, [])
                for endpoint in (a, b):
                    if endpoint in chains and bridge in chains[endpoint] and endpoint not in users:
                        users.append(endpoint)
    return found, unknown


def matching_devices(sysfs, vendor, classes):
    """Functions of ``vendor`` (``0x10de``) whose class matches one of ``classes`` (``0x0302``:
    any programming interface; ``0x030200``: exactly), sorted by address."""
    chosen = []
    for bdf in pci_config.list_devices(sysfs):
        if (pci_config.read_attr(sysfs, bdf, "vendor") or "").lower() != vendor:
            continue
        device_class = (pci_config.read_attr(sysfs, bdf, "class") or "").lower()
        for wanted in classes:
            if (device_class[:6] == wanted) if len(wanted) == 6 else (device_class == wanted):
                chosen.append(bdf)
                break
    return chosen


# ------------------------------------------------------------------------- what is below

def driver_of(sysfs, bdf):
    """The name of the driver bound to a device (its ``driver`` link), or None."""
    try:
        return os.path.basename(os.readlink(os.path.join(pci_config.device_dir(sysfs, bdf), "driver")))
    except OSError:
        return None


def devices_below(sysfs, bridge):
    """Every PCI function below ``bridge`` in /sys/devices (its subordinate buses), sorted."""
    top = os.path.realpath(pci_config.device_dir(sysfs, bridge))
    found = []
    for bdf in pci_config.list_devices(sysfs):
        real = os.path.realpath(pci_config.device_dir(sysfs, bdf))
        if real != top and real.startswith(top + os.sep):
            found.append(bdf)
    return found


def vfio_below(sysfs, bridge):
    """The functions below ``bridge`` bound to vfio-pci (passed to a VM or user space)."""
    return [bdf for bdf in devices_below(sysfs, bridge) if driver_of(sysfs, bdf) == VFIO_DRIVER]


def iommu_domain(sysfs, bdf):
    """The device's IOMMU domain type (``DMA``, ``DMA-FQ``, ``identity``...), or None when it
    has no IOMMU group (no IOMMU) or the type cannot be read."""
    value = pci_config.read_attr(sysfs, bdf, os.path.join("iommu_group", "type"))
    return value or None


def translated(sysfs, endpoints):
    """``{endpoint: domain type}`` of the endpoints whose IOMMU domain translates."""
    found = {}
    for bdf in endpoints:
        kind = iommu_domain(sysfs, bdf)
        if kind in TRANSLATING_DOMAINS:
            found[bdf] = kind
    return found


# ----------------------------------------------------------------------------- reading

def read_acs(sysfs, bdf):
    """pcie_ext.acs of one function read from sysfs (None: no ACS capability); ExtCapError
    when it cannot be read (needs root, no answer, a corrupt list)."""
    try:
        space = pcie_ext.ConfigSpace(path=pci_config.config_path(sysfs, bdf))
    except (OSError, IOError) as exc:
        raise pcie_ext.ExtCapError("%s: %s" % (pci_config.config_path(sysfs, bdf), exc.strerror or exc))
    return pcie_ext.acs(space)


def bridge_port_type(sysfs, bdf):
    """The PCI Express port type of a bridge (``root port``...), or None when unreadable."""
    try:
        data = pci_config.read_config(sysfs, bdf)
        return pci_config.port_type(data, pci_config.express_capability(data))
    except (OSError, IOError, pci_config.PciError):
        return None


# ----------------------------------------------------------------------------- writing

def with_bits(word, mask, value):
    """``word`` with the bits in ``mask`` taken from ``value`` and every other bit kept."""
    return ((word & ~mask) | (value & mask)) & 0xFFFF


def write_ctrl(sysfs, bdf, offset, mask, value):
    """Set the ACS Control bits in ``mask`` to those of ``value``; return (old, new) words.

    ``offset`` is the ACS capability's. The word is read right before the write, so bits
    outside ``mask`` (egress control, direct translated P2P, reserved) are written back as
    the device holds them now. After the write it is read back; when it differs from what was
    written, the old word is written back and AcsNotTaken carries the word read back.
    """
    reg = offset + pcie_ext.ACS_CTRL
    old = pci_config.read_word(sysfs, bdf, reg)
    new = with_bits(old, mask, value)
    if new == old:
        return old, old
    pci_config.write_word(sysfs, bdf, reg, new)
    got = pci_config.read_word(sysfs, bdf, reg)
    if got == new:
        return old, got
    try:
        pci_config.write_word(sysfs, bdf, reg, old)
        back = pci_config.read_word(sysfs, bdf, reg)
        restored = ("the old word 0x%04x was written back" % old if back == old else
                    "writing the old word 0x%04x back left 0x%04x" % (old, back))
    except (OSError, pci_config.PciError) as exc:
        restored = "writing the old word 0x%04x back ALSO failed: %s" % (old, exc)
    raise AcsNotTaken("refused the write: ACS Control reads 0x%04x after writing 0x%04x (was 0x%04x); %s"
                      % (got, new, old, restored), got)


# ------------------------------------------------------------------ the boot/hotplug helper

def reapply_acs(sysfs, kernel, clear, endpoints, allow_with_vfio=False, out=None):
    """What the installed helper does when udev reports ``kernel`` (a bridge or an endpoint).

    The bridges between the ``endpoints`` present now are computed again; ``kernel`` is acted
    on only when it is one of them (a bridge renumbered since the module ran is left alone),
    or, for an endpoint, the bridges above it that are. Each gets the ``clear`` bits its ACS
    capability advertises cleared. Refused, as by the module: IOMMU domains that translate,
    a vfio-pci device below a bridge (unless ``allow_with_vfio``). Returns 0 when every bridge
    holds the bits or was left alone for a reason, 1 when a write failed.
    """
    out = out or sys.stdout
    bridges, _unknown = bridges_between(sysfs, endpoints)
    if kernel in bridges:
        targets = [kernel]
    elif kernel in endpoints:
        chain = pci_config.device_chain(sysfs, kernel) or []
        targets = [b for b in chain[1:-1] if b in bridges]
    else:
        out.write("%s: not a bridge between two of %s: left alone\n" % (kernel, ", ".join(endpoints)))
        return 0
    busy = translated(sysfs, endpoints)
    if busy:
        out.write("%s: left alone: IOMMU domains translate (%s): clearing ACS would move the failure to "
                  "the IOMMU\n" % (kernel, ", ".join("%s %s" % item for item in sorted(busy.items()))))
        return 0
    status = 0
    for bdf in targets:
        try:
            vfio = [] if allow_with_vfio else vfio_below(sysfs, bdf)
            if vfio:
                out.write("%s: left alone: %s below it bound to %s\n" % (bdf, ", ".join(vfio), VFIO_DRIVER))
                continue
            found = read_acs(sysfs, bdf)
            if found is None:
                out.write("%s: no ACS capability\n" % bdf)
                continue
            mask = clear & found["capable"]
            old, new = write_ctrl(sysfs, bdf, found["offset"], mask, 0)
            if old == new:
                out.write("%s: ACS Control already 0x%04x\n" % (bdf, old))
            else:
                out.write("%s: ACS Control 0x%04x -> 0x%04x (cleared %s)\n"
                          % (bdf, old, new, ", ".join(names_of(old & ~new))))
        except (OSError, pci_config.PciError, pcie_ext.ExtCapError) as exc:
            out.write("%s: FAILED: %s\n" % (bdf, exc))
            status = 1
    return status


def cli_main(argv=None):
    """Command line of the installed helper (udev runs it with the device's kernel name)."""
    parser = argparse.ArgumentParser(
        description="Clear PCIe ACS redirect bits on the bridges between PCI devices (installed by "
                    "gpufleet.tuning.pcie_acs; run by its udev rule).")
    parser.add_argument("--clear", required=True, help="ACS Control bits to clear, e.g. 0x001c")
    parser.add_argument("--device", action="append", default=[], help="an endpoint (at least two)")
    parser.add_argument("--vendor", help="select endpoints by vendor, e.g. 0x10de")
    parser.add_argument("--class", dest="classes", action="append", default=[], help="with --vendor")
    parser.add_argument("--allow-with-vfio", action="store_true")
    parser.add_argument("--sysfs", default=pci_config.SYSFS, help=argparse.SUPPRESS)
    parser.add_argument("kernel", metavar="BDF", help="the device udev reports, e.g. 0000:40:01.1")
    args = parser.parse_args(argv)
    try:
        clear = int(args.clear, 16)
    except ValueError:
        parser.error("--clear %r is not a hex mask" % args.clear)
    if clear & ~CLEARABLE_MASK or not clear:
        parser.error("--clear 0x%04x: only bits of 0x%04x may be cleared" % (clear, CLEARABLE_MASK))
    bad = [name for name in args.device + [args.kernel] if not pci_config.is_sysfs_bdf(name)]
    if bad:
        parser.error("not a PCI address: %s" % ", ".join(bad))
    if args.device:
        endpoints = list(args.device)
    elif args.vendor and args.classes:
        endpoints = matching_devices(args.sysfs, args.vendor.lower(), [c.lower() for c in args.classes])
    else:
        parser.error("name the endpoints: --device twice or more, or --vendor with --class")
    return reapply_acs(args.sysfs, args.kernel, clear, endpoints, args.allow_with_vfio)
