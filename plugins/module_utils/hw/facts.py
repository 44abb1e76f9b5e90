# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The envelope of one node fact: its value, where it came from, and why it is unknown.

The audit's rules and reports need to say where a measured value was read and, for a fact a
machine does not offer (no NVML, no cpufreq, a file only root may read), why it is missing:
a guess or a failure would both be wrong. See docs/facts.md for the whole shape.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops


def fact(value, source):
    """A known fact."""
    return {"value": value, "source": source}


def unknown(source, reason):
    """A fact that could not be read, with the reason."""
    return {"value": None, "source": source, "unknown": str(reason)}


def read(path, parse=None):
    """The fact of one file: its text (stripped), or ``parse(text)``; unknown on any error.

    ``parse`` may raise ValueError (or KeyError, IndexError) for text it cannot read: the fact
    is then unknown with that reason, never a failure.
    """
    try:
        data = fileops.read_bytes(path)
    except (OSError, IOError) as exc:
        return unknown(path, fileops.describe(exc))
    if data is None:
        return unknown(path, "%s does not exist" % path)
    text = data.decode("utf-8", "replace").strip()
    if parse is None:
        return fact(text, path)
    try:
        return fact(parse(text), path)
    except (ValueError, KeyError, IndexError) as exc:
        return unknown(path, "cannot parse %r: %s" % (text[:80], exc))


def value(item, default=None):
    """The value of an envelope (``default`` when unknown or not an envelope)."""
    if isinstance(item, dict) and "value" in item:
        return default if item["value"] is None else item["value"]
    return default


def is_fact(item):
    """True for a dict shaped like an envelope."""
    return isinstance(item, dict) and "value" in item and "source" in item and set(item) <= {
        "value", "source", "unknown"}
