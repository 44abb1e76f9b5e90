# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.health_textfile: the node's health verdict for node_exporter.

node_exporter's textfile collector exports every ``*.prom`` file of its
``--collector.textfile.directory`` at each scrape; Debian's and Ubuntu's
prometheus-node-exporter package sets that to ``/var/lib/prometheus/node-exporter`` (its
/etc/default file) and creates the folder. A scheduler then acts on the metrics written there:
Slurm's NHC drains a node, a Kubernetes controller taints it, an alert fires.

The file is ``<directory>/<file_name>`` (default ``gpufleet.prom``), in the text exposition
format (formats/prometheus_text.py), with the collection's marker as a comment in its first
line, so a file of that name the collection did not write is refused, never overwritten or
removed (common/managed_files.py). It is written atomically: a temporary file beside it
(a hidden name not ending in ``.prom``, which the collector skips), written, fsynced, given its
mode, then renamed over it, so a scrape sees the old file or the new one and never half a
file; then it is read back.

Heartbeat metrics (the time of the last audit or tuning run) change at every run. A file that
differs from the wanted one only in their values is rewritten, so they stay fresh, but the run
reports no change (``changed`` false, ``changes`` empty, ``heartbeat_only`` true): a run that
found the node as before must not look like one that changed it.

The file is a derived report, not tuning: the module never records itself in the node's state
(no ``state_path``), and a revert does not touch it.
"""

from __future__ import annotations

import errno
import os
import re
import stat

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import prometheus_text as pt

AREA = "health_textfile"
# prometheus-node-exporter's --collector.textfile.directory on Debian and Ubuntu.
DEFAULT_DIRECTORY = "/var/lib/prometheus/node-exporter"
DEFAULT_FILE_NAME = "gpufleet.prom"
DEFAULT_MODE = "0644"
MAX_FILE_NAME = 255
_MODE_RE = re.compile(r"\A(?:0o?)?[0-7]{3}\Z")
HEADER = ("Managed by gpufleet.tuning (health_textfile): this node's health for node_exporter's textfile collector.",
          "Rewritten by every run; edits here are lost.")

SAMPLE_SPEC = dict(
    labels=dict(type="dict", default={}),
    value=dict(type="raw", required=True),
)
METRIC_SPEC = dict(
    name=dict(type="str", required=True),
    help=dict(type="str"),
    type=dict(type="str", choices=list(pt.TYPES), default="gauge"),
    samples=dict(type="list", elements="dict", default=[], options=SAMPLE_SPEC),
)
ARGUMENT_SPEC = dict(
    directory=dict(type="str", default=DEFAULT_DIRECTORY),
    file_name=dict(type="str", default=DEFAULT_FILE_NAME),
    metrics=dict(type="list", elements="dict", default=[], options=METRIC_SPEC),
    heartbeat=dict(type="list", elements="str", default=[]),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    mode=dict(type="raw", default=DEFAULT_MODE),
)


class Paths:
    """Where O(directory) is looked for: under ``root`` (``/`` on a node, a temp tree in tests)."""

    def __init__(self, root="/"):
        self.root = root

    def under(self, directory):
        return os.path.join(self.root, directory.lstrip("/"))


def file_mode(value):
    """O(mode) as permission bits: an octal text (``0644``, ``644``, ``0o644``) or the int YAML
    makes of an unquoted ``0644``. ModuleFailure naming the value for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    elif isinstance(value, str) and _MODE_RE.match(value.strip()):
        text = value.strip()
        mode = int(text[2:] if text.startswith("0o") else text, 8)
    else:
        mode = -1
    if not 0 <= mode <= 0o777:
        raise ModuleFailure("mode=%r is not a file mode: give octal permission bits as text, such as '0644'" % (value,))
    return mode


