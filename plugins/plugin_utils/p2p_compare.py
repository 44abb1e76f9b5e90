# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set this run's P2P bandwidth against the previous result file of the same host.

Absolute floors catch a broken node; a node that slowly degrades (a link retraining to fewer
lanes, a firmware change) still clears them. Comparing with the host's own previous figures
catches that, and the verify role can fail on a drop larger than a set percentage.

The comparison is written into verify.json: its text (the previous run's time and pair names
come from the previous file) is cleaned (node_text).

The filter p2p_compare (plugins/filter/report.py) is a thin wrapper over this file.
"""

from __future__ import annotations

import json
import math

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import clean_tree

# A drop is between 0 and 100 percent: a limit outside that range, NaN (every comparison
# false) or an infinity would never flag anything.
REGRESSION_PCT_RANGE = (0.0, 100.0)


def _figures(report):
    """{(metric, pair): GB/s} from a report's p2p section."""
    out = {}
    p2p = (report or {}).get("p2p") or {}
    for res in p2p.get("pairs") or []:
        if res.get("unidirectional_p2p_gbps") is not None:
            out[("unidirectional", "%s->%s" % (res["src"], res["dst"]))] = res["unidirectional_p2p_gbps"]
    for res in p2p.get("bidirectional") or []:
        if res.get("bidirectional_p2p_gbps") is not None:
            out[("bidirectional", "%s<->%s" % (res["a"], res["b"]))] = res["bidirectional_p2p_gbps"]
    return out


def _usable(value):
    """A figure that can be compared: a finite number > 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:
        return False


def regression_limit(value, name="max_regression_pct"):
    """``value`` as a float from 0 to 100, or None; AnsibleFilterError naming it otherwise."""
    if value is None:
        return None
    low, high = REGRESSION_PCT_RANGE
    wanted = "give a finite number from %g to %g, or null to report only" % (low, high)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise AnsibleFilterError("%s=%r is not a number: %s" % (name, value, wanted))
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise AnsibleFilterError("%s=%r is not a number: %s" % (name, value, wanted))
    if not math.isfinite(number):
        raise AnsibleFilterError("%s=%r is not a finite number: %s" % (name, value, wanted))
    if not low <= number <= high:
        raise AnsibleFilterError("%s=%r is out of range: %s" % (name, value, wanted))
    return number


def p2p_compare(previous, current, max_regression_pct=None):
    """Compare P2P bandwidth with the previous report (a dict, its JSON text, or empty)."""
    max_regression_pct = regression_limit(max_regression_pct)
    if not isinstance(current, dict):
        raise AnsibleFilterError("p2p_compare: current must be this run's report (a dict), not %r" % (current,))
    lines, regressions = [], []
    if isinstance(previous, str):
        try:
            previous = json.loads(previous) if previous.strip() else {}
        except ValueError as exc:
            lines.append("the previous result is not valid JSON (%s): nothing compared" % exc)
            previous = {}
    previous = previous if isinstance(previous, dict) else {}
    before, after = _figures(previous), _figures(current)
    since = previous.get("time", "the previous run")
    for key in sorted(set(before) & set(after)):
        old, new = before[key], after[key]
        if not _usable(old):
            lines.append("%s %s: %r GB/s before is not a finite number > 0: not compared" % (key[1], key[0], old))
            continue
        if not _usable(new):
            lines.append("%s %s: %r GB/s is not a finite number > 0 (previous %.1f)" % (key[1], key[0], new, old))
            if max_regression_pct is not None:
                regressions.append("p2p %s %s measured %r GB/s, not a finite number > 0 (%.1f GB/s at %s)"
                                   % (key[1], key[0], new, old, since))
            continue
        change = (new - old) / old * 100.0
        lines.append("%s %s: %.1f GB/s (previous %.1f, %+.1f%%)" % (key[1], key[0], new, old, change))
        if max_regression_pct is not None and change < -max_regression_pct:
            regressions.append("p2p %s %s dropped %.1f%% since %s (%.1f -> %.1f GB/s; limit %.1f%%)"
                               % (key[1], key[0], -change, since, old, new, max_regression_pct))
    return clean_tree({"previous_time": previous.get("time"), "lines": lines, "regressions": regressions})
