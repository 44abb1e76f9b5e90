# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in model server for the GPU hosts of the molecule scenario ``fleet``.

An OpenAI-compatible HTTP server from the Python standard library alone, streaming as vLLM and
llama.cpp's server do, at a speed this host's config sets: so the collection's serving check
and inference benchmark (gpufleet.tuning.serving_health, gpufleet.tuning.inference_benchmark)
run on every GPU host of the fleet, and a test can make one host slower than its peers. No
model behind it: the "tokens" are words, one per whitespace-separated word of a prompt, and the
answer is words drawn from a fixed list, the same for the same prompt.

Run by fleet-openai.service (molecule/fleet/molecule.yml mounts both read-only, create.yml
enables it) on 127.0.0.1:8000:

    python3 fleet-openai.py [--host 127.0.0.1] [--port 8000] [--config /etc/gpufleet/fake-serving.conf]

Endpoints:

- ``GET /health``: 200 ``{"status": "ok"}`` (llama.cpp's answer; vLLM's is 200 with no body).
- ``GET /v1/models``: one model, ``fleet-model``.
- ``POST /v1/chat/completions`` and ``POST /v1/completions``: with ``"stream": true``, server-sent
  events as vLLM sends them: one token per event (a chat stream's first event also carries
  ``"role": "assistant"``), the last token's event with its ``finish_reason`` (``length`` at
  ``max_tokens``, ``stop`` at the model's own end), then with ``stream_options.include_usage``
  a last event with no choices and the ``usage`` (every event before it has ``"usage": null``),
  then ``data: [DONE]``. Without ``stream``, one JSON answer when all tokens are made.
  ``max_tokens`` (or ``max_completion_tokens``; 16 when neither is given) caps the answer; the
  model ends on its own after ``eos_after`` tokens unless ``ignore_eos`` is true, and not before
  ``min_tokens``. A ``model`` other than ``fleet-model`` is refused with 404, a malformed
  request with 400, as vLLM does.
- ``POST /tokenize``: vLLM's form (``prompt`` or ``messages``: ``{"count", "max_model_len",
  "tokens"}``) and llama.cpp's (``content``: ``{"tokens"}``), so the benchmark's prompts get
  their set length.

Speed: the config file (default /etc/gpufleet/fake-serving.conf, the host's read-only
/etc/gpufleet that scripts/harness/fleet serve-rate writes), read again at every request, so a
change applies to the next request without a restart. ``KEY=VALUE`` lines, ``#`` comments:

    tokens_per_s    decode speed of each stream, tokens per second (default 500)
    first_token_ms  time from the request to the first token, milliseconds (default 20)
    eos_after       tokens after which the model ends its answer on its own (default 256)

No file: the defaults. A line it cannot read is said once on stderr (the journal) and its key
keeps its default. Token k of a stream (from 0) is sent at first_token_ms + k / tokens_per_s
after the request came, whatever the time spent writing, so a client measures the set speed;
every stream has that speed whatever the others do (no batching: a host's speed does not fall
with concurrency).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fleet-model"
MAX_MODEL_LEN = 32768
DEFAULT_CONFIG = "/etc/gpufleet/fake-serving.conf"
# key: (default, lowest, highest, lowest allowed itself)
SETTINGS = {
    "tokens_per_s": (500.0, 0.0, 1e6, False),
    "first_token_ms": (20.0, 0.0, 600000.0, True),
    "eos_after": (256, 1, MAX_MODEL_LEN, True),
}
# OpenAI's default for /v1/completions when max_tokens is not given.
DEFAULT_MAX_TOKENS = 16
# The answer's words (each one token here).
VOCABULARY = (
    "the of and to in is it that was for on are as with they at be this from have or by one had not but what "
    "all were when we there can an your which their said if do will each about how up out them then she many "
    "some so these would other into has more two like see time could no make than first been its who now"
).split()


