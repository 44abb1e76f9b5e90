# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Single-stream decode speed of a running server against its memory-bandwidth ceiling, with
the GPU's bandwidth read from NVML by the collection's own node facts.

    python3 benchmarks/serving_efficiency.py --url http://127.0.0.1:8088 --model-json /tmp/model/model.json
    python3 benchmarks/serving_efficiency.py --url http://127.0.0.1:8000 --active-params-billion 8.03

On a GPU node (tests/gpu/serving_efficiency.sh starts llama.cpp's server on a random-weight
model and writes model.json with its parameter count and the weight bytes read per decoded
token). Runs gpufleet.tuning.inference_benchmark's engine in this process (standard library
only), prints the single-stream figures (min/median/max over --repeats), each concurrency level,
and the efficiency line, and writes the whole result as JSON to --out when given.

The ceiling: GPUs x memory bandwidth / bytes read per token. With --model-json the bytes per
token are the file's (the weights a decoded token reads: every layer and the output matrix,
one row of the embedding); otherwise active parameters x bytes per parameter.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.tuning.plugins.module_utils import inference_benchmark  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import load, openai_http  # noqa: E402


def bandwidth_from_facts():
    """(GB/s of the first GPU, how it was found) from node facts; (None, reason) without one."""
    try:
        found = gpu_facts.gather(gpu_facts.Paths("/"))
    except Exception as exc:  # pylint: disable=broad-except  # NVML missing: say so, do not fail
        return None, "node facts failed: %s" % exc
    for gpu in found["gpus"] or []:
        fact = gpu.get("memory_bandwidth_gbps") or {}
        if fact.get("value"):
            width, clock = gpu["memory_bus_width_bits"]["value"], gpu["memory_max_clock_mhz"]["value"]
            return fact["value"], "%s: %d-bit bus x %d MHz x 2 (node_facts)" % (gpu["name"]["value"], width, clock)
    return None, "no GPU with a known memory bandwidth"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--model-json", help="model.json of tests/gpu/make_random_llama.py")
    parser.add_argument("--active-params-billion", type=float)
    parser.add_argument("--bytes-per-param", type=float, default=2.0)
    parser.add_argument("--bandwidth-gbps", type=float, help="per GPU; default from NVML")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=256)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--server-timings", type=int, default=0, metavar="N",
                        help="then N single requests read llama.cpp's own timings.predicted_per_second")
    parser.add_argument("--out")
    args = parser.parse_args()

    params_billion, bytes_per_param, basis = args.active_params_billion, args.bytes_per_param, "given"
    if args.model_json:
        with open(args.model_json) as handle:
            model = json.load(handle)
        # Express the bytes a token reads as "parameters x bytes" so the module's formula holds.
        params_billion = model["weight_bytes_per_decoded_token"] / bytes_per_param / 1e9
        basis = "%s: %d parameters, %d bytes read per token" % (
            os.path.basename(args.model_json), model["parameters"], model["weight_bytes_per_decoded_token"])
    bandwidth, source = args.bandwidth_gbps, "given"
    if bandwidth is None:
        bandwidth, source = bandwidth_from_facts()
    params = {"url": args.url, "input_tokens": args.input_tokens, "output_tokens": args.output_tokens,
              "requests": args.requests, "concurrency": args.concurrency, "repeats": args.repeats, "warmup": 2,
              "timeout_s": 600, "ready_timeout_s": 60, "gpus": args.gpus, "bytes_per_param": bytes_per_param}
    if args.model:
        params["model"] = args.model
    if params_billion:
        params["active_params_billion"] = params_billion
    if bandwidth:
        params["memory_bandwidth_gbps"] = bandwidth
    result = inference_benchmark.run(params)
    print("model %s at %s; weights: %s; bandwidth: %s GB/s (%s)" % (result["model"], result["url"], basis, bandwidth,
                                                                    source))
    print("input %s tokens (%s), output %d tokens, %d requests per level, %d repeats"
          % (result["input"]["tokens_measured"] or result["input"]["tokens_asked"], result["input"]["counted_by"],
             args.output_tokens, args.requests, args.repeats))
    print("%-6s %-28s %-28s %-26s %-22s" % ("conc", "output tok/s (min/med/max)", "decode tok/s 1 stream",
                                            "TTFT p50 ms", "ITL p50/p99 ms"))
    for level in result["levels"]:
        s = level["summary"]
        print("%-6d %-28s %-28s %-26s %-22s" % (
            level["concurrency"], _spread(s["output_tokens_per_s"]), _spread(s["decode_tokens_per_s"]),
            _spread(s["ttft_ms.p50"]), "%s / %s" % (s["itl_ms.p50"]["median"], s["itl_ms.p99"]["median"])))
    eff = result["efficiency"]
    if eff.get("percent") is not None:
        print("efficiency: %.1f %% (%s tok/s of %s)" % (eff["percent"], eff["decode_tokens_per_s"], eff["formula"]))
    else:
        print("efficiency: %s" % eff.get("reason"))
    print("tokens: %s" % json.dumps(result["tokens"]))
    for warning in result.get("warnings", []):
        print("warning: %s" % warning)
    if args.server_timings:
        own = server_timings(args, result)
        print("llama.cpp's own decode timer, %d single requests: %s tok/s (median %.1f); the module: %s tok/s"
              % (len(own), own, sorted(own)[len(own) // 2], result["single_stream"]["decode_tokens_per_s"]["median"]))
        result["server_timings_predicted_per_second"] = own
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0


def server_timings(args, result):
    """llama.cpp's server reports its own decode rate (``timings.predicted_per_second``) on the
    last event of a stream: an independent measure of what the module derives from arrival times."""
    endpoint = openai_http.Endpoint(args.url)
    workload = load.Workload("chat", result["model"], result["input"]["words"], args.output_tokens, True, {}, 99)
    rates = []
    for index in range(args.server_timings):
        seen = {}
        openai_http.stream(endpoint, workload.path, workload.body(index), 600,
                           lambda event, _at: seen.update(event.get("timings") and {"t": event["timings"]} or {}))
        if "t" in seen:
            rates.append(round(seen["t"]["predicted_per_second"], 1))
    return rates


def _spread(summary):
    return "%s / %s / %s" % (summary["min"], summary["median"], summary["max"])


if __name__ == "__main__":
    sys.exit(main())
