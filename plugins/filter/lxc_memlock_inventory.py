# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory's LXC containers that live on a host (their gpufleet_lxc_host), as the host
role's LXC part takes them: by vmid (Proxmox) or by name (plain LXC), with the memlock limit each
asks for.

Why a filter and not the Jinja loop the host role had: every worker ansible-playbook forks
compiles each template it renders again (ansible-core keeps no compiled template between
workers), and that loop was the largest of the tuning call's templates, 4-8 ms of controller CPU
per host and pass on a 2-core controller (README "Speed of a tuning pass"); the filter's
expression compiles in well under 1 ms. It returns what the loop returned.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: lxc_memlock_inventory
short_description: The inventory's LXC containers of a host, for the host role's LXC part
version_added: 0.3.0
description:
  - Takes inventory host names (the C(gpu_containers) group) and returns, for each whose
    C(gpufleet_lxc_host) is O(host), C(guest) (its inventory name), C(vmid) (from
    C(gpufleet_lxc_vmid), as an integer) or else C(name) (from C(gpufleet_lxc_name)), and C(limit)
    (its C(gpufleet_lxc_memlock_limit), else O(limit)). A container with neither a vmid nor a
    name is left out. The order is the group's.
positional: hostvars, host, limit
options:
  _input:
    description: Inventory host names of containers.
    type: list
    elements: str
    required: true
  hostvars:
    description: The play's C(hostvars).
    type: raw
    required: true
  host:
    description: The host whose containers are wanted (C(inventory_hostname)).
    type: str
    required: true
  limit:
    description: The limit of a container that does not set C(gpufleet_lxc_memlock_limit).
    type: raw
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: This host's inventory containers
  ansible.builtin.debug:
    msg: "{{ groups.get('gpu_containers', []) | gpufleet.tuning.lxc_memlock_inventory(hostvars, inventory_hostname, 'unlimited') }}"
"""

RETURN = r"""
_value:
  description: One dict per container (C(guest), C(vmid) or C(name), C(limit)).
  type: list
  elements: dict
"""

from jinja2.filters import do_int


def lxc_memlock_inventory(guests, hostvars, host, limit):
    found = []
    for guest in guests or []:
        guest_vars = hostvars[guest]
        if guest_vars.get("gpufleet_lxc_host", "") != host:
            continue
        wanted = guest_vars.get("gpufleet_lxc_memlock_limit", limit)
        if "gpufleet_lxc_vmid" in guest_vars:
            # As Jinja's int filter converts (0 for what is not a number), the loop's behaviour.
            found.append({"guest": guest, "vmid": do_int(guest_vars["gpufleet_lxc_vmid"]), "limit": wanted})
        elif "gpufleet_lxc_name" in guest_vars:
            found.append({"guest": guest, "name": guest_vars["gpufleet_lxc_name"], "limit": wanted})
    return found


class FilterModule:
    def filters(self):
        return {"lxc_memlock_inventory": lxc_memlock_inventory}
