from ansible_collections.gpufleet.tuning.plugins.modules import p2p_bandwidth
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module


def test_machine_without_driver_skips(capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda-absent.so.1"}, capsys)
    assert not failed
    assert result["skipped"] is True and result["gpus"] == 0 and result["changed"] is False
    assert "no NVIDIA driver" in result["msg"]


def test_check_mode_skips_the_same_way(capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda-absent.so.1"}, capsys, check_mode=True)
    assert not failed and result["skipped"] is True


def test_bad_threshold_fails_naming_it(capsys):
    failed, result = run_module(p2p_bandwidth, {"min_unidirectional_gbps": {"nvlnk": 380}}, capsys)
    assert failed
    assert "unknown link type(s) nvlnk" in result["msg"]
