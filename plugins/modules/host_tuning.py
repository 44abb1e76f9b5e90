#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_tuning
short_description: Tune a GPU host in one call - every part, its plan, its record and the audit's read
version_added: 0.3.0
description:
  - Runs the collection's host tuning modules (the I(parts)) in one module call, with the
    options each takes on its own, and keeps the node's before-state record around them. What
    a play would do in a dozen tasks (read the node for the audit, plan every module in check
    mode, record the before-state, apply each module, record what changed) costs one module run
    per host; a module run costs far more than the work of any part (see the collection's
    README, "Speed of a tuning pass").
  - In order, as the roles ran them one by one; validate every part's options against its
    module's own argument spec (nothing is read before all inputs are valid); read the node's
    facts (O(facts)); plan every part in check mode; record the before-state of what the parts
    in O(apply) will change (O(state_path)); apply those parts in order, each all or nothing;
    record what was changed.
  - A part of O(apply) that cannot be planned fails the call before anything is written. A part
    that fails while applying stops the parts after it; the parts before it stay applied and are
    in the record (C(modules) says what they changed), so M(gpufleet.tuning.tuning_revert) or a
    rollout's rescue can undo them. A part only planned (not in O(apply)) that cannot be planned
    is reported failed in C(plan), and the call goes on.
  - In check mode the node's facts are read and every part is planned; nothing is written. The
    plan of the parts in O(apply) is then their result.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Plans every part (each module in check mode) and writes nothing, the record included.
  diff_mode:
    support: full
    description: The parts' own diffs, in the order the parts ran.
  platform:
    support: full
    platforms: posix
    description: Linux; the parts read sysfs and procfs and write as root.
