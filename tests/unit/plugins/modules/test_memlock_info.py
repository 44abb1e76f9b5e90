"""The memlock_info module's main(): read-only in check mode too, errors as fail_json."""

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import memlock_info as mi
from ansible_collections.gpufleet.tuning.plugins.modules import memlock_info
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_memlock_info import container, UNLIMITED
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_rlimit import LIMITS_8M


def test_check_mode_reports_host_shortfall(tmp_path, monkeypatch, capsys):
    paths = container(tmp_path, LIMITS_8M, UNLIMITED)
    monkeypatch.setattr(mi, "Paths", lambda: paths)
    failed, result = run_module(memlock_info, {"units": ["vllm.service"]}, capsys, check_mode=True)
    assert not failed and result["changed"] is False
    assert result["host_limit_ok"] is False and result["pid1"]["hard"] == "8388608"
    assert result["units"]["vllm.service"]["soft"] == "unlimited"


def test_bad_want_fails(tmp_path, monkeypatch, capsys):
    paths = mi.Paths(str(tmp_path))
    monkeypatch.setattr(mi, "Paths", lambda: paths)
    failed, result = run_module(memlock_info, {"want": "lots"}, capsys)
    assert failed and result["msg"] == "want: 'lots' is not a limit: use 'unlimited' or a number of bytes"


def test_garbled_limits_file_fails_cleanly(tmp_path, monkeypatch, capsys):
    write_tree(tmp_path, {"proc/1/limits": "nonsense\n"})
    paths = mi.Paths(str(tmp_path))
    monkeypatch.setattr(mi, "Paths", lambda: paths)
    failed, result = run_module(memlock_info, {}, capsys)
    assert failed and result["msg"].startswith("cannot read the limits:") and "1/limits" in result["msg"]


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(memlock_info, mi, monkeypatch)


def test_read_only_so_no_change_records(tmp_path, monkeypatch, capsys):
    paths = container(tmp_path, UNLIMITED, UNLIMITED)
    monkeypatch.setattr(mi, "Paths", lambda: paths)
    for check_mode in (False, True):
        failed, result = run_module(memlock_info, {"units": ["vllm"]}, capsys, check_mode=check_mode)
        assert not failed and result["changed"] is False and result["changes"] == [] and result["ok"] is True


def test_an_unreadable_limits_file_fails_naming_it(tmp_path, monkeypatch, capsys):
    import os
    write_tree(tmp_path, {"proc/1": None})
    os.mkfifo(str(tmp_path / "proc/1/limits"))
    paths = mi.Paths(str(tmp_path))
    monkeypatch.setattr(mi, "Paths", lambda: paths)
    failed, result = run_module(memlock_info, {}, capsys)
    assert failed and result["msg"].startswith("cannot read the limits: %s/proc/1/limits: is a FIFO" % tmp_path)
    assert "changes" not in result
