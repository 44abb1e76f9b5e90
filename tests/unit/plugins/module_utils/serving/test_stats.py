"""The benchmark's figures from per-request timings, and the before/after verdict with its noise band."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats


def record(ttft, e2e, tokens, gaps=None):
    return {"ttft": ttft, "e2e": e2e, "output_tokens": tokens, "gaps": gaps or [], "error": None}


def test_percentiles_interpolate_like_numpy():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([10], 99) == 10
    assert stats.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90) == pytest.approx(9.1)
    assert stats.percentile([], 50) is None


def test_tpot_and_decode_speed_leave_the_first_token_out():
    # 11 tokens: the first after 0.1 s, the last ten 0.01 s apart -> TPOT 10 ms, 100 tok/s.
    figures = stats.level_figures([record(0.1, 0.2, 11, [0.01] * 10)], wall=0.2)
    assert figures["tpot_ms"]["p50"] == pytest.approx(10.0)
    assert figures["decode_tokens_per_s"] == pytest.approx(100.0)
    assert figures["ttft_ms"]["p50"] == pytest.approx(100.0)
    assert figures["output_tokens_per_s"] == pytest.approx(55.0)
    assert figures["itl_ms"]["p99"] == pytest.approx(10.0)


def test_errors_are_counted_not_measured():
    bad = {"index": 1, "error": {"kind": "cut", "message": "x", "status": None}}
    figures = stats.level_figures([record(0.1, 0.2, 11), bad], wall=1.0)
    assert (figures["requests"], figures["completed"], figures["errors"]) == (2, 1, 1)
    assert figures["requests_per_s"] == 1.0


def test_goodput_counts_only_requests_within_every_slo():
    fast = record(0.05, 0.15, 11)   # TTFT 50 ms, TPOT 10 ms
    slow_start = record(0.5, 0.6, 11)  # TTFT 500 ms
    slow_decode = record(0.05, 0.55, 11)  # TPOT 50 ms
    figures = stats.level_figures([fast, slow_start, slow_decode], wall=1.0, slo_ttft_ms=100, slo_tpot_ms=20)
    assert figures["slo_met"] == 1 and figures["goodput_requests_per_s"] == 1.0
    assert stats.level_figures([fast], wall=1.0)["goodput_requests_per_s"] is None


def test_a_difference_inside_the_noise_is_no_measurable_change():
    before = stats.spread([100.0, 104.0, 98.0])
    assert (before["min"], before["median"], before["max"]) == (98.0, 100.0, 104.0)
    inside = stats.compare(before, stats.spread([103.0, 105.0, 101.0]), "decode_tokens_per_s")
    assert inside["verdict"] == "no measurable change" and inside["noise_pct"] == 6.0 and inside["delta_pct"] == 3.0
    better = stats.compare(before, stats.spread([120.0, 121.0, 119.0]), "decode_tokens_per_s")
    assert better["verdict"] == "better" and better["delta_pct"] == 20.0


def test_lower_is_better_for_latencies():
    before = stats.spread([10.0, 10.5, 10.2])
    assert stats.compare(before, stats.spread([15.0, 15.1, 15.2]), "ttft_ms.p50")["verdict"] == "worse"
    assert stats.compare(before, stats.spread([5.0, 5.1, 5.2]), "ttft_ms.p50")["verdict"] == "better"
    assert stats.compare(stats.spread([None]), before, "ttft_ms.p50")["verdict"] == "not measured"


def test_ceiling_is_bandwidth_over_bytes_per_token():
    # The case: 7.77 B parameters in bf16 on one 4.8 TB/s GPU -> about 309 tok/s.
    assert stats.ceiling(7.77, 2, 4800, 1) == pytest.approx(308.88, abs=0.01)
    assert stats.ceiling(70, 2, 4800, 8) == pytest.approx(274.29, abs=0.01)