options:
  parts:
    description:
      - The parts of the tuning, each with the options its module takes on its own (see the module
        of that name), V(sysctl_profile), V(pcie_maxreadreq), V(pcie_acs),
        V(cpu_power), V(nvidia_peermem) (runtime), V(nvidia_driver_options) and V(kernel_cmdline)
        (they take effect after a reboot).
      - V(lxc_memlock) finds the host's LXC containers and raises their locked-memory limit. It takes
        M(gpufleet.tuning.lxc_containers)' C(select) and C(exclude), M(gpufleet.tuning.lxc_memlock)'s
        C(limit), C(backup) and C(on_locked), C(inventory) (containers of this host named by the
        inventory, each C(guest) and C(vmid) or C(name), optionally C(limit)) and C(containers)
        (more containers, each one of C(vmid), C(name) or C(path), optionally C(limit)); each
        config is raised once (the filter M(gpufleet.tuning.lxc_memlock_targets) documents the merge).
      - A part given as null is left out on purpose (a role switch) and reported as not enabled.
        A null option of a part counts as not given (its default applies).
    type: dict
    default: {}
  apply:
    description:
      - The parts to apply (in check mode, to report as this run's result). The other parts of
        O(parts) are only planned (C(plan)), for an audit.
      - Default, every part of O(parts).
    type: list
    elements: str
  facts:
    description:
      - Read the node's facts first, with M(gpufleet.tuning.node_facts)' options (C(sections),
        C(sysctl_keys), C(serving_unit)), and return them as C(facts). Null, no facts.
    type: dict
  audit:
    description:
      - Read the node's facts (C(facts) here, the options of O(facts)) and judge them on the
        controller in the same task, as M(gpufleet.tuning.audit_judge) does - the rules, the
        comparison with the audit already in O(audit.path), C(audit.json) and
        C(system-improve.md) written there - and return the audit as C(audit). The audit role
        passes it when the host role tunes in the same play, so a pass costs one task per host
        for both.
      - Checked before the module runs; handled by the action plugin on the controller, never
        sent to the node. Judged also when a part failed (the facts are read before anything is
        written); the files are written in check mode too (a record on the controller, not a
        change to the host, and not in C(changed)). A failure to judge or write fails the task.
      - Not with O(facts) (give the read's options once, here).
    type: dict
    suboptions:
      facts:
        description: M(gpufleet.tuning.node_facts)' options for the read (as O(facts) takes them).
        type: dict
        default: {}
      path:
        description: The host's audit folder on the controller, an absolute path (the filter
          P(gpufleet.tuning.artifact_dir#filter) gives it); made when missing. A symbolic link
          there is refused before anything is written.
        type: path
        required: true
      host:
        description: The name recorded as the audit's C(host). Default, the inventory name.
        type: str
      params:
        description: The settings the rules compare with (the audit role passes the host role's).
        type: dict
        default: {}
      rules_file:
        description: The rules file. Default, the audit role's C(files/rules.yml) of this collection.
        type: path
      rules_extra:
        description: More rules, evaluated after those of O(audit.rules_file).
        type: list
        elements: dict
        default: []
      rules_disabled:
        description: Ids of rules not to evaluate.
        type: list
        elements: str
        default: []
      planned_modules:
        description:
          - Phase (C(runtime), C(reboot_required)) to the result names whose plan the audit
            reports (filter P(gpufleet.tuning.audit_planned_tuning#filter)). Default, every
            result of the call by phase.
        type: dict
      plan_in_container:
        description: Report the plan also on a node the facts find to be a container.
        type: bool
        default: false
      mode:
        description: Permission bits of the two files, an octal string.
        type: str
        default: "0644"
  role_arguments:
    description:
      - Roles of this collection (V(gpufleet.tuning.host), V(gpufleet.tuning.audit)) whose
        variables are checked against their C(main) argument spec before anything else is done, as
        M(gpufleet.tuning.role_arguments) checks them (the same validator as Ansible's own role
        validation, one error line per bad value, each naming its role). A bad value fails the host
        before the node is read or written. Null or empty, no check.
      - Handled by the action plugin on the controller, never sent to the node. C(playbooks/tune.yml)
        passes the two roles it imports with C(rolespec_validate=false), so the check costs no task
        of its own.
    type: list
    elements: str
  state_path:
    description:
      - The node's record of what the collection changed (M(gpufleet.tuning.tuning_state)'s C(path)).
        Given, the before-state of what O(apply) will change is recorded before anything is
        written, and what was changed after. Null, nothing is recorded.
    type: path
  run_id:
    description: The run's id, kept with every recorded item; a new one when left out.
    type: str
notes:
  - The parts run in one Python process on the node, with the same code as the modules of the same
    names; a module run per part would cost each its own start-up (on the test machines about
    0.2 s of CPU on the node and 0.05 s on the controller, per host and part).
  - The collection's code the parts run is compiled once per node and release and kept in
    /var/cache/gpufleet-tuning/bytecode (root's, 0700; Python cannot cache bytecode for code
    imported from the module's zip). With SSH pipelining, Ansible's own module_utils and this
    module are kept there too (the collection's module action installs the cache before the
    AnsiballZ wrapper imports them). Check mode reads it and writes nothing; outside check mode
    a missing entry is written, and entries unused for 30 days are dropped.
seealso:
  - module: gpufleet.tuning.sysctl_profile
  - module: gpufleet.tuning.pcie_maxreadreq
  - module: gpufleet.tuning.pcie_acs
  - module: gpufleet.tuning.cpu_power
  - module: gpufleet.tuning.lxc_containers
  - module: gpufleet.tuning.lxc_memlock
  - module: gpufleet.tuning.nvidia_peermem
  - module: gpufleet.tuning.nvidia_driver_options
  - module: gpufleet.tuning.kernel_cmdline
  - module: gpufleet.tuning.node_facts
  - module: gpufleet.tuning.tuning_state
"""

EXAMPLES = r"""
- name: Tune the runtime parts, plan the reboot-required ones, read the facts, keep the record
  gpufleet.tuning.host_tuning:
    parts:
      sysctl_profile:
        name: inference
        settings:
          vm.swappiness: 10
          kernel.numa_balancing: 0
        on_unwritable: skip
      pcie_maxreadreq:
        size: 4096
      cpu_power:
        max_idle_latency_us: 10
      lxc_memlock:
        limit: unlimited
      nvidia_peermem:
        only_with_rdma: true
      kernel_cmdline:
        present: [iommu=pt]
    apply: [sysctl_profile, pcie_maxreadreq, cpu_power, lxc_memlock, nvidia_peermem]
    facts: {}
    state_path: /var/lib/gpufleet-tuning/state.json
  register: tuned

- name: Tune and judge the node's audit in the same task (the audit role's files on the controller)
  gpufleet.tuning.host_tuning:
    parts:
      sysctl_profile:
        name: inference
        settings:
          vm.swappiness: 10
    audit:
      facts:
        sysctl_keys: [vm.swappiness]
      path: /srv/gpufleet/artifacts/gpu-node-07
      params:
        sysctl:
          vm.swappiness: 10
  register: tuned_and_audited

- name: Read the runtime tuning back (what would change is drift)
  gpufleet.tuning.host_tuning:
    parts:
      sysctl_profile:
        name: inference
        settings:
          vm.swappiness: 10
  check_mode: true
  register: readback
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
    - {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"}
modules:
  description:
    - The result of each part this run applied (in check mode, planned), keyed by module name, in
      the shape that module returns on its own. The LXC part is C(lxc_containers) (the discovery)
      and C(lxc_memlock) (loop-shaped, C(results) per container, each with its C(item)).
    - After a failure, the parts applied before it with their C(changes) (they stay applied, and
      recorded) and the failed part (C(failed), C(msg)).
  returned: always
  type: dict
  sample: {"sysctl_profile": {"changed": true, "changes": [], "changed_keys": ["vm.swappiness"]}}
plan:
  description: Every part's check-mode result, keyed by module name (a part that could not be
    planned has C(failed) and C(msg); one given as null has C(skipped)). What an audit reports
    as planned.
  returned: always
  type: dict
applied:
  description: The parts applied (in check mode, planned as this run's result), in order.
  returned: always
  type: list
  elements: str
  sample: [sysctl_profile, cpu_power]
failed_part:
  description: The part that failed.
  returned: failure
  type: str
facts:
  description:
    - The node's facts, read before anything was written (M(gpufleet.tuning.node_facts)' C(facts)).
    - With O(audit), they are the audit's (C(audit.facts)) and not returned here as well.
  returned: when O(facts) is given
  type: dict
audit:
  description:
    - The host's audit (what C(audit.json) holds - C(findings), C(counts), C(planned), C(facts),
      C(since) and the rest, as M(gpufleet.tuning.audit_judge) returns it), with C(path) and
      C(files) (what was written).
  returned: when O(audit) is given and the facts were read
  type: dict
argument_errors:
  description: The errors O(role_arguments) found, one per bad value, each naming its role
    (nothing was read or written).
  returned: when a variable of O(role_arguments) failed its check
  type: list
  elements: str
facts_timings_ms:
  description: How long each facts section took.
  returned: when O(facts) is given
  type: dict
run_id:
  description: The run id (kept in the record when O(state_path) is given).
  returned: always
  type: str
state_before:
  description: M(gpufleet.tuning.tuning_state)'s result for the before-state record.
  returned: when O(state_path) is given and not in check mode
  type: dict
state:
  description: M(gpufleet.tuning.tuning_state)'s result for the record of what was changed (in check mode, what would be recorded).
  returned: when O(state_path) is given
  type: dict
state_changed:
  description: The record on the node changed (its file record is in C(changes)).
  returned: always
  type: bool
reboot_required:
  description: A part applied needs a reboot to take effect (or one configured earlier is not running yet).
  returned: always
  type: bool
restart_required:
  description: A part applied needs a restart (of an LXC container) to take effect.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import bytecode_cache


def main():
    # This collection's code is imported through the node's bytecode cache (AnsiballZ ships it as
    # source, compiled at every run otherwise): the finder goes in before the engine is imported,
    # undecided, and writes what it compiled only once the run is known not to be check mode.
    cache = bytecode_cache.install(write=None)
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpufleet.tuning.plugins.module_utils import host_tuning
    from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
    from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome

    module = AnsibleModule(argument_spec=host_tuning.ARGUMENT_SPEC, supports_check_mode=True)
    cache.commit(not module.check_mode)
    outcome.finish(module, lambda: host_tuning.run(module.params, module.check_mode, host_tuning.Paths(),
                                                   commands.Commands(module)))


if __name__ == "__main__":
    main()
