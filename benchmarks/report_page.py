# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long the fleet page takes to make and to open, and how big it is, for a fleet of N hosts.

    .venv-test/bin/python benchmarks/report_page.py                  # 64 hosts of 8 GPUs, every one benchmarked
    .venv-test/bin/python benchmarks/report_page.py --hosts 16 64 256 --gpus 8 --repeat 5
    PYTHONPATH=/tmp/mpl .venv-test/bin/python benchmarks/report_page.py --matplotlib
        # the same charts drawn by matplotlib to SVG, for the chart-approach comparison
        # (pip install --target /tmp/mpl matplotlib: not a dependency of the collection)

The fleet is tests/unit/fleet_artifacts_fake.py's, written by the collection's own writers
(the audit's reports from the audit fixtures, P2P results with a floor per pair, benchmarks
compared by benchmark_compare, two rollouts): its first ten hosts are the special cases (a
failed canary, drift, no P2P, a short pair...), the rest healthy hosts with --gpus GPUs each.

Printed per fleet size: reading the folder (collect), rendering the page (page.render), the
action's whole plan (both, plus the encoding), each the best of --repeat; the page's size; and,
when Debian's Chromium is there (/usr/bin/chromium or GPUFLEET_CHROMIUM), the time a headless
Chromium takes to load it (navigate to the load event, best of --repeat) and to lay it out with
every section opened. --matplotlib draws the same heatmaps and bar panels with matplotlib's SVG
backend (text as paths, its default, and as text) and prints their time and bytes.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.tuning.plugins.action import fleet_report  # noqa: E402
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect, page  # noqa: E402
from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake  # noqa: E402


def best(repeat, function, *args):
    times, value = [], None
    for _round in range(repeat):
        started = time.perf_counter()
        value = function(*args)
        times.append(time.perf_counter() - started)
    return min(times), value


def browser_times(path, repeat):
    try:
        from ansible_collections.gpufleet.tuning.tests.browser.chromium import CHROMIUM, Browser
    except ImportError:
        return None
    if not os.path.exists(CHROMIUM):
        return None
    loads, opened = [], []
    with Browser() as browser:
        tab = browser.page(1280, 900)
        for _round in range(repeat):
            loads.append(tab.load("file://" + path))
            started = time.perf_counter()
            tab.evaluate("document.querySelectorAll('details').forEach(d => d.open = true); "
                         "document.body.getBoundingClientRect().height")
            opened.append(time.perf_counter() - started)
        errors = tab.console_errors()
    return min(loads), min(opened), errors


def matplotlib_charts(model, fonttype):
    """The page's charts drawn by matplotlib: (seconds, bytes, figures)."""
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.fonttype"] = fonttype
    started = time.perf_counter()
    size = figures = 0
    for host in model["hosts"]:
        p2p = host["p2p"]
        if p2p.get("status") == "measured":
            gpus = p2p["gpus"]
            for key, _field, _kind, title in collect.MATRICES:
                matrix = [[v if v is not None else float("nan") for v in row] for row in p2p["matrices"][key]]
                fig, ax = plt.subplots(figsize=(0.55 * len(gpus) + 1, 0.35 * len(gpus) + 0.8))
                ax.imshow(matrix, cmap="RdYlGn")
                for i, row in enumerate(matrix):
                    for j, value in enumerate(row):
                        if not math.isnan(value):
                            ax.text(j, i, "%.1f" % value, ha="center", va="center", fontsize=7)
                ax.set_title(title, fontsize=8)
                ax.set_xticks(range(len(gpus)))
                ax.set_yticks(range(len(gpus)))
                out = io.StringIO()
                fig.savefig(out, format="svg")
                plt.close(fig)
                size += len(out.getvalue().encode())
                figures += 1
        bench = host.get("benchmark")
        if bench:
            single = bench["levels"][0]
            for _panel, paths, _unit in collect.BENCH_PANELS:
                fig, ax = plt.subplots(figsize=(3.2, 2.1))
                for n, path in enumerate(paths):
                    figure = single["figures"][path]
                    ax.bar([n - 0.2, n + 0.2], [figure["before"] or 0, figure["after"] or 0], width=0.38)
                    if figure["before"] and figure["noise_pct"]:
                        band = figure["before"] * figure["noise_pct"] / 100.0
                        ax.axhspan(figure["before"] - band, figure["before"] + band, alpha=0.25)
                out = io.StringIO()
                fig.savefig(out, format="svg")
                plt.close(fig)
                size += len(out.getvalue().encode())
                figures += 1
    return time.perf_counter() - started, size, figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[64])
    parser.add_argument("--gpus", type=int, default=8, help="GPUs of each healthy host (default 8)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--matplotlib", action="store_true", help="also draw the charts with matplotlib")
    parser.add_argument("--keep", help="copy the largest page here")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="gpufleet-report-")
    try:
        print("%6s %10s %10s %10s %10s %10s %12s" % ("hosts", "collect s", "render s", "plan s", "size MB", "load s",
                                                     "all open s"))
        for count in args.hosts:
            root = os.path.join(work, "artifacts-%d" % count)
            fake.write_fleet(root, count, gpus=args.gpus, benchmark_all=True)
            collect_s, model = best(args.repeat, collect.collect, root)
            render_s, text = best(args.repeat, page.render, model)
            plan_s, planned = best(args.repeat, fleet_report.plan, root)
            path = os.path.join(root, "index.html")
            with open(path, "wb") as handle:
                handle.write(planned["content"])
            shown = browser_times(path, args.repeat)
            print("%6d %10.3f %10.3f %10.3f %10.2f %10s %12s" % (
                count, collect_s, render_s, plan_s, planned["size"] / 1e6,
                "%.3f" % shown[0] if shown else "-", "%.3f" % shown[1] if shown else "-"))
            if shown and shown[2]:
                print("  console errors: %s" % shown[2])
            if args.keep:
                shutil.copy(path, args.keep)
            if args.matplotlib:
                for fonttype in ("path", "none"):
                    seconds, size, figures = matplotlib_charts(model, fonttype)
                    ours = sum(len(chunk) for chunk in _svgs(text))
                    print("  matplotlib (svg.fonttype=%s): %d charts in %.2f s, %.2f MB of SVG; this page's %d "
                          "charts: %.2f MB of SVG, made with the whole page in %.3f s" % (
                              fonttype, figures, seconds, size / 1e6, text.count("<svg"), ours / 1e6, render_s))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _svgs(text):
    start = 0
    while True:
        begin = text.find("<svg", start)
        if begin < 0:
            return
        end = text.find("</svg>", begin) + len("</svg>")
        yield text[begin:end].encode()
        start = end


if __name__ == "__main__":
    main()
