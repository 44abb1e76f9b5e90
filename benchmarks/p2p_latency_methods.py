# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small-copy latency by each timing method of p2p_measure, side by side, on this GPU node.

    python3 benchmarks/p2p_latency_methods.py                 # every ordered pair, 5 figures each
    python3 benchmarks/p2p_latency_methods.py --figures 10 --iterations 500

For each ordered pair of GPUs (GPU 0 to itself when there is one GPU), the latency of a 16-byte
copy taken five times with each method the module knows: ``launch_included`` (the copies timed
as they are queued: each launch counts), ``held_stream_wait_value`` and
``held_stream_spin_kernel`` (the copies queued behind a held stream and timed once it is
released, as NVIDIA's p2pBandwidthLatencyTest does), and ``auto`` (what the module uses: the
first hold that works). Peer access is enabled between the pair first.

Read-only on the node: the NVIDIA driver through ctypes, nothing loaded, no clock or power
change. Keep NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), ".collections"))

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_measure  # noqa: E402

METHODS = ("launch_included", "held_stream_wait_value", "held_stream_spin_kernel", "auto")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--figures", type=int, default=5, help="figures per method and pair")
    parser.add_argument("--iterations", type=int, default=200, help="copies timed per figure")
    args = parser.parse_args()
    if args.figures < 1 or args.iterations < 1:
        parser.error("--figures and --iterations must be positive")
    cuda_driver.prefer_pci_bus_order()
    driver = cuda_driver.Driver()
    driver.init()
    count = driver.device_count()
    gpus = [p2p_measure.Gpu(driver, index, 1) for index in range(count)]
    for gpu in gpus:
        gpu.allocate(driver, 1 << 20)
    pairs = [(a, b) for a in range(count) for b in range(count) if a != b] or [(0, 0)]
    options = dict(size_bytes=1 << 20, repetitions=1, warmup=4, staged=False,
                   latency_iterations=args.iterations, streams=1, timeout_s=10)
    print("%d GPU(s): %s" % (count, ", ".join("%s %s" % (d["index"], d["bdf"]) for d in p2p_measure.discover(driver))))
    print("%-8s %-26s %9s %9s %9s  %s" % ("pair", "method", "min us", "median", "max", "method used"))
    for a, b in pairs:
        runner = p2p_measure.Runner(driver, options)
        if a != b:
            runner._peer(gpus[a], gpus[b], True)  # pylint: disable=protected-access
        for method in METHODS:
            runner.latency_hold = method
            gpus[a].hold_methods = None
            figures = [runner.latency(gpus[a], gpus[b]) for _figure in range(args.figures)]
            values = [value for value, _used in figures]
            used = ", ".join(sorted(set(name for _value, name in figures)))
            row = ("%d->%d" % (a, b), method, min(values), statistics.median(values), max(values), used)
            print("%-8s %-26s %9.2f %9.2f %9.2f  %s" % row)
        runner._free_flag()  # pylint: disable=protected-access
    for gpu in gpus:
        gpu.release(driver)


if __name__ == "__main__":
    main()
