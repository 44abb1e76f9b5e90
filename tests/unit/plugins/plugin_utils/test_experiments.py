"""The serving experiments as data (plugin_utils/experiments.py): the candidates in risk order,
one try's command, the verdict against the kept state's benchmark, the kept flags, a command
with them applied, and the record; plus the role's own candidates, checked for every kind."""

import copy
import json
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.experiments import FilterModule
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import launch_args
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import experiments as ex

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def cand(name, risk="low", **kw):
    item = {"name": name, "flag": "--" + name.replace("_", "-"), "values": [True], "risk": risk}
    item.update(kw)
    return item


# ------------------------------------------------------------------------------ candidates

def test_ordered_low_medium_high_then_as_listed_one_try_per_value():
    builtin = [cand("h1", "high"), cand("m1", "medium", values=["1", 2, 2.5]), cand("l1"), cand("m2", "medium"),
               cand("l2", values=[True, False])]
    tries = ex.experiment_candidates(builtin, "vllm", allow_risky=True)
    assert [(t["name"], t["value"]) for t in tries] == [
        ("l1", True), ("l2", True), ("l2", None), ("m1", "1"), ("m1", "2"), ("m1", "2.5"), ("m2", True), ("h1", True)]
    assert all(t["skip"] is None for t in tries)
    assert tries[3] == {"name": "m1", "flag": "--m1", "value": "1", "risk": "medium", "requires": [], "conflicts": [],
                        "why": "", "max_divergence_pct": 0.0, "skip": None}


def test_an_inventory_candidate_replaces_a_builtin_of_the_same_name_and_adds_others():
    builtin = [cand("a", values=["1"]), cand("b"), cand("c", "medium")]
    extra = [cand("b", "medium", flag="--bee", values=["7", "8"], why="mine"), cand("d")]
    tries = ex.experiment_candidates(builtin, "sglang", extra)
    assert [(t["name"], t["flag"], t["value"], t["risk"]) for t in tries] == [
        ("a", "--a", "1", "low"), ("d", "--d", True, "low"),
        ("b", "--bee", "7", "medium"), ("b", "--bee", "8", "medium"), ("c", "--c", True, "medium")]
    assert tries[2]["why"] == "mine"


def test_skipped_names_are_left_out_and_an_unknown_one_is_refused():
    builtin = [cand("a"), cand("b"), cand("c", kinds=["sglang"])]
    assert [t["name"] for t in ex.experiment_candidates(builtin, "vllm", skip=["b"])] == ["a"]
    # a name of another kind's candidate is known: skipping it is no mistake
    assert [t["name"] for t in ex.experiment_candidates(builtin, "vllm", skip=["c"])] == ["a", "b"]
    with pytest.raises(AnsibleFilterError) as exc:
        ex.experiment_candidates(builtin, "vllm", skip=["b", "nope"])
    assert "serving_experiments_skip names no candidate: nope (known: a, b, c)" in str(exc.value)
    with pytest.raises(AnsibleFilterError) as exc:
        ex.experiment_candidates(builtin, "vllm", skip=[1])
    assert "must be names, got [1]" in str(exc.value)


def test_high_risk_is_listed_as_skipped_unless_allowed():
    builtin = [cand("risky", "high", values=["1", "2"]), cand("safe")]
    tries = ex.experiment_candidates(builtin, "vllm")
    assert [(t["name"], t["skip"]) for t in tries] == [
        ("safe", None), ("risky", "high risk: tried only with serving_experiments_allow_risky: true"),
        ("risky", "high risk: tried only with serving_experiments_allow_risky: true")]
    assert [t["skip"] for t in ex.experiment_candidates(builtin, "vllm", allow_risky=True)] == [None, None, None]


@pytest.mark.parametrize("allow_risky", [False, True])
@pytest.mark.parametrize("risk", ["low", "high"])
def test_a_driver_option_is_always_skipped(allow_risky, risk):
    builtin = [{"name": "nvreg", "how": "driver_option", "values": ["NVreg_X=1"], "risk": risk}]
    tries = ex.experiment_candidates(builtin, "llama_cpp", allow_risky=allow_risky)
    assert len(tries) == 1 and tries[0]["flag"] is None and tries[0]["value"] == "NVreg_X=1"
    assert tries[0]["skip"].startswith("a driver option: reboot-required, never tried on a running server")


