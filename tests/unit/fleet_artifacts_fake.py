"""A fixed fleet's artifacts folder, written by the collection's own writers, for the fleet page.

``write_fleet(root, count)`` lays out what a tune and a rollout run leave on the controller for
``count`` hosts, deterministically (no clock, no randomness): each host's audit.json and
system-improve.md from the audit fixtures (tests/unit/fixtures/audit, through audit_rules,
audit_since and audit_report, as roles/audit does), verify.json with P2P results shaped by
p2p_plan.matrices and p2p_plan.verdicts (floors per pair as p2p_bandwidth writes them),
benchmark-before.json / -after.json / benchmark.json (stats.summarise and benchmark_compare),
experiments.json and experiments.md on two healthy hosts (experiment_summary's shape, experiments_report:
one kept a flag, one kept none), fleet-audit.json (audit_fleet), fleet-drift.json and two rollout-<run id>.json
(rollout_result): an earlier completed one and the latest, whose canary failed verify and was
reverted.

The first hosts are the cases the page must show: the failed canary (some files only: its
benchmark stopped after the run before), a drifted host, a host without P2P (one GPU), one whose
verify.json has no P2P at all (the check was off), a pair short of its floor, pairs staged
through the host, a verify.json from before the link floors, a host with its audit only, a
benchmark that failed its gate, a damaged verify.json and a name that needs quoting. The rest
are healthy hosts with ``gpus`` GPUs each. Used by the unit tests, the browser test and
benchmarks/report_page.py (64 hosts).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import encode
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_fleet import audit_fleet
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_report import audit_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_since import audit_since
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.benchmark import benchmark_compare
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.experiments_report import experiments_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import clean_tree
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_report import rollout_result
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases

AUDIT_TIME = "2026-12-01T07:01:00Z"
PREVIOUS_TIME = "2026-11-30T07:01:00Z"
NVLINK_SOURCE = "NVLink 4 x 18 links x 25 GB/s x 0.75"
PCIE_SOURCE = "PCIe gen5 x16 (63.0 GB/s) x 0.8 protocol x 0.80"

# The special hosts, in order: (kind, audit fixture).
SPECIAL = (
    ("canary_failed", "untuned"),
    ("drifted", "tuned"),
    ("one_gpu", "tuned"),
    ("p2p_off", "tuned"),
    ("short_pair", "h200-nvlink"),
    ("staged", "blackwell-pcie"),
    ("old_verify", "tuned"),
    ("audit_only", "untuned"),
    ("gate_failed", "h200-nvlink"),
    ("damaged_verify", "tuned"),
)
HEALTHY_AUDITS = ("tuned", "h200-nvlink", "untuned")


def host_names(count):
    names = ["gpu-node-%02d" % (index + 1) for index in range(count)]
    if count >= 16:
        names[count - 1] = "gpu node %02d" % count  # a name whose folder and link need quoting
    return names


def kinds(count):
    """{host: (kind, audit fixture)} for a fleet of ``count``."""
    out = {}
    for index, name in enumerate(host_names(count)):
        if index < len(SPECIAL):
            out[name] = SPECIAL[index]
        else:
            out[name] = ("healthy", HEALTHY_AUDITS[index % len(HEALTHY_AUDITS)])
    return out


def _jitter(*key):
    """A fixed number in [-1, 1) from ``key``."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2.0 ** 31 - 1.0


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def _json(data):
    return json.dumps(data, indent=4, sort_keys=True) + "\n"


# ------------------------------------------------------------------------------ audit

_AUDITS = {}


def _audit(fixture):
    if fixture not in _AUDITS:
        _AUDITS[fixture] = audit_cases.audit(fixture)
    return copy.deepcopy(_AUDITS[fixture])


def audit_of(name, fixture, previous_fixture=None):
    audit = _audit(fixture)
    audit.update(host=name, time=AUDIT_TIME)
    if previous_fixture is None:
        audit["since"] = audit_since(audit, None)
    else:
        previous = _audit(previous_fixture)
        previous.update(host=name, time=PREVIOUS_TIME)
        audit["since"] = audit_since(audit, previous)
    return audit


