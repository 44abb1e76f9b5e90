# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The locked-memory limit of an LXC container, set in its config on the host.

The module gpufleet.tuning.lxc_memlock is a thin shell over ``run()``. Why this is a host job:
a process inside a container cannot raise its hard RLIMIT_MEMLOCK (that takes CAP_SYS_RESOURCE
in the host's user namespace), so the ceiling is whatever LXC gives the container's init at
start, from ``lxc.prlimit.memlock``. Proxmox's API cannot set raw ``lxc.*`` keys, hence a file
edit; ``/etc/pve`` refuses chmod/chown, hence fileops with ``metadata=False`` for the config and
its backup alike.

Contract: validate, read, plan, stop in check mode, write inside a Transaction (backup first,
then the config, each with its undo), read back, report. A change reaches a running container
only at its next start; ``restart_required`` says when one is due, judged from the limit the
running init actually has (read from the host's /proc), so a restart still pending from an
earlier run is reported too.

``run(params, check_mode=False, paths=None, tools=None)`` returns the result or raises
ModuleFailure; ``paths`` is a Paths(root), ``tools`` a common.commands.Commands (pct,
lxc-info). ``changes`` holds a value record for the limit (target ``<config path>
lxc.prlimit.memlock``) and file records for the config and the backup (a new file: before
null), by digest only: a config can hold secrets.

A Proxmox lock (``lock: backup`` while vzdump runs, ``snapshot``, ``migrate``, ...) is routine,
not an error of the host: with ``on_locked=pending`` such a container is reported as pending
with the reason and the module succeeds, so one container being backed up does not stop the
rest of a host's tuning. The lock only matters when there is something to do.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_containers
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_targets
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import lxc_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import lxc_state
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+@-]{0,254}\Z")
VMID_MIN, VMID_MAX = 100, 999999999
LOCK_TIMEOUT = 10
ON_LOCKED = ("fail", "pending")
AREA = "lxc_memlock"
# Exactly one of these names the container (the module's mutually_exclusive and required_one_of).
TARGET_OPTIONS = ("vmid", "name", "path")

# The module's argument spec, read by the module, by validate() and by the tests.
ARGUMENT_SPEC = dict(
    vmid=dict(type="int"),
    name=dict(type="str"),
    path=dict(type="path"),
    select=dict(type="list", elements="str"),
    exclude=dict(type="list", elements="str", default=[]),
    containers=dict(type="list", elements="dict", default=[]),
    limit=dict(type="raw", default="unlimited"),
    backup=dict(type="bool", default=True),
    on_locked=dict(type="str", default="pending", choices=list(ON_LOCKED)),
)
# The options that make it a run over several containers (run_many), instead of one named by
# TARGET_OPTIONS.
MANY_OPTIONS = ("select", "exclude", "containers")

# What each Proxmox lock (pve-container's lock enum) means for the operator.
LOCK_MEANING = {
    "backup": "a backup (vzdump) is running",
    "create": "the container is being created or restored",
    "destroyed": "the container is being destroyed",
    "disk": "a disk operation (move or resize) is running",
    "fstrim": "pct fstrim is running",
    "migrate": "the container is being migrated",
    "mounted": "its file systems are mounted on the host (pct mount; pct unmount when done)",
    "rollback": "a snapshot rollback is running",
    "snapshot": "a snapshot is being taken",
    "snapshot-delete": "a snapshot is being deleted",
}


class ConfigLockBusy(Exception):
    """Proxmox's per-container config lock stayed taken (a pct operation is writing the config).

    Not a failure by itself: run() turns it into a pending result or, with on_locked=fail,
    into a ModuleFailure.
    """

    def __init__(self, path, timeout):
        self.path = path
        self.timeout = timeout
        super().__init__("could not take Proxmox's config lock %s within %ss (another pct operation "
                         "holds it)" % (path, timeout))


class Paths:
    """Where configs, processes and cgroups are, under ``root`` (``/`` on a host, a temp dir in
    tests). ``lxc.lxcpath`` read from lxc.conf is used as written."""

    def __init__(self, root="/"):
        self.root = root
        self.pve_lxc = self.under("/etc/pve/lxc")
        self.lxc_path = self.under("/var/lib/lxc")
        self.lxc_conf = self.under("/etc/lxc/lxc.conf")
        self.proc = self.under("/proc")
        self.cgroup = self.under("/sys/fs/cgroup")
        self.pve_lock_dir = self.under("/run/lock/lxc")

    def under(self, path):
        if self.root in ("/", ""):
            return path
        return os.path.join(self.root, path.lstrip("/"))


class Target:
    """The config file to edit and the container it belongs to."""

    def __init__(self, path, name, proxmox, vmid=None, lxcpath=None):
        self.path = path
        self.name = name          # the LXC container name (a Proxmox container's is its vmid)
        self.proxmox = proxmox
        self.vmid = vmid
        self.lxcpath = lxcpath    # -P for lxc-info (plain LXC)


def _resolve(params, paths):
    given = [k for k in TARGET_OPTIONS if params.get(k) not in (None, "")]
    if len(given) != 1:
        raise ModuleFailure("give exactly one of vmid, name or path (got %s)" % (", ".join(given) or "none"))
    if given == ["vmid"]:
        vmid = params["vmid"]
        if isinstance(vmid, bool) or not isinstance(vmid, int) or not VMID_MIN <= vmid <= VMID_MAX:
            raise ModuleFailure("vmid %r is not valid: a Proxmox container ID, an integer from %d to %d"
                                % (vmid, VMID_MIN, VMID_MAX))
        return Target(os.path.join(paths.pve_lxc, "%d.conf" % vmid), str(vmid), True, vmid=vmid)
    if given == ["name"]:
        name = params["name"]
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ModuleFailure("name %r is not valid: an LXC container name (letters, digits and "
                                "_ . + @ -, not starting with a dot or dash, no slash)" % (name,))
        lxcpath = _lxcpath_of(name, paths)
        return Target(os.path.join(lxcpath, name, "config"), name, False, lxcpath=lxcpath)
    path = params["path"]
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
        raise ModuleFailure("path %r is not valid: an absolute path to a container config%s"
                            % (path, " (it holds a NUL byte)" if isinstance(path, str) and "\0" in path else ""))
    path = os.path.normpath(path)
    base = os.path.basename(path)
    match = re.match(r"^([0-9]+)\.conf\Z", base)
    if match:
        return Target(path, match.group(1), True, vmid=int(match.group(1)))
    if base == "config":
        parent = os.path.dirname(path)
        return Target(path, os.path.basename(parent) or None, lxc_config.is_proxmox_path(path),
                      lxcpath=os.path.dirname(parent))
    return Target(path, None, lxc_config.is_proxmox_path(path))


def _lxcpath_of(name, paths):
    """The LXC path holding container ``name``: the default, else ``lxc.lxcpath`` of lxc.conf.

    The default wins when both or neither hold it (a missing config is then reported under
    the default path, where lxc-create puts it).
    """
    if os.path.lexists(os.path.join(paths.lxc_path, name, "config")):
        return paths.lxc_path
    setting = lxc_config.lxcpath_setting(fileops.read_quiet(paths.lxc_conf))
    if setting and os.path.isabs(setting) and "\0" not in setting:
        if os.path.lexists(os.path.join(setting, name, "config")):
            return os.path.normpath(setting)
    return paths.lxc_path


def _refuse_generated(target, paths):
    """On Proxmox, ``/var/lib/lxc/<vmid>/config`` is rewritten from the .conf at each start."""
    if target.proxmox or not target.name or not re.match(r"^[0-9]+\Z", target.name):
        return
    if os.path.normpath(target.lxcpath or "") != os.path.normpath(paths.lxc_path):
        return  # Proxmox generates them under /var/lib/lxc only
    source = os.path.join(paths.pve_lxc, "%s.conf" % target.name)
    if os.path.lexists(source):
        raise ModuleFailure("%s is generated by Proxmox from %s at each start of container %s, so an edit "
                            "there is lost; use vmid: %s instead; nothing was changed"
                            % (target.path, source, target.name, target.name), {"path": target.path})


def validate(params, paths):
    """Check every input before anything is read; return (Target, (soft, hard))."""
    target = _resolve(params, paths)
    try:
        wanted = lxc_config.parse_limit(params.get("limit", ARGUMENT_SPEC["limit"]["default"]))
    except lxc_config.ConfigError as exc:
        raise ModuleFailure(str(exc) + "; nothing was read or changed")
    if not isinstance(params.get("backup", True), bool):
        raise ModuleFailure("backup must be true or false, got %r" % (params.get("backup"),))
    if params.get("on_locked", ARGUMENT_SPEC["on_locked"]["default"]) not in ON_LOCKED:
        raise ModuleFailure("on_locked %r is not valid: use %s" % (params.get("on_locked"), " or ".join(ON_LOCKED)))
    return target, wanted


class _ConfigLock:
    """Proxmox's own per-container lock (pct set takes it): flock on pve-config-<vmid>.lock.

    Taken only on a Proxmox host (the lock directory exists) and only around a write, so a
    concurrent ``pct set`` cannot interleave with this edit and lose one of the two changes.
    """

    def __init__(self, lock_dir, vmid, timeout=None):
        self.path = os.path.join(lock_dir, "pve-config-%d.lock" % vmid) if vmid is not None else None
        self.active = bool(self.path) and os.path.isdir(lock_dir)
        self.timeout = LOCK_TIMEOUT if timeout is None else timeout
        self.handle = None

    def __enter__(self):
        if not self.active:
            return self
        try:
            self.handle = open(self.path, "a")
        except (OSError, IOError) as exc:
            raise ModuleFailure("cannot open Proxmox's config lock: %s; nothing was changed" % fileops.describe(exc))
        deadline = time.time() + self.timeout
        while True:
            try:
                fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except (OSError, IOError) as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK) or time.time() > deadline:
                    self.handle.close()
                    raise ConfigLockBusy(self.path, self.timeout)
                time.sleep(0.2)

    def __exit__(self, *_exc):
        if self.handle is not None:
            self.handle.close()  # closing the file releases the flock
        return False


