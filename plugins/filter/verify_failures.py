# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verify role's judgement: why a host fails verification.

It turns the P2P result and the check-mode read-backs of the tuning modules into one list of
reasons; a read-back that would change something is drift, described with the same lines the
tuning summary prints.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.change_summary import change_summary

DOCUMENTATION = r"""
---
name: verify_failures
short_description: List why a host fails verification
version_added: 0.1.0
description:
  - Takes C({"p2p" p2p_bandwidth result, "readback" {label result of a tuning module run in
    check mode}}) and returns one line per shortfall, failed check or drift.
options:
  _input:
    description: The P2P result and the read-back results.
    type: dict
    required: true
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Judge
  ansible.builtin.set_fact:
    failures: "{{ {'p2p': __verify_p2p, 'readback': {'sysctl': __verify_sysctl}} | gpufleet.tuning.verify_failures }}"
"""

RETURN = r"""
_value:
  description: Reasons the host fails; empty when it passes.
  type: list
  elements: str
"""


def verify_failures(data):
    if not isinstance(data, dict):
        raise AnsibleFilterError("verify_failures expects a dict with p2p and readback")
    failures = []
    p2p = data.get("p2p") or {}
    if isinstance(p2p, dict):
        for short in p2p.get("shortfalls") or []:
            failures.append("p2p %s: %s" % (short.get("pair"), short.get("reason")))
        if p2p.get("failed") and not p2p.get("shortfalls"):
            failures.append("p2p: %s" % p2p.get("msg", "failed"))
    readback = data.get("readback") or {}
    for label in sorted(readback):
        result = readback[label]
        if not isinstance(result, dict) or not result or result.get("skipped") is True:
            continue
        if result.get("failed"):
            failures.append("%s: read-back failed: %s" % (label, result.get("msg", "")))
        elif result.get("changed"):
            for line in change_summary({label: result}, True):
                failures.append("drift: " + line)
    return failures


class FilterModule(object):
    def filters(self):
        return {"verify_failures": verify_failures}
