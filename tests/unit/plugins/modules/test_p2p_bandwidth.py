import os

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import p2p_bandwidth as pb
from ansible_collections.gpufleet.tuning.plugins.modules import p2p_bandwidth
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module


def test_machine_without_driver_skips(capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda.so.999"}, capsys)
    assert not failed
    assert result["skipped"] is True and result["gpus"] == 0 and result["changed"] is False
    assert "no NVIDIA driver" in result["msg"]


def test_check_mode_skips_the_same_way(capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda.so.999"}, capsys, check_mode=True)
    assert not failed and result["skipped"] is True


def test_bad_threshold_fails_naming_it(capsys):
    failed, result = run_module(p2p_bandwidth, {"min_unidirectional_gbps": {"nvlnk": 380}}, capsys)
    assert failed
    assert "unknown link type(s) nvlnk" in result["msg"]


@pytest.mark.parametrize("args, fragment", [
    # Ansible's float type turns these strings into nan/inf: the module must still refuse them.
    ({"timeout_s": "nan"}, "timeout_s=nan is not a finite number"),
    ({"timeout_s": "inf"}, "timeout_s=inf is not a finite number"),
    ({"timeout_s": "1e999"}, "timeout_s=inf is not a finite number"),
    ({"timeout_s": "-inf"}, "timeout_s=-inf is not a finite number"),
    ({"timeout_s": 0}, "timeout_s=0.0 is out of range"),
    ({"timeout_s": 1e9}, "timeout_s=1000000000.0 is out of range"),
    ({"min_unidirectional_gbps": "nan"}, "min_unidirectional_gbps='nan' is not a finite number"),
    ({"min_bidirectional_gbps": {"pcie": "inf"}}, "min_bidirectional_gbps.pcie='inf' is not a finite number"),
    # min_p2p_speedup is min_speedup's old name, kept as an alias
    ({"min_p2p_speedup": {"default": "NaN"}}, "min_speedup.default='NaN' is not a finite number"),
    ({"min_speedup": 5000}, "min_speedup=5000 is out of range: give a finite number from 0 to 1000"),
])
def test_non_finite_or_huge_numbers_fail_before_the_driver_is_looked_for(args, fragment, capsys):
    # With no driver, an accepted input would end in skipped=true: a failure here proves the
    # input was refused before the library was even looked for.
    failed, result = run_module(p2p_bandwidth, dict(args, cuda_library="libcuda.so.999"), capsys)
    assert failed and not result.get("skipped")
    assert fragment in result["msg"]


@pytest.mark.parametrize("library", ["./libcuda.so.1", "libcuda-absent.so.1", "../lib/libcuda.so.1"])
def test_an_untrusted_cuda_library_fails_naming_it(library, capsys):
    # Before issue 15 each of these went to ctypes as given and, not found, ended in a skip.
    failed, result = run_module(p2p_bandwidth, {"cuda_library": library}, capsys)
    assert failed and not result.get("skipped")
    assert result["msg"].startswith("cuda_library=%r is not loaded: " % library)


def test_a_library_others_could_have_written_is_not_loaded(tmp_path, capsys):
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(str(drop), 0o777)
    planted = drop / "libcuda.so.1"
    planted.write_bytes(b"\x7fELF")  # not even a library: loading it would fail; refusing comes first
    failed, result = run_module(p2p_bandwidth, {"cuda_library": str(planted)}, capsys, check_mode=True)
    assert failed and not result.get("skipped")
    assert "the folder %s is writable by group and others" % drop in result["msg"]


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(p2p_bandwidth, pb, monkeypatch)


def _fake_gpus(monkeypatch, n=2):
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_p2p_bandwidth import (
        FakeDriver, FakeNvml)
    real = pb.Libraries
    monkeypatch.setattr(pb, "Libraries", lambda: real(driver=lambda lib: FakeDriver(n), nvml=FakeNvml))


def test_measured_and_skipped_results_carry_no_change_records(monkeypatch, capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda.so.999"}, capsys)
    assert not failed and result["skipped"] is True and result["changed"] is False and result["changes"] == []
    _fake_gpus(monkeypatch)
    for check_mode in (False, True):
        failed, result = run_module(p2p_bandwidth, {"size_mib": 8}, capsys, check_mode=check_mode)
        assert not failed and result["changed"] is False and result["changes"] == []
        assert result["selected"] == [0, 1] and result["shortfalls"] == []


def test_the_old_option_name_is_an_alias(monkeypatch, capsys):
    _fake_gpus(monkeypatch)
    for name in ("min_speedup", "min_p2p_speedup"):
        failed, result = run_module(p2p_bandwidth, {"size_mib": 8, name: {"nvlink": 2}}, capsys)
        assert not failed, result.get("msg")
        assert result["thresholds"]["min_speedup"] == {"nvlink": 2.0, "pcie": None, "unknown": None}


def test_a_shortfall_fails_with_every_figure(monkeypatch, capsys):
    """The verify role and anyone registering the result read the figures of a failed run too."""
    _fake_gpus(monkeypatch, 3)
    failed, result = run_module(p2p_bandwidth, {"size_mib": 8, "min_unidirectional_gbps": 10000}, capsys)
    assert failed and result["msg"].startswith("GPU peer-to-peer falls short on 6 check(s): 0->1 ")
    assert len(result["pairs"]) == 6 and len(result["bidirectional"]) == 3 and len(result["shortfalls"]) == 6
    assert result["matrices"]["unidirectional_p2p_gbps"][0][1] == result["pairs"][0]["unidirectional_p2p_gbps"]
    assert "Unidirectional bandwidth, peer access ENABLED" in result["table"]
    assert result["thresholds"]["min_unidirectional_gbps"]["nvlink"] == 10000.0
    assert "changed" not in result and "changes" not in result and "skipped" not in result
