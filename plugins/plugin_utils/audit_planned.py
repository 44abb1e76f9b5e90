# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What --tags runtime and --tags reboot_required would change, from the tuning modules'
check-mode results.

The audit has the host role plan its own tasks in check mode (roles/host/tasks/plan.yml) and
hands their registered results here, by phase and module. What would change is each result's
structured ``changes`` records (module_utils/common/records.py), a looped task's item by item;
the rendered ``diff`` is never read. Beside the records each entry keeps what waits for later
(``reboot_required``, ``restart_required``, ``pending``), what the module left out
(``skipped_keys``), and why nothing could be planned (a failed or skipped module, or a task
that did not run at all).

The audit role takes them from the host role's published results (audit_planned_host): for each
part, what the run applied (host_results, whose records are what it changed), else its check-mode
plan (host_plan), else not run; in a container every part skipped. So the plan's shape is
audit_planned's whichever way a part came.

In plugin_utils so that the filters (plugins/filter/audit.py) and Python code (the audit tests)
share it without importing a filter plugin.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# What a node found to be a container reports for every host role part (its host runs them).
CONTAINER_SKIP = {"skipped": True, "msg": "this is a container: the host role runs this module on its host"}


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
