"""The measurement itself over a simulated driver: discovery, the figures of one pair, streams,
peer access, integrity and clean-up. The driver's clock advances at a per-pair rate, so every
figure is known in advance (see FakeDriver in test_p2p_bandwidth)."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_measure as pm
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_p2p_bandwidth import (
    FakeDriver, FakeNvml)

MIB = 1 << 20


def options(**kw):
    base = dict(gpus=None, size_bytes=64 * MIB, repetitions=4, warmup=1, staged=True, latency_iterations=10,
                streams=1, timeout_s=10.0)
    base.update(kw)
    return base


def test_discover_lists_gpus_in_bus_order_with_sysfs_addresses():
    devices = pm.discover(FakeDriver(3))
    assert [d["index"] for d in devices] == [0, 1, 2]
    # the driver prints upper case; the result is as sysfs and NVML name it
    assert [d["bdf"] for d in devices] == ["0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
    assert devices[0]["name"] == "NVIDIA H200" and devices[0]["memory_gib"] == 141.0


def test_discover_keeps_an_address_it_cannot_parse():
    fake = FakeDriver(1)
    fake.pci_bus_id = lambda dev: "weird-bus-id"
    assert pm.discover(fake)[0]["bdf"] == "weird-bus-id"


def test_fewer_than_two_gpus_is_a_skip_with_what_was_seen():
    result = pm.measure(FakeDriver(1), FakeNvml(), options())
    assert result["skipped"] is True and result["gpus"] == 1 and "at least 2" in result["msg"]
    assert result["devices"][0]["bdf"] == "0000:06:00.0" and result["driver_version"] == "13.0"
    assert "pairs" not in result


def test_the_figures_of_one_pair():
    fake = FakeDriver(2, rates={(0, 1): 400.0, (1, 0): 200.0}, staged_rate=40.0)
    result = pm.measure(fake, FakeNvml("pcie"), options())
    fwd, rev = result["pairs"]
    assert (fwd["src"], fwd["dst"], rev["src"], rev["dst"]) == (0, 1, 1, 0)
    assert fwd["unidirectional_p2p_gbps"] == pytest.approx(400.0, rel=1e-3)
    assert rev["unidirectional_p2p_gbps"] == pytest.approx(200.0, rel=1e-3)
    assert fwd["unidirectional_staged_gbps"] == pytest.approx(40.0, rel=1e-3)
    assert fwd["p2p_speedup"] == pytest.approx(10.0, rel=1e-2)
    assert fwd["link"] == "pcie" and fwd["topology"] == "same host bridge"
    assert fwd["peer_access"] is True and fwd["perf_rank"] == 0 and fwd["data_ok"] is True
    # latency: 10 copies of 4 bytes between two events, in microseconds
    assert fwd["latency_p2p_us"] == pytest.approx(4 / 400e9 * 1e6, abs=0.01)
    [bidi] = result["bidirectional"]
    assert (bidi["a"], bidi["b"], bidi["link"]) == (0, 1, "pcie")
    # both directions on one clock: twice the bytes in the time of both copies
    assert bidi["bidirectional_p2p_gbps"] == pytest.approx(2 / (1 / 400.0 + 1 / 200.0), rel=1e-3)
    assert result["selected"] == [0, 1] and result["matrices"]["gpus"] == [0, 1]
    assert result["table"].startswith("GPU 0: NVIDIA H200 (0000:06:00.0)")


def test_staged_copies_are_capped_and_can_be_left_out():
    fake = FakeDriver(2)
    sizes = []
    real = fake.memcpy_peer_async

    def record(dst, dst_ctx, src, src_ctx, size, stream):
        sizes.append((size, (src_ctx, dst_ctx) in fake.peer))
        return real(dst, dst_ctx, src, src_ctx, size, stream)

    fake.memcpy_peer_async = record
    pm.measure(fake, None, options(size_bytes=256 * MIB))
    assert max(size for size, direct in sizes if not direct) == pm.STAGED_MAX_BYTES
    assert max(size for size, direct in sizes if direct) == 256 * MIB
    result = pm.measure(FakeDriver(2), None, options(staged=False))
    fwd = result["pairs"][0]
    assert "unidirectional_staged_gbps" not in fwd and fwd["p2p_speedup"] is None
    assert fwd["link"] == "unknown" and fwd["topology"] is None  # no NVML
    assert "bidirectional_staged_gbps" not in result["bidirectional"][0]


def test_streams_split_each_copy_and_cover_every_byte():
    fake = FakeDriver(2)
    copies = []
    real = fake.memcpy_peer_async

    def record(dst, dst_ctx, src, src_ctx, size, stream):
        copies.append((stream, size))
        return real(dst, dst_ctx, src, src_ctx, size, stream)

    fake.memcpy_peer_async = record
    runner = pm.Runner(fake, options(size_bytes=10 * MIB + 3, streams=3, warmup=0, repetitions=1))
    gpus = [pm.Gpu(fake, i, 3) for i in (0, 1)]
    for gpu in gpus:
        gpu.allocate(fake, runner.size)
    runner.unidirectional(gpus[0], gpus[1], runner.size)
    assert sorted(set(stream for stream, _size in copies)) == gpus[0].streams
    assert sum(size for _stream, size in copies) == 10 * MIB + 3


def test_a_pair_without_peer_access_gets_only_staged_figures():
    fake = FakeDriver(2, no_peer=[(0, 1)])
    result = pm.measure(fake, None, options())
    for pair in result["pairs"]:
        assert pair["peer_access"] is False and "unidirectional_p2p_gbps" not in pair and "data_ok" not in pair
        assert pair["unidirectional_staged_gbps"] == pytest.approx(38.0, rel=1e-3)
    assert fake.peer == set()


def test_corrupted_data_is_reported_per_direction():
    result = pm.measure(FakeDriver(2, corrupt=[(1, 0)]), None, options())
    assert [(p["src"], p["dst"], p["data_ok"]) for p in result["pairs"]] == [(0, 1, True), (1, 0, False)]


def test_a_driver_error_is_recorded_for_that_pair_and_the_rest_measured():
    fake = FakeDriver(3, fail=(2, 0))
    result = pm.measure(fake, None, options())
    errors = [(p["src"], p["dst"]) for p in result["pairs"] if p.get("error")]
    assert errors == [(0, 2), (2, 0)]
    assert [b for b in result["bidirectional"] if (b["a"], b["b"]) == (0, 2)][0]["error"].startswith(
        "cuMemcpyPeerAsync failed")
    assert fake.mem == {} and fake.peer == set() and sorted(fake.released) == [0, 1, 2]


def test_peer_access_already_on_or_off_is_not_an_error():
    fake = FakeDriver(2)
    runner = pm.Runner(fake, options())
    a, b = pm.Gpu(fake, 0, 1), pm.Gpu(fake, 1, 1)

    def already(_peer):
        raise cuda_driver.CudaError("cuCtxEnablePeerAccess", pm.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
                                    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "already enabled")

    fake.enable_peer = already
    runner._peer(a, b, True)

    def broken(_peer):
        raise cuda_driver.CudaError("cuCtxDisablePeerAccess", 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument")

    fake.disable_peer = broken
    with pytest.raises(cuda_driver.CudaError, match="CUDA_ERROR_INVALID_VALUE"):
        runner._peer(a, b, False)


def test_a_hang_names_the_pair_and_frees_everything():
    fake = FakeDriver(2)

    def hang(_event, timeout):
        raise cuda_driver.CopyTimeout("copies did not finish within %s s" % timeout)

    fake.event_wait = hang
    with pytest.raises(cuda_driver.CopyTimeout) as exc:
        pm.measure(fake, None, options(timeout_s=2.5))
    assert str(exc.value).startswith("GPU 0 <-> GPU 1: copies did not finish within 2.5 s; the P2P path hangs")
    assert fake.mem == {} and sorted(fake.released) == [0, 1]


def test_release_ignores_driver_errors_and_releases_the_context_once():
    fake = FakeDriver(2)
    gpu = pm.Gpu(fake, 0, 2)
    gpu.allocate(fake, MIB)

    def gone(_ptr):
        raise cuda_driver.CudaError("cuMemFree", 999, "CUDA_ERROR_UNKNOWN", "device lost")

    fake.mem_free = gone
    gpu.release(fake)
    gpu.release(fake)
    assert fake.released == [0]


def test_every_gpu_gets_a_non_zero_pattern():
    # a zero pattern would equal the cleared receive buffer and hide a copy that never ran
    fake = FakeDriver(2)
    patterns = [pm.Gpu(fake, index, 1).pattern for index in range(256)]
    assert 0 not in patterns and patterns[70] == 0x01


def test_a_driver_without_the_hold_calls_measures_latency_launch_included():
    # the bandwidth tests' FakeDriver has no host flag, wait or kernel calls: latency as before
    fake = FakeDriver(2)
    sizes = set()
    real = fake.memcpy_peer_async

    def record(dst, dst_ctx, src, src_ctx, size, stream):
        sizes.add(size)
        return real(dst, dst_ctx, src, src_ctx, size, stream)

    fake.memcpy_peer_async = record
    result = pm.measure(fake, None, options())
    for pair in result["pairs"]:
        assert pair["latency_method"] == pm.LATENCY_LAUNCH_INCLUDED == pair["latency_staged_method"]
    assert pm.LATENCY_BYTES == 16 and 16 in sizes  # the sample's 1-int4 copy


def test_progress_names_each_pair_as_it_starts_and_ends_with_all_measured():
    seen = []

    class Recorder:
        def update(self, done, total=None, what=None):
            seen.append((done, total, what))

    pm.measure(FakeDriver(4), FakeNvml(), options(staged=False), Recorder())
    # 4 GPUs: 6 pairs, each announced before it is measured, then the total.
    assert [s[:2] for s in seen] == [(n, 6) for n in range(7)]
    assert seen[0][2] == "pairs, measuring GPU 0 <-> GPU 1" and seen[5][2] == "pairs, measuring GPU 2 <-> GPU 3"
    assert seen[-1][2] == "pairs measured"