# ------------------------------------------------------------------------------ P2P

def p2p_result(host, gpus, link="nvlink", slow=None, no_peer=(), floors=True):
    """What gpufleet.tuning.p2p_bandwidth returns for ``gpus`` GPUs (the async job's keys
    included, as the verify role keeps it)."""
    slow = slow or {}
    uni_rate, bidi_rate, staged_rate = (393.6, 770.0, 38.0) if link == "nvlink" else (52.0, 96.0, 24.0)
    floor_uni, floor_bidi, source = (337.5, 675.0, NVLINK_SOURCE) if link == "nvlink" else (40.3, 70.6, PCIE_SOURCE)
    indices = list(range(gpus))
    pairs, bidis = [], []
    for a, b in p2p_plan.plan_pairs(indices):
        access = (a, b) not in no_peer and (b, a) not in no_peer
        for src, dst in ((a, b), (b, a)):
            res = {"src": src, "dst": dst, "link": link, "topology": "NV18" if link == "nvlink" else "PXB",
                   "peer_access": access, "perf_rank": 0,
                   "unidirectional_staged_gbps": round(staged_rate + _jitter(host, src, dst, "s"), 2),
                   "latency_staged_us": round(9.5 + _jitter(host, src, dst, "ls"), 2), "latency_staged_method": "held"}
            if access:
                rate = slow.get((src, dst), uni_rate + 0.8 * _jitter(host, src, dst))
                res.update(unidirectional_p2p_gbps=round(rate, 2), data_ok=True,
                           latency_p2p_us=round(2.2 + 0.05 * _jitter(host, src, dst, "l"), 2), latency_method="held")
                res["p2p_speedup"] = round(res["unidirectional_p2p_gbps"] / res["unidirectional_staged_gbps"], 2)
            else:
                res.update(latency_method="held", p2p_speedup=None)
            if floors:
                res.update(link_gbps=450.0 if link == "nvlink" else 50.41,
                           floor_unidirectional_gbps=floor_uni, floor_source=source)
            pairs.append(res)
        bidi = {"a": a, "b": b, "link": link, "topology": pairs[-1]["topology"],
                "bidirectional_staged_gbps": round(2 * staged_rate - 3 + _jitter(host, a, b, "bs"), 2)}
        if access:
            bidi["bidirectional_p2p_gbps"] = round(slow.get((a, b, "bidi"), bidi_rate + 3 * _jitter(host, a, b, "b")), 2)
        if floors:
            bidi.update(link_gbps=900.0 if link == "nvlink" else 100.82, floor_bidirectional_gbps=floor_bidi,
                        floor_source=source)
        bidis.append(bidi)
    pairs.sort(key=lambda r: (r["src"], r["dst"]))
    thresholds = {"min_unidirectional_gbps": dict((k, None) for k in p2p_plan.LINK_TYPES),
                  "min_bidirectional_gbps": dict((k, None) for k in p2p_plan.LINK_TYPES),
                  "min_speedup": dict((k, None) for k in p2p_plan.LINK_TYPES)}
    staged_ok = bool(no_peer)
    if floors:
        floor_map = {"unidirectional": dict(((p["src"], p["dst"]), (floor_uni, source)) for p in pairs),
                     "bidirectional": dict(((b["a"], b["b"]), (floor_bidi, source)) for b in bidis)}
    else:
        thresholds["min_unidirectional_gbps"] = dict((k, 300.0 if k == "nvlink" else 20.0) for k in p2p_plan.LINK_TYPES)
        thresholds["min_bidirectional_gbps"] = dict((k, 600.0 if k == "nvlink" else 40.0) for k in p2p_plan.LINK_TYPES)
        floor_map = None
    short = p2p_plan.verdicts(pairs, bidis, thresholds, require_peer_access=not staged_ok, floors=floor_map)
    devices = [{"index": i, "name": "NVIDIA H200" if link == "nvlink" else "NVIDIA RTX PRO 6000 Blackwell",
                "bdf": "0000:%02x:00.0" % (0x18 + 0x10 * i), "memory_gib": 140} for i in indices]
    staged_pairs = []
    if staged_ok:
        for bidi in bidis:
            if (bidi["a"], bidi["b"]) in no_peer:
                staged_pairs.append({"pair": "%d<->%d" % (bidi["a"], bidi["b"]),
                                     "staged_unidirectional_gbps": [staged_rate, staged_rate],
                                     "staged_bidirectional_gbps": bidi["bidirectional_staged_gbps"],
                                     "causes": [{"id": "iommu_translated", "summary": "GPU DMA is translated by the IOMMU",
                                                 "fix": "iommu=pt"}]})
    result = {
        "ansible_job_id": "j1.1", "changed": False, "changes": [], "failed": False, "finished": True, "started": True,
        "gpus": gpus, "devices": devices, "driver_version": "13.0", "selected": indices, "pairs": pairs,
        "bidirectional": bidis, "matrices": p2p_plan.matrices(indices, pairs, bidis), "elapsed_s": round(0.4 * len(bidis), 1),
        "table": "(the matrices as text)", "shortfalls": short, "thresholds": thresholds,
        "no_peer_access": "staged" if staged_ok else "fail",
        "diagnosis": [{"pair": s["pair"], "why": ["no peer access"], "causes": s["causes"], "unchecked": []}
                      for s in staged_pairs],
        "staged_pairs": staged_pairs,
    }
    if not floors:
        for key in ("shortfalls",):
            for entry in result[key]:
                entry.pop("floor_source", None)
    return result


