# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe ACS redirect bits on the bridges between GPUs: select, plan, refuse, write, read back,
remember, persist, restore.

The module gpufleet.tuning.pcie_acs is a thin shell over ``run()``. The ACS capability is read
by hw/pcie_ext (the parser the node facts use), the bridges between two devices and the masked
write of ACS Control are hw/pci_acs's; this file decides which devices, plans, refuses what
must not happen, applies every write inside one Transaction, remembers the words it replaced
(a state file, so ``state=absent`` can put them back) and keeps the persistence.

Why a udev rule (and no boot unit): ACS Control is reset with the bridge (reboot, hotplug, a
reset of the port), and at boot the kernel sets SV/RR/CR/UF itself while it enumerates the
bridges (pci_enable_acs, when an IOMMU is on), before any unit could run. udev's coldplug then
replays ``add`` for every bridge, after the kernel's setting, and the port driver's ``bind``
follows; a hotplugged switch sends the same events. A boot unit would run once per boot only
and miss hotplug and port driver reloads, and ordering it after the PCI enumeration buys
nothing udev does not already give. The rule lists the bridges by address, vendor and device,
and the helper computes the paths between the selected devices again on every event and acts
only on a bridge that is still on one (a renumbered bus never gets its ACS cleared by a stale
address). What it runs is generated from pci_config's, pcie_ext's and pci_acs's source (plus a
call of pci_acs.cli_main), with the same trust rules as the MRRS helper (pcie_maxreadreq): a
fixed system Python, started ``-IS``, written only where no user but root can change it.
"""

from __future__ import annotations

import inspect
import json
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_maxreadreq as mrrs
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec as argspec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_gpus
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_acs
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_select
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pcie_ext
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

RULE_FILE = "90-gpufleet-pcie-acs.rules"
UDEV_RULES_D = mrrs.UDEV_RULES_D
HELPER = "/usr/local/libexec/gpufleet/pcie-acs"
STATE_FILE = "/var/lib/gpufleet-tuning/pcie-acs/state.json"
DIFF_HEADER = "PCIe ACS Control"
AREA = "pcie"
ACS_FIELD = "acs_control"
STATE_KIND = "gpufleet.tuning.pcie_acs"

ARGUMENT_SPEC = dict(
    state=dict(type="str", default="present", choices=["present", "absent"]),
    devices=dict(type="list", elements="str", default=[]),
    vendor=dict(type="raw", default=nvidia_gpus.NVIDIA_VENDOR),
    classes=dict(type="list", elements="raw", default=list(nvidia_gpus.GPU_CLASSES)),
    clear=dict(type="list", elements="str", default=list(pci_acs.DEFAULT_CLEAR), choices=list(pci_acs.CLEARABLE)),
    allow_with_vfio=dict(type="bool", default=False),
    persist=dict(type="bool", default=True),
    allow_in_container=dict(type="bool", default=False),
)

_HEX4_RE = re.compile(r"^0x[0-9a-f]{4}\Z")


def with_defaults(params):
    return argspec.with_defaults(ARGUMENT_SPEC, params)


class Paths:
    """Where the module reads and writes, all under ``root`` (/ on a node; a temp tree in tests)."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.sysfs = os.path.join(root, pci_config.SYSFS.lstrip("/"))
        self.udev_rules_d = os.path.join(root, UDEV_RULES_D.lstrip("/"))
        self.helper = os.path.join(root, HELPER.lstrip("/"))
        self.state = os.path.join(root, STATE_FILE.lstrip("/"))
        self.interpreters = tuple(os.path.join(root, python.lstrip("/")) for python in mrrs.SYSTEM_PYTHONS)
        self.trust_root = trust.common_root(self.helper, self.udev_rules_d)
        self.trusted_uid = 0

    @property
    def rule(self):
        return os.path.join(self.udev_rules_d, RULE_FILE)

    @property
    def interpreter(self):
        return mrrs.system_interpreter(self.interpreters)


# ---------------------------------------------------------------------------- validation

