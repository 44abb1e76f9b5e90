#!/usr/bin/env python
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a tuning pass grows with the fleet: benchmarks/runtime_pass.py at several host counts,
and the curve of its medians (issue 21: 16 hosts against one, on this machine).

    .venv-test/bin/python benchmarks/runtime_pass_curve.py                  # 1, 4 and 16 hosts, 3 rounds
    .venv-test/bin/python benchmarks/runtime_pass_curve.py --hosts 1 4 --rounds 5 --json /tmp/curve.json

Each count is one run of runtime_pass.py --hosts N (its own containers, made and removed by it,
the collection's pass and the naive playbook interleaved round by round), run one after the
other; then one table: the medians of each pass at each count, the collection's pass against
the naive playbook's, and each count's pass against the one-host pass. Extra arguments after
``--`` go to runtime_pass.py (``-- --forks 16``). Standard library only; run as root.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME_PASS = os.path.join(HERE, "runtime_pass.py")
PASSES = ("first", "no-change")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 16], help="host counts (default 1 4 16)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds at each count (default 3)")
    parser.add_argument("--json", metavar="PATH", help="write every count's report and the curve here")
    parser.add_argument("rest", nargs="*", help="arguments for runtime_pass.py, after --")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.hosts):
        parser.error("--hosts: counts of at least 1 (got %s)" % args.hosts)
    return args


def median_of(report, playbook, which):
    """The median wall time of PLAYBOOK's WHICH pass in a runtime_pass.py --json report."""
    return report["summary"]["%s/%s" % (playbook, which)]["wall_s_median"]


def curve(reports):
    """Rows of the table: the medians at each count, against the naive and against one host."""
    base = reports[min(reports)]
    rows = []
    for count in sorted(reports):
        report = reports[count]
        row = {"hosts": count}
        for which in PASSES:
            tune, naive = median_of(report, "tune", which), median_of(report, "naive", which)
            row[which] = {"tune_s": tune, "naive_s": naive, "tune_over_naive": round(tune / naive, 2),
                          "tune_over_%d_host" % min(reports): round(tune / median_of(base, "tune", which), 2)}
        rows.append(row)
    return rows


def print_curve(rows, rounds):
    first = min(row["hosts"] for row in rows)
    print("")
    print("runtime pass by fleet size: medians of %d round(s) at each count, wall seconds" % rounds)
    header = ("hosts", "pass", "tune", "naive", "tune/naive", "tune/%d host" % first)
    print("%5s  %-9s  %8s  %8s  %10s  %10s" % header)
    for row in rows:
        for which in PASSES:
            cell = row[which]
            print("%5d  %-9s  %8.2f  %8.2f  %9.2fx  %9.2fx" % (
                row["hosts"], which, cell["tune_s"], cell["naive_s"], cell["tune_over_naive"],
                cell["tune_over_%d_host" % first]))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    reports = {}
    folder = tempfile.mkdtemp(prefix="gpufleet-runtime-curve-")
    for count in args.hosts:
        path = os.path.join(folder, "hosts-%d.json" % count)
        argv = [sys.executable, RUNTIME_PASS, "--hosts", str(count), "--rounds", str(args.rounds), "--json", path]
        print("=== %s" % " ".join(argv[1:] + args.rest), flush=True)
        run = subprocess.run(argv + args.rest, check=False)
        if run.returncode != 0 or not os.path.exists(path):
            print("runtime_pass.py --hosts %d failed (rc %d)" % (count, run.returncode), file=sys.stderr)
            return 1
        with open(path) as handle:
            reports[count] = json.load(handle)
    rows = curve(reports)
    print_curve(rows, args.rounds)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rounds": args.rounds, "curve": rows, "reports": reports}, handle, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
