"""report/collect: an artifacts folder read into the page's model, as the writers shape the
records, with every file optional, older shapes read, and nothing followed through a link."""

import json
import os
import socket
import threading

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import encode
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect
from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet") / "artifacts"
    kinds = fake.write_fleet(str(root), 16)
    model = collect.collect(str(root))
    by_kind = dict((kind, next(h for h in model["hosts"] if h["name"] == name)) for name, kind in kinds.items()
                   if kind != "healthy")
    return root, kinds, model, by_kind


def test_every_host_is_in_the_model_once(fleet):
    _root, kinds, model, _by = fleet
    assert sorted(h["name"] for h in model["hosts"]) == sorted(kinds)
    assert [h["id"] for h in model["hosts"]] == ["host-%d" % n for n in range(1, 17)]
    assert model["as_of"] == "2026-12-01T07:05:00Z"


def test_the_failed_canary(fleet):
    host = fleet[3]["canary_failed"]
    assert host["rollout"]["status"] == "failed" and host["rollout"]["reverted"] and host["rollout"]["restored"] == 1
    assert host["rollout"]["failed_check"] == "verify"
    assert ("uni_peer", 0, 1) in host["p2p"]["short"]
    assert host["benchmark"]["has_before"] and not host["benchmark"]["has_after"], "it stopped before the run after"
    assert host["verify"]["readback_drift"] == {"sysctl_profile": 1}
    assert host["attention"][:3] == ["rollout failed", "drift", "P2P short"]
    assert collect.needs_a_look(host)


def test_the_drifted_host(fleet):
    host = fleet[3]["drifted"]
    assert [d["target"] for d in host["drift"]] == ["vm.swappiness", "cpufreq governor"], "verify.json and fleet-drift.json, once"
    since = host["audit"]["since"]
    assert since["none"] is False and since["new"] and since["previous_time"] == fake.PREVIOUS_TIME
    assert "drift" in host["attention"]


def test_hosts_without_p2p_say_why(fleet):
    by = fleet[3]
    assert by["one_gpu"]["p2p"] == {"status": "skipped", "msg": "1 GPU(s) visible: peer-to-peer needs at least 2"}
    assert by["p2p_off"]["p2p"]["status"] == "none"
    assert by["audit_only"]["p2p"] == {"status": "none", "msg": "no verify.json"}
    assert by["audit_only"]["verify"] is None and by["audit_only"]["benchmark"] is None


def test_each_pair_keeps_the_floor_it_was_judged_against(fleet):
    p2p = fleet[3]["short_pair"]["p2p"]
    assert p2p["gpus"] == [0, 1] and p2p["floor_sources"] == [fake.NVLINK_SOURCE]
    assert p2p["floors"]["uni_peer"][1][0] == 337.5 and p2p["floors"]["bidi_peer"][0][1] == 675.0
    assert p2p["matrices"]["uni_peer"][1][0] == 301.2
    assert p2p["short"] == {("uni_peer", 1, 0), ("bidi_peer", 0, 1), ("bidi_peer", 1, 0)}
    rows = dict((r["pair"], r) for r in p2p["pairs"])
    assert rows["1->0"]["short"] and rows["0<->1"]["short"] and not rows["0->1"]["short"]


def test_staged_pairs_have_no_peer_access(fleet):
    p2p = fleet[3]["staged"]["p2p"]
    assert p2p["access"] == [[None, False], [False, None]]
    assert p2p["staged_pairs"] == [{"pair": "0<->1", "causes": ["iommu_translated"]}]
    assert p2p["short"] == set(), "staged copies were accepted (no_peer_access: staged)"
    assert all(r["peer_access"] is False for r in p2p["pairs"])


def test_a_verify_json_from_before_the_link_floors_uses_the_thresholds(fleet):
    p2p = fleet[3]["old_verify"]["p2p"]
    row = next(r for r in p2p["pairs"] if r["pair"] == "0->1")
    assert row["floor"] == 300.0 and row["floor_source"] == "min_unidirectional_gbps.nvlink"


def test_a_damaged_file_is_named_and_the_rest_still_read(fleet):
    _root, _kinds, model, by = fleet
    assert by["damaged_verify"]["verify"] is None and by["damaged_verify"]["audit"]
    assert len(model["notes"]) == 1 and model["notes"][0].startswith("gpu-node-10/verify.json: not JSON")


