# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tuning module's own before-state: what it is about to change, recorded on the node first.

Why in the module and not in the role: a record kept by tasks around the tuning (one before,
one after) is lost when the controller dies, or the connection drops, between them, and then
playbooks/revert.yml has nothing to put back. Here the module that changes the node writes the
record itself, in the same process, before it writes anything:

1. plan: the engine's own check mode, with the same options (its change records say what it
   is about to change, with the values it read);
2. record the before-state of those targets in the node's record (``state.json``, through
   state/record.py: values as the plan read them, files' whole content as it is now; an item
   recorded by an earlier run keeps its first before);
3. apply: the engine for real (all or nothing, its own transaction);
4. mark what it really changed applied, with the value it was left at, and drop what it
   planned and did not change. Also when the apply failed: the engine restored what it had
   changed, and a loop-shaped result (lxc_memlock's containers) keeps the records of the items
   that did change.

In check mode only the plan runs, and the result says what would be recorded; nothing is
written. A run that plans no change reads and writes no record.

The engine is any callable ``run(check_mode) -> result`` that raises ModuleFailure; the records
are its result's ``changes`` (a loop-shaped result's items' own). ``options`` splits the record
options off a module's parameters; ``ARGUMENT_SPEC`` is what a recording module adds to its
engine's spec (doc fragment gpufleet.tuning.state_record).
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import record as state_record

ARGUMENT_SPEC = dict(
    state_path=dict(type="path"),
    run_id=dict(type="str"),
)


def spec(engine_spec):
    """A recording module's argument spec: its engine's and the record's options."""
    both = dict(engine_spec)
    overlap = sorted(set(both) & set(ARGUMENT_SPEC))
    if overlap:
        raise ValueError("the engine's spec already has option(s) %s" % ", ".join(overlap))
    both.update(ARGUMENT_SPEC)
    return both


def options(params):
    """(the engine's parameters, the record's options): ``params`` without state_path and run_id,
    and those two checked. ModuleFailure names a bad value."""
    engine_params = dict((key, value) for key, value in params.items() if key not in ARGUMENT_SPEC)
    record = {"state_path": params.get("state_path"), "run_id": params.get("run_id")}
    if record["run_id"] is not None and not str(record["run_id"]).strip():
        raise ModuleFailure("run_id=%r is empty: leave it out for a new one" % record["run_id"])
    if record["state_path"] is not None:
        # The record's own checks (an absolute path), before anything is read.
        state_record.check(record["state_path"], record["run_id"])
    return engine_params, record


def records_of(result):
    """The records ``result`` claims (records.claimed: a loop-shaped result's items')."""
    return records.claimed(result)


def _keys(change_records, paths):
    return set(item["key"] for item in state_record.items_of(change_records, paths))


def run(engine_run, check_mode, record, paths=None):
    """The engine's result, with its before-state recorded around it when ``record`` names a
    state file (``options()``' second value). The result gains ``state_record``: the record's path and
    what was (or, in check mode, would be) recorded, updated and dropped."""
    if record is None or record.get("state_path") is None:
        return engine_run(check_mode)
    paths = paths or state_items.Paths()
    try:
        plan = engine_run(True)
    except ModuleFailure as exc:
        # A loop-shaped engine (lxc_memlock over several containers) fails after trying every
        # item: the others are applied all the same, as without a record, so their plan stands.
        if check_mode or not isinstance(exc.partial.get("results"), list):
            raise
        plan = dict(exc.partial, failed=False)
    planned = records_of(plan)
    run_id = record.get("run_id") or state_record.new_run_id()
    if check_mode:
        if planned:
            plan["state_record"] = _state(state_record.record(record["state_path"], run_id, planned, planned, (), True, paths))
        return plan
    before = None
    if planned:
        # Before anything is written: what the plan names, as it is now (nothing dropped: the
        # after-record drops what this call planned and did not change).
        before = state_record.record(record["state_path"], run_id, planned, [], (), False, paths)
    planned_keys = _keys(planned, paths)
    try:
        result = engine_run(False)
    except ModuleFailure as exc:
        applied = records_of(dict(exc.partial, failed=False))
        try:
            after = _after(record, run_id, applied, planned_keys, paths)
        except ModuleFailure as record_failure:
            exc.partial["state_record_error"] = record_failure.message
        else:
            exc.partial["state_record"] = _state(before, after)
        raise
    applied = records_of(result)
    try:
        after = _after(record, run_id, applied, planned_keys, paths)
    except ModuleFailure as exc:
        partial = dict(result)
        partial.pop("changes", None)
        raise ModuleFailure("the change was applied, but the record of what it changed was not written: %s "
                            "(applied: %s)" % (exc.message, ", ".join(rec["target"] for rec in applied) or "nothing"),
                            partial)
    result["state_record"] = _state(before, after)
    return result


def _after(record, run_id, applied, planned_keys, paths):
    """Mark ``applied`` and drop the planned keys it does not name; None when there is neither."""
    if not applied and not planned_keys:
        return None
    return state_record.record(record["state_path"], run_id, [], applied, planned_keys, False, paths)


def _state(*written):
    """What the record calls did, merged: the path, the run, the keys recorded, updated and
    dropped, and whether the file was (or would be) written."""
    out = {"path": None, "run_id": None, "recorded": [], "updated": [], "dropped": [], "written": False}
    for part in written:
        if not part:
            continue
        out["path"], out["run_id"] = part["path"], part["run_id"]
        for key in ("recorded", "updated", "dropped"):
            out[key] = sorted(set(out[key]) | set(part[key]))
        out["written"] = out["written"] or bool(part["changed"])
    return out


def run_module(params, check_mode, engine, paths=None):
    """A recording module's whole run: ``engine(engine_params, check_mode)`` with its
    before-state recorded when ``params`` give state_path (``run()``)."""
    engine_params, record = options(params)
    return run(lambda check: engine(engine_params, check), check_mode, record, paths)
