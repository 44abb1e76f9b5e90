# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the p2p_bandwidth measurement outside Ansible and print the matrices, then measure
the same pairs with PyTorch's device-to-device copy in the same run, for comparison.

    python3 benchmarks/p2p_matrix.py                  # all GPUs, module defaults
    python3 benchmarks/p2p_matrix.py --size-mib 1024 --repetitions 20 --streams 2
    python3 benchmarks/p2p_matrix.py --json out.json  # also write the full result

PyTorch is used here only, never by the module. Without torch the comparison is skipped.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends), as on shared GPU hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), ".collections"))

for _var, _val in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_var, _val)

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_measure  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan  # noqa: E402


def torch_matrix(indices, size, reps, warmup):
    """Unidirectional and bidirectional GB/s with torch.Tensor.copy_ between GPUs."""
    import torch

    bufs = {}
    for i in indices:
        with torch.cuda.device(i):
            bufs[i] = (torch.empty(size, dtype=torch.uint8, device="cuda:%d" % i),
                       torch.empty(size, dtype=torch.uint8, device="cuda:%d" % i))
    uni, bidi = {}, {}
    for a, b in p2p_plan.plan_pairs(indices):
        for src, dst in ((a, b), (b, a)):
            stream = torch.cuda.Stream(device=src)
            with torch.cuda.device(src), torch.cuda.stream(stream):
                for _rep in range(warmup):
                    bufs[dst][1].copy_(bufs[src][0], non_blocking=True)
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record(stream)
                for _rep in range(reps):
                    bufs[dst][1].copy_(bufs[src][0], non_blocking=True)
                stop.record(stream)
                stop.synchronize()
            uni[(src, dst)] = size * reps / (start.elapsed_time(stop) / 1e3) / 1e9
        sa, sb = torch.cuda.Stream(device=a), torch.cuda.Stream(device=b)
        with torch.cuda.device(a):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        end_b = torch.cuda.Event()
        with torch.cuda.device(a), torch.cuda.stream(sa):
            start.record(sa)
        sb.wait_event(start)
        with torch.cuda.device(a), torch.cuda.stream(sa):
            for _rep in range(reps):
                bufs[b][1].copy_(bufs[a][0], non_blocking=True)
        with torch.cuda.device(b), torch.cuda.stream(sb):
            for _rep in range(reps):
                bufs[a][1].copy_(bufs[b][0], non_blocking=True)
            end_b.record(sb)
        sa.wait_event(end_b)
        with torch.cuda.device(a), torch.cuda.stream(sa):
            stop.record(sa)
        stop.synchronize()
        bidi[(a, b)] = 2 * size * reps / (start.elapsed_time(stop) / 1e3) / 1e9
    return uni, bidi


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--gpus", nargs="*", help="GPU indices or PCI addresses (default: all)")
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--latency-iterations", type=int, default=100)
    parser.add_argument("--no-staged", action="store_true", help="skip the peer-access-disabled runs")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--json", help="write the full result here")
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()

    cuda_driver.prefer_pci_bus_order()
    params = {
        "gpus": args.gpus, "size_bytes": args.size_mib << 20, "repetitions": args.repetitions,
        "warmup": args.warmup, "staged": not args.no_staged, "latency_iterations": args.latency_iterations,
        "streams": args.streams, "timeout_s": args.timeout,
    }
    driver = cuda_driver.Driver()
    nvml = nvml_mod.Nvml()
    t0 = time.monotonic()
    result = p2p_measure.measure(driver, nvml, params)
    wall = time.monotonic() - t0
    nvml.shutdown()
    if result.get("skipped"):
        print("skipped: %s" % result["msg"])
        return 0
    print(result["table"])
    for pair in result["pairs"]:
        print("pair %d->%d link=%s topology=%s peer_access=%s perf_rank=%s data_ok=%s speedup=%s%s" % (
            pair["src"], pair["dst"], pair.get("link"), pair.get("topology"), pair.get("peer_access"),
            pair.get("perf_rank"), pair.get("data_ok"), pair.get("p2p_speedup"),
            (" error=" + pair["error"]) if pair.get("error") else ""))
    print("module measurement wall time: %.2f s (size %d MiB, %d reps, %d warm-up, %d stream(s))"
          % (wall, args.size_mib, args.repetitions, args.warmup, args.streams))
    estimate = p2p_plan.estimate_seconds(len(result["selected"]), params["size_bytes"], args.repetitions,
                                         args.warmup, params["staged"], args.latency_iterations)
    print("runtime model (pessimistic rates) for %d GPUs: %.1f s; for 8 GPUs: %.1f s" % (
        len(result["selected"]), estimate,
        p2p_plan.estimate_seconds(8, params["size_bytes"], args.repetitions, args.warmup, params["staged"],
                                  args.latency_iterations)))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(dict(result, wall_s=wall), handle, indent=2, sort_keys=True)
    if args.no_torch:
        return 0
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch not importable: comparison skipped")
        return 0
    t0 = time.monotonic()
    uni, bidi = torch_matrix(result["selected"], params["size_bytes"], args.repetitions, args.warmup)
    print("\nPyTorch Tensor.copy_ between GPUs, same size and repetitions (GB/s), %.2f s:" % (time.monotonic() - t0))
    for (src, dst), value in sorted(uni.items()):
        mine = [p for p in result["pairs"] if p["src"] == src and p["dst"] == dst][0].get("unidirectional_p2p_gbps")
        print("  unidirectional %d->%d: torch %.1f   module %s" % (src, dst, value, mine))
    for (a, b), value in sorted(bidi.items()):
        mine = [p for p in result["bidirectional"] if p["a"] == a and p["b"] == b][0].get("bidirectional_p2p_gbps")
        print("  bidirectional %d<->%d: torch %.1f   module %s" % (a, b, value, mine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
