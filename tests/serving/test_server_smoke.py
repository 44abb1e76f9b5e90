"""What the rest of the suite relies on in the tiny test server, checked against the real thing.

Standard library HTTP only (http.client, json): the same calls a product client makes, and no
dependency beyond the test venv. See tests/serving/conftest.py for the ``tiny_server`` fixture.
"""

import http.client
import json
import os
import re
import threading
import urllib.parse

import pytest

MAX_TOKENS = 32
# GPT-2's pre-tokenizer regex, ASCII only (the tiny model only says ASCII).
PRETOKEN = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def connect(url, timeout=30):
    """An HTTP connection to the server at url."""
    parsed = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)


def request(url, method, path, body=None):
    """(status, parsed JSON body or raw text) of one request."""
    conn = connect(url)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read().decode("utf-8")
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, data
    finally:
        conn.close()


def stream_events(url, path, body, on_first=None):
    """The parsed server-sent events of a streaming request, up to "[DONE]" (asserted)."""
    conn = connect(url)
    events = []
    try:
        conn.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200, response.read()
        for raw in response:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                return events
            events.append(json.loads(data))
            if on_first and len(events) == 1:
                on_first()
        raise AssertionError(f"the stream ended without [DONE] after {len(events)} events")
    finally:
        conn.close()


def chat_body(model, content="Say something.", tokens=MAX_TOKENS):
    """A chat request for exactly tokens tokens."""
    return {"model": model, "messages": [{"role": "user", "content": content}],
            "max_tokens": tokens, "min_tokens": tokens}


def chat_pieces(events):
    """(content of each chunk that has some, finish reasons seen) of a chat stream."""
    pieces = [e["choices"][0]["delta"].get("content") for e in events if e.get("choices")]
    reasons = [e["choices"][0].get("finish_reason") for e in events if e.get("choices")]
    return [p for p in pieces if p], [r for r in reasons if r]


def completion_pieces(events):
    """(text of each chunk that has some, finish reasons seen) of a completion stream."""
    pieces = [e["choices"][0].get("text") for e in events if e.get("choices")]
    reasons = [e["choices"][0].get("finish_reason") for e in events if e.get("choices")]
    return [p for p in pieces if p], [r for r in reasons if r]


def vocab_ids(model_dir, text):
    """Token ids of text by the tokenizer.json written next to the model (single-token pieces only)."""
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as handle:
        vocab = json.load(handle)["model"]["vocab"]
    assert text.isascii(), text
    # Byte-level BPE writes a space as "Ġ"; the model's pieces are all whole tokens.
    return [vocab[piece.replace(" ", "\u0120")] for piece in PRETOKEN.findall(text)]


def server_ids(server, text):
    """Token ids of text by the server's own tokenizer."""
    status, body = request(server.url, "POST", "/extras/tokenize", {"model": server.model, "input": text})
    assert status == 200, body
    return body["tokens"]


def test_models_lists_tiny(tiny_server):
    status, body = request(tiny_server.url, "GET", "/v1/models")
    assert status == 200
    assert tiny_server.model in [m["id"] for m in body["data"]]


def test_health_is_404(tiny_server):
    """No /health: clients must fall back to /v1/models for readiness."""
    assert request(tiny_server.url, "GET", "/health")[0] == 404


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_stream_runs_to_max_tokens(tiny_server, path):
    """Exactly max_tokens content chunks, finish_reason "length", and re-tokenizing agrees."""
    if path == "/v1/completions":
        body = {"model": tiny_server.model, "prompt": "Once upon a time", "max_tokens": MAX_TOKENS, "min_tokens": MAX_TOKENS}
        pieces, reasons = completion_pieces(stream_events(tiny_server.url, path, body))
    else:
        pieces, reasons = chat_pieces(stream_events(tiny_server.url, path, chat_body(tiny_server.model)))
    assert len(pieces) == MAX_TOKENS, pieces
    assert reasons == ["length"]
    text = "".join(pieces)
    ids = server_ids(tiny_server, text)
    assert len(ids) == MAX_TOKENS, (text, ids)
    assert vocab_ids(tiny_server.model_dir, text) == ids


def test_non_streaming_usage(tiny_server):
    """Usage comes only with non-streaming responses; it counts max_tokens."""
    status, body = request(tiny_server.url, "POST", "/v1/chat/completions", chat_body(tiny_server.model))
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == MAX_TOKENS
    assert body["choices"][0]["finish_reason"] == "length"


def test_second_request_does_not_cut_stream(tiny_server):
    """interrupt_requests is off: a request arriving mid-stream waits instead of cutting it.

    The stream is long (128 tokens, tens of ms) and the second request is sent once the
    first chunk is in, so it reaches the server while the first is still generating.
    """
    long_tokens = 128
    sent = threading.Event()
    second = {}

    def send_second():
        conn = connect(tiny_server.url)
        try:
            conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(tiny_server.model, "Again.")),
                         headers={"Content-Type": "application/json"})
            sent.set()
            response = conn.getresponse()
            second["result"] = (response.status, json.loads(response.read()))
        finally:
            sent.set()
            conn.close()

    worker = threading.Thread(target=send_second)

    def on_first():
        worker.start()
        sent.wait(10)

    events = stream_events(tiny_server.url, "/v1/chat/completions", chat_body(tiny_server.model, tokens=long_tokens), on_first=on_first)
    worker.join(60)
    pieces, reasons = chat_pieces(events)
    assert len(pieces) == long_tokens
    assert reasons == ["length"]
    status, body = second["result"]
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == MAX_TOKENS
