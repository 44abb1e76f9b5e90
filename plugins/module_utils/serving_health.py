# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine of gpufleet.tuning.serving_health: wait until an OpenAI-compatible server serves.

One implementation of readiness for every caller (the serving role before and after tuning,
the reboot path after a reboot, a rollout's gate), so an empty ``/health`` body or a server
without ``/health`` is judged the same way everywhere; the rules are in serving/health.py.

Engine contract: ``run(params, check_mode=False, paths=None, tools=None)`` returns the result or
raises ModuleFailure with the last probe. It only reads, so ``changes`` is always empty and
check mode probes as well. ``tools`` may carry ``clock`` and ``sleep`` for tests, and
``unit_state`` (``unit -> {ActiveState, SubState, Result, ExecMainStatus}``) where ``unit`` is
given: the module passes one that asks systemd (``systemctl show``).
"""

from __future__ import annotations

import time

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_unit
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
    unit=dict(type="str"),
)

# systemctl show's properties read for ``unit``.
UNIT_PROPERTIES = ("ActiveState", "SubState", "Result", "ExecMainStatus")

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
    if params["unit"] is not None:
        params["unit"] = serving_unit.unit_name(params["unit"], "unit")
    try:
        endpoint = Endpoint(params["url"], params["api_key"], params["validate_certs"])
    except ValueError as exc:
        raise ModuleFailure(str(exc))
    return params, endpoint


def run(params, check_mode=False, paths=None, tools=None):
    params, endpoint = validate(params)
    tools = tools or {}
    stopped = None
    if params["unit"] is not None:
        def stopped():
            return stopped_reason(params["unit"], tools["unit_state"](params["unit"]))
    found = health.wait(endpoint, params["model"], timeout=params["timeout_s"], interval=params["interval_s"],
                        request_timeout=params["request_timeout_s"], clock=tools.get("clock", time.monotonic),
                        sleep=tools.get("sleep", time.sleep), stopped=stopped)
    result = dict(found, changed=False, changes=[], url=endpoint.base, model=params["model"])
    if not found["ready"]:
        raise ModuleFailure(health.not_ready_message(endpoint, found, params["timeout_s"]), result)
    return result


def stopped_reason(unit, state):
    """Why ``unit`` is not going to serve (failed, stopped, or waiting to be restarted after its
    process exited), from systemctl show's properties; None while it runs or starts."""
    active, sub = state.get("ActiveState"), state.get("SubState")
    if active == "failed" or (active == "inactive" and sub == "dead") or sub == "auto-restart":
        how = "waits to be restarted" if sub == "auto-restart" else active
        return "%s %s (result %s, exit status %s)" % (
            unit, how, state.get("Result") or "?", state.get("ExecMainStatus") or "?")
    return None


def parse_show(text):
    """``systemctl show -p A -p B``'s ``KEY=value`` lines as a dict."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out
