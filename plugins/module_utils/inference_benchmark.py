# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.inference_benchmark: how fast does the node serve the model.

The question a tuning run has to answer is whether serving got faster, so the benchmark is
built to compare two runs honestly: the same synthetic load (set input and output lengths,
the end-of-sequence token ignored so every request decodes the same number of tokens), warm-up
requests first, and the whole measurement repeated so every figure comes with its run-to-run
spread. A later comparison (the serving role's before/after report) calls a difference within
that spread "no measurable change".

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)`` returns the result or
raises ModuleFailure with what was measured so far. It only sends requests to the server, so
``changes`` is always empty and check mode runs the same measurement. ``tools`` may carry a
``clock`` for tests.
"""

from __future__ import annotations

import random
import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import numbers
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.progress import Progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.progress import remove as remove_progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import health
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import load
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import Endpoint, ServingError

ARGUMENT_SPEC = dict(
    url=dict(type="str", required=True),
    model=dict(type="str"),
    endpoint=dict(type="str", default="chat", choices=["chat", "completions"]),
    # no_log=False: "tokens" here are lengths, not credentials (validate-modules asks).
    input_tokens=dict(type="int", default=128, no_log=False),
    output_tokens=dict(type="int", default=128, no_log=False),
    requests=dict(type="int", default=8),
    concurrency=dict(type="list", elements="int", default=[1]),
    warmup=dict(type="int", default=2),
    repeats=dict(type="int", default=3),
    ignore_eos=dict(type="bool", default=True),
    extra_body=dict(type="dict", default={}),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
    timeout_s=dict(type="float", default=300.0),
    ready_timeout_s=dict(type="float", default=0.0),
    slo_ttft_ms=dict(type="float"),
    slo_tpot_ms=dict(type="float"),
    active_params_billion=dict(type="float"),
    bytes_per_param=dict(type="float", default=2.0),
    memory_bandwidth_gbps=dict(type="float"),
    gpus=dict(type="int", default=1),
    seed=dict(type="int"),
    progress_path=dict(type="path"),
)

# Integer options: (low, high), checked with their names.
INT_RANGES = {
    "input_tokens": (1, 1048576),
    "output_tokens": (1, 1048576),
    "requests": (1, 100000),
    "warmup": (0, 10000),
    "repeats": (1, 100),
    "gpus": (1, 1024),
}
# Float options: (low, high, low excluded).
FLOAT_RANGES = {
    "timeout_s": (0.0, 86400.0, True),
    "ready_timeout_s": (0.0, 86400.0, False),
    "slo_ttft_ms": (0.0, 3.6e6, True),
    "slo_tpot_ms": (0.0, 3.6e6, True),
    "active_params_billion": (0.0, 1e5, True),
    "bytes_per_param": (0.0, 64.0, True),
    "memory_bandwidth_gbps": (0.0, 1e6, True),
}
MAX_CONCURRENCY = 1024
# Keys of extra_body that would break the measurement's own contract.
RESERVED_BODY = ("stream", "model", "messages", "prompt", "max_tokens")


def validate(params):
    """Every option checked before a request is sent; returns the full params and the Endpoint."""
    params = with_defaults(ARGUMENT_SPEC, params)
    for name, (low, high) in INT_RANGES.items():
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ModuleFailure("%s=%r is out of range: give a whole number from %d to %d" % (name, value, low, high))
    try:
        numbers.finite_options(params, FLOAT_RANGES)
    except numbers.NumberError as exc:
        raise ModuleFailure(str(exc))
    levels = params["concurrency"]
    if not levels:
        raise ModuleFailure("concurrency=[] is empty: give the levels to measure, such as [1, 4, 16]")
    for level in levels:
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= MAX_CONCURRENCY:
            raise ModuleFailure("concurrency: %r is not a level from 1 to %d" % (level, MAX_CONCURRENCY))
    params["concurrency"] = sorted(set(levels) | {1})
    if params["endpoint"] not in ARGUMENT_SPEC["endpoint"]["choices"]:
        raise ModuleFailure("endpoint=%r: give one of %s" % (params["endpoint"], ", ".join(ARGUMENT_SPEC["endpoint"]["choices"])))
    bad = sorted(key for key in params["extra_body"] if key in RESERVED_BODY)
    if bad:
        raise ModuleFailure("extra_body sets %s, which the benchmark sets itself (use the module's options)" % ", ".join(bad))
    try:
        endpoint = Endpoint(params["url"], params["api_key"], params["validate_certs"])
    except ValueError as exc:
        raise ModuleFailure(str(exc))
    return params, endpoint


def run(params, check_mode=False, paths=None, tools=None):
    """Measure; return the module result or raise ModuleFailure. Read-only for the node."""
    params, endpoint = validate(params)
    try:
        return _measure(params, endpoint, tools)
    finally:
        remove_progress(params.get("progress_path"))


def _measure(params, endpoint, tools):
    clock = (tools or {}).get("clock", time.perf_counter)
    started = time.monotonic()
    result = {"changed": False, "changes": [], "url": endpoint.base, "endpoint": params["endpoint"],
              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "warnings": []}
    ready = health.wait(endpoint, params["model"], timeout=params["ready_timeout_s"], interval=2.0,
                        request_timeout=min(10.0, params["timeout_s"]))
    result["health"] = ready
    if not ready["ready"]:
        raise ModuleFailure(health.not_ready_message(endpoint, ready, params["ready_timeout_s"]), result)
    model = params["model"] or (ready["models"] or [None])[0] or _first_model(endpoint, params)
    result["model"] = model

    # A fresh seed per run unless one is given: a server's prompt cache (llama.cpp keeps each
    # slot's last prompt, vLLM and SGLang cache prefixes) would otherwise answer the "after"
    # run's prompts from the "before" run's and show a time-to-first-token gain that is not
    # there (seen on an H200: TTFT 40 % "better" with nothing changed in between).
    seed = params["seed"] if params["seed"] is not None else random.SystemRandom().randrange(1 << 31)
    counter = load.TokenCounter(endpoint, model, min(30.0, params["timeout_s"]))
    words, measured = load.calibrated_words(counter, params["input_tokens"], seed)
    uncounted = "not counted: the server has no tokenize endpoint, one word is taken as one token"
    result["input"] = {"tokens_asked": params["input_tokens"], "words": words, "tokens_measured": measured,
                       "counted_by": counter.source or uncounted, "seed": seed}
    workload = load.Workload(params["endpoint"], model, words, params["output_tokens"], params["ignore_eos"],
                             params["extra_body"], seed)
    result["config"] = {key: params[key] for key in ("input_tokens", "output_tokens", "requests", "concurrency",
                                                     "warmup", "repeats", "ignore_eos", "slo_ttft_ms", "slo_tpot_ms")}
    index = 0
    if params["warmup"]:
        records, _wall = load.run_level(endpoint, workload, params["warmup"], 1, params["timeout_s"], index, clock)
        index += params["warmup"]
        _raise_on_errors(records, "warm-up", result)

    runs = {level: [] for level in params["concurrency"]}
    all_records = []
    steps = params["repeats"] * len(params["concurrency"])
    progress = Progress(params.get("progress_path"), steps)
    for repeat in range(params["repeats"]):
        for number, level in enumerate(params["concurrency"]):
            progress.update(repeat * len(params["concurrency"]) + number, steps,
                            "runs, repeat %d of %d at concurrency %d" % (repeat + 1, params["repeats"], level))
            count = max(params["requests"], level)
            records, wall = load.run_level(endpoint, workload, count, level, params["timeout_s"], index, clock)
            index += count
            all_records.extend(records)
            runs[level].append(stats.level_figures(records, wall, params["slo_ttft_ms"], params["slo_tpot_ms"]))
            result["levels"] = _levels(runs)
            _raise_on_errors(records, "repeat %d, concurrency %d" % (repeat + 1, level), result)

    progress.update(steps, steps, "runs measured")
    result["levels"] = _levels(runs)
    result["single_stream"] = next(item for item in result["levels"] if item["concurrency"] == 1)["summary"]
    result["tokens"] = _token_check(all_records, params, result["warnings"])
    result["efficiency"] = _efficiency(params, result["single_stream"]["decode_tokens_per_s"]["median"])
    result["elapsed_s"] = round(time.monotonic() - started, 3)
    return result


def _first_model(endpoint, params):
    try:
        listed = health.list_models(endpoint, min(10.0, params["timeout_s"]))
    except ServingError as exc:
        raise ModuleFailure("model is not set and the models cannot be listed: %s" % exc.message)
    if not listed:
        raise ModuleFailure("model is not set and %s lists no model to benchmark; set model" % endpoint.url("/v1/models"))
    return listed[0]


def _levels(runs):
    return [{"concurrency": level, "runs": level_runs, "summary": stats.summarise(level_runs)}
            for level, level_runs in sorted(runs.items()) if level_runs]


def _raise_on_errors(records, phase, result):
    failed = [r for r in records if r.get("error")]
    if not failed:
        return
    kinds = sorted(set(r["error"]["kind"] for r in failed))
    result["errors"] = [dict(r["error"], request=r["index"]) for r in failed]
    raise ModuleFailure("%d of %d requests failed in the %s (%s); first: %s"
                        % (len(failed), len(records), phase, ", ".join(kinds), failed[0]["error"]["message"]), result)


def _token_check(records, params, warnings):
    """How tokens were counted, and what to tell about short outputs or a disagreeing usage."""
    ok = [r for r in records if not r.get("error")]
    with_usage = [r for r in ok if r["usage_tokens"] is not None]
    mismatched = [r for r in with_usage if r["usage_tokens"] != r["streamed_tokens"]]
    short = [r for r in ok if r["output_tokens"] < params["output_tokens"]]
    out = {
        "counted_by": "server usage, checked against the streamed count" if with_usage and len(with_usage) == len(ok)
        else "streamed events (the server sent no usage)" if not with_usage else "server usage where sent, else streamed events",
        "requests": len(ok),
        "usage_mismatches": len(mismatched),
        "short_outputs": len(short),
        "output_tokens_asked": params["output_tokens"],
    }
    if mismatched:
        first = mismatched[0]
        warnings.append("in %d of %d requests the server's usage (%d tokens in request %d) differs from the events "
                        "streamed (%d): more than one token per event; the figures use the usage count"
                        % (len(mismatched), len(with_usage), first["usage_tokens"], first["index"], first["streamed_tokens"]))
    if short:
        reasons = sorted(set(str(r["finish_reason"]) for r in short))
        warnings.append("%d of %d requests stopped before %d output tokens (finish reason %s): the server did not "
                        "honour ignore_eos/min_tokens; per-token figures still hold, per-request ones are shorter"
                        % (len(short), len(ok), params["output_tokens"], "/".join(reasons)))
    return out


def _efficiency(params, decode):
    """Single-stream decode tokens/s against the memory-bandwidth ceiling, when both are known."""
    needed = [name for name in ("active_params_billion", "memory_bandwidth_gbps") if params[name] is None]
    if needed:
        return {"ceiling_tokens_per_s": None, "percent": None, "decode_tokens_per_s": decode,
                "reason": "not computed: %s not given" % " and ".join(needed)}
    ceiling = stats.ceiling(params["active_params_billion"], params["bytes_per_param"],
                            params["memory_bandwidth_gbps"], params["gpus"])
    return {
        "ceiling_tokens_per_s": round(ceiling, 2),
        "decode_tokens_per_s": decode,
        "percent": round(100.0 * decode / ceiling, 2) if decode is not None else None,
        "formula": "%d GPU x %g GB/s / (%g B parameters x %g bytes) = %.1f tokens/s"
                   % (params["gpus"], params["memory_bandwidth_gbps"], params["active_params_billion"],
                      params["bytes_per_param"], ceiling),
    }
