# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read one record of the artifacts folder on the controller, never through a link.

Why a lookup and not ``ansible.builtin.file``: the roles read a host's previous record
(``verify.json``, ``benchmark-before.json``) to compare with this run and to keep a copy of it.
``ansible.builtin.file`` opens the path as given, following links and blocking on a FIFO; in a
shared artifacts folder another local user could plant a link to one of the operator's private
files there, and the verify role would copy it into ``verify.previous.json`` (mode 0644). Here
the folder is opened component by component without following links and the file is read
relative to it (plugins/plugin_utils/artifact_fs.py), as the actions that write the records do.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: artifact_record
author:
  - gpufleet maintainers (@gpufleet)
version_added: 0.1.0
short_description: Read a record of the controller's artifacts folder without following links
description:
  - Returns the text of each file named, read on the controller.
  - The folders above the file's folder are resolved once (the operator's setup); then the
    folder is opened one component at a time from C(/) without following symbolic links, and the
    file is read relative to it; a folder writable by other users without the
    sticky bit is refused, naming it.
  - A file that does not exist (or whose folder does not exist) gives O(default).
  - A symbolic link, FIFO, socket or device where the file should be, or a file larger than
    O(max_bytes), fails the lookup naming the path; nothing blocks.
options:
  _terms:
    description: Absolute paths of the files to read.
    type: list
    elements: str
    required: true
  default:
    description: What a missing file gives.
    type: str
    default: ""
  max_bytes:
    description: The largest file read, in bytes.
    type: int
    default: 16777216
"""

EXAMPLES = r"""
- name: The previous result of this host, or an empty text
  ansible.builtin.set_fact:
    previous: "{{ lookup('gpufleet.tuning.artifact_record', '/srv/gpufleet/artifacts/node1/verify.json') }}"
"""

RETURN = r"""
_raw:
  description: The text of each file (UTF-8; bytes that are not UTF-8 are replaced), or O(default) for a missing one.
  type: list
  elements: str
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_fs


def read(path, default="", max_bytes=artifact_fs.MAX_BYTES):
    """The text of the record ``path``, ``default`` when it or its folder is missing."""
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path or path.endswith("/"):
        raise AnsibleLookupError("artifact_record: %r is not the absolute path of a file" % (path,))
    try:
        data = artifact_fs.read_path(path, max_bytes)
    except artifact_fs.Refused as exc:
        raise AnsibleLookupError("artifact_record: %s" % exc)
    except OSError as exc:
        raise AnsibleLookupError("artifact_record: cannot read %s: %s" % (exc.filename or path, fileops.describe(exc)))
    return default if data is None else data.decode("utf-8", "replace")


class LookupModule(LookupBase):
    """gpufleet.tuning.artifact_record"""

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        default = self.get_option("default")
        max_bytes = self.get_option("max_bytes")
        return [read(term, default, max_bytes) for term in terms]
