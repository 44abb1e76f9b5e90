# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge one host's health and write its health.json on the controller.

Why an action plugin, as audit_judge: the rules, the verdict and the record are the controller's;
a module would send them to the node. The verdict is plugin_utils/health_verdict.py's on the audit's
rules file (plugin_utils/rules_file.py), with every string cleaned for the record
(plugin_utils/node_text.py); health.json is written by gpufleet.tuning.artifact_files' write()
(a symbolic link where the folder or the file goes is refused before anything is written); in check
mode nothing is written. The result is the verdict at its top level, with ``path`` and ``files``.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files, health_verdict, node_text
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import rules_file

_ARGS = ("host", "facts", "params", "rules_file", "rules_extra", "rules_disabled", "policy", "phase", "profile", "path",
         "mode")
RECORD = "health.json"


def _fail(message):
    raise AnsibleActionFail("health_judge: %s" % message)


def judge(host, facts, params, rules, extra=None, disabled=None, policy="quarantine", phase="before", now=None):
    """The host's verdict, every string cleaned for the record."""
    if not isinstance(host, str) or not host:
        _fail("host must be the inventory name, got %r" % (host,))
    if not isinstance(facts, dict):
        _fail("facts must be the facts of gpufleet.tuning.node_facts (a mapping), got %s" % artifact_files.type_name(facts))
    if params is not None and not isinstance(params, dict):
        _fail("params must be a mapping, got %s" % artifact_files.type_name(params))
    for name, value in (("rules_extra", extra), ("rules_disabled", disabled)):
        if value is not None and not isinstance(value, list):
            _fail("%s must be a list, got %s" % (name, artifact_files.type_name(value)))
    try:
        verdict = health_verdict.health_verdict(facts, rules, extra=extra, disabled=disabled, params=params,
                                                policy=policy, phase=phase, host=host, now=now)
    except AnsibleError as exc:
        _fail(to_text(exc))
    return node_text.clean_tree(verdict)


def profile_checks(profile):
    """The profile the node is held against and its facts-only expectations (GPU count, NVLinks),
    for health.json: ``{"profile": {name, platform, reasons} or None, "expectations": [...]}``."""
    if profile in (None, {}):
        return {"profile": None, "expectations": []}
    if not isinstance(profile, dict) or not isinstance(profile.get("name"), str):
        _fail("profile must be the profile_select result's profile (a mapping with a name), got %r" % (profile,))
    return node_text.clean_tree({"profile": {"name": profile["name"], "platform": profile.get("platform"),
                                             "reasons": list(profile.get("reasons") or [])},
                                 "expectations": list(profile.get("checks") or [])})


def judge_and_write(args, mode, check_mode):
    """The verdict and health.json written into ``args['path']``; (verdict, whether a write was due)."""
    rules = rules_file.load(args.get("rules_file"), _fail)
    verdict = judge(args.get("host"), args.get("facts"), args.get("params"), rules, extra=args.get("rules_extra"),
                    disabled=args.get("rules_disabled"), policy=args.get("policy", "quarantine"),
                    phase=args.get("phase", "before"))
    verdict.update(profile_checks(args.get("profile")))
    written = artifact_files.write(args.get("path"), {RECORD: json.dumps(verdict, indent=4, sort_keys=True) + "\n"},
                                   mode, 0o755, check_mode)
    verdict.update(path=args.get("path"), files=written["files"])
    return verdict, written["changed"]


class ActionModule(ActionBase):
    """gpufleet.tuning.health_judge: documented in plugins/modules/health_judge.py."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_ARGS)  # ActionBase refuses others
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        mode = artifact_files.octal_mode(self._task.args.get("mode", "0644"), "mode")
        verdict, changed = judge_and_write(self._task.args, mode, self._task.check_mode)
        result.update(verdict)
        result.update(changed=changed)
        return result
