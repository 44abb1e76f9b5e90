"""serving_health's ``unit``: a server whose unit failed, stopped or waits to be restarted is
reported at the next probe, not after the whole timeout; a unit still starting is waited for.

A fake clock makes the timeouts long (minutes) and the test instant: a wait that ran out the
timeout instead of stopping shows in ``attempts`` and ``elapsed_s``. A down server is a port
nothing listens on."""

import socket

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_health as sh
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.modules import serving_health
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module
from ansible_collections.gpufleet.tuning.tests.unit.serving_fake import FakeServer

FAILED = {"ActiveState": "failed", "SubState": "failed", "Result": "exit-code", "ExecMainStatus": "2"}
DEAD = {"ActiveState": "inactive", "SubState": "dead", "Result": "success", "ExecMainStatus": "0"}
RESTARTING = {"ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code", "ExecMainStatus": "1"}
STARTING = {"ActiveState": "activating", "SubState": "start", "Result": "success", "ExecMainStatus": "0"}
RUNNING = {"ActiveState": "active", "SubState": "running", "Result": "success", "ExecMainStatus": "0"}


def down_url():
    """A URL on a port nothing listens on (bound for a moment by the test, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return "http://127.0.0.1:%d" % port


class Clock:
    """Time that moves only when the wait sleeps."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class Unit:
    """systemctl show as a script: one state per call, the last one repeated."""

    def __init__(self, *states):
        self.states = list(states)
        self.asked = []

    def __call__(self, unit):
        self.asked.append(unit)
        return dict(self.states[min(len(self.asked), len(self.states)) - 1])


def wait(url, unit_states, clock=None, **params):
    clock = clock or Clock()
    tools = {"unit_state": unit_states, "clock": clock, "sleep": clock.sleep}
    return sh.run(dict({"url": url, "unit": "vllm.service", "timeout_s": 600, "interval_s": 5}, **params), tools=tools)


@pytest.mark.parametrize("state, words", [
    (FAILED, "vllm.service failed (result exit-code, exit status 2)"),
    (DEAD, "vllm.service inactive (result success, exit status 0)"),
    (RESTARTING, "vllm.service waits to be restarted (result exit-code, exit status 1)"),
    ({"ActiveState": "failed"}, "vllm.service failed (result ?, exit status ?)"),
])
def test_a_stopped_unit_ends_the_wait_at_the_first_probe(state, words):
    url = down_url()
    clock, unit = Clock(), Unit(state)
    with pytest.raises(ModuleFailure) as exc:
        wait(url, unit, clock)
    partial = exc.value.partial
    assert partial["ready"] is False and partial["stopped"] == words
    assert partial["attempts"] == 1 and partial["elapsed_s"] == 0 and clock.slept == []
    assert unit.asked == ["vllm.service"]
    assert exc.value.message.startswith("the server at %s stopped after 0 s (1 probe): %s; nothing answers at "
                                        % (url, words)), exc.value.message
    assert "600" not in exc.value.message  # not "down after 600 s": the timeout was not run out
    assert partial["changes"] == [] and partial["changed"] is False


def test_a_unit_still_starting_is_waited_for_until_the_timeout():
    url = down_url()
    clock, unit = Clock(), Unit(STARTING)
    with pytest.raises(ModuleFailure) as exc:
        wait(url, unit, clock, timeout_s=60, interval_s=5)
    partial = exc.value.partial
    assert partial["stopped"] is None and partial["down"] is True
    # probes at 0, 5, ... 60 s: the last one that still fits the timeout
    assert partial["attempts"] == 13 and clock.slept == [5] * 12 and partial["elapsed_s"] == 60
    assert len(unit.asked) == 13
    assert exc.value.message.startswith("the server at %s is down after 60 s (13 probes): nothing answers" % url)


def test_activating_then_failed_ends_at_the_probe_that_sees_it():
    url = down_url()
    clock, unit = Clock(), Unit(STARTING, STARTING, {"ActiveState": "activating", "SubState": "start-pre"}, FAILED)
    with pytest.raises(ModuleFailure) as exc:
        wait(url, unit, clock, timeout_s=3600, interval_s=10)
    partial = exc.value.partial
    assert partial["attempts"] == 4 and partial["elapsed_s"] == 30 and clock.slept == [10, 10, 10]
    assert partial["stopped"] == "vllm.service failed (result exit-code, exit status 2)"
    assert "stopped after 30 s (4 probes)" in exc.value.message


