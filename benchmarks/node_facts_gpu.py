# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the GPU node facts (hw/gpu_facts.gather: gpus, topology, driver) outside Ansible and
print them as JSON, then the time the read took, to compare with nvidia-smi on a real node.

    python3 benchmarks/node_facts_gpu.py                 # the whole JSON, then the timings
    python3 benchmarks/node_facts_gpu.py --summary       # one line per GPU and pair instead
    python3 benchmarks/node_facts_gpu.py --root /tmp/x   # a fake tree (no NVML: --no-nvml)

Read-only: nothing is written, no module is loaded. NVML is loaded (and shut down) unless
--no-nvml is given; its load time is reported apart from the read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), ".collections"))

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod  # noqa: E402


class _NoNvml(nvml_mod.Nvml):
    """NVML left out on purpose: every NVML fact unknown with this reason."""

    def __init__(self):  # pylint: disable=super-init-not-called
        self.available = False
        self.reason = "NVML not loaded (--no-nvml)"


def _value(item):
    if isinstance(item, dict) and "value" in item:
        return item["value"] if "unknown" not in item else "?(%s)" % item["unknown"]
    return item


def summary(result):
    gpus = result["gpus"]
    if isinstance(gpus, dict):
        print("gpus: %s" % _value(gpus))
        return
    for gpu in gpus:
        pcie = gpu["pcie"]
        print("GPU %s %s %s %s numa %s gen %s x%s (max %s x%s) mrrs %s mps %s ro %s iommu %s persist %s "
              "ecc %s/%s power %s W (default %s, max %s) clocks %s idle %s bar1 %s MiB nvlinks %s" % (
                  _value(gpu["index"]), _value(gpu["bdf"]), _value(gpu["name"]), _value(gpu["architecture"]),
                  _value(gpu["numa_node"]), _value(pcie["link_speed_gts"]), _value(pcie["link_width"]),
                  _value(pcie["max_link_speed_gts"]), _value(pcie["max_link_width"]), _value(pcie["mrrs_bytes"]),
                  _value(pcie["mps_bytes"]), _value(pcie["relaxed_ordering"]), _value(gpu["iommu_group_type"]),
                  _value(gpu["persistence_mode"]), _value(gpu["ecc_mode"]), _value(gpu["ecc_pending_mode"]),
                  _value(gpu["power_limit_w"]), _value(gpu["power_default_limit_w"]),
                  _value(gpu["power_max_limit_w"]), _value(gpu["clock_event_reasons"]),
                  _value(gpu["clock_event_idle"]), _value(gpu["bar1_mib"]),
                  len([n for n in gpu["nvlink"] if n["active"]["value"]]) if isinstance(gpu["nvlink"], list)
                  else _value(gpu["nvlink"])))
    pairs = result["topology"]["pairs"]
    for pair in pairs if isinstance(pairs, list) else []:
        print("pair %s-%s relation %s link %s nvlinks %s peer %s nvml %s numa %s bridges %s" % (
            _value(pair["a"]), _value(pair["b"]), _value(pair["relation"]), _value(pair["link"]),
            _value(pair["nvlink_count"]), _value(pair["peer_access"]), _value(pair["nvml_topology"]),
            _value(pair["numa_nodes"]),
            [b["bdf"]["value"] for b in pair["bridges"]] if isinstance(pair["bridges"], list) else "?"))
    print("driver: %s" % json.dumps(dict((k, _value(v)) for k, v in result["driver"].items())))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--root", default="/", help="the tree to read (default /)")
    parser.add_argument("--no-nvml", action="store_true", help="leave NVML out")
    parser.add_argument("--summary", action="store_true", help="one line per GPU and pair, not the JSON")
    args = parser.parse_args()

    t0 = time.monotonic()
    nvml = _NoNvml() if args.no_nvml else nvml_mod.Nvml()
    load = time.monotonic() - t0
    t0 = time.monotonic()
    result = gpu_facts.gather(gpu_facts.Paths(args.root), nvml)
    read = time.monotonic() - t0
    nvml.shutdown()
    if args.summary:
        summary(result)
    else:
        print(json.dumps(result, indent=1, sort_keys=True))
    gpus = result["gpus"] if isinstance(result["gpus"], list) else []
    print("NVML load+init: %.1f ms (%s); gather: %.1f ms for %d GPUs, %d pairs"
          % (load * 1000, "available" if nvml.reason is None else nvml.reason, read * 1000, len(gpus),
             len(result["topology"]["pairs"]) if isinstance(result["topology"]["pairs"], list) else 0),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
