# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which parts of gpufleet.tuning.host_tuning a run applies, from its tags: one task carries every
part, so each part stays taggable on its own (--tags sysctl) while a pass costs one module run.
The rule lives with the engine (module_utils/host_tuning.py, ``selected``)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: host_tuning_apply
short_description: The parts of gpufleet.tuning.host_tuning a run's tags select
version_added: 0.3.0
description:
  - Takes the run's C(ansible_run_tags) and returns the parts of M(gpufleet.tuning.host_tuning)
    to apply, in the order they run.
  - A part is selected when V(all), its phase (V(runtime) or V(reboot_required)) or its own tag
    (V(sysctl), V(pcie), V(pcie_acs), V(cpu_power), V(lxc_memlock), V(peermem),
    V(nvidia_options), V(kernel_cmdline)) is asked for, and neither its phase nor its tag is
    in C(ansible_skip_tags).
positional: skip_tags
options:
  _input:
    description: The run's C(ansible_run_tags).
    type: list
    elements: str
    required: true
  skip_tags:
    description: The run's C(ansible_skip_tags).
    type: list
    elements: str
    default: []
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Tune the parts this run's tags ask for
  gpufleet.tuning.host_tuning:
    parts: "{{ parts }}"
    apply: "{{ ansible_run_tags | gpufleet.tuning.host_tuning_apply(ansible_skip_tags) }}"
"""

RETURN = r"""
_value:
  description: Part names, in the order the parts run (for example V([sysctl_profile, cpu_power])).
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils import host_tuning


def host_tuning_apply(run_tags, skip_tags=None):
    for name, value in (("ansible_run_tags", run_tags), ("ansible_skip_tags", skip_tags or [])):
        if not isinstance(value, (list, tuple, set)) or not all(isinstance(tag, str) for tag in value):
            raise AnsibleFilterError("host_tuning_apply: %s must be a list of tag names, got %r" % (name, value))
    return host_tuning.selected(run_tags, skip_tags)


class FilterModule:
    def filters(self):
        return {"host_tuning_apply": host_tuning_apply}
