#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: memlock_info
short_description: Read the locked-memory limits processes run with, and tell whose job a shortfall is
version_added: 0.1.0
description:
  - Reads the memlock limit (RLIMIT_MEMLOCK, soft and hard) of PID 1 and of the main process
    of each named systemd unit from C(/proc/PID/limits), and compares them with the wanted
    limit. Changes nothing.
  - Inside a container, PID 1's hard limit is the ceiling the host gave the container; nothing
    inside can raise it. When it is below the wanted limit the module says so plainly as the
    host's job (RV(host_limit_ok) false), rather than reporting a container failure.
  - A unit's main process is found from C(/proc/*/cgroup) (the process of the unit's cgroup
    whose parent is outside it), with no systemctl or D-Bus, so it works wherever procfs does.
    A unit started before its C(LimitMEMLOCK) changed keeps its old limit until restarted;
    the module reports that too.
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
    description: Linux with procfs.
options:
  want:
    description:
      - The limit the serving processes need. V(unlimited) (or V(infinity)) or a number of
        bytes.
    type: raw
    default: unlimited
  pids:
    description:
      - Process IDs to read. PID 1 decides RV(host_limit_ok).
    type: list
    elements: int
    default: [1]
  units:
    description:
      - systemd units whose main process to read, such as V(vllm.service). A name without a
        unit type gets C(.service).
    type: list
    elements: str
    default: []
notes:
  - Values are in bytes, as the kernel keeps them; C(ulimit -l) shows KiB.
seealso:
  - module: gpufleet.tuning.lxc_memlock
"""

EXAMPLES = r"""
- name: Read PID 1 and the model server's limits
  gpufleet.tuning.memlock_info:
    units: [vllm.service]
  register: memlock

- name: Say plainly when the host did not raise the container's limit
  ansible.builtin.debug:
    msg: "{{ memlock.msg }}"
  when: not memlock.ok
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
want:
  description: The wanted limit in canonical form.
  returned: always
  type: str
  sample: unlimited
processes:
  description: One entry per process read (the O(pids), then each unit's main process).
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process ID; null for a unit with no running process.
      type: int
    source:
      description: Why it was read, V(PID 1) or the unit name.
      type: str
    found:
      description: Whether the process exists.
      type: bool
    comm:
      description: The process name.
      type: str
    soft:
      description: Soft limit in bytes, or V(unlimited).
      type: str
    hard:
      description: Hard limit in bytes, or V(unlimited).
      type: str
    covers_want:
      description: The soft limit is at least the wanted one.
      type: bool
    hard_covers_want:
      description: The hard limit is at least the wanted one.
      type: bool
    restart_would_raise:
      description: For a unit's process, whether a restart would give it more, that is its
        soft limit is below the wanted one capped by PID 1's hard limit (the most the
        container allows).
      type: bool
  sample:
    - {"pid": 1, "source": "PID 1", "found": true, "comm": "systemd", "soft": "8388608",
       "hard": "8388608", "covers_want": false, "hard_covers_want": false}
pid1:
  description: The entry of PID 1, or null when PID 1 was not read.
  returned: always
  type: dict
units:
  description: Unit name to its main process's entry (C(found) false when it does not run).
  returned: always
  type: dict
host_limit_ok:
  description: Whether PID 1's hard limit covers the wanted limit; false means the host must
    raise the container's limit; null when PID 1 was not read.
  returned: always
  type: bool
restart_required:
  description: True when a named unit would get a higher limit from a restart (its
    RV(processes[].restart_would_raise)).
  returned: always
  type: bool
ok:
  description: True when nothing was found short of the wanted limit.
  returned: always
  type: bool
findings:
  description: One sentence per shortfall, naming whose job it is.
  returned: always
  type: list
  elements: str
systemd:
  description: Whether systemd runs as the init here (C(/run/systemd/system) exists).
  returned: always
  type: bool
msg:
  description: The findings joined, or a one-line summary when all is well.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import memlock_info
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=memlock_info.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: memlock_info.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
