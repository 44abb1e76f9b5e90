# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Synthetic requests and the streams that time them.

Prompts: words drawn from a fixed list of short common words, each one token in the byte-level
BPE and SentencePiece vocabularies of the usual model families, seeded per request so no two
requests share a prefix (a server's prefix cache would otherwise answer the second request's
prompt for free and shorten its time to first token). When the server can count tokens
(``/tokenize`` of vLLM and llama.cpp, ``/extras/tokenize`` of llama-cpp-python), the word count
is corrected until the prompt has the set length; otherwise the word count is the estimate and
the result says so.

Output length: ``max_tokens`` (not ``max_completion_tokens``, which some servers ignore), and
with ``ignore_eos`` both ``ignore_eos`` (vLLM, SGLang, llama.cpp) and ``min_tokens`` (vLLM,
llama-cpp-python) so the model cannot stop early; a server that still stops early is reported,
not hidden. Tokens are counted as streamed (one per event with text) and compared with the
server's ``usage`` where it sends one (``stream_options.include_usage``).
"""

from __future__ import annotations

import json
import random
import threading
import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import openai_http
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import ServingError

WORDS = (
    "the of and to in is it that was for on are as with his they at be this from have or by one had "
    "not but what all were when we there can an your which their said if do will each about how up out "
    "them then she many some so these would other into has more her two like him see time could no make "
    "than first been its who now people my made over did down only way find use may water long little "
    "very after words called just where most know get through back much go good new write our me man "
    "too any day same right look think also around another came come work three word must because does "
    "part even place well such here take why things help put years different away again off went old "
    "number great tell men say small every found still between name should home big give air line set "
    "own under read last never us left end along while might next sound below saw something thought both "
    "few those always looked show large often together asked house world going want school important until "
    "form food keep children feet land side without boy once animals life enough took sometimes four head "
    "above kind began almost live page got earth need far hand high year mother light parts country father"
).split()

# Ways servers count tokens, tried in order: (path, body maker, reader of the count).
TOKENIZERS = (
    ("/tokenize", lambda model, text: {"model": model, "prompt": text, "add_special_tokens": False},
     lambda answer: answer.get("count") if isinstance(answer.get("count"), int) else _length(answer.get("tokens"))),
    ("/extras/tokenize", lambda model, text: {"model": model, "input": text},
     lambda answer: _length(answer.get("tokens"))),
    ("/tokenize", lambda model, text: {"content": text},
     lambda answer: _length(answer.get("tokens"))),
)


def _length(value):
    return len(value) if isinstance(value, list) else None


def prompt_words(count, seed):
    """``count`` words, the same for the same seed."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _word in range(max(1, count)))


class TokenCounter:
    """Counts a text's tokens with the server's own tokenizer, or says it cannot."""

    def __init__(self, endpoint, model, timeout):
        self.endpoint = endpoint
        self.model = model
        self.timeout = timeout
        self.way = None
        self.tried = False

    def count(self, text):
        if self.tried and self.way is None:
            return None
        ways = [self.way] if self.way else TOKENIZERS
        for way in ways:
            path, make, read = way
            try:
                status, data = openai_http.request(self.endpoint, "POST", path, make(self.model, text), self.timeout)
                answer = json.loads(data.decode("utf-8")) if status == 200 else None
            except (ServingError, ValueError, UnicodeDecodeError):
                answer = None
            counted = read(answer) if isinstance(answer, dict) else None
            if isinstance(counted, int) and counted > 0:
                self.way = way
                self.tried = True
                return counted
        self.tried = True
        return None

    @property
    def source(self):
        return "server %s" % self.way[0] if self.way else None


def calibrated_words(counter, target, seed):
    """The word count whose prompt has ``target`` tokens by the server's count (three
    corrections at most), and the count reached; ``(target, None)`` without a tokenizer."""
    words = target
    measured = counter.count(prompt_words(words, seed))
    if measured is None:
        return target, None
    for _attempt in range(3):
        if measured == target:
            return words, measured
        words = max(1, int(round(words * float(target) / measured)))
        measured = counter.count(prompt_words(words, seed))
        if measured is None:
            return words, None
    # Words of several tokens leave the proportion a few tokens off: walk one word at a time
    # towards the target and keep the closest count seen.
    best = (abs(measured - target), words, measured)
    step = 1 if measured < target else -1
    for _step in range(8):
        if measured == target or words + step < 1:
            break
        words += step
        measured = counter.count(prompt_words(words, seed))
        if measured is None:
            break
        best = min(best, (abs(measured - target), words, measured))
        if (measured - target) * step > 0:
            break
    return best[1], best[2]


