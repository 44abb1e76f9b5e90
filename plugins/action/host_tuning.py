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
"""

from __future__ import annotations

import gc

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.module_action import ModuleAction


class ActionModule(ModuleAction):
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return super().run(tmp, task_vars)
        finally:
            if was_enabled:
                gc.enable()
