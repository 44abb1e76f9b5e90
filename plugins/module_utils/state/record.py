# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adding to the node's record (state.json): what a run is about to change, and what it changed.

The step every tuning module takes around its change (state/recorder.py) and the one
gpufleet.tuning.tuning_state takes for a role's own files. Apart from tuning_state's drift
check, which reads every item back from the machine (state/access.py): a module that records
its before-state needs none of that code.

Two steps around the tuning:

1. ``planned``: the change records of a check-mode plan name every target the run is about to
   change; their before-values are taken from the plan and the files' content is read now,
   before anything is written;
2. ``applied``: the records the run really made mark those items applied, with the value they
   were left at (what a drift check compares with). An item not planned first is recorded from
   its record alone: exact for values, modules and files that did not exist; a file that
   existed is marked as not restorable.
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
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import checks
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store

AREA = "state"


def now_text():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id():
    """``20261201T070102Z-1a2b3c``: sortable by time, unique across a fleet's controllers."""
    return "%s-%s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"), uuid.uuid4().hex[:6])


def check(path, run_id=None):
    """ModuleFailure naming a state file path that is not absolute or an empty run id."""
    if not path or not os.path.isabs(path):
        raise ModuleFailure("path=%r must be an absolute path" % path)
    if run_id is not None and not str(run_id).strip():
        raise ModuleFailure("run_id=%r is empty: leave it out for a new one" % run_id)


def items_of(change_records, paths):
    """Items of a list of records, each key once (the last record of a target wins). An item no
    module of the collection records (checks.target_refusal: a file outside its area's paths) is
    refused here too, so the record never holds what a revert would refuse."""
    found = {}
    for record in change_records:
        try:
            for item in state_items.from_record(record, paths):
                found[item["key"]] = item
        except state_items.ItemError as exc:
            raise ModuleFailure("nothing was recorded: %s" % exc)
    for key in sorted(found):
        item = found[key]
        why = checks.target_refusal(item["how"], item["target"], item["area"], paths.root)
        if why:
            raise ModuleFailure("nothing was recorded: %s is not a change of this collection that a revert puts "
                                "back: %s" % (state_items.describe(item), why))
    return [found[key] for key in sorted(found)]


def load(path, root="/"):
    try:
        return store.load(path, root)
    except store.StoreError as exc:
        raise ModuleFailure(str(exc))


def record(path, run_id, planned, applied, prune_keys, check_mode, paths):
    """Add ``planned`` and ``applied`` (change records) to the state file ``path`` under
    ``run_id``, and drop this run's planned items that were not applied: all of them when
    ``prune_keys`` is None, only those keys when it is a set (a tuning module's own plan, so
    that one module never drops what another of the same run planned). Written unless
    ``check_mode``; the result says what was (or would be) recorded."""
    state = load(path, paths.root)
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
        "refused": checks.listed(state),
        "changes": [records.file_change(AREA, path, old_bytes, new_bytes, None, store.MODE)] if changed else [],
        "diff": [diffs.values_diff(_summary(old_bytes, set(state["refused"])),
                                   _summary(new_bytes, set(state["refused"]) - set(state["items"])),
                                   "gpufleet-tuning state %s" % path)],
        "warnings": [],
    }
    if result["not_restorable"]:
        result["warnings"].append("a revert cannot put back the content of %s: changed without the audit's plan "
                                  "recorded first" % ", ".join(result["not_restorable"]))
    if result["refused"]:
        result["warnings"].append(checks.warning(result["refused"], "kept in the record but never acted on"))
    if changed and not check_mode:
        try:
            store.save(path, state)
        except OSError as exc:
            raise ModuleFailure("the state file was not written: %s" % fileops.describe(exc))
    return result


def _summary(data, refused):
    """``key = before -> after`` lines for --diff, files by digest: the state file holds file
    contents (secrets, maybe) and is never shown whole. The ``refused`` keys are left out: their
    entries are whatever the file held (the result's ``refused`` names them)."""
    if data is None:
        return {}
    out = {}
    for key, entry in json.loads(data.decode("utf-8"))["items"].items():
        if key in refused:
            continue
        before = entry.get("before")
        if entry["how"] == "file":
            before = short(state_items.file_digest(before))
        out[key] = "%s -> %s%s" % (before, short(entry.get("after")) if entry["how"] == "file" else entry.get("after"),
                                   "" if entry.get("applied") else " (planned)")
    return out


def short(state):
    if isinstance(state, dict):
        if "link" in state:
            return "link to %s" % state["link"]
        if "sha256" in state:
            return "sha256:%s" % state["sha256"][:12]
        return "unknown content"
    return "absent" if state is None else str(state)
