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
