# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving-configuration experiments of a host (issue 37) as the page an operator reads
(experiments.md), and the record as it is written (experiments.json).

On a serving node the candidate launch flags of the inference server are tried one at a time,
lowest risk first; each is benchmarked and accuracy-checked and kept only when the chosen figure
got better beyond the noise band, no guard figure regressed and the output is still correct,
else it is rolled back. The record's shape is the serving_experiments role's (experiments.json,
beside benchmark.json). The page (experiments_report) puts the headline first (the launch
command before and after, the figure from the baseline to the kept state, how many candidates
were tried and kept, the restarts and the downtime), then every candidate in the order tried with
its figure before and after, the noise, the accuracy check, the downtime and the reason, the
guard figures, the first output differences of a candidate that failed the accuracy check, and
the launch command before and after in full.

The unit, the candidates' names, flags and values, the launch commands, the reasons and the
tokens come from the node and the data: experiment_summary cleans every string of the record
(node_text) before the role writes it, and the page Markdown-escapes every value or places it
in a code span (markdown_text) - the launch commands are fenced blocks whose fence is longer
than any run of backticks in them, one argument a line - so none renders as markup; the page
has no link.

In plugin_utils so that the filters (plugins/filter/experiments_md.py) and Python code (the
fleet page's test fleet) share it without importing a filter plugin.
"""

from __future__ import annotations

import json
import re
import shlex

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.markdown_text import code, escape
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import TEXT_LIMIT, clean

# The statuses a candidate ends in, in the order the counts are told.
STATUSES = ("kept", "rolled_back", "rejected_accuracy", "failed_start", "failed", "skipped")
STATUS_WORDS = {"kept": "kept", "rolled_back": "rolled back", "rejected_accuracy": "rejected on accuracy",
                "failed_start": "failed to start", "failed": "failed", "skipped": "skipped"}
# How many output differences of a candidate the page lists.
DIFFERENCES_SHOWN = 5
_TICKS = re.compile("`+")


def _loaded(record, name):
    if isinstance(record, str):
        try:
            record = json.loads(record)
        except ValueError as exc:
            raise AnsibleFilterError("%s: expects an experiments record (experiments.json), not JSON: %s" % (name, exc))
    if not isinstance(record, dict) or not isinstance(record.get("candidates"), list):
        raise AnsibleFilterError("%s: expects an experiments record (a dict with a candidates list, as "
                                 "experiments.json holds it)" % name)
    return record


def _dict(value):
    return value if isinstance(value, dict) else {}


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _num(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return "%.4g" % value if abs(value) < 1000 else "%.0f" % value
    return str(value) if _is_number(value) else escape(str(value))


def _pct(value):
    if value is None:
        return "-"
    return "%+.1f %%" % value if _is_number(value) else escape(str(value))


def _noise(value):
    if value is None:
        return "-"
    return "±%.1f %%" % value if _is_number(value) else escape(str(value))


def _seconds(value):
    if value is None:
        return "-"
    return "%.1f s" % value if _is_number(value) else escape(str(value))


def figure_value(part):
    """The number of the record's ``baseline`` or ``final``: its ``figure`` (experiments.json's
    shape), or its ``value`` where ``figure`` names the figure instead; None when neither is a
    number."""
    part = _dict(part)
    return next((part[key] for key in ("figure", "value") if _is_number(part.get(key))), None)


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _status(value):
    return STATUS_WORDS.get(value) or escape(str(value or "?"))


def flag_text(flag, value):
    """``--flag`` (a boolean flag: value null, as experiments.json's shape has it, or true) or
    ``--flag value``, as the command has it."""
    flag = "" if flag is None else str(flag)
    if value is None or value is True:
        return flag
    return "%s %s" % (flag, value)


def _flag(candidate):
    text = flag_text(candidate.get("flag"), candidate.get("value"))
    return code(text, cell=True) if text else "-"


def _accuracy(accuracy):
    if not isinstance(accuracy, dict):
        return "not checked"
    prompts = _count(accuracy.get("prompts"))
    differing = _count(accuracy.get("differing_prompts"))
    verdict = "passed" if accuracy.get("passed") is True else "FAILED" if accuracy.get("passed") is False else "?"
    if accuracy.get("exact") is True and not differing:
        return "%s: exact%s" % (verdict, " (%d prompts)" % prompts if prompts is not None else "")
    text = "%s: divergence %s of %s allowed" % (verdict, _divergence(accuracy.get("divergence_pct")),
                                                _divergence(accuracy.get("max_divergence_pct")))
    if prompts is not None and differing is not None:
        text += " (%d of %d prompts differ)" % (differing, prompts)
    return text


def _pct_plain(value):
    if value is None:
        return "-"
    return "%.1f %%" % value if _is_number(value) else escape(str(value))


def divergence_text(value):
    """A divergence percentage to four decimals, trailing zeros dropped (accuracy_compare rounds
    it up there, so that one shown as 0 is none)."""
    return ("%.4f" % value).rstrip("0").rstrip(".")


def _divergence(value):
    if value is None:
        return "-"
    return "%s %%" % divergence_text(value) if _is_number(value) else escape(str(value))


def _downtime(downtime):
    downtime = _dict(downtime)
    return "%s / %s" % (_seconds(downtime.get("try")), _seconds(downtime.get("rollback")))


def _argv(side):
    """The launch command of ``before``/``after`` as a list of arguments (argv, else the
    command split as a shell would), or None."""
    side = _dict(side)
    argv = side.get("argv")
    if isinstance(argv, list) and argv:
        return [clean(arg, TEXT_LIMIT) for arg in argv]
    command = side.get("command")
    if isinstance(command, str) and command.strip():
        try:
            return [clean(arg, TEXT_LIMIT) for arg in shlex.split(command)]
        except ValueError:
            return [clean(command, TEXT_LIMIT)]
    return None


def _one_line(argv):
    return " ".join(shlex.quote(arg) for arg in argv)


def _fenced(argv):
    """The command in a fenced block, one argument a line (an option with its value), shell-quoted
    so that the block can be pasted; the fence is longer than any run of backticks in it, so no
    argument can close it."""
    lines, index = [], 0
    while index < len(argv):
        line = shlex.quote(argv[index])
        if (argv[index].startswith("-") and "=" not in argv[index] and index + 1 < len(argv)
                and not argv[index + 1].startswith("-")):
            index += 1
            line += " " + shlex.quote(argv[index])
        lines.append(line)
        index += 1
    body = "\n".join((line if number == 0 else "  " + line) + (" \\" if number < len(lines) - 1 else "")
                     for number, line in enumerate(lines))
    fence = "`" * max([3] + [len(run) + 1 for run in _TICKS.findall(body)])
    return [fence + "sh", body, fence]


# ------------------------------------------------------------------------------ the page

def _headline(record, candidates):
    counts = dict((status, sum(1 for c in candidates if c.get("status") == status)) for status in STATUSES)
    other = len(candidates) - sum(counts.values())
    tried = len(candidates) - counts["skipped"]
    figure = escape(str(record.get("figure") or "the figure"))
    baseline, final = _dict(record.get("baseline")), _dict(record.get("final"))
    lines = []
    if record.get("final") is not None or record.get("baseline") is not None:
        lines.append("**%s: %s -> %s** (%s against the baseline, baseline noise %s)." % (
            figure, _num(figure_value(baseline)), _num(figure_value(final)), _pct(final.get("delta_pct")),
            _noise(baseline.get("noise_pct"))))
    else:
        lines.append("**%s**: no baseline was measured." % figure)
    parts = ["%d %s" % (counts[status], STATUS_WORDS[status]) for status in STATUSES[1:-1] if counts[status]]
    if other:
        parts.append("%d of another status" % other)
    restarts = record.get("restarts")
    lines.append("%s: %d tried, %d kept%s%s; %s restart%s%s, %s total downtime." % (
        "%d %s" % (len(candidates), "candidate" if len(candidates) == 1 else "candidates"), tried,
        counts["kept"], "".join(", %s" % part for part in parts),
        ", %d skipped (not tried)" % counts["skipped"] if counts["skipped"] else "",
        _num(restarts), "" if restarts == 1 else "s",
        " (at most %s)" % _num(record.get("max_restarts")) if record.get("max_restarts") is not None else "",
        _seconds(record.get("downtime_s_total"))))
    before, after = _argv(record.get("before")), _argv(record.get("after"))
    if before and after and before != after:
        lines.append("Launch command: %s -> %s." % (code(_one_line(before)), code(_one_line(after))))
    elif after or before:
        lines.append("Launch command unchanged: %s." % code(_one_line(after or before)))
    dropin = record.get("dropin")
    lines.append("Drop-in left: %s." % code(str(dropin)) if dropin else "No drop-in left: the unit runs as it was.")
    return lines


def _row(number, candidate):
    comparison = _dict(candidate.get("comparison"))
    figure = _dict(comparison.get("figure"))
    if figure:
        moved = "%s -> %s" % (_num(figure.get("before")), _num(figure.get("after")))
    else:
        moved = "not measured"
    return "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        number, escape(str(candidate.get("name") or "?")), _flag(candidate), escape(str(candidate.get("risk") or "?")),
        _status(candidate.get("status")), moved, _pct(figure.get("delta_pct")) if figure else "-",
        _noise(figure.get("noise_pct")) if figure else "-", _accuracy(candidate.get("accuracy")),
        _downtime(candidate.get("downtime_s")), escape(str(candidate.get("reason") or "")))


def _guards(candidates):
    lines = []
    for number, candidate in enumerate(candidates, 1):
        for guard in _dict(candidate.get("comparison")).get("guards") or []:
            if not isinstance(guard, dict):
                continue
            lines.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                number, escape(str(candidate.get("name") or "?")), escape(str(guard.get("name") or "?")),
                _num(guard.get("before")), _num(guard.get("after")), _pct(guard.get("delta_pct")),
                _noise(guard.get("noise_pct")), escape(str(guard.get("verdict") or "")),
                "**regressed**" if guard.get("regressed") else "no"))
    if not lines:
        return []
    return ["## Guard figures", "",
            "| # | candidate | figure | before | after | change | noise | verdict | regressed |",
            "|---|---|---|---|---|---|---|---|---|"] + lines + [""]


def _token(value):
    return "(none: the output ended)" if value is None else code(json.dumps(str(value), ensure_ascii=False))


def _differences(candidates):
    lines = []
    for number, candidate in enumerate(candidates, 1):
        accuracy = _dict(candidate.get("accuracy"))
        found = [d for d in accuracy.get("first_differences") or [] if isinstance(d, dict)]
        if not found:
            continue
        lines.append("- %d %s:" % (number, escape(str(candidate.get("name") or "?"))))
        for diff in found[:DIFFERENCES_SHOWN]:
            where = "finish reason" if diff.get("kind") == "finish_reason" else "token %s" % _num(diff.get("token"))
            lines.append("  - prompt %s, %s: baseline %s, candidate %s" % (
                _num(diff.get("prompt")), where, _token(diff.get("baseline")), _token(diff.get("candidate"))))
        if len(found) > DIFFERENCES_SHOWN:
            lines.append("  - and %d more" % (len(found) - DIFFERENCES_SHOWN))
    if not lines:
        return []
    return ["## First output differences", "",
            "Where a candidate's greedy output first left the baseline's, per prompt (tokens as JSON strings).", ""] + lines + [""]


def experiments_report(record, host=""):
    """experiments.md of the experiments record ``record`` (a dict, or its JSON text)."""
    record = _loaded(record, "experiments_report")
    candidates = [c for c in record["candidates"] if isinstance(c, dict)]
    lines = ["# Serving experiments%s" % (": %s" % escape(host) if host else ""), ""]
    where = escape(str(record.get("unit_host"))) if record.get("unit_host") else "the host itself"
    lines.append("Unit %s (%s) on %s. Figure %s at concurrency %s; guards %s, each no more than %s worse "
                 "beyond the noise. Started %s, finished %s." % (
                     code(str(record.get("unit") or "?")), escape(str(record.get("server_kind") or "?")), where,
                     code(str(record.get("figure") or "?")), _num(record.get("concurrency")),
                     ", ".join(code(str(g)) for g in record.get("guard_figures") or []) or "none",
                     _pct_plain(record.get("max_regression_pct")), escape(str(record.get("time_started") or "?")),
                     escape(str(record.get("time_finished") or "?"))))
    lines.append("")
    for line in _headline(record, candidates):
        lines += [line, ""]
    lines += ["## Candidates, in the order tried", ""]
    if candidates:
        lines += ["| # | candidate | flag | risk | status | figure before -> after | change | noise | accuracy "
                  "| downtime try / rollback | reason |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [_row(number, candidate) for number, candidate in enumerate(candidates, 1)]
    else:
        lines.append("No candidate applied to this server.")
    lines.append("")
    lines += _guards(candidates)
    lines += _differences(candidates)
    for title, side in (("Launch command before", "before"), ("Launch command after", "after")):
        argv = _argv(record.get(side))
        lines += ["## %s" % title, ""]
        lines += _fenced(argv) if argv else ["Not recorded."]
        lines.append("")
    lines += ["## Noise", "",
              "The noise band of a figure is its run-to-run spread (max - min over the benchmark's repeats, as a "
              "percentage of the median), the larger of the two runs compared. A change no larger than the noise is "
              "no measurable change: a candidate is kept only when the figure got better by more than the noise, no "
              "guard figure got worse beyond the noise by more than the allowed percentage, and the accuracy check "
              "passed. Downtime is the time from a restart until the server answered again."]
    return "\n".join(lines) + "\n"
