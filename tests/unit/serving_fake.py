"""A small OpenAI-compatible HTTP server whose faults a test sets: the error paths a real server
will not produce on demand (5xx, a stream cut mid-way, invalid JSON, a server that ignores
max_tokens, slow readiness, an empty or missing /health).

It listens on 127.0.0.1 on a free port in a thread. ``FakeServer.behaviour`` is a dict the test
changes between requests; the keys are documented on ``DEFAULTS``. Tokens are the words
``tok0 tok1 ...``, one per stream event, sent with ``token_delay`` seconds between them.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULTS = {
    "health": "ok",          # ok (200 JSON) | empty (200, no body) | 404 | 503 | close (drop the connection)
    "models": ["fake-model"],  # the ids /v1/models lists; None answers 404
    "ready_after": 0.0,      # seconds after start before /health and /v1/models answer as above (503 before)
    "stream": "ok",          # ok | http500 | cut | bad_json | error_event | ignore_max_tokens | stop_early
    "cut_after": 3,          # tokens sent before a cut, an invalid chunk, an error event or an early stop
    "token_delay": 0.0,      # seconds between tokens
    "first_delay": 0.0,      # seconds before the first token
    "usage": False,          # send a final usage event (completion_tokens = usage_factor x streamed)
    "usage_factor": 1,       # tokens per event (events = max_tokens / factor; usage says all tokens)
    "tokenize": "words",     # words (one token per word at /tokenize) | none (404) | double (2 per word)
    "sse_comments": False,   # interleave ": ping" comments and blank lines
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest output clean
        pass

    @property
    def fake(self):
        return self.server.fake

    def _send(self, status, body=b"", content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status, payload):
        self._send(status, json.dumps(payload).encode())

    def _ready(self):
        return time.monotonic() - self.fake.started >= self.fake.behaviour["ready_after"]

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.fake.seen.append(("GET", self.path, None))
        b = self.fake.behaviour
        if self.path == "/health":
            if not self._ready():
                return self._json(503, {"error": {"message": "Loading model", "code": 503}})
            if b["health"] == "ok":
                return self._json(200, {"status": "ok"})
            if b["health"] == "empty":
                return self._send(200, b"")
            if b["health"] == "close":
                self.close_connection = True
                self.wfile.flush()
                return self.connection.shutdown(2)
            return self._json(int(b["health"]), {"detail": "Not Found" if b["health"] == "404" else "unavailable"})
        if self.path == "/v1/models":
            if not self._ready():
                return self._json(503, {"error": "loading"})
            if b["models"] is None:
                return self._json(404, {"detail": "Not Found"})
            return self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in b["models"]]})
        return self._json(404, {"detail": "Not Found"})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.fake.seen.append(("POST", self.path, body))
        b = self.fake.behaviour
        if self.path == "/tokenize":
            if b["tokenize"] == "none":
                return self._json(404, {"detail": "Not Found"})
            words = len(str(body.get("prompt", body.get("content", ""))).split())
            count = words * (2 if b["tokenize"] == "double" else 1)
            return self._json(200, {"count": count, "tokens": list(range(count))})
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            return self._json(404, {"detail": "Not Found"})
        if b["stream"] == "http500":
            return self._json(500, {"error": {"message": "CUDA error: an illegal memory access was encountered"}})
        self._stream(body, chat=self.path.endswith("chat/completions"))

    def _event(self, payload):
        text = payload if isinstance(payload, bytes) else b"data: " + json.dumps(payload).encode()
        self._chunk(text + b"\n\n")
        if self.fake.behaviour["sse_comments"]:
            self._chunk(b": ping\n\n")

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, body, chat):
        b = self.fake.behaviour
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        want = int(body.get("max_tokens") or 16)
        total = want * 3 + 100 if b["stream"] == "ignore_max_tokens" else want
        if b["stream"] == "stop_early":
            total = min(total, b["cut_after"])
        total //= b["usage_factor"]
        time.sleep(b["first_delay"])
        for i in range(total):
            if i and b["token_delay"]:
                time.sleep(b["token_delay"])
            if i == b["cut_after"] and b["stream"] == "cut":
                self.close_connection = True
                return  # no terminating chunk: the client sees the body end short
            if i == b["cut_after"] and b["stream"] == "bad_json":
                self._event(b"data: {\"choices\": [{\"delta\": {\"content\": \"x\"")
                continue
            if i == b["cut_after"] and b["stream"] == "error_event":
                self._event({"error": {"message": "the engine died", "code": 500}})
                self._chunk(b"")
                return
            text = " tok%d" % i
            last = i == total - 1
            finish = ("stop" if b["stream"] == "stop_early" else "length") if last else None
            choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish} if chat else \
                {"index": 0, "text": text, "finish_reason": finish}
            self._event({"id": "x", "object": "chunk", "choices": [choice]})
        if b["usage"]:
            self._event({"id": "x", "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": total * b["usage_factor"]}})
        self._event(b"data: [DONE]")
        self._chunk(b"")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that stops reading (as it must when a server ignores max_tokens) is normal."""


class FakeServer:
    def __init__(self, **behaviour):
        self.behaviour = dict(DEFAULTS, **behaviour)
        self.seen = []
        self.started = time.monotonic()
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
