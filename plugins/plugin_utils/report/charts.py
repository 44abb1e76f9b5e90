# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet page's charts, as inline SVG text written here from the numbers.

Why SVG from Python and not matplotlib writing SVG: the page is made on the controller at the
end of every tune and rollout run, for up to hundreds of hosts, and must open anywhere without
a network. An SVG written here is a few elements per cell or bar, styled by the page's one
stylesheet (a heatmap cell costs about 60 bytes), needs nothing beyond the standard library (as
everything else the controller runs for this collection) and takes microseconds. matplotlib
writes every glyph as a path (or as text with its own style), every element with its own
attributes, needs numpy and a font cache, and takes tens of milliseconds per figure. Measured
with ``benchmarks/report_page.py --hosts 64 --matplotlib`` on a 2-core controller (64 hosts of
8 GPUs, every one benchmarked): this module's 465 charts are 1.71 MB of SVG, made with the whole
page (2.83 MB) in 0.09 s; matplotlib's 408 equivalent charts took 19.1 s and 12.4 MB (15.7 s
and 8.7 MB with text kept as text), past the page's budget of 5 s and 5 MB on their own. The
charts here are simple (heatmaps, paired bars with a band, a gauge, a strip of batches), which
is where hand-written SVG is enough.

Every function returns one ``<svg>`` element with a ``viewBox`` (it scales down on a phone),
a ``role="img"`` and an ``aria-label``; numbers are rounded to what a person reads; every text
from the artifacts is escaped. The same input gives the same bytes.
"""

from __future__ import annotations

import math
from html import escape

CELL_W, CELL_H = 52, 26
PANEL_W, PANEL_H = 300, 200

# Colours (sRGB hex): below the floor, above it, no floor (neutral), staged copies.
_RED_LIGHT, _RED_DARK = (253, 224, 220), (176, 32, 28)
_GREEN_LIGHT, _GREEN_DARK = (214, 240, 222), (24, 128, 56)
_BLUE_LIGHT, _BLUE_DARK = (225, 236, 250), (26, 86, 170)
_GREY_LIGHT, _GREY_DARK = (236, 238, 241), (96, 108, 122)
VERDICT_CLASS = {"better": "v-better", "worse": "v-worse", "no measurable change": "v-same"}
STATUS_CLASS = {"tuned": "st-tuned", "unchanged": "st-unchanged", "quarantined": "st-quarantined",
                "failed": "st-failed", "unreachable": "st-unreachable", "untouched": "st-untouched"}


def _e(text):
    return escape(str(text), quote=True)


def _mix(low, high, t):
    t = 0.0 if t < 0 else 1.0 if t > 1 else t
    return "#%02x%02x%02x" % tuple(int(round(a + (b - a) * t)) for a, b in zip(low, high))


def _dark(colour):
    r, g, b = (int(colour[i:i + 2], 16) / 255.0 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5


def fmt(value, digits=1):
    """A figure as people read it: 393.3, 1.44, 2009; an em dash when there is none."""
    if value is None:
        return "\u2014"
    value = float(value)
    if abs(value) >= 1000:
        return "%.0f" % value
    if abs(value) >= 100:
        return ("%%.%df" % min(digits, 1)) % value
    if abs(value) >= 10:
        return ("%%.%df" % max(digits, 1)) % value
    return ("%%.%df" % max(digits, 2)) % value


def _svg(width, height, label, body, cls):
    return ('<svg class="%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">%s</svg>'
            % (cls, width, height, width, height, _e(label), "".join(body)))


# ------------------------------------------------------------------------------ heatmap

def cell_colour(value, floor, peak, staged):
    """The fill of one matrix cell: against its floor (red below, green above), else against
    the matrix's largest figure (blue, grey for staged copies)."""
    if value is None:
        return None
    if floor:
        ratio = value / floor
        if ratio < 1:
            return _mix(_RED_LIGHT, _RED_DARK, (1 - ratio) / 0.5)
        return _mix(_GREEN_LIGHT, _GREEN_DARK, 0.35 + (ratio - 1) / 0.6)
    share = value / peak if peak else 0
    if staged:
        return _mix(_GREY_LIGHT, _GREY_DARK, 0.1 + 0.5 * share)
    return _mix(_BLUE_LIGHT, _BLUE_DARK, 0.15 + 0.85 * share)


