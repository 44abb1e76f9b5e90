# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every change record of a set of module results, each once.

The host role publishes what its run changed (host_changes) from its parts' results; the serving
role names those changes between its two benchmarks and a rollout says whether a host was
tuned. One rule for all of them (common/records.py ``claimed``): a loop-shaped result's items'
records, the items that did not fail; none for a failed result.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: change_records
short_description: Every change record of module results, in order
version_added: 0.4.0
description:
  - Takes a dict of name to registered module result (or a list of results) and returns their
    C(changes) records in order.
  - A loop-shaped result (C(results), one per item - a looped task, or
    M(gpufleet.tuning.lxc_memlock) over several containers) gives its items' records, of the items
    that did not fail; a failed result gives none (the module restored what it had applied);
    a skipped or empty result gives none.
options:
  _input:
    description: Name to result, or a list of results.
    type: raw
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: This run's change records
  ansible.builtin.set_fact:
    changes: "{{ {'sysctl_profile': sysctl_result, 'lxc_memlock': memlock_result} | gpufleet.tuning.change_records }}"
"""

RETURN = r"""
_value:
  description: The change records (area, kind, target, before, after).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records


def change_records(results):
    if results is None:
        return []
    if isinstance(results, dict):
        results = list(results.values())
    if not isinstance(results, list):
        raise AnsibleFilterError("change_records expects a dict of name: result or a list of results, got %s"
                                 % type(results).__name__)
    found = []
    for result in results:
        found.extend(records.claimed(result))
    return found


class FilterModule:
    def filters(self):
        return {"change_records": change_records}
