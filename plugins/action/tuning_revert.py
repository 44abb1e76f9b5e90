# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.tuning.tuning_revert runs through the collection's module action: ansible.builtin.normal, with
the pipelined module read by the target's Python in one go (plugins/plugin_utils/module_action.py)."""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.module_action import ModuleAction


class ActionModule(ModuleAction):
    pass
