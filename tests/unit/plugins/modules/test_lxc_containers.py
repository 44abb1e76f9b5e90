"""The discovery module's main(): argument spec, exit JSON, check mode, refusal of bad terms."""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_containers as lc
from ansible_collections.gpufleet.tuning.plugins.modules import lxc_containers
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import lxc_fixtures as fx


def _fake(tmp_path, monkeypatch):
    write_tree(tmp_path, fx.proxmox_node())
    os.symlink("nodes/pve-gpu-01/lxc", str(tmp_path / "etc/pve/lxc"))
    paths = lc.Paths(str(tmp_path))
    monkeypatch.setattr(lc, "Paths", lambda: paths)
    return tmp_path


def test_default_is_gpu_and_nothing_changes(tmp_path, monkeypatch, capsys):
    root = _fake(tmp_path, monkeypatch)
    before = snapshot(root)
    failed, result = run_module(lxc_containers, {}, capsys, check_mode=True)
    assert not failed and result["changed"] is False
    assert result["select"] == ["gpu"] and result["selected"] == ["101", "102", "103", "106"]
    assert result["msg"] == "8 container(s) found, 4 selected (gpu)"
    assert snapshot(root) == before


def test_a_comma_separated_string_is_a_list(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_containers, {"select": "gpu,tag:web", "exclude": "101"}, capsys)
    assert not failed and result["selected"] == ["102", "103", "104", "106"]
    assert result["msg"] == "8 container(s) found, 4 selected (gpu, tag:web); 1 excluded by 101"


def test_bad_term_fails_naming_it(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_containers, {"select": ["gpu", "../x"]}, capsys)
    assert failed and "select term '../x' is not valid: use gpu, all, none" in result["msg"]
    assert "containers" not in result


def test_unreadable_and_latin1_configs_give_json_safe_output(tmp_path, monkeypatch, capsys):
    root = _fake(tmp_path, monkeypatch)
    warned = []
    monkeypatch.setattr(AnsibleModule, "warn", lambda _self, warning, **_kw: warned.append(warning))
    node = root / "etc/pve/nodes/pve-gpu-01/lxc"
    os.mkfifo(str(node / "150.conf"))
    (node / "151.conf").write_bytes(b"#Gr\xfc\xdfe\narch: amd64\nhostname: m\xfcnchen\ndev0: /dev/nvidia0\n")
    failed, result = run_module(lxc_containers, {"select": ["all"]}, capsys)
    assert not failed
    records = dict((r["id"], r) for r in result["containers"])
    assert records["151"]["hostname"] == "m\ufffdnchen" and records["151"]["selected"] is True
    assert "is a FIFO" in records["150"]["reason"]
    assert any("150.conf: is a FIFO" in w for w in warned)


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(lxc_containers, lc, monkeypatch)


def test_read_only_so_no_change_records(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    for check_mode in (False, True):
        failed, result = run_module(lxc_containers, {"select": ["all"]}, capsys, check_mode=check_mode)
        assert not failed and result["changed"] is False and result["changes"] == []
    failed, result = run_module(lxc_containers, {"select": ["../x"]}, capsys)
    assert failed and "changes" not in result
