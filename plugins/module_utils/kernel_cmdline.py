# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel command line of the next boot: find where it is configured, edit it, refresh.

The module gpufleet.tuning.kernel_cmdline is a thin shell over ``ARGUMENT_SPEC`` and ``run()``.
It follows the collection's contract: validate, read, plan, stop there in check mode, check
that no other writer changed the files since they were read, write them atomically inside a
Transaction (``fileops.replace``: a restore puts back bytes, mode and owner, and a symlinked
file stays a link with its target edited), read back, run the boot loader's refresh command;
any failure puts the files back.

Which file the next boot reads is decided from how this node boots, not from which files
exist (a Proxmox VE install on ZFS always has /etc/kernel/cmdline, used or not):

- proxmox-boot-tool (proxmox-kernel-helper; read in src/bin/proxmox-boot-tool and
  src/proxmox-boot/zz-proxmox-boot, versions 8.1.0 and 9.2.0) lists the ESPs it keeps in sync
  in /etc/kernel/proxmox-boot-uuids, one vfat UUID (``XXXX-XXXX``) per line and nothing else:
  the file does not record the boot loader. ``refresh`` decides per ESP: GRUB when the ESP
  holds EFI/proxmox/grubx64.efi (set up with ``init <partition> grub``, which Secure Boot
  installs use: shim then GRUB), else systemd-boot when the node booted in UEFI mode
  (``[ -d /sys/firmware/efi ]``), else GRUB (legacy BIOS). systemd-boot entries take their
  ``options`` from the first line of /etc/kernel/cmdline; GRUB is refreshed by running
  ``update-grub`` with the ESP mounted on /boot, so it reads /etc/default/grub.
- The ESPs are not mounted here, so the evidence read instead is: /sys/firmware/efi (UEFI or
  legacy BIOS: legacy always means GRUB), the LoaderInfo EFI variable, which systemd-boot
  sets at every boot (``systemd-boot 257.x``: this boot came through systemd-boot; absent
  while other EFI variables are readable: it did not), and the SecureBoot EFI variable
  (4 attribute bytes, then 1 data byte; on: Proxmox boots through shim and GRUB). With no
  readable EFI variables on a UEFI node, proxmox-boot-tool's own default, systemd-boot, is
  assumed and the reason says so.

The result reports ``bootloader``, ``boot_mode`` (uefi/legacy), ``secure_boot`` (true, false,
null when unknown) and ``bootloader_reason``. A forced ``bootloader`` that contradicts that
evidence fails with the reason: editing a file the boot does not read would report a reboot
that never applies the change (a reboot loop with gpufleet_reboot_ok).

The boot loaders:

- Proxmox systemd-boot: /etc/kernel/cmdline, then ``proxmox-boot-tool refresh``.
- GRUB: /etc/default/grub (and its grub.d overrides, see grub_config). Refreshed with
  ``proxmox-boot-tool refresh`` when that tool manages the ESPs, else ``update-grub``, else
  ``grub-mkconfig -o /boot/grub/grub.cfg``.

``changes`` (records.py) holds a file record per configuration file written (a digest, never
the text) and a value record per managed argument key whose configured arguments change
(``iommu``: ``iommu=soft`` -> ``iommu=pt``; None where the key is not set), so a reader or a
later revert knows which argument went from what to what. The refresh command is an action,
not state: ``refresh_command`` reports it and it has no record.

A reboot is required while the configured line (of the file the boot uses) and the running
one (/proc/cmdline) disagree on a managed argument; only managed arguments are compared, as
GRUB adds BOOT_IMAGE= and root= to the running line.

The whole configured line must fit the kernel's COMMAND_LINE_SIZE (2048 bytes with its
terminating NUL on x86, arch/x86/include/asm/setup.h; 4096 on arm64,
arch/arm64/include/uapi/asm/setup.h; 2048 assumed elsewhere), less what the boot loader adds
(BOOT_IMAGE=, root=, ro, initrd=): the larger of 256 bytes and what those arguments take in
the running /proc/cmdline is kept free. A change that would make the line longer than that
is refused; the kernel would silently cut the end off.

Arguments known to be harmful on the GPUs present are refused (or, on request, skipped):
forcing identity (passthrough) IOMMU domains on NVIDIA Blackwell GPUs was seen to break the
GPU's firmware boot (FSP) until the next reboot (hardware-facts: kernel command line).
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec as argspec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import grub_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import kernel_args
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_gpus
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

AREA = "kernel_cmdline"

# The module's argument spec: the module passes it to AnsibleModule, validate() reads the
# allowed values from it, and the tests compare it with the module's DOCUMENTATION.
ARGUMENT_SPEC = dict(
    present=dict(type="list", elements="str", default=[]),
    absent=dict(type="list", elements="str", default=[]),
    present_by_cpu_vendor=dict(type="dict", default={}),
    bootloader=dict(type="str", default="auto", choices=["auto", "grub", "systemd-boot"]),
    on_harmful=dict(type="str", default="fail", choices=["fail", "skip"]),
    force=dict(type="bool", default=False),
)
HARMFUL_WHY = ("forcing identity (passthrough) IOMMU domains was seen to break the firmware boot "
               "(FSP) of NVIDIA Blackwell GPUs until the next reboot")

