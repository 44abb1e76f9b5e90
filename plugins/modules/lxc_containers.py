#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lxc_containers
short_description: Find this host's LXC and Proxmox containers and select those to tune
version_added: 0.1.0
description:
  - Lists the containers of this host from their config files and tells, for each, whether
    the selector chooses it and why (or why not). Changes nothing; it only reads files, with
    no C(pct), C(lxc-ls) or Proxmox API call.
  - "Proxmox VE: C(/etc/pve/lxc/VMID.conf). C(/etc/pve/lxc) is the cluster filesystem's link
    to this node's directory, so containers of other cluster nodes are not listed. Proxmox's
    generated C(/var/lib/lxc/VMID/config) files are not containers of their own and are left
    out (see RV(ignored))."
  - "Plain LXC: C(/var/lib/lxc/NAME/config), and C(LXCPATH/NAME/config) for the
    C(lxc.lxcpath) of C(/etc/lxc/lxc.conf) when it names another directory. Containers of
    unprivileged users (C(~/.local/share/lxc)) and LXD or Incus instances are not read."
  - "Only the live section of a config counts, everything before the first line that starts
    with C([); snapshot sections and C([pve:pending]) are not the container's current
    configuration. A Proxmox template (C(template: 1)) is never selected."
  - "A container has an NVIDIA GPU passed through when its live section, or a file it pulls
    in with C(lxc.include), has a Proxmox C(devN) entry for C(/dev/nvidia*)
    (C(dev0: /dev/nvidia0)), a C(lxc.cgroup2.devices.allow) or C(lxc.cgroup.devices.allow)
    rule for a character major of the NVIDIA driver (C(c 195:* rwm), C(c 195:0 rwm), or the
    major C(/proc/devices) lists for C(nvidia-uvm) and the other C(nvidia*) drivers), an
    C(lxc.mount.entry) of C(/dev/nvidia*), or LXC's C(nvidia) hook. A rule for every device
    (C(c *:* rwm), C(a)) is not evidence of a GPU."
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: A Linux host; on a host with neither Proxmox VE nor LXC it reports no container.
options:
  select:
    description:
      - Which containers to select, as a list of terms; a container any term names is
        selected.
      - V(gpu) selects containers with an NVIDIA GPU passed through (see the description).
        V(all) selects every container that is not a template. V(none) selects none and
        cannot be combined with other terms.
      - V(tag:NAME) selects Proxmox containers tagged NAME (C(tags:), compared without case).
      - A number such as V(101) selects the Proxmox container with that ID, or the plain LXC
        container with that name. A name such as V(web) selects the plain LXC container named
        so, or Proxmox containers with that C(hostname); write V(name:gpu) for a container
        named like a keyword.
      - A term that names no container is returned in RV(unmatched), not an error, so one
        list can serve a whole fleet.
    type: list
    elements: str
    default: [gpu]
  exclude:
    description:
      - Containers never to select, with the same IDs, names and V(tag:NAME) terms as
        O(select); an excluded container is reported with the term that excluded it.
    type: list
    elements: str
    default: []
notes:
  - "Why O(select=gpu) is a sensible default for a memlock limit: an unlimited limit lets a
    container pin host memory that cannot be swapped or reclaimed (mlock, RDMA memory
    registration); only containers that serve models on the GPUs need it."
seealso:
  - module: gpufleet.tuning.lxc_memlock
  - name: Proxmox VE container configuration
    description: The file format, C(devN), C(tags), C(template), C(lock) and snapshots.
    link: https://pve.proxmox.com/wiki/Manual:_pct.conf
  - name: lxc.container.conf(5)
    description: C(lxc.cgroup2.devices.allow), C(lxc.mount.entry), C(lxc.include), hooks.
    link: https://linuxcontainers.org/lxc/manpages/man5/lxc.container.conf.5.html
"""

EXAMPLES = r"""
- name: Find the containers with NVIDIA GPUs passed through
  gpufleet.tuning.lxc_containers:
  register: containers

- name: Raise their memlock limit
  gpufleet.tuning.lxc_memlock:
    path: "{{ item.path }}"
    on_locked: pending
  loop: "{{ containers.containers | selectattr('selected') | list }}"
  loop_control:
    label: "{{ item.id }}"

- name: GPU containers and those tagged llm, but never container 105
  gpufleet.tuning.lxc_containers:
    select: [gpu, "tag:llm"]
    exclude: [105]

- name: Say which containers were left alone and why
  ansible.builtin.debug:
    msg: "{{ containers.containers | rejectattr('selected') | map(attribute='reason') | list }}"
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
    - {"area": "lxc_memlock", "kind": "value", "target": "/etc/pve/lxc/101.conf lxc.prlimit.memlock",
       "before": "65536", "after": "unlimited"}
    - {"area": "lxc_memlock", "kind": "file", "target": "/etc/pve/lxc/101.conf",
       "before": {"sha256": "9f2c...", "size": 612, "mode": "0640"},
       "after": {"sha256": "41ab...", "size": 643, "mode": "0640"}}
msg:
  description: One line about what was found.
  returned: always
  type: str
  sample: 3 container(s) found, 1 selected (gpu)
lxc_host:
  description: Whether this host runs Proxmox VE (C(/etc/pve) exists) or has an LXC path.
  returned: always
  type: bool
managers:
  description: V(proxmox), V(lxc) or both; empty on a host with neither.
  returned: always
  type: list
  elements: str
  sample: [proxmox, lxc]
node:
  description: The Proxmox node name, from C(/etc/pve/lxc) or C(/etc/pve/local); null when
    not known.
  returned: always
  type: str
  sample: pve-gpu-01
select:
  description: The O(select) terms as understood.
  returned: always
  type: list
  elements: str
  sample: [gpu]
exclude:
  description: The O(exclude) terms as understood.
  returned: always
  type: list
  elements: str
  sample: []
containers:
  description: Every container found, Proxmox ones by ID first, then plain LXC ones by name.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: The Proxmox ID, or the plain LXC name.
      type: str
    manager:
      description: V(proxmox) or V(lxc).
      type: str
    vmid:
      description: The Proxmox ID; null for plain LXC.
      type: int
    container_name:
      description: The LXC name (a Proxmox container's is its ID), as gpufleet.tuning.lxc_memlock
        returns it.
      type: str
    hostname:
      description: C(hostname) (Proxmox) or C(lxc.uts.name) (plain LXC), or null.
      type: str
    path:
      description: The config file; pass it to gpufleet.tuning.lxc_memlock as
        O(gpufleet.tuning.lxc_memlock#module:path).
      type: str
    lxc_path:
      description: The LXC path holding a plain LXC container; null for Proxmox.
      type: str
    template:
      description: Whether it is a Proxmox template.
      type: bool
    lock:
      description: Its Proxmox C(lock) (V(backup), V(snapshot), ...), or null.
      type: str
    tags:
      description: Its Proxmox tags.
      type: list
      elements: str
    gpu:
      description: Whether an NVIDIA GPU is passed through.
      type: bool
    gpu_evidence:
      description: The config lines that pass it through.
      type: list
      elements: str
    memlock:
      description: The C(lxc.prlimit.memlock) its live section sets, in canonical form, or null.
      type: str
    selected:
      description: Whether O(select) chose it (and O(exclude) did not).
      type: bool
    reason:
      description: Why it was selected, or why it was left alone.
      type: str
    error:
      description: Why its config could not be used (it is then not selected), or null.
      type: str
  sample:
    - {"id": "101", "manager": "proxmox", "vmid": 101, "container_name": "101",
       "hostname": "llm-serve-01", "path": "/etc/pve/lxc/101.conf", "lxc_path": null,
       "template": false, "lock": null, "tags": ["llm"], "gpu": true,
       "gpu_evidence": ["dev0: /dev/nvidia0"], "memlock": null, "selected": true,
       "reason": "NVIDIA GPU passed through (dev0: /dev/nvidia0)", "error": null}
selected:
  description: The IDs of the selected containers.
  returned: always
  type: list
  elements: str
  sample: ["101"]
left_alone:
  description: The IDs of the containers not selected (see each one's C(reason)).
  returned: always
  type: list
  elements: str
  sample: ["105"]
unmatched:
  description: ID, name and tag terms of O(select) and O(exclude) that named no container here.
  returned: always
  type: list
  elements: str
  sample: []
ignored:
  description: Config files that are not containers of their own, each with C(path) and
    C(reason) (Proxmox's generated C(/var/lib/lxc/VMID/config), invalid names).
  returned: always
  type: list
  elements: dict
sources:
  description: The directories read.
  returned: always
  type: list
  elements: str
  sample: [/etc/pve/lxc, /var/lib/lxc]
nvidia_majors:
  description: The character majors counted as the NVIDIA driver's (195 and those of
    C(/proc/devices)).
  returned: always
  type: list
  elements: int
  sample: [195, 508]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_containers
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=lxc_containers.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: lxc_containers.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
