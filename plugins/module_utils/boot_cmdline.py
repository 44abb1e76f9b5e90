# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel command line of the next boot: find where it is configured, edit it, refresh.

The module gpufleet.tuning.kernel_cmdline is a thin shell over ``run()``. It follows the
collection's contract: validate, read, plan, stop there in check mode, write atomically inside
a Transaction, run the boot loader's refresh command, read back; any failure puts the files
back. The boot loader in use is detected:

- Proxmox systemd-boot (ZFS on UEFI): ``proxmox-boot-tool`` is installed, it manages ESPs
  (/etc/kernel/proxmox-boot-uuids is not empty) and /etc/kernel/cmdline exists. The line is
  /etc/kernel/cmdline; ``proxmox-boot-tool refresh`` writes it into every ESP's entries.
- GRUB: /etc/default/grub (and its grub.d overrides, see grub_config). Refreshed with
  ``proxmox-boot-tool refresh`` when that tool manages the ESPs (Proxmox, GRUB on ESPs), else
  ``update-grub``, else ``grub-mkconfig -o /boot/grub/grub.cfg``.

A reboot is required while the configured line and the running one (/proc/cmdline) disagree
on a managed argument; only managed arguments are compared, as GRUB adds BOOT_IMAGE= and root=
to the running line.

Arguments known to be harmful on the GPUs present are refused (or, on request, skipped):
forcing identity (passthrough) IOMMU domains on NVIDIA Blackwell GPUs was seen to break the
GPU's firmware boot (FSP) until the next reboot (hardware-facts: kernel command line).
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.tuning.plugins.module_utils import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils import grub_config
from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_args
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_gpus
from ansible_collections.gpufleet.tuning.plugins.module_utils.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.outcome import ModuleFailure

BOOTLOADERS = ("auto", "grub", "systemd-boot")
HARMFUL_ACTIONS = ("fail", "skip")
HARMFUL_WHY = ("forcing identity (passthrough) IOMMU domains was seen to break the firmware boot "
               "(FSP) of NVIDIA Blackwell GPUs until the next reboot")


class CmdlineError(ModuleFailure):
    """A failure of this module, with what was learnt so far (see outcome.ModuleFailure)."""


class Paths(object):
    """Roots the engine reads and writes; tests point them into a temp dir."""

    def __init__(self, etc="/etc", proc="/proc", sys="/sys"):
        self.etc = etc
        self.proc = proc
        self.sys = sys

    @property
    def kernel_cmdline(self):
        return os.path.join(self.etc, "kernel", "cmdline")

    @property
    def boot_uuids(self):
        return os.path.join(self.etc, "kernel", "proxmox-boot-uuids")


def validate(params):
    """Check every input before anything is read; return the present_by_cpu_vendor map."""
    errors = []
    if params.get("bootloader") not in BOOTLOADERS:
        errors.append("bootloader %r is not valid: use one of %s" % (params.get("bootloader"), ", ".join(BOOTLOADERS)))
    if params.get("on_harmful") not in HARMFUL_ACTIONS:
        errors.append("on_harmful %r is not valid: use fail or skip" % (params.get("on_harmful"),))
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
        raise CmdlineError("invalid arguments, nothing was changed: " + "; ".join(errors))
    try:
        kernel_args.parse_wanted_lists(params.get("present") or [], params.get("absent") or [])
    except kernel_args.ArgError as exc:
        raise CmdlineError("invalid arguments, nothing was changed: %s" % exc)
    return by_vendor


