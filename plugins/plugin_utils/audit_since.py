# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What moved since the host's previous audit: the findings fixed, the ones that are new, and
the ones still there.

The audit runs first in every tune run, so the audit.json it replaces is the node as the last
run found it. Comparing the two is how an operator sees that a tuning pass did what it
promised (a P0 that the last audit found and this one lists as optimal is "fixed") and that
nothing regressed (a finding that is new since then). A finding is the pair (rule, item): the
same rule on another GPU is another finding. The pair is compared as node_text cleans it:
audit.json holds cleaned text (a sysctl value's tabs as spaces) while this run's findings may
not be cleaned yet (the action audit_judge cleans after this comparison), and an audit.json
written before the cleaning holds the raw text; either way the same finding is the same pair.

The previous audit is read from the controller's artifacts and is data, never trusted to be
well formed: text that is not JSON, or JSON that is not an audit, gives no comparison (with
the reason), never a failure of the audit.

Used by the action audit_judge and the filter audit_since (plugins/filter/audit.py), a thin
wrapper; neither imports the other.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import TEXT_LIMIT, clean

LISTS = ("optimal", "not_applicable", "unknown")


def _key(entry):
    item = entry.get("item")
    return (clean(entry.get("rule"), TEXT_LIMIT), None if item is None else clean(item, TEXT_LIMIT))


def _brief(entry, **extra):
    out = {"rule": entry.get("rule"), "item": entry.get("item"), "severity": entry.get("severity"),
           "title": entry.get("title")}
    out.update(extra)
    return out


def _findings(audit, name):
    findings = audit.get("findings")
    if not isinstance(findings, list) or not all(isinstance(f, dict) and isinstance(f.get("rule"), str) for f in findings):
        raise ValueError("%s has no list of findings with rule ids" % name)
    return findings


def _previous(previous):
    """The previous audit as a dict, or (None, reason)."""
    if previous is None or (isinstance(previous, str) and not previous.strip()):
        return None, "no previous audit"
    if isinstance(previous, str):
        try:
            previous = json.loads(previous)
        except ValueError as exc:
            return None, "the previous audit.json is not JSON (%s)" % exc
    if not isinstance(previous, dict):
        return None, "the previous audit.json is not an audit (a %s)" % type(previous).__name__
    try:
        _findings(previous, "the previous audit.json")
    except ValueError as exc:
        return None, str(exc)
    return previous, None


def audit_since(audit, previous):
    if not isinstance(audit, dict):
        raise AnsibleFilterError("audit_since: the input must be an audit (a dict), got %s" % type(audit).__name__)
    try:
        current = _findings(audit, "this audit")
    except ValueError as exc:
        raise AnsibleFilterError("audit_since: %s" % exc)
    before, reason = _previous(previous)
    if before is None:
        return {"none": True, "reason": reason}
    now_keys = set(_key(f) for f in current)
    before_keys = set(_key(f) for f in before["findings"])
    where = {}
    for name in LISTS:
        for entry in audit.get(name) or []:
            if isinstance(entry, dict):
                where.setdefault(_key(entry), name)
    return {
        "none": False,
        "previous_time": before.get("time") if isinstance(before.get("time"), str) else None,
        "fixed": [_brief(f, now=where.get(_key(f), "gone")) for f in before["findings"] if _key(f) not in now_keys],
        "new": [_brief(f) for f in current if _key(f) not in before_keys],
        "still": [_brief(f) for f in current if _key(f) in before_keys],
    }
