"""Is this node normal? (plugin_utils/node_normal.py): the figures of verify.json and
benchmark.json; each host against its profile's expectations (GPU count per node kind, NVLinks,
memory bandwidth, the P2P floors, the decode efficiency band), both ways; each host against the
hosts of its profile (median, MAD, its floor, the direction of each figure); the verdict."""

import copy
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import node_normal, profile_data, profile_node
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_select
from ansible_collections.gpufleet.tuning.tests.unit import profile_facts as pf

BENCHMARK = os.path.join(pf.REPO, "docs", "examples", "h200-serving", "benchmark.json")


def benchmark_example():
    with open(BENCHMARK) as handle:
        return json.load(handle)


def selected(facts, **kwargs):
    node = profile_node.describe(facts)
    return profile_select.select(node, profile_data.load_dir(pf.PROFILES_DIR), **kwargs), node


def by_check(checks, name):
    return [c for c in checks if c["check"] == name]


def verify_record(pairs=((0, 1, 394.2, 337.5), (1, 0, 391.0, 337.5)), bidi=((0, 1, 745.0, 675.0),), link="nvlink"):
    """verify.json's p2p, the module's result (plugins/modules/p2p_bandwidth.py RETURN)."""
    source = "NVLink 4 x 18 links x 25 GB/s x 0.75"
    return {"host": "node-a", "p2p": {
        "changed": False,
        "pairs": [{"src": s, "dst": d, "link": link, "peer_access": True, "unidirectional_p2p_gbps": v, "link_gbps": 450.0,
                   "floor_unidirectional_gbps": f, "floor_source": source} for s, d, v, f in pairs],
        "bidirectional": [{"a": a, "b": b, "link": link, "bidirectional_p2p_gbps": v, "link_gbps": 900.0,
                           "floor_bidirectional_gbps": f, "floor_source": source} for a, b, v, f in bidi],
    }}


# ------------------------------------------------------------------------------ figures

def test_figures_of_verify_pairs_and_bidirectional():
    found = node_normal.figures(verify_record())
    assert [f["figure"] for f in found] == ["p2p 0->1 one way", "p2p 1->0 one way", "p2p 0<->1 both ways"]
    assert found[0] == {"figure": "p2p 0->1 one way", "value": 394.2, "unit": "GB/s", "better": "higher", "source": "verify.json",
                        "link": "nvlink", "floor": 337.5, "floor_source": "NVLink 4 x 18 links x 25 GB/s x 0.75"}
    assert found[2]["value"] == 745.0 and found[2]["floor"] == 675.0


def test_figures_leave_out_what_was_not_measured():
    record = verify_record()
    record["p2p"]["pairs"].append({"src": 0, "dst": 2, "unidirectional_p2p_gbps": None, "error": "cudaErrorPeerAccessUnsupported"})
    record["p2p"]["pairs"].append({"src": None, "dst": 2, "unidirectional_p2p_gbps": 20.0})
    record["p2p"]["pairs"].append({"src": 2, "dst": 0, "unidirectional_p2p_gbps": True})
    record["p2p"]["bidirectional"].append({"a": 0, "b": 2, "bidirectional_p2p_gbps": "fast"})
    record["p2p"]["pairs"][0]["floor_unidirectional_gbps"] = None
    found = node_normal.figures(record)
    assert [f["figure"] for f in found] == ["p2p 0->1 one way", "p2p 1->0 one way", "p2p 0<->1 both ways"]
    assert found[0]["floor"] is None
    assert node_normal.figures() == [] and node_normal.figures({}, {}) == [] and node_normal.figures({"p2p": None}, "x") == []


def test_figures_of_the_benchmark_example():
    found = node_normal.figures(None, benchmark_example())
    assert [(f["figure"], f["value"], f["unit"], f["better"]) for f in found] == [
        ("decode_tokens_per_s", 676.63, "tok/s", "higher"),
        ("ttft_ms_p50", 25.408, "ms", "lower"),
        ("decode_efficiency_pct", 33.68, "%", "higher"),
    ]
    assert found[2]["formula"] == "1 GPU x 4814.3 GB/s / (1.19815 B parameters x 2 bytes) = 2009.1 tokens/s"
    assert {f["source"] for f in found} == {"benchmark.json"}