def verify_of(name, p2p, failures=(), recorded_drift=(), readback_drift=None):
    drift = {"sysctl_profile": [], "pcie_maxreadreq": [], "cpu_power": []}
    drift.update(readback_drift or {})
    shortfalls = (p2p or {}).get("shortfalls") or []
    return {
        "host": name, "time": "2026-12-01T07:04:00Z", "p2p": p2p or {},
        "p2p_staged": (p2p or {}).get("staged_pairs") or [],
        "readback": dict((module, {"changed": bool(records), "changes": records}) for module, records in drift.items()),
        "drift": drift, "recorded_drift": list(recorded_drift),
        "failures": ["p2p %s: %s" % (s["pair"], s["reason"]) for s in shortfalls] + list(failures),
        "comparison": {"previous_time": "2026-11-30T07:04:00Z", "lines": [], "regressions": []},
    }


# ------------------------------------------------------------------------------ benchmark

LEVELS = (1, 4, 16)


def _run(host, phase, concurrency, repeat, scale=1.0):
    """One repeat's figures of one level, as stats.level_figures gives them."""
    j = _jitter(host, phase, concurrency, repeat)
    decode = 160.0 * scale * (1 - 0.03 * (concurrency - 1) / 15) * (1 + 0.01 * j)
    ttft = 24.0 * (1 + 0.1 * (concurrency - 1)) * (1 + 0.04 * j) / scale
    itl = 1000.0 / decode
    return {
        "requests": 32, "completed": 32, "errors": 0, "output_tokens": 32 * 128, "wall_s": 1.0,
        "output_tokens_per_s": round(decode * concurrency * 0.93, 2), "requests_per_s": round(concurrency * 1.1, 3),
        "decode_tokens_per_s": round(decode, 2),
        "ttft_ms": {"mean": round(ttft * 1.1, 3), "p50": round(ttft, 3), "p90": round(ttft * 1.6, 3), "p99": round(ttft * 2.4, 3)},
        "itl_ms": {"mean": round(itl, 3), "p50": round(itl * 0.98, 3), "p90": round(itl * 1.2, 3), "p99": round(itl * 1.6, 3)},
        "tpot_ms": {"mean": round(itl, 3), "p50": round(itl, 3), "p90": round(itl * 1.05, 3), "p99": round(itl * 1.1, 3)},
        "e2e_ms": {"mean": round(ttft + 127 * itl, 3), "p50": round(ttft + 127 * itl, 3), "p90": round(ttft * 1.6 + 127 * itl, 3),
                   "p99": round(ttft * 2.4 + 127 * itl, 3)},
        "goodput_requests_per_s": None, "slo_met": None,
    }


