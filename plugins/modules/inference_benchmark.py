#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: inference_benchmark
short_description: Measure how fast an OpenAI-compatible server decodes, one stream and under load
version_added: 0.2.0
description:
  - Sends streaming requests to an OpenAI-compatible server (vLLM, SGLang, llama.cpp,
    llama-cpp-python, TGI's OpenAI API) at C(/v1/chat/completions) or C(/v1/completions) and
    times every streamed token. Python standard library only; runs on the node or on the
    controller (C(delegate_to)).
  - The load is synthetic and the same for every run, so two runs compare. Prompts of
    O(input_tokens) tokens (corrected with the server's own tokenizer through C(/tokenize) or
    C(/extras/tokenize) where it has one; otherwise one word counts as one token, and
    RV(input) says so), different for every request so no prefix cache answers
    them. Output of exactly O(output_tokens) tokens, requested as C(max_tokens) with
    C(ignore_eos) and C(min_tokens) (O(ignore_eos)).
  - Tokens are counted as streamed, one per event carrying text, and checked against the
    server's C(usage) where it sends one (C(stream_options.include_usage)). A server that
    streams more than C(max_tokens) fails the task; one that stops early is a warning.
  - O(warmup) requests first, not counted. Then the single stream (concurrency 1, always
    measured) and every level of O(concurrency), O(requests) requests each (at least the
    level), the whole sequence repeated O(repeats) times. Every figure is reported per repeat
    and as min, median and max, so a later comparison can tell a change from noise.
  - Figures follow vLLM's benchmark_serving and NVIDIA AIPerf, time to first token (TTFT),
    inter-token latency (ITL, the gaps between tokens), time per output token after the first
    (TPOT), end-to-end latency, decode tokens/s of one stream (1/TPOT), output tokens/s and
    requests/s of a level. Also goodput (requests/s meeting O(slo_ttft_ms) and O(slo_tpot_ms)).
  - With O(active_params_billion) and O(memory_bandwidth_gbps), the single-stream decode speed
    is compared with its memory-bandwidth ceiling, O(gpus) x bandwidth / (active parameters x
    O(bytes_per_param)), every decoded token reading every active weight once.
  - Failures an operator meets end the task with a message naming the URL and what came back,
    a server that is down or not ready within O(ready_timeout_s), an HTTP error (5xx with the
    server's words), a stream cut before its end, an event that is not JSON, an error sent in
    the stream, a server ignoring C(max_tokens). What was measured until then is returned.
  - Only sends requests; nothing on the node changes.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Changes nothing on the node, so it measures in check mode too.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Any host with Python and a route to the server.
options:
  url:
    description: Base URL of the server, C(http://host:port) (a trailing C(/v1) is the same server).
    type: str
    required: true
  model:
    description: Model id to request; default the first model C(/v1/models) lists. Must be listed.
    type: str
  endpoint:
    description: V(chat) for C(/v1/chat/completions), V(completions) for C(/v1/completions).
    type: str
    choices: [chat, completions]
    default: chat
  input_tokens:
    description: Prompt length in tokens, from 1 to 1048576.
    type: int
    default: 128
  output_tokens:
    description: Tokens each request decodes (C(max_tokens)), from 1 to 1048576.
    type: int
    default: 128
  requests:
    description: Requests per concurrency level and repeat (a level sends at least as many as its concurrency).
    type: int
    default: 8
  concurrency:
    description: Levels to measure, requests in flight at a time, each from 1 to 1024; 1 is always measured.
    type: list
    elements: int
    default: [1]
  warmup:
    description: Requests sent first at concurrency 1 and not counted (0 to 10000).
    type: int
    default: 2
  repeats:
    description: Times the whole measurement is repeated for its spread (1 to 100).
    type: int
    default: 3
  ignore_eos:
    description:
      - Ask the server to decode all O(output_tokens) tokens (C(ignore_eos) and C(min_tokens) in
        the request). V(false) for servers that refuse fields they do not know.
    type: bool
    default: true
  extra_body:
    description:
      - Fields added to every request, such as C(logit_bias) or a server's own sampling fields.
        C(stream), C(model), C(messages), C(prompt) and C(max_tokens) are refused (the benchmark sets them).
    type: dict
    default: {}
  api_key:
    description: Sent as C(Authorization Bearer) when set.
    type: str
  validate_certs:
    description: Check the server's TLS certificate (C(https) only).
    type: bool
    default: true
  timeout_s:
    description: Longest wait for one request's stream to end, in seconds (greater than 0, at most 86400).
    type: float
    default: 300.0
  ready_timeout_s:
    description:
      - How long to wait for the server to be ready first, in seconds (0 probes once); readiness
        as M(gpufleet.tuning.serving_health) judges it.
    type: float
    default: 0.0
  slo_ttft_ms:
    description: TTFT limit for goodput, milliseconds. Unset leaves TTFT out of goodput.
    type: float
  slo_tpot_ms:
    description: Time-per-output-token limit for goodput, milliseconds. Unset leaves it out.
    type: float
  active_params_billion:
    description: Parameters read per decoded token, in billions (all of a dense model, the active ones of a mixture of experts).
    type: float
  bytes_per_param:
    description: Bytes per parameter of the served weights (2 for f16/bf16, 1 for FP8/int8, 0.5 for 4-bit).
    type: float
    default: 2.0
  memory_bandwidth_gbps:
    description: Memory bandwidth of one GPU serving the model, GB/s (H200 4800, H100 SXM 3350).
    type: float
  gpus:
    description: GPUs the model is split over (tensor parallel), for the ceiling.
    type: int
    default: 1
  progress_path:
    description:
      - A file the module keeps up to date while it measures (measured runs (each repeat of each concurrency level) done of how many, the step
        now, seconds so far; one JSON object, replaced atomically), for a role that runs it as
        an async task and follows it with gpufleet.tuning.job_progress. Removed at the end.
        Unset writes nothing.
    type: path
  seed:
    description:
      - Seed of the synthetic prompts; the same seed sends the same prompts (RV(input) gives the
        seed used).
      - Unset draws a new seed every run, so a server's prompt cache cannot answer one run's
        prompts from an earlier run's (a before/after comparison would show a time-to-first-token
        gain that is not there).
    type: int
notes:
  - Run time is about (O(warmup) + O(repeats) x the requests of all levels) x the time of one
    request; see RV(elapsed_s).
  - Keep the benchmark's client off the GPUs' CPU cores when the server is CPU-bound, or run it
    on the controller.
seealso:
  - module: gpufleet.tuning.serving_health
    description: The readiness check the benchmark starts with.
  - name: NVIDIA AIPerf
    description: The established client whose figures this one matches within 10 % (benchmarks/inference_vs_aiperf.py).
    link: https://github.com/ai-dynamo/aiperf
"""

EXAMPLES = r"""
- name: Single stream and a sweep, with the efficiency against the H200's bandwidth
  gpufleet.tuning.inference_benchmark:
    url: http://127.0.0.1:8000
    model: meta-llama/Llama-3.1-8B-Instruct
    input_tokens: 512
    output_tokens: 256
    concurrency: [1, 2, 4, 8, 16]
    repeats: 3
    active_params_billion: 8.03
    bytes_per_param: 2
    memory_bandwidth_gbps: 4800
    slo_ttft_ms: 500
    slo_tpot_ms: 50
  register: bench

- name: Show decode speed and efficiency
  ansible.builtin.debug:
    msg: "{{ bench.single_stream.decode_tokens_per_s.median }} tok/s, {{ bench.efficiency.percent }} % of the ceiling"
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` is documented with the
# same text in every module of this collection; keep the copies equal.
RETURN = r"""
changes:
  description:
    - What this run changed (in check mode, what it would change) as records for programs to
      read (the closing summary, reports, a fleet revert); C(diff) shows the same for people.
    - One record per value, file, kernel module or service; empty when nothing changed, so
      C(changed) is true exactly when this list is not empty. A module that only reads always
      returns an empty list.
    - A failed run returns no records; what it had applied was restored.
  returned: always
  type: list
  elements: dict
  contains:
    area:
      description: The part of the tuning (C(sysctl), C(pcie), C(cpu_power), C(lxc_memlock),
        C(peermem), C(nvidia_options), C(kernel_cmdline)).
      type: str
    kind:
      description: V(value), V(file), V(module) or V(service).
      type: str
    target:
      description: The key, file path, PCI address, kernel module or unit.
      type: str
    before:
      description:
        - What this run found; null when absent or unknown.
        - A value is its text. A file is C(sha256), C(size) and C(mode), never its content
          (config files can hold secrets). A kernel module is V(loaded) or V(not loaded), a
          service a state word such as V(enabled).
      type: raw
    after:
      description: What this run left (in check mode, would leave), in the form of C(before).
      type: raw
  sample:
    - {"area": "lxc_memlock", "kind": "value", "target": "/etc/pve/lxc/101.conf lxc.prlimit.memlock",
       "before": "65536", "after": "unlimited"}
    - {"area": "lxc_memlock", "kind": "file", "target": "/etc/pve/lxc/101.conf",
       "before": {"sha256": "9f2c...", "size": 612, "mode": "0640"},
       "after": {"sha256": "41ab...", "size": 643, "mode": "0640"}}
url:
  description: The server's base URL as measured.
  returned: always
  type: str
endpoint:
  description: V(chat) or V(completions).
  returned: always
  type: str
time:
  description: When the benchmark started, UTC (C(2026-12-01T04:00:00Z)).
  returned: always
  type: str
model:
  description: The model measured.
  returned: when the server was ready
  type: str
health:
  description: The readiness probe (as M(gpufleet.tuning.serving_health) returns it).
  returned: always
  type: dict
input:
  description:
    - C(tokens_asked), C(words) sent per prompt, C(tokens_measured) by the server's tokenizer
      (null without one), C(counted_by) and the prompts' C(seed).
  returned: when the server was ready
  type: dict
config:
  description: The load as run (lengths, requests, levels, warm-up, repeats, SLOs).
  returned: when the server was ready
  type: dict
single_stream:
  description:
    - The concurrency 1 figures over repeats, each C({min, median, max, runs}), keyed
      C(decode_tokens_per_s), C(output_tokens_per_s), C(requests_per_s),
      C(goodput_requests_per_s) and C(ttft_ms.p50), C(ttft_ms.p90), C(ttft_ms.p99), with the same
      percentiles of C(itl_ms), C(tpot_ms) and C(e2e_ms).
  returned: on success
  type: dict
  sample: {"decode_tokens_per_s": {"min": 2101.3, "median": 2120.8, "max": 2133.0, "runs": [2101.3, 2120.8, 2133.0]}}
levels:
  description:
    - One entry per concurrency level, C(concurrency), C(runs) (the full figures of each repeat,
      C(mean), C(p50), C(p90), C(p99) of every latency, C(errors), C(wall_s)) and C(summary) as in RV(single_stream).
  returned: when the server was ready
  type: list
  elements: dict
tokens:
  description:
    - How output tokens were counted (C(counted_by)), C(usage_mismatches) (requests whose usage
      differs from the events streamed), C(short_outputs) (requests that stopped early).
  returned: on success
  type: dict
efficiency:
  description:
    - C(ceiling_tokens_per_s), C(decode_tokens_per_s) (single-stream median), C(percent) and
      C(formula); C(reason) instead when the ceiling inputs were not given.
  returned: on success
  type: dict
  sample: {"ceiling_tokens_per_s": 309.0, "decode_tokens_per_s": 10.34, "percent": 3.35,
           "formula": "1 GPU x 4800 GB/s / (7.77 B parameters x 2 bytes) = 309.0 tokens/s"}
errors:
  description: The failed requests, C(request), C(kind) (C(down), C(timeout), C(http), C(cut), C(bad_json),
    C(stream_error), C(max_tokens)), C(message) and C(status).
  returned: on failure of requests
  type: list
  elements: dict
elapsed_s:
  description: Seconds the whole benchmark took.
  returned: on success
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import inference_benchmark
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=inference_benchmark.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: inference_benchmark.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