def _read_config(target):
    try:
        data = fileops.read_bytes(target.path)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read the container config %s; nothing was changed"
                            % fileops.describe(exc), {"path": target.path})
    if data is None:
        hint = ""
        if target.vmid is not None:
            hint = " (is container %d on this host? Proxmox keeps each node's containers in its own /etc/pve/lxc)" % target.vmid
        raise ModuleFailure("container config %s does not exist%s" % (target.path, hint))
    try:
        config = lxc_config.ContainerConfig(data, target.path)
    except lxc_config.ConfigError as exc:
        raise ModuleFailure(str(exc) + "; nothing was changed")
    if not config.is_container_config():
        raise ModuleFailure("%s is not a container config: its live section has no lxc.* key and no "
                            "Proxmox key (arch, hostname, rootfs, ...); nothing was changed" % target.path)
    return config


def _lock_reason(target, lock):
    meaning = LOCK_MEANING.get(lock, "a Proxmox operation holds it")
    return ("container %s is locked by Proxmox (lock: %s): %s; run again when it has finished (or `pct unlock "
            "%s` if the lock is stale)" % (target.name, lock, meaning, target.name))


def _pending(result, reason):
    """Turn ``result`` into the report of a container left as it was for now."""
    result.update({
        "changed": False,
        "pending": True,
        "pending_reason": reason,
        "limit_after": result["limit_before"],
        "duplicates_removed": 0,
        "restart_required": False,
        "backup_file": None,
        "diff": [],
        "changes": [],
    })
    result.setdefault("warnings", []).append(reason + "; nothing was changed")
    return result


