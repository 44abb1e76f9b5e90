# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One P2P check from module options to module result: validate, measure, judge.

Validation happens before the driver is touched. "No driver" and "no device" are outcomes
(a normal result with ``skipped`` true and the reason), not failures: a CPU-only host in the
fleet must not stop a rollout. Every other driver error raises ModuleFailure with the call and
the CUDA error string. A shortfall with ``fail_on_threshold`` raises ModuleFailure carrying the
whole result as its partial, so the failed task still shows every figure and matrix.

Floors: each pair's bandwidth floor is the absolute one set for its link type
(``min_unidirectional_gbps`` / ``min_bidirectional_gbps``) when set, else what its link carries
times an efficiency (p2p/p2p_floor, from the node facts of hw/gpu_facts and NVML's NVLink
version), named per pair in ``floor_*_gbps`` and ``floor_source``. A pair without peer access,
or one that falls short, is diagnosed (p2p/p2p_diagnose: IOMMU domain, ACS redirect, link
trained down, across sockets, no NVLink, the driver's P2P answer). ``no_peer_access`` decides
whether a pair without peer access fails the check (``fail``) or passes as copies staged
through the host (``staged``, listed in ``staged_pairs`` with the causes).

The engine contract: ``run(params, check_mode=False, paths=None, tools=None)``. ``tools`` is
a Libraries: what loads the CUDA driver and NVML (tests pass fakes); ``paths`` is where the
node facts are read (anything with ``root``, such as hw/gpu_facts.Paths; default ``/``). It
only measures, so ``changes`` is always empty and check mode runs the same measurement.

``cuda_library`` is code that runs as root once loaded: it is checked by
cuda_driver.trusted_library (a bare libcuda name, or an absolute path root owns all the way up)
before anything is loaded, and a refused value fails the task naming it, never a skip. The
owner and mode chain check is local to cuda_driver; it could use a shared trust helper later.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.progress import Progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.progress import remove as remove_progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_diagnose
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_floor
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_measure
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan

CUDA_ERROR_NO_DEVICE = 100
THRESHOLDS = ("min_unidirectional_gbps", "min_bidirectional_gbps", "min_speedup")
NO_PEER_ACCESS = ("fail", "staged")

# The module's argument spec, read by the module, by validate() and by the tests (one engine
# contract). min_speedup was min_p2p_speedup; the old name stays an alias.
ARGUMENT_SPEC = dict(
    gpus=dict(type="list", elements="raw"),
    size_mib=dict(type="int", default=256),
    repetitions=dict(type="int", default=10),
    warmup=dict(type="int", default=2),
    streams=dict(type="int", default=1),
    latency_iterations=dict(type="int", default=100),
    measure_staged=dict(type="bool", default=True),
    timeout_s=dict(type="float", default=60.0),
    min_unidirectional_gbps=dict(type="raw"),
    min_bidirectional_gbps=dict(type="raw"),
    min_speedup=dict(type="raw", aliases=["min_p2p_speedup"]),
    require_peer_access=dict(type="bool", default=True),
    no_peer_access=dict(type="str", default="fail", choices=list(NO_PEER_ACCESS)),
    link_floors=dict(type="bool", default=True),
    floor_efficiency=dict(type="dict"),
    fail_on_threshold=dict(type="bool", default=True),
    cuda_library=dict(type="str", default=cuda_driver.DEFAULT_LIBRARY),
    progress_path=dict(type="path"),
)

_RANGES = {
    "size_mib": (1, 65536),
    "repetitions": (1, 10000),
    "warmup": (0, 1000),
    "streams": (1, 16),
    "latency_iterations": (1, 1000000),
}
# timeout_s: more than 0 (a copy cannot finish in no time), at most a day. NaN would disable
# the timeout altogether (every deadline comparison is false) and an infinity waits for ever.
TIMEOUT_RANGE = (0.0, 86400.0)


def validate(params):
    """Return (measure options, thresholds) or raise ModuleFailure naming the bad value."""
    try:
        return _validate(params)
    except p2p_plan.PlanError as exc:
        raise ModuleFailure(str(exc))


def _option(params, name):
    """``params[name]``, or its ARGUMENT_SPEC default when the caller left it out."""
    return params.get(name, ARGUMENT_SPEC[name].get("default"))


def _validate(params):
    for name, (low, high) in sorted(_RANGES.items()):
        value = params.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise p2p_plan.PlanError("%s=%r: must be an integer from %d to %d" % (name, value, low, high))
    timeout = p2p_plan.finite_number("timeout_s", params.get("timeout_s"), TIMEOUT_RANGE[0], TIMEOUT_RANGE[1],
                                     low_open=True)
    thresholds = dict((name, p2p_plan.parse_threshold(name, params.get(name))) for name in THRESHOLDS)
    if not _option(params, "measure_staged") and any(v is not None for v in thresholds["min_speedup"].values()):
        raise p2p_plan.PlanError("min_speedup needs measure_staged=true (the speed-up is peer vs staged)")
    for item in params.get("gpus") or []:
        if not isinstance(item, (int, str)) or isinstance(item, bool):
            raise p2p_plan.PlanError("gpus entry %r is neither an index nor a PCI address" % (item,))
        if isinstance(item, str) and not item.strip().isdigit() and p2p_plan.normalize_bdf(item) is None:
            raise p2p_plan.PlanError("gpus entry %r is neither an index nor a PCI address like 0000:1b:00.0" % (item,))
    policy = _option(params, "no_peer_access")
    if policy not in NO_PEER_ACCESS:
        raise p2p_plan.PlanError("no_peer_access=%r: give one of %s" % (policy, ", ".join(NO_PEER_ACCESS)))
    try:
        efficiency = p2p_floor.efficiencies(params.get("floor_efficiency"))
    except p2p_floor.FloorError as exc:
        raise p2p_plan.PlanError(str(exc))
    options = {
        "gpus": params.get("gpus"),
        "no_peer_access": policy,
        "link_floors": bool(_option(params, "link_floors")),
        "efficiency": efficiency,
        "size_bytes": params["size_mib"] << 20,
        "repetitions": params["repetitions"],
        "warmup": params["warmup"],
        "staged": _option(params, "measure_staged"),
        "latency_iterations": params["latency_iterations"],
        "streams": params["streams"],
        "timeout_s": timeout,
    }
    return options, thresholds


class Libraries:
    """The engine's tools: what loads the CUDA driver (``driver(library)``) and NVML
    (``nvml()``). The module uses the real libraries; tests pass fakes."""

    def __init__(self, driver=None, nvml=None):
        self.driver = driver or cuda_driver.Driver
        self.nvml = nvml or nvml_mod.Nvml


def skipped(reason, gpus=0):
    return {"changed": False, "changes": [], "gpus": gpus, "skipped": True, "msg": reason, "skip_reason": reason}


def run(params, check_mode=False, paths=None, tools=None):
    """Return the module result (skipped, or measured) or raise ModuleFailure.

    The measurement changes nothing, so check mode runs it the same way; ``paths`` is unused
    (the common engine signature).
    """
    tools = tools or Libraries()
    options, thresholds = validate(params)
    try:
        library = cuda_driver.trusted_library(params.get("cuda_library") or cuda_driver.DEFAULT_LIBRARY)
    except cuda_driver.UntrustedLibrary as exc:
        raise ModuleFailure(str(exc))
    except cuda_driver.DriverMissing as exc:
        return skipped("no NVIDIA driver: %s" % exc)
    cuda_driver.prefer_pci_bus_order()
    try:
        driver = tools.driver(library)
    except cuda_driver.DriverMissing as exc:
        return skipped("no NVIDIA driver: %s" % exc)
    nvml = tools.nvml()
    progress = Progress(params.get("progress_path"))
    try:
        result = p2p_measure.measure(driver, nvml, options, progress)
        node, versions = (None, {}) if result.get("skipped") else node_facts(paths, nvml)
    except cuda_driver.CudaError as exc:
        if exc.code == CUDA_ERROR_NO_DEVICE and exc.call == "cuInit":
            return skipped("the NVIDIA driver sees no GPU: %s" % exc)
        raise ModuleFailure(str(exc))
    except (cuda_driver.CopyTimeout, p2p_plan.PlanError) as exc:
        raise ModuleFailure(str(exc))
    finally:
        nvml.shutdown()
        remove_progress(params.get("progress_path"))
    result["changes"] = []
    if result.get("skipped"):
        result["skip_reason"] = result["msg"]
        return result
    staged_ok = options["no_peer_access"] == "staged" or not _option(params, "require_peer_access")
    floors = apply_floors(result, thresholds, options, node, versions, paths)
    short = p2p_plan.verdicts(result["pairs"], result["bidirectional"], thresholds,
                              require_peer_access=not staged_ok, floors=floors)
    result["shortfalls"] = short
    result["thresholds"] = thresholds
    result["no_peer_access"] = "staged" if staged_ok else "fail"
    explain(result, short, node, versions, paths, staged_ok)
    if short and _option(params, "fail_on_threshold"):
        # Every figure goes with the failure: outcome.finish passes the partial to fail_json.
        raise ModuleFailure("GPU peer-to-peer falls short on %d check(s): %s" % (
            len(short), p2p_plan.summarize_shortfalls(short)), result)
    return result


def _root(paths):
    return getattr(paths, "root", None) or "/"


def node_facts(paths, nvml):
    """(gpu_facts.gather's result, {bdf: NVML NVLink version}) for floors and diagnosis.

    ``nvml`` is the engine's NVML; one that cannot answer the facts' queries (unavailable, or a
    stand-in that only classifies links) is replaced by nvml.Unavailable, so the sysfs facts
    are still read. Nothing here fails the check: an unreadable fact is unknown.
    """
    usable = getattr(nvml, "available", False) is True and hasattr(nvml, "device")
    reader = nvml if usable else nvml_mod.Unavailable(getattr(nvml, "reason", None) or "NVML is not available")
    try:
        node = gpu_facts.gather(gpu_facts.Paths(_root(paths)), nvml=reader)
    except (OSError, ValueError) as exc:
        return {"unknown": "the node facts could not be read: %s" % exc}, {}
    versions = {}
    if usable and isinstance(node.get("gpus"), list):
        for gpu in node["gpus"]:
            bdf = (gpu.get("bdf") or {}).get("value")
            links = gpu.get("nvlink")
            active = [x["link"]["value"] for x in links if x["active"]["value"]] if isinstance(links, list) else []
            if not bdf or not active:
                continue
            try:
                versions[bdf] = nvml.nvlink_version(nvml.device(bdf), active[0])
            except nvml_mod.NvmlError:
                pass
    return node, versions


def _pair_inputs(result, node, versions, paths, a, b, link):
    bdf = dict((d["index"], d["bdf"]) for d in result.get("devices") or [])
    sys_root = gpu_facts.Paths(_root(paths)).sys
    inputs = p2p_diagnose.pair_inputs(node, bdf.get(a), bdf.get(b), sys_root, versions)
    if link and link != "unknown":
        inputs["link"] = link  # the link the measurement was judged under (NVML's NVLink P2P answer)
    return inputs


def apply_floors(result, thresholds, options, node, versions, paths):
    """The floor of every measured pair, written into its entry (``link_gbps``,
    ``floor_unidirectional_gbps`` or ``floor_bidirectional_gbps``, ``floor_source``), and
    returned in the form p2p_plan.verdicts takes."""
    floors = {"unidirectional": {}, "bidirectional": {}}
    by_pair = dict(((r["src"], r["dst"]), r) for r in result["pairs"])
    for bidi in result["bidirectional"]:
        a, b, link = bidi["a"], bidi["b"], bidi.get("link") or "unknown"
        derived = None
        if options["link_floors"]:
            derived = p2p_floor.expected(_pair_inputs(result, node, versions, paths, a, b, link), options["efficiency"])
        blank = (None, "no floor")
        for key, res in (((a, b), by_pair.get((a, b))), ((b, a), by_pair.get((b, a)))):
            limit, source = p2p_floor.choose("min_unidirectional_gbps", link, thresholds,
                                             derived["unidirectional"] if derived else blank, options["link_floors"])
            floors["unidirectional"][key] = (limit, source)
            if res is not None:
                res.update(link_gbps=derived["link_gbps"] if derived else None, floor_unidirectional_gbps=limit,
                           floor_source=source)
        limit, source = p2p_floor.choose("min_bidirectional_gbps", link, thresholds,
                                         derived["bidirectional"] if derived else blank, options["link_floors"])
        floors["bidirectional"][(a, b)] = (limit, source)
        bidi.update(link_gbps=round(2 * derived["link_gbps"], 2) if derived and derived["link_gbps"] else None,
                    floor_bidirectional_gbps=limit, floor_source=source)
    return floors


def _pair_of(name):
    """(a, b) with a < b of a shortfall's pair name (``0->1``, ``1<->0``), or None."""
    for sep in ("<->", "->"):
        if sep in str(name):
            left, right = str(name).split(sep, 1)
            try:
                x, y = int(left), int(right)
            except ValueError:
                return None
            return min(x, y), max(x, y)
    return None


def explain(result, short, node, versions, paths, staged_ok):
    """``diagnosis`` for every pair without peer access or short of a floor, its causes on
    each of its shortfalls, ``staged_pairs`` where no peer access is accepted, and both in the
    table."""
    why = {}
    for res in result["pairs"]:
        if not res.get("error") and not res.get("peer_access"):
            why.setdefault((min(res["src"], res["dst"]), max(res["src"], res["dst"])), set()).add("no peer access")
    for entry in short:
        key = _pair_of(entry["pair"])
        if key is not None and entry["metric"] in ("unidirectional_gbps", "bidirectional_gbps", "p2p_speedup"):
            why.setdefault(key, set()).add("below the floor")
    links = dict(((r["a"], r["b"]), r.get("link")) for r in result["bidirectional"])
    diagnosis = {}
    for key in sorted(why):
        found = p2p_diagnose.diagnose(_pair_inputs(result, node, versions, paths, key[0], key[1], links.get(key)))
        diagnosis[key] = dict(pair="%d<->%d" % key, why=sorted(why[key]), **found)
    result["diagnosis"] = [diagnosis[key] for key in sorted(diagnosis)]
    for entry in short:
        found = diagnosis.get(_pair_of(entry["pair"]))
        if found and entry["metric"] != "error":
            entry["causes"] = found["causes"]
            if found["causes"]:
                entry["reason"] += "; why: %s" % ", ".join(c["id"] for c in found["causes"])
    staged = []
    if staged_ok:
        by_pair = dict(((r["src"], r["dst"]), r) for r in result["pairs"])
        for bidi in result["bidirectional"]:
            key = (bidi["a"], bidi["b"])
            if bidi.get("error") or "no peer access" not in why.get(key, ()):
                continue
            staged.append({
                "pair": "%d<->%d" % key,
                "staged_unidirectional_gbps": [(by_pair.get(key) or {}).get("unidirectional_staged_gbps"),
                                               (by_pair.get(key[::-1]) or {}).get("unidirectional_staged_gbps")],
                "staged_bidirectional_gbps": bidi.get("bidirectional_staged_gbps"),
                "causes": diagnosis[key]["causes"],
            })
    result["staged_pairs"] = staged
    lines = []
    for item in result["diagnosis"]:
        head = "GPU %s: %s" % (item["pair"], ", ".join(item["why"]))
        if item["pair"] in [s["pair"] for s in staged]:
            head += " (accepted: copies staged through the host, no_peer_access=staged)"
        lines.append(head)
        lines.extend("  - %s: %s; fix: %s" % (c["id"], c["summary"], c["fix"]) for c in item["causes"])
        if not item["causes"]:
            lines.append("  - no cause found in the facts read")
        lines.extend("  - not checked: %s: %s" % (u["id"], u["reason"]) for u in item["unchecked"])
    if lines and result.get("table") is not None:
        result["table"] += "\nWhy peer-to-peer is missing or slow\n" + "\n".join(lines) + "\n"
