#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: p2p_bandwidth
short_description: Measure GPU peer-to-peer bandwidth, latency and integrity with the NVIDIA driver alone
version_added: 0.1.0
description:
  - Measures every pair of GPUs (or the O(gpus) listed) through the CUDA driver API
    (C(libcuda.so.1), loaded with ctypes); no CUDA toolkit, compiler, PyTorch or CuPy is needed on
    the target, only the NVIDIA driver.
  - For every ordered pair it reports whether peer access is possible, the unidirectional copy
    bandwidth with peer access enabled and, for contrast, disabled (the driver then stages the
    copy through host memory), the small-copy latency both ways, and whether data copied
    peer-to-peer arrived intact. For every unordered pair it reports the bidirectional bandwidth
    (both GPUs copying to each other at once, summed), again with and without peer access.
  - Copies run on the GPUs' copy engines and are timed with CUDA events after warm-up copies.
    Pairs are measured one after the other so they do not share links or host bandwidth.
    Bandwidth is in GB/s of 10^9 bytes; latency in microseconds.
  - The link of each pair (NVLink or PCIe) is read from NVML (C(libnvidia-ml.so.1), also part of
    the driver) when it is present, so thresholds can differ per link type.
  - A pair that falls short of a threshold, cannot use peer access, corrupts data, fails a
    driver call or yields a figure that is not a finite number is listed in RV(shortfalls); with O(fail_on_threshold=true) the task fails, so
    a rolling fleet run stops at that host.
  - Nothing is changed on the machine. Peer access enabled for the measurement is disabled again
    and in any case released when the process ends; clocks, power and MIG are never touched.
  - A machine without the NVIDIA driver, or with fewer than two GPUs, returns C(skipped=true)
    with the reason in RV(msg), not a failure.
  - A failed task (a shortfall with O(fail_on_threshold=true)) still returns every figure
    (RV(pairs), RV(matrices), RV(table), RV(shortfalls), ...), so a registered result can be
    read after C(ignore_errors) or in a C(rescue).
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: The measurement changes nothing, so it also runs in check mode.
  diff_mode:
    support: none
    description: There is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Linux x86_64 or aarch64 with the NVIDIA driver.
