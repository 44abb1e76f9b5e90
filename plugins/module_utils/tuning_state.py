# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.tuning_state: keep the node's before-state, and find drift.

The modules say what they changed in change records, which carry a file's digest but never
its text. A revert needs the text, and it needs the node as it was before the collection
first touched it, not as the last run found it. So the record is kept in two steps around the
tuning:

1. ``planned``: the audit's check-mode plan (the same modules, the same arguments) names every
   target the run is about to change; their before-values are taken from the plan and the
   files' content is read now, before anything is written;
2. ``applied``: the records the run really made mark those items applied, with the value they
   were left at (what a drift check compares with). An item not planned first (no audit in
   the run) is recorded from its record alone: exact for values, modules and files that did
   not exist; a file that existed is marked as not restorable.

``mode=drift`` reads every applied item back and lists those that no longer hold.

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)``; ``paths`` is a
state.items.Paths; ``changes`` holds one file record for the state file when it is written.
"""

from __future__ import annotations

import datetime
import json
import os
import uuid

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store

AREA = "state"

ARGUMENT_SPEC = dict(
    path=dict(type="path", default=store.STATE_PATH),
    mode=dict(type="str", default="record", choices=["record", "drift"]),
    run_id=dict(type="str"),
    planned=dict(type="list", elements="raw", default=[]),
    applied=dict(type="list", elements="raw", default=[]),
    prune=dict(type="bool", default=False),
)


def now_text():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id():
    """``20261201T070102Z-1a2b3c``: sortable by time, unique across a fleet's controllers."""
    return "%s-%s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"), uuid.uuid4().hex[:6])


def validate(params):
    params = with_defaults(ARGUMENT_SPEC, params)
    if params["mode"] not in ("record", "drift"):
        raise ModuleFailure("mode=%r: use record or drift" % params["mode"])
    if not params["path"] or not os.path.isabs(params["path"]):
        raise ModuleFailure("path=%r must be an absolute path" % params["path"])
    if params["run_id"] is not None and not params["run_id"].strip():
        raise ModuleFailure("run_id=%r is empty: leave it out for a new one" % params["run_id"])
    for name in ("planned", "applied"):
        for index, item in enumerate(params[name]):
            if not records.is_record(item):
                raise ModuleFailure("%s[%d] is not a change record (keys %s, kind one of %s): %r"
                                    % (name, index, ", ".join(records.KEYS), ", ".join(records.KINDS), item))
    if params["mode"] == "drift" and (params["planned"] or params["applied"] or params["prune"]):
        raise ModuleFailure("mode=drift only reads: planned, applied and prune are for mode=record")
    if params["prune"] and params["run_id"] is None:
        raise ModuleFailure("prune=true needs the run_id whose planned items it drops")
    return params


def items_of(change_records, paths):
    """Items of a list of records, each key once (the last record of a target wins)."""
    found = {}
    for record in change_records:
        try:
            for item in state_items.from_record(record, paths):
                found[item["key"]] = item
        except state_items.ItemError as exc:
            raise ModuleFailure("nothing was recorded: %s" % exc)
    return [found[key] for key in sorted(found)]


def run(params, check_mode=False, paths=None, tools=None):
    params = validate(params)
    paths = paths or state_items.Paths()
    if params["mode"] == "drift":
        return _drift(params, _load(params["path"]), paths)
    return record(params["path"], params["run_id"] or new_run_id(), params["planned"], params["applied"],
                  None if params["prune"] else (), check_mode, paths)


def _load(path):
    try:
        return store.load(path)
    except store.StoreError as exc:
        raise ModuleFailure(str(exc))


