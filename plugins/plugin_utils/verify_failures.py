# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verify role's judgement: why a host fails verification.

It turns the P2P result and the check-mode read-backs of the tuning modules into one list of
reasons. The drift of a read-back is its ``changes`` records (module_utils/common/records.py):
each record is one drift line, worded by change_summary as the closing summary words a planned
change. Nothing else of a result is read for drift: not ``changed`` alone, not the ``diff``
(rendered for people), not the ``skipped_keys``/``restart_required`` notes the summary adds.

The lines are written into verify.json and the rollout's reports, and they quote the node (a
module's message, a sysctl value): each is cleaned (node_text: no control or bidi character,
bounded length).

The filter verify_failures (plugins/filter/report.py) is a thin wrapper over this file.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.changes import change_summary
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import TEXT_LIMIT, clean


def _records(result):
    changes = result.get("changes")
    if changes is None:
        return []
    if not isinstance(changes, list):
        raise AnsibleFilterError("verify_failures: a result's changes must be a list of records, got %s"
                                 % type(changes).__name__)
    return [rec for rec in changes if isinstance(rec, dict)]


def _item_failures(label, result, known):
    """Lines for one (not looped) read-back result: its failure, or a drift line per record."""
    if result.get("skipped") is True:
        return []
    name = result.get("container_name")  # an lxc_memlock item: say which container
    if result.get("failed"):
        return ["%s: read-back failed: %s" % ("%s %s" % (label, name) if name else label, result.get("msg", "no message"))]
    records = [rec for rec in _records(result) if str(rec.get("target")) not in known]
    if not records:
        if result.get("changed") and not _records(result):
            return ["drift: %s: the read-back reports a change but returned no change records"
                    % ("%s %s" % (label, name) if name else label)]
        return []
    # change_summary words the records; it gets nothing but them (and the container's name,
    # which it puts in the label), so no other field of the result becomes a drift line.
    summary_input = {"results": [{"container_name": name, "changes": records}]} if name else {"changes": records}
    return ["drift: " + line for line in change_summary({label: summary_input}, True)]


def _readback_failures(label, result, known):
    if not isinstance(result, dict) or not result or result.get("skipped") is True:
        return []
    items = result.get("results")
    if isinstance(items, list):  # a looped task: one result per item
        lines = []
        for item in items:
            if isinstance(item, dict):
                lines.extend(_item_failures(label, item, known))
        return lines
    return _item_failures(label, result, known)


def _known(skipped_in_run, label):
    """The targets the apply skipped for this module: keys of its skipped_keys (or a list)."""
    found = (skipped_in_run or {}).get(label) or {}
    return set(str(key) for key in found)


def _reason(short):
    """The shortfall's reason without the ``; why: ids`` tail the causes spell out anyway."""
    reason = str(short.get("reason"))
    if short.get("causes") and "; why: " in reason:
        reason = reason.rsplit("; why: ", 1)[0]
    return reason


def _causes(causes):
    """`` - why: id (summary; fix: ...); ...`` of a diagnosed shortfall, or empty."""
    if not isinstance(causes, list) or not causes:
        return ""
    parts = []
    for cause in causes:
        if isinstance(cause, dict):
            parts.append("%s (%s; fix: %s)" % (cause.get("id"), cause.get("summary"), cause.get("fix")))
    return " - why: " + "; ".join(parts) if parts else ""


def verify_failures(data):
    if not isinstance(data, dict):
        raise AnsibleFilterError("verify_failures expects a dict with p2p and readback, got %s" % type(data).__name__)
    failures = []
    p2p = data.get("p2p") or {}
    if isinstance(p2p, dict):
        for short in p2p.get("shortfalls") or []:
            failures.append("p2p %s: %s%s" % (short.get("pair"), _reason(short), _causes(short.get("causes"))))
        if p2p.get("failed") and not p2p.get("shortfalls"):
            failures.append("p2p: %s" % p2p.get("msg", "failed"))
    readback = data.get("readback") or {}
    if not isinstance(readback, dict):
        raise AnsibleFilterError("verify_failures: readback must be a dict of module: result")
    skipped_in_run = data.get("skipped_in_run") or {}
    if not isinstance(skipped_in_run, dict):
        raise AnsibleFilterError("verify_failures: skipped_in_run must be a dict of module: keys")
    for label in sorted(readback):
        failures.extend(_readback_failures(label, readback[label], _known(skipped_in_run, label)))
    return [clean(line, TEXT_LIMIT) for line in failures]
