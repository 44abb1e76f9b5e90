# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the running NVIDIA kernel driver says about itself, from /sys and /proc only.

Why not nvidia-smi: it needs NVML, is slow to start and is missing in minimal images, while the
kernel module publishes everything needed here itself: ``/sys/module/nvidia/version`` (the
module version), ``/proc/driver/nvidia/version`` (the same, plus the open/proprietary flavour)
and ``/proc/driver/nvidia/params``, the values the driver is running with. That last file is the
only place those values can be read back: the driver registers its ``NVreg_*`` module
parameters with permission 0, so they never appear under ``/sys/module/nvidia/parameters``.
It prints them without the ``NVreg_`` prefix (``EnableMSI: 1``, strings in double quotes,
``RegistryDwords: ""``); ``running_params`` maps them back to the names modprobe.d uses.

The parameter table (``PARAM_TYPES``): every ``NVreg_*`` module parameter of the nvidia module
is declared in nv-reg.h with NV_DEFINE_REG_ENTRY / NV_DEFINE_REG_ENTRY_GLOBAL, which expand to
``module_param(NVreg_X, int, 0)`` (nv-linux.h NV_MODULE_PARAMETER: a SIGNED int, even though the
variable is an NvU32), or NV_DEFINE_REG_STRING_ENTRY, ``module_param(NVreg_X, charp, 0)``. No
``NVreg_`` parameter is uint, ulong or bool. The kernel parses an int parameter with kstrtoint:
-2147483648 to 2147483647, so ``4294967295`` (what /proc/driver/nvidia/params prints for an
all-ones value, with %u) must be written ``-1``, and any value out of range makes the kernel
refuse to load the whole nvidia module. The table is the union of nv-reg.h in
NVIDIA/open-gpu-kernel-modules from 515.43.04 to 595.45.04 (the proprietary flavour builds
the same file); names outside it are unknown here (another driver version, or a misspelling)
and their type cannot be checked.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_modules

PREFIX = "NVreg_"
# nv-reg.h NV_DEFINE_REG_STRING_ENTRY: charp module parameters.
STRING_PARAMS = frozenset("NVreg_" + n for n in (
    "CoherentGPUMemoryMode", "RegistryDwords", "RegistryDwordsPerDevice", "RmMsg", "GpuBlacklist",
    "TemporaryFilePath", "ExcludedGpus", "RmNvlinkBandwidth",
))
# nv-reg.h NV_DEFINE_REG_ENTRY / NV_DEFINE_REG_ENTRY_GLOBAL: int module parameters.
INT_PARAMS = frozenset("NVreg_" + n for n in (
    "ResmanDebugLevel", "RmLogonRC", "ModifyDeviceFiles", "DeviceFileUID", "DeviceFileGID", "DeviceFileMode",
    "InitializeSystemMemoryAllocations", "UsePageAttributeTable", "EnablePCIeGen3", "EnableMSI",
    "EnableStreamMemOPs", "RestrictProfilingToAdminUsers", "PreserveVideoMemoryAllocations",
    "EnableS0ixPowerManagement", "S0ixPowerManagementVideoMemoryThreshold", "DynamicPowerManagement",
    "DynamicPowerManagementVideoMemoryThreshold", "EnableGpuFirmware", "EnableGpuFirmwareLogs",
    "OpenRmEnableUnsupportedGpus", "EnableUserNUMAManagement", "MemoryPoolSize", "KMallocHeapMaxSize",
    "VMallocHeapMaxSize", "IgnoreMMIOCheck", "NvLinkDisable", "EnablePCIERelaxedOrderingMode",
    "RegisterPCIDriver", "RegisterPlatformDeviceDriver", "EnableResizableBar", "EnableDbgBreakpoint",
    "TegraGpuPgMask", "EnableNonblockingOpen", "ExcludeAllGpus", "GpuInitOnProbe", "DmaRemapPeerMmio",
    "RmNvlinkBandwidthLinkCount", "ImexChannelCount", "CreateImexChannel0", "GrdmaPciTopoCheckOverride",
    "EnableSystemMemoryPools", "UseKernelSuspendNotifiers", "RegisterForACPIEvents", "TCEBypassMode",
))
PARAM_TYPES = dict([(name, "int") for name in INT_PARAMS] + [(name, "charp") for name in STRING_PARAMS])
# Names /proc/driver/nvidia/params prints that are NOT module parameters (the driver reads
# the value under another parameter name, nv-reg.h NV_DEFINE_PARAMS_TABLE_ENTRY_CUSTOM_NAME):
# the kernel ignores them as unknown parameters.
NOT_PARAMETERS = {"NVreg_RmProfilingAdminOnly": "NVreg_RestrictProfilingToAdminUsers"}
_VERSION_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def state(proc_root="/proc", sys_root="/sys"):
    """``{"loaded", "version", "flavor"}`` of the nvidia kernel module.

    ``loaded`` is true when ``/sys/module/nvidia`` or ``/proc/driver/nvidia`` exists.
    ``flavor`` is ``open`` or ``proprietary`` when /proc/driver/nvidia/version says which,
    else None.
    """
    version_text = fileops.read_quiet(os.path.join(proc_root, "driver", "nvidia", "version"))
    version = (fileops.read_quiet(os.path.join(sys_root, "module", "nvidia", "version")) or "").strip() or None
    flavor = None
    if version_text:
        first = version_text.splitlines()[0] if version_text.splitlines() else ""
        match = _VERSION_RE.search(first)
        if version is None and match:
            version = match.group(1)
        if "Kernel Module" in first:
            flavor = "open" if "Open Kernel Module" in first else "proprietary"
    loaded = (os.path.isdir(os.path.join(sys_root, "module", "nvidia"))
              or os.path.isdir(os.path.join(proc_root, "driver", "nvidia")))
    return {"loaded": loaded, "version": version, "flavor": flavor}


