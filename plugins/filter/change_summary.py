# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The short "what changed" list printed at the end of a tuning run.

It reads what every module of this collection returns: the structured ``changes`` records
(module_utils/common/records.py), ``skipped_keys``, a module-level ``skipped``, and
``reboot_required``/``restart_required``. A new module needs no code here: a value record
becomes ``set name: old -> new``, a file record ``wrote``/``removed``/``linked``, a module
record ``loaded``/``unloaded``, a service record ``name: old -> new``. The ``diff`` text,
rendered for people, is never parsed.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: change_summary
short_description: Summarize gpufleet.tuning module results as short lines
version_added: 0.1.0
description:
  - Takes a dict mapping a label to a registered module result and returns a list of
    human-readable lines, one per changed value, written file, skipped item and pending
    reboot or restart. Results of tasks that did not run are left out.
positional: check_mode
options:
  _input:
    description: Label to registered result, for example C({"sysctl" __host_sysctl_profile}).
    type: dict
    required: true
  check_mode:
    description: Word the lines as planned changes ("would set").
    type: bool
    default: false
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Print what this run changed
  ansible.builtin.debug:
    msg: "{{ {'sysctl': __host_sysctl_profile | default({})} | gpufleet.tuning.change_summary(ansible_check_mode) }}"
"""

RETURN = r"""
_value:
  description: One line per change, skip or pending action; a single line when nothing changed.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


_VERBS = {
    False: {"set": "set", "write": "wrote", "remove": "removed", "link": "linked", "load": "loaded",
            "unload": "unloaded", "service": "changed"},
    True: {"set": "would set", "write": "would write", "remove": "would remove", "link": "would link",
           "load": "would load", "unload": "would unload", "service": "would change"},
}


def _record_line(label, rec, verbs):
    """One line for one change record (see module_utils/common/records.py)."""
    kind, target, before, after = rec.get("kind"), rec.get("target"), rec.get("before"), rec.get("after")
    if kind == "file":
        if isinstance(after, dict) and "link" in after:
            return "%s: %s %s -> %s" % (label, verbs["link"], target, after["link"])
        if after is None:
            return "%s: %s %s" % (label, verbs["remove"], target)
        return "%s: %s %s" % (label, verbs["write"], target)
    if kind == "module":
        return "%s: %s %s" % (label, verbs["load"] if after == "loaded" else verbs["unload"], target)
    if kind == "service":
        return "%s: %s %s: %s -> %s" % (label, verbs["service"], target, before, after)
    return "%s: %s %s: %s -> %s" % (label, verbs["set"], target,
                                    "(none)" if before is None else before, "(none)" if after is None else after)


def _lines_for(label, result, check_mode):
    if not isinstance(result, dict) or not result:
        return []
    if isinstance(result.get("results"), list):  # a looped task: one result per item
        lines = []
        for item in result["results"]:
            # A container's result (lxc_memlock) names the container, so that "a restart is
            # required" says which one.
            name = item.get("container_name") if isinstance(item, dict) else None
            lines.extend(_lines_for("%s %s" % (label, name) if name else label, item, check_mode))
        return lines
    if result.get("skipped") is True:
        if "false_condition" in result or result.get("skip_reason") == "Conditional result was False":
            return []  # the task did not run on this host: nothing to say
        return ["%s: skipped: %s" % (label, result.get("skip_reason") or result.get("msg") or "no reason given")]
    if result.get("failed"):
        return ["%s: FAILED: %s" % (label, result.get("msg", "see the task output"))]
    verbs = _VERBS[bool(check_mode)]
    lines = [_record_line(label, rec, verbs) for rec in result.get("changes") or [] if isinstance(rec, dict)]
    skipped = result.get("skipped_keys")
    if isinstance(skipped, dict):
        for key in sorted(skipped):
            lines.append("%s: skipped %s: %s" % (label, key, skipped[key]))
    if result.get("reboot_required"):
        lines.append("%s: a reboot is required for this to take effect" % label)
    if result.get("restart_required"):
        lines.append("%s: a restart is required for this to take effect" % label)
    return lines


def change_summary(results, check_mode=False):
    if not isinstance(results, dict):
        raise AnsibleFilterError("change_summary expects a dict of label: result, got %s" % type(results).__name__)
    lines = []
    for label in results:
        lines.extend(_lines_for(label, results[label], check_mode))
    if not lines:
        lines.append("nothing to change" if check_mode else "nothing changed")
    return lines


class FilterModule:
    def filters(self):
        return {"change_summary": change_summary}