def test_the_benchmark_gate_and_efficiency(fleet):
    bench = fleet[3]["gate_failed"]["benchmark"]
    assert bench["gate"]["failed"] and bench["gate"]["max_regression_pct"] == 5.0
    decode = bench["levels"][0]["figures"]["decode_tokens_per_s"]
    assert decode["verdict"] == "worse" and decode["before_range"][0] <= decode["before"] <= decode["before_range"][1]
    assert bench["efficiency"]["after"]["ceiling"] == pytest.approx(306.2, abs=0.1)
    assert [lv["concurrency"] for lv in bench["levels"]] == [1, 4, 16]


def test_a_name_that_needs_quoting_keeps_its_name_and_folder(fleet):
    host = next(h for h in fleet[2]["hosts"] if h["name"] == "gpu node 16")
    assert host["folder"] == encode("gpu node 16") == "gpu%20node%2016"
    assert collect.decode_folder(host["folder"]) == "gpu node 16"


def test_the_latest_rollout_and_the_earlier_one(fleet):
    model = fleet[2]
    rollout = model["rollout"]
    assert rollout["run_id"] == "20261201T070000Z-1a2b" and rollout["status"] == "stopped"
    assert rollout["stopped_after_batch"] == 1 and rollout["batches"][0]["canary"] and rollout["batches"][0]["stopped_here"]
    assert [b["ran"] for b in rollout["batches"]] == [True, False, False, False, False]
    assert rollout["counts"]["untouched"] == 15 and rollout["counts"]["failed"] == 1
    assert [r["run_id"] for r in model["older_rollouts"]] == ["20261130T070000Z-0a1b"]


def test_the_same_folder_gives_the_same_model(fleet):
    assert collect.collect(str(fleet[0])) == fleet[2]


def test_columns_are_the_findings_most_severe_first(fleet):
    columns = fleet[2]["columns"]
    ranks = [collect.SEVERITIES.index(c["severity"]) if c["severity"] else 3 for c in columns]
    assert ranks == sorted(ranks)
    assert len(set(c["rule"] for c in columns)) == len(columns)


def test_links_are_not_followed(tmp_path):
    root = tmp_path / "artifacts"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "node-x").mkdir(parents=True)
    (elsewhere / "node-x" / "audit.json").write_text(json.dumps({"host": "secret", "findings": []}))
    (elsewhere / "verify.json").write_text(json.dumps({"host": "node-b", "failures": ["leaked"]}))
    root.mkdir()
    (root / "node-x").symlink_to(elsewhere / "node-x")
    (root / "node-b").mkdir()
    (root / "node-b" / "audit.json").write_text(json.dumps({"host": "node-b", "findings": []}))
    (root / "node-b" / "verify.json").symlink_to(elsewhere / "verify.json")
    (root / "fleet-drift.json").symlink_to(elsewhere / "verify.json")
    model = collect.collect(str(root))
    assert [h["name"] for h in model["hosts"]] == ["node-b"]
    assert model["hosts"][0]["verify"] is None
    assert sorted(model["notes"]) == ["fleet-drift.json: a symbolic link, not followed",
                                      "node-b/verify.json: a symbolic link, not followed",
                                      "node-x: a symbolic link, not followed"]


def test_a_fifo_a_socket_or_a_folder_others_may_write_is_named_and_never_read(tmp_path):
    root = tmp_path / "artifacts"
    for name in ("node-a", "node-b", "node-c"):
        (root / name).mkdir(parents=True)
        (root / name / "audit.json").write_text(json.dumps({"host": name, "findings": []}))
    os.mkfifo(str(root / "node-a" / "verify.json"))  # an open() of it would wait for a writer for ever
    (root / "node-c").chmod(0o777)  # anyone could swap its files: not read at all
    os.mkfifo(str(root / "fleet-drift.json"))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "fleet-audit.json"))
        box = {}
        thread = threading.Thread(target=lambda: box.update(model=collect.collect(str(root))), daemon=True)
        thread.start()
        thread.join(10)
    assert not thread.is_alive(), "collect blocked on a FIFO"
    model = box["model"]
    assert [h["name"] for h in model["hosts"]] == ["node-a", "node-b"]
    assert sorted(model["notes"]) == [
        "fleet-audit.json: it is a socket, not a regular file",
        "fleet-drift.json: it is a FIFO (named pipe), not a regular file",
        "node-a/verify.json: it is a FIFO (named pipe), not a regular file",
        "node-c: it is writable by other users without the sticky bit (mode 0777), so anyone could swap the "
        "files in it"]


def test_an_empty_folder_is_an_empty_fleet(tmp_path):
    model = collect.collect(str(tmp_path))
    assert model["hosts"] == [] and model["rollout"] is None and model["columns"] == [] and model["notes"] == []


