# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why peer-to-peer between two GPUs is missing or slow, from facts read directly.

Everything comes from the node facts (hw/gpu_facts: sysfs, config space, NVML; nothing parsed
from a tool's output) and sysfs link attributes of the bridges on the path. ``pair_inputs``
turns the facts of one pair into plain values (for p2p_floor and for ``diagnose``);
``diagnose`` names the causes that apply, each a dict:

- ``id``: iommu_translated, acs_redirect, link_degraded, across_cpus, no_nvlink,
  driver_p2p_status;
- ``summary``: one line with the measured values;
- ``values``: those values, for programs;
- ``fix``: what to do, naming the module and tag where one applies, else ``manual: ...``.

A fact that could not be read (ACS without root, NVML absent) makes its cause ``unchecked``
with the reason, never present or absent by guess.

The ids follow the audit's rules (roles/audit/files/rules.yml: iommu_translated,
p2p_acs_redirect, p2p_across_cpus, p2p_peer_access) so a report and an audit name a cause
alike. On Blackwell GPUs identity IOMMU domains were found to break the GPU's firmware boot:
there the fix for a translated domain is never iommu=pt but clearing ACS redirect.
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config

TRANSLATING = ("DMA", "DMA-FQ")
# ACS Control bits that send peer requests (or completions) up to the root complex, or block them
# (egress control). Upstream forwarding alone redirects nothing: it forwards what these send up
# (the audit rule p2p_acs_redirect counts request and completion redirect).
REDIRECT_BITS = ("request_redirect", "completion_redirect", "egress_control")
PCIE_ACS_MODULE = "gpufleet.tuning.pcie_acs"
CMDLINE_MODULE = "gpufleet.tuning.kernel_cmdline"
DRIVER_OPTIONS_MODULE = "gpufleet.tuning.nvidia_driver_options"


def _value(envelope):
    return facts.value(envelope) if isinstance(envelope, dict) else None


def _why(envelope):
    if isinstance(envelope, dict):
        return envelope.get("unknown") or "unknown"
    return "not read"


def index_facts(node):
    """``({bdf: gpu facts}, {(bdf a, bdf b): pair facts}, driver facts)`` of gpu_facts.gather's
    result (pairs under both orders)."""
    gpus, pairs = {}, {}
    listed = node.get("gpus") if isinstance(node, dict) else None
    if isinstance(listed, list):
        for gpu in listed:
            bdf = _value(gpu.get("bdf"))
            if bdf:
                gpus[bdf] = gpu
    by_index = dict((_value(g.get("index")), bdf) for bdf, g in gpus.items())
    topo = (node.get("topology") or {}).get("pairs") if isinstance(node, dict) else None
    if isinstance(topo, list):
        for entry in topo:
            a, b = by_index.get(_value(entry.get("a"))), by_index.get(_value(entry.get("b")))
            if a and b:
                pairs[(a, b)] = pairs[(b, a)] = entry
    driver = node.get("driver") if isinstance(node, dict) else None
    return gpus, pairs, driver or {}


def _bridge_link(sys_root, bdf):
    """(GT/s, width) of a bridge's current link from sysfs, None where unreadable."""
    folder = pci_config.device_dir(sys_root, bdf)
    speed = _value(facts.read(os.path.join(folder, "current_link_speed"), gpu_facts.parse_speed))
    width = _value(facts.read(os.path.join(folder, "current_link_width"), int))
    return speed, width


def pair_inputs(node, bdf_a, bdf_b, sys_root=None, nvlink_versions=None):
    """Plain values of one pair for p2p_floor.link_capacity and ``diagnose``.

    ``node``: gpu_facts.gather's result (None when it could not be read); ``nvlink_versions``:
    {bdf: NVML's nvmlNvlinkVersion_t of the GPU's first active link}. Missing facts are None,
    with the reason under ``<key>_unknown``.
    """
    gpus, pairs, driver = index_facts(node or {})
    ga, gb, entry = gpus.get(bdf_a), gpus.get(bdf_b), pairs.get((bdf_a, bdf_b))
    out = {"bdfs": [bdf_a, bdf_b], "gpus": [ga, gb], "pair": entry, "driver": driver}
    if ga is None or gb is None or entry is None:
        missing = bdf_a if ga is None else bdf_b
        if ga is None or gb is None:
            why = (node or {}).get("unknown") or "not read"
            out["facts_unknown"] = "the node facts have no GPU %s (%s)" % (missing, why)
        else:
            out["facts_unknown"] = "the node facts have no pair %s/%s" % (bdf_a, bdf_b)
        return out
    out["link"] = _value(entry.get("link"))
    count = _value(entry.get("nvlink_count"))
    out["nvlink_count"] = count
    if count is None:
        out["nvlink_count_unknown"] = _why(entry.get("nvlink_count"))
    out["nvlink_via"] = _value(entry.get("nvlink_via"))
    out["relation"] = _value(entry.get("relation"))
    out["architecture"] = _value(ga.get("architecture"))
    out["chip"] = _value(ga.get("chip"))
    versions = nvlink_versions or {}
    out["nvml_nvlink_version"] = versions.get(bdf_a) if versions.get(bdf_a) is not None else versions.get(bdf_b)
    links, idle = [], []
    for gpu in (ga, gb):
        pcie = gpu.get("pcie") or {}
        speed, width = _value(pcie.get("link_speed_gts")), _value(pcie.get("link_width"))
        capable = _value(pcie.get("max_link_speed_gts"))
        if speed is not None and capable is not None and speed < capable:
            # GPUs train their link down when idle, and the facts are read after the copies: the
            # floor takes the speed the link is capable of (a link that stays slow under load
            # falls short and is diagnosed link_degraded). Width is taken as negotiated.
            idle.append(_value(gpu.get("bdf")))
            speed = capable
        links.append((speed, width))
        if speed is None or width is None:
            out["pcie_unknown"] = "the PCIe link of %s is unknown: %s" % (
                _value(gpu.get("bdf")), _why(pcie.get("link_speed_gts") if speed is None else pcie.get("link_width")))
    out["pcie"] = links
    out["pcie_below_capable"] = idle
    bridges = entry.get("bridges")
    path = []
    if isinstance(bridges, list) and sys_root:
        for bridge in bridges:
            bdf = _value(bridge.get("bdf"))
            if bdf:
                speed, width = _bridge_link(sys_root, bdf)
                path.append((bdf, speed, width))
    out["path_links"] = path
    return out


