# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The batches of a fleet rollout: a canary batch, then batches of ``gpufleet_serial``.

Why a filter and not the play's ``serial`` alone: the canary is often a chosen host (the one
with the spare capacity, the one an operator watches), not the first in the inventory, and
the report must name the planned batches, the one where the rollout stopped and the hosts it
never touched. So the order and the batch sizes are decided here, once, from the play's hosts;
the rollout play takes them (its hosts added to a group in this order, ``serial`` the list
of sizes) and the report reads the same plan.

``serial`` is taken the way Ansible takes it (a count, or a percentage of all the hosts,
at least one host); the canary batch comes first whatever ``serial`` is.
"""

from __future__ import annotations

import math
import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: rollout_plan
short_description: Order a fleet's hosts into a canary batch and batches of a given size
version_added: 0.3.0
description:
  - Takes the rollout's hosts in play order and returns the order to roll them in (the canary
    hosts first), the C(serial) list for the play (canary size, then batch size) and the
    batches themselves.
positional: canary, serial, canary_hosts
options:
  _input:
    description: The hosts, in play order (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  canary:
    description: How many hosts the canary batch takes (the first ones in play order); ignored with O(canary_hosts).
    type: int
    default: 1
  serial:
    description: Hosts per later batch, a count (C(2)) or a percentage of all hosts (C(25%)), at least one host.
    type: raw
    default: 1
  canary_hosts:
    description: The hosts of the canary batch, by name; each must be one of the hosts.
    type: list
    elements: str
    default: []
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Plan the batches
  ansible.builtin.set_fact:
    plan: "{{ ansible_play_hosts_all | gpufleet.tuning.rollout_plan(1, gpufleet_serial | default(2)) }}"
# ['h1', 'h2', 'h3', 'h4'] -> {order: [h1, h2, h3, h4], serial: [1, 2], batches: [[h1], [h2, h3], [h4]]}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    order:
      description: The hosts in the order they are rolled.
      type: list
      elements: str
    serial:
      description: The play's C(serial) list, canary size then batch size.
      type: list
      elements: int
    batches:
      description: The planned batches, in order.
      type: list
      elements: list
    canary:
      description: The canary batch's hosts.
      type: list
      elements: str
"""

_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*\Z")


def batch_size(serial, total):
    """``serial`` as a host count for ``total`` hosts: ``2``, ``"2"``, ``"25%"`` (rounded down, at least 1)."""
    if isinstance(serial, bool):
        raise AnsibleFilterError("serial=%r: give a host count (2) or a percentage of the hosts ('25%%')" % serial)
    if isinstance(serial, int):
        count = serial
    elif isinstance(serial, str) and serial.strip().isdigit():
        count = int(serial.strip())
    elif isinstance(serial, str) and _PERCENT.match(serial):
        percent = float(_PERCENT.match(serial).group(1))
        if not 0 < percent <= 100:
            raise AnsibleFilterError("serial=%r: a percentage must be above 0 and at most 100" % serial)
        count = max(1, int(math.floor(total * percent / 100.0)))
    else:
        raise AnsibleFilterError("serial=%r: give a host count (2) or a percentage of the hosts ('25%%')" % (serial,))
    if count < 1:
        raise AnsibleFilterError("serial=%r: a batch needs at least one host" % (serial,))
    return count


def rollout_plan(hosts, canary=1, serial=1, canary_hosts=None):
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(h, str) for h in hosts):
        raise AnsibleFilterError("rollout_plan: the hosts must be a list of names, got %r" % (hosts,))
    hosts = list(dict.fromkeys(hosts))
    canary_hosts = list(dict.fromkeys(canary_hosts or []))
    unknown = [h for h in canary_hosts if h not in hosts]
    if unknown:
        raise AnsibleFilterError("gpufleet_canary_hosts names %s, not among the rollout's hosts (%s)"
                                 % (", ".join(unknown), ", ".join(hosts) or "none"))
    if not canary_hosts:
        if isinstance(canary, bool) or not isinstance(canary, int) and not (isinstance(canary, str) and canary.isdigit()):
            raise AnsibleFilterError("gpufleet_canary=%r: give the canary batch's host count (1 or more)" % (canary,))
        canary = int(canary)
        if canary < 1:
            raise AnsibleFilterError("gpufleet_canary=%r: the canary batch needs at least one host" % (canary,))
        canary_hosts = hosts[:canary]
    size = batch_size(serial, len(hosts))
    rest = [h for h in hosts if h not in canary_hosts]
    batches = ([canary_hosts] if canary_hosts else []) + [rest[i:i + size] for i in range(0, len(rest), size)]
    return {"order": canary_hosts + rest, "serial": [max(1, len(canary_hosts)), size], "batches": batches,
            "canary": canary_hosts}


class FilterModule:
    def filters(self):
        return {"rollout_plan": rollout_plan}
