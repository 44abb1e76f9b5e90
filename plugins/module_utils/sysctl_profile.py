# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A named set of sysctls: applied at runtime, persisted in /etc/sysctl.d, and undoable.

The module gpufleet.tuning.sysctl_profile is a thin shell over ``run()``. The profile follows
the collection's contract: read every current value, plan, stop there in check mode, write and
read back, and on any failure restore what this call already wrote. Like tuned, it remembers
the values it replaced (a small JSON file per profile), so ``state=absent`` can put the
machine back instead of only deleting the file.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.outcome import ModuleFailure

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\Z")
STATE_DIR = "/var/lib/gpufleet-tuning/sysctl"


class ProfileError(ModuleFailure):
    """A failure of this module, with what was learnt so far (see outcome.ModuleFailure)."""


class Paths(object):
    """Where the profile reads and writes; tests point these into a temp dir."""

    def __init__(self, proc_sys=sysctl.PROC_SYS, sysctl_d="/etc/sysctl.d", state_dir=STATE_DIR,
                 proc="/proc", root="/"):
        self.proc_sys = proc_sys
        self.sysctl_d = sysctl_d
        self.state_dir = state_dir
        self.proc = proc
        self.root = root


def profile_filename(name, priority):
    return "%02d-gpufleet-%s.conf" % (priority, name)


def render_file(name, values):
    """Text of the persisted file: the keys applied on this host, sorted.

    Skipped keys are left out entirely (not even as comments), so the file depends only on
    what is applied: a check-mode read-back that excludes them sees the same bytes.
    """
    lines = [
        "# Managed by Ansible (gpufleet.tuning.sysctl_profile), profile %s." % name,
        "# Local edits are overwritten on the next run; remove with state=absent.",
    ]
    for key in sorted(values):
        lines.append("%s = %s" % (key, values[key]))
    return "\n".join(lines) + "\n"


def validate(params):
    """Check every input before anything is read or written; return {key: normalized}."""
    name = params.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ProfileError("name %r is not valid: use 1-64 of a-z, 0-9, '_' and '-', starting "
                           "with a letter or digit (it becomes part of a file name)" % (name,))
    priority = params.get("priority")
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 99:
        raise ProfileError("priority %r is not valid: an integer from 0 to 99 (the NN in "
                           "/etc/sysctl.d/NN-gpufleet-NAME.conf)" % (priority,))
    settings = params.get("settings") or {}
    if not isinstance(settings, dict):
        raise ProfileError("settings must be a dict of key: value, got %s" % type(settings).__name__)
    if params.get("state") == "present" and not settings:
        raise ProfileError("settings is empty: state=present needs at least one key")
    errors = []
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
        raise ProfileError("invalid settings, nothing was changed: " + "; ".join(errors))
    return desired


def _load_state(path):
    text = fileops.read_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
        originals = data.get("originals", {})
        if isinstance(originals, dict):
            return dict((str(k), str(v)) for k, v in originals.items())
    except (ValueError, AttributeError):
        pass
    raise ProfileError("state file %s is not valid JSON with an 'originals' map; "
                       "move it aside to continue" % path)


def _dump_state(name, originals):
    return json.dumps({"profile": name, "originals": originals}, indent=2, sort_keys=True) + "\n"


def _other_profile_files(paths, name, keep):
    """Files of this profile under another priority (left behind when priority changed)."""
    suffix = "-gpufleet-%s.conf" % name
    found = []
    try:
        entries = os.listdir(paths.sysctl_d)
    except OSError:
        return found
    for entry in sorted(entries):
        if entry.endswith(suffix) and entry != keep and re.match(r"^\d\d-", entry):
            found.append(os.path.join(paths.sysctl_d, entry))
    return found


def run(params, check_mode=False, paths=None):
    """Apply (or remove) one profile; return the module result dict or raise ProfileError."""
    paths = paths or Paths()
    desired = validate(params)
    name = params["name"]
    state = params["state"]
    container = container_mod.detect(proc_root=paths.proc, root=paths.root)
    conf_path = os.path.join(paths.sysctl_d, profile_filename(name, params["priority"]))
    state_path = os.path.join(paths.state_dir, "%s.json" % name)
    originals = _load_state(state_path)
    if state == "absent":
        return _run_absent(params, desired, paths, conf_path, state_path, originals, container, check_mode)
    return _run_present(params, desired, paths, conf_path, state_path, originals, container, check_mode)


