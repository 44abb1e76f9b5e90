#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sysctl_profile
short_description: Apply, persist and roll back a named set of kernel sysctls
version_added: 0.1.0
description:
  - Manages a named profile of sysctls as one unit. Every current value is read from
    C(/proc/sys) first; only keys whose value differs are written, each one is read back, and
    a failure restores every key this call already wrote before the module fails.
  - The profile is persisted in C(/etc/sysctl.d/NN-gpufleet-NAME.conf), written atomically and
    only when its content changes, so a second run reports no change.
  - The values each key had before the profile first set it are remembered in
    C(/var/lib/gpufleet-tuning/sysctl/NAME.json); O(state=absent) puts them back and removes
    the file.
  - Works inside containers. Host-wide keys (C(kernel.*), C(vm.*), C(fs.*), C(net.core.rmem_max)
    and kin) are read-only there and, in a privileged container, a write would change the
    host. O(host_wide=skip) leaves them alone and reports them; O(on_unwritable=skip) turns
    keys this host cannot write into a report instead of a failure. Whether the module runs in
    a container is detected and returned.
  - Multi-value keys such as C(net.ipv4.tcp_rmem) are compared with whitespace folded, since
    the kernel prints them with tabs.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads everything and reports the planned changes; writes nothing.
  diff_mode:
    support: full
    description: Shows the runtime values and the persisted file before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with /proc/sys.
options:
  name:
    description:
      - Profile name; part of the persisted file name.
      - 1 to 64 characters of C(a-z), C(0-9), C(_) and C(-), starting with a letter or digit.
    type: str
    required: true
  settings:
    description:
      - Sysctl keys in dotted form (C(vm.swappiness)) mapped to their values.
      - Values may be integers, booleans (written as 1/0), strings, or lists for multi-value
        keys (C(net.ipv4.tcp_rmem) as V(4096 87380 134217728) or a list of three integers).
      - Keys with C(/), empty components or no C(/proc/sys) entry are refused before anything
        is written. Values containing a newline are refused.
      - With O(state=absent), only the keys are used; they name the part of the profile to
        remove; omit O(settings) to remove the whole profile.
    type: dict
    default: {}
  state:
    description:
      - V(present) applies and persists the profile.
      - V(absent) restores the values the profile replaced (when O(apply=true)) and removes
        the persisted file.
    type: str
    choices: [present, absent]
    default: present
  persist:
    description:
      - Write the profile to C(/etc/sysctl.d/) so it survives a reboot.
      - V(false) removes a file an earlier run persisted, leaving a runtime-only profile.
    type: bool
    default: true
  apply:
    description:
      - Set the runtime values now. With V(false) only the file is managed and
        RV(reboot_required) says whether the file differs from what is running.
    type: bool
    default: true
  priority:
    description:
      - The NN of C(/etc/sysctl.d/NN-gpufleet-NAME.conf); files are read in lexical order and
        a later file wins. A file of this profile under another priority is removed.
    type: int
    default: 90
  on_unwritable:
    description:
      - What to do with a key this host cannot write (read-only C(/proc/sys) in a container,
        no permission, or a kernel that refuses the key with EPERM, EACCES, EROFS, EOPNOTSUPP
        or ENOTSUPP, such as C(kernel.nmi_watchdog) on a machine without a PMU).
      - V(fail) fails the task; keys already written in this call are restored.
      - V(skip) leaves the key alone, reports it in RV(skipped_keys) with the reason, and does not
        persist it. A value the kernel rejects as invalid (EINVAL) always fails.
    type: str
    choices: [fail, skip]
    default: fail
  host_wide:
    description:
      - V(apply) treats every key alike.
      - V(skip) never writes host-wide keys (those outside the network, IPC, UTS and user
        namespaces) and reports them in RV(skipped_keys) with their current value; use it in
        containers, where those keys belong to the host.
    type: str
    choices: [apply, skip]
    default: apply
notes:
  - Keys naming an interface that contains a dot cannot be written in dotted form and are not
    supported.
  - Keys dropped from O(settings) between runs keep their current value; their original value
    stays remembered until O(state=absent).
seealso:
  - name: Kernel documentation for /proc/sys
    description: What each sysctl does.
    link: https://docs.kernel.org/admin-guide/sysctl/index.html
"""

EXAMPLES = r"""
- name: Inference node profile
  gpufleet.tuning.sysctl_profile:
    name: inference
    settings:
      kernel.numa_balancing: 0
      kernel.sched_autogroup_enabled: 0
      vm.swappiness: 10
      net.core.rmem_max: 268435456
      net.ipv4.tcp_rmem: "4096 87380 134217728"

- name: Inside a serving container, set only what the container owns
  gpufleet.tuning.sysctl_profile:
    name: serving
    settings:
      net.core.somaxconn: 4096
      vm.swappiness: 10
    host_wide: skip
    on_unwritable: skip

- name: Put back what the profile replaced and delete its file
  gpufleet.tuning.sysctl_profile:
    name: inference
    state: absent
"""

RETURN = r"""
before:
  description: Value of each key before this run (whitespace folded); null for a skipped key
    that does not exist here.
  returned: always
  type: dict
  sample: {"vm.swappiness": "60", "net.ipv4.tcp_rmem": "4096 131072 6291456"}
after:
  description: Value of each key after this run (in check mode, the planned value).
  returned: always
  type: dict
  sample: {"vm.swappiness": "10", "net.ipv4.tcp_rmem": "4096 87380 134217728"}
changed_keys:
  description: Keys whose runtime value was (or, in check mode, would be) written.
  returned: always
  type: list
  elements: str
  sample: ["vm.swappiness"]
skipped_keys:
  description:
    - Keys left alone, each with the reason.
    - Named C(skipped_keys), not C(skipped), because Ansible reports any task whose result has
      a true C(skipped) as skipped, which would hide the changes made to the other keys.
  returned: always
  type: dict
  sample: {"vm.swappiness": "host-wide key: the host sets it (gpufleet.tuning.host role); currently 60, wanted 10"}
container:
  description: Whether the module runs inside a container, and the evidence.
  returned: always
  type: dict
  contains:
    detected:
      description: True when strong evidence of a container was found.
      type: bool
    kind:
      description: Container type when known (lxc, podman, docker, user-namespace, ...).
      type: str
    evidence:
      description: What the decision rests on.
      type: list
      elements: str
    ignored:
      description: Weak markers seen but not trusted alone (such as a stale /.dockerenv).
      type: list
      elements: str
  sample: {"detected": false, "kind": null, "evidence": [], "ignored": ["/.dockerenv exists"]}
path:
  description: The persisted file of this profile.
  returned: always
  type: str
  sample: /etc/sysctl.d/90-gpufleet-inference.conf
persisted:
  description: Whether the persisted file holds the profile after this run.
  returned: always
  type: bool
reboot_required:
  description: True when O(apply=false) and the persisted values differ from the running
    ones, so they take effect only at the next boot or C(sysctl --system).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile
from ansible_collections.gpufleet.tuning.plugins.module_utils import outcome


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            settings=dict(type="dict", default={}),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            persist=dict(type="bool", default=True),
            apply=dict(type="bool", default=True),
            priority=dict(type="int", default=90),
            on_unwritable=dict(type="str", default="fail", choices=["fail", "skip"]),
            host_wide=dict(type="str", default="apply", choices=["apply", "skip"]),
        ),
        supports_check_mode=True,
    )
    outcome.finish(module, lambda: sysctl_profile.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
