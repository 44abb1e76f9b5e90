# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU sections of the node facts: ``gpus``, ``topology`` and ``driver`` (docs/facts.md).

Where each fact comes from, in order of trust:

- sysfs first, for everything the kernel knows without the NVIDIA driver: the GPUs
  themselves (every NVIDIA function of class 0x0300 or 0x0302, hw/nvidia_gpus), their device
  ID and architecture, NUMA node, link speed and width, IOMMU group, and the PCI tree they sit
  in. GPUs are listed by PCI bus id (domain, bus, device, function as numbers), the order NVML
  uses and CUDA uses with CUDA_DEVICE_ORDER=PCI_BUS_ID: ``index`` is that position.
- config space (hw/pci_config for the standard list, hw/pcie_ext for the extended one):
  Max Read Request Size, Max Payload Size and relaxed ordering from Device Control, and the
  ACS capability of each bridge between two GPUs. Without root only 64 bytes are readable:
  those facts are unknown with "needs root". Each function's config space is opened once
  and only the parts used are read (hw/pcie_ext.ConfigSpace).
- NVML (p2p/nvml.py, ctypes), matched to the sysfs GPUs by PCI bus id: name, persistence
  and ECC modes, error counters, retired pages, remapped rows, clock event reasons, power
  limits, temperature, BAR1, NVLink links, and for each pair the driver's P2P answers. Every
  call that fails makes that one fact unknown with NVML's error text; a missing library makes
  all of them unknown with the reason.
