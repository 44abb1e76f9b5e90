# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host's tuning did with each LXC container's memlock limit, one entry per container:
the host role publishes it as host_lxc_memlock for its restart handlers and for a rollout's
container step, which reads it from the host (``hostvars[host].host_lxc_memlock``) in a later
play and restarts its container drained. In Python so that both read the same shape."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: lxc_memlock_outcome
short_description: What a host's tuning did with each LXC container's memlock limit
version_added: 0.3.0
description:
  - Takes a registered M(gpufleet.tuning.lxc_memlock) result over several containers (its
    C(results)) and returns one entry per container it saw, with C(container), C(guest) (the
    inventory host of the container, when the inventory names it), C(manager), C(lxc_path),
    C(limit_wanted), C(changed), C(pending), C(pending_reason) and C(restart_required).
positional: ''
options:
  _input:
    description: The lxc_memlock result (C({}) when it did not run).
    type: dict
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Containers of this host waiting for a restart
  ansible.builtin.debug:
    msg: "{{ memlock_result | gpufleet.tuning.lxc_memlock_outcome | selectattr('restart_required') | list }}"
"""

RETURN = r"""
_value:
  description: One dict per container.
  type: list
  elements: dict
"""


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


class FilterModule:
    def filters(self):
        return {"lxc_memlock_outcome": lxc_memlock_outcome}
