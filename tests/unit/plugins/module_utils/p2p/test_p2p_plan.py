import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan as plan

DEVICES = [{"index": i, "bdf": "0000:%02x:00.0" % (0x18 + i * 0x10), "name": "NVIDIA H200"} for i in range(8)]


def test_pairs_scale_as_n_choose_2():
    assert plan.plan_pairs([0, 1]) == [(0, 1)]
    pairs = plan.plan_pairs(list(range(8)))
    assert len(pairs) == 28
    ordered = set()
    for a, b in pairs:
        assert a < b
        ordered.update([(a, b), (b, a)])
    assert len(ordered) == 56


@pytest.mark.parametrize("text, expected", [
    ("0000:1B:00.0", "0000:1b:00.0"),
    ("1b:00.0", "0000:1b:00.0"),
    ("00000000:1b:00.0", "0000:1b:00.0"),
    ("1b:00", None),
    ("1b:00.8", None),
    ("zz:00.0", None),
])
def test_normalize_bdf(text, expected):
    assert plan.normalize_bdf(text) == expected


def test_select_all_and_by_index_or_bdf():
    assert plan.select_gpus(None, DEVICES) == list(range(8))
    assert plan.select_gpus([3, "0000:18:00.0"], DEVICES) == [0, 3]
    assert plan.select_gpus(["2", "28:00.0"], DEVICES) == [1, 2]


@pytest.mark.parametrize("requested, fragment", [
    ([9, 1], "gpus entry 9: no such GPU; this machine has 8"),
    (["0000:99:00.0", 1], "no GPU at that address"),
    (["gpu0", 1], "neither an index nor a PCI address"),
    ([1, 1], "listed twice"),
    ([1], "needs at least 2"),
    ([True, 1], "not a GPU index"),
])
def test_select_refuses(requested, fragment):
    with pytest.raises(plan.PlanError) as exc:
        plan.select_gpus(requested, DEVICES)
    assert fragment in str(exc.value)


def test_threshold_forms():
    assert plan.parse_threshold("t", None) == {"nvlink": None, "pcie": None, "unknown": None}
    assert plan.parse_threshold("t", 380) == {"nvlink": 380.0, "pcie": 380.0, "unknown": 380.0}
    assert plan.parse_threshold("t", {"nvlink": 380, "default": 20}) == {"nvlink": 380.0, "pcie": 20.0, "unknown": 20.0}
    assert plan.parse_threshold("t", {"pcie": "25"}) == {"nvlink": None, "pcie": 25.0, "unknown": None}


@pytest.mark.parametrize("value, fragment", [
    ("fast", "give a number or a dict"),
    (True, "give a number or a dict"),
    (-1, "t=-1 is out of range: give a finite number from 0 to 100000"),
    ({"infiniband": 10}, "unknown link type(s) infiniband"),
    ({"nvlink": "x"}, "t.nvlink='x' is not a number"),
])
def test_threshold_refusals(value, fragment):
    with pytest.raises(plan.PlanError) as exc:
        plan.parse_threshold("t", value)
    assert fragment in str(exc.value)


NOT_FINITE = [float("nan"), float("inf"), float("-inf"), "nan", "NaN", "inf", "-inf", "Infinity", "1e999", " nan "]


@pytest.mark.parametrize("value", NOT_FINITE)
@pytest.mark.parametrize("name", sorted(plan.THRESHOLD_RANGES))
def test_threshold_refuses_nan_and_infinities_in_every_form(name, value):
    # A floor of NaN never fails (every comparison with NaN is false); +inf always fails.
    for given, shown in ((value, name), ({"nvlink": value, "pcie": 20}, name + ".nvlink"),
                         ({"default": value, "nvlink": 380}, name + ".default")):
        with pytest.raises(plan.PlanError) as exc:
            plan.parse_threshold(name, given)
        assert str(exc.value).startswith("%s=%r is not a finite number" % (shown, value))


@pytest.mark.parametrize("name, value, fragment", [
    ("min_unidirectional_gbps", 100001, "min_unidirectional_gbps=100001 is out of range: give a finite number from 0 to 100000"),
    ("min_bidirectional_gbps", "3e5", "min_bidirectional_gbps='3e5' is out of range"),
    ("min_speedup", 1001, "min_speedup=1001 is out of range: give a finite number from 0 to 1000"),
    ("min_speedup", {"pcie": -0.5}, "min_speedup.pcie=-0.5 is out of range"),
    ("min_unidirectional_gbps", 10 ** 400, "min_unidirectional_gbps=10000000000000000000...00000000 is out of range"),
    ("min_unidirectional_gbps", {"nvlink": True}, "min_unidirectional_gbps.nvlink=True is not a number"),
])
def test_threshold_ranges(name, value, fragment):
    with pytest.raises(plan.PlanError) as exc:
        plan.parse_threshold(name, value)
    assert fragment in str(exc.value)


