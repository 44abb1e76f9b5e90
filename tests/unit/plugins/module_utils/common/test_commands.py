"""The Commands wrapper over AnsibleModule.get_bin_path and run_command, with a stand-in module."""

import inspect

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_cmdline
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_peermem
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands


class FakeModule:
    def __init__(self):
        self.calls = []

    def get_bin_path(self, name, required=False):
        self.calls.append(("get_bin_path", name, required))
        return "/sbin/%s" % name if name == "modprobe" else None

    def run_command(self, argv, check_rc=False, environ_update=None):
        self.calls.append(("run_command", argv, check_rc, environ_update))
        return 1, "first\n", "modprobe: FATAL: Module nvidia_peermem not found in directory /lib/modules/6.1.0-28-amd64\n"


def test_which_and_run_through_the_module():
    module = FakeModule()
    cmds = commands.Commands(module)
    assert cmds.which("modprobe") == "/sbin/modprobe"
    assert cmds.which("dracut") is None
    outcome = cmds.run(["/sbin/modprobe", "nvidia_peermem"])
    assert module.calls[-1] == ("run_command", ["/sbin/modprobe", "nvidia_peermem"], False,
                                {"LANG": "C", "LC_ALL": "C", "LANGUAGE": "C"})
    assert not outcome.ok
    assert outcome.describe() == ("/sbin/modprobe nvidia_peermem failed (exit status 1): modprobe: FATAL: Module "
                                  "nvidia_peermem not found in directory /lib/modules/6.1.0-28-amd64")


def test_result_output_falls_back_to_stdout_and_tail_keeps_the_end():
    outcome = commands.CommandResult(["dracut", "--force"], 2, "".join("line %d\n" % i for i in range(10)), "")
    assert outcome.output == "line 4 | line 5 | line 6 | line 7 | line 8 | line 9"
    assert commands.CommandResult(["x"], 0, "", "").describe() == "x failed (exit status 0)"
    assert commands.CommandResult(["x"], 0, None, None).ok


@pytest.mark.parametrize("engine", [kernel_cmdline, nvidia_driver_options, nvidia_peermem])
def test_engines_take_the_runner_as_tools(engine):
    """One engine contract: run(params, check_mode=False, paths=None, tools=None), and a
    Paths(root="/") with everything derived from the root."""
    parameters = list(inspect.signature(engine.run).parameters.values())
    assert [(p.name, p.default) for p in parameters[:4]] == [
        ("params", inspect.Parameter.empty), ("check_mode", False), ("paths", None), ("tools", None)]
    assert all(p.default is not inspect.Parameter.empty for p in parameters[4:])
    assert "commands" not in inspect.signature(engine.run).parameters
    assert list(inspect.signature(engine.Paths).parameters) == ["root"]
    assert engine.Paths().root == "/"