def test_figures_of_a_benchmark_without_a_single_stream_level():
    record = benchmark_example()
    record["levels"] = [dict(level, concurrency=4) for level in record["levels"]]
    assert [f["figure"] for f in node_normal.figures(None, record)] == ["decode_efficiency_pct"]
    record["efficiency"] = {"before": record["efficiency"]["before"]}
    assert node_normal.figures(None, record) == []


def test_figures_of_both_records():
    found = node_normal.figures(verify_record(), benchmark_example())
    assert len(found) == 6 and {f["source"] for f in found} == {"verify.json", "benchmark.json"}


# ------------------------------------------------------------------------------ absolute: GPU count

@pytest.mark.parametrize("facts, status, message", [
    (pf.hgx_h100(), "ok", "8 GPU(s); hgx-hopper expects 8 or 4 on a bare_metal node"),
    (pf.build_facts([pf.gpu(b, pf.H100_SXM, links=18) for b in pf.HGX_BDFS[:2]], nvswitches=4), "outside",
     "2 GPU(s); hgx-hopper expects 8 or 4 on a bare_metal node"),
    (pf.vm_h100_x1(), "ok", "1 GPU(s); hgx-hopper expects 1, 2, 4 or 8 on a vm node"),
    (pf.build_facts([pf.gpu(b, pf.H200_SXM, links=18) for b in pf.HGX_BDFS[:3]], kind="vm"), "outside",
     "3 GPU(s); hgx-hopper expects 1, 2, 4 or 8 on a vm node"),
    (pf.hgx_b200(), "ok", "8 GPU(s); hgx-blackwell expects 8 on a bare_metal node"),
    (pf.build_facts([pf.gpu(b, pf.B200, links=18) for b in pf.HGX_BDFS[:4]], nvswitches=2), "outside",
     "4 GPU(s); hgx-blackwell expects 8 on a bare_metal node"),
    (pf.rtx_pro_6000_x8(), "ok", "8 GPU(s); rtx-pro-6000-blackwell expects 8, 4, 2 or 1 on a proxmox_host node"),
    (pf.lxc_l40s(), "ok", "2 GPU(s); l40s expects 1, 2, 4 or 8 on a lxc_guest node"),
    (pf.build_facts([pf.gpu("0000:%02x:00.0" % (0x10 + i), pf.L40S) for i in range(3)], kind="lxc"), "outside",
     "3 GPU(s); l40s expects 1, 2, 4 or 8 on a lxc_guest node"),
])
def test_gpu_count_per_node_kind(facts, status, message):
    profile, node = selected(facts)
    check, = by_check(node_normal.absolute(profile, node, []), "gpu_count")
    assert (check["status"], check["message"]) == (status, message)
    assert check["value"] == node["gpu_count"] and check["expected"] == profile["expectations"]["gpu_count"][node["kind"]]


def test_gpu_count_on_base_is_not_applicable():
    profile, node = selected(pf.unknown_gpu())
    check, = by_check(node_normal.absolute(profile, node, []), "gpu_count")
    assert check["status"] == "not_applicable" and check["message"] == "base sets no GPU count for a bare_metal node"


# ------------------------------------------------------------------------------ absolute: NVLinks

def test_nvlinks_ok_on_every_gpu_of_an_hgx_board():
    profile, node = selected(pf.hgx_h200())
    checks = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    assert len(checks) == 8 and {c["status"] for c in checks} == {"ok"}
    assert checks[0]["item"] == "GPU 0000:18:00.0" and checks[0]["message"] == "18 of 18 NVLinks active (H200 SXM 141GB)"


def test_a_gpu_with_links_down_is_outside():
    facts = pf.hgx_h100()
    facts["gpus"][3] = pf.gpu(pf.HGX_BDFS[3], pf.H100_SXM, links=18, active=16, pci_path=pf.hgx_path(pf.HGX_BDFS[3]))
    profile, node = selected(facts)
    checks = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    outside = [c for c in checks if c["status"] == "outside"]
    assert [(c["item"], c["message"], c["value"], c["expected"]) for c in outside] == [
        ("GPU 0000:5d:00.0", "16 of 18 NVLinks active (H100 SXM 80GB)", 16, 18)]