def _file_name(name):
    if not isinstance(name, str) or not name.endswith(".prom") or len(name) <= len(".prom"):
        raise ModuleFailure("file_name=%r must end in .prom: node_exporter's textfile collector reads only such files"
                            % (name,))
    if "/" in name or name.startswith(".") or len(name.encode("utf-8", "surrogateescape")) > MAX_FILE_NAME or \
            any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise ModuleFailure("file_name=%r must be a plain file name: no '/', not hidden (a leading dot), no control "
                            "characters, at most %d bytes" % (name, MAX_FILE_NAME))
    return name


def validate(params):
    """``params`` checked and normalised, or ModuleFailure naming the bad value (nothing read
    or written yet)."""
    params = with_defaults(ARGUMENT_SPEC, params)
    directory = params["directory"]
    if not isinstance(directory, str) or not directory or "\0" in directory or not os.path.isabs(directory):
        raise ModuleFailure("directory=%r must be an absolute path (node_exporter's --collector.textfile.directory, "
                            "%s on Debian and Ubuntu)" % (directory, DEFAULT_DIRECTORY))
    params["directory"] = os.path.normpath(directory)
    params["file_name"] = _file_name(params["file_name"])
    if params["state"] not in ("present", "absent"):
        raise ModuleFailure("state=%r is not one of present, absent" % (params["state"],))
    params["mode"] = file_mode(params["mode"])
    heartbeat = params["heartbeat"] or []
    if not isinstance(heartbeat, (list, tuple)):
        raise ModuleFailure("heartbeat=%r is not a list of metric names" % (heartbeat,))
    for index, name in enumerate(heartbeat):
        try:
            pt.metric_name(name)
        except ValueError as exc:
            raise ModuleFailure("heartbeat[%d]: %s" % (index, exc))
    params["heartbeat"] = list(heartbeat)
    metrics = params["metrics"] or []
    if params["state"] == "absent":
        if metrics:
            raise ModuleFailure("state=absent removes the file: leave metrics out")
        params["metrics"] = []
        return params
    if not metrics:
        raise ModuleFailure("metrics is empty: give at least one metric, or state=absent to remove the file")
    try:
        params["metrics"] = pt.check_metrics(metrics)
    except ValueError as exc:
        raise ModuleFailure("%s; nothing was written" % exc)
    # A heartbeat name without a metric this run is fine: a timestamp may be written only on
    # some runs (the tuning's, not the audit's alone).
    return params


def render(metrics):
    """The file's text: the marker, then the metrics."""
    return pt.render(metrics, comments=HEADER)


def _lstat(path):
    try:
        return os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise ModuleFailure("cannot look at %s, nothing was changed: %s" % (path, fileops.describe(exc)))


def _check_directory(directory, option):
    """True when ``directory`` is a real directory, False when it does not exist; ModuleFailure
    for a symlink or anything else."""
    st = _lstat(directory)
    if st is None:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise ModuleFailure("directory=%r: %s is a symlink; refusing to write through it (give the directory it "
                            "points to), nothing was changed" % (option, directory))
    if not stat.S_ISDIR(st.st_mode):
        raise ModuleFailure("directory=%r: %s is not a directory (it is %s), nothing was changed"
                            % (option, directory, fileops.kind(st.st_mode) or "a regular file"))
    return True


def _samples(text, heartbeat, path, warnings):
    """``{name{labels}: value}`` of a file's samples, heartbeat metrics left out."""
    if text is None:
        return {}
    try:
        found = pt.parse(text)
    except ValueError as exc:
        warnings.append("%s does not read as the Prometheus text format (%s); its values are not compared" % (path, exc))
        return {}
    return dict((pt.sample_key(name, labels), value) for name, labels, value in found if name not in heartbeat)