@pytest.mark.parametrize("state", [STARTING, RUNNING, {}, {"ActiveState": "inactive", "SubState": "failed"},
                                   {"ActiveState": "deactivating", "SubState": "stop-sigterm"}])
def test_a_running_starting_or_unknown_unit_does_not_stop_the_wait(state):
    assert sh.stopped_reason("vllm.service", state) is None


def test_a_ready_server_never_asks_the_unit():
    def unit_state(unit):
        raise AssertionError("the unit was asked although the server answered")

    with FakeServer() as fake:
        result = wait(fake.url, unit_state)
    contract.assert_records(result, "serving")
    assert result["ready"] is True and result["stopped"] is None and result["attempts"] == 1


def test_a_server_that_becomes_ready_while_the_unit_runs():
    unit = Unit(STARTING, RUNNING)
    with FakeServer(ready_after=0.3) as fake:
        result = sh.run({"url": fake.url, "unit": "vllm", "timeout_s": 20, "interval_s": 0.05},
                        tools={"unit_state": unit})
    assert result["ready"] is True and result["stopped"] is None and result["attempts"] > 1
    assert len(unit.asked) == result["attempts"] - 1 and set(unit.asked) == {"vllm.service"}


def test_without_unit_nothing_is_asked_and_the_timeout_runs_out():
    url = down_url()
    clock = Clock()
    with pytest.raises(ModuleFailure) as exc:
        sh.run({"url": url, "timeout_s": 20, "interval_s": 5}, tools={"clock": clock, "sleep": clock.sleep})
    assert exc.value.partial["stopped"] is None and exc.value.partial["attempts"] == 5
    assert "is down after 20 s (5 probes)" in exc.value.message


@pytest.mark.parametrize("unit", ["a/b", "", "vllm service", "x;y", "a" * 251])
def test_a_bad_unit_name_is_refused_before_any_probe(unit):
    def unit_state(name):
        raise AssertionError("asked")

    with pytest.raises(ModuleFailure) as exc:
        sh.run({"url": down_url(), "unit": unit}, tools={"unit_state": unit_state})
    assert exc.value.message.startswith("unit=%r is " % (unit,)), exc.value.message


def test_parse_show():
    text = ("ActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=203\n"
            "\nnot a property\nStatusText=a=b c \n")
    assert sh.parse_show(text) == {"ActiveState": "failed", "SubState": "failed", "Result": "exit-code",
                                   "ExecMainStatus": "203", "StatusText": "a=b c"}
    assert sh.parse_show("") == {} and sh.parse_show(None) == {}
    assert sh.stopped_reason("x.service", sh.parse_show(text)) == "x.service failed (result exit-code, exit status 203)"


# ------------------------------------------------------------------------------ the module

class FakeSystemctl:
    """AnsibleModule.get_bin_path and run_command for ``systemctl show``."""

    def __init__(self, monkeypatch, rc=0, out=""):
        self.argv, self.rc, self.out = [], rc, out
        monkeypatch.setattr(serving_health.AnsibleModule, "get_bin_path",
                            lambda module, name, required=False, opt_dirs=None: "/usr/bin/" + name)
        monkeypatch.setattr(serving_health.AnsibleModule, "run_command", self.run_command)

    def run_command(self, argv, *args, **kwargs):
        self.argv.append(list(argv))
        return self.rc, self.out, "" if self.rc == 0 else "Failed to connect to bus"


def test_the_module_asks_systemctl_show_and_stops_at_a_failed_unit(monkeypatch, capsys):
    fake = FakeSystemctl(monkeypatch, out="ActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=1\n")
    failed, result = run_module(serving_health, {"url": down_url(), "unit": "sglang.service", "timeout_s": 300}, capsys)
    assert failed and result["stopped"] == "sglang.service failed (result exit-code, exit status 1)"
    assert result["attempts"] == 1 and "stopped after" in result["msg"]
    assert fake.argv == [["/usr/bin/systemctl", "show", "--no-pager", "--property=ActiveState", "--property=SubState",
                          "--property=Result", "--property=ExecMainStatus", "--", "sglang.service"]]


def test_the_module_leaves_it_to_the_probes_when_systemctl_fails(monkeypatch, capsys):
    fake = FakeSystemctl(monkeypatch, rc=1)
    failed, result = run_module(serving_health, {"url": down_url(), "unit": "sglang", "timeout_s": 0.3,
                                                 "interval_s": 0.1}, capsys)
    assert failed and result["stopped"] is None and "is down after 0.3 s" in result["msg"]
    assert len(fake.argv) == result["attempts"] >= 2
