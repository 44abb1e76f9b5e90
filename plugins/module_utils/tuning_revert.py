# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.tuning_revert: put the node back as it was before the collection.

Reads the record tuning_state keeps (/var/lib/gpufleet-tuning/state.json), and for every item
whose value now differs from its first ``before`` writes that before back: sysctls and sysfs
values, PCIe registers, files (their exact bytes, mode and owner; files the collection created
are removed, boot helpers and udev rules included), kernel modules the collection loaded are
unloaded. Every item is read back. Then what makes restored files count: GRUB or
proxmox-boot-tool refreshed for a kernel command line, the initramfs rebuilt for driver
options, systemd reloaded for unit files. Reboot-required items are reported as pending a
reboot.

All or nothing: each restore is a Transaction step whose undo writes back what was there, so a
failure leaves the node as tuned as it was and the record untouched. Restored items (and
items already at their before) leave the record, so a second revert has nothing to do.

Order: files first (a modprobe.d or udev file back before the module or register it
configures), then values, then kernel modules.

Only what the collection writes is put back: an item of the record that none of its modules
could have recorded (a file outside its areas' paths, a link to another file, any other sysfs
file or kernel module: state/checks.py) is set aside when the record is loaded, never written,
and named in ``refused`` with a warning; the others are reverted as usual.
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.nvidia_driver_options import choose_initramfs
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import access
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import checks
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store
from ansible_collections.gpufleet.tuning.plugins.module_utils.state.record import new_run_id, now_text

AREAS = ("sysctl", "pcie", "cpu_power", "lxc_memlock", "peermem", "nvidia_options", "kernel_cmdline",
         "container_memlock", "serving_launch")
_ORDER = {"file": 0, "sysctl": 1, "sysfs": 1, "pcie_mrrs": 2, "pcie_acs": 2, "kmod": 3}

ARGUMENT_SPEC = dict(
    path=dict(type="path", default=store.STATE_PATH),
    areas=dict(type="list", elements="str", default=[]),
    reboot_required=dict(type="bool", default=True),
    run_id=dict(type="str"),
    only_run=dict(type="str"),
)


def validate(params):
    params = with_defaults(ARGUMENT_SPEC, params)
    unknown = [area for area in params["areas"] if area not in AREAS]
    if unknown:
        raise ModuleFailure("areas: unknown %s (known: %s)" % (", ".join(repr(a) for a in unknown), ", ".join(AREAS)))
    if params["only_run"] is not None and not params["only_run"].strip():
        raise ModuleFailure("only_run=%r is empty: give the run id to undo, or leave it out to revert everything"
                            % params["only_run"])
    return params


def selected(state, params):
    """``(entry, value to put back)`` for every recorded item this revert covers, in restore
    order: the first before, or with ``only_run`` what that run found, for the items it changed."""
    chosen = []
    for entry in state["items"].values():
        if params["areas"] and entry["area"] not in params["areas"]:
            continue
        if entry.get("reboot") and not params["reboot_required"]:
            continue
        if params["only_run"] is None:
            chosen.append((entry, entry.get("before")))
            continue
        target, touched = store.run_target(entry, params["only_run"])
        if touched:
            chosen.append((entry, target))
    return sorted(chosen, key=lambda pair: (_ORDER.get(pair[0]["how"], 9), pair[0]["key"]))


def run(params, check_mode=False, paths=None, tools=None):
    params = validate(params)
    paths = paths or state_items.Paths()
    try:
        state = store.load(params["path"], paths.root)
    except store.StoreError as exc:
        raise ModuleFailure(str(exc))
    result = {"changed": False, "path": params["path"], "only_run": params["only_run"], "restored": [],
              "already": [], "not_restorable": [], "refused": checks.listed(state), "pending_reboot": [],
              "reboot_required": False, "restart_units": [], "commands": [], "changes": [], "warnings": []}
    if result["refused"]:
        result["warnings"].append(checks.warning(result["refused"], "not put back"))
    todo, settled = [], []
    for entry, target in selected(state, params):
        goal = dict(entry, before=target)
        try:
            current = access.read_current(entry, paths)
        except state_items.ItemError as exc:
            raise ModuleFailure("nothing was reverted: %s" % exc, result)
        if state_items.same(entry, current, target):
            result["already"].append(entry["key"])
            settled.append(goal)
        elif not store.restorable(entry, target, use_before=True):
            result["not_restorable"].append(_shown(goal, current))
        else:
            todo.append((goal, current))
    result["restored"] = [_shown(goal, current) for goal, current in todo]
    goals = [goal for goal, current in todo]
    result["pending_reboot"] = sorted(g["target"] for g in goals if g.get("reboot"))
    result["reboot_required"] = bool(result["pending_reboot"])
    result["restart_units"] = restart_units(goals)
    result["changes"] = [_record(goal, current) for goal, current in todo]
    result["diff"] = [diffs.values_diff(dict((g["key"], _text(g, c)) for g, c in todo),
                                        dict((g["key"], _text(g, g["before"])) for g in goals), "gpufleet-tuning revert")]
    result["commands"] = [" ".join(argv) for argv in _followups(goals, tools, paths)]
    if result["not_restorable"]:
        result["warnings"].append("left as they are (their content before the first change was never recorded): %s"
                                  % ", ".join(item["target"] for item in result["not_restorable"]))
    settled += goals
    result["changed"] = bool(settled)
    if check_mode or not settled:
        return result
    _apply(todo, paths, tools, result)
    _forget(state, settled, params["only_run"])
    store.note_run(state, params["run_id"] or new_run_id(), now_text(),
                   "revert" if params["only_run"] is None else "revert run %s" % params["only_run"],
                   [g["key"] for g in settled])
    try:
        store.save(params["path"], state)
    except OSError as exc:
        result["warnings"].append("everything was put back, but the state file was not updated (%s): a second "
                                  "revert will find the items already back and change nothing"
                                  % fileops.describe(exc))
    return result


