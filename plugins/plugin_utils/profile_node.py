# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node is, for choosing its profile: read from the facts gpufleet.tuning.node_facts
gathered (sysfs, procfs and NVML on the node), on the controller.

Why from the facts and not from names in the inventory: a fleet's inventory says what a node was
bought as; the facts say what it is now (a GPU replaced by another model, a board passed into a
VM, the serving stack moved into an LXC guest). Every field says where it came from, so the
audit's report can say why a profile was chosen.

- ``gpus``: each GPU's PCI address, device id (``10de:2330``), NVML name and architecture.
- ``interconnect``: the strongest link the GPUs have: ``nvswitch`` (NVSwitch functions on the
  PCI bus, or NVLinks whose far end NVML says is a switch: a VM given part of an HGX board sees
  no NVSwitch function, but its GPUs' links still end at one), ``nvlink`` (links between GPUs:
  bridges), ``pcie_switch`` (a PCIe switch between a GPU and its root port: more than one bridge
  on its path), else ``pcie``. ``interconnects`` lists every one seen.
- ``kind``: ``lxc_guest`` or ``container`` (the container facts), ``proxmox_host``, ``vm`` (a
  hypervisor named by DMI, clocksource or CPUID), else ``bare_metal``.
- ``cpu_vendor``, ``cpus_online`` (the kernel's list) and ``cpu_count``.
"""

from __future__ import annotations

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import audit_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.fact_envelope import value


def _gpu(entry):
    active = value(entry.get("nvlink_active"))
    links = value(entry.get("nvlink"))
    if active is None and isinstance(links, list):
        # facts of an older node_facts: counted from the links themselves
        active = sum(1 for link in links if isinstance(link, dict) and value(link.get("active")))
    return {
        "bdf": value(entry.get("bdf")),
        "device_id": (value(entry.get("device_id")) or "").lower() or None,
        "name": value(entry.get("name")),
        "architecture": value(entry.get("architecture")),
        "memory_bandwidth_gbps": value(entry.get("memory_bandwidth_gbps")),
        "nvlink_active": active,
        "nvlink_links": value(entry.get("nvlink_links")) if entry.get("nvlink_links") is not None else (
            len(links) if isinstance(links, list) else None),
    }


def _link_ends(entry):
    """The far ends (``switch``, ``gpu``, ...) of a GPU's active NVLinks."""
    links = value(entry.get("nvlink"))
    ends = set()
    for link in links if isinstance(links, list) else []:
        if isinstance(link, dict) and value(link.get("active")):
            ends.add(value(link.get("remote_type")) or "unknown")
    return ends


def _behind_switch(entry):
    """Whether more than one bridge sits between the GPU and its root complex (a PCIe switch)."""
    path = value(entry.get("pci_path"))
    if not isinstance(path, list):
        return False
    functions = [p for p in path if isinstance(p, str) and not p.startswith("pci")]
    # root port, switch upstream port, switch downstream port, ..., the GPU
    return len(functions) > 2


def _interconnects(facts, entries):
    found = []
    switches = value((facts.get("driver") or {}).get("nvswitches"))
    ends = set()
    for entry in entries:
        ends |= _link_ends(entry)
    pairs = (facts.get("topology") or {}).get("pairs") or []
    via = set(value(p.get("nvlink_via")) for p in pairs if isinstance(p, dict))
    if (isinstance(switches, int) and switches > 0) or "switch" in ends or "nvswitch" in via:
        found.append("nvswitch")
    if "gpu" in ends or (via - {None, "nvswitch", "none"}):
        found.append("nvlink")
    if any(_behind_switch(entry) for entry in entries):
        found.append("pcie_switch")
    found.append("pcie")
    return found


def _kind(facts):
    host = facts.get("host") or {}
    container = host.get("container") or {}
    if value(container.get("detected")):
        kind = value(container.get("kind")) or ""
        return ("lxc_guest" if kind == "lxc" else "container"), "container %s (%s)" % (
            kind or "detected", (container.get("detected") or {}).get("source", "container facts"))
    if value(host.get("proxmox")):
        return "proxmox_host", "Proxmox VE (%s)" % (host.get("proxmox") or {}).get("source", "host.proxmox")
    virt = value(host.get("virtualization"))
    if virt not in (None, "none"):
        return "vm", "hypervisor %s (%s)" % (virt, (host.get("virtualization") or {}).get("source", "host.virtualization"))
    if virt is None:
        return "bare_metal", "no hypervisor read (%s)" % ((host.get("virtualization") or {}).get("unknown") or "unknown")
    return "bare_metal", "no hypervisor (%s)" % (host.get("virtualization") or {}).get("source", "host.virtualization")


def describe(facts):
    """The node as the selection reads it (see the module docstring)."""
    facts = audit_rules.plain(facts) if isinstance(facts, dict) else {}
    raw = facts.get("gpus")
    entries = [g for g in raw if isinstance(g, dict)] if isinstance(raw, list) else []
    gpus_unknown = None
    if isinstance(raw, dict) and "unknown" in raw:
        gpus_unknown = "%s: %s" % (raw.get("source", "gpus"), raw["unknown"])
    elif raw is None:
        gpus_unknown = "no gpus section in the facts"
    cpu = facts.get("cpu") or {}
    kind, kind_why = _kind(facts)
    online = value(cpu.get("online"))
    try:
        cpu_count = audit_rules.cpu_count(online) if isinstance(online, str) else None
    except ValueError:
        cpu_count = None
    interconnects = _interconnects(facts, entries)
    return {
        "gpus": [_gpu(entry) for entry in entries],
        "gpu_count": len(entries),
        "gpus_unknown": gpus_unknown,
        "interconnect": interconnects[0],
        "interconnects": interconnects,
        "kind": kind,
        "kind_why": kind_why,
        "cpu_vendor": value(cpu.get("vendor")),
        "cpus_online": online,
        "cpu_count": cpu_count,
    }