options:
  gpus:
    description:
      - GPUs to measure, as CUDA indices in PCI bus order (as C(nvidia-smi) numbers them) or PCI
        addresses (C(0000:1b:00.0) or C(1b:00.0)). At least two. Default all GPUs.
    type: list
    elements: raw
  size_mib:
    description:
      - Size of each bandwidth copy in MiB. Copies with peer access disabled use at most 64 MiB,
        since they run at tens of GB/s.
      - Each selected GPU holds two buffers of this size during the run.
    type: int
    default: 256
  repetitions:
    description: Timed copies per bandwidth figure.
    type: int
    default: 10
  warmup:
    description: Untimed copies before each timed run.
    type: int
    default: 2
  streams:
    description:
      - Streams each copy is split across (more streams can engage more copy engines).
        On H200 NVLink one stream already reaches the link rate.
    type: int
    default: 1
  latency_iterations:
    description: Back-to-back 4-byte copies timed for each latency figure.
    type: int
    default: 100
  measure_staged:
    description:
      - Also measure with peer access disabled, for the staged-through-host contrast and
        O(min_speedup). V(false) roughly halves the run time.
    type: bool
    default: true
  timeout_s:
    description:
      - Longest wait for one timed run. A P2P path that hangs (an IOMMU in translated mode, PCIe
        ACS redirecting peer traffic) fails the task with this as the reason instead of hanging.
      - A finite number of seconds, greater than 0 and at most 86400; NaN and infinities are
        refused before anything runs (they would disable the timeout).
    type: float
    default: 60
  min_unidirectional_gbps:
    description:
      - Floor for the unidirectional bandwidth with peer access, per ordered pair.
      - A number applies to every pair; a dict sets it per link type with keys C(nvlink),
        C(pcie), C(unknown) and C(default) (for example C({nvlink 380, pcie 20}) written as YAML).
      - Unset means no floor.
      - Every value must be a finite number from 0 to 100000 (GB/s); NaN, infinities (also as
        text, such as C(nan) or C(1e999)) and larger numbers are refused before anything runs,
        since a floor of NaN could never fail.
    type: raw
  min_bidirectional_gbps:
    description: Floor for the bidirectional bandwidth with peer access, per unordered pair;
      a number or a dict per link type as for O(min_unidirectional_gbps), each a finite number
      from 0 to 100000 (GB/s).
    type: raw
  min_speedup:
    description:
      - Floor for the ratio of unidirectional bandwidth with peer access to the staged figure;
        a number or a dict per link type, each a finite number from 0 to 1000. Needs
        O(measure_staged=true).
      - Named C(min_p2p_speedup) before; that name still works as an alias.
    type: raw
    aliases: [min_p2p_speedup]
  require_peer_access:
    description: Count a pair whose GPUs cannot access each other's memory as a shortfall.
    type: bool
    default: true
  fail_on_threshold:
    description: Fail the task when RV(shortfalls) is not empty. With V(false) they are only
      returned.
    type: bool
    default: true
  cuda_library:
    description:
      - The CUDA driver library to load. Loading a library runs its code as the module's user
        (root), so only two forms are accepted, checked before anything is loaded.
      - A bare name C(libcuda.so) or C(libcuda.so.<version>) (digits and dots), found by the
        dynamic loader in its own search path (C(ld.so.cache) and the system library folders,
        where the NVIDIA driver installs it; C(LD_LIBRARY_PATH) of the module's environment too).
      - An absolute path, loaded by its resolved path (symbolic links followed) only when that
        file is a regular file owned by root and it and every folder above it up to C(/) are
        owned by root and not writable by group or others.
      - Anything else (another name, a relative path such as C(./libcuda.so.1), a path with
        C(..), a file or folder a non-root user could change) fails the task with a message
        naming the value. An absolute path that does not exist is a skip, like a missing driver.
    type: str
    default: libcuda.so.1
notes:
  - GPU indices follow PCI bus order (C(CUDA_DEVICE_ORDER=PCI_BUS_ID) is set for the measurement),
    unless C(CUDA_VISIBLE_DEVICES) in the environment hides some GPUs.
  - Run time grows with the number of pairs; see RV(elapsed_s). At the defaults two H200s take
    about one second, and the measured rates put eight GPUs (28 pairs) well under a minute.
seealso:
  - name: NVIDIA p2pBandwidthLatencyTest
    description: The CUDA sample whose method this follows.
    link: https://github.com/NVIDIA/cuda-samples
"""

EXAMPLES = r"""
- name: Prove peer-to-peer works before trusting the node
  gpufleet.tuning.p2p_bandwidth:
    min_unidirectional_gbps: {nvlink: 380, pcie: 20}
    min_bidirectional_gbps: {nvlink: 750, pcie: 35}
    min_speedup: 1.5
  register: p2p

- name: Show the matrices
  ansible.builtin.debug:
    msg: "{{ p2p.table.splitlines() }}"
  when: p2p.table is defined

- name: Two GPUs only, quick, report without failing
  gpufleet.tuning.p2p_bandwidth:
    gpus: ["0000:1b:00.0", "0000:43:00.0"]
    size_mib: 64
    measure_staged: false
    fail_on_threshold: false
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
gpus:
  description: Number of GPUs the driver sees (0 without a driver).
  returned: always
  type: int
  sample: 2
skipped:
  description: True when nothing was measured (no driver, no device, a single GPU); see RV(msg).
  returned: when nothing was measured
  type: bool
msg:
  description: Why nothing was measured, or the shortfalls in one line.
  returned: when skipped or failed
  type: str
devices:
  description: The GPUs the driver sees, in PCI bus order.
  returned: when the driver is present
  type: list
  elements: dict
  sample: [{"index": 0, "name": "NVIDIA H200", "bdf": "0000:00:06.0", "memory_gib": 139.8}]
driver_version:
  description: CUDA version the driver supports.
  returned: when the driver is present
  type: str
  sample: "13.0"
selected:
  description: Indices of the GPUs measured.
  returned: when measured
  type: list
  elements: int
pairs:
  description:
    - One entry per ordered pair with C(src), C(dst), C(link) (nvlink, pcie, unknown),
      C(topology), C(peer_access), C(perf_rank), C(unidirectional_p2p_gbps),
      C(unidirectional_staged_gbps), C(p2p_speedup), C(latency_p2p_us), C(latency_staged_us),
      C(data_ok), and C(error) when a driver call failed for that pair.
  returned: when measured
  type: list
  elements: dict
bidirectional:
  description: One entry per unordered pair with C(a), C(b), C(link), C(bidirectional_p2p_gbps),
    C(bidirectional_staged_gbps).
  returned: when measured
  type: list
  elements: dict
matrices:
  description:
    - N x N matrices (rows are sources, columns destinations, null where not measured) keyed
      C(unidirectional_p2p_gbps), C(unidirectional_staged_gbps), C(bidirectional_p2p_gbps),
      C(bidirectional_staged_gbps), C(latency_p2p_us), C(latency_staged_us), and C(gpus)
      giving the GPU index of each row and column.
  returned: when measured
  type: dict
table:
  description: The matrices as text for humans.
  returned: when measured
  type: str
shortfalls:
  description: Pairs that fell short, each with C(pair), C(metric), C(value), C(threshold), C(reason).
  returned: when measured
  type: list
  elements: dict
  sample: [{"pair": "0->1", "metric": "unidirectional_gbps", "value": 120.5, "threshold": 380.0,
            "reason": "120.5 GB/s over nvlink is below the 380.0 GB/s floor"}]
thresholds:
  description: The thresholds applied, per link type, keyed by option name
    (C(min_unidirectional_gbps), C(min_bidirectional_gbps), C(min_speedup)).
  returned: when measured
  type: dict
elapsed_s:
  description: Seconds the measurement took, GPU set-up included.
  returned: when measured
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import p2p_bandwidth
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=p2p_bandwidth.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: p2p_bandwidth.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
