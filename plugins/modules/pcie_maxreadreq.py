#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pcie_maxreadreq
short_description: Set the PCIe Max Read Request Size of GPUs, read it back and keep it across reboots
version_added: 0.1.0
description:
  - Sets the Max Read Request Size (MRRS, PCI Express Device Control bits 14:12) of the
    selected PCI devices, by default every NVIDIA VGA and 3D controller, to O(size) bytes.
    GPUs are often found at 512 where 4096 is right for large DMA reads.
  - Works in pure Python over C(/sys/bus/pci/devices/*/config); neither C(lspci) nor
    C(setpci) is needed. For each device the whole readable config space is read, the
    capability list is walked (only when Status bit 4 is set, with guards against loops and
    pointers outside the readable space) to the PCI Express capability (ID 0x10), and Device
    Control is read.
  - When MRRS differs, the 16-bit Device Control word is read again and written back with only
    bits 14:12 changed; every other bit, including bit 15 (Initiate Function Level Reset on an
    endpoint), Max Payload Size and no-snoop, is written exactly as read. The word is read back;
    a device that did not take the value gets its old word back and the task fails naming it,
    after restoring every device this call already changed.
  - A reader without root sees only the first 64 bytes of config space; such devices are
    reported with the reason C(needs root) rather than as lacking the capability, and a warning
    is printed. Devices without a PCI Express capability are reported with their reason too.
  - No matching device is not an error; the module reports zero devices.
  - Persistence (O(persist=true)) is one udev rule,
    C(/etc/udev/rules.d/90-gpufleet-pcie-maxreadreq.rules), matching the selected vendor and
    classes (or the listed addresses) on C(add) and C(bind) events. udev replays C(add) for
    every device at boot, and a driver load sends C(bind), so the size comes back after a
    reboot, a hotplug or a driver reload. The rule runs
    C(/usr/local/libexec/gpufleet/pcie-maxreadreq), a stdlib-only Python script generated from
    this collection's C(module_utils/hw/pci_config.py) source, so the boot path runs the same code
    as the module. Both files are written atomically and only when their content, mode or
    owner differs; O(persist=false) removes them.
  - What runs as root at boot stays root's. The helper runs with a fixed system Python, the
    first of C(/usr/bin/python3) and C(/usr/libexec/platform-python) that exists, never with
    the Python that runs the module (with a localhost inventory that is the checkout's
    virtualenv) and never one found on C(PATH); its first line is C(#!/usr/bin/python3 -IS), so
    it starts isolated (no C(PYTHON*) variables, no user or site packages, not even its own
    directory on the import path). Without such a Python, O(persist=true) fails before
    anything is changed and says so; setting the size (O(persist=false)) does not need one.
  - Both files are written owned by root (0:0) with modes 0755 and 0644, and the directories
    created for them 0755, whatever the umask; a file found with another owner or mode is a
    change, shown in the diff (C(<path> owner and mode)) and given back to root. Before
    writing, the module checks that no user but root can change where they land or the
    interpreter. Every directory and symlink on the way to each file and to the interpreter,
    and the interpreter itself, must be owned by root and not writable by group or others (a
    sticky directory such as C(/tmp) does not count as safe). Otherwise it fails before
    changing anything, naming the offending path with its owner and mode.
  - Inside a container the GPUs' config space belongs to the host. When a container is
    detected (from the user-namespace mapping, PID 1's environment, cgroup paths; a lone
    C(/.dockerenv) is not trusted), the module still reads and reports everything, and a run
    with nothing to set is ok; a register that would have to change makes it fail, naming
    the devices, unless O(allow_in_container=true). The udev rule is left out of the plan
    there (a rule written inside a container does not run at the host's boot) and reported in
    RV(skipped_keys). Config space that is not writable (no root, read-only C(/sys)) fails
    before anything is written.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads every device and reports the planned words and files; writes nothing.
  diff_mode:
    support: full
    description: Shows MRRS of every device and the persistence files before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with sysfs; writing needs root outside a container.
options:
  size:
    description:
      - Max Read Request Size in bytes. Encodings 6 and 7 are reserved and never written.
    type: int
    choices: [128, 256, 512, 1024, 2048, 4096]
    default: 4096
  devices:
    description:
      - PCI addresses to set, as C(DDDD:BB:DD.F) or C(BB:DD.F) (domain 0000), in hex.
      - When given, O(vendor) and O(classes) are not used, and an address with no device
        fails the task before anything is written.
    type: list
    elements: str
    default: []
  vendor:
    description:
      - PCI vendor ID of the devices to select when O(devices) is empty, as C(0x) and four hex
        digits. Quote it in YAML; an unquoted C(0x10de) arrives as the integer 4318, which is
        accepted as the same ID.
    type: raw
    default: "0x10de"
  classes:
    description:
      - PCI classes to select with O(vendor). C(0x) and four hex digits (class and subclass,
        any programming interface) or six (exact, as sysfs C(class) prints it).
      - The default selects VGA (C(0x0300)) and 3D (C(0x0302)) controllers, which leaves out the
        audio functions and NVSwitch bridges of the same vendor.
    type: list
    elements: raw
    default: ["0x0300", "0x0302"]
  include_bridges:
    description:
      - Also set the PCI Express bridges above each selected device (root port and switch
        ports), found from the device's path under C(/sys/devices). The udev helper does the
        same at boot.
    type: bool
    default: false
  persist:
    description:
      - Install the udev rule and its helper so the size is applied again at boot, on hotplug
        and when a driver binds.
      - V(false) removes both files if an earlier run installed them; the runtime value stays
        until the next reboot or driver reload.
      - Installing needs a system Python (C(/usr/bin/python3) or
        C(/usr/libexec/platform-python)) and fails, before anything is changed, where a user
        other than root could change the helper, the rule, a directory above them or that
        Python (see the description). V(false) needs neither.
    type: bool
    default: true
  allow_in_container:
    description:
      - Write even when a container is detected. Only for a host that the detection wrongly
        calls a container; in a real privileged container a write changes the host's device.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - C(pci=pcie_bus_perf) on the kernel command line sets MRRS equal to MPS, not to 4096; this
    module is the way to get 4096.
  - Writes are 16-bit config writes at Device Control; the Device Status word next to it, whose
    error bits clear when written with 1, is never written.
  - Under kernel lockdown (integrity or confidentiality) the kernel refuses config space writes
    from user space; the failure says so.
  - Some devices keep their MRRS whatever is written (QEMU's emulated devices hold 128); the
    module then fails naming the device, with its Device Control word restored.
  - A link that trained below the device's own maximum is flagged (C(degraded) in
    RV(devices[].link)). GPUs lower their link speed when idle, so a speed-only degradation on
    an idle GPU is expected; a narrower width is not.
  - RV(changes) holds a value record per device whose size this run set, named
    C(DDDD:BB:DD.F max_read_request_size) with the sizes in bytes, and a file record for the
    helper and for the udev rule.
seealso:
  - name: PCI Express Base Specification, Device Control register
    description: The MRRS and MPS fields and their encodings.
    link: https://pcisig.com/specifications
  - name: Linux sysfs PCI config file
    description: How C(/sys/bus/pci/devices/*/config) reads and writes config space.
    link: https://docs.kernel.org/PCI/sysfs-pci.html
