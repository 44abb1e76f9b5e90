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
  - Manages a named profile of sysctls as one unit. Every current value and every file the
    run would touch are read first; only keys whose value differs are written, each one is
    read back, and a failure restores every key and file this call changed before the module
    fails. The failure message lists what was restored and what could not be.
  - The profile is persisted in C(/etc/sysctl.d/NN-gpufleet-NAME.conf), written atomically and
    only when its content changes, so a second run reports no change.
  - The values each key had before the profile first wrote it are remembered in
    C(/var/lib/gpufleet-tuning/sysctl/NAME.json); O(state=absent) puts them back and removes
    the file. That state file is validated entry by entry before use; a malformed one (a null
    or non-string value, a key that is not a sysctl name or would leave C(/proc/sys)) is
    refused, naming the file and the entry.
  - The module touches only its own files. Files of this profile are found by their exact
    name (C(NN-gpufleet-NAME.conf), any NN); one that lacks the C(gpufleet.tuning) marker
    comment in its first lines is refused, not overwritten or removed, unless O(adopt=true).
  - Buffer and limit keys (O(raise_only)) are never lowered. Each field gets the larger of the
    kernel's value and the profile's, so a profile written for an older kernel cannot cut a
    current kernel's default (net.ipv4.tcp_rmem's default field went from 87380 to 131072 in
    Linux 4.20). Fields kept are reported in RV(kept_higher), and the persisted file holds the
    effective value, so the next boot does not lower it either.
  - Works inside containers. Host-wide keys (C(kernel.*), C(vm.*), C(fs.*), C(net.core.rmem_max)
    and kin) are read-only there and, in a privileged container, a write would change the
    host. O(host_wide=skip) leaves them alone and reports them; O(on_unwritable=skip) turns
    keys this host cannot write into a report instead of a failure. Whether the module runs in
    a container is detected and returned.
  - Multi-value keys such as C(net.ipv4.tcp_rmem) are compared with whitespace folded, since
    the kernel prints them with tabs. For integer keys the value must have as many fields as
    the kernel holds and be written in plain decimal; anything else is refused before any
    write (the kernel would leave missing fields unchanged, ignore extra ones, and read C(010)
    as octal).
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
        keys (C(net.ipv4.tcp_rmem) as V(4096 131072 134217728) or a list of three integers).
      - Keys with C(/), empty components or no C(/proc/sys) entry are refused before anything
        is written. Values that are empty or contain a newline are refused.
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
        persist it. A value the kernel rejects as invalid (EINVAL) always fails, and so does a
        refused write the kernel had partly applied (it is restored first).
    type: str
    choices: [fail, skip]
    default: fail
  host_wide:
    description:
      - V(apply) treats every key alike.
      - V(skip) never writes host-wide keys (those outside the network, IPC, UTS and user
        namespaces) and reports them in RV(skipped_keys) with their current value; use it in
        containers, where those keys belong to the host. Inside a detected container, a key
        that does not exist in its namespace (one the kernel keeps in the host's network
        namespace only, such as C(net.core.optmem_max) before it became per-namespace) is
        reported the same way instead of failing.
    type: str
    choices: [apply, skip]
    default: apply
  raise_only:
    description:
      - Keys whose fields are never lowered. For each one, every field gets the larger of the
        kernel's current value and the profile's (C(4096 131072 6291456) and a profile's
        C(4096 87380 134217728) give C(4096 131072 134217728)); the fields kept are reported
        in RV(kept_higher) and the effective value is what is persisted.
      - The default lists buffer and limit keys, where a larger value only allows more
        (socket buffer bytes, queued packets, pending connections, pages, open files, memory
        maps, IPC objects) and where the kernel sizes the default from RAM or CPUs, or has
        raised it between releases. C(net.ipv4.tcp_mem) and C(udp_mem) count pages for the
        whole host and are sized from RAM at boot, so a fixed value copied between machines
        would cut a larger host's.
      - Every value of such a key must be integers, with as many fields as the kernel holds.
      - V([]) writes every value exactly as given, lowering where the profile says so.
    type: list
    elements: str
    default:
      - fs.aio-max-nr
      - fs.file-max
      - fs.inotify.max_user_instances
      - fs.inotify.max_user_watches
      - fs.nr_open
      - kernel.msgmax
      - kernel.msgmnb
      - kernel.msgmni
      - kernel.pid_max
      - kernel.sem
      - kernel.shmall
      - kernel.shmmax
      - kernel.shmmni
      - kernel.threads-max
      - net.core.netdev_max_backlog
      - net.core.optmem_max
      - net.core.rmem_default
      - net.core.rmem_max
      - net.core.somaxconn
      - net.core.wmem_default
      - net.core.wmem_max
      - net.ipv4.tcp_max_orphans
      - net.ipv4.tcp_max_syn_backlog
      - net.ipv4.tcp_max_tw_buckets
      - net.ipv4.tcp_mem
      - net.ipv4.tcp_rmem
      - net.ipv4.tcp_wmem
      - net.ipv4.udp_mem
      - net.ipv4.udp_rmem_min
      - net.ipv4.udp_wmem_min
      - net.netfilter.nf_conntrack_max
      - vm.max_map_count
  adopt:
    description:
      - Take over a file at this profile's name in C(/etc/sysctl.d) that was not written by
        this collection (no C(gpufleet.tuning) marker comment in its first lines), or that is
        a symlink that cannot be written through (dangling, or to C(/dev/null), which masks
        it). Such a file is then overwritten or removed as if it were the profile's own.
      - With V(false) such a file is refused and nothing is changed.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - Keys naming an interface that contains a dot cannot be written in dotted form and are not
    supported.
  - Keys dropped from O(settings) between runs keep their current value; their original value
    stays remembered until O(state=absent).
  - A value the kernel stores differently than written (its handler rounds it to jiffies or
    to a power of two, or clamps it) fails the task and is restored; the message names the
    value the kernel keeps, to put in the profile.
  - A symlink at the profile's file name is written through (the link stays) when it points
    at a file of this collection; when the profile's file is removed, the link itself is
    removed and its target left alone.
  - RV(changes) holds a value record per key written (the dotted key) and a file record for
    each file of this profile in C(/etc/sysctl.d) and for its state file.
  - The persisted file holds the effective value of a O(raise_only) key as this kernel had it.
    After a kernel upgrade that raises a default, the file still sets the older value at boot;
    run the profile again (or remove its file) to pick the new default up.