# EFI variables (efivarfs names): the global one the firmware sets, and systemd's Boot Loader
# Interface one that systemd-boot sets at every boot.
SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-e0ac9bb2f2e3"
LOADER_INFO_VAR = "LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

# COMMAND_LINE_SIZE by machine (os.uname): the buffer the kernel copies the line into,
# terminating NUL included. x86: arch/x86/include/asm/setup.h; arm64:
# arch/arm64/include/uapi/asm/setup.h. Other machines get the smaller, x86 value.
COMMAND_LINE_SIZES = {
    "x86_64": 2048, "amd64": 2048, "i386": 2048, "i486": 2048, "i586": 2048, "i686": 2048,
    "aarch64": 4096, "arm64": 4096,
}
DEFAULT_COMMAND_LINE_SIZE = 2048
# Kept free for what the boot loader puts before the configured arguments.
LOADER_RESERVE = 256
LOADER_KEYS = frozenset(["BOOT_IMAGE", "initrd", "root", "ro", "rw"])

_ESP_UUID_RE = re.compile(r"[0-9a-fA-F]{4}-[0-9a-fA-F]{4}")


def with_defaults(params):
    """``params`` with every option it leaves out at its ARGUMENT_SPEC default."""
    return argspec.with_defaults(ARGUMENT_SPEC, params)


class Paths:
    """Where the engine reads and writes; everything hangs off ``root`` so tests use a temp tree."""

    def __init__(self, root="/"):
        self.root = root
        self.etc = os.path.join(root, "etc")
        self.proc = os.path.join(root, "proc")
        self.sys = os.path.join(root, "sys")

    @property
    def kernel_cmdline(self):
        return os.path.join(self.etc, "kernel", "cmdline")

    @property
    def boot_uuids(self):
        return os.path.join(self.etc, "kernel", "proxmox-boot-uuids")

    @property
    def grub(self):
        return os.path.join(self.etc, "default", "grub")

    @property
    def efi(self):
        return os.path.join(self.sys, "firmware", "efi")

    @property
    def efivars(self):
        return os.path.join(self.efi, "efivars")


def validate(params):
    """Check every input before anything is read; return the present_by_cpu_vendor map."""
    errors = []
    if params.get("bootloader") not in ARGUMENT_SPEC["bootloader"]["choices"]:
        errors.append("bootloader %r is not valid: use one of %s"
                      % (params.get("bootloader"), ", ".join(ARGUMENT_SPEC["bootloader"]["choices"])))
    if params.get("on_harmful") not in ARGUMENT_SPEC["on_harmful"]["choices"]:
        errors.append("on_harmful %r is not valid: use %s"
                      % (params.get("on_harmful"), " or ".join(ARGUMENT_SPEC["on_harmful"]["choices"])))
    for name in ("present", "absent"):
        value = params.get(name) or []
        if not isinstance(value, list):
            errors.append("%s must be a list of arguments, got %s" % (name, type(value).__name__))
    by_vendor = params.get("present_by_cpu_vendor") or {}
    if not isinstance(by_vendor, dict):
        errors.append("present_by_cpu_vendor must be a dict of CPU vendor id to a list of arguments")
        by_vendor = {}
    for vendor in sorted(by_vendor, key=str):
        items = by_vendor[vendor]
        if not isinstance(items, list):
            errors.append("present_by_cpu_vendor[%s] must be a list of arguments, got %s"
                          % (vendor, type(items).__name__))
            continue
        try:
            kernel_args.parse_wanted_lists(items, [])
        except kernel_args.ArgError as exc:
            errors.append("present_by_cpu_vendor[%s]: %s" % (vendor, exc))
    if errors:
        raise ModuleFailure("invalid arguments, nothing was changed: " + "; ".join(errors))
    try:
        kernel_args.parse_wanted_lists(params.get("present") or [], params.get("absent") or [])
    except kernel_args.ArgError as exc:
        raise ModuleFailure("invalid arguments, nothing was changed: %s" % exc)
    return by_vendor


def cpu_vendor(proc_root="/proc"):
    """The ``vendor_id`` of /proc/cpuinfo (AuthenticAMD, GenuineIntel), or None.

    /proc/cpuinfo is the kernel's: read leniently, never a reason to fail.
    """
    text = fileops.read_quiet(os.path.join(proc_root, "cpuinfo")) or ""
    for line in text.splitlines():
        if line.startswith("vendor_id") and ":" in line:
            return line.split(":", 1)[1].strip() or None
    return None


def running_cmdline(proc_root="/proc"):
    """/proc/cmdline, stripped, or None when it cannot be read (leniently decoded)."""
    text = fileops.read_quiet(os.path.join(proc_root, "cmdline"))
    return text.strip() if text is not None else None


