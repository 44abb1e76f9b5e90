"""The module's main(): argument handling, exit/fail JSON, --diff output."""

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.plugins.modules import sysctl_profile
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, write_tree


def _fake(tmp_path, monkeypatch):
    write_tree(tmp_path, {"proc/sys/vm/swappiness": "60\n", "proc/self/uid_map": "0 0 4294967295\n"})
    paths = sp.Paths(proc_sys=str(tmp_path / "proc/sys"), sysctl_d=str(tmp_path / "etc/sysctl.d"),
                     state_dir=str(tmp_path / "state"), proc=str(tmp_path / "proc"), root=str(tmp_path))
    monkeypatch.setattr(sp, "Paths", lambda: paths)


def test_exit_json_and_idempotence(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 10}}, capsys)
    assert not failed and result["changed"] is True
    assert result["after"] == {"vm.swappiness": "10"}
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 10}}, capsys)
    assert not failed and result["changed"] is False


def test_check_and_diff(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 10}}, capsys,
                                check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["before"] == "vm.swappiness = 60\n"
    assert result["diff"][0]["after"] == "vm.swappiness = 10\n"
    assert (tmp_path / "proc/sys/vm/swappiness").read_text() == "60\n"
    assert not (tmp_path / "etc/sysctl.d").exists()


def test_fail_json_names_the_key(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.bogus": 1}}, capsys)
    assert failed
    assert "unknown key vm.bogus" in result["msg"]


def test_bad_choice_rejected_by_argspec(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 1},
                                                 "on_unwritable": "ignore"}, capsys)
    assert failed and "on_unwritable" in result["msg"] and "ignore" in result["msg"]
