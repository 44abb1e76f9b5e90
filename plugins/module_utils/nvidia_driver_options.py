# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA driver options (``NVreg_*``): a modprobe.d file of our own, the initramfs rebuilt
when it changes, and a comparison with the values the driver runs with.

The module gpufleet.tuning.nvidia_driver_options is a thin shell over ``ARGUMENT_SPEC`` and
``run()``.

What changed is returned as ``changes`` (records.py, area ``nvidia_options``): a file record
for the modprobe.d file (a digest, never the text) and a value record per ``NVreg_*`` option
whose configured value changes (before/after as the driver receives it, quotes removed; None
where the file does not set it). The initramfs rebuild is an action, not state: ``initramfs``
reports it and it has no record.

Why the initramfs: update-initramfs and dracut copy modprobe.d into the image, and when the
nvidia module is loaded from the initramfs those copies are what it reads; a file changed only
in /etc takes effect at some later rebuild, or never. The rebuild runs only when the file
changed, and a failed rebuild puts the old file back (the tools write the image atomically, so
the old image is still the one in place).

Why a file that sorts last: kmod hands a module every ``options`` line of every modprobe.d
file, in file-name order, and for a parameter set twice the last one wins. The default name
``zz-gpufleet-nvidia.conf`` sorts after the driver's and the distribution's files; a file read
after ours that sets one of our options to another value makes the run fail (the option would
silently not take effect), and one read before it is reported.

Why ``reboot_required`` is worked out this way: /proc/driver/nvidia/params shows the values the
driver runs with, without the ``NVreg_`` prefix (mapped back here). An option whose running
value differs from the file is pending. Some options are not printed there (string options such
as RmNvlinkBandwidth, options of another driver version, misspelt names) and nothing shows them
when the driver is not loaded; those are counted as pending when the file was written after the
last boot (its mtime is newer than ``btime`` in /proc/stat), so every run gives the same answer
until the node reboots.

Risky options are refused unless ``allow_risky``: each entry of ``RISKY`` says why.

Why values are checked against the parameter's kernel type: every ``NVreg_*`` parameter is a
signed ``int`` or a ``charp`` string (nvidia_driver.PARAM_TYPES, from nv-reg.h). The kernel
refuses the WHOLE nvidia module when one value does not parse for its type (2147483648,
``0x80000000``, ``yes`` or ``1.5`` for an int, a string over 1024 bytes), and the initramfs
carries the file, so the node boots without GPUs. Such values are refused before anything is
written; an unknown name (another driver version) is written with a warning, but a numeric
value for it must still be a valid int.

Why the file must be ours: the module writes and removes only a file it created (it carries
the gpufleet.tuning marker); ``filename: nvidia.conf`` would otherwise replace the
distribution's file (and its ``blacklist nouveau``). ``adopt: true`` takes such a file over.

What can make the options never apply, reported and never counted as waiting for a reboot:

- the same option on the kernel command line (``nvidia.NVreg_X=...`` in /proc/cmdline): kmod
  appends it after every modprobe.d file, so it wins at every load. This is a warning and
  ``cmdline_overrides``, not a failure: the file itself is harmless, the module cannot change
  the command line, and the fix (kernel_cmdline ``absent``) reaches /proc/cmdline only after a
  reboot, which a failure here would block;
- a rule that keeps the driver from loading through modprobe (``install nvidia /bin/false``,
  an ``alias nvidia ...`` to another module, ``module_blacklist=nvidia``): ``load_blockers``
  and a warning. A ``blacklist nvidia`` is reported too, with what it really means: udev's
  autoload at boot skips the driver, while a plain ``modprobe nvidia`` (nvidia-modprobe,
  nvidia-persistenced) still loads it, with these options.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec as argspec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_modules as km
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

MODULE = "nvidia"
AREA = "nvidia_options"
DEFAULT_FILENAME = "zz-gpufleet-nvidia.conf"
NAME_RE = re.compile(r"^NVreg_[A-Za-z0-9_]+\Z")
FILENAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.conf\Z")
INT_MIN, INT_MAX = km.INTEGER_TYPES["int"]
HEADER = ("# Managed by Ansible (gpufleet.tuning.nvidia_driver_options): NVIDIA driver options.\n"
          "# They take effect when the nvidia module next loads (a reboot); local edits are overwritten.\n")
