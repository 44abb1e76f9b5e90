# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's filters: the rules on a node's facts, the planned changes, the comparison with
the previous audit, the fleet's summary and the Markdown reports.

Thin wrappers: the code is plugin_utils' (audit_rules.py, audit_planned.py, audit_since.py,
audit_fleet.py, audit_report.py), which the action audit_judge shares. Each filter's
documentation is its sidecar file, plugins/filter/<name>.yml.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_fleet import audit_fleet
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_planned import audit_planned, audit_planned_host
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_report import audit_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import audit_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_since import audit_since


class FilterModule:
    """gpufleet.tuning.audit_rules, audit_report, audit_since, audit_fleet, audit_planned and
    audit_planned_host."""

    def filters(self):
        return {
            "audit_rules": audit_rules,
            "audit_report": audit_report,
            "audit_since": audit_since,
            "audit_fleet": audit_fleet,
            "audit_planned": audit_planned,
            "audit_planned_host": audit_planned_host,
        }
