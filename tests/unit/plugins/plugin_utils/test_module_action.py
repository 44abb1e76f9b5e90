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
    ONE_READ_PROGRAM, ModuleAction, one_read_command)
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


def run_through_sh(cmd, wrap=lambda c: c):
    """Run cmd as Ansible runs a pipelined module: /bin/sh -c '<cmd> && sleep 0', program on stdin."""
    full = "/bin/sh -c " + shlex.quote(wrap(cmd) + " && sleep 0")
    proc = subprocess.run(full, shell=True, input=PROGRAM.encode(), capture_output=True, check=False, timeout=60)
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


def sudo_like(cmd):
    """What a become plugin makes of a command: another shell around it, quoted."""
    return "/bin/sh -c " + shlex.quote("echo BECOME-SUCCESS-abc ; " + cmd)


def test_a_become_wrapper_around_the_command_keeps_it_working():
    out, reads = run_through_sh(one_read_command(shlex.quote(sys.executable), "#!" + sys.executable, "sh"),
                                wrap=sudo_like)
    assert out == "__main__ <stdin> 200000 []" and reads < 200


CONTROLLER_ACTIONS = {"artifact_files", "audit_judge", "fleet_report"}  # run on the controller, no module run


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