# Module parameter -> the name /proc/driver/nvidia/params prints, where the driver renames it
# (nv-reg.h, NV_DEFINE_PARAMS_TABLE_ENTRY_CUSTOM_NAME).
SHOWN_AS = {"NVreg_RestrictProfilingToAdminUsers": "NVreg_RmProfilingAdminOnly"}
# Tools in the order ``auto`` tries them, with the arguments that rebuild the image of the
# kernel that boots next: update-initramfs -u takes the newest installed kernel, dracut --force
# the running one.
INITRAMFS_TOOLS = (("update-initramfs", ["-u"]), ("dracut", ["--force"]))

# The module's argument spec: the module passes it to AnsibleModule, validate() reads the
# allowed values from it, and the tests compare it with the module's DOCUMENTATION.
ARGUMENT_SPEC = dict(
    options=dict(type="dict", default={}),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    filename=dict(type="str", default=DEFAULT_FILENAME),
    initramfs=dict(type="str", default="auto", choices=["auto"] + [tool for tool, _args in INITRAMFS_TOOLS] + ["none"]),
    allow_risky=dict(type="bool", default=False),
    adopt=dict(type="bool", default=False),
)


def _num(value):
    return nvidia_driver.as_number(value)


def _peer_mapping_override(value):
    return "peermappingoverride" in str(value).lower()


