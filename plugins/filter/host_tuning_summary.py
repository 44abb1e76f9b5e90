# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's end-of-run lines, straight from the result of its one tuning call.

Why one filter: the summary task used to build a dict of seven role variables, each a template
of its own over the registered result (__host_tuning.modules.<part> | default({})), and then
call change_summary and lxc_memlock_report on them. Ansible compiles every one of those
templates again in every host's worker: 22 Jinja compiles, about 12 ms of controller CPU per
host of the task's 30 (README "Speed of a tuning pass"). Here the same lines come from the
registered result in Python, through the same two filters, so the wording cannot drift.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: host_tuning_summary
short_description: What one gpufleet.tuning.host_tuning call changed, as short lines
version_added: 0.3.0
description:
  - Takes the registered result of M(gpufleet.tuning.host_tuning) and returns the lines the
    host role prints at the end of a run - one per changed value, written file, skipped item and
    pending reboot or restart (the filter P(gpufleet.tuning.change_summary#filter) on each
    part) - followed by one line per LXC container of the host (the filter
    P(gpufleet.tuning.lxc_memlock_report#filter)).
  - The parts are labelled as the role's tags name them - sysctl, pcie, cpu_power,
    lxc_memlock, peermem, nvidia_options, kernel_cmdline. A part the call did not run is left out.
positional: check_mode, restart_ok
options:
  _input:
    description: The registered result of a M(gpufleet.tuning.host_tuning) call (its C(modules)).
    type: dict
    required: true
  check_mode:
    description: Word the lines as planned changes ("would set").
    type: bool
    default: false
  restart_ok:
    description: Whether containers waiting for a restart are restarted at the end of the play
      (the role's C(host_lxc_restart_ok)).
    type: bool
    default: false
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Summarize what this run changed on the host
  ansible.builtin.debug:
    msg: "{{ __host_tuning | gpufleet.tuning.host_tuning_summary(ansible_check_mode, host_lxc_restart_ok | bool) }}"
"""

RETURN = r"""
_value:
  description: The change lines (a single line when nothing changed), then the container lines.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.change_summary import change_summary
from ansible_collections.gpufleet.tuning.plugins.filter.lxc_memlock_report import lxc_memlock_report

# Label (the role's tag) -> the part's name in the call's modules, in the order the lines are printed.
PARTS = (
    ("sysctl", "sysctl_profile"),
    ("pcie", "pcie_maxreadreq"),
    ("cpu_power", "cpu_power"),
    ("lxc_memlock", "lxc_memlock"),
    ("peermem", "nvidia_peermem"),
    ("nvidia_options", "nvidia_driver_options"),
    ("kernel_cmdline", "kernel_cmdline"),
)


def host_tuning_summary(result, check_mode=False, restart_ok=False):
    if result is None:
        result = {}
    if not isinstance(result, dict):
        raise AnsibleFilterError("host_tuning_summary expects the registered result of gpufleet.tuning.host_tuning "
                                 "(a dict), got %s" % type(result).__name__)
    modules = result.get("modules") or {}
    if not isinstance(modules, dict):
        raise AnsibleFilterError("host_tuning_summary: the result's modules must be a dict, got %s"
                                 % type(modules).__name__)
    lines = change_summary({label: modules.get(name) or {} for label, name in PARTS}, check_mode)
    return lines + lxc_memlock_report(modules.get("lxc_containers") or {}, modules.get("lxc_memlock") or {},
                                      bool(restart_ok), check_mode)


class FilterModule:
    def filters(self):
        return {"host_tuning_summary": host_tuning_summary}
