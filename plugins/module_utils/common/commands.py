# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few external binaries a module may run (modprobe, update-initramfs, ...), found and run
through AnsibleModule.

Why a wrapper: the engines in module_utils must stay testable without an AnsibleModule, and
every caller wants the same three things: find the binary on PATH (plus the sbin directories
AnsibleModule.get_bin_path adds, since modprobe lives in /sbin on Debian and a non-root PATH may
lack it), run it with a C locale so the messages it prints can be quoted and matched, and turn
a failure into one line that names the command, its exit status and the end of what it said.
Tests put fake executables first on PATH and pass the same object.

``tools`` is the one name for it: every engine takes it as
``run(params, check_mode=False, paths=None, tools=None)``, and a module passes
``commands.Commands(module)``. What it runs is an action, not state, so it never has a change
record of its own (records.py); the engine reports the command (``refresh_command``,
``initramfs``, ``plan``).
"""

from __future__ import annotations

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LANGUAGE": "C"}


def tail(text, lines=6):
    """The last non-empty ``lines`` lines of ``text``, joined with ' | ' (for one-line messages)."""
    kept = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


class CommandResult:
    """What one run returned: ``argv``, ``rc``, ``stdout``, ``stderr``."""

    def __init__(self, argv, rc, stdout, stderr):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout or ""
        self.stderr = stderr or ""

    @property
    def ok(self):
        return self.rc == 0

    @property
    def command(self):
        return " ".join(self.argv)

    @property
    def output(self):
        """What the command said, stderr first: the error lines are what a message needs."""
        return tail(self.stderr) or tail(self.stdout)

    def describe(self):
        said = self.output
        return "%s failed (exit status %s)%s" % (self.command, self.rc, (": " + said) if said else "")


class Commands:
    """Find and run binaries with an AnsibleModule's get_bin_path and run_command."""

    def __init__(self, module):
        self._module = module

    def which(self, name):
        """Full path of ``name``, or None when it is not installed."""
        return self._module.get_bin_path(name, required=False)

    def run(self, argv):
        rc, out, err = self._module.run_command(list(argv), check_rc=False, environ_update=dict(C_LOCALE))
        return CommandResult(argv, rc, out, err)
