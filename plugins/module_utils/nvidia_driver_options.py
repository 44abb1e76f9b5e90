# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA driver options (``NVreg_*``): a modprobe.d file of our own, the initramfs rebuilt
when it changes, and a comparison with the values the driver runs with.

The module gpufleet.tuning.nvidia_driver_options is a thin shell over ``run()``.

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
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_modules as km
from ansible_collections.gpufleet.tuning.plugins.module_utils import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.outcome import ModuleFailure

MODULE = "nvidia"
DEFAULT_FILENAME = "zz-gpufleet-nvidia.conf"
NAME_RE = re.compile(r"^NVreg_[A-Za-z0-9_]+\Z")
FILENAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.conf\Z")
UINT_MAX = 0xFFFFFFFF
HEADER = ("# Managed by Ansible (gpufleet.tuning.nvidia_driver_options): NVIDIA driver options.\n"
          "# They take effect when the nvidia module next loads (a reboot); local edits are overwritten.\n")
# Module parameter -> the name /proc/driver/nvidia/params prints, where the driver renames it
# (nv-reg.h, NV_DEFINE_PARAMS_TABLE_ENTRY_CUSTOM_NAME).
SHOWN_AS = {"NVreg_RestrictProfilingToAdminUsers": "NVreg_RmProfilingAdminOnly"}
# Tools in the order ``auto`` tries them, with the arguments that rebuild the image of the
# kernel that boots next: update-initramfs -u takes the newest installed kernel, dracut --force
# the running one.
INITRAMFS_TOOLS = (("update-initramfs", ["-u"]), ("dracut", ["--force"]))


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
    ("NVreg_RmNvlinkBandwidth", lambda v: str(v).strip().upper() not in ("", "FULL"),
     "it caps NVLink peer-to-peer bandwidth to save power (OFF is 0%, MIN 15-25%, HALF 50%)"),
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
)


class OptionsError(ModuleFailure):
    """A failure of this module, with what was learnt so far (see outcome.ModuleFailure)."""


