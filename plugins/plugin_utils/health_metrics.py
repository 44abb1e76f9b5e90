# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus metrics of a node's verdict, for node_exporter's textfile collector
(gpufleet.tuning.health_textfile writes them): what a scheduler, Slurm's NHC or a Kubernetes taint
controller reads to act on a sick node without parsing our JSON.

Every series a verdict can have is always written (a status one-hot, every action with its count,
zeros included), so a series never vanishes when a problem goes away and an alert can say "== 0".
Times are heartbeats: the textfile module rewrites them without counting a change.
"""

from __future__ import annotations

import datetime

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import audit_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import STATUSES

HEARTBEAT = ("gpufleet_last_audit_timestamp_seconds", "gpufleet_last_tuning_timestamp_seconds")


def _metric(name, text, samples):
    return {"name": name, "help": text, "type": "gauge", "samples": samples}


def _epoch(text):
    """ISO 8601 UTC (``2026-12-07T05:50:00Z``) as epoch seconds; None when it is not one."""
    try:
        when = datetime.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return int(when.replace(tzinfo=datetime.timezone.utc).timestamp())


def health_metrics(health, audit=None, verify=None, tuned=False):
    """``{"metrics": [...], "heartbeat": [...]}`` for gpufleet.tuning.health_textfile from a
    health_judge result (``health``), and where this run has them the audit (audit_judge's result:
    findings by severity) and the verify report (recorded drift). ``tuned``: the host role ran in
    this run (the tuning time is written)."""
    if not isinstance(health, dict) or health.get("status") not in STATUSES:
        raise AnsibleFilterError("health_metrics expects a gpufleet.tuning.health_judge result, got %r"
                                 % (type(health).__name__,))
    counts = health.get("counts") or {}
    by_action = counts.get("by_action") or {}
    metrics = [
        _metric("gpufleet_health_status", "The node's health verdict: 1 for its status, 0 for the others.",
                [{"labels": {"status": status}, "value": int(health["status"] == status)} for status in STATUSES]),
        _metric("gpufleet_health_blocking", "1 when a health finding keeps the node from being tuned or trusted.",
                [{"labels": {}, "value": int(bool(health.get("blocking")))}]),
        _metric("gpufleet_health_findings", "Health findings by the action they ask for.",
                [{"labels": {"action": action}, "value": int(by_action.get(action, 0))}
                 for action in audit_rules.ACTIONS]),
        _metric("gpufleet_health_unknown_rules", "Health rules that could not be judged (a fact could not be read).",
                [{"labels": {}, "value": int(counts.get("unknown", 0))}]),
    ]
    gpus = [g for g in health.get("gpus") or [] if isinstance(g, dict) and isinstance(g.get("index"), int)]
    if gpus:
        metrics.append(_metric("gpufleet_gpu_health_status", "Each GPU's health: 1 for its status, 0 for the others.",
                               [{"labels": {"gpu": str(g["index"]), "bdf": str(g.get("bdf") or ""), "status": status},
                                 "value": int(g.get("status") == status)} for g in gpus for status in STATUSES]))
    xid = ((health.get("facts") or {}).get("health") or {}).get("xid")
    events = xid.get("value") if isinstance(xid, dict) else None
    if isinstance(events, list):
        metrics.append(_metric("gpufleet_gpu_xid_events", "XID events in the kernel log since boot, by GPU and code.",
                               [{"labels": {"gpu": "" if e.get("gpu") is None else str(e["gpu"]),
                                            "bdf": str(e.get("bdf") or ""), "code": str(e.get("code"))},
                                 "value": int(e.get("count") or 0)} for e in events if isinstance(e, dict)]))
    if isinstance(audit, dict) and isinstance(audit.get("counts"), dict):
        metrics.append(_metric("gpufleet_audit_findings", "The audit's findings by severity (H health, P0 to P2 tuning).",
                               [{"labels": {"severity": severity}, "value": int(audit["counts"].get(severity, 0))}
                                for severity in audit_rules.SEVERITIES]))
    if isinstance(verify, dict) and isinstance(verify.get("recorded_drift"), list):
        metrics.append(_metric("gpufleet_drift_items", "Tuned values that drifted from what the collection recorded.",
                               [{"labels": {}, "value": len(verify["recorded_drift"])}]))
    audited = _epoch(health.get("time"))
    if audited is not None:
        metrics.append(_metric(HEARTBEAT[0], "When the node was last audited (its health judged), Unix time.",
                               [{"labels": {}, "value": audited}]))
        if tuned:
            metrics.append(_metric(HEARTBEAT[1], "When the tuning last ran on the node, Unix time.",
                                   [{"labels": {}, "value": audited}]))
    return {"metrics": metrics, "heartbeat": list(HEARTBEAT)}
