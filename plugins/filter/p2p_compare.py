# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set this run's P2P bandwidth against the previous result file of the same host.

Absolute floors catch a broken node; a node that slowly degrades (a link retraining to fewer
lanes, a firmware change) still clears them. Comparing with the host's own previous figures
catches that, and the verify role can fail on a drop larger than a set percentage.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: p2p_compare
short_description: Compare P2P bandwidth with a previous verify result
version_added: 0.1.0
description:
  - Takes the previous verify report (a dict, its JSON text, or an empty value when there is
    none) and returns C(previous_time), C(lines) (one per pair and metric, with the change in
    percent) and C(regressions) (drops beyond O(max_regression_pct)).
positional: current, max_regression_pct
options:
  _input:
    description: The previous report.
    type: raw
    required: true
  current:
    description: This run's report.
    type: dict
    required: true
  max_regression_pct:
    description: A drop beyond this many percent is a regression; null reports only.
    type: float
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Compare
  ansible.builtin.debug:
    msg: "{{ (lookup('ansible.builtin.file', 'artifacts/node1/verify.json', errors='ignore') or '') | gpufleet.tuning.p2p_compare(report, 10) }}"
"""

RETURN = r"""
_value:
  description: C(previous_time), C(lines) and C(regressions).
  type: dict
"""


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


def p2p_compare(previous, current, max_regression_pct=None):
    """Compare P2P bandwidth with the previous report (a dict, its JSON text, or empty)."""
    if isinstance(previous, str):
        previous = json.loads(previous) if previous.strip() else {}
    previous = previous or {}
    if max_regression_pct is not None:
        try:
            max_regression_pct = float(max_regression_pct)
        except (TypeError, ValueError):
            raise AnsibleFilterError("max_regression_pct=%r is not a number" % (max_regression_pct,))
    before, after = _figures(previous), _figures(current)
    lines, regressions = [], []
    for key in sorted(set(before) & set(after)):
        old, new = before[key], after[key]
        change = (new - old) / old * 100.0 if old else 0.0
        lines.append("%s %s: %.1f GB/s (previous %.1f, %+.1f%%)" % (key[1], key[0], new, old, change))
        if max_regression_pct is not None and change < -max_regression_pct:
            regressions.append("p2p %s %s dropped %.1f%% since %s (%.1f -> %.1f GB/s; limit %.1f%%)"
                               % (key[1], key[0], -change, previous.get("time", "the previous run"),
                                  old, new, max_regression_pct))
    return {"previous_time": previous.get("time"), "lines": lines, "regressions": regressions}


class FilterModule(object):
    def filters(self):
        return {"p2p_compare": p2p_compare}