class Paths(object):
    """Where the module looks; everything hangs off ``root`` so tests use a temp tree."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.sys = os.path.join(root, "sys")
        self.modprobe_d = os.path.join(root, "etc", "modprobe.d")


def validate(params):
    """Check every input before anything is read; return ``{name: value as written}``."""
    filename = params.get("filename")
    if not isinstance(filename, str) or not FILENAME_RE.match(filename):
        raise OptionsError("filename %r is not valid: a file name (no directory) of letters, digits, '.', '_' "
                           "and '-' ending in .conf (modprobe reads no other files)" % (filename,))
    options = params.get("options") or {}
    if not isinstance(options, dict):
        raise OptionsError("options must be a dict of NVreg_Name: value, got %s" % type(options).__name__)
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
        if value is None or isinstance(value, float):
            errors.append("%s=%r is not valid: give an integer, a boolean or a string" % (name, value))
            continue
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= UINT_MAX:
            errors.append("%s=%r is not valid: the driver's numeric options are unsigned 32-bit "
                          "(0 to %d)" % (name, value, UINT_MAX))
            continue
        try:
            written[name] = km.format_value(value)
        except km.OptionError as exc:
            errors.append("%s=%r is not valid: %s" % (name, value, exc))
    if errors:
        raise OptionsError("invalid options, nothing was changed: " + "; ".join(errors))
    return written


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


def compare(configured, running, since_boot, removed):
    """Return ``(pending, unverified)`` for the configured options against the running values.

    ``running`` is None when the driver's params cannot be read. ``removed`` holds options our
    file set before this run and no longer sets.
    """
    pending = []
    unverified = []
    for name in sorted(configured):
        value = nvidia_driver.unquote(configured[name])
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


def choose_initramfs(choice, commands):
    """``(tool, argv or None, note)`` for the ``initramfs`` option; raises for a named tool that
    is not installed."""
    if choice == "none":
        return None, None, "initramfs=none: not rebuilt"
    for tool, args in INITRAMFS_TOOLS:
        if choice not in ("auto", tool):
            continue
        path = commands.which(tool) if commands is not None else None
        if path:
            return tool, [path] + list(args), "found %s" % path
        if choice == tool:
            raise OptionsError("initramfs=%s but %s is not installed (not found on PATH or in /sbin, /usr/sbin); "
                               "nothing was changed" % (tool, tool))
    return None, None, ("neither update-initramfs nor dracut is installed: the initramfs (if any) is not "
                        "rebuilt, so the options apply only where the driver loads from the root filesystem")


def run(params, check_mode=False, paths=None, commands=None):
    """Manage the options file; return the result dict or raise OptionsError."""
    paths = paths or Paths()
    options = validate(params)
    risky = risky_findings(options)
    if risky and not params.get("allow_risky"):
        raise OptionsError("refusing risky NVIDIA driver options (set allow_risky=true to apply them anyway); "
                           "nothing was changed: " + "; ".join(risky), {"risky": risky})
    path = os.path.join(paths.modprobe_d, params["filename"])
    content = render(options)
    driver = nvidia_driver.state(paths.proc, paths.sys)
    running = nvidia_driver.running_params(paths.proc)
    before_text = fileops.read_text(path)
    before_options = dict((name, value) for name, value in km.parse_options(before_text or "", MODULE))
    removed = dict((k, v) for k, v in before_options.items() if k not in options)
    result = {
        "changed": False,
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
        "initramfs": {"tool": None, "command": None, "rebuilt": False, "note": ""},
        "plan": [],
        "container": container_mod.detect(proc_root=paths.proc, root=paths.root),
        "diff": [],
        "warnings": [],
    }
    if result["container"]["detected"]:
        result["warnings"].append("this runs inside a container (%s): the file is written here, but the NVIDIA "
                                  "driver and its options belong to the host" % result["container"]["kind"])

    if options:
        def same(ours, theirs):
            return nvidia_driver.same_value(nvidia_driver.unquote(ours), "" if theirs is None else theirs)
        overriding, overridden = km.option_conflicts(MODULE, path, options, paths.root, same)
        result["conflicts"] = overridden
        for item in overridden:
            result["warnings"].append("%s also sets %s=%s; %s is read after it and wins"
                                      % (item["path"], item["param"], item["value"], path))
        if overriding:
            raise OptionsError(
                "nothing was changed: %s; modprobe applies the file read last, so these options would not take "
                "effect: remove them there, or choose a filename that sorts after it"
                % "; ".join("%s sets %s=%s and is read after %s" % (i["path"], i["param"], i["value"], path)
                            for i in overriding), dict(result, conflicts=overriding + overridden))

    changes = managed_files.plan([managed_files.Wanted(path, content)])
    tool, argv, note = choose_initramfs(params["initramfs"], commands) if changes else (None, None, "file unchanged")
    result["initramfs"].update({"tool": tool, "command": " ".join([tool] + argv[1:]) if argv else None, "note": note})
    if changes and argv is None and params["initramfs"] == "auto":
        result["warnings"].append(note)
    result["plan"] = [c.describe() for c in changes] + ([result["initramfs"]["command"]] if argv else [])
    result["diff"] = managed_files.diff_entries(changes)
    result["changed"] = bool(changes)

    since_boot = written_since_boot(path, paths.proc, bool(changes) and content is not None)
    pending, unverified = compare(options, running, since_boot, removed if changes else {})
    result["pending"] = pending
    result["unverified"] = unverified
    result["reboot_required"] = bool(pending)
    if driver["loaded"] and running is not None:
        for name in unverified:
            result["warnings"].append("%s is not reported by the running driver in /proc/driver/nvidia/params: its "
                                      "running value cannot be checked (a string option the driver does not print, "
                                      "an option of another driver version, or a misspelt name; names are "
                                      "case-sensitive)" % name)

    if check_mode or not changes:
        return result

    tx = Transaction()
    try:
        managed_files.apply(changes, tx)
    except (OSError, IOError) as exc:
        err = tx.abort("failed to write %s: %s" % (path, exc))
        raise OptionsError(err.full_message(), dict(result, changed=False))
    if fileops.read_text(path) != content:
        err = tx.abort("%s does not hold the new options after the write" % path)
        raise OptionsError(err.full_message(), dict(result, changed=False))
    if argv:
        outcome = commands.run(argv)
        if not outcome.ok:
            err = tx.abort("rebuilding the initramfs failed, so %s was put back as it was: %s"
                           % (path, outcome.describe()))
            raise OptionsError(err.full_message(), dict(result, changed=False, reboot_required=False, pending=[]))
        result["initramfs"]["rebuilt"] = True
    return result