def test_kinds_filter_and_every_kind_by_default():
    builtin = [cand("s", kinds=["sglang"]), cand("v", kinds=["vllm", "llama_cpp"]), cand("any")]
    assert [t["name"] for t in ex.experiment_candidates(builtin, "sglang")] == ["s", "any"]
    assert [t["name"] for t in ex.experiment_candidates(builtin, "llama_cpp")] == ["v", "any"]
    assert [t["name"] for t in ex.experiment_candidates(builtin, "generic")] == ["any"]
    with pytest.raises(AnsibleFilterError) as exc:
        ex.experiment_candidates(builtin, "tgi")
    assert "server kind 'tgi' is not one of" in str(exc.value)


def test_divergence_allowance_default_and_own():
    builtin = [cand("a"), cand("b", max_divergence_pct=2)]
    tries = ex.experiment_candidates(builtin, "vllm", default_divergence_pct=0.5)
    assert [(t["name"], t["max_divergence_pct"]) for t in tries] == [("a", 0.5), ("b", 2.0)]


@pytest.mark.parametrize("changes, words", [
    ({"name": "Bad Name"}, "name='Bad Name' must be lowercase"),
    ({"name": None}, "name=None"),
    ({"colour": "red"}, "candidate x: unknown key(s) colour"),
    ({"how": "sysctl"}, "how='sysctl' is not one of flag, driver_option"),
    ({"flag": "-x"}, "flag='-x' is not a --long-flag"),
    ({"flag": "--a b"}, "flag='--a b' is not a --long-flag"),
    ({"flag": None}, "flag=None is not a --long-flag"),
    ({"risk": "extreme"}, "risk='extreme' is not one of low, medium, high"),
    ({"kinds": ["tgi"]}, "kinds=['tgi'] must list server kinds"),
    ({"kinds": []}, "kinds=[] must list server kinds"),
    ({"kinds": "vllm"}, "kinds='vllm' must list server kinds"),
    ({"max_divergence_pct": 101}, "max_divergence_pct=101 is not a percentage"),
    ({"max_divergence_pct": -1}, "max_divergence_pct=-1 is not a percentage"),
    ({"max_divergence_pct": True}, "max_divergence_pct=True is not a percentage"),
    ({"max_divergence_pct": float("nan")}, "max_divergence_pct=nan is not a percentage"),
    ({"values": []}, "values=[] must be a non-empty list"),
    ({"values": "1"}, "values='1' must be a non-empty list"),
    ({"values": ["a\nb"]}, "value 'a\\nb' is empty or holds a line break"),
    ({"values": [""]}, "value '' is empty or holds a line break"),
    ({"values": [{"a": 1}]}, "value {'a': 1} is not text, a number or true/false"),
    ({"requires": "--y"}, "requires='--y' must be a list of --long-flags"),
    ({"conflicts": ["y"]}, "conflicts=['y'] must be a list of --long-flags"),
])
def test_a_bad_candidate_field_is_refused_naming_the_value(changes, words):
    item = dict(cand("x"), **changes)
    for builtin, extra in (([item], None), ([cand("ok")], [item])):
        with pytest.raises(AnsibleFilterError) as exc:
            ex.experiment_candidates(builtin, "vllm", extra)
        assert words in str(exc.value), str(exc.value)


def test_a_candidate_that_is_not_a_mapping_and_a_list_that_is_not_a_list():
    with pytest.raises(AnsibleFilterError) as exc:
        ex.experiment_candidates([cand("a")], "vllm", ["--flag"])
    assert "serving_experiments_candidates: '--flag' is not a candidate" in str(exc.value)
    with pytest.raises(AnsibleFilterError) as exc:
        ex.experiment_candidates([cand("a")], "vllm", {"name": "b"})
    assert "serving_experiments_candidates: {'name': 'b'} is not a list" in str(exc.value)


