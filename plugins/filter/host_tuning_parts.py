# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``parts`` of a gpufleet.tuning.host_tuning call from a role's settings: the parts the call
plans, each with its options, and null for a part its switch turns off (the module then
reports it as not enabled here, as a skipped task did). In Python so that the role's task
keeps each part's options as plain YAML, one line per option, which the role's tests read."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: host_tuning_parts
short_description: The parts of a gpufleet.tuning.host_tuning call, with the ones switched off as null
version_added: 0.3.0
description:
  - Takes every part's options and returns those of the parts in O(plan), in that order, with
    null for a part whose O(enabled) switch is false.
positional: plan, enabled
options:
  _input:
    description: Part name to that part's options.
    type: dict
    required: true
  plan:
    description: The parts the call plans (the others are left out of it).
    type: list
    elements: str
    required: true
  enabled:
    description: Part name to a switch; a part not named is on.
    type: dict
    default: {}
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Tune the host in one call
  gpufleet.tuning.host_tuning:
    parts: "{{ parts | gpufleet.tuning.host_tuning_parts(['sysctl_profile', 'pcie_maxreadreq'], {'pcie_maxreadreq': false}) }}"
"""

RETURN = r"""
_value:
  description: Part name to its options, or null when switched off.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean


def host_tuning_parts(parts, plan, enabled=None):
    if not isinstance(parts, dict):
        raise AnsibleFilterError("host_tuning_parts expects part name -> options, got %s" % type(parts).__name__)
    missing = [name for name in plan if name not in parts]
    if missing:
        raise AnsibleFilterError("host_tuning_parts: no options for part(s) %s" % ", ".join(map(str, missing)))
    enabled = enabled or {}
    out = {}
    for name in plan:
        try:
            on = boolean(enabled.get(name, True), strict=True)
        except TypeError as exc:
            raise AnsibleFilterError("host_tuning_parts: the switch of %s is not a boolean: %s" % (name, exc))
        out[name] = parts[name] if on else None
    return out


class FilterModule:
    def filters(self):
        return {"host_tuning_parts": host_tuning_parts}
