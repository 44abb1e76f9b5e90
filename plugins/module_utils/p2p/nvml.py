"""What NVML (libnvidia-ml.so.1, shipped with the driver) says about the GPUs, via ctypes.

The P2P thresholds depend on the link: an NVLink pair is expected to move hundreds of GB/s,
a PCIe pair tens. The CUDA driver API does not say which link a pair uses; NVML's P2P status
for the NVLink capability does (on direct NVLink and on NVSwitch systems alike). NVML is
optional: without it every pair is classified ``unknown``.

The node facts (hw/gpu_facts.py) read the rest here: name, persistence and ECC modes, ECC
error counts, retired pages and remapped rows, clock event reasons, power limits,
temperature, BAR1, NVLink links and their remote ends, the driver's P2P answers. Each query
raises NvmlError (the function, the return code, NVML's own text and the constant's name) so
that one unsupported call makes one fact unknown, never the whole read.

Signatures, struct layouts and constants are those of NVIDIA's nvml.h (NVML API version 13,
as vendored in github.com/NVIDIA/go-nvml gen/nvml/nvml.h): nvmlPciInfo_t is char
busIdLegacy[16], five unsigned ints (domain, bus, device, pciDeviceId, pciSubSystemId), char
busId[32] ("%08X:%02X:%02X.0"); nvmlBAR1Memory_t is three unsigned long long (total, free,
used, bytes); power values are milliwatts; nvmlEnableState_t is 0 disabled, 1 enabled. The
functions have no argtypes here: every argument is passed as the ctypes type nvml.h declares.

The health queries (the recovery action NVML asks for, PCIe replays, NVLink error counters,
SRAM ECC, the NVLink fabric probe) use nvml.h's nvmlFieldValue_t (two unsigned int, two long
long, two int-sized enums, the 8-byte union nvmlValue_t: 40 bytes on LP64),
nvmlEccSramErrorStatus_v1_t (unsigned int version, eleven unsigned long long, unsigned int
bThresholdExceeded: 104 bytes with padding, version 104 | 1 << 24) and the unversioned
nvmlGpuFabricInfo_t (unsigned char clusterUuid[16], nvmlReturn_t status, unsigned int cliqueId,
unsigned char state: 28 bytes).
"""

from __future__ import annotations

import ctypes

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
# nvmlReturn_t (nvml.h), for messages: NVML's own text comes from nvmlErrorString.
ERROR_NAMES = {
    1: "NVML_ERROR_UNINITIALIZED", 2: "NVML_ERROR_INVALID_ARGUMENT", 3: "NVML_ERROR_NOT_SUPPORTED",
    4: "NVML_ERROR_NO_PERMISSION", 5: "NVML_ERROR_ALREADY_INITIALIZED", 6: "NVML_ERROR_NOT_FOUND",
    7: "NVML_ERROR_INSUFFICIENT_SIZE", 8: "NVML_ERROR_INSUFFICIENT_POWER", 9: "NVML_ERROR_DRIVER_NOT_LOADED",
    10: "NVML_ERROR_TIMEOUT", 11: "NVML_ERROR_IRQ_ISSUE", 12: "NVML_ERROR_LIBRARY_NOT_FOUND",
    13: "NVML_ERROR_FUNCTION_NOT_FOUND", 14: "NVML_ERROR_CORRUPTED_INFOROM", 15: "NVML_ERROR_GPU_IS_LOST",
    16: "NVML_ERROR_RESET_REQUIRED", 17: "NVML_ERROR_OPERATING_SYSTEM", 18: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    19: "NVML_ERROR_IN_USE", 20: "NVML_ERROR_MEMORY", 21: "NVML_ERROR_NO_DATA",
    22: "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", 23: "NVML_ERROR_INSUFFICIENT_RESOURCES",
    24: "NVML_ERROR_FREQ_NOT_SUPPORTED", 25: "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 26: "NVML_ERROR_DEPRECATED",
    27: "NVML_ERROR_NOT_READY", 28: "NVML_ERROR_GPU_NOT_FOUND", 29: "NVML_ERROR_INVALID_STATE",
    30: "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", 999: "NVML_ERROR_UNKNOWN",
}

# nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t.
NVML_P2P_CAPS_INDEX_READ = 0
NVML_P2P_CAPS_INDEX_WRITE = 1
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
P2P_STATUS_NAMES = {0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported", 3: "ioh_topology_not_supported",
                    4: "disabled_by_regkey", 5: "not_supported", 6: "unknown"}
# nvmlGpuTopologyLevel_t.
_TOPOLOGY = {0: "same board", 10: "single PCIe switch", 20: "multiple PCIe switches",
             30: "same host bridge", 40: "same NUMA node", 50: "across NUMA nodes"}
TOPOLOGY_NAMES = {0: "internal", 10: "single", 20: "multiple", 30: "hostbridge", 40: "node", 50: "system"}

# nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlTemperatureSensors_t, nvmlPageRetirementCause_t.
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_TEMPERATURE_GPU = 0
RETIREMENT_CAUSES = (("multiple_single_bit_ecc", 0), ("double_bit_ecc", 1))
NVML_NVLINK_MAX_LINKS = 36  # nvml.h of NVML 13 (18 before Blackwell)
# nvmlIntNvLinkDeviceType_t: what the far end of a link is.
NVLINK_DEVICE_TYPES = {0x00: "gpu", 0x01: "ibmnpu", 0x02: "switch", 0xFF: "unknown"}
NAME_BUFFER = 96            # NVML_DEVICE_NAME_V2_BUFFER_SIZE
DRIVER_VERSION_BUFFER = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

# nvmlClocksEventReason* bits (nvml.h), named as the facts name them.
CLOCK_EVENT_REASONS = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clock_setting", 0x100),
)


# nvmlValueType_t: which member of nvmlValue_t a field value is read through.
NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG = 2
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
NVML_VALUE_TYPE_SIGNED_INT = 5
NVML_VALUE_TYPE_UNSIGNED_SHORT = 6
VALUE_MEMBERS = {
    NVML_VALUE_TYPE_DOUBLE: "dVal", NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal", NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal", NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    NVML_VALUE_TYPE_SIGNED_INT: "siVal", NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}

# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (a field id of nvml.h, R575 and later) and its values,
# nvmlDeviceGpuRecoveryAction_t.
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
RECOVERY_ACTIONS = {0: "none", 1: "gpu_reset", 2: "node_reboot", 3: "drain_p2p", 4: "drain_and_reset",
                    5: "recover_imex_domain"}

# nvmlNvLinkErrorCounter_t (NVML_NVLINK_ERROR_DL_*), named as the facts name them.
NVLINK_ERROR_COUNTERS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3))
# Codes that say nothing about one counter: the GPU, the library or NVML itself is gone.
_WHOLE_QUERY_FAILURES = (None, NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_GPU_IS_LOST)

# NVML_GPU_FABRIC_STATE_* (nvmlGpuFabricState_t, an unsigned char).
NVML_GPU_FABRIC_UUID_LEN = 16
NVML_GPU_FABRIC_STATE_COMPLETED = 3
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


class PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (nvml.h, the struct of nvmlDeviceGetPciInfo_v3 and
    nvmlDeviceGetNvLinkRemotePciInfo_v2)."""
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class Bar1Memory(ctypes.Structure):
    """nvmlBAR1Memory_t (bytes)."""
    _fields_ = [("bar1Total", ctypes.c_ulonglong), ("bar1Free", ctypes.c_ulonglong),
                ("bar1Used", ctypes.c_ulonglong)]


class Value(ctypes.Union):
    """nvmlValue_t: one of seven types, which nvmlFieldValue_t.valueType names."""
    _fields_ = [
        ("dVal", ctypes.c_double),
        ("siVal", ctypes.c_int),
        ("uiVal", ctypes.c_uint),
        ("ulVal", ctypes.c_ulong),
        ("ullVal", ctypes.c_ulonglong),
        ("sllVal", ctypes.c_longlong),
        ("usVal", ctypes.c_ushort),
    ]


class FieldValue(ctypes.Structure):
    """nvmlFieldValue_t (nvmlDeviceGetFieldValues): fieldId and scopeId are set by the caller,
    the rest by NVML; ``value`` is valid only where ``nvmlReturn`` is NVML_SUCCESS. The two
    enums (nvmlValueType_t, nvmlReturn_t) are int-sized."""
    _fields_ = [
        ("fieldId", ctypes.c_uint),
        ("scopeId", ctypes.c_uint),
        ("timestamp", ctypes.c_longlong),    # microseconds since 1970
        ("latencyUsec", ctypes.c_longlong),
        ("valueType", ctypes.c_int),
        ("nvmlReturn", ctypes.c_int),
        ("value", Value),
    ]


class EccSramErrorStatus(ctypes.Structure):
    """nvmlEccSramErrorStatus_v1_t (nvmlDeviceGetSramEccErrorStatus); ``version`` must be
    set to struct_version(EccSramErrorStatus, 1) before the call."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("aggregateUncParity", ctypes.c_ulonglong),
        ("aggregateUncSecDed", ctypes.c_ulonglong),
        ("aggregateCor", ctypes.c_ulonglong),
        ("volatileUncParity", ctypes.c_ulonglong),
        ("volatileUncSecDed", ctypes.c_ulonglong),
        ("volatileCor", ctypes.c_ulonglong),
        ("aggregateUncBucketL2", ctypes.c_ulonglong),
        ("aggregateUncBucketSm", ctypes.c_ulonglong),
        ("aggregateUncBucketPcie", ctypes.c_ulonglong),
        ("aggregateUncBucketMcu", ctypes.c_ulonglong),
        ("aggregateUncBucketOther", ctypes.c_ulonglong),
        ("bThresholdExceeded", ctypes.c_uint),
    ]


class GpuFabricInfo(ctypes.Structure):
    """nvmlGpuFabricInfo_t, the unversioned (v1) struct of nvmlDeviceGetGpuFabricInfo."""
    _fields_ = [
        ("clusterUuid", ctypes.c_ubyte * NVML_GPU_FABRIC_UUID_LEN),
        ("status", ctypes.c_int),      # nvmlReturn_t; meaningful only once state is completed
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),     # nvmlGpuFabricState_t
    ]


def struct_version(struct, version):
    """nvml.h's NVML_STRUCT_VERSION(data, ver): sizeof(struct) | ver << 24."""
    return ctypes.sizeof(struct) | version << 24


class NvmlError(Exception):
    """One NVML call failed: ``function``, ``code`` (None when NVML is not loaded at all) and
    the text, e.g. ``nvmlDeviceGetEccMode: Not Supported (NVML_ERROR_NOT_SUPPORTED)``."""

    def __init__(self, function, code, text):
        Exception.__init__(self, text if code is None else "%s: %s" % (function, text))
        self.function = function
        self.code = code


def clock_event_names(mask):
    """Names of the reasons set in a clocks event reasons mask; unknown bits as ``bit_N``."""
    names = [name for name, bit in CLOCK_EVENT_REASONS if mask & bit]
    known = 0
    for _name, bit in CLOCK_EVENT_REASONS:
        known |= bit
    rest = mask & ~known
    names.extend("bit_%d" % n for n in range(64) if rest >> n & 1)
    return names


def bus_id(info):
    """The BDF of an nvmlPciInfo_t as sysfs names it (``00000000:07:00.0`` -> ``0000:07:00.0``)."""
    raw = info.busId.decode("ascii", "replace") or info.busIdLegacy.decode("ascii", "replace")
    return pci_config.parse_bdf(raw)


