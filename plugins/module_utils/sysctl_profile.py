# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A named set of sysctls: applied at runtime, persisted in /etc/sysctl.d, and undoable.

The module gpufleet.tuning.sysctl_profile is a thin shell over ``run()``. The profile follows
the collection's contract: read every current value and every file it would touch, plan, stop
there in check mode, write and read back, and on any failure restore what this call changed.
Like tuned, it remembers the values it replaced (a small JSON file per profile), so
``state=absent`` can put the machine back instead of only deleting the file.

Four rules this engine keeps, each learnt from a defect:

- It touches only its own files: ``NN-gpufleet-NAME.conf`` exactly, and only when the file
  carries the gpufleet.tuning marker (or the caller set ``adopt``).
- A rollback is a restore, checked: the undo of a sysctl is recorded before the write (the
  kernel may take part of a multi-value write and then fail), reads the key, writes the old
  value back only if it moved, and reads it back again. The failure message lists what was
  restored and what was not.
- The state file is data: every key and value in it is validated before it is used.
- Buffer and limit keys (``raise_only``) are never lowered: each field gets the larger of the
  kernel's value and the profile's, and that effective value is what is persisted.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec as argspec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\Z")
SYSCTL_D = "/etc/sysctl.d"
STATE_DIR = "/var/lib/gpufleet-tuning/sysctl"
# The ``area`` of this module's change records (common/records.py).
AREA = "sysctl"

# The module's argument spec, read by the module and by the tests (one engine contract).
ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    settings=dict(type="dict", default={}),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    persist=dict(type="bool", default=True),
    apply=dict(type="bool", default=True),
    priority=dict(type="int", default=90),
    on_unwritable=dict(type="str", default="fail", choices=["fail", "skip"]),
    host_wide=dict(type="str", default="apply", choices=["apply", "skip"]),
    raise_only=dict(type="list", elements="str", default=list(sysctl.RAISE_ONLY_DEFAULT)),
    adopt=dict(type="bool", default=False),
)


def with_defaults(params):
    """``params`` with every option it leaves out at its ARGUMENT_SPEC default."""
    return argspec.with_defaults(ARGUMENT_SPEC, params)


