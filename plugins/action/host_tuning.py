# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run gpufleet.tuning.host_tuning with the worker's cyclic garbage collector paused.

Why: before the module runs, ansible-core packs it with every module_utils file it imports
(AnsiballZ), parsing each to find its imports. That parse makes a few hundred thousand small
objects, and in a worker process, forked from ansible-playbook with all of its data, every
full collection the parse triggers walks that whole inherited heap. Measured on a 2-core
controller (benchmarks/runtime_pass.py; README "Speed of a tuning pass"): packing this module
takes 0.45 s with the collector running and 0.22 s with it paused. The packed module is cached
for the rest of the run, so this is paid once per run.

A worker runs one task and exits, and the objects made meanwhile are freed by reference
counting as usual; the collector is resumed (and the pause forgotten) before the result goes
back. Otherwise this is the collection's module action (plugins/plugin_utils/module_action.py:
ansible.builtin.normal, with the pipelined module read by the target's Python in one go).

The ``role_arguments`` option stays on the controller: the roles' variables are checked before
anything else (plugins/action/role_arguments.py: the same check as the role_arguments action), so a
bad value fails the host before the module is packed or sent. A task of its own would cost every
host a worker and its result in ansible-playbook's own process (about 25 ms of controller CPU per
host on a 2-core controller, README "Speed of a tuning pass") for a check this worker can make.

The ``audit`` option stays on the controller: checked before the module runs, its ``facts`` are
the module's facts option, and the facts the module returns are judged here, in the same worker,
right after it (plugins/plugin_utils/tuning_audit.py says why), also when a part failed.
"""

from __future__ import annotations

import gc

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpufleet.tuning.plugins.action import role_arguments
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import tuning_audit
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.module_action import ModuleAction


class ActionModule(ModuleAction):
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        args = self._task.args
        roles = args.pop("role_arguments", None)
        if roles:
            if not isinstance(roles, list):
                raise AnsibleActionFail("host_tuning: role_arguments must be a list of role names, got %r" % (roles,))
            found = role_arguments.errors(self._templar, task_vars, roles)
            if found:
                return role_arguments.failure(found)
        audit = tuning_audit.options(args.pop("audit", None), (task_vars or {}).get("inventory_hostname"))
        if audit is not None:
            if args.get("facts") is not None:
                raise AnsibleActionFail("host_tuning: give the node_facts options once, as facts or as audit.facts, not both")
            args["facts"] = audit.pop("facts")
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            result = super().run(tmp, task_vars)
            if audit is not None and isinstance(result.get("facts"), dict):
                try:
                    result["audit"] = tuning_audit.judge(result, audit)
                    # The facts are the audit's (audit.facts): not twice in the result.
                    result.pop("facts", None)
                except AnsibleError as exc:
                    message = "the audit was not recorded: %s" % to_text(exc)
                    result.update(failed=True, msg="%s; %s" % (result.get("msg"), message) if result.get("failed") else message)
        finally:
            if was_enabled:
                # What exists now is set aside for good (gc.freeze) before the collector resumes:
                # otherwise its first collection walks the whole inherited heap at once.
                gc.freeze()
                gc.enable()
        return result
