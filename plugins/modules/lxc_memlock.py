#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lxc_memlock
short_description: Set the locked-memory limit of LXC or Proxmox containers in their configs
version_added: 0.1.0
description:
  - One container (O(vmid), O(name) or O(path)), or several (O(select) picks this host's
    containers as M(gpufleet.tuning.lxc_containers) finds them, O(containers) names more), each
    config once.
  - Sets C(lxc.prlimit.memlock) in a container's config on the host, so the container's init
    and everything it starts may lock that much memory. Model servers started with C(--mlock)
    and RDMA (GPUDirect, NCCL over InfiniBand) fail with ENOMEM under LXC's default, and a
    container cannot raise its own hard limit.
  - Edits only the live section of the file, everything before the first line that starts
    with C([). Snapshot sections and C([pve:pending]) are never touched, even when they hold
    their own C(lxc.*) lines.
  - "An existing C(lxc.prlimit.memlock) line written with C(:) or C(=) and any spacing is
    updated where it is, and later duplicates in the live section are removed. Without one, a
    line is added at the end of the live section in the file's own style, C(key: value) for
    Proxmox files and C(key = value) for plain LXC files, decided from the file's existing
    lines. Every other byte stays as it was, including comments, the Proxmox description
    lines, the order of lines, CRLF line ends and a missing final newline."
  - An existing value is read the way LXC reads it; C(-1) means unlimited there (LXC parses
    it with strtoull, which wraps it to RLIM_INFINITY), so it counts as already unlimited and
    is left as it is.
  - The file is replaced through a temporary file in the same directory and a rename, with no
    chmod or chown at all, because pmxcfs (C(/etc/pve)) refuses both; the backup is written
    the same way, and keeps the config's mode (a C(0600) config gets a C(0600) backup). A
    config that is a symlink is edited through the link, which stays a link. On a failed write
    or read-back the backup is removed and the config is put back byte for byte, mode and owner
    included (for a plain LXC config; C(/etc/pve) has no modes to keep).
  - The file is read and edited as bytes, so a config that is not UTF-8 (a hand-written
    Latin-1 comment) is edited exactly; the diff shows such bytes as U+FFFD.
  - "On a Proxmox host the module holds Proxmox's own config lock for the container while it
    writes. A container Proxmox has locked (C(lock: backup), C(snapshot), C(migrate),
    C(rollback), C(mounted), C(create), ...) is left as it is while there is something to do
    (an edit or a restart): with O(on_locked=fail) the task fails, with O(on_locked=pending) it
    reports RV(pending) and RV(pending_reason) and succeeds, so the rest of a play goes on."
  - On a Proxmox host C(/var/lib/lxc/VMID/config) is regenerated from C(/etc/pve/lxc/VMID.conf)
    at every start, so O(name) or O(path) naming it is refused with a pointer to O(vmid).
  - The new limit reaches a running container only when it is started again. Whether it runs
    is read from the kernel (its processes' cgroups under C(/proc) and C(/sys/fs/cgroup));
    C(pct status) or C(lxc-info) are asked only when the kernel shows nothing and they exist.
    The limit the running container's init has is read from C(/proc/PID/limits), so a restart
    still pending from an earlier run is reported as well.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads the config and the container's state and reports the planned edit;
      writes nothing.
  diff_mode:
    support: full
    description: Shows the limit before and after, and the config file before and after.
  platform:
    support: full
    platforms: posix
    description: A Linux host running LXC or Proxmox VE containers.
options:
  vmid:
    description:
      - Proxmox container ID; the config is C(/etc/pve/lxc/VMID.conf).
      - One container is named by exactly one of O(vmid), O(name) and O(path); several by
        O(select) and O(containers) instead (not with these).
    type: int
  name:
    description:
      - Plain LXC container name; the config is C(/var/lib/lxc/NAME/config), or
        C(LXCPATH/NAME/config) when only the C(lxc.lxcpath) of C(/etc/lxc/lxc.conf) holds it.
    type: str
  path:
    description:
      - Explicit path of the config file. For C(NNN.conf) the container is taken to be the
        Proxmox container NNN, for C(.../NAME/config) the LXC container NAME; other file
        names work, but whether the container runs cannot be told, so a change is then
        reported as needing a restart.
    type: path
  select:
    description:
      - Raise every container of this host the selector picks, as M(gpufleet.tuning.lxc_containers)
        finds and selects them (V(gpu) - containers with NVIDIA GPUs passed through -, V(all),
        V(none), V(tag:NAME), IDs, names). The discovery is returned as RV(discovery).
      - With several containers the result is shaped like a looped task (RV(results), one per
        container). Each container is raised all or nothing as one run would; one that fails
        does not stop the others, and the task fails after them, naming each (the ones that
        changed keep their records).
    type: list
    elements: str
  exclude:
    description: Containers O(select) leaves out, in its terms.
    type: list
    elements: str
    default: []
  containers:
    description:
      - More containers, each a dict with one of C(vmid), C(name) or C(path), optionally its own
        C(limit) and C(guest) (the inventory host the container is; then C(path) is refused).
        A container also picked by O(select) is raised once, with the entry's C(limit).
    type: list
    elements: dict
    default: []
  limit:
    description:
      - The limit, in bytes. V(unlimited), a plain number of bytes such as V(68719476736), or
        V(SOFT:HARD) where each half is V(unlimited) or a number and SOFT is not above HARD.
      - Size suffixes (V(64G)) are refused, not converted, because LXC reads a plain number
        and would refuse to start the container; the error names the number to write.
        V(-1) and V(infinity) are refused too; write V(unlimited).
      - Written in canonical form, a pair with equal halves as a single value.
    type: raw
    default: unlimited
  backup:
    description:
      - Save the config as it was beside it (C(FILE.YYYYmmdd-HHMMSS.gpufleet.bak)) before
        changing it. Under C(/etc/pve) the backup is replicated to every cluster node like the
        config itself.
    type: bool
    default: true
  on_locked:
    description:
      - What to do when Proxmox has locked the container (C(lock:) in its config, or its config
        lock held by a C(pct) operation for more than 10 seconds) and the limit needs an edit
        or a restart.
      - V(pending) changes nothing, returns RV(pending=true) with the reason and a warning,
        and succeeds, so the rest of a play goes on; run again when the operation has
        finished. V(fail) fails the task.
      - V(pending) is the default because such a lock is routine (a nightly backup) and says
        nothing about the host; the gpufleet.tuning.host role passes C(host_lxc_memlock_on_locked).
    type: str
    choices: [fail, pending]
    default: pending
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - Raising a limit above the hard limit of the process that starts the container needs
    CAP_SYS_RESOURCE. Proxmox and LXC's systemd units run with it; a container started from a
    shell that lacks it fails to start with "Failed to set limit memlock".
  - C(lxc-stop --reboot) restarts a container with the configuration it was started with, so
    it does not apply the new limit; stop and start it (C(pct reboot) stops and starts).
  - Inside the container, systemd services still need C(LimitMEMLOCK); the
    gpufleet.tuning.container role sets that.
  - What an unlimited limit trades away. Locked memory (mlock, RDMA and GPU pinned buffers)
    cannot be swapped out or reclaimed by the host, and the container's memory cgroup limit is
    the only bound left. A container with C(unlimited) can pin host RAM up to that limit (all of
    it when the container has none), leaving the host and the other guests to swap or be
    killed by the OOM killer. Give it only to the containers that serve models (the
    gpufleet.tuning.lxc_containers C(gpu) selector), keep a memory limit on them, or set a
    byte limit (C(SOFT:HARD)) sized to the model instead of C(unlimited).
seealso:
  - module: gpufleet.tuning.lxc_containers
    description: Finds the containers of a host and selects those to give the limit.
  - name: lxc.container.conf(5)
    description: The lxc.prlimit keys.
    link: https://linuxcontainers.org/lxc/manpages/man5/lxc.container.conf.5.html
  - name: Proxmox VE container configuration
    description: The file format, snapshots and raw LXC keys.
    link: https://pve.proxmox.com/wiki/Manual:_pct.conf
"""

EXAMPLES = r"""
- name: Unlimited locked memory for Proxmox container 101
  gpufleet.tuning.lxc_memlock:
    vmid: 101
  register: memlock

- name: Restart it when the new limit is not live yet (pct reboot stops and starts it)
  ansible.builtin.command:
    argv: [pct, reboot, "101"]
  when: memlock.restart_required
  changed_when: true

- name: A plain LXC container, 64 GiB soft and unlimited hard
  gpufleet.tuning.lxc_memlock:
    name: serving
    limit: "68719476736:unlimited"

- name: Raise it, reporting a container a backup holds locked as pending (the default)
  gpufleet.tuning.lxc_memlock:
    vmid: 101
  register: memlock

- name: Say which container waits for its lock
  ansible.builtin.debug:
    msg: "{{ memlock.pending_reason }}"
  when: memlock.pending

- name: Every container with an NVIDIA GPU passed through, and container 105 with a byte limit
  gpufleet.tuning.lxc_memlock:
    select: [gpu]
    containers:
      - vmid: 105
        limit: "68719476736"
    state_path: /var/lib/gpufleet-tuning/state.json
  register: memlock_all

- name: A config kept elsewhere, without a backup
  gpufleet.tuning.lxc_memlock:
    path: /srv/lxc/serving/config
    backup: false
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
    - {"area": "lxc_memlock", "kind": "value", "target": "/etc/pve/lxc/101.conf lxc.prlimit.memlock",
       "before": "65536", "after": "unlimited"}
    - {"area": "lxc_memlock", "kind": "file", "target": "/etc/pve/lxc/101.conf",
       "before": {"sha256": "9f2c...", "size": 612, "mode": "0640"},
       "after": {"sha256": "41ab...", "size": 643, "mode": "0640"}}
path:
  description: The config file.
  returned: always
  type: str
  sample: /etc/pve/lxc/101.conf
container_name:
  description: The LXC name of the container (a Proxmox container's is its ID); null when the
    path does not tell.
  returned: always
  type: str
  sample: "101"
manager:
  description: Who runs the container, V(proxmox) (restart with C(pct reboot ID)) or V(lxc)
    (restart with C(lxc-stop -n NAME) and C(lxc-start -n NAME)).
  returned: always
  type: str
  sample: proxmox
lxc_path:
  description: The LXC path holding the container (C(lxc-start -P)), for V(lxc) containers;
    null for Proxmox ones or when the path does not tell.
  returned: always
  type: str
  sample: /var/lib/lxc
style:
  description: "The file's style, V(proxmox) (C(key: value)) or V(lxc) (C(key = value))."
  returned: always
  type: str
  sample: proxmox
limit_before:
  description:
    - The limit the live section gave the container before this run, in canonical form
      (C(-1) reads as V(unlimited)); null when it sets none, so LXC's default applies. When
      LXC cannot read the value, its raw text (see RV(limit_before_error)).
  returned: always
  type: str
  sample: "65536"
limit_before_raw:
  description: The value as written on the line that decided RV(limit_before) (the last one).
  returned: always
  type: str
  sample: "-1"
limit_before_error:
  description: Why LXC would refuse the existing value (the container would not start).
  returned: when the existing value is not one LXC can read
  type: str
limit_after:
  description: The limit the live section sets after this run (in check mode, would set); for
    a RV(pending) container, the limit it still has (RV(limit_before)).
  returned: always
  type: str
  sample: unlimited
limit_wanted:
  description: The limit asked for (O(limit)) in canonical form.
  returned: always
  type: str
  sample: unlimited
duplicates_removed:
  description: Extra C(lxc.prlimit.memlock) lines of the live section that were (or would be)
    removed.
  returned: always
  type: int
  sample: 0
running:
  description: Whether the container runs now; null when that cannot be told.
  returned: always
  type: bool
running_evidence:
  description: What RV(running) rests on.
  returned: always
  type: str
  sample: 14 process(es) in the payload cgroup of 101 (init PID 4242)
limit_running:
  description: The limit the running container's init has now (from /proc), or null.
  returned: always
  type: str
  sample: "8388608"
restart_required:
  description: True when the container runs and does not have the configured limit yet (it
    changed in this run, or the running init's limit is below it); a stop and start applies it.
    Always false for a RV(pending) container.
  returned: always
  type: bool
pending:
  description: True when the container was left as it was because Proxmox has locked it and
    O(on_locked=pending); run again when the lock is gone.
  returned: always
  type: bool
  sample: false
pending_reason:
  description: Why the container is RV(pending) (the lock and what holds it); null otherwise.
  returned: always
  type: str
  sample: "container 101 is locked by Proxmox (lock: backup): a backup (vzdump) is running; run
    again when it has finished (or `pct unlock 101` if the lock is stale)"
lock:
  description: The C(lock) value of a Proxmox config's live section, or null.
  returned: always
  type: str
  sample: backup
backup_file:
  description: The backup written in this run, or null.
  returned: always
  type: str
  sample: /etc/pve/lxc/101.conf.20261130-101500.gpufleet.bak
results:
  description:
    - With O(select) or O(containers), one result per container, each with the keys above
      (RV(path), RV(container_name), RV(limit_before), RV(changes), RV(restart_required),
      RV(pending), ...; C(failed) and C(msg) for one that failed) and C(item), the container
      as it was chosen (C(label), C(source), C(guest) when the inventory named it, C(limit)).
      The keys above are then not returned at the top level.
  returned: with O(select) or O(containers)
  type: list
  elements: dict
discovery:
  description: With O(select), the containers found and selected, as M(gpufleet.tuning.lxc_containers) returns them.
  returned: with O(select)
  type: dict
msg:
  description: With O(select) or O(containers), how many containers were raised.
  returned: with O(select) or O(containers)
  type: str
  sample: 2 container(s)
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

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(lxc_memlock.ARGUMENT_SPEC)


def main():
    # One container or a selection: the engine checks which (its message names both ways).
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[lxc_memlock.TARGET_OPTIONS],
                           supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return lxc_memlock.run(params, check_mode, lxc_memlock.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
