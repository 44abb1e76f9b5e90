# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Talking to an OpenAI-compatible server with the standard library alone.

Why http.client and not urllib: a streamed completion must be read line by line as it arrives,
with the time of each line taken at once (time to first token, gaps between tokens), and a
stream cut mid-way must be told apart from one that ended properly. http.client gives the
response as a file to read lines from and raises IncompleteRead when a chunked body stops short.

Every failure an operator meets becomes a ServingError with a ``kind`` programs can branch on
and a message naming the URL and what came back:

- ``down``: nothing answers (connection refused, no route, name unknown);
- ``timeout``: no answer within the time allowed;
- ``http``: an HTTP status of 400 or more (``status`` holds it; 5xx are the server's fault);
- ``cut``: the stream ended before its end marker or a finish reason;
- ``bad_json``: a stream event or a body that is not JSON;
- ``max_tokens``: the server streamed more tokens than ``max_tokens`` allowed;
- ``stream_error``: the server sent an error object inside the stream.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from urllib.parse import urlsplit

# How much of an error body goes into a message: enough to show the server's words.
BODY_SNIPPET = 300


class ServingError(Exception):
    """A request that failed, with ``kind`` (see the module docstring) and the HTTP status."""

    def __init__(self, kind, message, status=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


def snippet(data):
    """The start of a body or line as one line of text, for a message."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    text = " ".join(str(data).split())
    return text if len(text) <= BODY_SNIPPET else text[:BODY_SNIPPET] + "..."


class Endpoint:
    """A server's base URL (``http://host:port[/prefix]``), checked, and how to connect to it."""

    def __init__(self, url, api_key=None, validate_certs=True):
        if not isinstance(url, str) or not url.strip():
            raise ValueError("url %r is not an http:// or https:// URL" % (url,))
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url %r is not an http:// or https:// URL with a host" % (url,))
        if parts.query or parts.fragment:
            raise ValueError("url %r has a query or fragment; give the server's base URL only" % (url,))
        try:
            port = parts.port
        except ValueError:
            raise ValueError("url %r has a port that is not a number from 1 to 65535" % (url,))
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port or (443 if parts.scheme == "https" else 80)
        prefix = parts.path.rstrip("/")
        # A base given with /v1 (as OpenAI clients take it) is the same server.
        if prefix.endswith("/v1"):
            prefix = prefix[:-3]
        self.prefix = prefix
        self.base = "%s://%s%s" % (self.scheme, parts.netloc, prefix)
        self.api_key = api_key
        self.validate_certs = validate_certs

    def url(self, path):
        return self.base + path

    def connect(self, timeout):
        if self.scheme == "https":
            context = ssl.create_default_context()
            if not self.validate_certs:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def headers(self, body):
        headers = {"Accept": "application/json, text/event-stream"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer %s" % self.api_key
        return headers


def _connection_error(endpoint, path, exc, timeout):
    url = endpoint.url(path)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return ServingError("timeout", "%s did not answer within %g s" % (url, timeout))
    if isinstance(exc, ConnectionRefusedError):
        return ServingError("down", "nothing answers at %s: connection refused (is the server running?)" % url)
    if isinstance(exc, socket.gaierror):
        return ServingError("down", "cannot resolve the host of %s: %s" % (url, exc))
    if isinstance(exc, ssl.SSLError):
        return ServingError("down", "TLS with %s failed: %s" % (url, exc))
    if isinstance(exc, (http.client.IncompleteRead, ConnectionResetError, http.client.RemoteDisconnected)):
        return ServingError("cut", "%s closed the connection before the answer was complete (%s)"
                            % (url, type(exc).__name__))
    return ServingError("down", "%s cannot be reached: %s" % (url, exc))


def request(endpoint, method, path, body=None, timeout=10.0):
    """One plain request; returns ``(status, body bytes)``. Connection failures raise
    ServingError; any HTTP status is returned (the caller decides what a 404 means)."""
    conn = endpoint.connect(timeout)
    try:
        data = None if body is None else json.dumps(body).encode("utf-8")
        conn.request(method, endpoint.prefix + path, body=data, headers=endpoint.headers(body))
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise _connection_error(endpoint, path, exc, timeout)
    finally:
        conn.close()


def json_body(endpoint, path, status, data):
    """``data`` parsed as JSON, or ServingError naming the endpoint and what came instead."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ServingError("bad_json", "%s answered %s with a body that is not JSON: %r"
                           % (endpoint.url(path), status, snippet(data)), status)


def http_failure(endpoint, path, status, data):
    who = "the server failed" if status >= 500 else "the request was refused"
    return ServingError("http", "%s answered HTTP %s (%s): %s" % (endpoint.url(path), status, who, snippet(data)), status)


def stream(endpoint, path, body, timeout, on_event, clock=time.perf_counter):
    """POST ``body`` and read the server-sent events as they come.

    ``on_event(event, at)`` is called for every JSON event with the clock reading taken when its
    line arrived; it returns True to stop reading (the caller saw enough). Returns ``(sent_at,
    done)`` where ``sent_at`` is the clock just before the request went out and ``done`` says the
    ``[DONE]`` marker came. SSE comments (``: ping``) and ``event:``/``id:`` lines are skipped.
    """
    conn = endpoint.connect(timeout)
    url = endpoint.url(path)
    try:
        data = json.dumps(body).encode("utf-8")
        sent_at = clock()
        conn.request("POST", endpoint.prefix + path, body=data, headers=endpoint.headers(body))
        response = conn.getresponse()
        if response.status >= 400:
            raise http_failure(endpoint, path, response.status, response.read(4096))
        index = 0
        while True:
            line = response.readline()
            at = clock()
            if not line:
                return sent_at, False
            text = line.strip()
            if not text or text.startswith(b":") or not text.startswith(b"data:"):
                continue
            payload = text[5:].strip()
            if payload == b"[DONE]":
                return sent_at, True
            index += 1
            try:
                event = json.loads(payload.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise ServingError("bad_json", "%s sent stream event %d that is not JSON: %r"
                                   % (url, index, snippet(payload)))
            if not isinstance(event, dict):
                raise ServingError("bad_json", "%s sent stream event %d that is not a JSON object: %r"
                                   % (url, index, snippet(payload)))
            if "error" in event and not event.get("choices"):
                error = event["error"]
                detail = error.get("message", error) if isinstance(error, dict) else error
                raise ServingError("stream_error", "%s sent an error in the stream after %d events: %s"
                                   % (url, index - 1, snippet(json.dumps(detail) if not isinstance(detail, str) else detail)))
            if on_event(event, at):
                return sent_at, False
    except ServingError:
        raise
    except (OSError, http.client.HTTPException) as exc:
        raise _connection_error(endpoint, path, exc, timeout)
    finally:
        conn.close()
