# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit judged in the controller process of the host's tuning call (host_tuning's ``audit``).

Why here and not in a task of its own: the audit role judged every host in a task after the
tuning call (gpufleet.tuning.audit_judge), and a task costs every host a worker forked from
ansible-playbook, its arguments templated there, and its result sent back and processed, some
40-70 ms of controller CPU per host before the judgement's own work (README "Speed of a tuning
pass"). The tuning call's worker already holds the facts the audit needs, so the call judges
them as soon as the module has returned: the same functions as the audit_judge action (the
rules, the comparison with the previous audit.json, the report), the same two files, and the
audit put in the call's result as ``audit``.

The option is checked before the module runs (a bad value fails the host before anything is
read or written); the judgement runs after it, also when a part failed (the facts are read
before anything is written, so the audit is the node as it was before this call).
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.tuning.plugins.action import artifact_files, audit_judge
from ansible_collections.gpufleet.tuning.plugins.filter.audit_planned_tuning import audit_planned_tuning
from ansible_collections.gpufleet.tuning.plugins.module_utils.host_tuning import AUDIT_SPEC, PHASE, RESULT_NAMES, PART_OF

# The audit role's rules, the default of rules_file: this file is plugins/plugin_utils/ of the
# collection, the rules are roles/audit/files/rules.yml of the same collection.
DEFAULT_RULES_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                  "roles", "audit", "files", "rules.yml")

# Every result of the call by phase, the default of planned_modules.
DEFAULT_PLANNED = dict((phase, [name for name in RESULT_NAMES if PHASE[PART_OF[name]] == phase])
                       for phase in ("runtime", "reboot_required"))


def _fail(message):
    raise AnsibleActionFail("host_tuning: audit: %s" % message)


def options(value, inventory_hostname):
    """The ``audit`` option checked and completed (host, rules_file and planned_modules
    defaulted), or None when it is not given. Raises with the bad value named."""
    if value is None:
        return None
    if not isinstance(value, dict):
        _fail("must be a mapping (the audit's options), got %s" % artifact_files._kind(value))
    checked = ArgumentSpecValidator(AUDIT_SPEC).validate(value)
    if checked.error_messages:
        _fail("; ".join(checked.error_messages))
    audit = checked.validated_parameters
    audit["host"] = audit["host"] or inventory_hostname
    audit["rules_file"] = audit["rules_file"] or DEFAULT_RULES_FILE
    if audit["planned_modules"] is None:
        audit["planned_modules"] = DEFAULT_PLANNED
    if not os.path.isabs(audit["path"]):
        _fail("path must be an absolute path (the host's audit folder), got %r" % audit["path"])
    audit["mode"] = artifact_files._mode(audit["mode"], "audit.mode")
    # Parsed now (once per process): a bad rules file fails before the node is read.
    audit_judge.load_rules_file(audit["rules_file"])
    return audit


def judge(result, audit):
    """The audit of the call's ``result`` (its facts and plan), written to ``audit['path']``
    (also in check mode, as the audit role's judge task always wrote it: a record on the
    controller, not a change to the host): what audit.json holds, with ``path`` and ``files``
    (what was written). Raises AnsibleActionFail."""
    plan = audit_planned_tuning(result, audit["planned_modules"], audit["plan_in_container"])
    judged, _changed = audit_judge.judge_and_write(audit["host"], result.get("facts"), plan, audit["params"],
                                                   audit["rules_file"], audit["rules_extra"], audit["rules_disabled"],
                                                   audit["path"], audit["mode"], False)
    return judged
