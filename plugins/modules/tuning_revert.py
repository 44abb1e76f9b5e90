#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tuning_revert
short_description: Put back everything gpufleet.tuning changed on the node
version_added: 0.3.0
description:
  - Reads the state gpufleet.tuning.tuning_state keeps (O(path)) and, for every recorded item
    whose value now differs from the one found before the collection first changed it, writes
    that value back and reads it back. Sysctls, CPU idle states and cpufreq policies, PCIe
    Max Read Request Size and ACS Control, files (exact bytes, mode and owner; files the
    collection created are removed, boot helpers and udev rules included) and kernel modules
    the collection loaded (unloaded with C(modprobe -r)).
  - Then what makes restored files take effect, where they were restored - C(update-grub) (or
    C(proxmox-boot-tool refresh) for C(/etc/kernel/cmdline)) for a kernel command line, the
    initramfs rebuilt (C(update-initramfs -u) or C(dracut --force)) for NVIDIA driver options,
    C(systemctl daemon-reload) for unit files (C(daemon-reexec) for the manager's own
    C(system.conf.d)). Kernel command line and driver options take
    effect at the next boot; they are listed in RV(pending_reboot) and RV(reboot_required) is
    true.
  - All or nothing - a failure puts back what this run had restored, so the node stays as tuned
    as it was and the state file is not touched.
  - Restored items, and items already at their earlier value, leave the state file, so a
    second revert changes nothing. A file whose earlier content was never recorded is left as
    it is, with a warning.
  - Only what the collection's modules write is put back - the state file is data, checked item by
    item when it is read. An item none of them records (a file outside the paths of its area, a
    link to another file, a setuid or world-writable mode, any other sysfs file or kernel module)
    is never written; it is listed in RV(refused) with the reason and a warning, and the other
    items are reverted as usual.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Lists what it would put back; writes nothing.
  diff_mode:
    support: full
    description: Each item's value now and the value it would get back (files by digest).
  platform:
    support: full
    platforms: posix
    description: Linux, run as root.
options:
  path:
    description: The state file.
    type: path
    default: /var/lib/gpufleet-tuning/state.json
  areas:
    description: Revert only the items of these areas; all when empty.
    type: list
    elements: str
    default: []
  reboot_required:
    description: Include the items that take effect at the next boot (kernel command line, NVIDIA driver options).
    type: bool
    default: true
  run_id:
    description: The id kept in the state's history for this revert; a new one when left out.
    type: str
  only_run:
    description:
      - Undo only what the run of this id changed, back to what that run found - its before for
        items it changed first, else the value an earlier run had left (a file's earlier content
        only when that run's plan recorded it). A rollout reverts a failing host this way, so
        what earlier runs tuned stays tuned.
      - Left out, everything recorded goes back to its value before the collection first changed it.
    type: str
"""

EXAMPLES = r"""
- name: Put the node back as it was before the tuning
  gpufleet.tuning.tuning_revert:
  register: revert

- name: Undo one run only (a rollout's automatic revert of a failing host)
  gpufleet.tuning.tuning_revert:
    only_run: "{{ gpufleet_run_id }}"

- name: Only the runtime items of the sysctl and PCIe areas
  gpufleet.tuning.tuning_revert:
    areas: [sysctl, pcie]
    reboot_required: false
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` is documented with the
# same text in every module of this collection; keep the copies equal.
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
    - {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "10", "after": "60"}
    - {"area": "sysctl", "kind": "file", "target": "/etc/sysctl.d/90-gpufleet-inference.conf",
       "before": {"sha256": "5d41402abc4b2a76b9719d911017c592ae1b2ee3b7e1d8b95c1c1e2d1f0b6f3a", "size": 214, "mode": "0644"},
       "after": null}
path:
  description: The state file.
  returned: always
  type: str
only_run:
  description: The run undone (O(only_run)); null for a full revert.
  returned: always
  type: str
restored:
  description: The items put back (in check mode, that would be).
  returned: always
  type: list
  elements: dict
  contains:
    key:
      description: The item's key.
      type: str
    area:
      description: The module area that had changed it.
      type: str
    kind:
      description: V(sysctl), V(sysfs), V(pcie_mrrs), V(pcie_acs), V(kmod) or V(file).
      type: str
    target:
      description: The key, path, PCI address or module.
      type: str
    before:
      description: The value put back (a file by digest, or V(absent)).
      type: str
    current:
      description: The value it had.
      type: str
    reboot:
      description: True when the item takes effect at the next boot.
      type: bool
    recorded_by:
      description: The run that first changed it.
      type: str
  sample:
    - {"key": "sysctl:vm.swappiness", "area": "sysctl", "kind": "sysctl", "target": "vm.swappiness",
       "before": "60", "current": "10", "reboot": false, "recorded_by": "20261201T070102Z-1a2b3c"}
already:
  description: Keys of items that already held their earlier value (dropped from the state).
  returned: always
  type: list
  elements: str
not_restorable:
  description: Files left as they are because their earlier content was never recorded.
  returned: always
  type: list
  elements: dict
refused:
  description:
    - Items of the state file that no module of the collection records, set aside when the file is
      read - a file outside the paths its area writes, a link other than the ones a module records,
      a mode with setuid, setgid or sticky bits or writable by others, a file not root's (an LXC
      config keeps its owner), any other sysfs file, PCI address or value, any other kernel module.
    - They are never read back, recorded over or written, and stay in the state file as they were,
      each named here with the reason and in a warning; every other item is handled as usual.
  returned: always
  type: list
  elements: dict
  contains:
    key:
      description: The item's key in the state file.
      type: str
    kind:
      description: The item's kind as the file gives it (V(sysctl), V(sysfs), V(file), ...); null when missing.
      type: str
    area:
      description: The area the file gives it; null when missing.
      type: str
    target:
      description: The key, path, PCI address or module the file gives it; null when missing.
      type: str
    why:
      description: Why it is refused.
      type: str
  sample:
    - {"key": "file:/etc/cron.d/evil", "kind": "file", "area": "kernel_cmdline", "target": "/etc/cron.d/evil",
       "why": "/etc/cron.d/evil is not a file the kernel_cmdline area writes"}
pending_reboot:
  description: Targets restored in files that take effect at the next boot.
  returned: always
  type: list
  elements: str
reboot_required:
  description: True when RV(pending_reboot) is not empty.
  returned: always
  type: bool
restart_units:
  description:
    - Serving units whose launch drop-in (area C(serving_launch)) was put back (in check mode,
      would be). Each keeps running the command it started with until it is restarted; the
      revert role restarts them (C(revert_serving_restart_ok)) and waits until each is ready.
  returned: always
  type: list
  elements: str
  sample: ["sglang.service"]
commands:
  description: Commands run (in check mode, that would run) after the restores.
  returned: always
  type: list
  elements: str
  sample: ["/usr/sbin/update-grub", "/usr/bin/systemctl daemon-reload"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.commands import Commands


def main():
    module = AnsibleModule(argument_spec=tuning_revert.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: tuning_revert.run(module.params, check_mode=module.check_mode,
                                                     tools=Commands(module)))


if __name__ == "__main__":
    main()
