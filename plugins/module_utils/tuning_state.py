# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.tuning_state: keep the node's before-state, and find drift.

The modules say what they changed in change records, which carry a file's digest but never
its text. A revert needs the text, and it needs the node as it was before the collection
first touched it, not as the last run found it. The tuning modules record their own
(state/recorder.py); this module records what a role writes with Ansible's own modules (the
container role's memlock files), in the same two steps (state/record.py): ``planned`` before
the change, ``applied`` after it.

``mode=drift`` reads every applied item back (state/access.py) and lists those that no longer hold.
Items of the record that the collection does not restore (state/checks.py) are neither read nor
recorded over; both modes name them in ``refused``.

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)``; ``paths`` is a
state.items.Paths; ``changes`` holds one file record for the state file when it is written.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import access
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import checks
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import record as state_record
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


def validate(params):
    params = with_defaults(ARGUMENT_SPEC, params)
    if params["mode"] not in ("record", "drift"):
        raise ModuleFailure("mode=%r: use record or drift" % params["mode"])
    state_record.check(params["path"], params["run_id"])
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


def run(params, check_mode=False, paths=None, tools=None):
    params = validate(params)
    paths = paths or state_items.Paths()
    if params["mode"] == "drift":
        return _drift(params, state_record.load(params["path"], paths.root), paths)
    return state_record.record(params["path"], params["run_id"] or state_record.new_run_id(), params["planned"],
                               params["applied"], None if params["prune"] else (), check_mode, paths)


def _drift(params, state, paths):
    drift = []
    checked = 0
    for key in sorted(state["items"]):
        entry = state["items"][key]
        if not entry.get("applied"):
            continue
        checked += 1
        try:
            current = access.read_current(entry, paths)
        except state_items.ItemError as exc:
            drift.append(_drift_entry(entry, "unreadable: %s" % exc))
            continue
        if not state_items.same(entry, current, entry["after"]):
            drift.append(_drift_entry(entry, current))
    refused = checks.listed(state)
    return {"changed": False, "changes": [], "path": params["path"], "checked": checked, "drift": drift,
            "drifted": bool(drift), "items": len(state["items"]), "refused": refused,
            "warnings": [checks.warning(refused, "not checked")] if refused else []}


def _drift_entry(entry, current):
    shown = state_record.short if entry["how"] == "file" else (lambda value: value)
    return {"key": entry["key"], "area": entry["area"], "kind": entry["how"], "target": entry["target"],
            "recorded": shown(entry["after"]), "current": shown(current) if not isinstance(current, str)
            or entry["how"] != "file" else current, "recorded_by": entry.get("last_run")}
