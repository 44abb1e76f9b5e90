# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text that came from a node, made plain and bounded before it reaches an artifact.

Host names, GPU and driver names, versions, sysctl values, the findings' text and model names
are read from the nodes (or from the records on the controller that node output filled) and
end up in audit.json, system-improve.md, verify.json, the rollout and benchmark reports and the
fleet page, which people open in terminals, editors, Markdown viewers and browsers. Nothing of
that text needs a control character, and what one can do there is harm: an ANSI escape rewrites
the terminal that prints the report, a bidi override or isolate (U+202A-U+202E,
U+2066-U+2069) shows text in another order than it is stored ("Trojan Source"), a line or
paragraph separator starts a line some viewers honour and others do not, and a megabyte "GPU
name" is copied into every report. So, before anything is written:

- C0 and C1 control characters and DEL are dropped, except that tab, newline, carriage
  return, vertical tab and form feed (a run of them) become one space, so that a sysctl value
  read as ``4096\\t131072\\t6291456`` stays readable as ``4096 131072 6291456``;
- U+2028/U+2029 and the bidi overrides and isolates are dropped, and so are lone surrogates
  (what a file name that is not UTF-8 decodes to; it cannot be written as UTF-8);
- the result is at most ``limit`` characters, ending in an ellipsis when it was cut.

This is no escaping: each writer still escapes for its format (report/page.py for HTML,
markdown_text.py for Markdown, rollout_report's JUnit for XML). It is done where a record or a
report is written, never on the facts before the audit's rules read them. ``clean`` is
idempotent, so text cleaned by one writer and read back by another compares equal to itself.
"""

from __future__ import annotations

import re

# A name, a version, a value.
LIMIT = 256
# Free text (a message, a reason, a kernel command line) and whole records.
TEXT_LIMIT = 4096
ELLIPSIS = "\u2026"

_DROP = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_BLANKS = re.compile("[\t\n\r\x0b\x0c]+")


def clean(value, limit=LIMIT):
    """``value`` as plain text of at most ``limit`` characters (None is "", anything else its
    str())."""
    text = "" if value is None else value if isinstance(value, str) else str(value)
    text = _BLANKS.sub(" ", _DROP.sub("", text))
    if len(text) > limit:
        text = text[:max(limit - 1, 0)] + ELLIPSIS
    return text


def clean_tree(node, limit=TEXT_LIMIT):
    """JSON-like data with every string (dict keys included) cleaned with ``limit``; numbers,
    booleans, None and anything else are left as they are. A new object: the input is not
    changed. Two keys that clean to the same text keep the later one's value."""
    if isinstance(node, str):
        return clean(node, limit)
    if isinstance(node, dict):
        return dict((clean(key, limit) if isinstance(key, str) else key, clean_tree(value, limit))
                    for key, value in node.items())
    if isinstance(node, list):
        return [clean_tree(item, limit) for item in node]
    if isinstance(node, tuple) and not hasattr(node, "_fields"):  # a named tuple is left as it is
        return tuple(clean_tree(item, limit) for item in node)
    return node
