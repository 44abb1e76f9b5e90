# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's rules validated and compiled once, then kept on the controller until the rules
file, the extra or disabled rules, or the code that reads them changes.

Why: every host's tuning call judges its audit in its own worker, forked from ansible-playbook
with no rule loaded, so every host validated the 120 rules again and compiled their JMESPath
expressions (filter audit_rules' load_rules): about 5 ms of controller CPU per host on a 2-core
machine, against about 1 ms to unpickle the result (README "Speed of a tuning pass").

The rules kept are exactly what load_rules returns for the same input. The key names the rules
file (its path, and its size, modification time and inode when its content was parsed, so an
edit made after the parse is never kept under the new file's name), the extra and disabled rules (as JSON), the
files of the code whose objects are kept (filter audit_rules, jmespath's parser) and the
Python version; an entry whose key differs is never used. Rules that JSON cannot state the same
(a key the key could not name) are loaded as before and not kept. The entries sit in the
collection's controller folder (plugin_utils/controller_cache.py: this user's own, 0700, a file
in it that is a link or writable by others never read), written whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys

from ansible_collections.gpufleet.tuning.plugins.filter import audit_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import controller_cache

try:
    from jmespath import parser as _jmespath_parser
except ImportError:  # audit_rules says it is needed, when the rules are loaded
    _jmespath_parser = None


def key(path, read, extra, disabled):
    """The text that names these rules as loaded by this code: the rules file ``path`` as it was
    when its content was parsed (``read``: its stat key then, controller_cache.stat_key's shape),
    ``extra`` and ``disabled``; None when it cannot be named."""
    code = [audit_rules.__file__] + ([_jmespath_parser.__file__] if _jmespath_parser is not None else [])
    stats = [controller_cache.stat_key(name) for name in code]
    if read is None or None in stats:
        return None
    try:
        return json.dumps({"rules": [os.path.abspath(path), list(read)], "code": list(zip(code, stats)),
                           "python": sys.version, "extra": audit_rules.plain(extra),
                           "disabled": audit_rules.plain(disabled)}, sort_keys=True)
    except (TypeError, ValueError):
        return None


def _entry(name):
    return os.path.join(controller_cache.folder(), "rules-%s.pickle" % hashlib.sha256(name.encode("utf-8")).hexdigest()[:32])


def load(path, read, rules, extra=None, disabled=None):
    """load_rules' (rules, summary) for ``rules``, the content of the rules file ``path`` parsed
    while its stat key was ``read``, with ``extra`` and ``disabled``: the kept copy while its key
    holds, else loaded (AnsibleFilterError as load_rules raises it) and kept."""
    name = key(path, read, extra, disabled)
    entry = _entry(name) if name is not None else None
    if entry is not None and controller_cache.trusted(entry):
        try:
            with open(entry, "rb") as handle:
                kept_key, loaded = pickle.load(handle)  # nosec B301 - this user's own folder (controller_cache)
            if kept_key == name:
                return loaded
        except Exception:  # pylint: disable=broad-except  # a damaged entry is loaded again
            pass
    loaded = audit_rules.load_rules(audit_rules.plain(rules), audit_rules.plain(extra), audit_rules.plain(disabled))
    if entry is not None:
        try:
            data = pickle.dumps((name, loaded), protocol=pickle.HIGHEST_PROTOCOL)
            if controller_cache.ready():
                controller_cache.write(entry, data)
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            pass
    return loaded