class Paths:
    """Where the profile reads and writes, all under ``root`` (/ on a node; a temp tree in tests)."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.proc_sys = os.path.join(root, sysctl.PROC_SYS.lstrip("/"))
        self.sysctl_d = os.path.join(root, SYSCTL_D.lstrip("/"))
        self.state_dir = os.path.join(root, STATE_DIR.lstrip("/"))


def profile_filename(name, priority):
    return "%02d-gpufleet-%s.conf" % (priority, name)


def profile_file_re(name):
    """The names of this profile's files under any priority, and nothing else: a profile
    ``a`` must never match ``90-gpufleet-other-a.conf``."""
    return re.compile(r"^[0-9][0-9]-gpufleet-%s\.conf\Z" % re.escape(name))


def render_file(name, values):
    """Text of the persisted file: the keys applied on this host, sorted.

    Skipped keys are left out entirely (not even as comments), so the file depends only on
    what is applied: a check-mode read-back that excludes them sees the same bytes. The first
    line carries the ownership marker (managed_files.MARKER).
    """
    lines = [
        "# Managed by Ansible (gpufleet.tuning.sysctl_profile), profile %s." % name,
        "# Local edits are overwritten on the next run; remove with state=absent.",
    ]
    for key in sorted(values):
        lines.append("%s = %s" % (key, values[key]))
    return "\n".join(lines) + "\n"


def file_settings(text):
    """``{key: value}`` of the setting lines of a sysctl.d text; lines whose key is not a
    valid sysctl name are left out (they name nothing this module could restore)."""
    found = {}
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")) or "=" not in stripped:
            continue
        key, value = stripped.split("=", 1)
        key = key.strip()
        if sysctl.validate_key(key) is None:
            found[key] = " ".join(value.split())
    return found


def validate(params):
    """Check every input before anything is read or written; return {key: normalized}."""
    name = params.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ModuleFailure("name %r is not valid: use 1-64 of a-z, 0-9, '_' and '-', starting "
                            "with a letter or digit (it becomes part of a file name)" % (name,))
    priority = params.get("priority")
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 99:
        raise ModuleFailure("priority %r is not valid: an integer from 0 to 99 (the NN in "
                            "/etc/sysctl.d/NN-gpufleet-NAME.conf)" % (priority,))
    settings = params.get("settings") or {}
    if not isinstance(settings, dict):
        raise ModuleFailure("settings must be a dict of key: value, got %s" % type(settings).__name__)
    if params.get("state") == "present" and not settings:
        raise ModuleFailure("settings is empty: state=present needs at least one key")
    errors = []
    raise_only = params.get("raise_only")
    if raise_only is None:
        raise_only = list(sysctl.RAISE_ONLY_DEFAULT)
    if not isinstance(raise_only, (list, tuple)):
        errors.append("raise_only must be a list of sysctl keys, got %s" % type(raise_only).__name__)
        raise_only = []
    for key in raise_only:
        reason = sysctl.validate_key(key)
        if reason:
            errors.append("raise_only entry %r %s" % (key, reason))
    desired = {}
    for key in sorted(settings, key=str):
        reason = sysctl.validate_key(key)
        if reason:
            errors.append("key %r %s" % (key, reason))
            continue
        if params.get("state") == "absent":
            desired[key] = None
            continue
        try:
            desired[key] = sysctl.normalize_value(settings[key])
        except sysctl.SysctlError as exc:
            errors.append("value for %s: %s" % (key, exc))
    if errors:
        raise ModuleFailure("invalid settings, nothing was changed: " + "; ".join(errors))
    return desired, frozenset(raise_only)


# --- the state file: data, validated before use ---------------------------------------------

def _load_state(path, name):
    """``(originals, text)``: the remembered originals ``{key: value}`` and the file's text
    (None: absent); ModuleFailure naming the file and the entry when it is not exactly what
    this module writes (a state file is data, not instructions: its keys become /proc/sys
    paths and its values are written to the kernel)."""
    try:
        text = fileops.read_text(path)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read the state file: %s; nothing was changed" % fileops.describe(exc))
    if text is None:
        return {}, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ModuleFailure("state file %s is not valid JSON (%s); move it aside to continue, "
                            "nothing was changed" % (path, exc))
    if not isinstance(data, dict) or not isinstance(data.get("originals"), dict):
        raise ModuleFailure("state file %s is not a JSON object with an 'originals' map; move it "
                            "aside to continue, nothing was changed" % path)
    if data.get("profile", name) != name:
        raise ModuleFailure("state file %s belongs to profile %r, not %r; move it aside to "
                            "continue, nothing was changed" % (path, data.get("profile"), name))
    bad = []
    for key, value in sorted(data["originals"].items()):
        reason = sysctl.validate_key(key)
        if reason:
            bad.append("key %r %s" % (key, reason))
            continue
        reason = sysctl.validate_stored_value(value)
        if reason:
            bad.append("%s: value %r %s" % (key, value, reason))
    if bad:
        raise ModuleFailure("state file %s has entries this module never writes: %s; it is not "
                            "used (fix or move it aside), nothing was changed" % (path, "; ".join(bad)))
    return dict(data["originals"]), text


def _dump_state(name, originals):
    return json.dumps({"profile": name, "originals": originals}, indent=2, sort_keys=True) + "\n"


class _State:
    """This profile's state file: the originals it holds, as read, and the text it would hold."""

    def __init__(self, path, name):
        self.path = path
        self.name = name
        self.originals, self.text = _load_state(path, name)

    def render(self, originals):
        """The file's text for ``originals``; None (no file) when there are none."""
        return _dump_state(self.name, originals) if originals else None

    def record(self, originals):
        """The change record of the state file when it goes from what was read to ``originals``."""
        if originals == self.originals:
            return []
        return [records.file_change(AREA, self.path, self.text, self.render(originals))]