seealso:
  - name: Kernel documentation for /proc/sys
    description: What each sysctl does.
    link: https://docs.kernel.org/admin-guide/sysctl/index.html
  - name: IP sysctls
    description: tcp_rmem, tcp_wmem, tcp_mem, udp_mem and their defaults.
    link: https://docs.kernel.org/networking/ip-sysctl.html
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
      net.ipv4.tcp_rmem: "4096 131072 134217728"

- name: Inside a serving container, set only what the container owns
  gpufleet.tuning.sysctl_profile:
    name: serving
    settings:
      net.core.somaxconn: 4096
      vm.swappiness: 10
    host_wide: skip
    on_unwritable: skip

- name: Cap TCP memory on a small host, lowering what the kernel has
  gpufleet.tuning.sysctl_profile:
    name: small-host
    settings:
      net.ipv4.tcp_mem: "65536 87381 131072"
    raise_only: []

- name: Put back what the profile replaced and delete its file
  gpufleet.tuning.sysctl_profile:
    name: inference
    state: absent
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` (and ``state_record`` of
# the tuning modules) is documented with the same text in every module of this collection; keep
# the copies equal (tests/unit/contract.py).
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
    - {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}
    - {"area": "sysctl", "kind": "file", "target": "/etc/sysctl.d/90-gpufleet-inference.conf", "before": null,
       "after": {"sha256": "5d41402abc4b2a76b9719d911017c592ae1b2ee3b7e1d8b95c1c1e2d1f0b6f3a", "size": 214}}
    - {"area": "sysctl", "kind": "file", "target": "/var/lib/gpufleet-tuning/sysctl/inference.json", "before": null,
       "after": {"sha256": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", "size": 71}}
before:
  description: Value of each key before this run (whitespace folded); null for a skipped key
    that does not exist here.
  returned: always
  type: dict
  sample: {"vm.swappiness": "60", "net.ipv4.tcp_rmem": "4096 131072 6291456"}
after:
  description:
    - Value of each key after this run (in check mode, the planned value).
    - On a failure, the values read back after the rollback.
  returned: always
  type: dict
  sample: {"vm.swappiness": "10", "net.ipv4.tcp_rmem": "4096 131072 134217728"}
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
kept_higher:
  description:
    - O(raise_only) keys where the kernel already had more than the profile in at least one
      field, with the profile's value, the value applied and persisted, and the positions
      (counted from 1) of the fields kept from the kernel.
  returned: always
  type: dict
  sample: {"net.ipv4.tcp_rmem": {"wanted": "4096 87380 134217728", "effective": "4096 131072 134217728", "fields": [2]}}
rollback_errors:
  description: On a failure, the undo steps that failed in turn (empty when everything was restored).
  returned: failure
  type: list
  elements: str
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
state_record:
  description: What was recorded in O(state_path) around this change (in check mode, what would
    be) - C(path), C(run_id), the item keys C(recorded), C(updated) and C(dropped), and whether
    the file was C(written).
  returned: when O(state_path) is given and a change was planned
  type: dict
  sample: {"path": "/var/lib/gpufleet-tuning/state.json", "run_id": "20261206T101500Z-1a2b3c",
           "recorded": ["sysctl:vm.swappiness"], "updated": [], "dropped": [], "written": true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(sysctl_profile.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return sysctl_profile.run(params, check_mode, sysctl_profile.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