def heatmap(title, gpus, matrix, floors=None, short=(), staged=False, unit="GB/s", access=None):
    """An N x N matrix of GB/s (rows = source GPU, columns = destination), each cell its figure
    and colour; ``short`` holds the (row, column) cells that fell short, drawn with a thick
    outline and a mark. The floor most pairs share is in the title, a cell with another floor
    (or short of its floor) says it in its tooltip. ``access`` (N x N, optional): False where
    the pair has no peer access, so its empty cell says so."""
    size = len(gpus)
    left, top, head = 40, 22, 18
    given = [f for i, row in enumerate(floors or []) for j, f in enumerate(row) if i != j and f is not None]
    usual = max(set(given), key=given.count) if given else None
    if usual is not None:
        title = "%s, floor %s %s" % (title, fmt(usual), unit)
    width = max(left + size * CELL_W + 2, int(len(title) * 7.2) + 4)
    height = top + head + size * CELL_H + 2
    body = ['<text class="t" x="0" y="14">%s</text>' % _e(title),
            '<text class="corner" x="0" y="%d">src\\dst</text>' % (top + 13)]
    peak = max([v for row in matrix for v in row if v is not None] or [0])
    for j, gpu in enumerate(gpus):
        body.append('<text class="ax" x="%d" y="%d">%s</text>' % (left + j * CELL_W + CELL_W // 2, top + 13, _e(gpu)))
    # One group per row: the cells only carry x (their size and the row's y come from the group
    # and the stylesheet), the tooltip only where a floor or a shortfall has something to add;
    # an 8-GPU matrix stays under 5 kB.
    for i, gpu in enumerate(gpus):
        body.append('<g transform="translate(0 %d)"><text class="ax" x="%d" y="17">%s</text>' % (
            top + head + i * CELL_H, left - 8, _e(gpu)))
        for j in range(size):
            x = left + j * CELL_W
            value = matrix[i][j]
            floor = floors[i][j] if floors else None
            if i == j:
                body.append('<rect class="diag" x="%d"/>' % x)
                continue
            colour = cell_colour(value, floor, peak, staged)
            is_short = (i, j) in short
            tip = None
            if is_short or (floor is not None and floor != usual):
                tip = "%s\u2192%s: %s %s%s%s" % (
                    gpu, gpus[j], fmt(value), unit, ", floor %s" % fmt(floor) if floor is not None else "",
                    ", short" if is_short else "")
            cls = ' class="short"' if is_short else ""
            if colour is None:
                blocked = access is not None and access[i][j] is False
                tip = "%s\u2192%s: %s" % (gpu, gpus[j], "no peer access" if blocked else "not measured")
                body.append('<rect class="none%s" x="%d"><title>%s</title></rect><text x="%d" y="17">%s</text>' % (
                    " short" if is_short else "", x, _e(tip), x + CELL_W // 2, "no P2P" if blocked else "n/a"))
                continue
            body.append('<rect%s x="%d" fill="%s">%s</rect>' % (cls, x, colour, "<title>%s</title>" % _e(tip) if tip else ""))
            body.append('<text%s x="%d" y="17">%s%s</text>' % (' class="w"' if _dark(colour) else "", x + CELL_W // 2,
                                                               fmt(value), "!" if is_short else ""))
        body.append("</g>")
    return _svg(width, height, "%s, %d GPUs" % (title, size), body, "hm")


# ------------------------------------------------------------------------------ bars

def nice_ticks(high, count=4):
    """Round tick values from 0 up to at least ``high``."""
    if not high or high <= 0:
        return [0, 1]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks, value = [], 0.0
    while value < high - 1e-9:
        ticks.append(value)
        value += step
    ticks.append(value)
    return ticks


def _tick(value):
    return ("%.0f" % value) if value == int(value) or abs(value) >= 10 else ("%.1f" % value if abs(value) >= 1 else "%.2f" % value)


def bars(title, unit, groups):
    """Before and after side by side per group (a concurrency level, a percentile): the two
    medians as bars, each run's min-max over its repeats as a whisker, the noise band (the
    figure's noise_pct around the before median) as a band behind the pair, and the change
    above it, coloured by the verdict (a change inside the noise is no measurable change).

    ``groups``: [(label, figure)] with figure as collect.benchmark_model gives it."""
    left, right, top, bottom = 46, 8, 38, 30
    plot_w, plot_h = PANEL_W - left - right, PANEL_H - top - bottom
    highs = []
    for _label, fig in groups:
        for key in ("before", "after"):
            if fig.get(key) is not None:
                highs.append(fig[key])
            if fig.get(key + "_range"):
                highs.append(fig[key + "_range"][1])
        if fig.get("before") is not None and fig.get("noise_pct") is not None:
            highs.append(fig["before"] * (1 + fig["noise_pct"] / 100.0))
    ticks = nice_ticks(max(highs or [0]) * 1.08)
    top_value = ticks[-1] or 1

    def y_of(value):
        return top + plot_h - plot_h * (value / top_value)

    body = ['<text class="t" x="0" y="14">%s</text>' % _e(title),
            '<text class="ax" x="%d" y="14" text-anchor="end">%s</text>' % (PANEL_W - 2, _e(unit))]
    for tick in ticks:
        y = y_of(tick)
        body.append('<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>' % (left, PANEL_W - right, y, y))
        body.append('<text class="ax" x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 4, y + 4, _tick(tick)))
    slot = plot_w / max(len(groups), 1)
    bar_w = min(22.0, slot * 0.32)
    for index, (label, fig) in enumerate(groups):
        centre = left + slot * index + slot / 2
        before, after, noise = fig.get("before"), fig.get("after"), fig.get("noise_pct")
        if before is not None and noise is not None:
            band_low, band_high = before * (1 - noise / 100.0), before * (1 + noise / 100.0)
            body.append('<rect class="band" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>noise band '
                        '\u00b1%s %%: %s to %s %s</title></rect>' % (
                            centre - bar_w - 4, y_of(band_high), 2 * bar_w + 8,
                            max(y_of(band_low) - y_of(band_high), 1), fmt(noise), fmt(band_low), fmt(band_high), _e(unit)))
        for side, value, x in (("before", before, centre - bar_w - 1), ("after", after, centre + 1)):
            if value is None:
                body.append('<text class="ax" x="%.1f" y="%.1f" text-anchor="middle">\u2014</text>' % (
                    x + bar_w / 2, top + plot_h - 4))
                continue
            y = y_of(value)
            body.append('<rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s: %s %s'
                        '</title></rect>' % (side, x, y, bar_w, max(top + plot_h - y, 0.5), _e(label), side,
                                             fmt(value), _e(unit)))
            spread = fig.get(side + "_range")
            if spread:
                cx = x + bar_w / 2
                body.append('<path class="whisker" d="M%.1f %.1fV%.1fM%.1f %.1fh%dM%.1f %.1fh%d"/>' % (
                    cx, y_of(spread[0]), y_of(spread[1]), cx - 3, y_of(spread[0]), 6, cx - 3, y_of(spread[1]), 6))
        verdict = fig.get("verdict") or ""
        delta = fig.get("delta_pct")
        if delta is not None:
            mark = "\u2248" if verdict == "no measurable change" else ""
            body.append('<text class="d %s" x="%.1f" y="%d" text-anchor="middle">%s%+.1f%%<title>%s</title></text>' % (
                VERDICT_CLASS.get(verdict, "v-same"), centre, top - 4, mark, delta, _e(verdict)))
        body.append('<text class="ax" x="%.1f" y="%d" text-anchor="middle">%s</text>' % (
            centre, PANEL_H - bottom + 16, _e(label)))
    body.append('<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>' % (left, PANEL_W - right, top + plot_h, top + plot_h))
    return _svg(PANEL_W, PANEL_H, "%s, before and after the tuning" % title, body, "bars")


def efficiency(before, after):
    """Single-stream decode against its memory-bandwidth ceiling: a track for the ceiling, the
    run after as a bar, the run before as a tick, each with its percentage."""
    width, height = PANEL_W, 74
    left, track_w = 8, PANEL_W - 16
    ceiling = (after or {}).get("ceiling") or (before or {}).get("ceiling")
    body = ['<text class="t" x="0" y="14">Decode vs its ceiling</text>']
    if not ceiling:
        reason = (after or before or {}).get("reason") or "no ceiling: active parameters or bandwidth not given"
        body.append('<text class="ax" x="0" y="40">%s</text>' % _e(reason))
        return _svg(width, height, "decode efficiency not computed", body, "eff")
    body.append('<rect class="track" x="%d" y="24" width="%d" height="18"><title>ceiling %s tokens/s%s</title></rect>' % (
        left, track_w, fmt(ceiling), (": " + _e((after or before or {}).get("formula"))) if (after or before or {}).get("formula") else ""))
    labels = []
    for side, entry in (("after", after), ("before", before)):
        decode = (entry or {}).get("decode")
        if decode is None:
            continue
        share = min(decode / ceiling, 1.0)
        if side == "after":
            body.append('<rect class="bar after" x="%d" y="26" width="%.1f" height="14"><title>after: %s tokens/s</title>'
                        '</rect>' % (left, track_w * share, fmt(decode)))
        else:
            x = left + track_w * share
            body.append('<path class="tickmark" d="M%.1f 21V45"><title>before: %s tokens/s</title></path>' % (x, fmt(decode)))
        percent = (entry or {}).get("percent")
        labels.append("%s %s %%" % (side, fmt(percent if percent is not None else 100.0 * decode / ceiling)))
    body.append('<text class="ax" x="0" y="62">%s of %s tokens/s</text>' % (_e(", ".join(reversed(labels))), fmt(ceiling)))
    return _svg(width, height, "decode efficiency: %s" % ", ".join(labels), body, "eff")


# ------------------------------------------------------------------------------ rollout

def timeline(rollout):
    """The rollout's batches left to right as they ran: each a box of host squares coloured by
    outcome (a cross on a reverted host), the canary first, a red line where it stopped, the
    batches that never ran dashed."""
    batches = rollout.get("batches") or []
    hosts = rollout.get("hosts") or {}
    per_row, square, gap, pad = 8, 12, 3, 8
    widths = []
    for batch in batches:
        count = max(len(batch["hosts"]), 1)
        widths.append(max(2 * pad + min(count, per_row) * (square + gap) - gap, 64 if batch["canary"] else 40))
    rows = [max(1, int(math.ceil(len(b["hosts"]) / float(per_row)))) for b in batches] or [1]
    box_h = 2 * pad + max(rows) * (square + gap) - gap
    top, spacing = 22, 22
    width = max(sum(widths) + spacing * max(len(batches) - 1, 0) + 2, 200)
    height = top + box_h + 34
    body = []
    x = 1
    for index, batch in enumerate(batches):
        names = batch["hosts"]
        statuses = [hosts.get(n, {}).get("status", "untouched") for n in names]
        bad = any(s in ("failed", "unreachable") for s in statuses)
        cls = "box notrun" if not batch["ran"] else "box bad" if bad else "box ok"
        label = "B%d%s" % (batch["batch"], " canary" if batch["canary"] else "")
        body.append('<text class="ax" x="%d" y="14">%s</text>' % (x, _e(label)))
        body.append('<rect class="%s" x="%d" y="%d" width="%d" height="%d" rx="4"><title>batch %d: %s</title></rect>' % (
            cls, x, top, widths[index], box_h, batch["batch"], _e(batch.get("outcome") or "")))
        for n, name in enumerate(names):
            host = hosts.get(name, {})
            sx = x + pad + (n % per_row) * (square + gap)
            sy = top + pad + (n // per_row) * (square + gap)
            status = host.get("status", "untouched")
            body.append('<rect class="sq %s" x="%d" y="%d" width="%d" height="%d"><title>%s: %s%s</title></rect>' % (
                STATUS_CLASS.get(status, "st-untouched"), sx, sy, square, square, _e(name), _e(status),
                ", reverted" if host.get("reverted") else ""))
            if host.get("reverted"):
                body.append('<path class="rev" d="M%d %dl%d %dM%d %dl%d %d"/>' % (
                    sx + 2, sy + 2, square - 4, square - 4, sx + square - 2, sy + 2, 4 - square, square - 4))
        x += widths[index]
        if batch.get("stopped_here"):
            stop_x = x + spacing // 2
            body.append('<line class="stop" x1="%d" x2="%d" y1="%d" y2="%d"/>' % (stop_x, stop_x, top - 6, top + box_h + 6))
            body.append('<text class="ax stoptext" x="%d" y="%d" text-anchor="middle">stopped</text>' % (
                stop_x, top + box_h + 20))
        elif index < len(batches) - 1:
            body.append('<path class="arrow" d="M%d %dh%d"/>' % (x + 4, top + box_h // 2, spacing - 8))
        x += spacing
    body.append('<text class="ax" x="1" y="%d">time \u2192</text>' % (height - 2))
    return _svg(width, height, "rollout %s: %s" % (rollout.get("run_id"), rollout.get("verdict")), body, "tl")
