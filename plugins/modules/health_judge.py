#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done on the controller by the action plugin of the same name
# (plugins/action/health_judge.py); this file holds its documentation for ansible-doc.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: health_judge
short_description: Judge one host's GPU health and write its health.json on the controller
version_added: 0.1.0
description:
  - Evaluates the audit's health rules (severity C(H) in the audit role's C(files/rules.yml),
    plus O(rules_extra), less O(rules_disabled)) on the node facts of one host, the way
    M(gpufleet.tuning.audit_judge) evaluates every rule.
  - "Turns them into a verdict: C(status) V(quarantined) when a finding blocks (by default every
    action but C(monitor) does), V(degraded) with only non-blocking findings, else V(healthy); the
    C(actions) to take, the heaviest first (C(rma), C(drain), C(reboot), C(reset_gpu),
    C(monitor)); the same per GPU."
  - "Under O(policy): C(quarantine) is true when the host must not be tuned or benchmarked
    (policy V(quarantine) or V(stop)); C(proceed) is true when it may (healthy, degraded, or
    policy V(report))."
  - Writes C(health.json) into O(path), whole and atomically, only when its bytes differ; a
    symbolic link where the folder or the file goes is refused before anything is written.
  - Runs in the controller process; no module is sent to the host.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written. The audit role sets C(check_mode) false on the
      task, so the verdict is recorded and the gate holds in a check-mode run too.
  diff_mode:
    support: none
    description: The verdict is the controller's record, not a change on a host.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only.
options:
  host:
    description: The host's inventory name.
    type: str
    required: true
  facts:
    description: The host's facts as M(gpufleet.tuning.node_facts) returns them, with at least the
      C(gpus), C(driver) and C(health) sections.
    type: dict
    required: true
  params:
    description: What the rules read as C(params); the health rules read C(params.health) (the
      thresholds, the XID catalog, the expected GPU and NVLink counts).
    type: dict
    default: {}
  rules_file:
    description: The rules file (the audit role's C(files/rules.yml)), an absolute path.
    type: path
    required: true
  rules_extra:
    description: More rules or overrides, as the audit takes them (only the C(H) ones count here).
    type: list
    elements: dict
    default: []
  rules_disabled:
    description: Ids of rules not to evaluate.
    type: list
    elements: str
    default: []
  policy:
    description: What a blocking finding does to the run (C(gpufleet_health_policy)).
    type: str
    choices: [quarantine, stop, report]
    default: quarantine
  phase:
    description: When the verdict was made, recorded in it.
    type: str
    choices: [before, after_reboot, after_failure, audit]
    default: before
  profile:
    description:
      - The host's profile (M(gpufleet.tuning.profile_select)'s C(profile)); health.json then
        carries its name and reasons (C(profile)) and its facts-only expectations
        (C(expectations) - GPU count for the node kind, active NVLinks per GPU). They do not
        change the verdict; the rollout's expectations gate judges them. Empty records none.
    type: dict
    default: {}
  path:
    description: The host's folder on the controller, an absolute path; made when missing.
    type: path
    required: true
  mode:
    description: Permission bits of the file, an octal string.
    type: str
    default: "0644"
seealso:
  - module: gpufleet.tuning.audit_judge
  - module: gpufleet.tuning.node_facts
  - module: gpufleet.tuning.health_textfile
"""

EXAMPLES = r"""
- name: Judge the health from a node_facts result
  gpufleet.tuning.health_judge:
    host: "{{ inventory_hostname }}"
    facts: "{{ read.facts }}"
    params:
      health: "{{ my_thresholds }}"
    rules_file: "{{ playbook_dir }}/../roles/audit/files/rules.yml"
    path: "{{ inventory_hostname | gpufleet.tuning.artifact_dir(playbook_dir ~ '/../artifacts') }}"
  register: health
  check_mode: false
  changed_when: false

- name: Leave a sick host out
  ansible.builtin.meta: end_host
  when: health.quarantine
"""

RETURN = r"""
host:
  description: The host's inventory name.
  returned: always
  type: str
time:
  description: When it was judged, UTC, ISO 8601.
  returned: always
  type: str
phase:
  description: O(phase).
  returned: always
  type: str
status:
  description: V(healthy), V(degraded) or V(quarantined).
  returned: always
  type: str
  sample: quarantined
policy:
  description: O(policy).
  returned: always
  type: str
blocking:
  description: True when a finding blocks (the status is V(quarantined)).
  returned: always
  type: bool
quarantine:
  description: True when the host must not be tuned or benchmarked (blocking, and the policy is not V(report)).
  returned: always
  type: bool
proceed:
  description: True when the run may tune the host.
  returned: always
  type: bool
actions:
  description: The findings' distinct actions, the heaviest first.
  returned: always
  type: list
  elements: str
  sample: [rma, reset_gpu]
counts:
  description: Findings, blocking findings, findings by action, and the rules unknown, optimal and not applicable.
  returned: always
  type: dict
  sample: {"findings": 2, "blocking": 2, "by_action": {"monitor": 0, "reset_gpu": 1, "reboot": 0, "drain": 0, "rma": 1},
           "unknown": 0, "optimal": 30, "not_applicable": 9}
findings:
  description: The health findings (rule, severity, title, item, message, action, blocking, fix,
    rationale, values, sources).
  returned: always
  type: list
  elements: dict
unknown:
  description: The health rules that could not be judged, with the reasons.
  returned: always
  type: list
  elements: dict
profile:
  description: The profile of O(profile) - C(name), C(platform), C(reasons) - or null.
  returned: always
  type: dict
expectations:
  description: The profile's facts-only expectation checks (C(check), C(item), C(status), C(message), C(value), C(expected)).
  returned: always
  type: list
  elements: dict
gpus:
  description: Per GPU, its index, bdf, name, status, actions and the rules that named it.
  returned: always
  type: list
  elements: dict
rules:
  description: The health rules evaluated.
  returned: always
  type: list
  elements: str
disabled:
  description: O(rules_disabled).
  returned: always
  type: list
  elements: str
facts:
  description: The facts the verdict rests on (the health section, each GPU's health facts, the driver's).
  returned: always
  type: dict
path:
  description: O(path).
  returned: always
  type: str
files:
  description: The file written (or due, in check mode), with name, path, size, sha256 and changed.
  returned: always
  type: list
  elements: dict
"""
