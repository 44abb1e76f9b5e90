# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's health verdict: the audit's health rules (severity H) on its facts, turned into what a
playbook gates on and what a scheduler reads (health.json).

Why a verdict of its own beside the audit: a degraded GPU looks like a tuning regression to every
later step (the benchmark gate fails, the rollout reverts the tuning) unless the hardware is judged
first and its state named. The rules stay the audit's (roles/audit/files/rules.yml, overridable like
every rule); this module only keeps the H ones and summarises them:

- ``status``: ``quarantined`` when a finding blocks (an action other than monitor, unless the rule
  says otherwise), ``degraded`` when there are only non-blocking findings, else ``healthy``. Health
  rules that could not be judged (a fact unknown) are listed under ``unknown``; they do not make a
  node sick, and the verdict says how many there were.
- ``actions``: the distinct actions of the findings, the heaviest first (rma, drain, reboot,
  reset_gpu, monitor), and per GPU the same for the findings that name it.
- ``policy`` (gpufleet_health_policy): ``quarantine`` (default: the sick host is left out, the others
  go on), ``stop`` (the run stops) or ``report`` (tuned anyway, and said so). ``quarantine`` and
  ``proceed`` are what the playbooks test.
"""

from __future__ import annotations

import datetime

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import audit_rules, fact_envelope

STATUSES = ("healthy", "degraded", "quarantined")
POLICIES = ("quarantine", "stop", "report")
PHASES = ("before", "after_reboot", "after_failure", "audit")
# The facts of one GPU health.json keeps beside the findings (what the verdict rests on).
GPU_KEYS = ("index", "bdf", "name", "device_id", "nvml_status", "recovery_action", "persistence_mode",
            "ecc_errors_uncorrected", "remapped_rows_pending", "remapped_rows_failure", "remapped_rows_uncorrectable",
            "retired_pages", "retired_pages_pending", "sram_uncorrected_volatile", "sram_uncorrected_aggregate",
            "sram_threshold_exceeded", "clock_event_reasons", "temperature_c", "pcie", "nvlink_active",
            "nvlink_links", "nvlink_errors", "fabric_state", "fabric_status")
DRIVER_KEYS = ("version", "loaded", "persistenced_active", "fabricmanager_active", "nvswitches")


def heaviest_first(actions):
    """The distinct actions, the heaviest first (audit_rules.ACTIONS is mildest first)."""
    order = audit_rules.ACTIONS
    return sorted(set(a for a in actions if a in order), key=order.index, reverse=True)


def _status(findings):
    if any(f.get("blocking") for f in findings):
        return "quarantined"
    return "degraded" if findings else "healthy"


def _gpu_of(finding):
    """The GPU index a finding names (its ``index`` fact, or ``gpu`` for an XID), or None."""
    values = finding.get("values") or {}
    for key in ("index", "gpu"):
        if isinstance(values.get(key), int) and not isinstance(values.get(key), bool):
            return values[key]
    return None


def _gpus(facts, findings):
    gpus = facts.get("gpus")
    gpus = gpus if isinstance(gpus, list) else []
    out = []
    for gpu in gpus:
        if not isinstance(gpu, dict):
            continue
        index = fact_envelope.value(gpu.get("index"))
        mine = [f for f in findings if _gpu_of(f) == index]
        out.append({"index": index, "bdf": fact_envelope.value(gpu.get("bdf")), "name": fact_envelope.value(gpu.get("name")),
                    "status": _status(mine), "actions": heaviest_first(f["action"] for f in mine),
                    "findings": [f["rule"] for f in mine]})
    return out


def _kept_facts(facts):
    """The facts the verdict rests on: the health section, each GPU's health facts, the driver's."""
    gpus = facts.get("gpus")
    driver = facts.get("driver") if isinstance(facts.get("driver"), dict) else {}
    return {
        "health": facts.get("health"),
        "gpus": [dict((key, gpu[key]) for key in GPU_KEYS if key in gpu) for gpu in gpus if isinstance(gpu, dict)]
        if isinstance(gpus, list) else gpus,
        "driver": dict((key, driver[key]) for key in DRIVER_KEYS if key in driver),
    }


def health_verdict(facts, rules, extra=None, disabled=None, params=None, policy="quarantine", phase="before",
                   host=None, now=None):
    """The verdict (health.json's content) of ``facts`` under the H rules of ``rules`` (with
    ``extra`` and ``disabled`` as the audit takes them). AnsibleFilterError for a bad policy, phase
    or rule."""
    if policy not in POLICIES:
        raise AnsibleFilterError("gpufleet_health_policy must be one of %s, got %r" % (", ".join(POLICIES), policy))
    if phase not in PHASES:
        raise AnsibleFilterError("health phase must be one of %s, got %r" % (", ".join(PHASES), phase))
    if not isinstance(facts, dict):
        raise AnsibleFilterError("health_verdict expects the facts of gpufleet.tuning.node_facts (a dict), got %s"
                                 % type(facts).__name__)
    loaded, summary = audit_rules.load_rules(audit_rules.plain(rules), audit_rules.plain(extra),
                                             audit_rules.plain(disabled))
    health_rules = [rule for rule in loaded if rule.severity == audit_rules.HEALTH]
    facts = audit_rules.plain(facts)
    judged = audit_rules.evaluate(facts, health_rules, audit_rules.plain(params or {}))
    findings, unknown = judged["findings"], judged["unknown"]
    status = _status(findings)
    blocking = status == "quarantined"
    by_action = dict((action, sum(1 for f in findings if f.get("action") == action)) for action in audit_rules.ACTIONS)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return {
        "host": host,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "phase": phase,
        "status": status,
        "policy": policy,
        "blocking": blocking,
        "quarantine": blocking and policy != "report",
        "proceed": not blocking or policy == "report",
        "actions": heaviest_first(f["action"] for f in findings),
        "counts": {"findings": len(findings), "blocking": sum(1 for f in findings if f.get("blocking")),
                   "by_action": by_action, "unknown": len(unknown), "optimal": len(judged["optimal"]),
                   "not_applicable": len(judged["not_applicable"])},
        "findings": findings,
        "unknown": unknown,
        "gpus": _gpus(facts, findings),
        "rules": [rule.id for rule in health_rules],
        "disabled": summary["disabled"],
        "facts": _kept_facts(facts),
    }


def summary_line(verdict):
    """``quarantined: reboot, rma (3 findings)``: how a message names a verdict."""
    if not isinstance(verdict, dict) or verdict.get("status") not in STATUSES:
        return "not judged"
    counts = verdict.get("counts") or {}
    if verdict["status"] == "healthy":
        return "healthy (%d health rule(s) could not be judged)" % counts.get("unknown", 0) if counts.get("unknown") \
            else "healthy"
    return "%s: %s (%d finding(s))" % (verdict["status"], ", ".join(verdict.get("actions") or []),
                                       counts.get("findings", 0))
