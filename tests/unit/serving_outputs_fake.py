"""A small OpenAI-compatible server that answers non-streaming completions, for the accuracy
check's engine (serving/outputs.py): the shapes of per-token output each server family sends
and the faults a real server will not produce on demand.

serving_fake.FakeServer only streams (the benchmark's need) and its behaviour is what the
benchmark tests rely on, so this one is apart. It listens on 127.0.0.1 on a free port in a
thread; ``behaviour`` is a dict a test changes between requests (keys on ``DEFAULTS``) and
``seen`` the (method, path, body) of every request.

Output: the words of the prompt (or of the last message) in reverse order, one token each
with a leading space, up to ``max_tokens``; ``finish_reason`` is ``length`` when cut there,
else ``stop``. ``change`` alters it the way a candidate server would.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULTS = {
    "models": ["fake-model"],  # the ids /v1/models lists; None answers 404
    "logprobs": "openai",      # openai (each endpoint's OpenAI shape) | content (completions in the
                               # chat shape, as llama.cpp's server) | none (no logprobs) | null_tokens
    "status": 200,             # HTTP status of completions; >= 400 answers an error body
    "body": "ok",              # ok | bad_json | no_choices | error_object | no_text
    "change": None,            # None | {"prompt_contains": text, "at": token index, "token": new token}
    "reasoning": None,         # chat: text sent as message.reasoning_content before the content
}


def output_tokens(text, max_tokens):
    words = list(reversed(text.split())) or ["empty"]
    tokens = [" " + word for word in words]
    return tokens[:max_tokens], "length" if len(tokens) >= max_tokens else "stop"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest output clean
        pass

    @property
    def fake(self):
        return self.server.fake

    def _send(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status, payload):
        self._send(status, json.dumps(payload).encode())

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.fake.seen.append(("GET", self.path, None))
        if self.path == "/v1/models":
            models = self.fake.behaviour["models"]
            if models is None:
                return self._json(404, {"detail": "Not Found"})
            return self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})
        return self._json(404, {"detail": "Not Found"})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.fake.seen.append(("POST", self.path, body))
        b = self.fake.behaviour
        chat = self.path == "/v1/chat/completions"
        if not chat and self.path != "/v1/completions":
            return self._json(404, {"detail": "Not Found"})
        if b["status"] >= 400:
            return self._json(b["status"], {"error": {"message": "CUDA error: out of memory", "code": b["status"]}})
        if b["body"] == "bad_json":
            return self._send(200, b"<html>proxy error</html>")
        if b["body"] == "no_choices":
            return self._json(200, {"id": "x", "choices": []})
        if b["body"] == "error_object":
            return self._json(200, {"error": {"message": "model is not loaded"}})
        prompt = body["messages"][-1]["content"] if chat else body["prompt"]
        tokens, finish = output_tokens(prompt, int(body.get("max_tokens") or 16))
        change = b["change"]
        if change and change["prompt_contains"] in prompt and change["at"] < len(tokens):
            tokens[change["at"]] = change["token"]
        text = "".join(tokens)
        logprobs = self._logprobs(tokens, chat)
        if chat:
            message = {"role": "assistant", "content": text}
            if b["reasoning"] is not None:
                message["reasoning_content"] = b["reasoning"]
            choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}
        if b["body"] == "no_text":
            choice.pop("message", None)
            choice.pop("text", None)
        self._json(200, {"id": "x", "object": "chat.completion" if chat else "text_completion", "choices": [choice],
                         "usage": {"prompt_tokens": 8, "completion_tokens": len(tokens)}})

    def _logprobs(self, tokens, chat):
        mode = self.fake.behaviour["logprobs"]
        if mode == "none":
            return None
        if mode == "null_tokens":
            return {"content": [{"token": None, "logprob": -0.1} for _token in tokens]}
        content = {"content": [{"token": token, "logprob": -0.1, "bytes": list(token.encode()),
                                "top_logprobs": [{"token": token, "logprob": -0.1}]} for token in tokens]}
        if chat or mode == "content":
            return content
        return {"tokens": list(tokens), "token_logprobs": [-0.1] * len(tokens),
                "top_logprobs": [{token: -0.1} for token in tokens], "text_offset": list(range(len(tokens)))}


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class OutputsServer:
    """The server: ``url``, ``behaviour``, ``seen``; a context manager that stops it."""

    def __init__(self, **behaviour):
        self.behaviour = dict(DEFAULTS, **behaviour)
        self.seen = []
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def posts(self):
        return [body for method, _path, body in self.seen if method == "POST"]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
