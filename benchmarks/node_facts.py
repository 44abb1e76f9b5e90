# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long one host's facts take: gpufleet.tuning.node_facts, every section, on this machine.

    python3 benchmarks/node_facts.py                # the engine in this process, 5 runs
    python3 benchmarks/node_facts.py --repeat 10 --module 3

Two figures, both printed per run and as min / median:
- the engine (plugins/module_utils/node_facts.run) called in this process: what the module
  itself costs, per section (its timings_ms: gpu_facts, host, kernel, cpu, memory,
  containers, tuners) and in total. The first run pays for loading NVML and warming the
  page cache; it is shown apart from the rest.
- with --module N: the module run N times through `ansible localhost -m
  gpufleet.tuning.node_facts` (local connection): what a host's fact gathering costs in a
  playbook, Python start-up and module transfer included.

Read-only: node_facts writes nothing and loads no kernel module.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, ".collections"))

from ansible_collections.gpufleet.tuning.plugins.module_utils import node_facts  # noqa: E402


def engine_runs(repeat):
    runs = []
    for _attempt in range(repeat + 1):
        start = time.monotonic()
        result = node_facts.run({}, check_mode=True)
        wall = (time.monotonic() - start) * 1000
        runs.append((wall, result["timings_ms"], result["msg"]))
    return runs


def module_runs(repeat):
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    if not os.path.exists(ansible):
        ansible = "ansible"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    walls = []
    for _attempt in range(repeat):
        start = time.monotonic()
        done = subprocess.run([ansible, "localhost", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                               "-m", "gpufleet.tuning.node_facts"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, check=False)
        walls.append((time.monotonic() - start) * 1000)
        if done.returncode != 0:
            sys.exit("ansible -m gpufleet.tuning.node_facts failed:\n" + done.stdout.decode()[-3000:])
    return walls


def line(name, values):
    return "%-22s %9.1f %9.1f %9.1f" % (name, min(values), statistics.median(values), max(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=5, help="engine runs after the first (default 5)")
    parser.add_argument("--module", type=int, default=0, metavar="N", help="also run the module N times through ansible")
    args = parser.parse_args()
    if args.repeat < 1 or args.module < 0:
        parser.error("--repeat must be at least 1 and --module not negative")
    runs = engine_runs(args.repeat)
    first, rest = runs[0], runs[1:]
    print("node_facts engine, every section (%s)" % first[2])
    print("first run: %.1f ms (NVML load and cold caches), sections %s" % (first[0], first[1]))
    print("%-22s %9s %9s %9s" % ("ms, %d later runs" % len(rest), "min", "median", "max"))
    for name in sorted(rest[0][1]):
        print(line(name, [timings[name] for _wall, timings, _msg in rest]))
    print(line("wall (in process)", [wall for wall, _timings, _msg in rest]))
    if args.module:
        print(line("module via ansible", module_runs(args.module)))


if __name__ == "__main__":
    main()