def unquote(value):
    """A params value as the driver holds it: surrounding double quotes removed."""
    value = value.strip()
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return value[1:-1]
    return value


def parse_params(text):
    """``{"NVreg_EnableMSI": "1", "NVreg_RegistryDwords": "", ...}`` from the params file text."""
    params = {}
    for line in (text or "").splitlines():
        if ":" not in line:
            continue
        name, value = line.split(":", 1)
        name = name.strip()
        if not name or " " in name:
            continue
        params[PREFIX + name] = unquote(value)
    return params


def running_params(proc_root="/proc"):
    """The running values keyed by their ``NVreg_`` names; None when the file is not readable
    (driver not loaded, or not root inside some containers)."""
    text = fileops.read_quiet(os.path.join(proc_root, "driver", "nvidia", "params"))
    if text is None:
        return None
    return parse_params(text)


def as_number(value):
    """``value`` as an int when it reads as one the way the kernel parses an integer
    parameter (kernel_modules.kernel_integer: decimal, 0x hex, 0 octal, a sign), else None.
    Surrounding spaces are ignored (values read back from /proc); floats are not numbers
    here."""
    if isinstance(value, float):
        return None
    if not isinstance(value, (bool, int)):
        value = str(value).strip()
    try:
        return kernel_modules.kernel_integer(value, "long")
    except kernel_modules.OptionError:
        try:
            return kernel_modules.kernel_integer(value, "ullong")
        except kernel_modules.OptionError:
            return None


def same_value(configured, running):
    """Whether a configured option value equals the value the driver runs with: numerically
    when both read as numbers (``0x1`` is ``1``; ``-1`` is ``4294967295``, since the driver
    prints its 32-bit values unsigned), else as strings without quotes."""
    left, right = as_number(configured), as_number(running)
    if left is not None and right is not None:
        if left == right:
            return True
        in_32_bits = all(-0x80000000 <= n <= 0xFFFFFFFF for n in (left, right))
        return in_32_bits and (left - right) % 0x100000000 == 0
    return unquote(str(configured)) == unquote(str(running))


# RmNvlinkBandwidth keywords, in the order the driver tries them (src/nvidia/src/kernel/gpu_mgr/
# gpu_mgr.c, the RmNvlinkBandwidth registry override); anything else leaves FULL.
NVLINK_BW_MODES = ("OFF", "MIN", "HALF", "3QUARTER", "LINKCOUNT")


def nvlink_bandwidth_mode(value):
    """The NVLink bandwidth mode the driver takes from ``NVreg_RmNvlinkBandwidth``.

    The driver compares the value with each keyword over the value's own length only
    (portStringCompare(value, keyword, strlen(value)), case-sensitive), so a value that is a
    prefix of a keyword selects it: ``O`` is OFF, ``H`` is HALF, and the empty string matches
    OFF. A value that is a prefix of none (``FULL``, ``full``, ``half``) leaves FULL.
    """
    text = "" if value is None else str(value)
    for mode in NVLINK_BW_MODES:
        if mode.startswith(text):
            return mode
    return "FULL"
