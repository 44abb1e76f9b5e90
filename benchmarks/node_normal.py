# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long "is this node normal?" takes on the controller for a fleet of N hosts.

    .venv-test/bin/python benchmarks/node_normal.py                      # 100, 1000 hosts of 8 GPUs
    .venv-test/bin/python benchmarks/node_normal.py --hosts 64 512 4096 --gpus 8 --profiles 3 --repeat 5

The fleet is synthetic: --profiles platform profiles, hosts spread over them round robin, each
host with every ordered GPU pair's P2P figure one way, every unordered pair's both ways, and the
benchmark's decode tokens/s, TTFT and efficiency (56 + 28 + 3 = 87 figures with 8 GPUs), one host
in 50 slower. Printed per fleet size, each the best of --repeat:

- page: the fleet page's verdict for every host (report/collect.py: normal_fleet, then
  normal_model per host, the peers of each profile worked out once);
- one host: one host's judgement by the action (node_normal's judge: its figures, the absolute
  checks, the peers read from every other host's normal.json in a real folder), as verify and
  the benchmark run it once per host.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.tuning.plugins.action import node_normal as action  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import node_normal  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect  # noqa: E402
from report_page import best  # noqa: E402  (benchmarks/report_page.py: the best of --repeat runs)


def host_figures(index, gpus):
    slow = 0.5 if index % 50 == 7 else 1.0
    out = []
    for a in range(gpus):
        for b in range(gpus):
            if a != b:
                out.append({"figure": "p2p %d->%d one way" % (a, b), "value": (390.0 + (a * b + index) % 7) * slow,
                            "unit": "GB/s", "better": "higher", "source": "verify.json"})
    for a in range(gpus):
        for b in range(a + 1, gpus):
            out.append({"figure": "p2p %d<->%d both ways" % (a, b), "value": (770.0 + (a + b + index) % 9) * slow,
                        "unit": "GB/s", "better": "higher", "source": "verify.json"})
    out.append({"figure": "decode_tokens_per_s", "value": (676.0 + index % 5) * slow, "unit": "tok/s", "better": "higher",
                "source": "benchmark.json"})
    out.append({"figure": "ttft_ms_p50", "value": 25.4 / slow, "unit": "ms", "better": "lower", "source": "benchmark.json"})
    out.append({"figure": "decode_efficiency_pct", "value": 33.7 * slow, "unit": "%", "better": "higher",
                "source": "benchmark.json"})
    return out


def fleet(count, gpus, profiles):
    records = {}
    for index in range(count):
        name = "gpu-%04d" % index
        records[name] = {"host": name, "time": "2026-12-07T00:00:00Z",
                         "profile": {"name": "platform-%d/throughput" % (index % profiles)},
                         "figures": host_figures(index, gpus), "checks": [], "settings": {}}
    return records


def page_verdicts(records):
    hosts = dict((name, {"normal": record, "profile": None}) for name, record in records.items())
    peers = collect.normal_fleet(hosts)
    return [collect.normal_model(name, loaded["normal"], None, peers) for name, loaded in hosts.items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--profiles", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("%6s  %8s  %12s  %12s  %s" % ("hosts", "figures", "page s", "one host s", "outliers on the page"))
    for count in args.hosts:
        records = fleet(count, args.gpus, args.profiles)
        figures = len(next(iter(records.values()))["figures"])
        verdicts = page_verdicts(records)
        outliers = sum(1 for v in verdicts if v["status"] == "not_normal")
        page_s = best(args.repeat, page_verdicts, records)[0]
        root = tempfile.mkdtemp(prefix="gpufleet-normal-")
        try:
            for name, record in records.items():
                os.makedirs(os.path.join(root, name))
                with open(os.path.join(root, name, action.RECORD), "w") as handle:
                    json.dump(record, handle)
            last = sorted(records)[-1]
            benchmark = {"levels": [{"concurrency": 1, "figures": {"decode_tokens_per_s": {"after": 676.0}}}]}
            args_one = {"host": last, "path": os.path.join(root, last), "benchmark": benchmark,
                        "profile": {"name": records[last]["profile"]["name"]}}
            one_s = best(args.repeat, action.judge, args_one)[0]
        finally:
            shutil.rmtree(root)
        print("%6d  %8d  %12.3f  %12.3f  %d (slow hosts planted: %d)" % (
            count, figures, page_s, one_s, outliers, sum(1 for i in range(count) if i % 50 == 7)))
    print("defaults: %g MADs, at least %d hosts, MAD at least %g %% of the median" % (
        node_normal.DEFAULT_MADS, node_normal.DEFAULT_MIN_PEERS, node_normal.DEFAULT_MIN_SPREAD_PCT))


if __name__ == "__main__":
    main()
