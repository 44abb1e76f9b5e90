"""gpufleet.tuning.inference_benchmark and serving_health against a real server (llama.cpp's,
through llama-cpp-python, on the tiny model): what the module measures is what the server did.

The tiny model always decodes to max_tokens and every token it emits re-tokenizes to itself,
so the count the module streams can be checked against the server's own tokenizer, and
llama-cpp-python's quirks (no /health, no usage in a stream, ignore_eos ignored but min_tokens
honoured) are the ones the module has to handle in the field.
"""

import json
import urllib.request

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import inference_benchmark as ib
from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_health as sh
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import load
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import Endpoint


def tokenize(server, text):
    request = urllib.request.Request(server.url + "/extras/tokenize", data=json.dumps({"input": text}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["tokens"]


def test_ready_through_the_model_list(tiny_server):
    result = sh.run({"url": tiny_server.url, "model": "tiny", "timeout_s": 10})
    # llama-cpp-python has no /health: the probe fell back to /v1/models.
    assert result["health_status"] == 404 and result["via"] == "/v1/models" and result["models"] == ["tiny"]


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_streamed_tokens_are_the_tokens_the_server_made(tiny_server, kind, monkeypatch):
    workload = load.Workload(kind, "tiny", 16, 24, True, {}, seed=3)
    texts = []
    real_event_text = load._event_text  # pylint: disable=protected-access

    def keep(event):
        text, finish = real_event_text(event)
        if text:
            texts.append(text)
        return text, finish
    monkeypatch.setattr(load, "_event_text", keep)
    record = load.one_request(Endpoint(tiny_server.url), workload, 0, timeout=60)
    assert record["streamed_tokens"] == record["output_tokens"] == 24
    assert record["finish_reason"] == "length" and record["usage_tokens"] is None
    assert len(tokenize(tiny_server, "".join(texts))) == 24


def test_a_sweep_on_the_real_server(tiny_server):
    result = ib.run({"url": tiny_server.url, "input_tokens": 32, "output_tokens": 32, "requests": 4,
                     "concurrency": [1, 2], "repeats": 2, "warmup": 1, "timeout_s": 120,
                     "active_params_billion": 0.0002, "bytes_per_param": 4, "memory_bandwidth_gbps": 10})
    assert result["model"] == "tiny"
    assert result["input"]["counted_by"] == "server /extras/tokenize"
    # The prompt is whole words, and a word of the tiny model's vocabulary can be several tokens:
    # the count reached is the server's count of the prompt sent, and no word more or fewer
    # comes closer to the 32 asked (the run's seed is a fresh one, so the words differ by run).
    words, seed, measured = (result["input"][key] for key in ("words", "seed", "tokens_measured"))
    assert measured == len(tokenize(tiny_server, load.prompt_words(words, seed)))
    for neighbour in (words - 1, words + 1):
        other = len(tokenize(tiny_server, load.prompt_words(neighbour, seed)))
        assert abs(measured - 32) <= abs(other - 32), (words, measured, neighbour, other)
    assert result["tokens"] == {"counted_by": "streamed events (the server sent no usage)", "requests": 16,
                                "usage_mismatches": 0, "short_outputs": 0, "output_tokens_asked": 32}
    single = result["single_stream"]
    for figure in ("decode_tokens_per_s", "output_tokens_per_s", "ttft_ms.p50", "itl_ms.p99", "e2e_ms.p50"):
        spread = single[figure]
        assert 0 < spread["min"] <= spread["median"] <= spread["max"], figure
    # One stream decodes faster than its end-to-end rate (which includes the first token).
    assert single["decode_tokens_per_s"]["median"] > single["output_tokens_per_s"]["median"]
    assert result["efficiency"]["percent"] > 0


def test_a_model_the_server_does_not_serve(tiny_server):
    with pytest.raises(ModuleFailure) as exc:
        ib.run({"url": tiny_server.url, "model": "llama-70b", "requests": 1, "repeats": 1})
    assert "lists tiny, not the expected model 'llama-70b'" in exc.value.message
