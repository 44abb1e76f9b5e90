# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set the inference benchmark after tuning against the one before, with its noise band.

The tie between a tuning change and serving speed: both runs side by side, each figure's
difference judged against the run-to-run spread (a difference inside it is "no measurable
change", not a gain), the change records of the tuning made in between, and an optional gate
that fails the host when serving got slower beyond a set percentage.
"""

from __future__ import annotations

import json
import math

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats

DOCUMENTATION = r"""
---
name: benchmark_compare
short_description: Compare an inference benchmark after tuning with the one before
version_added: 0.2.0
description:
  - Takes the result of M(gpufleet.tuning.inference_benchmark) after tuning and the one before
    (a dict, its JSON text, or an empty value when there is none) and returns both side by
    side, per concurrency level and figure C(before), C(after), C(delta_pct), C(noise_pct)
    and C(verdict) (C(better), C(worse), C(no measurable change), C(not measured)).
  - The noise band of a figure is the larger of the two runs' spreads (max - min over
    repeats); a difference no larger is no measurable change.
  - With O(max_regression_pct), C(gate.failed) is true when a figure of O(gate_figures) got
    worse beyond the noise and by more than that percentage at any level, or when the two runs
    used different loads (they cannot be compared); C(gate.reasons) says which.
positional: before, changes, max_regression_pct, gate_figures
options:
  _input:
    description: The benchmark result after tuning.
    type: dict
    required: true
  before:
    description: The benchmark result before tuning; empty for none.
    type: raw
    required: true
  changes:
    description: The change records of the tuning made between the two runs.
    type: list
    elements: dict
    default: []
  max_regression_pct:
    description: The gate, a finite percentage from 0 to 100; null reports without judging.
    type: float
  gate_figures:
    description: Figures the gate judges, as named in the module's C(summary) (such as C(decode_tokens_per_s), C(ttft_ms.p50)).
    type: list
    elements: str
    default: [decode_tokens_per_s, output_tokens_per_s]
"""

EXAMPLES = r"""
- name: Compare and gate at 5 %
  ansible.builtin.set_fact:
    comparison: "{{ after | gpufleet.tuning.benchmark_compare(before, host_changes, 5) }}"
"""

RETURN = r"""
_value:
  description:
    - C(comparable), C(differences) (load settings that differ), C(model), C(before_time),
      C(after_time), C(levels) (C(concurrency), C(figures)), C(headline) (the single-stream
      decode speed), C(efficiency) (C(before), C(after)), C(changes) and C(gate)
      (C(max_regression_pct), C(figures), C(failed), C(reasons)).
  type: dict
"""

DEFAULT_GATE = ["decode_tokens_per_s", "output_tokens_per_s"]
FIGURES = [path for path, _higher in stats.SUMMARY_FIGURES]


def _loaded(value, name):
    if value in (None, "", {}):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise AnsibleFilterError("benchmark_compare: %s is not a benchmark result (not JSON: %s)" % (name, exc))
    if not isinstance(value, dict) or not isinstance(value.get("levels"), list):
        raise AnsibleFilterError("benchmark_compare: %s is not a benchmark result (no levels)" % name)
    return value


def _limit(value):
    if value is None:
        return None
    if isinstance(value, bool):
        raise AnsibleFilterError("benchmark_compare: max_regression_pct=%r is not a percentage from 0 to 100" % (value,))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError("benchmark_compare: max_regression_pct=%r is not a percentage from 0 to 100" % (value,))
    if not math.isfinite(number) or not 0 <= number <= 100:
        raise AnsibleFilterError("benchmark_compare: max_regression_pct=%r is not a percentage from 0 to 100" % (value,))
    return number


def benchmark_compare(after, before, changes=None, max_regression_pct=None, gate_figures=None):
    after = _loaded(after, "the run after tuning")
    if after is None:
        raise AnsibleFilterError("benchmark_compare: there is no run after tuning to compare")
    before = _loaded(before, "the run before tuning")
    limit = _limit(max_regression_pct)
    gate_figures = list(gate_figures or DEFAULT_GATE)
    unknown = [name for name in gate_figures if name not in FIGURES]
    if unknown:
        raise AnsibleFilterError("benchmark_compare: gate_figures %s are not figures of the benchmark (%s)"
                                 % (", ".join(unknown), ", ".join(FIGURES)))
    report = {"model": after.get("model"), "url": after.get("url"), "after_time": after.get("time"),
              "before_time": before.get("time") if before else None, "changes": list(changes or []),
              "before": before is not None}
    report["differences"] = _differences(before, after)
    report["comparable"] = before is not None and not report["differences"]
    levels_before = {item["concurrency"]: item["summary"] for item in (before or {}).get("levels", [])}
    report["levels"] = []
    for item in after["levels"]:
        old = levels_before.get(item["concurrency"], {})
        report["levels"].append({"concurrency": item["concurrency"], "figures": dict(
            (path, stats.compare(old.get(path, {}), item["summary"].get(path, {}), path)) for path in FIGURES)})
    single = next((item for item in report["levels"] if item["concurrency"] == 1), report["levels"][0])
    report["headline"] = dict(single["figures"]["decode_tokens_per_s"], figure="decode_tokens_per_s", concurrency=1)
    report["efficiency"] = {"before": (before or {}).get("efficiency"), "after": after.get("efficiency")}
    report["gate"] = _gate(report, limit, gate_figures)
    return report


def _differences(before, after):
    if before is None:
        return []
    old, new = before.get("config") or {}, after.get("config") or {}
    found = ["%s: %r before, %r after" % (key, old.get(key), new.get(key))
             for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    if before.get("model") != after.get("model"):
        found.append("model: %r before, %r after" % (before.get("model"), after.get("model")))
    return found


def _gate(report, limit, figures):
    gate = {"max_regression_pct": limit, "figures": figures, "failed": False, "reasons": []}
    if limit is None:
        return gate
    if not report["before"]:
        gate["reasons"].append("no run before tuning to compare with: not judged")
        return gate
    if not report["comparable"]:
        gate["failed"] = True
        gate["reasons"].append("the runs before and after tuning used different loads (%s): they cannot be compared"
                               % "; ".join(report["differences"]))
        return gate
    for level in report["levels"]:
        for path in figures:
            found = level["figures"][path]
            if found["verdict"] != "worse" or found["delta_pct"] is None or abs(found["delta_pct"]) <= limit:
                continue
            gate["failed"] = True
            gate["reasons"].append(
                "concurrency %d %s: %s before, %s after (%+.1f %%, noise %.1f %%), worse than the %g %% allowed"
                % (level["concurrency"], path, found["before"], found["after"], found["delta_pct"],
                   found["noise_pct"] or 0.0, limit))
    return gate


class FilterModule:
    def filters(self):
        return {"benchmark_compare": benchmark_compare}
