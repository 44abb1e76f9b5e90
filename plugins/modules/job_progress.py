#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_progress
short_description: Wait a while for an async job and say how far it got
version_added: 0.1.0
description:
  - Waits up to O(wait_s) for an async job (a task run with C(async), C(poll) 0) to finish,
    then returns whether it did and the progress its module reports in O(progress_path)
    (gpufleet.tuning.p2p_bandwidth and gpufleet.tuning.inference_benchmark keep one). A role
    calls it again until RV(finished), printing RV(msg) in between, and then collects the job's
    result with M(ansible.builtin.async_status).
  - Changes nothing.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Any POSIX host Ansible runs async jobs on; it reads files only.
options:
  jid:
    description: The job's id, the C(ansible_job_id) of the task that started it.
    type: str
    required: true
  progress_path:
    description: The file the job's module keeps its progress in (its C(progress_path)); unset
      for a job that reports none.
    type: path
  wait_s:
    description: Seconds to wait for the job before answering (0 to 600); it answers at once
      when the job has finished.
    type: float
    default: 10.0
  async_dir:
    description: The async folder of the user the job runs as (ansible's C(ANSIBLE_ASYNC_DIR)).
    type: path
    default: ~/.ansible_async
seealso:
  - module: ansible.builtin.async_status
  - module: gpufleet.tuning.p2p_bandwidth
  - module: gpufleet.tuning.inference_benchmark
"""

EXAMPLES = r"""
- name: Measure GPU peer-to-peer bandwidth in the background
  gpufleet.tuning.p2p_bandwidth:
    progress_path: ~/.ansible_async/gpufleet-p2p.progress
  async: 3600
  poll: 0
  register: p2p_job

- name: Wait up to 15 s and say how far it got
  gpufleet.tuning.job_progress:
    jid: "{{ p2p_job.ansible_job_id }}"
    progress_path: ~/.ansible_async/gpufleet-p2p.progress
    wait_s: 15
  register: p2p_poll

- name: Where it is
  ansible.builtin.debug:
    msg: "{{ p2p_poll.msg }}"
"""

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
  sample: []
finished:
  description: Whether the job has finished (its result is then in the async folder).
  returned: always
  type: bool
  sample: false
progress:
  description: What the job's module last reported, or null.
  returned: always
  type: dict
  contains:
    done:
      description: Steps done.
      type: int
    total:
      description: Steps in all (0 when not known).
      type: int
    what:
      description: The step now.
      type: str
    elapsed_s:
      description: Seconds since the measurement started.
      type: float
    updated:
      description: When this was written (epoch seconds).
      type: float
  sample: {"done": 12, "total": 28, "what": "pairs, measuring GPU 2 <-> GPU 5", "elapsed_s": 48.0,
           "updated": 1796112000.5}
msg:
  description: One line for people, such as C(12/28 pairs, measuring GPU 2 <-> GPU 5, 48.0 s), or
    C(finished).
  returned: always
  type: str
  sample: 12/28 pairs, measuring GPU 2 <-> GPU 5, 48.0 s
waited_s:
  description: Seconds this call waited.
  returned: always
  type: float
  sample: 15.0
job_file:
  description: The job's results file that was read.
  returned: always
  type: str
  sample: /root/.ansible_async/j123456789.4242
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import job_progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=job_progress.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: job_progress.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
