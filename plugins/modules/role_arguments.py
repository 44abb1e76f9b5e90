#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done on the controller by the action plugin of the same name
# (plugins/action/role_arguments.py); this file holds its documentation for ansible-doc.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: role_arguments
short_description: Check this collection's roles' variables against their argument specs, several roles in one task
version_added: 0.3.0
description:
  - For each role of O(roles), reads the options of its entry point O(entry_point) from the role's
    C(meta/argument_specs.yml), templates the variables of those names that are set for the
    host (role defaults included), and checks them as Ansible's own role argument validation
    does (C(ansible.module_utils.common.arg_spec.ArgumentSpecValidator)).
  - Fails with C(Validation of arguments failed:) and one line per error, each naming its role;
    nothing is read from or written to the host.
  - Meant for playbooks that import the roles with C(rolespec_validate=false) - Ansible's
    validation is then left out, and one task per host checks every role of the play. It costs a
    fraction of Ansible's validation task (which carries the whole spec, descriptions included,
    as its arguments; see the collection's README, "Speed of a tuning pass").
    C(playbooks/tune.yml) goes one step further and has the host role's tuning call make the
    same check (the C(role_arguments) option of M(gpufleet.tuning.host_tuning)), which saves the
    task.
  - Runs in the controller process for whatever host the task is; each spec file is parsed once
    per process while it is unchanged.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads and checks only; the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only, which is POSIX.
options:
  roles:
    description:
      - Roles of this collection, by short name (V(host)) or full name (V(gpufleet.tuning.host)).
        A name that is not one of its roles is an error listing them.
    type: list
    elements: str
    required: true
  entry_point:
    description: The entry point of each role's argument spec (its C(tasks_from) name).
    type: str
    default: main
seealso:
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the audit and host roles' variables, then import both without Ansible's validation
  gpufleet.tuning.role_arguments:
    roles: [gpufleet.tuning.audit, gpufleet.tuning.host]
  tags: [always]

- name: Tune
  ansible.builtin.import_role:
    name: gpufleet.tuning.host
    rolespec_validate: false
"""

RETURN = r"""
roles:
  description: The roles checked.
  returned: success
  type: list
  elements: str
  sample: [gpufleet.tuning.audit, gpufleet.tuning.host]
argument_errors:
  description: One message per error, each starting with its role's name.
  returned: failure
  type: list
  elements: str
  sample: ["gpufleet.tuning.host: value of host_pcie_size must be one of: 128, 256, 512, 1024, 2048, 4096, got: 1000"]
"""