def test_a_benchmark_without_its_comparison_is_compared_from_the_two_runs(tmp_path):
    before = fake.benchmark_run("h", "before")
    after = fake.benchmark_run("h", "after", 1.3)
    bench = collect.benchmark_model(None, before, after)
    decode = bench["levels"][0]["figures"]["decode_tokens_per_s"]
    assert bench["source"].startswith("benchmark-before.json") and decode["verdict"] == "better"
    assert decode["delta_pct"] == pytest.approx(30, abs=3)
    alone = collect.benchmark_model(None, before, None)
    assert alone["has_before"] and not alone["has_after"]
    assert alone["levels"][0]["figures"]["decode_tokens_per_s"]["verdict"] == "not compared"
    assert collect.benchmark_model(None, None, None) is None
    assert collect.benchmark_model({"levels": "no"}, {"x": 1}, None) is None


def test_a_real_p2p_result_is_read_as_the_module_returns_it(tmp_path):
    """The engine's own result (fake driver and sysfs, as its tests run it): a slow PCIe pair."""
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.modules import test_p2p_bandwidth as engine_tests
    failed, result = engine_tests._engine_run(tmp_path, engine_tests._driver(rates={(0, 1): 20.0}))
    assert failed
    p2p = collect.p2p_model(result)
    assert p2p["status"] == "measured" and p2p["gpus"] == [0, 1]
    assert p2p["floors"]["uni_peer"][0][1] == 40.3
    assert ("uni_peer", 0, 1) in p2p["short"]
    row = next(r for r in p2p["pairs"] if r["pair"] == "0->1")
    assert row["floor_source"].startswith("PCIe gen5 x16") and "iommu_translated" in row["short"][0]


def test_an_older_rollout_without_its_derived_keys():
    model = collect.rollout_model({"run_id": "r0", "batches": [["a"], ["b"]], "stopped_after_batch": 1,
                                   "hosts": {"a": {"status": "failed", "batch": 1}, "b": {"status": "untouched"},
                                             "lxc-1": {"status": "tuned"}}})
    assert model["status"] == "stopped" and model["verdict"] == "stopped"
    assert [b["ran"] for b in model["batches"]] == [True, False] and model["outside"] == ["lxc-1"]
    assert model["batches"][1]["outcome"] == "not run (stopped after batch 1)"


def test_partial_and_odd_shapes_do_not_break_the_model():
    host = collect.host_model("h", {"audit": {"findings": [{"rule": "r", "severity": "P1"}, "junk", {"no": "rule"}]},
                                    "verify": {"p2p": {"pairs": [{"src": 0, "dst": 1, "unidirectional_p2p_gbps": "fast"}]},
                                               "failures": None, "drift": []}})
    assert host["audit"]["counts"]["P1"] == 1 and host["audit"]["worst"] == "P1"
    assert host["p2p"]["status"] == "measured" and host["p2p"]["matrices"]["uni_peer"][0][1] is None
    assert collect.p2p_model({"pairs": [], "bidirectional": []})["status"] == "none"
    assert collect.natural_key("node2") < collect.natural_key("node10")


def test_a_host_known_only_to_fleet_audit_json(tmp_path):
    fleet_audit = {"hosts": [{"host": "lost", "worst": "P0", "counts": {"P0": 1}, "time": "t"}],
                   "findings": [{"rule": "r", "severity": "P0", "title": "R", "hosts": [{"host": "lost", "items": []}]}]}
    model = collect.fleet_model({}, fleet_audit)
    host = model["hosts"][0]
    assert host["name"] == "lost" and host["audit"]["source"] == "fleet-audit.json"
    assert [f["rule"] for f in host["audit"]["findings"]] == ["r"] and not host["audit"]["report"]
    assert os.sep not in host["id"]


# ------------------------------------------------------------------------------ serving experiments

def _by_name(model, name):
    return next(h for h in model["hosts"] if h["name"] == name)