- /proc: the driver's version and flavour, daemons (a process of that name in
  /proc/*/comm), modules and the peer-memory symbol (hw/kernel_modules).

How ``relation`` is decided, from the device's real path under /sys/devices (``pci0000:00``
is the root bus of one host bridge, then one directory per PCI function on the way down):

- the two GPUs under different root buses: ``across_cpus`` when their NUMA nodes differ
  (both known, >= 0), ``across_host_bridges`` when they are equal (or the machine has at
  most one NUMA node, where -1 means "no affinity" rather than "not known"), else unknown;
- the same root bus: the longest run of bridges the two paths share. None shared (each GPU
  under its own root port, or, in a VM, both on the root bus itself): ``same_host_bridge``.
  A shared bridge that is a switch port (or whose port type cannot be read without root:
  a bridge two GPU paths meet under, below the root bus, is a switch): ``same_switch``. A
  shared root port (two functions of one device right below it) turns the traffic inside the
  root complex: ``same_host_bridge``. NVML's own level is reported beside it
  (``nvml_topology``) for comparison.

``bridges`` are the bridges below that common point on both sides (for a switch: its
downstream ports and anything deeper; for a host bridge: the root ports and what is below
them; across host bridges: both whole paths); their ACS Control decides whether peer requests
turn around in the switch or are redirected up to the root complex.

``nvlink_count`` and ``link``: direct links are those whose far end (NVML's remote PCI info)
is the other GPU. On HGX boards every link ends at an NVSwitch instead; there the count is the
smaller of the two GPUs' switch links when the driver says P2P over NVLink works between them,
which is the NV# nvidia-smi topo -m prints (``nvlink_via`` says direct or nvswitch). In a VM
NVML gives the switches' address as FFFFFFFF:FF:FF.0 (they stay with the host): those
``remote_bdf`` facts are unknown, the links still count.

Beyond docs/facts.md (keys added, none renamed): gpus[].chip, pci_path, iommu_group,
retired_pages, remapped_rows_correctable/uncorrectable, clock_event_idle (``gpu_idle`` is left
out of clock_event_reasons: an idle GPU lowering its clocks is no limit), power_min_limit_w,
nvlink[].remote_type; pairs[].nvlink_via, peer_access_read/write (peer_access is the first
that is not ok), nvml_topology, bridges[].port_type; driver.nvml_driver_version. NVML's
enable states (persistence, ECC, pending flags) are booleans.
"""

from __future__ import annotations

import copy
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_log
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_modules
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_gpus
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_aer
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pcie_ext
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod

DERIVED = "derived"
# Daemons as /proc/<pid>/comm shows them: the kernel keeps 15 characters of the name
# (TASK_COMM_LEN 16 with the NUL), so nv-fabricmanager is "nv-fabricmanage".
COMM_LEN = 15
PERSISTENCED = "nvidia-persistenced"
FABRICMANAGER = "nv-fabricmanager"
# The symbol nvidia_peermem needs from MLNX_OFED/DOCA's ib_core (as nvidia_peermem.PEER_SYMBOL).
PEER_SYMBOL = "ib_register_peer_memory_client"
DEVCTL_RELAXED_ORDERING = 0x0010  # Device Control bit 4 (pci_regs.h PCI_EXP_DEVCTL_RELAX_EN)
NO_IOMMU_GROUP = "no IOMMU group: the IOMMU is off or the device is not translated"
_NODE_RE = re.compile(r"^node[0-9]+\Z")


class Paths:
    """Where the reader looks; everything hangs off ``root`` so tests use a temp tree."""

    def __init__(self, root="/"):
        self.root = root
        self.sys = os.path.join(root, "sys")
        self.proc = os.path.join(root, "proc")
        self.etc = os.path.join(root, "etc")
        self.run = os.path.join(root, "run")


def gather(paths, nvml=None):
    """``{"gpus", "topology", "driver", "health"}`` as docs/facts.md describes them.

    ``nvml``: an nvml.Nvml (or a stand-in); None loads libnvidia-ml.so.1 here and shuts it
    down afterwards. Nothing here raises for a fact that cannot be read.
    """
    own = nvml is None
    if own:
        # NVML only where sysfs shows an NVIDIA GPU: on a machine without one, loading the
        # library (a dlopen search of the loader's paths) only fails, and costs about 40 ms of
        # every call that reads the facts (the audit reads them every pass).
        reader = _Reader(paths, nvml_mod.Unavailable("no NVIDIA GPU in sysfs: NVML is not loaded"))
        if reader.gpu_bdfs:
            nvml = nvml_mod.Nvml()
            reader = _Reader(paths, nvml)
        else:
            own = False
    else:
        reader = _Reader(paths, nvml)
    try:
        gpus = reader.gpus()
        return {"gpus": gpus, "topology": reader.topology(), "driver": reader.driver(), "health": reader.health()}
    finally:
        if own:
            nvml.shutdown()


def memory_bandwidth(width, clock):
    """Peak memory bandwidth in GB/s from the bus width and the memory clock NVML reports: two
    transfers per clock (NVML's memory clock is half the data rate for HBM and GDDR alike:
    H100 SXM 5120 bits x 2619 MHz -> 3352 GB/s, H200 6144 x 3201 -> 4917, RTX 4090 384 x 10501
    -> 1008, each its data-sheet figure). The single-stream decode ceiling divides it."""
    if facts.value(width) is None or facts.value(clock) is None:
        why = width.get("unknown") or clock.get("unknown")
        return facts.unknown(DERIVED, "the memory bus width or clock is unknown: %s" % why)
    return facts.fact(round(width["value"] / 8.0 * clock["value"] * 2e6 / 1e9, 1), DERIVED)


def bus_order(bdf):
    """Sort key of a BDF by number (a 5-digit VMD domain sorts after domain 0000)."""
    domain, bus, rest = bdf.split(":")
    device, function = rest.split(".")
    return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)


def parse_speed(text):
    """``32.0 GT/s PCIe`` -> 32.0 (GT/s); ValueError for "Unknown" (no link)."""
    match = re.match(r"^\s*([0-9.]+)\s*GT/s", text)
    if not match:
        raise ValueError("not a link speed in GT/s")
    return float(match.group(1))


def _number(value):
    """An int when the float is whole (700.0 W -> 700)."""
    return int(value) if float(value).is_integer() else value


def _milliwatts(value):
    return _number(value / 1000.0)


def _nvml_status(handle, failure, error):
    """``ok`` when NVML gave the GPU a handle; else NVML's error as a word (``gpu_is_lost``,
    ``not_found``); unknown when NVML itself is not there."""
    source = "nvml:nvmlDeviceGetHandleByPciBusId_v2"
    if handle is not None:
        return facts.fact("ok", source)
    if error is None or error.code is None:
        return facts.unknown(source, failure)
    name = nvml_mod.ERROR_NAMES.get(error.code, "error_%s" % error.code)
    return facts.fact(name.replace("NVML_ERROR_", "").lower() if name.startswith("NVML_ERROR_") else name.lower(),
                      "nvml:" + (error.function or source[5:]))


def nvlink_counts(links):
    """nvlink_links (the links NVML knows on the GPU), nvlink_active, and nvlink_errors (replay,
    recovery and CRC counters summed over the links; null on a GPU without NVLink, unknown when a
    link's counters cannot be read)."""
    if not isinstance(links, list):
        reason = links.get("unknown") if isinstance(links, dict) else "the NVLink links are unknown"
        return {"nvlink_links": facts.unknown(DERIVED, reason), "nvlink_active": facts.unknown(DERIVED, reason),
                "nvlink_errors": facts.unknown(DERIVED, reason)}
    found = {"nvlink_links": facts.fact(len(links), DERIVED),
             "nvlink_active": facts.fact(sum(1 for link in links if link["active"]["value"]), DERIVED)}
    if not links:
        found["nvlink_errors"] = facts.fact(None, DERIVED)
        return found
    totals = {}
    for key, name in (("replay_errors", "replay"), ("recovery_errors", "recovery"), ("crc_errors", "crc")):
        missing = [link[key] for link in links if "unknown" in link[key]]
        if missing:
            found["nvlink_errors"] = facts.unknown(DERIVED, "the %s counter of a link is unknown: %s"
                                                   % (name, missing[0]["unknown"]))
            return found
        totals[name] = sum(link[key]["value"] for link in links)
    found["nvlink_errors"] = facts.fact(totals, DERIVED)
    return found


class _Device:
    """One PCI function, read once: sysfs attributes, config space, place in the tree."""

    def __init__(self, sys_root, bdf):
        self.bdf = bdf
        self.sys = sys_root
        self.sys_root = sys_root
        self.dir = pci_config.device_dir(sys_root, bdf)
        self.config_path = pci_config.config_path(sys_root, bdf)
        self._attrs = {}
        self._config = None
        self._express = None

    def attr(self, name, parse=None):
        """The fact of one sysfs attribute, read once (each name is always parsed one way)."""
        if name not in self._attrs:
            self._attrs[name] = facts.read(os.path.join(self.dir, name), parse)
        return self._attrs[name]

    def config(self):
        """(ConfigSpace, None) or (None, reason)."""
        if self._config is None:
            try:
                self._config = (pcie_ext.ConfigSpace(path=self.config_path), None)
            except (OSError, IOError) as exc:
                self._config = (None, "%s: %s" % (self.config_path, exc.strerror or exc))
        return self._config

    def express(self):
        """(head bytes, Express capability offset) or (None, reason)."""
        if self._express is None:
            space, reason = self.config()
            if space is None:
                self._express = (None, reason)
            else:
                try:
                    self._express = (space.head, pci_config.express_capability(space.head))
                except pci_config.PciError as exc:
                    self._express = (None, str(exc))
        return self._express

    def chain(self):
        """``["pci0000:00", "0000:00:01.0", ..., bdf]`` from the real path, or None."""
        return pci_config.device_chain(self.sys_root, self.bdf)


class _Reader:

    def __init__(self, paths, nvml):
        self.paths = paths
        self.nvml = nvml
        self.devices_dir = pci_config.devices_dir(paths.sys)
        self._devices = {}
        self._bridges = {}
        self.gpu_bdfs = None
        self.nvswitches = None
        self.scan_error = None
        self._gpu_info = []
        self._entries = []
        self._nodes = None
        self._scan()

    def device(self, bdf):
        if bdf not in self._devices:
            self._devices[bdf] = _Device(self.paths.sys, bdf)
        return self._devices[bdf]

    # ---------------------------------------------------------------- the PCI scan

    def _scan(self):
        """GPUs and NVSwitches: the vendor file of every function, the class of NVIDIA ones."""
        try:
            names = pci_config.list_devices(self.paths.sys)
        except OSError as exc:
            self.scan_error = "%s: %s" % (self.devices_dir, exc.strerror or exc)
            return
        gpus, switches = [], []
        for bdf in names:
            vendor = pci_config.read_attr(self.paths.sys, bdf, "vendor")
            if (vendor or "").lower() != nvidia_gpus.NVIDIA_VENDOR:
                continue
            klass = (pci_config.read_attr(self.paths.sys, bdf, "class") or "").lower()[:6]
            if klass in nvidia_gpus.GPU_CLASSES:
                gpus.append(bdf)
            elif klass == nvidia_gpus.NVSWITCH_CLASS:
                switches.append(bdf)
        self.gpu_bdfs = sorted(gpus, key=bus_order)
        self.nvswitches = switches

    # ---------------------------------------------------------------- gpus

    def gpus(self):
        if self.gpu_bdfs is None:
            return facts.unknown(self.devices_dir, self.scan_error)
        result = []
        for index, bdf in enumerate(self.gpu_bdfs):
            entry, info = self._gpu(index, bdf)
            result.append(entry)
            self._gpu_info.append(info)
        self._entries = result
        return result

    def _gpu(self, index, bdf):
        dev = self.device(bdf)
        device_id = dev.attr("device", lambda text: "10de:%04x" % int(text, 16))
        if facts.value(device_id) is None:
            reason = "the device id is unknown: %s" % device_id.get("unknown")
            architecture, chip = facts.unknown(DERIVED, reason), facts.unknown(DERIVED, reason)
        else:
            arch, chip_name = nvidia_gpus.classify(int(device_id["value"].split(":")[1], 16))
            if chip_name is None:
                reason = ("%s is in none of the device ID blocks hw/nvidia_gpus knows (a newer GPU): never guessed"
                          % device_id["value"])
                architecture, chip = facts.unknown(DERIVED, reason), facts.unknown(DERIVED, reason)
            else:
                architecture, chip = facts.fact(arch, DERIVED), facts.fact(chip_name, DERIVED)
        chain = dev.chain()
        entry = {
            "index": facts.fact(index, DERIVED),
            "bdf": facts.fact(bdf, dev.dir),
            "name": None,
            "device_id": device_id,
            "architecture": architecture,
            "chip": chip,
            "numa_node": dev.attr("numa_node", int),
            "pci_path": (facts.fact(chain, dev.dir) if chain else facts.unknown(
                dev.dir, "%s does not resolve to a path under /sys/devices/pci*" % dev.dir)),
            "pcie": self._pcie(dev),
        }
        entry.update(self._iommu(dev))
        handle, nvml_facts = self._nvml_gpu(bdf)
        entry["pcie"]["replay_count"] = nvml_facts.pop("pcie_replay_count")
        entry.update(nvml_facts)
        info = {"bdf": bdf, "dev": dev, "chain": chain, "numa": entry["numa_node"], "handle": handle,
                "nvlink": entry["nvlink"]}
        return entry, info

    def _pcie(self, dev):
        speed = dev.attr("current_link_speed", parse_speed)
        width = dev.attr("current_link_width", int)
        max_speed = dev.attr("max_link_speed", parse_speed)
        max_width = dev.attr("max_link_width", int)
        inputs = (speed, width, max_speed, max_width)
        missing = [item for item in inputs if facts.value(item) is None]
        if missing:
            degraded = facts.unknown(DERIVED, "needs the current and maximum link speed and width: %s"
                                     % missing[0].get("unknown", "unknown"))
        else:
            degraded = facts.fact(speed["value"] < max_speed["value"] or width["value"] < max_width["value"], DERIVED)
        pcie = {"link_speed_gts": speed, "link_width": width, "max_link_speed_gts": max_speed,
                "max_link_width": max_width, "degraded": degraded}
        pcie.update(self._aer(dev))
        head, cap = dev.express()
        if head is None:
            for key in ("mrrs_bytes", "mps_bytes", "relaxed_ordering"):
                pcie[key] = facts.unknown(dev.config_path, cap)
            return pcie
        devctl = pci_config.u16(head, cap + pci_config.EXP_DEVCTL)
        for key, value, code in (
                ("mrrs_bytes", pci_config.mrrs_of(devctl), (devctl >> 12) & 7),
                ("mps_bytes", pci_config.mps_of(devctl), (devctl >> 5) & 7)):
            pcie[key] = (facts.fact(value, dev.config_path) if value is not None else facts.unknown(
                dev.config_path, "Device Control 0x%04x holds the reserved encoding %d" % (devctl, code)))
        pcie["relaxed_ordering"] = facts.fact(bool(devctl & DEVCTL_RELAXED_ORDERING), dev.config_path)
        return pcie

    def _aer(self, dev):
        """aer_correctable, aer_nonfatal, aer_fatal (totals since boot), aer_counts (by error
        name, non-zero only) of the GPU, and path_aer: the same totals of every bridge above it
        that reports them (hw/pci_aer; path_aer_unreported names the others)."""
        counters = pci_aer.device_counters(self.paths.sys, dev.bdf)
        found = {"aer_correctable": counters["correctable"], "aer_nonfatal": counters["nonfatal"],
                 "aer_fatal": counters["fatal"], "aer_counts": counters["counts"]}
        chain = dev.chain()
        if not chain:
            reason = "the PCI path of %s is unknown (its sysfs entry does not resolve under /sys/devices/pci*)" % dev.bdf
            found["path_aer"] = facts.unknown(DERIVED, reason)
            found["path_aer_unreported"] = facts.unknown(DERIVED, reason)
            return found
        path, unreported = pci_aer.path_counters(self.paths.sys, chain[1:-1])
        found["path_aer"] = path
        found["path_aer_unreported"] = facts.fact(unreported, DERIVED)
        return found

    def _iommu(self, dev):
        link = os.path.join(dev.dir, "iommu_group")
        try:
            group = os.path.basename(os.readlink(link))
        except OSError:
            return {"iommu_group": facts.unknown(link, NO_IOMMU_GROUP),
                    "iommu_group_type": facts.unknown(link, NO_IOMMU_GROUP)}
        return {"iommu_group": facts.fact(group, link), "iommu_group_type": dev.attr(os.path.join("iommu_group", "type"))}

    # ---------------------------------------------------------------- NVML, one GPU

    def _nvml_gpu(self, bdf):
        """(handle or None, {fact name: envelope}) for every NVML fact of one GPU."""
        error = None
        try:
            handle, failure = self.nvml.device(bdf), None
        except nvml_mod.NvmlError as exc:
            handle, error = None, exc
            failure = str(exc) if exc.code is None else "NVML has no usable handle for %s: %s" % (bdf, exc)
        found = {"nvml_status": _nvml_status(handle, failure, error)}

        def query(names, function, call, convert):
            """Call once; ``convert(result)`` gives one value per name (a tuple for several)."""
            source = "nvml:" + function
            if failure is not None:
                for name in names:
                    found[name] = facts.unknown(source, failure)
                return
            try:
                values = convert(call(handle))
            except nvml_mod.NvmlError as exc:
                for name in names:
                    found[name] = facts.unknown("nvml:" + (exc.function or function), str(exc))
                return
            if len(names) == 1:
                values = (values,)
            for name, value in zip(names, values):
                found[name] = facts.fact(value, source)

        nv = self.nvml
        query(["name"], "nvmlDeviceGetName", nv.name, lambda v: v)
        query(["persistence_mode"], "nvmlDeviceGetPersistenceMode", nv.persistence_mode, lambda v: v)
        query(["ecc_mode", "ecc_pending_mode"], "nvmlDeviceGetEccMode", nv.ecc_mode, tuple)
        query(["ecc_errors_corrected"], "nvmlDeviceGetTotalEccErrors",
              lambda h: nv.ecc_errors(h, nvml_mod.NVML_MEMORY_ERROR_TYPE_CORRECTED), lambda v: v)
        query(["ecc_errors_uncorrected"], "nvmlDeviceGetTotalEccErrors",
              lambda h: nv.ecc_errors(h, nvml_mod.NVML_MEMORY_ERROR_TYPE_UNCORRECTED), lambda v: v)
        query(["retired_pages"], "nvmlDeviceGetRetiredPages_v2", nv.retired_pages, lambda v: v)
        query(["retired_pages_pending"], "nvmlDeviceGetRetiredPagesPendingStatus", nv.retired_pages_pending,
              lambda v: v)
        query(["remapped_rows_pending", "remapped_rows_failure", "remapped_rows_correctable",
               "remapped_rows_uncorrectable"], "nvmlDeviceGetRemappedRows", nv.remapped_rows,
              lambda v: (v["pending"], v["failure"], v["correctable"], v["uncorrectable"]))
        self._clock_reasons(found, handle, failure)
        query(["power_limit_w"], "nvmlDeviceGetEnforcedPowerLimit", nv.enforced_power_limit_mw, _milliwatts)
        query(["power_default_limit_w"], "nvmlDeviceGetPowerManagementDefaultLimit", nv.power_default_limit_mw,
              _milliwatts)
        query(["power_min_limit_w", "power_max_limit_w"], "nvmlDeviceGetPowerManagementLimitConstraints",
              nv.power_limit_constraints_mw, lambda v: (_milliwatts(v[0]), _milliwatts(v[1])))
        query(["temperature_c"], "nvmlDeviceGetTemperature", nv.temperature_c, lambda v: v)
        query(["bar1_mib"], "nvmlDeviceGetBAR1MemoryInfo", nv.bar1_total_bytes,
              lambda v: _number(v / 1048576.0))
        query(["memory_bus_width_bits"], "nvmlDeviceGetMemoryBusWidth", nv.memory_bus_width_bits, lambda v: v)
        query(["memory_max_clock_mhz"], "nvmlDeviceGetMaxClockInfo", nv.memory_max_clock_mhz, lambda v: v)
        found["memory_bandwidth_gbps"] = memory_bandwidth(found["memory_bus_width_bits"], found["memory_max_clock_mhz"])
        query(["recovery_action"], "nvmlDeviceGetFieldValues", nv.recovery_action, lambda v: v)
        query(["pcie_replay_count"], "nvmlDeviceGetPcieReplayCounter", nv.pcie_replay_counter, lambda v: v)
        query(["sram_uncorrected_volatile", "sram_uncorrected_aggregate", "sram_threshold_exceeded"],
              "nvmlDeviceGetSramEccErrorStatus", nv.sram_ecc_status,
              lambda v: (v["uncorrected_volatile"], v["uncorrected_aggregate"], v["threshold_exceeded"]))
        query(["fabric_state", "fabric_status"], "nvmlDeviceGetGpuFabricInfo", nv.fabric_info,
              lambda v: (v["state"], v["status"]))
        found["nvlink"] = self._nvlinks(handle, failure)
        found.update(nvlink_counts(found["nvlink"]))
        return handle, found

    def _clock_reasons(self, found, handle, failure):
        """``clock_event_reasons``: the active reasons by name, without ``gpu_idle`` (an idle
        GPU lowering its clocks is not a limit), which ``clock_event_idle`` reports."""
        source = "nvml:nvmlDeviceGetCurrentClocksEventReasons"
        if failure is None:
            try:
                mask, function = self.nvml.clock_event_reasons(handle)
            except nvml_mod.NvmlError as exc:
                failure, source = str(exc), "nvml:" + (exc.function or source[5:])
        if failure is not None:
            found["clock_event_reasons"] = facts.unknown(source, failure)
            found["clock_event_idle"] = facts.unknown(source, failure)
            return
        source = "nvml:" + function
        names = nvml_mod.clock_event_names(mask)
        found["clock_event_reasons"] = facts.fact([n for n in names if n != "gpu_idle"], source)
        found["clock_event_idle"] = facts.fact("gpu_idle" in names, source)

    def _nvlinks(self, handle, failure):
        state = "nvml:nvmlDeviceGetNvLinkState"
        sources = {"remote_type": "nvml:nvmlDeviceGetNvLinkRemoteDeviceType",
                   "remote_bdf": "nvml:nvmlDeviceGetNvLinkRemotePciInfo_v2"}
        if failure is not None:
            return facts.unknown(state, failure)
        try:
            links = self.nvml.nvlinks(handle)
        except nvml_mod.NvmlError as exc:
            return facts.unknown(state, str(exc))
        result = []
        counter_source = "nvml:nvmlDeviceGetNvLinkErrorCounter"
        for link in links:
            entry = {"link": facts.fact(link["link"], state), "active": facts.fact(link["active"], state)}
            for key, source in sources.items():
                far = link[key]
                # None: an inactive link has no far end (a known null)
                entry[key] = facts.unknown(source, str(far)) if isinstance(far, Exception) else facts.fact(far, source)
            try:
                counters = self.nvml.nvlink_error_counters(handle, link["link"])
            except nvml_mod.NvmlError as exc:
                counters = dict((name, exc) for name in ("replay", "recovery", "crc_flit", "crc_data"))
            for key, names in (("replay_errors", ("replay",)), ("recovery_errors", ("recovery",)),
                               ("crc_errors", ("crc_flit", "crc_data"))):
                bad = [counters.get(name) for name in names if not isinstance(counters.get(name), int)]
                entry[key] = (facts.unknown(counter_source, str(bad[0])) if bad
                              else facts.fact(sum(counters[name] for name in names), counter_source))
            result.append(entry)
        return result

    # ---------------------------------------------------------------- topology

    def topology(self):
        if self.gpu_bdfs is None:
            return {"pairs": facts.unknown(self.devices_dir, self.scan_error)}
        infos = self._gpu_info
        pairs = []
        for i in range(len(infos)):
            for j in range(i + 1, len(infos)):
                pairs.append(self._pair(i, j, infos[i], infos[j]))
        return {"pairs": pairs}

    def _pair(self, i, j, a, b):
        relation, bridges = self._relation(a, b)
        entry = {"a": facts.fact(i, DERIVED), "b": facts.fact(j, DERIVED), "relation": relation,
                 "numa_nodes": self._numa_pair(a, b), "bridges": bridges}
        entry.update(self._nvml_pair(a, b))
        return entry

    def _numa_pair(self, a, b):
        missing = [x for x in (a["numa"], b["numa"]) if facts.value(x) is None]
        if missing:
            return facts.unknown(DERIVED, "the NUMA node of a GPU is unknown: %s" % missing[0].get("unknown"))
        return facts.fact([a["numa"]["value"], b["numa"]["value"]], DERIVED)

    def _numa_node_count(self):
        if self._nodes is None:
            try:
                names = os.listdir(os.path.join(self.paths.sys, "devices", "system", "node"))
            except OSError:
                names = []
            self._nodes = len([n for n in names if _NODE_RE.match(n)])
        return self._nodes

    def _relation(self, a, b):
        """(relation envelope, bridges list or envelope); see the module docstring."""
        ca, cb = a["chain"], b["chain"]
        if not ca or not cb:
            bdf = a["bdf"] if not ca else b["bdf"]
            reason = "the PCI path of %s is unknown (its sysfs entry does not resolve under /sys/devices/pci*)" % bdf
            return facts.unknown(DERIVED, reason), facts.unknown(DERIVED, reason)
        if ca[0] != cb[0]:
            bridges = self._bridge_list(pci_config.path_bridges(ca, cb))
            na, nb = facts.value(a["numa"]), facts.value(b["numa"])
            if na is not None and nb is not None and na >= 0 and nb >= 0 and na != nb:
                return facts.fact("across_cpus", DERIVED), bridges
            if (na is not None and na == nb) or self._numa_node_count() <= 1:
                return facts.fact("across_host_bridges", DERIVED), bridges
            return facts.unknown(DERIVED, "the GPUs are under different host bridges (%s, %s) and their NUMA "
                                 "nodes (%s, %s) do not say whether the same CPU holds both"
                                 % (ca[0], cb[0], na, nb)), bridges
        shared = pci_config.shared_bridges(ca, cb)
        bridges = self._bridge_list(pci_config.path_bridges(ca, cb))
        if not shared:
            return facts.fact("same_host_bridge", DERIVED), bridges
        lowest = self.device(ca[shared])
        head, cap = lowest.express()
        if head is not None and pci_config.port_type(head, cap) == "root port":
            return facts.fact("same_host_bridge", DERIVED), bridges
        return facts.fact("same_switch", DERIVED), bridges

    def _bridge_list(self, bdfs):
        return [copy.deepcopy(self._bridge(bdf)) for bdf in bdfs]

    def _bridge(self, bdf):
        if bdf not in self._bridges:
            dev = self.device(bdf)
            head, cap = dev.express()
            port = (facts.fact(pci_config.port_type(head, cap), dev.config_path) if head is not None
                    else facts.unknown(dev.config_path, cap))
            self._bridges[bdf] = {"bdf": facts.fact(bdf, dev.dir), "port_type": port, "acs": self._acs(dev)}
        return self._bridges[bdf]

    @staticmethod
    def _acs(dev):
        space, reason = dev.config()
        if space is None:
            return facts.unknown(dev.config_path, reason)
        try:
            found = pcie_ext.acs(space)
        except pcie_ext.ExtCapError as exc:
            return facts.unknown(dev.config_path, str(exc))
        if found is None:
            return facts.fact(None, dev.config_path)  # read, and no ACS capability
        acs = {"capable": facts.fact(found["capable"], dev.config_path),
               "ctrl": facts.fact(found["ctrl"], dev.config_path)}
        for name, _bit in pcie_ext.ACS_BITS:
            acs[name] = facts.fact(found[name], dev.config_path)
        return acs

    @staticmethod
    def _active_links(info):
        """(links to the other GPU by address, links to NVSwitches, reason some far end is
        unknown) of one GPU, or None when its links are unknown."""
        links = info["nvlink"]
        if isinstance(links, dict):
            return None
        by_bdf, switch, unknown_far = {}, 0, None
        for link in links:
            if not link["active"]["value"]:
                continue
            if link["remote_type"]["value"] == "switch":
                switch += 1
            elif "unknown" in link["remote_bdf"]:
                unknown_far = unknown_far or "the far end of NVLink %d of %s is unknown: %s" % (
                    link["link"]["value"], info["bdf"], link["remote_bdf"]["unknown"])
            else:
                far = link["remote_bdf"]["value"]
                by_bdf[far] = by_bdf.get(far, 0) + 1
        return by_bdf, switch, unknown_far

    def _nvlink_count(self, a, b, nvlink_answer):
        """(nvlink_count, nvlink_via) of a pair.

        Direct links: those of a whose far end is b. Through NVSwitches (HGX boards): the
        smaller of the two GPUs' switch-link counts, when the driver says P2P over NVLink
        works between them, the number nvidia-smi topo -m prints as NV# there.
        """
        def unknown(reason):
            return facts.unknown(DERIVED, reason), facts.unknown(DERIVED, reason)

        def links_unknown(info):
            return unknown("the NVLink links of %s are unknown: %s" % (info["bdf"], info["nvlink"].get("unknown")))

        mine = self._active_links(a)
        if mine is None:
            return links_unknown(a)
        if mine[2]:
            return unknown(mine[2])
        direct = mine[0].get(b["bdf"], 0)
        if direct:
            return facts.fact(direct, DERIVED), facts.fact("direct", DERIVED)
        if mine[1]:
            theirs = self._active_links(b)
            if theirs is None:
                return links_unknown(b)
            if theirs[1] and "unknown" in nvlink_answer:
                return unknown("both GPUs have NVSwitch links and the driver's NVLink P2P answer is unknown: %s"
                               % nvlink_answer["unknown"])
            if theirs[1] and nvlink_answer["value"] == "ok":
                return facts.fact(min(mine[1], theirs[1]), DERIVED), facts.fact("nvswitch", DERIVED)
        return facts.fact(0, DERIVED), facts.fact("none", DERIVED)

    def _nvml_pair(self, a, b):
        """link, nvlink_count, nvlink_via, peer_access (and its read and write answers),
        nvml_topology."""
        p2p = "nvml:nvmlDeviceGetP2PStatus"
        found = {}
        handles = (a["handle"], b["handle"])
        failure = None
        if None in handles:
            failure = self.nvml.reason if not self.nvml.available else "NVML has no usable handle for %s" % (
                a["bdf"] if a["handle"] is None else b["bdf"])
        answers = {}
        for key, index in (("read", nvml_mod.NVML_P2P_CAPS_INDEX_READ), ("write", nvml_mod.NVML_P2P_CAPS_INDEX_WRITE),
                           ("nvlink", nvml_mod.NVML_P2P_CAPS_INDEX_NVLINK)):
            if failure is not None:
                answers[key] = facts.unknown(p2p, failure)
                continue
            try:
                answers[key] = facts.fact(self.nvml.p2p_status(handles[0], handles[1], index), p2p)
            except nvml_mod.NvmlError as exc:
                answers[key] = facts.unknown(p2p, str(exc))
        read, write = answers["read"], answers["write"]
        if "unknown" in read or "unknown" in write:
            found["peer_access"] = read if "unknown" in read else write
        else:
            found["peer_access"] = read if read["value"] != "ok" else write
        found["peer_access_read"], found["peer_access_write"] = read, write
        found["nvlink_count"], found["nvlink_via"] = self._nvlink_count(a, b, answers["nvlink"])
        found["link"] = self._link(a, found["nvlink_count"], answers["nvlink"])
        source = "nvml:nvmlDeviceGetTopologyCommonAncestor"
        if failure is not None:
            found["nvml_topology"] = facts.unknown(source, failure)
        else:
            try:
                found["nvml_topology"] = facts.fact(self.nvml.common_ancestor(handles[0], handles[1]), source)
            except nvml_mod.NvmlError as exc:
                found["nvml_topology"] = facts.unknown(source, str(exc))
        return found

    @staticmethod
    def _link(a, count, nvlink_answer):
        """nvlink when the pair has NVLinks between them (direct or through NVSwitches), or the
        driver says P2P over NVLink works; pcie when the driver says it does not, or the GPU has
        no NVLink at all; else unknown."""
        if facts.value(count, 0) > 0:
            return facts.fact("nvlink", DERIVED)
        if "unknown" not in nvlink_answer:
            return facts.fact("nvlink" if nvlink_answer["value"] == "ok" else "pcie", nvlink_answer["source"])
        if isinstance(a["nvlink"], list) and not a["nvlink"]:
            return facts.fact("pcie", DERIVED)  # the GPU has no NVLink at all
        return facts.unknown(nvlink_answer["source"], nvlink_answer["unknown"])

    # ---------------------------------------------------------------- driver

    def health(self):
        """The node's health facts (docs/facts.md, "Health"): NVIDIA GPUs on the PCI bus and the
        driver's count of them, the XID events since boot (hw/kernel_log), and per GPU model the
        most NVLinks any of its GPUs here has active (what a peer with fewer is missing).
        The per-GPU health facts are in ``gpus``."""
        if self.gpu_bdfs is None:
            pci = facts.unknown(self.devices_dir, self.scan_error)
        else:
            pci = facts.fact(len(self.gpu_bdfs), self.devices_dir)
        try:
            driver = facts.fact(self.nvml.device_count(), "nvml:nvmlDeviceGetCount_v2")
        except nvml_mod.NvmlError as exc:
            driver = facts.unknown("nvml:nvmlDeviceGetCount_v2", str(exc))
        most = {}
        for entry in self._entries:
            model, active = facts.value(entry["device_id"]), facts.value(entry.get("nvlink_active"))
            if model is not None and active is not None:
                most[model] = max(most.get(model, 0), active)
        found = {"gpus_pci": pci, "gpus_driver": driver, "nvlink_most": facts.fact(most, DERIVED)}
        found.update(kernel_log.gather(self.paths.root, self.gpu_bdfs or ()))
        return found

    def driver(self):
        proc, sys_root = self.paths.proc, self.paths.sys
        state = nvidia_driver.state(proc, sys_root)
        sys_version = os.path.join(sys_root, "module", "nvidia", "version")
        proc_version = os.path.join(proc, "driver", "nvidia", "version")
        module_dir = os.path.join(sys_root, "module", "nvidia")
        not_loaded = "the nvidia module is not loaded (no %s, no %s)" % (module_dir, os.path.join(proc, "driver", "nvidia"))
        if state["version"] is not None:
            has_sys = bool((fileops.read_quiet(sys_version) or "").strip())
            version = facts.fact(state["version"], sys_version if has_sys else proc_version)
        else:
            version = facts.unknown(proc_version, not_loaded if not state["loaded"] else
                                    "neither %s nor %s gives a version" % (sys_version, proc_version))
        flavor = (facts.fact(state["flavor"], proc_version) if state["flavor"] is not None else facts.unknown(
            proc_version, not_loaded if not state["loaded"] else "%s does not say open or proprietary" % proc_version))
        result = {
            "version": version,
            "flavor": flavor,
            "cuda_driver_version": self._nvml_system("nvmlSystemGetCudaDriverVersion_v2", self.nvml.cuda_driver_version),
            "nvml_driver_version": self._nvml_system("nvmlSystemGetDriverVersion", self.nvml.driver_version),
            "loaded": facts.fact(state["loaded"], module_dir),
        }
        result.update(self._daemons())
        result["nvswitches"] = (facts.fact(len(self.nvswitches), self.devices_dir) if self.nvswitches is not None
                                else facts.unknown(self.devices_dir, self.scan_error))
        modules_path = os.path.join(proc, "modules")
        for key, module in (("peermem_loaded", "nvidia_peermem"), ("nv_peer_mem_loaded", "nv_peer_mem"),
                            ("ib_core_loaded", "ib_core")):
            result[key] = facts.fact(kernel_modules.module_state(module, proc, sys_root)["loaded"], modules_path)
        kallsyms = os.path.join(proc, "kallsyms")
        symbol = kernel_modules.kallsyms_lookup(PEER_SYMBOL, proc, provider="ib_core", sys_root=sys_root)
        result["peer_symbol"] = (facts.fact(symbol["found"], kallsyms) if symbol["readable"] else facts.unknown(
            kallsyms, "%s cannot be read" % kallsyms))
        result["rdma_devices"] = facts.fact(kernel_modules.rdma_devices(sys_root),
                                            os.path.join(sys_root, "class", "infiniband"))
        return result

    def _nvml_system(self, function, call):
        source = "nvml:" + function
        try:
            return facts.fact(call(), source)
        except nvml_mod.NvmlError as exc:
            return facts.unknown(source, str(exc))

    def _daemons(self):
        """persistenced_active, fabricmanager_active: a process of that name in /proc/*/comm."""
        proc = self.paths.proc
        source = os.path.join(proc, "*", "comm")
        try:
            pids = [name for name in os.listdir(proc) if name.isdigit()]
        except OSError as exc:
            reason = "%s: %s" % (proc, exc.strerror or exc)
            return {"persistenced_active": facts.unknown(source, reason),
                    "fabricmanager_active": facts.unknown(source, reason)}
        names = set()
        for pid in pids:
            comm = fileops.read_quiet(os.path.join(proc, pid, "comm"))
            if comm:
                names.add(comm.strip())
        return {"persistenced_active": facts.fact(PERSISTENCED[:COMM_LEN] in names, source),
                "fabricmanager_active": facts.fact(FABRICMANAGER[:COMM_LEN] in names, source)}
