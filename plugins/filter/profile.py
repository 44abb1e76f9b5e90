# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The profiles' filter: the guard rails of a node's profile on the host role's values in effect
(plugin_utils/profile_guard.py, which the action profile_select shares); its documentation is
its sidecar file, plugins/filter/profile_guard.yml."""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.profile_guard import profile_guard


class FilterModule:
    """gpufleet.tuning.profile_guard."""

    def filters(self):
        return {"profile_guard": profile_guard}
