# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's LXC containers, on the controller: which ones the inventory names for a
host, what its tuning did with each one's memlock limit, and the lines its closing summary
says about every container of the host.

- lxc_memlock_inventory: the inventory's containers that live on a host (their
  gpufleet_lxc_host), as the host role's LXC part takes them: by vmid (Proxmox) or by name
  (plain LXC), with the memlock limit each asks for. A filter rather than the Jinja loop the
  host role had, which was the largest template of the tuning call; it returns what the loop
  returned.
- lxc_memlock_outcome: one entry per container of a gpufleet.tuning.lxc_memlock result; the
  host role publishes it as host_lxc_memlock for its restart handlers and for a rollout's
  container step, which reads it from the host (``hostvars[host].host_lxc_memlock``) in a later
  play and restarts its container drained. In Python so that both read the same shape.
- lxc_memlock_report: which containers were tuned, which already had the limit, which are
  pending (locked) or failed, which were left alone and why, and which wait for a restart, from
  the lxc_memlock result and its discovery (the shape gpufleet.tuning.lxc_containers returns).

In plugin_utils so that the filters (plugins/filter/changes.py) and host_summary (changes.py)
share it without importing a filter plugin.
"""

from __future__ import annotations

import os

from jinja2.filters import do_int

PREFIX = "containers: "


def _ran(result):
    return isinstance(result, dict) and bool(result) and not (
        result.get("skipped") is True and not isinstance(result.get("results"), list))


def _result_label(result):
    item = result.get("item")
    if isinstance(item, dict) and item.get("label"):
        return str(item["label"])
    return str(result.get("container_name") or result.get("path") or "a container")


def _source(result):
    item = result.get("item")
    if isinstance(item, dict) and item.get("source"):
        return " [%s]" % item["source"]
    return ""


def _restart_line(result, label, restart_ok, check_mode):
    running = result.get("limit_running")
    if restart_ok:
        what = "would be restarted at the end of the play" if check_mode else "restarted at the end of the play"
        return "%s%s: %s to apply the new limit (host_lxc_restart_ok)" % (PREFIX, label, what)
    return ("%s%s: restart pending: the running container still has %s; it gets the new limit at its next "
            "start (host_lxc_restart_ok=true lets the role restart it)"
            % (PREFIX, label, "memlock %s" % running if running else "its old limit"))


def _memlock_lines(result, restart_ok, check_mode):
    label = _result_label(result)
    if result.get("skipped"):
        return []
    if result.get("failed"):
        return ["%sFAILED %s: %s" % (PREFIX, label, result.get("msg", "see the task output"))]
    if result.get("pending"):
        return ["%sPENDING %s: %s" % (PREFIX, label, result.get("pending_reason") or "left as it was")]
    after = result.get("limit_after") or "?"
    if result.get("changed"):
        before = result.get("limit_before") or "(none, LXC's default)"
        line = "%s%s %s: lxc.prlimit.memlock %s -> %s%s" % (
            PREFIX, "would tune" if check_mode else "tuned", label, before, after, _source(result))
    else:
        line = "%s%s already has lxc.prlimit.memlock %s%s" % (PREFIX, label, after, _source(result))
    lines = [line]
    if result.get("restart_required"):
        lines.append(_restart_line(result, label, restart_ok, check_mode))
    return lines


def lxc_memlock_report(discovery, memlock=None, restart_ok=False, check_mode=False):
    discovery = discovery if isinstance(discovery, dict) else {}
    memlock = memlock if isinstance(memlock, dict) else {}
    results = [r for r in (memlock.get("results") or []) if isinstance(r, dict)]
    if not _ran(discovery) and not results:
        return []  # neither task ran on this host (another tag was asked for)
    lines = []
    if discovery.get("failed"):
        lines.append("%sFAILED to list this host's containers: %s" % (PREFIX, discovery.get("msg", "see the task output")))
    tuned_paths = set()
    for result in results:
        lines.extend(_memlock_lines(result, restart_ok, check_mode))
        if result.get("path"):
            tuned_paths.add(os.path.normpath(str(result["path"])))
    for record in discovery.get("containers") or []:
        if not isinstance(record, dict) or record.get("selected"):
            continue
        if os.path.normpath(str(record.get("path"))) in tuned_paths:
            continue  # named by the inventory or host_lxc_containers: reported above
        name = str(record.get("id"))
        if record.get("hostname"):
            name = "%s (%s)" % (name, record["hostname"])
        lines.append("%sleft alone %s: %s" % (PREFIX, name, record.get("reason") or "not selected"))
    unmatched = discovery.get("unmatched") or []
    if unmatched:
        lines.append("%sselector term(s) %s named no container on this host" % (PREFIX, ", ".join(map(str, unmatched))))
    if not lines:
        if _ran(discovery) and not discovery.get("lxc_host"):
            lines.append("%snone: not a Proxmox VE or LXC host" % PREFIX)
        else:
            lines.append("%snone found (read %s)" % (PREFIX, ", ".join(discovery.get("sources") or []) or "nothing"))
    return lines


def lxc_memlock_outcome(result):
    if not isinstance(result, dict):
        return []
    found = []
    for item in result.get("results") or []:
        if not isinstance(item, dict) or item.get("container_name") is None:
            continue
        found.append({
            "container": str(item["container_name"]),
            "guest": (item.get("item") or {}).get("guest"),
            "manager": item.get("manager") or "lxc",
            "lxc_path": item.get("lxc_path"),
            "limit_wanted": item.get("limit_wanted"),
            "changed": bool(item.get("changed")),
            "pending": bool(item.get("pending")),
            "pending_reason": item.get("pending_reason"),
            "restart_required": bool(item.get("restart_required")),
        })
    return found


def lxc_memlock_inventory(guests, hostvars, host, limit):
    found = []
    for guest in guests or []:
        guest_vars = hostvars[guest]
        if guest_vars.get("gpufleet_lxc_host", "") != host:
            continue
        wanted = guest_vars.get("gpufleet_lxc_memlock_limit", limit)
        if "gpufleet_lxc_vmid" in guest_vars:
            # As Jinja's int filter converts (0 for what is not a number), the loop's behaviour.
            found.append({"guest": guest, "vmid": do_int(guest_vars["gpufleet_lxc_vmid"]), "limit": wanted})
        elif "gpufleet_lxc_name" in guest_vars:
            found.append({"guest": guest, "name": guest_vars["gpufleet_lxc_name"], "limit": wanted})
    return found