def run(params, check_mode=False, paths=None, tools=None):
    """Write or remove the textfile; the result dict, or ModuleFailure with nothing changed.

    ``tools`` is not used: the module runs no program.
    """
    del tools
    paths = paths or Paths()
    params = validate(params)
    directory = paths.under(params["directory"])
    path = os.path.join(directory, params["file_name"])
    present = params["state"] == "present"
    mode = params["mode"]
    heartbeat = set(params["heartbeat"])
    warnings = []
    result = {"changed": False, "changes": [], "path": path, "state": params["state"], "samples": 0,
              "heartbeat_only": False, "diff": [], "msg": ""}

    if not _check_directory(directory, params["directory"]):
        if present:
            raise ModuleFailure("directory=%r: %s does not exist; it is node_exporter's --collector.textfile.directory "
                                "(its package creates it): install node_exporter, or set directory to the one it "
                                "reads. Nothing was created" % (params["directory"], directory), result)
        result["msg"] = "%s is absent (its directory does not exist)" % path
        return result
    st = _lstat(path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise ModuleFailure("refusing to %s %s: it is a symlink (to %s); the collection writes only a regular file "
                            "there, nothing was changed" % ("write" if present else "remove", path, os.readlink(path)),
                            result)
    before_mode = stat.S_IMODE(st.st_mode) if st is not None else None

    content = None
    if present:
        try:
            content = render(params["metrics"])
        except ValueError as exc:
            raise ModuleFailure("%s; nothing was written" % exc, result)
        result["samples"] = sum(len(metric["samples"]) for metric in params["metrics"])
        if not mode & 0o044:
            warnings.append("mode=%04o lets only the file's owner read %s; node_exporter runs as its own user"
                            % (mode, path))
    try:
        changes = managed_files.plan([managed_files.Wanted(path, content, mode=mode)])
    except managed_files.NotOwned as exc:
        raise ModuleFailure("refusing to %s %s: it was not written by gpufleet.tuning (no marker comment in its first "
                            "lines); nothing was changed: move it away or choose another file_name"
                            % ("remove" if content is None else "overwrite", exc.filename), result)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read %s, nothing was changed: %s" % (path, fileops.describe(exc)), result)

    if changes:
        change = changes[0]
        before = change.before
        only_heartbeat = (content is not None and before is not None and change.before_owner is None
                          and change.before_mode is None and before != content
                          and pt.masked(before, heartbeat) == pt.masked(content, heartbeat))
        result["heartbeat_only"] = bool(only_heartbeat)
        if not only_heartbeat:
            result["diff"] = managed_files.diff_entries(changes)
            result["changes"] = [records.file_change(AREA, path, before, content, before_mode,
                                                     mode if content is not None else None)]
            result["changes"].extend(records.values(AREA, _samples(before, heartbeat, path, warnings),
                                                    _samples(content, heartbeat, path, warnings)))
            result["changed"] = True
    result["msg"] = _message(path, content, changes, result, check_mode)
    if warnings:
        result["warnings"] = warnings
    if check_mode or not changes:
        return result

    tx = Transaction()
    try:
        managed_files.apply(changes, tx)
        if content is None:
            if os.path.lexists(path):
                raise OSError("%s is still there after its removal" % path)
        else:
            if fileops.read_text(path) != content:
                raise OSError("%s does not hold the new metrics after the write" % path)
            if stat.S_IMODE(os.lstat(path).st_mode) != mode:
                raise OSError("%s does not have mode %04o after the write" % (path, mode))
    except (OSError, IOError) as exc:
        err = tx.abort("failed to %s %s: %s" % ("remove" if content is None else "write", path, fileops.describe(exc)))
        raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[], heartbeat_only=False))
    return result


def _message(path, content, changes, result, check_mode):
    if not changes:
        return "%s is up to date (%d samples)" % (path, result["samples"]) if content is not None else "%s is absent" % path
    if content is None:
        return ("would remove %s" if check_mode else "removed %s") % path
    if result["heartbeat_only"]:
        return "%s: only the heartbeat values changed; %s" % (
            path, "would refresh them" if check_mode else "refreshed them (not a change)")
    return "%s %s (%d samples)" % ("would write" if check_mode else "wrote", path, result["samples"])
