# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA GPUs of this machine, from sysfs, with their architecture from the PCI device ID.

Why sysfs and device IDs: the GPU machines have no lspci, and a module must decide before the
driver is loaded (or when it failed to load) whether an argument is dangerous for the GPUs
present. NVIDIA hands out PCI device IDs to each chip in fixed blocks, so the block gives the
chip and its architecture without any driver.

The device list and identity come from pci_config (the one reader of /sys/bus/pci here).

The ranges below are those of NVIDIA's own gpu-admin-tools (github.com/NVIDIA/gpu-admin-tools,
``gpu/devid_chips.py``, GPU_DEVID_CHIPS: first ID, last ID, architecture, chip), Turing and
newer. Examples: H100/H200 are GH100 (H200 SXM is 10de:2335), B200 is GB100, the RTX PRO 6000
Blackwell cards are GB202 (10de:2bb1, 2bb5, ...). An ID outside every block is reported as
``unknown``, never guessed.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config

NVIDIA_VENDOR = "0x10de"
# PCI class (base class, subclass): 0x0300 VGA-compatible, 0x0302 3D controller (datacenter
# GPUs without display). The GPU's HDMI audio function (0x0403) is not a GPU.
GPU_CLASSES = ("0x0300", "0x0302")
# NVSwitch chips (the fabric of HGX boards) show up as NVIDIA functions of class 0x0680,
# "other bridge device".
NVSWITCH_CLASS = "0x0680"

DEVICE_ID_BLOCKS = (
    (0x1E00, 0x1E7F, "turing", "tu102"),
    (0x1E80, 0x1EFF, "turing", "tu104"),
    (0x1F00, 0x1F7F, "turing", "tu106"),
    (0x1F80, 0x1FFF, "turing", "tu117"),
    (0x2180, 0x21FF, "turing", "tu116"),
    (0x2080, 0x20FF, "ampere", "ga100"),
    (0x2200, 0x227F, "ampere", "ga102"),
    (0x2400, 0x247F, "ampere", "ga103"),
    (0x2480, 0x24FF, "ampere", "ga104"),
    (0x2500, 0x257F, "ampere", "ga106"),
    (0x2580, 0x25FF, "ampere", "ga107"),
    (0x2300, 0x237F, "hopper", "gh100"),
    (0x2680, 0x26FF, "ada", "ad102"),
    (0x2700, 0x277F, "ada", "ad103"),
    (0x2780, 0x27FF, "ada", "ad104"),
    (0x2800, 0x287F, "ada", "ad106"),
    (0x2880, 0x28FF, "ada", "ad107"),
    (0x2900, 0x297F, "blackwell", "gb100"),
    (0x2980, 0x29FF, "blackwell", "gb102"),
    (0x3180, 0x31FF, "blackwell", "gb110"),
    (0x3200, 0x327F, "blackwell", "gb112"),
    (0x2B80, 0x2BFF, "blackwell", "gb202"),
    (0x2C00, 0x2C7F, "blackwell", "gb203"),
    (0x2F00, 0x2F7F, "blackwell", "gb205"),
    (0x2D00, 0x2D7F, "blackwell", "gb206"),
    (0x2D80, 0x2DFF, "blackwell", "gb207"),
)


def classify(device_id):
    """(architecture, chip) for an NVIDIA PCI device ID (int), or ("unknown", None)."""
    for first, last, arch, chip in DEVICE_ID_BLOCKS:
        if first <= device_id <= last:
            return arch, chip
    return "unknown", None


def list_gpus(sys_root="/sys"):
    """Every NVIDIA GPU function under ``sys_root``/bus/pci/devices, sorted by address.

    Each is a dict: ``bdf``, ``device_id`` (``10de:2335``), ``architecture``, ``chip``.
    Devices whose identity cannot be read are left out: this is a safety check, and a device
    that cannot be identified cannot be matched either.
    """
    gpus = []
    for bdf in pci_config.list_devices(sys_root):
        ident = pci_config.identity(sys_root, bdf)
        vendor, klass, device = ident["vendor"], ident["class"], ident["device"]
        if vendor is None or klass is None or device is None:
            continue
        if vendor.lower() != NVIDIA_VENDOR or klass.lower()[:6] not in GPU_CLASSES:
            continue
        try:
            device_id = int(device, 16)
        except ValueError:
            continue
        arch, chip = classify(device_id)
        gpus.append({
            "bdf": bdf,
            "device_id": "10de:%04x" % device_id,
            "architecture": arch,
            "chip": chip,
        })
    return gpus


def describe(gpu):
    """``0000:41:00.0 (10de:2bb5, blackwell gb202)``: how a message names a GPU."""
    kind = gpu["architecture"] if not gpu.get("chip") else "%s %s" % (gpu["architecture"], gpu["chip"])
    return "%s (%s, %s)" % (gpu["bdf"], gpu["device_id"], kind)