def _mode(path):
    """Permission bits of the file ``path`` names (a backup gets the same), or None."""
    try:
        return os.stat(path).st_mode & 0o777
    except (OSError, IOError):
        return None


def _changes(target, old, new, limit_before, limit_after, backup):
    """The change records of editing ``target`` from ``old`` to ``new`` bytes, with ``backup``
    the backup written (or, in check mode, to be written) or None; empty when nothing changes."""
    if new == old:
        return []
    found = []
    if limit_before != limit_after:
        found.append(records.value(AREA, "%s %s" % (target.path, lxc_config.MEMLOCK_KEY), limit_before, limit_after))
    mode = _mode(target.path)
    found.append(records.file_change(AREA, target.path, old, new, mode, mode))
    if backup:
        found.append(records.file_change(AREA, backup, None, old, None, mode))
    return found


def _many(params):
    """True for a run over several containers (select, exclude or containers given); ModuleFailure
    when it also names one container, or names none at all."""
    one = [key for key in TARGET_OPTIONS if params.get(key) not in (None, "")]
    many = [key for key in MANY_OPTIONS if params.get(key) not in (None, [], "")]
    if one and many:
        raise ModuleFailure("give either one container (%s) or a selection (%s), not both: got %s"
                            % (", ".join(TARGET_OPTIONS), ", ".join(MANY_OPTIONS), ", ".join(one + many)))
    if not one and not many:
        raise ModuleFailure("name the container(s): one of vmid, name or path, or select (this host's "
                            "containers by selector, as gpufleet.tuning.lxc_containers takes them) and/or "
                            "containers (a list of vmid, name or path entries)")
    return bool(many)