# --- this profile's files in sysctl.d ------------------------------------------------------

class _Entry:
    """One file of this profile in sysctl.d as found: its text (through a symlink), or why
    its text could not be read (a dangling link, a link to /dev/null that masks it)."""

    __slots__ = ("path", "link", "text", "problem")

    def __init__(self, path, link, text, problem):
        self.path = path
        self.link = link
        self.text = text
        self.problem = problem

    @property
    def owned(self):
        return self.text is not None and managed_files.is_owned(self.text)


def _read_entry(path):
    """The _Entry at ``path``, or None when nothing is there. OSError (naming the path) for
    something that cannot be a sysctl.d file: a directory, a FIFO, text that is not UTF-8."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        if exc.filename is None:
            exc.filename = path
        raise
    if stat.S_ISLNK(st.st_mode):
        link = os.readlink(path)
        try:
            text = fileops.read_text(path)
        except (OSError, IOError) as exc:
            if exc.errno == errno.EILSEQ:
                raise
            what = "masks it" if os.path.realpath(path) == "/dev/null" else "not a regular file"
            return _Entry(path, link, None, "a symlink to %s (%s)" % (link, what))
        if text is None:
            return _Entry(path, link, None, "a dangling symlink to %s" % link)
        return _Entry(path, link, text, None)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL,
                      "is %s where a sysctl.d file of this profile was expected" % fileops.kind(st.st_mode), path)
    return _Entry(path, None, fileops.read_text(path), None)


def _profile_entries(paths, name, conf_path):
    """Every file of this profile in sysctl.d (exact names, any priority), conf_path first
    when it exists; the others sorted."""
    pattern = profile_file_re(name)
    try:
        names = os.listdir(paths.sysctl_d)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            names = []
        else:
            if exc.filename is None:
                exc.filename = paths.sysctl_d
            raise
    found = []
    conf = _read_entry(conf_path)
    if conf is not None:
        found.append(conf)
    for entry in sorted(names):
        path = os.path.join(paths.sysctl_d, entry)
        if path == conf_path or not pattern.fullmatch(entry):
            continue
        item = _read_entry(path)
        if item is not None:
            found.append(item)
    return found


def _refusal(entry, action):
    """Why ``entry`` may not be overwritten or removed without adopt, or None."""
    if entry.problem is not None:
        return ("%s is %s: refusing to %s it; remove it yourself, or set adopt=true to replace it"
                % (entry.path, entry.problem, action))
    if entry.owned:
        return None
    return ("%s exists and was not written by gpufleet.tuning (no '%s' marker comment in its first "
            "lines): refusing to %s it; move it away, or set adopt=true to take it over"
            % (entry.path, managed_files.MARKER, action))


def _check_ownership(plan, adopt, container):
    """ModuleFailure (nothing written yet) for any planned file change on a file not ours."""
    if adopt:
        return
    refused = [reason for reason in (_refusal(entry, action) for entry, action in plan) if reason]
    if refused:
        raise ModuleFailure("; ".join(refused) + "; nothing was changed", {"container": container})


# --- apply and roll back ---------------------------------------------------------------------

class _Steps:
    """A Transaction whose undos say what they put back, for a message that names exactly
    what was restored and what was not. fileops.replace records into it like a Transaction."""

    def __init__(self):
        self.tx = Transaction()
        self.restored = []

    def record(self, description, undo):
        def run():
            note = undo()
            if note is not False:
                self.restored.append(note if isinstance(note, str) else description)
        self.tx.record(description, run)

    def abort(self, message):
        """Undo every step; return the full failure message."""
        err = self.tx.abort(message)
        text = message
        if self.restored:
            text += "; restored: %s" % ", ".join(self.restored)
        elif not err.rollback_errors:
            text += "; nothing had been changed yet"
        if err.rollback_errors:
            text += "; NOT restored (fix by hand): %s" % "; ".join(err.rollback_errors)
        else:
            text += "; the machine is as it was before this run"
        return text, err.rollback_errors


def _restore_key(key, old, root):
    """Undo of a sysctl write: put ``old`` back if the key moved, and prove it.

    Returns False when the key had not moved (nothing to restore), else the note.
    """
    def undo():
        now = sysctl.read_value(key, root)
        if now == old:
            return False
        try:
            sysctl.write_value(key, old, root)
        except (OSError, IOError) as exc:
            raise sysctl.SysctlError("%s is still %r: writing back %r failed: %s"
                                     % (key, now, old, sysctl.describe_oserror(exc)))
        got = sysctl.read_value(key, root)
        if got != old:
            raise sysctl.SysctlError("%s reads %r after writing back %r (it was %r before the undo)"
                                     % (key, got, old, now))
        return "%s to %r (it was %r)" % (key, old, now)
    return undo


def _remove_link(steps, path):
    """Remove the symlink ``path`` itself (its target is left alone); undo recreates it."""
    target = os.readlink(path)
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = path
        raise

    def undo():
        os.symlink(target, path)
        return "symlink %s -> %s" % (path, target)
    steps.record("symlink %s" % path, undo)


def _change_file(steps, entry, path, content):
    """Write ``content`` to ``path`` (None removes it), ``entry`` being what is there now.

    A symlink to our own file is written through (the link stays); a symlink being removed
    or one that cannot be written through (dangling, /dev/null) is itself removed, and the
    file written in its place. Every change is undone exactly by ``steps``.
    """
    if entry is not None and entry.link is not None and (content is None or entry.problem is not None):
        _remove_link(steps, path)
        if content is None:
            return
    fileops.replace(steps, path, content)


def _file_record(entry, path, content):
    """The change record of one file of this profile going from ``entry`` (None: absent) to
    ``content`` (None: removed); a symlink removed or replaced shows as its link."""
    if entry is not None and entry.link is not None and (content is None or entry.problem is not None):
        before = {"link": entry.link}
        after = records.file_state(content)
        return records.record(AREA, "file", path, before, after)
    return records.file_change(AREA, path, entry.text if entry is not None else None, content)


def _read_after(keys, root):
    """Values of ``keys`` as they are now, for the result of a failed run (None: unreadable)."""
    found = {}
    for key in keys:
        try:
            found[key] = sysctl.read_value(key, root)
        except sysctl.SysctlError:
            found[key] = None
    return found


class _Failed(Exception):
    """A step failed after something was changed: roll back and report."""


def _write_key(key, old, new, root, steps):
    """Write ``new`` to ``key`` (holding ``old``) inside ``steps``, and read it back.

    The undo is recorded BEFORE the write: the kernel stores the fields of a multi-value key
    one by one and may fail on a later field with the earlier ones already live. Returns the
    OSError when the kernel refused the write and the key is unchanged (the caller decides
    whether that is a skip); raises _Failed for anything else.
    """
    steps.record("sysctl %s" % key, _restore_key(key, old, root))
    try:
        sysctl.write_value(key, new, root)
    except (OSError, IOError) as exc:
        try:
            now = sysctl.read_value(key, root)
        except sysctl.SysctlError as read_exc:
            raise _Failed("failed to set %s to %r: %s; reading it back then failed too: %s"
                          % (key, new, sysctl.describe_oserror(exc), read_exc))
        if now != old:
            raise _Failed("failed to set %s to %r: %s, after the kernel had taken part of it "
                          "(it read %r, was %r)" % (key, new, sysctl.describe_oserror(exc), now, old))
        return exc
    try:
        got = sysctl.read_value(key, root)
    except sysctl.SysctlError as exc:
        raise _Failed("%s was written but cannot be read back: %s" % (key, exc))
    if got != new:
        raise _Failed("%s did not take %r: the kernel reports %r after the write (its handler "
                      "rounds or clamps it; to keep it, put %r in the profile)" % (key, new, got, got))
    return None


# --- the run ----------------------------------------------------------------------------------

def run(params, check_mode=False, paths=None, tools=None):
    """Apply (or remove) one profile; return the module result dict or raise ModuleFailure.

    ``tools`` (the command runner every engine takes) is not used: /proc/sys needs no binary.
    """
    paths = paths or Paths()
    params = with_defaults(params)
    desired, raise_only = validate(params)
    name = params["name"]
    container = container_mod.detect(proc_root=paths.proc, root=paths.root)
    conf_path = os.path.join(paths.sysctl_d, profile_filename(name, params["priority"]))
    state = _State(os.path.join(paths.state_dir, "%s.json" % name), name)
    try:
        entries = _profile_entries(paths, name, conf_path)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read this profile's files: %s; nothing was changed" % fileops.describe(exc),
                            {"container": container})
    if params["state"] == "absent":
        return _run_absent(params, desired, paths, conf_path, state, entries, container, check_mode)
    return _run_present(params, desired, raise_only, paths, conf_path, state, entries, container, check_mode)


def _missing_reason(key, paths, container, host_wide_skip):
    """For a key with no /proc/sys entry: (skip reason, None) or (None, error)."""
    path = sysctl.key_path(key, paths.proc_sys)
    if host_wide_skip and not sysctl.is_namespaced(key):
        return "host-wide key: the host sets it (gpufleet.tuning.host role); not visible in this namespace, check it on the host", None
    if host_wide_skip and container["detected"]:
        # A key the kernel keeps in the initial namespace only (net.core.optmem_max before it
        # became per-namespace, somaxconn in old user-namespaced containers): the host's.
        return ("not visible in this container's namespace (%s does not exist): on this kernel the key "
                "belongs to the host, or its name is misspelt; check it on the host" % path), None
    hint = ""
    if container["detected"] and not sysctl.is_namespaced(key):
        hint = " (a host-wide key that does not exist in this container's namespace: set it on the host)"
    return None, "unknown key %s: %s does not exist%s" % (key, path, hint)


def _read_current(keys, paths, container, host_wide_skip, skipped):
    """Read every key; a missing key is skipped (see _missing_reason) or an error."""
    before = {}
    errors = []
    for key in keys:
        path = sysctl.key_path(key, paths.proc_sys)
        if not os.path.lexists(path):
            reason, error = _missing_reason(key, paths, container, host_wide_skip)
            if error:
                errors.append(error)
            else:
                skipped[key] = reason
                before[key] = None
            continue
        try:
            before[key] = sysctl.read_value(key, paths.proc_sys)
        except sysctl.SysctlError as exc:
            errors.append(str(exc))
    if errors:
        raise ModuleFailure("nothing was changed: " + "; ".join(errors), {"container": container})
    return before


def _effective(key, current, wanted, raise_only):
    """(value to apply, kept field positions or None, error or None) for one key."""
    shape = sysctl.value_shape_error(key, current, wanted)
    if shape:
        return None, None, shape
    if key not in raise_only:
        return wanted, None, None
    raised = sysctl.raise_fields(current, wanted)
    if raised is None:
        return None, None, ("%s is in raise_only, which compares integers field by field, but the kernel "
                            "holds %r and the profile wants %r (take it out of raise_only to write it "
                            "as given)" % (key, current, wanted))
    effective, kept = raised
    return effective, kept or None, None


def _run_present(params, desired, raise_only, paths, conf_path, state, entries, container, check_mode):
    root = paths.proc_sys
    skipped = {}
    host_wide_skip = params["host_wide"] == "skip"
    if host_wide_skip:
        for key in desired:
            if not sysctl.is_namespaced(key):
                skipped[key] = "host-wide key: the host sets it (gpufleet.tuning.host role)"
    before = _read_current(sorted(desired), paths, container, host_wide_skip, skipped)

    # The value each key gets: the profile's, or field by field the larger of the kernel's
    # and the profile's for raise_only keys.
    effective = {}
    kept_higher = {}
    errors = []
    for key in sorted(desired):
        if before.get(key) is None:
            continue
        value, kept, error = _effective(key, before[key], desired[key], raise_only)
        if error and key in skipped:
            skipped[key] += "; currently %s, wanted %s" % (before[key], desired[key])
            continue
        if error:
            errors.append(error)
            continue
        effective[key] = value
        if key in skipped:
            if before[key] != value:
                skipped[key] += "; currently %s, wanted %s" % (before[key], desired[key])
            elif kept:
                skipped[key] += "; already %s (not lower than the wanted %s)" % (before[key], desired[key])
            else:
                skipped[key] += "; already %s" % before[key]
        elif kept:
            kept_higher[key] = {"wanted": desired[key], "effective": value, "fields": kept}
    if errors:
        raise ModuleFailure("nothing was changed: " + "; ".join(errors), {"before": before, "container": container})

    to_write = [k for k in sorted(effective) if k not in skipped and before[k] != effective[k]]
    if params["apply"]:
        blocked = []
        for key in list(to_write):
            ok, reason = sysctl.writable(key, root)
            if ok:
                continue
            if params["on_unwritable"] == "skip":
                skipped[key] = "cannot be written here: %s; currently %s, wanted %s" % (reason, before[key], effective[key])
                kept_higher.pop(key, None)
                to_write.remove(key)
            else:
                blocked.append("%s (%s)" % (key, reason))
        if blocked:
            raise ModuleFailure(
                "cannot write %s; nothing was changed (use on_unwritable=skip to leave such keys "
                "alone and report them)" % ", ".join(blocked),
                {"before": before, "container": container})
    else:
        to_write = []

    result = {
        "changed": False,
        "before": before,
        "after": dict(before),
        "skipped_keys": skipped,
        "kept_higher": kept_higher,
        "container": container,
        "path": conf_path,
        "changed_keys": [],
        "reboot_required": False,
        "persisted": False,
    }

    # Files: planned (and refused when not ours) before any runtime write.
    conf_entry = entries[0] if entries and entries[0].path == conf_path else None
    stale = [entry for entry in entries if entry.path != conf_path]

    def file_plan():
        values = dict((k, effective[k]) for k in effective if k not in skipped)
        after = render_file(params["name"], values) if params["persist"] else None
        if after is None:
            changed = conf_entry is not None
        else:
            changed = conf_entry is None or conf_entry.problem is not None or conf_entry.text != after
        return values, after, changed

    persisted_values, file_after, file_changed = file_plan()
    plan = [(conf_entry, "overwrite" if file_after is not None else "remove")] if file_changed and conf_entry else []
    plan += [(entry, "remove") for entry in stale]
    _check_ownership(plan, params["adopt"], container)

    def remembered(written):
        """The originals with each key this run writes for the first time added: only the
        values the profile replaces are remembered (state=absent puts back exactly those)."""
        found = dict(state.originals)
        for key in written:
            found.setdefault(key, before[key])
        return found
    new_originals = remembered(to_write)

    if check_mode:
        for key in to_write:
            result["after"][key] = effective[key]
        result["changed_keys"] = list(to_write)
    else:
        steps = _Steps()
        try:
            for key in to_write:
                refused = _write_key(key, before[key], effective[key], root, steps)
                if refused is None:
                    result["after"][key] = effective[key]
                    result["changed_keys"].append(key)
                    continue
                if params["on_unwritable"] == "skip" and refused.errno in sysctl.UNWRITABLE_ERRNOS:
                    skipped[key] = "the kernel refused the write: %s; currently %s, wanted %s" % (
                        sysctl.describe_oserror(refused), before[key], effective[key])
                    kept_higher.pop(key, None)
                    continue
                raise _Failed("failed to set %s to %r: %s (the kernel left it at %r)" % (
                    key, effective[key], sysctl.describe_oserror(refused), before[key]))
            # Keys the kernel refused at write time are skipped: neither persisted nor remembered.
            persisted_values, file_after, file_changed = file_plan()
            new_originals = remembered(result["changed_keys"])
            if file_changed:
                _change_file(steps, conf_entry, conf_path, file_after)
            for entry in stale:
                _change_file(steps, entry, entry.path, None)
            if new_originals != state.originals:
                fileops.replace(steps, state.path, state.render(new_originals))
        except _Failed as exc:
            raise _rolled_back(steps, str(exc), result, paths)
        except sysctl.SysctlError as exc:
            raise _rolled_back(steps, str(exc), result, paths)
        except (OSError, IOError) as exc:
            raise _rolled_back(steps, "failed to update %s" % fileops.describe(exc), result, paths)

    diff = [diffs.values_diff(before, result["after"], "sysctl runtime values")]
    if file_changed:
        diff.append(diffs.file_diff(conf_path, conf_entry.text if conf_entry else None, file_after))
    for entry in stale:
        diff.append(diffs.file_diff(entry.path, entry.text if entry.text is not None else "-> %s\n" % entry.link, None))
    result["persisted"] = file_after is not None
    result["changed"] = bool(result["changed_keys"]) or file_changed or bool(stale) or new_originals != state.originals
    if not params["apply"] and params["persist"]:
        # Values only in the file take effect at the next boot (or `sysctl --system`).
        result["reboot_required"] = any(before.get(k) != v for k, v in persisted_values.items())
    result["diff"] = diff
    changes = records.values(AREA, before, result["after"])
    if file_changed:
        changes.append(_file_record(conf_entry, conf_path, file_after))
    changes.extend(_file_record(entry, entry.path, None) for entry in stale)
    result["changes"] = changes + state.record(new_originals)
    return result


def _rolled_back(steps, message, result, paths):
    """Undo this call's steps; the error reports the values as they are after the undo."""
    text, rollback_errors = steps.abort(message)
    result["after"] = _read_after(sorted(result["before"]), paths.proc_sys)
    result["changed_keys"] = []
    result["rollback_errors"] = rollback_errors
    return ModuleFailure(text, result)


