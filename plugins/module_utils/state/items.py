# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restorable items: the things a revert puts back, derived from the modules' change records.

A change record names what a module changed in the words of its area (``cpu0-3/state3 (C6)
disable``, ``0000:01:00.0 max_read_request_size``, a file by digest). A revert needs the
thing itself: one sysfs file per CPU, one register of one device, the bytes of a file. This
file is the one translation between the two, so that the modules keep their records and the
state store (store.py) and the revert (tuning_revert.py) never parse an area's words.

Item kinds (``how``):

- ``sysctl``: a key under /proc/sys; before/after are the kernel's text;
- ``sysfs``: one sysfs file (a CPU's idle-state ``disable``, a cpufreq policy's governor);
- ``pcie_mrrs``: one device's Max Read Request Size in bytes, as text;
- ``pcie_acs``: one bridge's ACS Control word, ``0x%04x``;
- ``kmod``: a kernel module, ``loaded`` / ``not loaded``;
- ``file``: a file; its before is the content itself (``content_b64``, mode, owner) or None
  when it did not exist, or ``{"link": target}`` for a symbolic link; after is the record's
  digest form, which is all a drift check needs.

Value records that only describe a file's content (an LXC config's memlock line, a kernel
argument, a driver option, a module parameter) are not items: the file record of the same
change carries what a revert needs. ``informational`` says which.

Reading an item back from the machine and putting it back (the kernel's and the hardware's
interfaces) is state/access.py: every tuning module records its own before-state through this
file, and need not carry the code that reads PCI config space or loads kernel modules.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import re
import stat

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import cpu_sysfs

HOWS = ("sysctl", "sysfs", "pcie_mrrs", "pcie_acs", "kmod", "file")

# Areas whose changes take effect at the next boot: a revert puts their files back and says a
# reboot is pending.
REBOOT_AREAS = ("kernel_cmdline", "nvidia_options")

# Value records that restate what a file record of the same change holds.
_INFORMATIONAL_AREAS = ("lxc_memlock", "kernel_cmdline", "nvidia_options", "peermem")

# cpu_power's record targets: ``cpu0-3,8/state3 (C6) disable`` and ``policy0-1/scaling_governor``.
_IDLE_RE = re.compile(r"^cpu(?P<cpus>[0-9,\-]+)/state(?P<index>[0-9]+) \(.*\) disable\Z")
_POLICY_RE = re.compile(r"^policy(?P<ids>[0-9,\-]+)/(?P<attr>[a-z_]+)\Z")
_PCIE_RE = re.compile(r"^(?P<bdf>\S+) (?P<field>max_read_request_size|acs_control)\Z")

# Proxmox's cluster filesystem refuses chmod and chown: files there are written without them.
PMXCFS = "/etc/pve/"


class ItemError(Exception):
    """An item cannot be read or written; the message names it."""


class Paths:
    """Where the kernel's files are; a test points ``root`` at a fake tree."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.proc_sys = os.path.join(root, "proc", "sys")
        self.sys = os.path.join(root, "sys")
        self.cpu = os.path.join(root, "sys", "devices", "system", "cpu")


def key_of(how, target):
    return "%s:%s" % (how, target)


def informational(record):
    """True for a value record whose change a file record of the same run carries."""
    return record["kind"] == "value" and record["area"] in _INFORMATIONAL_AREAS


def from_record(record, paths):
    """The items one change record stands for: ``[{"key", "how", "target", "area", "reboot",
    "before", "after"}]``; empty for an informational record. ItemError for a value record of
    a shape this file does not know (a module changed its targets without telling it)."""
    area, kind, target = record["area"], record["kind"], record["target"]
    reboot = area in REBOOT_AREAS
    if kind == "file":
        item = _item("file", target, area, reboot, record["before"], record["after"])
        item["link"] = any(isinstance(side, dict) and "link" in side for side in (record["before"], record["after"]))
        return [item]
    if kind == "module":
        return [_item("kmod", target, area, reboot, record["before"], record["after"])]
    if kind != "value" or informational(record):
        return []
    before, after = record["before"], record["after"]
    if area == "sysctl":
        return [_item("sysctl", target, area, reboot, before, after)]
    if area == "cpu_power":
        found = _IDLE_RE.match(target)
        if found:
            return [_item("sysfs", os.path.join(paths.cpu, "cpu%d" % cpu, "cpuidle", "state%s" % found.group("index"),
                                                "disable"), area, reboot, before, after)
                    for cpu in cpu_sysfs.parse_cpu_list(found.group("cpus"))]
        found = _POLICY_RE.match(target)
        if found:
            return [_item("sysfs", os.path.join(paths.cpu, "cpufreq", "policy%d" % number, found.group("attr")),
                          area, reboot, before, after)
                    for number in cpu_sysfs.parse_cpu_list(found.group("ids"))]
    if area == "pcie":
        found = _PCIE_RE.match(target)
        if found:
            how = "pcie_mrrs" if found.group("field") == "max_read_request_size" else "pcie_acs"
            return [_item(how, found.group("bdf"), area, reboot, before, after)]
    raise ItemError("change record %s %r of area %s has no known way back" % (kind, target, area))


def _item(how, target, area, reboot, before, after):
    return {"key": key_of(how, target), "how": how, "target": target, "area": area, "reboot": reboot,
            "before": before, "after": after}


# --------------------------------------------------------------------------- reading

def file_snapshot(path, link=False):
    """What a revert needs to put ``path`` back: None (absent), the content (base64), mode and
    owner, or with ``link`` (a symbolic link the module manages as a link, a unit's wants
    link) ``{"link": target}``. Without ``link`` a symbolic link is followed, as the modules'
    writes follow it (fileops): ``/etc/default/grub`` kept in a config repository stays a link
    and its target's content is what changed."""
    path = fileops.check_path(path)
    if link:
        try:
            st = os.lstat(path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise ItemError("cannot read %s: %s" % (path, fileops.describe(exc)))
        return {"link": os.readlink(path)} if stat.S_ISLNK(st.st_mode) else file_snapshot(path)
    try:
        captured = fileops.capture(path)
    except OSError as exc:
        raise ItemError("cannot read %s: %s" % (path, fileops.describe(exc)))
    if captured.data is None:
        return None
    return {"content_b64": base64.b64encode(captured.data).decode("ascii"), "mode": "%04o" % captured.mode,
            "uid": captured.uid, "gid": captured.gid}


def file_digest(snapshot):
    """A snapshot in a file record's form (digest, size, mode), for comparisons."""
    if snapshot is None or "link" in snapshot:
        return snapshot
    if "content_b64" not in snapshot:
        return snapshot
    data = base64.b64decode(snapshot["content_b64"])
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "mode": snapshot["mode"]}


def same(item, current, wanted):
    """Whether ``current`` (read_current) is ``wanted`` (a before or an after)."""
    if item["how"] == "file":
        wanted = file_digest(wanted)
        if wanted is None or current is None or "link" in wanted or "link" in current:
            return wanted == current
        if "sha256" not in wanted:
            return False
        return current.get("sha256") == wanted["sha256"] and (
            wanted.get("mode") is None or current.get("mode") == wanted.get("mode"))
    if wanted is None or current is None:
        return wanted == current
    return " ".join(str(current).split()) == " ".join(str(wanted).split())


def describe(item):
    """``sysctl vm.swappiness``, ``file /etc/sysctl.d/90-gpufleet.conf``: for messages."""
    return "%s %s" % (item["how"], item["target"])


# --------------------------------------------------------------------------- writing
