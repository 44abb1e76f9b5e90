# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What links two GPUs, from NVML (libnvidia-ml.so.1, shipped with the driver), via ctypes.

The P2P thresholds depend on the link: an NVLink pair is expected to move hundreds of GB/s,
a PCIe pair tens. The CUDA driver API does not say which link a pair uses; NVML's P2P status
for the NVLink capability does (on direct NVLink and on NVSwitch systems alike). NVML is
optional: without it every pair is classified ``unknown``.
"""

from __future__ import annotations

import ctypes

NVML_SUCCESS = 0
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
_TOPOLOGY = {0: "same board", 10: "single PCIe switch", 20: "multiple PCIe switches",
             30: "same host bridge", 40: "same NUMA node", 50: "across NUMA nodes"}


class Nvml(object):
    """A loaded and initialised NVML, or ``available`` False with the reason."""

    def __init__(self, library="libnvidia-ml.so.1"):
        self.available = False
        self.reason = None
        try:
            self.lib = ctypes.CDLL(library)
            code = self.lib.nvmlInit_v2()
        except (OSError, AttributeError) as exc:
            self.reason = "NVML unavailable: %s" % exc
            return
        if code != NVML_SUCCESS:
            self.reason = "nvmlInit_v2 failed with %d" % code
            return
        self.available = True

    def handle(self, bdf):
        dev = ctypes.c_void_p()
        code = self.lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bdf.encode()), ctypes.byref(dev))
        return dev if code == NVML_SUCCESS else None

    def link(self, bdf_a, bdf_b):
        """('nvlink'|'pcie'|'unknown', topology text or None) for a pair of GPUs."""
        if not self.available:
            return "unknown", None
        a, b = self.handle(bdf_a), self.handle(bdf_b)
        if a is None or b is None:
            return "unknown", None
        status = ctypes.c_int(-1)
        code = self.lib.nvmlDeviceGetP2PStatus(a, b, ctypes.c_int(NVML_P2P_CAPS_INDEX_NVLINK), ctypes.byref(status))
        topo = ctypes.c_int(-1)
        topo_text = None
        if self.lib.nvmlDeviceGetTopologyCommonAncestor(a, b, ctypes.byref(topo)) == NVML_SUCCESS:
            topo_text = _TOPOLOGY.get(topo.value, "level %d" % topo.value)
        if code == NVML_SUCCESS and status.value == NVML_P2P_STATUS_OK:
            return "nvlink", topo_text
        if code == NVML_SUCCESS:
            return "pcie", topo_text
        return "unknown", topo_text

    def shutdown(self):
        if self.available:
            self.lib.nvmlShutdown()
            self.available = False
