# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serving-configuration experiments as data: the candidates, one try's command, the verdict.

The experiments role (roles/serving_experiments) runs the loop with Ansible's own tasks: a drop-in, a
restart, readiness, the benchmark, the accuracy guard, keep or roll back. What is pure data
transformation lives here, where it can be tested without a server:

- ``experiment_candidates``: the collection's candidates for the server kind, plus the inventory's, minus
  the ones it skips, checked, ordered by risk (low, medium, high, then as listed) and expanded
  to one try per value. High-risk candidates without ``allow_risky`` and reboot-required ones
  (driver options) stay in the list as skipped with the reason, so the report says what was
  not tried and why.
- ``experiment_try``: the command of one try, from the command kept so far (greedy: every kept
  change is the next try's baseline), or why it is skipped (a flag it conflicts with is set, a
  flag it needs is missing, the command already is so).
- ``experiment_verdict``: kept only when the chosen figure is better beyond the noise band, no guard
  figure got worse beyond the noise by more than the allowed percentage, and the accuracy
  guard passed.
"""

from __future__ import annotations

import json
import math
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import launch_args
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.benchmark import benchmark_compare
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import clean_tree

RISKS = ("low", "medium", "high")
KINDS = ("sglang", "vllm", "llama_cpp", "llama_cpp_python", "generic")
HOW = ("flag", "driver_option")
FIGURES = [path for path, _higher in stats.SUMMARY_FIGURES]
_NAME = re.compile(r"\A[a-z0-9][a-z0-9_.-]{0,63}\Z")
_FLAG = re.compile(r"\A--[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
_KEYS = {"name", "flag", "values", "risk", "kinds", "how", "requires", "conflicts", "max_divergence_pct", "why"}


def _fail(message):
    raise AnsibleFilterError("serving experiments: %s" % message)


def _values(name, values):
    if not isinstance(values, list) or not values:
        _fail("candidate %s: values=%r must be a non-empty list (true for a bare flag)" % (name, values))
    out = []
    for value in values:
        if value is True:
            out.append(True)
        elif value is False or value is None:
            out.append(None)  # the flag removed
        elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
            text = str(value)
            if not text or "\n" in text or "\0" in text:
                _fail("candidate %s: value %r is empty or holds a line break" % (name, value))
            out.append(text)
        else:
            _fail("candidate %s: value %r is not text, a number or true/false" % (name, value))
    return out


def _flags(name, field, flags):
    if flags is None:
        return []
    if not isinstance(flags, list) or not all(isinstance(f, str) and _FLAG.match(f) for f in flags):
        _fail("candidate %s: %s=%r must be a list of --long-flags" % (name, field, flags))
    return list(flags)


def check(item, where):
    """One candidate as the data gives it -> a normalised dict; AnsibleFilterError names the bad value."""
    if not isinstance(item, dict):
        _fail("%s: %r is not a candidate (a mapping with name, flag, values, risk)" % (where, item))
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        _fail("%s: name=%r must be lowercase letters, digits, '_', '-' or '.'" % (where, name))
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        _fail("candidate %s: unknown key(s) %s (known: %s)" % (name, ", ".join(unknown), ", ".join(sorted(_KEYS))))
    how = item.get("how", "flag")
    if how not in HOW:
        _fail("candidate %s: how=%r is not one of %s" % (name, how, ", ".join(HOW)))
    flag = item.get("flag")
    if how == "flag" and (not isinstance(flag, str) or not _FLAG.match(flag)):
        _fail("candidate %s: flag=%r is not a --long-flag" % (name, flag))
    risk = item.get("risk")
    if risk not in RISKS:
        _fail("candidate %s: risk=%r is not one of %s" % (name, risk, ", ".join(RISKS)))
    kinds = item.get("kinds", list(KINDS))
    if not isinstance(kinds, list) or not kinds or any(kind not in KINDS for kind in kinds):
        _fail("candidate %s: kinds=%r must list server kinds among %s" % (name, kinds, ", ".join(KINDS)))
    allowance = item.get("max_divergence_pct")
    if allowance is not None and (isinstance(allowance, bool) or not isinstance(allowance, (int, float))
                                  or not math.isfinite(allowance) or not 0 <= allowance <= 100):
        _fail("candidate %s: max_divergence_pct=%r is not a percentage from 0 to 100" % (name, allowance))
    return {"name": name, "how": how, "flag": flag, "values": _values(name, item.get("values")), "risk": risk,
            "kinds": list(kinds), "requires": _flags(name, "requires", item.get("requires")),
            "conflicts": _flags(name, "conflicts", item.get("conflicts")),
            "max_divergence_pct": allowance, "why": str(item.get("why") or "")}


def experiment_candidates(builtin, kind, extra=None, skip=None, allow_risky=False, default_divergence_pct=0.0):
    """The tries, in order: one dict per value of every candidate that applies to ``kind``."""
    if kind not in KINDS:
        _fail("server kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    skip = list(skip or [])
    if not all(isinstance(name, str) for name in skip):
        _fail("the candidates to skip must be names, got %r" % (skip,))
    merged, seen = [], {}
    for where, items in (("the collection's candidates", builtin), ("serving_experiments_candidates", extra)):
        if items is None:
            continue
        if not isinstance(items, list):
            _fail("%s: %r is not a list" % (where, items))
        for item in items:
            found = check(item, where)
            if found["name"] in seen:
                merged[seen[found["name"]]] = found  # the inventory's replaces the collection's
            else:
                seen[found["name"]] = len(merged)
                merged.append(found)
    unknown = sorted(set(skip) - set(seen))
    if unknown:
        _fail("serving_experiments_skip names no candidate: %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(seen))))
    tries = []
    ordered = sorted(enumerate(merged), key=lambda pair: (RISKS.index(pair[1]["risk"]), pair[0]))
    for _index, found in ordered:
        if kind not in found["kinds"] or found["name"] in skip:
            continue
        why_not = None
        if found["how"] == "driver_option":
            why_not = ("a driver option: reboot-required, never tried on a running server; apply it with the host "
                       "role (nvidia_driver_options, --tags reboot_required) when a reboot is allowed")
        elif found["risk"] == "high" and not allow_risky:
            why_not = "high risk: tried only with serving_experiments_allow_risky: true"
        allowance = found["max_divergence_pct"]
        for value in found["values"]:
            tries.append({"name": found["name"], "flag": found["flag"], "value": value, "risk": found["risk"],
                          "requires": found["requires"], "conflicts": found["conflicts"], "why": found["why"],
                          "max_divergence_pct": float(default_divergence_pct if allowance is None else allowance),
                          "skip": why_not})
    return tries


def experiment_try(attempt, kept_argv, args_start):
    """``{argv, skip}``: the command of ``attempt`` made from ``kept_argv``, or why not."""
    if not isinstance(kept_argv, list) or not kept_argv:
        _fail("the kept command %r is not a command" % (kept_argv,))
    if attempt.get("skip"):
        return {"argv": None, "skip": attempt["skip"]}
    start = int(args_start)
    missing = [flag for flag in attempt["requires"] if launch_args.flag_value(kept_argv, flag, start) in (None, False)]
    if missing:
        return {"argv": None, "skip": "needs %s, which the command does not set" % ", ".join(missing)}
    clashing = [flag for flag in attempt["conflicts"] if launch_args.flag_value(kept_argv, flag, start) not in (None, False)]
    if clashing:
        return {"argv": None, "skip": "conflicts with %s, which the command sets" % ", ".join(clashing)}
    argv = launch_args.with_flag(kept_argv, attempt["flag"], attempt["value"], start)
    if argv == kept_argv:
        return {"argv": None, "skip": "the command already has %s" % _shown(attempt["flag"], attempt["value"])}
    return {"argv": argv, "skip": None}


def _shown(flag, value):
    if value is True:
        return flag
    if value is None:
        return "no %s" % flag
    return "%s %s" % (flag, value)


def _limit(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 100:
        _fail("%s=%r is not a percentage from 0 to 100" % (name, value))
    return float(value)


def experiment_verdict(candidate, baseline, figure, concurrency=1, guard_figures=None, max_regression_pct=5.0,
                       accuracy=None, min_gain_pct=0.0):
    """``{status, reason, comparison}`` for one try measured against the kept state's run.

    ``min_gain_pct``: the smallest gain kept, on top of the noise band. The band is the spread
    inside one server process; two launches of the same command can differ by more (a cold GPU,
    another memory layout), so an operator who sees that sets a floor here."""
    guard_figures = list(guard_figures or [])
    unknown = [name for name in [figure] + guard_figures if name not in FIGURES]
    if unknown:
        _fail("figure(s) %s are not benchmark figures (%s)" % (", ".join(unknown), ", ".join(FIGURES)))
    limit = _limit(max_regression_pct, "serving_experiments_max_regression_pct")
    floor = _limit(min_gain_pct, "serving_experiments_min_gain_pct")
    report = benchmark_compare(candidate, baseline)
    if not report["comparable"]:
        return {"status": "failed", "comparison": None,
                "reason": "the runs are not comparable (%s)" % "; ".join(report["differences"])}
    level = next((item for item in report["levels"] if item["concurrency"] == int(concurrency)), None)
    if level is None:
        _fail("no benchmark level at concurrency %s" % concurrency)
    main = dict(level["figures"][figure], name=figure)
    guards = []
    for name in guard_figures:
        found = dict(level["figures"][name], name=name)
        found["regressed"] = (found["verdict"] == "worse" and found["delta_pct"] is not None
                              and abs(found["delta_pct"]) > limit)
        guards.append(found)
    comparison = {"figure": main, "guards": guards}
    band = "noise ±%.1f %%" % (main["noise_pct"] or 0.0)
    change = "-" if main["delta_pct"] is None else "%+.1f %%" % main["delta_pct"]
    if accuracy is not None and not accuracy.get("passed"):
        return {"status": "rejected_accuracy", "comparison": comparison,
                "reason": "greedy outputs changed: %.2f %% of tokens diverged, %.2f %% allowed (%d of %d prompts differ)"
                % (accuracy.get("divergence_pct") or 0.0, accuracy.get("max_divergence_pct") or 0.0,
                   accuracy.get("differing_prompts") or 0, accuracy.get("prompts") or 0)}
    if main["verdict"] != "better":
        return {"status": "rolled_back", "comparison": comparison,
                "reason": "%s %s: %s (%s)" % (figure, change, main["verdict"], band)}
    if main["delta_pct"] is not None and abs(main["delta_pct"]) < floor:
        return {"status": "rolled_back", "comparison": comparison,
                "reason": "%s %s, beyond the %s but less than the %g %% asked (serving_experiments_min_gain_pct)"
                % (figure, change, band, floor)}
    regressed = [g for g in guards if g["regressed"]]
    if regressed:
        return {"status": "rolled_back", "comparison": comparison,
                "reason": "%s %s (%s) but %s" % (figure, change, band, "; ".join(
                    "%s %+.1f %% worse, more than the %g %% allowed" % (g["name"], g["delta_pct"], limit) for g in regressed))}
    return {"status": "kept", "comparison": comparison,
            "reason": "%s %s, faster beyond the %s" % (figure, change, band)}


def experiment_kept_flags(record):
    """The flag changes an experiments record kept, in order: what a rollout applies elsewhere.
    ``record``: the record, or its JSON text (experiments.json as read)."""
    if isinstance(record, str):
        try:
            record = json.loads(record)
        except ValueError:
            _fail("%r is not an experiments record (experiments.json)" % (record[:200],))
    if not isinstance(record, dict) or not isinstance(record.get("candidates"), list):
        _fail("%r is not an experiments record (experiments.json)" % (record,))
    out = []
    for item in record["candidates"]:
        if isinstance(item, dict) and item.get("status") == "kept":
            kept = {"name": item["name"], "flag": item["flag"], "value": item["value"]}
            out = [f for f in out if f["flag"] != item["flag"]] + [kept]
    return out


def launch_with_flags(argv, flags, args_start):
    """``argv`` with every ``{flag, value}`` of ``flags`` applied in order."""
    if not isinstance(argv, list) or not argv:
        _fail("%r is not a command" % (argv,))
    out = list(argv)
    for item in flags or []:
        if not isinstance(item, dict) or not isinstance(item.get("flag"), str) or not _FLAG.match(item["flag"]):
            _fail("%r is not a {flag, value} change" % (item,))
        out = launch_args.with_flag(out, item["flag"], item.get("value"), int(args_start))
    return out


def _level_figure(bench, figure, concurrency):
    """``{figure, value, noise_pct}`` of a benchmark result at one level; None without a run."""
    if not isinstance(bench, dict) or not isinstance(bench.get("levels"), list):
        return None
    level = next((item for item in bench["levels"] if item.get("concurrency") == concurrency), None)
    if level is None:
        return None
    node = level.get("summary") or {}
    found = node.get(figure) or {}
    median, low, high = found.get("median"), found.get("min"), found.get("max")
    noise = None
    if median and low is not None and high is not None:
        noise = round(100.0 * (high - low) / abs(median), 2)
    return {"figure": figure, "value": median, "noise_pct": noise}


def _planned(attempt):
    """A try as check mode reports it: planned, never started."""
    return {"name": attempt.get("name"), "flag": attempt.get("flag"), "value": attempt.get("value"),
            "risk": attempt.get("risk"), "why": attempt.get("why"), "status": "skipped",
            "reason": attempt.get("skip") or "check mode: planned, not tried", "argv": None, "comparison": None,
            "accuracy": None, "downtime_s": {"try": None, "rollback": None}, "restarts": 0,
            "dropin_sha256": None, "unit_sha256": None}


def experiment_summary(parts):
    """The experiments record (experiments.json) from the role's parts: ``baseline`` and
    ``final`` figures from the two benchmark runs (``baseline_bench``, ``kept_bench``), the
    total downtime, whether the command changed, the flags kept; every string cleaned. In check
    mode (``check_mode``, no try made) the candidates are the ``planned`` tries, as skipped."""
    if not isinstance(parts, dict) or not isinstance(parts.get("candidates"), list):
        _fail("%r is not the experiments' parts (no candidates)" % (parts,))
    record = dict((key, value) for key, value in parts.items()
                  if key not in ("baseline_bench", "kept_bench", "planned"))
    if parts.get("check_mode") and not record["candidates"]:
        record["candidates"] = [_planned(attempt) for attempt in parts.get("planned") or []]
    figure, level = parts.get("figure"), int(parts.get("concurrency") or 1)
    record["baseline"] = _level_figure(parts.get("baseline_bench"), figure, level)
    record["final"] = _level_figure(parts.get("kept_bench"), figure, level)
    if record["baseline"] and record["final"] and record["baseline"]["value"] and record["final"]["value"] is not None:
        record["final"]["delta_pct"] = round(100.0 * (record["final"]["value"] - record["baseline"]["value"])
                                             / abs(record["baseline"]["value"]), 2)
    total = 0.0
    for item in record["candidates"]:
        for value in ((item.get("downtime_s") or {}).values()):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total += value
    record["downtime_s_total"] = round(total, 2)
    before, after = (record.get("before") or {}).get("argv"), (record.get("after") or {}).get("argv")
    record["changed"] = after is not None and before != after
    record["kept_flags"] = experiment_kept_flags(record)
    counts = {}
    for item in record["candidates"]:
        counts[item.get("status")] = counts.get(item.get("status"), 0) + 1
    record["counts"] = counts
    return clean_tree(record)
