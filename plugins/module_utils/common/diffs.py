# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the ``diff`` entries Ansible prints for ``--diff``.

Every module reports two kinds of change: runtime values (sysctls, registers, idle states) and
files. Ansible's callback renders a list of ``{before, after, before_header, after_header}``
dicts as unified diffs, so values are rendered as sorted ``name = value`` lines and files as
their text; one module result can carry both.
"""

from __future__ import annotations

import difflib


def _render(values):
    if not values:
        return ""
    return "".join("%s = %s\n" % (key, values[key]) for key in sorted(values))


def values_diff(before, after, header):
    """Diff entry for two ``{name: value}`` maps; a value of None means absent/unknown."""
    return {
        "before_header": "%s (before)" % header,
        "after_header": "%s (after)" % header,
        "before": _render(dict((k, v) for k, v in before.items() if v is not None)),
        "after": _render(dict((k, v) for k, v in after.items() if v is not None)),
    }


def file_diff(path, before, after):
    """Diff entry for a file's text; None on either side means the file does not exist."""
    return {
        "before_header": path if before is not None else "%s (absent)" % path,
        "after_header": path if after is not None else "%s (absent)" % path,
        "before": before if before is not None else "",
        "after": after if after is not None else "",
    }


def changed_lines_diff(path, before, after):
    """Diff entry for a file that may hold secrets: only the lines that differ, not the file.

    An LXC config can carry ``lxc.environment = HF_TOKEN=...``; its whole text in a result
    would reach the controller's logs and result files. Each changed line is shown with its
    line number (in the old file on the before side, the new one on the after side).
    """
    old = (before or "").splitlines(True)
    new = (after or "").splitlines(True)
    shown_before, shown_after = [], []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        shown_before.extend("%d: %s" % (n + 1, _line(old[n])) for n in range(i1, i2))
        shown_after.extend("%d: %s" % (n + 1, _line(new[n])) for n in range(j1, j2))
    note = " (changed lines only)"
    return {
        "before_header": (path if before is not None else "%s (absent)" % path) + note,
        "after_header": (path if after is not None else "%s (absent)" % path) + note,
        "before": "".join(shown_before),
        "after": "".join(shown_after),
    }


def _line(text):
    return text if text.endswith("\n") else text + "\n"
