"""tuning_state and tuning_revert as modules: their shells, exit JSON and --diff."""

import json

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert as revert_engine
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_state as state_engine
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.modules import tuning_revert, tuning_state
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, write_tree


def test_the_modules_are_their_engines_shells(monkeypatch):
    contract.assert_module_is_its_engines_shell(tuning_state, state_engine, monkeypatch)
    contract.assert_module_is_its_engines_shell(tuning_revert, revert_engine, monkeypatch)


def test_record_diff_and_idempotence_then_revert_with_diff(tmp_path, capsys):
    conf = str(tmp_path / "lxc/x/config")
    state = str(tmp_path / "state.json")
    old, new = "lxc.uts.name = x\n", "lxc.uts.name = x\nlxc.prlimit.memlock = unlimited\n"
    write_tree(tmp_path, {"lxc/x/config": old})
    # a path of a file the collection writes (an LXC config under some lxcpath), where a module is run
    # with the node's own / as its root: its plan recorded first (the content it found), then applied
    record = records.file_change("lxc_memlock", conf, old.encode(), new.encode(), 0o644, 0o644)
    failed, result = run_module(tuning_state, {"path": state, "run_id": "r1", "planned": [record]}, capsys)
    assert not failed and result["changed"] and result["recorded"] == ["file:" + conf]
    (tmp_path / "lxc/x/config").write_text(new)
    args = {"path": state, "run_id": "r1", "applied": [record]}
    failed, result = run_module(tuning_state, args, capsys, diff=True)
    assert not failed and result["changed"]
    assert "-> sha256:" in result["diff"][0]["after"]
    assert json.load(open(state))["items"]["file:" + conf]["applied"] is True
    failed, result = run_module(tuning_state, args, capsys)
    assert not failed and result["changed"] is False
    failed, result = run_module(tuning_revert, {"path": state}, capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] and result["restored"][0]["target"] == conf
    assert "file:%s" % conf in result["diff"][0]["after"]
    assert (tmp_path / "lxc/x/config").read_text() == new
    failed, result = run_module(tuning_revert, {"path": state}, capsys)
    assert not failed and result["changed"] and (tmp_path / "lxc/x/config").read_text() == old
    failed, result = run_module(tuning_revert, {"path": state}, capsys)
    assert not failed and result["changed"] is False


def test_bad_mode_fails_naming_it(tmp_path, capsys):
    failed, result = run_module(tuning_state, {"path": str(tmp_path / "s.json"), "mode": "forget"}, capsys)
    assert failed and "forget" in result["msg"]
