# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's folder for what this collection keeps from one ansible-playbook run to the next.

Why one folder with one trust rule: what is kept there is read back without being checked
against its own content (a pickled AnsiballZ payload that Ansible unpickles, parsed YAML), so it
must be trusted as Ansible trusts its own temporary folder. It sits beside the runs' temporary
folders (the parent of C.DEFAULT_LOCAL_TMP: ~/.ansible/tmp unless local_tmp says otherwise), is
made 0700, and a folder or file in it that is not this user's, is a link, or is writable by
group or others is never used. Files are written whole (a temporary file beside, then renamed).
"""

from __future__ import annotations

import os
import stat
import time

from ansible import constants as C

FOLDER_NAME = "gpufleet-tuning-cache"
# Entries not written for this long are removed when another is written (a checkout that is
# gone leaves its entries behind; one in use is written again when it changes, and at worst
# rebuilt once after this long).
MAX_AGE_S = 30 * 24 * 3600


def folder():
    """The folder (it may not exist yet)."""
    return os.path.join(os.path.dirname(C.DEFAULT_LOCAL_TMP), FOLDER_NAME)  # type: ignore[attr-defined]


def trusted(path, want_dir=False):
    """``path`` is this user's own, not a link, of the kind wanted, and writable by no one else."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    kind = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
    return kind and info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def ready():
    """The folder, made when missing; None when it cannot be trusted."""
    path = folder()
    if not os.path.isdir(path):
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return None
    return path if trusted(path, True) else None


def prune(now=None):
    """Remove this folder's entries not written for MAX_AGE_S; errors are ignored."""
    now = time.time() if now is None else now
    path = folder()
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        entry = os.path.join(path, name)
        try:
            if not name.startswith(".") and now - os.lstat(entry).st_mtime > MAX_AGE_S:
                os.unlink(entry)
        except OSError:
            pass


def write(path, data):
    """``data`` (bytes) into ``path`` whole, mode 0600 (a temporary file beside it, then renamed),
    and the folder's stale entries removed (prune)."""
    temp = "%s.%d.part" % (path, os.getpid())
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.rename(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if os.path.dirname(path) == folder():
        prune()


def stat_key(path):
    """What tells a file changed: size, modification time (ns) and inode; None when absent."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ino]
