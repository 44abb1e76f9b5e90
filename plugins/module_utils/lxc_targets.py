# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which containers the host raises the memlock limit of: those lxc_containers selected, the
inventory's containers of this host and the hand-written list, each config file once.

One place for the merge, because two callers need it: the filter
gpufleet.tuning.lxc_memlock_targets (controller side, for a play that loops
gpufleet.tuning.lxc_memlock itself) and the host_tuning engine, which merges on the node in the
same call that discovers the containers, so the host role needs no task of its own for it.
"""

from __future__ import annotations

import os
import re


class TargetError(ValueError):
    """A container entry that names no config, or more than one."""


PVE_LXC = "/etc/pve/lxc"
LXC_PATH = "/var/lib/lxc"
_TARGET_KEYS = ("vmid", "name", "path")
_ALLOWED_KEYS = ("vmid", "name", "path", "limit")
_VMID_CONF = re.compile(r"^([0-9]+)\.conf\Z")


def _key(entry):
    """The config file an entry names, as the module resolves it (the default paths)."""
    if entry.get("vmid") not in (None, ""):
        return os.path.join(PVE_LXC, "%d.conf" % int(str(entry["vmid"]).strip()))
    if entry.get("name") not in (None, ""):
        return os.path.join(LXC_PATH, str(entry["name"]), "config")
    path = os.path.normpath(str(entry["path"]))
    match = _VMID_CONF.match(os.path.basename(path))
    if match and os.path.dirname(path) == PVE_LXC:
        return os.path.join(PVE_LXC, "%d.conf" % int(match.group(1)))
    return path


def _check(entry, where):
    if not isinstance(entry, dict):
        raise TargetError("%s: %r is not valid: each container is a dict with one of vmid, name or "
                          "path, and optionally limit" % (where, entry))
    unknown = sorted(str(k) for k in entry if k not in _ALLOWED_KEYS)
    given = [k for k in _TARGET_KEYS if entry.get(k) not in (None, "")]
    if unknown or len(given) != 1:
        raise TargetError("%s: %r is not valid: %s; give exactly one of vmid, name or path, and "
                          "optionally limit" % (where, entry, "unknown key(s) %s" % ", ".join(unknown)
                                                if unknown else "%d of vmid, name, path given" % len(given)))
    if given == ["vmid"]:
        value = entry["vmid"]
        if isinstance(value, bool) or not str(value).strip().isdigit():
            raise TargetError("%s: vmid %r is not valid: a Proxmox container ID such as 101" % (where, value))
    return given[0]


def _label(entry, extra=None):
    target = [entry[k] for k in _TARGET_KEYS if entry.get(k) not in (None, "")][0]
    return "%s (%s)" % (target, extra) if extra else str(target)


def merge(discovery, inventory=None, explicit=None):
    targets = []
    by_key = {}

    def add(entry, label, source, guest=None):
        key = _key(entry)
        if key in by_key:
            known = by_key[key]
            if entry.get("limit") not in (None, ""):
                known["limit"] = entry["limit"]
            if guest and not known.get("guest"):
                known["guest"] = guest
            if source not in known["source"].split("; "):
                known["source"] = "%s; %s" % (known["source"], source)
            return
        item = dict((k, v) for k, v in entry.items() if k in _ALLOWED_KEYS and v not in (None, ""))
        item.update({"label": label, "source": source})
        if guest:
            item["guest"] = guest
        by_key[key] = item
        targets.append(item)

    discovery = discovery if isinstance(discovery, dict) else {}
    for record in discovery.get("containers") or []:
        if not isinstance(record, dict) or not record.get("selected"):
            continue
        # Proxmox containers by vmid (the module then takes Proxmox's config lock), plain LXC
        # ones by the path discovery read (it may be under a configured lxc.lxcpath).
        entry = {"vmid": record["vmid"]} if record.get("vmid") is not None else {"path": record["path"]}
        label = str(record.get("id"))
        if record.get("hostname") and record.get("hostname") != label:
            label = "%s (%s)" % (label, record["hostname"])
        add(entry, label, "selected: %s" % record.get("reason"))
    for index, guest in enumerate(inventory or []):
        if not isinstance(guest, dict):
            raise TargetError("inventory container %d: %r is not a dict" % (index, guest))
        where = "inventory host %s" % guest.get("guest", index)
        entry = dict((k, v) for k, v in guest.items() if k != "guest")
        if _check(entry, where) == "path":
            raise TargetError("%s: give gpufleet_lxc_vmid or gpufleet_lxc_name" % where)
        add(entry, _label(entry, guest.get("guest")), where, guest.get("guest"))
    for index, entry in enumerate(explicit or []):
        _check(entry, "host_lxc_containers[%d]" % index)
        add(entry, _label(entry), "listed in host_lxc_containers")
    return targets
