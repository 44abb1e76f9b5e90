#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done on the controller by the action plugin of the same name
# (plugins/action/audit_judge.py); this file holds its documentation for ansible-doc.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: audit_judge
short_description: Judge one host's audit and write its audit.json and system-improve.md on the controller
version_added: 0.1.0
description:
  - Evaluates the audit rules (the audit role's C(files/rules.yml), plus O(rules_extra), less
    O(rules_disabled)) on the node facts of one host, as the filter
    P(gpufleet.tuning.audit_rules#filter) does, with O(params) (the host role's settings) and
    O(plan) (what each tuning part would change, filter P(gpufleet.tuning.audit_planned#filter)).
  - Adds the host's name, the time (UTC), the plan and the facts, and the comparison with the
    C(audit.json) already in O(path) (filter P(gpufleet.tuning.audit_since#filter), which says what was
    fixed and what is new since; none when there is no previous file, or it is not a regular
    file, or not an audit).
  - Writes C(audit.json) and C(system-improve.md) (filter P(gpufleet.tuning.audit_report#filter))
    into O(path), each whole and atomically, with mode O(mode), and only when its bytes or mode
    differ. A symbolic link where the folder or a file should be, or anything but a regular
    file where a file goes, is refused with an error naming it before anything is written.
  - Runs in the controller process itself, for whatever host the task is; no module is sent to
    a host. The rules file is read with YAML's safe loader.
  - The result is the audit itself at its top level (what C(audit.json) holds). The audit role
    calls it once per host (its C(report) entry point) and registers it as C(audit_result).
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written; C(changed) says whether a write was due. The
      audit role sets C(check_mode) false on the task, so the audit is kept in check mode too.
  diff_mode:
    support: none
    description: The audit is the controller's record, not a change on a host; no diff is shown.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only, which is POSIX.
options:
  host:
    description: The host's inventory name, recorded as the audit's C(host).
    type: str
    required: true
  facts:
    description: The host's facts as M(gpufleet.tuning.node_facts) returns them (its C(facts)).
    type: dict
    required: true
  plan:
    description: What each tuning part would change, by phase (C(runtime), C(reboot_required)) and
      module, as the filter P(gpufleet.tuning.audit_planned#filter) gives it.
    type: dict
    default: {}
  params:
    description: The settings the rules compare with (the rules read them as C(params)).
    type: dict
    default: {}
  rules_file:
    description: The rules file (YAML, in the form of the audit role's C(files/rules.yml)), an absolute path.
    type: path
    required: true
  rules_extra:
    description: More rules, in the same form, evaluated after those of O(rules_file).
    type: list
    elements: dict
    default: []
  rules_disabled:
    description: Ids of rules not to evaluate.
    type: list
    elements: str
    default: []
  profile:
    description:
      - The host's profile (M(gpufleet.tuning.profile_select)'s C(profile)). The audit then keeps
        it (C(profile) - its name, why it was chosen, its settings with their layers, the
        facts-only expectation checks, its guard rails) and system-improve.md gets a Profile
        section saying which profile and why, and per setting whether the node has it yet (from
        the plan of the part it sets). Left out, neither is written.
    type: dict
  path:
    description: The host's audit folder on the controller, an absolute path (the filter
      P(gpufleet.tuning.artifact_dir#filter) gives it); made when missing.
    type: path
    required: true
  mode:
    description: Permission bits of the files, an octal string.
    type: str
    default: "0644"
seealso:
  - module: gpufleet.tuning.artifact_files
  - module: gpufleet.tuning.node_facts
"""

EXAMPLES = r"""
- name: By hand, from a node_facts result
  gpufleet.tuning.audit_judge:
    host: "{{ inventory_hostname }}"
    facts: "{{ read.facts }}"
    rules_file: "{{ playbook_dir }}/../roles/audit/files/rules.yml"
    path: "{{ inventory_hostname | gpufleet.tuning.artifact_dir(playbook_dir ~ '/../artifacts') }}"
  register: audit_result
  check_mode: false
  changed_when: false
"""

RETURN = r"""
host:
  description: The host's inventory name.
  returned: always
  type: str
  sample: gpu-01
time:
  description: When it was judged, UTC, ISO 8601.
  returned: always
  type: str
  sample: "2026-12-01T07:00:00Z"
profile:
  description: What the audit keeps of O(profile) (C(name), C(platform), C(intent), C(reasons),
    C(settings), C(sources), C(expectations), C(checks), C(guard_rails) by name, C(violations),
    C(waived)), or null when it was given empty.
  returned: when O(profile) is given
  type: dict
findings:
  description: The rules that found something to fix, most severe first (rule, severity, title,
    item, message, fix, rationale, values, sources).
  returned: always
  type: list
  elements: dict
optimal:
  description: The rules whose check holds.
  returned: always
  type: list
  elements: dict
unknown:
  description: The rules that could not be judged, with the reasons (a fact that could not be read).
  returned: always
  type: list
  elements: dict
not_applicable:
  description: The rules that do not apply to this node, with why.
  returned: always
  type: list
  elements: dict
counts:
  description: Findings by severity, and how many rules were optimal, unknown and not applicable.
  returned: always
  type: dict
  sample: {"P0": 1, "P1": 3, "P2": 2, "optimal": 20, "unknown": 1, "not_applicable": 4}
worst:
  description: The most severe finding's severity, or null without a finding.
  returned: always
  type: str
  sample: P0
rules:
  description: Which rules were evaluated (from the file, extra, disabled).
  returned: always
  type: dict
planned:
  description: O(plan), as judged.
  returned: always
  type: dict
facts:
  description: O(facts), as judged.
  returned: always
  type: dict
since:
  description: The comparison with the previous audit.json (fixed, new, still, previous_time), or
    C(none) true with the reason.
  returned: always
  type: dict
path:
  description: O(path).
  returned: always
  type: str
files:
  description: The files written (or due, in check mode), each with name, path, size, sha256 and changed.
  returned: always
  type: list
  elements: dict
"""