def benchmark_run(host, phase, scale=1.0, time="2026-12-01T07:02:00Z"):
    """What gpufleet.tuning.inference_benchmark returns (the keys the serving role keeps)."""
    levels = []
    for concurrency in LEVELS:
        runs = [_run(host, phase, concurrency, repeat, scale) for repeat in range(3)]
        levels.append({"concurrency": concurrency, "runs": runs, "summary": stats.summarise(runs)})
    decode = levels[0]["summary"]["decode_tokens_per_s"]["median"]
    ceiling = 4917.0 * 1e9 / (8.03e9 * 2)
    return {
        "changed": False, "changes": [], "url": "http://127.0.0.1:8000", "endpoint": "completions", "time": time,
        "warnings": [], "model": "meta-llama/Llama-3.1-8B-Instruct",
        "config": {"input_tokens": 256, "output_tokens": 128, "requests": 32, "concurrency": list(LEVELS), "warmup": 2,
                   "repeats": 3, "ignore_eos": True, "slo_ttft_ms": None, "slo_tpot_ms": None},
        "levels": levels, "single_stream": levels[0]["summary"],
        "efficiency": {"ceiling_tokens_per_s": round(ceiling, 2), "decode_tokens_per_s": decode,
                       "percent": round(100.0 * decode / ceiling, 2),
                       "formula": "1 GPU x 4917 GB/s / (8.03 B parameters x 2 bytes) = %.1f tokens/s" % ceiling},
        "elapsed_s": 42.0,
    }


