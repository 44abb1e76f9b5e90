# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which items of the node's record a revert may act on: each one checked when the record is read.

Why: state.json is data, and tuning_revert writes what it holds as root. Before this check a
crafted record could make a revert write any file (a root-owned 0755 program in /usr/local/bin,
a line in /etc/cron.d), put a link to /etc/shadow anywhere, write any sysfs file or load any
kernel module. An item is now kept only when it is one the collection's modules can record,
with a value they can record:

- ``sysctl`` (area sysctl): a dotted sysctl name (its path stays under /proc/sys), a one-line value;
- ``sysfs`` (area cpu_power): a CPU's ``cpuidle/stateM/disable`` (0 or 1) or a cpufreq policy's
  ``scaling_governor`` / ``energy_performance_preference`` (one short word);
- ``pcie_mrrs`` / ``pcie_acs`` (area pcie): a PCI address as sysfs names it; a Max Read Request
  Size of 128 to 4096 bytes / an ACS Control word ``0x%04x``;
- ``kmod`` (area peermem): nvidia_peermem, ``loaded`` or ``not loaded``;
- ``file``: a path its area's module writes (state/managed_paths.py), content that decodes, a mode
  without setuid, setgid or sticky bits and not writable by others, owned by root (an LXC config
  keeps the owner it had); a link only where managed_paths allows one. A container config
  (lxc_memlock edits one, never makes one) is never "absent" and its content must read as an
  LXC or Proxmox config: ``<dir>/<name>/config`` also names files such as /etc/selinux/config.

Every value a revert can write is checked: the first ``before``, what a later run found
(``run_before``, undone by ``only_run``) and a file's last content (``after_content``, which a later
run's ``run_before`` is taken from).