def validate(params):
    """Check every option before anything is read or written; return the normalized spec."""
    params = with_defaults(params)
    errors = []
    state = params.get("state")
    if state not in ("present", "absent"):
        errors.append("state %r is not valid: use present or absent" % (state,))
    devices, vendor, classes = pci_select.selection(params, errors)
    raw_devices = params.get("devices") or []
    if isinstance(raw_devices, list) and raw_devices and len(devices) < 2 and len(raw_devices) == len(devices):
        errors.append("devices %s names %d device: ACS sits on the path between two, so list at least two"
                      % (", ".join(devices), len(devices)))
    clear = params.get("clear")
    if not isinstance(clear, list) or not clear:
        errors.append("clear %r is not valid: list one or more of %s" % (clear, ", ".join(pci_acs.CLEARABLE)))
        clear = []
    for name in clear:
        if name not in pci_acs.CLEARABLE:
            errors.append("clear %r is not valid: use %s (egress_control and direct_translated are never "
                          "touched)" % (name, ", ".join(pci_acs.CLEARABLE)))
    if errors:
        raise ModuleFailure("invalid options, nothing was read or changed: " + "; ".join(errors))
    return {
        "state": state,
        "devices": devices,
        "vendor": vendor,
        "classes": classes,
        "clear": [name for name in pci_acs.CLEARABLE if name in clear],
        "mask": pci_acs.mask_of(clear),
        "allow_with_vfio": bool(params.get("allow_with_vfio")),
        "persist": bool(params.get("persist")),
        "allow_in_container": bool(params.get("allow_in_container")),
    }


# ----------------------------------------------------------------- the state file: data

def _bad_entry(bdf, entry):
    if not pci_config.is_sysfs_bdf(bdf if isinstance(bdf, str) else ""):
        return "key %r is not a PCI address" % (bdf,)
    if not isinstance(entry, dict) or set(entry) != {"vendor", "device", "offset", "ctrl", "cleared"}:
        return "%s: not an object with exactly vendor, device, offset, ctrl, cleared" % bdf
    for key in ("vendor", "device", "ctrl", "cleared"):
        if not isinstance(entry[key], str) or not _HEX4_RE.match(entry[key]):
            return "%s: %s %r is not 0x and 4 hex digits" % (bdf, key, entry[key])
    offset = entry["offset"]
    if (not isinstance(offset, str) or not re.match(r"^0x[0-9a-f]{3}\Z", offset) or int(offset, 16) < pcie_ext.EXT_START
            or int(offset, 16) > pcie_ext.EXT_END - pcie_ext.ACS_BYTES or int(offset, 16) % 4):
        return "%s: offset %r is not a dword-aligned extended capability offset (0x100-0xff8)" % (bdf, offset)
    cleared = int(entry["cleared"], 16)
    if not cleared or cleared & ~pci_acs.CLEARABLE_MASK:
        return "%s: cleared %s holds bits this module never clears (only 0x%04x)" % (
            bdf, entry["cleared"], pci_acs.CLEARABLE_MASK)
    return None


def load_state(path):
    """``(bridges, text)``: the remembered originals ``{bdf: entry}`` and the file's text (None:
    absent); ModuleFailure naming the file and the entry when it is not exactly what this module
    writes (a state file is data, not instructions: its values are written to config space)."""
    try:
        text = fileops.read_text(path)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read the state file: %s; nothing was changed" % fileops.describe(exc))
    if text is None:
        return {}, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ModuleFailure("state file %s is not valid JSON (%s); move it aside to continue, nothing was "
                            "changed" % (path, exc))
    if not isinstance(data, dict) or data.get("kind") != STATE_KIND or not isinstance(data.get("bridges"), dict) \
            or set(data) != {"kind", "bridges"}:
        raise ModuleFailure("state file %s is not a JSON object with kind %r and a 'bridges' map; move it "
                            "aside to continue, nothing was changed" % (path, STATE_KIND))
    bad = [reason for reason in (_bad_entry(k, v) for k, v in sorted(data["bridges"].items())) if reason]
    if bad:
        raise ModuleFailure("state file %s has entries this module never writes: %s; it is not used (fix or "
                            "move it aside), nothing was changed" % (path, "; ".join(bad)))
    return dict(data["bridges"]), text


