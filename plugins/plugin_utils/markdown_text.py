# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values in the collection's Markdown reports, so that they read as text and never as markup.

system-improve.md, fleet-audit.md, rollout-<run id>.md and benchmark.md put host names, GPU
names, sysctl values, messages, rule titles and change targets into Markdown. A viewer that
renders it (GitHub, GitLab, an IDE preview, a wiki) turns ``<img src=x onerror=...>`` into an
element, ``[x](javascript:...)`` into a link, ``![i](http://...)`` into a request, ``|`` into a
new table cell and ``*``/``_`` into emphasis. Every value goes through ``escape`` (running text,
table cells) or ``code`` (an inline code span), after node_text.clean (no control character, no
line break: a value never starts a line of its own, and its length is bounded); the writers
build links only from the collection's own relative paths, never from a value.

``escape`` writes what CommonMark and GFM would read as markup so that it renders literally:
``&``, ``<`` and ``>`` as entities (``&lt;`` is literal in every Markdown, including those that
ignore backslash escapes before ``<``), and ``\\``, ``` ` ```, ``*``, ``[``, ``]``, ``!``, ``|``,
``~``, ``#`` and ``$`` (GitHub's math) backslash-escaped. ``(`` and ``)`` are left as they are:
they make a link only right after ``]``, which is always escaped, and the reports are read raw
in a terminal as often as rendered, where an escaped ``(C6)`` on every other line would hurt.
``_`` is escaped unless it stands between two letters or digits, where CommonMark never reads it
as emphasis (``rmem_max`` stays as it is). A value that begins with ``-``, ``+`` or ``=`` or
with ``1.``/``1)`` and a blank gets that mark escaped: after a writer's ``- `` it would start a
nested list or a heading underline. Blanks are collapsed to one space.

``code`` makes a code span whose fence is longer than any run of backticks inside it, so the
value cannot close it; inside a table (``cell=True``) its ``|`` is escaped as GFM requires.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import TEXT_LIMIT, clean

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = frozenset("\\`*[]!|~#$")
_BLOCK_START = re.compile(r"([-+=])|([0-9]{1,9})([.)])(?= |\Z)")
_TICKS = re.compile("`+")


def _words(value, limit):
    return " ".join(clean(value, limit).split())


def escape(value, limit=TEXT_LIMIT):
    """``value`` as Markdown text that renders as exactly that text, in running text and in a
    table cell."""
    text = _words(value, limit)
    out = []
    last = len(text) - 1
    for index, char in enumerate(text):
        if char in _ENTITIES:
            out.append(_ENTITIES[char])
        elif char in _BACKSLASHED or (char == "_" and not (
                0 < index < last and text[index - 1].isalnum() and text[index + 1].isalnum())):
            out.append("\\" + char)
        else:
            out.append(char)
    escaped = "".join(out)
    match = _BLOCK_START.match(escaped)
    if match and match.group(1):
        escaped = "\\" + escaped
    elif match:
        escaped = "%s\\%s" % (match.group(2), escaped[len(match.group(2)):])
    return escaped


def code(value, limit=TEXT_LIMIT, cell=False):
    """``value`` as an inline code span it cannot break out of (``cell``: inside a GFM table)."""
    text = _words(value, limit)
    if not text:
        return "` `"
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (max([len(run) for run in _TICKS.findall(text)] or [0]) + 1)
    pad = " " if len(fence) > 1 else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)
