# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's planned changes from the host role's published results: for each part, what the
run applied (host_results, its records are what it changed), else its check-mode plan
(host_plan), else not run; in a container every part skipped. Then the filter audit_planned on
that, so the plan's shape is audit_planned's whichever way a part came."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: audit_planned_host
short_description: The audit's planned changes, from the host role's results and plan
version_added: 0.4.0
description:
  - Takes the host role's C(host_results) (part to the result of this run's apply), its
    C(host_plan) (part to a check-mode result) and the parts of each phase, and returns what
    P(gpufleet.tuning.audit_planned#filter) returns for them - for each part the applied result,
    else the plan, else not run.
  - With O(in_container) every part is reported skipped - the host role runs them on the
    container's host.
positional: plan, parts, in_container
options:
  _input:
    description: The host role's C(host_results) (C({}) when it did not run).
    type: dict
    required: true
  plan:
    description: The host role's C(host_plan).
    type: dict
    required: true
  parts:
    description: Phase (C(runtime), C(reboot_required)) to the list of part names to report.
    type: dict
    required: true
  in_container:
    description: The node is a container; report every part skipped.
    type: bool
    default: false
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: What each part would change (or did, in this run)
  ansible.builtin.set_fact:
    planned: "{{ host_results | gpufleet.tuning.audit_planned_host(host_plan, {'runtime': ['sysctl_profile']}) }}"
"""

RETURN = r"""
_value:
  description: Phase to part name to the entry, as P(gpufleet.tuning.audit_planned#filter) returns it.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.audit_planned import audit_planned

# What a node found to be a container reports for every host role part (its host runs them).
CONTAINER_SKIP = {"skipped": True, "msg": "this is a container: the host role runs this module on its host"}


def audit_planned_host(applied, plan, parts, in_container=False):
    applied = applied if isinstance(applied, dict) else {}
    plan = plan if isinstance(plan, dict) else {}
    if not isinstance(parts, dict):
        raise AnsibleFilterError("audit_planned_host: parts must map a phase to part names, got %s" % type(parts).__name__)
    results = {}
    for phase, names in parts.items():
        if not isinstance(names, list):
            raise AnsibleFilterError("audit_planned_host: phase %r must list part names, got %s"
                                     % (phase, type(names).__name__))
        results[phase] = dict((name, dict(CONTAINER_SKIP) if in_container else applied.get(name) or plan.get(name) or {})
                              for name in names)
    return audit_planned(results)


class FilterModule:
    def filters(self):
        return {"audit_planned_host": audit_planned_host}