class Config:
    """The speed settings, read from the file at each request; problems said once per content."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.said = None

    def read(self):
        values = dict((key, spec[0]) for key, spec in SETTINGS.items())
        try:
            with open(self.path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return values
        except OSError as exc:
            self.say(str(exc), ["cannot read %s: %s; defaults apply" % (self.path, exc.strerror)])
            return values
        problems = []
        for number, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            key, sep, value = (part.strip() for part in line.partition("="))
            if not sep or key not in SETTINGS:
                problems.append("line %d: %r is not one of %s=VALUE" % (number, line, "|".join(SETTINGS)))
                continue
            default, low, high, low_ok = SETTINGS[key]
            try:
                parsed = int(value) if isinstance(default, int) else float(value)
            except ValueError:
                parsed = None
            # (NaN fails both comparisons: refused too)
            if parsed is None or not (low < parsed or (low_ok and parsed == low)) or not parsed <= high:
                problems.append("line %d: %s=%r is not a number from %g%s to %g; %g applies"
                                % (number, key, value, low, "" if low_ok else " (excluded)", high, default))
                continue
            values[key] = parsed
        self.say(text, problems)
        return values

    def say(self, content, problems):
        """Each problem once for one content of the file, not at every request."""
        with self.lock:
            if self.said == content:
                return
            self.said = content
        for problem in problems:
            sys.stderr.write("fleet-openai: %s: %s\n" % (self.path, problem))
        sys.stderr.flush()


def words_of(value):
    """The whitespace-separated words of a prompt (a string, a list of strings) or of chat
    messages (their string contents, or the text parts of a content list)."""
    if isinstance(value, str):
        return value.split()
    out = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                content = item.get("content", item.get("text"))
                if isinstance(content, list):
                    content = " ".join(part.get("text", "") for part in content
                                       if isinstance(part, dict) and isinstance(part.get("text"), str))
                out += words_of(content if isinstance(content, str) else "")
            else:
                out += words_of(item)
    return out


def token_ids(words):
    return [zlib.crc32(word.encode("utf-8")) % 32000 for word in words]


class BadRequest(Exception):
    def __init__(self, status, message, kind="BadRequestError"):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fleet-openai/1"

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        """No line per request: a benchmark sends hundreds."""

    def send_json(self, status, payload):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, status, message, kind):
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": status}})

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self.send_json(200, {"status": "ok"})
        if path in ("/v1/models", "/models"):
            return self.send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": int(self.server.started), "owned_by": "gpufleet",
                 "root": MODEL, "max_model_len": MAX_MODEL_LEN}]})
        return self.send_error_json(404, "Not Found: GET %s" % path, "NotFoundError")

    def do_POST(self):  # noqa: N802
        path = self.path.split("?", 1)[0]
        try:
            body = self.read_body()
            if path == "/tokenize":
                return self.tokenize(body)
            if path in ("/v1/chat/completions", "/v1/completions"):
                return self.complete(body, chat=path == "/v1/chat/completions")
            raise BadRequest(404, "Not Found: POST %s" % path, "NotFoundError")
        except BadRequest as exc:
            return self.send_error_json(exc.status, exc.message, exc.kind)

    def read_body(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > 16 << 20:
            self.close_connection = True
            raise BadRequest(400, "a JSON body with a Content-Length up to 16 MiB is needed")
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8") or "{}")
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadRequest(400, "the body is not JSON: %s" % exc)
        if not isinstance(body, dict):
            raise BadRequest(400, "the body is not a JSON object")
        return body

    def tokenize(self, body):
        if "content" in body and "prompt" not in body and "messages" not in body:  # llama.cpp
            return self.send_json(200, {"tokens": token_ids(words_of(body.get("content")))})
        ids = token_ids(words_of(body["messages"] if "messages" in body else body.get("prompt", "")))
        return self.send_json(200, {"count": len(ids), "max_model_len": MAX_MODEL_LEN, "tokens": ids})

    def complete(self, body, chat):
        received = time.monotonic()
        settings = self.server.config.read()
        model = body.get("model", MODEL)
        if model != MODEL:
            raise BadRequest(404, "The model `%s` does not exist." % model, "NotFoundError")
        if chat:
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                raise BadRequest(400, "messages: a non-empty list is required")
            prompt = words_of(body["messages"])
        else:
            if not isinstance(body.get("prompt"), (str, list)):
                raise BadRequest(400, "prompt: a string or a list of strings is required")
            prompt = words_of(body["prompt"])
        count, finish = self.answer_length(body, len(prompt), settings["eos_after"])
        options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
        job = {
            "chat": chat, "count": count, "finish": finish, "prompt_tokens": len(prompt),
            "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
            "created": int(time.time()),
            "seed": zlib.crc32(" ".join(prompt).encode("utf-8")),
            "usage": bool(options.get("include_usage")),
            # when each token goes out: the first after first_token_ms, then one every 1/rate s
            "first": received + settings["first_token_ms"] / 1000.0,
            "gap": 1.0 / settings["tokens_per_s"],
        }
        if body.get("stream") is True:
            return self.stream(job)
        return self.whole(job)

    @staticmethod
    def answer_length(body, prompt_tokens, eos_after):
        """(tokens to send, finish reason) from max_tokens, ignore_eos, min_tokens and eos_after."""
        cap = body.get("max_tokens", body.get("max_completion_tokens"))
        if cap is None:
            cap = DEFAULT_MAX_TOKENS
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise BadRequest(400, "max_tokens=%r: a whole number of at least 1 is required" % (cap,))
        if prompt_tokens + cap > MAX_MODEL_LEN:
            raise BadRequest(400, "This model's maximum context length is %d tokens. However, you requested %d tokens "
                                  "(%d in the messages, %d in the completion)."
                             % (MAX_MODEL_LEN, prompt_tokens + cap, prompt_tokens, cap))
        least = body.get("min_tokens") or 0
        if isinstance(least, bool) or not isinstance(least, int) or least < 0:
            raise BadRequest(400, "min_tokens=%r: a whole number of at least 0 is required" % (least,))
        if body.get("ignore_eos") is True:
            return cap, "length"
        # The model's own end of answer, not before min_tokens, never past max_tokens.
        count = min(cap, max(eos_after, least))
        return count, "length" if count == cap else "stop"

    def token(self, job, index):
        return " " + VOCABULARY[(job["seed"] + index * 7919) % len(VOCABULARY)]

    def wait_for(self, job, index):
        delay = job["first"] + index * job["gap"] - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def usage(self, job):
        return {"prompt_tokens": job["prompt_tokens"], "completion_tokens": job["count"],
                "total_tokens": job["prompt_tokens"] + job["count"]}

    def stream(self, job):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        head = {"id": job["id"], "object": "chat.completion.chunk" if job["chat"] else "text_completion",
                "created": job["created"], "model": MODEL}
        try:
            for index in range(job["count"]):
                finish = job["finish"] if index == job["count"] - 1 else None
                text = self.token(job, index)
                if job["chat"]:
                    delta = {"role": "assistant", "content": text} if index == 0 else {"content": text}
                    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                else:
                    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
                event = dict(head, choices=[choice])
                if job["usage"]:
                    event["usage"] = None
                self.wait_for(job, index)
                self.event(event)
            if job["usage"]:
                self.event(dict(head, choices=[], usage=self.usage(job)))
            self.chunk(b"data: [DONE]\n\n")
            self.chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading: normal for a benchmark

    def event(self, payload):
        self.chunk(b"data: " + json.dumps(payload, separators=(",", ":")).encode("utf-8") + b"\n\n")

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def whole(self, job):
        self.wait_for(job, job["count"] - 1)
        text = "".join(self.token(job, index) for index in range(job["count"]))
        if job["chat"]:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                      "finish_reason": job["finish"]}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": job["finish"], "stop_reason": None}
        self.send_json(200, {"id": job["id"], "object": "chat.completion" if job["chat"] else "text_completion",
                             "created": job["created"], "model": MODEL, "choices": [choice], "usage": self.usage(job)})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, config):
        super().__init__(address, Handler)
        self.config = config
        self.started = time.time()

    def handle_error(self, request, client_address):
        """A client gone mid-answer is normal; anything else is said on stderr."""
        kind = sys.exc_info()[0]
        if kind is not None and issubclass(kind, (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    args = parser.parse_args(argv)
    server = Server((args.host, args.port), Config(args.config))
    sys.stderr.write("fleet-openai: serving %s on http://%s:%d (speed from %s)\n"
                     % (MODEL, args.host, args.port, args.config))
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
