# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A YAML file of this collection (the audit's rules, a role's argument spec), parsed once and
kept as JSON on the controller until the file changes.

Why: ansible-playbook forks a worker for every host and task, and a worker starts with no
cache of its own, so the audit's rules (36 KB of YAML, read by every host's tuning call) and the
roles' argument specs (read by every host's check of the role variables) were parsed again by
every host: about 9 ms and 5 ms of controller CPU per host with libyaml on a 2-core machine,
against 0.2 ms to read the same data as JSON (README "Speed of a tuning pass"). The JSON copy is
kept in the collection's controller folder (plugin_utils/controller_cache.py: trusted as Ansible
trusts its own temporary folder) with the file's size, modification time and inode, and used
only while they are unchanged; data that JSON cannot hold the same (dates, sets, non-string
keys) is never kept.
"""

from __future__ import annotations

import hashlib
import json
import os

import yaml

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import controller_cache

try:
    _LOADER = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml
    _LOADER = yaml.SafeLoader


def _entry(path):
    digest = hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(controller_cache.folder(), "yaml-%s.json" % digest)


def load(path):
    """The data of the YAML file ``path`` (PyYAML's safe loader); OSError and yaml.YAMLError as
    parsing raises them."""
    key = controller_cache.stat_key(path)
    entry = _entry(path)
    if key is not None and controller_cache.trusted(entry):
        try:
            with open(entry) as handle:
                kept = json.load(handle)
            if kept.get("source") == os.path.abspath(path) and kept.get("stat") == key:
                return kept["data"]
        except (OSError, ValueError, AttributeError, KeyError):
            pass
    with open(path, "rb") as handle:
        data = yaml.load(handle, Loader=_LOADER)  # nosec B506 - a safe loader
    if key is not None and key == controller_cache.stat_key(path):
        try:
            text = json.dumps({"source": os.path.abspath(path), "stat": key, "data": data})
            if json.loads(text)["data"] == data and controller_cache.ready():
                controller_cache.write(entry, text.encode("utf-8"))
        except (TypeError, ValueError, OSError):
            pass
    return data
