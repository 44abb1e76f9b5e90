#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cpu_power
short_description: Keep CPUs out of deep idle states and on a chosen cpufreq governor, at runtime
version_added: 0.1.0
description:
  - Deep CPU idle states (C6 and deeper) add tens to hundreds of microseconds of wake-up
    latency to every thread that feeds the GPUs. This module disables every idle state whose
    exit latency is above O(max_idle_latency_us) on every online CPU, through the
    C(/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable) files, and sets the cpufreq
    governor and the energy-performance preference (EPP) of every cpufreq policy.
  - Everything is read first (idle driver, each state's name, exit latency and disable flag per
    CPU, each policy's governor and EPP); only values that differ are written, each one is read
    back, and a failure restores every value and file this call already changed.
  - The three parts (idle states, governor, EPP) are planned independently. A part whose sysfs
    does not exist here (no cpuidle driver, as in VMs without ACPI C-states; no cpufreq driver,
    as on many VMs and cloud GPU machines; a driver without EPP such as acpi-cpufreq) is
    reported in RV(not_applicable) and RV(skipped_keys), not treated as an error. When no
    part applies the result is C(skipped) with the reasons in C(msg).
  - The settings last until reboot. With O(persist=true) a oneshot systemd unit,
    C(gpufleet-cpu-power.service), runs a small POSIX sh script,
    C(/usr/local/sbin/gpufleet-cpu-power), at every boot; it applies the same rule (reading
    each state's latency then, so another kernel's state table is handled) without Python or
    Ansible. The unit is enabled with the C(multi-user.target.wants) symlink, so no running
    systemd is needed.
  - What runs as root at boot stays root's. The script, the unit and the enable symlink are
    written owned by root (0:0) with modes 0755 and 0644, and the directories created for
    them 0755, whatever the umask; a file or link of these found with another owner or mode
    is a change, shown in the diff (C(<path> owner and mode)) and given back to root. Before
    writing, the module checks that no user but root can change where they land or the shell
    the script names (C(/bin/sh)). Every directory and symlink on the way to each, and the
    shell itself, must be owned by root and not writable by group or others (a sticky
    directory such as C(/tmp) does not count as safe). Otherwise it fails before changing
    anything, naming the offending path with its owner and mode; O(persist=false) still
    applies the settings at runtime.
  - Offline CPUs are left alone and reported; the boot unit covers a CPU that is online at the
    next boot. A CPU brought online later keeps all its states until the script is run again
    (C(/usr/local/sbin/gpufleet-cpu-power), or C(systemctl restart gpufleet-cpu-power)) or the
    module runs again. A cpufreq policy whose CPUs are all offline is inactive; the kernel
    (5.19 and later) answers EBUSY to every one of its files, older kernels show no affected
    CPUs. Either way it is reported in RV(skipped_keys) and left alone, by the module and by the
    boot script.
  - Inside a container (detected from live evidence, never from a stale C(/.dockerenv) alone)
    the module reads and reports, but does not write, since idle states and cpufreq belong to
    the host. When nothing needs changing the result is ok and unchanged. A runtime change
    (a state to disable or enable, a governor or EPP to set) fails the call, naming each state
    and policy that would change, and writes nothing (in check mode too). The boot unit is not
    installed or removed there, and RV(skipped_keys) says so under C(boot unit), since a unit
    written in a container runs when the container starts, not when the host boots. O(allow_in_container)
    lifts all of this where the detection is wrong.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Reads everything and reports the planned values and files; writes nothing.
  diff_mode:
    support: full
    description: Shows, per idle state, the CPUs on which it is disabled before and after, the
      governor and EPP per group of CPUs, and the boot unit files.
  platform:
    support: full
    platforms: posix
    description: Linux with /sys/devices/system/cpu.
options:
  max_idle_latency_us:
    description:
      - Exit-latency bound in microseconds. Every idle state whose C(latency) is above it is
        disabled on every online CPU; states at or below it are kept.
      - V(0) keeps only the polling state (C(POLL), latency 0), which busy-waits.
      - Null leaves idle states alone (they are still read and reported).
    type: int
  enable_within_bound:
    description:
      - V(false) never enables a state; a state at or below the bound that is disabled stays
        disabled, since the kernel, a driver default or an operator may have disabled it on
        purpose.
      - V(true) also enables every disabled state at or below the bound, making the bound the
        whole truth (raising it later re-enables the states it now admits).
    type: bool
    default: false
  governor:
    description:
      - The cpufreq governor for every active policy, for example V(performance).
      - Refused, before anything is written, when a policy does not list it in
        C(scaling_available_governors); the error lists what each policy offers.
      - Null leaves the governor alone.
    type: str
  energy_performance_preference:
    description:
      - The EPP for every active policy that exposes C(energy_performance_preference)
        (intel_pstate and amd-pstate in active mode), for example V(performance).
      - Refused, before anything is written, when a policy does not list it in
        C(energy_performance_available_preferences), and when the performance governor pins
        EPP (intel_pstate, amd-pstate-epp accept only V(performance) then). V(default) is
        refused because it reads back as another name.
      - Null leaves EPP alone.
    type: str
  persist:
    description:
      - Install and enable the boot unit and its script so the settings are reapplied at every
        boot. The unit is written only when at least one requested part applies on this
        machine.
      - V(false) removes the unit, its enable symlink and the script, if an earlier run
        installed them; the runtime values stay until reboot.
      - Inside a container (without O(allow_in_container)) the unit is neither installed nor
        removed; RV(skipped_keys) says what the plan would have done.
      - Installing fails, before anything is changed, where a user other than root could
        change the script, the unit, a directory above them or C(/bin/sh) (see the
        description).
    type: bool
    default: true
  allow_in_container:
    description:
      - Write (idle states, governor, EPP, boot unit) even where a container is detected. Only
        for a host that the detection wrongly calls a container; in a real privileged container
        the runtime writes change the host's CPUs, and the boot unit runs at every start of the
        container.
      - V(false) (the default) reads and reports inside a container, fails when a runtime value
        would change, and leaves the boot unit alone.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - Disabling states through sysfs acts at once and needs no daemon; the alternatives are a
    process holding C(/dev/cpu_dma_latency) open (tuned) or the kernel parameters
    C(intel_idle.max_cstate=) and C(processor.max_cstate=), which need a reboot.
  - A resident tuned, power-profiles-daemon or cpufrequtils also writes the governor and EPP;
    make it agree or disable it, or the values will change behind this module's back.
  - The boot unit runs after module loading and udev's coldplug; a cpufreq driver that
    registers later than that is not covered until the script runs again.
  - RV(changes) names an idle state change C(cpuLIST/stateK (NAME\) disable) and a cpufreq one
    C(policyLIST/scaling_governor) or C(policyLIST/energy_performance_preference), LIST in the
    kernel's range form (C(0-3,8)); one record covers the CPUs or policies that had the same
    value before and got the same after, so a revert writes its C(before) back to each.
seealso:
  - name: CPU idle time management (kernel documentation)
    description: The cpuidle sysfs interface, including the per-state disable files.
    link: https://docs.kernel.org/admin-guide/pm/cpuidle.html
  - name: CPU performance scaling (kernel documentation)
    description: cpufreq policies, governors and their sysfs attributes.
    link: https://docs.kernel.org/admin-guide/pm/cpufreq.html
"""

EXAMPLES = r"""
- name: Inference node - no state slower than 10 us to leave, performance governor and EPP
  gpufleet.tuning.cpu_power:
    max_idle_latency_us: 10
    governor: performance
    energy_performance_preference: performance

- name: Only the governor, runtime only
  gpufleet.tuning.cpu_power:
    governor: performance
    persist: false

- name: Remove the boot unit again (the runtime values stay until reboot)
  gpufleet.tuning.cpu_power:
    persist: false

- name: A host that the container detection gets wrong (read the evidence in the result first)
  gpufleet.tuning.cpu_power:
    max_idle_latency_us: 10
    allow_in_container: true
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
    - {"area": "cpu_power", "kind": "value", "target": "cpu0-191/state3 (C6) disable", "before": "0", "after": "1"}
    - {"area": "cpu_power", "kind": "value", "target": "policy0-191/scaling_governor", "before": "powersave",
       "after": "performance"}
    - {"area": "cpu_power", "kind": "file", "target": "/usr/local/sbin/gpufleet-cpu-power", "before": null,
       "after": {"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "size": 3012, "mode": "0755"}}
    - {"area": "cpu_power", "kind": "file", "target": "/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service",
       "before": null, "after": {"link": "../gpufleet-cpu-power.service"}}
idle_driver:
  description: The cpuidle driver (C(intel_idle), C(acpi_idle), C(none)), null without cpuidle.
  returned: always
  type: str
  sample: intel_idle
idle_governor:
  description: The cpuidle governor, null when not shown.
  returned: always
  type: str
  sample: menu
online_cpus:
  description: The online CPUs, in the kernel's range notation (V(none) when empty).
  returned: always
  type: str
  sample: 0-63
offline_cpus:
  description: CPUs the kernel lists but are offline, left alone (V(none) when empty).
  returned: always
  type: str
  sample: none
max_idle_latency_us:
  description: The bound applied, null when idle states were left alone.
  returned: always
  type: int
  sample: 10
states:
  description:
    - One row per idle state, grouping the CPUs that agree on its index, name and latency;
      CPUs with a different state table (hybrid CPUs) get their own rows.
  returned: success
  type: list
  elements: dict
  contains:
    state:
      description: The sysfs directory name, C(stateK).
      type: str
    name:
      description: The state's name (C(POLL), C(C1), C(C1E), C(C6)).
      type: str
    desc:
      description: The driver's description of the state.
      type: str
    latency_us:
      description: Exit latency in microseconds.
      type: int
    residency_us:
      description: Target residency in microseconds (null when not shown).
      type: int
    action:
      description: V(disable) (above the bound), V(keep) (at or below it, left as it was),
        V(enable) (at or below it, with O(enable_within_bound)), V(unmanaged) (no bound).
      type: str
    cpus:
      description: The CPUs of this row.
      type: str
    disabled_before:
      description: CPUs on which the state was disabled before this run (V(none) for none).
      type: str
    disabled_after:
      description: CPUs on which it is disabled after this run (planned in check mode).
      type: str
    enabled_count:
      description: How many CPUs of this row may enter the state after this run.
      type: int
    disabled_count:
      description: How many CPUs of this row are kept out of it after this run.
      type: int
  sample:
    - {state: state1, name: C1, desc: "MWAIT 0x00", latency_us: 2, residency_us: 2, action: keep,
       cpus: 0-63, disabled_before: none, disabled_after: none, enabled_count: 64, disabled_count: 0}
    - {state: state3, name: C6, desc: "MWAIT 0x20", latency_us: 170, residency_us: 600, action: disable,
       cpus: 0-63, disabled_before: none, disabled_after: 0-63, enabled_count: 0, disabled_count: 64}
policies:
  description: Each cpufreq policy with its CPUs, driver, and governor and EPP before and after.
  returned: success
  type: list
  elements: dict
  sample:
    - {policy: policy0, active: true, cpus: "0", driver: intel_pstate, governor_before: powersave,
       governor_after: performance, available_governors: [performance, powersave],
       epp_before: balance_performance, epp_after: performance,
       available_epp: [default, performance, balance_performance, balance_power, power]}
governor_before:
  description: Governor before this run, mapped to the CPUs that had it.
  returned: success
  type: dict
  sample: {"powersave": "0-63"}
governor_after:
  description: Governor after this run (planned in check mode), mapped to its CPUs.
  returned: success
  type: dict
  sample: {"performance": "0-63"}
epp_before:
  description: EPP before this run, mapped to its CPUs; empty without EPP.
  returned: success
  type: dict
  sample: {"balance_performance": "0-63"}
epp_after:
  description: EPP after this run, mapped to its CPUs; a governor switch can move it too.
  returned: success
  type: dict
  sample: {"performance": "0-63"}
not_applicable:
  description: Each part (C(idle_states), C(governor), C(energy_performance_preference)) that
    did nothing here, with the reason (not requested, or no such sysfs on this machine).
  returned: always
  type: dict
  sample: {"governor": "no cpufreq policies in sysfs", "energy_performance_preference": "not requested"}
skipped_keys:
  description:
    - Requested parts that do not apply here, offline CPUs and inactive policies, each with
      the reason.
    - C(boot unit) when the boot unit was left alone inside a container, with the evidence and
      what the plan would have done.
    - Named C(skipped_keys), not C(skipped), because Ansible reports any task whose result has
      a true C(skipped) as skipped, which would hide the changes made to the other parts.
  returned: always
  type: dict
  sample: {"offline CPUs 6-7": "left alone (their files may be absent)"}
persisted:
  description:
    - Whether the boot unit and script are installed as wanted after this run.
    - Inside a container the unit is left alone, so this is false when it would have been
      installed and true when it would have been removed.
  returned: success
  type: bool
unit_path:
  description: The boot unit's path.
  returned: always
  type: str
  sample: /etc/systemd/system/gpufleet-cpu-power.service
script_path:
  description: The boot script's path.
  returned: always
  type: str
  sample: /usr/local/sbin/gpufleet-cpu-power
container:
  description: Whether the module runs inside a container, and the evidence.
  returned: always
  type: dict
  sample: {"detected": false, "kind": null, "evidence": [], "ignored": []}
reboot_required:
  description: Always false; every setting takes effect at once.
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

from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(cpu_power.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return cpu_power.run(params, check_mode, cpu_power.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
