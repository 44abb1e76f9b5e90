#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_options
short_description: Manage NVIDIA driver options (NVreg_*) in modprobe.d and report the pending reboot
version_added: 0.1.0
description:
  - Writes the given options as one C(options nvidia NVreg_...) line in a modprobe.d file of
    its own (C(/etc/modprobe.d/zz-gpufleet-nvidia.conf) by default), atomically and only when
    its content changes; with no options, or O(state=absent), the file is removed.
  - When the file changes, rebuilds the initramfs with C(update-initramfs -u) or
    C(dracut --force) (detected on PATH, or chosen with O(initramfs)), since the initramfs
    holds its own copy of modprobe.d. If the rebuild fails, the file is put back as it was.
  - Compares the options with the values the driver runs with, read from
    C(/proc/driver/nvidia/params) (which prints them without the C(NVreg_) prefix), and
    returns RV(reboot_required) and the list of RV(pending) changes. Options the driver does
    not print there (or all of them, when the driver is not loaded) count as pending while the
    file is newer than the last boot.
  - Values with spaces or C(;) are written in double quotes, as in
    C(NVreg_RegistryDwords="A=1;B=2"); values cannot hold a double quote or a backslash.
  - Another modprobe.d file read after this one that sets one of these options to a different
    value makes the task fail (that file would win); one read before it is reported.
  - Options known to be risky on inference nodes are refused unless O(allow_risky=true); see
    O(allow_risky) for the list and why.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads everything and reports the plan (RV(plan)) and RV(reboot_required) a real run would give; writes nothing and rebuilds nothing.
  diff_mode:
    support: full
    description: Shows the options file before and after.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with the NVIDIA driver (the file is written even when the driver is not loaded).
options:
  options:
    description:
      - NVIDIA driver options, named as on the modprobe command line (C(NVreg_EnableMSI)), mapped
        to integers (0 to 4294967295), booleans (written 1/0) or strings.
      - Names are case-sensitive; an option the running driver does not know is reported in
        RV(unverified) with a warning.
    type: dict
    default: {}
  state:
    description:
      - V(present) makes the file hold exactly O(options) (no options, no file).
      - V(absent) removes the file whatever O(options) says.
    type: str
    choices: [present, absent]
    default: present
  filename:
    description:
      - Name of the file in C(/etc/modprobe.d/); it must end in C(.conf).
      - The default sorts after the driver's and the distribution's files, so its values win.
    type: str
    default: zz-gpufleet-nvidia.conf
  initramfs:
    description:
      - How to rebuild the initramfs after the file changed.
      - V(auto) uses C(update-initramfs -u) (Debian, Ubuntu, Proxmox) or else C(dracut --force)
        (RHEL family), whichever is installed; with neither, nothing is rebuilt and a warning says so.
      - V(update-initramfs) or V(dracut) insist on that tool and fail when it is missing.
      - V(none) never rebuilds.
    type: str
    choices: [auto, update-initramfs, dracut, none]
    default: auto
  allow_risky:
    description:
      - Apply options on the risky list instead of refusing them. The list, and why each is risky
        on a multi-GPU inference node
      - C(NVreg_RegistryDwords) or C(NVreg_RegistryDwordsPerDevice) holding C(PeerMappingOverride)
        (undocumented; forces peer-to-peer mappings the driver's topology checks rejected, which
        can hang or corrupt transfers).
      - C(NVreg_GrdmaPciTopoCheckOverride) other than 0 (skips the GPUDirect RDMA topology check
        meant only for specific coherent systems).
      - C(NVreg_DmaRemapPeerMmio=0) (peer memory is no longer mapped through the IOMMU, so
        peer-to-peer and GPUDirect RDMA fault unless C(iommu=pt)).
      - C(NVreg_NvLinkDisable) other than 0, C(NVreg_RmNvlinkBandwidth) other than C(FULL),
        C(NVreg_RmNvlinkBandwidthLinkCount) other than 0 (NVLink off or throttled, so
        peer-to-peer traffic slows or falls back to PCIe).
      - C(NVreg_EnableGpuFirmware) with the GSP firmware off (the open kernel modules and
        Hopper/Blackwell GPUs need it; the driver fails to initialize them).
      - C(NVreg_EnableMSI=0) (legacy shared INTx interrupts).
      - C(NVreg_DynamicPowerManagement) 1 or 2 (idle GPUs are powered off; requests wait for them).
      - C(NVreg_RegisterPCIDriver=0) (the driver binds no GPU).
      - C(NVreg_InitializeSystemMemoryAllocations=0) (memory is handed out without being
        cleared, so data leaks between processes or tenants).
    type: bool
    default: false
