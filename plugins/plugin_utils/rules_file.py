# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's rules file, read on the controller: one reader for the actions that judge a node
(audit_judge, the whole audit; health_judge, its health rules), so both read the same file the
same way."""

from __future__ import annotations

import os

import yaml

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

# PyYAML's safe loader in C where libyaml is there (a tenth of the time for the shipped rules,
# about 3 ms instead of 33 on a 2-core controller: every host's judgement reads them), else in Python.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(path, fail):
    """The rules file ``path`` (YAML), parsed with the safe loader; ``fail(message)`` raises the
    caller's error for a relative path, an unreadable file or text that is not YAML."""
    if not isinstance(path, str) or not os.path.isabs(path):
        fail("rules_file must be an absolute path, got %r" % (path,))
    try:
        with open(path, "rb") as handle:
            return yaml.load(handle, Loader=_SAFE_LOADER)  # nosec B506: a safe loader
    except OSError as exc:
        fail("cannot read the rules file %s: %s" % (path, fileops.describe(exc)))
    except yaml.YAMLError as exc:
        fail("the rules file %s is not YAML: %s" % (path, " ".join(str(exc).split())))
    return None