def test_nvlinks_of_one_gpu_without_a_switch_are_not_applicable():
    profile, node = selected(pf.vm_h100_x1())
    check, = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    assert check["status"] == "not_applicable" and check["message"] == "one GPU on this node: no peer to link to"


def test_nvlinks_of_one_gpu_on_a_switch_are_held():
    facts = pf.build_facts([pf.gpu("0000:00:06.0", pf.H200_SXM, links=18, active=12, pci_path=["pci0000:00", "0000:00:06.0"])],
                           kind="vm")
    profile, node = selected(facts)
    check, = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    assert check["status"] == "outside" and check["message"] == "12 of 18 NVLinks active (H200 SXM 141GB)"


def test_nvlinks_unknown_where_nvml_could_not_say():
    facts = pf.build_facts([pf.gpu(b, pf.H100_SXM, links=18, nvml=False) for b in pf.HGX_BDFS[:2]], kind="vm")
    profile, node = selected(facts)
    checks = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    assert {(c["status"], c["message"]) for c in checks} == {("unknown", "the NVLinks of this GPU are unknown (NVML)")}


def test_nvlinks_of_unbridged_nvl_cards_are_not_applicable_and_bridged_ones_held():
    profile, node = selected(pf.h100_pcie_unbridged())
    checks = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    assert {(c["status"], c["message"]) for c in checks} == {
        ("not_applicable", "no NVLink bridge on this GPU (bridges are optional here)")}
    profile, node = selected(pf.h100_nvl_pair())
    checks = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    assert [(c["status"], c["message"]) for c in checks] == [("ok", "12 of 12 NVLinks active (H100 NVL 94GB)")] * 2
    facts = pf.h100_nvl_pair()
    facts["gpus"][1] = pf.gpu("0000:c1:00.0", pf.H100_NVL, links=12, active=8, remote="gpu", remote_bdf="0000:41:00.0")
    profile, node = selected(facts)
    checks = by_check(node_normal.absolute(profile, node, []), "nvlink_links")
    assert [c["status"] for c in checks] == ["ok", "outside"] and checks[1]["message"] == "8 of 12 NVLinks active (H100 NVL 94GB)"


@pytest.mark.parametrize("shape", ["l40s-x4", "rtx-pro-6000-x8", "a100", "no-gpu"])
def test_nvlinks_are_not_held_where_the_model_has_none(shape):
    profile, node = selected(pf.shape(shape))
    assert by_check(node_normal.absolute(profile, node, []), "nvlink_links") == []


# ------------------------------------------------------------------------------ absolute: memory bandwidth

def test_memory_bandwidth_ok_and_outside():
    facts = pf.hgx_h100()
    facts["gpus"][0] = pf.gpu(pf.HGX_BDFS[0], ("10de:2330", "NVIDIA H100 80GB HBM3", "hopper", 5120, 1593), links=18)
    profile, node = selected(facts)
    checks = by_check(node_normal.absolute(profile, node, []), "memory_bandwidth")
    assert [c["status"] for c in checks] == ["outside"] + ["ok"] * 7
    assert checks[0]["message"] == "2039.0 GB/s peak (NVML), H100 SXM 80GB: 3350 GB/s, below 90 %"
    assert (checks[0]["value"], checks[0]["expected"]) == (2039.0, 3350)
    assert checks[1]["message"] == "3352.3 GB/s peak (NVML), H100 SXM 80GB: 3350 GB/s"


def test_memory_bandwidth_at_the_90_percent_edge():
    def status(have):
        profile, node = selected(pf.l40s_x4())
        node["gpus"][0]["memory_bandwidth_gbps"] = have
        return by_check(node_normal.absolute(profile, node, []), "memory_bandwidth")[0]["status"]
    assert status(777.6) == "ok" and status(777.5) == "outside" and status(None) == "unknown" and status(True) == "unknown"