def benchmark_files(host, after_scale=1.02, with_after=True):
    before = benchmark_run(host, "before")
    files = {"benchmark-before.json": _json(before)}
    if with_after:
        after = benchmark_run(host, "after", after_scale, time="2026-12-01T07:05:00Z")
        changes = [{"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}]
        comparison = benchmark_compare(after, before, changes, 5)
        files["benchmark-after.json"] = _json(after)
        files["benchmark.json"] = _json(dict(comparison, host=host))
        files["benchmark.md"] = "# Inference benchmark: %s\n" % host
    return files


# ------------------------------------------------------------------------------ experiments

SGLANG_ARGV = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
               "--tp", "4", "--host", "127.0.0.1", "--port", "8000"]


def _comparison(before, after, noise, verdict, guards=()):
    delta = round(100.0 * (after - before) / before, 1)
    return {"figure": {"name": "decode_tokens_per_s", "before": before, "after": after, "delta_pct": delta,
                       "noise_pct": noise, "verdict": verdict},
            "guards": [dict(zip(("name", "before", "after", "delta_pct", "noise_pct", "verdict", "regressed"), g))
                       for g in guards]}


def _exact(prompts=8):
    return {"passed": True, "exact": True, "divergence_pct": 0.0, "max_divergence_pct": 0.0, "prompts": prompts,
            "differing_prompts": 0, "first_differences": []}


def experiments_of(host, keep=True):
    """What the serving_experiments role writes as experiments.json: SGLang on 4 GPUs, seven
    candidates in risk order, one of each status (``keep``: the first is kept; else it is rolled
    back too and the command is left as it was)."""
    fused = "--enable-fused-moe-sum-all-reduce"
    after = SGLANG_ARGV + [fused] if keep else list(SGLANG_ARGV)
    base = 812.3
    top = 861.0 if keep else base
    good = ("ttft_ms.p90", 40.1, 40.5, 1.0, 2.0, "no measurable change", False)
    candidates = [
        {"name": "fused_moe_sum_all_reduce", "flag": fused, "value": None, "risk": "low",
         "status": "kept" if keep else "rolled_back",
         "reason": "decode_tokens_per_s +6.0 % beyond the noise (\u00b11.2 %)" if keep else
         "decode_tokens_per_s +0.5 %: within the noise (\u00b11.2 %)",
         "argv": SGLANG_ARGV + [fused],
         "comparison": _comparison(base, 861.0 if keep else 816.4, 1.2, "better" if keep else "no measurable change",
                                   [good]),
         "accuracy": _exact(), "downtime_s": {"try": 41.2, "rollback": None if keep else 39.8},
         "restarts": 1 if keep else 2},
        {"name": "cuda_graph_max_bs", "flag": "--cuda-graph-max-bs", "value": "160", "risk": "low",
         "status": "rolled_back", "reason": "decode_tokens_per_s +0.4 %: within the noise (\u00b11.3 %)",
         "argv": after + ["--cuda-graph-max-bs", "160"],
         "comparison": _comparison(top, round(top * 1.004, 1), 1.3, "no measurable change", [good]),
         "accuracy": _exact(), "downtime_s": {"try": 44.0, "rollback": 40.3}, "restarts": 2},
        {"name": "schedule_policy_lpm", "flag": "--schedule-policy", "value": "lpm", "risk": "low", "status": "failed",
         "reason": "the benchmark failed: 3 of 32 requests answered 500", "argv": after + ["--schedule-policy", "lpm"],
         "comparison": None, "accuracy": None, "downtime_s": {"try": 40.9, "rollback": 41.0}, "restarts": 2},
        {"name": "torch_compile", "flag": "--enable-torch-compile", "value": None, "risk": "medium",
         "status": "failed_start", "reason": "not ready within the readiness timeout (300 s)",
         "argv": after + ["--enable-torch-compile"], "comparison": None, "accuracy": None,
         "downtime_s": {"try": 300.0, "rollback": 42.6}, "restarts": 2},
        {"name": "kv_cache_fp8", "flag": "--kv-cache-dtype", "value": "fp8_e5m2", "risk": "medium",
         "status": "rejected_accuracy", "reason": "accuracy: 3 of 8 prompts differ (12.5 % of tokens, 0.0 % allowed)",
         "argv": after + ["--kv-cache-dtype", "fp8_e5m2"],
         "comparison": _comparison(top, round(top * 1.048, 1), 1.4, "better", [good]),
         "accuracy": {"passed": False, "exact": False, "divergence_pct": 12.5, "max_divergence_pct": 0.0, "prompts": 8,
                      "differing_prompts": 3,
                      "first_differences": [{"prompt": 3, "token": 17, "baseline": " the", "candidate": " a"},
                                            {"prompt": 5, "token": 40, "baseline": "\n", "candidate": " So"}]},
         "downtime_s": {"try": 45.5, "rollback": 40.7}, "restarts": 2},
        {"name": "continuous_decode_steps", "flag": "--num-continuous-decode-steps", "value": "4", "risk": "medium",
         "status": "rolled_back", "reason": "ttft_ms.p90 +9.0 % beyond the noise (\u00b12.0 %): more than the 5 % allowed",
         "argv": after + ["--num-continuous-decode-steps", "4"],
         "comparison": _comparison(top, round(top * 1.031, 1), 1.2, "better",
                                   [("ttft_ms.p90", 40.5, 44.1, 9.0, 2.0, "worse", True)]),
         "accuracy": _exact(), "downtime_s": {"try": 43.1, "rollback": 40.2}, "restarts": 2},
        {"name": "dp_attention", "flag": "--enable-dp-attention", "value": None, "risk": "high", "status": "skipped",
         "reason": "high risk: serving_experiments_allow_risky is off", "argv": None, "comparison": None,
         "accuracy": None, "downtime_s": {"try": None, "rollback": None}, "restarts": 0},
    ]
    restarts = sum(c["restarts"] for c in candidates)
    downtime = round(sum(v for c in candidates for v in c["downtime_s"].values() if v is not None), 1)
    record = {
        "host": host, "unit": "sglang.service", "unit_host": "", "server_kind": "sglang",
        "figure": "decode_tokens_per_s", "concurrency": 1, "guard_figures": ["output_tokens_per_s", "ttft_ms.p90"],
        "max_regression_pct": 5.0, "time_started": "2026-12-01T06:10:00Z", "time_finished": "2026-12-01T06:52:00Z",
        "before": {"argv": list(SGLANG_ARGV), "command": " ".join(SGLANG_ARGV)},
        "after": {"argv": after, "command": " ".join(after)}, "changed": keep,
        "dropin": "/etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf" if keep else None,
        "baseline": {"figure": base, "noise_pct": 1.2},
        "final": {"figure": top, "delta_pct": 6.0 if keep else 0.0},
        "restarts": restarts, "max_restarts": 12, "downtime_s_total": downtime, "candidates": candidates,
    }
    return clean_tree(record)


def experiments_files(host, keep=True):
    record = experiments_of(host, keep)
    return {"experiments.json": _json(record), "experiments.md": experiments_report(record, host)}


# ------------------------------------------------------------------------------ rollout

def _checks(verify="passed", message=""):
    return [{"name": "reachable", "status": "passed", "message": "", "time_s": 0.4},
            {"name": "audit", "status": "passed", "message": "", "time_s": 3.1},
            {"name": "tune", "status": "passed", "message": "", "time_s": 5.0},
            {"name": "verify", "status": verify, "message": message, "time_s": 2.2}]


def _tuned(batch):
    return {"status": "tuned", "batch": batch, "checks": _checks(), "verified": True,
            "changes": [{"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}]}


def rollouts(names, canary_failure):
    batches = [names[:1]] + [names[index:index + 4] for index in range(1, len(names), 4)]
    earlier = {"run_id": "20261130T070000Z-0a1b", "started": "2026-11-30T07:00:00Z", "finished": "2026-11-30T07:30:00Z",
               "canary": 1, "serial": 4, "batches": batches, "stopped_after_batch": None, "stop_reason": None,
               "hosts": dict((name, _tuned(number)) for number, batch in enumerate(batches, 1) for name in batch)}
    canary = names[0]
    hosts = {canary: {
        "status": "failed", "batch": 1, "checks": _checks("failed", canary_failure[0]), "verified": False,
        "changes": [{"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}],
        "verify_failures": list(canary_failure), "reverted": True,
        "revert": {"restored": [{"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60",
                                 "current": "60"}], "failed": [], "pending_reboot": []},
        "failure": {"stage": "verify", "task": "gpufleet.tuning.verify : Fail the host when a check fell short",
                    "message": "verification failed"}}}
    for name in names[1:]:
        hosts[name] = {"status": "untouched", "batch": None}
    latest = {"run_id": "20261201T070000Z-1a2b", "started": "2026-12-01T07:00:00Z", "finished": "2026-12-01T07:06:00Z",
              "canary": 1, "serial": 4, "batches": batches, "stopped_after_batch": 1,
              "stop_reason": "%s failed at verify: verification failed" % canary, "hosts": hosts}
    return [rollout_result(earlier), rollout_result(latest)]


# ------------------------------------------------------------------------------ the fleet

def write_fleet(root, count=16, gpus=None, benchmark_all=False):
    """Write the fleet's artifacts under ``root``; returns {host: kind}. A healthy host has the
    GPUs of its audit fixture, or ``gpus`` when given; every other one is benchmarked, or each
    with ``benchmark_all``."""
    root = str(root)
    os.makedirs(root, exist_ok=True)
    table = kinds(count)
    audits, drift_by_host = [], {}
    canary_failure = ["p2p 0->1: 212.4 GB/s over nvlink is below the 337.5 GB/s floor (%s)" % NVLINK_SOURCE]
    for index, (name, (kind, fixture)) in enumerate(table.items()):
        folder = os.path.join(root, encode(name))
        files = {}
        previous = "tuned" if kind == "drifted" else fixture if index % 2 else None
        audit = audit_of(name, "untuned" if kind == "drifted" else fixture, previous)
        files["audit.json"] = _json(audit)
        files["system-improve.md"] = audit_report(audit)
        audits.append(audit)
        recorded = []
        p2p = p2p_result(name, gpus or max(len(audit["facts"].get("gpus") or []), 2))
        extra_failures = []
        readback = None
        if kind == "canary_failed":
            p2p = p2p_result(name, 4, slow={(0, 1): 212.4})
            readback = {"sysctl_profile": [{"area": "sysctl", "kind": "value", "target": "vm.swappiness",
                                            "before": "60", "after": "10"}]}
            extra_failures = ["drift: sysctl_profile: would set vm.swappiness: 60 -> 10"]
        elif kind == "drifted":
            recorded = [{"area": "sysctl", "current": "60", "key": "sysctl:vm.swappiness", "kind": "sysctl",
                         "recorded": "10", "recorded_by": "20261130T070000Z-0a1b", "target": "vm.swappiness"},
                        {"area": "cpu_power", "current": "powersave", "key": "cpu_power:governor", "kind": "sysfs",
                         "recorded": "performance", "recorded_by": "20261130T070000Z-0a1b", "target": "cpufreq governor"}]
            extra_failures = ["recorded sysctl vm.swappiness no longer holds: left at 10, now 60"]
        elif kind == "one_gpu":
            p2p = {"changed": False, "changes": [], "gpus": 1, "skipped": True, "finished": True,
                   "msg": "1 GPU(s) visible: peer-to-peer needs at least 2",
                   "skip_reason": "1 GPU(s) visible: peer-to-peer needs at least 2", "devices": [], "driver_version": "13.0"}
        elif kind == "p2p_off":
            p2p = None
        elif kind == "short_pair":
            p2p = p2p_result(name, 2, slow={(1, 0): 301.2, (0, 1, "bidi"): 640.0})
        elif kind == "staged":
            p2p = p2p_result(name, 2, link="pcie", no_peer={(0, 1)})
        elif kind == "old_verify":
            p2p = p2p_result(name, 2, floors=False)
        if kind == "audit_only":
            pass
        elif kind == "damaged_verify":
            files["verify.json"] = '{"host": "%s", "p2p": {' % name
        else:
            verify = verify_of(name, p2p, extra_failures, recorded, readback)
            files["verify.json"] = _json(verify)
            drift_by_host[name] = recorded
        if kind == "canary_failed":
            files.update(benchmark_files(name, with_after=False))
        elif kind == "gate_failed":
            files.update(benchmark_files(name, after_scale=0.85))
        elif kind == "healthy" and (benchmark_all or index % 2 == 0):
            files.update(benchmark_files(name))
        if index in (len(SPECIAL), len(SPECIAL) + 2):
            files.update(experiments_files(name, keep=index == len(SPECIAL)))
        for file_name, text in files.items():
            _write(os.path.join(folder, file_name), text)
    fleet = audit_fleet(audits)
    _write(os.path.join(root, "fleet-audit.json"), _json(fleet))
    _write(os.path.join(root, "fleet-audit.md"), audit_report(fleet, "fleet"))
    _write(os.path.join(root, "fleet-drift.json"), _json(drift_by_host))
    for record in rollouts(list(table), canary_failure):
        _write(os.path.join(root, "rollout-%s.json" % record["run_id"]), _json(record))
        _write(os.path.join(root, "rollout-%s.md" % record["run_id"]), "# Rollout %s\n" % record["run_id"])
    return dict((name, kind) for name, (kind, _fixture) in table.items())
