"""The accuracy guard against a real server (llama.cpp's, through llama-cpp-python, on the tiny
random model): serving_outputs reads the server's own tokens, two reads of one server are
exact, and a launch flag that changes the model's numerics is rejected by accuracy_compare
while one that only changes how the work is scheduled is not.

The candidates are second servers on the same model with one flag more (a later flag wins in
llama_cpp.server's argparse). Seen on a 2-core machine, llama-cpp-python 0.3.36, the tiny
model, 8 built-in prompts of 48 tokens:

- ``--rope_freq_base 100`` (the model's is 10000) and ``--rope_freq_scale 0.25``: every prompt
  differs, about 95 % of the tokens, chat and completions alike;
- ``--type_k 8`` (a q8_0 key cache): about 95 % too;
- ``--flash_attn True``: one prompt of eight differs, 12 % (chat) and 8 % (completions) of the
  tokens, the same on every start (a numerics change an allowance can judge; not asserted
  here, as it depends on the CPU's kernels);
- no change: ``--n_threads 2 --n_threads_batch 2``, ``--n_batch 64 --n_ubatch 64``, ``--seed 1``,
  ``--n_ctx 2048``, ``--type_k 0 --type_v 0`` (f32) and ``--type_k 1 --type_v 1`` (f16, the
  default), ``--rope_freq_base 10000`` (the model's own).
"""

import contextlib
import json
import os
import subprocess
import time
import urllib.request

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import outputs
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.accuracy import accuracy_compare
from ansible_collections.gpufleet.tuning.tests.serving import server as serving

MAX_TOKENS = 48


def tokenize(url, text):
    request = urllib.request.Request(url + "/extras/tokenize", data=json.dumps({"input": text}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["tokens"]


@contextlib.contextmanager
def candidate(tiny_server, *flags):
    """A second server on the tiny model with ``flags`` after the test server's own."""
    port = serving.free_port()
    log_path = os.path.join(tiny_server.model_dir, "candidate-%d.log" % port)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(  # pylint: disable=consider-using-with
            serving.argv(tiny_server.model_dir, port) + list(flags), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    server = serving.Server(process, port, tiny_server.model_dir, log_path)
    try:
        deadline = time.monotonic() + serving.READY_TIMEOUT
        while not serving.answers(server.url + "/v1/models"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the candidate server %s did not start; %s ends:\n%s"
                            % (" ".join(flags), log_path, serving.log_tail(log_path)), pytrace=False)
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def read(url, endpoint="chat"):
    return outputs.run({"url": url, "endpoint": endpoint, "max_tokens": MAX_TOKENS, "timeout_s": 120})


@pytest.fixture(scope="module")
def baseline(tiny_server):
    return {"chat": read(tiny_server.url), "completions": read(tiny_server.url, "completions")}


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_the_tokens_are_the_servers_own(tiny_server, baseline, endpoint):
    result = baseline[endpoint]
    assert result["model"] == "tiny" and result["token_source"] == "logprobs" and result["warnings"] == []
    assert len(result["outputs"]) == len(outputs.DEFAULT_PROMPTS)
    for item in result["outputs"]:
        # The tiny model never ends early and emits only tokens that re-tokenize to themselves.
        assert len(item["tokens"]) == MAX_TOKENS and item["finish_reason"] == "length"
        assert "".join(item["tokens"]) == item["text"]
        assert len(tokenize(tiny_server.url, item["text"])) == MAX_TOKENS


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_two_reads_of_one_server_are_exact(tiny_server, baseline, endpoint):
    verdict = accuracy_compare(read(tiny_server.url, endpoint), baseline[endpoint])
    assert verdict["exact"] and verdict["passed"] and verdict["divergence_pct"] == 0.0
    assert verdict["prompts"] == 8 and verdict["tokens_compared"] == 8 * MAX_TOKENS


@pytest.mark.parametrize("flags", [("--rope_freq_base", "100"), ("--rope_freq_scale", "0.25")])
def test_a_flag_that_changes_greedy_outputs_is_rejected(tiny_server, baseline, flags):
    with candidate(tiny_server, *flags) as server:
        answers = read(server.url)
    verdict = accuracy_compare(answers, baseline["chat"])
    assert not verdict["exact"] and not verdict["passed"]
    assert verdict["differing_prompts"] >= 4 and verdict["divergence_pct"] > 50
    assert not accuracy_compare(answers, baseline["chat"], 10)["passed"]
    first = verdict["first_differences"][0]
    assert first["baseline"] != first["candidate"] and first["kind"] == "token"


def test_more_threads_keep_the_outputs(tiny_server, baseline):
    with candidate(tiny_server, "--n_threads", "2", "--n_threads_batch", "2") as server:
        answers = {"chat": read(server.url), "completions": read(server.url, "completions")}
    for endpoint in ("chat", "completions"):
        verdict = accuracy_compare(answers[endpoint], baseline[endpoint])
        assert verdict["exact"] and verdict["passed"], (endpoint, verdict["first_differences"])