def wanted_args(params, by_vendor, vendor):
    """The present and absent Args: ``present`` plus this CPU vendor's extras (present wins)."""
    present = list(params.get("present") or [])
    keys = set()
    for text in present:
        keys.add(kernel_args.Arg(text).key)
    for text in by_vendor.get(vendor, []) if vendor else []:
        if kernel_args.Arg(text).key not in keys:
            present.append(text)
    return kernel_args.parse_wanted_lists(present, params.get("absent") or [])


def screen_harmful(present, gpus, params):
    """Apply the harmful-argument rule; return (present to apply, skipped {arg: reason}, warnings)."""
    blackwell = [g for g in gpus if g["architecture"] == "blackwell"]
    keep, skipped, warnings, refused = [], {}, [], []
    for arg in present:
        if not blackwell or not kernel_args.forces_identity_iommu(arg):
            keep.append(arg)
            continue
        named = ", ".join(nvidia_gpus.describe(g) for g in blackwell)
        if params.get("force"):
            warnings.append("applying %s although %s on this host (force=true): %s" % (arg.raw, named, HARMFUL_WHY))
            keep.append(arg)
        elif params.get("on_harmful") == "skip":
            skipped[arg.raw] = "refused on NVIDIA Blackwell GPU %s: %s; force=true applies it anyway" % (named, HARMFUL_WHY)
        else:
            refused.append("%s on NVIDIA Blackwell GPU %s" % (arg.raw, named))
    if refused:
        raise ModuleFailure("refusing %s: %s. Nothing was changed; set force=true to apply it anyway, or "
                            "on_harmful=skip to leave it out" % ("; ".join(refused), HARMFUL_WHY),
                            {"gpus": gpus})
    return keep, skipped, warnings


def _harmful_left(tokens, gpus, where):
    """Warnings for identity-domain arguments already in a line on a Blackwell host."""
    blackwell = [g for g in gpus if g["architecture"] == "blackwell"]
    if not blackwell:
        return []
    out = []
    for tok in kernel_args.kernel_part(tokens):
        if kernel_args.forces_identity_iommu(kernel_args.Arg(tok)):
            out.append("%s holds %s while NVIDIA Blackwell GPU %s is present: %s"
                       % (where, tok, ", ".join(nvidia_gpus.describe(g) for g in blackwell), HARMFUL_WHY))
    return out


# --- how this node boots --------------------------------------------------------------------

def _efi_variable(paths, name):
    """The data of an EFI variable (efivarfs: 4 attribute bytes, then the data), or None.

    Firmware-provided: any read error, or a file too short to hold data, means "not known".
    """
    try:
        data = fileops.read_bytes(os.path.join(paths.efivars, name))
    except (OSError, IOError):
        data = None
    if data is not None and len(data) > 4:
        return data[4:]
    return None


def _efivars_readable(paths):
    """True when efivarfs is mounted and lists variables (an unmounted one is an empty dir)."""
    try:
        return bool(os.listdir(paths.efivars))
    except OSError:
        return False


def boot_facts(paths):
    """(boot_mode, secure_boot, loader_info, efivars readable) of the running boot."""
    if not os.path.isdir(paths.efi):
        return "legacy", None, None, False
    secure = _efi_variable(paths, SECURE_BOOT_VAR)
    secure_boot = None
    if secure is not None and secure[:1] in (b"\x00", b"\x01"):
        secure_boot = secure[:1] == b"\x01"
    info = _efi_variable(paths, LOADER_INFO_VAR)
    loader = None
    if info is not None:
        loader = info.decode("utf-16-le", "replace").split("\0")[0].strip() or None
    return "uefi", secure_boot, loader, _efivars_readable(paths)


def esp_uuids(paths):
    """The ESPs proxmox-boot-tool keeps in sync: the lines of proxmox-boot-uuids that look like a
    vfat UUID, as the tool itself checks them (other lines it skips with a warning)."""
    try:
        data = fileops.read_bytes(paths.boot_uuids)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read the ESPs proxmox-boot-tool keeps in sync: %s; nothing was changed"
                            % fileops.describe(exc))
    text = (data or b"").decode("utf-8", "replace")
    return [line.strip() for line in text.splitlines() if _ESP_UUID_RE.search(line)]


class Boot:
    """What was decided: ``bootloader`` (grub, systemd-boot or None), why, and the facts."""

    def __init__(self, bootloader, reason, pbt_managed, boot_mode, secure_boot, skip_msg=None):
        self.bootloader = bootloader
        self.reason = reason
        self.pbt_managed = pbt_managed
        self.boot_mode = boot_mode
        self.secure_boot = secure_boot
        self.skip_msg = skip_msg

    def facts(self):
        return {"bootloader": self.bootloader, "boot_mode": self.boot_mode, "secure_boot": self.secure_boot,
                "bootloader_reason": self.reason}