def _cause(cid, summary, values, fix):
    return {"id": cid, "summary": summary, "values": values, "fix": fix}


def _iommu(inputs, causes, unchecked):
    found, unknown = {}, []
    for gpu in inputs["gpus"]:
        bdf = _value(gpu.get("bdf"))
        kind = gpu.get("iommu_group_type")
        if _value(kind) is None:
            if gpu_facts.NO_IOMMU_GROUP not in _why(kind):
                unknown.append("%s: %s" % (bdf, _why(kind)))
            continue
        if _value(kind) in TRANSLATING:
            found[bdf] = _value(kind)
    if found:
        blackwell = any(_value(g.get("architecture")) == "blackwell" for g in inputs["gpus"])
        if blackwell:
            fix = ("manual: keep the translated domain on Blackwell GPUs (identity domains break their "
                   "firmware boot); clear ACS redirect on the path instead (%s)" % PCIE_ACS_MODULE)
        else:
            fix = "%s: iommu=pt on the kernel command line (--tags reboot_required), then reboot" % CMDLINE_MODULE
        causes.append(_cause("iommu_translated", "IOMMU domain %s: peer DMA goes through IOMMU translation" % ", ".join(
            "%s %s" % item for item in sorted(found.items())), {"iommu_group_type": found}, fix))
    elif unknown:
        unchecked.append({"id": "iommu_translated", "reason": "; ".join(unknown)})


def _acs(inputs, causes, unchecked):
    bridges = inputs["pair"].get("bridges")
    if not isinstance(bridges, list):
        unchecked.append({"id": "acs_redirect", "reason": _why(bridges)})
        return
    found, unknown = [], []
    for bridge in bridges:
        bdf = _value(bridge.get("bdf"))
        acs = bridge.get("acs")
        if isinstance(acs, dict) and "value" in acs and "source" in acs:  # an envelope: no ACS, or unknown
            if "unknown" in acs:
                unknown.append("%s: %s" % (bdf, acs["unknown"]))
            continue
        if not isinstance(acs, dict):
            continue
        bits = [name for name in REDIRECT_BITS if _value(acs.get(name))]
        if bits:
            found.append({"bdf": bdf, "bits": bits, "ctrl": _value(acs.get("ctrl"))})
    if found:
        causes.append(_cause(
            "acs_redirect", "ACS %s set on %s between the GPUs: peer requests go up to the root complex" % (
                "/".join(sorted(set(b for f in found for b in f["bits"]))), ", ".join(f["bdf"] for f in found)),
            {"bridges": found},
            "%s: clear ACS redirect on those bridges (or pci=disable_acs_redir= through %s, --tags "
            "reboot_required); only where the GPUs are not passed to separate VMs" % (PCIE_ACS_MODULE, CMDLINE_MODULE)))
    elif unknown:
        unchecked.append({"id": "acs_redirect", "reason": "; ".join(unknown)})


def _links(inputs, causes, unchecked):
    found, unknown = {}, []
    for gpu in inputs["gpus"]:
        bdf = _value(gpu.get("bdf"))
        pcie = gpu.get("pcie") or {}
        keys = ("link_speed_gts", "max_link_speed_gts", "link_width", "max_link_width")
        vals = dict((k, _value(pcie.get(k))) for k in keys)
        if None in vals.values():
            unknown.append("%s: %s" % (bdf, _why(pcie.get("degraded"))))
            continue
        if vals["link_speed_gts"] < vals["max_link_speed_gts"] or vals["link_width"] < vals["max_link_width"]:
            found[bdf] = vals
    if found:
        links = ", ".join(
            "%s %s GT/s x%s of %s GT/s x%s" % (bdf, v["link_speed_gts"], v["link_width"], v["max_link_speed_gts"],
                                               v["max_link_width"])
            for bdf, v in sorted(found.items()))
        causes.append(_cause(
            "link_degraded", "PCIe link below capability: %s" % links, {"gpus": found},
            "manual: reseat the card or its riser, check the slot's speed setting in the BIOS and the "
            "cable or retimer; an idle GPU may train down to save power, so read it again under load"))
    elif unknown:
        unchecked.append({"id": "link_degraded", "reason": "; ".join(unknown)})


