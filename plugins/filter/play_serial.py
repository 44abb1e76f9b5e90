# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A play's ``serial`` checked before the play starts: a host count, a percentage, or a list of
those, returned as given; anything else is refused naming the value.

Why the collection's playbooks template their ``serial`` through it: besides the clear error,
ansible-playbook templates a play's ``serial`` in its own process, before it forks a worker
for each host and task. Templating it through a filter of this collection makes that process
load the collection's filters there, once; every worker then inherits them. Otherwise each
worker that uses one of them loads them all again (ansible-core imports every file of a
collection's filter folder to find one filter), about 60 ms per host and task on a 2-core
controller (benchmarks/runtime_pass.py, README "Speed of a tuning pass").
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: play_serial
short_description: Check a play's serial (a host count, a percentage, or a list of them)
version_added: 0.3.0
description:
  - Returns the value as given when it is a host count (V(2), V("2")), a percentage of the
    play's hosts (V("25%")), or a list of those (one batch size after the other); fails naming
    the value otherwise, before any host is touched.
  - The collection's playbooks template their C(serial) through it, which also makes
    ansible-playbook load the collection's filters once in its own process instead of in every
    worker it forks.
positional: ''
options:
  _input:
    description: The play's serial (C(gpufleet_serial)).
    type: raw
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Tune GPU hosts a few at a time
  hosts: gpu_hosts
  serial: "{{ gpufleet_serial | default('100%') | gpufleet.tuning.play_serial }}"
  roles:
    - gpufleet.tuning.host
"""

RETURN = r"""
_value:
  description: The serial, as given.
  type: raw
"""

_COUNT = re.compile(r"^\s*[1-9][0-9]*\s*\Z")
_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*\Z")


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
    if isinstance(serial, (list, tuple)):
        if not serial:
            raise AnsibleFilterError("serial=[]: give at least one batch size")
        return [_one(value, "serial[%d]" % index) for index, value in enumerate(serial)]
    return _one(serial, "serial")


class FilterModule:
    def filters(self):
        return {"play_serial": play_serial}
