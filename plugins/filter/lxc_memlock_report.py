# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host role's closing summary says about every container of the host: which were
tuned, which already had the limit, which are pending (locked) or failed, which were left alone
and why, and which wait for a restart. Reads the registered results of
gpufleet.tuning.lxc_containers and gpufleet.tuning.lxc_memlock (a looped task).
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: lxc_memlock_report
short_description: Summary lines about every LXC container of a host, for the host role
version_added: 0.1.0
description:
  - Takes the registered result of gpufleet.tuning.lxc_containers and returns one line per
    container, prefixed C(containers:), saying whether its memlock limit was raised (or would
    be, in check mode), it already had it, it is pending because Proxmox has locked it, the
    task failed for it, or it was left alone and why; then a line per container waiting for a
    restart, and the selector terms that named no container.
  - Returns an empty list when neither task ran (another tag was asked for), and one line
    saying so on a host with no container.
positional: memlock, restart_ok, check_mode
options:
  _input:
    description: The registered result of gpufleet.tuning.lxc_containers (may be empty).
    type: dict
    required: true
  memlock:
    description: The registered result of the looped gpufleet.tuning.lxc_memlock task.
    type: dict
    default: {}
  restart_ok:
    description: Whether the role restarts containers (C(host_lxc_restart_ok)).
    type: bool
    default: false
  check_mode:
    description: Word the lines as planned changes.
    type: bool
    default: false
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Say what happened to each container
  ansible.builtin.debug:
    msg: "{{ __host_lxc_containers | gpufleet.tuning.lxc_memlock_report(__host_lxc_memlock, host_lxc_restart_ok, ansible_check_mode) }}"
"""

RETURN = r"""
_value:
  description: Lines starting with C(containers:).
  type: list
  elements: str
"""

import os

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


class FilterModule:
    def filters(self):
        return {"lxc_memlock_report": lxc_memlock_report}
