# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's end-of-run lines, from the parts' results (host_results).

One filter over the dict of results, so the summary is one task for a whole batch: the lines
come from change_summary (a line per record, skipped key, pending reboot or restart) and
lxc_memlock_report (a line per container of the host), so the wording is theirs.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: host_summary
short_description: What the host role's parts changed, as short lines
version_added: 0.4.0
description:
  - Takes the host role's C(host_results) (part name to the registered result of the module of
    that name) and returns the lines the role prints at the end of a run - one per changed value,
    written file, skipped item and pending reboot or restart (the filter
    P(gpufleet.tuning.change_summary#filter) on each part) - followed by one line per LXC
    container of the host (the filter P(gpufleet.tuning.lxc_memlock_report#filter)).
  - The parts are labelled as the role's tags name them - sysctl, pcie, pcie_acs, cpu_power,
    lxc_memlock, peermem, nvidia_options, kernel_cmdline. A part that did not run is left out.
positional: check_mode, restart_ok
options:
  _input:
    description: Part name to the module's registered result.
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
    msg: "{{ host_results | gpufleet.tuning.host_summary(ansible_check_mode, host_lxc_restart_ok | bool) }}"
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

# Label (the role's tag) -> the part, in the order the lines are printed.
PARTS = (
    ("sysctl", "sysctl_profile"),
    ("pcie", "pcie_maxreadreq"),
    ("pcie_acs", "pcie_acs"),
    ("cpu_power", "cpu_power"),
    ("lxc_memlock", "lxc_memlock"),
    ("peermem", "nvidia_peermem"),
    ("nvidia_options", "nvidia_driver_options"),
    ("kernel_cmdline", "kernel_cmdline"),
)


def host_summary(results, check_mode=False, restart_ok=False):
    if results is None:
        results = {}
    if not isinstance(results, dict):
        raise AnsibleFilterError("host_summary expects the host role's host_results (part: result), got %s"
                                 % type(results).__name__)
    lines = change_summary(dict((label, results.get(part) or {}) for label, part in PARTS), check_mode)
    memlock = results.get("lxc_memlock") or {}
    return lines + lxc_memlock_report(memlock.get("discovery") or {}, memlock, bool(restart_ok), check_mode)


class FilterModule:
    def filters(self):
        return {"host_summary": host_summary}