def _evidence(paths, mode, secure_boot, loader, readable):
    """What the running boot says: ("systemd-boot" | "grub" | None, why).

    "grub" stands for "not systemd-boot" (legacy BIOS, Secure Boot, another loader named in
    LoaderInfo): /etc/kernel/cmdline is then not what the next boot reads.
    """
    if mode == "legacy":
        return "grub", "legacy BIOS boot (%s does not exist), and systemd-boot needs UEFI" % paths.efi
    if loader is not None:
        if loader.lower().startswith("systemd-boot"):
            return "systemd-boot", "UEFI boot through %s (the LoaderInfo EFI variable)" % loader
        return "grub", "UEFI boot through %s (the LoaderInfo EFI variable), not systemd-boot" % loader
    if secure_boot:
        return "grub", ("UEFI boot with Secure Boot on (%s): Proxmox boots such nodes through shim and GRUB "
                        "(proxmox-boot-tool init <partition> grub), as its systemd-boot is not signed for the "
                        "firmware's keys" % SECURE_BOOT_VAR)
    if readable:
        return "grub", ("UEFI boot without the LoaderInfo EFI variable, which systemd-boot sets at every boot: this "
                        "boot did not come through systemd-boot")
    return None, ("UEFI boot, but no EFI variable is readable (%s), so the boot loader and Secure Boot state are "
                  "unknown" % paths.efivars)


def detect(params, paths, tools):
    """Decide which configuration the next boot reads; return a Boot. ModuleFailure for a
    forced choice that this node's boot contradicts, or a boot this module cannot serve."""
    choice = params.get("bootloader", "auto")
    mode, secure_boot, loader, readable = boot_facts(paths)
    tool = tools.which("proxmox-boot-tool")
    esps = esp_uuids(paths) if tool else []
    pbt_managed = bool(tool) and bool(esps)
    evidence, why = _evidence(paths, mode, secure_boot, loader, readable)
    # lexists: a directory or a dangling link where the file should be is reported by load()
    has_grub = os.path.lexists(paths.grub)
    has_cmdline = os.path.lexists(paths.kernel_cmdline)
    if pbt_managed:
        pbt = "proxmox-boot-tool keeps ESP %s in sync (%s)" % (", ".join(esps), paths.boot_uuids)
    elif tool:
        pbt = "proxmox-boot-tool is installed but %s lists no ESP" % paths.boot_uuids
    else:
        pbt = "proxmox-boot-tool is not installed"

    def boot(bootloader, reason, skip_msg=None):
        return Boot(bootloader, reason, pbt_managed, mode, secure_boot, skip_msg)

    def refuse(message):
        raise ModuleFailure("%s; nothing was changed" % message, boot(None, why).facts())

    if choice == "systemd-boot":
        if not has_cmdline:
            refuse("bootloader=systemd-boot but %s does not exist" % paths.kernel_cmdline)
        if evidence == "grub":
            refuse("bootloader=systemd-boot, but this node does not boot through systemd-boot: %s; %s would never "
                   "reach a boot entry (use bootloader=grub or auto)" % (why, paths.kernel_cmdline))
        if not pbt_managed:
            refuse("bootloader=systemd-boot needs proxmox-boot-tool to write %s into the ESPs' boot entries, but %s"
                   % (paths.kernel_cmdline, pbt))
        return boot("systemd-boot", "bootloader=systemd-boot was asked for; %s; %s" % (why, pbt))
    if choice == "grub":
        if not has_grub:
            refuse("bootloader=grub but %s does not exist" % paths.grub)
        if evidence == "systemd-boot":
            refuse("bootloader=grub, but this node boots through systemd-boot: %s; %s would never reach a boot "
                   "entry (use bootloader=systemd-boot or auto)" % (why, paths.grub))
        return boot("grub", "bootloader=grub was asked for; %s; %s" % (why, pbt))

    if pbt_managed and has_cmdline:
        if evidence == "grub":
            return boot("grub", "%s; %s: it refreshes GRUB from %s, and %s is not used"
                        % (why, pbt, paths.grub, paths.kernel_cmdline))
        if evidence == "systemd-boot":
            return boot("systemd-boot", "%s; %s: it writes the first line of %s into the boot entries"
                        % (why, pbt, paths.kernel_cmdline))
        return boot("systemd-boot", "%s; %s: on UEFI it sets up systemd-boot unless the ESP holds GRUB "
                    "(EFI/proxmox/grubx64.efi, which is not visible without mounting it), so %s is assumed to be "
                    "what boots" % (why, pbt, paths.kernel_cmdline))
    if evidence == "systemd-boot":
        if pbt_managed:
            refuse("this node boots through systemd-boot and %s, but %s does not exist (proxmox-boot-tool then "
                   "copies the running /proc/cmdline): create it with the command line to boot with"
                   % (pbt, paths.kernel_cmdline))
        return boot(None, "%s; %s" % (why, pbt), skip_msg=(
            "this node boots through systemd-boot without proxmox-boot-tool (%s; %s): %s is not what it boots "
            "with, and systemd's kernel-install is not handled by this module; nothing to edit"
            % (why, pbt, paths.grub)))
    if has_grub:
        reason = "%s exists; %s; %s" % (paths.grub, why, pbt)
        if has_cmdline:
            reason += "; %s is not used" % paths.kernel_cmdline
        return boot("grub", reason)
    return boot(None, "%s; %s" % (why, pbt), skip_msg=(
        "no boot loader configuration found (neither %s nor a proxmox-boot-tool managed %s): nothing to edit "
        "on this machine (a container's command line is its host's)" % (paths.grub, paths.kernel_cmdline)))