def _run_absent(params, desired, paths, conf_path, state, entries, container, check_mode):
    originals = state.originals
    root = paths.proc_sys
    _check_ownership([(entry, "remove" if not desired else "edit") for entry in entries],
                     params["adopt"], container)
    managed = set(originals)
    for entry in entries:
        managed.update(file_settings(entry.text))
    unknown = sorted(k for k in desired if k not in managed)
    if unknown:
        raise ModuleFailure("cannot remove %s from profile %s: not part of it (it manages: %s); "
                            "nothing was changed" % (", ".join(unknown), params["name"],
                                                     ", ".join(sorted(managed)) or "nothing"),
                            {"container": container})
    keys = sorted(desired) if desired else sorted(managed)
    subset = bool(desired)

    skipped = {}
    forget = set()      # remembered keys that no longer exist here: dropped from the state
    restore = {}
    if params["apply"]:
        for key in keys:
            if key not in originals:
                continue
            if not os.path.lexists(sysctl.key_path(key, root)):
                skipped[key] = ("does not exist here (%s): its remembered value %s was not restored and "
                                "is forgotten" % (sysctl.key_path(key, root), originals[key]))
                forget.add(key)
                continue
            restore[key] = originals[key]
    before = _read_current(sorted(restore), paths, container, False, {})
    to_write = [k for k in sorted(restore) if before[k] != restore[k]]
    for key in list(to_write):
        ok, reason = sysctl.writable(key, root)
        if ok:
            continue
        if params["on_unwritable"] != "skip":
            raise ModuleFailure("cannot restore %s (%s); nothing was changed (use on_unwritable=skip to "
                                "leave it and keep its remembered value)" % (key, reason),
                                {"before": before, "container": container})
        skipped[key] = "cannot be written here: %s; currently %s, remembered %s (kept in the state file)" % (
            reason, before[key], restore[key])
        to_write.remove(key)
    result = {
        "changed": False,
        "before": before,
        "after": dict(before),
        "skipped_keys": skipped,
        "kept_higher": {},
        "container": container,
        "path": conf_path,
        "changed_keys": [],
        "persisted": False,
        "reboot_required": False,
    }

    # With a subset, rewrite the files without those keys (a file left with none goes);
    # otherwise the files go.
    file_plan = []
    for entry in entries:
        new = None
        if subset and entry.text is not None:
            kept = [line for line in entry.text.splitlines()
                    if line.lstrip().startswith(("#", ";")) or line.split("=", 1)[0].strip() not in desired]
            new = "\n".join(kept) + "\n"
            if not file_settings(new):
                new = None
            elif new == entry.text:
                continue
        file_plan.append((entry, new))

    def remaining_state():
        if not params["apply"]:
            return originals
        return dict((k, v) for k, v in originals.items()
                    if k not in forget and (k not in keys or (k in skipped and k not in forget)))
    remaining = remaining_state()

    if check_mode:
        for key in to_write:
            result["after"][key] = restore[key]
        result["changed_keys"] = list(to_write)
    else:
        steps = _Steps()
        try:
            for key in to_write:
                refused = _write_key(key, before[key], restore[key], root, steps)
                if refused is None:
                    result["after"][key] = restore[key]
                    result["changed_keys"].append(key)
                    continue
                if params["on_unwritable"] == "skip" and refused.errno in sysctl.UNWRITABLE_ERRNOS:
                    skipped[key] = "the kernel refused the write: %s; currently %s, remembered %s (kept in the state file)" % (
                        sysctl.describe_oserror(refused), before[key], restore[key])
                    continue
                raise _Failed("failed to restore %s to %r: %s (the kernel left it at %r)" % (
                    key, restore[key], sysctl.describe_oserror(refused), before[key]))
            remaining = remaining_state()
            for entry, new in file_plan:
                _change_file(steps, entry, entry.path, new)
            if remaining != originals:
                fileops.replace(steps, state.path, state.render(remaining))
        except _Failed as exc:
            raise _rolled_back(steps, "failed to remove profile %s: %s" % (params["name"], exc), result, paths)
        except sysctl.SysctlError as exc:
            raise _rolled_back(steps, "failed to remove profile %s: %s" % (params["name"], exc), result, paths)
        except (OSError, IOError) as exc:
            raise _rolled_back(steps, "failed to remove profile %s: failed to update %s" % (params["name"], fileops.describe(exc)),
                               result, paths)

    diff = [diffs.values_diff(before, result["after"], "sysctl runtime values")]
    for entry, new in file_plan:
        diff.append(diffs.file_diff(entry.path, entry.text if entry.text is not None else "-> %s\n" % entry.link, new))
    conf_after = dict((entry.path, entry.text) for entry in entries)
    conf_after.update((entry.path, new) for entry, new in file_plan)
    result["persisted"] = conf_after.get(conf_path) is not None
    result["changed"] = bool(result["changed_keys"]) or bool(file_plan) or remaining != originals
    result["diff"] = diff
    changes = records.values(AREA, before, result["after"])
    changes.extend(_file_record(entry, entry.path, new) for entry, new in file_plan)
    result["changes"] = changes + state.record(remaining)
    return result