# (option, test on the configured value, why it is refused without allow_risky)
RISKY = (
    ("NVreg_RegistryDwords", _peer_mapping_override,
     "PeerMappingOverride is undocumented: it forces GPU peer-to-peer mappings that the driver's own "
     "topology checks turned down, which can hang or corrupt peer-to-peer transfers"),
    ("NVreg_RegistryDwordsPerDevice", _peer_mapping_override,
     "PeerMappingOverride is undocumented: it forces GPU peer-to-peer mappings that the driver's own "
     "topology checks turned down, which can hang or corrupt peer-to-peer transfers"),
    ("NVreg_GrdmaPciTopoCheckOverride", lambda v: _num(v) != 0,
     "it overrides the driver's GPUDirect RDMA topology check, meant only for specific coherent (C2C) "
     "systems: RDMA over an unsupported PCIe path can corrupt data"),
    ("NVreg_DmaRemapPeerMmio", lambda v: _num(v) == 0,
     "0 stops the driver from DMA-mapping a peer's MMIO through the kernel: with the IOMMU translating "
     "(no iommu=pt), peer-to-peer and GPUDirect RDMA accesses to the peer's memory fault"),
    ("NVreg_NvLinkDisable", lambda v: _num(v) != 0,
     "NVLink is not trained: GPU peer-to-peer traffic falls back to PCIe (NV18 on the H200 machines is "
     "about 478 GB/s per direction, PCIe gen5 x16 about 64 GB/s)"),
    ("NVreg_RmNvlinkBandwidth", lambda v: nvidia_driver.nvlink_bandwidth_mode(v) != "FULL",
     "it caps NVLink peer-to-peer bandwidth to save power (OFF is 0%, MIN 15-25%, HALF 50%, 3QUARTER 75%, "
     "LINKCOUNT fewer links); the driver compares only the characters given, case-sensitively, so 'O' means OFF "
     "and an empty value matches OFF too"),
    ("NVreg_RmNvlinkBandwidthLinkCount", lambda v: _num(v) != 0,
     "it reduces the NVLink links in use to save power, cutting peer-to-peer bandwidth"),
    ("NVreg_EnableGpuFirmware", lambda v: _num(v) is None or _num(v) & 0xF == 0,
     "it turns the GSP firmware off: NVIDIA's open kernel modules and Hopper/Blackwell GPUs (H100, H200, "
     "B200) need it, and the driver then fails to initialize them"),
    ("NVreg_EnableMSI", lambda v: _num(v) == 0,
     "0 falls back to legacy INTx interrupts shared with other devices: more interrupt latency, and "
     "lost or storming interrupts with several GPUs"),
    ("NVreg_DynamicPowerManagement", lambda v: _num(v) in (1, 2),
     "it lets the driver power idle GPUs off (runtime D3, meant for notebooks): a request after an idle "
     "spell waits for the GPU to power up again"),
    ("NVreg_RegisterPCIDriver", lambda v: _num(v) == 0,
     "0 keeps the driver from registering as a PCI driver: it binds no GPU at all"),
    ("NVreg_InitializeSystemMemoryAllocations", lambda v: _num(v) == 0,
     "0 stops the driver from clearing the system memory it hands out: one process's (or tenant's) data "
     "can be read by the next"),
    # Isolation: who may read the GPUs' performance counters and open their device files. The
    # driver's defaults (nv-reg.h) are RestrictProfilingToAdminUsers=1 and device files owned
    # by UID 0, GID 0 with mode 0666. A value is refused when it grants what those defaults do
    # not, or when it hands every local account access a host may have taken away (this file is
    # read last, so it overrides a distribution's or an administrator's root:video 0660). The
    # files are created by the driver or nvidia-modprobe (setuid root), which reads the values
    # as unsigned: a negative value is every bit set.
    ("NVreg_RestrictProfilingToAdminUsers", lambda v: _num(v) != 1,
     "anything but 1 (the default) lets every user who can open the GPU read its performance counters "
     "(CUPTI, Nsight), not only CAP_SYS_ADMIN: a side channel into other processes' and tenants' kernels "
     "(CVE-2018-6260); the driver restricts them only for exactly 1"),
    ("NVreg_DeviceFileUID", lambda v: _num(v) != 0,
     "the GPU device files (/dev/nvidia*) get a non-root owner, who holds the owner's permissions and can "
     "chmod them to any mode, so the owner bits and every later restriction are that account's to undo; "
     "the default owner is root (0)"),
    ("NVreg_DeviceFileMode", lambda v: _num(v) is None or _num(v) < 0 or (_num(v) & ~0o660) != 0,
     "a mode with read or write for others (o+rw, NVIDIA's default 0666 included) lets every local account "
     "and service open the GPUs, overriding a root:video 0660 a host may have; execute, setuid, setgid or "
     "sticky bits (or a negative value, all bits) grant more than the default 0666 ever does. Leave the "
     "option out to keep the host's own setting, or give 0660 or less with NVreg_DeviceFileGID"),
)


def with_defaults(params):
    """``params`` with every option it leaves out at its ARGUMENT_SPEC default."""
    return argspec.with_defaults(ARGUMENT_SPEC, params)


