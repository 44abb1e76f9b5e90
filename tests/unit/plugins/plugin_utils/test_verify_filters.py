import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.p2p_compare import p2p_compare
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.verify_failures import verify_failures
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records


def _report(uni, bidi, time="2026-11-30T09:00:00Z"):
    return {"time": time, "p2p": {
        "pairs": [{"src": 0, "dst": 1, "unidirectional_p2p_gbps": uni}, {"src": 1, "dst": 0, "unidirectional_p2p_gbps": None}],
        "bidirectional": [{"a": 0, "b": 1, "bidirectional_p2p_gbps": bidi}]}}


def test_failures_from_shortfalls_failed_p2p_and_drift():
    drift = {"changed": True, "changes": [records.value("sysctl", "vm.swappiness", "60", "10")]}
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


@pytest.mark.parametrize("limit, fragment", [
    # NaN makes "change < -limit" false for every drop; an infinity or a limit above 100 can
    # never be crossed; a negative one flags improvements.
    (float("nan"), "max_regression_pct=nan is not a finite number"),
    ("nan", "max_regression_pct='nan' is not a finite number"),
    (float("inf"), "max_regression_pct=inf is not a finite number"),
    ("-inf", "max_regression_pct='-inf' is not a finite number"),
    ("1e999", "max_regression_pct='1e999' is not a finite number"),
    (101, "max_regression_pct=101 is out of range: give a finite number from 0 to 100, or null"),
    (-5, "max_regression_pct=-5 is out of range"),
    (True, "max_regression_pct=True is not a number"),
    ([10], "max_regression_pct=[10] is not a number"),
])
def test_compare_refuses_a_limit_that_is_not_a_finite_percentage(limit, fragment):
    with pytest.raises(AnsibleFilterError) as exc:
        p2p_compare(_report(394.0, 770.0), _report(10.0, 10.0), limit)
    assert fragment in str(exc.value)
    # Refused with nothing to compare too: the role checks its option before measuring.
    with pytest.raises(AnsibleFilterError):
        p2p_compare({}, {}, limit)


def test_compare_limit_edges_and_text():
    assert p2p_compare(_report(100.0, 1.0), _report(0.5, 1.0), "100")["regressions"] == []
    assert len(p2p_compare(_report(100.0, 1.0), _report(99.0, 1.0), 0)["regressions"]) == 1
    assert p2p_compare({}, {}, None) == {"previous_time": None, "lines": [], "regressions": []}


def test_compare_does_not_let_non_finite_figures_pass():
    # The previous file is JSON text: json.loads accepts NaN and Infinity.
    previous = '{"time": "t0", "p2p": {"pairs": [{"src": 0, "dst": 1, "unidirectional_p2p_gbps": NaN}],' \
               ' "bidirectional": [{"a": 0, "b": 1, "bidirectional_p2p_gbps": Infinity}]}}'
    out = p2p_compare(previous, _report(394.0, 770.0), 10)
    assert out["regressions"] == []
    assert out["lines"] == ["0<->1 bidirectional: inf GB/s before is not a finite number > 0: not compared",
                            "0->1 unidirectional: nan GB/s before is not a finite number > 0: not compared"]
    # This run's figure NaN against a real previous one: a regression, not a silent pass.
    out = p2p_compare(_report(394.0, 770.0), _report(float("nan"), 770.0), 10)
    assert out["regressions"] == [
        "p2p 0->1 unidirectional measured nan GB/s, not a finite number > 0 (394.0 GB/s at 2026-11-30T09:00:00Z)"]
    assert p2p_compare(_report(394.0, 770.0), _report(float("nan"), 770.0), None)["regressions"] == []


def test_compare_survives_a_corrupt_previous_file():
    out = p2p_compare('{"time": "t0", "p2p": {', _report(394.0, 770.0), 10)
    assert out["previous_time"] is None and out["regressions"] == []
    assert out["lines"][0].startswith("the previous result is not valid JSON")
    with pytest.raises(AnsibleFilterError) as exc:
        p2p_compare({}, "not a report", 10)
    assert "current must be this run's report" in str(exc.value)
