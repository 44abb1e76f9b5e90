# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""All-or-nothing application of a plan made of several small writes.

Every module changes several things in one call (sysctl keys, a persisted file, a device
register). A failure half way must not leave the machine half tuned, so each step is recorded
with the action that undoes it, and a failure undoes the recorded steps in reverse order.
"""

from __future__ import annotations


class ApplyError(Exception):
    """A step failed; ``rollback_errors`` lists undo actions that failed in turn."""

    def __init__(self, message, rollback_errors=None):
        super().__init__(message)
        self.message = message
        self.rollback_errors = list(rollback_errors or [])

    def full_message(self):
        if not self.rollback_errors:
            return self.message + " (everything applied before it was restored)"
        return "%s; restoring earlier steps ALSO failed: %s" % (self.message, "; ".join(self.rollback_errors))


class Transaction:
    """Run steps; on the first failure undo the completed ones, newest first.

    Usage::

        tx = Transaction()
        try:
            tx.step("set vm.swappiness", do_write, undo_write)
            ...
        except Exception as exc:
            raise tx.abort(str(exc))   # undoes, returns an ApplyError to raise
    """

    def __init__(self):
        self._undo = []
        self.done = []

    def step(self, description, action, undo):
        """Run ``action()``; remember ``undo`` only once the action has returned."""
        result = action()
        self._undo.append((description, undo))
        self.done.append(description)
        return result

    def record(self, description, undo):
        """Remember an undo for something the caller already did itself."""
        self._undo.append((description, undo))
        self.done.append(description)

    def rollback(self):
        """Undo everything recorded, newest first; return the undo failures as strings."""
        errors = []
        while self._undo:
            description, undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:  # keep undoing the rest: a partial undo beats none
                errors.append("undo of %s: %s" % (description, exc))
        self.done = []
        return errors

    def abort(self, message):
        """Roll back and build the error the caller raises or reports."""
        return ApplyError(message, self.rollback())
