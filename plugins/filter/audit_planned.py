# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What --tags runtime and --tags reboot_required would change, from the tuning modules'
check-mode results.

The audit runs the host role's own tasks in check mode (roles/audit/tasks/plan.yml) and hands
their registered results here, by phase and module. What would change is each result's
structured ``changes`` records (module_utils/common/records.py), a looped task's item by item;
the rendered ``diff`` is never read. Beside the records each entry keeps what waits for later
(``reboot_required``, ``restart_required``, ``pending``), what the module left out
(``skipped_keys``), and why nothing could be planned (a failed or skipped module, or a task
that did not run at all).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: audit_planned
short_description: The audit's planned changes, from check-mode module results
version_added: 0.1.0
description:
  - Takes C({PHASE {MODULE registered check-mode result}}) (phases C(runtime) and
    C(reboot_required)) and returns the same shape with one entry per module, built from the
    result's C(changes) records only (for a looped task, every item's), never from the
    rendered C(diff).
  - An entry's C(status) is C(ok) (the module ran; C(records) may be empty), C(skipped) (its
    task's condition was false, or the module found nothing to manage here; C(msg) says
    which), C(failed) (C(msg) says why) or C(not_run) (no result, the task did not run).
positional: ''
options:
  _input:
    description: Phase to module name to the registered result (C({}) when the task did not run).
    type: dict
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Keep what the runtime tasks would change
  ansible.builtin.set_fact:
    planned: "{{ {'runtime': {'sysctl_profile': __host_sysctl_profile}} | gpufleet.tuning.audit_planned }}"
"""

RETURN = r"""
_value:
  description: Phase to module name to the entry.
  type: dict
  contains:
    status:
      description: C(ok), C(skipped), C(failed) or C(not_run).
      type: str
    records:
      description: The change records, in the order the module (or the loop) returned them.
      type: list
      elements: dict
    reboot_required:
      description: The module says a reboot is needed (for a planned change, or one already configured and not running yet).
      type: bool
    restart_required:
      description: The module says a restart (of a container, a module) is needed.
      type: bool
    restart_required_for:
      description: The items of a looped task (containers) that need the restart.
      type: list
      elements: str
    pending:
      description: What waits for a reboot, reload or restart, as the module words it.
      type: list
      elements: str
    skipped_keys:
      description: What the module left out, each with its reason.
      type: dict
    msg:
      description: Why the module was skipped, failed or did not run; null when it ran.
      type: str
"""


def _entry():
    return {"status": "ok", "records": [], "reboot_required": False, "restart_required": False,
            "restart_required_for": [], "pending": [], "skipped_keys": {}, "msg": None}


def _skip_message(result):
    if "false_condition" in result or result.get("skip_reason") == "Conditional result was False":
        condition = result.get("false_condition")
        return "not enabled here (%s)" % condition if isinstance(condition, str) else "not enabled here"
    return result.get("msg") or result.get("skip_reason") or "skipped"


def _fold(entry, result, prefix):
    """Add what one result that ran says to the entry."""
    changes = result.get("changes") or []
    if not isinstance(changes, list):
        raise AnsibleFilterError("audit_planned: a result's changes must be a list of records, got %s"
                                 % type(changes).__name__)
    entry["records"].extend(rec for rec in changes if isinstance(rec, dict))
    entry["reboot_required"] = entry["reboot_required"] or bool(result.get("reboot_required"))
    if result.get("restart_required"):
        entry["restart_required"] = True
        if prefix:
            entry["restart_required_for"].append(prefix[:-2])
    pending = result.get("pending")
    if isinstance(pending, list):
        entry["pending"].extend(prefix + str(line) for line in pending)
    elif pending is True:  # lxc_memlock: a container Proxmox has locked, left as it was
        entry["pending"].append(prefix + str(result.get("pending_reason") or "pending"))
    skipped = result.get("skipped_keys")
    if isinstance(skipped, dict):
        entry["skipped_keys"].update((prefix + str(key), str(why)) for key, why in skipped.items())


def planned_entry(result):
    """One module's entry from its registered result (plain, or a loop's)."""
    entry = _entry()
    if not isinstance(result, dict) or not result:
        entry.update(status="not_run", msg="the task did not run")
        return entry
    looped = isinstance(result.get("results"), list)
    items = [item for item in result["results"] if isinstance(item, dict)] if looped else [result]
    if looped and not items:
        entry.update(status="skipped", msg="nothing to do (an empty loop)")
        return entry
    prefixes = ["%s: " % item["container_name"] if looped and item.get("container_name") else "" for item in items]
    failed = [(prefix, item) for prefix, item in zip(prefixes, items) if item.get("failed")]
    skipped = [(prefix, item) for prefix, item in zip(prefixes, items)
               if not item.get("failed") and item.get("skipped") is True]
    if failed:
        prefix, item = failed[0]
        entry.update(status="failed", msg=prefix + str(item.get("msg") or "the module failed"))
    elif len(skipped) == len(items):
        prefix, item = skipped[0]
        entry.update(status="skipped", msg=prefix + _skip_message(item))
    for prefix, item in zip(prefixes, items):
        if not item.get("failed") and item.get("skipped") is not True:
            _fold(entry, item, prefix)
    return entry


def audit_planned(results):
    if not isinstance(results, dict):
        raise AnsibleFilterError("audit_planned expects {phase: {module: result}}, got %s" % type(results).__name__)
    out = {}
    for phase, modules in results.items():
        if not isinstance(modules, dict):
            raise AnsibleFilterError("audit_planned: phase %r must map module names to results, got %s"
                                     % (phase, type(modules).__name__))
        out[phase] = dict((module, planned_entry(result)) for module, result in modules.items())
    return out


class FilterModule:
    def filters(self):
        return {"audit_planned": audit_planned}
