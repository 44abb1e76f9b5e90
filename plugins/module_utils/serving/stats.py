# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The figures of an inference benchmark, from per-request timings.

Definitions follow the established clients (vLLM's benchmark_serving, NVIDIA AIPerf), so the
figures can be compared with theirs:

- TTFT: from just before the request is sent to the first streamed token;
- ITL: the gaps between successive streamed tokens, all requests pooled;
- TPOT: per request, (end - first token) / (output tokens - 1), the mean time per output token
  after the first (AIPerf calls this its inter-token latency);
- end-to-end latency: from sending to the last byte;
- decode tokens/s of one stream: 1 / TPOT, the median over requests;
- output tokens/s of a level: all output tokens / the level's wall time, first send to last end;
- goodput: requests/s of the requests that met every SLO given (TTFT, TPOT).

Percentiles interpolate linearly between closest ranks (numpy's default), so p50 of an even
count is the mean of the middle two.

Repeats: each repeat yields one value per figure; ``spread`` gives min, median and max over
repeats. A before/after difference no larger than the spread of either side is no measurable
change (see ``compare``).
"""

from __future__ import annotations

import math

PERCENTILES = (50, 90, 99)


def percentile(values, pct):
    """The ``pct`` percentile of ``values`` (linear between closest ranks); None when empty."""
    data = sorted(v for v in values if v is not None)
    if not data:
        return None
    rank = (len(data) - 1) * pct / 100.0
    low = int(math.floor(rank))
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def median(values):
    return percentile(values, 50)


def mean(values):
    data = [v for v in values if v is not None]
    return sum(data) / len(data) if data else None


def rounded(value, digits=3):
    return None if value is None else round(value, digits)


def distribution(values, scale=1.0):
    """``{mean, p50, p90, p99}`` of ``values`` times ``scale`` (seconds to ms: 1000)."""
    out = {"mean": rounded(_scaled(mean(values), scale))}
    for pct in PERCENTILES:
        out["p%d" % pct] = rounded(_scaled(percentile(values, pct), scale))
    return out


def _scaled(value, scale):
    return None if value is None else value * scale


def tpot(record):
    """Seconds per output token after the first, for one request; None with < 2 tokens."""
    if record["output_tokens"] < 2 or record["ttft"] is None:
        return None
    return (record["e2e"] - record["ttft"]) / (record["output_tokens"] - 1)


def level_figures(records, wall, slo_ttft_ms=None, slo_tpot_ms=None):
    """The figures of one concurrency level from its successful request records."""
    ok = [r for r in records if r.get("error") is None]
    tokens = sum(r["output_tokens"] for r in ok)
    tpots = [tpot(r) for r in ok]
    decode = [1.0 / t for t in tpots if t]
    good = [r for r in ok if _meets(r, slo_ttft_ms, slo_tpot_ms)]
    return {
        "requests": len(records),
        "completed": len(ok),
        "errors": len(records) - len(ok),
        "output_tokens": tokens,
        "wall_s": rounded(wall, 4),
        "output_tokens_per_s": rounded(tokens / wall if wall > 0 else None, 2),
        "requests_per_s": rounded(len(ok) / wall if wall > 0 else None, 3),
        "decode_tokens_per_s": rounded(median(decode), 2),
        "ttft_ms": distribution([r["ttft"] for r in ok], 1000.0),
        "itl_ms": distribution([gap for r in ok for gap in r["gaps"]], 1000.0),
        "tpot_ms": distribution(tpots, 1000.0),
        "e2e_ms": distribution([r["e2e"] for r in ok], 1000.0),
        "goodput_requests_per_s": (rounded(len(good) / wall if wall > 0 else None, 3)
                                   if slo_ttft_ms is not None or slo_tpot_ms is not None else None),
        "slo_met": (len(good) if slo_ttft_ms is not None or slo_tpot_ms is not None else None),
    }


def _meets(record, slo_ttft_ms, slo_tpot_ms):
    if slo_ttft_ms is not None and (record["ttft"] is None or record["ttft"] * 1000.0 > slo_ttft_ms):
        return False
    if slo_tpot_ms is not None:
        value = tpot(record)
        if value is not None and value * 1000.0 > slo_tpot_ms:
            return False
    return True


def spread(values):
    """``{min, median, max, runs}`` over repeats (None values left out of the summary)."""
    data = [v for v in values if v is not None]
    if not data:
        return {"min": None, "median": None, "max": None, "runs": list(values)}
    return {"min": min(data), "median": rounded(median(data), 4), "max": max(data), "runs": list(values)}


# Figures of a level summarised over repeats, as (path in the level's figures, higher is better).
SUMMARY_FIGURES = (
    ("output_tokens_per_s", True),
    ("requests_per_s", True),
    ("decode_tokens_per_s", True),
    ("goodput_requests_per_s", True),
    ("ttft_ms.p50", False), ("ttft_ms.p90", False), ("ttft_ms.p99", False),
    ("itl_ms.p50", False), ("itl_ms.p90", False), ("itl_ms.p99", False),
    ("tpot_ms.p50", False), ("tpot_ms.p90", False), ("tpot_ms.p99", False),
    ("e2e_ms.p50", False), ("e2e_ms.p90", False), ("e2e_ms.p99", False),
)


def pick(figures, path):
    value = figures
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def summarise(runs):
    """Per-level figures of several repeats -> ``{path: spread}`` for every SUMMARY_FIGURES path."""
    return {path: spread([pick(run, path) for run in runs]) for path, _higher in SUMMARY_FIGURES}


def higher_is_better(path):
    return dict(SUMMARY_FIGURES).get(path, True)


def compare(before, after, path):
    """Before and after spreads of one figure -> ``{before, after, delta_pct, noise_pct, verdict}``.

    The noise band is the larger run-to-run spread (max - min) of the two sides, as a percentage
    of the before median. A change whose size is within it is ``no measurable change``; else
    ``better`` or ``worse`` by the figure's direction. Missing figures give ``not measured``.
    """
    b, a = before.get("median"), after.get("median")
    if b is None or a is None:
        return {"before": b, "after": a, "delta_pct": None, "noise_pct": None, "verdict": "not measured"}
    noise = max(_width(before), _width(after))
    delta = a - b
    base = abs(b) if b else None
    out = {"before": b, "after": a,
           "delta_pct": rounded(100.0 * delta / base, 2) if base else None,
           "noise_pct": rounded(100.0 * noise / base, 2) if base else None}
    if abs(delta) <= noise:
        out["verdict"] = "no measurable change"
    else:
        out["verdict"] = "better" if (delta > 0) == higher_is_better(path) else "worse"
    return out


def _width(summary):
    if summary.get("min") is None or summary.get("max") is None:
        return 0.0
    return summary["max"] - summary["min"]


def ceiling(active_params_billion, bytes_per_param, bandwidth_gbps_per_gpu, gpus):
    """Single-stream decode ceiling in tokens/s: every decoded token reads all active weights
    once, so it cannot beat the GPUs' memory bandwidth divided by the bytes of those weights.
    ``bandwidth_gbps_per_gpu`` is GB/s (10^9 bytes) of one GPU; the weights are split over
    ``gpus`` (tensor parallel), each reading its share in parallel."""
    bytes_per_token = active_params_billion * 1e9 * bytes_per_param
    return gpus * bandwidth_gbps_per_gpu * 1e9 / bytes_per_token
