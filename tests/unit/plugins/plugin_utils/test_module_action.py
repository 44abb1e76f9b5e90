"""The collection's module action (plugins/plugin_utils/module_action.py): a pipelined module's
command line gets the one-read program, nothing else does, the program runs standard input as
Python itself would (in far fewer reads), and every module of the collection goes through it."""

import ast
import os
import shlex
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.module_action import (
    BOOT_PROGRAM, ONE_READ_PROGRAM, ModuleAction, boot_prelude, one_read_command)
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ONE_READ = " -c " + shlex.quote(ONE_READ_PROGRAM)


@pytest.mark.parametrize("cmd, interpreter, expected", [
    ("/usr/bin/python3", "#!/usr/bin/python3", "/usr/bin/python3" + ONE_READ),
    ("/usr/bin/python3", "/usr/bin/python3", "/usr/bin/python3" + ONE_READ),
    ("LANG=C.UTF-8 LC_ALL=C.UTF-8 /usr/bin/python3.11", "#!/usr/bin/python3.11",
     "LANG=C.UTF-8 LC_ALL=C.UTF-8 /usr/bin/python3.11" + ONE_READ),
    ("'/usr/bin/env python3'", "#!/usr/bin/env python3", "'/usr/bin/env python3'" + ONE_READ),
    ("/usr/bin/python3 ", "#!/usr/bin/python3", "/usr/bin/python3" + ONE_READ),
])
def test_the_pipelined_module_command_gets_the_one_read_program(cmd, interpreter, expected):
    assert one_read_command(cmd, interpreter, "sh") == expected


@pytest.mark.parametrize("cmd, interpreter, family", [
    ("/usr/bin/python3 /tmp/ansible-tmp-1/AnsiballZ_x.py", "#!/usr/bin/python3", "sh"),  # from a file
    ("/usr/bin/python3.11", "#!/usr/bin/python3", "sh"),        # another interpreter at the end
    ("/opt/usr/bin/python3", "#!/usr/bin/python3", "sh"),        # only a suffix of the word
    ("/usr/bin/python3", None, "sh"),                            # no module run yet (discovery)
    ("/usr/bin/python3", "", "sh"),
    ("/usr/bin/python3", "#!/usr/bin/python3", "csh"),           # other quoting rules
    ("/usr/bin/python3", "#!/usr/bin/python3", "powershell"),
    ("/usr/bin/python3", "#!/usr/bin/python3", None),
])
def test_any_other_command_is_left_as_it_is(cmd, interpreter, family):
    assert one_read_command(cmd, interpreter, family) == cmd


PROGRAM = (
    "#!/usr/bin/python3\n"
    "from __future__ import annotations\n"
    "import sys\n"
    "import __main__\n"
    "PAD = %r\n"
    "print(__name__, getattr(__main__, '__file__', None), len(PAD), sys.argv[1:])\n"
    "print('reads', [line.split()[1] for line in open('/proc/self/io') if line.startswith('syscr')][0])\n"
) % ("x" * 200000)


def run_through_sh(cmd, wrap=lambda c: c, prelude=b""):
    """Run cmd as Ansible runs a pipelined module: /bin/sh -c '<cmd> && sleep 0', program on stdin."""
    full = "/bin/sh -c " + shlex.quote(wrap(cmd) + " && sleep 0")
    proc = subprocess.run(full, shell=True, input=prelude + PROGRAM.encode(), capture_output=True, check=False,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    first, second = proc.stdout.decode().splitlines()[-2:]
    return first, int(second.split()[1])


def test_the_program_runs_as_from_standard_input_in_a_fraction_of_the_reads():
    plain = shlex.quote(sys.executable)
    as_python_runs_it, plain_reads = run_through_sh(plain)
    one_read, one_reads = run_through_sh(one_read_command(plain, "#!" + sys.executable, "sh"))
    assert one_read == as_python_runs_it == "__main__ <stdin> 200000 []"
    # Python reads a program from a pipe a byte at a time (CPython 3.11: one read per byte);
    # the one-read program reads it in a few large reads. Where a newer CPython reads in
    # blocks itself, the two counts are close and only the second assertion holds.
    assert one_reads < 200
    assert one_reads <= plain_reads


def test_with_the_boot_prelude_the_program_still_runs_as_from_standard_input():
    prelude = boot_prelude(True)
    cmd = one_read_command(shlex.quote(sys.executable), "#!" + sys.executable, "sh", len(prelude))
    assert cmd == shlex.quote(sys.executable) + " -c " + shlex.quote(BOOT_PROGRAM % {"size": len(prelude)})
    out, reads = run_through_sh(cmd, prelude=prelude)
    assert out == "__main__ <stdin> 200000 []" and reads < 200


def sudo_like(cmd):
    """What a become plugin makes of a command: another shell around it, quoted."""
    return "/bin/sh -c " + shlex.quote("echo BECOME-SUCCESS-abc ; " + cmd)


def test_a_become_wrapper_around_the_command_keeps_it_working():
    out, reads = run_through_sh(one_read_command(shlex.quote(sys.executable), "#!" + sys.executable, "sh"),
                                wrap=sudo_like)
    assert out == "__main__ <stdin> 200000 []" and reads < 200


CONTROLLER_ACTIONS = {"artifact_files", "audit_judge", "fleet_report", "role_arguments"}  # run on the controller, no module run


def test_every_module_run_on_a_target_goes_through_the_module_action():
    modules = sorted(name[:-3] for name in os.listdir(os.path.join(REPO, "plugins", "modules"))
                     if name.endswith(".py") and name != "__init__.py")
    assert "host_tuning" in modules and "sysctl_profile" in modules
    for name in modules:
        path = os.path.join(REPO, "plugins", "action", name + ".py")
        assert os.path.isfile(path), "plugins/modules/%s.py has no action plugin" % name
        if name in CONTROLLER_ACTIONS:
            continue
        tree = ast.parse(open(path).read())
        classes = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "ActionModule"]
        assert classes and [ast.unparse(base) for base in classes[0].bases] == ["ModuleAction"], path


