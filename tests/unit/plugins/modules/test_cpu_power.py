"""The cpu_power module's main(): argument handling, exit/fail JSON, check mode and --diff."""

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power as cp
from ansible_collections.gpufleet.tuning.plugins.modules import cpu_power
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, run_module
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_cpu_power import (
    cpu_tree, make_paths, snapshot)

ARGS = {"max_idle_latency_us": 10, "governor": "performance", "energy_performance_preference": "performance"}


def _fake(tmp_path, monkeypatch, **kw):
    base = cpu_tree(tmp_path, **kw)
    paths = make_paths(tmp_path)
    monkeypatch.setattr(cp, "Paths", lambda: paths)
    return base, paths


def test_exit_json_and_idempotence(tmp_path, monkeypatch, capsys):
    base, paths = _fake(tmp_path, monkeypatch)
    failed, result = run_module(cpu_power, ARGS, capsys)
    assert not failed and result["changed"] is True
    assert read(base / "cpu3/cpuidle/state3/disable") == "1\n"
    assert result["governor_after"] == {"performance": "0-3"}
    assert result["persisted"] is True
    assert result["changes"][0] == {"area": "cpu_power", "kind": "value", "target": "cpu0-3/state3 (C6) disable",
                                    "before": "0", "after": "1"}
    assert [c["kind"] for c in result["changes"]] == ["value"] * 3 + ["file"] * 3
    failed, result = run_module(cpu_power, ARGS, capsys)
    assert not failed and result["changed"] is False and result["changes"] == []


def test_check_and_diff(tmp_path, monkeypatch, capsys):
    _base, _paths = _fake(tmp_path, monkeypatch)
    before = snapshot(tmp_path)
    failed, result = run_module(cpu_power, ARGS, capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert snapshot(tmp_path) == before
    assert len(result["changes"]) == 6
    assert "state3 (C6, 170us) disabled on CPUs = none\n" in result["diff"][0]["before"]
    assert "state3 (C6, 170us) disabled on CPUs = 0-3\n" in result["diff"][0]["after"]


def test_no_cpuidle_no_cpufreq_is_skipped_not_failed(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch, idle_driver=None, policies=None)
    failed, result = run_module(cpu_power, ARGS, capsys)
    assert not failed
    assert result["changed"] is False and result["skipped"] is True and result["changes"] == []
    assert "no CPU idle states" in result["msg"] and "no cpufreq policies" in result["msg"]


def test_fail_json_lists_the_available_governors(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(cpu_power, dict(ARGS, governor="schedutil"), capsys)
    assert failed
    assert "governor 'schedutil' is not offered" in result["msg"]
    assert "available performance, powersave" in result["msg"]
    assert "changed" not in result or result["changed"] is False
    assert "changes" not in result


def test_bad_type_rejected_by_argspec(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(cpu_power, dict(ARGS, max_idle_latency_us="ten"), capsys)
    assert failed and "max_idle_latency_us" in result["msg"]


def test_negative_bound_rejected(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(cpu_power, dict(ARGS, max_idle_latency_us=-5), capsys)
    assert failed and "max_idle_latency_us -5 is not valid" in result["msg"]


def _podman(tmp_path):
    from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree
    write_tree(tmp_path, {"proc/1/environ": "container=podman\0", "run/.containerenv": ""})


def test_in_a_container_a_needed_write_fails_naming_it(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch, policies=None)
    _podman(tmp_path)
    before = snapshot(tmp_path)
    failed, result = run_module(cpu_power, ARGS, capsys)
    assert failed and snapshot(tmp_path) == before
    assert result["msg"].startswith("refusing to disable state3 (C6, 170us) on CPUs 0-3 from inside a container")
    assert result["container"]["kind"] == "podman"
    assert "changed" not in result or result["changed"] is False
    assert "changes" not in result
    assert result["states"][3]["disabled_after"] == "none"


def test_in_a_container_nothing_to_change_is_ok(tmp_path, monkeypatch, capsys):
    haltpoll = (("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("haltpoll idle", "haltpoll idle", 1, 1))
    _fake(tmp_path, monkeypatch, states=haltpoll, idle_driver="haltpoll", policies=None)
    _podman(tmp_path)
    before = snapshot(tmp_path)
    failed, result = run_module(cpu_power, ARGS, capsys, diff=True)
    assert not failed and result["changed"] is False and snapshot(tmp_path) == before
    assert "a systemd unit written here acts when the container starts" in result["skipped_keys"]["boot unit"]


def test_allow_in_container_writes_as_on_the_host(tmp_path, monkeypatch, capsys):
    base, paths = _fake(tmp_path, monkeypatch, policies=None)
    _podman(tmp_path)
    failed, result = run_module(cpu_power, dict(ARGS, allow_in_container=True), capsys)
    assert not failed and result["changed"] is True and result["persisted"] is True
    assert read(base / "cpu0/cpuidle/state3/disable") == "1\n"
    assert result["container"]["detected"] is True


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(cpu_power, cp, monkeypatch)