def test_threshold_range_edges_are_accepted():
    assert plan.parse_threshold("min_unidirectional_gbps", 100000)["pcie"] == 100000.0
    assert plan.parse_threshold("min_speedup", "1000")["nvlink"] == 1000.0
    assert plan.parse_threshold("min_bidirectional_gbps", 0)["unknown"] == 0.0
    # An explicit null for one link still means "no floor there", whatever the default says.
    assert plan.parse_threshold("min_speedup", {"default": 2, "pcie": None}) == {"nvlink": 2.0, "pcie": None, "unknown": 2.0}


@pytest.mark.parametrize("value, fragment", [
    (float("nan"), "is not a finite number"),
    (0, "is out of range: give a finite number greater than 0 and at most 60"),
    (-1, "is out of range"),
    (61, "is out of range"),
    (True, "is not a number"),
    (None, "is not a number"),
    ("soon", "is not a number"),
])
def test_finite_number(value, fragment):
    with pytest.raises(plan.PlanError) as exc:
        plan.finite_number("x", value, 0, 60, low_open=True)
    assert str(exc.value).startswith("x=%r " % (value,)) and fragment in str(exc.value)
    assert plan.finite_number("x", "2.5", 0, 60, low_open=True) == 2.5


def _thresholds(uni=None, bidi=None, speedup=None):
    return {"min_unidirectional_gbps": plan.parse_threshold("u", uni),
            "min_bidirectional_gbps": plan.parse_threshold("b", bidi),
            "min_speedup": plan.parse_threshold("s", speedup)}


def _pair(src, dst, uni, staged=38.0, link="nvlink", access=True, data_ok=True):
    return {"src": src, "dst": dst, "link": link, "peer_access": access, "unidirectional_p2p_gbps": uni,
            "unidirectional_staged_gbps": staged, "data_ok": data_ok}


def test_verdicts_pass_and_each_kind_of_shortfall():
    good = [_pair(0, 1, 393.7), _pair(1, 0, 394.0)]
    bidi = [{"a": 0, "b": 1, "link": "nvlink", "bidirectional_p2p_gbps": 770.2}]
    th = _thresholds({"nvlink": 380, "pcie": 20}, {"nvlink": 750, "pcie": 35}, 1.5)
    assert plan.verdicts(good, bidi, th) == []

    slow = [_pair(0, 1, 120.0), _pair(1, 0, 394.0, staged=300.0), _pair(0, 2, None, link="pcie", access=False),
            _pair(2, 0, 25.0, staged=10.0, link="pcie", data_ok=False), {"src": 1, "dst": 2, "error": "cuMemcpyPeerAsync failed"}]
    short = plan.verdicts(slow, [{"a": 0, "b": 1, "link": "nvlink", "bidirectional_p2p_gbps": 700.0}], th)
    got = [(s["pair"], s["metric"]) for s in short]
    assert got == [("0->1", "unidirectional_gbps"), ("1->0", "p2p_speedup"), ("0->2", "peer_access"),
                   ("2->0", "data"), ("1->2", "error"), ("0<->1", "bidirectional_gbps")]
    assert short[0]["value"] == 120.0 and short[0]["threshold"] == 380.0
    assert "below the 380.0 GB/s floor" in short[0]["reason"]
    assert short[1]["value"] == 1.31


def test_verdicts_pcie_floor_differs_from_nvlink():
    th = _thresholds({"nvlink": 380, "pcie": 20})
    assert plan.verdicts([_pair(0, 1, 25.0, link="pcie")], [], th) == []
    assert len(plan.verdicts([_pair(0, 1, 25.0, link="nvlink")], [], th)) == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "fast", True])
