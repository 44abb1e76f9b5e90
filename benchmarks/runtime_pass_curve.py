#!/usr/bin/env python
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a tuning pass grows with the fleet: benchmarks/runtime_pass.py at 1, 4 and 16 hosts in
one run, and the curve of its medians (issue 21: 16 hosts against one, on this machine).

    .venv-test/bin/python benchmarks/runtime_pass_curve.py                  # 1, 4 and 16 hosts, 3 rounds
    .venv-test/bin/python benchmarks/runtime_pass_curve.py --hosts 1 4 --rounds 5 --json /tmp/curve.json

The same as ``runtime_pass.py --hosts 1 4 16``: the largest count's containers are made once and
each count runs on a slice of them, every count and playbook in every round, their order
reversed every other round, so that this machine's speed drifting over the minutes of the
benchmark (up to 1.7x seen here) falls on every count alike instead of on whichever count ran
last. It prints each count's table and then the curve: each playbook's medians at each count,
against the naive playbook and against the smallest count. Extra arguments after ``--`` go to
runtime_pass.py (``-- --forks 16``). Standard library only; run as root.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME_PASS = os.path.join(HERE, "runtime_pass.py")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 16], help="host counts (default 1 4 16)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--json", metavar="PATH", help="runtime_pass.py's report, the curve in it, written here")
    parser.add_argument("rest", nargs="*", help="arguments for runtime_pass.py, after --")
    args = parser.parse_args(argv)
    if len(set(args.hosts)) < 2:
        parser.error("--hosts: at least two different counts for a curve (got %s)" % " ".join(map(str, args.hosts)))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = [sys.executable, RUNTIME_PASS, "--hosts"] + [str(n) for n in args.hosts] + ["--rounds", str(args.rounds)]
    if args.json:
        command += ["--json", args.json]
    return subprocess.run(command + args.rest, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