notes:
  - The module never reloads the driver; the options take effect at the next reboot (or driver
    reload). RV(reboot_required) says when that is still needed.
  - An option removed from the file is reported as pending only in the run that removes it.
  - C(update-initramfs -u) rebuilds the newest installed kernel's image and C(dracut --force) the
    running kernel's; other images keep the old copy until they are rebuilt.
seealso:
  - name: The NVreg_ options, as the driver source documents them (nv-reg.h)
    description: What each option does and its default.
    link: https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/src/nvidia/arch/nvalloc/unix/include/nv-reg.h
"""

EXAMPLES = r"""
- name: Restrict GPU performance counters to administrators
  gpufleet.tuning.nvidia_driver_options:
    options:
      NVreg_RestrictProfilingToAdminUsers: 1
  register: nvidia_options

- name: Say what waits for a reboot
  ansible.builtin.debug:
    msg: "{{ nvidia_options.pending }}"
  when: nvidia_options.reboot_required

- name: A registry string (quoted in the file because of the semicolons)
  gpufleet.tuning.nvidia_driver_options:
    options:
      NVreg_RegistryDwords: "RMIntrLockingMode=1;EnableStreamMemOPs=1"

- name: Remove the file (the driver keeps its values until the next reboot)
  gpufleet.tuning.nvidia_driver_options:
    state: absent
"""

RETURN = r"""
path:
  description: The managed file.
  returned: always
  type: str
  sample: /etc/modprobe.d/zz-gpufleet-nvidia.conf
options:
  description: The options the file holds after this run, as the driver receives them (quotes removed).
  returned: always
  type: dict
  sample: {"NVreg_RegistryDwords": "A=1;B=2", "NVreg_EnableMSI": "1"}
running:
  description: Every value in /proc/driver/nvidia/params, with the C(NVreg_) prefix put back;
    null when the driver is not loaded.
  returned: always
  type: dict
  sample: {"NVreg_EnableMSI": "1", "NVreg_RegistryDwords": ""}
driver_loaded:
  description: Whether the NVIDIA kernel driver is loaded.
  returned: always
  type: bool
driver_version:
  description: Version of the loaded driver; null when it is not loaded.
  returned: always
  type: str
  sample: "580.159.04"
reboot_required:
  description: True while the configured options are not what the driver runs with (see RV(pending)).
  returned: always
  type: bool
pending:
  description: One line per change that waits for the next driver load (a reboot).
  returned: always
  type: list
  elements: str
  sample: ["NVreg_EnableMSI: running 0, configured 1"]
unverified:
  description: Configured options whose running value cannot be read
    (not printed in /proc/driver/nvidia/params, or the driver is not loaded).
  returned: always
  type: list
  elements: str
risky:
  description: Risky options that were applied because O(allow_risky=true), each with the reason.
  returned: always
  type: list
  elements: str
conflicts:
  description: Settings of the same options in other modprobe.d files read before this one
    (this file wins over them).
  returned: always
  type: list
  elements: dict
initramfs:
  description: The initramfs rebuild.
  returned: always
  type: dict
  contains:
    tool:
      description: C(update-initramfs), C(dracut), or null when none was run or found.
      type: str
    command:
      description: The command run (or, in check mode, that would run).
      type: str
    rebuilt:
      description: Whether the image was rebuilt in this run.
      type: bool
    note:
      description: How the tool was chosen, or why nothing was rebuilt.
      type: str
  sample: {"tool": "update-initramfs", "command": "update-initramfs -u", "rebuilt": true, "note": "found /usr/sbin/update-initramfs"}
plan:
  description: What this run did, or in check mode what a real run would do.
  returned: always
  type: list
  elements: str
  sample: ["write /etc/modprobe.d/zz-gpufleet-nvidia.conf", "update-initramfs -u"]
container:
  description: Whether the module runs inside a container, and the evidence
    (see gpufleet.tuning.sysctl_profile).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import commands as commands_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options
from ansible_collections.gpufleet.tuning.plugins.module_utils import outcome


def main():
    module = AnsibleModule(
        argument_spec=dict(
            options=dict(type="dict", default={}),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            filename=dict(type="str", default=nvidia_driver_options.DEFAULT_FILENAME),
            initramfs=dict(type="str", default="auto", choices=["auto", "update-initramfs", "dracut", "none"]),
            allow_risky=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    outcome.finish(module, lambda: nvidia_driver_options.run(module.params, check_mode=module.check_mode,
                                                             paths=nvidia_driver_options.Paths(),
                                                             commands=commands_mod.Commands(module)))


if __name__ == "__main__":
    main()