def _sockets(inputs, causes, unchecked):
    relation = inputs["pair"].get("relation")
    numa = inputs["pair"].get("numa_nodes")
    if _value(relation) == "across_cpus":
        causes.append(_cause("across_cpus", "the GPUs sit under different CPU sockets (NUMA nodes %s): peer traffic "
                             "crosses the inter-socket link" % (_value(numa),),
                             {"relation": "across_cpus", "numa_nodes": _value(numa)},
                             "manual: keep peer-to-peer groups within one socket (CUDA_VISIBLE_DEVICES per "
                             "server), or move the cards so each group shares a socket or a PCIe switch"))
    elif _value(relation) is None:
        unchecked.append({"id": "across_cpus", "reason": _why(relation)})


def _nvlink(inputs, causes, unchecked):
    count = inputs["pair"].get("nvlink_count")
    if _value(count) is None:
        unchecked.append({"id": "no_nvlink", "reason": _why(count)})
        return
    if _value(count) > 0:
        return
    totals = {}
    for gpu in inputs["gpus"]:
        links = gpu.get("nvlink")
        if isinstance(links, list):
            totals[_value(gpu.get("bdf"))] = {"links": len(links),
                                              "active": len([x for x in links if _value(x.get("active"))])}
    driver = inputs.get("driver") or {}
    values = {"nvlink_count": 0, "gpus": totals, "nvswitches": _value(driver.get("nvswitches")),
              "fabricmanager_active": _value(driver.get("fabricmanager_active"))}
    if totals and all(t["links"] == 0 for t in totals.values()):
        fix = "none: these GPUs have no NVLink; the pair talks over PCIe by design"
    elif values["nvswitches"] and values["fabricmanager_active"] is False:
        fix = ("manual: this board has NVSwitches and nv-fabricmanager is not running: start and enable "
               "nvidia-fabricmanager (of the driver's version), then check again")
    else:
        fix = ("manual: the GPUs have NVLink ports but no active link between them: check the NVLink bridge "
               "(seated, matching slots) or the NVSwitch fabric (nvidia-fabricmanager), then check again")
    causes.append(_cause("no_nvlink", "no NVLink between the GPUs (%s): peer traffic goes over PCIe" % ", ".join(
        "%s %d of %d links active" % (bdf, t["active"], t["links"]) for bdf, t in sorted(totals.items()))
        if totals else "no NVLink between the GPUs: peer traffic goes over PCIe", values, fix))


def _driver(inputs, causes, unchecked):
    pair = inputs["pair"]
    answers = dict((key, pair.get(key)) for key in ("peer_access_read", "peer_access_write"))
    if all(_value(v) is None for v in answers.values()):
        unchecked.append({"id": "driver_p2p_status", "reason": _why(answers["peer_access_read"])})
        return
    bad = dict((k[len("peer_access_"):], _value(v)) for k, v in answers.items() if _value(v) not in (None, "ok"))
    if not bad:
        return
    statuses = set(bad.values())
    if "disabled_by_regkey" in statuses:
        fix = ("%s: remove the NVreg option that disables peer-to-peer (the driver's registry key), then reload "
               "the driver" % DRIVER_OPTIONS_MODULE)
    else:
        fix = ("manual: the driver refuses peer-to-peer on this path (%s); the causes above say why where one "
               "applies, else the platform does not support it between these slots" % ", ".join(sorted(statuses)))
    causes.append(_cause("driver_p2p_status", "the driver's P2P answer (NVML): %s" % ", ".join(
        "%s %s" % item for item in sorted(bad.items())), {"peer_access": bad}, fix))


CHECKS = (_iommu, _acs, _links, _sockets, _nvlink, _driver)


def diagnose(inputs):
    """``{"causes": [...], "unchecked": [{"id", "reason"}]}`` of one pair (pair_inputs output)."""
    if inputs.get("facts_unknown"):
        return {"causes": [], "unchecked": [{"id": "all", "reason": inputs["facts_unknown"]}]}
    causes, unchecked = [], []
    for check in CHECKS:
        check(inputs, causes, unchecked)
    return {"causes": causes, "unchecked": unchecked}


def describe(causes, limit=None):
    """``iommu_translated (IOMMU domain ...; fix: ...)`` joined with '; '."""
    shown = causes if limit is None else causes[:limit]
    return "; ".join("%s (%s; fix: %s)" % (c["id"], c["summary"], c["fix"]) for c in shown)