def cpu_vendor(proc_root="/proc"):
    """The ``vendor_id`` of /proc/cpuinfo (AuthenticAMD, GenuineIntel), or None."""
    text = fileops.read_text(os.path.join(proc_root, "cpuinfo")) or ""
    for line in text.splitlines():
        if line.startswith("vendor_id") and ":" in line:
            return line.split(":", 1)[1].strip() or None
    return None


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
        raise CmdlineError("refusing %s: %s. Nothing was changed; set force=true to apply it anyway, or "
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


def detect(params, paths, tools):
    """Which boot loader configuration to edit: 'grub', 'systemd-boot', or None (nothing found)."""
    choice = params.get("bootloader", "auto")
    pbt_managed = bool(tools.which("proxmox-boot-tool")) and bool(
        (fileops.read_text(paths.boot_uuids) or "").strip())
    if choice == "systemd-boot":
        if not os.path.isfile(paths.kernel_cmdline):
            raise CmdlineError("bootloader=systemd-boot but %s does not exist" % paths.kernel_cmdline)
        return "systemd-boot", pbt_managed
    grub_path = os.path.join(paths.etc, "default", "grub")
    if choice == "grub":
        if not os.path.isfile(grub_path):
            raise CmdlineError("bootloader=grub but %s does not exist" % grub_path)
        return "grub", pbt_managed
    if pbt_managed and os.path.isfile(paths.kernel_cmdline):
        return "systemd-boot", pbt_managed
    if os.path.isfile(grub_path):
        return "grub", pbt_managed
    return None, pbt_managed


def refresh_command(bootloader, pbt_managed, tools):
    """The argv that makes the boot loader use the edited file; CmdlineError when absent."""
    if bootloader == "systemd-boot" or pbt_managed:
        path = tools.which("proxmox-boot-tool")
        if not path:
            raise CmdlineError("proxmox-boot-tool was not found on PATH: it is needed to write the "
                               "command line into the ESPs; nothing was changed")
        return [path, "refresh"]
    path = tools.which("update-grub")
    if path:
        return [path]
    path = tools.which("grub-mkconfig")
    if path:
        return [path, "-o", "/boot/grub/grub.cfg"]
    raise CmdlineError("neither update-grub nor grub-mkconfig was found on PATH: GRUB would not pick up "
                       "the change; nothing was changed")


def _normal(line):
    """A command line with its whitespace folded, as the kernel splits it."""
    return " ".join(kernel_args.split(line or ""))


class _Grub(object):
    """GRUB: bases of GRUB_CMDLINE_LINUX and _DEFAULT edited, later layers read."""

    def __init__(self, paths):
        self.paths = paths
        self.config = grub_config.GrubConfig(paths.etc)

    def load(self):
        try:
            self.config.load(fileops.read_text)
        except grub_config.GrubError as exc:
            raise CmdlineError("cannot read the GRUB configuration: %s; nothing was changed" % exc)
        return self

    @property
    def config_path(self):
        base = self.config.base(grub_config.DEFAULT)
        return base.path if base is not None and base.literal else self.config.main_path

    def effective(self):
        line, notes = self.config.effective_line()
        return _normal(line), notes

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
            raise CmdlineError("cannot edit GRUB_CMDLINE_LINUX_DEFAULT at %s: its value uses shell expansions; "
                               "edit it by hand; nothing was changed" % bases[1].where())
        new_values = {}
        for index, name in enumerate(grub_config.VARIABLES):
            if index not in read_only and new[index] != segments[index]:
                new_values[name] = " ".join(new[index])
        files = self.config.render(new_values) if new_values else {}
        after_line, _notes = self.config.with_changes(files).effective_line()
        after_line = _normal(after_line)
        problems = kernel_args.unsatisfied(kernel_args.split(after_line), present, absent)
        if problems:
            sources = [a.where() for a in self.config.read_only()]
            if bases[0] is not None:
                sources.insert(0, "GRUB_CMDLINE_LINUX at %s" % bases[0].where())
            raise CmdlineError("the effective GRUB command line would still be wrong for %s after editing %s: "
                               "the conflicting arguments come from assignments this module does not rewrite "
                               "(%s); nothing was changed" % (
                                   ", ".join(kernel_args.describe(p, "effective") for p in problems),
                                   self.config_path, ", ".join(sources) or "none found"))
        return files, after_line


class _SystemdBoot(object):
    """Proxmox systemd-boot: the first line of /etc/kernel/cmdline is the command line."""

    def __init__(self, paths):
        self.paths = paths
        self.path = paths.kernel_cmdline
        self.text = None

    def load(self):
        self.text = fileops.read_text(self.path)
        if self.text is None:
            raise CmdlineError("%s does not exist" % self.path)
        return self

    @property
    def config_path(self):
        return self.path

    def effective(self):
        return _normal(self.text.partition("\n")[0]), []

    def plan(self, present, absent):
        first, sep, rest = self.text.partition("\n")
        tokens = kernel_args.split(first)
        new = kernel_args.plan([tokens], present, absent, primary=0)[0]
        after = " ".join(new)
        if new == tokens:
            return {}, _normal(first)
        return {self.path: after + (sep or "\n") + rest}, after


def run(params, check_mode=False, paths=None, tools=None):
    """Ensure the arguments in the next boot's command line; return the module result.

    A CmdlineError carries in ``partial`` what was learnt before the failure (GPUs, CPU
    vendor, running line, boot loader), for fail_json.
    """
    partial = {}
    try:
        return _run(params, check_mode, paths or Paths(), tools, partial)
    except CmdlineError as exc:
        for key, value in partial.items():
            exc.partial.setdefault(key, value)
        raise


def _run(params, check_mode, paths, tools, partial):
    by_vendor = validate(params)
    vendor = cpu_vendor(paths.proc)
    try:
        present, absent = wanted_args(params, by_vendor, vendor)
    except kernel_args.ArgError as exc:
        raise CmdlineError("invalid arguments, nothing was changed: %s" % exc)
    gpus = nvidia_gpus.list_gpus(paths.sys)
    partial.update({"gpus": gpus, "cpu_vendor": vendor})
    present, skipped, warnings = screen_harmful(present, gpus, params)
    running_text = fileops.read_text(os.path.join(paths.proc, "cmdline"))
    running = running_text.strip() if running_text is not None else None
    partial["running"] = running
    bootloader, pbt_managed = detect(params, paths, tools)
    partial["bootloader"] = bootloader
    if bootloader is None:
        result = dict(partial)
        result.update({
            "changed": False, "skipped": True, "reboot_required": False, "pending": [], "diff": [],
            "skipped_keys": skipped, "config_path": None, "config_files": [], "cmdline_before": None,
            "cmdline_after": None, "grub_overrides": [], "refresh_command": None, "warnings": warnings,
            "msg": "no boot loader configuration found (neither %s nor a proxmox-boot-tool managed %s): "
                   "nothing to edit on this machine (a container's command line is its host's)"
                   % (os.path.join(paths.etc, "default", "grub"), paths.kernel_cmdline),
        })
        return result

    editor = (_Grub(paths) if bootloader == "grub" else _SystemdBoot(paths)).load()
    before_line, notes = editor.effective()
    warnings.extend(notes)
    try:
        files, after_line = editor.plan(present, absent)
    except kernel_args.ArgError as exc:
        raise CmdlineError("%s; nothing was changed" % exc)
    old_texts = dict((path, fileops.read_text(path)) for path in files)
    files = dict((p, t) for p, t in files.items() if t != old_texts[p])
    overrides = editor.config.overrides() if bootloader == "grub" else []
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

    if files:
        command = refresh_command(bootloader, pbt_managed, tools)
        result["refresh_command"] = command
        if not check_mode:
            _apply(files, old_texts, command, tools, editor, present, absent, result)

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


def _apply(files, old_texts, command, tools, editor, present, absent, result):
    """Write the files, read them back, refresh the boot loader; restore the files on failure.

    The read-back comes before the refresh, so the boot loader is only ever refreshed from
    files that are known to be right.
    """
    tx = Transaction()
    try:
        for path in sorted(files):
            fileops.write_atomic(path, files[path])
            tx.record("file %s" % path, _restorer(path, old_texts[path]))
        got = dict((path, fileops.read_text(path)) for path in files)
        line, _notes = type(editor)(editor.paths).load().effective()
    except (OSError, IOError) as exc:
        err = tx.abort("failed to write %s: %s" % (getattr(exc, "filename", None) or "the configuration",
                                                   exc.strerror or exc))
        raise CmdlineError(err.full_message(), result)
    except CmdlineError as exc:
        raise CmdlineError(tx.abort("read back failed: %s" % exc.message).full_message(), result)
    problems = kernel_args.unsatisfied(kernel_args.split(line), present, absent)
    if got != files or problems:
        err = tx.abort("read back after writing does not match: %s" % (
            ", ".join(kernel_args.describe(p, "configured") for p in problems) or "file content differs"))
        raise CmdlineError(err.full_message(), result)
    ran = tools.run(command)
    if not ran.ok:
        message = tx.abort(ran.describe()).full_message()
        # A failed run may have rewritten part of the boot entries (proxmox-boot-tool goes ESP
        # by ESP): run it again on the restored files so the boot loader matches them.
        again = tools.run(command)
        if not again.ok:
            message += "; running it again on the restored files ALSO failed: " + again.describe()
        else:
            message += "; ran it again on the restored files"
        raise CmdlineError(message, result)


def _restorer(path, content):
    return lambda: fileops.restore_file(path, content)
