# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change records of a gpufleet.tuning.host_tuning result's parts, in the order they ran:
the same walk the engine does for its own ``changes`` (module_utils/host_tuning.py,
``records_of``), so a failed call's parts are read the same way: a failed part claims no
records, a failed loop keeps those of its containers that did change."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: host_tuning_records
short_description: The change records of gpufleet.tuning.host_tuning's parts
version_added: 0.3.0
description:
  - Takes the C(modules) of a M(gpufleet.tuning.host_tuning) result (one entry per module) and
    returns their change records in the order the parts ran, also for a failed call (the parts
    applied before the failure keep theirs).
  - The state file's own record is not among them (it is the record, not the tuning).
positional: ''
options:
  _input:
    description: The C(modules) of a registered M(gpufleet.tuning.host_tuning) result (C({}) when it did not run).
    type: dict
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: What this run changed on the host
  ansible.builtin.set_fact:
    host_changes: "{{ tuned.modules | default({}) | gpufleet.tuning.host_tuning_records }}"
"""

RETURN = r"""
_value:
  description: Change records (C(area), C(kind), C(target), C(before), C(after)).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils import host_tuning


def host_tuning_records(results):
    if not isinstance(results, dict):
        raise AnsibleFilterError("host_tuning_records expects the modules of a host_tuning result ({module: result}), got %s"
                                 % type(results).__name__)
    return host_tuning.records_of(results)


class FilterModule:
    def filters(self):
        return {"host_tuning_records": host_tuning_records}
