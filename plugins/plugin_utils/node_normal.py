# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is this node normal? Each host held against its profile's expectations (absolute) and against
the hosts of the same profile in the fleet (its peers), from the records the audit, verify and
the benchmark already write. On the controller, plain data in and out.

Why both: an absolute floor answers "is this figure possible on this hardware at all" (the
link-derived P2P floors, the GPU count a board has, the NVLinks a model has, a decode efficiency
band), and is right for one host; peers answer "is this figure what the same hardware does
elsewhere in this fleet", which no datasheet knows (a BIOS setting, a riser, a slower DIMM
population). The question in every tracker ("749 of 900 GB/s: is that normal?") needs both.

Peers: for every figure (each P2P pair one way and both ways, decode tokens/s at one stream, the
decode efficiency, TTFT p50 at one stream), the median of the hosts of the profile and their
median absolute deviation (MAD). A host is an outlier on a figure when it lies more than
``mads`` MADs from the median, the MAD taken as at least ``min_spread_pct`` % of the median
(identical figures, such as a fleet of stand-ins, would otherwise make any difference an outlier).
Fewer than ``min_peers`` hosts with the figure: no peer verdict, and the reason.
"""

from __future__ import annotations

import statistics

DEFAULT_MADS = 3.0
DEFAULT_MIN_PEERS = 3
DEFAULT_MIN_SPREAD_PCT = 2.0

# figure -> (unit, which way is better)
_DECODE = ("decode_tokens_per_s", "tok/s", "higher")
_EFFICIENCY = ("decode_efficiency_pct", "%", "higher")
_TTFT = ("ttft_ms_p50", "ms", "lower")


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _figure(name, value, unit, better, source, **extra):
    entry = {"figure": name, "value": round(float(value), 3), "unit": unit, "better": better, "source": source}
    entry.update(extra)
    return entry


def _p2p_figures(verify):
    p2p = (verify or {}).get("p2p") or {}
    out = []
    for pair in p2p.get("pairs") or []:
        value = _number(pair.get("unidirectional_p2p_gbps"))
        if value is not None and pair.get("src") is not None and pair.get("dst") is not None:
            out.append(_figure("p2p %s->%s one way" % (pair["src"], pair["dst"]), value, "GB/s", "higher", "verify.json",
                               link=pair.get("link"), floor=_number(pair.get("floor_unidirectional_gbps")),
                               floor_source=pair.get("floor_source")))
    for pair in p2p.get("bidirectional") or []:
        value = _number(pair.get("bidirectional_p2p_gbps"))
        if value is not None and pair.get("a") is not None and pair.get("b") is not None:
            out.append(_figure("p2p %s<->%s both ways" % (pair["a"], pair["b"]), value, "GB/s", "higher", "verify.json",
                               link=pair.get("link"), floor=_number(pair.get("floor_bidirectional_gbps")),
                               floor_source=pair.get("floor_source")))
    return out


def _benchmark_figures(benchmark):
    """Decode tokens/s, TTFT p50 (one stream) and the decode efficiency of the latest benchmark
    (benchmark.json: the run's after figures, or its only run)."""
    if not isinstance(benchmark, dict):
        return []
    levels = [lv for lv in benchmark.get("levels") or [] if isinstance(lv, dict)]
    single = next((lv for lv in levels if lv.get("concurrency") == 1), None)
    out = []
    if single is not None:
        figures = single.get("figures") or {}
        for key, (name, unit, better) in (("decode_tokens_per_s", _DECODE), ("ttft_ms.p50", _TTFT)):
            value = _number((figures.get(key) or {}).get("after"))
            if value is not None:
                out.append(_figure(name, value, unit, better, "benchmark.json"))
    efficiency = ((benchmark.get("efficiency") or {}).get("after")) or {}
    value = _number(efficiency.get("percent"))
    if value is not None:
        out.append(_figure(_EFFICIENCY[0], value, _EFFICIENCY[1], _EFFICIENCY[2], "benchmark.json",
                           formula=efficiency.get("formula")))
    return out


def valid_figures(entries):
    """The well-formed figures of a record read back (a peer's normal.json): a name, a finite
    number, a unit and a direction; anything else is left out, so one damaged record cannot
    break the judgement of the hosts of its profile."""
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if (isinstance(entry, dict) and isinstance(entry.get("figure"), str) and _number(entry.get("value")) is not None
                and entry["value"] == entry["value"] and abs(entry["value"]) != float("inf")
                and entry.get("better") in ("higher", "lower") and isinstance(entry.get("unit"), str)):
            out.append(entry)
    return out


def figures(verify=None, benchmark=None):
    """Every figure of a host's records, each ``{figure, value, unit, better, source, ...}``."""
    return _p2p_figures(verify) + _benchmark_figures(benchmark)


# ------------------------------------------------------------------------------ absolute

def _check(check, status, message, item=None, value=None, expected=None):
    return {"check": check, "item": item, "status": status, "message": message, "value": value, "expected": expected}


def _counts_text(allowed):
    allowed = [str(n) for n in allowed]
    return allowed[0] if len(allowed) == 1 else ", ".join(allowed[:-1]) + " or " + allowed[-1]


def _gpu_count(profile, node):
    allowed = ((profile.get("expectations") or {}).get("gpu_count") or {}).get(node.get("kind"))
    count = node.get("gpu_count")
    if not allowed:
        return [_check("gpu_count", "not_applicable", "%s sets no GPU count for a %s node" % (profile.get("platform"), node.get("kind")),
                       value=count)]
    status = "ok" if count in allowed else "outside"
    return [_check("gpu_count", status, "%d GPU(s); %s expects %s on a %s node"
                   % (count, profile.get("platform"), _counts_text(allowed), node.get("kind")), value=count, expected=allowed)]


def _model_for(gpu, models):
    for model in models:
        if gpu.get("device_id") in [d.lower() for d in model.get("device_ids") or []]:
            return model
    return models[0] if len(models) == 1 else None


def _nvlinks(profile, node):
    expectations = profile.get("expectations") or {}
    out = []
    for gpu in node.get("gpus") or []:
        model = _model_for(gpu, expectations.get("models") or [])
        want = (model or {}).get("nvlink_links")
        label = "GPU %s" % gpu.get("bdf")
        if not want:
            continue
        active = gpu.get("nvlink_active")
        if node.get("gpu_count", 0) < 2 and node.get("interconnect") != "nvswitch":
            out.append(_check("nvlink_links", "not_applicable", "one GPU on this node: no peer to link to", item=label,
                              value=active, expected=want))
        elif active is None:
            out.append(_check("nvlink_links", "unknown", "the NVLinks of this GPU are unknown (NVML)", item=label,
                              expected=want))
        elif active == 0 and expectations.get("nvlink_links_where_bridged"):
            out.append(_check("nvlink_links", "not_applicable", "no NVLink bridge on this GPU (bridges are optional here)",
                              item=label, value=0, expected=want))
        else:
            out.append(_check("nvlink_links", "ok" if active >= want else "outside",
                              "%d of %d NVLinks active (%s)" % (active, want, model["model"]), item=label,
                              value=active, expected=want))
    return out


def _memory_bandwidth(profile, node):
    """Each GPU's peak memory bandwidth as NVML gives it (bus width x memory clock, node_facts)
    against its model's datasheet figure: below 90 % is a GPU whose memory runs slower than its
    model's (a clock held down, another SKU under the same name)."""
    models = (profile.get("expectations") or {}).get("models") or []
    out = []
    for gpu in node.get("gpus") or []:
        model = _model_for(gpu, models)
        want = (model or {}).get("memory_bandwidth_gbps")
        if not want:
            continue
        have = gpu.get("memory_bandwidth_gbps")
        label = "GPU %s" % gpu.get("bdf")
        if not isinstance(have, (int, float)) or isinstance(have, bool):
            out.append(_check("memory_bandwidth", "unknown", "the GPU's memory bandwidth is unknown (NVML); %s: %g GB/s"
                              % (model["model"], want), item=label, expected=want))
            continue
        status = "ok" if have >= 0.9 * want else "outside"
        out.append(_check("memory_bandwidth", status, "%s GB/s peak (NVML), %s: %g GB/s%s" % (
            _num(have), model["model"], want, "" if status == "ok" else ", below 90 %"), item=label, value=have, expected=want))
    return out


def _p2p(profile, found, verify):
    if (profile.get("expectations") or {}).get("p2p_floors") == "none":
        return []
    pairs = [f for f in found if f["figure"].startswith("p2p ")]
    if not pairs:
        p2p = (verify or {}).get("p2p") or {}
        why = p2p.get("skip_reason") or p2p.get("msg") if p2p.get("skipped") else None
        return [_check("p2p_floor", "not_applicable" if why else "unknown",
                       ("P2P not measured: %s" % why) if why else "no P2P figures recorded (verify.json)")]
    out = []
    for pair in pairs:
        if pair.get("floor") is None:
            out.append(_check("p2p_floor", "unknown", "%.1f GB/s over %s; no floor: %s"
                              % (pair["value"], pair.get("link") or "an unknown link", pair.get("floor_source") or "none derived"),
                              item=pair["figure"], value=pair["value"]))
            continue
        ok = pair["value"] >= pair["floor"]
        out.append(_check("p2p_floor", "ok" if ok else "outside", "%.1f GB/s over %s, floor %.1f (%s)"
                          % (pair["value"], pair.get("link") or "?", pair["floor"], pair.get("floor_source") or "floor"),
                          item=pair["figure"], value=pair["value"], expected=pair["floor"]))
    return out


def _efficiency(profile, found):
    band = (profile.get("expectations") or {}).get("decode_efficiency_pct")
    if not band:
        return []
    entry = next((f for f in found if f["figure"] == _EFFICIENCY[0]), None)
    models = (profile.get("expectations") or {}).get("models") or []
    bandwidths = sorted(set("%s %s GB/s" % (m["model"], m["memory_bandwidth_gbps"]) for m in models if m.get("memory_bandwidth_gbps")))
    reference = " (memory bandwidth: %s)" % ", ".join(bandwidths) if bandwidths else ""
    if entry is None:
        return [_check("decode_efficiency", "unknown", "no decode efficiency recorded (the benchmark with "
                       "serving_active_params_billion set, gpufleet_benchmark=true)%s" % reference, expected=band)]
    low, high = band
    status = "ok" if low <= entry["value"] <= high else "outside"
    where = "" if status == "ok" else (" below the band" if entry["value"] < low else " above the band: the ceiling's inputs are wrong")
    return [_check("decode_efficiency", status, "%.1f %% of the memory-bandwidth ceiling%s, expected %g to %g %%%s; %s"
                   % (entry["value"], where, low, high, reference, entry.get("formula") or ""),
                   value=entry["value"], expected=band)]


def absolute(profile, node, found, verify=None):
    """The host against its profile's expectations (``profile``: profile_select.select's result;
    ``node``: profile_node.describe's; ``found``: figures()): a list of checks, each ``{check,
    item, status (ok, outside, unknown, not_applicable), message, value, expected}``."""
    profile = profile or {}
    node = node or {}
    checks = []
    if node:
        checks += _gpu_count(profile, node)
        checks += _nvlinks(profile, node)
        checks += _memory_bandwidth(profile, node)
    checks += _p2p(profile, found, verify)
    checks += _efficiency(profile, found)
    return checks


# ------------------------------------------------------------------------------ peers

def _num(value):
    """A figure as a report shows it: 3 significant decimals at most."""
    return ("%.3f" % value).rstrip("0").rstrip(".") if abs(value) < 100 else "%.1f" % value


def _mad(values, median):
    return statistics.median([abs(v - median) for v in values])


def group_stats(fleet, profile):
    """Per figure, the hosts of ``profile`` in ``fleet`` that have it, their median and MAD: once
    per profile, shared by every host's peers() (a fleet page judges every host)."""
    by_figure = {}
    for name, entry in fleet.items():
        if entry.get("profile") != profile:
            continue
        for figure in valid_figures(entry.get("figures")):
            by_figure.setdefault(figure["figure"], {})[name] = figure["value"]
    out = {}
    for figure, values in by_figure.items():
        numbers = list(values.values())
        median = statistics.median(numbers)
        out[figure] = {"hosts": len(values), "median": median, "mad": _mad(numbers, median)}
    return out


def peers(host, fleet, mads=DEFAULT_MADS, min_peers=DEFAULT_MIN_PEERS, min_spread_pct=DEFAULT_MIN_SPREAD_PCT,
          stats=None):
    """``host`` against the hosts of its profile in ``fleet`` ({host: {"profile": name, "figures":
    [...]}}): ``{profile, hosts, compared: [...], outliers: [...], reason}``. ``stats``: the
    profile's group_stats() when the caller has them."""
    mine = fleet.get(host) or {}
    profile = mine.get("profile")
    group = sorted(h for h, entry in fleet.items() if entry.get("profile") == profile and profile)
    result = {"profile": profile, "hosts": group, "compared": [], "outliers": [], "reason": None}
    if not profile:
        result["reason"] = "no profile recorded for this host"
        return result
    stats = group_stats(fleet, profile) if stats is None else stats
    thin = []
    for entry in valid_figures(mine.get("figures")):
        stat = stats.get(entry["figure"])
        if stat is None or stat["hosts"] < min_peers:
            thin.append(entry["figure"])
            continue
        median, mad = stat["median"], stat["mad"]
        spread = max(mad, abs(median) * min_spread_pct / 100.0)
        away = abs(entry["value"] - median) / spread if spread else 0.0
        worse = (entry["value"] < median) if entry["better"] == "higher" else (entry["value"] > median)
        item = {"figure": entry["figure"], "value": entry["value"], "unit": entry["unit"], "median": round(median, 3),
                "mad": round(mad, 3), "mads_away": round(away, 2), "hosts": stat["hosts"],
                "direction": "worse" if worse else "better"}
        result["compared"].append(item)
        if away > mads and entry["value"] != median:
            item["message"] = "%s: %s %s against the median %s %s of %d %s hosts, %.1f MADs %s (MAD %s%s)" % (
                entry["figure"], _num(entry["value"]), entry["unit"], _num(median), entry["unit"], stat["hosts"], profile,
                away, "worse" if worse else "better", _num(mad),
                "; counted as %g %% of the median" % min_spread_pct if spread > mad else "")
            result["outliers"].append(item)
    if thin and not result["compared"]:
        result["reason"] = "fewer than %d hosts of %s with these figures (%s)" % (min_peers, profile, ", ".join(thin[:4]))
    elif not mine.get("figures"):
        result["reason"] = "no figures recorded for this host (verify's P2P, the benchmark)"
    return result


def verdict(checks, peer):
    """``normal`` (true, false, or None when nothing could be judged) and one line per problem."""
    lines = ["%s%s: %s" % (c["check"], (" " + c["item"]) if c.get("item") else "", c["message"])
             for c in checks if c["status"] == "outside"]
    lines += [o["message"] for o in (peer or {}).get("outliers") or []]
    judged = any(c["status"] in ("ok", "outside") for c in checks) or bool((peer or {}).get("compared"))
    return (not lines) if judged or lines else None, lines
