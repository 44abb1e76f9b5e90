# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which containers the host role raises the memlock limit of: those gpufleet.tuning.lxc_containers
selected, the inventory's containers of this host and the hand-written list, each config once.
The merge lives in module_utils/lxc_targets.py, shared with the host_tuning engine.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: lxc_memlock_targets
short_description: The containers whose memlock limit the host role raises, each once
version_added: 0.1.0
description:
  - Merges the containers gpufleet.tuning.lxc_containers selected, the inventory's containers
    of this host and the hand-written list into one list of gpufleet.tuning.lxc_memlock
    arguments, one per config file. A container named twice keeps its first place; a
    C(limit) given by the inventory or the list wins over the default.
  - Each item has one of C(vmid), C(name) or C(path), optionally C(limit), and C(label) and
    C(source) for the task output and the summary. A container the inventory names also has
    C(guest), its inventory host, so that a play on that host finds what was done for it.
positional: inventory, explicit
options:
  _input:
    description: The registered result of gpufleet.tuning.lxc_containers (may be empty or
      skipped).
    type: dict
    required: true
  inventory:
    description: Containers from the inventory, each a dict with C(guest) and one of C(vmid)
      or C(name), optionally C(limit).
    type: list
    elements: dict
    default: []
  explicit:
    description: The hand-written list (C(host_lxc_containers)), each a dict with one of
      C(vmid), C(name) or C(path), optionally C(limit).
    type: list
    elements: dict
    default: []
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Raise the memlock limit of the selected containers
  gpufleet.tuning.lxc_memlock:
    vmid: "{{ item.vmid | default(omit) }}"
    name: "{{ item.name | default(omit) }}"
    path: "{{ item.path | default(omit) }}"
  loop: "{{ discovered | gpufleet.tuning.lxc_memlock_targets([], host_lxc_containers) }}"
"""

RETURN = r"""
_value:
  description: One dict per container config, in order.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_targets


def lxc_memlock_targets(discovery, inventory=None, explicit=None):
    try:
        return lxc_targets.merge(discovery, inventory, explicit)
    except lxc_targets.TargetError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {"lxc_memlock_targets": lxc_memlock_targets}