class Paths:
    """Where the module looks; everything hangs off ``root`` so tests use a temp tree."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.sys = os.path.join(root, "sys")
        self.modprobe_d = os.path.join(root, "etc", "modprobe.d")


def _case_variant(name):
    """The known parameter that ``name`` spells with other capitals, or None."""
    lowered = name.lower()
    for known in sorted(nvidia_driver.PARAM_TYPES):
        if known.lower() == lowered and known != name:
            return known
    return None


def check_option(name, value):
    """The value of one option as written in the file; raises km.OptionError with the reason.

    Known parameters are checked against their kernel type (int: kstrtoint's syntax and
    range; charp: a string of at most 1024 bytes); an unknown name takes a string, but a
    numeric value must be a valid int (it may be an int parameter of another version).
    """
    if value is None:
        raise km.OptionError("give an integer, a boolean or a string")
    if isinstance(value, float):
        raise km.OptionError("%r is a floating-point number: give an integer, a boolean or a string (the driver's "
                             "numeric parameters are signed int, %d to %d)" % (value, INT_MIN, INT_MAX))
    if not isinstance(value, (bool, int, str)):
        raise km.OptionError("a %s is not a parameter value: give an integer, a boolean or a string"
                             % type(value).__name__)
    kind = nvidia_driver.PARAM_TYPES.get(name)
    if kind == "int":
        try:
            km.kernel_integer(value, "int")
        except km.OptionError as exc:
            raise km.OptionError("%s is a signed int parameter of the nvidia module (nv-reg.h: module_param int) "
                                 "and %s; the kernel would refuse to load the whole nvidia module, and the node "
                                 "would boot without GPUs" % (name, exc))
    elif kind == "charp":
        if isinstance(value, bool):
            raise km.OptionError("%s is a string (charp) parameter: give a string, not a boolean" % name)
        km.check_param_value(value, "charp")
    elif km.looks_numeric(value):
        try:
            km.kernel_integer(value, "int")
        except km.OptionError as exc:
            raise km.OptionError("%s is not a parameter of the driver versions this module knows, so it may be a "
                                 "signed int parameter: %s (a value the kernel refuses makes it refuse the whole "
                                 "nvidia module)" % (name, exc))
    return km.format_value(value)


def validate(params):
    """Check every input before anything is read; return ``{name: value as written}``."""
    for name in ("state", "initramfs"):
        choices = ARGUMENT_SPEC[name]["choices"]
        if params.get(name) not in choices:
            raise ModuleFailure("%s %r is not valid: use one of %s; nothing was changed"
                                % (name, params.get(name), ", ".join(choices)))
    filename = params.get("filename")
    if not isinstance(filename, str) or not FILENAME_RE.match(filename):
        raise ModuleFailure("filename %r is not valid: a file name (no directory) of letters, digits, '.', '_' "
                            "and '-' ending in .conf (modprobe reads no other files)" % (filename,))
    options = params.get("options") or {}
    if not isinstance(options, dict):
        raise ModuleFailure("options must be a dict of NVreg_Name: value, got %s" % type(options).__name__)
    if params.get("state") == "absent":
        return {}
    errors = []
    written = {}
    for name in sorted(options, key=str):
        value = options[name]
        if not isinstance(name, str) or not NAME_RE.match(name):
            errors.append("option %r is not valid: NVIDIA driver options are named NVreg_<Name> "
                          "(letters, digits and '_'), such as NVreg_EnableMSI" % (name,))
            continue
        if name in nvidia_driver.NOT_PARAMETERS:
            errors.append("option %r is not valid: it is the name /proc/driver/nvidia/params prints, not a module "
                          "parameter (the kernel ignores it); the driver's parameter is %s"
                          % (name, nvidia_driver.NOT_PARAMETERS[name]))
            continue
        variant = _case_variant(name)
        if variant:
            errors.append("option %r is not valid: the driver's parameter is spelt %s (names are case-sensitive, "
                          "and the kernel ignores a name it does not know)" % (name, variant))
            continue
        try:
            written[name] = check_option(name, value)
        except km.OptionError as exc:
            errors.append("%s=%r is not valid: %s" % (name, value, exc))
    if errors:
        raise ModuleFailure("invalid options, nothing was changed: " + "; ".join(errors))
    return written


def unknown_options(options):
    """Names that are not in the driver's parameter table (their type cannot be checked)."""
    return sorted(name for name in options if name not in nvidia_driver.PARAM_TYPES)


def risky_findings(options):
    """``["NVreg_X=v: why", ...]`` for the options on the RISKY list."""
    found = []
    for name, test, why in RISKY:
        if name in options and test(nvidia_driver.unquote(options[name])):
            found.append("%s=%s: %s" % (name, options[name], why))
    return found


def render(options):
    """The file's text; None when there is nothing to configure (the file is then removed)."""
    if not options:
        return None
    return HEADER + "options %s %s\n" % (MODULE, " ".join("%s=%s" % (k, options[k]) for k in sorted(options)))


def boot_time(proc_root):
    """``btime`` from /proc/stat (seconds since the epoch), or None."""
    try:
        with open(os.path.join(proc_root, "stat")) as handle:
            for line in handle:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, IOError, ValueError, IndexError):
        return None
    return None


