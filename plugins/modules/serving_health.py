#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_health
short_description: Wait until an OpenAI-compatible inference server is ready to serve
version_added: 0.2.0
description:
  - Probes the server at O(url) until it is ready or O(timeout_s) passed, and says why not when
    it never was.
  - One probe asks C(GET /health). HTTP 200 is healthy whatever the body, an empty one included
    (vLLM answers so once its engine runs). An answer of 500 or more means not yet (llama.cpp's
    server answers 503 while the model loads). HTTP 404 or no answer there leads to
    C(GET /v1/models), which must answer 200 with a list of models (llama-cpp-python and some
    proxies have no C(/health); every OpenAI-compatible server has C(/v1/models) and lists a
    model only once it is loaded).
  - With O(model) set, C(/v1/models) must also list that model, whatever C(/health) said; a
    server whose C(/health) answers 200 and which has no C(/v1/models) is taken at its word.
  - A server that never answers is reported as down; one that answers but never becomes ready
    as not ready, with the last answer (a 503 body, the models it lists instead).
  - Runs on the node (the server listening on 127.0.0.1) or on the controller with
    C(delegate_to). Only sends GET requests; it changes nothing.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Only reads; probes the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Any host with Python and a route to the server.
options:
  url:
    description:
      - Base URL of the server, C(http://host:port), optionally with a path prefix; a trailing
        C(/v1) is the same server. Only C(http) and C(https).
    type: str
    required: true
  model:
    description: The model id C(/v1/models) must list. Unset accepts any model.
    type: str
  timeout_s:
    description: Longest wait for readiness in seconds, from 0 (one probe) to 86400.
    type: float
    default: 60.0
  interval_s:
    description: Pause between probes in seconds (greater than 0, at most 3600).
    type: float
    default: 2.0
  request_timeout_s:
    description: Longest wait for one answer in seconds (greater than 0, at most 3600).
    type: float
    default: 5.0
  api_key:
    description: Sent as C(Authorization Bearer) when set.
    type: str
  validate_certs:
    description: Check the server's TLS certificate (C(https) only).
    type: bool
    default: true
  unit:
    description:
      - The systemd unit running the server, on the host this module runs on. Between probes
        its state is read (C(systemctl show)); once it has failed, stopped, or waits to be
        restarted after its process exited, the wait ends at once with that reason instead of
        running out the timeout (a launch command the server refuses).
      - Unset, only the HTTP probes decide.
    type: str
seealso:
  - module: gpufleet.tuning.inference_benchmark
    description: Measures the server once it is ready.
"""

EXAMPLES = r"""
- name: Wait up to five minutes for the model to be served
  gpufleet.tuning.serving_health:
    url: http://127.0.0.1:8000
    model: meta-llama/Llama-3.1-8B-Instruct
    timeout_s: 300
  register: health

- name: Check from the controller, once
  gpufleet.tuning.serving_health:
    url: "http://{{ inventory_hostname }}:8000"
    timeout_s: 0
  delegate_to: localhost
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` is documented with the
# same text in every module of this collection; keep the copies equal.
RETURN = r"""
changes:
  description:
    - What this run changed (in check mode, what it would change) as records for programs to
      read (the closing summary, reports, a fleet revert); C(diff) shows the same for people.
    - One record per value, file, kernel module or service; empty when nothing changed, so
      C(changed) is true exactly when this list is not empty. A module that only reads always
      returns an empty list.
    - A failed run returns no records; what it had applied was restored.
  returned: always
  type: list
  elements: dict
  contains:
    area:
      description: The part of the tuning (C(sysctl), C(pcie), C(cpu_power), C(lxc_memlock),
        C(peermem), C(nvidia_options), C(kernel_cmdline)).
      type: str
    kind:
      description: V(value), V(file), V(module) or V(service).
      type: str
    target:
      description: The key, file path, PCI address, kernel module or unit.
      type: str
    before:
      description:
        - What this run found; null when absent or unknown.
        - A value is its text. A file is C(sha256), C(size) and C(mode), never its content
          (config files can hold secrets). A kernel module is V(loaded) or V(not loaded), a
          service a state word such as V(enabled).
      type: raw
    after:
      description: What this run left (in check mode, would leave), in the form of C(before).
      type: raw
  sample:
    - {"area": "lxc_memlock", "kind": "value", "target": "/etc/pve/lxc/101.conf lxc.prlimit.memlock",
       "before": "65536", "after": "unlimited"}
    - {"area": "lxc_memlock", "kind": "file", "target": "/etc/pve/lxc/101.conf",
       "before": {"sha256": "9f2c...", "size": 612, "mode": "0640"},
       "after": {"sha256": "41ab...", "size": 643, "mode": "0640"}}
ready:
  description: Whether the server was ready (always true when the task succeeds).
  returned: always
  type: bool
via:
  description: The path that decided readiness, C(/health) or C(/v1/models).
  returned: when ready
  type: str
  sample: /v1/models
health_status:
  description: HTTP status of the last C(GET /health); null when nothing answered.
  returned: always
  type: int
  sample: 404
health_body:
  description: The start of the last C(/health) body (empty for vLLM).
  returned: always
  type: str
models:
  description: The model ids C(/v1/models) listed at the last probe; null when not read.
  returned: always
  type: list
  elements: str
  sample: ["tiny"]
reason:
  description: Why the server was not ready at the last probe; null when ready.
  returned: always
  type: str
down:
  description: True when nothing answered at all (connection refused, no route).
  returned: always
  type: bool
stopped:
  description: Why O(unit) will not serve (failed, stopped, restarting after an exit); null
    while it runs, or without O(unit).
  returned: always
  type: str
  sample: "gpufleet-tiny-llm.service failed (result exit-code, exit status 2)"
attempts:
  description: Probes made.
  returned: always
  type: int
elapsed_s:
  description: Seconds from the first probe to the last.
  returned: always
  type: float
url:
  description: The server's base URL as probed.
  returned: always
  type: str
model:
  description: The model that had to be listed (O(model)).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_health
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=serving_health.ARGUMENT_SPEC, supports_check_mode=True)

    def unit_state(unit):
        argv = [module.get_bin_path("systemctl", required=True), "show", "--no-pager"]
        argv += ["--property=%s" % name for name in serving_health.UNIT_PROPERTIES] + ["--", unit]
        rc, out, err = module.run_command(argv)
        if rc != 0:
            return {}  # systemd unreachable for a moment: the HTTP probes decide
        return serving_health.parse_show(out)

    outcome.finish(module, lambda: serving_health.run(module.params, check_mode=module.check_mode,
                                                      tools={"unit_state": unit_state}))


if __name__ == "__main__":
    main()