def run(params, check_mode=False, paths=None, tools=None):
    """Set the memlock limit of one container, or of every container ``select`` and
    ``containers`` name (run_many); return the module result or raise ModuleFailure."""
    paths = paths or Paths()
    if _many(params):
        return run_many(params, check_mode, paths, tools)
    return _run_one(params, check_mode, paths, tools)


def run_many(params, check_mode=False, paths=None, tools=None):
    """Every container of this host that ``select`` picks (lxc_containers' discovery, less
    ``exclude``) and every entry of ``containers`` (vmid, name or path, optionally limit; with
    ``guest``, the inventory host it is), each config once (lxc_targets.merge), each raised as
    one run of this module would, all or nothing per container.

    Shaped as Ansible registers a looped task: ``results``, one per container with its ``item``
    (label, source, guest), and ``discovery``, the lxc_containers result. ``changes`` holds the
    records of every container that changed. A container that fails does not stop the others
    (one container being backed up must not leave the rest of the host untuned); the run fails
    after them, naming each, and the ones that changed keep their records."""
    paths = paths or Paths()
    discovery = None
    if params.get("select") not in (None, []):
        discovery = lxc_containers.run({"select": params["select"], "exclude": params.get("exclude") or []},
                                       True, lxc_containers.Paths(paths.root))
    elif params.get("exclude"):
        raise ModuleFailure("exclude narrows select: give select too (such as [gpu])")

    def key_of(entry):
        # The config file as this module resolves it (a name under a configured lxc.lxcpath, a
        # path through /etc/pve's node link), so a container found twice is raised once.
        try:
            return os.path.realpath(_resolve(entry, paths).path)
        except ModuleFailure:
            return lxc_targets.default_key(entry)

    try:
        targets = lxc_targets.merge(discovery, params.get("containers") or [], key_of)
    except lxc_targets.TargetError as exc:
        raise ModuleFailure("%s; nothing was changed" % exc, {"discovery": discovery})
    common = dict((key, params.get(key, ARGUMENT_SPEC[key]["default"])) for key in ("limit", "backup", "on_locked"))
    items = []
    for target in targets:
        args = dict((key, target[key]) for key in TARGET_OPTIONS if key in target)
        args.update(common)
        if target.get("limit") not in (None, ""):
            args["limit"] = target["limit"]
        try:
            item = _run_one(args, check_mode, paths, tools)
        except ModuleFailure as exc:
            item = dict((key, value) for key, value in exc.partial.items() if key not in ("changed", "changes", "diff"))
            item.update(failed=True, msg=exc.message, changed=False, changes=[])
        item["item"] = target
        items.append(item)
    done = [item for item in items if not item.get("failed")]
    result = {
        "changed": any(item.get("changed") for item in done),
        "changes": [rec for item in done for rec in item.get("changes") or []],
        "results": items,
        "discovery": discovery,
        "restart_required": any(item.get("restart_required") for item in done),
        "msg": "%d container(s)" % len(items) if items else "no container to raise",
        "diff": [piece for item in items for piece in _diffs(item.pop("diff", None))],
        "warnings": (discovery or {}).get("warnings", []) + [w for item in items for w in item.pop("warnings", [])],
    }
    if discovery is not None:
        discovery.pop("warnings", None)
    failed = [item for item in items if item.get("failed")]
    if failed:
        # The failure claims no records of its own; the items that changed keep theirs.
        partial = dict((key, value) for key, value in result.items() if key not in ("changed", "changes", "msg"))
        raise ModuleFailure("%d of %d container(s) failed: %s" % (len(failed), len(items), "; ".join(
            "%s: %s" % (item["item"]["label"], item["msg"]) for item in failed)), partial)
    return result


