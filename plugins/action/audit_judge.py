# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge one host's audit and write its audit.json and system-improve.md on the controller.

Why an action plugin: the judgement and the files are the controller's (the rules, the
comparison with the host's previous audit.json, the report), and a module would run them on the
node. The same functions as the filters audit_rules, audit_since and audit_report
(plugin_utils/audit_rules.py, audit_since.py, audit_report.py), on plain data (the rules file
parsed with PyYAML's safe loader), each host in its own task, so hosts are judged in parallel
with the forks.

The result is the audit itself (what audit.json holds) at the top level, with ``path`` and
``files`` (what was written) beside it, so ``register: audit_result`` gives the variable every
reader of the audit uses. Files are written by the write() of gpufleet.tuning.artifact_files
(plugin_utils/artifact_files.py: its plan refuses a symbolic link before anything is written); in
check mode nothing is written.

The rules judge the facts as the node gave them; what is recorded (audit.json, the report and the
registered result) is the audit with every string cleaned by plugin_utils/node_text.py (no
control or bidi character, bounded length), after the comparison with the previous audit
(which compares cleaned text on both sides, so an audit.json written before the cleaning still
compares like with like).
"""

from __future__ import annotations

import datetime
import json
import os

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_fs
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import audit_report, audit_rules, audit_since, node_text
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_report, rules_file

# A previous audit.json larger than this is taken as damaged (no comparison), not read.
PREVIOUS_MAX_BYTES = 16 * 1024 * 1024
_ARGS = ("host", "facts", "plan", "params", "rules_file", "rules_extra", "rules_disabled", "profile", "path", "mode")


def _fail(message):
    raise AnsibleActionFail("audit_judge: %s" % message)


def load_rules_file(path):
    """The rules file ``path`` (YAML), parsed with the safe loader (plugin_utils/rules_file.py)."""
    return rules_file.load(path, _fail)


def previous_text(path):
    """The audit.json already in the host's folder, as text; '' when there is none, or when it
    is not a plain file or is too large (audit_since then says there is no comparison). Read
    through the folder's descriptor, never through a link, never blocking on a FIFO
    (plugin_utils/artifact_fs.py); what is refused here is refused again, naming it, at the write."""
    try:
        data = artifact_fs.read_path(path, PREVIOUS_MAX_BYTES)
    except (artifact_fs.Refused, OSError, ValueError):
        return ""
    return "" if data is None else data.decode("utf-8", "replace")


def judge(host, facts, plan, params, rules, extra=None, disabled=None, previous="", now=None, profile=None):
    """The host's audit: the rules' verdicts on ``facts``, with the host, the time, the plan, the
    facts and the comparison with ``previous`` (the audit.json text this one replaces), every
    string cleaned for the record (node_text) once the rules have judged."""
    if not isinstance(host, str) or not host:
        _fail("host must be the inventory name, got %r" % (host,))
    if not isinstance(facts, dict):
        _fail("facts must be the facts of gpufleet.tuning.node_facts (a mapping), got %s" % artifact_files.type_name(facts))
    for name, value in (("plan", plan), ("params", params)):
        if value is not None and not isinstance(value, dict):
            _fail("%s must be a mapping, got %s" % (name, artifact_files.type_name(value)))
    for name, value in (("rules_extra", extra), ("rules_disabled", disabled)):
        if value is not None and not isinstance(value, list):
            _fail("%s must be a list, got %s" % (name, artifact_files.type_name(value)))
    facts, plan, params = audit_rules.plain(facts), audit_rules.plain(plan or {}), audit_rules.plain(params or {})
    try:
        audit = audit_rules.audit_rules(facts, rules, extra=extra, disabled=disabled, params=params, plan=plan)
    except AnsibleError as exc:
        _fail(to_text(exc))
    now = now or datetime.datetime.now(datetime.timezone.utc)
    audit.update(host=host, time=now.strftime("%Y-%m-%dT%H:%M:%SZ"), planned=plan, facts=facts)
    audit["since"] = audit_since.audit_since(audit, previous)
    if profile is not None:
        if not isinstance(profile, dict):
            _fail("profile must be the profile_select result's profile (a mapping), got %s" % artifact_files.type_name(profile))
        audit["profile"] = profile_report.record(audit_rules.plain(profile))
    return node_text.clean_tree(audit)


def render(audit):
    """The two files of the host's folder, as the audit role has always written them."""
    return {"audit.json": json.dumps(audit, indent=4, sort_keys=True) + "\n",
            "system-improve.md": audit_report.audit_report(audit)}


def judge_and_write(host, facts, plan, params, rules_file, extra, disabled, folder, mode, check_mode, profile=None):
    """The host's audit (judge(), compared with the audit.json already in ``folder``) and its two
    files written there (``mode``: an int; nothing written in ``check_mode``): the audit with
    ``path`` and ``files`` (what was written or is due), and whether a write was due."""
    rules = load_rules_file(rules_file)
    previous = previous_text(os.path.join(folder, "audit.json")) if isinstance(folder, str) and folder else ""
    audit = judge(host, facts, plan, params, rules, extra=extra, disabled=disabled, previous=previous, profile=profile)
    written = artifact_files.write(folder, render(audit), mode, 0o755, check_mode)
    audit.update(path=folder, files=written["files"])
    return audit, written["changed"]


class ActionModule(ActionBase):
    """gpufleet.tuning.audit_judge: documented in plugins/modules/audit_judge.py."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_ARGS)  # ActionBase refuses others
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        mode = artifact_files.octal_mode(args.get("mode", "0644"), "mode")
        audit, changed = judge_and_write(args.get("host"), args.get("facts"), args.get("plan"), args.get("params"),
                                         args.get("rules_file"), args.get("rules_extra"), args.get("rules_disabled"),
                                         args.get("path"), mode, self._task.check_mode, profile=args.get("profile"))
        result.update(audit)
        result.update(changed=changed)
        return result