def test_a_measured_figure_that_is_not_a_finite_number_is_a_shortfall(bad):
    # NaN slips past every floor (nan < 380 is false); it must fail on its own.
    th = _thresholds({"nvlink": 380}, {"nvlink": 750}, 1.5)
    short = plan.verdicts([_pair(0, 1, bad), _pair(1, 0, 394.0, staged=bad)],
                          [{"a": 0, "b": 1, "link": "nvlink", "bidirectional_p2p_gbps": bad}], th)
    assert [(s["pair"], s["metric"]) for s in short] == [
        ("0->1", "unidirectional_gbps"), ("1->0", "unidirectional_staged_gbps"), ("0<->1", "bidirectional_gbps")]
    assert all("not a finite number >= 0: the measurement is not valid" in s["reason"] for s in short)
    # Without floors too: an invalid measurement is never a pass.
    assert len(plan.verdicts([_pair(0, 1, bad)], [], _thresholds())) == 1


def test_verdicts_refuse_thresholds_that_bypassed_parsing():
    th = _thresholds(380)
    th["min_unidirectional_gbps"]["nvlink"] = float("nan")
    with pytest.raises(plan.PlanError) as exc:
        plan.verdicts([_pair(0, 1, 10.0)], [], th)
    assert "min_unidirectional_gbps.nvlink=nan" in str(exc.value)


def test_no_peer_access_can_be_tolerated():
    assert plan.verdicts([_pair(0, 1, None, access=False)], [], _thresholds(380), require_peer_access=False) == []


def test_matrices_and_table():
    pairs = [dict(_pair(0, 1, 393.7), latency_p2p_us=4.99, unidirectional_staged_gbps=37.7),
             dict(_pair(1, 0, 394.0), latency_p2p_us=4.71)]
    bidi = [{"a": 0, "b": 1, "bidirectional_p2p_gbps": 770.2, "bidirectional_staged_gbps": 56.5}]
    mats = plan.matrices([0, 1], pairs, bidi)
    assert mats["unidirectional_p2p_gbps"] == [[None, 393.7], [394.0, None]]
    assert mats["bidirectional_p2p_gbps"] == [[None, 770.2], [770.2, None]]
    assert mats["gpus"] == [0, 1]
    text = plan.render_table(mats, [{"index": 0, "name": "NVIDIA H200", "bdf": "0000:00:06.0"},
                                    {"index": 1, "name": "NVIDIA H200", "bdf": "0000:00:07.0"}], 1.1)
    lines = text.splitlines()
    assert lines[0] == "GPU 0: NVIDIA H200 (0000:00:06.0)"
    block = lines.index("Unidirectional bandwidth, peer access ENABLED (GB/s)")
    assert lines[block + 1] == "src\\dst        0        1"
    assert lines[block + 2] == "     0         -    393.7"
    assert lines[block + 3] == "     1     394.0        -"
    assert "Small-copy latency, peer access ENABLED (us)" in lines
    assert "Small-copy latency, peer access DISABLED (us)" not in lines  # nothing measured: no block
    assert lines[-1] == "measured in 1.1 s"


def test_matrices_follow_selected_order_not_raw_indices():
    mats = plan.matrices([2, 5], [dict(_pair(5, 2, 10.0))], [])
    assert mats["unidirectional_p2p_gbps"] == [[None, None], [10.0, None]]


def test_runtime_model_bounds_the_default_run_at_8_gpus():
    # Module defaults: 256 MiB, 10 repetitions, 2 warm-up, staged on, 100 latency copies.
    # Rates measured on 2 x H200 (benchmarks/p2p_matrix.py): ~390 GB/s P2P, ~38 GB/s staged
    # (at most 64 MiB per staged copy). The model is fed pessimistic rates and full-size staged
    # copies, and must still leave the 8-GPU run inside the 60 s a fleet rollout allows.
    pessimistic = plan.estimate_seconds(8, 256 << 20, 10, 2, True, 100, p2p_gbps=300.0, staged_gbps=10.0)
    assert pessimistic < 60
    two = plan.estimate_seconds(2, 256 << 20, 10, 2, True, 100, p2p_gbps=390.0, staged_gbps=38.0,
                                per_gpu_setup_s=0.3)
    assert two < 2.0
    # Quadratic in N: 28 pairs at 8 GPUs against 1 at 2.
    per_pair = plan.estimate_seconds(2, 256 << 20, 10, 2, True, 100, per_gpu_setup_s=0)
    assert plan.estimate_seconds(8, 256 << 20, 10, 2, True, 100, per_gpu_setup_s=0) == pytest.approx(28 * per_pair)


def test_summarize_shortfalls_caps_length():
    short = [{"pair": "%d->0" % i, "reason": "slow"} for i in range(10)]
    text = plan.summarize_shortfalls(short, limit=3)
    assert text == "0->0 slow; 1->0 slow; 2->0 slow; and 7 more"
