# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The short "what changed" list printed at the end of a tuning run.

It reads the results every module of this collection returns (``diff`` entries, ``skipped_keys``, a module-level ``skipped``,
``reboot_required``/``restart_required``), so a new module needs no code here: value diffs
become ``name old -> new`` lines and file diffs become ``wrote``/``removed`` lines.
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
    description: Label to registered result, for example C({"sysctl" __host_sysctl}).
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
    msg: "{{ {'sysctl': __host_sysctl | default({})} | gpufleet.tuning.change_summary(ansible_check_mode) }}"
"""

RETURN = r"""
_value:
  description: One line per change, skip or pending action; a single line when nothing changed.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def _pairs(text):
    values = {}
    for line in (text or "").splitlines():
        if " = " in line:
            key, value = line.split(" = ", 1)
            values[key] = value
    return values


def _is_value_diff(entry):
    return str(entry.get("before_header", "")).endswith("(before)")


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
    verb_set, verb_write, verb_remove = ("would set", "would write", "would remove") if check_mode else (
        "set", "wrote", "removed")
    lines = []
    diffs = result.get("diff") or []
    if isinstance(diffs, dict):
        diffs = [diffs]
    for entry in diffs:
        if not isinstance(entry, dict):
            continue
        if _is_value_diff(entry):
            before, after = _pairs(entry.get("before")), _pairs(entry.get("after"))
            for key in sorted(set(before) | set(after)):
                if before.get(key) != after.get(key):
                    lines.append("%s: %s %s: %s -> %s" % (
                        label, verb_set, key, before.get(key, "(none)"), after.get(key, "(none)")))
        elif entry.get("before") != entry.get("after"):
            header = str(entry.get("after_header") or entry.get("before_header") or "file")
            if header.endswith(" (absent)"):
                lines.append("%s: %s %s" % (label, verb_remove, header[:-len(" (absent)")]))
            else:
                lines.append("%s: %s %s" % (label, verb_write, header))
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


class FilterModule(object):
    def filters(self):
        return {"change_summary": change_summary}