def written_since_boot(path, proc_root, changing_now):
    """Whether the options file was (or is being) written after the last boot; True when the
    boot time cannot be read (the safe answer: a reboot may be pending)."""
    if changing_now:
        return True
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    btime = boot_time(proc_root)
    return True if btime is None else mtime > btime


def compare(configured, running, since_boot, removed, overridden=()):
    """Return ``(pending, unverified)`` for the configured options against the running values.

    ``running`` is None when the driver's params cannot be read. ``removed`` holds options our
    file set before this run and no longer sets. Options in ``overridden`` (set differently on
    the kernel command line) are never pending: no reboot applies them.
    """
    pending = []
    unverified = []
    for name in sorted(configured):
        value = nvidia_driver.unquote(configured[name])
        if name in overridden:
            if running is None or SHOWN_AS.get(name, name) not in running:
                unverified.append(name)
            continue
        shown = SHOWN_AS.get(name, name)
        if running is None or shown not in running:
            unverified.append(name)
            if since_boot:
                where = ("the nvidia driver is not loaded" if running is None
                         else "the running driver does not report it in /proc/driver/nvidia/params")
                pending.append("%s=%s: %s; the file was written after the last boot, so it takes effect "
                               "at the next driver load (reboot)" % (name, configured[name], where))
            continue
        if not nvidia_driver.same_value(value, running[shown]):
            pending.append("%s: running %s, configured %s" % (name, running[shown] or '""', configured[name]))
    for name in sorted(removed):
        shown = SHOWN_AS.get(name, name)
        if running and shown in running and nvidia_driver.same_value(nvidia_driver.unquote(removed[name] or ""),
                                                                     running[shown]):
            pending.append("%s: no longer configured here; the driver keeps running with %s until it reloads"
                           % (name, running[shown] or '""'))
    return pending, unverified


def choose_initramfs(choice, tools):
    """``(tool, argv or None, note)`` for the ``initramfs`` option; raises for a named tool that
    is not installed."""
    if choice == "none":
        return None, None, "initramfs=none: not rebuilt"
    for tool, args in INITRAMFS_TOOLS:
        if choice not in ("auto", tool):
            continue
        path = tools.which(tool) if tools is not None else None
        if path:
            return tool, [path] + list(args), "found %s" % path
        if choice == tool:
            raise ModuleFailure("initramfs=%s but %s is not installed (not found on PATH or in /sbin, /usr/sbin); "
                                "nothing was changed" % (tool, tool))
    return None, None, ("neither update-initramfs nor dracut is installed: the initramfs (if any) is not "
                        "rebuilt, so the options apply only where the driver loads from the root filesystem")


def cmdline_overrides(options, proc_root):
    """Options of ours that the running kernel command line sets to another value:
    ``[{"param", "value", "configured", "arg"}]`` (the command line wins at every load)."""
    found = []
    for item in km.cmdline_options(MODULE, proc_root):
        name = item["param"]
        if name not in options:
            continue
        ours = nvidia_driver.unquote(options[name])
        if item["value"] is not None and nvidia_driver.same_value(ours, item["value"]):
            continue
        found.append({"param": name, "value": item["value"], "configured": ours, "arg": item["arg"]})
    return found


def change_records(changes, before_options, options):
    """The change records of a plan (records.py): the file's (from managed_files), then one value
    record per option whose configured value changes, as the driver receives it (quotes
    removed; None where the file does not set it). Empty when the file does not change."""
    if not changes:
        return []
    before = dict((name, nvidia_driver.unquote(value)) for name, value in before_options.items())
    after = dict((name, nvidia_driver.unquote(value)) for name, value in options.items())
    return records.from_managed(AREA, changes) + records.values(AREA, before, after)


def _not_owned(exc, content, partial):
    action = "remove" if content is None else "overwrite"
    return ModuleFailure("refusing to %s %s: it exists and was not written by gpufleet.tuning (no marker comment "
                         "in its first lines), so it belongs to the distribution or an operator; nothing was "
                         "changed: choose another filename, or set adopt: true to take it over (its whole content "
                         "is then replaced or removed)" % (action, exc.filename), partial)


