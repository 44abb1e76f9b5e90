# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's folder on the controller, from its inventory name, that cannot leave the root.

The verify role writes ARTIFACTS/<host>/verify.json on the controller. The host part comes from
the inventory, and inventory names are free text: ``../x``, ``/etc``, ``a/b`` or ``..`` joined
into a path would write (and chmod) outside the artifacts folder. Here a name becomes exactly
one path component: letters, digits, ``.``, ``_`` and ``-`` are kept, so an FQDN or an IPv4
address stays readable and unchanged, and every other byte of its UTF-8 form is written
``%XX`` (``%`` itself too, so two names never share a folder). ``.`` and ``..`` are written
``%2E`` and ``%2E%2E``; an empty name and one holding NUL are refused. A name longer than
MAX_LENGTH once encoded keeps its first characters and ends in ``~`` and a digest of the whole
name (``~`` is never kept as itself, so such a name cannot collide with a short one).

Given the artifacts root, the filter also returns the host's folder under the root's real path
and checks it: the folder, where it exists, must be a real directory (not a symbolic link
planted there to send the writes elsewhere), the files named must be regular files or absent,
and the resolved folder must sit directly under the resolved root. The folder is the controller
user's own; the check is against a link left there (by a mistake, a synced tree or another
tool), not against someone who can write to it while the play runs, who owns the result anyway.

The filter artifact_dir (plugins/filter/report.py) is a thin wrapper over this file; audit_fleet and
the fleet page's tests name a host's folder with encode() here, never through a filter plugin.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat

from ansible.errors import AnsibleFilterError

MAX_LENGTH = 200
DIGEST_CHARS = 16
_KEEP = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_PLAIN_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*\Z")


def encode(name):
    """``name`` as one safe path component; AnsibleFilterError for what cannot be one."""
    if not isinstance(name, str):
        raise AnsibleFilterError("artifact_dir: the host name must be a string, got %r" % (name,))
    if name == "":
        raise AnsibleFilterError("artifact_dir: the host name is empty")
    if "\0" in name:
        raise AnsibleFilterError("artifact_dir: the host name %r holds a NUL character" % (name,))
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise AnsibleFilterError("artifact_dir: the host name %r is not valid text" % (name,))
    if name in (".", ".."):
        out = "%2E" * len(name)
    else:
        out = "".join(chr(byte) if byte in _KEEP else "%%%02X" % byte for byte in raw)
    if len(out) > MAX_LENGTH:
        cut = MAX_LENGTH - DIGEST_CHARS - 1
        head = out[:cut]
        # Never end inside a %XX triple.
        tail = head.rfind("%")
        if tail != -1 and tail > cut - 3:
            head = head[:tail]
        out = head + "~" + hashlib.sha256(raw).hexdigest()[:DIGEST_CHARS]
    return out


def _refuse(name, path, why):
    raise AnsibleFilterError("artifact_dir: refusing %s for host %r: %s; nothing was written there"
                             % (path, name, why))


def host_path(name, root, files=()):
    """The checked absolute folder of host ``name`` under ``root``."""
    component = encode(name)
    if not isinstance(root, str) or root == "" or "\0" in root:
        raise AnsibleFilterError("artifact_dir: root must be a folder path, got %r" % (root,))
    if isinstance(files, str) or not isinstance(files, (list, tuple)):
        raise AnsibleFilterError("artifact_dir: files must be a list of file names, got %r" % (files,))
    for item in files:
        if not isinstance(item, str) or not _PLAIN_FILE.match(item):
            raise AnsibleFilterError("artifact_dir: file name %r is not a plain name (letters, digits, '.', "
                                     "'_' and '-', not starting with '.')" % (item,))
    real_root = os.path.realpath(root)
    folder = os.path.join(real_root, component)
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        _refuse(name, folder, "it cannot be examined (%s)" % exc.strerror)
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            _refuse(name, folder, "it is a symbolic link (to %s), which is never followed" % os.readlink(folder))
        if not stat.S_ISDIR(info.st_mode):
            _refuse(name, folder, "it exists and is not a directory")
    resolved = os.path.realpath(folder)
    if os.path.dirname(resolved) != real_root or os.path.basename(resolved) != component:
        _refuse(name, folder, "it resolves to %s, outside %s" % (resolved, real_root))
    for item in files:
        path = os.path.join(folder, item)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            _refuse(name, path, "it cannot be examined (%s)" % exc.strerror)
        if stat.S_ISLNK(info.st_mode):
            _refuse(name, path, "it is a symbolic link (to %s), which is never followed" % os.readlink(path))
        if not stat.S_ISREG(info.st_mode):
            _refuse(name, path, "it exists and is not a regular file")
    return folder


def artifact_dir(name, root=None, files=None):
    """The safe folder name of host ``name``, or with ``root`` its checked folder path."""
    if root is None:
        return encode(name)
    return host_path(name, root, files or [])
