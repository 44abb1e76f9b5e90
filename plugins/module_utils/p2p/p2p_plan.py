# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything about the GPU peer-to-peer check that is not the driver: planning and verdicts.

Kept apart from the ctypes code so it is unit-tested without a GPU: which pairs to measure,
how long that takes at N GPUs, how thresholds (a number, or a number per link type) are
validated and applied, and how results become JSON matrices and a table people can read.
Bandwidth is in GB/s of 10^9 bytes (what nvbandwidth and NVIDIA's samples print); latency in
microseconds.
"""

from __future__ import annotations

import math

from ansible_collections.gpufleet.tuning.plugins.module_utils.common.numbers import NumberError, finite_number
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config

LINK_TYPES = ("nvlink", "pcie", "unknown")
# Ranges a threshold must fall in. NaN or an infinity would make every comparison false (a
# floor of NaN can never fail); the upper bounds are far beyond any link made (NVLink 5 moves
# 900 GB/s per direction per GPU; peer access beats staging by ~10x on NVLink), so only a
# typo or a unit mix-up goes past them.
MAX_GBPS = 100000.0
MAX_SPEEDUP = 1000.0
THRESHOLD_RANGES = {
    "min_unidirectional_gbps": (0.0, MAX_GBPS),
    "min_bidirectional_gbps": (0.0, MAX_GBPS),
    "min_speedup": (0.0, MAX_SPEEDUP),
}

# (matrix key, title, format) for the text report, in print order.
MATRICES = (
    ("unidirectional_p2p_gbps", "Unidirectional bandwidth, peer access ENABLED (GB/s)", "%.1f"),
    ("unidirectional_staged_gbps", "Unidirectional bandwidth, peer access DISABLED: staged through the host (GB/s)", "%.1f"),
    ("bidirectional_p2p_gbps", "Bidirectional bandwidth, peer access ENABLED (GB/s, both directions summed)", "%.1f"),
    ("bidirectional_staged_gbps", "Bidirectional bandwidth, peer access DISABLED (GB/s, both directions summed)", "%.1f"),
    ("latency_p2p_us", "Small-copy latency, peer access ENABLED (us)", "%.2f"),
    ("latency_staged_us", "Small-copy latency, peer access DISABLED (us)", "%.2f"),
)


# Bad input: the message names the value and what is accepted. The number checks live in
# common/numbers.py (the serving engines use them too); their error is this module's PlanError.
PlanError = NumberError


def normalize_bdf(text):
    """'0000:1b:00.0' from '1b:00.0', '0000:1B:00.0' or an 8-digit domain; None if not a BDF.

    The one BDF parser is pci_config.parse_bdf; this only turns its refusal into None.
    """
    try:
        return pci_config.parse_bdf(text)
    except pci_config.PciError:
        return None


def select_gpus(requested, devices):
    """Resolve ``requested`` (None, or ordinals / BDF strings) against ``devices``.

    ``devices`` is the list of dicts with ``index`` and ``bdf`` the driver reported.
    Returns the selected indices in ascending order.
    """
    if not requested:
        return [d["index"] for d in devices]
    by_bdf = dict((normalize_bdf(d["bdf"]), d["index"]) for d in devices)
    chosen = []
    for item in requested:
        if isinstance(item, bool):
            raise PlanError("gpus entry %r is not a GPU index or PCI address" % (item,))
        if isinstance(item, int) or (isinstance(item, str) and item.strip().isdigit()):
            index = int(item)
            if not 0 <= index < len(devices):
                raise PlanError("gpus entry %r: no such GPU; this machine has %d (indices 0-%d, in PCI bus order)"
                                % (item, len(devices), len(devices) - 1))
        else:
            bdf = normalize_bdf(item)
            if bdf is None:
                raise PlanError("gpus entry %r is neither an index nor a PCI address like 0000:1b:00.0" % (item,))
            if bdf not in by_bdf:
                raise PlanError("gpus entry %r: no GPU at that address (GPUs: %s)"
                                % (item, ", ".join(sorted(by_bdf))))
            index = by_bdf[bdf]
        if index in chosen:
            raise PlanError("gpus entry %r is listed twice" % (item,))
        chosen.append(index)
    if len(chosen) < 2:
        raise PlanError("gpus selects %d GPU; peer-to-peer needs at least 2" % len(chosen))
    return sorted(chosen)


def plan_pairs(indices):
    """Unordered pairs (a < b) to measure; each covers both ordered pairs a->b and b->a.

    N GPUs give N*(N-1)/2 unordered pairs: 1 at 2 GPUs, 28 at 8 (56 ordered pairs).
    """
    return [(a, b) for pos, a in enumerate(indices) for b in indices[pos + 1:]]


def estimate_seconds(n_gpus, size_bytes, repetitions, warmup, staged, latency_iterations,
                     p2p_gbps=300.0, staged_gbps=10.0, latency_us=10.0, per_gpu_setup_s=1.0):
    """Wall time the measurement needs at the given (pessimistic by default) rates.

    Pairs are measured one after the other (concurrent pairs would share NVSwitch ports and
    host bandwidth and spoil each other's figures), so time grows with N*(N-1)/2.
    Per unordered pair: two unidirectional runs and one bidirectional run (which moves twice
    the bytes in about the same time), each of warmup + repetitions copies, with peer
    access on and, if ``staged``, off; plus two latency runs each way.
    """
    pairs = n_gpus * (n_gpus - 1) // 2
    copies = warmup + repetitions
    per_pair = 3.0 * copies * size_bytes / (p2p_gbps * 1e9)
    per_pair += 4.0 * latency_iterations * latency_us * 1e-6
    if staged:
        per_pair += 3.0 * copies * size_bytes / (staged_gbps * 1e9)
    return n_gpus * per_gpu_setup_s + pairs * per_pair


def parse_threshold(name, value, limits=None):
    """A threshold is None, a number, or {link type: number}; return {link: float or None}.

    ``limits`` is the accepted (low, high); by default THRESHOLD_RANGES[name], or 0 to MAX_GBPS.
    """
    low, high = limits or THRESHOLD_RANGES.get(name, (0.0, MAX_GBPS))
    if value is None:
        return dict((link, None) for link in LINK_TYPES)
    if isinstance(value, bool):
        raise PlanError("%s=%r: give a number or a dict like {nvlink: 380, pcie: 20}" % (name, value))
    if isinstance(value, (int, float)) or (isinstance(value, str) and _is_number(value)):
        number = finite_number(name, value, low, high)
        return dict((link, number) for link in LINK_TYPES)
    if isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in LINK_TYPES + ("default",))
        if unknown:
            raise PlanError("%s has unknown link type(s) %s; accepted keys: %s, default"
                            % (name, ", ".join(unknown), ", ".join(LINK_TYPES)))
        parsed = {}
        for key in ("default",) + LINK_TYPES:
            raw = value.get(key)
            if raw is None:
                parsed[key] = None
                continue
            if isinstance(raw, bool) or not (isinstance(raw, (int, float)) or (isinstance(raw, str) and _is_number(raw))):
                raise PlanError("%s.%s=%r is not a number" % (name, key, raw))
            parsed[key] = finite_number("%s.%s" % (name, key), raw, low, high)
        return dict((link, parsed[link] if link in value else parsed["default"]) for link in LINK_TYPES)
    raise PlanError("%s=%r: give a number or a dict like {nvlink: 380, pcie: 20}" % (name, value))


def _is_number(text):
    try:
        float(text)
        return True
    except (ValueError, OverflowError):
        return False


def usable_figure(value):
    """True for a measured figure that can be judged: a finite number >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int too large for a float
        return False


def verdicts(pairs, bidirectional, thresholds, require_peer_access=True, floors=None):
    """List the shortfalls: each a dict naming the pair, the metric, value, threshold, reason.

    ``pairs``: ordered-pair results (src, dst, link, peer_access, unidirectional_p2p_gbps,
    unidirectional_staged_gbps, data_ok, error). ``bidirectional``: unordered-pair results
    (a, b, link, bidirectional_p2p_gbps). ``thresholds``: parse_threshold() output for
    ``min_unidirectional_gbps``, ``min_bidirectional_gbps`` and ``min_speedup``.
    ``floors``: None (the thresholds per link type apply), or the bandwidth floor of each pair
    as p2p_floor.choose gives it, ``{"unidirectional": {(src, dst): (floor, source)},
    "bidirectional": {(a, b): (floor, source)}}``; a pair it lacks has no bandwidth floor. Its
    shortfalls carry ``floor_source``, and a link-derived floor's source is in the reason.
    """
    short = []
    for metric, per_link in sorted(thresholds.items()):
        for link, limit in sorted(per_link.items()):
            if limit is not None and not usable_figure(limit):
                raise PlanError("%s.%s=%r is not a finite number >= 0 (thresholds go through "
                                "parse_threshold)" % (metric, link, limit))

    def add(pair, metric, value, limit, reason, source=None):
        entry = {"pair": pair, "metric": metric, "value": value, "threshold": limit, "reason": reason}
        if source is not None:
            entry["floor_source"] = source
        short.append(entry)

    def floor(kind, key, metric, link):
        """(limit, source, text appended to the reason) of one bandwidth metric of one pair."""
        if floors is None:
            return thresholds[metric][link], None, ""
        limit, source = floors.get(kind, {}).get(key, (None, None))
        if limit is not None and not usable_figure(limit):
            raise PlanError("the %s floor of %r is %r, not a finite number >= 0" % (kind, key, limit))
        shown = "" if source is None or source.startswith("override") else " (%s)" % source
        return limit, (source if limit is not None else None), shown

    def usable(pair, metric, value):
        """A measured figure that is not a finite number >= 0 is a shortfall of its own: it
        would slip past every floor (NaN compares false with everything)."""
        if value is None or usable_figure(value):
            return True
        add(pair, metric, value, None, "the measured %s is %r, not a finite number >= 0: the "
            "measurement is not valid" % (metric.replace("_", " "), value))
        return False

    for res in pairs:
        name = "%d->%d" % (res["src"], res["dst"])
        link = res.get("link") or "unknown"
        if res.get("error"):
            add(name, "error", None, None, res["error"])
            continue
        if not res.get("peer_access"):
            if require_peer_access:
                add(name, "peer_access", False, True,
                    "GPU %d cannot access GPU %d's memory directly (no P2P: check the topology, "
                    "ACS/IOMMU settings, or NVreg options)" % (res["src"], res["dst"]))
            continue
        if res.get("data_ok") is False:
            add(name, "data", False, True, "data copied peer-to-peer did not arrive intact")
        value = res.get("unidirectional_p2p_gbps")
        if not usable(name, "unidirectional_gbps", value):
            value = None
        limit, source, shown = floor("unidirectional", (res["src"], res["dst"]), "min_unidirectional_gbps", link)
        if limit is not None and value is not None and value < limit:
            add(name, "unidirectional_gbps", value, limit,
                "%.1f GB/s over %s is below the %.1f GB/s floor%s" % (value, link, limit, shown), source)
        staged = res.get("unidirectional_staged_gbps")
        if not usable(name, "unidirectional_staged_gbps", staged):
            staged = None
        limit = thresholds["min_speedup"][link]
        if limit is not None and value is not None and staged:
            speedup = value / staged
            if speedup < limit:
                add(name, "p2p_speedup", round(speedup, 2), limit,
                    "peer access is only %.2fx faster than staging through the host (floor %.2fx)"
                    % (speedup, limit))
    for res in bidirectional:
        name = "%d<->%d" % (res["a"], res["b"])
        link = res.get("link") or "unknown"
        value = res.get("bidirectional_p2p_gbps")
        if not usable(name, "bidirectional_gbps", value):
            continue
        limit, source, shown = floor("bidirectional", (res["a"], res["b"]), "min_bidirectional_gbps", link)
        if limit is not None and value is not None and value < limit:
            add(name, "bidirectional_gbps", value, limit,
                "%.1f GB/s both ways over %s is below the %.1f GB/s floor%s" % (value, link, limit, shown), source)
    return short


def matrices(indices, pairs, bidirectional):
    """N x N matrices (rows = source, columns = destination; null on the diagonal and where
    nothing was measured), keyed as in MATRICES, plus the GPU index of each row."""
    pos = dict((index, n) for n, index in enumerate(indices))
    size = len(indices)
    out = dict((key, [[None] * size for _rep in range(size)]) for key, _title, _fmt in MATRICES)
    for res in pairs:
        i, j = pos[res["src"]], pos[res["dst"]]
        for key in ("unidirectional_p2p_gbps", "unidirectional_staged_gbps", "latency_p2p_us", "latency_staged_us"):
            out[key][i][j] = res.get(key)
    for res in bidirectional:
        i, j = pos[res["a"]], pos[res["b"]]
        for key in ("bidirectional_p2p_gbps", "bidirectional_staged_gbps"):
            out[key][i][j] = out[key][j][i] = res.get(key)
    out["gpus"] = list(indices)
    return out


def render_table(mats, devices=None, elapsed_s=None):
    """The matrices as fixed-width text, one block per metric (like p2pBandwidthLatencyTest)."""
    indices = mats["gpus"]
    lines = []
    if devices:
        for dev in devices:
            if dev["index"] in indices:
                lines.append("GPU %d: %s (%s)" % (dev["index"], dev.get("name", "?"), dev.get("bdf", "?")))
        lines.append("")
    width = 9
    for key, title, fmt in MATRICES:
        rows = mats.get(key)
        if rows is None or all(v is None for row in rows for v in row):
            continue
        lines.append(title)
        lines.append("%6s" % "src\\dst" + "".join("%*d" % (width, idx) for idx in indices))
        for n, idx in enumerate(indices):
            cells = []
            for m in range(len(indices)):
                value = rows[n][m]
                cells.append("%*s" % (width, "-" if value is None else fmt % value))
            lines.append("%6d " % idx + "".join(cells))
        lines.append("")
    if elapsed_s is not None:
        lines.append("measured in %.1f s" % elapsed_s)
    return "\n".join(lines).rstrip("\n") + "\n"


def summarize_shortfalls(short, limit=8):
    """One line for fail_json's msg, naming the first few shortfalls."""
    parts = ["%s %s" % (s["pair"], s["reason"]) for s in short[:limit]]
    if len(short) > limit:
        parts.append("and %d more" % (len(short) - limit))
    return "; ".join(parts)
