"""The module's main(): argument handling, exit/fail JSON, --diff output."""

import yaml

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.plugins.modules import sysctl_profile
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, write_tree


def _fake(tmp_path, monkeypatch):
    write_tree(tmp_path, {"proc/sys/vm/swappiness": "60\n", "proc/self/uid_map": "0 0 4294967295\n"})
    paths = sp.Paths(str(tmp_path))
    monkeypatch.setattr(sp, "Paths", lambda: paths)


def test_exit_json_and_idempotence(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 10}}, capsys)
    assert not failed and result["changed"] is True
    assert result["after"] == {"vm.swappiness": "10"}
    assert [(c["kind"], c["target"]) for c in result["changes"]] == [
        ("value", "vm.swappiness"), ("file", str(tmp_path / "etc/sysctl.d/90-gpufleet-t.conf")),
        ("file", str(tmp_path / "var/lib/gpufleet-tuning/sysctl/t.json"))]
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 10}}, capsys)
    assert not failed and result["changed"] is False and result["changes"] == []


def test_check_and_diff(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 10}}, capsys,
                                check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["changes"][0] == {"area": "sysctl", "kind": "value", "target": "vm.swappiness",
                                    "before": "60", "after": "10"}
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


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(sysctl_profile, sp, monkeypatch)
    from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
    doc = yaml.safe_load(sysctl_profile.DOCUMENTATION)["options"]
    assert doc["raise_only"]["default"] == list(sysctl.RAISE_ONLY_DEFAULT)


def test_kept_higher_in_exit_json(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    write_tree(tmp_path, {"proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t6291456\n"})
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {
        "net.ipv4.tcp_rmem": "4096 87380 134217728"}}, capsys)
    assert not failed
    assert result["after"]["net.ipv4.tcp_rmem"] == "4096 131072 134217728"
    assert result["kept_higher"]["net.ipv4.tcp_rmem"]["fields"] == [2]
    failed, result = run_module(sysctl_profile, {"name": "t", "raise_only": [], "settings": {
        "net.ipv4.tcp_rmem": "4096 87380 134217728"}}, capsys)
    assert not failed and result["after"]["net.ipv4.tcp_rmem"] == "4096 87380 134217728"


def test_fail_json_after_a_rollback_names_the_file_and_what_was_restored(tmp_path, monkeypatch, capsys):
    import errno
    import os
    from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
    _fake(tmp_path, monkeypatch)
    real = fileops.write_atomic

    def read_only(path, *a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    monkeypatch.setattr(fileops, "write_atomic", read_only)
    failed, result = run_module(sysctl_profile, {"name": "t", "settings": {"vm.swappiness": 10}}, capsys)
    monkeypatch.setattr(fileops, "write_atomic", real)
    assert failed
    assert "%s: Read-only file system (EROFS)" % (tmp_path / "etc/sysctl.d/90-gpufleet-t.conf") in result["msg"]
    assert "restored: vm.swappiness to '60'" in result["msg"]
    assert result["after"] == {"vm.swappiness": "60"} and result["rollback_errors"] == []
    assert "changed" not in result or result["changed"] is False
    assert "changes" not in result
    assert (tmp_path / "proc/sys/vm/swappiness").read_text().strip() == "60"


def test_foreign_file_fails_cleanly(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    write_tree(tmp_path, {"etc/sysctl.d/90-gpufleet-t.conf": "vm.swappiness = 1\n"})
    failed, result = run_module(sysctl_profile, {"name": "t", "state": "absent"}, capsys)
    assert failed and "refusing to remove it" in result["msg"]
    failed, result = run_module(sysctl_profile, {"name": "t", "state": "absent", "adopt": True}, capsys)
    assert not failed and result["changed"] is True
