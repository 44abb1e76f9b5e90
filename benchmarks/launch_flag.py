# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One launch flag of a model server measured both ways, judged as the serving experiments judge.

    python3 benchmarks/launch_flag.py --server /tmp/llama.cpp/build/bin/llama-server \\
        --model /tmp/model/random-llama-f16.gguf --baseline="--flash-attn off" -- --flash-attn on

Starts the server as a process (no unit, nothing on the system changed) with its base command
(``--server --model`` and ``--base-args``) plus ``--baseline``, measures it, stops it, starts it
again with the flag after ``--`` instead, measures again. Each measurement is the collection's
inference benchmark engine (gpufleet.tuning.inference_benchmark) and the accuracy guard's greedy
outputs (gpufleet.tuning.serving_outputs), in this process, standard library only. Then the
verdict at each concurrency level (experiment_verdict: the chosen figure better beyond the noise,
the guard figures not worse past 5 %) and the token-by-token comparison (accuracy_compare).
Prints the figures of both launches and the verdicts; --out keeps both results, both outputs and
both server logs.

On a GPU node: tests/gpu/serving_efficiency.sh build and model make the server and a model. The
plugin_utils filters need ansible-core importable (carried as wheels on a node without it).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.tuning.plugins.module_utils import inference_benchmark, serving_health  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import outputs  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.accuracy import accuracy_compare  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.experiments import experiment_verdict  # noqa: E402


def measure(args, extra, label):
    """Start the server with ``extra``, wait until ready, benchmark, read greedy outputs, stop."""
    command = [args.server, "-m", args.model, "--host", "127.0.0.1", "--port", str(args.port)]
    command += shlex.split(args.base_args) + extra
    log = open(os.path.join(args.out, "server-%s.log" % label), "w")
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % args.port
    try:
        serving_health.run(dict(url=url, timeout_s=args.ready_timeout_s, interval_s=0.5))
        ready_s = round(time.monotonic() - started, 2)
        bench = inference_benchmark.run(dict(
            url=url, endpoint="chat", input_tokens=args.input_tokens, output_tokens=args.output_tokens,
            requests=args.requests, concurrency=args.concurrency, warmup=args.warmup, repeats=args.repeats,
            timeout_s=300))
        greedy = outputs.run(dict(url=url, max_tokens=48))
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
    for name, data in (("bench", bench), ("outputs", greedy)):
        with open(os.path.join(args.out, "%s-%s.json" % (name, label)), "w") as handle:
            json.dump(data, handle, indent=1, default=str)
    return bench, greedy, ready_s


def show(bench, label, ready_s):
    for level in bench["levels"]:
        summary = level["summary"]
        decode = summary["decode_tokens_per_s"]
        print("%-28s c=%d decode %.1f tok/s (min %.1f, max %.1f), output %.1f tok/s, TTFT p50 %.2f ms; "
              "ready %.1f s after start" % (label, level["concurrency"], decode["median"], decode["min"], decode["max"],
                                            summary["output_tokens_per_s"]["median"],
                                            summary["ttft_ms.p50"]["median"], ready_s))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--server", required=True, help="the server program (llama-server)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--base-args", default="-ngl 99 -c 8192 -np 4", help="the launch command's other arguments")
    parser.add_argument("--baseline", default="", help="arguments only the first launch gets (the flag's other value)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--input-tokens", type=int, default=256)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ready-timeout-s", type=float, default=300.0)
    parser.add_argument("--allowance-pct", type=float, default=0.0, help="the accuracy allowance of the verdict")
    parser.add_argument("--out", default=None, help="folder for results, outputs and server logs")
    parser.add_argument("flag", nargs="+", help="the candidate's arguments (after --)")
    args = parser.parse_args()
    args.out = args.out or tempfile.mkdtemp(prefix="launch-flag-")
    os.makedirs(args.out, exist_ok=True)
    before = measure(args, shlex.split(args.baseline), "without")
    after = measure(args, args.flag, "with")
    show(before[0], "without %s" % (args.baseline or "(base command)"), before[2])
    show(after[0], "with %s" % " ".join(args.flag), after[2])
    accuracy = accuracy_compare(after[1], before[1], args.allowance_pct)
    for level in args.concurrency:
        judged = experiment_verdict(after[0], before[0], "decode_tokens_per_s", level,
                                    ["output_tokens_per_s", "ttft_ms.p90"], 5.0, accuracy)
        print("verdict at concurrency %d: %s - %s" % (level, judged["status"], judged["reason"]))
    print("greedy outputs: exact %s, %.4f %% of tokens diverged over %d prompts (%d differ), tokens from %s"
          % (accuracy["exact"], accuracy["divergence_pct"], accuracy["prompts"], accuracy["differing_prompts"],
             accuracy["token_source"]))
    for item in accuracy["first_differences"][:3]:
        print("  prompt %s token %s: %r -> %r" % (item["prompt"], item["token"], item["baseline"], item["candidate"]))
    print("results in %s" % args.out)


if __name__ == "__main__":
    main()
