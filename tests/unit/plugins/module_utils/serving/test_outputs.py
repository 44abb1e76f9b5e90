"""serving/outputs.py, the reading half of the accuracy guard, against a server answering in each
family's shape: the greedy request bodies, the tokens read from logprobs for chat and
completions, the fall-back to characters, validation before any request and every failure
naming the prompt and the URL. Also the module serving_outputs as the engine's shell."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import outputs
from ansible_collections.gpufleet.tuning.plugins.modules import serving_outputs
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.accuracy import accuracy_compare
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module
from ansible_collections.gpufleet.tuning.tests.unit.serving_outputs_fake import OutputsServer, output_tokens

PROMPTS = ["alpha beta gamma", "one two three four five six", "x"]


@pytest.fixture
def fake():
    with OutputsServer() as server:
        yield server


def run(params):
    result = outputs.run(params)
    contract.assert_records(result, "serving")
    return result


def test_built_in_prompts_are_eight_fixed_texts_of_several_kinds():
    prompts = outputs.DEFAULT_PROMPTS
    assert isinstance(prompts, tuple) and len(prompts) == 8 and len(set(prompts)) == 8
    assert all(isinstance(p, str) and p.strip() for p in prompts)
    long_prompt = outputs.LONG_PROMPT
    assert long_prompt in prompts and 1000 <= len(long_prompt) <= 2000
    # The question is about the start of the passage.
    assert long_prompt.startswith("The first line of this maintenance log") and "first line" in long_prompt[-120:]
    assert sum(len(p) < 200 for p in prompts) == 7


def test_chat_requests_are_greedy_and_ask_for_tokens(fake):
    result = run({"url": fake.url, "prompts": PROMPTS, "max_tokens": 4, "seed": 7, "extra_body": {"top_k": 1}})
    bodies = fake.posts()
    assert len(bodies) == 3 and [p for m, p, _b in fake.seen if m == "POST"] == ["/v1/chat/completions"] * 3
    for prompt, body in zip(PROMPTS, bodies):
        assert body == {"model": "fake-model", "stream": False, "max_tokens": 4, "temperature": 0.0, "top_p": 1.0,
                        "n": 1, "seed": 7, "messages": [{"role": "user", "content": prompt}], "logprobs": True,
                        "top_logprobs": 1, "top_k": 1}
    assert result["model"] == "fake-model" and result["token_source"] == "logprobs"
    assert result["endpoint"] == "chat" and result["max_tokens"] == 4 and result["seed"] == 7
    assert result["changed"] is False and result["warnings"] == []
    first = result["outputs"][0]
    assert first == {"index": 0, "prompt": "alpha beta gamma", "prompt_sha256": outputs.prompt_digest("alpha beta gamma"),
                     "text": " gamma beta alpha", "tokens": [" gamma", " beta", " alpha"], "finish_reason": "stop",
                     "token_source": "logprobs"}
    second = result["outputs"][1]
    assert second["tokens"] == [" six", " five", " four", " three"] and second["finish_reason"] == "length"


def test_completions_read_the_legacy_tokens_list(fake):
    result = run({"url": fake.url, "endpoint": "completions", "prompts": PROMPTS, "max_tokens": 3})
    body = fake.posts()[0]
    assert body["prompt"] == "alpha beta gamma" and body["logprobs"] == 1 and "top_logprobs" not in body
    assert "messages" not in body and body["temperature"] == 0.0 and body["seed"] == 0
    assert [p for m, p, _b in fake.seen if m == "POST"] == ["/v1/completions"] * 3
    assert result["outputs"][0]["tokens"] == [" gamma", " beta", " alpha"]
    assert result["token_source"] == "logprobs"


def test_completions_in_the_chat_shape_as_llama_cpps_server_answers(fake):
    fake.behaviour["logprobs"] = "content"
    result = run({"url": fake.url, "endpoint": "completions", "prompts": PROMPTS})
    assert result["outputs"][1]["tokens"] == output_tokens(PROMPTS[1], 48)[0]
    assert result["token_source"] == "logprobs"


@pytest.mark.parametrize("mode", ["none", "null_tokens"])
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_without_per_token_output_the_text_is_compared_by_characters(fake, mode, endpoint):
    fake.behaviour["logprobs"] = mode
    result = run({"url": fake.url, "endpoint": endpoint, "prompts": PROMPTS})
    assert result["token_source"] == "characters"
    assert all(item["token_source"] == "characters" for item in result["outputs"])
    assert result["outputs"][2]["tokens"] == [" ", "x"]
    assert result["warnings"] == ["the server sent no per-token output (logprobs) for prompts 0, 1, 2: every output "
                                  "is compared character by character (token_source: characters)"]


def test_reasoning_content_is_part_of_the_output(fake):
    fake.behaviour["reasoning"] = "Let me think."
    result = run({"url": fake.url, "prompts": ["a b"], "extra_body": {"chat_template_kwargs": {"enable_thinking": True}}})
    assert result["outputs"][0]["text"] == "Let me think. b a"
    assert fake.posts()[0]["chat_template_kwargs"] == {"enable_thinking": True}


def test_the_built_in_prompts_are_sent_without_the_option(fake):
    result = run({"url": fake.url, "max_tokens": 2})
    assert [body["messages"][0]["content"] for body in fake.posts()] == list(outputs.DEFAULT_PROMPTS)
    assert [item["index"] for item in result["outputs"]] == list(range(8))
    assert result["outputs"][7]["prompt"] == outputs.LONG_PROMPT[:80]
    assert all(len(item["prompt"]) <= 80 for item in result["outputs"])


def test_two_reads_compare_exact_and_a_changed_token_does_not(fake):
    params = {"url": fake.url, "prompts": PROMPTS}
    baseline = run(params)
    assert accuracy_compare(run(params), baseline)["exact"] is True
    fake.behaviour["change"] = {"prompt_contains": "six", "at": 5, "token": " seven"}
    verdict = accuracy_compare(run(params), baseline)
    assert not verdict["passed"] and verdict["differing_prompts"] == 1
    assert verdict["first_differences"] == [{"prompt": 1, "token": 5, "baseline": " one", "candidate": " seven",
                                             "kind": "token"}]


def test_a_named_model_must_be_listed(fake):
    assert run({"url": fake.url, "model": "fake-model", "prompts": ["a"]})["model"] == "fake-model"
    with pytest.raises(ModuleFailure) as exc:
        outputs.run({"url": fake.url, "model": "llama-70b", "prompts": ["a"]})
    assert exc.value.message.endswith("model='llama-70b' is not served at %s/v1/models, which lists fake-model" % fake.url)
    assert fake.posts() == [{"model": "fake-model", "stream": False, "max_tokens": 48, "temperature": 0.0, "top_p": 1.0,
                             "n": 1, "seed": 0, "messages": [{"role": "user", "content": "a"}], "logprobs": True,
                             "top_logprobs": 1}]


def test_a_server_without_a_model_list(fake):
    fake.behaviour["models"] = None
    assert run({"url": fake.url, "model": "m", "prompts": ["a"]})["model"] == "m"
    with pytest.raises(ModuleFailure) as exc:
        outputs.run({"url": fake.url, "prompts": ["a"]})
    assert exc.value.message.startswith("model is not set and the models cannot be listed: %s/v1/models answered HTTP 404"
                                        % fake.url)
    fake.behaviour["models"] = []
    with pytest.raises(ModuleFailure) as exc:
        outputs.run({"url": fake.url, "prompts": ["a"]})
    assert exc.value.message == "model is not set and %s/v1/models lists no model; set model" % fake.url


@pytest.mark.parametrize("behaviour, words", [
    ({"status": 500}, "/v1/chat/completions answered HTTP 500 (the server failed): "
                      "{\"error\": {\"message\": \"CUDA error: out of memory\", \"code\": 500}}"),
    ({"status": 400}, "answered HTTP 400 (the request was refused)"),
    ({"body": "bad_json"}, "/v1/chat/completions answered 200 with a body that is not JSON: '<html>proxy error</html>'"),
    ({"body": "no_choices"}, "/v1/chat/completions answered 200 without a choice"),
    ({"body": "error_object"}, "/v1/chat/completions answered 200 with an error: model is not loaded"),
    ({"body": "no_text"}, "answered 200 without the output text (choices[0].message.content)"),
])
def test_a_failed_request_names_the_prompt_and_the_url(fake, behaviour, words):
    baseline_ok = run({"url": fake.url, "prompts": PROMPTS[:1]})
    assert baseline_ok["outputs"]
    fake.behaviour.update(behaviour)
    with pytest.raises(ModuleFailure) as exc:
        outputs.run({"url": fake.url, "prompts": PROMPTS})
    message = exc.value.message
    assert message.startswith("prompt 0 of 3 ('alpha beta gamma') failed: %s/v1/chat/completions" % fake.url), message
    assert words in message
    assert exc.value.partial["outputs"] == [] and exc.value.partial["model"] == "fake-model"


def test_a_failure_mid_way_keeps_the_outputs_read(fake):
    calls = {"n": 0}
    real_ask = outputs.ask

    def ask(endpoint, kind, model, prompt, params):
        calls["n"] += 1
        if calls["n"] == 2:
            fake.behaviour["status"] = 503
        return real_ask(endpoint, kind, model, prompt, params)
    outputs.ask, saved = ask, outputs.ask
    try:
        with pytest.raises(ModuleFailure) as exc:
            outputs.run({"url": fake.url, "prompts": PROMPTS})
    finally:
        outputs.ask = saved
    assert exc.value.message.startswith("prompt 1 of 3 ('one two three four five six') failed: ")
    assert [item["index"] for item in exc.value.partial["outputs"]] == [0]


def test_a_server_that_is_down():
    with pytest.raises(ModuleFailure) as exc:
        outputs.run({"url": "http://127.0.0.1:9", "prompts": ["a"], "timeout_s": 2})
    assert "nothing answers at http://127.0.0.1:9/v1/models: connection refused" in exc.value.message


def test_a_server_ignoring_max_tokens_is_a_warning(fake, monkeypatch):
    monkeypatch.setattr(outputs, "request_body", lambda kind, model, prompt, params: {
        "model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 50})
    result = run({"url": fake.url, "prompts": PROMPTS, "max_tokens": 2})
    assert result["warnings"] == ["the server answered prompts 0, 1 with more than max_tokens=2 tokens: it does not "
                                  "honour max_tokens"]


@pytest.mark.parametrize("params, message", [
    ({"max_tokens": 0}, "max_tokens=0 is out of range: give a whole number from 1 to 65536"),
    ({"max_tokens": True}, "max_tokens=True is out of range"),
    ({"seed": -1}, "seed=-1 is out of range: give a whole number from 0 to 4294967295"),
    ({"seed": 1 << 32}, "seed=4294967296 is out of range"),
    ({"timeout_s": 0}, "timeout_s=0 is out of range: give a finite number greater than 0 and at most 86400"),
    ({"timeout_s": "nan"}, "timeout_s='nan' is not a finite number"),
    ({"endpoint": "responses"}, "endpoint='responses': give one of chat, completions"),
    ({"model": " "}, "model=' ' is empty"),
    ({"prompts": []}, "prompts=[]: give a non-empty list of prompt texts"),
    ({"prompts": ["ok", ""]}, "prompts[1]='' is not a prompt: give non-empty text"),
    ({"prompts": ["ok", None]}, "prompts[1]=None is not a prompt"),
    ({"prompts": ["a"] * 1001}, "prompts has 1001 entries: give at most 1000"),
    ({"extra_body": {"temperature": 0.7, "stream": True}},
     "extra_body sets stream, temperature, which the accuracy check sets itself"),
    ({"extra_body": "x"}, "extra_body='x' is not a dict"),
    ({"url": "ftp://host"}, "url 'ftp://host' is not an http:// or https:// URL with a host"),
])
def test_bad_options_are_refused_before_any_request(fake, params, message):
    with pytest.raises(ModuleFailure) as exc:
        outputs.run(dict({"url": fake.url}, **params))
    assert message in exc.value.message
    assert fake.seen == []


def test_tokens_from_logprobs_shapes():
    chat = {"logprobs": {"content": [{"token": "a"}, {"token": "b"}]}}
    assert outputs.tokens_from_logprobs("chat", chat) == ["a", "b"]
    assert outputs.tokens_from_logprobs("chat", {"logprobs": None}) is None
    assert outputs.tokens_from_logprobs("chat", {"logprobs": {"content": None}}) is None
    assert outputs.tokens_from_logprobs("chat", {"logprobs": {"tokens": ["a"]}}) is None
    assert outputs.tokens_from_logprobs("completions", {"logprobs": {"tokens": ["a", "b"]}}) == ["a", "b"]
    assert outputs.tokens_from_logprobs("completions", chat) == ["a", "b"]
    assert outputs.tokens_from_logprobs("completions", {"logprobs": {"tokens": ["a", 3]}}) is None
    assert outputs.tokens_from_logprobs("chat", {"logprobs": {"content": [{"token": "a"}, "b"]}}) is None


def test_an_empty_output_keeps_the_logprob_source():
    warnings = []
    outs, source = outputs.finish_outputs([
        {"index": 0, "prompt": "p", "prompt_sha256": "s", "text": "", "logprob_tokens": None, "finish_reason": "stop"},
        {"index": 1, "prompt": "q", "prompt_sha256": "t", "text": "ab", "logprob_tokens": ["ab"], "finish_reason": "stop"},
    ], warnings)
    assert source == "logprobs" and warnings == [] and outs[0]["tokens"] == [] and outs[1]["tokens"] == ["ab"]


# ------------------------------------------------------------------------------ the module

def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(serving_outputs, outputs, monkeypatch)


def test_the_module_asks_in_check_mode_and_hides_the_key(fake, capsys):
    failed, result = run_module(serving_outputs, {"url": fake.url, "prompts": PROMPTS, "api_key": "sk-secret"},
                                capsys, check_mode=True)
    assert not failed and result["changed"] is False and result["changes"] == []
    assert result["token_source"] == "logprobs" and len(result["outputs"]) == 3
    assert "sk-secret" not in str(result)


def test_the_module_fails_with_what_it_read(fake, capsys):
    fake.behaviour["status"] = 500
    failed, result = run_module(serving_outputs, {"url": fake.url, "prompts": PROMPTS}, capsys)
    assert failed and result["msg"].startswith("prompt 0 of 3 ('alpha beta gamma') failed: ")
    assert result["outputs"] == [] and "changes" not in result
