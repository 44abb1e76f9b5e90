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
  - "Proxmox systemd-boot (ZFS on UEFI): the first line of C(/etc/kernel/cmdline), then
    C(proxmox-boot-tool refresh)."
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
  - Files are written atomically and read back before the refresh command runs; if the
    refresh fails, the files are restored and the command is run again on them.
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
      - A value with spaces must be double-quoted (V(foo="a b")). Single quotes, backslashes,
        C($) and backticks are refused, and so are keys the kernel reads as a list
        (C(console), C(hugepagesz), C(hugepages), C(memmap), C(ip), C(crashkernel)).
    type: list
    elements: str
    default: []
  absent:
    description:
      - Arguments that must not be in the command line. V(key) removes every value of the key;
        V(key=value) removes only that exact argument.
    type: list
    elements: str
    default: []
  present_by_cpu_vendor:
    description:
      - Extra present arguments per CPU vendor, keyed by the C(vendor_id) of C(/proc/cpuinfo)
        (V(AuthenticAMD), V(GenuineIntel)). Only the list of this machine's vendor is used.
      - A key that O(present) also sets is taken from O(present).
    type: dict
    default: {}
  bootloader:
    description:
      - V(auto) uses systemd-boot when C(proxmox-boot-tool) is installed, C(/etc/kernel/proxmox-boot-uuids)
        is not empty and C(/etc/kernel/cmdline) exists; otherwise GRUB when C(/etc/default/grub)
        exists; otherwise the module does nothing and returns C(skipped=true) (a container, or
        a boot loader this module does not handle).
      - V(grub) and V(systemd-boot) force the choice and fail when its file is missing.
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
notes:
  - RHEL-family systems (grubby, BLS entries) and systemd's own kernel-install are not handled.
  - An argument already in the configuration that is harmful on this machine is not removed
    unless listed in O(absent); a warning names it.
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

RETURN = r"""
bootloader:
  description: The boot loader configuration used (null when none was found).
  returned: always
  type: str
  sample: grub
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
  description: True when the configured command line and the running one disagree on a managed argument.
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
  description: True only when no boot loader configuration was found; RV(msg) says why.
  returned: when no boot loader configuration was found
  type: bool
msg:
  description: Why nothing was done, when no boot loader configuration was found.
  returned: when no boot loader configuration was found
  type: str
  sample: "no boot loader configuration found (neither /etc/default/grub nor a proxmox-boot-tool managed /etc/kernel/cmdline): ..."
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import boot_cmdline
from ansible_collections.gpufleet.tuning.plugins.module_utils import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils import outcome


def main():
    module = AnsibleModule(
        argument_spec=dict(
            present=dict(type="list", elements="str", default=[]),
            absent=dict(type="list", elements="str", default=[]),
            present_by_cpu_vendor=dict(type="dict", default={}),
            bootloader=dict(type="str", default="auto", choices=list(boot_cmdline.BOOTLOADERS)),
            on_harmful=dict(type="str", default="fail", choices=list(boot_cmdline.HARMFUL_ACTIONS)),
            force=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )

    outcome.finish(module, lambda: boot_cmdline.run(module.params, check_mode=module.check_mode,
                                                    paths=boot_cmdline.Paths(), tools=commands.Commands(module)))


if __name__ == "__main__":
    main()
