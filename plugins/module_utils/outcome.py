# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How an engine's result or failure becomes the module's exit_json or fail_json.

Every engine in module_utils returns a result dict or raises a ModuleFailure that carries what
was learnt before it failed (the devices found, the values read), so a failed task still shows
the state it left. Every module ends the same way: warnings to module.warn, and on failure the
partial result without the keys that describe a change that did not happen.
"""

from __future__ import annotations

# Keys of a partial result that would misdescribe a failed run.
_NOT_ON_FAILURE = ("changed", "diff", "skipped")


class ModuleFailure(Exception):
    """Failure with whatever was learnt so far, for fail_json(msg=..., **partial)."""

    def __init__(self, message, partial=None):
        super(ModuleFailure, self).__init__(message)
        self.message = message
        self.partial = partial or {}


def finish(module, run):
    """Call ``run()`` (which returns the result dict) and exit the module with its outcome."""
    try:
        result = run()
    except ModuleFailure as exc:
        partial = dict(exc.partial)
        for warning in partial.pop("warnings", []):
            module.warn(warning)
        for key in _NOT_ON_FAILURE:
            partial.pop(key, None)
        module.fail_json(msg=exc.message, **partial)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)
