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
- latency, as p2pBandwidthLatencyTest (cuda-samples, outputLatencyMatrix) measures it: the stream
  is held first, then a start event, ``latency_iterations`` copies of 16 bytes (the sample's one
  int4) and a stop event are queued behind the hold, and only then is the hold released, so the
  copies run back to back and the events time the copies alone, not the host queuing them;
  latency = elapsed / iterations. The hold is a wait on a flag in mapped host memory
  (cuStreamWaitValue32: ``held_stream_wait_value``), else the sample's own spin kernel loaded from
  PTX (``held_stream_spin_kernel``); where neither works, or the hold gave way before all copies
  were queued, the copies are timed as they are queued (``launch_included``, which counts the
  launch cost: 3-4 us on H200 NVLink where the held figure is about 2 us). ``latency_method``
  says which method gave ``latency_p2p_us`` (else ``latency_staged_us``), and
  ``latency_staged_method`` which gave ``latency_staged_us``;
- integrity: after the P2P copies, samples of the receive buffer are read back to the host and
  compared with the byte pattern the sender holds.
Waiting is done by polling events with a deadline, so a P2P path that hangs (a translated
IOMMU domain, ACS redirect) becomes an error naming the pair instead of a stuck play.
Peer access enabled here lasts only until it is disabled again or the process ends.
"""

from __future__ import annotations

import ctypes
import threading
import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p.cuda_driver import (
    CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
    CU_STREAM_WAIT_VALUE_GEQ,
    HOLD_KERNEL_NAME,
    HOLD_KERNEL_PTX,
    CopyTimeout,
    CudaError,
    DriverMissing,
    HoldTimeout,
)

CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705
LATENCY_BYTES = 16  # outputLatencyMatrix: numElems = 4 ints, "perform 1-int4 transfer"
LATENCY_WAIT_VALUE = "held_stream_wait_value"
LATENCY_SPIN_KERNEL = "held_stream_spin_kernel"
LATENCY_LAUNCH_INCLUDED = "launch_included"
HOLD_METHODS = (LATENCY_WAIT_VALUE, LATENCY_SPIN_KERNEL)
# A hold that is still closed this long after it was set up is opened from a watchdog thread: the
# copies queue in well under a millisecond, so only a driver call that blocks until the stream
# moves (a full push buffer) gets there, and it must not wait forever for a release that the
# blocked thread would give. The figure of such a run is not used (see Runner.held_latency).
HOLD_RELEASE_S = 1.0
# The spin kernel's own limit, in SM clocks (the sample's kernel gives up after 10^7): about a
# second at 2 GHz, so it outlasts the queuing by far and never holds a stream for long.
HOLD_KERNEL_TIMEOUT_CLOCKS = 2 * 10 ** 9
SAMPLE_BYTES = 4096
STAGED_MAX_BYTES = 64 << 20  # staged copies run at tens of GB/s: keep them short


class HoldUnavailable(Exception):
    """A stream hold could not be set up (nothing was queued): the next method is tried."""


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
        self.hold_methods = None  # the latency holds left to try on this GPU, best first
        self.hold_kernel = None  # (module, function) of the spin kernel once loaded
        self.flag_dptr = None  # the host flag's device address in this context

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
            if self.hold_kernel:
                module, self.hold_kernel = self.hold_kernel[0], None
                driver.module_unload(module)
        except CudaError:
            pass
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


class HostFlag:
    """A 32-bit word of pinned host memory, mapped into every context, that held streams wait on.

    Each hold waits for a new, larger value (``arm``); ``release`` stores it. The main thread and
    the watchdog may both release, under a lock, and ``early`` records that the watchdog did.
    """

    def __init__(self, driver):
        self.d = driver
        self.host = driver.mem_host_alloc_mapped(4)
        self.value = 0
        driver.host_write_u32(self.host, 0)
        self.lock = threading.Lock()
        self.target = 0
        self.early = False
        self.stuck = False  # a hold never opened: the GPU may still read the flag, so keep it

    def arm(self):
        with self.lock:
            self.target = (self.value + 1) & 0xFFFFFFFF
            self.early = False
            return self.target

    def release(self, target, watchdog=False):
        """Store ``target`` unless a later value is there already. True when this call stored it."""
        with self.lock:
            if ((self.value - target) & 0xFFFFFFFF) < 0x80000000:  # value >= target, cyclically
                return False
            self.d.host_write_u32(self.host, target)
            self.value = target
            self.early = self.early or watchdog
            return True

    def free(self):
        if self.host and not self.stuck:
            self.d.mem_free_host(self.host)
        self.host = None


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
        # "auto" tries the holds best first; a method name forces it (falling back only to
        # launch_included); "launch_included" skips the holds. For comparisons on a GPU node.
        self.latency_hold = options.get("latency_hold") or "auto"
        self.gpus = {}
        self.flag = None
        self.flag_failed = False

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
        """(microseconds per small copy src->dst, the method that timed it)."""
        self.d.set_current(src.ctx)
        stream = src.streams[0]
        for _rep in range(max(1, self.warmup)):
            self.d.memcpy_peer_async(dst.recv, dst.ctx, src.send, src.ctx, LATENCY_BYTES, stream)
        # The stream is idle before it is held (the sample synchronizes it here too).
        self.d.event_record(src.stop, stream)
        self.d.event_wait(src.stop, self.timeout)
        for method in list(self._hold_methods(src)):
            try:
                value = self.held_latency(src, dst, method)
            except HoldUnavailable:
                src.hold_methods.remove(method)
                continue
            if value is not None:
                return value, method
            break  # the hold gave way while the copies were queued: time them as they are queued
        return self.launch_latency(src, dst), LATENCY_LAUNCH_INCLUDED

    def launch_latency(self, src, dst):
        """Copies timed as they are queued: each one's launch cost counts (the method before holds)."""
        self.d.set_current(src.ctx)
        stream = src.streams[0]
        self.d.event_record(src.start, stream)
        for _rep in range(self.lat_iters):
            self.d.memcpy_peer_async(dst.recv, dst.ctx, src.send, src.ctx, LATENCY_BYTES, stream)
        self.d.event_record(src.stop, stream)
        self.d.event_wait(src.stop, self.timeout)
        return round(self.d.elapsed_ms(src.start, src.stop) * 1e3 / self.lat_iters, 2)

    def held_latency(self, src, dst, method):
        """Copies queued behind a hold and run back to back once it is released (the sample's way).

        Sequence on src.streams[0]: hold, start event, ``latency_iterations`` copies, stop event;
        then the flag is released (in ``finally``: also when a copy fails) and the stop event
        waited for with the timeout. Returns None when the hold opened before everything was
        queued (the watchdog, or the spin kernel's own limit), so the figure would count queuing.
        Raises HoldUnavailable when the hold cannot be set up (nothing was queued then).
        """
        self.d.set_current(src.ctx)
        stream = src.streams[0]
        flag = self._flag()
        if src.flag_dptr is None:
            try:
                src.flag_dptr = self.d.mem_host_device_pointer(flag.host)
            except (CudaError, DriverMissing) as exc:
                raise HoldUnavailable(str(exc))
        target = flag.arm()
        self._enqueue_hold(src, method, stream, target)
        watchdog = threading.Timer(min(HOLD_RELEASE_S, self.timeout), flag.release, args=(target, True))
        watchdog.daemon = True
        watchdog.start()
        try:
            self.d.event_record(src.start, stream)
            for _rep in range(self.lat_iters):
                self.d.memcpy_peer_async(dst.recv, dst.ctx, src.send, src.ctx, LATENCY_BYTES, stream)
            self.d.event_record(src.stop, stream)
            # Everything is queued: the copies ran behind the hold unless it already opened.
            held = not self.d.event_query(src.start)
        finally:
            watchdog.cancel()
            watchdog.join()  # no release from it after this point
            flag.release(target)
        try:
            self.d.event_wait(src.stop, self.timeout)
        except CopyTimeout as exc:
            if self.d.event_query(src.start):
                raise  # the hold opened: the copies themselves hang
            flag.stuck = True
            raise HoldTimeout("the stream held by %s did not start within %.0f s after its flag was released "
                              "(%s)" % (method, self.timeout, exc))
        if not held or flag.early:
            return None
        return round(self.d.elapsed_ms(src.start, src.stop) * 1e3 / self.lat_iters, 2)

    def _hold_methods(self, gpu):
        """The holds to try on ``gpu``, best first; decided once per GPU."""
        if gpu.hold_methods is None:
            gpu.hold_methods = []
            if self.latency_hold == LATENCY_LAUNCH_INCLUDED or self.flag_failed:
                return gpu.hold_methods
            # A driver object without the hold calls (an older binding) measures as before.
            if not all(hasattr(self.d, name) for name in (
                    "mem_host_alloc_mapped", "mem_host_device_pointer", "host_write_u32", "event_query",
                    "stream_wait_value_support", "stream_wait_value32", "module_load_data", "launch_kernel")):
                return gpu.hold_methods
            wanted = HOLD_METHODS if self.latency_hold == "auto" else (self.latency_hold,)
            if LATENCY_WAIT_VALUE in wanted:
                try:
                    supported, _why = self.d.stream_wait_value_support(gpu.dev)
                except (CudaError, DriverMissing):
                    supported = False
                if supported:
                    gpu.hold_methods.append(LATENCY_WAIT_VALUE)
            if LATENCY_SPIN_KERNEL in wanted:
                gpu.hold_methods.append(LATENCY_SPIN_KERNEL)
        if self.flag_failed:
            del gpu.hold_methods[:]
        return gpu.hold_methods

    def _flag(self):
        if self.flag_failed:
            raise HoldUnavailable("no host flag")
        if self.flag is None:
            try:
                self.flag = HostFlag(self.d)
            except (CudaError, DriverMissing) as exc:
                self.flag_failed = True
                raise HoldUnavailable(str(exc))
        return self.flag

    def _enqueue_hold(self, gpu, method, stream, target):
        try:
            if method == LATENCY_WAIT_VALUE:
                self.d.stream_wait_value32(stream, gpu.flag_dptr, target, CU_STREAM_WAIT_VALUE_GEQ)
                return
            if gpu.hold_kernel is None:
                module = self.d.module_load_data(HOLD_KERNEL_PTX)
                try:
                    gpu.hold_kernel = (module, self.d.module_get_function(module, HOLD_KERNEL_NAME))
                except CudaError:
                    self.d.module_unload(module)
                    raise
            args = [ctypes.c_uint64(gpu.flag_dptr), ctypes.c_uint32(target),
                    ctypes.c_uint64(HOLD_KERNEL_TIMEOUT_CLOCKS)]
            self.d.launch_kernel(gpu.hold_kernel[1], args, stream)
        except (CudaError, DriverMissing) as exc:
            raise HoldUnavailable(str(exc))

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
            fwd["latency_staged_us"], fwd["latency_staged_method"] = self.latency(a, b)
            rev["latency_staged_us"], rev["latency_staged_method"] = self.latency(b, a)
        if access_ab and access_ba:
            self._peer(a, b, True)
            try:
                fwd["unidirectional_p2p_gbps"] = self.unidirectional(a, b, self.size)
                fwd["data_ok"] = self.integrity(a, b)
                rev["unidirectional_p2p_gbps"] = self.unidirectional(b, a, self.size)
                rev["data_ok"] = self.integrity(b, a)
                bidi["bidirectional_p2p_gbps"] = self.bidirectional(a, b, self.size)
                fwd["latency_p2p_us"], fwd["latency_method"] = self.latency(a, b)
                rev["latency_p2p_us"], rev["latency_method"] = self.latency(b, a)
            finally:
                self._peer(a, b, False)
        for res in (fwd, rev):
            if "latency_method" not in res and "latency_staged_method" in res:
                res["latency_method"] = res["latency_staged_method"]
            staged = res.get("unidirectional_staged_gbps")
            p2p = res.get("unidirectional_p2p_gbps")
            res["p2p_speedup"] = round(p2p / staged, 2) if p2p and staged else None
        return fwd, rev, bidi

    def _free_flag(self):
        """Free the host flag while its context is alive (errors ignored, as in Gpu.release)."""
        if self.flag is None:
            return
        try:
            if self.gpus:
                self.d.set_current(next(iter(self.gpus.values())).ctx)
            self.flag.free()
        except CudaError:
            pass
        self.flag = None

    def run(self, indices, links, progress=None):
        """Measure every pair of ``indices``; ``links`` maps (a, b) to (link type, topology).
        ``progress`` (common.progress.Progress) is told each pair as it starts."""
        ordered, bidirectional = [], []
        pairs = p2p_plan.plan_pairs(indices)
        try:
            for index in indices:
                gpu = Gpu(self.d, index, self.nstreams)
                self.gpus[index] = gpu
                gpu.allocate(self.d, self.size)
            for number, (a, b) in enumerate(pairs):
                if progress is not None:
                    progress.update(number, len(pairs), "pairs, measuring GPU %d <-> GPU %d" % (a, b))
                link, topo = links.get((a, b), ("unknown", None))
                try:
                    fwd, rev, bidi = self.measure_pair(self.gpus[a], self.gpus[b])
                except CudaError as exc:
                    fwd, rev, bidi = ({"src": a, "dst": b, "error": str(exc)},
                                      {"src": b, "dst": a, "error": str(exc)}, {"a": a, "b": b, "error": str(exc)})
                except HoldTimeout as exc:
                    raise HoldTimeout("GPU %d <-> GPU %d: %s; the latency hold is stuck, not the P2P path "
                                      "(latency_hold=launch_included measures without it)" % (a, b, exc))
                except CopyTimeout as exc:
                    raise CopyTimeout("GPU %d <-> GPU %d: %s; the P2P path hangs (check IOMMU mode "
                                      "such as iommu=pt, and PCIe ACS)" % (a, b, exc))
                for res in (fwd, rev, bidi):
                    res["link"] = link
                    res["topology"] = topo
                ordered.extend([fwd, rev])
                bidirectional.append(bidi)
        finally:
            self._free_flag()
            for gpu in self.gpus.values():
                gpu.release(self.d)
        if progress is not None:
            progress.update(len(pairs), len(pairs), "pairs measured")
        ordered.sort(key=lambda r: (r["src"], r["dst"]))
        return ordered, bidirectional


def measure(driver, nvml, params, progress=None):
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
    ordered, bidirectional = runner.run(indices, links, progress)
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
