# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.serving_outputs: a server's greedy answers to fixed prompts.

Why: a serving-configuration experiment changes how a server computes (speculative decoding,
another attention kernel, a quantized KV cache, CUDA graphs) and must not change what it
answers beyond what the operator allows. The accuracy guard asks the baseline server and the
candidate the same fixed prompts, greedily, and compares the outputs token by token
(plugin_utils/accuracy.py, the ``accuracy_compare`` filter). This engine is the asking half.

Greedy and repeatable: one request per prompt, non-streaming, ``temperature: 0``,
``top_p: 1``, ``n: 1`` and a fixed ``seed`` (a server that samples despite temperature 0, or
seeds its sampler per request, still gives the same answer twice). The length is
``max_tokens``, never ``max_completion_tokens`` (llama-cpp-python ignores it and decodes
thousands of tokens).

Tokens, not only text: two outputs that share a prefix of 40 tokens and then differ are
"40 of 48 tokens equal", which is what an allowance in percent can judge, so the server is
asked for per-token output, the way each server documents it:

- chat (``/v1/chat/completions``): ``logprobs: true, top_logprobs: 1`` answered in
  ``choices[0].logprobs.content[i].token`` by vLLM, SGLang, llama.cpp's server and
  llama-cpp-python 0.3 (which returns nothing when ``top_logprobs`` is unset or 0);
- completions (``/v1/completions``): ``logprobs: 1`` answered in ``choices[0].logprobs.tokens``
  (vLLM, SGLang, llama-cpp-python); llama.cpp's own server answers in the chat shape,
  ``logprobs.content[i].token``, which is read as well.