def render_state(bridges):
    if not bridges:
        return None
    return json.dumps({"kind": STATE_KIND, "bridges": bridges}, indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------- selection

def select(sysfs, spec):
    """The endpoints: the listed devices (each must exist) or every matching function."""
    if spec["devices"]:
        missing = [bdf for bdf in spec["devices"] if not pci_config.exists(sysfs, bdf)]
        if missing:
            raise ModuleFailure("no PCI device %s under %s; nothing was changed"
                                % (", ".join(missing), pci_config.devices_dir(sysfs)))
        return list(spec["devices"])
    return pci_acs.matching_devices(sysfs, spec["vendor"], spec["classes"])


def describe_endpoint(sysfs, bdf):
    ident = pci_config.identity(sysfs, bdf)
    arch = chip = None
    device_id = "%s:%s" % ((ident["vendor"] or "?")[2:], (ident["device"] or "?")[2:])
    if (ident["vendor"] or "").lower() == nvidia_gpus.NVIDIA_VENDOR:
        try:
            arch, chip = nvidia_gpus.classify(int(ident["device"], 16))
        except (TypeError, ValueError):
            arch = "unknown"
    return {"bdf": bdf, "vendor": ident["vendor"], "device": ident["device"], "device_id": device_id,
            "class": ident["class"],
            "driver": ident["driver"], "architecture": arch, "chip": chip,
            "iommu_domain": pci_acs.iommu_domain(sysfs, bdf)}


def inspect_bridge(sysfs, bdf, between, mask):
    """One bridge: the result entry and its ACS offset (None when nothing can be done)."""
    entry = {"bdf": bdf, "between": list(between)}
    ident = pci_config.identity(sysfs, bdf)
    entry.update(vendor=ident["vendor"], device=ident["device"], driver=ident["driver"])
    entry.update(port_type=pci_acs.bridge_port_type(sysfs, bdf), acs_offset=None, capability=None,
                 capability_bits=None, ctrl_before=None, ctrl_after=None, cleared=[], not_advertised=[],
                 changed=False, reason=None)
    try:
        found = pci_acs.read_acs(sysfs, bdf)
    except pcie_ext.ExtCapError as exc:
        entry["reason"] = "ACS cannot be read: %s" % exc
        return entry, None
    if found is None:
        entry["reason"] = ("no ACS capability: it cannot redirect peer traffic, so there is nothing to clear "
                           "(and nothing isolates the devices below it)")
        return entry, None
    ctrl, capable = found["ctrl"], found["capable"]
    usable = mask & capable
    entry.update(acs_offset="0x%03x" % found["offset"], capability="0x%04x" % capable,
                 capability_bits=[name for name, bit in pcie_ext.ACS_BITS if capable & bit],
                 ctrl_before="0x%04x" % ctrl, ctrl_after="0x%04x" % ctrl,
                 not_advertised=pci_acs.names_of(mask & ~capable))
    return entry, (found["offset"], usable, ctrl)


# --------------------------------------------------------------------------- persistence

def _source(module):
    try:
        return inspect.getsource(module)
    except (OSError, IOError, TypeError):
        pass
    loader = getattr(module, "__loader__", None)
    source = loader.get_source(module.__name__) if loader is not None else None
    if not source:
        raise ModuleFailure("cannot read the source of %s to build the boot helper; use persist=false or "
                            "report this" % module.__name__)
    return source


_FUTURE = "from __future__ import annotations\n"
_ACS_IMPORTS = ("from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config\n"
                "from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pcie_ext\n")


def helper_source():
    """pci_config's, pcie_ext's and pci_acs's source as one stdlib-only script body."""
    acs_source = _source(pci_acs)
    if _ACS_IMPORTS not in acs_source:
        raise ModuleFailure("module_utils/hw/pci_acs.py no longer imports pci_config and pcie_ext the way the "
                            "helper expects; use persist=false or report this")
    parts = []
    for name, text in (("pci_config.py", _source(pci_config)), ("pcie_ext.py", _source(pcie_ext)),
                       ("pci_acs.py", acs_source.replace(_ACS_IMPORTS,
                                                         "pci_config = pcie_ext = sys.modules[__name__]\n", 1))):
        parts.append("# ---------------------------------------- module_utils/hw/%s\n%s"
                     % (name, text.replace(_FUTURE, "", 1).rstrip("\n")))
    return "\n\n\n".join(parts)


def render_helper(interpreter):
    if not interpreter.startswith("/") or any(c.isspace() for c in interpreter):
        raise ValueError("the helper's interpreter must be an absolute path without blanks: %r" % interpreter)
    return ("#!%s %s\n"
            "# Generated by gpufleet.tuning.pcie_acs from module_utils/hw/pci_config.py, pcie_ext.py and\n"
            "# pci_acs.py; do not edit. Run by %s; removed with persist=false or state=absent.\n"
            "import sys\n\n"
            "%s\n\n\n"
            "if __name__ == \"__main__\":\n"
            "    sys.exit(cli_main())\n") % (interpreter, mrrs.HELPER_FLAGS, RULE_FILE, helper_source())


def helper_args(spec):
    args = ["--clear", "0x%04x" % spec["mask"]]
    if spec["devices"]:
        for bdf in spec["devices"]:
            args += ["--device", bdf]
    else:
        args += ["--vendor", spec["vendor"]]
        for wanted in spec["classes"]:
            args += ["--class", wanted]
    if spec["allow_with_vfio"]:
        args.append("--allow-with-vfio")
    return args


def render_rule(spec, helper, bridges):
    """udev rule: on add (coldplug at boot, hotplug) and bind of each bridge, and of each
    selected device, run the helper with the device's name. ``bridges``: the entries found
    (address, vendor, device) with an ACS capability."""
    if not os.path.isabs(helper) or mrrs.RUN_UNSAFE.search(helper):
        raise ValueError("the helper path %r cannot go into a udev RUN key: it must be absolute, "
                         "without blanks, quotes, backslashes, $ or %%" % helper)
    run = 'RUN+="%s %s $kernel"' % (helper, " ".join(helper_args(spec)))
    lines = [
        "# Managed by Ansible (gpufleet.tuning.pcie_acs); local edits are overwritten.",
        "# Clears ACS %s on the bridges between the selected devices when a bridge or device is"
        % ", ".join(spec["clear"]),
        "# added (udev replays add for every device at boot) or a driver binds. Removed with",
        "# persist=false or state=absent. The helper acts only on bridges still between two devices.",
    ]
    for entry in bridges:
        lines.append('ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="%s", ATTR{vendor}=="%s", ATTR{device}=="%s", %s'
                     % (entry["bdf"], entry["vendor"], entry["device"], run))
    if spec["devices"]:
        for bdf in spec["devices"]:
            lines.append('ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="%s", %s' % (bdf, run))
    else:
        for wanted in spec["classes"]:
            pattern = wanted + "??" if len(wanted) == 6 else wanted
            lines.append('ACTION=="add|bind", SUBSYSTEM=="pci", ATTR{vendor}=="%s", ATTR{class}=="%s", %s'
                         % (spec["vendor"], pattern, run))
    return "\n".join(lines) + "\n"


def wanted_files(spec, paths, bridges, install):
    if install:
        interpreter = paths.interpreter
        if interpreter is None:
            raise mrrs.NoInterpreter(2, "no system Python for the udev helper: none of %s exists. The helper "
                                     "runs as root at every boot, so it never runs with the Python that runs "
                                     "this module" % ", ".join(paths.interpreters))
        checked = dict(trust_root=paths.trust_root, trusted_uid=paths.trusted_uid)
        return [managed_files.Wanted(paths.helper, render_helper(interpreter), mode=0o755, **checked),
                managed_files.Wanted(paths.rule, render_rule(spec, paths.helper, bridges), mode=0o644, **checked)]
    return [managed_files.Wanted(paths.rule), managed_files.Wanted(paths.helper)]


def _persist_refusal(exc):
    return ("cannot install the udev rule and its helper, nothing was changed: %s. Clearing ACS does not need "
            "them: persist=false clears it now, until the next reboot or bridge reset" % fileops.describe(exc))


# ---------------------------------------------------------------------------- refusals

def iommu_refusal(busy, endpoints):
    """Why clearing ACS is refused where the endpoints' IOMMU domains translate."""
    found = ", ".join("%s %s" % item for item in sorted(busy.items()))
    text = ("refusing to clear ACS, nothing was changed: the IOMMU domain of %s translates (%s). With ACS "
            "cleared the peer writes go straight to the other device with the addresses the IOMMU would have "
            "translated, so clearing ACS only moves the failure: the IOMMU (or the peer) then rejects the peer "
            "traffic instead of the root complex. " % (", ".join(sorted(busy)), found))
    blackwell = [e for e in endpoints if e.get("architecture") == "blackwell"]
    if blackwell:
        text += ("These are NVIDIA Blackwell GPUs (%s): identity IOMMU domains (iommu=pt) must never be used "
                 "with them, they break the GPU's boot firmware. Keep ACS and the IOMMU as they are and accept "
                 "staged copies through host memory, or change the platform (GPUs under one PCIe switch with "
                 "NVLink, or a platform whose root complex forwards peer traffic)"
                 % ", ".join(nvidia_gpus.describe(e) for e in blackwell))
    else:
        text += ("The other half is the kernel command line: iommu=pt (module gpufleet.tuning.kernel_cmdline), "
                 "which needs a reboot; run this module again after it")
    return text


def vfio_refusal(blocked):
    return ("refusing to clear ACS, nothing was changed: %s. ACS is what isolates these devices from the rest "
            "of the switch: with it cleared a device passed to a VM can reach its neighbours without the IOMMU "
            "seeing it. Set allow_with_vfio=true only where vfio-pci serves this host's own user space"
            % "; ".join("%s has %s bound to %s" % (bridge, ", ".join(devs), pci_acs.VFIO_DRIVER)
                        for bridge, devs in blocked))


# ---------------------------------------------------------------------------------- run

def _label(entry):
    def bare(value):
        return value[2:] if value and value.startswith("0x") else (value or "?")
    return "%s (%s:%s, %s)" % (entry["bdf"], bare(entry.get("vendor")), bare(entry.get("device")),
                               entry.get("port_type") or "bridge")


def _describe_failure(entry, exc, sysfs):
    return pci_config.write_failure("ACS Control", _label(entry), exc, sysfs)


def _write(tx, sysfs, entry, offset, mask, value, failed):
    """Write the masked ACS Control bits of one bridge in the transaction: ``(old, new)``; a
    bridge that refuses (or an error) aborts the transaction, which restores the bridges
    written before it, and fails with ``failed(refused)``, the partial result."""
    try:
        old, new = pci_acs.write_ctrl(sysfs, entry["bdf"], offset, mask, value)
    except pci_acs.AcsNotTaken as exc:
        err = tx.abort(_describe_failure(entry, exc, sysfs))
        raise ModuleFailure(err.full_message(), failed((entry["bdf"], "refused: %s" % exc, "0x%04x" % exc.got)))
    except (OSError, IOError, pci_config.PciError) as exc:
        err = tx.abort(_describe_failure(entry, exc, sysfs))
        raise ModuleFailure(err.full_message(), failed(None))
    tx.record("ACS Control of %s" % entry["bdf"], _undo(sysfs, entry["bdf"], offset, mask, old))
    return old, new


def _partial(result, entries, refused=None):
    out = dict((k, result[k]) for k in ("endpoints", "container", "skipped_keys", "state_file", "clear"))
    bridges = []
    for entry in entries:
        entry = dict(entry, ctrl_after=entry["ctrl_before"], changed=False, cleared=[])
        if refused and refused[0] == entry["bdf"]:
            entry["reason"] = refused[1]
            entry["ctrl_read_back"] = refused[2]
        bridges.append(entry)
    out["bridges"] = bridges
    return out


def _result(spec, paths, endpoints, entries, container, skipped):
    return {"changed": False, "state": spec["state"], "clear": spec["clear"], "endpoints": endpoints,
            "bridges": entries, "skipped_keys": skipped, "container": container, "state_file": paths.state,
            "files": [paths.helper, paths.rule], "persisted": False, "reboot_required": False, "diff": []}


def _plan_files(spec, paths, bridges, install, guarded, result, entries):
    """(file changes, skipped text or None): the persistence plan, left alone in a container."""
    file_changes, problem = [], None
    try:
        file_changes = managed_files.plan(wanted_files(spec, paths, bridges, install))
    except (OSError, IOError) as exc:
        if not guarded:
            if isinstance(exc, managed_files.NotOwned):
                raise ModuleFailure("cannot manage the udev persistence, nothing was changed: %s"
                                    % fileops.describe(exc), _partial(result, entries))
            raise ModuleFailure(_persist_refusal(exc), _partial(result, entries))
        problem = exc
    if guarded and (file_changes or problem):
        if problem is not None:
            would = "change a file it cannot change safely: %s" % fileops.describe(problem)
        else:
            would = ", ".join(change.describe() for change in file_changes)
        return [], container_mod.persistence_left_alone(result["container"], "a udev rule", would)
    return file_changes, None


def run(params, check_mode=False, paths=None, tools=None):
    """Clear (state=present) or restore (state=absent) ACS bits; return the result dict.

    ``tools`` (the command runner every engine takes) is not used: sysfs needs no binary.
    """
    paths = paths or Paths()
    spec = validate(params)
    container = container_mod.detect(proc_root=paths.proc, root=paths.root)
    remembered, state_text = load_state(paths.state)
    guarded = container_mod.guarded(container, spec["allow_in_container"])
    if spec["state"] == "absent":
        return _run_absent(spec, paths, container, guarded, remembered, state_text, check_mode)
    return _run_present(spec, paths, container, guarded, remembered, state_text, check_mode)


def _run_present(spec, paths, container, guarded, remembered, state_text, check_mode):
    sysfs = paths.sysfs
    chosen = select(sysfs, spec)
    endpoints = [describe_endpoint(sysfs, bdf) for bdf in chosen]
    found, unknown = pci_acs.bridges_between(sysfs, chosen)
    skipped = dict(unknown)
    entries, planned = [], []
    for bdf in sorted(found):
        entry, acs = inspect_bridge(sysfs, bdf, found[bdf], spec["mask"])
        entries.append(entry)
        if entry["reason"]:
            skipped[bdf] = entry["reason"]
        if acs is not None:
            offset, usable, ctrl = acs
            if ctrl & usable:
                planned.append((entry, offset, usable, ctrl))
    result = _result(spec, paths, endpoints, entries, container, skipped)
    warnings = []
    if len(chosen) < 2:
        result["msg"] = ("%d device selected: ACS sits on the path between two, nothing to do" % len(chosen))

    busy = pci_acs.translated(sysfs, chosen)
    if planned and busy:
        raise ModuleFailure(iommu_refusal(busy, endpoints), _partial(result, entries))
    with_acs = [e for e in entries if e["acs_offset"] is not None]
    if busy and with_acs:
        warnings.append(iommu_refusal(busy, endpoints).replace(
            "refusing to clear ACS, nothing was changed", "ACS is already clear on every bridge, but", 1))
    if planned and not spec["allow_with_vfio"]:
        blocked = [(e["bdf"], pci_acs.vfio_below(sysfs, e["bdf"])) for e, _o, _u, _c in planned]
        blocked = [item for item in blocked if item[1]]
        if blocked:
            raise ModuleFailure(vfio_refusal(blocked), _partial(result, entries))

    install = spec["persist"] and bool(entries)
    keep_files = spec["persist"] and not entries  # nothing to keep: an earlier rule stays as it is
    file_changes = []
    if not keep_files:
        file_changes, left = _plan_files(spec, paths, with_acs, install, guarded, result, entries)
        if left:
            skipped["udev rule"] = left
    result["persisted"] = (os.path.exists(paths.rule) if (keep_files or skipped.get("udev rule"))
                           else install)

    if planned and guarded:
        raise ModuleFailure(container_mod.refusal(
            ["clear ACS %s on %s" % (", ".join(spec["clear"]), ", ".join(e["bdf"] for e, _o, _u, _c in planned))],
            container, "PCI config space and udev"), _partial(result, entries))
    blocked = [e for e, _o, _u, _c in planned if not pci_config.writable(sysfs, e["bdf"])]
    if blocked:
        raise ModuleFailure("config space of %s is not writable (needs root and a read-write /sys); nothing "
                            "was changed" % ", ".join(_label(e) for e in blocked), _partial(result, entries))

    new_state = dict(remembered)
    tx = Transaction()
    for entry, offset, usable, ctrl in planned:
        if check_mode:
            old, new = ctrl, ctrl & ~usable
        else:
            old, new = _write(tx, sysfs, entry, offset, usable, 0,
                              lambda refused: _partial(result, entries, refused))
        entry.update(ctrl_before="0x%04x" % old, ctrl_after="0x%04x" % new, cleared=pci_acs.names_of(old & ~new),
                     changed=old != new)
        if old != new:
            prior = new_state.get(entry["bdf"])
            if prior and (prior["vendor"], prior["device"], prior["offset"]) == (
                    entry["vendor"], entry["device"], entry["acs_offset"]):
                cleared = int(prior["cleared"], 16) | (old & ~new)
                new_state[entry["bdf"]] = dict(prior, cleared="0x%04x" % cleared)
            else:
                new_state[entry["bdf"]] = {"vendor": entry["vendor"], "device": entry["device"],
                                           "offset": entry["acs_offset"], "ctrl": "0x%04x" % old,
                                           "cleared": "0x%04x" % (old & ~new)}
    state_after = render_state(new_state) if new_state != remembered else state_text
    state_changed = state_after != state_text
    if not check_mode:
        try:
            if state_changed:
                fileops.replace(tx, paths.state, state_after, mode=0o644)
            managed_files.apply(file_changes, tx)
        except (OSError, IOError) as exc:
            err = tx.abort("failed to write %s" % fileops.describe(exc))
            raise ModuleFailure(err.full_message(), _partial(result, entries))
    return _finish(result, entries, file_changes, paths, state_text, state_after, warnings, spec)


def _run_absent(spec, paths, container, guarded, remembered, state_text, check_mode):
    sysfs = paths.sysfs
    entries, planned, skipped = [], [], {}
    remaining = {}
    for bdf in sorted(remembered):
        saved = remembered[bdf]
        entry = {"bdf": bdf, "between": [], "vendor": saved["vendor"], "device": saved["device"], "driver": None,
                 "port_type": None, "acs_offset": saved["offset"], "capability": None, "capability_bits": None,
                 "ctrl_before": None, "ctrl_after": None, "cleared": [], "not_advertised": [], "changed": False,
                 "reason": None, "restore_to": saved["ctrl"]}
        entries.append(entry)
        if not pci_config.exists(sysfs, bdf):
            entry["reason"] = "not present now: its remembered ACS Control %s is kept" % saved["ctrl"]
        else:
            ident = pci_config.identity(sysfs, bdf)
            entry.update(driver=ident["driver"], port_type=pci_acs.bridge_port_type(sysfs, bdf))
            if (ident["vendor"], ident["device"]) != (saved["vendor"], saved["device"]):
                entry["reason"] = ("is %s:%s now, not the %s:%s this module changed: left alone, its remembered "
                                   "ACS Control is kept" % (ident["vendor"], ident["device"], saved["vendor"],
                                                            saved["device"]))
            else:
                try:
                    found = pci_acs.read_acs(sysfs, bdf)
                except pcie_ext.ExtCapError as exc:
                    found, entry["reason"] = None, "ACS cannot be read: %s" % exc
                if found is not None and "0x%03x" % found["offset"] != saved["offset"]:
                    found, entry["reason"] = None, ("its ACS capability is at 0x%03x now, not %s: left alone"
                                                    % (found["offset"], saved["offset"]))
                elif found is None and entry["reason"] is None:
                    entry["reason"] = "has no ACS capability now: left alone"
                if found is not None:
                    ctrl, mask = found["ctrl"], int(saved["cleared"], 16)
                    target = pci_acs.with_bits(ctrl, mask, int(saved["ctrl"], 16))
                    entry.update(capability="0x%04x" % found["capable"],
                                 capability_bits=[n for n, b in pcie_ext.ACS_BITS if found["capable"] & b],
                                 ctrl_before="0x%04x" % ctrl, ctrl_after="0x%04x" % ctrl)
                    if target != ctrl:
                        planned.append((entry, found["offset"], mask, int(saved["ctrl"], 16), target))
                    continue
        skipped[bdf] = entry["reason"]
        remaining[bdf] = saved
    result = _result(spec, paths, [], entries, container, skipped)
    file_changes, left = _plan_files(spec, paths, [], False, guarded, result, entries)
    if left:
        skipped["udev rule"] = left
    result["persisted"] = os.path.exists(paths.rule) if left else False
    if planned and guarded:
        raise ModuleFailure(container_mod.refusal(
            ["restore ACS Control on %s" % ", ".join(e["bdf"] for e, _o, _m, _v, _t in planned)],
            container, "PCI config space and udev"), _partial(result, entries))
    blocked = [e for e, _o, _m, _v, _t in planned if not pci_config.writable(sysfs, e["bdf"])]
    if blocked:
        raise ModuleFailure("config space of %s is not writable (needs root and a read-write /sys); nothing "
                            "was changed" % ", ".join(_label(e) for e in blocked), _partial(result, entries))
    if guarded:
        remaining = dict(remembered)  # the state file goes with the persistence: the host's, left alone
    tx = Transaction()
    for entry, offset, mask, value, target in planned:
        if check_mode:
            old, new = int(entry["ctrl_before"], 16), target
        else:
            old, new = _write(tx, sysfs, entry, offset, mask, value,
                              lambda refused: _partial(result, entries, refused))
        entry.update(ctrl_before="0x%04x" % old, ctrl_after="0x%04x" % new, changed=old != new)
    state_after = render_state(remaining) if remaining != remembered else state_text
    if not check_mode:
        try:
            if state_after != state_text:
                fileops.replace(tx, paths.state, state_after, mode=0o644)
            managed_files.apply(file_changes, tx)
        except (OSError, IOError) as exc:
            err = tx.abort("failed to write %s" % fileops.describe(exc))
            raise ModuleFailure(err.full_message(), _partial(result, entries))
    return _finish(result, entries, file_changes, paths, state_text, state_after, [], spec)


def _finish(result, entries, file_changes, paths, state_text, state_after, warnings, spec):
    before = dict(("%s ACS Control" % e["bdf"], e["ctrl_before"]) for e in entries if e["ctrl_before"])
    after = dict(("%s ACS Control" % e["bdf"], e["ctrl_after"]) for e in entries if e["ctrl_after"])
    diff = [diffs.values_diff(before, after, DIFF_HEADER)]
    changes = [records.value(AREA, "%s %s" % (e["bdf"], ACS_FIELD), e["ctrl_before"], e["ctrl_after"])
               for e in entries if e["changed"]]
    if state_after != state_text:
        diff.append(diffs.file_diff(paths.state, state_text, state_after))
        changes.append(records.file_change(AREA, paths.state, state_text, state_after, after_mode=0o644))
    diff += managed_files.diff_entries(file_changes)
    changes += records.from_managed(AREA, file_changes)
    result["diff"] = diff
    result["changes"] = changes
    result["changed"] = bool(changes)
    changed = [e["bdf"] for e in entries if e["changed"]]
    if "msg" not in result:
        verb = "restored ACS Control on" if spec["state"] == "absent" else "cleared ACS %s on" % ", ".join(spec["clear"])
        if changed:
            result["msg"] = "%s %s" % (verb, ", ".join(changed))
        elif result["changed"]:
            result["msg"] = "ACS Control already as wanted; persistence files updated"
        else:
            result["msg"] = "nothing to change: ACS Control is already as wanted on every bridge found"
    warnings = list(warnings) + ["%s left alone: %s" % (k, result["skipped_keys"][k])
                                 for k in sorted(result["skipped_keys"])]
    result["warnings"] = warnings
    return result


def _undo(sysfs, bdf, offset, mask, old):
    return lambda: pci_acs.write_ctrl(sysfs, bdf, offset, mask, old)
