# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read and write the controller's artifacts through directory descriptors, never by path.

Why: the artifacts folder may be shared, and a check by path followed by a write by path leaves
a window. The fleet report checked that ``index.html`` was a regular file, read every record,
then wrote the page by path, following a link: another local user who can create entries in
the folder swaps ``index.html`` for a link to ``~/.ssh/authorized_keys`` in between (holding
the reader on a FIFO planted as a record widens the window), and the operator's file is
replaced. Names are only looked up once, relative to a descriptor, so a swap cannot redirect:

- a folder is opened one component at a time from ``/``, each with O_NOFOLLOW|O_DIRECTORY
  relative to its parent (``open_dir``, ``open_subdir``; the folders above the one named, the
  operator's setup, are resolved once first): no component may be a symbolic link,
  and a folder writable by other users without the sticky bit (where anyone could swap its
  entries) is refused; a sticky one such as ``/tmp`` is fine. A missing folder is made with
  mkdir relative to its parent, then opened the same way;
- a file is read (``read_file``) only when a stat of its name (links not followed) says it is a
  regular file; it is opened O_NOFOLLOW|O_NONBLOCK relative to the folder and fstat'ed again
  (still regular, same inode), so a link, FIFO, socket or device is refused and nothing blocks;
- a file is written (``write_file``) as a new temporary file created O_CREAT|O_EXCL|O_NOFOLLOW
  in the folder, fchmod'ed (the mode whatever the umask), written, fsync'ed and renamed over
  the name within the folder; rename replaces the entry itself (a link planted there is
  replaced, never followed); then the folder is fsync'ed. A temporary left by a failure is
  removed. A file whose bytes and mode are already right is not written (``same``).

What is refused raises ``Refused`` (path, why, kind); any other OSError passes through. The
callers (plugin_utils/artifact_files.py, action fleet_report, report/collect.py) turn either
into their own message. Controller side only; Python's standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

MAX_BYTES = 64 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """An entry that is not what it must be: ``kind`` is link, not_dir, not_regular,
    other_writable, too_big or replaced; ``str()`` is ``refusing PATH: WHY``."""

    def __init__(self, path, why, kind):
        super().__init__("refusing %s: %s" % (path, why))
        self.path, self.why, self.kind = path, why, kind


@contextlib.contextmanager
def closing(fd):
    """``with closing(open_dir(...)) as fd:``: the descriptor is closed on the way out."""
    try:
        yield fd
    finally:
        os.close(fd)


def _join(where, name):
    return os.path.join(where, name) if where else name


def _lstat(fd, name):
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _refusal(fd, name, path, info, want):
    """Refused for the entry ``name`` of ``fd`` (``info``: its lstat) that is not a ``want``."""
    if info is not None and stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(name, dir_fd=fd)
        except OSError:
            target = "?"
        return Refused(path, "it is a symbolic link (to %s), which is never followed" % target, "link")
    if want == "dir":
        return Refused(path, "it exists and is not a directory", "not_dir")
    what = fileops.kind(info.st_mode) if info is not None else "not a regular file"
    return Refused(path, "it is %s, not a regular file" % what, "not_regular")


def _checked_dir(fd, path):
    """``fd`` (a directory) when no other user may swap its entries; Refused (fd closed) if not."""
    mode = os.fstat(fd).st_mode
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        os.close(fd)
        raise Refused(path, "it is writable by other users without the sticky bit (mode %04o), so anyone "
                      "could swap the files in it" % stat.S_IMODE(mode), "other_writable")
    return fd


def _plain(name):
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ValueError("%r is not one plain file name" % (name,))


def _open_entry(fd, name, path):
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise _refusal(fd, name, path, _lstat(fd, name), "dir") from None
        exc.filename = path
        raise


def open_subdir(fd, name, create=False, mode=0o755, where=None):
    """The descriptor of the folder ``name`` in the folder ``fd`` (``where``: its path, for
    messages), never through a link. ``create``: made with ``mode`` (whatever the umask) when
    missing; otherwise FileNotFoundError. Refused for a link, a non-directory or a folder others
    may write without the sticky bit."""
    _plain(name)
    path = _join(where, name)
    try:
        return _checked_dir(_open_entry(fd, name, path), path)
    except FileNotFoundError:
        if not create:
            raise
    made = True
    try:
        os.mkdir(name, mode, dir_fd=fd)
    except FileExistsError:
        made = False  # made in between: opened and checked as any other
    sub = _open_entry(fd, name, path)
    if made:
        try:
            os.fchmod(sub, mode)
        except OSError:
            os.close(sub)
            raise
    return _checked_dir(sub, path)


def open_dir(path, create=False, mode=0o755):
    """The descriptor of the absolute folder ``path``, opened component by component from ``/``
    (see open_subdir; ``create`` makes every missing component with ``mode``). The caller closes
    it (``closing``).

    The folders above ``path`` are the operator's choice, resolved once (realpath) before the
    walk: a system whose /home or /srv is a link to another volume keeps working. The folder
    itself is never resolved, and every component of the resolved path is opened without
    following a link, each checked for other users' write access."""
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
        raise ValueError("%r is not an absolute path" % (path,))
    path = os.path.normpath(path)
    if path != "/":
        path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    fd = _checked_dir(os.open("/", _DIR_FLAGS), "/")
    where = "/"
    try:
        for part in (p for p in path.split("/") if p):
            sub = open_subdir(fd, part, create, mode, where)
            os.close(fd)
            fd, where = sub, os.path.join(where, part)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_file(fd, name, where=None):
    """The lstat of the file ``name`` in ``fd``, None when absent; Refused unless regular."""
    info = _lstat(fd, name)
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise _refusal(fd, name, _join(where, name), info, "file")
    return info


def read_file(fd, name, limit=MAX_BYTES, where=None):
    """The bytes of the regular file ``name`` in ``fd``, None when absent. Refused, without
    blocking, for a link, FIFO, socket or device, a file of more than ``limit`` bytes, or one
    replaced between its check and its opening."""
    path = _join(where, name)
    info = check_file(fd, name, where)
    if info is None:
        return None
    too_big = Refused(path, "it is more than the %d bytes read" % limit, "too_big")
    if info.st_size > limit:
        raise too_big
    try:
        rfd = os.open(name, _READ_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            raise Refused(path, "it was replaced by something else while it was read", "replaced")
        exc.filename = path
        raise
    with closing(rfd):
        now = os.fstat(rfd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            raise Refused(path, "it was replaced by something else while it was read", "replaced")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(rfd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > limit:
        raise too_big
    return b"".join(chunks)


def read_path(path, limit=MAX_BYTES):
    """The bytes of the file at the absolute ``path``, read as read_file does through its folder
    opened with open_dir; None when the file or its folder is missing."""
    folder, name = os.path.split(os.path.normpath(path))
    try:
        fd = open_dir(folder)
    except FileNotFoundError:
        return None
    with closing(fd):
        return read_file(fd, name, limit, folder)


def same(fd, name, data, mode, where=None):
    """Whether the file ``name`` in ``fd`` already holds ``data`` with permission bits ``mode``
    (False when absent); Refused for what read_file refuses."""
    info = check_file(fd, name, where)
    if info is None or stat.S_IMODE(info.st_mode) != mode or info.st_size != len(data):
        return False
    try:
        return read_file(fd, name, len(data), where) == data
    except Refused as exc:
        if exc.kind == "too_big":  # grew since the stat: it differs
            return False
        raise


def write_file(fd, name, data, mode, where=None, check=False):
    """Make the file ``name`` in ``fd`` hold ``data`` with mode ``mode``, atomically, through a
    temporary file renamed over it; nothing when it already does. Returns whether a write was
    (or, with ``check``, would be) made. Refused for a link or non-regular file there."""
    _plain(name)
    if same(fd, name, data, mode, where):
        return False
    if check:
        return True
    path = _join(where, name)
    temp = None
    try:
        for _attempt in range(100):
            candidate = ".%s.gpufleet-%s.tmp" % (name, os.urandom(6).hex())
            try:
                wfd = os.open(candidate, _TEMP_FLAGS, 0o600, dir_fd=fd)
            except FileExistsError:
                continue
            temp = candidate
            break
        else:
            raise OSError(errno.EEXIST, "could not create a temporary file beside it", path)
        with closing(wfd):
            os.fchmod(wfd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(wfd, view):]
            os.fsync(wfd)
        os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        temp = None
    except OSError as exc:
        exc.filename = path  # the file asked for, not the temporary one
        raise
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=fd)
    with contextlib.suppress(OSError):  # some filesystems (FUSE among them) cannot fsync a folder
        os.fsync(fd)
    return True
