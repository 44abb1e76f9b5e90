#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Ensure kernel command-line arguments for the next boot, and report whether a reboot is due
version_added: 0.1.0
description:
  - Ensures arguments are present or absent in the kernel command line the boot loader in use
    will pass at the next boot, refreshes the boot loader, and compares the result with the
    running command line (C(/proc/cmdline)) to report whether a reboot is required.
  - "GRUB: the value of C(GRUB_CMDLINE_LINUX_DEFAULT) is edited where it is effectively set:
    in C(/etc/default/grub), or in the C(/etc/default/grub.d/*.cfg) file that overrides it.
    Values appended by later grub.d files (C(\"$GRUB_CMDLINE_LINUX_DEFAULT ...\")) and
    C(GRUB_CMDLINE_LINUX) are read; arguments this module removes or replaces are also removed
    from C(GRUB_CMDLINE_LINUX). Shell quoting (double, single, none) is kept; every other byte
    of the file is left as it was. Then C(update-grub) runs (or C(grub-mkconfig -o
    /boot/grub/grub.cfg), or C(proxmox-boot-tool refresh) where that tool manages the ESPs)."
  - "Proxmox systemd-boot (ZFS on UEFI without Secure Boot): the first line of C(/etc/kernel/cmdline),
    then C(proxmox-boot-tool refresh)."
  - "Which one the next boot reads is decided from how the node boots, not from which files exist
    (a Proxmox VE install on ZFS always has C(/etc/kernel/cmdline)): C(/sys/firmware/efi)
    (legacy BIOS always boots through GRUB), the C(LoaderInfo) EFI variable that systemd-boot
    sets at every boot, the C(SecureBoot) EFI variable (with Secure Boot on, Proxmox boots
    through shim and GRUB), and the ESPs C(proxmox-boot-tool) keeps in sync
    (C(/etc/kernel/proxmox-boot-uuids), one vfat UUID per line). RV(bootloader_reason) says
    why; RV(boot_mode) and RV(secure_boot) give the facts."
  - Arguments are read the way the kernel reads them. A value may hold spaces inside double
    quotes (V(foo="a b")). Parameter names compare with C(-) and C(_) as equal. Everything
    after a bare C(--) is passed to init and is never changed; new arguments go before it.
  - A managed key holds one value. Ensuring V(key=value) replaces any other value of that key
    (in place) and collapses duplicates; arguments that are not managed are left alone.
  - Refuses, unless O(force=true), arguments known to be harmful on the GPUs found in
    C(/sys/bus/pci/devices). Forcing identity (passthrough) IOMMU domains, with V(iommu=pt)
    (any C(iommu=) list item starting with C(pt)) or a true C(iommu.passthrough), was seen to
    break the firmware boot (FSP) of NVIDIA Blackwell GPUs until the next reboot, so it is
    refused when such a GPU is present. The architecture comes from the PCI device ID blocks
    NVIDIA's gpu-admin-tools assign to each chip; Hopper (H100, H200) is not affected.
  - "Refuses to add arguments next to ones already configured that would change how they are
    read (a GRUB separator such as C(;), an unbalanced double quote, a non-ASCII or control
    character), and to edit a GRUB configuration that sets the command line in a way it does
    not evaluate (inside C(if)/C(case)/a loop, after C(&&), C(unset), C(+=), C(eval), sourcing
    another file); the message names the argument or the file and line."
  - "Refuses a change that would make the configured line longer than the kernel keeps:
    COMMAND_LINE_SIZE (2048 bytes on x86, 4096 on arm64, 2048 assumed elsewhere) less its
    terminating NUL and what the boot loader adds (C(BOOT_IMAGE=), C(root=), C(ro), C(initrd=)):
    the larger of 256 bytes and what those take in the running C(/proc/cmdline)."
  - Right before writing, the files are read again; if another writer changed one since this
    module read it, the task fails and nothing is written. Files are written atomically (a
    symlinked C(/etc/default/grub) stays a link, its target is edited) and read back before
    the refresh command runs; if the refresh fails, the files are restored exactly (bytes,
    mode, owner) and the command is run again on them.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads everything and reports the planned files, command line and reboot state; writes and runs nothing.
  diff_mode:
    support: full
    description: Shows each configuration file before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with GRUB (Debian, Ubuntu, Proxmox VE) or Proxmox VE's systemd-boot. Needs root.
options:
  present:
    description:
      - Arguments that must be in the command line, as V(key) or V(key=value).
      - A name is letters, digits, C(_), C(-) and C(.); a value is letters, digits and the
        characters C(_.-,:/=+@%^~!). A value with spaces must be double-quoted (V(foo="a b")),
        or the whole argument (V("foo=a b")); GRUB passes both on as the same argument.
      - Everything else is refused, naming the entry and the character. That is GRUB script and
        shell metacharacters (semicolon, ampersand, pipe, angle brackets, braces, hash, dollar,
        backtick, backslash, single quote, parentheses), glob characters (asterisk, question
        mark, square brackets), control characters and every character outside printable ASCII
        (the kernel also splits on byte 0xA0, a non-breaking space). grub-mkconfig writes the
        arguments unquoted onto GRUB's C(linux) line, where V(x=1;reboot) would run C(reboot)
        at every boot.
      - Keys the kernel reads as a list are refused (C(console), C(hugepagesz), C(hugepages),
        C(memmap), C(ip), C(crashkernel)).
    type: list
    elements: str
    default: []
  absent:
    description:
      - Arguments that must not be in the command line. V(key) removes every value of the key;
        V(key=value) removes only that exact argument.
      - The same syntax as O(present) is required.
    type: list
    elements: str
    default: []
  present_by_cpu_vendor:
    description:
      - Extra present arguments per CPU vendor, keyed by the C(vendor_id) of C(/proc/cpuinfo)
        (V(AuthenticAMD), V(GenuineIntel)). Only the list of this machine's vendor is used.
      - A key that O(present) also sets is taken from O(present).
      - Every list is checked with the syntax of O(present), whichever vendor it is for.
    type: dict
    default: {}
  bootloader:
    description:
      - V(auto) follows how the node boots. With C(proxmox-boot-tool) installed, ESPs listed in
        C(/etc/kernel/proxmox-boot-uuids) and C(/etc/kernel/cmdline) present, it uses
        systemd-boot when the node booted through systemd-boot (C(LoaderInfo)), or when it
        booted in UEFI mode and no EFI variable can be read (proxmox-boot-tool's own default);
        GRUB when it booted in legacy BIOS mode, with Secure Boot on, through another loader,
        or without the C(LoaderInfo) variable systemd-boot always sets. Otherwise GRUB when
        C(/etc/default/grub) exists. The module does nothing and returns C(skipped=true) when
        neither applies (a container), or when the node boots through systemd-boot without
        proxmox-boot-tool (systemd's kernel-install is not handled).
      - V(grub) and V(systemd-boot) force the choice; they fail, naming the reason, when the file
        is missing or the node evidently boots through the other one (V(systemd-boot) also
        needs proxmox-boot-tool managing ESPs), as a file the boot does not read would never
        take effect.
    type: str
    choices: [auto, grub, systemd-boot]
    default: auto
  on_harmful:
    description:
      - What to do with a O(present) argument that is harmful on a GPU of this machine.
      - V(fail) fails the task before anything is changed; the message names the GPU (address,
        device ID, architecture) and the argument.
      - V(skip) leaves the argument out, applies the others, and reports it in RV(skipped_keys).
    type: str
    choices: [fail, skip]
    default: fail
  force:
    description:
      - Apply harmful arguments anyway (a warning is still printed).
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - "RV(changes) holds a file record per configuration file written (C(/etc/default/grub), a
    grub.d file, C(/etc/kernel/cmdline)) and a value record per argument key of O(present) or
    O(absent) whose configured arguments change (target the key, such as C(iommu); before and
    after the arguments of that key as configured, such as C(iommu=pt), several joined by a
    space, null when the key is not set). The refresh command is an action and has no record;
    RV(refresh_command) reports it."
  - RHEL-family systems (grubby, BLS entries) and systemd's own kernel-install are not handled.
  - An argument already in the configuration that is harmful on this machine is not removed
    unless listed in O(absent); a warning names it.
  - What C(iommu=pt) trades away. Devices the host's own drivers use through the kernel's DMA
    API (the GPUs under the nvidia driver, NICs, NVMe) get identity (passthrough) IOMMU domains,
    so their DMA is no longer translated or confined to the buffers the driver mapped, and a
    malicious or buggy device, or its firmware, can read and write all of host memory, as
    without an IOMMU. Peer-to-peer DMA and RDMA gain from it (no translation on their path).
    Devices handed to VMs through VFIO keep translated domains and stay isolated, and the IOMMU
    still remaps interrupts. Leave it out (O(absent)) on hosts whose devices or firmware are not
    trusted, or where the IOMMU is relied on to contain a device's DMA.
seealso:
  - name: The kernel's command-line parameters
    description: What each argument does.
    link: https://docs.kernel.org/admin-guide/kernel-parameters.html
  - name: Proxmox VE, editing the kernel command line
    description: GRUB and systemd-boot on Proxmox VE.
    link: https://pve.proxmox.com/pve-docs/chapter-sysadmin.html#sysboot_edit_kernel_cmdline
"""

EXAMPLES = r"""
- name: IOMMU passthrough for GPU peer-to-peer DMA, and amd_pstate on AMD CPUs
  gpufleet.tuning.kernel_cmdline:
    present:
      - iommu=pt
    present_by_cpu_vendor:
      AuthenticAMD:
        - amd_pstate=active
  register: cmdline

- name: Cap C-states, drop a flag, leave out what the GPUs cannot take
  gpufleet.tuning.kernel_cmdline:
    present:
      - iommu=pt
      - processor.max_cstate=1
      - intel_idle.max_cstate=1
    absent:
      - quiet
    on_harmful: skip

- name: Say what is pending
  ansible.builtin.debug:
    msg: "Reboot needed for: {{ cmdline.pending | join(', ') }}"
  when: cmdline.reboot_required
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` (and ``state_record`` of
# the tuning modules) is documented with the same text in every module of this collection; keep
# the copies equal (tests/unit/contract.py).
RETURN = r"""
changes:
  description:
    - What this run changed (in check mode, what it would change) as records for programs to
      read (the closing summary, reports, a fleet revert); C(diff) shows the same for people.
    - One record per value, file, kernel module or service; empty when nothing changed, so
      C(changed) is true exactly when this list is not empty. A module that only reads always
      returns an empty list.
    - A failed run returns no records; what it had applied was restored.
  returned: always
  type: list
  elements: dict
  contains:
    area:
      description: The part of the tuning (C(sysctl), C(pcie), C(cpu_power), C(lxc_memlock),
        C(peermem), C(nvidia_options), C(kernel_cmdline)).
      type: str
    kind:
      description: V(value), V(file), V(module) or V(service).
      type: str
    target:
      description: The key, file path, PCI address, kernel module or unit.
      type: str
    before:
      description:
        - What this run found; null when absent or unknown.
        - A value is its text. A file is C(sha256), C(size) and C(mode), never its content
          (config files can hold secrets). A kernel module is V(loaded) or V(not loaded), a
          service a state word such as V(enabled).
      type: raw
    after:
      description: What this run left (in check mode, would leave), in the form of C(before).
      type: raw
  sample:
    - {"area": "kernel_cmdline", "kind": "file", "target": "/etc/default/grub",
       "before": {"sha256": "9f2c...", "size": 1214, "mode": "0644"},
       "after": {"sha256": "4b7e...", "size": 1223, "mode": "0644"}}
    - {"area": "kernel_cmdline", "kind": "value", "target": "iommu", "before": null, "after": "iommu=pt"}
    - {"area": "kernel_cmdline", "kind": "value", "target": "quiet", "before": "quiet", "after": null}
bootloader:
  description: The boot loader configuration used, grub or systemd-boot (null when none is edited; RV(msg) says why).
  returned: always
  type: str
  sample: grub
boot_mode:
  description: How this boot started, uefi (C(/sys/firmware/efi) exists) or legacy (BIOS).
  returned: always
  type: str
  sample: uefi
secure_boot:
  description: Secure Boot state from the C(SecureBoot) EFI variable; null when it cannot be read (and on legacy BIOS).
  returned: always
  type: bool
  sample: false
bootloader_reason:
  description: Why RV(bootloader) was chosen (or forced), with the evidence read and the ESPs proxmox-boot-tool keeps in sync.
  returned: always
  type: str
  sample: "legacy BIOS boot (/sys/firmware/efi does not exist), and systemd-boot needs UEFI; proxmox-boot-tool
    keeps ESP 1234-ABCD in sync (/etc/kernel/proxmox-boot-uuids): it refreshes GRUB from /etc/default/grub, and
    /etc/kernel/cmdline is not used"
config_path:
  description: The file that holds the edited command line (for GRUB, the one that sets GRUB_CMDLINE_LINUX_DEFAULT).
  returned: when a boot loader configuration was found
  type: str
  sample: /etc/default/grub
config_files:
  description: Files changed by this run (in check mode, that would be changed).
  returned: always
  type: list
  elements: str
  sample: ["/etc/default/grub"]
cmdline_before:
  description: The configured command line before this run (GRUB, GRUB_CMDLINE_LINUX and _DEFAULT
    as grub-mkconfig puts them on the normal entries).
  returned: when a boot loader configuration was found
  type: str
  sample: quiet
cmdline_after:
  description: The configured command line after this run (in check mode, the planned one).
  returned: when a boot loader configuration was found
  type: str
  sample: quiet iommu=pt amd_pstate=active
running:
  description: The running command line, from /proc/cmdline.
  returned: always
  type: str
  sample: BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet
reboot_required:
  description: True when the configured command line (of the file this node boots with) and the running one
    disagree on a managed argument.
  returned: always
  type: bool
pending:
  description: The managed arguments the running command line does not have yet (or still has,
    for removals), each with what is running.
  returned: always
  type: list
  elements: str
  sample: ["iommu=pt (running: not set)", "amd_pstate=active (running: amd_pstate=passive)"]
skipped_keys:
  description:
    - Harmful arguments left out with O(on_harmful=skip), each with the reason.
    - Named C(skipped_keys), not C(skipped), because Ansible reports any task whose result has
      a true C(skipped) as skipped.
  returned: always
  type: dict
  sample: {"iommu=pt": "refused on NVIDIA Blackwell GPU 0000:41:00.0 (10de:2bb5, blackwell gb202): ..."}
gpus:
  description: The NVIDIA GPUs found in sysfs.
  returned: always
  type: list
  elements: dict
  contains:
    bdf:
      description: PCI address.
      type: str
    device_id:
      description: Vendor and device ID.
      type: str
    architecture:
      description: blackwell, hopper, ada, ampere, turing, or unknown.
      type: str
    chip:
      description: The chip (gh100, gb202, ...), or null when unknown.
      type: str
  sample: [{"bdf": "0000:00:05.0", "device_id": "10de:2335", "architecture": "hopper", "chip": "gh100"}]
cpu_vendor:
  description: vendor_id from /proc/cpuinfo, null when there is none.
  returned: always
  type: str
  sample: AuthenticAMD
grub_overrides:
  description: grub.d files that set GRUB_CMDLINE_LINUX or GRUB_CMDLINE_LINUX_DEFAULT.
  returned: always
  type: list
  elements: str
  sample: ["/etc/default/grub.d/50-cloudimg-settings.cfg"]
refresh_command:
  description: The command that was (in check mode, would be) run to refresh the boot loader; null when nothing changed.
  returned: always
  type: list
  elements: str
  sample: ["/usr/sbin/update-grub"]
skipped:
  description: True only when there is no configuration to edit (none found, or a systemd-boot boot without
    proxmox-boot-tool); RV(msg) says why.
  returned: when there is no configuration to edit
  type: bool
msg:
  description: Why nothing was done, when there is no configuration to edit.
  returned: when there is no configuration to edit
  type: str
  sample: "no boot loader configuration found (neither /etc/default/grub nor a proxmox-boot-tool managed /etc/kernel/cmdline): ..."
state_record:
  description: What was recorded in O(state_path) around this change (in check mode, what would
    be) - C(path), C(run_id), the item keys C(recorded), C(updated) and C(dropped), and whether
    the file was C(written).
  returned: when O(state_path) is given and a change was planned
  type: dict
  sample: {"path": "/var/lib/gpufleet-tuning/state.json", "run_id": "20261206T101500Z-1a2b3c",
           "recorded": ["sysctl:vm.swappiness"], "updated": [], "dropped": [], "written": true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_cmdline
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(kernel_cmdline.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return kernel_cmdline.run(params, check_mode, kernel_cmdline.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
