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
    under C(artifacts/) (C(audit.json), C(system-improve.md), C(fleet-audit.json),
    C(fleet-audit.md)).
  - Runs in the controller process itself, whatever host the task is for; no module is sent to
    a host. One task writes a whole folder, where M(ansible.builtin.copy) takes a module run per
    file (about a second each on a small controller).
  - Each file is written whole and atomically (a temporary file beside it renamed over it) with
    mode O(mode); a file whose bytes and mode are already right is not written again.
  - A symbolic link, or anything but a directory, where the folder is, and a symbolic link or
    anything but a regular file where a file goes, is refused with an error naming it before
    anything is written.
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
    description: Permission bits of the folder when it is created, an octal string.
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
