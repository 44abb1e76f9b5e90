# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's reports for people: a host's system-improve.md and the fleet's fleet-audit.md.

Everything here is rendering: the host's audit (the dict the audit role writes to audit.json:
the rules' evaluation from audit_rules, the planned changes from audit_planned, the facts) and
the fleet's summary (audit_fleet) become Markdown, and nothing is judged again. The same input
renders the same bytes (tests/unit/fixtures/audit/*.md are compared exactly), so nothing here
reads the clock or the machine. Every value of the audit (the node's names and values, the
findings' text, the rules' titles) is Markdown-escaped (markdown_text: ``escape`` for text and
table cells, ``code`` for rule ids and tags), so a host or GPU name holding ``<img ...>`` or
``[x](javascript:...)`` is shown as that text; the only links are the report's own anchor and,
in the fleet's report, each host's system-improve.md by its folder name (artifact_dir).

Used by the action audit_judge (system-improve.md) and the filter audit_report
(plugins/filter/audit.py, fleet-audit.md), a thin wrapper; neither imports the other.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import encode
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import SEVERITIES
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.markdown_text import code, escape
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_report

HEADINGS = {
    "H": "H: health, the hardware or the driver needs an action before this node is tuned or trusted",
    "P0": "P0: high impact, fixable now",
    "P1": "P1: needs a reboot or a bigger change",
    "P2": "P2: minor",
}
PHASES = (("runtime", "--tags runtime"), ("reboot_required", "--tags reboot_required"))
REPORT = "system-improve.md"
# What audit_fleet gives as a host's report: its folder (artifact_dir's encoding) and REPORT.
_REPORT_PATH = re.compile(r"([A-Za-z0-9._~%-]+)/" + re.escape(REPORT) + r"\Z")


# ------------------------------------------------------------------------------ helpers

def _unwrap(node):
    """A fact's value (None when unknown), whatever the envelope nesting."""
    if isinstance(node, dict) and "value" in node and "source" in node and set(node) <= {"value", "source", "unknown"}:
        return None if "unknown" in node else _unwrap(node["value"])
    if isinstance(node, dict):
        return dict((key, _unwrap(item)) for key, item in node.items())
    if isinstance(node, list):
        return [_unwrap(item) for item in node]
    return node


def _get(facts, *path):
    node = facts
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _text(value, empty="unknown"):
    if value is None or value == "":
        return empty
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _md(value):
    """A value as Markdown text (None as "None", as the report always wrote it)."""
    return escape(value if isinstance(value, str) else str(value))


_cell = _md


def _plural(count, word):
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def _state(value, kind):
    """One side of a change record, for people."""
    if value is None:
        return "absent" if kind == "file" else "not set"
    if isinstance(value, dict):
        if "link" in value:
            return "link to %s" % value["link"]
        if "sha256" in value:
            parts = ["%s bytes" % value.get("size", "?")]
            if value.get("mode"):
                parts.append("mode %s" % value["mode"])
            parts.append("sha256 %s" % str(value["sha256"])[:12])
            return "file, " + ", ".join(parts)
        return ", ".join("%s %s" % (key, item) for key, item in sorted(value.items()))
    return str(value)


def _fix_line(fix):
    steps = fix.get("steps")
    if fix.get("class") == "manual":
        return "Fix: by hand, see [Manual steps](#manual-steps)."
    if fix.get("class") == "reboot_required":
        text = "Fix: %s runs %s, live after the next reboot" % (
            code("--tags %s" % fix.get("tag", "reboot_required")), _md(fix.get("module")))
    else:
        text = "Fix: %s runs %s" % (code("--tags %s" % fix.get("tag", "runtime")), _md(fix.get("module")))
    return text + (": %s." % _md(str(steps).rstrip(".")) if steps else ".")


def _by_rule(entries):
    """[(first entry, [entries])] grouped by rule, in order of first appearance."""
    groups, order = {}, []
    for entry in entries:
        rule = entry.get("rule")
        if rule not in groups:
            groups[rule] = []
            order.append(rule)
        groups[rule].append(entry)
    return [(groups[rule][0], groups[rule]) for rule in order]


# ------------------------------------------------------------------------------ host

def _header(audit, lines):
    facts = audit.get("facts") or {}
    host = audit.get("host") or "unknown host"
    hostname = _unwrap(_get(facts, "host", "hostname"))
    proxmox = _unwrap(_get(facts, "host", "proxmox"))
    gpus = _unwrap(facts.get("gpus")) or []
    kinds, order = {}, []
    for gpu in gpus if isinstance(gpus, list) else []:
        key = (_text(gpu.get("name")), _text(gpu.get("architecture")))
        if key not in kinds:
            kinds[key] = 0
            order.append(key)
        kinds[key] += 1
    gpu_text = ", ".join("%d x %s (%s)" % (kinds[key], key[0], key[1]) for key in order) or "none found"
    driver = _unwrap(facts.get("driver")) or {}
    driver_text = _text(driver.get("version"))
    if driver.get("flavor"):
        driver_text += " (%s)" % driver["flavor"]
    if driver.get("cuda_driver_version"):
        driver_text += ", CUDA %s" % driver["cuda_driver_version"]
    cpu = _unwrap(facts.get("cpu")) or {}
    numa = cpu.get("numa_nodes")
    cpu_text = "%s: %s, %s threads, %s" % (
        _text(cpu.get("model_name")), _plural(cpu["sockets"], "socket") if isinstance(cpu.get("sockets"), int) else "sockets unknown",
        _text(cpu.get("threads")), _plural(len(numa), "NUMA node") if isinstance(numa, list) else "NUMA nodes unknown")
    name = host if hostname in (None, host) else "%s (hostname %s)" % (host, hostname)
    if proxmox:
        name += ", Proxmox VE node"
    lines += [
        "# System improvement report: %s" % _md(host),
        "",
        "| | |",
        "|---|---|",
        "| Host | %s |" % _cell(name),
        "| Audited | %s |" % _cell(_text(audit.get("time"))),
        "| GPUs | %s |" % _cell(gpu_text),
        "| Driver | %s |" % _cell(driver_text),
        "| Kernel | %s |" % _cell(_text(_unwrap(_get(facts, "kernel", "release")))),
        "| CPU | %s |" % _cell(cpu_text),
        "| Virtualization | %s |" % _cell(_text(_unwrap(_get(facts, "host", "virtualization")))),
        "",
    ]


def _summary(audit, lines):
    counts = audit.get("counts") or {}
    findings = ", ".join("%d %s" % (counts.get(s, 0), s) for s in SEVERITIES)
    total = sum(counts.get(s, 0) for s in SEVERITIES)
    lines.append("**%s** (%s); %d already optimal, %d unknown, %d not applicable." % (
        _plural(total, "finding"), findings, counts.get("optimal", 0), counts.get("unknown", 0),
        counts.get("not_applicable", 0)))
    planned = audit.get("planned") or {}
    parts = []
    for phase, words in PHASES:
        modules = planned.get(phase) or {}
        records = sum(len(entry.get("records") or []) for entry in modules.values())
        parts.append("`%s` would make %s" % (words, _plural(records, "change")))
    reboot = any((entry or {}).get("reboot_required") for entry in (planned.get("reboot_required") or {}).values())
    lines.append("; ".join(parts) + (" and a reboot is pending." if reboot else "."))
    lines.append("")


NOW = {"optimal": "now optimal", "not_applicable": "no longer applies", "unknown": "now unknown",
       "gone": "rule no longer evaluated"}


def _since(audit, lines):
    """What moved since the previous audit (only when the role compared, key since)."""
    since = audit.get("since")
    if not isinstance(since, dict):
        return
    lines += ["## Since the previous audit", ""]
    if since.get("none"):
        lines += ["No comparison: %s." % _md(str(since.get("reason") or "no previous audit").rstrip(".")), ""]
        return
    fixed, new, still = since.get("fixed") or [], since.get("new") or [], since.get("still") or []
    lines += ["Previous audit %s: %d fixed, %d new, %d still open." % (
        _md(_text(since.get("previous_time"))), len(fixed), len(new), len(still)), ""]
    for word, entries in (("Fixed", fixed), ("New", new)):
        for entry in entries:
            lines.append("- %s %s: %s (%s)%s%s" % (
                word, _md(entry.get("severity")), _md(entry.get("title")), code(entry.get("rule")),
                ", %s" % _md(entry["item"]) if entry.get("item") else "",
                ", %s" % _md(NOW.get(entry.get("now"), entry.get("now"))) if word == "Fixed" else ""))
    if fixed or new:
        lines.append("")


def _findings(audit, lines):
    findings = audit.get("findings") or []
    lines += ["## Findings", ""]
    if not findings:
        lines += ["None.", ""]
        return
    for severity in SEVERITIES:
        mine = [f for f in findings if f.get("severity") == severity]
        if not mine:
            continue
        lines += ["### %s" % HEADINGS[severity], ""]
        for first, group in _by_rule(mine):
            lines += ["#### %s (%s)" % (_md(first.get("title")), code(first.get("rule"))), ""]
            for entry in group:
                item = entry.get("item")
                lines.append("- %s%s%s" % ("%s: " % _md(item) if item else "", _md(entry.get("message")),
                                           _action_text(entry)))
            lines += ["", _fix_line(first.get("fix") or {}), "", "Why: %s" % _md(first.get("rationale")), ""]


def _action_text(entry):
    """`` (action: reboot, blocking)`` after a health finding; nothing for the others."""
    if not entry.get("action"):
        return ""
    return " (action: %s%s)" % (code(entry["action"]), ", blocking" if entry.get("blocking") else "")


def _planned(audit, lines):
    planned = audit.get("planned") or {}
    lines += ["## Planned changes", "",
              "What each tag would change now, from the tuning modules' change records in check mode.", ""]
    for phase, words in PHASES:
        modules = planned.get(phase) or {}
        lines += ["### `%s`" % words, ""]
        rows = [(module, rec) for module, entry in modules.items() for rec in (entry.get("records") or [])]
        if rows:
            lines += ["| module | what | now | after |", "|---|---|---|---|"]
            for module, rec in rows:
                kind = rec.get("kind")
                lines.append("| %s | %s | %s | %s |" % (_cell(module), _cell(rec.get("target")),
                                                        _cell(_state(rec.get("before"), kind)),
                                                        _cell(_state(rec.get("after"), kind))))
            lines.append("")
        else:
            lines += ["Nothing to change.", ""]
        notes = []
        for module, entry in modules.items():
            module = _md(module)
            status = entry.get("status")
            if status in ("failed", "not_run"):
                notes.append("%s: could not plan: %s" % (module, _md(entry.get("msg"))))
            elif status == "skipped":
                notes.append("%s: skipped: %s" % (module, _md(entry.get("msg"))))
            for line in entry.get("pending") or []:
                waits = "a reboot" if entry.get("reboot_required") else "a reload or restart"
                notes.append("%s: waits for %s: %s" % (module, waits, _md(line)))
            if entry.get("restart_required") and not entry.get("pending"):
                who = entry.get("restart_required_for") or []
                notes.append("%s: %s before the change is live" % (
                    module, "a restart of %s is needed" % ", ".join(_md(w) for w in who) if who else "a restart is needed"))
            for key, why in sorted((entry.get("skipped_keys") or {}).items()):
                notes.append("%s: left out %s: %s" % (module, _md(key), _md(why)))
        if notes:
            lines += ["- %s" % " ".join(note.split()) for note in notes] + [""]


def _manual(audit, lines):
    manual = [f for f in audit.get("findings") or [] if (f.get("fix") or {}).get("class") == "manual"]
    lines += ["## Manual steps", ""]
    if not manual:
        lines += ["None.", ""]
        return
    for first, group in _by_rule(manual):
        items = [entry.get("item") for entry in group if entry.get("item")]
        lines += ["#### %s (%s, %s)" % (_md(first.get("title")), code(first.get("rule")), _md(first.get("severity"))), ""]
        if items:
            lines += ["For %s." % ", ".join(_md(item) for item in items), ""]
        lines += [_md(first["fix"].get("steps") or ""), ""]


def _grouped_list(entries, lines, detail, totals):
    for first, group in _by_rule(entries):
        text = detail(group, totals.get(first.get("rule"), len(group)))
        lines.append("- **%s** (%s): %s" % (_md(first.get("title")), code(first.get("rule")), text))
    lines.append("")


def _optimal_detail(group, total):
    texts = []
    for entry in group:
        text = _md(entry.get("ok") or "ok")
        if entry.get("item") and not entry.get("ok"):
            text = "%s ok" % _md(entry["item"])
        texts.append(text)
    if len(texts) > 1 and len(set(texts)) == 1:
        return "%s (%s)" % (texts[0], "all %d" % total if total == len(texts) else "%d of %d" % (len(texts), total))
    return "; ".join(texts)


def _unknown_detail(group, total):
    by_reason, order = {}, []
    for entry in group:
        reason = "; ".join(_md(r) for r in entry.get("reasons") or ["no reason given"])
        if reason not in by_reason:
            by_reason[reason] = []
            order.append(reason)
        if entry.get("item"):
            by_reason[reason].append(_md(entry["item"]))
    return "; ".join("%s%s" % ("%s: " % ", ".join(by_reason[r]) if by_reason[r] else "", r) for r in order)


def _na_detail(group, total):
    items = [_md(entry["item"]) for entry in group if entry.get("item")]
    if items:
        return "; ".join(items)
    return "nothing to check here" if any(entry.get("why") for entry in group) else "does not apply here"


def _totals(audit):
    """Items per rule across every list: what "all" means in the optimal list."""
    totals = {}
    for key in ("findings", "optimal", "unknown", "not_applicable"):
        for entry in audit.get(key) or []:
            totals[entry.get("rule")] = totals.get(entry.get("rule"), 0) + 1
    return totals


def host_report(audit):
    totals = _totals(audit)
    lines = []
    _header(audit, lines)
    _summary(audit, lines)
    if "profile" in audit:
        lines += profile_report.lines(audit["profile"], audit.get("planned"))
    _since(audit, lines)
    _findings(audit, lines)
    _planned(audit, lines)
    _manual(audit, lines)
    lines += ["## Already optimal", ""]
    if audit.get("optimal"):
        _grouped_list(audit["optimal"], lines, _optimal_detail, totals)
    else:
        lines += ["Nothing.", ""]
    lines += ["## Unknown", "", "Rules that could not be decided because a fact they read is unknown; never counted as findings.", ""]
    if audit.get("unknown"):
        _grouped_list(audit["unknown"], lines, _unknown_detail, totals)
    else:
        lines += ["None.", ""]
    lines += ["## Not applicable", ""]
    if audit.get("not_applicable"):
        _grouped_list(audit["not_applicable"], lines, _na_detail, totals)
    else:
        lines += ["None.", ""]
    rules = audit.get("rules") or {}
    tail = "%s evaluated" % _plural(len(rules.get("ids") or []), "rule")
    for key, words in (("disabled", "disabled"), ("overridden", "overridden"), ("added", "added")):
        if rules.get(key):
            tail += "; %s: %s" % (words, ", ".join(_md(rule) for rule in rules[key]))
    lines += ["---", "", "gpufleet.tuning.audit: %s. The audit changes nothing on the node." % tail]
    return "\n".join(lines).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------ fleet

def _where(finding):
    """The hosts of one finding of the fleet, with their item counts."""
    return ", ".join("%s (%s)" % (_cell(h["host"]), _plural(len(h["items"]), "item")) if h["items"] else _cell(h["host"])
                     for h in finding.get("hosts") or [])


def _report_link(host):
    """The URL of the host's system-improve.md, relative to fleet-audit.md: its folder name
    (audit_fleet's ``report``, checked to be an artifact_dir folder and REPORT; else encoded
    here from the host's name) percent-encoded, or None. Never any other text of the record."""
    match = _REPORT_PATH.match(host.get("report") or "") if isinstance(host.get("report"), str) else None
    folder = match.group(1) if match else None
    if folder is None or folder in (".", ".."):
        try:
            folder = encode(host.get("host"))
        except AnsibleFilterError:
            return None
    return "%s/%s" % (quote(folder, safe=""), REPORT)


def fleet_report(fleet):
    hosts = fleet.get("hosts") or []
    lines = ["# Fleet audit", ""]
    if fleet.get("first"):
        span = _md(fleet["first"]) if fleet["first"] == fleet.get("last") else "%s to %s" % (
            _md(fleet["first"]), _md(fleet.get("last")))
        lines += ["%s audited, %s, by gpufleet.tuning.audit." % (_plural(len(hosts), "host"), span), ""]
    else:
        lines += ["%s audited by gpufleet.tuning.audit." % _plural(len(hosts), "host"), ""]
    lines += ["## Hosts, worst first", ""]
    if hosts:
        lines += ["| host | worst | H | P0 | P1 | P2 | unknown | runtime changes | reboot_required changes | report |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for host in hosts:
            counts = host.get("counts") or {}
            planned = host.get("planned") or {}
            link = _report_link(host)
            lines.append("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %s |" % (
                _cell(host["host"]), _cell(host.get("worst") or "none"), counts.get("H", 0), counts.get("P0", 0),
                counts.get("P1", 0),
                counts.get("P2", 0), counts.get("unknown", 0), planned.get("runtime", 0),
                planned.get("reboot_required", 0), "[%s](%s)" % (REPORT, link) if link else "-"))
        lines.append("")
    else:
        lines += ["No host was audited.", ""]
    lines += ["## Findings across the fleet", ""]
    findings = fleet.get("findings") or []
    if not findings:
        lines += ["None.", ""]
    for severity in SEVERITIES:
        mine = [f for f in findings if f.get("severity") == severity]
        if not mine:
            continue
        lines += ["### %s" % HEADINGS[severity], "", "| finding | fix | hosts |", "|---|---|---|"]
        for finding in mine:
            fix = finding.get("fix") or {}
            fix_text = "by hand" if fix.get("class") == "manual" else "%s (%s)" % (
                code("--tags %s" % fix.get("tag"), cell=True), _cell(fix.get("module")))
            lines.append("| %s (%s) | %s | %s |" % (_cell(finding.get("title")), code(finding.get("rule"), cell=True),
                                                    fix_text, _where(finding)))
        lines.append("")
    unknown = fleet.get("unknown") or []
    if unknown:
        lines += ["## Unknown across the fleet", "", "| rule | hosts |", "|---|---|"]
        for entry in unknown:
            lines.append("| %s (%s) | %s |" % (_cell(entry.get("title")), code(entry.get("rule"), cell=True), _where(entry)))
        lines.append("")
    lines += ["---", "", "Each host's report says what was measured, the fix, and why."]
    return "\n".join(lines).rstrip("\n") + "\n"


def audit_report(data, kind="host"):
    if not isinstance(data, dict):
        raise AnsibleFilterError("audit_report expects a dict (a host's audit or the fleet summary), got %s"
                                 % type(data).__name__)
    if kind == "host":
        return host_report(data)
    if kind == "fleet":
        return fleet_report(data)
    raise AnsibleFilterError("audit_report: kind must be host or fleet, got %r" % (kind,))
