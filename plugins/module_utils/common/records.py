# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Structured change records: what a module found and what it changed, for machines to read.

Every module returns ``changes``, a list of records::

    {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}

- ``area``: the module's part of the tuning (sysctl, pcie, cpu_power, lxc_memlock, peermem,
  nvidia_options, kernel_cmdline);
- ``kind``: ``value`` (a sysctl, a register field, an idle state, a limit, a module
  parameter), ``file`` (written or removed), ``module`` (a kernel module loaded or unloaded),
  ``service`` (a unit enabled or started);
- ``target``: the key, path, PCI address, module or unit;
- ``before`` / ``after``: what this run saw and left (in check mode, what it would leave). A
  value is a string (None: absent or unknown). A file is None when absent, else
  ``{"sha256", "size", "mode"}``: a digest, never the content, because config files can hold
  secrets (``lxc.environment = HF_TOKEN=...``). A module or service is a short state word
  (``loaded``/``not loaded``, ``enabled``/``disabled``).

Why records and not the ``diff``: ``diff`` is rendered for people (``key = value`` lines, file
texts), and everything downstream (the closing summary, the verify role, reports, a fleet
revert) needs the same facts without parsing that text. Records are the one source.
"""

from __future__ import annotations

import hashlib

KINDS = ("value", "file", "module", "service")
KEYS = ("area", "kind", "target", "before", "after")


def record(area, kind, target, before, after):
    """One record; ValueError for a kind outside KINDS (a programming error)."""
    if kind not in KINDS:
        raise ValueError("change record kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    return {"area": area, "kind": kind, "target": str(target), "before": before, "after": after}


def value(area, target, before, after):
    """A value record; numbers become their text so records compare the way the kernel prints."""
    return record(area, "value", target, _text(before), _text(after))


def values(area, before, after):
    """Value records for every key of two ``{target: value}`` maps whose values differ."""
    out = []
    for key in sorted(set(before) | set(after), key=str):
        if _text(before.get(key)) != _text(after.get(key)):
            out.append(value(area, key, before.get(key), after.get(key)))
    return out


def file_state(data, mode=None):
    """What a file record shows of a file: None when absent, else digest, size and mode."""
    if data is None:
        return None
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    state = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    if mode is not None:
        state["mode"] = "%04o" % mode
    return state


def file_change(area, path, before, after, before_mode=None, after_mode=None):
    """A file record from the old and new contents (bytes or text; None: absent)."""
    return record(area, "file", path, file_state(before, before_mode), file_state(after, after_mode))


def module_change(area, name, loaded_before, loaded_after):
    """A kernel-module record: ``loaded`` / ``not loaded``."""
    return record(area, "module", name, _loaded(loaded_before), _loaded(loaded_after))


def service_change(area, unit, before, after):
    """A unit record: short state words (``enabled``, ``disabled``, ``active``...)."""
    return record(area, "service", unit, before, after)


def from_managed(area, changes):
    """Records for a list of managed_files.Change: links as ``-> target`` values of a file
    record's state, files by digest, mode and owner changes included."""
    out = []
    for change in changes:
        wanted = change.wanted
        if wanted.symlink is not None or change.before_link is not None:
            before = {"link": change.before_link} if change.before_link is not None else file_state(change.before)
            after = {"link": wanted.symlink} if wanted.symlink is not None else file_state(wanted.content, wanted.mode)
            out.append(record(area, "file", change.path, before, after))
            continue
        before = file_state(change.before, getattr(change, "before_mode", None))
        after = None if wanted.absent else file_state(wanted.content, wanted.mode)
        out.append(record(area, "file", change.path, before, after))
    return out


def is_record(item):
    """True for a dict with exactly the record keys and a known kind."""
    return isinstance(item, dict) and set(item) == set(KEYS) and item["kind"] in KINDS


def _text(item):
    if item is None or isinstance(item, str):
        return item
    if isinstance(item, bool):
        return "1" if item else "0"
    return str(item)


def _loaded(flag):
    return "loaded" if flag else "not loaded"


def claimed(result):
    """Every change record a module result claims: a loop-shaped result's (``results``, one per
    item: a looped task, or lxc_memlock over several containers) items' own, of the items that
    did not fail, else its own; none for a failed result (a module restores what it applied
    before it fails). One rule for every reader, so no record is counted twice or claimed by a
    failure."""
    if not isinstance(result, dict):
        return []
    items = result.get("results")
    if isinstance(items, list):
        found = []
        for item in items:
            if isinstance(item, dict) and not item.get("failed"):
                found.extend(rec for rec in item.get("changes") or [] if isinstance(rec, dict))
        return found
    if result.get("failed"):
        return []
    return [rec for rec in result.get("changes") or [] if isinstance(rec, dict)]
