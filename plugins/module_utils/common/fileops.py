# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whole-file reads, atomic writes and exact restores for the files the modules touch.

Why not AnsibleModule.atomic_move: it copies mode and owner onto the new file with chmod and
chown, which pmxcfs (Proxmox's /etc/pve) refuses, so it fails exactly where the LXC config
lives (ansible/ansible#70535). Here the temporary file is created in the target directory with
its final mode already set by os.open, renamed over the target, and metadata calls are only
made when the caller allows them.

What a module may meet where a config file should be, and what happens here:

- a symlink (``/etc/default/grub`` kept in a config repository, an LXC config linked from
  elsewhere): reads and writes go to the file it points at, so the link stays a link;
- a FIFO, a socket, a device or a directory: refused with an OSError naming the path, before
  anything is read (a plain ``open()`` of a FIFO blocks for ever);
- a NUL byte in a path: refused with an OSError naming the path (Python raises ValueError);
- bytes that are not UTF-8 in a file read as text: refused with an OSError (EILSEQ) naming
  the path and the offset, so a module fails before it writes anything.

Every OSError raised here carries the path in ``filename``; ``describe()`` renders it as one
line. ``capture()`` and ``restore()`` put a file back as it was, bytes, mode and owner, and
remove the directories a write created, so a rolled-back run leaves no trace.
"""

from __future__ import annotations

import errno
import os
import stat
import time

# What a directory this collection creates looks like, whatever the umask.
DIR_MODE = 0o755

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def describe(exc):
    """One line for an OSError: ``/path: Read-only file system (EROFS)``; other errors as str."""
    number = getattr(exc, "errno", None)
    if not isinstance(exc, (OSError, IOError)) or number is None:
        return str(exc)
    text = exc.strerror or os.strerror(number)
    name = errno.errorcode.get(number)
    where = getattr(exc, "filename", None)
    return "%s%s%s" % ("%s: " % where if where else "", text, " (%s)" % name if name else "")


def check_path(path):
    """Return ``path`` as str; OSError (EINVAL) naming it when it cannot be a file name."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    if "\0" in path:
        raise OSError(errno.EINVAL, "a path cannot contain a NUL byte", repr(path))
    if not path:
        raise OSError(errno.EINVAL, "empty path", repr(path))
    return path


def kind(mode):
    """What a non-regular file is, for messages ('a FIFO (named pipe)'); None for a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def _not_regular(path, mode):
    what = kind(mode)
    number = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
    return OSError(number, "is %s where a regular file was expected" % what, path)


def real_path(path):
    """The file ``path`` names once symlinks are followed (the path itself when it is none).

    A dangling link resolves to where its target would be; a link loop is an OSError (ELOOP).
    """
    path = check_path(path)
    if not os.path.islink(path):
        return path
    seen = set()
    current = path
    while os.path.islink(current):
        if current in seen or len(seen) > 40:
            raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
        seen.add(current)
        target = os.readlink(current)
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return current


def read_bytes(path):
    """Return the file's bytes, or None when it does not exist.

    Opened without blocking and checked with fstat first: anything but a regular file is an
    OSError naming the path. Symlinks are followed.
    """
    path = check_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO opened for writing)
            raise OSError(errno.EINVAL, "is not a regular file", path)
        if exc.filename is None:
            exc.filename = path
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = path
        raise
    finally:
        os.close(fd)


def decode(data, path):
    """``data`` as UTF-8 text; OSError (EILSEQ) naming ``path`` and the offset when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OSError(errno.EILSEQ, "is not valid UTF-8 text (byte 0x%02x at offset %d); this "
                      "module edits text files only" % (data[exc.start], exc.start), path)


def read_text(path):
    """Return the file as UTF-8 text, or None when absent; see read_bytes and decode."""
    data = read_bytes(path)
    if data is None:
        return None
    return decode(data, check_path(path))


def read_quiet(path):
    """Text of a small /proc or /sys file, or None when it is absent or unreadable.

    For facts that may legitimately be missing or forbidden (PID 1's environ, a module's
    version, a cgroup file): any read error means "not known", decoding errors are replaced.
    """
    try:
        data = read_bytes(path)
    except (OSError, IOError, ValueError):
        return None
    return None if data is None else data.decode("utf-8", "replace")


def _to_bytes(content):
    if isinstance(content, bytes):
        return content
    return content.encode("utf-8", "surrogateescape")


def make_dirs(directory, metadata=True):
    """Create ``directory`` and its missing parents with mode 0755 whatever the umask.

    Returns the directories created, outermost first, so a rollback can remove them again.
    With ``metadata=False`` no chmod is made (the mode is then 0755 less the umask).
    """
    directory = check_path(directory)
    missing = []
    current = os.path.abspath(directory)
    while not os.path.isdir(current):
        if os.path.lexists(current) and not os.path.islink(current):
            raise OSError(errno.ENOTDIR, "is not a directory", current)
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    created = []
    for path in reversed(missing):
        try:
            os.mkdir(path, DIR_MODE)
        except OSError as exc:
            if exc.errno == errno.EEXIST and os.path.isdir(path):
                continue
            if exc.filename is None:
                exc.filename = path
            raise
        created.append(path)
        if metadata:
            os.chmod(path, DIR_MODE)
    return created


def remove_dirs(created):
    """Remove directories make_dirs created (innermost first) when they are empty again."""
    for path in reversed(list(created or [])):
        try:
            os.rmdir(path)
        except OSError:
            pass


def write_atomic(path, content, mode=None, metadata=True, makedirs=True, owner=None):
    """Replace the file ``path`` names with ``content``; readers see the old file or the new one.

    A symlink is followed: its target is replaced and the link stays. ``mode``: the new file's
    permission bits; None keeps the existing file's mode, or 0o644 for a new file.
    ``metadata=False`` makes no chmod/chown/fchmod call at all (pmxcfs, or bindfs with
    --chmod-deny); the mode then comes from os.open and the umask alone. ``owner``: a
    ``(uid, gid)`` pair for the new file; None keeps an existing file's owner (a new file is
    the caller's). Returns the directories created for it, outermost first.
    """
    path = real_path(path)
    directory = os.path.dirname(path) or "."
    created = []
    if not os.path.isdir(directory):
        if not makedirs:
            raise OSError(errno.ENOENT, "directory does not exist", directory)
        created = make_dirs(directory, metadata=metadata)
    existing = None
    try:
        existing = os.stat(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            if exc.filename is None:
                exc.filename = path
            raise
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise _not_regular(path, existing.st_mode)
    if mode is None:
        mode = (existing.st_mode & 0o7777) if existing is not None else 0o644
    if owner is None and existing is not None:
        owner = (existing.st_uid, existing.st_gid)

    base = os.path.basename(path)
    fd = None
    tmp_path = None
    done = False
    try:
        for _attempt in range(100):
            candidate = os.path.join(directory, ".%s.gpufleet-%s.tmp" % (base, os.urandom(6).hex()))
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    continue
                raise
            tmp_path = candidate
            break
        if fd is None:
            raise OSError(errno.EEXIST, "could not create a temporary file beside it", path)
        with os.fdopen(fd, "wb") as handle:
            fd = None
            handle.write(_to_bytes(content))
            handle.flush()
            os.fsync(handle.fileno())
            if metadata:
                os.fchmod(handle.fileno(), mode)
                if owner is not None and os.geteuid() == 0:
                    os.fchown(handle.fileno(), owner[0], owner[1])
        os.rename(tmp_path, path)
        done = True
    except OSError as exc:
        exc.filename = path  # name the file the caller asked for, not the temporary one
        raise
    finally:
        if fd is not None:
            os.close(fd)
        if not done:
            if tmp_path is not None:
                try:
                    os.unlink(tmp_path)
                except OSError:
                    pass
            remove_dirs(created)  # the write failed: leave no empty directory behind
    _fsync_dir(directory)
    return created


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
    """Delete the file ``path`` names (a symlink's target, not the link); True when removed.

    Anything but a regular file is refused (OSError naming it): a directory or a FIFO where a
    config file should be was not made by this collection.
    """
    path = real_path(path)
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        if exc.filename is None:
            exc.filename = path
        raise
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode)
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        if exc.filename is None:
            exc.filename = path
        raise
    return True


class Captured:
    """A file as it was before a module touched it: bytes (None: absent), mode and owner.

    ``path`` is the real file (symlinks followed), so restoring puts the bytes back where they
    were and leaves a link as a link. ``created_dirs`` is filled in by ``replace`` with the
    directories a write created, which a restore removes again.
    """

    __slots__ = ("path", "data", "mode", "uid", "gid", "created_dirs")

    def __init__(self, path, data, mode, uid, gid):
        self.path = path
        self.data = data
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.created_dirs = []

    @property
    def existed(self):
        return self.data is not None


def capture(path):
    """Read the file ``path`` names (bytes, mode, owner) so that ``restore`` can put it back."""
    real = real_path(path)
    data = read_bytes(real)
    if data is None:
        return Captured(real, None, None, None, None)
    st = os.stat(real)
    return Captured(real, data, st.st_mode & 0o7777, st.st_uid, st.st_gid)


def restore(captured, metadata=True):
    """Put a captured file back: its bytes, mode and owner, or remove it when it did not exist;
    then remove the (now empty) directories a later write created for it."""
    if captured.data is None:
        remove_file(captured.path)
    else:
        write_atomic(captured.path, captured.data, mode=captured.mode, metadata=metadata,
                     owner=(captured.uid, captured.gid))
    remove_dirs(captured.created_dirs)


def replace(tx, path, content, mode=None, metadata=True, makedirs=True):
    """Write ``content`` to ``path`` (None removes it) inside ``tx``, a Transaction.

    The old file is captured first and the undo puts it back exactly (bytes, mode, owner, no
    directory left behind). Returns the Captured state, whose ``data`` is the old bytes.
    """
    before = capture(path)
    if content is None:
        remove_file(before.path)
    else:
        before.created_dirs = write_atomic(before.path, content, mode=mode, metadata=metadata,
                                           makedirs=makedirs)
    tx.record("file %s" % before.path, lambda: restore(before, metadata=metadata))
    return before


def restore_file(path, content, metadata=True):
    """Put a file back as it was: ``content`` None means it did not exist (mode kept)."""
    if content is None:
        remove_file(path)
    else:
        write_atomic(path, content, metadata=metadata)


def backup_path(path, now=None):
    """Name for a backup of ``path``, next to it, stamped with the local time."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    candidate = "%s.%s.gpufleet.bak" % (path, stamp)
    counter = 1
    while os.path.lexists(candidate):
        candidate = "%s.%s-%d.gpufleet.bak" % (path, stamp, counter)
        counter += 1
    return candidate


def write_backup(path, content, metadata=True):
    """Save ``content`` (the old bytes of ``path``) beside it; return the backup's path.

    The backup gets the source's mode (a 0600 config can hold secrets; a 0644 copy would
    publish them), and is written with write_atomic rather than shutil.copy2, which copies the
    mode with chmod and so fails on pmxcfs.
    """
    real = real_path(path)
    try:
        mode = os.stat(real).st_mode & 0o777
    except OSError:
        mode = 0o600
    target = backup_path(real)
    write_atomic(target, content, mode=mode, metadata=metadata, makedirs=False)
    return target
