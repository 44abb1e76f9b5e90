#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: health_textfile
short_description: Write the node's health verdict as a node_exporter textfile (Prometheus metrics)
version_added: 0.3.0
description:
  - Writes O(metrics) to C(<directory>/<file_name>) in the Prometheus text exposition format
    (version 0.0.4), where node_exporter's textfile collector exports it at every scrape, so a
    scheduler can act on the node's health (Slurm NHC drains it, a Kubernetes controller taints
    it, an alert fires).
  - Each metric gets one C(# HELP) and C(# TYPE) line and its samples, sorted by their labels;
    metrics keep the order given. Values are written as Go writes a float (C(1), C(0.5),
    C(1e+06), C(+Inf), C(NaN)); an integer as its digits.
  - Every input is checked before anything is read or written; an error names the bad metric,
    label or value.
  - The write is atomic (a temporary file in the same directory, fsynced, given O(mode), renamed
    over the file), so node_exporter never reads half a file; the file is read back. A file
    whose text and mode are already as wanted is not rewritten.
  - V(absent) removes the file.
  - The file carries a gpufleet.tuning marker comment in its first line; a file of that name
    without one is refused, never overwritten or removed.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads the file and says what it would write or remove; writes nothing.
  diff_mode:
    support: full
    description: The file's text before and after (nothing when only heartbeat values change).
  platform:
    support: full
    platforms: posix
    description: A node where node_exporter runs with its textfile collector.
options:
  directory:
    description:
      - node_exporter's C(--collector.textfile.directory); an absolute path. The default is the
        one Debian's and Ubuntu's prometheus-node-exporter package sets and creates.
      - It must exist (the module creates no directory) and must not be a symlink.
    type: str
    default: /var/lib/prometheus/node-exporter
  file_name:
    description: The file's name in O(directory); it must end in C(.prom) (the collector reads
      only those), hold no C(/) and not start with a dot.
    type: str
    default: gpufleet.prom
  metrics:
    description:
      - The metrics the file holds, in this order. Required with O(state=present).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The metric name, C([a-zA-Z_:][a-zA-Z0-9_:]*); each name once.
        type: str
        required: true
      help:
        description: The C(# HELP) text; none when left out.
        type: str
      type:
        description: The C(# TYPE).
        type: str
        choices: [gauge, counter, untyped]
        default: gauge
      samples:
        description: The metric's samples; no two with the same labels.
        type: list
        elements: dict
        default: []
        suboptions:
          labels:
            description: Label names (C([a-zA-Z_][a-zA-Z0-9_]*), not starting with C(__)) and
              their values (text or numbers).
            type: dict
            default: {}
          value:
            description: A number (an int, a float, or text that spells one, C(+Inf), C(-Inf),
              C(NaN)); a boolean is refused (write 1 or 0).
            type: raw
            required: true
  heartbeat:
    description:
      - Names of metrics whose values change at every run, such as the timestamp of the last
        audit. A name with no metric in O(metrics) this run is allowed (a timestamp written only
        by some runs).
      - A file that differs only in their values is still rewritten, so they stay fresh, but
        the run reports no change (C(changed) false, RV(changes) empty, RV(heartbeat_only)
        true), and their values get no value records.
    type: list
    elements: str
    default: []
  state:
    description: V(present) writes the file; V(absent) removes it (give no O(metrics)).
    type: str
    choices: [present, absent]
    default: present
  mode:
    description: The file's permission bits, octal, as text (V(0644)); node_exporter runs as its
      own user and must be able to read the file.
    type: raw
    default: "0644"
notes:
  - The file is a derived report, not tuning. The module never records itself in the node's
    state (it has no C(state_path)), and playbooks/revert.yml does not touch the file; remove it
    with O(state=absent).
  - "RV(changes) holds a file record for the file (digest, size and mode before and after) and a
    value record for every sample whose value changed, was added or was removed, targeted
    C(name{label=\"value\",...}), heartbeat metrics left out."
  - node_exporter refuses a whole file it cannot parse and exports only
    C(node_textfile_scrape_error); that is why everything is checked before the write.
seealso:
  - name: node_exporter textfile collector
    description: Which files it reads and how.
    link: https://github.com/prometheus/node_exporter#textfile-collector
  - name: Prometheus text exposition format
    description: HELP, TYPE, sample lines, escaping.
    link: https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
"""

EXAMPLES = r"""
- name: Publish the node's health for the scheduler
  gpufleet.tuning.health_textfile:
    metrics:
      - name: gpufleet_node_healthy
        help: 1 when the last audit found nothing critical on this node, else 0.
        samples:
          - value: "{{ 0 if audit_critical | length > 0 else 1 }}"
      - name: gpufleet_audit_findings
        help: Findings of the last audit, by severity.
        samples:
          - labels: {severity: critical}
            value: "{{ audit_critical | length }}"
          - labels: {severity: warning}
            value: "{{ audit_warnings | length }}"
          - labels: {severity: info}
            value: "{{ audit_info | length }}"
      - name: gpufleet_audit_last_run_timestamp_seconds
        help: When the last audit ran (Unix time).
        samples:
          - value: "{{ ansible_date_time.epoch }}"
    heartbeat:
      - gpufleet_audit_last_run_timestamp_seconds

- name: A textfile directory other than Debian's
  gpufleet.tuning.health_textfile:
    directory: /var/lib/node_exporter/textfile_collector
    metrics:
      - name: gpufleet_node_healthy
        samples:
          - value: 1

- name: Stop publishing
  gpufleet.tuning.health_textfile:
    state: absent
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
    - {"area": "health_textfile", "kind": "file", "target": "/var/lib/prometheus/node-exporter/gpufleet.prom",
       "before": {"sha256": "9b1c...", "size": 702, "mode": "0644"}, "after": {"sha256": "5d41...", "size": 702, "mode": "0644"}}
    - {"area": "health_textfile", "kind": "value", "target": "gpufleet_node_healthy", "before": "1", "after": "0"}
path:
  description: The file.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/gpufleet.prom
state:
  description: O(state) as applied.
  returned: always
  type: str
samples:
  description: How many samples the file holds (0 with O(state=absent)).
  returned: always
  type: int
  sample: 5
heartbeat_only:
  description: The file differed only in the values of O(heartbeat) metrics; it was rewritten
    (in check mode, would be) and the run reports no change.
  returned: always
  type: bool
msg:
  description: What the run did, in words.
  returned: always
  type: str
  sample: wrote /var/lib/prometheus/node-exporter/gpufleet.prom (5 samples)
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import health_textfile
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    # The engine's options alone: the file is a report, never recorded for a revert.
    module = AnsibleModule(argument_spec=health_textfile.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: health_textfile.run(module.params, module.check_mode))


if __name__ == "__main__":
    main()
