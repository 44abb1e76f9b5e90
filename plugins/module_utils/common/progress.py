# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How far a long measurement has got, in a small file another process can read while it runs.

Why: the P2P matrix of an 8-GPU node and an inference benchmark sweep take minutes. The roles
run them as async tasks and follow them with gpufleet.tuning.job_progress, which reads this file
and says where the measurement is, so an operator watching a rollout does not stare at a silent
task. The file is one JSON object, replaced atomically on each step (a reader never sees half
of it): ``done`` and ``total`` steps, the step ``what`` is doing now, ``elapsed_s`` since the
start and ``updated`` (epoch seconds).

A path of None gives a Progress that does nothing, so an engine calls it unconditionally.
Progress is best effort: a write that fails (a full disk, a removed folder) is dropped and
the measurement goes on.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

MODE = 0o600


class Progress:
    """Steps of one measurement, written to ``path`` (nothing when ``path`` is None)."""

    def __init__(self, path=None, total=0, clock=time.monotonic):
        self.path = path
        self.total = int(total)
        self.done = 0
        self.clock = clock
        self.started = clock()
        self.what = ""
        self.update(0, self.total, "starting")

    def update(self, done, total=None, what=None):
        """Record ``done`` of ``total`` steps (total unchanged when None) and the step now."""
        self.done = int(done)
        if total is not None:
            self.total = int(total)
        if what is not None:
            self.what = str(what)
        if not self.path:
            return
        state = {"done": self.done, "total": self.total, "what": self.what,
                 "elapsed_s": round(self.clock() - self.started, 1), "updated": round(time.time(), 3)}
        try:
            fileops.write_atomic(self.path, json.dumps(state, sort_keys=True) + "\n", mode=MODE)
        except (OSError, ValueError):
            pass

    def step(self, what=None):
        """One more step done; ``what`` names the next one."""
        self.update(self.done + 1, None, what)


def read(path):
    """The progress written at ``path`` as a dict, or None when there is none (yet) or it
    cannot be read."""
    try:
        with open(path) as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def describe(state):
    """One line for people: ``12/28 GPU 2 -> GPU 5, 48.0 s``; '' for no progress."""
    if not state:
        return ""
    total = state.get("total") or 0
    done = state.get("done") or 0
    head = "%s/%s" % (done, total) if total else str(done)
    what = state.get("what") or ""
    return "%s%s, %s s" % (head, (" " + what) if what else "", state.get("elapsed_s", "?"))


def remove(path):
    """Drop the progress file once the measurement is over."""
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass
