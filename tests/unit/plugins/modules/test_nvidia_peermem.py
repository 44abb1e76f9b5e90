"""The nvidia_peermem module's main(): a fake modprobe first on PATH, found by
AnsibleModule.get_bin_path and run with run_command, over a fake node."""

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_peermem as pm
from ansible_collections.gpufleet.tuning.plugins.modules import nvidia_peermem
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, run_module, snapshot, write_tree

LOAD_FILE = "etc/modules-load.d/gpufleet-nvidia-peermem.conf"


@pytest.fixture
def node(tmp_path, monkeypatch):
    def build(**kw):
        root = tmp_path / "root"
        kf.gpu_node(root, **kw)
        fake = kf.FakeBin(tmp_path, monkeypatch, root)
        kf.confine_bin_lookup(monkeypatch)
        fake.warned = kf.capture_warnings(monkeypatch, nvidia_peermem)
        paths = pm.Paths(str(root))
        monkeypatch.setattr(pm, "Paths", lambda: paths)
        return root, fake
    return build


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(nvidia_peermem, pm, monkeypatch)


def test_loads_through_run_command_and_is_idempotent(node, capsys):
    root, fake = node(ib_core=True, peer_symbol=True)
    failed, result = run_module(nvidia_peermem, {"params": {"peerdirect_support": 1}}, capsys)
    assert not failed and result["changed"] is True and result["loaded"] is True
    assert fake.calls() == ["modprobe nvidia_peermem peerdirect_support=1"]
    assert "nvidia_peermem\n" in read(root / LOAD_FILE)
    assert fake.warned == []
    assert [(c["kind"], c["target"], c["after"]) for c in kf.assert_changes_agree(result, "peermem")][2:] == [
        ("module", "nvidia_peermem", "loaded"), ("value", "nvidia_peermem.peerdirect_support", "1")]
    failed, result = run_module(nvidia_peermem, {"params": {"peerdirect_support": 1}}, capsys)
    assert not failed and result["changed"] is False and len(fake.calls()) == 1
    assert result["changes"] == []
    failed, result = run_module(nvidia_peermem, {"state": "absent"}, capsys)
    assert not failed and [(c["kind"], c["after"]) for c in kf.assert_changes_agree(result, "peermem")] == [
        ("file", None), ("file", None), ("module", "not loaded")]


def test_fail_json_before_modprobe_when_the_symbol_is_missing(node, capsys):
    root, fake = node()
    failed, result = run_module(nvidia_peermem, {}, capsys)
    assert failed and "ib_register_peer_memory_client is not available" in result["msg"]
    assert result["driver_version"] == kf.DRIVER_VERSION and result["peer_symbol"]["loaded"] is False
    assert "changed" not in result or result["changed"] is False
    assert fake.calls() == [] and not (root / LOAD_FILE).exists()


def test_require_false_exits_with_needed_false(node, capsys):
    _root, fake = node()
    failed, result = run_module(nvidia_peermem, {"require": False}, capsys)
    assert not failed and result["needed"] is False and result["changed"] is False
    assert result["changes"] == []
    assert fake.calls() == []


def test_modprobe_missing_is_a_clear_error(node, capsys):
    _root, fake = node(ib_core=True, peer_symbol=True)
    fake.remove("modprobe")
    failed, result = run_module(nvidia_peermem, {}, capsys)
    assert failed and "modprobe is not installed" in result["msg"]


def test_modprobe_error_message_is_quoted(node, capsys):
    root, fake = node(ib_core=True, peer_symbol=True)
    fake.fail("modprobe", "modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module, or unknown parameter (see dmesg)")
    failed, result = run_module(nvidia_peermem, {}, capsys)
    assert failed
    assert "could not insert 'nvidia_peermem': Unknown symbol in module" in result["msg"]
    assert "MLNX_OFED or DOCA-OFED" in result["msg"]
    assert not (root / LOAD_FILE).exists()
    assert "changes" not in result and "changed" not in result


def test_check_and_diff(node, capsys):
    root, fake = node(ib_core=True, peer_symbol=True)
    failed, result = run_module(nvidia_peermem, {}, capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["plan"][-1] == "modprobe nvidia_peermem"
    assert result["diff"][0] == {"before_header": "nvidia_peermem (before)", "after_header": "nvidia_peermem (after)",
                                 "before": "nvidia_peermem = not loaded\n", "after": "nvidia_peermem = loaded\n"}
    assert fake.calls() == [] and not (root / LOAD_FILE).exists()
    assert [(c["kind"], c["target"]) for c in kf.assert_changes_agree(result, "peermem")] == [
        ("file", str(root / LOAD_FILE)), ("module", "nvidia_peermem")]


def test_warnings_reach_ansible(node, capsys):
    root, fake = node(ib_core=True, peer_symbol=True)
    (root / "etc/modules-load.d/rdma.conf").write_text("nvidia_peermem\n")
    failed, result = run_module(nvidia_peermem, {"state": "absent"}, capsys)
    assert not failed and any("still lists nvidia_peermem" in w for w in fake.warned)


def test_bad_params_rejected(node, capsys):
    _root, fake = node()
    failed, result = run_module(nvidia_peermem, {"params": {"peerdirect_support": 5}}, capsys)
    assert failed and "peerdirect_support=5 is not valid" in result["msg"]
    failed, result = run_module(nvidia_peermem, {"state": "loaded"}, capsys)
    assert failed and "state" in result["msg"] and "loaded" in result["msg"]
    assert fake.calls() == []


def test_loaded_nv_peer_mem_fails_with_the_fix(node, capsys):
    root, fake = node(ib_core=True, peer_symbol=True, legacy_loaded=True)
    before = snapshot(root)
    failed, result = run_module(nvidia_peermem, {}, capsys)
    assert failed and "nv_peer_mem is loaded" in result["msg"] and "nvidia-peer-memory" in result["msg"]
    assert result["nv_peer_mem"]["loaded"] is True
    assert fake.calls() == [] and snapshot(root) == before


def test_two_spellings_of_one_param_are_refused(node, capsys):
    root, fake = node(ib_core=True, peer_symbol=True)
    before = snapshot(root)
    failed, result = run_module(nvidia_peermem, {"params": {"peerdirect_support": 1, "peerdirect-support": 0}},
                                capsys)
    assert failed and "'peerdirect-support' and 'peerdirect_support'" in result["msg"]
    assert fake.calls() == [] and snapshot(root) == before


def test_a_foreign_file_is_a_clean_failure(node, capsys):
    root, fake = node(ib_core=True, peer_symbol=True)
    write_tree(root, {LOAD_FILE: "nvidia_peermem\n"})
    before = snapshot(root)
    failed, result = run_module(nvidia_peermem, {"state": "absent"}, capsys)
    assert failed and result["msg"].startswith("refusing to remove %s: " % (root / LOAD_FILE))
    assert fake.calls() == [] and snapshot(root) == before


def test_rebuild_message_through_the_module(node, capsys):
    _root, fake = node(ib_core=True, peer_symbol=True)
    fake.fail("modprobe", "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument")
    failed, result = run_module(nvidia_peermem, {}, capsys)
    assert failed and "built against another ib_core" in result["msg"] and "lacks" not in result["msg"]
