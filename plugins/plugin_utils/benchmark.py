# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inference benchmark after tuning against the one before, with its noise band, and the
page an operator reads (benchmark.md).

The tie between a tuning change and serving speed: both runs side by side, each figure's
difference judged against the run-to-run spread (a difference inside it is "no measurable
change", not a gain), the change records of the tuning made in between, and an optional gate
that fails the host when serving got slower beyond a set percentage (benchmark_compare). The
page (benchmark_report) puts the headline first (did single-stream decoding get faster, beyond
the noise?), then the efficiency against the memory-bandwidth ceiling, every level's figures
side by side, the gate, and the tuning changes made between the two runs, from their structured
records.

The model name, the URL, the load's settings, the change records' targets and values come from
the node and the serving stack: the comparison (benchmark.json) has every string cleaned
(node_text), and the page Markdown-escapes every value (markdown_text), so none renders as
markup; the page has no link.

In plugin_utils so that the filters (plugins/filter/report.py) and Python code (the fleet page's
test fleet) share it without importing a filter plugin.
"""

from __future__ import annotations

import json
import math

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.markdown_text import code, escape
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import clean_tree

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
    return clean_tree(report)


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
    return str(value) if isinstance(value, int) else escape(str(value))


def _pct(value):
    return "-" if value is None else "%+.1f %%" % value


def _noise(value):
    return "-" if value is None else "±%.1f %%" % value


def _efficiency(item):
    if not item:
        return "not measured"
    if item.get("percent") is None:
        return escape(item.get("reason") or "not computed")
    return "%s tok/s of a %s tok/s ceiling: %.1f %% (%s)" % (
        _num(item["decode_tokens_per_s"]), _num(item["ceiling_tokens_per_s"]), item["percent"], escape(item.get("formula", "")))


def _change(record):
    before, after = record.get("before"), record.get("after")
    if isinstance(before, dict) or isinstance(after, dict):
        before = "sha256 %s" % str(before.get("sha256", ""))[:12] if isinstance(before, dict) else before
        after = "sha256 %s" % str(after.get("sha256", ""))[:12] if isinstance(after, dict) else after
    return "- %s %s %s: %s -> %s" % (escape(str(record.get("area"))), escape(str(record.get("kind"))),
                                     code(str(record.get("target"))), "absent" if before is None else escape(str(before)),
                                     "absent" if after is None else escape(str(after)))


def benchmark_report(comparison, host=""):
    if not isinstance(comparison, dict) or "levels" not in comparison:
        raise AnsibleFilterError("benchmark_report: expects the result of gpufleet.tuning.benchmark_compare")
    lines = ["# Inference benchmark%s" % (": %s" % escape(host) if host else ""), ""]
    lines.append("Model %s at %s. Before: %s. After: %s." % (
        code(str(comparison.get("model"))), escape(str(comparison.get("url"))),
        escape(comparison["before_time"]) if comparison.get("before_time") else "no run",
        escape(str(comparison.get("after_time")))))
    lines.append("")
    head = comparison["headline"]
    if not comparison["before"]:
        lines.append("**No run before tuning**: the figures below are this run's alone.")
    elif not comparison["comparable"]:
        lines.append("**Not comparable**: the loads differ (%s)." % "; ".join(escape(d) for d in comparison["differences"]))
    else:
        lines.append("**Single-stream decode: %s** (%s -> %s tok/s, %s, noise %s)." % (
            escape(head["verdict"]), _num(head["before"]), _num(head["after"]), _pct(head["delta_pct"]),
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
                _noise(found["noise_pct"]), escape(found["verdict"])))
        lines.append("")
    gate = comparison["gate"]
    lines += ["## Gate", ""]
    if gate["max_regression_pct"] is None:
        lines.append("No gate (serving_max_regression_pct is not set).")
    else:
        lines.append("%s: %s worse by more than %g %% beyond the noise fails the host." % (
            "FAILED" if gate["failed"] else "passed", ", ".join(escape(f) for f in gate["figures"]),
            gate["max_regression_pct"]))
        lines += ["- %s" % escape(reason) for reason in gate["reasons"]]
    lines += ["", "## Tuning changes between the two runs", ""]
    lines += [_change(record) for record in comparison["changes"]] or ["None recorded."]
    return "\n".join(lines) + "\n"
