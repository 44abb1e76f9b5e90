# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.serving_launch: a serving unit's launch command, set by a drop-in.

Why a drop-in and never the unit file: the vendor's unit (a package's, an image's, the
operator's own) stays byte for byte as it was, an upgrade of it is not blocked or overwritten,
and going back is removing one file that carries the collection's marker. systemd applies a
drop-in's ``ExecStart=`` after the unit's: an empty ``ExecStart=`` clears the unit's command
and the next line sets the new one (systemd.unit(5), "drop-in"; systemd.service(5): a service
that is not oneshot has exactly one).

The file is ``/etc/systemd/system/<unit>.d/<dropin_name>`` (default
``90-gpufleet-launch.conf``). It holds the command the experiments kept or the rollout
applies, and optionally ``Environment=`` lines; nothing else, so revert and the state checks
know exactly what it is (state/managed_paths.py, area ``serving_launch``).

The module only writes or removes the file (atomically, inside a transaction, read back). The
daemon-reload and the restart are Ansible's (ansible.builtin.systemd_service), so check mode,
handlers and rescue stay Ansible's too: RV(restart_required) says a restart is due.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_unit
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import launch_args

AREA = "serving_launch"
DEFAULT_DROPIN = serving_unit.DEFAULT_DROPIN
# Unit names as systemd allows them (systemd.unit(5)), without the \x escapes and a leading dot:
# the names state/managed_paths.py lets a revert put back.
UNIT_RE = re.compile(r"\A[A-Za-z0-9:_@-][A-Za-z0-9:_.@-]{0,249}\Z")
# The collection's own launch drop-ins: what managed_paths lets a revert remove.
DROPIN_RE = re.compile(r"\A[0-9]{2}-gpufleet-[a-z0-9_-]{1,60}\.conf\Z")
ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
MAX_ARGS = 4096
MAX_ARG = 8192

ARGUMENT_SPEC = dict(
    unit=dict(type="str", required=True),
    argv=dict(type="list", elements="str", default=[]),
    environment=dict(type="dict", default={}),
    prefix=dict(type="str", default=""),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    dropin_name=dict(type="str", default=DEFAULT_DROPIN),
)


class Paths:
    """Where the unit drop-ins live; everything hangs off ``root`` so tests use a temp tree."""

    def __init__(self, root="/"):
        self.root = root
        self.systemd = os.path.join(root, "etc", "systemd", "system")


def unit_name(name):
    """``name`` as serving_unit checks it (``.service`` added), and one a revert can put back:
    without systemd's ``\\x`` escapes or a leading dot (state/managed_paths.py). ModuleFailure
    naming the value."""
    full = serving_unit.unit_name(name, "unit")
    if not UNIT_RE.match(full):
        raise ModuleFailure("unit=%r: the collection records drop-ins only of units named with letters, digits "
                            "and :-_.@, not starting with a dot" % (name,))
    return full


def validate(params):
    params = with_defaults(ARGUMENT_SPEC, params)
    params["unit"] = unit_name(params["unit"])
    if not isinstance(params["dropin_name"], str) or not DROPIN_RE.match(params["dropin_name"]):
        raise ModuleFailure("dropin_name=%r must look like NN-gpufleet-NAME.conf (two digits, lowercase name): "
                            "only such a file is the collection's own" % (params["dropin_name"],))
    argv = params["argv"] or []
    if params["state"] == "present":
        if not argv:
            raise ModuleFailure("argv is empty: give the whole launch command (program and arguments), or state=absent")
        if len(argv) > MAX_ARGS:
            raise ModuleFailure("argv has %d words, more than %d" % (len(argv), MAX_ARGS))
        for index, word in enumerate(argv):
            if not isinstance(word, str) or "\0" in word or "\n" in word or "\r" in word or len(word) > MAX_ARG:
                raise ModuleFailure("argv[%d]=%r: a word may not hold NUL or a line break, nor pass %d characters"
                                    % (index, word, MAX_ARG))
        if not argv[0] or argv[0] != argv[0].strip():
            raise ModuleFailure("argv[0]=%r is not a program" % (argv[0],))
    env = params["environment"] or {}
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME_RE.match(name):
            raise ModuleFailure("environment: %r is not a variable name" % (name,))
        if value is None or isinstance(value, (dict, list)):
            raise ModuleFailure("environment: %s=%r is not a text value" % (name, value))
        text = str(value)
        if "\0" in text or "\n" in text or "\r" in text:
            raise ModuleFailure("environment: %s=%r holds NUL or a line break" % (name, text))
    if params["state"] == "absent" and (argv or env):
        raise ModuleFailure("state=absent removes the drop-in: leave argv and environment out")
    return params


def render(unit, argv, environment, prefix):
    """The drop-in's text: the marker, an empty ExecStart= that clears the unit's, the command."""
    lines = ["# Managed by gpufleet.tuning (serving_launch): the launch command of %s." % unit,
             "# The unit file itself is untouched; remove this file (or run playbooks/revert.yml) and",
             "# daemon-reload to go back to its own command.",
             "[Service]",
             "ExecStart=",
             "ExecStart=%s" % launch_args.render_exec(argv, prefix)]
    for name in sorted(environment):
        lines.append("Environment=%s" % launch_args.render_environment({name: environment[name]}))
    return "\n".join(lines) + "\n"


def run(params, check_mode=False, paths=None):
    """Write or remove the drop-in; the result dict, or ModuleFailure with nothing changed."""
    paths = paths or Paths()
    params = validate(params)
    unit = params["unit"]
    path = os.path.join(paths.systemd, "%s.d" % unit, params["dropin_name"])
    content = None
    if params["state"] == "present":
        try:
            content = render(unit, params["argv"], dict((k, str(v)) for k, v in params["environment"].items()),
                             params["prefix"])
        except ValueError as exc:
            raise ModuleFailure("nothing was changed, the command cannot be written as ExecStart=: %s" % exc)
    result = {"changed": False, "changes": [], "path": path, "unit": unit, "state": params["state"],
              "argv": list(params["argv"]) if content is not None else None,
              "restart_required": False, "daemon_reload_required": False, "diff": [], "plan": []}
    try:
        changes = managed_files.plan([managed_files.Wanted(path, content)])
    except managed_files.NotOwned as exc:
        raise ModuleFailure("refusing to %s %s: it was not written by gpufleet.tuning (no marker comment in its "
                            "first lines); nothing was changed: choose another dropin_name"
                            % ("remove" if content is None else "overwrite", exc.filename), result)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read %s, nothing was changed: %s" % (path, fileops.describe(exc)), result)
    result["plan"] = [change.describe() for change in changes]
    result["diff"] = managed_files.diff_entries(changes)
    result["changes"] = records.from_managed(AREA, changes)
    result["changed"] = bool(changes)
    result["restart_required"] = result["daemon_reload_required"] = bool(changes)
    if check_mode or not changes:
        return result
    tx = Transaction()
    try:
        managed_files.apply(changes, tx)
        if fileops.read_text(path) != content:
            raise OSError("%s does not hold the new command after the write" % path)
    except (OSError, IOError) as exc:
        err = tx.abort("failed to %s %s: %s" % ("remove" if content is None else "write", path, fileops.describe(exc)))
        raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[], restart_required=False,
                                                     daemon_reload_required=False))
    # An emptied <unit>.d folder this module made is left: systemd ignores an empty one.
    return result
