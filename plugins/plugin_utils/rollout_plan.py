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

play_serial checks a play's ``serial`` before the play starts: a host count, a percentage, or a
list of those, returned as given; anything else is refused naming the value. The collection's
playbooks template their ``serial`` through it.

The filters rollout_plan and play_serial (plugins/filter/rollout.py) are thin wrappers over this
file; tests and other controller code import it here, never from a filter plugin.
"""

from __future__ import annotations

import math
import re

from ansible.errors import AnsibleFilterError

_COUNT = re.compile(r"^\s*[1-9][0-9]*\s*\Z")
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


def _valid(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 0
    if not isinstance(value, str):
        return False
    percent = _PERCENT.match(value)
    return bool(_COUNT.match(value)) or bool(percent) and 0 < float(percent.group(1)) <= 100


def _one(value, where):
    if not _valid(value):
        raise AnsibleFilterError("%s=%r: give a host count (2), a percentage of the play's hosts ('25%%'), "
                                 "or a list of those" % (where, value))
    return value


def play_serial(serial):
    """``serial`` as given when it is a host count, a percentage of the play's hosts or a list of
    those; AnsibleFilterError naming the bad value otherwise."""
    if isinstance(serial, (list, tuple)):
        if not serial:
            raise AnsibleFilterError("serial=[]: give at least one batch size")
        return [_one(value, "serial[%d]" % index) for index, value in enumerate(serial)]
    return _one(serial, "serial")