def test_a_host_s_serving_experiments_are_read(fleet):
    _root, kinds, model, _by = fleet
    names = list(kinds)
    kept, none_kept = names[len(fake.SPECIAL)], names[len(fake.SPECIAL) + 2]
    exp = _by_name(model, kept)["experiments"]
    assert exp["unit"] == "sglang.service" and exp["kind"] == "sglang" and exp["figure"] == "decode_tokens_per_s"
    assert (exp["baseline"], exp["final"], exp["final_delta_pct"], exp["baseline_noise_pct"]) == (812.3, 861.0, 6.0, 1.2)
    assert exp["counts"] == {"kept": 1, "rolled_back": 2, "rejected_accuracy": 1, "failed_start": 1, "failed": 1,
                             "skipped": 1, "other": 0, "total": 7}
    assert [r["name"] for r in exp["candidates"]] == [c["name"] for c in fake.experiments_of(kept)["candidates"]]
    assert exp["changed"] and exp["after"].endswith("--enable-fused-moe-sum-all-reduce")
    assert exp["before"] == " ".join(fake.SGLANG_ARGV) and exp["dropin"].endswith("90-gpufleet-launch.conf")
    fp8 = next(r for r in exp["candidates"] if r["name"] == "kv_cache_fp8")
    assert fp8["status"] == "rejected_accuracy" and fp8["accuracy"]["passed"] is False
    assert fp8["accuracy"]["divergence_pct"] == 12.5 and fp8["figure"]["delta_pct"] == 4.8
    steps = next(r for r in exp["candidates"] if r["name"] == "continuous_decode_steps")
    assert steps["regressed"] == ["ttft_ms.p90"]
    skipped = exp["candidates"][-1]
    assert skipped["figure"] is None and skipped["accuracy"] is None and skipped["downtime_try"] is None
    other = _by_name(model, none_kept)["experiments"]
    assert other["counts"]["kept"] == 0 and not other["changed"] and other["dropin"] is None
    assert [h["name"] for h in model["hosts"] if h["experiments"]] == [kept, none_kept]
    assert "experiments.md" in _by_name(model, kept)["files"] and "experiments.json" in _by_name(model, kept)["files"]
    assert not any("experiments" in f for h in model["hosts"] if not h["experiments"] for f in h["files"])


def test_a_damaged_or_odd_experiments_json_is_named_and_left_out(tmp_path):
    root = tmp_path / "artifacts"
    for name, text in (("node-a", '{"host": "node-a", "candidates": ['), ("node-b", json.dumps({"host": "node-b"})),
                       ("node-c", json.dumps(["not", "a", "record"]))):
        (root / name).mkdir(parents=True)
        (root / name / "audit.json").write_text(json.dumps({"host": name, "findings": []}))
        (root / name / "experiments.json").write_text(text)
    (root / "node-d").mkdir()  # a folder with only its experiments: a host of the page
    (root / "node-d" / "experiments.json").write_text(json.dumps(fake.experiments_of("node-d")))
    model = collect.collect(str(root))
    assert [h["name"] for h in model["hosts"]] == ["node-a", "node-b", "node-c", "node-d"]
    assert [bool(h["experiments"]) for h in model["hosts"]] == [False, False, False, True]
    assert [n.split(":")[0] for n in model["notes"]] == ["node-a/experiments.json", "node-b/experiments.json",
                                                         "node-c/experiments.json"]
    assert "not JSON" in model["notes"][0] and "no candidates list" in model["notes"][1]
    assert "not the expected record" in model["notes"][2]
    assert model["hosts"][3]["times"] == ["2026-12-01T06:52:00Z", "2026-12-01T06:10:00Z"]


def test_odd_shapes_in_an_experiments_record_do_not_break_the_model():
    assert collect.experiments_model(None) is None and collect.experiments_model({"candidates": {}}) is None
    exp = collect.experiments_model({"candidates": ["junk", {"status": "exploded", "value": True, "flag": ["x"],
                                                             "comparison": {"figure": {"before": "fast"}, "guards": "no"},
                                                             "accuracy": {"passed": "yes", "prompts": float("nan")},
                                                             "downtime_s": [1]}],
                                     "baseline": 3, "restarts": True, "concurrency": 10 ** 400})
    row = exp["candidates"][0]
    assert exp["counts"]["other"] == 1 and exp["counts"]["total"] == 1 and row["name"] == "?"
    assert row["status"] == "exploded" and row["value"] is None and row["flag"] is None
    assert row["figure"]["before"] is None and row["regressed"] == []
    assert row["accuracy"]["passed"] is None and row["accuracy"]["prompts"] is None
    assert exp["baseline"] is None and exp["restarts"] is None and exp["concurrency"] is None


def test_baseline_and_final_may_name_the_figure_and_give_its_value():
    record = fake.experiments_of("h")
    record["baseline"] = {"figure": "decode_tokens_per_s", "value": 812.3, "noise_pct": 1.2}
    record["final"] = {"figure": "decode_tokens_per_s", "value": "fast", "delta_pct": 6.0}
    exp = collect.experiments_model(record)
    assert exp["baseline"] == 812.3 and exp["baseline_noise_pct"] == 1.2 and exp["final"] is None
