"""The P2P check end to end over a simulated driver: selection, result shaping, verdicts,
skips and errors. The physics is a toy (copies advance a clock at a per-pair rate); what is
tested is everything around the driver."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils import p2p_bandwidth


class FakeDriver:
    """Implements the Driver methods p2p_measure uses. Contexts are ints (device index)."""

    def __init__(self, n=2, rates=None, staged_rate=38.0, no_peer=(), corrupt=(), fail=None, init_error=None):
        self.n = n
        self.rates = rates or {}
        self.staged_rate = staged_rate
        self.no_peer = set(no_peer)
        self.corrupt = set(corrupt)
        self.fail = fail
        self.init_error = init_error
        self.clock = 0.0
        self.events = {}
        self.peer = set()
        self.current = None
        self.mem = {}
        self.next_ptr = 0x1000
        self.streams = {}
        self.released = []
        self.calls = []

    # identity
    def init(self):
        if self.init_error:
            raise cuda_driver.CudaError("cuInit", self.init_error, "CUDA_ERROR_X", "boom")

    def driver_version(self):
        return "13.0"

    def device_count(self):
        return self.n

    def device(self, i):
        return i

    def device_name(self, dev):
        return "NVIDIA H200"

    def pci_bus_id(self, dev):
        return "0000:%02X:00.0" % (6 + dev)

    def total_mem(self, dev):
        return 141 << 30

    def can_access_peer(self, a, b):
        return (a, b) not in self.no_peer and (b, a) not in self.no_peer

    def p2p_attribute(self, attribute, a, b):
        return 0

    # contexts
    def primary_ctx_retain(self, dev):
        return dev

    def primary_ctx_release(self, dev):
        self.released.append(dev)

    def set_current(self, ctx):
        self.current = ctx

    def ctx_synchronize(self):
        pass

    def enable_peer(self, peer):
        self.peer.add((self.current, peer))

    def disable_peer(self, peer):
        self.peer.discard((self.current, peer))

    # memory
    def mem_alloc(self, size):
        self.next_ptr += size + 0x1000
        self.mem[self.next_ptr] = [self.current, size, 0]
        return self.next_ptr

    def mem_free(self, ptr):
        del self.mem[ptr]

    def memset_d8(self, ptr, value, size):
        self.mem[ptr][2] = value

    def memcpy_dtoh(self, ptr, size):
        base = max(p for p in self.mem if p <= ptr)
        return bytes([self.mem[base][2]]) * size

    def stream_create(self):
        s = len(self.streams) + 1
        self.streams[s] = self.current
        return s

    def stream_destroy(self, s):
        pass

    def stream_wait_event(self, s, e):
        pass

    def stream_synchronize(self, s):
        pass

    def event_create(self):
        e = len(self.events) + 1
        self.events[e] = 0.0
        return e

    def event_destroy(self, e):
        pass

    def event_record(self, e, s):
        self.events[e] = self.clock

    def event_wait(self, e, timeout):
        pass

    def elapsed_ms(self, a, b):
        return self.events[b] - self.events[a]

    def memcpy_peer_async(self, dst, dst_ctx, src, src_ctx, size, stream):
        if self.fail and self.fail == (src_ctx, dst_ctx):
            raise cuda_driver.CudaError("cuMemcpyPeerAsync", 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument")
        direct = (src_ctx, dst_ctx) in self.peer and (dst_ctx, src_ctx) in self.peer
        rate = self.rates.get((src_ctx, dst_ctx), 390.0) if direct else self.staged_rate
        self.clock += size / (rate * 1e9) * 1e3
        base = max(p for p in self.mem if p <= dst)
        src_base = max(p for p in self.mem if p <= src)
        value = self.mem[src_base][2]
        if direct and (src_ctx, dst_ctx) in self.corrupt:
            value ^= 0xFF
        self.mem[base][2] = value


class FakeNvml:
    def __init__(self, link="nvlink"):
        self.value = link
        self.closed = False

    def link(self, a, b):
        return self.value, "same host bridge"

    def shutdown(self):
        self.closed = True


def params(**kw):
    base = dict(gpus=None, size_mib=64, repetitions=4, warmup=1, streams=1, latency_iterations=10,
                measure_staged=True, timeout_s=10.0, min_unidirectional_gbps=None, min_bidirectional_gbps=None,
                min_speedup=None, require_peer_access=True, fail_on_threshold=True, cuda_library="libcuda.so.1")
    base.update(kw)
    return base


def outcome(given, driver=None, nvml=None):
    """(failed, result) as the module reports it: a ModuleFailure is its partial with its msg."""
    try:
        return False, p2p_bandwidth.run(given, tools=p2p_bandwidth.Libraries(driver=driver, nvml=nvml))
    except ModuleFailure as exc:
        assert "msg" not in exc.partial  # fail_json takes msg once
        return True, dict(exc.partial, msg=exc.message)


def run(fake, nvml=None, **kw):
    return outcome(params(**kw), driver=lambda lib: fake, nvml=lambda: nvml or FakeNvml())


def test_two_gpus_pass_with_h200_thresholds():
    fake = FakeDriver(2)
    failed, res = run(fake, min_unidirectional_gbps={"nvlink": 380, "pcie": 20},
                      min_bidirectional_gbps={"nvlink": 350}, min_speedup=1.5)
    assert not failed, res.get("msg")
    assert res["changed"] is False and res["gpus"] == 2 and res["selected"] == [0, 1]
    assert res["devices"][1]["bdf"] == "0000:07:00.0"
    assert [(p["src"], p["dst"]) for p in res["pairs"]] == [(0, 1), (1, 0)]
    fwd = res["pairs"][0]
    assert fwd["unidirectional_p2p_gbps"] == pytest.approx(390.0, rel=1e-3)
    assert fwd["unidirectional_staged_gbps"] == pytest.approx(38.0, rel=1e-3)
    assert fwd["p2p_speedup"] == pytest.approx(10.26, rel=1e-2)
    assert fwd["data_ok"] is True and fwd["link"] == "nvlink"
    assert res["matrices"]["unidirectional_p2p_gbps"][0][1] == fwd["unidirectional_p2p_gbps"]
    assert res["shortfalls"] == []
    assert "Unidirectional bandwidth, peer access ENABLED" in res["table"]
    assert fake.peer == set()            # peer access released again
    assert sorted(fake.released) == [0, 1]
    assert fake.mem == {}                # every buffer freed


def test_impossible_threshold_fails_with_clear_message():
    failed, res = run(FakeDriver(2), min_unidirectional_gbps=10000)
    assert failed
    assert res["msg"].startswith("GPU peer-to-peer falls short on 2 check(s): 0->1 ")
    assert "below the 10000.0 GB/s floor" in res["msg"]
    assert len(res["shortfalls"]) == 2 and res["table"]


def test_threshold_report_only():
    failed, res = run(FakeDriver(2), min_unidirectional_gbps=10000, fail_on_threshold=False)
    assert not failed and len(res["shortfalls"]) == 2


def test_slow_pair_no_peer_pair_and_corruption_in_a_4_gpu_node():
    fake = FakeDriver(4, rates={(0, 2): 100.0}, no_peer=[(1, 3)], corrupt=[(3, 0)])
    failed, res = run(fake, min_unidirectional_gbps=300)
    assert failed
    got = sorted((s["pair"], s["metric"]) for s in res["shortfalls"])
    assert got == [("0->2", "unidirectional_gbps"), ("1->3", "peer_access"), ("3->0", "data"), ("3->1", "peer_access")]
    assert len(res["pairs"]) == 12 and len(res["bidirectional"]) == 6
    no_peer = [p for p in res["pairs"] if (p["src"], p["dst"]) == (1, 3)][0]
    assert no_peer["peer_access"] is False and no_peer.get("unidirectional_p2p_gbps") is None
    assert no_peer["unidirectional_staged_gbps"] is not None


def test_selection_by_bdf():
    failed, res = run(FakeDriver(4), gpus=["0000:09:00.0", 0])
    assert not failed and res["selected"] == [0, 3]
    assert len(res["pairs"]) == 2


def test_driver_call_error_is_recorded_per_pair_and_fails():
    failed, res = run(FakeDriver(3, fail=(1, 2)))
    assert failed
    err = [s for s in res["shortfalls"] if s["metric"] == "error"]
    assert err and "cuMemcpyPeerAsync failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument" in err[0]["reason"]
    assert [p for p in res["pairs"] if (p["src"], p["dst"]) == (0, 1)][0]["data_ok"] is True


def test_no_driver_is_a_skip_not_a_failure():
    failed, res = outcome(params(cuda_library="libcuda.so.999"), nvml=FakeNvml)
    assert not failed
    assert res["skipped"] is True and res["gpus"] == 0 and res["changed"] is False
    assert "no NVIDIA driver" in res["msg"] and res["skip_reason"] == res["msg"]


def test_no_device_and_single_gpu_are_skips():
    failed, res = run(FakeDriver(init_error=100))
    assert not failed and res["skipped"] and "sees no GPU" in res["msg"]
    failed, res = run(FakeDriver(1))
    assert not failed and res["skipped"] and res["gpus"] == 1 and "at least 2" in res["msg"]


def test_other_init_error_fails():
    failed, res = run(FakeDriver(init_error=999))
    assert failed and res["msg"] == "cuInit failed: CUDA_ERROR_X (999): boom"


@pytest.mark.parametrize("kw, fragment", [
    (dict(size_mib=0), "size_mib=0: must be an integer from 1 to 65536"),
    (dict(streams=99), "streams=99"),
    (dict(timeout_s=0), "timeout_s=0"),
    (dict(min_bidirectional_gbps="lots"), "min_bidirectional_gbps='lots'"),
    (dict(measure_staged=False, min_speedup=2), "min_speedup needs measure_staged=true"),
    (dict(gpus=["gpu-a"]), "gpus entry 'gpu-a'"),
    # NaN would disable the timeout (every deadline comparison is false), inf waits for ever.
    (dict(timeout_s=float("nan")), "timeout_s=nan is not a finite number: give a finite number greater than 0 and at most 86400"),
    (dict(timeout_s=float("inf")), "timeout_s=inf is not a finite number"),
    (dict(timeout_s=float("-inf")), "timeout_s=-inf is not a finite number"),
    (dict(timeout_s="nan"), "timeout_s='nan' is not a finite number"),
    (dict(timeout_s=-5.0), "timeout_s=-5.0 is out of range"),
    (dict(timeout_s=86401), "timeout_s=86401 is out of range"),
    (dict(timeout_s=True), "timeout_s=True is not a number"),
    (dict(timeout_s=None), "timeout_s=None is not a number"),
    (dict(min_unidirectional_gbps=float("nan")), "min_unidirectional_gbps=nan is not a finite number"),
    (dict(min_bidirectional_gbps={"nvlink": "inf"}), "min_bidirectional_gbps.nvlink='inf' is not a finite number"),
    (dict(min_speedup="-inf"), "min_speedup='-inf' is not a finite number"),
    (dict(min_speedup=1e6), "min_speedup=1000000.0 is out of range: give a finite number from 0 to 1000"),
    (dict(min_unidirectional_gbps=1e300), "min_unidirectional_gbps=1e+300 is out of range"),
])
def test_bad_input_fails_before_the_driver_is_loaded(kw, fragment):
    def explode(lib):
        raise AssertionError("the driver must not be loaded for bad input")

    failed, res = outcome(params(**kw), driver=explode)
    assert failed and fragment in res["msg"]


def test_timeout_reaches_the_driver_as_a_finite_float():
    fake = FakeDriver(2)
    waits = []
    fake.event_wait = lambda e, timeout: waits.append(timeout)
    failed, res = run(fake, timeout_s="30")
    assert not failed, res.get("msg")
    assert waits and set(waits) == {30.0}


def test_copy_timeout_names_the_pair():
    fake = FakeDriver(2)

    def hang(e, timeout):
        raise cuda_driver.CopyTimeout("copies did not finish within 10 s")

    fake.event_wait = hang
    failed, res = run(fake)
    assert failed
    assert res["msg"].startswith("GPU 0 <-> GPU 1: copies did not finish within 10 s")
    assert "iommu=pt" in res["msg"]
    assert sorted(fake.released) == [0, 1]


# --- cuda_library: code that runs as root once loaded ------------------------------------------
@pytest.mark.parametrize("library, fragment", [
    ("./libcuda.so.1", "a relative path"),
    ("../../tmp/libcuda.so.1", "a relative path"),
    ("/usr/lib/../../tmp/libcuda.so.1", "it holds '..'"),
    ("libevil.so", "a bare name must be libcuda.so or libcuda.so.<version>"),
    ("libcuda.so.1;id", "a bare name must be libcuda.so"),
])
def test_an_untrusted_library_fails_before_anything_is_loaded(library, fragment):
    def explode(lib):
        raise AssertionError("no library may be loaded for cuda_library=%r" % lib)

    failed, res = outcome(params(cuda_library=library), driver=explode, nvml=FakeNvml)
    assert failed and not res.get("skipped")
    assert res["msg"].startswith("cuda_library=%r is not loaded: " % library)
    assert fragment in res["msg"]


def test_a_library_in_a_world_writable_folder_fails(tmp_path):
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(str(drop), 0o777)
    (drop / "libcuda.so.1").write_bytes(b"\x7fELF")

    def explode(lib):
        raise AssertionError("no library may be loaded")

    failed, res = outcome(params(cuda_library=str(drop / "libcuda.so.1")), driver=explode, nvml=FakeNvml)
    assert failed and "the folder %s is writable by group and others" % drop in res["msg"]


def test_a_missing_absolute_library_is_a_skip(tmp_path):
    failed, res = outcome(params(cuda_library="/usr/lib/gpufleet-absent/libcuda.so.1"), nvml=FakeNvml)
    assert not failed and res["skipped"] and "no NVIDIA driver" in res["msg"]


def test_the_driver_gets_the_resolved_path_of_a_trusted_library(tmp_path):
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    real = os.path.realpath(libc)
    if not os.path.exists(libc) or os.stat(real).st_uid != 0:
        pytest.skip("no root-owned %s here" % libc)
    seen = []

    def factory(lib):
        seen.append(lib)
        return FakeDriver(2)

    failed, res = outcome(params(cuda_library=libc), driver=factory, nvml=FakeNvml)
    assert not failed, res.get("msg")
    assert seen == [real]
    failed, res = outcome(params(cuda_library="libcuda.so.1"), driver=factory, nvml=FakeNvml)
    assert seen == [real, "libcuda.so.1"]


# --- issue 16: one engine contract, no change records from a measurement -------------------------

def test_every_outcome_that_is_not_a_failure_has_no_change_records():
    for kw in ({}, {"min_unidirectional_gbps": 10000, "fail_on_threshold": False}):
        failed, res = run(FakeDriver(2), **kw)
        assert not failed and res["changed"] is False and res["changes"] == []
    for fake in (FakeDriver(1), FakeDriver(init_error=100)):
        failed, res = run(fake)
        assert not failed and res["skipped"] is True and res["changes"] == []
    failed, res = outcome(params(cuda_library="libcuda.so.999"), nvml=FakeNvml)
    assert not failed and res["skipped"] is True and res["changes"] == []


def test_check_mode_measures_the_same_way():
    res = p2p_bandwidth.run(params(), check_mode=True,
                            tools=p2p_bandwidth.Libraries(driver=lambda lib: FakeDriver(2), nvml=FakeNvml))
    assert res["selected"] == [0, 1] and res["changes"] == []


def test_a_shortfall_failure_carries_every_figure():
    with pytest.raises(ModuleFailure) as exc:
        p2p_bandwidth.run(params(min_speedup=50),
                          tools=p2p_bandwidth.Libraries(driver=lambda lib: FakeDriver(2), nvml=FakeNvml))
    partial = exc.value.partial
    assert exc.value.message.startswith("GPU peer-to-peer falls short on 2 check(s): 0->1 peer access is only")
    assert [s["metric"] for s in partial["shortfalls"]] == ["p2p_speedup", "p2p_speedup"]
    assert partial["thresholds"]["min_speedup"]["nvlink"] == 50.0
    for key in ("pairs", "bidirectional", "matrices", "table", "devices", "selected", "elapsed_s"):
        assert key in partial, key


def test_the_argument_spec_defaults_pass_validation():
    defaults = dict((name, spec.get("default")) for name, spec in p2p_bandwidth.ARGUMENT_SPEC.items())
    opts, thresholds = p2p_bandwidth.validate(defaults)
    assert opts["size_bytes"] == 256 << 20 and opts["timeout_s"] == 60.0
    assert sorted(thresholds) == sorted(p2p_bandwidth.THRESHOLDS)
