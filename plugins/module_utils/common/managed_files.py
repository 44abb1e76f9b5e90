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

Owner: every file and symlink written here is root's (``Wanted.owner``, default 0:0), whatever
the umask and whoever owned the file before. A file found with another owner (or another mode)
is a change like different content, reported in the plan and the diff and fixed by the write,
so a helper an earlier hand or tool left owned by a user does not stay that user's to edit.
Owners are compared only where this process can change them (euid 0); elsewhere a run could
never converge.

Trust: a file that root runs or acts on at boot (a udev helper and its rule, a boot script
and its unit) carries ``trust_root``; plan() then refuses it, before anything is read or
written, when another user could change the directory it lands in or the interpreter its
``#!`` line names (trust.check_boot_file).
"""

from __future__ import annotations

import errno
import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust


MARKER = "gpufleet.tuning"
_MARKER_LINES = 5
ROOT_OWNER = (0, 0)


class NotOwned(OSError):
    """A path this collection would write or remove holds something it did not create."""


def is_owned(text):
    """True when one of the first lines of ``text`` is a comment naming gpufleet.tuning."""
    for line in (text or "").splitlines()[:_MARKER_LINES]:
        if line.lstrip().startswith(("#", ";", "//")) and MARKER in line:
            return True
    return False


class Wanted:
    """One path as the module wants it: a file with ``content``, a ``symlink`` target, or absent.

    ``adopt``: take over (overwrite or remove) a file found there without this collection's
    marker. Without it such a file is refused (NotOwned from plan()).
    ``owner``: the ``(uid, gid)`` the file or symlink must have (root's by default); None
    leaves an existing file's owner alone.
    ``trust_root``: set for a file root runs or acts on at boot; plan() refuses it unless only
    ``trusted_uid`` can change its directory and its interpreter (trust.check_boot_file, which
    looks at nothing above ``trust_root``; on a node that is /).
    """

    def __init__(self, path, content=None, mode=0o644, symlink=None, adopt=False, owner=ROOT_OWNER,
                 trust_root=None, trusted_uid=0):
        self.path = path
        self.content = content
        self.mode = mode
        self.symlink = symlink
        self.adopt = adopt
        self.owner = tuple(owner) if owner is not None else None
        self.trust_root = trust_root
        self.trusted_uid = trusted_uid

    @property
    def absent(self):
        return self.content is None and self.symlink is None


class Change:
    """A path whose current state differs from the wanted one.

    ``before_owner`` and ``before_mode``: the existing file's (or symlink's) ``(uid, gid)`` and
    permission bits when they differ from the wanted ones, None otherwise (or when nothing is
    there yet).
    """

    def __init__(self, wanted, before, before_link, before_owner=None, before_mode=None):
        self.wanted = wanted
        self.before = before            # text of the file now, None if no regular file
        self.before_link = before_link  # symlink target now, None if not a symlink
        self.before_owner = before_owner
        self.before_mode = before_mode

    @property
    def path(self):
        return self.wanted.path

    @property
    def metadata_only(self):
        """Only the owner or mode differ: the content (or link target) is already right."""
        item = self.wanted
        if item.absent:
            return False
        if item.symlink is not None:
            return self.before_link == item.symlink
        return self.before_link is None and self.before == item.content

    def describe(self):
        if self.wanted.absent:
            return "remove %s" % self.path
        if self.metadata_only:
            fixes = []
            if self.before_owner is not None:
                fixes.append("owner %s -> %s" % (_owner_text(self.before_owner), _owner_text(self.wanted.owner)))
            if self.before_mode is not None:
                fixes.append("mode %04o -> %04o" % (self.before_mode, self.wanted.mode))
            return "set %s of %s" % (", ".join(fixes), self.path)
        if self.wanted.symlink is not None:
            return "link %s -> %s" % (self.path, self.wanted.symlink)
        return "write %s" % self.path


def _owner_text(owner):
    return "%d:%d" % tuple(owner)


def _can_chown():
    """Whether this process can give a file to root (a seam for tests)."""
    return os.geteuid() == 0


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


def _metadata(item, text, link):
    """(owner now, mode now) of an existing file or symlink, each None where it is as wanted."""
    if item.absent or (text is None and link is None):
        return None, None
    if (item.symlink is None) != (link is None):
        return None, None  # a link where a file belongs, or the reverse: replaced whole anyway
    st = os.lstat(item.path)
    owner = (st.st_uid, st.st_gid)
    wrong_owner = owner if item.owner is not None and _can_chown() and owner != item.owner else None
    mode = st.st_mode & 0o7777
    wrong_mode = mode if item.symlink is None and mode != item.mode else None
    return wrong_owner, wrong_mode


def plan(wanted):
    """Return the Change list for the Wanted items that differ from the disk.

    A file differs in content, mode or owner; a symlink in target or owner. Raises NotOwned
    (an OSError naming the path) for a file the collection would take over, and
    trust.Untrusted for boot code (``trust_root``) another user could change.
    """
    changes = []
    for item in wanted:
        if item.trust_root is not None and not item.absent:
            try:
                trust.check_boot_file(item.path, item.content if item.symlink is None else None,
                                      item.trust_root, item.trusted_uid)
            except ValueError as exc:  # a #! line naming no absolute interpreter: ours, a bug
                raise ValueError("%s: %s" % (item.path, exc))
        text, link = _current(item.path)
        if item.absent:
            differs = text is not None or link is not None
        elif item.symlink is not None:
            differs = link != item.symlink
        else:
            differs = link is not None or text != item.content
        if item.symlink is None:
            _check_owned(item, text)
        owner, mode = _metadata(item, text, link)
        if differs or owner is not None or mode is not None:
            changes.append(Change(item, text, link, owner, mode))
    return changes


def diff_entries(changes):
    """--diff entries: file text before/after; a symlink shown as ``-> target``.

    An existing file or link whose owner or mode changes gets one more entry, ``owner`` and
    ``mode`` as values under the header ``<path> owner and mode``: text that did not change
    shows nothing in a unified diff, and a helper given back to root must not pass unseen.
    """
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
        if not change.metadata_only:
            entries.append(diffs.file_diff(change.path, before, after))
        if change.before_owner is not None or change.before_mode is not None:
            old, new = {}, {}
            if change.before_owner is not None:
                old["owner"], new["owner"] = _owner_text(change.before_owner), _owner_text(change.wanted.owner)
            if change.before_mode is not None:
                old["mode"], new["mode"] = "%04o" % change.before_mode, "%04o" % change.wanted.mode
            entries.append(diffs.values_diff(old, new, "%s owner and mode" % change.path))
    return entries


def _link_undo(path, before_link, created, before_owner=None):
    def undo():
        try:
            os.unlink(path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
        if before_link is not None:
            os.symlink(before_link, path)
            if before_owner is not None:
                os.lchown(path, before_owner[0], before_owner[1])
        fileops.remove_dirs(created)
    return undo


def _link_owner(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_uid, st.st_gid)


def _set_link(path, target, owner=None):
    """Point ``path`` at ``target`` atomically (a new link renamed over the old one)."""
    created = fileops.make_dirs(os.path.dirname(path))
    tmp = "%s.gpufleet-%s.tmp" % (path, os.urandom(4).hex())
    try:
        os.symlink(target, tmp)
        if owner is not None and _can_chown():
            os.lchown(tmp, owner[0], owner[1])
        os.rename(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fileops.remove_dirs(created)
        raise
    return created


def _replace(tx, item, metadata):
    """fileops.replace with the owner: write (or remove) the file, record the exact undo."""
    before = fileops.capture(item.path)
    if item.content is None:
        fileops.remove_file(before.path)
    else:
        before.created_dirs = fileops.write_atomic(before.path, item.content, mode=item.mode, metadata=metadata,
                                                   owner=item.owner)
    tx.record("file %s" % before.path, lambda: fileops.restore(before, metadata=metadata))
    return before


def apply(changes, tx, metadata=True):
    """Make each change, recording its undo in ``tx`` (a Transaction).

    A symlink where a file is wanted (or the reverse) is replaced as a whole; a file is
    written with its owner and mode (fileops.write_atomic, which chowns as root only), and its
    undo restores bytes, mode and owner exactly; a link is made anew, root's, and its undo puts
    the old one back with its owner.
    """
    for change in changes:
        item = change.wanted
        if item.symlink is not None or change.before_link is not None:
            if item.symlink is None and change.before_link is not None:
                old_owner = _link_owner(item.path)
                os.unlink(item.path)  # a link where our file belongs: the file replaces it
                tx.record(change.describe(), _link_undo(item.path, change.before_link, [], old_owner))
                if not item.absent:
                    _replace(tx, item, metadata)
                continue
            old_owner = _link_owner(item.path) if change.before_link is not None else None
            created = _set_link(item.path, item.symlink, item.owner if metadata else None)
            tx.record(change.describe(), _link_undo(item.path, change.before_link, created, old_owner))
            continue
        _replace(tx, item, metadata)


def unit_wants_link(systemd_dir, unit, target="multi-user.target", **options):
    """The Wanted symlink that enables ``unit`` for ``target``, as systemctl enable makes it.

    ``options``: further Wanted arguments (``trust_root``, ``owner``).
    """
    return Wanted(os.path.join(systemd_dir, "%s.wants" % target, unit), symlink="../%s" % unit, **options)
