# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small set of files (and symlinks) a module owns, planned and changed as one unit.

Persistence in this collection is always "a few files": a modules-load.d entry and a
modprobe.d line, a udev rule and the helper it runs, a systemd unit and the symlink that
enables it. Each module describes the files it wants (content, or None for absent); this
computes what differs, renders the --diff entries, and applies the changes inside a
Transaction so a failure puts every file back.

Enabling a unit is done with the same symlink ``systemctl enable`` would create
(``<target>.wants/<unit>``), so it works without a running systemd (chroots, containers,
first boot) and needs no binary.

Ownership: a module writes and removes only files it created. Every file it writes carries a
marker (a comment naming gpufleet.tuning in its first lines); an existing file without one
belongs to someone else (the distribution's ``nvidia.conf`` with its ``blacklist nouveau``, an
operator's udev rule) and is refused, not overwritten or deleted, unless the Wanted item says
``adopt=True`` (the operator asked for it explicitly).
"""

from __future__ import annotations

import errno
import os

from ansible_collections.gpufleet.tuning.plugins.module_utils import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops


MARKER = "gpufleet.tuning"
_MARKER_LINES = 5


class NotOwned(OSError):
    """A path this collection would write or remove holds something it did not create."""


def is_owned(text):
    """True when one of the first lines of ``text`` is a comment naming gpufleet.tuning."""
    for line in (text or "").splitlines()[:_MARKER_LINES]:
        if line.lstrip().startswith(("#", ";", "//")) and MARKER in line:
            return True
    return False


class Wanted(object):
    """One path as the module wants it: a file with ``content``, a ``symlink`` target, or absent.

    ``adopt``: take over (overwrite or remove) a file found there without this collection's
    marker. Without it such a file is refused (NotOwned from plan()).
    """

    def __init__(self, path, content=None, mode=0o644, symlink=None, adopt=False):
        self.path = path
        self.content = content
        self.mode = mode
        self.symlink = symlink
        self.adopt = adopt

    @property
    def absent(self):
        return self.content is None and self.symlink is None


class Change(object):
    """A path whose current state differs from the wanted one."""

    def __init__(self, wanted, before, before_link):
        self.wanted = wanted
        self.before = before            # text of the file now, None if no regular file
        self.before_link = before_link  # symlink target now, None if not a symlink

    @property
    def path(self):
        return self.wanted.path

    def describe(self):
        if self.wanted.absent:
            return "remove %s" % self.path
        if self.wanted.symlink is not None:
            return "link %s -> %s" % (self.path, self.wanted.symlink)
        return "write %s" % self.path


def _current(path):
    try:
        link = os.readlink(fileops.check_path(path))
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOENT):
            if exc.filename is None:
                exc.filename = path
            raise
        link = None
    text = None if link is not None else fileops.read_text(path)
    return text, link


def _check_owned(item, text):
    """NotOwned when ``item`` would overwrite or remove a file this collection did not write."""
    if item.symlink is None and item.content is not None and not is_owned(item.content):
        raise ValueError("%s: the content this module writes carries no gpufleet.tuning marker, so the "
                         "next run could not tell it is its own" % item.path)
    if text is None or item.adopt or is_owned(text):
        return
    action = "remove" if item.absent else "overwrite"
    raise NotOwned(errno.EEXIST, "exists and was not written by gpufleet.tuning (no marker comment in its "
                   "first lines): refusing to %s it; move it away, or adopt it explicitly" % action, item.path)


def plan(wanted):
    """Return the Change list for the Wanted items that differ from the disk.

    Raises NotOwned (an OSError naming the path) for a file the collection would take over.
    """
    changes = []
    for item in wanted:
        text, link = _current(item.path)
        if item.absent:
            differs = text is not None or link is not None
        elif item.symlink is not None:
            differs = link != item.symlink
        else:
            differs = link is not None or text != item.content
            if not differs and text is not None:
                differs = (os.stat(item.path).st_mode & 0o7777) != item.mode
        if item.symlink is None:
            _check_owned(item, text)
        if differs:
            changes.append(Change(item, text, link))
    return changes


def diff_entries(changes):
    """--diff entries: file text before/after; a symlink shown as ``-> target``."""
    entries = []
    for change in changes:
        before = change.before if change.before_link is None else "-> %s\n" % change.before_link
        if change.before is None and change.before_link is None:
            before = None
        if change.wanted.absent:
            after = None
        elif change.wanted.symlink is not None:
            after = "-> %s\n" % change.wanted.symlink
        else:
            after = change.wanted.content
        entries.append(diffs.file_diff(change.path, before, after))
    return entries


def _link_undo(path, before_link, created):
    def undo():
        try:
            os.unlink(path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
        if before_link is not None:
            os.symlink(before_link, path)
        fileops.remove_dirs(created)
    return undo


def _set_link(path, target):
    """Point ``path`` at ``target`` atomically (a new link renamed over the old one)."""
    created = fileops.make_dirs(os.path.dirname(path))
    tmp = "%s.gpufleet-%s.tmp" % (path, os.urandom(4).hex())
    try:
        os.symlink(target, tmp)
        os.rename(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fileops.remove_dirs(created)
        raise
    return created


def apply(changes, tx, metadata=True):
    """Make each change, recording its undo in ``tx`` (a Transaction).

    A symlink where a file is wanted (or the reverse) is replaced as a whole; a file is
    written through fileops.replace, whose undo restores bytes, mode and owner exactly.
    """
    for change in changes:
        item = change.wanted
        if item.symlink is not None or change.before_link is not None:
            if item.symlink is None and change.before_link is not None:
                os.unlink(item.path)  # a link where our file belongs: the file replaces it
                tx.record(change.describe(), _link_undo(item.path, change.before_link, []))
                if not item.absent:
                    fileops.replace(tx, item.path, item.content, mode=item.mode, metadata=metadata)
                continue
            created = _set_link(item.path, item.symlink)
            tx.record(change.describe(), _link_undo(item.path, change.before_link, created))
            continue
        fileops.replace(tx, item.path, item.content, mode=item.mode, metadata=metadata)


def unit_wants_link(systemd_dir, unit, target="multi-user.target"):
    """The Wanted symlink that enables ``unit`` for ``target``, as systemctl enable makes it."""
    return Wanted(os.path.join(systemd_dir, "%s.wants" % target, unit), symlink="../%s" % unit)
