# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's planned changes straight from the result of the host role's one tuning call.

Why a filter: the audit role built the audit_planned input in a Jinja loop over the registered
result (a module's plan, else its result, else nothing; every module skipped in a container),
and every host's worker compiled and ran that template again for the judge: about 4 ms of
controller CPU per host (README "Speed of a tuning pass"). The same choice here, in Python, and
then the filter audit_planned on it.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: audit_planned_tuning
short_description: The audit's planned changes, from one gpufleet.tuning.host_tuning result
version_added: 0.3.0
description:
  - Takes the registered result of M(gpufleet.tuning.host_tuning) and the module names of each
    phase, and returns what P(gpufleet.tuning.audit_planned#filter) returns for them - for each
    module its check-mode plan (C(plan), a part the call read but did not apply), else its result
    (C(modules), a part it applied or read back in check mode), else not run.
  - On a node the call's facts found to be a container (C(facts.host.container.detected)), every
    module is reported skipped - the host role runs them on the container's host - unless
    O(plan_in_container).
positional: modules, plan_in_container
options:
  _input:
    description: The registered result of a M(gpufleet.tuning.host_tuning) call.
    type: dict
    required: true
  modules:
    description: Phase (C(runtime), C(reboot_required)) to the list of module names to report.
    type: dict
    required: true
  plan_in_container:
    description: Report the modules' plans in a container too (the audit role's C(audit_plan_in_container)).
    type: bool
    default: false
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: What the runtime parts would change, from the tuning call's result
  ansible.builtin.set_fact:
    planned: "{{ __host_tuning | gpufleet.tuning.audit_planned_tuning({'runtime': ['sysctl_profile', 'lxc_memlock']}) }}"
"""

RETURN = r"""
_value:
  description: Phase to module name to the entry, as P(gpufleet.tuning.audit_planned#filter) returns it.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.audit_planned import audit_planned

# What a node found to be a container reports for every host role module (its host runs them).
CONTAINER_SKIP = {"skipped": True, "msg": "this is a container: the host role runs this module on its host"}


def audit_planned_tuning(tuning, modules_by_phase, plan_in_container=False):
    """audit_planned of one gpufleet.tuning.host_tuning result: for each phase's modules, the
    module's check-mode plan (``plan``: a part the call read but did not apply), else its result
    (``modules``: a part it applied, or read back in check mode), else not run. On a node its
    facts found to be a container (facts.host.container.detected), every module is skipped with
    the reason, unless ``plan_in_container``. One filter instead of a Jinja loop over the result:
    the judge's template is compiled again by every host's worker."""
    tuning = tuning if isinstance(tuning, dict) else {}
    if not isinstance(modules_by_phase, dict):
        raise AnsibleFilterError("audit_planned_tuning: the modules must map a phase to module names, got %s"
                                 % type(modules_by_phase).__name__)
    plan = tuning.get("plan") if isinstance(tuning.get("plan"), dict) else {}
    applied = tuning.get("modules") if isinstance(tuning.get("modules"), dict) else {}
    detected = (((tuning.get("facts") or {}).get("host") or {}).get("container") or {}).get("detected") or {}
    in_container = isinstance(detected, dict) and detected.get("value") is True and not plan_in_container
    results = {}
    for phase, modules in modules_by_phase.items():
        if not isinstance(modules, list):
            raise AnsibleFilterError("audit_planned_tuning: phase %r must list module names, got %s"
                                     % (phase, type(modules).__name__))
        results[phase] = dict((module, dict(CONTAINER_SKIP) if in_container
                               else plan.get(module) or applied.get(module) or {}) for module in modules)
    return audit_planned(results)


class FilterModule:
    def filters(self):
        return {"audit_planned_tuning": audit_planned_tuning}
