#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done on the controller by the action plugin of the same name
# (plugins/action/profile_select.py); this file holds its documentation for ansible-doc.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: profile_select
short_description: Choose a host's tuning profile from its facts and record profile.json on the controller
version_added: 0.1.0
description:
  - Reads the profiles (O(profiles_dir) - C(base.yml), C(platforms/*.yml), C(intents/*.yml) - with
    O(profiles_extra) layered over them) and checks them; a profile that names a variable no
    profile can set, a value of the wrong type, a regular expression that does not compile or
    a key it does not know is refused with a message naming the file, the entry and the value.
  - "Describes the node from its facts (M(gpufleet.tuning.node_facts)): its GPUs (PCI device id,
    NVML name, architecture), the interconnect (C(nvswitch), C(nvlink), C(pcie_switch), C(pcie)),
    the CPU vendor and the node kind (C(bare_metal), C(proxmox_host), C(vm), C(lxc_guest),
    C(container))."
  - Chooses the platform that holds every GPU of the node (by PCI device id, else by name); the
    interconnect, CPU vendor and node kind a platform C(prefer)s break ties. No platform holds
    them (an unknown GPU, mixed models, no GPU) - the C(base) profile, and the reason.
    O(pin) (the inventory's C(gpufleet_profile)) wins over the facts; what the facts would have
    chosen is returned beside it.
  - "Layers the settings: C(base), then the platform, then the O(intent); a mapping is combined key by key, a list or a scalar
    replaced. The roles' defaults read them (C(profile_settings)), so the inventory's own
    variables still win."
  - Refuses a profile whose own settings break its guard rails (O(waive) steps over named rails).
    The host role checks the rails again on the values in effect after the inventory.
  - Checks the facts-only expectations (GPU count for the node kind, active NVLinks per GPU).
  - Writes C(profile.json) into O(path), whole and atomically, only when its bytes differ.
  - Runs in the controller process; no module is sent to the host.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written. The profile role sets C(check_mode) false on the
      task, so the record is kept in a check-mode run too (it changes nothing on the host).
  diff_mode:
    support: full
    description: With a pinned profile other than the one the facts choose, the diff shows the
      settings of each, with the layer each comes from (also in RV(pin_diff); the task reports no
      change, so Ansible's default output shows the diff through the profile role's next task).
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
    description: The host's facts as M(gpufleet.tuning.node_facts) returns them.
    type: dict
    required: true
  profiles_dir:
    description: The folder of the shipped profiles (the profile role's C(files)), an absolute path.
    type: path
    required: true
  profiles_extra:
    description:
      - The inventory's profiles, C(base), C(platforms) and C(intents), each a mapping of name to
        profile. A shipped name is merged over the shipped profile (its lists replaced whole); a
        new name adds a platform or an intent.
    type: dict
    default: {}
  pin:
    description: A platform profile name (or V(base)) to use whatever the facts say. Empty chooses from the facts.
    type: str
    default: ""
  intent:
    description: The intent layered last, V(throughput) or V(latency) as shipped, or one of O(profiles_extra).
    type: str
    default: throughput
  waive:
    description: Guard rail names to step over; each is still reported (C(profile.violations), C(waived)).
    type: list
    elements: str
    default: []
  path:
    description: The host's folder on the controller, an absolute path; made when missing. Empty writes nothing.
    type: path
  mode:
    description: Permission bits of the file, an octal string.
    type: str
    default: "0644"
notes:
  - docs/profiles.md lists the shipped profiles, their expectations and guard rails, and how to extend them.
seealso:
  - module: gpufleet.tuning.node_facts
  - module: gpufleet.tuning.node_normal
"""

EXAMPLES = r"""
- name: Choose the profile from a node_facts result
  gpufleet.tuning.profile_select:
    host: "{{ inventory_hostname }}"
    facts: "{{ read.facts }}"
    profiles_dir: "{{ playbook_dir }}/../roles/profile/files"
    intent: latency
    path: "{{ inventory_hostname | gpufleet.tuning.artifact_dir(playbook_dir ~ '/../artifacts') }}"
  register: chosen
  check_mode: false

- name: Say which and why
  ansible.builtin.debug:
    msg: "{{ chosen.profile.name }}: {{ chosen.profile.reasons | join('; ') }}"
"""

RETURN = r"""
profile:
  description: The host's profile.
  returned: always
  type: dict
  contains:
    name:
      description: C(platform/intent).
      type: str
      sample: hgx-hopper/throughput
    platform:
      description: The platform profile, or V(base).
      type: str
    intent:
      description: The intent.
      type: str
    pinned:
      description: Whether the inventory pinned it.
      type: bool
    reasons:
      description: Why this profile - the facts that chose it, or the pin and what the facts would choose.
      type: list
      elements: str
      sample: ["8 x H200 SXM 141GB, by device id 10de:2335", "interconnect nvswitch, as the platform prefers"]
    auto:
      description: With a pin, what the facts alone choose (C(platform), C(reasons)).
      type: dict
    node:
      description: The node as the choice read it (C(gpus), C(gpu_count), C(interconnect), C(interconnects),
        C(kind), C(kind_why), C(cpu_vendor), C(cpus_online), C(cpu_count)).
      type: dict
    settings:
      description: The role variables the profile sets (the roles' defaults read them as C(profile_settings)).
      type: dict
    sources:
      description: Per setting, the layer it comes from (C(base), C(platform NAME), C(intent NAME)).
      type: dict
    expectations:
      description: What the node is held against - C(gpu_count) per node kind, C(p2p_floors),
        C(decode_efficiency_pct), C(models) (each with C(memory_bandwidth_gbps), C(nvlink_links)).
      type: dict
    guard_rails:
      description: The rails in force (base's and the platform's).
      type: list
      elements: dict
    violations:
      description: Rails the profile's own settings break (C(rail), C(problem), C(why), C(waived)); only waived ones remain.
      type: list
      elements: dict
    waived:
      description: The rails of O(waive) that are in force.
      type: list
      elements: str
    checks:
      description: The facts-only expectations (C(gpu_count), C(nvlink_links)), each with C(status)
        (V(ok), V(outside), V(unknown), V(not_applicable)), C(message), C(value), C(expected).
      type: list
      elements: dict
pin_diff:
  description: With O(pin) naming another profile than the facts choose, a unified diff of the
    two profiles' settings (with their layers), one line per item; empty otherwise. The profile
    role prints it in a C(--diff) run.
  returned: always
  type: list
  elements: str
path:
  description: O(path).
  returned: always
  type: str
files:
  description: The files written (or due, in check mode).
  returned: always
  type: list
  elements: str
"""
