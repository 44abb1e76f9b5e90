# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's audit: every finding with the hosts that have it, and the hosts ranked by their
worst finding. It reads the per-host audits the audit role keeps (the same dicts it writes to
each host's audit.json); the Markdown is rendered by audit_report (kind fleet).

What it returns is written as fleet-audit.json: its strings are cleaned (node_text), as each
host's audit.json is; a host's ``report`` is its folder (artifact_dir's encoding of the name
as given) and the report's file name.

The filter audit_fleet (plugins/filter/audit.py) is a thin wrapper over this file; the fleet
page's test fleet builds its summary here.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import encode
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import SEVERITIES
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import clean_tree

REPORT = "system-improve.md"


def _rank(host):
    worst = host["worst"]
    counts = host["counts"]
    return (SEVERITIES.index(worst) if worst in SEVERITIES else len(SEVERITIES),
            tuple(-counts.get(severity, 0) for severity in SEVERITIES), host["host"])


def _group(entries, host, groups, order):
    for entry in entries:
        rule = entry.get("rule")
        if rule not in groups:
            groups[rule] = {"rule": rule, "severity": entry.get("severity"), "title": entry.get("title"),
                            "fix": entry.get("fix"), "hosts": []}
            order.append(rule)
        hosts = groups[rule]["hosts"]
        if not hosts or hosts[-1]["host"] != host:
            hosts.append({"host": host, "items": []})
        if entry.get("item") is not None:
            hosts[-1]["items"].append(entry["item"])


def audit_fleet(audits):
    if not isinstance(audits, list):
        raise AnsibleFilterError("audit_fleet expects a list of per-host audits, got %s" % type(audits).__name__)
    audits = [a for a in audits if isinstance(a, dict) and isinstance(a.get("host"), str) and "findings" in a]
    hosts = []
    found, found_order, unknown, unknown_order = {}, [], {}, []
    for audit in sorted(audits, key=lambda a: a["host"]):
        counts = audit.get("counts") or {}
        planned = audit.get("planned") or {}
        hosts.append({
            "host": audit["host"],
            "time": audit.get("time"),
            "worst": audit.get("worst"),
            "counts": counts,
            "planned": dict((phase, sum(len(entry.get("records") or []) for entry in modules.values()))
                            for phase, modules in planned.items() if isinstance(modules, dict)),
            "report": "%s/%s" % (encode(audit["host"]), REPORT),
        })
        _group(audit.get("findings") or [], audit["host"], found, found_order)
        _group(audit.get("unknown") or [], audit["host"], unknown, unknown_order)
    hosts.sort(key=_rank)
    findings = [found[rule] for rule in found_order]
    findings.sort(key=lambda f: (SEVERITIES.index(f["severity"]) if f["severity"] in SEVERITIES else len(SEVERITIES),
                                 -len(f["hosts"])))
    times = sorted(h["time"] for h in hosts if isinstance(h["time"], str))
    return clean_tree({"hosts": hosts, "findings": findings,
                       "unknown": [dict((k, v) for k, v in unknown[rule].items() if k not in ("fix", "severity"))
                                   for rule in unknown_order],
                       "first": times[0] if times else None, "last": times[-1] if times else None})
