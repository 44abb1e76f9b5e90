# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An item of the node's record read back from the machine, and put back: the drift check
(tuning_state mode=drift) and the revert (tuning_revert).

Apart from state/items.py (what an item is) because reading a sysctl, a sysfs value, a PCIe
register, a kernel module or a file takes the interfaces of each (hw/*), and only the drift
check and the revert need them: the tuning modules, which record their own before-state through
items.py, stay without that code.
"""

from __future__ import annotations

import base64
import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_modules
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_acs
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state.items import ItemError, describe, file_digest, file_snapshot


def read_current(item, paths):
    """The item's value now, in the form of its ``after`` (a file in digest form)."""
    how, target = item["how"], item["target"]
    try:
        if how == "sysctl":
            return sysctl.read_value(target, root=paths.proc_sys)
        if how == "sysfs":
            text = fileops.read_quiet(target)
            return None if text is None else " ".join(text.split())
        if how == "kmod":
            return "loaded" if kernel_modules.module_state(target, paths.proc, paths.sys)["loaded"] else "not loaded"
        if how == "pcie_mrrs":
            data = pci_config.read_config(paths.sys, target)
            cap = pci_config.express_capability(data)
            size = pci_config.mrrs_of(pci_config.u16(data, cap + pci_config.EXP_DEVCTL))
            return None if size is None else str(size)
        if how == "pcie_acs":
            found = pci_acs.read_acs(paths.sys, target)
            return None if found is None else "0x%04x" % found["ctrl"]
        if how == "file":
            return file_digest(file_snapshot(target, item.get("link", False)))
    except ItemError:
        raise
    except (OSError, IOError) as exc:
        raise ItemError("cannot read %s: %s" % (describe(item), fileops.describe(exc)))
    except Exception as exc:  # sysctl.SysctlError, pci errors: each names what failed
        raise ItemError("cannot read %s: %s" % (describe(item), exc))
    raise ItemError("unknown item kind %r" % how)


def restore(item, paths, tools):
    """Put the item's ``before`` back; ItemError naming it when that fails."""
    how, target, before = item["how"], item["target"], item["before"]
    try:
        if how == "sysctl":
            if before is None:
                raise ItemError("sysctl %s had no value before; nothing to write back" % target)
            sysctl.write_value(target, before, root=paths.proc_sys)
        elif how == "sysfs":
            if before is None:
                raise ItemError("%s had no value before; nothing to write back" % target)
            with open(target, "w") as handle:
                handle.write(before)
        elif how == "pcie_mrrs":
            data = pci_config.read_config(paths.sys, target)
            pci_config.set_mrrs(paths.sys, target, pci_config.express_capability(data), int(before))
        elif how == "pcie_acs":
            found = pci_acs.read_acs(paths.sys, target)
            if found is None:
                raise ItemError("%s has no ACS capability any more" % target)
            old = int(before, 16)
            pci_acs.write_ctrl(paths.sys, target, found["offset"], found["ctrl"] ^ old, old)
        elif how == "kmod":
            _restore_module(target, before, tools)
        elif how == "file":
            _restore_file(target, before, item.get("link", False))
        else:
            raise ItemError("unknown item kind %r" % how)
    except ItemError:
        raise
    except (OSError, IOError) as exc:
        raise ItemError("cannot put back %s: %s" % (describe(item), fileops.describe(exc)))
    except Exception as exc:  # pci_config.NotTaken and kin name the device and the words
        raise ItemError("cannot put back %s: %s" % (describe(item), exc))


def _restore_module(name, before, tools):
    """Unload a module the collection loaded (or load one it unloaded) with modprobe, which
    also handles what depends on it; without modprobe nothing is attempted."""
    modprobe = tools.which("modprobe") if tools is not None else None
    if not modprobe:
        raise ItemError("kernel module %s: modprobe is not installed (install kmod), so it was not %s"
                        % (name, "loaded" if before == "loaded" else "unloaded"))
    outcome = tools.run([modprobe, name] if before == "loaded" else [modprobe, "-r", name])
    if not outcome.ok:
        raise ItemError("kernel module %s: %s" % (name, outcome.describe()))


def _restore_file(path, before, link):
    path = fileops.check_path(path)
    if before is not None and "content_b64" not in before and "link" not in before:
        raise ItemError("file %s: its content before the first change was not recorded (the audit's plan did "
                        "not run before that change), so it cannot be put back" % path)
    if link and os.path.islink(path):
        os.unlink(path)
    if before is None or "link" in before:
        fileops.remove_file(path)
    if before is None:
        return
    if "link" in before:
        os.symlink(before["link"], path)
        return
    data = base64.b64decode(before["content_b64"])
    metadata = not path.startswith(state_items.PMXCFS)
    fileops.write_atomic(path, data, mode=int(before["mode"], 8), metadata=metadata,
                         owner=(before["uid"], before["gid"]) if metadata else None)
