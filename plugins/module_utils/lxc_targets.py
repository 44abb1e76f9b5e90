# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which containers gpufleet.tuning.lxc_memlock raises over a selection: those lxc_containers
selected and those its ``containers`` option names (the inventory's containers of the host,
each with its ``guest``, and a hand-written list), each config file once.

Why a merge and not a list: the same container is often found twice (selected for its GPU and
named by the inventory), and it must be edited once, with the limit the entry gives and the
inventory host it is, so that a rollout's container step finds what was done for it.
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


def default_key(entry):
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


def merge(discovery, containers=None, key_of=None):
    """The targets, in order: discovery's selected containers, then each entry of ``containers``
    (a dict with one of vmid, name or path, optionally limit, and guest: the inventory host it
    is, which must name it by vmid or name). TargetError names a bad entry by its index.

    ``key_of(entry)``: the config file an entry names, as the caller resolves it (a name under a
    configured lxc.lxcpath, a path through a link); by default the stock paths."""
    targets = []
    by_key = {}
    key_of = key_of or default_key

    def add(entry, label, source, guest=None):
        key = key_of(entry)
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
    for index, entry in enumerate(containers or []):
        where = "containers[%d]" % index
        if not isinstance(entry, dict):
            raise TargetError("%s: %r is not valid: each container is a dict with one of vmid, name or path, and "
                              "optionally limit and guest" % (where, entry))
        guest = entry.get("guest")
        plain = dict((k, v) for k, v in entry.items() if k != "guest")
        kind = _check(plain, where)
        if guest not in (None, ""):
            if kind == "path":
                raise TargetError("%s: the inventory host %s must name its container by vmid or name "
                                  "(gpufleet_lxc_vmid or gpufleet_lxc_name), not by path" % (where, guest))
            add(plain, _label(plain, guest), "inventory host %s" % guest, guest)
        else:
            add(plain, _label(plain), "listed in containers")
    return targets
