# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet page: one self-contained HTML file from the model report/collect.py makes.

What people look at after a tune or rollout run, in the order they ask: the fleet's health
first (hosts healthy, degraded, quarantined for their hardware, from each host's health.json,
the quarantined ones named with their actions); is each node normal (each host against its
profile's expectations and the hosts of its profile, from each host's normal.json with the peers
worked out again over the whole fleet; per profile the hosts not normal, each with its figure and
the reference it is held against); which hosts need a look and why; the findings
grid (hosts x findings, coloured by severity, H its own colour, each cell a link to that finding
in the host's system-improve.md); the rollout (canary, batches, quarantined hosts, failures,
reverts, hosts not touched); what drifted since the previous run; then each host, its health
line first and its profile's verdict (normal, not normal, not judged) after it: its P2P matrices
as heatmaps against the floor each pair was judged by, its benchmark before and after the tuning
with the noise band and the efficiency against the ceiling, and its serving experiments (the
launch flags tried one at a time, each kept or rolled back).

One file, nothing fetched: the stylesheet is inline, the charts are inline SVG (charts.py), and
there is no script at all (sections fold with ``<details>``), so the page opens from a file
share, a CI artifact or a mail attachment, and a Content-Security-Policy that allows nothing
else makes sure of it. Wide parts (the grid, the matrices, the timeline, the tables) scroll in
their own boxes, so the page itself never scrolls sideways, on a phone neither.