Why on load (store.load): every reader goes through it (tuning_revert, tuning_state's drift check
and its recording, each tuning module's recorder), so a refused item is set aside before anything
reads the machine for it or writes it, and the rest of the record stays usable. It is kept in the
file as it was (store.dump), never acted on, and named with its reason in each result.
"""

from __future__ import annotations

import base64
import binascii
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import lxc_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import managed_paths

# The area that records each kind of value item (files: managed_paths.RULES).
AREA_OF = {"sysctl": "sysctl", "sysfs": "cpu_power", "pcie_mrrs": "pcie", "pcie_acs": "pcie", "kmod": "peermem"}
KERNEL_MODULES = ("nvidia_peermem",)   # nvidia_peermem.MODULE
MODULE_STATES = ("loaded", "not loaded")
MRRS_SIZES = ("128", "256", "512", "1024", "2048", "4096")   # pci_config.SIZES
MAX_VALUE = 4096   # a sysctl or sysfs write is one page at most

_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]\Z")   # pci_config.is_sysfs_bdf
_ACS_WORD = re.compile(r"^0x[0-9a-f]{4}\Z")
_IDLE = re.compile(r"^/sys/devices/system/cpu/cpu[0-9]+/cpuidle/state[0-9]+/disable\Z")
_POLICY = re.compile(r"^/sys/devices/system/cpu/cpufreq/policy[0-9]+/(?:scaling_governor|energy_performance_preference)\Z")
_WORD = re.compile(r"^[A-Za-z0-9_]{1,64}\Z")
_MODE = re.compile(r"^[0-7]{3,4}\Z")


def refusal(key, entry, root="/"):
    """Why the record's item ``key`` is not one this collection restores, or None when it is.
    ``root``: the node's / (a test's fake tree), which the recorded paths start with."""
    if not isinstance(entry, dict):
        return "not an item of this collection's record (a %s)" % type(entry).__name__
    how, target, area = entry.get("how"), entry.get("target"), entry.get("area")
    if how not in state_items.HOWS:
        return "kind %r is none the collection records" % (how,)
    if not isinstance(target, str) or key != entry.get("key") or key != state_items.key_of(how, target):
        return "its key does not name its kind and target"
    why = target_refusal(how, target, area, root)
    if why:
        return why
    run_before = entry.get("run_before")
    if run_before is not None and not (isinstance(run_before, dict) and "value" in run_before):
        return "run_before is not a run and a value"
    values = [("before", entry.get("before"))]
    if run_before is not None:
        values.append(("run_before", run_before["value"]))
    if how == "file" and entry.get("after_content") is not None:
        values.append(("after_content", entry["after_content"]))
    for name, value in values:
        why = _value_refusal(how, area, target, value, root, name)
        if why:
            return "%s: %s" % (name, why)
    return None


def target_refusal(how, target, area, root="/"):
    """Why no module of ``area`` records an item of kind ``how`` for ``target``, or None. Also
    checked when a run records an item (state/record.py), so the record only ever holds what a
    revert will act on."""
    if not isinstance(area, str):
        return "area %r is not an area's name" % (area,)
    if how != "file":
        if area != AREA_OF.get(how):
            return "area %r records no %s item" % (area, how)
        if how == "sysctl":
            reason = sysctl.validate_key(target)
            return None if reason is None else "key %r %s" % (target, reason)
        if how == "sysfs":
            node = managed_paths.node_path(target, root)
            if node is None or not (_IDLE.match(node) or _POLICY.match(node)):
                return ("%s is not a file cpu_power writes (cpuN/cpuidle/stateM/disable, cpufreq/policyN/"
                        "scaling_governor or energy_performance_preference)" % target)
            return None
        if how in ("pcie_mrrs", "pcie_acs"):
            return None if _BDF.match(target) else "%r is not a PCI address as sysfs names it" % (target,)
        return None if target in KERNEL_MODULES else "%r is not a kernel module the collection loads" % (target,)
    if area not in managed_paths.RULES:
        return "area %r writes no file" % (area,)
    node = managed_paths.node_path(target, root)
    if node is None:
        return "%r is not a normalized absolute path" % (target,)
    if managed_paths.kind_of(area, node) is None:
        return "%s is not a file the %s area writes" % (node, area)
    return None


def _value_refusal(how, area, target, value, root, name):
    """Why ``value`` is not one the module of ``area`` records for ``target``, or None."""
    if how == "file":
        kind = managed_paths.kind_of(area, managed_paths.node_path(target, root))
        return _file_refusal(kind, area, target, value, name)
    if value is None:
        if how in ("sysctl", "sysfs"):
            return None  # nothing to write back: the revert names it and writes nothing
        return "none recorded, and its module always records one"  # None would unload, or fail the revert
    if not isinstance(value, str) or len(value) > MAX_VALUE or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "%r is not one line of text" % (value,)
    if how == "sysctl":
        reason = sysctl.validate_stored_value(value)
        return None if reason is None else "%r %s" % (value, reason)
    if how == "sysfs":
        if target.endswith("/disable"):
            return None if value in ("0", "1") else "%r is not 0 or 1" % (value,)
        return None if _WORD.match(value) else "%r is not a governor or preference name" % (value,)
    if how == "pcie_mrrs":
        return None if value in MRRS_SIZES else "%r is not a Max Read Request Size (%s)" % (value, ", ".join(MRRS_SIZES))
    if how == "pcie_acs":
        return None if _ACS_WORD.match(value) else "%r is not an ACS Control word (0x0000 to 0xffff)" % (value,)
    return None if value in MODULE_STATES else "%r is neither 'loaded' nor 'not loaded'" % (value,)


def _file_refusal(kind, area, target, value, name):
    if kind == managed_paths.BACKUP and name != "after_content" and value is not None:
        return "a backup the module wrote is only ever removed by a revert"
    container_config = area == "lxc_memlock" and kind != managed_paths.BACKUP
    if value is None:
        # lxc_memlock edits a container's existing config and never makes one: "absent" there
        # would have a revert delete a file that only has a config's name (/etc/selinux/config).
        return "lxc_memlock never creates a container config" if container_config else None
    if not isinstance(value, dict):
        return "not a file's state"
    if "link" in value:
        return managed_paths.link_refusal(kind, target, value["link"])
    if "content_b64" not in value:
        return None  # a digest only: not restorable, and reported as such
    try:
        content = base64.b64decode(value["content_b64"], validate=True)
    except (TypeError, ValueError, binascii.Error):
        return "its content is not base64"
    if container_config and not lxc_config.looks_like_config(content, lxc_config.is_proxmox_path(target)):
        return "its content is not a container config (lines other than lxc.* or Proxmox keys)"
    if area == "serving_launch" and not _launch_dropin(content):
        return "its content is not a launch drop-in of the collection (marker, [Service], ExecStart= and Environment= only)"
    mode = value.get("mode")
    if not isinstance(mode, str) or not _MODE.match(mode):
        return "mode %r is not octal permission bits" % (mode,)
    bits = int(mode, 8)
    if bits & 0o7000:
        return "mode %s has setuid, setgid or sticky bits, which no module of the collection writes" % mode
    if bits & 0o002:
        return "mode %s lets every user write it" % mode
    uid, gid = value.get("uid"), value.get("gid")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (uid, gid)):
        return "owner %r:%r is not a uid and gid" % (uid, gid)
    if area not in managed_paths.OWN_OWNER_AREAS and (uid not in _trusted(os.geteuid()) or gid not in _trusted(os.getegid())):
        return "owner %d:%d: the collection's files go back root's" % (uid, gid)
    return None


def _launch_dropin(content):
    """A launch drop-in as serving_launch writes it: the marker in its first lines, then only
    comments, ``[Service]``, ``ExecStart=`` and ``Environment=`` lines, no ``+`` or ``!``
    prefix (the command run with full privileges) and no loader variable (``LD_PRELOAD``). A
    record that would put back anything else (``ExecStartPre=``, ``User=``) as a unit's drop-in
    is not the collection's."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not managed_files.is_owned(text):
        return False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")) or line == "[Service]":
            continue
        if not line.startswith(("ExecStart=", "Environment=")) or line.endswith("\\"):
            return False
        if line.startswith("ExecStart=") and line[len("ExecStart="):].lstrip("-@:")[:1] in ("+", "!"):
            return False  # full privileges, whatever the unit's User=
        if line.startswith("Environment=") and "LD_" in line:
            return False  # the loader's variables: code loaded into the server
    return True


def _trusted(own):
    """Root, and whoever runs the revert (root on a node; the test's user on a fake tree): giving a
    file back to oneself gives nobody anything."""
    return (0, own)


def listed(state):
    """The refused items of a loaded state (store.load): ``[{key, kind, area, target, why}]``."""
    out = []
    for key in sorted(state.get("refused") or {}):
        entry, why = state["refused"][key]["entry"], state["refused"][key]["why"]
        shown = entry if isinstance(entry, dict) else {}
        out.append({"key": key, "kind": _text(shown.get("how")), "area": _text(shown.get("area")),
                    "target": _text(shown.get("target")), "why": why})
    return out


def warning(refused, what):
    """One warning naming the refused items (listed()) and ``what`` was not done with them."""
    named = "; ".join("%s (%s)" % (r["key"], r["why"]) for r in refused)
    return ("%s: the record names %d item(s) this collection does not write, refused (move them out of the "
            "state file once understood): %s" % (what, len(refused), named))


def _text(value):
    return None if value is None else str(value)