def _adopt_warning(path, text):
    """What adopting a foreign file drops: its lines other than ``options nvidia``."""
    dropped = []
    for line in km.logical_lines(text):
        fields = line.split(None, 2)
        if not (len(fields) >= 2 and fields[0] == "options" and km.canonical(fields[1]) == MODULE):
            dropped.append(line)
    text = "adopt=true: %s was not written by gpufleet.tuning and is taken over" % path
    if dropped:
        text += "; these lines of it are dropped: %s" % "; ".join(repr(line) for line in dropped[:5])
        if len(dropped) > 5:
            text += " (and %d more)" % (len(dropped) - 5)
    return text


def run(params, check_mode=False, paths=None, tools=None):
    """Manage the options file; return the result dict or raise ModuleFailure.

    ``tools`` (common.commands.Commands) finds and runs the initramfs tool."""
    paths = paths or Paths()
    params = with_defaults(params)
    options = validate(params)
    adopt = params.get("adopt", False)
    if not isinstance(adopt, bool):
        raise ModuleFailure("adopt must be true or false, got %r" % (adopt,))
    risky = risky_findings(options)
    if risky and not params.get("allow_risky"):
        raise ModuleFailure("refusing risky NVIDIA driver options (set allow_risky=true to apply them anyway); "
                            "nothing was changed: " + "; ".join(risky), {"risky": risky})
    path = os.path.join(paths.modprobe_d, params["filename"])
    content = render(options)
    driver = nvidia_driver.state(paths.proc, paths.sys)
    running = nvidia_driver.running_params(paths.proc)
    try:
        before_text = fileops.read_text(path)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read %s, nothing was changed: %s" % (path, fileops.describe(exc)))
    before_options = dict((name, value) for name, value in km.parse_options(before_text or "", MODULE))
    removed = dict((k, v) for k, v in before_options.items() if k not in options)
    result = {
        "changed": False,
        "changes": [],
        "path": path,
        "options": dict((k, nvidia_driver.unquote(v)) for k, v in options.items()),
        "driver_loaded": driver["loaded"],
        "driver_version": driver["version"],
        "running": running,
        "pending": [],
        "unverified": [],
        "reboot_required": False,
        "risky": risky,
        "conflicts": [],
        "cmdline_overrides": [],
        "load_blockers": [],
        "initramfs": {"tool": None, "command": None, "rebuilt": False, "note": ""},
        "plan": [],
        "container": container_mod.detect(proc_root=paths.proc, root=paths.root),
        "diff": [],
        "warnings": [],
    }
    if result["container"]["detected"]:
        result["warnings"].append("this runs inside a container (%s): the file is written here, but the NVIDIA "
                                  "driver and its options belong to the host" % result["container"]["kind"])
    bandwidth = options.get("NVreg_RmNvlinkBandwidth")
    if bandwidth is not None:
        value = nvidia_driver.unquote(bandwidth)
        if nvidia_driver.nvlink_bandwidth_mode(value) == "FULL" and value != "FULL":
            result["warnings"].append("the driver reads NVreg_RmNvlinkBandwidth=%r as FULL (the default): it knows "
                                      "only %s, compared case-sensitively" % (value, ", ".join(
                                          nvidia_driver.NVLINK_BW_MODES + ("FULL",))))
    unknown = unknown_options(options)
    for name in unknown:
        result["warnings"].append("%s is not a parameter of the NVIDIA driver versions this module knows (nv-reg.h "
                                  "of 515 to 595): it is written as given, but its type cannot be checked (another "
                                  "driver version, or a misspelt name; the kernel ignores an unknown name)" % name)

    if options:
        def same(ours, theirs):
            return nvidia_driver.same_value(nvidia_driver.unquote(ours), "" if theirs is None else theirs)
        overriding, overridden = km.option_conflicts(MODULE, path, options, paths.root, same)
        result["conflicts"] = overridden
        for item in overridden:
            result["warnings"].append("%s also sets %s=%s; %s is read after it and wins"
                                      % (item["path"], item["param"], item["value"], path))
        if overriding:
            raise ModuleFailure(
                "nothing was changed: %s; modprobe applies the file read last, so these options would not take "
                "effect: remove them there, or choose a filename that sorts after it"
                % "; ".join("%s sets %s=%s and is read after %s" % (i["path"], i["param"], i["value"], path)
                            for i in overriding), dict(result, conflicts=overriding + overridden))

    result["cmdline_overrides"] = cmdline_overrides(options, paths.proc)
    for item in result["cmdline_overrides"]:
        result["warnings"].append(
            "the kernel command line sets %s (/proc/cmdline), and kmod applies it after every modprobe.d file: %s=%s "
            "in %s never takes effect, not after a reboot either, while the boot line keeps it; remove it from the "
            "boot loader's command line (gpufleet.tuning.kernel_cmdline absent) or configure the same value"
            % (item["arg"], item["param"], item["configured"], path))
    result["load_blockers"] = km.load_blockers(MODULE, paths.root, paths.proc)
    blocked = [b for b in result["load_blockers"] if km.blocks_loading(b)]
    for item in result["load_blockers"]:
        if item["effect"] != "loads_via_command":
            result["warnings"].append(km.describe_blocker(item))

    wanted = managed_files.Wanted(path, content, adopt=adopt)
    try:
        changes = managed_files.plan([wanted])
    except managed_files.NotOwned as exc:
        raise _not_owned(exc, content, dict(result))
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read %s, nothing was changed: %s" % (path, fileops.describe(exc)), dict(result))
    if adopt and changes and before_text is not None and not managed_files.is_owned(before_text):
        result["warnings"].append(_adopt_warning(path, before_text))
    tool, argv, note = choose_initramfs(params["initramfs"], tools) if changes else (None, None, "file unchanged")
    result["initramfs"].update({"tool": tool, "command": " ".join([tool] + argv[1:]) if argv else None, "note": note})
    if changes and argv is None and params["initramfs"] == "auto":
        result["warnings"].append(note)
    result["plan"] = [c.describe() for c in changes] + ([result["initramfs"]["command"]] if argv else [])
    result["diff"] = managed_files.diff_entries(changes)
    result["changed"] = bool(changes)
    result["changes"] = change_records(changes, before_options, options)

    since_boot = written_since_boot(path, paths.proc, bool(changes) and content is not None)
    overridden_names = set(item["param"] for item in result["cmdline_overrides"])
    pending, unverified = compare(options, running, since_boot, removed if changes else {}, overridden_names)
    if blocked and pending:
        result["warnings"].append("the nvidia driver does not load through modprobe here (%s), so no reboot applies "
                                  "these options; not reported as pending: %s"
                                  % (", ".join("%s: %r" % (b["path"], b["rule"]) for b in blocked), "; ".join(pending)))
        pending = []
    result["pending"] = pending
    result["unverified"] = unverified
    result["reboot_required"] = bool(pending)
    if driver["loaded"] and running is not None:
        for name in unverified:
            if name in unknown:
                continue
            result["warnings"].append("%s is not reported by the running driver in /proc/driver/nvidia/params: its "
                                      "running value cannot be checked (a string option the driver does not print, "
                                      "or an option of another driver version)" % name)

    if check_mode or not changes:
        return result

    tx = Transaction()
    try:
        managed_files.apply(changes, tx)
    except (OSError, IOError) as exc:
        action = "remove" if content is None else "write"
        err = tx.abort("failed to %s %s: %s" % (action, path, fileops.describe(exc)))
        raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[]))
    try:
        problem = None if fileops.read_text(path) == content else "%s does not hold the new options after the write" % path
    except (OSError, IOError) as exc:
        problem = "%s cannot be read back after the write: %s" % (path, fileops.describe(exc))
    if problem:
        err = tx.abort(problem)
        raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[]))
    if argv:
        outcome = tools.run(argv)
        if not outcome.ok:
            err = tx.abort("rebuilding the initramfs failed, so %s was put back as it was: %s"
                           % (path, outcome.describe()))
            raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[], reboot_required=False,
                                                         pending=[]))
        result["initramfs"]["rebuilt"] = True
    return result
