"""P2P latency measured as p2pBandwidthLatencyTest measures it: the stream is held (a wait on a host
flag, else a spin kernel), the timed copies are queued behind the hold and released at once, so the
events time the copies alone. HeldFake extends the bandwidth tests' FakeDriver with a GPU timeline:
every driver call costs the host ``launch_us``; a copy takes the GPU ``copy_us``; a held stream
queues its work until the flag it waits on is released."""

import ctypes
import threading
import time

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_measure as pm
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_p2p_bandwidth import FakeDriver

WAIT, SPIN, LAUNCH = pm.LATENCY_WAIT_VALUE, pm.LATENCY_SPIN_KERNEL, pm.LATENCY_LAUNCH_INCLUDED


def options(**kw):
    base = dict(gpus=None, size_bytes=1 << 20, repetitions=2, warmup=1, staged=True, latency_iterations=100,
                streams=1, timeout_s=5.0)
    base.update(kw)
    return base


def not_supported(call):
    return cuda_driver.CudaError(call, cuda_driver.CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                                 "operation not supported")


class HeldFake(FakeDriver):
    def __init__(self, n=2, wait_value=True, wait_refused=False, ptx_error=False, alloc_error=False,
                 flag_seen=True, spin_gives_up=False, blocking_enqueue=False, copies_hang=False,
                 launch_us=3.5, copy_us=2.2, fail_latency_copy=None, **kw):
        super().__init__(n, **kw)
        self.wait_value = wait_value
        self.wait_refused = wait_refused
        self.ptx_error = ptx_error
        self.alloc_error = alloc_error
        self.flag_seen = flag_seen
        self.spin_gives_up = spin_gives_up
        self.blocking_enqueue = blocking_enqueue
        self.copies_hang = copies_hang
        self.launch_us = launch_us
        self.copy_us = copy_us
        self.fail_latency_copy = fail_latency_copy  # fail the n-th 16-byte copy
        self.latency_copies = 0
        self.host_us = 0.0
        self.log = []
        self.gpu_t = {}
        self.holds = {}  # stream -> (kind, flag address, target)
        self.pending = {}  # stream -> queued work of a held stream
        self.ev_us = {}
        self.pending_events = set()
        self.host = {}  # pinned host allocations: address -> ctypes buffer
        self.modules = {}
        self.alloc_calls = 0

    # --- the timeline -------------------------------------------------------------------------
    def _run(self, stream, item):
        t = max(self.gpu_t.get(stream, 0.0), self.host_us)
        if item[0] == "copy":
            t += item[1]
        else:
            self.ev_us[item[1]] = t
            self.pending_events.discard(item[1])
        self.gpu_t[stream] = t

    def _queue(self, stream, item):
        if stream in self.holds or (self.copies_hang and self.pending.get(stream)):
            self.pending.setdefault(stream, []).append(item)
            if item[0] == "event":
                self.pending_events.add(item[1])
        else:
            self._run(stream, item)

    def _hold(self, stream, kind, address, target):
        if (self.flag(address) - target) & 0xFFFFFFFF < 0x80000000:
            return  # already satisfied
        self.holds[stream] = (kind, address, target)
        self.pending[stream] = []

    def _open(self, stream):
        del self.holds[stream]
        queued = self.pending.pop(stream)
        if self.copies_hang:  # the start event runs, the copies after it never finish
            self._run(stream, queued[0])
            self.pending[stream] = queued[1:]
            return
        for item in queued:
            self._run(stream, item)

    def flag(self, address):
        return ctypes.c_uint32.from_address(address).value

    # --- the calls p2p_measure makes ------------------------------------------------------
    def memcpy_peer_async(self, dst, dst_ctx, src, src_ctx, size, stream):
        self.log.append(("copy", stream, size))
        if size == pm.LATENCY_BYTES:
            self.latency_copies += 1
            if self.fail_latency_copy and self.latency_copies == self.fail_latency_copy:
                raise cuda_driver.CudaError("cuMemcpyPeerAsync", 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument")
        deadline = time.monotonic() + 5
        while self.blocking_enqueue and stream in self.holds:  # no room to queue until the stream moves
            assert time.monotonic() < deadline, "nothing released the hold"
            time.sleep(0.001)
        super().memcpy_peer_async(dst, dst_ctx, src, src_ctx, size, stream)
        self.host_us += self.launch_us
        direct = (src_ctx, dst_ctx) in self.peer and (dst_ctx, src_ctx) in self.peer
        rate = self.rates.get((src_ctx, dst_ctx), 390.0) if direct else self.staged_rate
        self._queue(stream, ("copy", self.copy_us + size / (rate * 1e3)))

    def event_record(self, e, s):
        self.log.append(("record", e, s))
        self._queue(s, ("event", e))

    def stream_wait_event(self, s, e):
        if s not in self.holds:
            self.gpu_t[s] = max(self.gpu_t.get(s, 0.0), self.ev_us.get(e, 0.0))

    def event_wait(self, e, timeout):
        self.log.append(("event_wait", e))
        if e in self.pending_events:
            raise cuda_driver.CopyTimeout("copies did not finish within %.0f s" % timeout)

    def event_query(self, e):
        self.log.append(("query", e))
        return e not in self.pending_events

    def elapsed_ms(self, a, b):
        return (self.ev_us[b] - self.ev_us[a]) / 1e3

    def mem_host_alloc_mapped(self, size):
        self.alloc_calls += 1
        if self.alloc_error:
            raise cuda_driver.CudaError("cuMemHostAlloc", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory")
        buf = ctypes.create_string_buffer(size)
        self.host[ctypes.addressof(buf)] = buf
        return ctypes.addressof(buf)

    def mem_host_device_pointer(self, host_ptr):
        assert host_ptr in self.host
        return host_ptr  # unified addressing: the same address

    def mem_free_host(self, host_ptr):
        del self.host[host_ptr]

    def host_write_u32(self, host_ptr, value):
        self.log.append(("release", value, threading.current_thread() is threading.main_thread()))
        cuda_driver.Driver.host_write_u32(host_ptr, value)
        if not self.flag_seen:
            return
        for stream, (_kind, address, target) in list(self.holds.items()):
            if address == host_ptr and (value - target) & 0xFFFFFFFF < 0x80000000:
                self._open(stream)

    def stream_wait_value_support(self, dev):
        return self.wait_value, "fake"

    def stream_wait_value32(self, stream, dptr, value, flags=0):
        self.log.append(("wait", stream, value, flags))
        if self.wait_refused:
            raise not_supported("cuStreamWaitValue32_v2")
        assert flags == cuda_driver.CU_STREAM_WAIT_VALUE_GEQ
        self._hold(stream, "wait", dptr, value)

    def module_load_data(self, image):
        self.log.append(("load", self.current))
        if self.ptx_error:
            raise cuda_driver.CudaError("cuModuleLoadData", 218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed")
        assert ".entry %s(" % cuda_driver.HOLD_KERNEL_NAME in image
        module = ("module", len(self.modules) + 1)
        self.modules[module] = self.current
        return module

    def module_get_function(self, module, name):
        assert name == cuda_driver.HOLD_KERNEL_NAME
        return ("function", module)

    def module_unload(self, module):
        del self.modules[module]

    def launch_kernel(self, func, args, stream, grid=(1, 1, 1), block=(1, 1, 1), shared_bytes=0):
        flag, target, clocks = [arg.value for arg in args]
        self.log.append(("spin", stream, target, clocks))
        self.host_us += self.launch_us
        if not self.spin_gives_up:  # the kernel's clock limit ran out before the copies were queued
            self._hold(stream, "spin", flag, target)


def run(fake, **kw):
    return pm.measure(fake, None, options(**kw))


def pair(result, src, dst):
    return [p for p in result["pairs"] if (p["src"], p["dst"]) == (src, dst)][0]


def clean(fake):
    assert fake.mem == {} and fake.host == {} and fake.modules == {} and fake.holds == {}
    assert sorted(fake.released) == list(range(fake.n))


def test_the_wait_value_hold_times_the_copies_alone():
    fake = HeldFake()
    result = run(fake, size_bytes=256 << 20)
    for src, dst in ((0, 1), (1, 0)):
        res = pair(result, src, dst)
        # 2.2 us a copy on the GPU; queuing one costs the host 3.5 us, which no longer counts
        assert res["latency_p2p_us"] == pytest.approx(2.2, abs=0.01)
        assert res["latency_staged_us"] == pytest.approx(2.2, abs=0.01)
        assert res["latency_method"] == WAIT and res["latency_staged_method"] == WAIT
        assert res["unidirectional_p2p_gbps"] == pytest.approx(390.0, rel=0.01)  # bandwidth as before
    clean(fake)
    launched = run(HeldFake(), latency_hold=LAUNCH)
    assert pair(launched, 0, 1)["latency_p2p_us"] == pytest.approx(3.5, abs=0.05)
    assert pair(launched, 0, 1)["latency_method"] == LAUNCH


def test_the_sequence_hold_start_copies_stop_release_wait():
    fake = HeldFake()
    runner = pm.Runner(fake, options())
    a, b = pm.Gpu(fake, 0, 1), pm.Gpu(fake, 1, 1)
    for gpu in (a, b):
        gpu.allocate(fake, 1 << 20)
    del fake.log[:]
    assert runner.latency(a, b) == (pytest.approx(2.2, abs=0.01), WAIT)
    names = [entry[0] for entry in fake.log]
    stream = a.streams[0]
    wait = names.index("wait")
    start = fake.log.index(("record", a.start, stream))
    stop = fake.log.index(("record", a.stop, stream), wait)
    release = fake.log.index(("release", 1, True))
    # warm-up copies drained first, then: hold, start, 100 copies, stop, check, release, wait for stop
    assert names[:wait].count("copy") == 1 and "event_wait" in names[:wait]
    assert wait < start < stop < release
    assert fake.log[wait] == ("wait", stream, 1, cuda_driver.CU_STREAM_WAIT_VALUE_GEQ)
    copies = fake.log[start + 1:stop]
    assert copies == [("copy", stream, 16)] * 100  # the sample's 1-int4 copies, on the held stream
    assert fake.log[stop + 1] == ("query", a.start) and stop + 1 < release
    assert fake.log[release] == ("release", 1, True)  # the target the wait was given, from this thread
    assert fake.log[release + 1] == ("event_wait", a.stop)
    # the next hold waits for a new value: a late release of this one cannot open it
    runner.latency(b, a)
    assert [e[2] for e in fake.log if e[0] == "wait"] == [1, 2]
    assert fake.flag(runner.flag.host) == 2


def test_the_flag_is_released_even_when_a_copy_fails():
    fake = HeldFake(fail_latency_copy=3 + 50)  # warm-up (staged off) then 50 copies into the hold
    result = run(fake, staged=False)
    assert pair(result, 0, 1)["error"].startswith("cuMemcpyPeerAsync failed")
    assert fake.log[-1][0] != "wait"
    releases = [e for e in fake.log if e[0] == "release" and e[1] > 0]
    assert releases == [("release", 1, True)]
    assert fake.holds == {}  # the stream runs again
    assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]
    clean(fake)


def test_no_wait_value_support_falls_back_to_the_spin_kernel():
    fake = HeldFake(wait_value=False)
    result = run(fake)
    res = pair(result, 0, 1)
    assert res["latency_p2p_us"] == pytest.approx(2.2, abs=0.01)
    assert res["latency_method"] == SPIN and res["latency_staged_method"] == SPIN
    assert not [e for e in fake.log if e[0] == "wait"]
    spins = [e for e in fake.log if e[0] == "spin"]
    assert len(spins) == 4 and spins[0][3] == pm.HOLD_KERNEL_TIMEOUT_CLOCKS
    assert [e[2] for e in spins] == [1, 2, 3, 4]
    assert sorted(e[1] for e in fake.log if e[0] == "load") == [0, 1]  # loaded once per GPU
    clean(fake)  # and unloaded


def test_a_wait_the_driver_refuses_falls_back_to_the_spin_kernel_on_that_gpu():
    fake = HeldFake(wait_refused=True)
    result = run(fake)
    assert {p["latency_method"] for p in result["pairs"]} == {SPIN}
    # refused once per GPU, then not asked again
    assert len([e for e in fake.log if e[0] == "wait"]) == 2
    clean(fake)


def test_neither_hold_works_launch_included():
    fake = HeldFake(wait_value=False, ptx_error=True)
    result = run(fake)
    res = pair(result, 1, 0)
    assert res["latency_method"] == LAUNCH and res["latency_staged_method"] == LAUNCH
    assert res["latency_p2p_us"] == pytest.approx(3.5, abs=0.05)
    assert len([e for e in fake.log if e[0] == "load"]) == 2
    clean(fake)


def test_no_pinned_flag_launch_included_and_not_asked_again():
    fake = HeldFake(alloc_error=True)
    result = run(fake)
    assert {p["latency_method"] for p in result["pairs"]} == {LAUNCH}
    assert fake.alloc_calls == 1
    assert not [e for e in fake.log if e[0] in ("wait", "spin", "load")]
    clean(fake)


def test_a_spin_kernel_that_gave_up_early_is_not_a_held_figure():
    fake = HeldFake(wait_value=False, spin_gives_up=True)
    res = pair(run(fake), 0, 1)
    assert res["latency_method"] == LAUNCH
    assert res["latency_p2p_us"] == pytest.approx(3.5, abs=0.05)
    clean(fake)


def test_a_queue_that_blocks_is_opened_by_the_watchdog_and_measured_launch_included(monkeypatch):
    monkeypatch.setattr(pm, "HOLD_RELEASE_S", 0.05)
    fake = HeldFake(blocking_enqueue=True)
    started = time.monotonic()
    result = run(fake, staged=False)
    assert time.monotonic() - started < 3
    res = pair(result, 0, 1)
    assert res["latency_method"] == LAUNCH and res["latency_p2p_us"] == pytest.approx(3.5, abs=0.05)
    assert ("release", 1, False) in fake.log  # from the watchdog thread
    clean(fake)


def test_a_hold_that_never_opens_times_out_and_keeps_the_flag():
    fake = HeldFake(flag_seen=False)
    with pytest.raises(cuda_driver.HoldTimeout) as exc:
        run(fake, timeout_s=3.0)
    msg = str(exc.value)
    assert msg.startswith("GPU 0 <-> GPU 1: the stream held by held_stream_wait_value did not start within 3 s")
    assert "the latency hold is stuck, not the P2P path" in msg
    assert ("release", 1, True) in fake.log  # released all the same
    # device memory and contexts freed; the flag a GPU may still read is left to the process exit
    assert fake.mem == {} and sorted(fake.released) == [0, 1] and len(fake.host) == 1


def test_copies_that_hang_after_the_hold_opened_are_a_p2p_hang():
    fake = HeldFake(copies_hang=True)
    with pytest.raises(cuda_driver.CopyTimeout) as exc:
        run(fake, staged=False)
    assert not isinstance(exc.value, cuda_driver.HoldTimeout)
    assert "the P2P path hangs" in str(exc.value)
    assert fake.host == {}


@pytest.mark.parametrize("hold, method, alloc", [(SPIN, SPIN, 1), (WAIT, WAIT, 1), (LAUNCH, LAUNCH, 0)])
def test_latency_hold_forces_a_method(hold, method, alloc):
    fake = HeldFake()
    result = run(fake, latency_hold=hold)
    assert {p["latency_method"] for p in result["pairs"]} == {method}
    assert fake.alloc_calls == alloc
    clean(fake)


def test_a_forced_wait_without_support_is_launch_included():
    result = run(HeldFake(wait_value=False), latency_hold=WAIT)
    assert {p["latency_method"] for p in result["pairs"]} == {LAUNCH}


def test_a_pair_without_peer_access_reports_the_staged_method():
    result = run(HeldFake(no_peer=[(0, 1)]))
    res = pair(result, 0, 1)
    assert "latency_p2p_us" not in res
    assert res["latency_method"] == res["latency_staged_method"] == WAIT


def test_the_host_flag_only_grows_cyclically():
    fake = HeldFake()
    flag = pm.HostFlag(fake)
    target = flag.arm()
    assert target == 1 and flag.release(target) is True and flag.release(target, watchdog=True) is False
    assert flag.early is False
    flag.value = 0xFFFFFFFF
    target = flag.arm()
    assert target == 0 and flag.release(target, watchdog=True) is True and flag.early is True
    assert flag.release(0xFFFFFFFF) is False  # an older value is never written back
    assert fake.flag(flag.host) == 0
    flag.free()
    assert fake.host == {}
