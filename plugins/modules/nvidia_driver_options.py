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
  - Every value is checked against the type the driver declares for it in nv-reg.h. The numeric
    C(NVreg_) parameters are signed C(int) module parameters (-2147483648 to 2147483647, as
    decimal, C(0x) hex or C(0)-prefixed octal), the others C(charp) strings of at most 1024
    bytes. A value the kernel would not parse makes it refuse the whole nvidia module at load,
    so the node would boot without GPUs, and such values are refused before anything is written.
  - The module writes and removes only a file it created (its first line names
    gpufleet.tuning). An existing file without that marker (the distribution's
    C(nvidia.conf), for instance) is refused unless O(adopt=true).
  - An option the running kernel command line also sets (C(nvidia.NVreg_X=...) in
    C(/proc/cmdline)) to another value is reported in RV(cmdline_overrides) with a warning and
    never as pending, since kmod applies command-line options after every modprobe.d file, so the
    file's value never takes effect while the boot line keeps it. This is a warning and not a
    failure because the fix (removing it from the boot loader's command line) reaches
    C(/proc/cmdline) only after a reboot, which a failure here would block.
  - Rules that keep the driver from loading or change what loading means (C(install nvidia ...),
    C(alias nvidia ...), C(blacklist nvidia), C(module_blacklist=) and C(modprobe.blacklist=)
    on the command line) are reported in RV(load_blockers) with a warning. When the driver
    cannot load through modprobe at all, nothing is reported as pending a reboot.
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
        to integers, booleans (written 1/0) or strings.
      - Numeric parameters are the kernel's signed C(int) (-2147483648 to 2147483647; an all-ones
        value such as C(NVreg_ResmanDebugLevel) is written C(-1), which
        C(/proc/driver/nvidia/params) prints as 4294967295). Strings for them must read as such
        an integer (C(0x10), C(010), C(-1)); floats (including C(nan)) are refused.
      - String (C(charp)) parameters (C(NVreg_RegistryDwords), C(NVreg_RegistryDwordsPerDevice),
        C(NVreg_RmNvlinkBandwidth), C(NVreg_ExcludedGpus), C(NVreg_TemporaryFilePath),
        C(NVreg_CoherentGPUMemoryMode), C(NVreg_GpuBlacklist), C(NVreg_RmMsg)) take a string of at
        most 1024 bytes.
      - Names are case-sensitive; a different capitalisation of a known parameter, and
        C(NVreg_RmProfilingAdminOnly) (the name the params file prints for
        C(NVreg_RestrictProfilingToAdminUsers)), are refused because the kernel would ignore them.
        A name the module does not know (another driver version) is written with a warning; a
        numeric value for it must still be a valid C(int).
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
  adopt:
    description:
      - Take over an existing O(filename) that this collection did not write (it lacks the
        gpufleet.tuning marker comment). V(true) overwrites it (or, with O(state=absent) or no
        options, removes it); every other line of it (such as C(blacklist nouveau)) is lost, and a
        warning lists them.
      - V(false) refuses such a file, changes nothing and fails with its path; choose another
        O(filename) instead.
    type: bool
    default: false
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
      - C(NVreg_NvLinkDisable) other than 0, C(NVreg_RmNvlinkBandwidth) that the driver reads as
        another mode than C(FULL), C(NVreg_RmNvlinkBandwidthLinkCount) other than 0 (NVLink off or
        throttled, so peer-to-peer traffic slows or falls back to PCIe). The driver compares
        C(NVreg_RmNvlinkBandwidth) with C(OFF), C(MIN), C(HALF), C(3QUARTER) and C(LINKCOUNT)
        over the given characters only, case-sensitively, so C(O) or an empty value mean C(OFF),
        and a value it does not match (C(half)) leaves C(FULL), with a warning.
      - C(NVreg_EnableGpuFirmware) with the GSP firmware off (the open kernel modules and
        Hopper/Blackwell GPUs need it; the driver fails to initialize them).
      - C(NVreg_EnableMSI=0) (legacy shared INTx interrupts).
      - C(NVreg_DynamicPowerManagement) 1 or 2 (idle GPUs are powered off; requests wait for them).
      - C(NVreg_RegisterPCIDriver=0) (the driver binds no GPU).
      - C(NVreg_InitializeSystemMemoryAllocations=0) (memory is handed out without being
        cleared, so data leaks between processes or tenants).
      - Options that loosen who may use the GPUs, judged against the driver's defaults in
        nv-reg.h (counters for administrators only, device files owned by UID 0 and GID 0 with
        mode 0666) and against a restriction the host may already have, since this file is read
        last and overrides a distribution's or an administrator's setting (such as root:video
        0660).
      - C(NVreg_RestrictProfilingToAdminUsers) other than 1 (the default; the driver restricts
        the counters only for exactly 1), so every user who can open a GPU reads its performance
        counters (CUPTI, Nsight), a side channel into other processes' and tenants' work
        (CVE-2018-6260). nv-reg.h's comment calls 0 the default; its parameter table sets 1, and
        C(/proc/driver/nvidia/params) prints it as C(RmProfilingAdminOnly).
      - C(NVreg_DeviceFileUID) other than 0 (a non-root account owns C(/dev/nvidia*), with the
        owner's permissions, and can chmod them to any mode).
      - C(NVreg_DeviceFileMode) with any bit outside 0660. Read or write for others lets every
        local account and service open the GPUs (NVIDIA's own default 0666 is refused too when
        written here, because it undoes a host's 0660); execute, setuid, setgid or sticky bits
        grant more than the default ever does; a negative value is read as all bits. Leave the
        option out to keep the host's setting; 0660 or less passes.
      - C(NVreg_DeviceFileGID) is not on the list. The group gets only the mode's group bits,
        which with the default mode every account has anyway, and C(NVreg_DeviceFileGID) with
        C(NVreg_DeviceFileMode=0660) is how access is narrowed to one group. Putting it behind
        O(allow_risky), which unlocks every option above at once, would push hardened hosts to
        allow everything. Check that the group you give is not a broad one (such as C(users)).
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - "RV(changes) holds a file record for the modprobe.d file and a value record per C(NVreg_)
    option whose configured value changes (target the option, before and after the value the
    driver receives, null where the file does not set it). The initramfs rebuild is an action
    and has no record; RV(initramfs) reports it."
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

- name: An all-ones 32-bit value is written as -1 (the parameters are signed int)
  gpufleet.tuning.nvidia_driver_options:
    options:
      NVreg_ResmanDebugLevel: -1

- name: Take over a file of that name that an operator wrote by hand (its other lines are lost)
  gpufleet.tuning.nvidia_driver_options:
    filename: local-nvidia.conf
    adopt: true
    options:
      NVreg_EnableStreamMemOPs: 1
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
    - {"area": "nvidia_options", "kind": "file", "target": "/etc/modprobe.d/zz-gpufleet-nvidia.conf",
       "before": null, "after": {"sha256": "5d41...", "size": 213, "mode": "0644"}}
    - {"area": "nvidia_options", "kind": "value", "target": "NVreg_EnableMSI", "before": null, "after": "1"}
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
  description: One line per change that waits for the next driver load (a reboot). Options the
    kernel command line overrides (RV(cmdline_overrides)) are never listed, and nothing is
    listed while a rule keeps the driver from loading (RV(load_blockers)).
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
cmdline_overrides:
  description: Options of O(options) that the running kernel command line (C(/proc/cmdline))
    sets to another value; the command line wins at every load, so these never take effect
    from the file and are not counted in RV(pending).
  returned: always
  type: list
  elements: dict
  contains:
    param:
      description: The option.
      type: str
    value:
      description: The value on the command line (null for a bare C(nvidia.NVreg_X)).
      type: str
    configured:
      description: The value this module writes.
      type: str
    arg:
      description: The command-line argument as written.
      type: str
  sample: [{"param": "NVreg_EnableMSI", "value": "0", "configured": "1", "arg": "nvidia.NVreg_EnableMSI=0"}]
load_blockers:
  description: Rules in modprobe.d (every directory kmod reads) and on the running kernel command
    line that keep the nvidia module from loading, or change what loading it means.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file (or C(/proc/cmdline)).
      type: str
    line:
      description: The line number in the file; null for the command line.
      type: int
    rule:
      description: The rule as written.
      type: str
    effect:
      description:
        - V(never_loads) (an install command that loads nothing, or C(module_blacklist=)),
          V(redirected) (an alias sends C(modprobe nvidia) to another module),
          V(runs_command) (another install command), V(loads_via_command) (an install command
          that loads it with C(modprobe --ignore-install)), or V(blacklist) (autoload at boot,
          systemd-modules-load and C(modprobe -b) skip it; a plain C(modprobe nvidia) still
          loads it).
      type: str
    meaning:
      description: What the rule does, in words.
      type: str
  sample: [{"path": "/etc/modprobe.d/disable-gpu.conf", "line": 1, "rule": "install nvidia /bin/false",
            "effect": "never_loads", "meaning": "modprobe runs '/bin/false' instead of loading nvidia ..."}]
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

from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(nvidia_driver_options.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return nvidia_driver_options.run(params, check_mode, nvidia_driver_options.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