class Workload:
    """The request bodies of one benchmark: endpoint kind, model, lengths, extra fields."""

    def __init__(self, endpoint_kind, model, words, output_tokens, ignore_eos, extra_body, seed):
        self.kind = endpoint_kind
        self.model = model
        self.words = words
        self.output_tokens = output_tokens
        self.ignore_eos = ignore_eos
        self.extra_body = dict(extra_body or {})
        self.seed = seed

    @property
    def path(self):
        return "/v1/chat/completions" if self.kind == "chat" else "/v1/completions"

    def body(self, index):
        prompt = prompt_words(self.words, self.seed * 1000003 + index)
        body = {"model": self.model, "stream": True, "max_tokens": self.output_tokens, "temperature": 0.0,
                "stream_options": {"include_usage": True}}
        if self.kind == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if self.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = self.output_tokens
        body.update(self.extra_body)
        return body


def _event_text(event):
    """(text of the first choice, finish_reason) of a stream event; text None when it has none."""
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, None
    choice = choices[0]
    delta = choice.get("delta")
    text = None
    if isinstance(delta, dict):
        text = "".join(part for part in (delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning"))
                       if isinstance(part, str)) or None
    elif isinstance(choice.get("text"), str):
        text = choice["text"] or None
    return text, choice.get("finish_reason")


def one_request(endpoint, workload, index, timeout, clock=time.perf_counter):
    """Send request ``index`` and time its stream. Returns the record: ``ttft``, ``e2e`` and
    ``gaps`` (seconds), ``output_tokens`` (usage when the server sent it, else the streamed
    count), ``streamed_tokens``, ``usage_tokens``, ``finish_reason``; raises ServingError."""
    cap = workload.output_tokens
    seen = {"times": [], "finish": None, "usage": None, "over": False}

    def on_event(event, at):
        text, finish = _event_text(event)
        if text is not None:
            seen["times"].append(at)
        if finish:
            seen["finish"] = finish
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            seen["usage"] = usage["completion_tokens"]
        # More than twice what was asked (and a margin): stop reading, the server ignores the limit.
        if len(seen["times"]) > 2 * cap + 16:
            seen["over"] = True
            return True
        return False

    sent, done = openai_http.stream(endpoint, workload.path, workload.body(index), timeout, on_event, clock)
    end = clock()
    times = seen["times"]
    streamed = len(times)
    url = endpoint.url(workload.path)
    if seen["over"] or streamed > cap or (seen["usage"] is not None and seen["usage"] > cap):
        raise ServingError("max_tokens", "%s ignored max_tokens: asked for at most %d tokens, it streamed %s%s"
                           % (url, cap, "more than %d and kept going" % (2 * cap + 16) if seen["over"] else streamed,
                              "" if seen["usage"] is None else " (its usage says %d)" % seen["usage"]))
    if not done and seen["finish"] is None:
        raise ServingError("cut", "%s ended the stream after %d token%s without a finish reason or [DONE]: "
                           "the stream was cut" % (url, streamed, "" if streamed == 1 else "s"))
    if streamed == 0:
        raise ServingError("cut", "%s streamed no token (finish reason %r)" % (url, seen["finish"]))
    return {
        "index": index,
        "ttft": times[0] - sent,
        "e2e": end - sent,
        "gaps": [b - a for a, b in zip(times, times[1:])],
        "output_tokens": seen["usage"] if seen["usage"] is not None else streamed,
        "streamed_tokens": streamed,
        "usage_tokens": seen["usage"],
        "finish_reason": seen["finish"],
        "error": None,
    }


def run_level(endpoint, workload, requests, concurrency, timeout, first_index=0, clock=time.perf_counter):
    """``requests`` requests, ``concurrency`` in flight at a time (one thread each). Returns
    (records, wall seconds); a failed request is a record with ``error`` (kind, message)."""
    lock = threading.Lock()
    queue = list(range(first_index, first_index + requests))
    records = []

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                index = queue.pop(0)
            try:
                record = one_request(endpoint, workload, index, timeout, clock)
            except ServingError as exc:
                record = {"index": index, "error": {"kind": exc.kind, "message": exc.message, "status": exc.status}}
            with lock:
                records.append(record)

    threads = [threading.Thread(target=worker, daemon=True) for _worker in range(min(concurrency, requests))]
    start = clock()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = clock() - start
    records.sort(key=lambda r: r["index"])
    return records, wall