def test_memory_bandwidth_unknown_without_nvml():
    profile, node = selected(pf.vm_h100_x1(nvml=False))
    check, = by_check(node_normal.absolute(profile, node, []), "memory_bandwidth")
    assert check["status"] == "unknown"
    assert check["message"] == "the GPU's memory bandwidth is unknown (NVML); H100 SXM 80GB: 3350 GB/s"


def test_memory_bandwidth_is_not_held_on_base():
    profile, node = selected(pf.mixed())
    assert by_check(node_normal.absolute(profile, node, []), "memory_bandwidth") == []


# ------------------------------------------------------------------------------ absolute: P2P and efficiency

def test_p2p_at_or_over_its_floor_is_ok_and_under_it_outside():
    profile, node = selected(pf.vm_h200_x2())
    record = verify_record(pairs=((0, 1, 337.5, 337.5), (1, 0, 290.4, 337.5)), bidi=((0, 1, 700.0, 675.0),))
    checks = by_check(node_normal.absolute(profile, node, node_normal.figures(record), record), "p2p_floor")
    assert [(c["item"], c["status"]) for c in checks] == [
        ("p2p 0->1 one way", "ok"), ("p2p 1->0 one way", "outside"), ("p2p 0<->1 both ways", "ok")]
    assert checks[1]["message"] == "290.4 GB/s over nvlink, floor 337.5 (NVLink 4 x 18 links x 25 GB/s x 0.75)"
    assert (checks[1]["value"], checks[1]["expected"]) == (290.4, 337.5)


def test_p2p_without_a_floor_is_unknown_with_why():
    profile, node = selected(pf.vm_h200_x2())
    record = verify_record(pairs=((0, 1, 300.0, None),), bidi=())
    record["p2p"]["pairs"][0]["floor_source"] = "link_floors=false"
    check, = by_check(node_normal.absolute(profile, node, node_normal.figures(record), record), "p2p_floor")
    assert check["status"] == "unknown" and check["message"] == "300.0 GB/s over nvlink; no floor: link_floors=false"


def test_p2p_skipped_is_not_applicable_and_missing_unknown():
    profile, node = selected(pf.vm_h100_x1())
    skipped = {"p2p": {"skipped": True, "skip_reason": "1 GPU(s) visible: peer-to-peer needs at least 2"}}
    check, = by_check(node_normal.absolute(profile, node, [], skipped), "p2p_floor")
    assert (check["status"], check["message"]) == ("not_applicable", "P2P not measured: 1 GPU(s) visible: peer-to-peer needs at least 2")
    check, = by_check(node_normal.absolute(profile, node, [], None), "p2p_floor")
    assert (check["status"], check["message"]) == ("unknown", "no P2P figures recorded (verify.json)")


def test_p2p_floors_none_checks_nothing():
    profile, node = selected(pf.vm_h200_x2())
    profile["expectations"]["p2p_floors"] = "none"
    record = verify_record(pairs=((0, 1, 1.0, 337.5),))
    assert by_check(node_normal.absolute(profile, node, node_normal.figures(record), record), "p2p_floor") == []


@pytest.mark.parametrize("percent, status, where", [
    (33.68, "ok", ""),
    (20, "ok", ""),
    (95, "ok", ""),
    (12.5, "outside", " below the band"),
    (97.0, "outside", " above the band: the ceiling's inputs are wrong"),
])
def test_decode_efficiency_band_both_sides(percent, status, where):
    profile, node = selected(pf.hgx_h200())
    record = benchmark_example()
    record["efficiency"]["after"]["percent"] = percent
    check, = by_check(node_normal.absolute(profile, node, node_normal.figures(None, record)), "decode_efficiency")
    assert check["status"] == status and check["value"] == percent and check["expected"] == [20, 95]
    assert check["message"] == ("%.1f %% of the memory-bandwidth ceiling%s, expected 20 to 95 %% (memory bandwidth: H200 SXM "
                                "141GB 4800 GB/s); 1 GPU x 4814.3 GB/s / (1.19815 B parameters x 2 bytes) = 2009.1 tokens/s"
                                % (percent, where))


