# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The anchors of a host's system-improve.md, so the fleet page can link into it exactly.

system-improve.md (plugin_utils/audit_report.py) is Markdown: its sections have no ids of
their own, a Markdown viewer derives them from the heading text. The report itself links
``#manual-steps``, which is the GitHub rule (github-slugger, also GitLab's and VS Code's for
these headings): the heading's text as rendered (code spans lose their backticks), lower
case, every character that is not a letter, a digit, a mark, ``-`` or ``_`` dropped, each
space turned into ``-``; a slug already taken gets ``-1``, ``-2``... in document order.

The headings are read from the file as written, never re-rendered here, so a link names the
heading that is really there; a finding whose heading is not found gets its severity's section,
then the Findings section, never a guessed anchor. The same text gives the same anchors.
"""

from __future__ import annotations

import html
import re
import unicodedata

_HEADING = re.compile(r"(#{1,6})[ \t]+(.*?)[ \t#]*\Z")
_RULE_AT_END = re.compile(r"\(`([^`]+)`(?:, [^)]*)?\)\Z")
_SEVERITY_HEAD = re.compile(r"(H|P[0-9]):")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])|&(?:amp|lt|gt|quot);")

SECTIONS = {"Findings": "findings", "Unknown": "unknown", "Already optimal": "optimal",
            "Not applicable": "not_applicable", "Since the previous audit": "since",
            "Manual steps": "manual", "Planned changes": "planned"}


def rendered_text(heading):
    """A heading's text as a Markdown viewer shows it: code spans without their backticks,
    backslash escapes and the entities markdown_text writes (``&amp;``, ``&lt;``, ``&gt;``)
    resolved."""
    text = heading.replace("`", "")
    return _ESCAPED.sub(lambda m: m.group(1) if m.group(1) is not None else html.unescape(m.group(0)), text)


def slug(text):
    """The GitHub slug of one heading's rendered text (before duplicates are numbered)."""
    out = []
    for char in text.lower():
        if char == " ":
            out.append("-")
        elif char in "-_" or unicodedata.category(char)[0] in "LMN":
            out.append(char)
    return "".join(out)


class Slugger:
    """Numbers repeated slugs as github-slugger does: ``a``, ``a-1``, ``a-2``."""

    def __init__(self):
        self.seen = {}

    def __call__(self, text):
        base = result = slug(text)
        while result in self.seen:
            self.seen[base] += 1
            result = "%s-%d" % (base, self.seen[base])
        self.seen[result] = 0
        return result


def headings(markdown):
    """[(level, raw text, anchor)] of every ATX heading outside code fences, in document order;
    the anchor is computed from the rendered text."""
    found = []
    slugger = Slugger()
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        match = _HEADING.match(line)
        if match:
            raw = match.group(2)
            found.append((len(match.group(1)), raw, slugger(rendered_text(raw))))
    return found


def report_anchors(markdown):
    """What the fleet page links to in one system-improve.md.

    Returns ``{"sections": {key: anchor}, "severities": {"P0": anchor, ...}, "rules": {rule id:
    anchor}}``: the top sections by key (SECTIONS), each severity's heading under Findings, and
    each rule's first heading under Findings (``#### Title (`rule_id`)``)."""
    sections, severities, rules = {}, {}, {}
    section = None
    for level, raw, anchor in headings(markdown):
        if level == 2:
            section = SECTIONS.get(rendered_text(raw))
            if section and section not in sections:
                sections[section] = anchor
            continue
        if section != "findings":
            continue
        if level == 3:
            match = _SEVERITY_HEAD.match(raw)
            if match and match.group(1) not in severities:
                severities[match.group(1)] = anchor
        elif level == 4:
            match = _RULE_AT_END.search(raw)
            if match and match.group(1) not in rules:
                rules[match.group(1)] = anchor
    return {"sections": sections, "severities": severities, "rules": rules}


def finding_anchor(anchors, rule, severity=None):
    """The anchor for one finding: its rule's heading, else its severity's, else Findings'."""
    anchors = anchors or {}
    return ((anchors.get("rules") or {}).get(rule) or (anchors.get("severities") or {}).get(severity)
            or (anchors.get("sections") or {}).get("findings"))
