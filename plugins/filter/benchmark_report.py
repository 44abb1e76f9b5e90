# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmark.md: the before/after comparison as a page an operator reads.

The headline first (did single-stream decoding get faster, beyond the noise?), then the
efficiency against the memory-bandwidth ceiling, every level's figures side by side, the gate,
and the tuning changes made between the two runs, from their structured records.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: benchmark_report
short_description: Render a before/after inference benchmark comparison as Markdown
version_added: 0.2.0
description:
  - Takes the comparison gpufleet.tuning.benchmark_compare returns and writes the page the
    serving role saves as C(benchmark.md).
options:
  _input:
    description: The comparison.
    type: dict
    required: true
  host:
    description: The host's name for the title.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Write benchmark.md
  ansible.builtin.copy:
    content: "{{ comparison | gpufleet.tuning.benchmark_report(inventory_hostname) }}"
    dest: artifacts/node1/benchmark.md
    mode: "0644"
  delegate_to: localhost
"""

RETURN = r"""
_value:
  description: The Markdown text.
  type: str
"""

# Rows of the per-level table: (figure, label, unit).
ROWS = (
    ("decode_tokens_per_s", "decode, one stream", "tok/s"),
    ("output_tokens_per_s", "output", "tok/s"),
    ("requests_per_s", "requests", "req/s"),
    ("goodput_requests_per_s", "goodput", "req/s"),
    ("ttft_ms.p50", "TTFT p50", "ms"), ("ttft_ms.p90", "TTFT p90", "ms"), ("ttft_ms.p99", "TTFT p99", "ms"),
    ("itl_ms.p50", "ITL p50", "ms"), ("itl_ms.p90", "ITL p90", "ms"), ("itl_ms.p99", "ITL p99", "ms"),
    ("tpot_ms.p50", "TPOT p50", "ms"),
    ("e2e_ms.p50", "end to end p50", "ms"), ("e2e_ms.p99", "end to end p99", "ms"),
)


def _num(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return "%.4g" % value if abs(value) < 1000 else "%.0f" % value
    return str(value)


def _pct(value):
    return "-" if value is None else "%+.1f %%" % value


def _noise(value):
    return "-" if value is None else "±%.1f %%" % value


def _efficiency(item):
    if not item:
        return "not measured"
    if item.get("percent") is None:
        return item.get("reason") or "not computed"
    return "%s tok/s of a %s tok/s ceiling: %.1f %% (%s)" % (
        _num(item["decode_tokens_per_s"]), _num(item["ceiling_tokens_per_s"]), item["percent"], item.get("formula", ""))


def _change(record):
    before, after = record.get("before"), record.get("after")
    if isinstance(before, dict) or isinstance(after, dict):
        before = "sha256 %s" % str(before.get("sha256", ""))[:12] if isinstance(before, dict) else before
        after = "sha256 %s" % str(after.get("sha256", ""))[:12] if isinstance(after, dict) else after
    return "- %s %s `%s`: %s -> %s" % (record.get("area"), record.get("kind"), record.get("target"),
                                       "absent" if before is None else before, "absent" if after is None else after)


def benchmark_report(comparison, host=""):
    if not isinstance(comparison, dict) or "levels" not in comparison:
        raise AnsibleFilterError("benchmark_report: expects the result of gpufleet.tuning.benchmark_compare")
    lines = ["# Inference benchmark%s" % (": %s" % host if host else ""), ""]
    lines.append("Model `%s` at %s. Before: %s. After: %s." % (
        comparison.get("model"), comparison.get("url"), comparison.get("before_time") or "no run",
        comparison.get("after_time")))
    lines.append("")
    head = comparison["headline"]
    if not comparison["before"]:
        lines.append("**No run before tuning**: the figures below are this run's alone.")
    elif not comparison["comparable"]:
        lines.append("**Not comparable**: the loads differ (%s)." % "; ".join(comparison["differences"]))
    else:
        lines.append("**Single-stream decode: %s** (%s -> %s tok/s, %s, noise %s)." % (
            head["verdict"], _num(head["before"]), _num(head["after"]), _pct(head["delta_pct"]),
            _noise(head["noise_pct"])))
    lines += ["", "A difference within the noise band (the larger run-to-run spread, max - min over repeats, of "
              "the two runs) is no measurable change.", ""]
    lines += ["## Efficiency", "", "- before: %s" % _efficiency(comparison["efficiency"]["before"]),
              "- after: %s" % _efficiency(comparison["efficiency"]["after"]), ""]
    for level in comparison["levels"]:
        lines += ["## Concurrency %d" % level["concurrency"], "",
                  "| figure | before | after | change | noise | verdict |", "|---|---|---|---|---|---|"]
        for path, label, unit in ROWS:
            found = level["figures"].get(path)
            if not found or (found["before"] is None and found["after"] is None):
                continue
            lines.append("| %s (%s) | %s | %s | %s | %s | %s |" % (
                label, unit, _num(found["before"]), _num(found["after"]), _pct(found["delta_pct"]),
                _noise(found["noise_pct"]), found["verdict"]))
        lines.append("")
    gate = comparison["gate"]
    lines += ["## Gate", ""]
    if gate["max_regression_pct"] is None:
        lines.append("No gate (serving_max_regression_pct is not set).")
    else:
        lines.append("%s: %s worse by more than %g %% beyond the noise fails the host." % (
            "FAILED" if gate["failed"] else "passed", ", ".join(gate["figures"]), gate["max_regression_pct"]))
        lines += ["- %s" % reason for reason in gate["reasons"]]
    lines += ["", "## Tuning changes between the two runs", ""]
    lines += [_change(record) for record in comparison["changes"]] or ["None recorded."]
    return "\n".join(lines) + "\n"


class FilterModule:
    def filters(self):
        return {"benchmark_report": benchmark_report}