def refresh_command(bootloader, pbt_managed, tools):
    """The argv that makes the boot loader use the edited file; ModuleFailure when absent."""
    if bootloader == "systemd-boot" or pbt_managed:
        path = tools.which("proxmox-boot-tool")
        if not path:
            raise ModuleFailure("proxmox-boot-tool was not found on PATH: it is needed to write the "
                                "command line into the ESPs; nothing was changed")
        return [path, "refresh"]
    path = tools.which("update-grub")
    if path:
        return [path]
    path = tools.which("grub-mkconfig")
    if path:
        return [path, "-o", "/boot/grub/grub.cfg"]
    raise ModuleFailure("neither update-grub nor grub-mkconfig was found on PATH: GRUB would not pick up "
                        "the change; nothing was changed")


# --- the line: length and safety -------------------------------------------------------------

def command_line_size(machine):
    """COMMAND_LINE_SIZE of ``machine`` (os.uname().machine), terminating NUL included."""
    return COMMAND_LINE_SIZES.get(machine, DEFAULT_COMMAND_LINE_SIZE)


def loader_reserve(running, configured_tokens):
    """Bytes kept free for the boot loader's own arguments: the larger of LOADER_RESERVE and
    what BOOT_IMAGE=, initrd=, root=, ro and rw take in the running line beyond the config."""
    configured = set(configured_tokens)
    used = 0
    for tok in kernel_args.split(running or ""):
        if kernel_args.Arg(tok).key in LOADER_KEYS and tok not in configured:
            used += len(tok.encode("utf-8", "surrogateescape")) + 1
    return max(LOADER_RESERVE, used)


def check_length(before, after, running, machine):
    """ModuleFailure when ``after`` grows the configured line past what the kernel keeps."""
    size = command_line_size(machine)
    length = len(after.encode("utf-8", "surrogateescape"))
    if length <= len(before.encode("utf-8", "surrogateescape")):
        return  # a change that does not lengthen the line is never refused
    reserve = loader_reserve(running, kernel_args.split(before))
    if length + reserve > size - 1:
        raise ModuleFailure(
            "the configured command line would be %d bytes long; with %d bytes kept free for what the boot loader "
            "adds (BOOT_IMAGE=, root=, ro, initrd=) that is %d, over the %d bytes the %s kernel keeps "
            "(COMMAND_LINE_SIZE %d, with its terminating NUL): the end of the line would be cut off at boot. "
            "Nothing was changed; drop arguments first"
            % (length, reserve, length + reserve, size - 1, machine or "this", size))


def _normal(line):
    """A command line with its whitespace folded, as the kernel splits it."""
    return " ".join(kernel_args.split(line or ""))


_ASCII_SPACE_RE = re.compile(r"[ \t\n\r\v\f]+")


def _unsafe(before_raw, after_raw, after_tokens, grub, where):
    """Lines naming what in a configured line would change how its arguments are read.

    ``after_tokens`` are the arguments the line will hold (an argument that is being removed
    is no reason to refuse); ``after_raw`` the line as the boot loader will read it. Looked
    for: control characters, non-ASCII characters (named as written in ``before_raw``, with
    the word that holds them), and the arguments kernel_args.hazard() finds.
    """
    out = []
    for char in sorted(set(ch for ch in after_raw if (ord(ch) < 32 and ch not in " \t") or ord(ch) == 127)):
        out.append("the line holds the control character %r%s" % (
            char, ": GRUB runs what follows a newline as a command" if char == "\n" and grub else
            ": the kernel reads it as whitespace" if char in "\r\v\f" else ""))
    kept = set(after_tokens)
    for word in _ASCII_SPACE_RE.split(before_raw):
        odd = [ch for ch in word if ord(ch) > 126]
        if odd and all(tok in kept for tok in kernel_args.split(word)):
            found = where(word)
            out.append("%r holds %r (U+%04X), which is not ASCII: the kernel splits arguments on byte 0xA0 "
                       "(non-breaking space, and the second byte of characters such as U+00E0), so it does not "
                       "read this argument as the file shows it%s"
                       % (word, odd[0], ord(odd[0]), " (%s)" % found if found else ""))
    for tok in after_tokens:
        if any(ord(ch) > 126 for ch in tok):
            continue  # named above, with the character as written (split cuts it at byte 0xA0)
        why = kernel_args.hazard(tok, grub=grub)
        if why:
            found = where(tok)
            out.append("%r %s%s" % (tok, why, " (%s)" % found if found else ""))
    return out


def _check_encodable(files):
    """Refuse text that would not be written back as valid UTF-8 (a character the byte split
    cut in two); unsafe() names the cause first, this is the last guard."""
    for path, text in sorted(files.items()):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ModuleFailure("the new text of %s would not be valid UTF-8 (offset %d); nothing was changed"
                                % (path, exc.start))


