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

What changes is only that one command: `<interpreter>` becomes `<interpreter> -c '<read stdin,
run the boot prelude, compile, exec>'`, and the boot prelude (BOOT_PRELUDE, a few hundred bytes)
goes ahead of the module on standard input. The module runs as Python runs a program from
standard input (as __main__, __file__ '<stdin>', the same bytes; sys.argv is ['-c'] instead of
['']), so the AnsiballZ wrapper, or any program, behaves the same.

The boot prelude: the AnsiballZ wrapper imports Ansible's module_utils (basic and about 100 more
files for host_tuning) from the module's zip before the module's own code runs, and Python
compiles code from a zip at every run: some 0.1 s of CPU of a module run of about 0.3 s. The
prelude puts a finder on sys.meta_path that waits for the first `ansible*` import from the zip
(sys.path[0] is then the zip), imports this collection's bytecode cache from it
(plugins/module_utils/common/bytecode_cache.py: the node's root-only cache, keyed by the
source's hash) and installs it for the zip's `ansible.*` and `ansible_collections.*` modules,
written unless the task runs in check mode. A module whose zip lacks the bytecode cache (it does
not import it), a non-root run, or any error there: the finder steps aside and the module is
imported as Ansible imports it. Left as it is: a command
without input (no pipelining: the module runs from a file, which Python reads in blocks), a
command that does not end with the module's interpreter (interpreter discovery's probe runs
before the module's interpreter is known), and shells outside the POSIX sh family (their quoting
is not shlex's).
"""

from __future__ import annotations

import shlex

from ansible.plugins.action.normal import ActionModule as NormalAction

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import ansiballz_store

# This collection's modules, as the task names them (the packed payload is kept for those only).
COLLECTION_PREFIX = "gpufleet.tuning."

# Run standard input as the program, read whole: what `python -` does, in one read.
ONE_READ_PROGRAM = 'import sys;__file__="<stdin>";exec(compile(sys.stdin.buffer.read(),__file__,"exec"))'
# The same, the first %(size)d bytes of standard input run first as the boot prelude, in a namespace
# of their own.
BOOT_PROGRAM = ('import sys;d=sys.stdin.buffer.read();'
                'exec(compile(d[:%(size)d],"<gpufleet-boot>","exec"),{"__name__":"gpufleet_boot"});'
                '__file__="<stdin>";exec(compile(d[%(size)d:],__file__,"exec"))')

BOOT_PRELUDE = '''import sys


class Boot:
    """Installs the collection's bytecode cache at the first ansible* import from the zip."""

    done = False

    def find_spec(self, name, path=None, target=None):
        if self.done or not name.startswith("ansible") or not sys.path or not str(sys.path[0]).endswith(".zip"):
            return None
        self.done = True
        try:
            from ansible_collections.gpufleet.tuning.plugins.module_utils.common import bytecode_cache as bc
            bc.install(write=%(write)r, cache=bc.Cache(%(cache)s), zip_prefixes=bc.ZIP_PREFIXES)
        except Exception:
            pass
        return None


sys.meta_path.insert(0, Boot())
'''


def boot_prelude(write, directory=None, root="/", uid=0):
    """The boot prelude's bytes: the bytecode cache installed, written when ``write`` (not in
    check mode); ``directory``, ``root`` and ``uid`` (tests): another cache folder, the folder
    its trust is checked up to, and the one owner trusted."""
    cache = "write=%r" % bool(write)
    if directory is not None:
        cache += ", directory=%r, root=%r, uid=%d" % (directory, root, uid)
    return (BOOT_PRELUDE % {"write": bool(write), "cache": cache}).encode("ascii")


def one_read_command(cmd, interpreter, shell_family, prelude_size=0):
    """cmd with the program on standard input read in one go, or cmd unchanged.

    cmd: the command Ansible built for a pipelined module run (environment assignments, then the
    interpreter, shell-quoted); interpreter: the module's shebang interpreter ('#!' optional);
    shell_family: the connection shell's SHELL_FAMILY; prelude_size: the length of a boot prelude
    ahead of the program on standard input (0: none). Unchanged unless the family is 'sh' and cmd
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
    program = BOOT_PROGRAM % {"size": prelude_size} if prelude_size else ONE_READ_PROGRAM
    return "%s -c %s" % (stripped, shlex.quote(program))


class ModuleAction(NormalAction):
    """ansible.builtin.normal with the pipelined module read in one go (module docstring), and
    this collection's packed modules kept from one run to the next (plugin_utils/ansiballz_store.py)."""

    def _configure_module(self, module_name, module_args, task_vars):
        fqn = None
        if isinstance(module_name, str) and module_name.startswith(COLLECTION_PREFIX) and ansiballz_store.wanted(task_vars):
            fqn = ansiballz_store.MODULE_PREFIX + module_name[len(COLLECTION_PREFIX):]
        restored = fqn is not None and ansiballz_store.restore(fqn)
        built = super()._configure_module(module_name, module_args, task_vars)
        if fqn is not None and not restored:
            ansiballz_store.keep(fqn)
        return built

    def _low_level_execute_command(self, cmd, sudoable=True, in_data=None, *args, **kwargs):
        if in_data is not None:
            shell = getattr(self._connection, "_shell", None)
            prelude = boot_prelude(not self._task.check_mode)
            changed = one_read_command(cmd, self._used_interpreter, getattr(shell, "SHELL_FAMILY", None), len(prelude))
            if changed != cmd:
                cmd = changed
                in_data = prelude + (in_data if isinstance(in_data, bytes) else in_data.encode("utf-8"))
        return super()._low_level_execute_command(cmd, sudoable, in_data, *args, **kwargs)