def test_decode_efficiency_unknown_without_a_benchmark_and_absent_on_base():
    profile, node = selected(pf.l40s_x4())
    check, = by_check(node_normal.absolute(profile, node, []), "decode_efficiency")
    assert check["status"] == "unknown" and check["message"].startswith("no decode efficiency recorded")
    assert check["message"].endswith("(memory bandwidth: L40S 48GB 864 GB/s)")
    profile, node = selected(pf.no_gpu())
    assert by_check(node_normal.absolute(profile, node, node_normal.figures(None, benchmark_example())), "decode_efficiency") == []


def test_absolute_without_a_node_checks_only_the_records():
    profile, _node = selected(pf.hgx_h200())
    checks = node_normal.absolute(profile, {}, node_normal.figures(verify_record(), benchmark_example()), verify_record())
    assert [c["check"] for c in checks] == ["p2p_floor"] * 3 + ["decode_efficiency"]
    assert [c["check"] for c in node_normal.absolute(None, None, [])] == ["p2p_floor"]


# ------------------------------------------------------------------------------ peers

def fleet_of(values, figure="decode_tokens_per_s", better="higher", unit="tok/s", profile="hgx-hopper/throughput"):
    return {host: {"profile": profile, "figures": [{"figure": figure, "value": value, "unit": unit, "better": better}]}
            for host, value in values.items()}


FOUR = {"node-a": 676.6, "node-b": 680.1, "node-c": 671.9, "node-d": 225.5}


def test_a_slow_host_among_four_is_an_outlier_with_its_figure_and_median():
    fleet = fleet_of(FOUR)
    peer = node_normal.peers("node-d", fleet)
    assert peer["hosts"] == ["node-a", "node-b", "node-c", "node-d"] and peer["reason"] is None
    item, = peer["outliers"]
    assert item["figure"] == "decode_tokens_per_s" and item["value"] == 225.5 and item["median"] == 674.25
    assert item["direction"] == "worse" and item["hosts"] == 4
    assert item["message"].startswith("decode_tokens_per_s: 225.5 tok/s against the median 674.2 tok/s of 4 "
                                      "hgx-hopper/throughput hosts, ")
    assert " MADs worse (MAD " in item["message"]
    for host in ("node-a", "node-b", "node-c"):
        peer = node_normal.peers(host, fleet)
        assert peer["outliers"] == [] and len(peer["compared"]) == 1, host
        assert peer["compared"][0]["median"] == 674.25


def test_the_mad_floor_keeps_identical_figures_from_flagging_small_differences():
    fleet = fleet_of({"a": 676.6, "b": 676.6, "c": 676.6, "d": 670.0})
    peer = node_normal.peers("d", fleet)
    assert peer["outliers"] == []
    item, = peer["compared"]
    assert item["mad"] == 0 and item["mads_away"] == round(6.6 / (676.6 * 0.02), 2)
    fleet["d"]["figures"][0]["value"] = 225.5
    item, = node_normal.peers("d", fleet)["outliers"]
    assert item["message"] == ("decode_tokens_per_s: 225.5 tok/s against the median 676.6 tok/s of 4 hgx-hopper/throughput "
                               "hosts, 33.3 MADs worse (MAD 0; counted as 2 % of the median)")
    assert node_normal.peers("a", fleet)["outliers"] == []  # on the median


def test_a_wider_floor_or_more_mads_take_an_outlier_back():
    fleet = fleet_of({"a": 100.0, "b": 100.0, "c": 100.0, "d": 90.0})
    assert len(node_normal.peers("d", fleet)["outliers"]) == 1
    assert node_normal.peers("d", fleet, min_spread_pct=5)["outliers"] == []
    assert node_normal.peers("d", fleet, mads=6)["outliers"] == []


def test_fewer_than_min_peers_gives_the_reason():
    fleet = fleet_of({"a": 676.6, "b": 225.5})
    peer = node_normal.peers("b", fleet)
    assert peer["compared"] == [] and peer["outliers"] == []
    assert peer["reason"] == "fewer than 3 hosts of hgx-hopper/throughput with these figures (decode_tokens_per_s)"
    assert node_normal.peers("b", fleet, min_peers=2)["outliers"] == []  # two hosts: the median is between them
    fleet["c"] = fleet_of({"c": 676.6}, profile="l40s/throughput")["c"]
    assert node_normal.peers("b", fleet)["hosts"] == ["a", "b"]


