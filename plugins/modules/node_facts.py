#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_facts
short_description: Read the facts a GPU node's tuning audit needs, each with its source
version_added: 0.1.0
description:
  - Reads the host, kernel, CPU, memory, GPU, GPU topology, driver, health, container and tuner facts
    of this node in the shape the C(gpufleet.tuning.audit) role's rules address
    (C(docs/facts.md) in the collection). Changes nothing, and runs no tool; every fact comes
    from procfs, sysfs, files under C(/etc), C(/usr) and C(/var), and NVML.
  - "Every leaf fact is a small dict, the envelope: C(value), C(source) (the file read,
    C(nvml:FUNCTION), C(uname(2)), C(option:NAME) for an option echoed back, or C(derived) for
    a fact computed from others or known to this collection) and, only when the value could not
    be read, C(unknown) with the reason. A fact that cannot be read is never guessed and never
    fails the module: C(value) is then null."
  - "C(host.virtualization) is decided from files, the first that names a hypervisor winning:
    C(/sys/hypervisor/type) (V(xen)); the DMI strings C(sys_vendor), C(product_name),
    C(board_vendor), C(bios_vendor) (QEMU gives V(qemu), or V(kvm) when the C(kvm-clock)
    clocksource shows KVM acceleration; KVM, OpenStack and KubeVirt V(kvm); VMware V(vmware);
    Microsoft C(Virtual Machine) V(hyperv); Xen V(xen); VirtualBox V(virtualbox); also
    V(amazon), V(google), V(parallels), V(bhyve), V(bochs)); the available clocksources
    (C(kvm-clock) V(kvm), C(hyperv_clocksource_*) V(hyperv), C(xen) V(xen)); the C(hypervisor)
    CPU flag with nothing naming the hypervisor, V(vm-other); otherwise V(none). Inside a
    container these are the host's files, so the value describes the machine under it."
  - "C(host.proxmox) is true on a Proxmox VE node: C(/etc/pve) is a FUSE (pmxcfs) mount,
    C(/etc/pve/.version) exists, or the pve-manager package is installed
    (C(/usr/share/pve-manager)). C(host.pmxcfs_mounted) tells whether the containers' configs
    can be read. C(host.lxc_host) is true when at least one LXC or Proxmox container config
    was found (see M(gpufleet.tuning.lxc_containers))."
  - "Tuning daemons: one is active when a process of its name runs (C(/proc/*/comm)) and
    enabled when a C(/etc/systemd/system/*.wants/UNIT) link exists and the unit is not masked.
    Each carries C(fights), one line on what of this collection's tuning it would undo."
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
    description: Linux with procfs and sysfs; NVML (C(libnvidia-ml.so.1)) for the GPU facts
      it alone gives.
options:
  sections:
    description:
      - The sections to gather; the others are left out of RV(facts).
      - V(gpus), V(topology), V(driver) and V(health) are read in one pass, timed together under
        C(gpu_facts) in RV(timings_ms).
    type: list
    elements: str
    default: [host, kernel, cpu, memory, gpus, topology, driver, health, containers, tuners]
    choices: [host, kernel, cpu, memory, gpus, topology, driver, health, containers, tuners]
  sysctl_keys:
    description:
      - The sysctls reported under C(memory.sysctls), dotted (V(vm.swappiness)).
      - The default is the keys of the host role's sysctl profile and a few more a GPU server's
        audit looks at; the audit role passes its own profile's keys. A key this kernel does
        not have is reported unknown, not an error.
    type: list
    elements: str
    default:
      - kernel.numa_balancing
      - kernel.nmi_watchdog
      - kernel.sched_autogroup_enabled
      - vm.swappiness
      - net.core.rmem_max
      - net.core.wmem_max
      - net.ipv4.tcp_rmem
      - net.ipv4.tcp_wmem
      - vm.zone_reclaim_mode
      - kernel.timer_migration
      - vm.max_map_count
      - net.core.somaxconn
  serving_unit:
    description:
      - Inside a container, the systemd unit of the model server (V(vllm.service); a name
        without a unit type gets C(.service)) whose main process's memlock limit is reported
        as C(containers.inside.serving_unit_memlock).
      - Not given, that fact is unknown.
    type: str
notes:
  - Memlock limits are the kernel's values in bytes, as C(SOFT:HARD) when the halves differ,
    or V(unlimited).
  - One gather takes milliseconds on a host without GPUs; NVML adds its own start-up time.
seealso:
  - module: gpufleet.tuning.lxc_containers
  - module: gpufleet.tuning.memlock_info
"""

EXAMPLES = r"""
- name: Read the node facts
  gpufleet.tuning.node_facts:
  register: node

- name: Show what tuned would fight, when it runs
  ansible.builtin.debug:
    msg: "tuned ({{ node.facts.tuners.tuned.profile.value }}) {{ node.facts.tuners.tuned.fights.value }}"
  when: node.facts.tuners.tuned.active.value

- name: Read the CPU and memory facts only, with the audit profile's sysctls
  gpufleet.tuning.node_facts:
    sections: [cpu, memory]
    sysctl_keys: [vm.swappiness, kernel.numa_balancing]

- name: Inside the serving container, the model server's locked-memory limit too
  gpufleet.tuning.node_facts:
    sections: [containers]
    serving_unit: vllm.service
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
facts:
  description:
    - The facts of the requested O(sections), keyed by section; every leaf is an envelope
      C({value, source}) with C(unknown) (the reason) where the value could not be read.
      C(docs/facts.md) in the collection is the contract for the whole shape, the GPU sections
      included.
    - "C(host): C(hostname), C(machine), C(virtualization), C(container) (C(detected), C(kind),
      C(evidence), C(ignored): the container detection of the other modules, which trusts no
      stale marker file), C(proxmox), C(pmxcfs_mounted), C(lxc_host)."
    - "C(kernel): C(release), C(cmdline), C(iommu_args) (C(iommu), C(intel_iommu),
      C(amd_iommu), C(iommu.passthrough): the value on the running line, null when absent,
      several joined by a space), C(iommu_passthrough_forced), C(amd_pstate_status)
      (V(active), V(passive), V(guided), V(disable)), C(lockdown) (the bracketed mode)."
    - "C(cpu): C(vendor), C(model_name), C(sockets), C(cores) (physical cores),
      C(threads) (online logical CPUs), C(numa_nodes) (list of C(node), C(cpus)), C(online),
      C(offline) (kernel CPU lists), C(cpuidle) (C(driver), C(governor), C(states): one entry
      per state index and name across the online CPUs with C(state), C(name), C(latency_us),
      C(residency_us), C(enabled_cpus), C(disabled_cpus)), C(cpufreq) (C(driver),
      C(governors) and C(epp): value to the CPU list that has it)."
    - "C(memory): C(total_kib), C(thp_enabled), C(thp_defrag), C(hugepages_total),
      C(hugepages_free), C(hugepage_size_kib), C(swap_total_kib), C(swap_used_kib),
      C(sysctls) (key to its value as the kernel prints it, whitespace folded)."
    - "C(containers): C(lxc), one entry per container config of this host (C(id), C(name),
      C(manager), C(path), C(template), C(gpu), C(gpu_evidence), C(memlock_limit) as
      configured (null when the config sets none and the container inherits the default),
      C(running), C(memlock_running) (the running init's limit), C(locked) and C(lock)
      (Proxmox's C(lock:) word)); C(inside), only in a container (null elsewhere):
      C(pid1_memlock) (the ceiling the host gave), C(serving_unit),
      C(serving_unit_memlock)."
    - "C(tuners): C(tuned) (C(active), C(enabled), C(profile) from
      C(/etc/tuned/active_profile), null when tuned is off), C(power_profiles_daemon)
      (C(active), C(enabled), C(profile): the last profile it saved in
      C(/var/lib/power-profiles-daemon/state.ini); a program's temporary hold is not saved),
      C(cpupower) (C(enabled)), C(irqbalance) (C(active), C(enabled)); each with C(fights)."
    - C(gpus), C(topology), C(driver) come from the GPU reader (sysfs and NVML).
    - "C(health): C(gpus_pci) (NVIDIA GPU functions on the PCI bus), C(gpus_driver)
      (nvmlDeviceGetCount_v2), C(nvlink_most) (per device id, the most active NVLinks of any of
      its GPUs here), C(kernel_log) (the log read: C(/dev/kmsg), else a syslog file),
      C(kernel_log_complete) (the records reach back to boot), C(xid) (one entry per GPU address
      and XID code since boot - C(bdf), C(gpu) index or null, C(code), C(count), C(first_s),
      C(last_s) (seconds after boot), C(last_message)), C(xid_total). Each GPU also carries its
      health facts - C(nvml_status), C(recovery_action), C(sram_uncorrected_volatile),
      C(sram_uncorrected_aggregate), C(sram_threshold_exceeded), C(fabric_state),
      C(fabric_status), C(nvlink_links), C(nvlink_active), C(nvlink_errors), each link's
      C(replay_errors), C(recovery_errors), C(crc_errors), and under C(pcie) C(replay_count),
      C(aer_correctable), C(aer_nonfatal), C(aer_fatal), C(aer_counts), C(path_aer) (the AER
      totals of the bridges above it)."
  returned: always
  type: dict
  sample:
    host:
      hostname: {"value": "gpu-node-07", "source": "/proc/sys/kernel/hostname"}
      virtualization: {"value": "none", "source": "/proc/cpuinfo"}
      proxmox: {"value": true, "source": "/proc/self/mountinfo"}
    kernel:
      amd_pstate_status: {"value": "active", "source": "/sys/devices/system/cpu/amd_pstate/status"}
      lockdown: {"value": null, "source": "/sys/kernel/security/lockdown",
                 "unknown": "no lockdown LSM in this kernel, or securityfs is not mounted"}
    cpu:
      cpufreq:
        driver: {"value": "amd-pstate-epp", "source": "/sys/devices/system/cpu/cpufreq/policy*/scaling_driver"}
        governors:
          powersave: {"value": "0-127", "source": "/sys/devices/system/cpu/cpufreq/policy*/scaling_governor"}
    memory:
      sysctls:
        vm.swappiness: {"value": "60", "source": "/proc/sys/vm/swappiness"}
    containers:
      lxc:
        - id: {"value": "101", "source": "/etc/pve/lxc/101.conf"}
          gpu: {"value": true, "source": "/etc/pve/lxc/101.conf"}
          memlock_limit: {"value": "65536", "source": "/etc/pve/lxc/101.conf"}
          memlock_running: {"value": "65536", "source": "/proc/5012/limits"}
      inside: {"value": null, "source": "derived"}
    tuners:
      tuned:
        active: {"value": true, "source": "/proc/*/comm"}
        profile: {"value": "throughput-performance", "source": "/etc/tuned/active_profile"}
timings_ms:
  description: Milliseconds each section took (C(gpu_facts) for V(gpus), V(topology), V(driver)
    and V(health), read together), and C(total).
  returned: always
  type: dict
  sample: {"host": 1.9, "kernel": 0.2, "cpu": 2.3, "memory": 0.4, "gpu_facts": 180.5, "containers": 0.6,
           "tuners": 1.1, "total": 187.2}
msg:
  description: What was gathered, how long it took, and how many facts are unknown.
  returned: always
  type: str
  sample: "gathered host, kernel, cpu, memory, gpus, topology, driver, health, containers, tuners in 187.2 ms; 9 fact(s) unknown"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import node_facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=node_facts.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: node_facts.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
