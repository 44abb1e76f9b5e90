# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How an engine's result or failure becomes the module's exit_json or fail_json.

Every engine in module_utils returns a result dict or raises a ModuleFailure that carries what
was learnt before it failed (the devices found, the values read), so a failed task still shows
the state it left. Every module ends the same way: warnings to module.warn, and on failure the
partial result without the keys that describe a change that did not happen.

Two last defences, so that no input ever ends in a traceback: an OSError that escaped an
engine (a file that vanished between two reads, a filesystem that turned read-only) becomes a
failure naming the path, and text that cannot be encoded as JSON (bytes of a config file that
are not UTF-8, carried as surrogates) is shown with replacement characters instead of making
exit_json fail after the work is done.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

# Keys of a partial result that would misdescribe a failed run: a failure restored what it had
# applied, so it reports no change records either.
_NOT_ON_FAILURE = ("changed", "diff", "skipped", "changes")


class ModuleFailure(Exception):
    """Failure with whatever was learnt so far, for fail_json(msg=..., **partial)."""

    def __init__(self, message, partial=None):
        super().__init__(message)
        self.message = message
        self.partial = partial or {}


def printable(value):
    """``value`` with every string made JSON-safe (lone surrogates replaced), recursively."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return dict((printable(k), printable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [printable(item) for item in value]
    return value


def finish(module, run):
    """Call ``run()`` (which returns the result dict) and exit the module with its outcome."""
    try:
        result = run()
    except ModuleFailure as exc:
        partial = dict(exc.partial)
        for warning in partial.pop("warnings", []):
            module.warn(printable(warning))
        for key in _NOT_ON_FAILURE:
            partial.pop(key, None)
        partial.pop("msg", None)  # the failure's message is the one msg
        module.fail_json(msg=printable(exc.message), **printable(partial))
    except (OSError, IOError) as exc:
        module.fail_json(msg="unexpected file error: %s" % printable(fileops.describe(exc)))
    for warning in result.pop("warnings", []):
        module.warn(printable(warning))
    module.exit_json(**printable(result))
