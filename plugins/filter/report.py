# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters of the records a run leaves on the controller: a host's folder there, the verify
role's judgement (the P2P comparison with the previous run, why a host fails) and the serving
benchmark's before/after comparison and page.

Thin wrappers: the code is plugin_utils' (artifact_dir.py, p2p_compare.py, verify_failures.py,
benchmark.py). Each filter's documentation is its sidecar file, plugins/filter/<name>.yml.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import artifact_dir
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.benchmark import benchmark_compare, benchmark_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.p2p_compare import p2p_compare
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.verify_failures import verify_failures


class FilterModule:
    """gpufleet.tuning.artifact_dir, benchmark_compare, benchmark_report, p2p_compare and verify_failures."""

    def filters(self):
        return {
            "artifact_dir": artifact_dir,
            "benchmark_compare": benchmark_compare,
            "benchmark_report": benchmark_report,
            "p2p_compare": p2p_compare,
            "verify_failures": verify_failures,
        }