"""

EXAMPLES = r"""
- name: Every NVIDIA GPU at 4096 bytes, kept across reboots
  gpufleet.tuning.pcie_maxreadreq:
    size: 4096

- name: Two GPUs by address, with the switch ports above them
  gpufleet.tuning.pcie_maxreadreq:
    size: 4096
    devices:
      - "0000:41:00.0"
      - "c1:00.0"
    include_bridges: true

- name: Report only (run with --check), nothing persisted
  gpufleet.tuning.pcie_maxreadreq:
    size: 4096
    persist: false
  check_mode: true
  register: mrrs

- name: Remove the udev rule and helper
  gpufleet.tuning.pcie_maxreadreq:
    persist: false
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
    - {"area": "pcie", "kind": "value", "target": "0000:41:00.0 max_read_request_size", "before": "512", "after": "4096"}
    - {"area": "pcie", "kind": "file", "target": "/etc/udev/rules.d/90-gpufleet-pcie-maxreadreq.rules", "before": null,
       "after": {"sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "size": 512, "mode": "0644"}}
size:
  description: The requested Max Read Request Size in bytes.
  returned: always
  type: int
  sample: 4096
devices:
  description: Every selected device (and with O(include_bridges) the bridges above them), by
    address; empty when nothing matched.
  returned: always
  type: list
  elements: dict
  contains:
    bdf:
      description: PCI address.
      type: str
      sample: "0000:41:00.0"
    role:
      description: C(selected), or C(upstream bridge) for a bridge added by O(include_bridges).
      type: str
    upstream_of:
      description: For a bridge, the selected devices below it.
      type: list
      elements: str
    vendor:
      description: Vendor ID as sysfs prints it.
      type: str
      sample: "0x10de"
    device:
      description: Device ID as sysfs prints it.
      type: str
      sample: "0x2335"
    class:
      description: Class code as sysfs prints it.
      type: str
      sample: "0x030200"
    driver:
      description: Bound driver, null when none.
      type: str
      sample: nvidia
    numa_node:
      description: NUMA node of the device (-1 when the platform does not say).
      type: int
    port_type:
      description: PCI Express device/port type (endpoint, root port, switch upstream port, ...).
      type: str
    express_cap:
      description: Offset of the PCI Express capability.
      type: str
      sample: "0x60"
    devctl_before:
      description: Device Control word before this run.
      type: str
      sample: "0x2134"
    devctl_after:
      description: Device Control word after this run (planned in check mode).
      type: str
      sample: "0x5134"
    mrrs_before:
      description: Max Read Request Size in bytes before this run; null when unknown.
      type: int
      sample: 512
    mrrs_after:
      description: Max Read Request Size after this run (planned in check mode).
      type: int
      sample: 4096
    mps:
      description: Max Payload Size in bytes, as set in Device Control.
      type: int
      sample: 256
    mps_supported:
      description: Largest Max Payload Size the device supports (Device Capabilities).
      type: int
    link:
      description:
        - The link as found, from Link Capabilities and Link Status (C(source=config)), or from
          sysfs when config space could not be read (C(source=sysfs)); C(sysfs) holds the
          kernel's own attributes as read, for cross-checking.
        - C(degraded) is true when the current speed or width is below the capable one, and
          C(degraded_reason) says which.
      type: dict
      sample: {"speed": "32.0 GT/s", "width": 16, "gen": 5, "capable_speed": "32.0 GT/s",
               "capable_width": 16, "capable_gen": 5, "degraded": false, "degraded_reason": null,
               "source": "config", "sysfs": {"current_link_speed": "32.0 GT/s PCIe",
               "current_link_width": "16", "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"}}
    changed:
      description: Whether this device's Device Control was (or would be) written.
      type: bool
    reason:
      description: Why the device was left alone (needs root, no PCI Express capability, a
        corrupt capability list, a reserved MRRS encoding); null otherwise.
      type: str
skipped_keys:
  description:
    - Address of each device left alone, with the reason (the same as its C(reason)).
    - Named like the other modules' C(skipped_keys), not C(skipped), because Ansible reports
      any task whose result has a true C(skipped) as skipped.
  returned: always
  type: dict
  sample: {"0000:00:02.0": "no PCI Express capability (ID 0x10) in the capability list"}
files:
  description: The persistence files this module manages (helper, udev rule).
  returned: always
  type: list
  elements: str
  sample: ["/usr/local/libexec/gpufleet/pcie-maxreadreq", "/etc/udev/rules.d/90-gpufleet-pcie-maxreadreq.rules"]
persisted:
  description: Whether the udev persistence is installed after this run (O(persist)).
  returned: always
  type: bool
container:
  description: Whether the module runs inside a container, and the evidence.
  returned: always
  type: dict
  contains:
    detected:
      description: True when strong evidence of a container was found.
      type: bool
    kind:
      description: Container type when known (lxc, podman, docker, user-namespace, ...).
      type: str
    evidence:
      description: What the decision rests on.
      type: list
      elements: str
    ignored:
      description: Weak markers seen but not trusted alone (such as a stale /.dockerenv).
      type: list
      elements: str
  sample: {"detected": false, "kind": null, "evidence": [], "ignored": ["/.dockerenv exists"]}
reboot_required:
  description: Always false; the size takes effect at once.
  returned: always
  type: bool
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

from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_maxreadreq
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(pcie_maxreadreq.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return pcie_maxreadreq.run(params, check_mode, pcie_maxreadreq.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
