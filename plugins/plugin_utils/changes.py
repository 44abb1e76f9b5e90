# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a run of the collection's modules changed: their change records, and the short lines
printed at the end of a tuning run.

Everything here reads what every module of this collection returns: the structured ``changes``
records (module_utils/common/records.py), ``skipped_keys``, a module-level ``skipped``, and
``reboot_required``/``restart_required``. A new module needs no code here: a value record
becomes ``set name: old -> new``, a file record ``wrote``/``removed``/``linked``, a module
record ``loaded``/``unloaded``, a service record ``name: old -> new``. The ``diff`` text,
rendered for people, is never parsed.

- change_records: every record of a set of results, each once. The host role publishes what
  its run changed (host_changes) from its parts' results; the serving role names those changes
  between its two benchmarks and a rollout says whether a host was tuned. One rule for all of
  them (common/records.py ``claimed``): a loop-shaped result's items' records, the items that
  did not fail; none for a failed result.
  The records go into verify.json, benchmark.json and the rollout's record, and they quote the
  node (a target's name, a sysctl value): their text is cleaned (node_text: no control or
  bidi character, bounded length), which the modules' own records are not.
- change_summary: the lines, one per record, skipped key, pending reboot or restart.
- host_summary: the host role's end-of-run lines from its parts' results (host_results), one
  call for a whole batch: change_summary's lines for the parts, then host_lxc's line per LXC
  container of the host, so the wording is theirs.

In plugin_utils so that the filters (plugins/filter/changes.py) and Python code (verify_failures)
share it without importing a filter plugin.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.host_lxc import lxc_memlock_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import clean_tree

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


def change_records(results):
    if results is None:
        return []
    if isinstance(results, dict):
        results = list(results.values())
    if not isinstance(results, list):
        raise AnsibleFilterError("change_records expects a dict of name: result or a list of results, got %s"
                                 % type(results).__name__)
    found = []
    for result in results:
        found.extend(records.claimed(result))
    return clean_tree(found)


# Label (the role's tag) -> the part, in the order the lines are printed.
PARTS = (
    ("sysctl", "sysctl_profile"),
    ("pcie", "pcie_maxreadreq"),
    ("pcie_acs", "pcie_acs"),
    ("cpu_power", "cpu_power"),
    ("lxc_memlock", "lxc_memlock"),
    ("peermem", "nvidia_peermem"),
    ("nvidia_options", "nvidia_driver_options"),
    ("kernel_cmdline", "kernel_cmdline"),
)


def host_summary(results, check_mode=False, restart_ok=False):
    if results is None:
        results = {}
    if not isinstance(results, dict):
        raise AnsibleFilterError("host_summary expects the host role's host_results (part: result), got %s"
                                 % type(results).__name__)
    lines = change_summary(dict((label, results.get(part) or {}) for label, part in PARTS), check_mode)
    memlock = results.get("lxc_memlock") or {}
    return lines + lxc_memlock_report(memlock.get("discovery") or {}, memlock, bool(restart_ok), check_mode)
