#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done on the controller by the action plugin of the same name
# (plugins/action/artifact_files.py); this file holds its documentation for ansible-doc.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: artifact_files
short_description: Write a run's records (reports, JSON) into a folder on the controller
version_added: 0.1.0
description:
  - Writes the files of O(files) into the folder O(path) on the Ansible controller, creating
    the folder (mode O(dir_mode)) when it is missing. The roles use it for the records they keep
    under C(artifacts/) (C(audit.json), C(system-improve.md), C(verify.json), C(fleet-audit.json),
    C(fleet-audit.md), C(fleet-drift.json), C(revert.json), the benchmark records, the rollout
    reports).
  - Runs in the controller process itself, whatever host the task is for; no module is sent to
    a host. One task writes a whole folder, where M(ansible.builtin.copy) takes a module run per
    file (about a second each on a small controller).
  - Each file is written whole and atomically (a temporary file created in the folder, renamed
    over it) with mode O(mode) whatever the umask; a file whose bytes and mode are already right
    is not written again.
  - The artifacts folder may be shared with other local users, so nothing is done by path after
    a check. The folder is opened once, one component at a time from C(/), without following
    links; every file is checked, compared and written relative to that open folder, and the
    rename replaces the entry itself, so a link swapped in after the check is replaced, never
    followed. A missing folder (and a missing folder above it, mode C(0755)) is made the same
    way.
  - The folders above O(path) are resolved once (links the operator set up there, such as
    C(/srv) on another volume, are followed at that point only); O(path) itself and everything in
    it are never followed.
  - Refused with an error naming it, before anything is written - O(path) or a folder in it that
    is a symbolic link, or one swapped in for a folder of the resolved path; anything but a directory where a folder is; a folder (O(path) or any
    folder above it) writable by other users without the sticky bit (a sticky one such as
    C(/tmp) is fine); a symbolic link, FIFO, socket, device or anything but a regular file where
    a file goes (never opened, so nothing blocks).
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written; C(changed) says whether a write was due. The
      roles set C(check_mode) false on the task, since a record of a check run is still a record.
  diff_mode:
    support: none
    description: The records are the controller's, not a change on a host; no diff is shown.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only, which is POSIX.
options:
  path:
    description: The folder on the controller, an absolute path.
    type: path
    required: true
  files:
    description: File name (letters, digits, C(.), C(_) and C(-), not starting with C(.)) to its
      text content.
    type: dict
    required: true
  mode:
    description: Permission bits of the files, an octal string.
    type: str
    default: "0644"
  dir_mode:
    description: Permission bits of the folder when it is created (whatever the umask), an octal
      string. A mode that lets others write without the sticky bit makes a folder that is then
      refused.
    type: str
    default: "0755"
seealso:
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Record the audit on the controller
  gpufleet.tuning.artifact_files:
    path: "{{ inventory_hostname | gpufleet.tuning.artifact_dir('artifacts', ['audit.json', 'system-improve.md']) }}"
    files:
      audit.json: "{{ audit_result | to_nice_json }}\n"
      system-improve.md: "{{ audit_result | gpufleet.tuning.audit_report }}"
  check_mode: false
  changed_when: false
"""

RETURN = r"""
path:
  description: The folder written to.
  returned: always
  type: str
  sample: /srv/gpufleet/artifacts/gpu-01
created:
  description: Whether the folder did not exist before (and was created unless in check mode).
  returned: always
  type: bool
  sample: false
files:
  description: One entry per file, by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The file name.
      type: str
    path:
      description: The file's path.
      type: str
    size:
      description: Its size in bytes.
      type: int
    sha256:
      description: SHA-256 of its content.
      type: str
    changed:
      description: Whether it was (or in check mode would be) written.
      type: bool
  sample: [{"name": "audit.json", "path": "/srv/gpufleet/artifacts/gpu-01/audit.json", "size": 5120,
            "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "changed": true}]
"""