def _diffs(diff):
    if isinstance(diff, dict):
        return [diff]
    return [piece for piece in diff or [] if isinstance(piece, dict)]


def _run_one(params, check_mode, paths, tools):
    target, wanted = validate(params, paths)
    _refuse_generated(target, paths)
    wanted_text = rlimit.format_pair(wanted)
    on_locked = params.get("on_locked", ARGUMENT_SPEC["on_locked"]["default"])
    config = _read_config(target)
    proxmox_file = target.proxmox or config.style() == "proxmox"

    entries = config.entries(lxc_config.MEMLOCK_KEY)
    before_pair, before_raw, before_error = lxc_config.effective_limit(entries)
    limit_before = rlimit.format_pair(before_pair) if before_pair is not None else (
        before_raw if before_error else None)

    def equivalent(raw):
        try:
            return lxc_config.parse_lxc_value(raw) == wanted
        except lxc_config.ConfigError:
            return False

    new_data = config.set_key(lxc_config.MEMLOCK_KEY, wanted_text, keep=equivalent)
    changed = new_data != config.data
    effective_changed = before_pair != wanted

    state = lxc_state.container_state(target.name, proc_root=paths.proc, cgroup_root=paths.cgroup,
                                      tools=tools, proxmox=target.proxmox, lxcpath=target.lxcpath)
    running_pair = None
    if state["init_pid"] is not None:
        try:
            running_pair = rlimit.read_process_limit(state["init_pid"], paths.proc)
        except (rlimit.LimitError, OSError, IOError):
            running_pair = None
    if state["running"] is True:
        behind = running_pair is not None and not (rlimit.covers(running_pair[0], wanted[0])
                                                   and rlimit.covers(running_pair[1], wanted[1]))
        restart_required = effective_changed or behind
    elif state["running"] is None:
        restart_required = effective_changed  # cannot tell: assume it runs
    else:
        restart_required = False

    # Bytes that are not UTF-8 (a Latin-1 comment) are carried as surrogates here and shown as
    # U+FFFD by outcome.finish; the file itself is edited as bytes, so they stay exactly.
    new_text = new_data.decode("utf-8", "surrogateescape")
    old_text = config.data.decode("utf-8", "surrogateescape")
    label = "memlock limit of container %s" % (target.name or target.path)
    diff = [diffs.values_diff({lxc_config.MEMLOCK_KEY: limit_before},
                              {lxc_config.MEMLOCK_KEY: wanted_text}, label)]
    if changed:
        # Only the changed lines: the rest of a config can hold secrets (lxc.environment).
        diff.append(diffs.changed_lines_diff(target.path, old_text, new_text))

    result = {
        "changed": changed,
        "path": target.path,
        "container_name": target.name,
        "manager": "proxmox" if target.proxmox else "lxc",
        "lxc_path": None if target.proxmox else target.lxcpath,
        "style": config.style(),
        "limit_before": limit_before,
        "limit_before_raw": before_raw,
        "limit_after": wanted_text,
        "limit_wanted": wanted_text,
        "duplicates_removed": max(len(entries) - 1, 0),
        "running": state["running"],
        "running_evidence": state["evidence"],
        "limit_running": rlimit.format_pair(running_pair) if running_pair is not None else None,
        "restart_required": restart_required,
        "pending": False,
        "pending_reason": None,
        "lock": None,
        "backup_file": None,
        "diff": diff,
    }
    if before_error:
        result["limit_before_error"] = before_error

    # A Proxmox lock (backup, snapshot, migrate, ...) means an operation owns the container now:
    # pct itself refuses to change its config. Checked after the plan so the report says what
    # would change; nothing is written either way.
    # A lock matters only when there is something to do: an edit, or a restart (pct refuses
    # both while the lock is held).
    lock = config.value_of("lock") if proxmox_file else None
    result["lock"] = lock or None
    if lock and (changed or restart_required):
        reason = _lock_reason(target, lock)
        if on_locked == "fail":
            raise ModuleFailure(reason + "; nothing was changed", result)
        return _pending(result, reason)
    backup = params.get("backup", ARGUMENT_SPEC["backup"]["default"])
    if check_mode or not changed:
        planned = fileops.backup_path(fileops.real_path(target.path)) if changed and backup else None
        result["changes"] = _changes(target, config.data, new_data, limit_before, wanted_text, planned)
        return result

    # pmxcfs refuses chmod and chown: no metadata calls for a Proxmox config. A plain LXC config
    # gets its exact mode and owner back on a restore.
    metadata = not target.proxmox
    try:
        with _ConfigLock(paths.pve_lock_dir, target.vmid if target.proxmox else None):
            _apply(target, config, new_data, params, metadata, result)
    except ConfigLockBusy as exc:
        if on_locked == "fail":
            raise ModuleFailure(str(exc) + "; nothing was changed", result)
        return _pending(result, str(exc))
    result["changes"] = _changes(target, config.data, new_data, limit_before, wanted_text, result["backup_file"])
    return result


