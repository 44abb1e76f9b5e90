# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's audit: every finding with the hosts that have it, and the hosts ranked by their
worst finding. It reads the per-host audits the audit role keeps (the same dicts it writes to
each host's audit.json); the Markdown is rendered by audit_report (kind fleet).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.artifact_dir import encode

DOCUMENTATION = r"""
---
name: audit_fleet
short_description: Gather per-host audits into the fleet's summary
version_added: 0.1.0
description:
  - Takes the list of per-host audits (what the audit role writes to each host's audit.json)
    and returns the fleet summary - the hosts ranked by their worst finding (then by their
    number of P0, P1 and P2 findings, then by name), and each finding rule with the hosts
    that have it and their items, most severe first; the same for the unknown results.
  - Each host's report is named by its folder under the artifacts root as
    gpufleet.tuning.artifact_dir names it (C(HOSTDIR/system-improve.md)).
  - Entries that are not audits (a host that failed before its audit) are left out.
positional: ''
options:
  _input:
    description: The per-host audits.
    type: list
    elements: dict
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: The fleet's summary
  ansible.builtin.set_fact:
    fleet: >-
      {{ ansible_play_hosts_all | map('extract', hostvars) | selectattr('__host_tuning.audit', 'defined')
         | map(attribute='__host_tuning.audit') | list | gpufleet.tuning.audit_fleet }}
"""

RETURN = r"""
_value:
  description: The fleet summary.
  type: dict
  contains:
    hosts:
      description: One per host, worst first - C(host), C(worst), C(counts), C(planned) (records per phase), C(report).
      type: list
      elements: dict
    findings:
      description: One per rule with findings - C(rule), C(severity), C(title), C(fix), C(hosts) (each C(host) and C(items)).
      type: list
      elements: dict
    unknown:
      description: One per rule with unknown results - C(rule), C(title), C(hosts).
      type: list
      elements: dict
    first:
      description: The earliest audit time.
      type: str
    last:
      description: The latest audit time.
      type: str
"""

SEVERITIES = ("P0", "P1", "P2")
REPORT = "system-improve.md"


def _rank(host):
    worst = host["worst"]
    counts = host["counts"]
    return (SEVERITIES.index(worst) if worst in SEVERITIES else len(SEVERITIES),
            -counts.get("P0", 0), -counts.get("P1", 0), -counts.get("P2", 0), host["host"])


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
    return {"hosts": hosts, "findings": findings,
            "unknown": [dict((k, v) for k, v in unknown[rule].items() if k not in ("fix", "severity"))
                        for rule in unknown_order],
            "first": times[0] if times else None, "last": times[-1] if times else None}


class FilterModule:
    def filters(self):
        return {"audit_fleet": audit_fleet}