Every text of the model comes from records on the controller that node output filled, so it is
data, never markup: render() first cleans every string of the model (node_text: no control or
bidi character, bounded length), and each value is placed with html.escape(quote=True), in
text and in double-quoted attributes alike; a class or an id is never a value (a severity
outside H and P0-P2 is the "unknown" class, a health status outside healthy, degraded and
quarantined the neutral "hs-unk", an experiment's status outside the known ones a plain badge,
a node's verdict one of three fixed badges, an id is collect's ``host-N`` kept to [A-Za-z0-9_-]). A
link is either a fragment of this page or one of the collection's own relative paths: a host's
folder (the artifacts folder's entry, artifact_dir's encoding) and a fixed file name, or a
rollout-<run id>.md beside the page, each URL-quoted; no value goes into a <script>, <style> or
<meta> (there is no script at all) or an event attribute. The page has no clock: the same model
gives the same bytes (the action plugin leaves an unchanged page alone).
"""

from __future__ import annotations

import re
from html import escape
from urllib.parse import quote

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import node_text
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.experiments_report import divergence_text, flag_text
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import anchors
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import charts
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report.collect import BENCH_PANELS, MATRICES, needs_a_look

TITLE = "GPU fleet report"
SEVERITY_WORDS = {"H": "H: health, the hardware or the driver needs an action",
                  "P0": "P0: high impact, fixable now", "P1": "P1: needs a reboot or a bigger change",
                  "P2": "P2: minor"}
# A health verdict's status: its badge's class (anything else is hs-unk, never the record's word).
HEALTH_CLASS = {"healthy": "hs-healthy", "degraded": "hs-degraded", "quarantined": "hs-quarantined"}
HEALTH_PHASES = {"before": "before the tuning", "after_reboot": "after the reboot",
                 "after_failure": "again after a failure", "audit": "by the audit"}
PANEL_TITLES = {"decode": "Decode tokens/s per stream", "ttft": "Time to first token (one stream)",
                "itl": "Inter-token latency (one stream)"}
FIGURE_LABELS = {"decode_tokens_per_s": "decode tokens/s", "output_tokens_per_s": "output tokens/s",
                 "ttft_ms.p50": "TTFT p50", "ttft_ms.p90": "TTFT p90", "ttft_ms.p99": "TTFT p99",
                 "itl_ms.p50": "ITL p50", "itl_ms.p90": "ITL p90", "itl_ms.p99": "ITL p99"}
# A serving experiment's status: (its words, its badge's class).
EXPERIMENT_BADGES = {"kept": ("kept", "b-ok"), "rolled_back": ("rolled back", ""),
                     "rejected_accuracy": ("rejected on accuracy", "b-warn"), "failed_start": ("failed to start", "b-bad"),
                     "failed": ("failed", "b-bad"), "skipped": ("skipped", "")}
# Is this node normal: a host's status (collect.NORMAL_STATUSES) -> (its words, its badge's class).
NORMAL_BADGES = {"normal": ("normal", "b-ok"), "not_normal": ("not normal", "b-bad"), "not_judged": ("not judged", "")}
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
LIST_LIMIT = 12
_NOT_ID = re.compile(r"[^A-Za-z0-9_-]")

CSS = """
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa;
overflow-wrap:anywhere}
header,main,footer{max-width:1400px;margin:0 auto;padding:0 16px}
header{padding-top:16px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:28px 0 8px;padding-top:4px;border-top:1px solid #d0d7de}
h3{font-size:15px;margin:16px 0 6px}
a{color:#0b57d0}
nav a{margin-right:12px}
.muted{color:#59636e}
.box{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px 12px;margin:8px 0}
.scroll{overflow-x:auto;max-width:100%}
.tiles{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}
.tile{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;min-width:110px}
.tile b{display:block;font-size:20px}
.badge{display:inline-block;border-radius:10px;padding:0 7px;margin:1px 2px;font-size:12px;font-weight:600;
background:#eaeef2;color:#1f2328;white-space:nowrap}
.b-H,.s-H{background:#6a1b9a;color:#fff}
.b-P0,.s-P0{background:#c62828;color:#fff}.b-P1,.s-P1{background:#ef6c00;color:#fff}
.b-P2,.s-P2{background:#f9d77e;color:#3b2f00}.b-unk,.s-unk{background:#cfd6de;color:#1f2328}
.hs-healthy{background:#1e8e3e;color:#fff}.hs-degraded{background:#f9a825;color:#3b2f00}
.hs-quarantined{background:#c62828;color:#fff}.hs-unk{background:#cfd6de;color:#1f2328}
.health-host{margin:4px 0 8px}.health-host ul{margin:2px 0}
.normal-host{margin:4px 0 8px}.normal-host ul{margin:2px 0}
.b-bad{background:#c62828;color:#fff}.b-warn{background:#ef6c00;color:#fff}.b-ok{background:#1e8e3e;color:#fff}
table{border-collapse:collapse;background:#fff;overflow-wrap:normal}
th,td{border:1px solid #d8dee4;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f3f6;font-weight:600}
td.n,table.pairs td:nth-child(n+3):nth-child(-n+5){text-align:right;font-variant-numeric:tabular-nums}
table.pairs td:first-child{white-space:nowrap}
table.grid{font-size:12px}
table.grid th,table.grid td{overflow-wrap:normal}
table.grid th.r{writing-mode:vertical-rl;transform:rotate(180deg);height:190px;padding:6px 2px;line-height:1.15;
font-weight:500;text-align:left}
table.grid td.f{text-align:center;padding:0;min-width:30px}
table.grid td.f a{display:block;padding:3px 2px;color:inherit;text-decoration:none;font-weight:600}
table.grid td.f a:hover{outline:2px solid #1f2328}
table.grid .h{position:sticky;left:0;background:#fff;z-index:1;white-space:nowrap;max-width:220px;overflow:hidden;
text-overflow:ellipsis}
table.grid th.h{background:#f0f3f6}
details{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:8px 0}
details>summary{cursor:pointer;padding:8px 12px;font-weight:600}
details>.in{padding:0 12px 12px}
details details{border-color:#e3e8ee}
.charts{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
svg{max-width:100%;height:auto;font:11px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
svg .t{font-weight:600;font-size:12px}
svg .ax{fill:#59636e}
svg.hm g rect{width:52px;height:26px;stroke:#fff;stroke-width:1}
svg.hm rect.diag{fill:#d0d7de}
svg.hm rect.none{fill:#eef1f4}
svg.hm rect.short{stroke:#5c0011;stroke-width:3}
svg.hm g text{text-anchor:middle;fill:#1f2328}
svg.hm g text.w{fill:#fff}
svg.hm text.ax{text-anchor:middle}
svg.hm g text.ax{text-anchor:end}
svg .corner{fill:#59636e;font-size:10px}
svg .grid{stroke:#e3e8ee}
svg .axis{stroke:#8c959f}
svg .bar.before{fill:#9aa4af}
svg .bar.after{fill:#1a56aa}
svg .band{fill:#f4b400;fill-opacity:.28}
svg .whisker{stroke:#1f2328;stroke-width:1;fill:none}
svg .d{font-weight:600}
svg .v-better{fill:#1e8e3e}svg .v-worse{fill:#c62828}svg .v-same{fill:#59636e}
svg .track{fill:#eaeef2}
svg .tickmark{stroke:#1f2328;stroke-width:2}
svg .box{fill:#fff;stroke-width:2}
svg .box.ok{stroke:#1e8e3e}svg .box.bad{stroke:#c62828}svg .box.notrun{stroke:#8c959f;stroke-dasharray:4 3}
svg .sq{stroke:#fff}
svg .st-tuned,.chip.st-tuned{fill:#1e8e3e;background:#1e8e3e;color:#fff}
svg .st-unchanged,.chip.st-unchanged{fill:#7cb88f;background:#7cb88f;color:#0b2912}
svg .st-quarantined,.chip.st-quarantined{fill:#6a1b9a;background:#6a1b9a;color:#fff}
svg .st-failed,.chip.st-failed{fill:#c62828;background:#c62828;color:#fff}
svg .st-unreachable,.chip.st-unreachable{fill:#ef6c00;background:#ef6c00;color:#fff}
svg .st-untouched,.chip.st-untouched{fill:#d0d7de;background:#d0d7de;color:#1f2328}
svg .rev{stroke:#fff;stroke-width:2}
svg .stop{stroke:#c62828;stroke-width:3}
svg .stoptext{fill:#c62828;font-weight:600}
svg .arrow{stroke:#8c959f;stroke-width:2}
.chip{display:inline-block;border-radius:4px;padding:1px 6px;margin:2px;font-size:12px}
.chip a{color:inherit}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin:0 3px 0 8px}
.sw.before{background:#9aa4af}.sw.after{background:#1a56aa}.sw.band{background:#f4b400;opacity:.5}
.sw.short{background:#fff;border:3px solid #5c0011}.sw.above{background:#3ea45e}.sw.below{background:#e0584f}
.sw.neutral{background:#6f93cf}
ul{margin:4px 0;padding-left:20px}
.short-row td{background:#fdecea}
.kept-row td{background:#e6f4ea}
table.exp td.why{min-width:240px}
table.exp td.n,table.exp code{white-space:nowrap}
table.exp td.acc{min-width:170px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f0f3f6;border-radius:3px;padding:0 3px}
@media (max-width:600px){body{font-size:13px}header,main,footer{padding:0 8px}.tile{min-width:90px}}
"""


def _e(text):
    return escape("" if text is None else str(text), quote=True)


def _id(value):
    """An element id (and the fragment that links to it): letters, digits, ``-`` and ``_`` only."""
    return _NOT_ID.sub("", "" if value is None else str(value))


def _sev(severity):
    """The class suffix of a severity: H, P0, P1, P2 or unk, never the record's text."""
    return severity if severity in SEVERITY_WORDS else "unk"


def _health_badge(status):
    """A health status's badge: coloured for healthy, degraded, quarantined; neutral otherwise."""
    return '<span class="badge %s">%s</span>' % (HEALTH_CLASS.get(status, "hs-unk"), _e(status))


def _count(value):
    """A count from a record: an integer, else 0 (a damaged record does not stop the page)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _plural(count, word, words=None):
    return "%d %s" % (count, word if count == 1 else (words or word + "s"))


def host_href(host, name):
    """A link to file ``name`` in the host's folder, or None when the host has no folder."""
    if not host.get("folder"):
        return None
    return "%s/%s" % (quote(host["folder"], safe=""), quote(name, safe=""))


def _badges(words):
    out = []
    for word in words:
        cls = "b-bad" if word.startswith(("rollout", "P2P short", "benchmark", "verify", "quarantined", "not normal")) else \
            "b-warn" if word in ("drift", "P2P regression", "health degraded") else \
            "b-P0" if word == "P0 findings" else "b-H" if word == "H findings" else ""
        out.append('<span class="badge %s">%s</span>' % (cls, _e(word)))
    return "".join(out)


def _list(items, limit=LIST_LIMIT):
    items = list(items)
    if not items:
        return ""
    shown = "".join("<li>%s</li>" % _e(i) for i in items[:limit])
    if len(items) > limit:
        rest = "".join("<li>%s</li>" % _e(i) for i in items[limit:])
        shown += "<li><details><summary>%d more</summary><ul>%s</ul></details></li>" % (len(items) - limit, rest)
    return "<ul>%s</ul>" % shown


# ------------------------------------------------------------------------------ sections

def _health_entry(entry):
    """One host of the fleet's health summary: its link, its badge, its actions."""
    words = "%s%s" % (", ".join(entry.get("actions") or []) or "no action named",
                      "; tuned anyway (gpufleet_health_policy %s)" % (entry.get("policy") or "report")
                      if entry.get("tuned_anyway") else "")
    if entry.get("phase"):
        words += "; judged %s" % HEALTH_PHASES.get(entry["phase"], entry["phase"])
    return '<li data-host="%s"><a href="#%s">%s</a> %s %s</li>' % (
        _e(entry["name"]), _id(entry.get("id")), _e(entry["name"]), _health_badge(entry["status"]), _e(words))


def _health(model):
    """The fleet's health, first on the page: hosts per health status, the quarantined ones named
    with their actions (not tuned, not benchmarked, never reverted), then the degraded ones."""
    summary = model.get("health") or {}
    counts = summary.get("counts") or {}
    out = ['<section id="health"><h2>Health</h2>']
    if not summary.get("judged"):
        out.append('<p class="box muted" id="health-none">No health.json in the artifacts folder: the health gate '
                   'has not judged these hosts.</p></section>')
        return "".join(out)
    out.append('<div class="tiles">')
    for status in ("quarantined", "degraded", "healthy"):
        out.append('<div class="tile" data-tile="health %s"><b>%d</b>%s</div>' % (
            status, _count(counts.get(status)), _health_badge(status)))
    if _count(counts.get("other")):
        out.append('<div class="tile" data-tile="health other"><b>%d</b>%s</div>' % (
            _count(counts["other"]), _health_badge("another status")))
    if _count(counts.get("not_judged")):
        out.append('<div class="tile" data-tile="health not judged"><b>%d</b>not judged</div>'
                   % _count(counts["not_judged"]))
    out.append("</div>")
    for key, head in (("quarantined", "Quarantined for their hardware: not tuned, not benchmarked, never reverted"),
                      ("degraded", "Degraded: findings that do not block"), ("other", "Another status")):
        if summary.get(key):
            out.append('<div class="box" id="health-%s"><b>%s</b><ul>%s</ul></div>' % (
                key, head, "".join(_health_entry(entry) for entry in summary[key])))
    if not summary.get("quarantined") and not summary.get("degraded") and not summary.get("other"):
        out.append('<p class="box" id="health-quarantined">No host quarantined or degraded.</p>')
    out.append("</section>")
    return "".join(out)


def _normal_badge(status):
    """A node's verdict as a badge: normal, not normal or not judged (never the record's word)."""
    words, cls = NORMAL_BADGES.get(status, NORMAL_BADGES["not_judged"])
    return '<span class="badge%s">%s</span>' % (" " + cls if cls else "", _e(words))


def _profile_label(name):
    return name if name else "no profile recorded"


def _normal(model):
    """Is this node normal? Hosts per verdict, then per profile how many are normal, not normal,
    not judged, the hosts not normal named with each line (an expectation outside, an outlier
    with its figure against the peers' median) and the hosts not judged with why."""
    summary = model.get("normal") or {}
    counts = summary.get("counts") or {}
    out = ['<section id="normal"><h2>Is this node normal?</h2>',
           '<p class="muted">Each host against its profile\'s expectations (the GPU count, the NVLinks, the memory '
           'bandwidth, the P2P floors, the decode efficiency band) and against the hosts of the same profile (its '
           'peers: a figure more MADs from their median than the host\'s normal.json allows). The peers are worked '
           'out again here over every host with a normal.json: each was written when its host was judged, with only '
           'the hosts judged before it.</p>']
    if not summary.get("records"):
        out.append('<p class="box muted" id="normal-none">No normal.json in the artifacts folder: no host has been '
                   'held against its profile and its peers (gpufleet.tuning.node_normal).</p></section>')
        return "".join(out)
    out.append('<div class="tiles">')
    for status in ("not_normal", "normal", "not_judged"):
        out.append('<div class="tile" data-tile="normal %s"><b>%d</b>%s</div>' % (
            _e(NORMAL_BADGES[status][0]), _count(counts.get(status)), _normal_badge(status)))
    out.append("</div>")
    for number, group in enumerate(summary.get("profiles") or [], 1):
        group_counts = group.get("counts") or {}
        head = "%s: %s normal, %s not normal, %s not judged" % (
            _plural(len(group.get("hosts") or []), "host"), _count(group_counts.get("normal")),
            _count(group_counts.get("not_normal")), _count(group_counts.get("not_judged")))
        out.append('<div class="box normal-profile" id="normal-profile-%d" data-profile="%s"><b>Profile %s</b> '
                   '<span class="muted">%s</span>' % (number, _e(group.get("profile") or ""),
                                                      _e(_profile_label(group.get("profile"))), _e(head)))
        if group.get("not_normal"):
            out.append("<ul>")
            for entry in group["not_normal"]:
                out.append('<li data-host="%s"><a href="#%s">%s</a> %s%s</li>' % (
                    _e(entry["name"]), _id(entry.get("id")), _e(entry["name"]), _normal_badge("not_normal"),
                    _list(entry.get("lines") or [])))
            out.append("</ul>")
        elif _count(group_counts.get("normal")):
            out.append('<p class="muted">Every host judged is normal against its profile and its peers.</p>')
        if group.get("not_judged"):
            out.append('<p class="muted normal-unjudged">Not judged: %s.</p>' % "; ".join(
                '<a href="#%s">%s</a> (%s)' % (_id(entry.get("id")), _e(entry["name"]), _e(entry.get("why")))
                for entry in group["not_judged"]))
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def _summary(model):
    hosts = model["hosts"]
    audited = [h for h in hosts if h.get("audit")]
    worst = {}
    for host in audited:
        worst[host["audit"].get("worst")] = worst.get(host["audit"].get("worst"), 0) + 1
    short = [h for h in hosts if (h.get("p2p") or {}).get("short")]
    drift = [h for h in hosts if "drift" in h["attention"]]
    gate = [h for h in hosts if "benchmark gate failed" in h["attention"]]
    rollout = model.get("rollout")
    with_p0 = sum(1 for h in audited if _count((h["audit"].get("counts") or {}).get("P0")))  # worst may be H
    tiles = [("hosts", len(hosts)), ("with P0 findings", with_p0),
             ("P2P measured", sum(1 for h in hosts if (h.get("p2p") or {}).get("status") == "measured")),
             ("P2P short", len(short)), ("drifted", len(drift)),
             ("benchmarked", sum(1 for h in hosts if h.get("benchmark"))), ("benchmark gate failed", len(gate)),
             ("with serving experiments", sum(1 for h in hosts if h.get("experiments"))),
             ("experiment changes kept", sum(_count(((h.get("experiments") or {}).get("counts") or {}).get("kept"))
                                             for h in hosts))]
    if rollout:
        tiles.append(("rollout", rollout["status"]))
    out = ['<section id="summary"><div class="tiles">']
    for label, value in tiles:
        out.append('<div class="tile" data-tile="%s"><b>%s</b>%s</div>' % (_e(label), _e(value), _e(label)))
    out.append("</div>")
    needing = [h for h in hosts if needs_a_look(h)]
    if needing:
        out.append('<div class="box" id="attention"><b>Needs a look</b><ul>')
        for host in needing:
            out.append('<li><a href="#%s">%s</a> %s</li>' % (_id(host["id"]), _e(host["name"]), _badges(host["attention"])))
        out.append("</ul></div>")
    else:
        out.append('<p class="box" id="attention">Nothing needs a look: no rollout failure, drift, P2P shortfall, '
                   'benchmark regression or host not normal (the findings are in the grid below).</p>')
    out.append("</section>")
    return "".join(out)


def _grid(model):
    columns = model["columns"]
    hosts = model["hosts"]
    out = ['<section id="findings"><h2>Findings</h2>',
           '<p class="muted">Hosts x findings of their last audit, coloured by severity '
           '(<span class="badge s-H">H</span> health: the hardware or the driver needs an action; '
           '<span class="badge s-P0">P0</span> high impact, fixable now; <span class="badge s-P1">P1</span> needs '
           'a reboot or a bigger change; <span class="badge s-P2">P2</span> minor; <span class="badge s-unk">?</span> '
           'could not be told). A cell opens that finding in the host\'s system-improve.md; a number is how many '
           'items (GPUs, containers) have it.</p>']
    if not columns:
        out.append('<p class="box">No finding on any audited host%s.</p></section>' % (
            "" if any(h.get("audit") for h in hosts) else " (no audit.json found)"))
        return "".join(out)
    out.append('<div class="scroll"><table class="grid"><thead><tr><th class="h">host</th><th>worst</th>')
    for column in columns:
        out.append('<th class="r" data-rule="%s" title="%s (%s)%s">%s</th>' % (
            _e(column["rule"]), _e(column["title"]), _e(column["rule"]),
            _e(", %s on %s" % (column["severity"], _plural(_count(column["count"]), "host")) if column["severity"] else ", unknown"),
            _e(column["title"])))
    out.append("</tr></thead><tbody>")
    for host in hosts:
        audit = host.get("audit")
        out.append('<tr data-host="%s"><td class="h"><a href="#%s">%s</a></td>' % (
            _e(host["name"]), _id(host["id"]), _e(host["name"])))
        if not audit:
            out.append('<td colspan="%d" class="muted">no audit.json</td></tr>' % (len(columns) + 1))
            continue
        worst = audit.get("worst")
        out.append("<td>%s</td>" % ('<span class="badge b-%s">%s</span>' % (_sev(worst), _e(worst)) if worst else "none"))
        by_rule = {}
        for entry in audit.get("findings") or []:
            by_rule.setdefault(entry["rule"], []).append(entry)
        unknown = {}
        for entry in audit.get("unknown") or []:
            unknown.setdefault(entry["rule"], []).append(entry)
        report = host_href(host, "system-improve.md") if audit.get("report") else None
        for column in columns:
            rule = column["rule"]
            if rule in by_rule:
                entries = by_rule[rule]
                severity = entries[0].get("severity") or "P2"
                anchor = anchors.finding_anchor(audit.get("anchors"), rule, severity)
                tip = "%s (%s), %s: %s" % (entries[0]["title"], rule, severity, "; ".join(
                    ("%s: %s" % (e["item"], e["message"]) if e.get("item") else e["message"]) for e in entries[:4]))
                if len(entries) > 4:
                    tip += "; and %d more" % (len(entries) - 4)
                label = severity + ("\u00b7%d" % len(entries) if len(entries) > 1 else "")
                cls = "s-%s" % severity if severity in SEVERITY_WORDS else "s-unk"
                out.append(_cell(cls, report, anchor, tip, label, rule))
            elif rule in unknown:
                entries = unknown[rule]
                anchor = ((audit.get("anchors") or {}).get("sections") or {}).get("unknown")
                tip = "%s (%s): could not be told: %s" % (entries[0]["title"], rule, "; ".join(
                    r for e in entries[:2] for r in e.get("reasons") or ["no reason given"])[:300])
                out.append(_cell("s-unk", report, anchor, tip, "?", rule))
            else:
                out.append("<td></td>")
        out.append("</tr>")
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _cell(cls, report, anchor, tip, label, rule):
    if report and anchor:
        inner = '<a href="%s#%s" title="%s">%s</a>' % (report, quote(anchor, safe="-_"), _e(tip), _e(label))
    else:
        inner = '<a title="%s (no system-improve.md to open)">%s</a>' % (_e(tip), _e(label))
    return '<td class="f %s" data-rule="%s">%s</td>' % (cls, _e(rule), inner)


def _rollout(model):
    rollout = model.get("rollout")
    out = ['<section id="rollout"><h2>Rollout</h2>']
    if not rollout:
        out.append('<p class="box">No rollout-&lt;run id&gt;.json in the artifacts folder: this fleet was not rolled '
                   'out with playbooks/rollout.yml.</p></section>')
        return "".join(out)
    bad = rollout["status"] != "completed"
    out.append('<p class="box"><span class="badge %s">%s</span> <b>%s</b><br><span class="muted">run %s%s%s; canary %s, '
               'serial %s, revert on failure %s%s</span>%s</p>' % (
                   "b-bad" if bad else "b-ok", _e(rollout["status"]), _e(rollout["verdict"]), _e(rollout["run_id"]),
                   ", started %s" % _e(rollout["started"]) if rollout.get("started") else "",
                   ", finished %s" % _e(rollout["finished"]) if rollout.get("finished") else "",
                   _e(rollout.get("canary")), _e(rollout.get("serial")), "yes" if rollout.get("revert_on_failure") else "no",
                   "; check mode" if rollout.get("check_mode") else "",
                   ' <a href="%s">%s</a>' % (quote(rollout["file"][:-5] + ".md", safe=""), _e(rollout["file"][:-5] + ".md"))
                   if rollout.get("file") else ""))
    out.append('<div class="scroll" id="rollout-timeline">%s</div>' % charts.timeline(rollout))
    chips = "".join('<span class="chip %s">%s</span>' % (charts.STATUS_CLASS[s], s)
                    for s in ("tuned", "unchanged", "quarantined", "failed", "unreachable", "untouched"))
    out.append('<p class="muted">%s A cross on a square: reverted.</p>' % chips)
    out.append('<div class="scroll"><table id="rollout-batches"><thead><tr><th>batch</th><th>hosts</th><th>outcome</th>'
               '</tr></thead><tbody>')
    hosts = rollout["hosts"]
    ids = dict((h["name"], h["id"]) for h in model["hosts"])
    for batch in rollout["batches"]:
        chips = "".join(_chip(name, hosts.get(name, {}), ids) for name in batch["hosts"])
        out.append('<tr data-batch="%d"><td>%d%s</td><td>%s</td><td>%s</td></tr>' % (
            batch["batch"], batch["batch"], " (canary)" if batch["canary"] else "", chips, _e(batch["outcome"])))
    if rollout["outside"]:
        out.append("<tr><td>after their hosts</td><td>%s</td><td></td></tr>" % "".join(
            _chip(name, hosts.get(name, {}), ids) for name in rollout["outside"]))
    out.append("</tbody></table></div>")
    sick = [(n, h) for n, h in sorted(hosts.items()) if h["status"] == "quarantined"]
    if sick:
        out.append('<h3>Quarantined for their hardware</h3><div class="scroll"><table id="rollout-quarantined"><thead><tr>'
                   '<th>host</th><th>batch</th><th>when</th><th>actions</th><th>findings</th><th>revert</th></tr></thead>'
                   '<tbody>')
        for name, host in sick:
            health = host.get("health") or {}
            after = host.get("failed_check") not in (None, "health") or bool(host.get("failure"))
            failure = host.get("failure") or {}
            step = host.get("failed_check") or failure.get("stage") or failure.get("task") or "a step"
            when = "after failing %s" % step if after else "before the tuning"
            out.append('<tr data-host="%s"><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>'
                       '<td>%s</td></tr>' % (
                           _e(name), _id(ids.get(name)), _e(name), _e(host.get("batch") or ""), _e(when),
                           _e(", ".join(health.get("actions") or []) or "none named"),
                           _list(("%s: %s" % (f["item"], f["message"]) if f.get("item") else f["message"])
                                 for f in health.get("findings") or []),
                           _e("not reverted: the tuning is kept for the repair (%s)" % _plural(host["changes"], "change")
                              if host["changes"] else "nothing changed")))
        out.append("</tbody></table></div>")
    failing = [(n, h) for n, h in sorted(hosts.items()) if h["status"] in ("failed", "unreachable")]
    if failing:
        out.append('<h3>Failures and reverts</h3><div class="scroll"><table id="rollout-failures"><thead><tr><th>host</th>'
                   '<th>status</th><th>where</th><th>message</th><th>revert</th></tr></thead><tbody>')
        for name, host in failing:
            failure = host.get("failure") or {}
            revert = ("reverted, %s restored" % _plural(host["restored"], "item") if host["reverted"] else "not reverted")
            if host["revert_failed"]:
                revert += "; could not restore %s" % ", ".join(host["revert_failed"])
            if host["pending_reboot"]:
                revert += "; waits for a reboot: %s" % ", ".join(host["pending_reboot"])
            out.append('<tr data-host="%s"><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
                _e(name), _id(ids.get(name)), _e(name), _e(host["status"]),
                _e(host.get("failed_check") or failure.get("stage") or failure.get("task") or ""),
                _e(failure.get("message") or "; ".join(host["verify_failures"][:3])), _e(revert)))
        out.append("</tbody></table></div>")
    untouched = [n for n, h in hosts.items() if h["status"] == "untouched"]
    if untouched:
        not_run = [str(b["batch"]) for b in rollout["batches"] if not b["ran"]]
        why = "not reached"
        if rollout.get("stopped_after_batch"):
            why = "the rollout stopped after batch %d%s" % (
                rollout["stopped_after_batch"], ": %s" % rollout["stop_reason"] if rollout.get("stop_reason") else "")
        out.append('<p id="rollout-untouched">%s not touched%s: %s.</p>' % (
            _plural(len(untouched), "host"), " (batches %s)" % ", ".join(not_run) if not_run else "", _e(why)))
    if model.get("older_rollouts"):
        out.append("<details><summary>Earlier rollouts (%d)</summary><div class=\"in\"><ul>" % len(model["older_rollouts"]))
        for older in model["older_rollouts"]:
            link = older.get("file") or ""
            out.append('<li><a href="%s">%s</a>: %s</li>' % (
                quote(link[:-5] + ".md", safe=""), _e(older.get("run_id")), _e(older.get("verdict") or older.get("status") or "")))
        out.append("</ul></div></details>")
    out.append("</section>")
    return "".join(out)


def _chip(name, host, ids):
    status = host.get("status", "untouched")
    mark = " \u21ba" if host.get("reverted") else ""
    target = ids.get(name)
    label = _e(name) + mark
    inner = '<a href="#%s">%s</a>' % (_id(target), label) if target else label
    return '<span class="chip %s" title="%s" data-host="%s">%s</span>' % (
        charts.STATUS_CLASS.get(status, "st-untouched"), _e("%s: %s%s" % (name, status, ", reverted" if mark else "")),
        _e(name), inner)


def _drift_value(value):
    if isinstance(value, dict):
        if "sha256" in value:
            return "file sha256 %s" % str(value["sha256"])[:12]
        if "link" in value:
            return "link to %s" % value["link"]
    return "absent" if value is None else value


def _drift(model):
    out = ['<section id="drift"><h2>Drift since the previous run</h2>',
           '<p class="muted">Settings this collection set that no longer hold (the verify role\'s recorded drift, '
           'verify.json and fleet-drift.json), settings not as configured (the read-back), P2P against the previous run, '
           'and what each audit found fixed or new since the previous audit.</p>']
    rows, readback, p2p, since = [], [], [], []
    for host in model["hosts"]:
        for item in host.get("drift") or []:
            rows.append((host, item))
        verify = host.get("verify") or {}
        if verify.get("readback_drift"):
            readback.append((host, verify["readback_drift"]))
        if verify.get("comparison", {}).get("regressions"):
            p2p.append((host, verify["comparison"]["regressions"]))
        audit = host.get("audit") or {}
        change = audit.get("since")
        if isinstance(change, dict) and not change.get("none") and (change.get("fixed") or change.get("new")):
            since.append((host, change))
    if rows:
        out.append('<div class="scroll"><table id="drift-recorded"><thead><tr><th>host</th><th>setting</th><th>left at</th>'
                   '<th>now</th><th>set by run</th></tr></thead><tbody>')
        for host, item in rows:
            out.append('<tr data-host="%s"><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
                _e(host["name"]), _id(host["id"]), _e(host["name"]),
                _e("%s %s" % (item.get("area") or item.get("kind") or "", item.get("target"))),
                _e(_drift_value(item.get("recorded"))), _e(_drift_value(item.get("current"))), _e(item.get("recorded_by") or "")))
        out.append("</tbody></table></div>")
    else:
        out.append('<p class="box" id="drift-recorded">No recorded setting drifted%s.</p>' % (
            "" if model.get("fleet_drift") or any(h.get("verify") for h in model["hosts"]) else
            " (no fleet-drift.json or verify.json: run --tags verify)"))
    if readback:
        out.append("<h3>Not as configured (read-back)</h3><ul id=\"drift-readback\">")
        for host, modules in readback:
            out.append('<li><a href="#%s">%s</a>: %s</li>' % (_id(host["id"]), _e(host["name"]), _e(", ".join(
                "%s (%s)" % (module, _plural(count, "change")) for module, count in modules.items()))))
        out.append("</ul>")
    if p2p:
        out.append("<h3>P2P against the previous run</h3><ul id=\"drift-p2p\">")
        for host, lines in p2p:
            out.append('<li><a href="#%s">%s</a>: %s</li>' % (_id(host["id"]), _e(host["name"]), _e("; ".join(lines))))
        out.append("</ul>")
    out.append("<h3>Since the previous audit</h3>")
    if since:
        out.append('<div class="scroll"><table id="drift-since"><thead><tr><th>host</th><th>previous audit</th><th>fixed</th>'
                   '<th>new</th></tr></thead><tbody>')
        for host, change in since:
            out.append('<tr data-host="%s"><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
                _e(host["name"]), _id(host["id"]), _e(host["name"]), _e(change.get("previous_time") or ""),
                _since_list(change.get("fixed") or []), _since_list(change.get("new") or [])))
        out.append("</tbody></table></div>")
    else:
        out.append('<p class="box" id="drift-since">No audit found a finding fixed or new since the one before.</p>')
    out.append("</section>")
    return "".join(out)


def _since_list(entries):
    if not entries:
        return ""
    return _list("%s %s%s" % (e.get("severity") or "", e.get("title") or e.get("rule"),
                              " (%s)" % e["item"] if e.get("item") else "") for e in entries if isinstance(e, dict))


# ------------------------------------------------------------------------------ hosts

def _host(host):
    audit = host.get("audit") or {}
    health = host.get("health")
    worst = audit.get("worst")
    head = '<span class="badge b-%s">%s</span>' % (_sev(worst), _e(worst)) if worst else ""
    words = [w for w in host["attention"] if not health or w not in ("quarantined", "health degraded")]
    summary = "%s %s%s%s" % (_e(host["name"]), _health_badge(health["status"]) if health else "", head, _badges(words))
    out = ['<details class="host" id="%s" data-host="%s"%s><summary>%s</summary><div class="in">' % (
        _id(host["id"]), _e(host["name"]), " open" if needs_a_look(host) else "", summary)]
    out.append(_host_health(host))
    out.append(_host_normal(host))
    out.append(_host_facts(host))
    out.append(_host_rollout(host))
    out.append(_host_verify(host))
    out.append(_host_p2p(host))
    out.append(_host_benchmark(host))
    out.append(_host_experiments(host))
    out.append("</div></details>")
    return "".join(out)


def _host_health(host):
    """The host's health first in its section: the badge, when and under which policy it was
    judged, its actions, each finding (its action, whether it blocks) and the GPUs at fault."""
    health = host.get("health")
    if not health:
        return '<p class="health-host muted">Health: not judged (no health.json).</p>'
    line = []
    if health.get("actions"):
        line.append("actions: %s" % ", ".join(health["actions"]))
    judged = "judged %s" % HEALTH_PHASES.get(health.get("phase"), health.get("phase") or "") if health.get("phase") \
        else "judged"
    if health.get("time"):
        judged += " at %s" % health["time"]
    if health.get("policy"):
        judged += ", policy %s" % health["policy"]
    line.append(judged)
    if health.get("quarantine"):
        line.append("quarantined: not tuned, not benchmarked, never reverted")
    elif health.get("tuned_anyway"):
        line.append("blocking, tuned anyway (gpufleet_health_policy %s)" % (health.get("policy") or "report"))
    counts = health.get("counts") or {}
    if _count(counts.get("unknown")):
        line.append("%s could not be judged" % _plural(_count(counts["unknown"]), "health rule"))
    out = ['<div class="health-host" id="%s-health">Health %s %s.' % (_id(host["id"]), _health_badge(health["status"]),
                                                                      _e("; ".join(line)))]
    findings = ["%s%s (%s%s)" % ("%s: " % f["item"] if f.get("item") else "", f.get("message") or f.get("title") or "",
                                 f.get("rule"), "; %s%s" % (f["action"], ", blocking" if f.get("blocking") else "")
                                 if f.get("action") else "") for f in health.get("findings") or []]
    out.append(_list(findings))
    sick = ["GPU %s%s: %s (%s)" % ("?" if g.get("index") is None else g["index"],
                                   " %s" % g["bdf"] if g.get("bdf") else "", g.get("status"),
                                   ", ".join(g.get("actions") or []) or "no action")
            for g in health.get("gpus") or [] if g.get("status") != "healthy"]
    if sick:
        out.append('<p class="muted">%s.</p>' % _e("; ".join(sick)))
    out.append("</div>")
    return "".join(out)


def _peer_row(item):
    mads = item.get("mads_away")
    return ('<tr%s><td>%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td>'
            '<td class="n">%s</td><td>%s</td></tr>' % (
                ' class="short-row"' if item.get("message") else "", _e(item.get("figure")),
                _e("%s %s" % (charts.fmt(item.get("value")), item.get("unit") or "")),
                _e("%s %s" % (charts.fmt(item.get("median")), item.get("unit") or "")), charts.fmt(item.get("mad")),
                _e(item.get("hosts") if item.get("hosts") is not None else "?"),
                "\u2014" if mads is None else "%.1f" % mads,
                _e("outlier, %s" % (item.get("direction") or "?") if item.get("message") else "within")))


def _host_normal(host):
    """Is this node normal, after its health line: the profile and the verdict, each line (an
    expectation outside, an outlier with its figure against the peers' median), the checks that
    could not be judged, why the profile was chosen, and every figure against its peers."""
    normal = host.get("normal") or {}
    status = normal.get("status") if normal.get("status") in NORMAL_BADGES else "not_judged"
    label = normal.get("profile") or "none recorded"
    ident = _id("%s-normal" % host.get("id"))
    if not normal.get("record"):
        return '<div class="normal-host muted" id="%s">Profile %s: %s (no normal.json).</div>' % (
            ident, _e(label), _normal_badge("not_judged"))
    words = []
    if status == "not_normal":
        words.append(_plural(len(normal.get("lines") or []), "problem"))
    elif status == "not_judged":
        words.append(normal.get("why") or "nothing could be judged")
    settings = normal.get("settings") or {}
    if normal.get("compared"):
        words.append("%s against the %s of its profile (outlier: more than %s MADs from their median)" % (
            _plural(_count(normal["compared"]), "figure"),
            _plural(len(normal.get("peers") or []), "other host") if normal.get("peers") else "no other host",
            "%g" % settings["mads"] if isinstance(settings.get("mads"), (int, float)) else "?"))
    elif normal.get("reason") and status != "not_judged":
        words.append("no peer verdict: %s" % normal["reason"])
    judged = "judged"
    if normal.get("time"):
        judged += " at %s" % normal["time"]
    if normal.get("peers_from") == "fleet" and normal.get("recorded_normal") is not normal.get("normal"):
        was = {True: "normal", False: "not normal", None: "not judged"}[normal.get("recorded_normal")]
        judged += ", when its normal.json said %s (with %s of its profile)" % (
            was, _plural(_count(normal.get("recorded_peers")), "other host"))
    words.append(judged)
    out = ['<div class="normal-host" id="%s">Profile %s: %s %s.' % (
        ident, _e(label), _normal_badge(status), _e("; ".join(w for w in words if w)))]
    out.append(_list(normal.get("lines") or []))
    unknown = ["%s%s: %s" % (c.get("check"), " " + c["item"] if c.get("item") else "", c.get("message") or "")
               for c in normal.get("checks") or [] if c.get("status") != "outside"]
    if unknown:
        out.append('<p class="muted">Could not be judged: %s.</p>' % _e("; ".join(unknown)))
    about = []
    if normal.get("profile_now"):
        about.append("its profile.json now says %s (its normal.json was judged under the one above)" % normal["profile_now"])
    if normal.get("pinned"):
        about.append("pinned by the inventory")
    if normal.get("reasons"):
        about.append("chosen for: %s" % "; ".join(normal["reasons"]))
    if about:
        text = "; ".join(about)
        out.append('<p class="muted">%s.</p>' % _e(text[:1].upper() + text[1:]))
    if normal.get("figures"):
        out.append('<details><summary>Every figure against its peers (%d)</summary><div class="in scroll"><table '
                   'class="peers"><thead><tr><th>figure</th><th>this host</th><th>median</th><th>MAD</th><th>hosts</th>'
                   '<th>MADs away</th><th>verdict</th></tr></thead><tbody>%s</tbody></table></div></details>' % (
                       len(normal["figures"]), "".join(_peer_row(item) for item in normal["figures"])))
    out.append("</div>")
    return "".join(out)


def _host_facts(host):
    audit = host.get("audit")
    parts = []
    links = ['<a href="%s">%s</a>' % (host_href(host, name), _e(name)) for name in host.get("files") or []]
    if audit:
        counts = audit.get("counts") or {}
        parts.append("Audit %s: %s (%s)%s; %d unknown." % (
            _e(audit.get("time") or "(no time)"),
            _e(_plural(sum(_count(counts.get(s)) for s in SEVERITY_WORDS), "finding")),
            _e(", ".join("%d %s" % (_count(counts.get(s)), s) for s in SEVERITY_WORDS)),
            " from fleet-audit.json" if audit.get("source") != "audit.json" else "", _count(counts.get("unknown"))))
        if audit.get("gpus"):
            parts.append("GPUs: %s." % _e(audit["gpus"]))
        since = audit.get("since")
        if isinstance(since, dict):
            if since.get("none"):
                parts.append("Since the previous audit: %s." % _e(since.get("reason") or "no comparison"))
            else:
                parts.append("Since the previous audit (%s): %d fixed, %d new." % (
                    _e(since.get("previous_time") or "?"), len(since.get("fixed") or []), len(since.get("new") or [])))
    else:
        parts.append("No audit record.")
    return '<p>%s%s</p>' % (" ".join(parts), "<br>" + " \u00b7 ".join(links) if links else "")


def _host_rollout(host):
    rollout = host.get("rollout")
    if not rollout:
        return ""
    text = "Rollout: %s" % rollout["status"]
    if rollout.get("batch"):
        text += " in batch %d" % rollout["batch"]
    if rollout["status"] == "quarantined":
        actions = (rollout.get("health") or {}).get("actions") or []
        text += " for its hardware (%s), not reverted" % (", ".join(actions) or "no action named")
    if rollout.get("failed_check") and rollout["failed_check"] != "health":
        text += ", failed %s" % rollout["failed_check"]
    failure = rollout.get("failure") or {}
    if failure.get("message"):
        text += ": %s" % failure["message"]
    if rollout.get("reverted"):
        text += "; reverted (%s restored)" % _plural(rollout["restored"], "item")
    if rollout.get("reason"):
        text += "; %s" % rollout["reason"]
    return '<p class="rollout-host">%s.</p>' % _e(text)


def _host_verify(host):
    verify = host.get("verify")
    if not verify:
        return '<p class="muted">No verify.json.</p>'
    out = []
    if verify.get("failures"):
        out.append('<div class="box"><b>Verify: %s fell short</b> (%s)%s</div>' % (
            _plural(len(verify["failures"]), "check"), _e(verify.get("time") or ""), _list(verify["failures"])))
    if host.get("drift"):
        out.append("<p><b>Drift:</b> %s.</p>" % _e("; ".join("%s: left at %s, now %s" % (
            d.get("target"), _drift_value(d.get("recorded")), _drift_value(d.get("current"))) for d in host["drift"])))
    return "".join(out)


def _host_p2p(host):
    p2p = host.get("p2p") or {}
    out = ['<h3>GPU peer-to-peer</h3>']
    if p2p.get("status") != "measured":
        out.append('<p class="muted p2p-none">%s</p>' % _e(p2p.get("msg") or "not measured"))
        return "".join(out)
    gpus = p2p["gpus"]
    out.append('<div class="charts scroll p2p">')
    for key, _field, kind, title in MATRICES:
        matrix = p2p["matrices"][key]
        if all(v is None for row in matrix for v in row) and key.endswith("staged"):
            continue
        short = set((i, j) for k, i, j in p2p["short"] if k == key)
        access = p2p.get("access") if key == "uni_peer" else _both_ways(p2p.get("access")) if key == "bidi_peer" else None
        out.append(charts.heatmap(title, gpus, matrix, p2p["floors"].get(key) if key.endswith("peer") else None,
                                  short, staged=key.endswith("staged"), access=access))
    out.append("</div>")
    floors = {}
    for row in p2p["pairs"]:
        if row["floor"] is not None:
            floors.setdefault((row["kind"], row["floor"], row["floor_source"]), 0)
            floors[(row["kind"], row["floor"], row["floor_source"])] += 1
    if floors:
        out.append('<p class="floors">Floors judged against: %s.</p>' % _e("; ".join(
            "%s %s GB/s (%s)" % (kind, charts.fmt(value), source or "threshold") for kind, value, source in sorted(
                floors, key=lambda k: (k[0] != "one way", k[1])))))
    else:
        out.append('<p class="floors muted">No floor: the pairs were not judged on bandwidth.</p>')
    shorts = [row for row in p2p["pairs"] if row["short"]]
    legend = ('<p class="muted"><span class="sw above"></span>above its floor<span class="sw below"></span>below it'
              '<span class="sw neutral"></span>no floor (shade: share of the best pair)<span class="sw short"></span>'
              'fell short (value marked !)</p>')
    out.append(legend)
    if shorts:
        out.append('<div class="box p2p-short"><b>%s short</b>%s</div>' % (
            _plural(len(shorts), "pair"), _list("%s: %s" % (r["pair"], "; ".join(r["short"])) for r in shorts)))
    if p2p.get("staged_pairs"):
        out.append("<p>Copies staged through the host (no peer access, accepted): %s.</p>" % _e("; ".join(
            "%s (%s)" % (s["pair"], ", ".join(s["causes"]) or "no cause found") for s in p2p["staged_pairs"])))
    common = {}
    for (kind, _value, source), count in floors.items():
        if count > common.get(kind, (None, 0))[1]:
            common[kind] = (source, count)
    out.append('<details><summary>Every pair, its floor and its source (%d)</summary><div class="in scroll"><table class="pairs">'
               '<thead><tr><th>pair</th><th>link</th><th>peer GB/s</th><th>staged GB/s</th><th>floor GB/s</th>'
               '<th>floor from (blank: as above)</th><th>verdict</th></tr></thead><tbody>' % len(p2p["pairs"]))
    for row in sorted(p2p["pairs"], key=lambda r: (not r["short"], r["kind"] != "one way", r["pair"])):
        verdict = "short" if row["short"] else "error" if row.get("error") else \
            "no peer access" if row.get("peer_access") is False else "ok" if row["floor"] is not None else "not judged"
        source = row["floor_source"] if row["floor_source"] != common.get(row["kind"], (None,))[0] else ""
        out.append('<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
            ' class="short-row"' if row["short"] else "", _e(row["pair"]), _e(row["link"]), charts.fmt(row["peer"]),
            charts.fmt(row["staged"]), charts.fmt(row["floor"]), _e(source or ""), verdict))
    out.append("</tbody></table></div></details>")
    return "".join(out)


def _both_ways(access):
    """A pair has peer access both ways only when each direction has it."""
    if not access:
        return None
    size = len(access)
    return [[False if False in (access[i][j], access[j][i]) else access[i][j] for j in range(size)] for i in range(size)]


def _host_benchmark(host):
    bench = host.get("benchmark")
    out = ['<h3>Inference benchmark</h3>']
    if not bench:
        out.append('<p class="muted bench-none">Not benchmarked (gpufleet_benchmark was off, or the host stopped before '
                   'the benchmark).</p>')
        return "".join(out)
    headline = bench.get("headline") or {}
    line = "Model %s; before %s, after %s." % (bench.get("model") or "?", bench.get("before_time") or "none",
                                               bench.get("after_time") or "none")
    if headline.get("verdict"):
        line += " Decode, one stream: %s \u2192 %s tokens/s, %s (change %s %%, noise %s %%)." % (
            charts.fmt(headline.get("before")), charts.fmt(headline.get("after")), headline["verdict"],
            charts.fmt(headline.get("delta_pct")), charts.fmt(headline.get("noise_pct")))
    if not bench.get("has_after"):
        line += " Only the run before the tuning is there: the host stopped before the run after it."
    out.append("<p>%s</p>" % _e(line))
    gate = bench.get("gate")
    if gate and gate.get("failed"):
        out.append('<div class="box bench-gate"><span class="badge b-bad">gate failed</span>%s</div>' % _list(gate["reasons"]))
    elif gate and gate.get("max_regression_pct") is not None:
        out.append('<p class="bench-gate"><span class="badge b-ok">gate passed</span> at %s %%.</p>' % _e(
            charts.fmt(gate["max_regression_pct"])))
    if bench.get("differences"):
        out.append("<p>The runs used different loads: %s.</p>" % _e("; ".join(bench["differences"])))
    levels = bench.get("levels") or []
    single = next((lv for lv in levels if lv["concurrency"] == 1), levels[0] if levels else None)
    out.append('<div class="charts scroll bench">')
    for panel, paths, unit in BENCH_PANELS:
        if panel == "decode":
            groups = [("c=%d" % lv["concurrency"], lv["figures"]["decode_tokens_per_s"]) for lv in levels]
        else:
            groups = [(path.split(".")[1], single["figures"][path]) for path in paths] if single else []
        out.append(charts.bars(PANEL_TITLES[panel], unit, groups))
    eff = bench.get("efficiency") or {}
    out.append(charts.efficiency(eff.get("before"), eff.get("after")))
    out.append("</div>")
    out.append('<p class="muted"><span class="sw before"></span>before<span class="sw after"></span>after'
               '<span class="sw band"></span>noise band (a change inside it is no measurable change); whiskers: '
               'min to max over the repeats; c = concurrent streams.</p>')
    out.append('<details><summary>Every level and figure</summary><div class="in scroll"><table><thead><tr>'
               '<th>streams</th><th>figure</th><th>before</th><th>after</th><th>change %</th><th>noise %</th>'
               '<th>verdict</th></tr></thead><tbody>')
    for level in levels:
        for path in FIGURE_LABELS:
            fig = level["figures"].get(path)
            if not fig:
                continue
            out.append('<tr><td class="n">%d</td><td>%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td>'
                       '<td class="n">%s</td><td>%s</td></tr>' % (
                           level["concurrency"], FIGURE_LABELS[path], charts.fmt(fig["before"]), charts.fmt(fig["after"]),
                           charts.fmt(fig["delta_pct"]), charts.fmt(fig["noise_pct"]), _e(fig["verdict"])))
    out.append("</tbody></table></div></details>")
    return "".join(out)


def _signed(value):
    return "\u2014" if value is None else "%+.1f" % value


def _pct(value):
    return "\u2014" if value is None else "%.1f" % value


def _divergence(value):
    return "\u2014" if value is None else divergence_text(value)


def _experiment_accuracy(accuracy):
    if not accuracy:
        return "not checked"
    verdict = "passed" if accuracy.get("passed") is True else "failed" if accuracy.get("passed") is False else "?"
    prompts, differing = accuracy.get("prompts"), accuracy.get("differing_prompts")
    if accuracy.get("exact") and not differing:
        return "%s: exact%s" % (verdict, " (%d prompts)" % prompts if prompts is not None else "")
    text = "%s: divergence %s %% of %s %% allowed" % (
        verdict, _divergence(accuracy.get("divergence_pct")), _divergence(accuracy.get("max_divergence_pct")))
    if prompts is not None and differing is not None:
        text += " (%d of %d prompts differ)" % (differing, prompts)
    return text


def _host_experiments(host):
    """The serving experiments of a host (experiments.json); nothing when it ran none."""
    exp = host.get("experiments")
    if not exp:
        return ""
    counts = exp.get("counts") or {}
    out = ['<h3>Serving experiments</h3>']
    where = "on %s" % exp["unit_host"] if exp.get("unit_host") else "on the host itself"
    line = "Unit %s (%s) %s; %s at %s: " % (
        exp.get("unit") or "?", exp.get("kind") or "?", where, exp.get("figure") or "the figure",
        _plural(int(exp["concurrency"]), "stream") if exp.get("concurrency") is not None else "?")
    line += "%s \u2192 %s (%s %% against the baseline, noise \u00b1%s %%). " % (
        charts.fmt(exp.get("baseline")), charts.fmt(exp.get("final")), _signed(exp.get("final_delta_pct")),
        _pct(exp.get("baseline_noise_pct")))
    skipped = _count(counts.get("skipped"))
    parts = ["%d tried" % (_count(counts.get("total")) - skipped), "%d kept" % _count(counts.get("kept"))]
    parts += ["%d %s" % (_count(counts.get(status)), EXPERIMENT_BADGES[status][0])
              for status in ("rolled_back", "rejected_accuracy", "failed_start", "failed") if _count(counts.get(status))]
    if _count(counts.get("other")):
        parts.append("%d of another status" % _count(counts["other"]))
    if skipped:
        parts.append("%d skipped" % skipped)
    line += "%s: %s; %s%s, %s s down." % (
        _plural(_count(counts.get("total")), "candidate"), ", ".join(parts),
        _plural(int(exp["restarts"]), "restart") if exp.get("restarts") is not None else "? restarts",
        " of %d allowed" % int(exp["max_restarts"]) if exp.get("max_restarts") is not None else "",
        charts.fmt(exp.get("downtime_s_total")))
    out.append('<p class="exp-head">%s</p>' % _e(line))
    kept = [flag_text(row.get("flag"), row.get("value")) for row in exp.get("candidates") or []
            if row.get("status") == "kept" and row.get("flag")]
    if exp.get("changed") and exp.get("after"):
        out.append('<p class="exp-command">%sLaunch command now <code>%s</code><br>before <code>%s</code>%s</p>' % (
            "Kept %s. " % ", ".join("<code>%s</code>" % _e(flag) for flag in kept) if kept else "",
            _e(exp["after"]), _e(exp.get("before") or "?"),
            "<br>drop-in <code>%s</code>" % _e(exp["dropin"]) if exp.get("dropin") else ""))
    elif exp.get("after") or exp.get("before"):
        out.append('<p class="exp-command muted">Launch command unchanged: <code>%s</code></p>' % _e(
            exp.get("after") or exp.get("before")))
    rows = exp.get("candidates") or []
    if not rows:
        out.append('<p class="muted">No candidate applied to this server.</p>')
        return "".join(out)
    out.append('<div class="scroll"><table class="exp"><thead><tr><th>#</th><th>candidate</th><th>flag</th><th>risk</th>'
               '<th>status</th><th>figure before \u2192 after</th><th>change %</th><th>noise %</th><th>accuracy</th>'
               '<th>downtime s (try / rollback)</th><th>reason</th></tr></thead><tbody>')
    for number, row in enumerate(rows, 1):
        words, cls = EXPERIMENT_BADGES.get(row.get("status"), (row.get("status"), "b-unk"))
        figure = row.get("figure")
        flag = flag_text(row.get("flag"), row.get("value"))
        out.append('<tr%s data-status="%s"><td class="n">%d</td><td>%s</td><td>%s</td><td>%s</td>'
                   '<td><span class="%s">%s</span></td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td>'
                   '<td class="acc">%s</td><td class="n">%s / %s</td><td class="why">%s</td></tr>' % (
                       ' class="kept-row"' if row.get("status") == "kept" else "", _e(row.get("status")), number,
                       _e(row.get("name")), "<code>%s</code>" % _e(flag) if flag else "", _e(row.get("risk") or ""),
                       "badge %s" % cls if cls else "badge", _e(words),
                       "%s \u2192 %s" % (charts.fmt(figure["before"]), charts.fmt(figure["after"])) if figure else
                       "not measured", _signed((figure or {}).get("delta_pct")),
                       _pct((figure or {}).get("noise_pct")), _e(_experiment_accuracy(row.get("accuracy"))),
                       charts.fmt(row.get("downtime_try")), charts.fmt(row.get("downtime_rollback")),
                       _e(row.get("reason") or "")))
    out.append("</tbody></table></div>")
    return "".join(out)


def _notes(model):
    out = ['<footer><h2>About this page</h2><p class="muted">Made by gpufleet.tuning.fleet_report from %d files of the '
           'artifacts folder%s. It changes only when they do.</p>' % (
               model.get("files_read", 0), "; fleet-audit.json covers %d hosts" % model["fleet_audit"]["hosts"]
               if model.get("fleet_audit") else "")]
    if model.get("notes"):
        out.append('<div class="box" id="notes"><b>Left out</b>%s</div>' % _list(model["notes"], 50))
    out.append("</footer>")
    return "".join(out)


def render(model, title=TITLE):
    """The whole page, as text."""
    model = node_text.clean_tree(model)
    title = node_text.clean(title)
    hosts = model["hosts"]
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="%s">' % CSP,
        '<meta name="generator" content="gpufleet.tuning.fleet_report">',
        "<title>%s</title><style>%s</style></head><body>" % (_e(title), CSS.strip()),
        '<header><h1>%s</h1><p class="muted">%s%s</p><nav><a href="#health">Health</a><a href="#findings">Findings</a>'
        '<a href="#normal">Normal?</a><a href="#rollout">Rollout</a><a href="#drift">Drift</a><a href="#hosts">Hosts</a></nav></header><main>' % (
            _e(title), _e(_plural(len(hosts), "host")),
            ", latest record %s" % _e(model["as_of"]) if model.get("as_of") else ""),
        _health(model),
        _normal(model),
        _summary(model),
        _grid(model),
        _rollout(model),
        _drift(model),
        '<section id="hosts"><h2>Hosts</h2>',
    ]
    if not hosts:
        parts.append('<p class="box">No host record in the artifacts folder.</p>')
    parts.extend(_host(host) for host in hosts)
    parts.append("</section></main>")
    parts.append(_notes(model))
    parts.append("</body></html>\n")
    return "".join(parts)
