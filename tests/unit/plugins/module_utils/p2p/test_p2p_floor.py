"""p2p_floor: link-derived floors for the GPU shapes the fleet runs, and override precedence."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_floor as pf
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan


def nvlink(count, arch, chip=None, version=None):
    return {"link": "nvlink", "nvlink_count": count, "architecture": arch, "chip": chip,
            "nvml_nvlink_version": version}


def pcie(speed, width, other=None, relation="same_switch", path=()):
    return {"link": "pcie", "pcie": [(speed, width), other or (speed, width)], "relation": relation,
            "path_links": list(path)}


@pytest.mark.parametrize("name, pair, uni, bidi, source", [
    # H100/H200 SXM: 18 links through NVSwitches, 450 GB/s one way
    ("H200 SXM", nvlink(18, "hopper", "gh100", 6), 337.5, 675.0, "NVLink 4 x 18 links x 25 GB/s x 0.75"),
    # H100 NVL: NVLink bridge, 600 GB/s both ways = 12 links
    ("H100 NVL", nvlink(12, "hopper", "gh100"), 225.0, 450.0, "NVLink 4 x 12 links x 25 GB/s x 0.75"),
    # H200 NVL, 2-way bridge: 900 GB/s = 18 links
    ("H200 NVL", nvlink(18, "hopper", "gh100"), 337.5, 675.0, "NVLink 4 x 18 links x 25 GB/s x 0.75"),
    # A100 SXM: NVLink 3, 12 links
    ("A100 SXM", nvlink(12, "ampere", "ga100", 4), 225.0, 450.0, "NVLink 3 x 12 links x 25 GB/s x 0.75"),
    # B200: NVLink 5, 18 links x 50
    ("B200", nvlink(18, "blackwell", "gb100", 7), 675.0, 1350.0, "NVLink 5 x 18 links x 50 GB/s x 0.75"),
    # A40 pair on a bridge: GA102, 4 links x 14.0625
    ("A40", nvlink(4, "ampere", "ga102"), 42.2, 84.4, "NVLink 3 x 4 links x 14.0625 GB/s x 0.75"),
    # L40S: PCIe 4 x16, no NVLink: 31.5 raw, 25.2 after protocol
    ("L40S", pcie(16.0, 16), 20.2, 35.3, "PCIe gen4 x16 (31.5 GB/s) x 0.8 protocol x 0.80"),
    # RTX PRO 6000 Blackwell: PCIe 5 x16, 63.0 raw
    ("RTX PRO 6000", pcie(32.0, 16), 40.3, 70.6, "PCIe gen5 x16 (63.0 GB/s) x 0.8 protocol x 0.80"),
])
def test_floors_per_gpu_shape(name, pair, uni, bidi, source):
    found = pf.expected(pair)
    assert found["unidirectional"] == (uni, source), name
    assert found["bidirectional"][0] == bidi, name
    assert found["bidirectional"][1].startswith("2 x "), name


def test_the_h200_measurement_passes_the_default_with_margin():
    found = pf.expected(nvlink(18, "hopper", "gh100"))
    assert 394 / found["unidirectional"][0] > 1.15 and 772 / found["bidirectional"][0] > 1.12
    assert found["link_gbps"] == 450.0


def test_pcie_raw_rates_and_encodings():
    assert pf.pcie_raw_gbps(32.0, 16) == pytest.approx(63.015, abs=0.01)
    assert pf.pcie_raw_gbps(16.0, 16) == pytest.approx(31.5, abs=0.01)
    assert pf.pcie_raw_gbps(8.0, 16) == pytest.approx(15.75, abs=0.01)
    assert pf.pcie_raw_gbps(5.0, 16) == pytest.approx(8.0)        # 8b/10b
    assert pf.pcie_raw_gbps(2.5, 1) == pytest.approx(0.25)
    assert pf.pcie_raw_gbps(64.0, 16) == pytest.approx(121.0)     # FLIT 242/256
    assert pf.pcie_raw_gbps(7.0, 16) is None


def test_pcie_takes_the_smaller_link_and_the_path():
    # one GPU at x8: the pair is x8
    assert pf.expected(pcie(32.0, 16, other=(32.0, 8)))["unidirectional"][1].startswith("PCIe gen5 x8 (31.5 GB/s)")
    # a gen4 switch uplink between two gen5 GPUs bounds the pair
    found = pf.expected(pcie(32.0, 16, path=[("0000:01:00.0", 16.0, 16)]))
    assert "bounded by bridge 0000:01:00.0 at gen4 x16 (31.5 GB/s)" in found["unidirectional"][1]
    assert found["unidirectional"][0] == 20.2
    # across CPU sockets: halved
    across = pf.expected(pcie(16.0, 16, relation="across_cpus"))
    assert across["unidirectional"][0] == 10.1 and "x 0.5 across_cpus" in across["unidirectional"][1]


def test_the_architecture_wins_over_a_wrong_nvml_version():
    # NVML has answered 5.0 (7) on H100: 50 GB/s per link would double the floor
    gen, rate, how = pf.nvlink_generation("hopper", "gh100", 7)
    assert (gen, rate) == (4, 25.0) and "the architecture wins" in how
    # a GPU newer than the table: NVML's version decides
    assert pf.nvlink_generation("unknown", None, 7)[:2] == (5, 50.0)
    assert pf.nvlink_generation(None, None, None)[0] is None


@pytest.mark.parametrize("pair, fragment", [
    (nvlink(None, "hopper"), "number of NVLink links between the GPUs is unknown"),
    (nvlink(18, "unknown"), "says which NVLink generation"),
    ({"link": "unknown"}, "link type of the pair is unknown"),
    ({"link": "pcie", "pcie": [(None, 16), (32.0, 16)], "pcie_unknown": "no link speed"}, "no link speed"),
])
def test_no_derived_floor_where_the_link_is_not_known(pair, fragment):
    found = pf.expected(pair)
    assert found["unidirectional"][0] is None and fragment in found["unidirectional"][1]


def test_an_override_for_the_link_type_wins():
    derived = pf.expected(nvlink(18, "hopper"))
    thresholds = dict((n, p2p_plan.parse_threshold(n, v)) for n, v in (
        ("min_unidirectional_gbps", {"nvlink": 380}), ("min_bidirectional_gbps", None)))
    assert pf.choose("min_unidirectional_gbps", "nvlink", thresholds, derived["unidirectional"]) == (
        380.0, "override min_unidirectional_gbps.nvlink")
    assert pf.choose("min_bidirectional_gbps", "nvlink", thresholds, derived["bidirectional"]) == derived["bidirectional"]
    # an override for pcie does not touch an nvlink pair
    pcie_only = {"min_unidirectional_gbps": p2p_plan.parse_threshold("x", {"pcie": 20})}
    assert pf.choose("min_unidirectional_gbps", "nvlink", pcie_only, derived["unidirectional"])[0] == 337.5
    # floors off: only overrides
    assert pf.choose("min_unidirectional_gbps", "nvlink", pcie_only, derived["unidirectional"], enabled=False)[0] is None


def test_efficiency_values():
    assert pf.efficiencies(None) == pf.DEFAULT_EFFICIENCY
    assert pf.efficiencies({"nvlink_unidirectional": "0.8"})["nvlink_unidirectional"] == 0.8
    for bad, fragment in (({"nvlink": 0.8}, "unknown key(s) nvlink"), ({"pcie_bidirectional": 0}, "out of range"),
                          ({"pcie_bidirectional": "nan"}, "out of range"), ({"pcie_bidirectional": True}, "not a number"),
                          ([0.8], "give a dict")):
        with pytest.raises(pf.FloorError) as exc:
            pf.efficiencies(bad)
        assert fragment in str(exc.value)
    eff = pf.efficiencies({"nvlink_unidirectional": 0.8})
    assert pf.expected(nvlink(18, "hopper"), eff)["unidirectional"] == (360.0, "NVLink 4 x 18 links x 25 GB/s x 0.80")


def test_verdicts_take_per_pair_floors_and_name_their_source():
    pairs = [{"src": 0, "dst": 1, "link": "nvlink", "peer_access": True, "unidirectional_p2p_gbps": 300.0},
             {"src": 1, "dst": 0, "link": "nvlink", "peer_access": True, "unidirectional_p2p_gbps": 394.0}]
    bidi = [{"a": 0, "b": 1, "link": "nvlink", "bidirectional_p2p_gbps": 700.0}]
    thresholds = dict((n, p2p_plan.parse_threshold(n, None)) for n in p2p_plan.THRESHOLD_RANGES)
    src = "NVLink 4 x 18 links x 25 GB/s x 0.75"
    floors = {"unidirectional": {(0, 1): (337.5, src), (1, 0): (337.5, src)},
              "bidirectional": {(0, 1): (675.0, "2 x " + src)}}
    short = p2p_plan.verdicts(pairs, bidi, thresholds, floors=floors)
    assert [(s["pair"], s["metric"]) for s in short] == [("0->1", "unidirectional_gbps")]
    assert short[0]["floor_source"] == src and short[0]["reason"].endswith("floor (%s)" % src)
