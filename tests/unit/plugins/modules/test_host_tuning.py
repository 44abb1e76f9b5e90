"""host_tuning as a module: its shell, exit and fail JSON, --diff, idempotence, check mode."""

import os

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import host_tuning as engine
from ansible_collections.gpufleet.tuning.plugins.modules import host_tuning
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, snapshot, write_tree

SYSCTL = {"name": "t", "settings": {"vm.swappiness": 10}}


def _fake(tmp_path, monkeypatch):
    write_tree(tmp_path, {"proc/sys/vm/swappiness": "60\n", "proc/self/uid_map": "0 0 4294967295\n"})
    paths = engine.Paths(str(tmp_path))
    monkeypatch.setattr(engine, "Paths", lambda: paths)
    return {"parts": {"sysctl_profile": SYSCTL}, "state_path": str(tmp_path / "state.json"), "run_id": "r1"}


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(host_tuning, engine, monkeypatch)


def test_exit_json_idempotence_and_the_record(tmp_path, monkeypatch, capsys):
    args = _fake(tmp_path, monkeypatch)
    failed, result = run_module(host_tuning, args, capsys)
    assert not failed and result["changed"] is True and result["applied"] == ["sysctl_profile"]
    assert result["modules"]["sysctl_profile"]["after"] == {"vm.swappiness": "10"}
    assert [c["target"] for c in result["changes"]][0] == "vm.swappiness"
    assert result["changes"][-1]["target"] == str(tmp_path / "state.json") and result["state_changed"] is True
    assert oct(os.stat(str(tmp_path / "state.json")).st_mode & 0o777) == "0o600"
    failed, result = run_module(host_tuning, dict(args, run_id="r2"), capsys)
    assert not failed and result["changed"] is False and result["changes"] == []


def test_check_mode_and_diff_write_nothing(tmp_path, monkeypatch, capsys):
    args = _fake(tmp_path, monkeypatch)
    before = snapshot(tmp_path)
    failed, result = run_module(host_tuning, args, capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["before"] == "vm.swappiness = 60\n" and result["diff"][0]["after"] == "vm.swappiness = 10\n"
    assert snapshot(tmp_path) == before


def test_fail_json_names_the_part_and_the_bad_value(tmp_path, monkeypatch, capsys):
    args = _fake(tmp_path, monkeypatch)
    before = snapshot(tmp_path)
    failed, result = run_module(host_tuning, dict(args, parts={"sysctl_profile": dict(SYSCTL, state="gone")}), capsys)
    assert failed and "parts.sysctl_profile" in result["msg"] and "gone" in result["msg"]
    failed, result = run_module(host_tuning, dict(args, parts={"sysctl_profile": {"name": "t", "settings": {"vm.bogus": 1}}}),
                                capsys)
    assert failed and result["msg"].startswith("sysctl_profile: ") and "vm.bogus" in result["msg"]
    assert result["failed_part"] == "sysctl_profile" and "changes" not in result
    assert snapshot(tmp_path) == before
