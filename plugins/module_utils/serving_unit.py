# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.serving_unit: a serving unit's launch command as systemd runs it.

The serving experiments and the rollout change a server's flags through the collection's own
drop-in (serving_launch); to do that they need the command the unit runs now, word for word,
which server it is and where its own arguments start, and the command the vendor's unit runs
without that drop-in (to go back to). This reads all of it from the unit files with systemd's
rules (serving/unit_file.py) and the server's flags with serving/launch_args.py; it never asks
systemctl, so it works the same in a container, a chroot and a test tree.

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)`` returns the result or
raises ModuleFailure; ``paths`` is a Paths(root); ``tools`` is unused. It only reads, so
``changes`` is always empty and check mode is the same run.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import launch_args
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import unit_file

DEFAULT_DROPIN = "90-gpufleet-launch.conf"
DROPIN_DIR = "/etc/systemd/system"
_UNIT_CHARS = re.compile(r"\A[A-Za-z0-9:_.@\\-]+\Z")
_DROPIN = re.compile(r"\A[A-Za-z0-9_@:+-][A-Za-z0-9_.@:+-]{0,200}\.conf\Z")

ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    dropin_name=dict(type="str", default=DEFAULT_DROPIN),
)


class Paths:
    """Where the unit files are: everything hangs off ``root`` so tests use a temp tree."""

    def __init__(self, root="/"):
        self.root = root


def unit_name(name, option="name"):
    """``name`` as a service unit name (``.service`` added when it has no type); ModuleFailure
    naming the value (as ``option``) when systemd would not accept it."""
    if not isinstance(name, str) or not name.strip():
        raise ModuleFailure("%s=%r is empty: give the serving unit, such as vllm.service" % (option, name))
    full = name if name.endswith(unit_file.SUFFIX) else name + unit_file.SUFFIX
    if not _UNIT_CHARS.match(name) or len(full) > 255:
        raise ModuleFailure("%s=%r is not a systemd unit name: only ASCII letters, digits and "
                            "':-_.\\@' (at most 255 characters), such as vllm.service" % (option, name))
    prefix, _dot, kind = name.rpartition(".")
    if prefix and kind in ("socket", "target", "timer", "mount", "automount", "swap", "path", "slice",
                           "scope", "device"):
        raise ModuleFailure("%s=%r is a .%s unit: give the service that runs the server" % (option, name, kind))
    if not unit_file.SERVICE_NAME.match(full) or unit_file.parts(full)[1] == "":
        raise ModuleFailure("%s=%r is not a service systemd can run (one '@' with an instance after it, "
                            "a name before it), such as vllm.service or sglang@0.service" % (option, name))
    return full


def validate(params):
    params = with_defaults(ARGUMENT_SPEC, params)
    params["name"] = unit_name(params["name"])
    dropin = params["dropin_name"]
    if not isinstance(dropin, str) or not _DROPIN.match(dropin):
        raise ModuleFailure("dropin_name=%r is not a drop-in file name: one name ending in .conf, "
                            "without '/' or a leading dot, such as %s" % (dropin, DEFAULT_DROPIN))
    return params


def _sha256(root, path):
    """sha256 of the file at the target's ``path``; None when it is absent."""
    target = unit_file.chase(root, path) if path else None
    data = fileops.read_bytes(unit_file.host_path(root, target)) if target else None
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _command(unit, warnings):
    """(argv_raw, prefix, environment, argv) of the one command the unit runs."""
    where = ", ".join([unit.fragment_path] + unit.dropins)
    if not unit.exec_start:
        raise ModuleFailure("%s sets no ExecStart= (read %s): there is no server command to read" % (unit.name, where))
    if len(unit.exec_start) > 1:
        raise ModuleFailure("%s runs %d commands (ExecStart= at %s): a Type=oneshot service with several commands "
                            "is not a server" % (unit.name, len(unit.exec_start), ", ".join(unit.exec_start_sources)))
    argv_raw, prefix = unit.exec_start[0], unit.exec_start_prefix
    try:
        environment = unit_file.environment_of(unit, warnings)
    except unit_file.UnitFileError as exc:
        raise ModuleFailure(str(exc))
    argv, unset = unit_file.expand(argv_raw, environment, prefix)
    if unset:
        warnings.append("%s: ExecStart= uses $%s, which Environment= and EnvironmentFile= do not set; read as empty "
                        "(the service manager may set it)" % (unit.name, ", $".join(unset)))
    return argv_raw, prefix, environment, argv


def _server(argv, prefix):
    """(kind, start, program index) of ``argv``; with the ``@`` prefix argv[1] is only the name
    the program is shown as, so it is left out of the recognition."""
    if "@" not in prefix:
        return launch_args.locate(argv)
    kind, start, program = launch_args.locate([argv[0]] + argv[2:])
    return kind, start + 1 if start else start, program + 1 if program else program


def run(params, check_mode=False, paths=None, tools=None):
    """Read the unit; return the module result or raise ModuleFailure. Only reads."""
    params = validate(params)
    paths = paths or Paths()
    name, warnings = params["name"], []
    dropin = "%s/%s.d/%s" % (DROPIN_DIR, name, params["dropin_name"])
    try:
        unit = unit_file.load(name, paths.root)
        warnings.extend(unit.warnings)
        argv_raw, prefix, environment, argv = _command(unit, warnings)
        mine = unit_file.chase(paths.root, dropin)
        collection = dropin if mine and mine in [unit_file.chase(paths.root, d) for d in unit.dropins] else None
        vendor_argv = argv
        if collection:
            try:
                vendor_argv = _command(unit_file.load(name, paths.root, exclude=(dropin,)), [])[3]
            except (ModuleFailure, unit_file.UnitFileError) as exc:
                vendor_argv = None
                warnings.append("without %s the unit runs no single command: %s" % (
                    dropin, getattr(exc, "message", None) or str(exc)))
        fragment_sha256, dropin_sha256 = _sha256(paths.root, unit.fragment_path), _sha256(paths.root, collection)
    except unit_file.UnitNotFound as exc:
        raise ModuleFailure("%s is not installed: no unit file in %s" % (name, ", ".join(exc.looked)))
    except unit_file.UnitFileError as exc:
        raise ModuleFailure(str(exc))
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read the unit %s: %s" % (name, fileops.describe(exc)))
    kind, start, program = _server(argv, prefix)
    try:
        command = launch_args.render_exec(argv, prefix)
    except ValueError as exc:
        command = None
        warnings.append("the command cannot be written back as one ExecStart= line: %s" % exc)
    return {
        "changed": False, "changes": [], "unit": unit.name, "fragment_path": unit.fragment_path,
        "fragment_sha256": fragment_sha256, "dropins": unit.dropins, "argv": argv, "argv_raw": argv_raw,
        "prefix": prefix, "program": argv[program] if program < len(argv) else argv[0], "args_start": start,
        "kind": kind, "flags": launch_args.flags_of(argv, start), "environment": environment,
        "environment_files": [dict(item, found=_found(paths.root, item["path"])) for item in unit.environment_files],
        "command": command, "collection_dropin": collection, "collection_dropin_sha256": dropin_sha256,
        "vendor_argv": vendor_argv, "user": unit.user, "working_directory": unit.working_directory,
        "type": unit.type, "warnings": warnings,
    }


def _found(root, pattern):
    """Whether an EnvironmentFile= pattern matches a file now."""
    if root in ("", "/"):
        return bool(glob.glob(pattern))
    return bool(glob.glob(os.path.join(glob.escape(root), pattern.lstrip("/"))))
