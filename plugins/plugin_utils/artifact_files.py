# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a run's records (audit.json, system-improve.md, fleet-audit.*) into a folder on the
controller: the engine of the action gpufleet.tuning.artifact_files, shared with the action
audit_judge, which writes a host's audit with it.

The files are what a record reader expects: each written whole and atomically (a temporary file
beside it, renamed over it), with the mode asked for; a file whose bytes and mode are already
right is left alone. The artifacts folder may be shared with other local users, so nothing is
done by path after a check (plugin_utils/artifact_fs.py says why): the folder is opened once,
component by component, never through a symbolic link and never when it (or a folder above
it) is writable by others without the sticky bit; a missing folder is made with mkdir relative
to its parent's descriptor; every file is checked, compared and written relative to the
folder's descriptor. A link, or anything but a regular file, where a file goes is refused
before anything is written, and a swap after that check cannot redirect a write (the rename
replaces the entry itself). The artifact_dir filter refuses links too, before the play reads
anything.

In plugin_utils because two actions use it and an action plugin never imports another; the
errors keep the name artifact_files, whichever action asked.
"""

from __future__ import annotations

import hashlib
import os
import re

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_fs

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


def _fail(message):
    raise AnsibleActionFail("artifact_files: %s" % message)


def _items(folder, files):
    """[(name, bytes)] of ``files`` by name, after checking ``folder`` and ``files``."""
    if not isinstance(folder, str) or not folder or "\0" in folder or not os.path.isabs(folder):
        _fail("path must be an absolute folder path, got %r" % (folder,))
    if not isinstance(files, dict) or not files:
        _fail("files must be a non-empty mapping of file name to content, got %s"
              % (type_name(files) if not isinstance(files, dict) else "an empty one"))
    items = []
    for name in sorted(files):
        if not isinstance(name, str) or not _PLAIN_FILE.match(name):
            _fail("file name %r is not a plain name (letters, digits, '.', '_' and '-', not starting with '.')"
                  % (name,))
        if not isinstance(files[name], str):
            _fail("the content of %s must be text, got %s" % (name, type_name(files[name])))
        items.append((name, to_bytes(files[name], errors="surrogate_or_strict")))
    return items


def _open(folder):
    """The folder's descriptor, or None when it (or a folder above it) is missing."""
    try:
        return artifact_fs.open_dir(folder)
    except FileNotFoundError:
        return None


def _make(folder, dir_mode):
    """Make the missing ``folder`` (mode ``dir_mode``) relative to its parent's descriptor, the
    parent made too when missing (0755); its descriptor."""
    parent, leaf = os.path.split(os.path.normpath(folder))
    if not leaf:
        return artifact_fs.open_dir(folder)
    with artifact_fs.closing(artifact_fs.open_dir(parent, create=True, mode=fileops.DIR_MODE)) as parent_fd:
        return artifact_fs.open_subdir(parent_fd, leaf, create=True, mode=dir_mode, where=parent)


def _plan(fd, folder, items, mode):
    """One entry per file: name, path, content, size, sha256, changed (``fd`` None: a missing
    folder, so every file is new). Refused before anything is written for a link or a
    non-regular file where a file goes."""
    return [{"name": name, "path": os.path.join(folder, name), "content": data, "size": len(data),
             "sha256": hashlib.sha256(data).hexdigest(),
             "changed": fd is None or not artifact_fs.same(fd, name, data, mode, where=folder)}
            for name, data in items]


def _guarded(folder, work):
    """Run ``work()``, turning a refusal or an OSError into the action's message."""
    try:
        return work()
    except artifact_fs.Refused as exc:
        _fail("%s; nothing was written" % exc)
    except OSError as exc:
        _fail("writing in %s failed: %s" % (folder, fileops.describe(exc)))


def plan(folder, files, mode):
    """What writing ``files`` (name -> text) into ``folder`` would do, checked before any write.

    Returns one entry per file, sorted by name: name, path, content (bytes), size, sha256 and
    changed (the bytes or the mode differ, or the file is new)."""
    items = _items(folder, files)

    def work():
        fd = _open(folder)
        if fd is None:
            return _plan(None, folder, items, mode)
        with artifact_fs.closing(fd):
            return _plan(fd, folder, items, mode)
    return _guarded(folder, work)


def write(folder, files, mode, dir_mode, check_mode):
    """Write ``files`` (name -> text) into ``folder`` as plan() says: the folder made (mode
    ``dir_mode``) when missing, each changed file written whole and atomically relative to the
    folder's descriptor; nothing in check mode. Returns changed, created and files (name, path,
    size, sha256, changed per file)."""
    items = _items(folder, files)

    def work():
        fd = _open(folder)
        created = fd is None
        if created and not check_mode:
            fd = _make(folder, dir_mode)
        if fd is None:
            return created, _plan(None, folder, items, mode)
        with artifact_fs.closing(fd):
            entries = _plan(fd, folder, items, mode)  # every file checked before the first write
            for entry in entries:
                if entry["changed"] and not check_mode:
                    artifact_fs.write_file(fd, entry["name"], entry["content"], mode, where=folder)
            return created, entries
    created, entries = _guarded(folder, work)
    changed = created or any(entry["changed"] for entry in entries)
    return {"changed": changed, "created": created,
            "files": [{key: entry[key] for key in ("name", "path", "size", "sha256", "changed")} for entry in entries]}
