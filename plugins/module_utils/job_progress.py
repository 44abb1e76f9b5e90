# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Follow an async job: wait a while for it, then say where it is.

Why a module rather than ansible.builtin.async_status in an ``until`` loop: a retry loop prints
only "FAILED - RETRYING", never how far the job got. This waits up to ``wait_s`` on the node
(one call per interval, not one per second), then returns whether the job finished and the
progress its module keeps (common/progress.py), which the role prints before it waits again.

A job is finished when its results file in the async folder no longer says ``started``:
ansible's async wrapper writes ``{"started": 1, "finished": 0, ...}`` when it starts the job
and replaces it with the module's result at the end (async_status reads it the same way). The
result itself is left to async_status, which the role calls once this says finished.
"""

from __future__ import annotations

import json
import os
import re
import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import numbers
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

ARGUMENT_SPEC = dict(
    jid=dict(type="str", required=True),
    progress_path=dict(type="path"),
    wait_s=dict(type="float", default=10.0),
    async_dir=dict(type="path", default="~/.ansible_async"),
)

MAX_WAIT_S = 600.0
# ansible-core's job ids: "j" and digits, a dot, the wrapper's pid; no path separators.
_JID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")


def job_state(path):
    """'running', 'finished', or 'missing' for the async results file at ``path``. A file that
    does not parse is being written: running."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        raise ModuleFailure("cannot read the async job file %s: %s" % (path, exc.strerror or exc))
    try:
        data = json.loads(text)
    except ValueError:
        return "running"
    if isinstance(data, dict) and data.get("started") and not data.get("finished"):
        return "running"
    return "finished"


def run(params, check_mode=False, clock=time.monotonic, sleep=time.sleep):
    """Wait up to wait_s for the job; return finished, progress and a line for people."""
    jid = params["jid"]
    if not isinstance(jid, str) or not _JID.match(jid):
        raise ModuleFailure("jid=%r is not an async job id (the ansible_job_id of a task run with async)" % (jid,))
    try:
        wait_s = numbers.finite_number("wait_s", params["wait_s"], 0, MAX_WAIT_S)
    except numbers.NumberError as exc:
        raise ModuleFailure(str(exc))
    path = os.path.join(os.path.expanduser(params["async_dir"]), jid)
    started = clock()
    state = job_state(path)
    while state != "finished" and clock() - started < wait_s:
        sleep(min(1.0, max(0.0, wait_s - (clock() - started))))
        state = job_state(path)
    if state == "missing":
        raise ModuleFailure("no async job %s in %s: it never started, or it ran under another user or "
                            "async folder (async_dir)" % (jid, os.path.dirname(path)))
    found = progress.read(params["progress_path"]) if params.get("progress_path") else None
    finished = state == "finished"
    line = "finished" if finished else (progress.describe(found) or "running, no progress reported yet")
    return {"changed": False, "changes": [], "finished": finished, "progress": found, "msg": line,
            "waited_s": round(clock() - started, 1), "job_file": path}