def test_the_module_action_is_ansible_builtin_normal():
    from ansible.plugins.action.normal import ActionModule as NormalAction
    assert issubclass(ModuleAction, NormalAction)


INVENTORY = {"all": {"hosts": {"node-a": {"ansible_connection": "local",
                                          "ansible_python_interpreter": sys.executable}}}}
PLAY = """
- hosts: node-a
  gather_facts: false
  tasks:
    - name: Read this machine's locked-memory limits
      gpufleet.tuning.memlock_info: {}
      register: info
    - name: Show
      ansible.builtin.debug:
        msg: "RESULT {{ info | to_json }}"
"""


@pytest.mark.parametrize("pipelining", [True, False])
def test_a_module_runs_the_same_pipelined_in_one_read_or_from_a_file(tmp_path, pipelining):
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY, args=["-vvv", "-e", "ansible_pipelining=%s" % pipelining])
    assert rc == 0, out
    execs = [line for line in out.splitlines() if "EXEC" in line and "python" in line]
    assert execs, out
    runs_one_read = [line for line in execs if "stdin.buffer.read()" in line]
    if pipelining:
        assert len(runs_one_read) == 1, execs
    else:
        assert runs_one_read == [] and any("AnsiballZ_memlock_info.py" in line for line in execs), execs
    assert "ok: [node-a]" in out and "failed=0" in out


# What the AnsiballZ wrapper does, in small: the module's zip first on sys.path, an import of
# Ansible's module_utils from it, then the module itself run with runpy.
ZIPPED_RUN = """
import runpy, sys
sys.path.insert(0, %(zip)r)
from ansible.module_utils import probe
found = [type(f).__name__ for f in sys.meta_path]
runpy.run_module("ansible_collections.gpufleet.tuning.plugins.modules.probe_mod", run_name="__main__")
print("LOADER", type(probe.__spec__.loader).__name__, probe.VALUE, found.count("Finder"))
for finder in sys.meta_path:
    if type(finder).__name__ == "Finder":
        print("CACHE compiled", finder.cache.compiled, "hits", finder.cache.hits)
"""


def zipped_payload(tmp_path, with_cache=True):
    """A zip shaped like AnsiballZ's: Ansible's module_utils, the collection's bytecode cache
    (the real source) when with_cache, a module."""
    import zipfile
    path = tmp_path / "ansible_probe_mod_payload.zip"
    utils = os.path.join(REPO, "plugins", "module_utils", "common")
    base = "ansible_collections/gpufleet/tuning/plugins/"
    with zipfile.ZipFile(str(path), "w") as archive:
        for package in ("ansible", "ansible/module_utils", "ansible_collections", "ansible_collections/gpufleet",
                        base[:-len("/plugins/")], base[:-1], base + "modules", base + "module_utils",
                        base + "module_utils/common"):
            archive.writestr(package + "/__init__.py", "")
        archive.writestr("ansible/module_utils/probe.py", "VALUE = 6 * 7\n")
        archive.writestr(base + "modules/probe_mod.py", "print('MODULE', __name__)\n")
        if with_cache:
            for name in ("bytecode_cache.py", "trust.py"):
                with open(os.path.join(utils, name)) as handle:
                    archive.writestr(base + "module_utils/common/" + name, handle.read())
    return str(path)


def run_zipped(tmp_path, write, with_cache=True):
    prelude = boot_prelude(write, directory=str(tmp_path / "cache" / "bytecode"), root=str(tmp_path),
                           uid=os.geteuid())
    program = (ZIPPED_RUN % {"zip": zipped_payload(tmp_path, with_cache)}).encode()
    proc = subprocess.run([sys.executable, "-c", BOOT_PROGRAM % {"size": len(prelude)}], input=prelude + program,
                          capture_output=True, check=False, timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()
    folder = tmp_path / "cache" / "bytecode"
    return proc.stdout.decode().split("\n"), sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_the_boot_prelude_caches_what_the_wrapper_imports_from_the_zip(tmp_path):
    tmp_path.chmod(0o755)
    lines, written = run_zipped(tmp_path, write=True)
    # After the bytecode cache's own files (imported to install it): ansible.module_utils, its
    # probe, the modules package and the module, compiled once and kept, then read back.
    assert lines[:3] == ["MODULE __main__", "LOADER _Loader 42 1", "CACHE compiled 4 hits 0"], lines
    assert len(written) == 4
    again, kept = run_zipped(tmp_path, write=True)
    assert again[:3] == ["MODULE __main__", "LOADER _Loader 42 1", "CACHE compiled 0 hits 4"], again
    assert kept == written


def test_the_boot_prelude_writes_nothing_in_check_mode(tmp_path):
    tmp_path.chmod(0o755)
    lines, written = run_zipped(tmp_path, write=False)
    assert lines[:3] == ["MODULE __main__", "LOADER _Loader 42 1", "CACHE compiled 4 hits 0"], lines
    assert written == []


def test_without_the_bytecode_cache_in_the_zip_the_module_runs_as_ansible_runs_it(tmp_path):
    tmp_path.chmod(0o755)
    lines, written = run_zipped(tmp_path, write=True, with_cache=False)
    assert lines[:2] == ["MODULE __main__", "LOADER zipimporter 42 0"], lines
    assert written == []