A server that sends no per-token output (a proxy that drops ``logprobs``) is still judged:
then the text is compared character by character, every prompt's ``token_source`` says
``characters`` and a warning says why. One source for the whole result, never a mix, so the
two runs a comparison reads count the same unit.

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)`` returns the result or
raises ModuleFailure with the outputs read so far. It only sends requests, so ``changes`` is
always empty and check mode asks the same prompts (as inference_benchmark measures).
"""

from __future__ import annotations

import hashlib

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import numbers
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import health
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import openai_http
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import Endpoint, ServingError

# The long-context prompt: a distinctive first sentence, then a passage repeated to about
# 1.5k characters, then a question about the first sentence, so the answer depends on
# attention over the whole context (where a KV-cache or attention change shows first).
_LONG_START = "The first line of this maintenance log says: the spare key of rack 14 is kept in the blue box. "
_LONG_PASSAGE = ("Node seven was checked again today; fans, power supplies and cables were inspected "
                 "and nothing unusual was found. ")
LONG_PROMPT = (_LONG_START + _LONG_PASSAGE * 11
               + "\n\nQuestion: according to the first line of the log above, where is the spare key of rack 14 kept?")

# The built-in prompts: short and fixed, of different kinds, so a change that breaks one kind
# of output (digits, code indentation, non-English text, long context) shows. Data, not code:
# the option ``prompts`` replaces them.
DEFAULT_PROMPTS = (
    "What is the capital of France? Answer in one sentence.",
    "What is 17 multiplied by 23? Show the steps, then give the result.",
    "Write a Python function that returns the n-th Fibonacci number, computed iteratively.",
    "List five prime numbers greater than 50, separated by commas.",
    "Translate into German: \"The server restarts at midnight, and the backup runs one hour later.\"",
    "Extract the name and the age from this sentence as a JSON object with the keys \"name\" and \"age\": "
    "Maria Lopez turned 34 last week.",
    "A train leaves at 14:05 and arrives at 16:50. How long is the journey? Explain briefly.",
    LONG_PROMPT,
)

ARGUMENT_SPEC = dict(
    url=dict(type="str", required=True),
    model=dict(type="str"),
    endpoint=dict(type="str", default="chat", choices=["chat", "completions"]),
    prompts=dict(type="list", elements="str"),
    # no_log=False: "tokens" here is a length, not a credential (validate-modules asks).
    max_tokens=dict(type="int", default=48, no_log=False),
    seed=dict(type="int", default=0),
    extra_body=dict(type="dict", default={}),
    timeout_s=dict(type="float", default=120.0),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
)

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
MAX_TOKENS = (1, 65536)
# llama.cpp takes a 32-bit seed; vLLM and SGLang take larger ones. The common range.
SEED = (0, 4294967295)
MAX_PROMPTS = 1000
MAX_PROMPT_CHARS = 1000000
TIMEOUT = (0.0, 86400.0, True)
# What the guard sets itself: greedy decoding, one answer, per-token output, the prompt.
RESERVED_BODY = ("stream", "model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature",
                 "top_p", "n", "seed", "logprobs", "top_logprobs")
PROMPT_SHOWN = 80
TOKEN_SOURCES = ("logprobs", "characters")


def _whole(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ModuleFailure("%s=%r is out of range: give a whole number from %d to %d" % (name, value, low, high))
    return value


def validate(params):
    """Every option checked before a request is sent; returns the full params and the Endpoint."""
    params = with_defaults(ARGUMENT_SPEC, params)
    _whole("max_tokens", params["max_tokens"], *MAX_TOKENS)
    _whole("seed", params["seed"], *SEED)
    try:
        numbers.finite_options(params, {"timeout_s": TIMEOUT}, optional=False)
    except numbers.NumberError as exc:
        raise ModuleFailure(str(exc))
    if params["endpoint"] not in PATHS:
        raise ModuleFailure("endpoint=%r: give one of %s" % (params["endpoint"], ", ".join(sorted(PATHS))))
    if params["model"] is not None and (not isinstance(params["model"], str) or not params["model"].strip()):
        raise ModuleFailure("model=%r is empty: give the model id to ask, or leave it out for the first one "
                            "/v1/models lists" % (params["model"],))
    params["prompts"] = _prompts(params["prompts"])
    extra = params["extra_body"]
    if not isinstance(extra, dict):
        raise ModuleFailure("extra_body=%r is not a dict of request fields" % (extra,))
    bad = sorted(key for key in extra if key in RESERVED_BODY)
    if bad:
        raise ModuleFailure("extra_body sets %s, which the accuracy check sets itself (greedy decoding, one answer, "
                            "per-token output; use the options max_tokens and seed)" % ", ".join(bad))
    try:
        endpoint = Endpoint(params["url"], params["api_key"], params["validate_certs"])
    except ValueError as exc:
        raise ModuleFailure(str(exc))
    return params, endpoint


def _prompts(prompts):
    """The prompts to send: the built-in ones when unset, else the list, each checked."""
    if prompts is None:
        return list(DEFAULT_PROMPTS)
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise ModuleFailure("prompts=%r: give a non-empty list of prompt texts, or leave it out for the built-in ones"
                            % (prompts,))
    if len(prompts) > MAX_PROMPTS:
        raise ModuleFailure("prompts has %d entries: give at most %d" % (len(prompts), MAX_PROMPTS))
    for index, prompt in enumerate(prompts):
        if not isinstance(prompt, str) or not prompt.strip():
            raise ModuleFailure("prompts[%d]=%r is not a prompt: give non-empty text" % (index, prompt))
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ModuleFailure("prompts[%d] has %d characters: give at most %d" % (index, len(prompt), MAX_PROMPT_CHARS))
    return list(prompts)


def request_body(kind, model, prompt, params):
    """The body of one greedy request for ``prompt`` to the ``kind`` endpoint."""
    body = dict(params["extra_body"])
    body.update({"model": model, "stream": False, "max_tokens": params["max_tokens"], "temperature": 0.0,
                 "top_p": 1.0, "n": 1, "seed": params["seed"]})
    if kind == "chat":
        body.update(messages=[{"role": "user", "content": prompt}], logprobs=True, top_logprobs=1)
    else:
        body.update(prompt=prompt, logprobs=1)
    return body


def _content_tokens(logprobs):
    """The token strings of a ``logprobs.content`` list (chat shape); None when it is not one."""
    content = logprobs.get("content")
    if not isinstance(content, list):
        return None
    tokens = [item.get("token") if isinstance(item, dict) else None for item in content]
    return tokens if all(isinstance(token, str) for token in tokens) else None


def tokens_from_logprobs(kind, choice):
    """The output's token strings from a choice's ``logprobs``, or None when it carries none.

    Chat: ``logprobs.content[i].token``. Completions: ``logprobs.tokens`` (the OpenAI legacy
    shape), else ``logprobs.content[i].token`` (llama.cpp's server)."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    if kind == "completions":
        tokens = logprobs.get("tokens")
        if isinstance(tokens, list) and all(isinstance(token, str) for token in tokens):
            return list(tokens)
    return _content_tokens(logprobs)


def choice_text(kind, choice):
    """The output text of a choice: ``message.content`` (after any ``reasoning_content`` a
    reasoning parser split off, so a thinking model's whole output is compared) or ``text``."""
    if kind == "chat":
        message = choice.get("message")
        if not isinstance(message, dict):
            return None
        parts = [message.get(key) for key in ("reasoning_content", "reasoning", "content")]
        if not any(isinstance(part, str) for part in parts):
            return None
        return "".join(part for part in parts if isinstance(part, str))
    text = choice.get("text")
    return text if isinstance(text, str) else None


def ask(endpoint, kind, model, prompt, params):
    """One greedy request; returns ``(text, logprob tokens or None, finish_reason)``. Raises
    ServingError naming the URL and what came back."""
    path = PATHS[kind]
    status, data = openai_http.request(endpoint, "POST", path, request_body(kind, model, prompt, params),
                                       timeout=params["timeout_s"])
    if status >= 400:
        raise openai_http.http_failure(endpoint, path, status, data)
    answer = openai_http.json_body(endpoint, path, status, data)
    url = endpoint.url(path)
    if isinstance(answer, dict) and answer.get("error") and not answer.get("choices"):
        error = answer["error"]
        detail = error.get("message", error) if isinstance(error, dict) else error
        raise ServingError("http", "%s answered %s with an error: %s" % (url, status, openai_http.snippet(str(detail))),
                           status)
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ServingError("bad_json", "%s answered %s without a choice: %r" % (url, status, openai_http.snippet(data)),
                           status)
    choice = choices[0]
    text = choice_text(kind, choice)
    if text is None:
        raise ServingError("bad_json", "%s answered %s without the output text (%s): %r"
                           % (url, status, "choices[0].message.content" if kind == "chat" else "choices[0].text",
                              openai_http.snippet(data)), status)
    finish = choice.get("finish_reason")
    return text, tokens_from_logprobs(kind, choice), finish if isinstance(finish, str) else None


def shown_prompt(prompt):
    """The start of a prompt as it goes into a result: its first 80 characters."""
    return prompt[:PROMPT_SHOWN]


def prompt_digest(prompt):
    """sha256 of the whole prompt, so a comparison tells two prompts apart beyond their start."""
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()


def _model(endpoint, params):
    """The model to ask: the one given (checked against /v1/models where it lists any) or the
    first /v1/models lists."""
    timeout = min(10.0, params["timeout_s"])
    try:
        listed = health.list_models(endpoint, timeout)
    except ServingError as exc:
        if params["model"] and exc.kind == "http" and exc.status == 404:
            return params["model"]  # no model list to check the name against
        if params["model"]:
            raise ModuleFailure("the models of %s cannot be listed: %s" % (endpoint.base, exc.message))
        raise ModuleFailure("model is not set and the models cannot be listed: %s" % exc.message)
    if params["model"]:
        if listed and params["model"] not in listed:
            raise ModuleFailure("model=%r is not served at %s, which lists %s"
                                % (params["model"], endpoint.url("/v1/models"), ", ".join(listed)))
        return params["model"]
    if not listed:
        raise ModuleFailure("model is not set and %s lists no model; set model" % endpoint.url("/v1/models"))
    return listed[0]


def run(params, check_mode=False, paths=None, tools=None):
    """Ask every prompt once; return the module result or raise ModuleFailure. Read-only."""
    params, endpoint = validate(params)
    kind = params["endpoint"]
    result = {"changed": False, "changes": [], "url": endpoint.base, "endpoint": kind,
              "max_tokens": params["max_tokens"], "seed": params["seed"], "warnings": []}
    model = _model(endpoint, params)
    result["model"] = model
    asked = []
    for index, prompt in enumerate(params["prompts"]):
        try:
            text, tokens, finish = ask(endpoint, kind, model, prompt, params)
        except ServingError as exc:
            result["outputs"] = finish_outputs(asked, result["warnings"])[0]
            url = endpoint.url(PATHS[kind])
            raise ModuleFailure("prompt %d of %d (%r) failed: %s%s"
                                % (index, len(params["prompts"]), shown_prompt(prompt)[:40],
                                   "" if url in exc.message else "%s: " % url, exc.message), result)
        asked.append({"index": index, "prompt": shown_prompt(prompt), "prompt_sha256": prompt_digest(prompt),
                      "text": text, "logprob_tokens": tokens, "finish_reason": finish})
    outputs, source = finish_outputs(asked, result["warnings"])
    result.update(outputs=outputs, token_source=source)
    longer = [item["index"] for item in outputs if source == "logprobs" and len(item["tokens"]) > params["max_tokens"]]
    if longer:
        result["warnings"].append("the server answered prompt%s %s with more than max_tokens=%d tokens: it does not "
                                  "honour max_tokens" % ("" if len(longer) == 1 else "s",
                                                         ", ".join(str(i) for i in longer), params["max_tokens"]))
    return result


def finish_outputs(asked, warnings):
    """The outputs with their tokens, and the one token source of them all.

    ``logprobs`` when every output that has text came with its tokens; otherwise every output
    is split into characters (a mix would compare tokens of one prompt with characters of
    another run's) and a warning names the prompts without tokens. An empty output has no
    tokens either way and decides nothing."""
    missing = [item["index"] for item in asked if item["text"] and not item["logprob_tokens"]]
    source = "characters" if missing else "logprobs"
    if missing:
        warnings.append("the server sent no per-token output (logprobs) for prompt%s %s: every output is compared "
                        "character by character (token_source: characters)"
                        % ("" if len(missing) == 1 else "s", ", ".join(str(i) for i in missing)))
    outputs = []
    for item in asked:
        tokens = list(item["text"]) if source == "characters" else list(item["logprob_tokens"] or [])
        outputs.append({"index": item["index"], "prompt": item["prompt"], "prompt_sha256": item["prompt_sha256"],
                        "text": item["text"], "tokens": tokens, "finish_reason": item["finish_reason"],
                        "token_source": source})
    return outputs, source
