# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.serving_health: wait until an OpenAI-compatible server serves.

One implementation of readiness for every caller (the serving role before and after tuning,
the reboot path after a reboot, a rollout's gate), so an empty ``/health`` body or a server
without ``/health`` is judged the same way everywhere; the rules are in serving/health.py.

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)`` returns the result or
raises ModuleFailure with the last probe. It only reads, so ``changes`` is always empty and
check mode probes as well. ``tools`` may carry ``clock`` and ``sleep`` for tests.
"""

from __future__ import annotations

import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import numbers
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.spec import with_defaults
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import health
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import Endpoint

ARGUMENT_SPEC = dict(
    url=dict(type="str", required=True),
    model=dict(type="str"),
    timeout_s=dict(type="float", default=60.0),
    interval_s=dict(type="float", default=2.0),
    request_timeout_s=dict(type="float", default=5.0),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
)

RANGES = {"timeout_s": (0.0, 86400.0, False), "interval_s": (0.0, 3600.0, True),
          "request_timeout_s": (0.0, 3600.0, True)}


def validate(params):
    params = with_defaults(ARGUMENT_SPEC, params)
    try:
        numbers.finite_options(params, RANGES, optional=False)
    except numbers.NumberError as exc:
        raise ModuleFailure(str(exc))
    if params["model"] is not None and not params["model"].strip():
        raise ModuleFailure("model=%r is empty: give the model id /v1/models should list, or leave it out" % params["model"])
    try:
        endpoint = Endpoint(params["url"], params["api_key"], params["validate_certs"])
    except ValueError as exc:
        raise ModuleFailure(str(exc))
    return params, endpoint


def run(params, check_mode=False, paths=None, tools=None):
    params, endpoint = validate(params)
    tools = tools or {}
    found = health.wait(endpoint, params["model"], timeout=params["timeout_s"], interval=params["interval_s"],
                        request_timeout=params["request_timeout_s"], clock=tools.get("clock", time.monotonic),
                        sleep=tools.get("sleep", time.sleep))
    result = dict(found, changed=False, changes=[], url=endpoint.base, model=params["model"])
    if not found["ready"]:
        raise ModuleFailure(health.not_ready_message(endpoint, found, params["timeout_s"]), result)
    return result
