# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which PCI functions a config-space module acts on, as its options say: explicit addresses
(``devices``), or a vendor and classes (the NVIDIA GPUs by default).

pcie_maxreadreq and pcie_acs take the same three options with the same meaning, so they are
read and checked here once: every bad value is named (collected in ``errors``, so one run
reports them all) and nothing is read from the machine.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_gpus
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config

_VENDOR_RE = re.compile(r"^0x[0-9a-f]{4}\Z")
_CLASS_RE = re.compile(r"^0x[0-9a-f]{4}(?:[0-9a-f]{2})?\Z")


def vendor(value, errors):
    """``0x10de`` from ``0x10DE``, ``' 0x10de '`` or the integer 0x10de; None (and an error)
    for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFF:
        return "0x%04x" % value
    if isinstance(value, str) and _VENDOR_RE.match(value.strip().lower()):
        return value.strip().lower()
    errors.append("vendor %r is not valid: a PCI vendor ID written 0x and 4 hex digits, e.g. "
                  "%r for NVIDIA (quote it in YAML)" % (value, nvidia_gpus.NVIDIA_VENDOR))
    return None


def pci_class(value, errors):
    """A class (``0xCCSS``) or class with programming interface (``0xCCSSPP``), lower case;
    None (and an error) for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFFFF:
        return "0x%04x" % value if value <= 0xFFFF else "0x%06x" % value
    if isinstance(value, str) and _CLASS_RE.match(value.strip().lower()):
        return value.strip().lower()
    errors.append("class %r is not valid: 0x and 4 hex digits (class and subclass, e.g. '0x0302' "
                  "for a 3D controller) or 6 (with the programming interface, e.g. '0x030200')"
                  % (value,))
    return None


def selection(params, errors):
    """``(devices, vendor, classes)`` from the options ``devices``, ``vendor`` and ``classes``:
    the addresses parsed (``DDDD:BB:DD.F``, duplicates dropped), the vendor and classes
    normalized (classes default to the NVIDIA GPU classes). Errors are appended to ``errors``."""
    devices = []
    raw_devices = params.get("devices") or []
    if not isinstance(raw_devices, list):
        errors.append("devices must be a list of PCI addresses")
        raw_devices = []
    for item in raw_devices:
        try:
            bdf = pci_config.parse_bdf(item)
        except pci_config.PciError as exc:
            errors.append(str(exc))
            continue
        if bdf not in devices:
            devices.append(bdf)
    wanted_vendor = vendor(params.get("vendor"), errors)
    raw_classes = params.get("classes")
    if raw_classes is None:
        raw_classes = list(nvidia_gpus.GPU_CLASSES)
    if not isinstance(raw_classes, list):
        raw_classes = [raw_classes]
    classes = []
    for item in raw_classes:
        value = pci_class(item, errors)
        if value is not None and value not in classes:
            classes.append(value)
    if not raw_devices and not raw_classes:
        errors.append("classes is empty: name at least one PCI class (the default is %s) or "
                      "list the devices" % ", ".join(nvidia_gpus.GPU_CLASSES))
    return devices, wanted_vendor, classes
