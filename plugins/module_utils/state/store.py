# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's record of what this collection changed: /var/lib/gpufleet-tuning/state.json.

Why on the node and not on the controller: the node is what a revert acts on, a fleet is
reverted by whatever controller is at hand, and the record must survive the run that wrote
it. Why the whole before-content of files and not a digest: a revert must write it back. The
file is root's alone (0600), since config files can hold secrets.

Shape::

    {"version": 1,
     "items": {"sysctl:vm.swappiness": {"key", "how", "target", "area", "reboot", "before",
                                         "after", "applied", "first_run", "first_time",
                                         "last_run", "last_time"}, ...},
     "runs": [{"run", "time", "action", "items"}, ...]}   # the last RUNS_KEPT runs

The first ``before`` wins: an item already recorded keeps its before when a later run plans or
changes it again, so a revert goes back to the node as it was before the collection first
touched it. ``applied`` says a run really changed the item (planned items that a failed run
rolled back, or reboot-required ones never applied, stay unapplied). A file also keeps the
content the collection last left (``after_content``), so that one later run alone can be undone
(``run_before``, see run_target) without writing the record in a run that changes nothing.

Every item is checked as it is loaded (state/checks.py): one the collection's modules could not
have recorded (a crafted or damaged file) goes to ``refused`` (``{key: {"entry", "why"}}``), out of
``items``, so no reader acts on it; dump() writes it back as it was, so the record loses nothing.
"""

from __future__ import annotations

import json
import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import checks
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items

STATE_PATH = "/var/lib/gpufleet-tuning/state.json"
VERSION = 1
RUNS_KEPT = 50
MODE = 0o600


class StoreError(Exception):
    """The state file cannot be read or is not this collection's; the message names it."""


def empty():
    return {"version": VERSION, "items": {}, "runs": [], "refused": {}}


def load(path, root="/"):
    """The state in ``path``; an empty state when the file does not exist. Items the collection
    does not restore are set aside in ``refused`` (checks.refusal; ``root``: the node's /, which
    recorded paths start with)."""
    try:
        data = fileops.read_bytes(path)
    except OSError as exc:
        raise StoreError("cannot read the state file %s: %s" % (path, fileops.describe(exc)))
    if data is None:
        return empty()
    try:
        state = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError("the state file %s is not valid JSON (%s); move it aside to start a new record, "
                         "knowing that a revert then cannot go back past it" % (path, exc))
    if not isinstance(state, dict) or not isinstance(state.get("items"), dict) or state.get("version") != VERSION:
        raise StoreError("the state file %s is not a version %d gpufleet-tuning state (items map missing or "
                         "another version)" % (path, VERSION))
    state.setdefault("runs", [])
    state["refused"] = {}
    for key in sorted(state["items"]):
        why = checks.refusal(key, state["items"][key], root)
        if why:
            state["refused"][key] = {"entry": state["items"].pop(key), "why": why}
    return state


def dump(state):
    """The bytes written: stable key order, so an unchanged state is byte for byte the same. The
    refused items go back as they were read, unless an item of the same key replaced one."""
    out = dict((key, value) for key, value in state.items() if key != "refused")
    refused = state.get("refused") or {}
    if refused:
        out["items"] = dict((key, value["entry"]) for key, value in refused.items())
        out["items"].update(state["items"])
    return (json.dumps(out, indent=1, sort_keys=True) + "\n").encode("utf-8")


def save(path, state):
    """Write atomically, mode 0600, creating /var/lib/gpufleet-tuning when needed."""
    fileops.write_atomic(path, dump(state), mode=MODE)


def note_run(state, run, time, action, keys):
    """Append one line of history; the oldest lines go past RUNS_KEPT."""
    state["runs"].append({"run": run, "time": time, "action": action, "items": sorted(keys)})
    del state["runs"][:-RUNS_KEPT]


