# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health gate's filters: the verdict of a node's facts under the health rules, and the
Prometheus metrics of a verdict. Thin wrappers over plugin_utils (health_verdict.py, which the
action health_judge shares, and health_metrics.py); each filter's documentation is its sidecar
file, plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_metrics import health_metrics
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import health_verdict


class FilterModule:
    """gpufleet.tuning.health_verdict and health_metrics."""

    def filters(self):
        return {"health_verdict": health_verdict, "health_metrics": health_metrics}
