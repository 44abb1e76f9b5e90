# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record options every tuning module takes (module_utils/state/recorder.py)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  state_path:
    description:
      - The node's record of what the collection changed (M(gpufleet.tuning.tuning_state)'s C(path);
        the roles pass C(/var/lib/gpufleet-tuning/state.json)).
      - Given, the module records the before-state of what it is about to change there (values as
        it reads them, a file's whole content) before it writes anything, then marks what it
        changed, with the value it left; an item recorded by an earlier run keeps its first
        before. So a run that stops half way (a failed part, a lost controller) still leaves a
        record that M(gpufleet.tuning.tuning_revert) can put back. The result's C(state_record) says what
        was recorded.
      - In check mode nothing is written; C(state_record) says what would be recorded.
      - Null (the default), nothing is recorded.
    type: path
  run_id:
    description:
      - The run's id, kept with every item recorded in O(state_path) (a rollout reverts one run
        by it). A new one when left out.
    type: str
"""
