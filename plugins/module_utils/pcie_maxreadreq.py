# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe Max Read Request Size of the GPUs: select, plan, write, read back, persist.

The module gpufleet.tuning.pcie_maxreadreq is a thin shell over ``run()``. Config space work
(capability walk, the bits-14:12-only write, read-back and restore) is pci_config's; this
file decides which devices, plans, refuses what must not happen (a container writing the
host's devices), applies every write inside one Transaction, and keeps the persistence.

Why a udev rule (and no boot unit): the value lives in the device and is lost at reboot and
when a device is re-added or its driver rebinds. At boot, udev's coldplug replays an ``add``
event for every device, and a driver load sends ``bind``, so one rule on ``add|bind`` covers
boot, hotplug and driver reloads. What it runs is a helper generated from pci_config's own
source (plus a one-line call of its ``cli_main``), so the boot path is the tested code, not a
second implementation in shell.

What runs as root stays root's: the helper runs as root at every boot, hotplug and driver
bind, so it is run by a fixed system Python (SYSTEM_PYTHONS; never the Python running this
module, which with a localhost inventory is a checkout's virtualenv, and never a PATH
lookup), started isolated (``-IS``: no PYTHON* variables, no user or site packages, not even
the helper's own directory on sys.path), and it is written only where trust.py finds that
nothing on the way to it, its rule or its interpreter can be changed by a user other than
root. Without such a Python the module still sets MRRS now; it refuses only to persist, and
says so.
"""

from __future__ import annotations

import errno
import inspect
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec as argspec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_gpus
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_select
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

RULE_FILE = "90-gpufleet-pcie-maxreadreq.rules"
UDEV_RULES_D = "/etc/udev/rules.d"
HELPER = "/usr/local/libexec/gpufleet/pcie-maxreadreq"
DIFF_HEADER = "PCIe Max Read Request Size"
# The ``area`` of this module's change records (common/records.py), and the field a value
# record of a device names after its address.
AREA = "pcie"
MRRS_FIELD = "max_read_request_size"
# The helper's interpreter, first found wins: the distribution's own Python 3 (RHEL 8 keeps
# one for system tools at /usr/libexec/platform-python when /usr/bin/python3 is not installed).
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/libexec/platform-python")
# Isolated (-I: no PYTHON* variables, no user site, no script directory on sys.path) and
# without site (-S). Linux passes what follows the interpreter on a #! line as one argument,
# so the flags are combined.
HELPER_FLAGS = "-IS"


# The module's argument spec, read by the module, validate() and the tests (one engine
# contract). The sizes are pci_config's (the MRRS encodings), the default selection
# nvidia_gpus' (NVIDIA's vendor ID, the VGA and 3D controller classes).
ARGUMENT_SPEC = dict(
    size=dict(type="int", default=4096, choices=list(pci_config.SIZES)),
    devices=dict(type="list", elements="str", default=[]),
    vendor=dict(type="raw", default=nvidia_gpus.NVIDIA_VENDOR),
    classes=dict(type="list", elements="raw", default=list(nvidia_gpus.GPU_CLASSES)),
    include_bridges=dict(type="bool", default=False),
    persist=dict(type="bool", default=True),
    allow_in_container=dict(type="bool", default=False),
)


def with_defaults(params):
    """``params`` with every option it leaves out at its ARGUMENT_SPEC default."""
    return argspec.with_defaults(ARGUMENT_SPEC, params)


class NoInterpreter(OSError):
    """None of the system Pythons the helper may run with is installed."""


def system_interpreter(candidates=SYSTEM_PYTHONS):
    """The first of ``candidates`` that exists, or None. Never this module's own Python."""
    for candidate in candidates:
        if os.path.exists(candidate):
            return candidate
    return None


class Paths:
    """Where the module reads and writes, all under ``root`` (/ on a node; a temp tree in tests).

    ``interpreters``: where the helper's Python is looked for (SYSTEM_PYTHONS under ``root``).
    ``trust_root``: the top of the tree trust.py checks (the directory holding both the helper
    and the rules directory, / on a node); ``trusted_uid``: who must own it (root).
    """

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.sysfs = os.path.join(root, pci_config.SYSFS.lstrip("/"))
        self.udev_rules_d = os.path.join(root, UDEV_RULES_D.lstrip("/"))
        self.helper = os.path.join(root, HELPER.lstrip("/"))
        self.interpreters = tuple(os.path.join(root, python.lstrip("/")) for python in SYSTEM_PYTHONS)
        self.trust_root = trust.common_root(self.helper, self.udev_rules_d)
        self.trusted_uid = 0

    @property
    def rule(self):
        return os.path.join(self.udev_rules_d, RULE_FILE)

    @property
    def interpreter(self):
        """The helper's Python (looked up when asked: removing the files needs none), or None."""
        return system_interpreter(self.interpreters)


# ---------------------------------------------------------------------------- validation

def validate(params):
    """Check every option before anything is read or written; return the normalized spec."""
    params = with_defaults(params)
    errors = []
    size = params.get("size")
    try:
        pci_config.encode_size(size)
    except pci_config.PciError as exc:
        errors.append(str(exc))
    devices, vendor, classes = pci_select.selection(params, errors)
    if errors:
        raise ModuleFailure("invalid options, nothing was read or changed: " + "; ".join(errors))
    return {
        "size": size,
        "devices": devices,
        "vendor": vendor,
        "classes": classes,
        "include_bridges": bool(params.get("include_bridges")),
        "persist": bool(params["persist"]),
        "allow_in_container": bool(params.get("allow_in_container")),
    }


# ----------------------------------------------------------------------------- selection

def _class_matches(device_class, wanted):
    device_class = (device_class or "").lower()
    if len(wanted) == 6:  # 0xCCSS: any programming interface
        return device_class[:6] == wanted
    return device_class == wanted


def select(sysfs, spec):
    """Targets as ``{"bdf", "role", "upstream_of"}``: the selected devices, then their bridges."""
    if spec["devices"]:
        missing = [bdf for bdf in spec["devices"] if not pci_config.exists(sysfs, bdf)]
        if missing:
            raise ModuleFailure("no PCI device %s under %s; nothing was changed"
                                % (", ".join(missing), pci_config.devices_dir(sysfs)))
        chosen = list(spec["devices"])
    else:
        chosen = []
        for bdf in pci_config.list_devices(sysfs):
            if (pci_config.read_attr(sysfs, bdf, "vendor") or "").lower() != spec["vendor"]:
                continue
            device_class = pci_config.read_attr(sysfs, bdf, "class")
            if any(_class_matches(device_class, wanted) for wanted in spec["classes"]):
                chosen.append(bdf)
    targets = [{"bdf": bdf, "role": "selected", "upstream_of": []} for bdf in chosen]
    if spec["include_bridges"]:
        bridges = {}
        for bdf in chosen:
            for bridge in pci_config.upstream_bridges(sysfs, bdf):
                if bridge not in chosen:
                    bridges.setdefault(bridge, []).append(bdf)
        for bridge in sorted(bridges):
            targets.append({"bdf": bridge, "role": "upstream bridge", "upstream_of": bridges[bridge]})
    return targets


def inspect_device(sysfs, target):
    """Read one device; return (entry for the result, Express capability offset or None).

    A device that cannot be handled gets ``reason`` and no offset: not root (64 readable
    bytes), no Express capability, a corrupt capability list, a reserved MRRS encoding.
    """
    bdf = target["bdf"]
    entry = dict(target)
    entry.update(pci_config.identity(sysfs, bdf))
    entry.update({"port_type": None, "express_cap": None, "devctl_before": None, "devctl_after": None,
                  "mrrs_before": None, "mrrs_after": None, "mps": None, "mps_supported": None,
                  "link": None, "changed": False, "reason": None})
    link_attrs = pci_config.read_link_attrs(sysfs, bdf)
    try:
        data = pci_config.read_config(sysfs, bdf)
        cap = pci_config.express_capability(data)
    except (OSError, IOError) as exc:
        entry["reason"] = "config space cannot be read: %s" % (exc.strerror or exc)
        entry["link"] = pci_config.link_report(sysfs_attrs=link_attrs)
        return entry, None
    except pci_config.Unsupported as exc:
        entry["reason"] = str(exc)
        entry["link"] = pci_config.link_report(sysfs_attrs=link_attrs)
        return entry, None
    devctl = pci_config.u16(data, cap + pci_config.EXP_DEVCTL)
    devcap = pci_config.u32(data, cap + pci_config.EXP_DEVCAP)
    entry.update({
        "port_type": pci_config.port_type(data, cap),
        "express_cap": "0x%02x" % cap,
        "devctl_before": "0x%04x" % devctl,
        "devctl_after": "0x%04x" % devctl,
        "mrrs_before": pci_config.mrrs_of(devctl),
        "mrrs_after": pci_config.mrrs_of(devctl),
        "mps": pci_config.mps_of(devctl),
        "mps_supported": pci_config.decode_size(devcap & 0x7),
        "link": pci_config.link_report(data, cap, link_attrs),
    })
    if entry["mrrs_before"] is None:
        entry["reason"] = ("Device Control 0x%04x holds the reserved MRRS encoding %d: left alone"
                           % (devctl, (devctl & pci_config.DEVCTL_MRRS_MASK) >> pci_config.DEVCTL_MRRS_SHIFT))
        return entry, None
    return entry, cap


# --------------------------------------------------------------------------- persistence

def helper_source():
    """pci_config's source text, also when the module runs from Ansible's zipped payload."""
    try:
        return inspect.getsource(pci_config)
    except (OSError, IOError, TypeError):
        pass
    loader = getattr(pci_config, "__loader__", None)
    source = loader.get_source(pci_config.__name__) if loader is not None else None
    if not source:
        raise ModuleFailure("cannot read the source of module_utils/hw/pci_config.py to build the "
                            "boot helper; use persist=false or report this")
    return source


# pci_config has no annotations, so its future import is a no-op; dropped from the helper, the
# source also runs on Python 3.6 (RHEL 8's platform-python), where that future is unknown.
_FUTURE_ANNOTATIONS = "from __future__ import annotations\n"


def render_helper(interpreter):
    """The helper udev runs: pci_config's source and a call of its command line.

    ``#!<interpreter> -IS``: isolated, so nothing from the environment, the user's site or the
    helper's own directory is imported into a process running as root.
    """
    if not interpreter.startswith("/") or any(c.isspace() for c in interpreter):
        raise ValueError("the helper's interpreter must be an absolute path without blanks: %r" % interpreter)
    source = helper_source().replace(_FUTURE_ANNOTATIONS, "", 1)
    return ("#!%s %s\n"
            "# Generated by gpufleet.tuning.pcie_maxreadreq from module_utils/hw/pci_config.py; do not edit.\n"
            "# Run by %s; removed with persist=false.\n"
            "%s\n\n"
            "if __name__ == \"__main__\":\n"
            "    sys.exit(cli_main())\n") % (interpreter, HELPER_FLAGS, RULE_FILE, source.rstrip("\n"))


# What udev would read as something else inside RUN+="...": quotes end the value, blanks split
# the program from its arguments, $ and % start substitutions.
RUN_UNSAFE = re.compile(r'[\s"$%\\]')


def render_rule(spec, helper):
    """udev rule: on add (coldplug at boot, hotplug) and bind (driver load), run the helper.

    The helper is named by absolute path (udev would look a relative one up in its own
    directory) free of characters udev gives a meaning inside RUN+="...".
    """
    if not os.path.isabs(helper) or RUN_UNSAFE.search(helper):
        raise ValueError("the helper path %r cannot go into a udev RUN key: it must be absolute, "
                         "without blanks, quotes, backslashes, $ or %%" % helper)
    args = "--size %d%s" % (spec["size"], " --include-bridges" if spec["include_bridges"] else "")
    run = 'RUN+="%s %s $kernel"' % (helper, args)
    lines = [
        "# Managed by Ansible (gpufleet.tuning.pcie_maxreadreq); local edits are overwritten.",
        "# Sets PCIe Max Read Request Size %d bytes when a selected device is added (udev replays"
        % spec["size"],
        "# add for every device at boot) or a driver binds to it. Removed with persist=false.",
    ]
    if spec["devices"]:
        for bdf in spec["devices"]:
            lines.append('ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="%s", %s' % (bdf, run))
    else:
        for wanted in spec["classes"]:
            pattern = wanted + "??" if len(wanted) == 6 else wanted
            lines.append('ACTION=="add|bind", SUBSYSTEM=="pci", ATTR{vendor}=="%s", ATTR{class}=="%s", %s'
                         % (spec["vendor"], pattern, run))
    return "\n".join(lines) + "\n"


def wanted_files(spec, paths):
    """Helper before rule when installing, rule before helper when removing.

    Installing needs a system Python (NoInterpreter otherwise); both files are checked by
    trust.py in managed_files.plan (Untrusted when another user could change them, their
    directories or the interpreter).
    """
    if spec["persist"]:
        interpreter = paths.interpreter
        if interpreter is None:
            raise NoInterpreter(errno.ENOENT, "no system Python for the udev helper: none of %s exists. The "
                                "helper runs as root at every boot, so it never runs with the Python that "
                                "runs this module (it may be a virtualenv that other users can write)"
                                % ", ".join(paths.interpreters))
        checked = dict(trust_root=paths.trust_root, trusted_uid=paths.trusted_uid)
        return [managed_files.Wanted(paths.helper, render_helper(interpreter), mode=0o755, **checked),
                managed_files.Wanted(paths.rule, render_rule(spec, paths.helper), mode=0o644, **checked)]
    return [managed_files.Wanted(paths.rule), managed_files.Wanted(paths.helper)]


def _persist_refusal(exc):
    """The failure for persistence that cannot be installed safely; the runtime part can."""
    return ("cannot install the udev rule and its helper, nothing was changed: %s. Setting MRRS does not need "
            "them: persist=false sets it now, until the next reboot or driver reload"
            % fileops.describe(exc))


# ---------------------------------------------------------------------------------- run

def _label(entry):
    """``0000:41:00.0 (10de:2335, class 0x030200)``: how failures name a device."""
    def bare(value):
        return value[2:] if value and value.startswith("0x") else (value or "?")
    return "%s (%s:%s, class %s)" % (entry["bdf"], bare(entry.get("vendor")), bare(entry.get("device")),
                                     entry.get("class") or "?")


def _describe_failure(entry, exc, sysfs):
    return pci_config.write_failure("Device Control", _label(entry), exc, sysfs)


def _partial(result, entries):
    """What fail_json reports: every device as it is now (a failed call restored them)."""
    devices = []
    for entry in entries:
        devices.append(dict(entry, mrrs_after=entry["mrrs_before"], devctl_after=entry["devctl_before"],
                            changed=False))
    return {"devices": devices, "container": result["container"], "size": result["size"],
            "skipped_keys": result["skipped_keys"]}


def _records(entries, file_changes):
    """A value record per device whose MRRS this run set (or would set), in bytes, then the
    helper and rule files: ``0000:41:00.0 max_read_request_size`` from ``512`` to ``4096``."""
    changed = [records.value(AREA, "%s %s" % (e["bdf"], MRRS_FIELD), e["mrrs_before"], e["mrrs_after"])
               for e in entries if e["changed"]]
    return changed + records.from_managed(AREA, file_changes)


def run(params, check_mode=False, paths=None, tools=None):
    """Set MRRS on the selected devices and keep the udev persistence; return the result dict.

    ``tools`` (the command runner every engine takes) is not used: sysfs needs no binary.
    """
    paths = paths or Paths()
    spec = validate(params)
    container = container_mod.detect(proc_root=paths.proc, root=paths.root)
    targets = select(paths.sysfs, spec)
    entries = []
    planned = []
    for target in targets:
        entry, cap = inspect_device(paths.sysfs, target)
        entries.append(entry)
        if cap is not None and entry["mrrs_before"] != spec["size"]:
            planned.append((entry, cap))
    # A node with no matching device gets no new udev rule (nothing to keep); files an earlier
    # run installed stay until persist=false removes them.
    nothing_to_keep = spec["persist"] and not targets
    # Inside a container (without allow_in_container) reading is fine and writing is not: MRRS
    # writes are refused below, and the udev persistence is left out of the plan (reported in
    # skipped_keys), since a rule installed in a container acts for the container's udev, if
    # any, never at the host's boot (container.persistence_left_alone).
    guarded = container_mod.guarded(container, spec["allow_in_container"])
    file_changes, file_problem = [], None
    skipped_keys = dict((e["bdf"], e["reason"]) for e in entries if e["reason"])
    if not nothing_to_keep:
        try:
            file_changes = managed_files.plan(wanted_files(spec, paths))
        except (OSError, IOError) as exc:
            if not guarded:
                if isinstance(exc, managed_files.NotOwned):
                    raise
                raise ModuleFailure(_persist_refusal(exc), {
                    "devices": entries, "container": container, "size": spec["size"],
                    "skipped_keys": skipped_keys})
            file_problem = exc
    udev_left_alone = guarded and bool(file_changes or file_problem)
    if udev_left_alone:
        if isinstance(file_problem, managed_files.NotOwned):
            would = "replace a file it does not own: %s" % fileops.describe(file_problem)
        elif file_problem is not None:
            would = "install it, which it cannot do safely: %s" % fileops.describe(file_problem)
        else:
            would = ", ".join(change.describe() for change in file_changes)
        skipped_keys["udev rule"] = container_mod.persistence_left_alone(container, "a udev rule", would)
        file_changes = []

    result = {
        "changed": False,
        "size": spec["size"],
        "devices": entries,
        "skipped_keys": skipped_keys,
        "container": container,
        "persisted": (os.path.exists(paths.rule) if udev_left_alone
                      else spec["persist"] and (bool(targets) or os.path.exists(paths.rule))),
        "files": [paths.helper, paths.rule],
        "reboot_required": False,
        "diff": [],
    }

    if planned and guarded:
        raise ModuleFailure(container_mod.refusal(
            ["set MRRS %d on %s" % (spec["size"], ", ".join(e["bdf"] for e, _cap in planned))], container,
            "PCI config space and udev"), _partial(result, entries))
    blocked = [e for e, _cap in planned if not pci_config.writable(paths.sysfs, e["bdf"])]
    if blocked:
        hint = ("read-only here: this looks like a container, whose /sys is the host's"
                if container["detected"] else "not writable: needs root and a read-write /sys")
        raise ModuleFailure("config space of %s is %s; nothing was changed"
                            % (", ".join(_label(e) for e in blocked), hint), _partial(result, entries))

    tx = Transaction()
    for entry, cap in planned:
        if check_mode:
            devctl = int(entry["devctl_before"], 16)
            entry["devctl_after"] = "0x%04x" % pci_config.with_mrrs(devctl, spec["size"])
            entry["mrrs_after"] = spec["size"]
            entry["changed"] = True
            continue
        try:
            old, new = pci_config.set_mrrs(paths.sysfs, entry["bdf"], cap, spec["size"])
        except (OSError, IOError, pci_config.PciError) as exc:
            err = tx.abort(_describe_failure(entry, exc, paths.sysfs))
            raise ModuleFailure(err.full_message(), _partial(result, entries))
        tx.record("MRRS of %s" % entry["bdf"], _undo(paths.sysfs, entry["bdf"], cap, entry["mrrs_before"]))
        entry["devctl_before"] = "0x%04x" % old  # the word as read right before the write
        entry["devctl_after"] = "0x%04x" % new
        entry["mrrs_after"] = pci_config.mrrs_of(new)
        entry["changed"] = old != new
    if file_changes and not check_mode:
        try:
            managed_files.apply(file_changes, tx)
        except (OSError, IOError) as exc:
            err = tx.abort("failed to write %s: %s" % (getattr(exc, "filename", None) or paths.rule,
                                                       exc.strerror or exc))
            raise ModuleFailure(err.full_message(), _partial(result, entries))

    before = dict(("%s MRRS" % e["bdf"], e["mrrs_before"]) for e in entries if e["mrrs_before"] is not None)
    after = dict(("%s MRRS" % e["bdf"], e["mrrs_after"]) for e in entries if e["mrrs_after"] is not None)
    result["diff"] = [diffs.values_diff(before, after, DIFF_HEADER)] + managed_files.diff_entries(file_changes)
    result["changed"] = any(e["changed"] for e in entries) or bool(file_changes)
    result["changes"] = _records(entries, file_changes)
    result["warnings"] = ["%s left alone: %s" % (bdf, result["skipped_keys"][bdf]) for bdf in sorted(result["skipped_keys"])]
    return result


def _undo(sysfs, bdf, cap, size):
    return lambda: pci_config.set_mrrs(sysfs, bdf, cap, size)
