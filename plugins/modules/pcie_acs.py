#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pcie_acs
short_description: Clear the PCIe ACS redirect bits on the bridges between GPUs, read them back and keep them across reboots
version_added: 0.1.0
description:
  - Peer-to-peer traffic between two GPUs under one PCIe switch (or under two root ports) can
    turn around in the switch, or be sent up to the root complex first. PCIe Access Control
    Services (ACS, extended capability 0x000D) on the switch downstream port or root port
    decides it. P2P Request Redirect (RR, ACS Control bit 2), P2P Completion Redirect (CR,
    bit 3) and Upstream Forwarding (UF, bit 4) send peer requests up to the root complex,
    where many platforms route them slowly or drop them, while the driver still advertises the
    P2P path. The kernel sets these bits on every bridge when an IOMMU is on. This module
    clears the bits named in O(clear) on every bridge between two selected devices.
  - B(Risk.) ACS is an isolation feature. With it cleared, devices below a switch talk to
    each other without the IOMMU seeing the traffic, so the IOMMU no longer isolates them from
    each other. Do not use this on hosts that pass devices below those bridges to VMs or
    containers with vfio-pci. The module refuses a bridge with a vfio-pci device below it
    unless O(allow_with_vfio=true).
  - Which bridges. The bridges on the path between every pair of selected devices, below
    their lowest common ancestor, found from each device's real path under
    C(/sys/devices/pci*) as the node facts (gpufleet.tuning.node_facts) find them. Two devices
    under one switch have the two downstream ports. Two devices under different root ports
    have both root ports (and any switch ports below them). A bridge both paths share is where
    the traffic turns, so it is not touched.
  - How. Pure Python over C(/sys/bus/pci/devices/*/config); neither C(lspci) nor C(setpci) is
    needed. The ACS capability is read with the parser the node facts use. Only bits the ACS
    Capability register advertises are cleared; the others read 0 anyway and are reported in
    C(not_advertised). The 16-bit ACS Control word (capability + 6) is read right before the
    write, changed in the named bits only (egress control and direct translated P2P are never
    touched), written, and read back. A bridge whose read-back differs from what was written
    gets its old word back. The task then fails naming it with the word read back, after
    restoring every bridge this call changed (never half applied). A bridge without an ACS
    capability is reported, not an error.
  - Refusals (nothing is written). A device below a bridge to be changed bound to
    C(vfio-pci), unless O(allow_with_vfio). IOMMU domains that translate. When a selected
    device's C(iommu_group/type) is C(DMA) or C(DMA-FQ), clearing ACS only moves the failure
    (the IOMMU then rejects the peer traffic). The failure says that C(iommu=pt) on the kernel
    command line is the reboot-required other half (module gpufleet.tuning.kernel_cmdline).
    On NVIDIA Blackwell GPUs identity domains must never be used (they break the GPU's boot
    firmware), so there the answer is to keep ACS and the IOMMU as they are and accept staged
    copies, or change the platform. Inside a container (detected as the other modules do)
    writes are refused unless O(allow_in_container=true); looking is allowed, and a run with
    nothing to change is ok.
  - What it replaced is remembered. The first time it changes a bridge, the module records
    its ACS Control word, vendor and device in
    C(/var/lib/gpufleet-tuning/pcie-acs/state.json), written atomically. The file is data,
    never instructions. Every entry is validated when read, and a file that is not exactly
    what this module writes fails the task before anything is changed. O(state=absent) puts
    the remembered bits back on every bridge that still has the same vendor and device. It
    removes the udev rule and helper and forgets the entries it restored.
  - Persistence (O(persist=true)). The bits come back with a bridge reset, a hotplug and every
    reboot (the kernel sets them again while it enumerates the bridges). A udev rule,
    C(/etc/udev/rules.d/90-gpufleet-pcie-acs.rules), runs the helper
    C(/usr/local/libexec/gpufleet/pcie-acs) on C(add) and C(bind) of each bridge found
    (matched by address, vendor and device) and of each selected device. udev's coldplug
    replays C(add) for every device at boot, after the kernel's setting, and a hotplug or a
    port driver reload sends the same events. A boot unit was not chosen; it would run once
    per boot and miss hotplug and driver reloads. The helper computes the paths between the
    selected devices again on every event and acts only on a bridge still on one, so a
    renumbered bus never gets a stale address cleared. It checks the IOMMU domains and
    vfio-pci again too.
  - The helper is generated from this collection's C(module_utils/hw/pci_config.py),
    C(pcie_ext.py) and C(pci_acs.py) source, so the boot path runs the tested code. It is
    kept like the pcie_maxreadreq helper. It runs with a fixed system Python
    (C(/usr/bin/python3) or C(/usr/libexec/platform-python)), started C(-IS), and is written
    only where no user but root can change it, its directories or its interpreter. Files are
    root's, 0755 and 0644, and carry the collection's marker. A file at those paths without
    the marker is refused.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads every bridge and reports the planned words and files; writes nothing.
  diff_mode:
    support: full
    description: Shows ACS Control of every bridge, the state file and the persistence files before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with sysfs; writing needs root outside a container.
options:
  state:
    description:
      - V(present) clears the bits; V(absent) restores the words this module replaced and removes
        the persistence.
    type: str
    choices: [present, absent]
    default: present
  devices:
    description:
      - Endpoints whose peer traffic matters, as C(DDDD:BB:DD.F) or C(BB:DD.F), at least two.
        When given, O(vendor) and O(classes) are not used (for machines without NVIDIA GPUs,
        such as a test VM's NIC and NVMe behind two PCIe root ports).
      - An address with no device fails the task before anything is written.
    type: list
    elements: str
    default: []
  vendor:
    description:
      - PCI vendor ID of the endpoints to select when O(devices) is empty, as C(0x) and four hex
        digits (quote it in YAML).
    type: raw
    default: "0x10de"
  classes:
    description:
      - PCI classes to select with O(vendor), C(0x) and four hex digits (any programming
        interface) or six (exact). The default selects VGA and 3D controllers.
    type: list
    elements: raw
    default: ["0x0300", "0x0302"]
  clear:
    description:
      - ACS Control bits to clear on each bridge, where its ACS Capability advertises them.
      - V(source_validation) and V(translation_blocking) only when asked; P2P Egress Control and
        Direct Translated P2P are never touched.
    type: list
    elements: str
    choices: [source_validation, translation_blocking, request_redirect, completion_redirect, upstream_forwarding]
    default: [request_redirect, completion_redirect, upstream_forwarding]
  allow_with_vfio:
    description:
      - Clear ACS on a bridge with a device bound to C(vfio-pci) below it. With it, that device
        (and the VM it is passed to) can reach its neighbours below the bridge without the IOMMU.
    type: bool
    default: false
  persist:
    description:
      - Install the udev rule and its helper so the bits are cleared again at boot, on hotplug and
        when a driver binds. V(false) removes both if an earlier run installed them.
    type: bool
    default: true
  allow_in_container:
    description:
      - Write even when a container is detected. Only for a host that the detection wrongly calls
        a container; in a real privileged container a write changes the host's bridges.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - Writes are 16-bit config writes at ACS Control (capability + 6) and nothing else.
  - Under kernel lockdown the kernel refuses config space writes from user space; the failure
    says so.
  - The bits also come back after a suspend/resume or a reset of the bridge itself, which sends
    no udev event; run the module again (it is idempotent) or rebind the port driver.
  - RV(changes) holds a value record per bridge changed, named C(DDDD:BB:DD.F acs_control), with
    the words before and after, and a file record for the state file, the helper and the rule.
seealso:
  - module: gpufleet.tuning.kernel_cmdline
  - module: gpufleet.tuning.node_facts
  - name: Linux pci_regs.h, PCI_EXT_CAP_ID_ACS and PCI_ACS_*
    description: The ACS Capability and Control bits.
    link: https://github.com/torvalds/linux/blob/master/include/uapi/linux/pci_regs.h
  - name: NVIDIA GPUDirect RDMA, PCI Access Control Services
    description: Why ACS redirect breaks peer-to-peer transfers.
    link: https://docs.nvidia.com/cuda/gpudirect-rdma/index.html
"""

EXAMPLES = r"""
- name: Clear ACS redirect between every pair of NVIDIA GPUs, kept across reboots
  gpufleet.tuning.pcie_acs:

- name: The test VM's two endpoints behind two root ports, no persistence
  gpufleet.tuning.pcie_acs:
    devices: ["0000:01:00.0", "0000:02:00.0"]
    persist: false

- name: Report only
  gpufleet.tuning.pcie_acs:
  check_mode: true
  register: acs

- name: Put back what the module changed and remove the udev rule
  gpufleet.tuning.pcie_acs:
    state: absent
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
    - {"area": "pcie", "kind": "value", "target": "0000:03:08.0 acs_control", "before": "0x001d", "after": "0x0001"}
    - {"area": "pcie", "kind": "file", "target": "/etc/udev/rules.d/90-gpufleet-pcie-acs.rules", "before": null,
       "after": {"sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "size": 900, "mode": "0644"}}
msg:
  description: What was done, in one line.
  returned: always
  type: str
state:
  description: O(state) as given.
  returned: always
  type: str
clear:
  description: The bits asked to be cleared (O(clear)), in register order.
  returned: always
  type: list
  elements: str
endpoints:
  description: The selected devices (empty with O(state=absent)).
  returned: always
  type: list
  elements: dict
  contains:
    bdf: {description: PCI address., type: str}
    vendor: {description: Vendor ID as sysfs prints it., type: str}
    device: {description: Device ID as sysfs prints it., type: str}
    device_id: {description: "Vendor and device as C(10de:2330).", type: str}
    class: {description: Class code as sysfs prints it., type: str}
    driver: {description: "Bound driver, null when none.", type: str}
    architecture: {description: "NVIDIA GPU architecture from the device ID (hw/nvidia_gpus), null for other vendors.", type: str}
    chip: {description: "NVIDIA chip from the device ID, null when unknown.", type: str}
    iommu_domain: {description: "The IOMMU group type (C(DMA), C(DMA-FQ), C(identity)...), null without an IOMMU.", type: str}
bridges:
  description: Every bridge between two selected devices (with O(state=absent), every remembered one).
  returned: always
  type: list
  elements: dict
  contains:
    bdf: {description: PCI address of the bridge., type: str, sample: "0000:03:08.0"}
    between: {description: The selected devices whose paths pass it., type: list, elements: str}
    vendor: {description: Vendor ID., type: str, sample: "0x10b5"}
    device: {description: Device ID., type: str, sample: "0x8747"}
    driver: {description: Bound driver (pcieport)., type: str}
    port_type: {description: "PCI Express port type (C(root port), C(switch downstream port)...), null when unreadable.", type: str}
    acs_offset: {description: "Offset of the ACS capability, null without one.", type: str, sample: "0x148"}
    capability: {description: ACS Capability word., type: str, sample: "0x007f"}
    capability_bits: {description: The ACS features the bridge advertises., type: list, elements: str}
    ctrl_before: {description: ACS Control before this run., type: str, sample: "0x001d"}
    ctrl_after: {description: ACS Control after this run (planned in check mode)., type: str, sample: "0x0001"}
    cleared: {description: The bits this run cleared (would clear)., type: list, elements: str}
    not_advertised: {description: "Bits of O(clear) the capability does not advertise (left as they read, 0).", type: list, elements: str}
    changed: {description: Whether ACS Control was (or would be) written., type: bool}
    reason: {description: "Why the bridge was left alone (no ACS capability, needs root...), null otherwise.", type: str}
    restore_to: {description: "With O(state=absent), the remembered word.", type: str, returned: with state=absent}
    ctrl_read_back: {description: "On a failed run, the word a bridge that refused the write read back.", type: str, returned: on failure}
skipped_keys:
  description: Each bridge (or device, or C(udev rule)) left alone, with the reason. Not C(skipped), which Ansible reads as a skipped task.
  returned: always
  type: dict
state_file:
  description: Where the replaced words are remembered.
  returned: always
  type: str
  sample: /var/lib/gpufleet-tuning/pcie-acs/state.json
files:
  description: The persistence files this module manages (helper, udev rule).
  returned: always
  type: list
  elements: str
persisted:
  description: Whether the udev persistence is installed after this run.
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
  description: Always false; the bits take effect at once.
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

from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_acs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(pcie_acs.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return pcie_acs.run(params, check_mode, pcie_acs.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