def _apply(target, config, new_data, params, metadata, result):
    """Backup, write, read back, all inside a Transaction; the caller holds the config lock."""
    # Re-read under the lock: what was planned must still be what is there.
    try:
        current = fileops.read_bytes(target.path)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read the container config again %s; nothing was changed"
                            % fileops.describe(exc), result)
    if current != config.data:
        raise ModuleFailure("%s changed while this module was reading it; nothing was changed, run "
                            "again" % target.path, result)
    tx = Transaction()
    try:
        if params.get("backup", True):
            backup = fileops.write_backup(target.path, config.data, metadata=metadata)
            tx.record("backup %s" % backup, lambda: fileops.remove_file(backup))
            result["backup_file"] = backup
        before = fileops.replace(tx, target.path, new_data, metadata=metadata, makedirs=False)
        got = fileops.read_bytes(target.path)
    except (OSError, IOError) as exc:
        result["backup_file"] = None
        err = tx.abort("failed to write %s" % fileops.describe(exc))
        raise ModuleFailure(err.full_message(), result)
    if before.data != config.data:
        message = "%s changed while this module was writing it" % target.path
    elif got != new_data:
        message = "%s does not hold what was written (read back %d bytes, wrote %d)" % (
            target.path, len(got or b""), len(new_data))
    else:
        return
    result["backup_file"] = None
    raise ModuleFailure(tx.abort(message).full_message(), result)