def test_no_profile_or_no_figures_give_the_reason():
    fleet = fleet_of(FOUR)
    fleet["e"] = {"profile": None, "figures": fleet["node-a"]["figures"]}
    assert node_normal.peers("e", fleet)["reason"] == "no profile recorded for this host"
    assert node_normal.peers("x", fleet)["reason"] == "no profile recorded for this host"
    fleet["f"] = {"profile": "hgx-hopper/throughput", "figures": []}
    peer = node_normal.peers("f", fleet)
    assert peer["reason"] == "no figures recorded for this host (verify's P2P, the benchmark)" and "f" in peer["hosts"]


def test_lower_is_better_ttft():
    slow = fleet_of({"a": 25.4, "b": 26.0, "c": 25.1, "d": 61.0}, figure="ttft_ms_p50", better="lower", unit="ms")
    item, = node_normal.peers("d", slow)["outliers"]
    assert item["direction"] == "worse" and item["message"].startswith("ttft_ms_p50: 61 ms against the median 25.7 ms of 4 ")
    fast = fleet_of({"a": 25.4, "b": 26.0, "c": 25.1, "d": 12.0}, figure="ttft_ms_p50", better="lower", unit="ms")
    item, = node_normal.peers("d", fast)["outliers"]
    assert item["direction"] == "better" and " MADs better " in item["message"]


def test_each_figure_is_compared_with_its_own_peers():
    fleet = {}
    for host, (uni, decode) in {"a": (394.0, 676.0), "b": (392.0, 680.0), "c": (395.0, 670.0), "d": (250.0, 677.0)}.items():
        fleet[host] = {"profile": "hgx-hopper/throughput", "figures": [
            {"figure": "p2p 0->1 one way", "value": uni, "unit": "GB/s", "better": "higher"},
            {"figure": "decode_tokens_per_s", "value": decode, "unit": "tok/s", "better": "higher"}]}
    peer = node_normal.peers("d", fleet)
    assert [c["figure"] for c in peer["compared"]] == ["p2p 0->1 one way", "decode_tokens_per_s"]
    assert [o["figure"] for o in peer["outliers"]] == ["p2p 0->1 one way"]


# ------------------------------------------------------------------------------ verdict

def test_verdict():
    ok = {"check": "gpu_count", "item": None, "status": "ok", "message": "8 GPU(s)"}
    outside = {"check": "nvlink_links", "item": "GPU 0000:18:00.0", "status": "outside", "message": "16 of 18 NVLinks active"}
    unknown = {"check": "p2p_floor", "item": None, "status": "unknown", "message": "no P2P figures"}
    assert node_normal.verdict([ok, unknown], None) == (True, [])
    assert node_normal.verdict([ok, outside], {}) == (False, ["nvlink_links GPU 0000:18:00.0: 16 of 18 NVLinks active"])
    assert node_normal.verdict([unknown], {"compared": []}) == (None, [])
    assert node_normal.verdict([], {"compared": [{"figure": "x"}], "outliers": []}) == (True, [])
    peer = node_normal.peers("node-d", fleet_of(FOUR))
    normal, lines = node_normal.verdict([unknown], peer)
    assert normal is False and lines == [peer["outliers"][0]["message"]]


def test_a_whole_host_judged():
    profile, node = selected(pf.hgx_h200())
    record = verify_record(pairs=((0, 1, 290.4, 337.5),), bidi=())
    bench = copy.deepcopy(benchmark_example())
    found = node_normal.figures(record, bench)
    checks = node_normal.absolute(profile, node, found, record)
    normal, lines = node_normal.verdict(checks, node_normal.peers("h", {"h": {"profile": profile["name"], "figures": found}}))
    assert normal is False
    assert lines == ["p2p_floor p2p 0->1 one way: 290.4 GB/s over nvlink, floor 337.5 (NVLink 4 x 18 links x 25 GB/s x 0.75)"]
