# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Choose one host's profile from its facts, layer it, and record profile.json on the controller.

Why an action plugin, as health_judge: the profiles, the choice and the record are the
controller's; nothing is read on the node (the facts are the audit's). The choice is
plugin_utils/profile_select.py's on the profiles of plugin_utils/profile_data.py; the facts-only
expectations (GPU count, NVLinks) are plugin_utils/node_normal.py's. profile.json is written by
gpufleet.tuning.artifact_files' write() (a link where the folder or the file goes is refused).
With --diff and a pinned profile other than the one the facts choose, the result's diff shows
the settings each would give (the host role's tasks in check mode then show what that would
change on the node).
"""

from __future__ import annotations

import datetime
import difflib
import json

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files, audit_rules, node_normal, node_text
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_data, profile_guard, profile_node, profile_select

_ARGS = ("host", "facts", "profiles_dir", "profiles_extra", "pin", "intent", "waive", "path", "mode")
RECORD = "profile.json"


def _fail(message):
    raise AnsibleActionFail("profile_select: %s" % message)


def _settings_text(profile):
    lines = ["# %s (%s)" % (profile["name"], profile["description"])]
    for key in sorted(profile["settings"]):
        lines.append("%s: %s  # %s" % (key, json.dumps(profile["settings"][key], sort_keys=True), profile["sources"][key]))
    return "\n".join(lines) + "\n"


def choose(args, now=None):
    """The host's profile (profile_select.select) with the facts-only expectation checks; the
    auto choice's profile too when a pin differs from it (for the diff)."""
    host = args.get("host")
    if not isinstance(host, str) or not host:
        _fail("host must be the inventory name, got %r" % (host,))
    facts = args.get("facts")
    if not isinstance(facts, dict):
        _fail("facts must be the facts of gpufleet.tuning.node_facts (a mapping), got %s" % artifact_files.type_name(facts))
    pin = args.get("pin") or None
    if pin is not None and not isinstance(pin, str):
        _fail("pin (gpufleet_profile) must be a profile name, got %r" % (pin,))
    intent = args.get("intent") or "throughput"
    if not isinstance(intent, str):
        _fail("intent (gpufleet_profile_intent) must be an intent's name, got %r" % (intent,))
    waive = args.get("waive") or []
    if not isinstance(waive, list) or not all(isinstance(w, str) for w in waive):
        _fail("waive (gpufleet_profile_waive) must be a list of guard rail names, got %r" % (waive,))
    try:
        profiles = profile_data.extend(profile_data.load_dir(args.get("profiles_dir")),
                                       audit_rules.plain(args.get("profiles_extra") or {}))
        known = set()
        for entry in [profiles["base"]] + list(profiles["platforms"].values()):
            known |= set(r["name"] for r in entry["guard_rails"])
        unknown = sorted(set(waive) - known)
        if unknown:
            _fail("gpufleet_profile_waive names no guard rail: %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(known))))
        profile_select.check_rails(profiles, waive=waive)
        node = profile_node.describe(facts)
        profile = profile_select.select(node, profiles, pin=pin, intent=intent, waive=waive)
        auto = profile_select.select(node, profiles, intent=intent, waive=waive) if pin else None
    except profile_data.ProfileError as exc:
        _fail(str(exc))
    broken = profile_guard.message(profile["violations"])
    if broken:
        _fail("profile %s breaks its own guard rails: %s" % (profile["name"], broken))
    checks = node_normal.absolute(profile, node, [])
    profile["checks"] = [c for c in checks if c["check"] in ("gpu_count", "nvlink_links", "memory_bandwidth")]
    profile["host"] = host
    profile["time"] = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return node_text.clean_tree(profile), auto


class ActionModule(ActionBase):
    """gpufleet.tuning.profile_select: documented in plugins/modules/profile_select.py."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_ARGS)  # ActionBase refuses others
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        mode = artifact_files.octal_mode(args.get("mode", "0644"), "mode")
        profile, auto = choose(args)
        written = {"files": [], "changed": False}
        if args.get("path"):
            written = artifact_files.write(args["path"], {RECORD: json.dumps(profile, indent=4, sort_keys=True) + "\n"},
                                           mode, 0o755, self._task.check_mode)
        result.update(profile=profile, path=args.get("path"), files=written["files"], changed=False, pin_diff=[])
        if auto is not None and auto["name"] != profile["name"]:
            before, after = _settings_text(auto), _settings_text(profile)
            result["pin_diff"] = [line.rstrip("\n") for line in difflib.unified_diff(
                before.splitlines(True), after.splitlines(True),
                "profile %s (chosen from the facts)" % auto["name"], "profile %s (gpufleet_profile)" % profile["name"])]
            if self._task.diff:
                result["diff"] = {"before_header": "profile %s (chosen from the facts)" % auto["name"],
                                  "after_header": "profile %s (gpufleet_profile)" % profile["name"],
                                  "before": before, "after": after}
        return result