def _read_current(keys, paths, container, skipped):
    """Read every key; unknown keys are an error unless already skipped as host-wide."""
    before = {}
    errors = []
    for key in keys:
        if not sysctl.exists(key, paths.proc_sys):
            if key in skipped:
                before[key] = None
                continue
            hint = ""
            if container["detected"] and not sysctl.is_namespaced(key):
                hint = " (a host-wide key that does not exist in this container's namespace: set it on the host)"
            errors.append("unknown key %s: %s does not exist%s" % (key, sysctl.key_path(key, paths.proc_sys), hint))
            continue
        try:
            before[key] = sysctl.read_value(key, paths.proc_sys)
        except sysctl.SysctlError as exc:
            errors.append(str(exc))
    if errors:
        raise ProfileError("nothing was changed: " + "; ".join(errors), {"container": container})
    return before


def _run_present(params, desired, paths, conf_path, state_path, originals, container, check_mode):
    skipped = {}
    if params["host_wide"] == "skip":
        for key in desired:
            if not sysctl.is_namespaced(key):
                skipped[key] = "host-wide key: the host sets it (gpufleet.tuning.host role)"
    before = _read_current(sorted(desired), paths, container, skipped)
    for key in skipped:
        if before.get(key) is not None and before[key] != desired[key]:
            skipped[key] += "; currently %s, wanted %s" % (before[key], desired[key])
        elif before.get(key) is not None:
            skipped[key] += "; already %s" % before[key]
        else:
            skipped[key] += "; not visible in this namespace, check it on the host"

    to_write = [k for k in sorted(desired) if k not in skipped and before[k] != desired[k]]
    if params["apply"]:
        blocked = []
        for key in list(to_write):
            ok, reason = sysctl.writable(key, paths.proc_sys)
            if ok:
                continue
            if params["on_unwritable"] == "skip":
                skipped[key] = "cannot be written here: %s; currently %s, wanted %s" % (reason, before[key], desired[key])
                to_write.remove(key)
            else:
                blocked.append("%s (%s)" % (key, reason))
        if blocked:
            raise ProfileError(
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
        "container": container,
        "path": conf_path,
        "changed_keys": [],
        "reboot_required": False,
    }

    tx = Transaction()
    if not check_mode:
        for key in to_write:
            try:
                sysctl.write_value(key, desired[key], paths.proc_sys)
            except (OSError, IOError) as exc:
                if params["on_unwritable"] == "skip" and exc.errno in sysctl.UNWRITABLE_ERRNOS:
                    skipped[key] = "the kernel refused the write: %s; currently %s, wanted %s" % (
                        sysctl.describe_oserror(exc), before[key], desired[key])
                    continue
                raise _rolled_back(tx, "failed to set %s to %r: %s" % (key, desired[key], sysctl.describe_oserror(exc)),
                                   result, before)
            tx.record("sysctl %s" % key, _writer(key, before[key], paths.proc_sys))
            try:
                got = sysctl.read_value(key, paths.proc_sys)
            except sysctl.SysctlError as exc:
                raise _rolled_back(tx, str(exc), result, before)
            if got != desired[key]:
                raise _rolled_back(tx, "%s did not take %r: the kernel reports %r after the write" % (key, desired[key], got),
                                   result, before)
            result["after"][key] = got
    else:
        for key in to_write:
            result["after"][key] = desired[key]
    result["changed_keys"] = [k for k in to_write if k not in skipped]

    persisted_values = dict((k, v) for k, v in desired.items() if k not in skipped)
    file_before = fileops.read_text(conf_path)
    file_after = render_file(params["name"], persisted_values) if params["persist"] else None
    stale = _other_profile_files(paths, params["name"], os.path.basename(conf_path))
    diff = [diffs.values_diff(before, result["after"], "sysctl runtime values")]
    file_changed = file_before != file_after
    if file_changed:
        diff.append(diffs.file_diff(conf_path, file_before, file_after))
    for path in stale:
        diff.append(diffs.file_diff(path, fileops.read_text(path), None))

    new_originals = dict(originals)
    if params["apply"]:
        for key in desired:
            if key not in skipped and key not in new_originals and before.get(key) is not None:
                new_originals[key] = before[key]

    if not check_mode:
        try:
            if file_changed:
                _replace_file(tx, conf_path, file_before, file_after)
            for path in stale:
                _replace_file(tx, path, fileops.read_bytes(path), None)
            if new_originals != originals:
                _replace_file(tx, state_path, fileops.read_bytes(state_path), _dump_state(params["name"], new_originals))
        except (OSError, IOError) as exc:
            raise _rolled_back(tx, "failed to write %s: %s" % (getattr(exc, "filename", None) or conf_path,
                                                               sysctl.describe_oserror(exc)), result, before)

    result["persisted"] = file_after is not None
    result["changed"] = bool(result["changed_keys"]) or file_changed or bool(stale)
    if not params["apply"] and params["persist"]:
        # Values only in the file take effect at the next boot (or `sysctl --system`).
        result["reboot_required"] = any(before.get(k) != v for k, v in persisted_values.items())
    result["diff"] = diff
    return result