def _forget(state, settled, only_run):
    """Items back at their first before leave the record; after undoing one run, an item an
    earlier run had changed stays, now expected at the value that run left."""
    for goal in settled:
        entry = state["items"][goal["key"]]
        if only_run is None or entry.get("first_run") == only_run:
            del state["items"][goal["key"]]
            continue
        entry["after"] = state_items.file_digest(goal["before"]) if entry["how"] == "file" else goal["before"]
        if entry["how"] == "file":
            entry["after_content"] = goal["before"]
        entry.pop("run_before", None)


def _apply(todo, paths, tools, result):
    tx = Transaction()
    try:
        for entry in [goal for goal, current in todo]:
            undo_to = dict(entry, before=_raw(entry, paths))
            tx.step(state_items.describe(entry), _restorer(entry, paths, tools),
                    _restorer(undo_to, paths, tools))
            back = access.read_current(entry, paths)
            if not state_items.same(entry, back, entry["before"]):
                raise state_items.ItemError("%s reads %s after the write, not %s"
                                            % (state_items.describe(entry), _text(entry, back),
                                               _text(entry, entry["before"])))
        for argv in _followups([goal for goal, current in todo], tools, paths):
            outcome = tools.run(argv)
            if not outcome.ok:
                raise state_items.ItemError(outcome.describe())
    except state_items.ItemError as exc:
        raise ModuleFailure("revert failed, the node is as tuned as before it: " + tx.abort(str(exc)).full_message(),
                            dict(result, restored=[], pending_reboot=[], reboot_required=False))


def _restorer(entry, paths, tools):
    return lambda: access.restore(entry, paths, tools)


def _raw(entry, paths):
    """The item's value now, in the form restore() writes (a file's bytes, not its digest)."""
    if entry["how"] == "file":
        return state_items.file_snapshot(entry["target"], entry.get("link", False))
    return access.read_current(entry, paths)


def _followups(entries, tools, paths):
    """Commands that make restored files take effect, once each, in a fixed order. systemctl
    only where systemd is the init (``/run/systemd/system``, as sd_booted(3) tells): a
    container or chroot without it reads its unit files at its next start anyway, and there
    systemctl fails ("not booted with systemd"), which would fail the whole revert."""
    if tools is None:
        return []
    out = []
    files = [e for e in entries if e["how"] == "file"]
    if any(e["area"] == "kernel_cmdline" for e in files):
        if any(e["target"].endswith("/etc/kernel/cmdline") for e in files) and tools.which("proxmox-boot-tool"):
            out.append([tools.which("proxmox-boot-tool"), "refresh"])
        elif tools.which("update-grub"):
            out.append([tools.which("update-grub")])
        elif tools.which("grub-mkconfig"):
            out.append([tools.which("grub-mkconfig"), "-o", "/boot/grub/grub.cfg"])
    if any(e["area"] == "nvidia_options" for e in files):
        argv = choose_initramfs("auto", tools)[1]
        if argv:
            out.append(argv)
    systemd = tools.which("systemctl") and os.path.isdir(os.path.join(paths.root, "run", "systemd", "system"))
    if any("/systemd/system.conf.d/" in e["target"] for e in files) and systemd:
        out.append([tools.which("systemctl"), "daemon-reexec"])  # re-reads the manager's defaults too
    elif any("/systemd/system/" in e["target"] for e in files) and systemd:
        out.append([tools.which("systemctl"), "daemon-reload"])
    return out


def restart_units(entries):
    """Serving units whose launch drop-in (area serving_launch) is put back: each runs the
    command of the drop-in it started with until it is restarted, which is the role's to do
    (a restart drops the requests in flight)."""
    units = set()
    for entry in entries:
        if entry["area"] == "serving_launch" and entry["how"] == "file":
            folder = os.path.basename(os.path.dirname(entry["target"]))
            if folder.endswith(".service.d"):
                units.add(folder[:-len(".d")])
    return sorted(units)


def _text(entry, value):
    if entry["how"] == "file":
        digest = state_items.file_digest(value) if isinstance(value, dict) and "content_b64" in value else value
        if digest is None:
            return "absent"
        if "link" in digest:
            return "link to %s" % digest["link"]
        return "sha256:%s size %s mode %s" % (digest.get("sha256", "?")[:12], digest.get("size"), digest.get("mode"))
    return "(none)" if value is None else str(value)


def _shown(entry, current):
    return {"key": entry["key"], "area": entry["area"], "kind": entry["how"], "target": entry["target"],
            "before": _text(entry, entry["before"]), "current": _text(entry, current),
            "reboot": bool(entry.get("reboot")), "recorded_by": entry.get("first_run")}


def _record(entry, current):
    """A change record for one restore: the way back is a change like any other."""
    before = state_items.file_digest(entry["before"]) if entry["how"] == "file" else entry["before"]
    kind = {"file": "file", "kmod": "module"}.get(entry["how"], "value")
    return records.record(entry["area"], kind, entry["target"], current, before)
