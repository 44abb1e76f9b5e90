#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_launch
short_description: Set a serving unit's launch command with a systemd drop-in the collection owns
version_added: 0.3.0
description:
  - Writes C(/etc/systemd/system/<unit>.d/<dropin_name>) holding an empty C(ExecStart=), which
    clears the unit's own command, and C(ExecStart=) with O(argv); optionally C(Environment=)
    lines. The vendor's unit file is never edited.
  - V(absent) removes that drop-in, so the unit runs its own command again.
  - The file carries a gpufleet.tuning marker; a file of that name without one is refused, never
    overwritten or removed.
  - The write is atomic and read back; a failure puts the file back as it was.
  - The module neither reloads systemd nor restarts the unit. RV(restart_required) says the
    server runs another command than the file now says until both are done
    (M(ansible.builtin.systemd_service) with C(daemon_reload=true) and C(state=restarted)).
  - The serving experiments (role gpufleet.tuning.serving_experiments) write each candidate's command
    with it and remove it to roll back; the rollout applies the kept flags with it; revert
    removes it like any recorded file.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads the drop-in and says what it would write or remove; writes nothing.
  diff_mode:
    support: full
    description: The drop-in's text before and after.
  platform:
    support: full
    platforms: posix
    description: A host or container where systemd runs the server.
options:
  unit:
    description:
      - The serving unit. C(.service) is added when the name has no suffix; another unit type is
        refused.
    type: str
    required: true
  argv:
    description:
      - The whole launch command, program first, one list item per argument, exactly as the
        program receives it (M(gpufleet.tuning.serving_unit) returns a unit's as RV(gpufleet.tuning.serving_unit#module:argv)).
      - Quoted for systemd when written (spaces, quotes, C($) and C(%) survive unchanged).
      - Required with O(state=present).
    type: list
    elements: str
    default: []
  environment:
    description: Variables set for the server, one C(Environment=) line each (a later drop-in
      or C(EnvironmentFile=) may still override them).
    type: dict
    default: {}
  prefix:
    description: ExecStart= prefixes to keep from the unit's own line (C(-), C(+), C(!), C(!!),
      C(@), C(:)), as M(gpufleet.tuning.serving_unit) reports them.
    type: str
    default: ""
  state:
    description: V(present) writes the drop-in; V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  dropin_name:
    description: The drop-in's file name, C(NN-gpufleet-NAME.conf). A later name (sorted) wins
      over it, so keep other drop-ins that set C(ExecStart=) out of the way.
    type: str
    default: 90-gpufleet-launch.conf
extends_documentation_fragment:
  - gpufleet.tuning.state_record
seealso:
  - module: gpufleet.tuning.serving_unit
    description: Reads the unit's effective command, the drop-ins merged.
  - name: systemd.unit(5), drop-in directories
    description: How a drop-in's settings apply after the unit file's.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html
"""

EXAMPLES = r"""
- name: Read the unit's command
  gpufleet.tuning.serving_unit:
    name: sglang.service
  register: unit

- name: Launch with one more flag
  gpufleet.tuning.serving_launch:
    unit: sglang.service
    argv: "{{ unit.argv + ['--enable-fused-moe-sum-all-reduce'] }}"
    state_path: /var/lib/gpufleet-tuning/state.json
  register: launch

- name: Restart on the new command
  ansible.builtin.systemd_service:
    name: sglang.service
    daemon_reload: true
    state: restarted
  when: launch.restart_required

- name: Back to the unit's own command
  gpufleet.tuning.serving_launch:
    unit: sglang.service
    state: absent
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
    - {"area": "serving_launch", "kind": "file", "target": "/etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf",
       "before": null, "after": {"sha256": "5d41...", "size": 311, "mode": "0644"}}
path:
  description: The drop-in.
  returned: always
  type: str
  sample: /etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf
unit:
  description: The unit, with its suffix.
  returned: always
  type: str
  sample: sglang.service
state:
  description: O(state) as applied.
  returned: always
  type: str
argv:
  description: The command the drop-in sets; null with O(state=absent).
  returned: always
  type: list
  elements: str
restart_required:
  description: The drop-in changed, so the running server still runs the command from before
    until systemd is reloaded and the unit restarted.
  returned: always
  type: bool
daemon_reload_required:
  description: The drop-in changed and systemd has not read it yet.
  returned: always
  type: bool
plan:
  description: What this run did, or in check mode would do.
  returned: always
  type: list
  elements: str
  sample: ["write /etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf"]
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

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_launch
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(serving_launch.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    def engine(params, check_mode):
        return serving_launch.run(params, check_mode)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