class _Grub:
    """GRUB: bases of GRUB_CMDLINE_LINUX and _DEFAULT edited, later layers read."""

    grub = True

    def __init__(self, paths):
        self.paths = paths
        self.config = grub_config.GrubConfig(paths.etc)

    def load(self):
        try:
            self.config.load(fileops.read_text)
        except grub_config.GrubError as exc:
            raise ModuleFailure("cannot read the GRUB configuration: %s; nothing was changed" % exc)
        except (OSError, IOError) as exc:
            raise ModuleFailure("cannot read the GRUB configuration: %s; nothing was changed"
                                % fileops.describe(exc))
        return self

    @property
    def config_path(self):
        base = self.config.base(grub_config.DEFAULT)
        return base.path if base is not None and base.literal else self.config.main_path

    @property
    def texts(self):
        return dict(self.config.texts)

    def effective(self):
        line, notes = self.config.effective_line()
        return _normal(line), notes + list(self.config.problems)

    def unsafe(self, after_tokens=None, after_raw=None):
        """What in the configured line (by default as it is) would change how arguments added
        to it are read."""
        raw, _notes = self.config.effective_line()

        def where(tok):
            for assign in self.config.assignments:
                text = assign.literal_text()
                if tok in kernel_args.split(text) or tok in _ASCII_SPACE_RE.split(text):
                    return assign.where()
            return None
        if after_tokens is None:
            after_tokens, after_raw = kernel_args.split(raw), raw
        return _unsafe(raw, after_raw, after_tokens, True, where)

    def changed_since_load(self):
        """The files that differ now from what the plan was made from (or appeared, or vanished)."""
        now = [self.config.main_path] + self.config.dropin_paths()
        changed = []
        for path in sorted(set(now) | set(self.config.order)):
            if path not in self.config.texts or path not in now:
                changed.append(path)
            elif fileops.read_bytes(path) != self.config.texts[path].encode("utf-8"):
                changed.append(path)
        return changed

    def reload(self):
        return _Grub(self.paths).load()

    def plan(self, present, absent):
        """Return ({path: new text}, effective line after)."""
        bases = [self.config.base(name) for name in grub_config.VARIABLES]
        segments, read_only = [], []
        for index, base in enumerate(bases):
            if base is None or base.literal:
                segments.append(kernel_args.split(base.literal_text()) if base is not None else [])
            else:
                segments.append(kernel_args.split(base.literal_text()))
                read_only.append(index)
        layered = []
        for assign in self.config.layers(grub_config.LINUX) + self.config.layers(grub_config.DEFAULT):
            layered.extend(kernel_args.split(assign.literal_text()))
        segments.append(layered)
        read_only.append(len(segments) - 1)
        new = kernel_args.plan(segments, present, absent, primary=1, read_only=read_only)
        if 1 in read_only and new[1] != segments[1]:
            raise ModuleFailure("cannot edit GRUB_CMDLINE_LINUX_DEFAULT at %s: its value uses shell expansions; "
                                "edit it by hand; nothing was changed" % bases[1].where())
        new_values = {}
        for index, name in enumerate(grub_config.VARIABLES):
            if index not in read_only and new[index] != segments[index]:
                new_values[name] = " ".join(new[index])
        files = self.config.render(new_values) if new_values else {}
        files = dict((p, t) for p, t in files.items() if t != self.config.texts.get(p))
        after_config = self.config.with_changes(files)
        after_line = _normal(after_config.effective_line()[0])
        if files:
            if self.config.problems:
                raise ModuleFailure("cannot edit the GRUB configuration safely: %s. An edit could be overridden "
                                    "there without anyone noticing; edit it by hand; nothing was changed"
                                    % "; ".join(self.config.problems))
            unsafe = self.unsafe([tok for seg in new for tok in seg], after_config.effective_line()[0])
            if unsafe:
                raise ModuleFailure("cannot add to the GRUB command line safely: %s. Fix it by hand first; "
                                    "nothing was changed" % "; ".join(unsafe))
            _check_encodable(files)
        problems = kernel_args.unsatisfied(kernel_args.split(after_line), present, absent)
        if problems:
            sources = [a.where() for a in self.config.read_only()]
            if bases[0] is not None:
                sources.insert(0, "GRUB_CMDLINE_LINUX at %s" % bases[0].where())
            raise ModuleFailure("the effective GRUB command line would still be wrong for %s after editing %s: "
                                "the conflicting arguments come from assignments this module does not rewrite "
                                "(%s); nothing was changed" % (
                                    ", ".join(kernel_args.describe(p, "effective") for p in problems),
                                    self.config_path, ", ".join(sources) or "none found"))
        return files, after_line