def add_planned(state, items, run, time):
    """Record the items a run is about to change, before it changes them; return the new keys
    and the known ones marked.

    An item already recorded keeps its first before; what it holds now is kept as this run's
    ``run_before``, so that this run alone can be undone (a rollout's automatic revert)."""
    added, marked = [], []
    for item in items:
        entry = state["items"].get(item["key"])
        if entry is not None:
            # Only when someone changed it since the collection last did: otherwise what this run
            # finds is what the record says it left (after, after_content), and the record
            # stays as it is (a rerun that changes nothing writes nothing).
            if not unchanged_since(entry, item["before"]) and entry.get("run_before") != {"run": run, "value": item["before"]}:
                entry["run_before"] = {"run": run, "value": item["before"]}
                marked.append(item["key"])
            continue
        entry = dict(item)
        entry.update({"after": None, "applied": False, "first_run": run, "first_time": time,
                      "last_run": None, "last_time": None})
        state["items"][item["key"]] = entry
        added.append(item["key"])
    return added, marked


def add_applied(state, items, run, time):
    """Record what a run changed: the after of known items; new ones with the record's before
    (a value, a module state, or a file that did not exist; a file's earlier content is known
    only when its plan was recorded first). Returns (new keys, updated keys)."""
    added, updated = [], []
    for item in items:
        entry = state["items"].get(item["key"])
        if entry is None:
            entry = dict(item)
            entry.update({"first_run": run, "first_time": time})
            state["items"][item["key"]] = entry
            added.append(item["key"])
        elif entry.get("after") == item["after"] and entry.get("applied") and (entry.get("run_before") or {}).get("run") != run:
            # Left as the record says: unless this run found it changed (its plan marked
            # run_before) and set it back, which undoing this run alone must put back.
            continue
        else:
            if (entry.get("run_before") or {}).get("run") != run and entry.get("first_run") != run:
                # not marked by this run's plan: what it found is the record's before for a
                # value, and for a file the content the collection last left (when it is known),
                # or, when no run applied it yet, what the earlier run's plan found (never None,
                # which would read as "did not exist" and have undoing this run delete the file)
                entry["run_before"] = {"run": run, "value": item["before"] if item["how"] != "file"
                                       else entry.get("after_content", entry.get("after")) if entry.get("applied")
                                       else entry.get("before")}
            updated.append(item["key"])
        entry.update({"after": item["after"], "applied": True, "last_run": run, "last_time": time})
        if "after_content" in item:
            entry["after_content"] = item["after_content"]
    return added, updated


def unchanged_since(entry, found):
    """Whether ``found`` (a plan's before; a file's content snapshot) is what the record says the
    collection last left."""
    if not entry.get("applied"):
        return False
    if entry["how"] == "file":
        return state_items.same(entry, state_items.file_digest(found), entry.get("after"))
    return state_items.same(entry, found, entry.get("after"))


def prune_planned(state, run, applied_keys, only=None):
    """Drop the items this run planned and did not apply (a part that found nothing to do, or
    one a failure rolled back): their recorded before would otherwise outlive the run and
    shadow the before a later run finds. ``only``: a set of keys, the one module's plan (other
    modules of the same run keep theirs); None, every item of the run. Returns the dropped keys."""
    dropped = [key for key, entry in state["items"].items()
               if entry.get("first_run") == run and not entry.get("applied") and key not in applied_keys
               and (only is None or key in only)]
    for key in dropped:
        del state["items"][key]
    return dropped


def run_target(entry, run):
    """What undoing ``run`` alone puts back: the first before when that run first changed the
    item, else what the run found (``run_before``); None and False when the run did not touch it."""
    if entry.get("first_run") == run:
        return entry.get("before"), True
    if (entry.get("run_before") or {}).get("run") == run and entry.get("last_run") == run:
        return entry["run_before"]["value"], True
    return None, False


def restorable(entry, before=None, use_before=False):
    """False for a file whose earlier content was never captured (only its digest is known)."""
    before = before if use_before else entry.get("before")
    return not (entry["how"] == "file" and isinstance(before, dict) and "content_b64" not in before
                and "link" not in before)


def exists(path):
    return os.path.exists(path)
