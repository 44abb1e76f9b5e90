# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a run's records (audit.json, system-improve.md, fleet-audit.*) into a folder on the
controller: the engine of the action gpufleet.tuning.artifact_files, shared with the action
audit_judge, which writes a host's audit with it.

The files are what a record reader expects: each written whole and atomically (a temporary file
beside it, renamed over it), with the mode asked for; a file whose bytes and mode are already
right is left alone. A symbolic link where the folder or a file should be is refused, never
followed, before anything is written (the artifact_dir filter refuses the same before the play
reads anything; this holds for a link planted in between too).

In plugin_utils because two actions use it and an action plugin never imports another; the
errors keep the name artifact_files, whichever action asked.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

_PLAIN_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*\Z")
_MODE = re.compile(r"^0?[0-7]{3}\Z")


def octal_mode(value, name):
    """An octal permission string such as '0644' as an int; AnsibleActionFail naming it otherwise."""
    text = to_text(value)
    if not _MODE.match(text):
        raise AnsibleActionFail("artifact_files: %s must be an octal mode such as '0644', got %r" % (name, value))
    return int(text, 8)


def type_name(value):
    """The plain type name of a templated value (Ansible wraps them in tagged subclasses)."""
    for cls in (bool, int, float, dict, list, bytes):
        if isinstance(value, cls):
            return cls.__name__
    return type(value).__name__


def _lstat(path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AnsibleActionFail("artifact_files: cannot examine %s: %s; nothing was written"
                                % (path, fileops.describe(exc)))


def _refuse_link(path, info, want_dir):
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise AnsibleActionFail("artifact_files: refusing %s: it is a symbolic link (to %s), which is never "
                                "followed; nothing was written" % (path, os.readlink(path)))
    if want_dir and not stat.S_ISDIR(info.st_mode):
        raise AnsibleActionFail("artifact_files: refusing %s: it exists and is not a directory; nothing was "
                                "written" % path)
    if not want_dir and not stat.S_ISREG(info.st_mode):
        raise AnsibleActionFail("artifact_files: refusing %s: it exists and is not a regular file; nothing "
                                "was written" % path)


def plan(folder, files, mode):
    """What writing ``files`` (name -> text) into ``folder`` would do, checked before any write.

    Returns one entry per file, sorted by name: name, path, content (bytes), size, sha256 and
    changed (the bytes or the mode differ, or the file is new)."""
    if not isinstance(folder, str) or not folder or "\0" in folder or not os.path.isabs(folder):
        raise AnsibleActionFail("artifact_files: path must be an absolute folder path, got %r" % (folder,))
    if not isinstance(files, dict) or not files:
        raise AnsibleActionFail("artifact_files: files must be a non-empty mapping of file name to content, "
                                "got %s" % (type_name(files) if not isinstance(files, dict) else "an empty one"))
    _refuse_link(folder, _lstat(folder), want_dir=True)
    entries = []
    for name in sorted(files):
        if not isinstance(name, str) or not _PLAIN_FILE.match(name):
            raise AnsibleActionFail("artifact_files: file name %r is not a plain name (letters, digits, '.', '_' "
                                    "and '-', not starting with '.')" % (name,))
        content = files[name]
        if not isinstance(content, str):
            raise AnsibleActionFail("artifact_files: the content of %s must be text, got %s"
                                    % (name, type_name(content)))
        data = to_bytes(content, errors="surrogate_or_strict")
        path = os.path.join(folder, name)
        info = _lstat(path)
        _refuse_link(path, info, want_dir=False)
        changed = True
        if info is not None and stat.S_IMODE(info.st_mode) == mode and info.st_size == len(data):
            with open(path, "rb") as handle:
                changed = handle.read() != data
        entries.append({"name": name, "path": path, "content": data, "size": len(data),
                        "sha256": hashlib.sha256(data).hexdigest(), "changed": changed})
    return entries


def write(folder, files, mode, dir_mode, check_mode):
    """Write ``files`` (name -> text) into ``folder`` as plan() says: the folder made (mode
    ``dir_mode``) when missing, each changed file written whole and atomically; nothing in check
    mode. Returns changed, created and files (name, path, size, sha256, changed per file)."""
    entries = plan(folder, files, mode)
    created = _lstat(folder) is None
    changed = created or any(entry["changed"] for entry in entries)
    if changed and not check_mode:
        try:
            if created:
                fileops.make_dirs(folder)
                os.chmod(folder, dir_mode)
            for entry in entries:
                if entry["changed"]:
                    fileops.write_atomic(entry["path"], entry["content"], mode=mode)
        except OSError as exc:
            raise AnsibleActionFail("artifact_files: writing in %s failed: %s" % (folder, fileops.describe(exc)))
    return {"changed": changed, "created": created,
            "files": [{key: entry[key] for key in ("name", "path", "size", "sha256", "changed")} for entry in entries]}
