# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One P2P check from module options to module result: validate, measure, judge.

Validation happens before the driver is touched. "No driver" and "no device" are outcomes
(a normal result with ``skipped`` true and the reason), not failures: a CPU-only host in the
fleet must not stop a rollout. Every other driver error raises ModuleFailure with the call and
the CUDA error string. A shortfall with ``fail_on_threshold`` raises ModuleFailure carrying the
whole result as its partial, so the failed task still shows every figure and matrix.

The engine contract: ``run(params, check_mode=False, paths=None, tools=None)``. ``tools`` is
a Libraries: what loads the CUDA driver and NVML (tests pass fakes); ``paths`` is accepted for
the common signature and unused (the check reads no files of its own). It only measures, so
``changes`` is always empty and check mode runs the same measurement.

``cuda_library`` is code that runs as root once loaded: it is checked by
cuda_driver.trusted_library (a bare libcuda name, or an absolute path root owns all the way up)
before anything is loaded, and a refused value fails the task naming it, never a skip. The
owner and mode chain check is local to cuda_driver; it could use a shared trust helper later.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_measure
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan

CUDA_ERROR_NO_DEVICE = 100
THRESHOLDS = ("min_unidirectional_gbps", "min_bidirectional_gbps", "min_speedup")

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
    fail_on_threshold=dict(type="bool", default=True),
    cuda_library=dict(type="str", default=cuda_driver.DEFAULT_LIBRARY),
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
    options = {
        "gpus": params.get("gpus"),
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
    try:
        result = p2p_measure.measure(driver, nvml, options)
    except cuda_driver.CudaError as exc:
        if exc.code == CUDA_ERROR_NO_DEVICE and exc.call == "cuInit":
            return skipped("the NVIDIA driver sees no GPU: %s" % exc)
        raise ModuleFailure(str(exc))
    except (cuda_driver.CopyTimeout, p2p_plan.PlanError) as exc:
        raise ModuleFailure(str(exc))
    finally:
        nvml.shutdown()
    result["changes"] = []
    if result.get("skipped"):
        result["skip_reason"] = result["msg"]
        return result
    short = p2p_plan.verdicts(result["pairs"], result["bidirectional"], thresholds,
                              require_peer_access=_option(params, "require_peer_access"))
    result["shortfalls"] = short
    result["thresholds"] = thresholds
    if short and _option(params, "fail_on_threshold"):
        # Every figure goes with the failure: outcome.finish passes the partial to fail_json.
        raise ModuleFailure("GPU peer-to-peer falls short on %d check(s): %s" % (
            len(short), p2p_plan.summarize_shortfalls(short)), result)
    return result
