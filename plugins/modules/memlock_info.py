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

RETURN = r"""
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
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit


def main():
    module = AnsibleModule(
        argument_spec=dict(
            want=dict(type="raw", default="unlimited"),
            pids=dict(type="list", elements="int", default=[1]),
            units=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    try:
        result = memlock_info.run(module.params)
    except memlock_info.InfoError as exc:
        module.fail_json(msg=str(exc))
    except (OSError, IOError, rlimit.LimitError) as exc:
        module.fail_json(msg="cannot read the limits: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
