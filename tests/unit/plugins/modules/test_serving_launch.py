"""The serving_launch module's main() over a fake root: it is its engine's shell, writes and
removes the drop-in, reports check mode and diff, records its before-state with state_path, and
fails with fail_json claiming no change."""

import json

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_launch as sl
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.modules import serving_launch
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, run_module, snapshot, write_tree

DROPIN = "etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf"
ARGV = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/Llama 3", "--port", "30000"]


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = tmp_path / "root"
    write_tree(root, {"usr/lib/systemd/system/sglang.service": "[Service]\nExecStart=/usr/bin/python3 -m x\n"})
    paths = sl.Paths(str(root))
    monkeypatch.setattr(sl, "Paths", lambda: paths)
    real = state_items.Paths
    monkeypatch.setattr(state_items, "Paths", lambda *args: real(str(root)))
    return root


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(serving_launch, sl, monkeypatch)


def test_writes_then_changes_nothing_then_removes(node, capsys):
    failed, result = run_module(serving_launch, {"unit": "sglang", "argv": ARGV}, capsys)
    assert not failed and result["changed"] is True and result["restart_required"] is True
    assert result["unit"] == "sglang.service" and result["path"] == str(node / DROPIN)
    assert [(c["area"], c["kind"], c["target"]) for c in contract.assert_records(result, "serving_launch")] == [
        ("serving_launch", "file", str(node / DROPIN))]
    assert read(node / DROPIN).endswith(
        'ExecStart=\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path "/models/Llama 3" --port 30000\n')
    failed, result = run_module(serving_launch, {"unit": "sglang", "argv": ARGV}, capsys)
    assert not failed and result["changed"] is False and result["changes"] == [] and result["restart_required"] is False
    failed, result = run_module(serving_launch, {"unit": "sglang", "state": "absent"}, capsys)
    assert not failed and result["changed"] is True and result["argv"] is None
    assert not (node / DROPIN).exists()


def test_check_mode_and_diff(node, capsys):
    before = snapshot(node)
    failed, result = run_module(serving_launch, {"unit": "sglang", "argv": ARGV, "environment": {"A": "1"}}, capsys,
                                check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["before_header"].endswith("90-gpufleet-launch.conf (absent)")
    assert result["diff"][0]["after"].endswith("--port 30000\nEnvironment=A=1\n")
    assert result["plan"] == ["write %s" % (node / DROPIN)]
    assert snapshot(node) == before


def test_a_foreign_dropin_fails_and_claims_no_change(node, capsys):
    write_tree(node, {DROPIN: "[Service]\nExecStart=\nExecStart=/bin/mine\n"})
    before = snapshot(node)
    failed, result = run_module(serving_launch, {"unit": "sglang", "argv": ARGV}, capsys)
    assert failed and result["msg"].startswith("refusing to overwrite %s" % (node / DROPIN))
    assert not result.get("changes") and not result.get("changed")
    assert snapshot(node) == before


@pytest.mark.parametrize("args, words", [
    ({"unit": "sglang", "argv": ARGV, "state": "gone"}, "gone"),
    ({"unit": "sglang.socket", "argv": ARGV}, "unit='sglang.socket' is a .socket unit"),
    ({"unit": "sglang", "argv": ["/bin/x", "a\nb"]}, "argv[1]='a\\nb'"),
])
def test_bad_input_fails(node, capsys, args, words):
    before = snapshot(node)
    failed, result = run_module(serving_launch, args, capsys)
    assert failed and words in result["msg"], result["msg"]
    assert snapshot(node) == before


def test_state_path_records_the_dropin(node, capsys):
    state_path = str(node / "var/lib/gpufleet-tuning/state.json")
    failed, result = run_module(serving_launch, {"unit": "sglang", "argv": ARGV, "state_path": state_path,
                                                 "run_id": "r1"}, capsys)
    assert not failed and result["changed"] is True
    assert result["state_record"]["recorded"] == ["file:%s" % (node / DROPIN)] and result["state_record"]["written"]
    with open(state_path) as handle:
        item = json.load(handle)["items"]["file:%s" % (node / DROPIN)]
    assert (item["area"], item["before"], item["first_run"]) == ("serving_launch", None, "r1")
