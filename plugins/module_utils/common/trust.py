# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a path is safe for root to run: only root can change it or anything on the way to it.

Two modules install code that root runs with no one watching: pcie_maxreadreq's udev helper
(every boot, hotplug and driver bind) and cpu_power's boot script (every boot). Whoever can
change that code, the interpreter it names, a symlink on the way to either, or a directory
above any of them (to rename a file away and put their own in its place) runs as root at the
next boot. So before such a file is written this checks, for the file's directory and for the
interpreter its ``#!`` line names, every directory and every symlink the kernel walks through
when it resolves the path, and the interpreter itself:

- a directory: owned by root (``uid``), not writable by group or others; a sticky directory
  such as /tmp is refused too (its sticky bit stops others deleting root's files, not
  creating their own names before root does, and boot code has no business there);
- a symlink: owned by root (a link's own mode bits mean nothing on Linux; who may replace it
  is decided by the directory holding it, which is checked like any other);
- the interpreter: a regular, executable file, owned by root, not writable by group or others.

A path that does not exist yet ends the walk: what is missing is created by this collection,
root-owned, in a directory just found safe. ``root`` is the top of the tree a caller vouches
for: the directories above it (/ among them) are not looked at (tests build their trees under
a temp dir, whose /tmp would fail); everything from ``root`` down is, and so is every path a
symlink leads to outside ``root`` (/usr, /usr/bin, ...). On a node ``root`` is /, and nothing
is left out.