class _SystemdBoot:
    """Proxmox systemd-boot: the first line of /etc/kernel/cmdline is the command line."""

    grub = False

    def __init__(self, paths):
        self.paths = paths
        self.path = paths.kernel_cmdline
        self.text = None

    def load(self):
        try:
            self.text = fileops.read_text(self.path)
        except (OSError, IOError) as exc:
            raise ModuleFailure("cannot read %s; nothing was changed" % fileops.describe(exc))
        if self.text is None:
            raise ModuleFailure("%s does not exist; nothing was changed" % self.path)
        return self

    @property
    def config_path(self):
        return self.path

    @property
    def texts(self):
        return {self.path: self.text}

    def effective(self):
        return _normal(self.text.partition("\n")[0]), []

    def unsafe(self, after_tokens=None, after_raw=None):
        first = self.text.partition("\n")[0]
        if after_tokens is None:
            after_tokens, after_raw = kernel_args.split(first), first
        return _unsafe(first, after_raw, after_tokens, False, lambda tok: None)

    def changed_since_load(self):
        return [self.path] if fileops.read_bytes(self.path) != self.text.encode("utf-8") else []

    def reload(self):
        return _SystemdBoot(self.paths).load()

    def plan(self, present, absent):
        first, sep, rest = self.text.partition("\n")
        tokens = kernel_args.split(first)
        new = kernel_args.plan([tokens], present, absent, primary=0)[0]
        after = " ".join(new)
        if new == tokens:
            return {}, _normal(first)
        unsafe = self.unsafe(new, after)
        if unsafe:
            raise ModuleFailure("cannot add to the first line of %s safely: %s. Fix it by hand first; nothing was "
                                "changed" % (self.path, "; ".join(unsafe)))
        _check_encodable({self.path: after})
        if not any(kernel_args.Arg(tok).key == "root" for tok in kernel_args.kernel_part(new)):
            raise ModuleFailure("the first line of %s would have no root= argument: proxmox-boot-tool refresh refuses "
                                "such a line (and the kernel would not find its root file system); nothing was "
                                "changed" % self.path)
        return {self.path: after + (sep or "\n") + rest}, after


def run(params, check_mode=False, paths=None, tools=None, machine=None):
    """Ensure the arguments in the next boot's command line; return the module result.

    A ModuleFailure carries in ``partial`` what was learnt before the failure (GPUs, CPU
    vendor, running line, boot loader and why). ``machine`` (os.uname().machine by default)
    picks COMMAND_LINE_SIZE.
    """
    partial = {}
    try:
        return _run(with_defaults(params), check_mode, paths or Paths(), tools, machine or os.uname()[4], partial)
    except ModuleFailure as exc:
        for key, value in partial.items():
            exc.partial.setdefault(key, value)
        raise


def _run(params, check_mode, paths, tools, machine, partial):
    by_vendor = validate(params)
    vendor = cpu_vendor(paths.proc)
    try:
        present, absent = wanted_args(params, by_vendor, vendor)
    except kernel_args.ArgError as exc:
        raise ModuleFailure("invalid arguments, nothing was changed: %s" % exc)
    try:
        gpus = nvidia_gpus.list_gpus(paths.sys)
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot list the PCI devices: %s; nothing was changed" % fileops.describe(exc))
    partial.update({"gpus": gpus, "cpu_vendor": vendor})
    present, skipped, warnings = screen_harmful(present, gpus, params)
    running = running_cmdline(paths.proc)
    partial["running"] = running
    boot = detect(params, paths, tools)
    partial.update(boot.facts())
    if boot.bootloader is None:
        result = dict(partial)
        result.update({
            "changed": False, "changes": [], "skipped": True, "reboot_required": False, "pending": [], "diff": [],
            "skipped_keys": skipped, "config_path": None, "config_files": [], "cmdline_before": None,
            "cmdline_after": None, "grub_overrides": [], "refresh_command": None, "warnings": warnings,
            "msg": boot.skip_msg,
        })
        return result

    editor = (_Grub(paths) if boot.bootloader == "grub" else _SystemdBoot(paths)).load()
    before_line, notes = editor.effective()
    warnings.extend(notes)
    try:
        files, after_line = editor.plan(present, absent)
    except kernel_args.ArgError as exc:
        raise ModuleFailure("%s; nothing was changed" % exc)
    if files:
        check_length(before_line, after_line, running, machine)
    else:
        warnings.extend("the configured command line is not safe to add to: %s" % line for line in editor.unsafe())
    old_texts = editor.texts
    overrides = editor.config.overrides() if boot.bootloader == "grub" else []
    for path in sorted(files):
        if path in overrides:
            warnings.append("%s is edited: it is a grub.d file that sets the GRUB command line after "
                            "/etc/default/grub, so the change has to go there" % path)

    result = dict(partial)
    result.update({
        "changed": bool(files),
        "config_path": editor.config_path,
        "config_files": sorted(files),
        "cmdline_before": before_line,
        "cmdline_after": after_line,
        "grub_overrides": overrides,
        "skipped_keys": skipped,
        "refresh_command": None,
        "diff": [diffs.file_diff(path, old_texts[path], files[path]) for path in sorted(files)],
    })

    # Planned before anything is written (the modes are read now: fileops.replace keeps them),
    # reported only once the files are written, read back and refreshed (or in check mode).
    changes = change_records(old_texts, files, before_line, after_line, present + absent) if files else []
    if files:
        command = refresh_command(boot.bootloader, boot.pbt_managed, tools)
        result["refresh_command"] = command
        if not check_mode:
            _apply(files, command, tools, editor, present, absent, result)
    result["changes"] = changes

    # The reboot state compares the running line with the configured line of the file this
    # boot reads (after_line satisfies present/absent, or plan() would have failed).
    running_tokens = kernel_args.split(running) if running is not None else None
    if running_tokens is None:
        result["pending"] = []
        result["reboot_required"] = bool(files)
    else:
        problems = kernel_args.unsatisfied(running_tokens, present, absent)
        result["pending"] = [kernel_args.describe(p, "running") for p in problems]
        result["reboot_required"] = bool(problems)
    warnings.extend(_harmful_left([t for t in kernel_args.split(after_line)
                                   if not any(kernel_args.Arg(t).key == a.key for a in present)],
                                  gpus, "the configured command line"))
    if running_tokens is not None:
        warnings.extend(_harmful_left(running_tokens, gpus, "the running command line (/proc/cmdline)"))
    result["warnings"] = warnings
    return result


