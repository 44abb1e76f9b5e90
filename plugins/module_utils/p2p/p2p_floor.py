# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Link-aware P2P floors: what a pair's link can carry, times an efficiency factor.

An absolute floor per link type fits one machine (380 GB/s fits NVLink 4 with 18 links, and
fails every A100 and every H100 NVL pair). Here each measured pair gets its own floor from the
link it actually has, read from the node facts (hw/gpu_facts) and NVML:

NVLink: active links between the pair x the per-link rate of that NVLink generation, one way.
  ``links``: the pair's ``nvlink_count`` fact: links whose far end is the other GPU (NVLink
  bridges, direct boards), or on NVSwitch systems the smaller of the two GPUs' active switch
  links (what ``nvidia-smi topo -m`` prints as NV#).

  ========  ====================  ==============  =============================================
  NVLink    GPUs                  GB/s per link   source
                                  per direction
  ========  ====================  ==============  =============================================
  1         P100 (pascal)         20              P100 whitepaper: 4 links, 160 GB/s both ways
  2         V100 (volta)          25              V100 whitepaper: 6 links, 300 GB/s both ways
  3         A100 (ampere ga100)   25              A100 whitepaper / datasheet: 12 links, 600 GB/s
                                                  both ways (SXM; A100 PCIe bridges: 12 links too)
  3         GA102 (A40, A10,      14.0625         A40 / RTX A6000 datasheets: NVLink bridge
            RTX A6000, 3090)                      112.5 GB/s both ways over 4 links
  4         H100/H200 (hopper)    25              H100 whitepaper / H100 and H200 datasheets: SXM
                                                  18 links, 900 GB/s both ways; H100 NVL bridge
                                                  600 GB/s = 12 links; H200 NVL 2- or 4-way
                                                  bridge 900 GB/s = 18 links per GPU (a 4-way
                                                  bridge splits them among the three peers)
  5         B200/GB200 (blackw.)  50              Blackwell datasheets: 18 links, 1.8 TB/s both
                                                  ways
  ========  ====================  ==============  =============================================

  The generation comes from the GPU's architecture (hw/nvidia_gpus, by PCI device ID) and,
  where that is unknown (a GPU newer than the table), from NVML's nvmlDeviceGetNvLinkVersion.
  The architecture wins where both are known: NVML's enum (nvml.h nvmlNvlinkVersion_t: 1 = 1.0,
  2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0, 8 = 6.0) has been seen to answer 5.0 on
  H100 (a workaround for it is in a public pynvml-based NCCL benchmark script), which would double the
  expected figure. The raw signalling rate of NVLink 4 is slightly higher (26.56 GB/s per link
  per direction); 25 GB/s is the data rate NVIDIA quotes, and the one used here.

PCIe: the negotiated link of both GPUs (current speed and width from sysfs; the smaller of the
  two; a speed below the GPU's capable one is taken at the capable one, since GPUs train their
  link down when idle and the facts are read after the copies: a link that stays slow under load
  falls short and is diagnosed ``link_degraded``), bounded by every bridge on the path between
  them (their current links), with the line
  encoding (8b/10b for gen1 and gen2, 128b/130b for gen3 to gen5, FLIT 242/256 for gen6) and a
  protocol efficiency of 0.8 (TLP headers and DLLPs: about what copies achieve with a Max
  Payload Size of 256 bytes). PCIe 5 x16: 32 GT/s x 16 x 128/130 / 8 = 63.0 GB/s raw per
  direction, 50.4 GB/s after the protocol. A pair across CPU sockets also crosses the
  inter-socket link (UPI, xGMI), whose P2P rate is platform-specific and not readable: its
  figure is halved (PATH_FACTORS), a conservative guess to override where the platform does
  better.

Efficiency factors (DEFAULT_EFFICIENCY; module option ``floor_efficiency``) turn what the link
carries into the floor:

- NVLink one way and both ways 0.75. Two H200 SXM (18 x 25 = 450 GB/s one way, 900 both ways)
  measured 394 and 772 GB/s with this module: 0.876 and 0.858 of the link, so 0.75 (floors
  337.5 and 675) passes them with 14 to 17 % margin. 0.8 would pass the H200 by only 7 % both
  ways, and A100 SXM pairs report about 240 and 470 GB/s of 300 and 600 (0.80, 0.78): 0.75
  passes them too.
- PCIe one way 0.8, both ways 0.7 (of twice the one-way figure: both directions at once lose
  more to the flow control and read completions sharing the link). On PCIe 4 x16 that is 20.2
  and 35.3 GB/s, the absolute floors used before (20 and 35).