Access control lists and other users' capabilities are not looked at: owner and mode are what
an operator sees in ``ls -l``, and what this collection itself sets.
"""

from __future__ import annotations

import errno
import os
import stat

try:
    import pwd
except ImportError:  # pragma: no cover - not Linux
    pwd = None

_MAX_LINKS = 40  # as the kernel's own limit on symlinks followed in one lookup


class Untrusted(OSError):
    """A path on the way to code root runs that another user could change; ``filename`` is it."""


def describe_owner(uid):
    """``uid 1000 (alice)``, or ``uid 1000`` when the name is not known."""
    name = None
    if pwd is not None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except (KeyError, OverflowError):
            name = None
    return "uid %d (%s)" % (uid, name) if name else "uid %d" % uid


def _state(st):
    return "owner %s, group gid %d, mode %04o" % (describe_owner(st.st_uid), st.st_gid, stat.S_IMODE(st.st_mode))


def _walk(path):
    """Every path the kernel visits resolving ``path``, in order, as ``(path, lstat or None)``.

    Components are resolved one by one as the kernel does: a symlink among them is listed and
    then replaced by its target (relative to the directory holding it, or from / when
    absolute), so every directory and link on the way appears. The walk ends at the first
    missing component (listed with None). ELOOP after 40 links.
    """
    entries = [("/", os.lstat("/"))]
    todo = [part for part in path.split("/") if part]
    current = "/"
    links = 0
    while todo:
        name = todo.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)  # ``current`` holds no link: this is the real parent
            continue
        candidate = os.path.join(current, name)
        try:
            st = os.lstat(candidate)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                entries.append((candidate, None))
                return entries
            if exc.filename is None:
                exc.filename = candidate
            raise
        entries.append((candidate, st))
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = "/"
            todo = [part for part in target.split("/") if part] + todo
            continue
        if todo and not stat.S_ISDIR(st.st_mode):
            entries.append((os.path.join(candidate, todo[0]), None))  # ENOTDIR: nothing below
            return entries
        current = candidate
    return entries


def _above(entry, root):
    """Whether ``entry`` is a directory strictly above ``root`` (not looked at)."""
    if root == "/":
        return False
    return entry == "/" or root.startswith(entry.rstrip("/") + "/")


def _problem(st, uid, is_final):
    """What is wrong with one visited path, or None."""
    mode = st.st_mode
    if st.st_uid != uid:
        return "is not owned by %s" % describe_owner(uid)
    if stat.S_ISLNK(mode):
        return None
    if mode & 0o002:
        what = "is writable by every user"
        if mode & stat.S_ISVTX:
            what += " (the sticky bit does not help: anyone can still create names here before root does)"
        return what
    if mode & 0o020:
        return "is writable by its group"
    if is_final:
        if not stat.S_ISREG(mode):
            return "is not a regular file"
        if not mode & 0o111:
            return "is not executable"
    elif not stat.S_ISDIR(mode):
        return "is not a directory"
    return None


def _refuse(path, st, problem, purpose, uid):
    raise Untrusted(errno.EPERM, "%s (%s); %s must be changeable by root only: owned by %s and not writable "
                    "by group or others, as must every directory above it and every symlink on the way"
                    % (problem, _state(st), purpose, describe_owner(uid)), path)


def _check(path, root, uid, purpose, final):
    path = os.path.abspath(path)
    root = os.path.realpath(os.path.abspath(root))
    entries = _walk(path)
    last = len(entries) - 1
    for index, (entry, st) in enumerate(entries):
        if st is None:
            if final:
                raise Untrusted(errno.ENOENT, "does not exist; %s must be an installed, root-owned file"
                                % purpose, entry)
            return
        if _above(entry, root):
            continue
        problem = _problem(st, uid, final and index == last)
        if problem:
            _refuse(entry, st, problem, purpose, uid)


def check_runnable(path, root="/", uid=0, purpose=None):
    """Raise Untrusted unless ``path`` is a file only ``uid`` can change, all the way to it.

    The file (after every symlink is followed), each symlink on the way and every directory
    above each of them are checked (see the module's docstring). A missing file is Untrusted
    too (ENOENT): root would run nothing, or whatever appears there later.
    """
    _check(path, root, uid, purpose or "%s, which root runs," % path, final=True)


def check_directory_of(path, root="/", uid=0, purpose=None):
    """Raise Untrusted unless the directory that will hold ``path`` is one only ``uid`` can change.

    For a file this collection is about to write (and so own): the file itself is replaced, so
    what matters is every directory and symlink on the way to the one it lands in. Missing
    directories end the walk; they are created root-owned in the last one checked.
    """
    _check(os.path.dirname(os.path.abspath(path)), root, uid,
           purpose or "%s, which root runs at boot," % path, final=False)


def interpreter_of(text):
    """The interpreter a ``#!`` first line names, or None when ``text`` has none.

    Linux takes the path up to the first blank and passes the rest of the line as one argument
    (``#!/usr/bin/python3 -IS`` runs ``/usr/bin/python3`` with ``-IS``). A relative path
    (resolved against whatever directory the caller is in) is refused with ValueError, as is
    ``env`` (it searches PATH): boot code names its interpreter by absolute path.
    """
    if not text or not text.startswith("#!"):
        return None
    line = text[2:].split("\n", 1)[0].strip()
    interpreter = line.split(None, 1)[0] if line else ""
    if not interpreter.startswith("/"):
        raise ValueError("the #! line %r names no absolute interpreter path" % text.split("\n", 1)[0])
    if os.path.basename(interpreter) == "env":
        raise ValueError("the #! line %r runs env, which searches PATH: name the interpreter's absolute path"
                         % text.split("\n", 1)[0])
    return interpreter


def check_boot_file(path, content, root="/", uid=0):
    """Raise Untrusted unless root may write ``path`` with ``content`` and run it safely.

    The directory it lands in (check_directory_of) and, when ``content`` starts with ``#!``, the
    interpreter named there (check_runnable).
    """
    check_directory_of(path, root, uid, purpose="%s, which root runs or reads at boot," % path)
    interpreter = interpreter_of(content)
    if interpreter is not None:
        check_runnable(interpreter, root, uid,
                       purpose="the interpreter %s, which root runs %s with," % (interpreter, path))


def common_root(*paths):
    """The deepest directory holding every path: the tree a set of boot files is installed in.

    On a node (/etc/udev/rules.d and /usr/local/libexec, /etc/systemd/system and /usr/local/sbin)
    this is /; tests that put the same layout under a temp dir get that temp dir.
    """
    return os.path.commonpath([os.path.abspath(p) for p in paths])