def change_records(old_texts, files, before_line, after_line, managed):
    """The change records of a plan (records.py): a file record per file written (digest and
    mode, never the text), then a value record per managed argument key whose configured
    arguments change, target the key as the kernel compares it (``intel_idle.max_cstate``).

    A value is the argument as configured (``iommu=pt``; a flag is ``quiet``), several of one
    key joined by a space in the order the kernel reads them (``kernel_args.split`` reads the
    value back), None when the key is not configured: what a revert has to put back. The
    refresh command (update-grub, proxmox-boot-tool refresh) is an action, not state: it has
    no record (``refresh_command`` reports it).
    """
    out = []
    for path in sorted(files):
        mode = _mode(path)
        out.append(records.file_change(AREA, path, old_texts[path], files[path], mode, mode))
    keys = [arg.key for arg in managed]
    out.extend(records.values(AREA, kernel_args.by_key(kernel_args.split(before_line), keys),
                              kernel_args.by_key(kernel_args.split(after_line), keys)))
    return out


def _mode(path):
    """Permission bits of ``path`` (a link's target), None when it cannot be read."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return None


class _Changed(Exception):
    """A file's bytes at write time were not those the plan was made from."""


def _changed_message(paths):
    return ("%s changed while this module was reading it; nothing was changed, run again"
            % " and ".join(paths))


def _apply(files, command, tools, editor, present, absent, result):
    """Check for other writers, write the files, read them back, refresh the boot loader;
    restore the files (bytes, mode, owner) on any failure.

    The read-back comes before the refresh, so the boot loader is only ever refreshed from
    files that are known to be right.
    """
    try:
        changed = editor.changed_since_load()
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read the configuration again before writing: %s; nothing was changed"
                            % fileops.describe(exc), result)
    if changed:
        raise ModuleFailure(_changed_message(changed), result)
    planned = dict((path, text.encode("utf-8")) for path, text in editor.texts.items())
    tx = Transaction()
    step = "write"
    try:
        for path in sorted(files):
            before = fileops.replace(tx, path, files[path])
            if before.data != planned.get(path):
                raise _Changed(path)
        step = "read back"
        got = dict((path, fileops.read_text(path)) for path in files)
        line, _notes = editor.reload().effective()
    except _Changed as exc:
        err = tx.abort(_changed_message([str(exc)]))
        if err.rollback_errors:
            raise ModuleFailure(err.full_message(), result)
        raise ModuleFailure(err.message, result)
    except (OSError, IOError) as exc:
        err = tx.abort("failed to %s %s" % (step, fileops.describe(exc)))
        raise ModuleFailure(err.full_message(), result)
    except ModuleFailure as exc:
        raise ModuleFailure(tx.abort("read back failed: %s" % exc.message).full_message(), result)
    problems = kernel_args.unsatisfied(kernel_args.split(line), present, absent)
    if got != files or problems:
        err = tx.abort("read back after writing does not match: %s" % (
            ", ".join(kernel_args.describe(p, "configured") for p in problems) or
            "%s differs from what was written" % ", ".join(sorted(p for p in files if got.get(p) != files[p]))))
        raise ModuleFailure(err.full_message(), result)
    ran = _run_tool(tools, command)
    if not ran.ok:
        message = tx.abort(ran.describe()).full_message()
        # A failed run may have rewritten part of the boot entries (proxmox-boot-tool goes ESP
        # by ESP): run it again on the restored files so the boot loader matches them.
        again = _run_tool(tools, command)
        if not again.ok:
            message += "; running it again on the restored files ALSO failed: " + again.describe()
        else:
            message += "; ran it again on the restored files"
        raise ModuleFailure(message, result)


class _NotRun:
    """A command that could not even be started (an OSError from exec), as a failed result."""

    ok = False

    def __init__(self, argv, exc):
        self.argv = list(argv)
        self.exc = exc

    def describe(self):
        return "%s could not be run: %s" % (" ".join(self.argv), fileops.describe(self.exc))


def _run_tool(tools, argv):
    try:
        return tools.run(argv)
    except (OSError, IOError) as exc:
        return _NotRun(argv, exc)
