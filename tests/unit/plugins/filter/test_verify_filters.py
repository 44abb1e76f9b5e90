import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.p2p_compare import p2p_compare
from ansible_collections.gpufleet.tuning.plugins.filter.verify_failures import verify_failures


def _report(uni, bidi, time="2026-11-30T09:00:00Z"):
    return {"time": time, "p2p": {
        "pairs": [{"src": 0, "dst": 1, "unidirectional_p2p_gbps": uni}, {"src": 1, "dst": 0, "unidirectional_p2p_gbps": None}],
        "bidirectional": [{"a": 0, "b": 1, "bidirectional_p2p_gbps": bidi}]}}


def test_failures_from_shortfalls_failed_p2p_and_drift():
    drift = {"changed": True, "diff": [{"before_header": "sysctl runtime values (before)",
                                        "after_header": "sysctl runtime values (after)",
                                        "before": "vm.swappiness = 60\n", "after": "vm.swappiness = 10\n"}]}
    data = {"p2p": {"shortfalls": [{"pair": "0->1", "reason": "120.0 GB/s over nvlink is below the 380.0 GB/s floor"}]},
            "readback": {"sysctl": drift, "pcie": {"changed": False}, "cpu": {"skipped": True},
                         "peermem": {"failed": True, "msg": "boom"}}}
    assert verify_failures(data) == [
        "p2p 0->1: 120.0 GB/s over nvlink is below the 380.0 GB/s floor",
        "peermem: read-back failed: boom",
        "drift: sysctl: would set vm.swappiness: 60 -> 10",
    ]


def test_failed_p2p_without_shortfalls_and_clean_pass():
    assert verify_failures({"p2p": {"failed": True, "msg": "cuInit failed"}, "readback": {}}) == ["p2p: cuInit failed"]
    assert verify_failures({"p2p": {"skipped": True, "msg": "no NVIDIA driver"}, "readback": {"sysctl": {}}}) == []
    with pytest.raises(AnsibleFilterError):
        verify_failures([])


def test_compare_with_previous_and_regression_limit():
    out = p2p_compare(_report(394.0, 770.0), _report(300.0, 765.0, "2026-12-01T09:00:00Z"), 10)
    assert out["previous_time"] == "2026-11-30T09:00:00Z"
    assert out["lines"] == ["0<->1 bidirectional: 765.0 GB/s (previous 770.0, -0.6%)",
                            "0->1 unidirectional: 300.0 GB/s (previous 394.0, -23.9%)"]
    assert out["regressions"] == [
        "p2p 0->1 unidirectional dropped 23.9% since 2026-11-30T09:00:00Z (394.0 -> 300.0 GB/s; limit 10.0%)"]


def test_compare_report_only_and_no_previous():
    assert p2p_compare(_report(394.0, 770.0), _report(300.0, 765.0), None)["regressions"] == []
    empty = p2p_compare("", _report(394.0, 770.0), 10)
    assert empty == {"previous_time": None, "lines": [], "regressions": []}
    from_text = p2p_compare('{"time": "t", "p2p": {"pairs": [{"src": 0, "dst": 1, "unidirectional_p2p_gbps": 100}]}}',
                            _report(100.0, 1.0), 5)
    assert from_text["lines"] == ["0->1 unidirectional: 100.0 GB/s (previous 100.0, +0.0%)"]
    with pytest.raises(AnsibleFilterError):
        p2p_compare({}, _report(1.0, 1.0), "ten")
