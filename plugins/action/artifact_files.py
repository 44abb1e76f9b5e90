# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write the run's records (audit.json, system-improve.md, fleet-audit.*) on the controller.

Why an action plugin: the records are the controller's own files. Written with
``ansible.builtin.file`` and ``ansible.builtin.copy`` delegated to localhost, every file costs
a module run (a worker, a temporary folder, a Python start-up and the module's transfer), about
a second each on a small controller, and the audit writes five of them per pass
(benchmarks/runtime_pass.py --profile-tasks). Here the folder and all its files are written by
the controller process that runs the task, in one step.

How the files are checked and written (atomically, relative to a descriptor of the folder
opened without following links, so a swap in a shared artifacts folder cannot redirect a write;
a link, a FIFO or device, or a folder others may write without the sticky bit refused) is
plugin_utils/artifact_files.py over plugin_utils/artifact_fs.py, which the action audit_judge
shares. The roles write every record they keep on the controller through it.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files


class ActionModule(ActionBase):
    """gpufleet.tuning.artifact_files: documented in plugins/modules/artifact_files.py."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "files", "mode", "dir_mode"))  # ActionBase refuses others
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        folder = args.get("path")
        mode = artifact_files.octal_mode(args.get("mode", "0644"), "mode")
        dir_mode = artifact_files.octal_mode(args.get("dir_mode", "0755"), "dir_mode")
        result.update(artifact_files.write(folder, args.get("files"), mode, dir_mode, self._task.check_mode), path=folder)
        return result
