"""The inference_benchmark engine against the fault-injecting server: validation before any
request, the shape of a result, repeats and levels, and each failure with what was measured."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import inference_benchmark as ib
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.serving_fake import FakeServer

QUICK = {"input_tokens": 16, "output_tokens": 8, "requests": 3, "repeats": 2, "warmup": 1}


@pytest.fixture
def fake():
    with FakeServer(token_delay=0.002) as server:
        yield server


def run(params):
    result = ib.run(params)
    contract.assert_records(result, "serving")
    return result


def test_a_measurement_with_levels_repeats_and_the_ceiling(fake):
    result = run(dict(QUICK, url=fake.url, concurrency=[2, 4], active_params_billion=1.0,
                      memory_bandwidth_gbps=4800, slo_ttft_ms=10000))
    assert result["model"] == "fake-model" and result["changed"] is False
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2, 4]
    level4 = result["levels"][2]
    assert len(level4["runs"]) == 2 and level4["runs"][0]["requests"] == 4  # at least the level's concurrency
    decode = result["single_stream"]["decode_tokens_per_s"]
    assert decode["min"] <= decode["median"] <= decode["max"] and len(decode["runs"]) == 2
    assert result["efficiency"]["ceiling_tokens_per_s"] == 2400.0
    assert result["efficiency"]["percent"] == pytest.approx(100.0 * decode["median"] / 2400.0, abs=0.01)
    assert result["single_stream"]["goodput_requests_per_s"]["median"] > 0
    seed = result["input"].pop("seed")
    assert result["input"] == {"tokens_asked": 16, "words": 16, "tokens_measured": 16, "counted_by": "server /tokenize"}
    assert isinstance(seed, int)
    assert result["tokens"]["short_outputs"] == 0 and result["tokens"]["requests"] == 2 * (3 + 3 + 4)
    # warm-up 1 + 2 repeats x (3 + 3 + 4) requests, every one to the chat endpoint
    posts = [body for method, path, body in fake.seen if path == "/v1/chat/completions"]
    assert len(posts) == 21 and all(body["max_tokens"] == 8 for body in posts)


def test_without_ceiling_inputs_the_efficiency_says_why(fake):
    result = run(dict(QUICK, url=fake.url, repeats=1))
    assert result["efficiency"]["percent"] is None
    assert result["efficiency"]["reason"] == "not computed: active_params_billion and memory_bandwidth_gbps not given"


def test_a_server_that_stops_early_is_a_warning(fake):
    fake.behaviour["stream"] = "stop_early"
    result = run(dict(QUICK, url=fake.url, repeats=1))
    assert result["tokens"]["short_outputs"] == 3  # the measured requests, not the warm-up
    assert any("stopped before 8 output tokens (finish reason stop)" in w for w in result["warnings"])


@pytest.mark.parametrize("mode, text", [
    ("http500", "3 of 3 requests failed in the repeat 1, concurrency 1 (http); first: "),
    ("cut", "(cut); first: "),
    ("bad_json", "(bad_json); first: "),
    ("ignore_max_tokens", "(max_tokens); first: "),
])
def test_failed_requests_fail_with_what_was_measured(fake, mode, text):
    fake.behaviour["stream"] = mode
    with pytest.raises(ModuleFailure) as exc:
        run(dict(QUICK, url=fake.url, warmup=0, repeats=1))
    assert text in exc.value.message
    assert exc.value.partial["errors"][0]["request"] == 0 and exc.value.partial["levels"][0]["concurrency"] == 1
    contract.assert_no_change_claimed(exc.value.partial)


def test_a_failing_warm_up_stops_before_the_measurement(fake):
    fake.behaviour["stream"] = "http500"
    with pytest.raises(ModuleFailure) as exc:
        run(dict(QUICK, url=fake.url))
    assert "1 of 1 requests failed in the warm-up (http)" in exc.value.message


def test_a_server_down_is_named():
    with pytest.raises(ModuleFailure) as exc:
        run(dict(QUICK, url="http://127.0.0.1:9"))
    assert exc.value.message.startswith("the server at http://127.0.0.1:9 is down after 0 s (1 probe): nothing answers")


def test_a_server_slow_to_be_ready_is_named(fake):
    fake.behaviour["ready_after"] = 60
    with pytest.raises(ModuleFailure) as exc:
        run(dict(QUICK, url=fake.url, ready_timeout_s=0.5))
    assert "was not ready after 0.5 s" in exc.value.message and "HTTP 503" in exc.value.message


def test_a_model_the_server_does_not_list_is_refused(fake):
    with pytest.raises(ModuleFailure) as exc:
        run(dict(QUICK, url=fake.url, model="other"))
    assert "lists fake-model, not the expected model 'other'" in exc.value.message


@pytest.mark.parametrize("params, text", [
    ({"output_tokens": 0}, "output_tokens=0 is out of range: give a whole number from 1 to 1048576"),
    ({"repeats": True}, "repeats=True is out of range"),
    ({"concurrency": []}, "concurrency=[] is empty"),
    ({"concurrency": [0]}, "concurrency: 0 is not a level from 1 to 1024"),
    ({"timeout_s": float("nan")}, "timeout_s=nan is not a finite number"),
    ({"memory_bandwidth_gbps": -1}, "memory_bandwidth_gbps=-1 is out of range"),
    ({"extra_body": {"max_tokens": 9}}, "extra_body sets max_tokens, which the benchmark sets itself"),
    ({"url": "localhost:8000"}, "url 'localhost:8000' is not an http:// or https:// URL with a host"),
])
def test_bad_input_is_refused_before_any_request(fake, params, text):
    with pytest.raises(ModuleFailure) as exc:
        ib.run(dict({"url": fake.url}, **params))
    assert text in exc.value.message
    assert fake.seen == []


def prompts_of(fake):
    return [body["messages"][0]["content"] for _m, path, body in fake.seen if path == "/v1/chat/completions"]


def test_each_run_sends_new_prompts_unless_seeded(fake):
    """A server's prompt cache must not answer a later run from an earlier one's prompts."""
    run(dict(QUICK, url=fake.url, repeats=1))
    first = prompts_of(fake)
    del fake.seen[:]
    run(dict(QUICK, url=fake.url, repeats=1))
    assert not set(first) & set(prompts_of(fake))
    del fake.seen[:]
    seeded = [run(dict(QUICK, url=fake.url, repeats=1, seed=5))["input"]["seed"] for _run in range(2)]
    assert seeded == [5, 5]
    assert prompts_of(fake)[:4] == prompts_of(fake)[4:]