Overrides: the module's absolute floors (``min_unidirectional_gbps``,
``min_bidirectional_gbps``: a number, or per link type) take precedence where they are set for
the pair's link type; the link-derived floor applies where they are not.
"""

from __future__ import annotations

import math

# Per-link rate (GB/s of 10^9 bytes per direction) by NVLink generation; see the table above.
NVLINK_LINK_GBPS = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
# GA10x (A40, A10, RTX A6000, RTX 3090) bridges: NVLink 3 at 14.0625 GB/s per link per direction.
GA10X_CHIPS = ("ga102", "ga103", "ga104")
GA10X_LINK_GBPS = 14.0625
ARCH_NVLINK = {"pascal": 1, "volta": 2, "ampere": 3, "hopper": 4, "blackwell": 5}
# nvml.h nvmlNvlinkVersion_t to the NVLink generation.
NVML_NVLINK_VERSIONS = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}

# PCIe: GT/s -> (generation, encoding efficiency).
PCIE_GENERATIONS = (
    (2.5, 1, 8.0 / 10.0),
    (5.0, 2, 8.0 / 10.0),
    (8.0, 3, 128.0 / 130.0),
    (16.0, 4, 128.0 / 130.0),
    (32.0, 5, 128.0 / 130.0),
    (64.0, 6, 242.0 / 256.0),
)
PCIE_PROTOCOL_EFFICIENCY = 0.8
# A factor for the part of the path no link speed describes.
PATH_FACTORS = {"across_cpus": 0.5}

EFFICIENCY_KEYS = ("nvlink_unidirectional", "nvlink_bidirectional", "pcie_unidirectional", "pcie_bidirectional")
DEFAULT_EFFICIENCY = {
    "nvlink_unidirectional": 0.75,
    "nvlink_bidirectional": 0.75,
    "pcie_unidirectional": 0.8,
    "pcie_bidirectional": 0.7,
}


class FloorError(ValueError):
    """A bad efficiency value: the message names it."""


def efficiencies(value):
    """``floor_efficiency`` (None or a dict of EFFICIENCY_KEYS) merged over the defaults.

    Each a finite number greater than 0 and at most 1; FloorError naming the key otherwise.
    """
    merged = dict(DEFAULT_EFFICIENCY)
    if value is None:
        return merged
    if not isinstance(value, dict):
        raise FloorError("floor_efficiency=%r: give a dict with keys %s" % (value, ", ".join(EFFICIENCY_KEYS)))
    unknown = sorted(str(k) for k in value if k not in EFFICIENCY_KEYS)
    if unknown:
        raise FloorError("floor_efficiency has unknown key(s) %s; accepted: %s"
                         % (", ".join(unknown), ", ".join(EFFICIENCY_KEYS)))
    for key, raw in value.items():
        if raw is None:
            continue
        try:
            if isinstance(raw, bool):
                raise ValueError
            number = float(raw)
        except (TypeError, ValueError, OverflowError):
            raise FloorError("floor_efficiency.%s=%r is not a number: give a finite number greater than 0 "
                             "and at most 1" % (key, raw))
        if not math.isfinite(number) or not 0.0 < number <= 1.0:
            raise FloorError("floor_efficiency.%s=%r is out of range: give a finite number greater than 0 "
                             "and at most 1" % (key, raw))
        merged[key] = number
    return merged


def pcie_generation(speed_gts):
    """(generation, encoding efficiency) of a link speed in GT/s, or None for an unknown speed."""
    for rate, gen, encoding in PCIE_GENERATIONS:
        if abs(speed_gts - rate) < 0.01 * rate:
            return gen, encoding
    return None


def pcie_raw_gbps(speed_gts, width):
    """GB/s one way a link carries after its line encoding: 32 GT/s x16 -> 63.0."""
    found = pcie_generation(speed_gts)
    if found is None:
        return None
    return speed_gts * width * found[1] / 8.0


def nvlink_generation(architecture=None, chip=None, nvml_version=None):
    """(generation, GB/s per link per direction, how it was found) or (None, None, reason)."""
    arch_gen = ARCH_NVLINK.get(architecture or "")
    nvml_gen = NVML_NVLINK_VERSIONS.get(nvml_version) if nvml_version is not None else None
    if arch_gen is not None:
        how = "architecture %s" % architecture
        if nvml_gen is not None and nvml_gen != arch_gen:
            how += " (NVML's NVLink version %d says NVLink %d; the architecture wins)" % (nvml_version, nvml_gen)
        gen = arch_gen
    elif nvml_gen is not None:
        gen, how = nvml_gen, "NVML NVLink version %d" % nvml_version
    else:
        return None, None, ("neither the GPU's architecture (%s) nor NVML's NVLink version (%s) says which "
                            "NVLink generation it has" % (architecture or "unknown", nvml_version))
    if gen == 3 and chip in GA10X_CHIPS:
        return gen, GA10X_LINK_GBPS, how + ", chip %s" % chip
    if gen not in NVLINK_LINK_GBPS:
        return None, None, "NVLink %d is not in the per-link rate table" % gen
    return gen, NVLINK_LINK_GBPS[gen], how


def _fmt(number):
    return ("%.4f" % number).rstrip("0").rstrip(".")


def link_capacity(pair):
    """What the pair's link carries one way: ``{"gbps", "describe", "kind"}`` or ``{"gbps":
    None, "reason"}``.

    ``pair``: ``link`` (nvlink, pcie, unknown), ``nvlink_count``, ``architecture``, ``chip``,
    ``nvml_nvlink_version``, ``pcie`` ([(GT/s, width) of both GPUs' current links]),
    ``path_links`` ([(bdf, GT/s, width)] of the bridges between them), ``relation``. A missing
    or None value is unknown.
    """
    link = pair.get("link") or "unknown"
    if link == "nvlink":
        count = pair.get("nvlink_count")
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            return {"gbps": None, "reason": "the number of NVLink links between the GPUs is unknown (%s)"
                    % (pair.get("nvlink_count_unknown") or count)}
        gen, rate, how = nvlink_generation(pair.get("architecture"), pair.get("chip"), pair.get("nvml_nvlink_version"))
        if gen is None:
            return {"gbps": None, "reason": how}
        return {"gbps": count * rate, "kind": "nvlink", "how": how,
                "describe": "NVLink %d x %d links x %s GB/s" % (gen, count, _fmt(rate))}
    if link == "pcie":
        links = pair.get("pcie") or []
        if len(links) != 2 or any(s is None or w is None for s, w in links):
            return {"gbps": None, "reason": pair.get("pcie_unknown") or "the PCIe link of a GPU is unknown"}
        speed = min(s for s, _w in links)
        width = min(w for _s, w in links)
        bound = None
        for bdf, s, w in pair.get("path_links") or []:
            if s is None or w is None:
                continue
            raw = pcie_raw_gbps(s, w)
            if raw is not None and raw < pcie_raw_gbps(speed, width) and (bound is None or raw < bound[1]):
                bound = (bdf, raw, s, w)
        raw = pcie_raw_gbps(speed, width)
        if raw is None:
            return {"gbps": None, "reason": "%s GT/s is no PCIe link speed this table knows" % _fmt(speed)}
        gen = pcie_generation(speed)[0]
        describe = "PCIe gen%d x%d (%.1f GB/s)" % (gen, width, raw)
        if pair.get("pcie_below_capable"):
            describe = "PCIe gen%d (capable; %s below it now) x%d (%.1f GB/s)" % (
                gen, ", ".join(pair["pcie_below_capable"]), width, raw)
        if bound is not None:
            raw = bound[1]
            describe = "PCIe gen%d x%d bounded by bridge %s at gen%d x%d (%.1f GB/s)" % (
                gen, width, bound[0], pcie_generation(bound[2])[0], bound[3], raw)
        factor = PATH_FACTORS.get(pair.get("relation"))
        gbps = raw * PCIE_PROTOCOL_EFFICIENCY
        describe += " x %s protocol" % _fmt(PCIE_PROTOCOL_EFFICIENCY)
        if factor is not None:
            gbps *= factor
            describe += " x %s %s" % (_fmt(factor), pair.get("relation"))
        return {"gbps": gbps, "kind": "pcie", "describe": describe}
    return {"gbps": None, "reason": "the link type of the pair is unknown (no NVML answer)"}


def expected(pair, efficiency=None):
    """Link-derived floors of one unordered pair.

    Returns ``{"link_gbps", "unidirectional": (floor, source), "bidirectional": (floor,
    source)}``; floor None with the reason as the source where the link is not known well
    enough. The bidirectional figure is both directions summed (2 x the one-way capacity).
    """
    eff = efficiency or DEFAULT_EFFICIENCY
    cap = link_capacity(pair)
    if cap["gbps"] is None:
        reason = "no link-derived floor: %s" % cap["reason"]
        return {"link_gbps": None, "unidirectional": (None, reason), "bidirectional": (None, reason)}
    uni = eff["%s_unidirectional" % cap["kind"]]
    bidi = eff["%s_bidirectional" % cap["kind"]]
    return {
        "link_gbps": round(cap["gbps"], 2),
        "unidirectional": (round(cap["gbps"] * uni, 1), "%s x %.2f" % (cap["describe"], uni)),
        "bidirectional": (round(2 * cap["gbps"] * bidi, 1), "2 x %s x %.2f" % (cap["describe"], bidi)),
    }


def choose(metric, link, thresholds, derived, enabled=True):
    """(floor, source) for one metric of one pair: the override for the pair's link type when
    it is set, else the link-derived floor (when ``enabled``), else (None, why)."""
    override = (thresholds.get(metric) or {}).get(link or "unknown")
    if override is not None:
        return override, "override %s.%s" % (metric, link or "unknown")
    if not enabled:
        return None, "no floor: link-derived floors are off and %s sets none for %s" % (metric, link or "unknown")
    return derived
