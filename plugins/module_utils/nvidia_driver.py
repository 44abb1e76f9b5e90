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
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops

PREFIX = "NVreg_"
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
    """``value`` as an int when it reads as one the way the kernel parses a uint parameter
    (decimal, 0x hex, 0 octal), else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text, 0)
    except ValueError:
        if re.match(r"^0[0-7]+\Z", text):
            return int(text, 8)
        return None


def same_value(configured, running):
    """Whether a configured option value equals the value the driver runs with: numerically
    when both read as numbers (``0x1`` is ``1``), else as strings without quotes."""
    left, right = as_number(configured), as_number(running)
    if left is not None and right is not None:
        return left == right
    return unquote(str(configured)) == unquote(str(running))
