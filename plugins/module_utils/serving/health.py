# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is an OpenAI-compatible server ready to serve, and if not, why.

Servers disagree on ``/health``: vLLM answers 200 with an empty body once the engine runs,
llama.cpp's server answers 200 ``{"status": "ok"}`` and 503 while the model loads, and
llama-cpp-python and some proxies have no ``/health`` at all (404). ``/v1/models`` is what every
OpenAI-compatible server has and only lists a model once it is loaded. So one probe is:

1. ``GET /health``: 200 (any body, an empty one included) is healthy; 5xx is "not yet"
   (loading); 404 or no answer there sends the probe to step 2.
2. ``GET /v1/models`` must answer 200 with a JSON list of models.

When an expected model is named, ``/v1/models`` must list it in either case (a healthy server
that serves another model is not ready for this benchmark); a server whose ``/health`` is 200
but which has no ``/v1/models`` (404) is taken at its ``/health`` word.

``wait()`` repeats the probe until ready or out of time and names the last reason, telling a
server that is down (nothing answers) from one that is slow (answers "loading").
"""

from __future__ import annotations

import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import openai_http
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import ServingError


def model_ids(payload):
    """The ``id`` of every model in a ``/v1/models`` answer (``{"data": [{"id": ...}]}``);
    None when the answer does not have that shape."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return None
    return [item["id"] for item in payload["data"] if isinstance(item, dict) and isinstance(item.get("id"), str)]


def list_models(endpoint, timeout=5.0):
    """The model ids ``/v1/models`` lists; ServingError when it does not answer with a list."""
    status, body = openai_http.request(endpoint, "GET", "/v1/models", timeout=timeout)
    if status != 200:
        raise openai_http.http_failure(endpoint, "/v1/models", status, body)
    listed = model_ids(openai_http.json_body(endpoint, "/v1/models", status, body))
    if listed is None:
        raise ServingError("bad_json", "%s answers 200 without a list of models: %r"
                           % (endpoint.url("/v1/models"), openai_http.snippet(body)))
    return listed


def probe(endpoint, model=None, timeout=5.0):
    """One readiness probe. Returns a dict: ``ready`` (bool), ``via`` (the path that decided),
    ``health_status`` (HTTP status of /health, None without an answer), ``health_body`` (its
    first characters), ``models`` (ids listed, None when /v1/models was not read or had no
    list), ``reason`` (why not ready, or None) and ``down`` (True when nothing answered at all)."""
    found = {"ready": False, "via": None, "health_status": None, "health_body": None, "models": None,
             "reason": None, "down": False}
    health_error = None
    try:
        status, body = openai_http.request(endpoint, "GET", "/health", timeout=timeout)
        found["health_status"] = status
        found["health_body"] = openai_http.snippet(body)
    except ServingError as exc:
        health_error = exc
    status = found["health_status"]
    if status is not None and status >= 500:
        found["reason"] = "%s answers HTTP %s: %s (still loading?)" % (
            endpoint.url("/health"), status, found["health_body"] or "empty body")
        return found
    if status == 200 and not model:
        found.update(ready=True, via="/health")
        return found

    try:
        status_models, body = openai_http.request(endpoint, "GET", "/v1/models", timeout=timeout)
    except ServingError as exc:
        found["down"] = health_error is not None and health_error.kind == "down" and exc.kind == "down"
        if health_error is None or found["down"]:
            found["reason"] = exc.message
        else:
            found["reason"] = "%s; %s" % (health_error.message, exc.message)
        return found
    if status_models == 200:
        try:
            listed = model_ids(openai_http.json_body(endpoint, "/v1/models", status_models, body))
        except ServingError as exc:
            found["reason"] = exc.message
            return found
        found["models"] = listed
        if listed is None:
            found["reason"] = "%s answers 200 without a list of models: %r" % (
                endpoint.url("/v1/models"), openai_http.snippet(body))
        elif not listed:
            found["reason"] = "%s lists no model yet" % endpoint.url("/v1/models")
        elif model and model not in listed:
            found["reason"] = "%s lists %s, not the expected model %r" % (
                endpoint.url("/v1/models"), ", ".join(listed), model)
        else:
            found.update(ready=True, via="/v1/models" if status != 200 else "/health")
        return found
    if status == 200 and status_models == 404:
        # Healthy by its own word, and no model list to check the name against.
        found.update(ready=True, via="/health")
        return found
    found["reason"] = "%s answers HTTP %s and %s answers HTTP %s: %s" % (
        endpoint.url("/health"), status if status is not None else "nothing", endpoint.url("/v1/models"),
        status_models, openai_http.snippet(body) or "empty body")
    return found


def wait(endpoint, model=None, timeout=60.0, interval=2.0, request_timeout=5.0,
         clock=time.monotonic, sleep=time.sleep, stopped=None):
    """Probe until ready or ``timeout`` seconds passed (at least one probe). Returns the last
    probe with ``attempts``, ``elapsed_s`` and ``stopped``; the caller reads ``ready``.

    ``stopped``: a callable returning why the server's process is gone for good (its unit
    failed or waits to be restarted after an exit), or None while it runs or starts. A server
    that cannot start is then reported at the next probe, not after the whole timeout: a
    launch flag it refuses must be rolled back at once, and a model load can take many
    minutes of timeout."""
    start = clock()
    attempts = 0
    while True:
        attempts += 1
        found = probe(endpoint, model, request_timeout)
        elapsed = clock() - start
        found["stopped"] = None if found["ready"] or stopped is None else stopped()
        if found["stopped"]:
            found["reason"] = "%s; %s" % (found["stopped"], found["reason"])
        if found["ready"] or found["stopped"] or elapsed + interval > timeout:
            found.update(attempts=attempts, elapsed_s=round(elapsed, 3))
            return found
        sleep(interval)


def not_ready_message(endpoint, found, timeout):
    """One line for a server that never became ready: down or slow, and the last reason."""
    what = "is down" if found.get("down") else "was not ready"
    if found.get("stopped"):
        return "the server at %s stopped after %g s (%d probe%s): %s" % (
            endpoint.base, found["elapsed_s"], found["attempts"], "" if found["attempts"] == 1 else "s", found["reason"])
    return "the server at %s %s after %g s (%d probe%s): %s" % (
        endpoint.base, what, timeout, found["attempts"], "" if found["attempts"] == 1 else "s", found["reason"])
