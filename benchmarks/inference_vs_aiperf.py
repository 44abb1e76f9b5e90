# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.tuning.inference_benchmark beside NVIDIA AIPerf, same server, same load.

    scripts/stages/serving                                  # once: the serving venv (llama-cpp-python)
    python3 -m venv .cache/venv-aiperf && .cache/venv-aiperf/bin/pip install aiperf==0.13.0
    .venv-test/bin/python benchmarks/inference_vs_aiperf.py                 # concurrency 1 and 4
    .venv-test/bin/python benchmarks/inference_vs_aiperf.py --concurrency 1 --rounds 3

A real OpenAI-compatible server (llama.cpp's, through llama-cpp-python) starts on 127.0.0.1
with the tiny random-weight model of tests/serving/tiny_model.py, whose outputs always run to
max_tokens and re-tokenize to exactly the tokens streamed, so both clients count the same
tokens. Then, per concurrency level and round, interleaved (ours, AIPerf, ours, AIPerf, ...)
so a drift of the machine's load hits both alike:

- ours: the module's engine in this process, --isl/--osl tokens, --requests requests at the
  level, --warmup requests first, one repeat;
- AIPerf: ``aiperf profile`` with the flags the shared notes found necessary (chat endpoint,
  streaming, legacy max_tokens, fixed lengths, min_tokens so no early stop, the same request
  and warm-up counts, the local tokenizer folder), temperature 0 as the module sends (sampling
  at the server's default temperature costs llama-cpp-python about 0.6 ms a token more: 16 %
  fewer tokens/s in a first comparison that left it out), one worker and one record processor (an
  async worker keeps the level's requests in flight; more processes only compete for the
  client's CPU).

The server runs on the first CPU and both clients on the others (--no-pin leaves all on every
CPU): a CPU-bound server shares nothing with the client measuring it.

Printed: per level, the median over rounds of TTFT (mean, ms) and output tokens/s from each
client, and their ratio (ours / AIPerf); the run passes when every ratio is within --tolerance
(10 %) for TTFT and output tokens/s. The TTFT compared is the mean of each client, as AIPerf
reports ``avg``; the mean request latency is printed beside them, as a figure that does not
depend on how fast a client sends its next request.

The model is the tiny test model made larger (--model-size, hidden 256, 6 layers: about 4 ms a
token on one CPU) so that a token takes as long as on a real server rather than 0.7 ms, where
each client's own per-token work would weigh in the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.tuning.plugins.module_utils import inference_benchmark  # noqa: E402
from ansible_collections.gpufleet.tuning.tests.serving import server as serving  # noqa: E402


def ours(url, args, level):
    result = inference_benchmark.run({
        "url": url, "model": "tiny", "input_tokens": args.isl, "output_tokens": args.osl, "requests": args.requests,
        "concurrency": [level], "warmup": args.warmup, "repeats": 1, "timeout_s": 120})
    figures = next(item for item in result["levels"] if item["concurrency"] == level)["runs"][0]
    return {"ttft_ms": figures["ttft_ms"]["mean"], "output_tokens_per_s": figures["output_tokens_per_s"],
            "request_latency_ms": figures["e2e_ms"]["mean"], "input_tokens": result["input"]["tokens_measured"]}


def aiperf(url, args, level, model_dir, work):
    out = tempfile.mkdtemp(prefix="aiperf-", dir=work)
    command = [os.path.join(args.aiperf_venv, "bin", "aiperf"), "profile", "--model", "tiny", "--url", url,
               "--endpoint-type", "chat", "--streaming", "--use-legacy-max-tokens",
               "--isl", str(args.isl), "--isl-stddev", "0", "--osl", str(args.osl), "--osl-stddev", "0",
               "--extra-inputs", "min_tokens:%d" % args.osl, "--extra-inputs", "temperature:0",
               "--concurrency", str(level),
               "--request-count", str(args.requests), "--warmup-request-count", str(args.warmup),
               "--ui", "none", "--no-gpu-telemetry", "--workers-max", "1", "--record-processors", "1",
               "--artifact-dir", out, "--tokenizer", os.path.abspath(model_dir)]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=env, check=False, timeout=600)
    found = [os.path.join(root, name) for root, _dirs, names in os.walk(out) for name in names
             if name == "profile_export_aiperf.json"]
    if proc.returncode or not found:
        raise SystemExit("aiperf failed (%d):\n%s" % (proc.returncode, proc.stdout[-3000:]))
    with open(found[0]) as handle:
        data = json.load(handle)
    metrics = data.get("records", data)
    return {"ttft_ms": _avg(metrics, "time_to_first_token"), "output_tokens_per_s": _avg(metrics, "output_token_throughput"),
            "request_latency_ms": _avg(metrics, "request_latency"), "input_tokens": _avg(metrics, "input_sequence_length")}


def _avg(metrics, name):
    entry = metrics.get(name)
    if isinstance(entry, dict):
        return entry.get("avg")
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--isl", type=int, default=64)
    parser.add_argument("--osl", type=int, default=64)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--model-size", type=int, nargs=3, default=[256, 6, 1024], metavar=("HIDDEN", "LAYERS", "FF"),
                        help="the test model's size: about 4 ms a token on one CPU by default")
    parser.add_argument("--no-pin", action="store_true", help="leave the server and the clients on every CPU")
    parser.add_argument("--aiperf-venv", default=os.path.join(REPO, ".cache", "venv-aiperf"))
    args = parser.parse_args()
    if not os.path.exists(os.path.join(args.aiperf_venv, "bin", "aiperf")):
        raise SystemExit("no aiperf in %s (see the usage at the top of this file)" % args.aiperf_venv)
    work = tempfile.mkdtemp(prefix="vs-aiperf-")
    model_dir = os.path.join(work, "model")
    subprocess.run([serving.venv_python(), os.path.join(REPO, "tests", "serving", "tiny_model.py"), model_dir]
                   + [str(value) for value in args.model_size], check=True, stdout=subprocess.DEVNULL)
    rows = []
    # The server on one CPU, both clients on the others: on a small machine AIPerf's worker
    # processes would otherwise take CPU from a CPU-bound server and slow what it measures
    # (seen on 2 cores: 983 against 1,442 tokens/s, the same server measured by the lighter client).
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus, client_cpus = ({cpus[0]}, set(cpus[1:])) if len(cpus) > 1 and not args.no_pin else (set(cpus), set(cpus))
    os.sched_setaffinity(0, server_cpus)
    server_context = serving.start(model_dir)
    os.sched_setaffinity(0, client_cpus)
    print("server on CPUs %s, clients on CPUs %s" % (sorted(server_cpus), sorted(client_cpus)))
    with server_context as server:
        for level in args.concurrency:
            runs = {"ours": [], "aiperf": []}
            for _round in range(args.rounds):
                started = time.monotonic()
                runs["ours"].append(ours(server.url, args, level))
                runs["aiperf"].append(aiperf(server.url, args, level, model_dir, work))
                print("concurrency %d round %d: ours %s | aiperf %s (%.0f s)" % (
                    level, _round + 1, runs["ours"][-1], runs["aiperf"][-1], time.monotonic() - started), flush=True)
            for metric in ("ttft_ms", "output_tokens_per_s", "request_latency_ms"):
                mine = statistics.median(r[metric] for r in runs["ours"])
                theirs = statistics.median(r[metric] for r in runs["aiperf"])
                rows.append((level, metric, mine, theirs, mine / theirs))
    print("\nisl %d, osl %d, %d requests per run, %d warm-up, median of %d rounds each, interleaved"
          % (args.isl, args.osl, args.requests, args.warmup, args.rounds))
    print("%-12s %-22s %12s %12s %8s" % ("concurrency", "metric", "ours", "aiperf", "ratio"))
    worst = 0.0
    for level, metric, mine, theirs, ratio in rows:
        if metric != "request_latency_ms":
            worst = max(worst, abs(ratio - 1.0))
        print("%-12d %-22s %12.2f %12.2f %8.3f" % (level, metric, mine, theirs, ratio))
    verdict = "within" if worst <= args.tolerance else "NOT within"
    print("largest difference in TTFT and output tokens/s %.1f %%: %s %.0f %%" % (100 * worst, verdict, 100 * args.tolerance))
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