class Nvml:
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

    # ---------------------------------------------------------------- queries for the node facts
    # Each raises NvmlError; hw/gpu_facts turns that into one unknown fact.

    def _call(self, function, *args):
        """Call ``function`` of the library; NvmlError unless it returns NVML_SUCCESS."""
        if not self.available:
            raise NvmlError(function, None, self.reason or "NVML was shut down")
        try:
            func = getattr(self.lib, function)
        except AttributeError:
            raise NvmlError(function, NVML_ERROR_FUNCTION_NOT_FOUND,
                            "not in this libnvidia-ml (an older driver) (NVML_ERROR_FUNCTION_NOT_FOUND)")
        try:
            code = func(*args)
        except (ctypes.ArgumentError, TypeError, ValueError) as exc:
            raise NvmlError(function, NVML_ERROR_INVALID_ARGUMENT, "the call failed in ctypes: %s" % exc)
        if code != NVML_SUCCESS:
            raise NvmlError(function, code, self.error_text(code))
        return code

    def error_text(self, code):
        """``Not Supported (NVML_ERROR_NOT_SUPPORTED)``: nvmlErrorString and the constant's name."""
        name = ERROR_NAMES.get(code, "NVML error %s" % code)
        try:
            func = self.lib.nvmlErrorString
        except AttributeError:
            return name
        try:
            func.restype = ctypes.c_char_p  # const char *; ctypes would read an int
        except AttributeError:  # a stand-in library in the tests
            pass
        try:
            text = func(ctypes.c_int(code))
        except (ctypes.ArgumentError, TypeError):
            text = None
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return "%s (%s)" % (text, name) if text else name

    def device(self, bdf):
        """The handle of the GPU at ``bdf`` (nvmlDeviceGetHandleByPciBusId_v2), checked against
        the bus id NVML reports for it (nvmlDeviceGetPciInfo_v3)."""
        dev = ctypes.c_void_p()
        self._call("nvmlDeviceGetHandleByPciBusId_v2", ctypes.c_char_p(bdf.encode()), ctypes.byref(dev))
        info = self.pci_info(dev)
        try:
            same = bus_id(info) == pci_config.parse_bdf(bdf)
        except pci_config.PciError as exc:
            raise NvmlError("nvmlDeviceGetPciInfo_v3", NVML_SUCCESS, "answers %s" % exc)
        if not same:
            raise NvmlError("nvmlDeviceGetPciInfo_v3", NVML_ERROR_INVALID_ARGUMENT,
                            "the handle for %s reports bus id %s" % (bdf, info.busId.decode("ascii", "replace")))
        return dev

    def pci_info(self, dev):
        info = PciInfo()
        self._call("nvmlDeviceGetPciInfo_v3", dev, ctypes.byref(info))
        return info

    def name(self, dev):
        buf = ctypes.create_string_buffer(NAME_BUFFER)
        self._call("nvmlDeviceGetName", dev, buf, ctypes.c_uint(NAME_BUFFER))
        return buf.value.decode("utf-8", "replace")

    def _enable_state(self, function, *args):
        state = ctypes.c_int(-1)
        self._call(function, *(args + (ctypes.byref(state),)))
        return state.value == 1

    def persistence_mode(self, dev):
        return self._enable_state("nvmlDeviceGetPersistenceMode", dev)

    def ecc_mode(self, dev):
        """(current, pending), True when enabled."""
        current, pending = ctypes.c_int(-1), ctypes.c_int(-1)
        self._call("nvmlDeviceGetEccMode", dev, ctypes.byref(current), ctypes.byref(pending))
        return current.value == 1, pending.value == 1

    def ecc_errors(self, dev, error_type):
        """``{"volatile": n, "aggregate": n}`` of one memory error type (all locations)."""
        counts = {}
        for key, counter in (("volatile", NVML_VOLATILE_ECC), ("aggregate", NVML_AGGREGATE_ECC)):
            value = ctypes.c_ulonglong(0)
            self._call("nvmlDeviceGetTotalEccErrors", dev, ctypes.c_int(error_type), ctypes.c_int(counter),
                       ctypes.byref(value))
            counts[key] = value.value
        return counts

    def retired_pages(self, dev):
        """``{"multiple_single_bit_ecc": n, "double_bit_ecc": n}``: pages retired per cause (a
        count-only query: pageCount 0 and no buffers)."""
        counts = {}
        for key, cause in RETIREMENT_CAUSES:
            count = ctypes.c_uint(0)
            try:
                self._call("nvmlDeviceGetRetiredPages_v2", dev, ctypes.c_int(cause), ctypes.byref(count), None, None)
            except NvmlError as exc:
                if exc.code != NVML_ERROR_INSUFFICIENT_SIZE:
                    raise
            counts[key] = count.value
        return counts

    def retired_pages_pending(self, dev):
        return self._enable_state("nvmlDeviceGetRetiredPagesPendingStatus", dev)

    def remapped_rows(self, dev):
        """``{"correctable", "uncorrectable", "pending", "failure"}``."""
        corr, unc, pending, failure = (ctypes.c_uint(0) for _n in range(4))
        self._call("nvmlDeviceGetRemappedRows", dev, ctypes.byref(corr), ctypes.byref(unc),
                   ctypes.byref(pending), ctypes.byref(failure))
        return {"correctable": corr.value, "uncorrectable": unc.value, "pending": bool(pending.value),
                "failure": bool(failure.value)}

    def clock_event_reasons(self, dev):
        """(mask, function used): nvmlDeviceGetCurrentClocksEventReasons (R535 and later), or
        the older nvmlDeviceGetCurrentClocksThrottleReasons where the library lacks it."""
        mask = ctypes.c_ulonglong(0)
        try:
            self._call("nvmlDeviceGetCurrentClocksEventReasons", dev, ctypes.byref(mask))
            return mask.value, "nvmlDeviceGetCurrentClocksEventReasons"
        except NvmlError as exc:
            if exc.code != NVML_ERROR_FUNCTION_NOT_FOUND:
                raise
        self._call("nvmlDeviceGetCurrentClocksThrottleReasons", dev, ctypes.byref(mask))
        return mask.value, "nvmlDeviceGetCurrentClocksThrottleReasons"

    def _uint(self, function, *args):
        value = ctypes.c_uint(0)
        self._call(function, *(args + (ctypes.byref(value),)))
        return value.value

    def enforced_power_limit_mw(self, dev):
        return self._uint("nvmlDeviceGetEnforcedPowerLimit", dev)

    def power_default_limit_mw(self, dev):
        return self._uint("nvmlDeviceGetPowerManagementDefaultLimit", dev)

    def power_limit_constraints_mw(self, dev):
        """(min, max) milliwatts."""
        low, high = ctypes.c_uint(0), ctypes.c_uint(0)
        self._call("nvmlDeviceGetPowerManagementLimitConstraints", dev, ctypes.byref(low), ctypes.byref(high))
        return low.value, high.value

    def temperature_c(self, dev):
        return self._uint("nvmlDeviceGetTemperature", dev, ctypes.c_int(NVML_TEMPERATURE_GPU))

    def memory_bus_width_bits(self, dev):
        return self._uint("nvmlDeviceGetMemoryBusWidth", dev)

    def memory_max_clock_mhz(self, dev):
        """The memory clock's maximum (nvmlDeviceGetMaxClockInfo, NVML_CLOCK_MEM), in MHz."""
        return self._uint("nvmlDeviceGetMaxClockInfo", dev, ctypes.c_int(NVML_CLOCK_MEM))

    def bar1_total_bytes(self, dev):
        info = Bar1Memory()
        self._call("nvmlDeviceGetBAR1MemoryInfo", dev, ctypes.byref(info))
        return info.bar1Total

    def nvlinks(self, dev):
        """``[{"link", "active", "remote_type", "remote_bdf"}]`` for every link NVML knows on
        this GPU.

        Links are asked 0 to NVML_NVLINK_MAX_LINKS - 1; a link the GPU does not have answers
        NOT_SUPPORTED or INVALID_ARGUMENT and is left out, so a GPU without NVLink has [].
        Other errors raise. For an active link, ``remote_type`` is gpu, switch, ibmnpu or
        unknown (nvmlDeviceGetNvLinkRemoteDeviceType) and ``remote_bdf`` the far end's PCI
        address; either is an NvmlError instance when only it cannot be read, and both are None
        on an inactive link (no far end). NVML answers FFFFFFFF:FF:FF.0 for a far end outside
        this machine's PCI tree: the NVSwitches of an HGX board passed into a VM (seen on the
        H200 machines, where every link's far end is a switch).
        """
        links = []
        for link in range(NVML_NVLINK_MAX_LINKS):
            try:
                active = self._enable_state("nvmlDeviceGetNvLinkState", dev, ctypes.c_uint(link))
            except NvmlError as exc:
                if exc.code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            entry = {"link": link, "active": active, "remote_type": None, "remote_bdf": None}
            if active:
                entry["remote_type"] = self._remote_type(dev, link)
                entry["remote_bdf"] = self._remote_bdf(dev, link)
            links.append(entry)
        return links

    def _remote_type(self, dev, link):
        kind = ctypes.c_int(-1)
        try:
            self._call("nvmlDeviceGetNvLinkRemoteDeviceType", dev, ctypes.c_uint(link), ctypes.byref(kind))
        except NvmlError as exc:
            return exc
        return NVLINK_DEVICE_TYPES.get(kind.value, "type_%d" % kind.value)

    def _remote_bdf(self, dev, link):
        function = "nvmlDeviceGetNvLinkRemotePciInfo_v2"
        info = PciInfo()
        try:
            self._call(function, dev, ctypes.c_uint(link), ctypes.byref(info))
        except NvmlError as exc:
            return exc
        raw = info.busId.decode("ascii", "replace")
        if info.domain == 0xFFFFFFFF or raw.upper().startswith("FFFFFFFF:"):
            return NvmlError(function, NVML_SUCCESS, "answers %s: no PCI address for the far end (a device "
                             "outside this machine's PCI tree, such as the NVSwitches of a board passed into "
                             "a VM)" % raw)
        try:
            return bus_id(info)
        except pci_config.PciError as exc:
            return NvmlError(function, NVML_SUCCESS, "answers %r: %s" % (raw, exc))

    def nvlink_version(self, dev, link):
        """nvmlDeviceGetNvLinkVersion of one link: nvml.h's nvmlNvlinkVersion_t (1 = 1.0,
        2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0, ...), not the generation itself
        (p2p/p2p_floor maps it, and trusts the architecture first)."""
        return self._uint("nvmlDeviceGetNvLinkVersion", dev, ctypes.c_uint(link))

    def p2p_status(self, dev_a, dev_b, index):
        """The driver's P2P answer for one capability: ``ok``, ``not_supported``, ..."""
        status = ctypes.c_int(-1)
        self._call("nvmlDeviceGetP2PStatus", dev_a, dev_b, ctypes.c_int(index), ctypes.byref(status))
        return P2P_STATUS_NAMES.get(status.value, "status_%d" % status.value)

    def common_ancestor(self, dev_a, dev_b):
        """nvmlGpuTopologyLevel_t of a pair as a name: internal, single, multiple, hostbridge,
        node, system."""
        level = ctypes.c_int(-1)
        self._call("nvmlDeviceGetTopologyCommonAncestor", dev_a, dev_b, ctypes.byref(level))
        return TOPOLOGY_NAMES.get(level.value, "level_%d" % level.value)

    # ------------------------------------------------------------------ health and error counters

    def device_count(self):
        """How many GPUs the driver has (nvmlDeviceGetCount_v2), those NVML may not open
        included. Raises NvmlError."""
        return self._uint("nvmlDeviceGetCount_v2")

    def field_values(self, dev, requests):
        """nvmlDeviceGetFieldValues for ``requests``, a list of (field id, scope id): one answer
        per request, in order, each the value (int, or float for NVML_VALUE_TYPE_DOUBLE: read
        through the nvmlValue_t member that the entry's valueType names) or an NvmlError
        instance when that entry's nvmlReturn is not NVML_SUCCESS (function
        nvmlDeviceGetFieldValues, the entry's code, the field named in the text) or its
        valueType is not one nvml.h defines (code NVML_SUCCESS). Raises NvmlError when the call
        itself fails. An empty list answers [] without a call."""
        requests = list(requests)
        if not requests:
            return []
        values = (FieldValue * len(requests))()
        for entry, (field_id, scope_id) in zip(values, requests):
            entry.fieldId = field_id
            entry.scopeId = scope_id
        self._call("nvmlDeviceGetFieldValues", dev, ctypes.c_int(len(requests)), values)
        return [self._field_answer(entry) for entry in values]

    def _field_answer(self, entry):
        function = "nvmlDeviceGetFieldValues"
        where = "field %d (scope %d)" % (entry.fieldId, entry.scopeId)
        if entry.nvmlReturn != NVML_SUCCESS:
            return NvmlError(function, entry.nvmlReturn, "%s: %s" % (where, self.error_text(entry.nvmlReturn)))
        member = VALUE_MEMBERS.get(entry.valueType)
        if member is None:
            return NvmlError(function, NVML_SUCCESS, "%s answers value type %d, which nvml.h does not define" % (
                where, entry.valueType))
        return getattr(entry.value, member)

    def recovery_action(self, dev):
        """What the driver asks for to recover this GPU (field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
        nvmlDeviceGpuRecoveryAction_t): none, gpu_reset, node_reboot, drain_p2p, drain_and_reset,
        recover_imex_domain, or ``action_N`` for a value nvml.h does not name.

        Raises NvmlError when the call fails or the field answers an error: drivers before R575
        do not know the field and answer NVML_ERROR_NOT_SUPPORTED or NVML_ERROR_INVALID_ARGUMENT
        for it (the code is kept, so the caller can say "not reported by this driver")."""
        answer = self.field_values(dev, [(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, 0)])[0]
        if isinstance(answer, NvmlError):
            raise answer
        return RECOVERY_ACTIONS.get(answer, "action_%s" % answer)

    def pcie_replay_counter(self, dev):
        """PCIe replays of this GPU's link since the driver loaded (nvmlDeviceGetPcieReplayCounter,
        a count). Raises NvmlError."""
        return self._uint("nvmlDeviceGetPcieReplayCounter", dev)

    def nvlink_error_counters(self, dev, link):
        """``{"replay", "recovery", "crc_flit", "crc_data"}`` of one NVLink link (counts,
        nvmlDeviceGetNvLinkErrorCounter with NVML_NVLINK_ERROR_DL_REPLAY, _RECOVERY, _CRC_FLIT,
        _CRC_DATA).

        A counter that cannot be read is that key's answer, an NvmlError instance: Blackwell and
        later answer NOT_SUPPORTED for all four (nvml.h points NVLink5 to the field values
        NVML_FI_DEV_NVLINK_COUNT_*), a link the GPU lacks INVALID_ARGUMENT. Raises NvmlError
        only where the answer is about more than a counter: NVML not loaded, the function
        missing (FUNCTION_NOT_FOUND), the GPU lost (GPU_IS_LOST)."""
        counters = {}
        for key, counter in NVLINK_ERROR_COUNTERS:
            value = ctypes.c_ulonglong(0)
            try:
                self._call("nvmlDeviceGetNvLinkErrorCounter", dev, ctypes.c_uint(link), ctypes.c_int(counter),
                           ctypes.byref(value))
            except NvmlError as exc:
                if exc.code in _WHOLE_QUERY_FAILURES:
                    raise
                counters[key] = exc
                continue
            counters[key] = value.value
        return counters

    def sram_ecc_status(self, dev):
        """SRAM ECC errors (nvmlDeviceGetSramEccErrorStatus, nvmlEccSramErrorStatus_v1_t; counts):
        ``uncorrected_volatile`` and ``uncorrected_aggregate`` (parity + SEC-DED),
        ``corrected_volatile``, ``corrected_aggregate``, and ``threshold_exceeded`` (the field
        diagnostic's error threshold). Raises NvmlError: NOT_SUPPORTED before Ampere,
        NO_PERMISSION without root, ARGUMENT_VERSION_MISMATCH from a library that wants another
        struct version."""
        status = EccSramErrorStatus()
        status.version = struct_version(EccSramErrorStatus, 1)
        self._call("nvmlDeviceGetSramEccErrorStatus", dev, ctypes.byref(status))
        return {
            "uncorrected_volatile": status.volatileUncParity + status.volatileUncSecDed,
            "uncorrected_aggregate": status.aggregateUncParity + status.aggregateUncSecDed,
            "corrected_volatile": status.volatileCor,
            "corrected_aggregate": status.aggregateCor,
            "threshold_exceeded": bool(status.bThresholdExceeded),
        }

    def fabric_info(self, dev):
        """The GPU's registration with the NVLink fabric (nvmlDeviceGetGpuFabricInfo, the
        unversioned nvmlGpuFabricInfo_t; Hopper and later): ``state`` not_supported,
        not_started, in_progress, completed or ``state_N``; ``status`` the probe's result, "ok"
        or the nvmlReturn_t name (``error_N`` for an unlisted code), and None until the state is
        completed (nvml.h: status "must be checked only if state returns complete").

        Raises NvmlError: NOT_SUPPORTED on a GPU without fabric support (before Hopper),
        FUNCTION_NOT_FOUND in a library without the function (older ones; nvml.h of NVML 13
        marks it deprecated in favour of nvmlDeviceGetGpuFabricInfoV)."""
        info = GpuFabricInfo()
        self._call("nvmlDeviceGetGpuFabricInfo", dev, ctypes.byref(info))
        status = None
        if info.state == NVML_GPU_FABRIC_STATE_COMPLETED:
            status = "ok" if info.status == NVML_SUCCESS else ERROR_NAMES.get(info.status, "error_%d" % info.status)
        return {"state": FABRIC_STATES.get(info.state, "state_%d" % info.state), "status": status}

    def driver_version(self):
        buf = ctypes.create_string_buffer(DRIVER_VERSION_BUFFER)
        self._call("nvmlSystemGetDriverVersion", buf, ctypes.c_uint(DRIVER_VERSION_BUFFER))
        return buf.value.decode("utf-8", "replace")

    def cuda_driver_version(self):
        """``13.0`` from nvmlSystemGetCudaDriverVersion_v2 (13000 = 1000 * major + 10 * minor)."""
        version = ctypes.c_int(0)
        self._call("nvmlSystemGetCudaDriverVersion_v2", ctypes.byref(version))
        return "%d.%d" % (version.value // 1000, version.value % 1000 // 10)

    def shutdown(self):
        if self.available:
            self.lib.nvmlShutdown()
            self.available = False


class Unavailable(Nvml):
    """An NVML that is not there, with the reason: every query raises NvmlError naming it (for
    readers given something that cannot answer NVML's queries)."""

    def __init__(self, reason):  # pylint: disable=super-init-not-called
        self.available = False
        self.reason = reason
        self.lib = None