def _builtin():
    with open(os.path.join(REPO, "roles", "serving_experiments", "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)["__serving_experiments_builtin"]


SAMPLES = {
    "sglang": ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2",
               "--speculative-algorithm", "EAGLE"],
    "vllm": ["/opt/vllm/bin/vllm", "serve", "m", "--port", "8000"],
    "llama_cpp": ["/usr/local/bin/llama-server", "-m", "/models/m.gguf", "--port", "8080"],
    "llama_cpp_python": ["/usr/bin/python3", "-m", "llama_cpp.server", "--model", "/models/m.gguf"],
    "generic": ["/usr/local/bin/my-server", "--port", "1"],
}


@pytest.mark.parametrize("kind", ex.KINDS)
def test_the_roles_builtin_candidates_pass_for_every_kind(kind):
    builtin = _builtin()
    assert isinstance(builtin, list) and builtin
    for allow_risky in (False, True):
        tries = ex.experiment_candidates(builtin, kind, allow_risky=allow_risky)
        names = set(t["name"] for t in tries)
        expected = set(c["name"] for c in builtin if kind in c.get("kinds", ex.KINDS))
        assert names == expected
        # every try of the kind makes a command from that kind's sample, or says why not
        argv = SAMPLES[kind]
        kind_found, start = launch_args.kind_of(argv)
        assert kind_found == kind
        for attempt in tries:
            made = ex.experiment_try(attempt, argv, start)
            assert (made["argv"] is None) is bool(made["skip"]), (attempt["name"], made)
            if made["argv"] is not None:
                assert made["argv"][:start] == argv[:start]
    # the names the inventory can skip are unique
    assert len(set(c["name"] for c in builtin)) == len(builtin)
    if kind != "generic":
        assert [t for t in ex.experiment_candidates(builtin, kind) if t["skip"] is None], kind


# ------------------------------------------------------------------------------ one try

VLLM = ["/usr/bin/numactl", "--cpunodebind=0", "--", "/opt/vllm/bin/vllm", "serve", "m", "--port", "8000"]
START = 6


def attempt(flag, value, requires=(), conflicts=(), skip=None):
    return {"name": "x", "flag": flag, "value": value, "risk": "low", "requires": list(requires),
            "conflicts": list(conflicts), "why": "", "max_divergence_pct": 0.0, "skip": skip}


def test_a_try_appends_a_new_flag_after_the_servers_arguments_start():
    assert ex.experiment_try(attempt("--max-num-seqs", "256"), VLLM, START) == {
        "argv": VLLM + ["--max-num-seqs", "256"], "skip": None}
    assert ex.experiment_try(attempt("--enable-prefix-caching", True), VLLM, START)["argv"] == VLLM + [
        "--enable-prefix-caching"]


def test_a_flag_before_args_start_is_neither_changed_nor_read():
    made = ex.experiment_try(attempt("--cpunodebind", "1"), VLLM, START)
    assert made["argv"] == VLLM + ["--cpunodebind", "1"] and made["argv"][1] == "--cpunodebind=0"
    # a required flag that only the wrapper has is missing; a conflicting one there does not clash
    assert ex.experiment_try(attempt("--x", True, requires=["--cpunodebind"]), VLLM, START)["skip"] == (
        "needs --cpunodebind, which the command does not set")
    assert ex.experiment_try(attempt("--x", True, conflicts=["--cpunodebind"]), VLLM, START)["argv"] == VLLM + ["--x"]


def test_requires_and_conflicts():
    spec = VLLM + ["--speculative-algorithm", "EAGLE"]
    assert ex.experiment_try(attempt("--num-steps", "2", requires=["--speculative-algorithm"]), VLLM, START) == {
        "argv": None, "skip": "needs --speculative-algorithm, which the command does not set"}
    assert ex.experiment_try(attempt("--num-steps", "2", requires=["--speculative-algorithm"]), spec, START) == {
        "argv": spec + ["--num-steps", "2"], "skip": None}
    graphs = VLLM + ["--disable-cuda-graph"]
    assert ex.experiment_try(attempt("--cuda-graph-max-bs", "512", conflicts=["--disable-cuda-graph"]), graphs, START) == {
        "argv": None, "skip": "conflicts with --disable-cuda-graph, which the command sets"}
    assert ex.experiment_try(attempt("--cuda-graph-max-bs", "512", conflicts=["--disable-cuda-graph"]), VLLM,
                             START)["argv"] == VLLM + ["--cuda-graph-max-bs", "512"]


def test_dash_and_underscore_spellings_are_one_flag():
    kept = VLLM + ["--max_num_seqs", "128"]
    assert ex.experiment_try(attempt("--max-num-seqs", "256"), kept, START)["argv"] == VLLM + ["--max_num_seqs", "256"]
    assert ex.experiment_try(attempt("--max-num-seqs", "128"), kept, START) == {
        "argv": None, "skip": "the command already has --max-num-seqs 128"}
    assert ex.experiment_try(attempt("--max_num_seqs", "128", requires=["--max-num-seqs"]), kept, START)["skip"] == (
        "the command already has --max_num_seqs 128")
    assert ex.experiment_try(attempt("--x", True, conflicts=["--max-num-seqs"]), kept, START)["skip"] == (
        "conflicts with --max-num-seqs, which the command sets")


def test_already_so_is_a_skip():
    kept = VLLM + ["--enable-prefix-caching"]
    assert ex.experiment_try(attempt("--enable-prefix-caching", True), kept, START)["skip"] == (
        "the command already has --enable-prefix-caching")
    assert ex.experiment_try(attempt("--enforce-eager", None), VLLM, START)["skip"] == (
        "the command already has no --enforce-eager")
    assert ex.experiment_try(attempt("--enable-prefix-caching", None), kept, START)["argv"] == VLLM


def test_a_skipped_try_stays_skipped_and_the_kept_command_is_never_changed():
    kept = list(VLLM)
    copy_before = copy.deepcopy(kept)
    assert ex.experiment_try(attempt("--a", True, skip="high risk"), kept, START) == {"argv": None, "skip": "high risk"}
    first = ex.experiment_try(attempt("--port", "9000"), kept, START)
    second = ex.experiment_try(attempt("--port", "9000"), kept, START)
    assert first == second == {"argv": VLLM[:-1] + ["9000"], "skip": None}
    assert kept == copy_before
    with pytest.raises(AnsibleFilterError):
        ex.experiment_try(attempt("--a", True), [], 0)
    with pytest.raises(AnsibleFilterError):
        ex.experiment_try(attempt("--a", True), "vllm serve", 0)


# ------------------------------------------------------------------------------ the verdict

def bench(figures, levels=(1,), model="m", repeats=3):
    """An inference_benchmark-like result: ``figures`` maps a figure path (``ttft_ms.p90``) to
    its value in each repeat; every level gets the same figures, summarised as stats does."""
    out = []
    for concurrency in levels:
        runs = []
        for repeat in range(repeats):
            run = {}
            for path, values in figures.items():
                node = run
                parts = path.split(".")
                for part in parts[:-1]:
                    node = node.setdefault(part, {})
                node[parts[-1]] = values[repeat] if isinstance(values, (list, tuple)) else values
            runs.append(run)
        out.append({"concurrency": concurrency, "runs": runs, "summary": stats.summarise(runs)})
    return {"model": model, "time": "2026-12-01T07:00:00Z", "url": "http://127.0.0.1:8000",
            "config": {"input_tokens": 256, "output_tokens": 128, "requests": 32, "concurrency": list(levels),
                       "repeats": repeats}, "levels": out}


BASE = bench({"decode_tokens_per_s": [100, 101, 99], "output_tokens_per_s": [1000, 1005, 995],
              "ttft_ms.p90": [50, 50.5, 49.5]})


def test_kept_when_better_beyond_the_noise():
    candidate = bench({"decode_tokens_per_s": [110, 111, 109], "output_tokens_per_s": [1000, 1004, 996],
                       "ttft_ms.p90": [50, 50.4, 49.6]})
    verdict = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", 1, ["output_tokens_per_s", "ttft_ms.p90"])
    assert verdict["status"] == "kept"
    assert verdict["reason"] == "decode_tokens_per_s +10.0 %, faster beyond the noise \u00b12.0 %"
    figure = verdict["comparison"]["figure"]
    assert (figure["name"], figure["before"], figure["after"], figure["delta_pct"], figure["verdict"]) == (
        "decode_tokens_per_s", 100, 110, 10.0, "better")
    assert [(g["name"], g["regressed"]) for g in verdict["comparison"]["guards"]] == [
        ("output_tokens_per_s", False), ("ttft_ms.p90", False)]


def test_a_gain_below_the_floor_is_rolled_back_though_beyond_the_noise():
    candidate = bench({"decode_tokens_per_s": [110, 111, 109], "output_tokens_per_s": [1000, 1004, 996],
                       "ttft_ms.p90": [50, 50.4, 49.6]})
    floored = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", 1, [], 5.0, None, 12.0)
    assert floored["status"] == "rolled_back" and floored["comparison"]["figure"]["verdict"] == "better"
    assert "less than the 12 % asked" in floored["reason"]
    assert ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", 1, [], 5.0, None, 10.0)["status"] == "kept"
    with pytest.raises(AnsibleFilterError, match="serving_experiments_min_gain_pct"):
        ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", 1, [], 5.0, None, -1)


@pytest.mark.parametrize("values, words", [
    ([101, 102, 100], "no measurable change"),
    ([98, 99, 97], "no measurable change"),
    ([90, 91, 89], "worse"),
])
def test_rolled_back_within_the_noise_or_worse(values, words):
    candidate = bench({"decode_tokens_per_s": values, "output_tokens_per_s": [1000, 1005, 995],
                       "ttft_ms.p90": [50, 50.5, 49.5]})
    verdict = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s")
    assert verdict["status"] == "rolled_back" and verdict["comparison"]["figure"]["verdict"] == words
    assert verdict["reason"].startswith("decode_tokens_per_s ") and words in verdict["reason"]


def test_rolled_back_when_a_guard_regressed_beyond_the_allowed_percentage():
    candidate = bench({"decode_tokens_per_s": [110, 111, 109], "output_tokens_per_s": [900, 901, 899],
                       "ttft_ms.p90": [53, 53.2, 52.8]})
    guards = ["output_tokens_per_s", "ttft_ms.p90"]
    verdict = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", 1, guards, 5)
    assert verdict["status"] == "rolled_back"
    # both guards: throughput -10 %, and time to first token +6 % (higher is worse there)
    assert verdict["reason"] == ("decode_tokens_per_s +10.0 % (noise \u00b12.0 %) but output_tokens_per_s -10.0 % "
                                 "worse, more than the 5 % allowed; ttft_ms.p90 +6.0 % worse, more than the 5 % allowed")
    found = dict((g["name"], g) for g in verdict["comparison"]["guards"])
    assert found["output_tokens_per_s"]["regressed"] is True
    assert found["ttft_ms.p90"]["verdict"] == "worse" and found["ttft_ms.p90"]["regressed"] is True
    # with a wider allowance, the same worse guards are tolerated
    wide = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", 1, guards, 12)
    assert wide["status"] == "kept" and not any(g["regressed"] for g in wide["comparison"]["guards"])


def test_a_guard_worse_only_within_the_allowance_is_kept():
    candidate = bench({"decode_tokens_per_s": [110, 111, 109], "output_tokens_per_s": [970, 971, 969]})
    verdict = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", 1, ["output_tokens_per_s"], 5)
    guard = verdict["comparison"]["guards"][0]
    assert guard["verdict"] == "worse" and guard["delta_pct"] == -3.0 and guard["regressed"] is False
    assert verdict["status"] == "kept"


def test_rejected_when_the_accuracy_guard_failed_even_if_faster():
    candidate = bench({"decode_tokens_per_s": [110, 111, 109]})
    accuracy = {"passed": False, "divergence_pct": 12.5, "max_divergence_pct": 1.0, "differing_prompts": 3,
                "prompts": 8}
    verdict = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", accuracy=accuracy)
    assert verdict["status"] == "rejected_accuracy"
    assert verdict["reason"] == ("greedy outputs changed: 12.50 % of tokens diverged, 1.00 % allowed "
                                 "(3 of 8 prompts differ)")
    assert verdict["comparison"]["figure"]["verdict"] == "better"
    passed = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s", accuracy=dict(accuracy, passed=True))
    assert passed["status"] == "kept"


def test_a_lower_is_better_figure_is_better_when_it_decreases():
    faster = bench({"ttft_ms.p90": [40, 40.4, 39.6]})
    verdict = ex.experiment_verdict(faster, BASE, "ttft_ms.p90")
    assert verdict["status"] == "kept" and verdict["comparison"]["figure"]["delta_pct"] == -20.0
    slower = bench({"ttft_ms.p90": [60, 60.4, 59.6]})
    verdict = ex.experiment_verdict(slower, BASE, "ttft_ms.p90")
    assert verdict["status"] == "rolled_back" and verdict["comparison"]["figure"]["verdict"] == "worse"


def test_the_level_is_the_chosen_concurrency():
    base = bench({"decode_tokens_per_s": [100, 101, 99]}, levels=(1, 8))
    candidate = bench({"decode_tokens_per_s": [100, 101, 99]}, levels=(1, 8))
    candidate["levels"][1]["summary"] = stats.summarise([{"decode_tokens_per_s": v} for v in (120, 121, 119)])
    assert ex.experiment_verdict(candidate, base, "decode_tokens_per_s", 1)["status"] == "rolled_back"
    assert ex.experiment_verdict(candidate, base, "decode_tokens_per_s", 8)["status"] == "kept"
    with pytest.raises(AnsibleFilterError) as exc:
        ex.experiment_verdict(candidate, base, "decode_tokens_per_s", 4)
    assert "no benchmark level at concurrency 4" in str(exc.value)


def test_runs_of_different_loads_are_a_failed_try():
    candidate = bench({"decode_tokens_per_s": [110, 111, 109]})
    candidate["config"]["output_tokens"] = 64
    verdict = ex.experiment_verdict(candidate, BASE, "decode_tokens_per_s")
    assert verdict["status"] == "failed" and verdict["comparison"] is None
    assert "output_tokens: 128 before, 64 after" in verdict["reason"]


@pytest.mark.parametrize("args, words", [
    (("tokens_per_s",), "figure(s) tokens_per_s are not benchmark figures"),
    (("decode_tokens_per_s", 1, ["ttft_ms.p95"]), "figure(s) ttft_ms.p95 are not benchmark figures"),
    (("decode_tokens_per_s", 1, [], 101), "serving_experiments_max_regression_pct=101 is not a percentage"),
    (("decode_tokens_per_s", 1, [], True), "serving_experiments_max_regression_pct=True is not a percentage"),
])
def test_bad_verdict_arguments_are_refused(args, words):
    with pytest.raises(AnsibleFilterError) as exc:
        ex.experiment_verdict(BASE, BASE, *args)
    assert words in str(exc.value)


# ------------------------------------------------------------------------------ kept flags, record

def test_kept_flags_in_order_a_later_value_of_a_flag_replacing_the_earlier():
    record = {"candidates": [
        {"name": "a", "flag": "--max-num-seqs", "value": "128", "status": "kept"},
        {"name": "b", "flag": "--x", "value": True, "status": "rolled_back"},
        {"name": "c", "flag": "--enable-prefix-caching", "value": True, "status": "kept"},
        {"name": "d", "flag": "--max-num-seqs", "value": "256", "status": "kept"},
        {"name": "e", "flag": "--y", "value": "1", "status": "skipped"},
        "not a dict",
    ]}
    assert ex.experiment_kept_flags(record) == [
        {"name": "c", "flag": "--enable-prefix-caching", "value": True},
        {"name": "d", "flag": "--max-num-seqs", "value": "256"}]
    assert ex.experiment_kept_flags({"candidates": []}) == []
    for bad in (None, [], {"candidates": "x"}):
        with pytest.raises(AnsibleFilterError):
            ex.experiment_kept_flags(bad)


def test_launch_with_flags_applies_each_in_order_after_args_start():
    flags = [{"flag": "--max-num-seqs", "value": "256"}, {"flag": "--enable-prefix-caching", "value": True},
             {"flag": "--port", "value": None}, {"flag": "--max-num-seqs", "value": "512"}]
    expected = VLLM[:START] + ["--max-num-seqs", "512", "--enable-prefix-caching"]
    assert ex.launch_with_flags(VLLM, flags, START) == expected
    assert ex.launch_with_flags(VLLM, [], START) == VLLM and ex.launch_with_flags(VLLM, None, START) == VLLM
    assert ex.launch_with_flags(VLLM, [{"flag": "--cpunodebind", "value": "1"}], START)[1] == "--cpunodebind=0"
    for bad in ([{"flag": "-x", "value": 1}], [{"value": 1}], ["--x"]):
        with pytest.raises(AnsibleFilterError) as exc:
            ex.launch_with_flags(VLLM, bad, START)
        assert "is not a {flag, value} change" in str(exc.value) and repr(bad[0]) in str(exc.value)
    with pytest.raises(AnsibleFilterError):
        ex.launch_with_flags([], flags, 0)


def parts(**kw):
    base = {
        "host": "node-1", "unit": "vllm.service", "figure": "decode_tokens_per_s", "concurrency": 1,
        "before": {"argv": list(VLLM)}, "after": {"argv": VLLM + ["--enable-prefix-caching"]},
        "baseline_bench": BASE, "kept_bench": bench({"decode_tokens_per_s": [110, 112, 108]}),
        "candidates": [
            {"name": "a", "flag": "--enable-prefix-caching", "value": True, "status": "kept",
             "reason": "faster\x1b[31m \u202eevil", "downtime_s": {"try": 40.5, "rollback": None}},
            {"name": "b", "flag": "--max-num-seqs", "value": "256", "status": "rolled_back", "reason": "noise",
             "downtime_s": {"try": 41.25, "rollback": 39.0}},
            {"name": "c", "flag": "--x", "value": True, "status": "skipped", "reason": "high risk",
             "downtime_s": {"try": None, "rollback": None}},
            {"name": "d", "flag": "--y", "value": "1", "status": "rolled_back", "reason": "worse",
             "downtime_s": {"try": True, "rollback": "12"}},
            {"name": "e", "flag": "--z", "value": "1", "status": "failed_start", "reason": "refused"},
        ],
    }
    base.update(kw)
    return base


def test_summary_baseline_final_delta_downtime_counts_and_kept_flags():
    given = parts()
    kept = copy.deepcopy(given)
    record = ex.experiment_summary(given)
    assert given == kept  # the parts are not changed
    assert "baseline_bench" not in record and "kept_bench" not in record
    assert record["baseline"] == {"figure": "decode_tokens_per_s", "value": 100, "noise_pct": 2.0}
    assert record["final"] == {"figure": "decode_tokens_per_s", "value": 110, "noise_pct": 3.64, "delta_pct": 10.0}
    assert record["downtime_s_total"] == 120.75  # numbers only: None, true and "12" are no seconds
    assert record["counts"] == {"kept": 1, "rolled_back": 2, "skipped": 1, "failed_start": 1}
    assert record["changed"] is True
    assert record["kept_flags"] == [{"name": "a", "flag": "--enable-prefix-caching", "value": True}]
    assert record["candidates"][0]["reason"] == "faster[31m evil"
    assert record["host"] == "node-1" and record["unit"] == "vllm.service"


def test_summary_without_a_change_or_a_kept_run():
    record = ex.experiment_summary(parts(after={"argv": list(VLLM)}, kept_bench=None, candidates=[]))
    assert record["changed"] is False and record["final"] is None and record["kept_flags"] == []
    assert record["counts"] == {} and record["downtime_s_total"] == 0.0
    assert record["baseline"]["value"] == 100
    assert ex.experiment_summary(parts(after=None))["changed"] is False
    record = ex.experiment_summary(parts(concurrency=8))
    assert record["baseline"] is None and record["final"] is None
    with pytest.raises(AnsibleFilterError):
        ex.experiment_summary({"host": "x"})


def test_the_filters_are_these_functions():
    filters = FilterModule().filters()
    for name in ("experiment_candidates", "experiment_try", "experiment_verdict", "experiment_kept_flags",
                 "experiment_summary", "launch_with_flags"):
        assert filters[name] is getattr(ex, name), name


def test_check_mode_lists_the_planned_tries_as_not_tried():
    tries = ex.experiment_candidates([cand("a", values=["1", "2"]), cand("b", risk="high")], "vllm")
    record = ex.experiment_summary({"check_mode": True, "candidates": [], "planned": tries,
                                    "figure": "decode_tokens_per_s", "concurrency": 1,
                                    "before": {"argv": ["vllm", "serve", "m"]}, "after": {"argv": ["vllm", "serve", "m"]}})
    assert [(c["name"], c["value"], c["status"]) for c in record["candidates"]] == [
        ("a", "1", "skipped"), ("a", "2", "skipped"), ("b", True, "skipped")]
    assert record["candidates"][0]["reason"] == "check mode: planned, not tried"
    assert record["candidates"][2]["reason"].startswith("high risk")
    assert "planned" not in record and record["changed"] is False and record["counts"] == {"skipped": 3}


def test_kept_flags_read_from_the_record_text_and_a_missing_record_named():
    record = {"candidates": [{"name": "a", "flag": "--a", "value": "1", "status": "kept"},
                             {"name": "b", "flag": "--b", "value": True, "status": "rolled_back"}]}
    assert ex.experiment_kept_flags(json.dumps(record)) == [{"name": "a", "flag": "--a", "value": "1"}]
    with pytest.raises(AnsibleFilterError, match="'no file /srv/x/experiments.json' is not an experiments record"):
        ex.experiment_kept_flags("no file /srv/x/experiments.json")
