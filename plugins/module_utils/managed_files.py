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
"""

from __future__ import annotations

import errno
import os

from ansible_collections.gpufleet.tuning.plugins.module_utils import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops


class Wanted(object):
    """One path as the module wants it: a file with ``content``, a ``symlink`` target, or absent."""

    def __init__(self, path, content=None, mode=0o644, symlink=None):
        self.path = path
        self.content = content
        self.mode = mode
        self.symlink = symlink

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
        link = os.readlink(path)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOENT):
            raise
        link = None
    text = None if link is not None else fileops.read_text(path)
    return text, link


def plan(wanted):
    """Return the Change list for the Wanted items that differ from the disk."""
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


def _restore(change, metadata):
    def undo():
        try:
            os.unlink(change.path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
        if change.before_link is not None:
            os.symlink(change.before_link, change.path)
        elif change.before is not None:
            fileops.write_atomic(change.path, change.before, metadata=metadata)
    return undo


def apply(changes, tx, metadata=True):
    """Make each change, recording its undo in ``tx`` (a Transaction)."""
    for change in changes:
        item = change.wanted
        if item.absent:
            fileops.remove_file(item.path)
        elif item.symlink is not None:
            directory = os.path.dirname(item.path)
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            tmp = "%s.gpufleet-%s.tmp" % (item.path, os.urandom(4).hex())
            os.symlink(item.symlink, tmp)
            try:
                os.rename(tmp, item.path)
            except OSError:
                os.unlink(tmp)
                raise
        else:
            fileops.write_atomic(item.path, item.content, mode=item.mode, metadata=metadata)
        tx.record(change.describe(), _restore(change, metadata))


def unit_wants_link(systemd_dir, unit, target="multi-user.target"):
    """The Wanted symlink that enables ``unit`` for ``target``, as systemctl enable makes it."""
    return Wanted(os.path.join(systemd_dir, "%s.wants" % target, unit), symlink="../%s" % unit)
