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
  - Each pair's bandwidth floor follows from its link unless an absolute floor is set for its
    link type (O(min_unidirectional_gbps), O(min_bidirectional_gbps)). NVLink as active links
    between the pair x the per-link rate of the generation (NVLink 1 20 GB/s, NVLink 2 to 4
    25 GB/s, GA10x bridges 14.06 GB/s, NVLink 5 50 GB/s, one way), PCIe as the negotiated
    generation and width of both GPUs, bounded by the bridges between them, after line encoding
    and a protocol efficiency of 0.8 (halved across CPU sockets); either times
    O(floor_efficiency). An H200 SXM pair (18 links, 450 GB/s) gets 337.5 GB/s one way and 675
    both ways; a PCIe 4 x16 pair 20.2 and 35.3. RV(pairs) and RV(bidirectional) name each floor and
    where it came from (C(floor_source)). See O(link_floors).
  - A pair that cannot use peer access, or falls short, is diagnosed from facts read from sysfs
    and NVML (no tool output is parsed), such as a translated IOMMU domain, ACS redirect on a bridge
    between the GPUs, a PCIe link trained below its capability, GPUs under different CPU
    sockets, no NVLink between them, the driver's own P2P answer. RV(diagnosis) lists the
    causes with the values read and the fix; RV(table) ends with them.
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
    description: Back-to-back 16-byte copies timed for each latency figure (the size NVIDIA's p2pBandwidthLatencyTest copies).
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
    description:
      - Count a pair whose GPUs cannot access each other's memory as a shortfall.
      - The older switch for O(no_peer_access); V(false) is the same as O(no_peer_access=staged).
    type: bool
    default: true
  no_peer_access:
    description:
      - What a pair whose GPUs cannot access each other's memory is.
      - V(fail) is a shortfall naming the causes found (RV(diagnosis)).
      - V(staged) accepts it, copies between those GPUs being staged through host memory; the pair is
        listed in RV(staged_pairs) with its staged bandwidth and the causes, and fails nothing.
        For nodes where P2P is known to be off (GPUs passed to separate VMs, a platform without
        P2P) and the software copies through the host.
    type: str
    choices: [fail, staged]
    default: fail
  link_floors:
    description:
      - Give every pair for whose link type no absolute floor is set a floor derived from its link
        (see the description); V(false) leaves such pairs without a bandwidth floor.
      - A pair whose link cannot be read well enough (no NVML, a link count or speed unknown) has
        no derived floor; C(floor_source) says why.
    type: bool
    default: true
  floor_efficiency:
    description:
      - Factors from what a link carries to its floor, keys C(nvlink_unidirectional) (default
        0.75), C(nvlink_bidirectional) (0.75), C(pcie_unidirectional) (0.8) and
        C(pcie_bidirectional) (0.7); a key left out keeps its default.
      - Each a finite number greater than 0 and at most 1.
      - The NVLink defaults pass two H200 SXM that measured 394 GB/s one way and 772 both ways
        (0.876 and 0.858 of 450 and 900) with 14 to 17 % margin, and A100 SXM pairs (about 240 and
        470 of 300 and 600); the PCIe ones give a PCIe 4 x16 pair the 20 and 35 GB/s used before.
    type: dict
  fail_on_threshold:
    description: Fail the task when RV(shortfalls) is not empty. With V(false) they are only
      returned.
    type: bool
    default: true
  progress_path:
    description:
      - A file the module keeps up to date while it measures (GPU pairs done of how many, the step
        now, seconds so far; one JSON object, replaced atomically), for a role that runs it as
        an async task and follows it with gpufleet.tuning.job_progress. Removed at the end.
        Unset writes nothing.
    type: path
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
  - module: gpufleet.tuning.kernel_cmdline
    description: Sets C(iommu=pt) where a translated IOMMU domain slows or blocks P2P (not on Blackwell).
  - module: gpufleet.tuning.node_facts
    description: The facts the floors and the diagnosis are read from.
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

- name: Link-derived floors, a stricter NVLink factor, a node where P2P is off on purpose
  gpufleet.tuning.p2p_bandwidth:
    floor_efficiency: {nvlink_unidirectional: 0.8}
    no_peer_access: staged

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
    - C(latency_method) says how C(latency_p2p_us) was timed - C(held_stream_wait_value) or
      C(held_stream_spin_kernel) (the copies queued behind a held stream and timed by events
      alone, as NVIDIA's p2pBandwidthLatencyTest does), or C(launch_included) (the host's cost
      of queuing each copy counted too, where no hold works); C(latency_staged_method) the same
      for C(latency_staged_us).
    - C(link_gbps) is what the link carries one way (null when unknown or O(link_floors=false)),
      C(floor_unidirectional_gbps) the floor applied (null for none) and C(floor_source) where it
      came from, such as C(NVLink 4 x 18 links x 25 GB/s x 0.75),
      C(PCIe gen5 x16 (63.0 GB/s\) x 0.8 protocol x 0.80) or
      C(override min_unidirectional_gbps.nvlink).
  returned: when measured
  type: list
  elements: dict
  sample: [{"src": 0, "dst": 1, "link": "nvlink", "peer_access": true, "unidirectional_p2p_gbps": 394.2,
            "link_gbps": 450.0, "floor_unidirectional_gbps": 337.5,
            "floor_source": "NVLink 4 x 18 links x 25 GB/s x 0.75"}]
bidirectional:
  description:
    - One entry per unordered pair with C(a), C(b), C(link), C(bidirectional_p2p_gbps),
      C(bidirectional_staged_gbps).
    - C(link_gbps) (both directions), C(floor_bidirectional_gbps) and C(floor_source) as in RV(pairs).
  returned: when measured
  type: list
  elements: dict
diagnosis:
  description:
    - One entry per unordered pair without peer access or short of a floor, C(pair) (C(0<->1)),
      C(why) (C(no peer access), C(below the floor)), C(causes) and C(unchecked).
    - Each cause has C(id) (C(iommu_translated), C(acs_redirect), C(link_degraded),
      C(across_cpus), C(no_nvlink), C(driver_p2p_status)), C(summary) with the values read,
      C(values) (the same for programs) and C(fix) (the module and tag, or C(manual:) steps).
    - C(unchecked) names a cause that could not be checked (a fact unknown, such as ACS without
      root) with the reason.
  returned: when measured
  type: list
  elements: dict
  sample: [{"pair": "1<->3", "why": ["no peer access"], "unchecked": [],
            "causes": [{"id": "acs_redirect", "values": {"bridges": [{"bdf": "0000:02:08.0",
                        "bits": ["request_redirect", "completion_redirect"], "ctrl": 29}]},
                        "summary": "ACS completion_redirect/request_redirect set on 0000:02:08.0 ...",
                        "fix": "gpufleet.tuning.pcie_acs: clear ACS redirect on those bridges ..."}]}]
staged_pairs:
  description:
    - With O(no_peer_access=staged) (or O(require_peer_access=false)), the pairs without peer
      access that pass as copies staged through the host, C(pair), C(staged_unidirectional_gbps)
      (both directions), C(staged_bidirectional_gbps) and C(causes) as in RV(diagnosis).
  returned: when measured
  type: list
  elements: dict
no_peer_access:
  description: The policy applied to pairs without peer access, V(fail) or V(staged).
  returned: when measured
  type: str
matrices:
  description:
    - N x N matrices (rows are sources, columns destinations, null where not measured) keyed
      C(unidirectional_p2p_gbps), C(unidirectional_staged_gbps), C(bidirectional_p2p_gbps),
      C(bidirectional_staged_gbps), C(latency_p2p_us), C(latency_staged_us), and C(gpus)
      giving the GPU index of each row and column.
  returned: when measured
  type: dict
table:
  description: The matrices as text for humans, then why P2P is missing or slow where it is.
  returned: when measured
  type: str
shortfalls:
  description:
    - Pairs that fell short, each with C(pair), C(metric), C(value), C(threshold), C(reason).
    - A bandwidth shortfall has C(floor_source); a shortfall of a pair that was diagnosed has
      C(causes) as in RV(diagnosis), and its reason ends with their ids.
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
