"""Synthetic requests and timed streams against the fault-injecting server: what a request
sends, how tokens are counted, and each way a stream can fail."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import load
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import Endpoint, ServingError
from ansible_collections.gpufleet.tuning.tests.unit.serving_fake import FakeServer


@pytest.fixture
def fake():
    with FakeServer() as server:
        yield server


def workload(kind="chat", output=8, ignore_eos=True, extra=None, words=5):
    return load.Workload(kind, "fake-model", words, output, ignore_eos, extra or {}, seed=7)


def test_a_request_asks_for_max_tokens_and_no_early_stop():
    body = workload(extra={"logit_bias": {"2": -100}}).body(3)
    assert body["max_tokens"] == 8 and body["stream"] is True and "max_completion_tokens" not in body
    assert body["ignore_eos"] is True and body["min_tokens"] == 8 and body["logit_bias"] == {"2": -100}
    assert body["messages"][0]["role"] == "user" and len(body["messages"][0]["content"].split()) == 5
    plain = workload("completions", ignore_eos=False).body(3)
    assert "prompt" in plain and "ignore_eos" not in plain and "min_tokens" not in plain


def test_prompts_differ_between_requests_and_repeat_between_runs():
    one = workload(words=64)
    assert one.body(1)["messages"] != one.body(2)["messages"]
    assert one.body(1)["messages"] == workload(words=64).body(1)["messages"]


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_a_stream_is_timed_token_by_token(fake, kind):
    fake.behaviour.update(first_delay=0.05, token_delay=0.01)
    rec = load.one_request(Endpoint(fake.url), workload(kind), 0, timeout=10)
    assert rec["streamed_tokens"] == rec["output_tokens"] == 8 and rec["usage_tokens"] is None
    assert rec["finish_reason"] == "length"
    # Gaps are taken as lines are read: a busy client may read two at once, so judge their sum;
    # and it may read the first token late (ttft grows) and the rest on time, so the time after
    # the first token gets the same 10 ms of slack as the gaps (7 tokens 10 ms apart: 70 ms).
    assert rec["ttft"] >= 0.05 and len(rec["gaps"]) == 7 and sum(rec["gaps"]) >= 0.06
    assert rec["e2e"] >= rec["ttft"] + 0.06
    assert fake.seen[-1][1] == ("/v1/chat/completions" if kind == "chat" else "/v1/completions")


def test_sse_comments_are_skipped(fake):
    fake.behaviour["sse_comments"] = True
    assert load.one_request(Endpoint(fake.url), workload(), 0, timeout=10)["output_tokens"] == 8


def test_the_server_usage_is_the_count_when_it_differs(fake):
    fake.behaviour.update(usage=True, usage_factor=2)
    rec = load.one_request(Endpoint(fake.url), workload(output=4), 0, timeout=10)
    assert rec["streamed_tokens"] == 2 and rec["usage_tokens"] == rec["output_tokens"] == 4


@pytest.mark.parametrize("mode, kind, text", [
    ("cut", "cut", "ended the stream after 3 tokens without a finish reason or [DONE]: the stream was cut"),
    ("bad_json", "bad_json", "sent stream event 4 that is not JSON: '{\"choices\": [{\"delta\": {\"content\": \"x\"'"),
    ("error_event", "stream_error", "sent an error in the stream after 3 events: the engine died"),
    ("ignore_max_tokens", "max_tokens", "ignored max_tokens: asked for at most 8 tokens, it streamed more than 32"),
    ("http500", "http", "answered HTTP 500 (the server failed): {\"error\": {\"message\": \"CUDA error: an illegal"),
])
def test_each_failure_names_what_happened(fake, mode, kind, text):
    fake.behaviour["stream"] = mode
    with pytest.raises(ServingError) as exc:
        load.one_request(Endpoint(fake.url), workload(), 0, timeout=10)
    assert exc.value.kind == kind
    assert text in exc.value.message and fake.url in exc.value.message


def test_a_slow_stream_times_out(fake):
    fake.behaviour["first_delay"] = 2
    with pytest.raises(ServingError) as exc:
        load.one_request(Endpoint(fake.url), workload(), 0, timeout=0.3)
    assert exc.value.kind == "timeout" and "did not answer within 0.3 s" in exc.value.message


def test_a_level_runs_requests_concurrently(fake):
    fake.behaviour["token_delay"] = 0.02
    records, wall = load.run_level(Endpoint(fake.url), workload(output=6), 8, 4, timeout=10)
    assert [r["index"] for r in records] == list(range(8)) and all(r["error"] is None for r in records)
    # 8 requests of ~0.1 s, four at a time: about 0.2 s, not 0.8.
    assert wall < 0.6


def test_prompt_length_is_corrected_with_the_server_tokenizer(fake):
    fake.behaviour["tokenize"] = "double"
    counter = load.TokenCounter(Endpoint(fake.url), "fake-model", 5)
    words, measured = load.calibrated_words(counter, 100, seed=1)
    assert (words, measured) == (50, 100) and counter.source == "server /tokenize"


def test_without_a_tokenizer_words_are_the_estimate(fake):
    fake.behaviour["tokenize"] = "none"
    counter = load.TokenCounter(Endpoint(fake.url), "fake-model", 5)
    assert load.calibrated_words(counter, 100, seed=1) == (100, None) and counter.source is None


def test_uneven_words_are_walked_to_the_closest_count(fake, monkeypatch):
    # Every third word counts two tokens: proportions alone overshoot or undershoot.
    counter = load.TokenCounter(Endpoint(fake.url), "fake-model", 5)
    monkeypatch.setattr(counter, "count", lambda text: len(text.split()) + len(text.split()) // 3)
    words, measured = load.calibrated_words(counter, 101, seed=1)
    assert measured == 101 and words + words // 3 == 101
