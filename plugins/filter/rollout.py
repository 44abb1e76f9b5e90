# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet rollout's filters: a play's serial checked, the rollout's batches, and its three
reports (the checked result, the Markdown page, the JUnit file).

Thin wrappers: the code is plugin_utils' (rollout_plan.py, rollout_report.py). Each filter's
documentation is its sidecar file, plugins/filter/<name>.yml.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_plan import play_serial, rollout_plan
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_report import (
    rollout_junit, rollout_markdown, rollout_result)


class FilterModule:
    """gpufleet.tuning.rollout_plan, rollout_result, rollout_markdown, rollout_junit and play_serial."""

    def filters(self):
        return {
            "rollout_plan": rollout_plan,
            "rollout_result": rollout_result,
            "rollout_markdown": rollout_markdown,
            "rollout_junit": rollout_junit,
            "play_serial": play_serial,
        }