def _rolled_back(tx, message, result, before):
    """Undo this call's steps; the error reports the values as they are after the undo."""
    err = tx.abort(message)
    if not err.rollback_errors:
        result["after"] = dict(before)
    return ProfileError(err.full_message(), result)


def _writer(key, value, root):
    return lambda: sysctl.write_value(key, value, root)


def _replace_file(tx, path, old_content, new_content):
    """Change a file inside the transaction, remembering how to put the old bytes back."""
    if new_content is None:
        fileops.remove_file(path)
    else:
        fileops.write_atomic(path, new_content, mode=0o644)
    tx.record("file %s" % path, lambda: fileops.restore_file(path, old_content))


def _run_absent(params, desired, paths, conf_path, state_path, originals, container, check_mode):
    files = [p for p in [conf_path] + _other_profile_files(paths, params["name"], os.path.basename(conf_path))
             if os.path.exists(p)]
    managed = set(originals)
    for path in files:
        for line in (fileops.read_text(path) or "").splitlines():
            if "=" in line and not line.lstrip().startswith(("#", ";")):
                managed.add(line.split("=", 1)[0].strip())
    unknown = sorted(k for k in desired if k not in managed)
    if unknown:
        raise ProfileError("cannot remove %s from profile %s: not part of it (it manages: %s); "
                           "nothing was changed" % (", ".join(unknown), params["name"],
                                                    ", ".join(sorted(managed)) or "nothing"),
                           {"container": container})
    keys = sorted(desired) if desired else sorted(managed)
    subset = bool(desired)

    restore = {}
    if params["apply"]:
        restore = dict((k, originals[k]) for k in keys if k in originals)
    before = _read_current(sorted(restore), paths, container, {})
    to_write = [k for k in sorted(restore) if before[k] != restore[k]]
    result = {
        "changed": False,
        "before": before,
        "after": dict(before),
        "skipped_keys": {},
        "container": container,
        "path": conf_path,
        "changed_keys": list(to_write),
        "persisted": False,
        "reboot_required": False,
    }

    # With a subset, rewrite the file without those keys; otherwise the files go.
    file_plan = []
    for path in files:
        old = fileops.read_text(path)
        new = None
        if subset:
            kept = [line for line in old.splitlines()
                    if line.split("=", 1)[0].strip() not in desired or line.lstrip().startswith("#")]
            new = "\n".join(kept) + "\n"
            if new == old:
                continue
        file_plan.append((path, old, new))
    remaining = dict((k, v) for k, v in originals.items() if k not in keys) if params["apply"] else originals
    new_state = _dump_state(params["name"], remaining) if remaining else None
    old_state = fileops.read_text(state_path)
    if old_state is not None and not params["apply"]:
        new_state = old_state

    tx = Transaction()
    if not check_mode:
        try:
            for key in to_write:
                tx.step("sysctl %s" % key, _writer(key, restore[key], paths.proc_sys),
                        _writer(key, before[key], paths.proc_sys))
                got = sysctl.read_value(key, paths.proc_sys)
                if got != restore[key]:
                    raise ProfileError("%s did not take %r: the kernel reports %r" % (key, restore[key], got))
                result["after"][key] = got
            for path, old, new in file_plan:
                _replace_file(tx, path, old, new)
            if new_state != old_state:
                _replace_file(tx, state_path, old_state, new_state)
        except (OSError, IOError, ProfileError, sysctl.SysctlError) as exc:
            text = sysctl.describe_oserror(exc) if isinstance(exc, (OSError, IOError)) else str(exc)
            raise _rolled_back(tx, "failed to remove profile %s: %s" % (params["name"], text), result, before)
    else:
        for key in to_write:
            result["after"][key] = restore[key]

    diff = [diffs.values_diff(before, result["after"], "sysctl runtime values")]
    for path, old, new in file_plan:
        diff.append(diffs.file_diff(path, old, new))
    result["persisted"] = bool(subset and os.path.exists(conf_path))
    result["changed"] = bool(to_write) or bool(file_plan)
    result["diff"] = diff
    return result
