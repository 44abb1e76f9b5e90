# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters of the serving-configuration experiments (roles/serving_experiments): the candidates in
risk order, one try's launch command, the accuracy guard, the verdict, the record
(experiments.json) and its page (experiments.md), and the kept flags a rollout applies.

Thin wrappers: the code is plugin_utils' (experiments.py, accuracy.py, experiments_report.py).
Each filter's documentation is its sidecar file, plugins/filter/<name>.yml.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.accuracy import accuracy_compare
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.experiments import (
    experiment_candidates, experiment_kept_flags, experiment_summary, experiment_try, experiment_verdict,
    launch_with_flags)
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.experiments_report import experiments_report


class FilterModule:
    """gpufleet.tuning.accuracy_compare, experiment_candidates, experiment_try, experiment_verdict,
    experiment_summary, experiment_kept_flags, experiments_report and launch_with_flags."""

    def filters(self):
        return {
            "accuracy_compare": accuracy_compare,
            "experiment_candidates": experiment_candidates,
            "experiment_kept_flags": experiment_kept_flags,
            "experiment_summary": experiment_summary,
            "experiment_try": experiment_try,
            "experiment_verdict": experiment_verdict,
            "experiments_report": experiments_report,
            "launch_with_flags": launch_with_flags,
        }
