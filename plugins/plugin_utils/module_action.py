# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action every module of this collection runs through: ansible.builtin.normal, except that
a pipelined module is read by the target's Python in one read instead of one byte at a time.

Why: with pipelining (on in this collection's plays, gpufleet_pipelining) Ansible starts the
target's interpreter with no script and writes the whole module (AnsiballZ: the module, its
module_utils zipped and base64-encoded, about 500 KB for host_tuning) to its standard input.
CPython (3.11 measured) reads a program from a pipe one byte per read(2): 514,211 reads for
host_tuning's 513,185 bytes. Run by hand on a 2-core machine, that one module run took 0.50 s
(0.28 s user, 0.21 s system); given the same bytes with `-c` and a one-line program that reads
standard input whole and runs it, 0.28 s (0.24 s user, 0.03 s system) in about 50 reads (README,
"Speed of a tuning pass", says how it was measured; benchmarks/runtime_pass.py times the pass).

What changes is only the command line of that one command: `<interpreter>` becomes
`<interpreter> -c '<read stdin, compile, exec>'`. The program runs as Python runs a program from
standard input (as __main__, __file__ '<stdin>', the same bytes; sys.argv is ['-c'] instead of
['']), so the AnsiballZ wrapper, or any program, behaves the same. Left as it is: a command
without input (no pipelining: the module runs from a file, which Python reads in blocks), a
command that does not end with the module's interpreter (interpreter discovery's probe runs
before the module's interpreter is known), and shells outside the POSIX sh family (their quoting
is not shlex's).
"""

from __future__ import annotations

import shlex

from ansible.plugins.action.normal import ActionModule as NormalAction

# Run standard input as the program, read whole: what `python -` does, in one read.
ONE_READ_PROGRAM = 'import sys;__file__="<stdin>";exec(compile(sys.stdin.buffer.read(),__file__,"exec"))'


def one_read_command(cmd, interpreter, shell_family):
    """cmd with the program on standard input read in one go, or cmd unchanged.

    cmd: the command Ansible built for a pipelined module run (environment assignments, then the
    interpreter, shell-quoted); interpreter: the module's shebang interpreter ('#!' optional);
    shell_family: the connection shell's SHELL_FAMILY. Unchanged unless the family is 'sh' and cmd
    ends with that interpreter as one quoted word.
    """
    interpreter = (interpreter or "").strip()
    if interpreter.startswith("#!"):
        interpreter = interpreter[2:].strip()
    if shell_family != "sh" or not interpreter or not isinstance(cmd, str):
        return cmd
    quoted = shlex.quote(interpreter)
    stripped = cmd.rstrip()
    if stripped != quoted and not stripped.endswith(" " + quoted):
        return cmd
    return "%s -c %s" % (stripped, shlex.quote(ONE_READ_PROGRAM))


class ModuleAction(NormalAction):
    """ansible.builtin.normal with the pipelined module read in one go (module docstring)."""

    def _low_level_execute_command(self, cmd, sudoable=True, in_data=None, *args, **kwargs):
        if in_data is not None:
            shell = getattr(self._connection, "_shell", None)
            cmd = one_read_command(cmd, self._used_interpreter, getattr(shell, "SHELL_FAMILY", None))
        return super()._low_level_execute_command(cmd, sudoable, in_data, *args, **kwargs)
