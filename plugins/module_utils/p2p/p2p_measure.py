# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Measure GPU peer-to-peer copies with the CUDA driver: bandwidth, latency, data integrity.

Method (the one NVIDIA's p2pBandwidthLatencyTest and nvbandwidth use, on copy engines):
- each GPU's primary context holds a send and a receive buffer and a few streams and events;
- a pair is measured with peer access disabled first (the driver stages the copy through host
  memory: the "staged" figure) and then enabled (direct P2P over NVLink or PCIe);
- unidirectional: warm-up copies, then an event, ``repetitions`` copies, an event, on the
  source GPU's streams; bandwidth = bytes / elapsed event time;
- bidirectional: both GPUs copy to each other at once; the second GPU's streams wait on the
  first GPU's start event and the first GPU's stop event waits on the second GPU's end, so
  one pair of events on one GPU spans both directions;
- latency: ``latency_iterations`` back-to-back 4-byte copies between two events;
- integrity: after the P2P copies, samples of the receive buffer are read back to the host and
  compared with the byte pattern the sender holds.
Waiting is done by polling events with a deadline, so a P2P path that hangs (a translated
IOMMU domain, ACS redirect) becomes an error naming the pair instead of a stuck play.
Peer access enabled here lasts only until it is disabled again or the process ends.
"""

from __future__ import annotations

import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p.cuda_driver import (
    CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
    CopyTimeout,
    CudaError,
)

CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705
LATENCY_BYTES = 4
SAMPLE_BYTES = 4096
STAGED_MAX_BYTES = 64 << 20  # staged copies run at tens of GB/s: keep them short


class Gpu:
    """Per-GPU resources of one measurement run."""

    def __init__(self, driver, index, streams):
        self.index = index
        self.dev = driver.device(index)
        self.ctx = driver.primary_ctx_retain(self.dev)
        self.retained = True
        driver.set_current(self.ctx)
        self.streams = [driver.stream_create() for _rep in range(streams)]
        self.start = driver.event_create()
        self.stop = driver.event_create()
        self.ends = [driver.event_create() for _rep in range(streams)]
        self.send = None
        self.recv = None
        self.pattern = (0x5A + 17 * index) & 0xFF or 0x01

    def allocate(self, driver, size):
        driver.set_current(self.ctx)
        self.send = driver.mem_alloc(size)
        self.recv = driver.mem_alloc(size)
        driver.memset_d8(self.send, self.pattern, size)
        driver.memset_d8(self.recv, 0, size)
        driver.ctx_synchronize()  # the copies run on non-blocking streams that would not wait

    def release(self, driver):
        """Free everything; errors here are ignored (the process exit frees them anyway)."""
        try:
            driver.set_current(self.ctx)
            for ptr in (self.send, self.recv):
                if ptr:
                    driver.mem_free(ptr)
            for event in [self.start, self.stop] + self.ends:
                driver.event_destroy(event)
            for stream in self.streams:
                driver.stream_destroy(stream)
        except CudaError:
            pass
        if self.retained:
            try:
                driver.primary_ctx_release(self.dev)
            except CudaError:
                pass
            self.retained = False


def discover(driver):
    """The GPUs the driver sees, in PCI bus order: index, name, bdf, memory."""
    devices = []
    for index in range(driver.device_count()):
        dev = driver.device(index)
        devices.append({
            "index": index,
            "name": driver.device_name(dev),
            "bdf": p2p_plan.normalize_bdf(driver.pci_bus_id(dev)) or driver.pci_bus_id(dev),
            "memory_gib": round(driver.total_mem(dev) / float(1 << 30), 1),
        })
    return devices


class Runner:
    """Runs the measurements of one selection of GPUs with one set of options."""

    def __init__(self, driver, options):
        self.d = driver
        self.size = options["size_bytes"]
        self.staged_size = min(self.size, STAGED_MAX_BYTES)
        self.reps = options["repetitions"]
        self.warmup = options["warmup"]
        self.staged = options["staged"]
        self.lat_iters = options["latency_iterations"]
        self.nstreams = options["streams"]
        self.timeout = options["timeout_s"]
        self.gpus = {}

    # --- peer access ---------------------------------------------------------------------------
    def _peer(self, a, b, enable):
        """Enable (or disable) access both ways between GPUs a and b."""
        for x, y in ((a, b), (b, a)):
            self.d.set_current(x.ctx)
            try:
                if enable:
                    self.d.enable_peer(y.ctx)
                else:
                    self.d.disable_peer(y.ctx)
            except CudaError as exc:
                if exc.code not in (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED):
                    raise

    # --- timed copies ------------------------------------------------------------------------
    def _enqueue(self, src, dst, size, count):
        """``count`` copies of ``size`` bytes src->dst, split across src's streams."""
        chunk = size // len(src.streams)
        for _rep in range(count):
            for n, stream in enumerate(src.streams):
                length = chunk if n < len(src.streams) - 1 else size - chunk * n
                self.d.memcpy_peer_async(dst.recv + n * chunk, dst.ctx, src.send + n * chunk, src.ctx, length, stream)

    def _fan_in(self, gpu, stop_event):
        """Make gpu.streams[0] wait for every other stream of ``gpu``, then record ``stop_event``."""
        for n, stream in enumerate(gpu.streams[1:], 1):
            self.d.event_record(gpu.ends[n], stream)
            self.d.stream_wait_event(gpu.streams[0], gpu.ends[n])
        self.d.event_record(stop_event, gpu.streams[0])

    def _start(self, gpu, others=()):
        """Record the start event on gpu.streams[0]; every other stream involved waits on it."""
        self.d.set_current(gpu.ctx)
        self.d.event_record(gpu.start, gpu.streams[0])
        for stream in gpu.streams[1:]:
            self.d.stream_wait_event(stream, gpu.start)
        for other in others:
            self.d.set_current(other.ctx)
            for stream in other.streams:
                self.d.stream_wait_event(stream, gpu.start)
        self.d.set_current(gpu.ctx)

    def _warm(self, src, dst, size):
        self.d.set_current(src.ctx)
        self._enqueue(src, dst, size, self.warmup)
        for stream in src.streams:
            self.d.stream_synchronize(stream)

    def unidirectional(self, src, dst, size):
        self._warm(src, dst, size)
        self._start(src)
        self._enqueue(src, dst, size, self.reps)
        self._fan_in(src, src.stop)
        self.d.event_wait(src.stop, self.timeout)
        ms = self.d.elapsed_ms(src.start, src.stop)
        return round(size * self.reps / (ms / 1e3) / 1e9, 1)

    def bidirectional(self, a, b, size):
        self._warm(a, b, size)
        self._warm(b, a, size)
        self._start(a, others=(b,))
        self._enqueue(a, b, size, self.reps)
        self.d.set_current(b.ctx)
        self._enqueue(b, a, size, self.reps)
        self._fan_in(b, b.stop)
        self.d.set_current(a.ctx)
        self.d.stream_wait_event(a.streams[0], b.stop)
        self._fan_in(a, a.stop)
        self.d.event_wait(a.stop, self.timeout)
        ms = self.d.elapsed_ms(a.start, a.stop)
        return round(2 * size * self.reps / (ms / 1e3) / 1e9, 1)

    def latency(self, src, dst):
        self.d.set_current(src.ctx)
        stream = src.streams[0]
        for _rep in range(max(1, self.warmup)):
            self.d.memcpy_peer_async(dst.recv, dst.ctx, src.send, src.ctx, LATENCY_BYTES, stream)
        self.d.event_record(src.start, stream)
        for _rep in range(self.lat_iters):
            self.d.memcpy_peer_async(dst.recv, dst.ctx, src.send, src.ctx, LATENCY_BYTES, stream)
        self.d.event_record(src.stop, stream)
        self.d.event_wait(src.stop, self.timeout)
        return round(self.d.elapsed_ms(src.start, src.stop) * 1e3 / self.lat_iters, 2)

    def integrity(self, src, dst):
        """Clear dst's receive buffer, copy peer-to-peer, and compare samples with the pattern."""
        self.d.set_current(dst.ctx)
        self.d.memset_d8(dst.recv, 0, self.size)
        self.d.ctx_synchronize()
        self.d.set_current(src.ctx)
        self.d.memcpy_peer_async(dst.recv, dst.ctx, src.send, src.ctx, self.size, src.streams[0])
        self.d.event_record(src.stop, src.streams[0])
        self.d.event_wait(src.stop, self.timeout)
        self.d.set_current(dst.ctx)
        sample = min(SAMPLE_BYTES, self.size)
        for offset in sorted(set([0, (self.size // 2) & ~0xFFF, self.size - sample])):
            data = self.d.memcpy_dtoh(dst.recv + offset, sample)
            if data != bytes([src.pattern]) * sample:
                return False
        return True

    # --- one pair ----------------------------------------------------------------------------
    def measure_pair(self, a, b):
        """Both ordered pairs and the bidirectional figures of GPUs a < b."""
        fwd = {"src": a.index, "dst": b.index}
        rev = {"src": b.index, "dst": a.index}
        bidi = {"a": a.index, "b": b.index}
        access_ab = self.d.can_access_peer(a.dev, b.dev)
        access_ba = self.d.can_access_peer(b.dev, a.dev)
        fwd["peer_access"], rev["peer_access"] = access_ab, access_ba
        for res, x, y in ((fwd, a, b), (rev, b, a)):
            try:
                res["perf_rank"] = self.d.p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, x.dev, y.dev)
            except CudaError:
                res["perf_rank"] = None
        self._peer(a, b, False)
        if self.staged:
            fwd["unidirectional_staged_gbps"] = self.unidirectional(a, b, self.staged_size)
            rev["unidirectional_staged_gbps"] = self.unidirectional(b, a, self.staged_size)
            bidi["bidirectional_staged_gbps"] = self.bidirectional(a, b, self.staged_size)
            fwd["latency_staged_us"] = self.latency(a, b)
            rev["latency_staged_us"] = self.latency(b, a)
        if access_ab and access_ba:
            self._peer(a, b, True)
            try:
                fwd["unidirectional_p2p_gbps"] = self.unidirectional(a, b, self.size)
                fwd["data_ok"] = self.integrity(a, b)
                rev["unidirectional_p2p_gbps"] = self.unidirectional(b, a, self.size)
                rev["data_ok"] = self.integrity(b, a)
                bidi["bidirectional_p2p_gbps"] = self.bidirectional(a, b, self.size)
                fwd["latency_p2p_us"] = self.latency(a, b)
                rev["latency_p2p_us"] = self.latency(b, a)
            finally:
                self._peer(a, b, False)
        for res in (fwd, rev):
            staged = res.get("unidirectional_staged_gbps")
            p2p = res.get("unidirectional_p2p_gbps")
            res["p2p_speedup"] = round(p2p / staged, 2) if p2p and staged else None
        return fwd, rev, bidi

    def run(self, indices, links):
        """Measure every pair of ``indices``; ``links`` maps (a, b) to (link type, topology)."""
        ordered, bidirectional = [], []
        try:
            for index in indices:
                gpu = Gpu(self.d, index, self.nstreams)
                self.gpus[index] = gpu
                gpu.allocate(self.d, self.size)
            for a, b in p2p_plan.plan_pairs(indices):
                link, topo = links.get((a, b), ("unknown", None))
                try:
                    fwd, rev, bidi = self.measure_pair(self.gpus[a], self.gpus[b])
                except CudaError as exc:
                    fwd, rev, bidi = ({"src": a, "dst": b, "error": str(exc)},
                                      {"src": b, "dst": a, "error": str(exc)}, {"a": a, "b": b, "error": str(exc)})
                except CopyTimeout as exc:
                    raise CopyTimeout("GPU %d <-> GPU %d: %s; the P2P path hangs (check IOMMU mode "
                                      "such as iommu=pt, and PCIe ACS)" % (a, b, exc))
                for res in (fwd, rev, bidi):
                    res["link"] = link
                    res["topology"] = topo
                ordered.extend([fwd, rev])
                bidirectional.append(bidi)
        finally:
            for gpu in self.gpus.values():
                gpu.release(self.d)
        ordered.sort(key=lambda r: (r["src"], r["dst"]))
        return ordered, bidirectional


def measure(driver, nvml, params):
    """Discover GPUs, select, measure, judge. Returns the module result (without failing)."""
    started = time.monotonic()
    driver.init()
    devices = discover(driver)
    result = {
        "changed": False,
        "gpus": len(devices),
        "devices": devices,
        "driver_version": driver.driver_version(),
    }
    if len(devices) < 2:
        result.update(skipped=True, msg="%d GPU(s) visible: peer-to-peer needs at least 2" % len(devices))
        return result
    indices = p2p_plan.select_gpus(params.get("gpus"), devices)
    bdf = dict((d["index"], d["bdf"]) for d in devices)
    links = {}
    for a, b in p2p_plan.plan_pairs(indices):
        links[(a, b)] = nvml.link(bdf[a], bdf[b]) if nvml is not None else ("unknown", None)
    runner = Runner(driver, params)
    ordered, bidirectional = runner.run(indices, links)
    mats = p2p_plan.matrices(indices, ordered, bidirectional)
    elapsed = round(time.monotonic() - started, 1)
    result.update({
        "selected": indices,
        "pairs": ordered,
        "bidirectional": bidirectional,
        "matrices": mats,
        "elapsed_s": elapsed,
        "table": p2p_plan.render_table(mats, devices, elapsed),
    })
    return result
