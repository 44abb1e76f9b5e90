# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make the fleet page, ARTIFACTS/index.html, from the records in the artifacts folder.

Why an action plugin: the page is the controller's own file, made from the controller's own
files (every host's audit.json, verify.json and benchmark records, the fleet's audit, drift and
rollout records), so it is read and written in the controller process, as artifact_files writes
the records: no module is sent anywhere, and no file crosses a connection.

The reading and the rendering are plugin_utils/report (collect.py, charts.py, page.py), pure
functions of the folder that only the controller runs; here are the checks and the write. The
artifacts folder may be shared with other local users, so nothing is done by path after a
check (plugin_utils/artifact_fs.py says why): the folder (an absolute path) is opened once,
component by component, never through a symbolic link and never when it or a folder above it
is writable by others without the sticky bit; the records are read relative to that descriptor
(a link, FIFO, socket or device where a record should be is left out with a note, and nothing
blocks); the page must be a regular file or absent, is compared through the same descriptor,
and is written whole and atomically in it (a temporary file created there, renamed over the
name, which replaces a link swapped in meanwhile instead of following it), only when its bytes
or mode differ, so a second run over the same records changes nothing. In check mode nothing
is written and ``changed`` says whether a write was due.
"""

from __future__ import annotations

import hashlib
import os
import re

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_fs
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import page

NAME = "fleet_report"
PAGE = "index.html"
_MODE = re.compile(r"^0?[0-7]{3}\Z")
_TITLE_MAX = 200


def _fail(message):
    raise AnsibleActionFail("%s: %s" % (NAME, message))


def _mode(value):
    text = to_text(value)
    if not _MODE.match(text):
        _fail("mode must be an octal mode such as '0644', got %r" % (value,))
    return int(text, 8)


def _title(value):
    if value is None:
        return page.TITLE
    if not isinstance(value, str) or not value.strip() or len(value) > _TITLE_MAX or "\0" in value:
        _fail("title must be a non-empty text of at most %d characters, got %r" % (_TITLE_MAX, value))
    return value


def _open_root(folder):
    """The artifacts folder's descriptor, opened once without following a link."""
    if not isinstance(folder, str) or not folder or "\0" in folder or not os.path.isabs(folder):
        _fail("path must be the absolute path of the artifacts folder, got %r" % (folder,))
    try:
        return artifact_fs.open_dir(folder)
    except FileNotFoundError:
        _fail("the artifacts folder %s does not exist: there is nothing to report (run the audit, "
              "playbooks/tune.yml or playbooks/rollout.yml first)" % folder)
    except artifact_fs.Refused as exc:
        _fail("%s; nothing was written" % exc)
    except OSError as exc:
        _fail("cannot open %s: %s; nothing was written" % (folder, fileops.describe(exc)))


def _plan(fd, folder, title, mode):
    target = os.path.join(folder, PAGE)
    try:
        artifact_fs.check_file(fd, PAGE, where=folder)  # a link or a FIFO there: refused before any read
        model = collect.collect(folder, root_fd=fd)
        data = to_bytes(page.render(model, _title(title)), errors="surrogate_or_strict")
        changed = not artifact_fs.same(fd, PAGE, data, mode, where=folder)
    except artifact_fs.Refused as exc:
        _fail("%s; nothing was written" % exc)
    except OSError as exc:
        _fail("cannot examine %s: %s; nothing was written" % (target, fileops.describe(exc)))
    return {"path": target, "content": data, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "changed": changed, "model": model}


def plan(folder, title=None, mode=0o644):
    """What writing the page of ``folder`` would do, checked before any write: path, content
    (bytes), size, sha256, changed, and the model's summary (hosts, notes)."""
    with artifact_fs.closing(_open_root(folder)) as fd:
        return _plan(fd, folder, title, mode)


def make(folder, title=None, mode=0o644, check_mode=False):
    """plan() and, unless ``check_mode``, the page written when it changed: all through one
    descriptor of the folder, so no swap between the checks and the write can redirect it."""
    with artifact_fs.closing(_open_root(folder)) as fd:
        planned = _plan(fd, folder, title, mode)
        if planned["changed"] and not check_mode:
            try:
                artifact_fs.write_file(fd, PAGE, planned["content"], mode, where=folder)
            except artifact_fs.Refused as exc:
                _fail("%s; nothing was written" % exc)
            except OSError as exc:
                _fail("writing %s failed: %s" % (planned["path"], fileops.describe(exc)))
    return planned


def summary(model):
    """The counts the task returns, from the page's model."""
    hosts = model["hosts"]
    rollout = model.get("rollout")
    return {
        "hosts": len(hosts),
        "findings": sum(len((h.get("audit") or {}).get("findings") or []) for h in hosts),
        "p2p_measured": sum(1 for h in hosts if (h.get("p2p") or {}).get("status") == "measured"),
        "p2p_short": sorted(h["name"] for h in hosts if (h.get("p2p") or {}).get("short")),
        "benchmarked": sum(1 for h in hosts if h.get("benchmark")),
        "drifted": sorted(h["name"] for h in hosts if "drift" in h["attention"]),
        "needs_a_look": [h["name"] for h in hosts if collect.needs_a_look(h)],
        "rollout": {"run_id": rollout["run_id"], "status": rollout["status"], "verdict": rollout["verdict"]}
        if rollout else None,
    }


class ActionModule(ActionBase):
    """gpufleet.tuning.fleet_report: documented in plugins/modules/fleet_report.py."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "title", "mode"))  # ActionBase refuses others
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        mode = _mode(args.get("mode", "0644"))
        planned = make(args.get("path"), args.get("title"), mode, self._task.check_mode)
        result.update(changed=planned["changed"], path=planned["path"], size=planned["size"],
                      sha256=planned["sha256"], notes=list(planned["model"]["notes"]),
                      summary=summary(planned["model"]))
        return result