def record(path, run_id, planned, applied, prune_keys, check_mode, paths):
    """Add ``planned`` and ``applied`` (change records) to the state file ``path`` under
    ``run_id``, and drop this run's planned items that were not applied: all of them when
    ``prune_keys`` is None, only those keys when it is a set (a tuning module's own plan, so
    that one module never drops what another of the same run planned). Written unless
    ``check_mode``; the result says what was (or would be) recorded."""
    state = _load(path)
    time = now_text()
    old_bytes = store.dump(state) if store.exists(path) else None
    planned = items_of(planned, paths)
    applied = items_of(applied, paths)
    for item in applied:
        if item["how"] != "file":
            continue
        # The content the run left, so that a later run alone can be undone; for a file written
        # by a role task (ansible.builtin.copy, after {}) its digest too.
        try:
            item["after_content"] = state_items.file_snapshot(item["target"], item.get("link", False))
        except state_items.ItemError as exc:
            raise ModuleFailure("nothing was recorded: %s" % exc)
        if item["after"] == {}:
            item["after"] = state_items.file_digest(item["after_content"])
    for item in planned:
        if item["how"] == "file":
            try:
                item["before"] = state_items.file_snapshot(item["target"], item.get("link", False))
            except state_items.ItemError as exc:
                raise ModuleFailure("nothing was recorded: %s" % exc)
    added, marked = store.add_planned(state, planned, run_id, time)
    added_applied, updated = store.add_applied(state, applied, run_id, time)
    added += added_applied
    dropped = []
    if prune_keys is None or prune_keys:
        dropped = store.prune_planned(state, run_id, set(i["key"] for i in applied), prune_keys)
    added = [key for key in added if key not in dropped]
    if added or updated or dropped or marked:
        store.note_run(state, run_id, time, "record", added + updated + marked)
    new_bytes = store.dump(state)
    changed = bool(added or updated or dropped or marked)
    result = {
        "changed": changed, "run_id": run_id, "path": path,
        "recorded": sorted(added), "updated": sorted(updated), "dropped": sorted(dropped),
        "items": len(state["items"]),
        "not_restorable": sorted(key for key, entry in state["items"].items() if not store.restorable(entry)),
        "changes": [records.file_change(AREA, path, old_bytes, new_bytes, None, store.MODE)] if changed else [],
        "diff": [diffs.values_diff(_summary(old_bytes), _summary(new_bytes), "gpufleet-tuning state %s" % path)],
        "warnings": [],
    }
    if result["not_restorable"]:
        result["warnings"].append("a revert cannot put back the content of %s: changed without the audit's plan "
                                  "recorded first" % ", ".join(result["not_restorable"]))
    if changed and not check_mode:
        try:
            store.save(path, state)
        except OSError as exc:
            raise ModuleFailure("the state file was not written: %s" % fileops.describe(exc))
    return result


def _summary(data):
    """``key = before -> after`` lines for --diff, files by digest: the state file holds file
    contents (secrets, maybe) and is never shown whole."""
    if data is None:
        return {}
    out = {}
    for key, entry in json.loads(data.decode("utf-8"))["items"].items():
        before = entry.get("before")
        if entry["how"] == "file":
            before = _short(state_items.file_digest(before))
        out[key] = "%s -> %s%s" % (before, _short(entry.get("after")) if entry["how"] == "file" else entry.get("after"),
                                   "" if entry.get("applied") else " (planned)")
    return out


def _short(state):
    if isinstance(state, dict):
        if "link" in state:
            return "link to %s" % state["link"]
        if "sha256" in state:
            return "sha256:%s" % state["sha256"][:12]
        return "unknown content"
    return "absent" if state is None else str(state)


def _drift(params, state, paths):
    drift = []
    checked = 0
    for key in sorted(state["items"]):
        entry = state["items"][key]
        if not entry.get("applied"):
            continue
        checked += 1
        try:
            current = state_items.read_current(entry, paths)
        except state_items.ItemError as exc:
            drift.append(_drift_entry(entry, "unreadable: %s" % exc))
            continue
        if not state_items.same(entry, current, entry["after"]):
            drift.append(_drift_entry(entry, current))
    return {"changed": False, "changes": [], "path": params["path"], "checked": checked, "drift": drift,
            "drifted": bool(drift), "items": len(state["items"])}


def _drift_entry(entry, current):
    shown = _short if entry["how"] == "file" else (lambda value: value)
    return {"key": entry["key"], "area": entry["area"], "kind": entry["how"], "target": entry["target"],
            "recorded": shown(entry["after"]), "current": shown(current) if not isinstance(current, str)
            or entry["how"] != "file" else current, "recorded_by": entry.get("last_run")}
