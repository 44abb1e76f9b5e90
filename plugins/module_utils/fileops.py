# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whole-file reads and atomic writes for the files the modules own.

Why not AnsibleModule.atomic_move: it copies mode and owner onto the new file with chmod and
chown, which pmxcfs (Proxmox's /etc/pve) refuses, so it fails exactly where the LXC config
lives (ansible/ansible#70535). Here the temporary file is created in the target directory with
its final mode already set by os.open, renamed over the target, and metadata calls are only
made when the caller allows them.
"""

from __future__ import annotations

import errno
import os
import time


def read_bytes(path):
    """Return the file's bytes, or None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def read_text(path):
    """Return the file as text (UTF-8, undecodable bytes escaped), or None when absent."""
    data = read_bytes(path)
    if data is None:
        return None
    return data.decode("utf-8", "surrogateescape")


def read_quiet(path):
    """Text of a small /proc or /sys file, or None when it is absent or unreadable.

    For facts that may legitimately be missing or forbidden (PID 1's environ, a module's
    version, a cgroup file): any read error means "not known", decoding errors are replaced.
    """
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (OSError, IOError):
        return None


def _to_bytes(content):
    if isinstance(content, bytes):
        return content
    return content.encode("utf-8", "surrogateescape")


def write_atomic(path, content, mode=None, metadata=True, makedirs=True):
    """Replace ``path`` with ``content`` so readers see the old file or the new one, never half.

    ``mode``: the new file's permission bits; None keeps the existing file's mode, or 0o644 for
    a new file. ``metadata=False`` makes no chmod/chown/fchmod call at all (pmxcfs, or bindfs
    with --chmod-deny); the mode then comes from os.open and the umask alone.
    Owner and group of an existing file are carried over when ``metadata`` is true.
    """
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    if makedirs and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    existing = None
    try:
        existing = os.stat(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
    if mode is None:
        mode = (existing.st_mode & 0o7777) if existing is not None else 0o644

    base = os.path.basename(path)
    fd = None
    tmp_path = None
    for _attempt in range(100):
        tmp_path = os.path.join(directory, ".%s.gpufleet-%s.tmp" % (base, os.urandom(6).hex()))
        try:
            fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            break
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    if fd is None:
        raise OSError(errno.EEXIST, "could not create a temporary file", directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            fd = None
            handle.write(_to_bytes(content))
            handle.flush()
            os.fsync(handle.fileno())
            if metadata:
                os.fchmod(handle.fileno(), mode)
                if existing is not None and os.geteuid() == 0:
                    os.fchown(handle.fileno(), existing.st_uid, existing.st_gid)
        os.rename(tmp_path, path)
        tmp_path = None
    finally:
        if fd is not None:
            os.close(fd)
        if tmp_path is not None:
            try:
                os.unlink(tmp_path)
            except OSError:
                pass
    _fsync_dir(directory)


def _fsync_dir(directory):
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass  # some filesystems (FUSE among them) do not support fsync on a directory
    finally:
        os.close(dir_fd)


def remove_file(path):
    """Delete ``path``; return True when something was removed."""
    try:
        os.unlink(path)
        return True
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise


def restore_file(path, content, metadata=True):
    """Put a file back as it was: ``content`` None means it did not exist."""
    if content is None:
        remove_file(path)
    else:
        write_atomic(path, content, metadata=metadata)


def backup_path(path, now=None):
    """Name for a backup of ``path``, next to it, stamped with the local time."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    candidate = "%s.%s.gpufleet.bak" % (path, stamp)
    counter = 1
    while os.path.exists(candidate):
        candidate = "%s.%s-%d.gpufleet.bak" % (path, stamp, counter)
        counter += 1
    return candidate


def write_backup(path, content, metadata=True):
    """Save ``content`` (the old bytes of ``path``) beside it; return the backup's path.

    Written with write_atomic rather than shutil.copy2, which copies the mode with chmod and so
    fails on pmxcfs.
    """
    target = backup_path(path)
    write_atomic(target, content, metadata=metadata, makedirs=False)
    return target
