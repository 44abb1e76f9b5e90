#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tuning_state
short_description: Keep the node's record of what gpufleet.tuning changed, and find drift
version_added: 0.3.0
description:
  - Keeps, on the node, the state a revert needs (O(path), root's alone, written atomically),
    for every item the collection's modules change, the value or file content that was there
    before the collection first touched it, the value it was left at, and the run that did it.
  - With O(planned), the change records of the audit's check-mode plan, run before the tuning,
    records each target's before-value and reads each planned file's content while it is still
    untouched. With O(applied), the records the tuning really made, marks those items applied
    with the value they were left at. An item recorded once keeps its first before, whatever
    later runs do.
  - With O(mode=drift), reads every applied item back and lists those that no longer hold the
    value recorded (changed by hand, reset by a package, lost at a reboot). It changes nothing.
  - An item is a sysctl, a sysfs value (a CPU idle state, a cpufreq policy), a PCIe register
    (Max Read Request Size, ACS Control), a kernel module or a file. Value records that describe
    a file's content (an LXC config line, a kernel argument, a driver option) are covered by
    the file's record.
  - gpufleet.tuning.tuning_revert puts the recorded items back.
  - The state file is data, checked item by item when it is read. An item no module of the
    collection records is neither read back nor recorded over and is listed in RV(refused); a
    change record of that kind in O(planned) or O(applied) (a file outside the paths its area
    writes) fails the call before anything is recorded.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reports what it would record and writes nothing.
  diff_mode:
    support: full
    description: Shows the recorded items (files by digest) before and after.
  platform:
    support: full
    platforms: posix
    description: Linux; file contents are read with the module's privileges (root).
options:
  path:
    description: The state file.
    type: path
    default: /var/lib/gpufleet-tuning/state.json
  mode:
    description:
      - V(record) adds O(planned) and O(applied) to the state; V(drift) reads the applied items
        back and changes nothing.
    type: str
    default: record
    choices: [record, drift]
  run_id:
    description: The run's id, kept with each item and in the history; a new one when left out.
    type: str
  planned:
    description:
      - Change records of a check-mode run of the same modules with the same arguments (the
        audit's plan), before the tuning runs. Their before-values and the planned files'
        current content are recorded for items not yet in the state.
    type: list
    elements: raw
    default: []
  applied:
    description:
      - Change records the tuning made in this run.
      - A file record whose C(after) is C({}) stands for a file a role task wrote itself (with
        M(ansible.builtin.copy), say); its digest is read from the file as it is now. Plan it
        first (O(planned)) so that its earlier content is kept.
    type: list
    elements: raw
    default: []
  prune:
    description:
      - Drop the items O(run_id) planned and did not apply (a part with nothing to do, one a
        failure rolled back, reboot-required parts of a runtime-only run), so that their
        before is taken again by the run that really changes them. Give it with the last
        O(applied) call of a run.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Record what the tuning is about to change, from the audit's plan
  gpufleet.tuning.tuning_state:
    run_id: "{{ gpufleet_run_id }}"
    planned: "{{ audit_plan_records }}"

- name: Record what it changed, forgetting what it planned and did not change
  gpufleet.tuning.tuning_state:
    run_id: "{{ gpufleet_run_id }}"
    applied: "{{ host_changes }}"
    prune: true

- name: List recorded settings that no longer hold
  gpufleet.tuning.tuning_state:
    mode: drift
  register: drift
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
    - {"area": "state", "kind": "file", "target": "/var/lib/gpufleet-tuning/state.json", "before": null,
       "after": {"sha256": "5d41402abc4b2a76b9719d911017c592ae1b2ee3b7e1d8b95c1c1e2d1f0b6f3a", "size": 1840, "mode": "0600"}}
run_id:
  description: The run id recorded (mode=record).
  returned: when mode is record
  type: str
  sample: 20261201T070102Z-1a2b3c
path:
  description: The state file.
  returned: always
  type: str
recorded:
  description: Keys of the items recorded for the first time (C(sysctl:vm.swappiness)).
  returned: when mode is record
  type: list
  elements: str
updated:
  description: Keys of known items whose applied value this run recorded.
  returned: when mode is record
  type: list
  elements: str
dropped:
  description: Keys of items this run planned and did not apply, dropped with O(prune).
  returned: when mode is record
  type: list
  elements: str
items:
  description: How many items the state holds.
  returned: always
  type: int
not_restorable:
  description: Keys of files changed without their earlier content recorded; a revert leaves them.
  returned: when mode is record
  type: list
  elements: str
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
checked:
  description: How many applied items were read back.
  returned: when mode is drift
  type: int
drifted:
  description: True when at least one recorded setting no longer holds.
  returned: when mode is drift
  type: bool
drift:
  description: Each recorded setting that no longer holds.
  returned: when mode is drift
  type: list
  elements: dict
  contains:
    key:
      description: The item's key.
      type: str
    area:
      description: The module area that changed it.
      type: str
    kind:
      description: V(sysctl), V(sysfs), V(pcie_mrrs), V(pcie_acs), V(kmod) or V(file).
      type: str
    target:
      description: The key, path, PCI address or module.
      type: str
    recorded:
      description: The value the collection left (a file by digest).
      type: raw
    current:
      description: The value now, or why it cannot be read.
      type: raw
    recorded_by:
      description: The run that last set it.
      type: str
  sample:
    - {"key": "sysctl:vm.swappiness", "area": "sysctl", "kind": "sysctl", "target": "vm.swappiness",
       "recorded": "10", "current": "60", "recorded_by": "20261201T070102Z-1a2b3c"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_state
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=tuning_state.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: tuning_state.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
