# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters of what a run changed: the change records of module results, the closing
summary's lines (for any results, and the host role's with its LXC containers), and the host
role's LXC containers (those the inventory names for a host, what the tuning did with each).

Thin wrappers: the code is plugin_utils' (changes.py, host_lxc.py). Each filter's documentation
is its sidecar file, plugins/filter/<name>.yml.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.changes import change_records, change_summary, host_summary
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.host_lxc import (
    lxc_memlock_inventory, lxc_memlock_outcome, lxc_memlock_report)


class FilterModule:
    """gpufleet.tuning.change_summary, change_records, host_summary, lxc_memlock_report,
    lxc_memlock_outcome and lxc_memlock_inventory."""

    def filters(self):
        return {
            "change_summary": change_summary,
            "change_records": change_records,
            "host_summary": host_summary,
            "lxc_memlock_report": lxc_memlock_report,
            "lxc_memlock_outcome": lxc_memlock_outcome,
            "lxc_memlock_inventory": lxc_memlock_inventory,
        }
