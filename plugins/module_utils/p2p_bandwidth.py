# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One P2P check from module options to module result: validate, measure, judge.

Validation happens before the driver is touched. "No driver" and "no device" are outcomes
(skipped with the reason), not failures: a CPU-only host in the fleet must not stop a rollout.
Every other driver error fails with the call and the CUDA error string.

``cuda_library`` is code that runs as root once loaded: it is checked by
cuda_driver.trusted_library (a bare libcuda name, or an absolute path root owns all the way up)
before anything is loaded, and a refused value fails the task naming it, never a skip. The
owner and mode chain check is local to cuda_driver; it could use a shared trust helper later.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_measure
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan

CUDA_ERROR_NO_DEVICE = 100
THRESHOLDS = ("min_unidirectional_gbps", "min_bidirectional_gbps", "min_p2p_speedup")
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
    """Return (measure options, thresholds) or raise PlanError naming the bad value."""
    for name, (low, high) in sorted(_RANGES.items()):
        value = params.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise p2p_plan.PlanError("%s=%r: must be an integer from %d to %d" % (name, value, low, high))
    timeout = p2p_plan.finite_number("timeout_s", params.get("timeout_s"), TIMEOUT_RANGE[0], TIMEOUT_RANGE[1],
                                     low_open=True)
    thresholds = dict((name, p2p_plan.parse_threshold(name, params.get(name))) for name in THRESHOLDS)
    if not params.get("measure_staged", True) and any(v is not None for v in thresholds["min_p2p_speedup"].values()):
        raise p2p_plan.PlanError("min_p2p_speedup needs measure_staged=true (the speed-up is peer vs staged)")
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
        "staged": params.get("measure_staged", True),
        "latency_iterations": params["latency_iterations"],
        "streams": params["streams"],
        "timeout_s": timeout,
    }
    return options, thresholds


def skipped(reason, gpus=0):
    return {"changed": False, "gpus": gpus, "skipped": True, "msg": reason, "skip_reason": reason}


def run(params, driver_factory=None, nvml_factory=None):
    """Return (failed, result). Factories exist for tests; the module uses the real libraries."""
    try:
        options, thresholds = validate(params)
    except p2p_plan.PlanError as exc:
        return True, {"changed": False, "msg": str(exc)}

    try:
        library = cuda_driver.trusted_library(params.get("cuda_library") or cuda_driver.DEFAULT_LIBRARY)
    except cuda_driver.UntrustedLibrary as exc:
        return True, {"changed": False, "msg": str(exc)}
    except cuda_driver.DriverMissing as exc:
        return False, skipped("no NVIDIA driver: %s" % exc)
    cuda_driver.prefer_pci_bus_order()
    try:
        driver = (driver_factory or cuda_driver.Driver)(library)
    except cuda_driver.DriverMissing as exc:
        return False, skipped("no NVIDIA driver: %s" % exc)
    nvml = (nvml_factory or nvml_mod.Nvml)()
    try:
        result = p2p_measure.measure(driver, nvml, options)
    except cuda_driver.CudaError as exc:
        if exc.code == CUDA_ERROR_NO_DEVICE and exc.call == "cuInit":
            return False, skipped("the NVIDIA driver sees no GPU: %s" % exc)
        return True, {"changed": False, "msg": str(exc)}
    except cuda_driver.CopyTimeout as exc:
        return True, {"changed": False, "msg": str(exc)}
    except p2p_plan.PlanError as exc:
        return True, {"changed": False, "msg": str(exc)}
    finally:
        nvml.shutdown()
    if result.get("skipped"):
        result["skip_reason"] = result["msg"]
        return False, result
    short = p2p_plan.verdicts(result["pairs"], result["bidirectional"], thresholds,
                              require_peer_access=params.get("require_peer_access", True))
    result["shortfalls"] = short
    result["thresholds"] = thresholds
    if short and params.get("fail_on_threshold", True):
        result["msg"] = "GPU peer-to-peer falls short on %d check(s): %s" % (
            len(short), p2p_plan.summarize_shortfalls(short))
        return True, result
    return False, result
