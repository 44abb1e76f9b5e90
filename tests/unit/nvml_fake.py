"""A fake libnvidia-ml for the NVML queries of the node facts.

Each function takes the ctypes arguments nvml.h declares and writes its answers through them
as the real library does: ``byref`` out-parameters through ``_obj``, string buffers through
``.value``, structs field by field. Argument types are checked, so a call built with the wrong
ctypes type fails here as it would misbehave there. ``codes`` forces a return code per
function (3 = NVML_ERROR_NOT_SUPPORTED), ``missing`` removes functions (an older library).

Struct layouts are checked against nvml.h on their own here (field names in order and sizes),
not against the module's classes, so a drifted struct fails in the fake. ``Error(code)`` in a
GPU's answers (a field value, one NVLink counter) makes that one answer fail.
"""

import ctypes

NOT_SUPPORTED = 3
NOT_FOUND = 6
INVALID_ARGUMENT = 2
GPU_IS_LOST = 15
ARGUMENT_VERSION_MISMATCH = 25
ERROR_TEXT = {2: b"Invalid Argument", 3: b"Not Supported", 4: b"Insufficient Permissions", 6: b"Not Found",
              15: b"GPU is lost", 25: b"Argument version mismatch", 999: b"Unknown Error"}

# nvml.h: nvmlFieldValue_t, nvmlEccSramErrorStatus_v1_t and nvmlGpuFabricInfo_t, field names in
# order and their sizes on x86_64 (LP64).
FIELD_VALUE_FIELDS = ["fieldId", "scopeId", "timestamp", "latencyUsec", "valueType", "nvmlReturn", "value"]
FIELD_VALUE_SIZE = 40
SRAM_FIELDS = ["version", "aggregateUncParity", "aggregateUncSecDed", "aggregateCor", "volatileUncParity",
               "volatileUncSecDed", "volatileCor", "aggregateUncBucketL2", "aggregateUncBucketSm",
               "aggregateUncBucketPcie", "aggregateUncBucketMcu", "aggregateUncBucketOther", "bThresholdExceeded"]
SRAM_SIZE = 104
SRAM_VERSION_1 = SRAM_SIZE | 1 << 24  # NVML_STRUCT_VERSION(EccSramErrorStatus, 1)
FABRIC_FIELDS = ["clusterUuid", "status", "cliqueId", "state"]
FABRIC_SIZE = 28
# nvmlValueType_t -> the nvmlValue_t member it is written through.
VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
RECOVERY_ACTION_FIELD = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
UNSIGNED_INT = 1


class Error:
    """One answer that fails with ``code`` (a field value entry, one NVLink counter)."""

    def __init__(self, code):
        self.code = code


def _fields(struct_type):
    return [field[0] for field in struct_type._fields_]


def nvml_bus_id(bdf):
    """``0000:07:00.0`` as NVML prints it: ``00000000:07:00.0`` (upper-case hex)."""
    domain, rest = bdf.split(":", 1)
    return ("%08X:%s" % (int(domain, 16), rest.upper())).encode()


class Gpu:
    """What the fake library says about one GPU; defaults are an H200 as seen on the test
    machines (700 W limits, ECC on, only the idle clock reason, 35 C)."""

    def __init__(self, bdf, name="NVIDIA H200", persistence=1, ecc=(1, 1), ecc_counts=None, retired=(0, 0),
                 retired_pending=0, remapped=(0, 0, 0, 0), clocks=0x1, power=(700000, 700000, 200000, 700000),
                 temperature=35, bar1=256 * 1048576, links=(), memory=(6144, 3201), recovery_action=0,
                 pcie_replay=0, nvlink_errors=None, sram=None, fabric=(3, 0), fields=None):
        self.bdf = bdf
        self.name = name
        self.persistence = persistence
        self.ecc = ecc
        # (error type, counter type) -> count
        self.ecc_counts = ecc_counts or {(0, 0): 2, (0, 1): 7, (1, 0): 0, (1, 1): 1}
        self.retired = retired
        self.retired_pending = retired_pending
        self.remapped = remapped
        self.clocks = clocks
        self.power = power  # enforced, default, min, max (mW)
        self.temperature = temperature
        self.bar1 = bar1
        self.memory = memory  # bus width (bits), maximum memory clock (MHz)
        self.links = links
        self.pcie_replay = pcie_replay
        # link -> (replay, recovery, crc_flit, crc_data), each a count or Error(code); a link of
        # ``links`` not listed has all four 0, one beyond them answers INVALID_ARGUMENT, and a
        # GPU without links NOT_SUPPORTED
        self.nvlink_errors = dict(nvlink_errors or {})
        # nvmlEccSramErrorStatus_v1_t fields by name; those not given are 0
        self.sram = dict(sram or {})
        self.fabric = tuple(fabric) + (0,) * (3 - len(fabric))  # state, status (nvmlReturn_t), cliqueId
        # (field id, scope id) -> (nvmlValueType_t, value) or Error(code); the recovery action
        # (field 230, scope 0) is an unsigned int unless given here or as Error(code). A field
        # not listed answers INVALID_ARGUMENT, as a driver that does not know its id.
        self.fields = {(RECOVERY_ACTION_FIELD, 0): (recovery_action if isinstance(recovery_action, Error)
                                                    else (UNSIGNED_INT, recovery_action))}
        self.fields.update(fields or {})

    @property
    def links(self):
        """[(active, far end's bdf or None for FFFFFFFF:FF:FF.0, far end's type: 0 gpu, 2 switch)]"""
        return self._links

    @links.setter
    def links(self, links):
        self._links = [tuple(link) + (0,) * (3 - len(link)) for link in links]


class FakeNvmlLib:
    """The library: GPUs by handle (index + 1)."""

    def __init__(self, gpus, codes=None, missing=(), p2p=None, topology=30, driver="580.159.04", cuda=13000,
                 init=0):
        self.gpus = list(gpus)
        self.codes = dict(codes or {})
        self.missing = set(missing)
        self.p2p = dict(p2p or {})   # (bdf a, bdf b, index) -> status; default 0 (ok)
        self.topology = topology
        self.driver = driver
        self.cuda = cuda
        self.init = init
        self.calls = []

    def __getattribute__(self, name):
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError("undefined symbol: %s" % name)
        return object.__getattribute__(self, name)

    # plumbing
    def _code(self, function):
        self.calls.append(function)
        return self.codes.get(function, 0)

    def _gpu(self, handle):
        assert isinstance(handle, ctypes.c_void_p), handle
        return self.gpus[handle.value - 1]

    def _forced(self, function, handle=None):
        """The forced code of ``function`` for this GPU: codes[function] or codes[(function, bdf)]."""
        self.calls.append(function)
        if handle is not None:
            key = (function, self._gpu(handle).bdf)
            if key in self.codes:
                return self.codes[key]
        return self.codes.get(function, 0)

    def nvmlInit_v2(self):
        return self._code("nvmlInit_v2")

    def nvmlShutdown(self):
        return self._code("nvmlShutdown")

    def nvmlErrorString(self, code):
        assert isinstance(code, ctypes.c_int)
        return ERROR_TEXT.get(code.value, b"Unknown Error")

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus, out):
        code = self._code("nvmlDeviceGetHandleByPciBusId_v2")
        if code:
            return code
        for index, gpu in enumerate(self.gpus):
            if bus.value.decode() == gpu.bdf:
                out._obj.value = index + 1
                return 0
        return NOT_FOUND

    def nvmlDeviceGetPciInfo_v3(self, handle, out):
        code = self._forced("nvmlDeviceGetPciInfo_v3", handle)
        if not code:
            gpu = self._gpu(handle)
            out._obj.busId = nvml_bus_id(gpu.bdf)
            out._obj.pciDeviceId = 0x233510DE
        return code

    def nvmlDeviceGetName(self, handle, buf, length):
        code = self._forced("nvmlDeviceGetName", handle)
        assert isinstance(length, ctypes.c_uint) and length.value == len(buf)
        if not code:
            buf.value = self._gpu(handle).name.encode()
        return code

    def _out(self, function, handle, out, value):
        code = self._forced(function, handle)
        if not code:
            out._obj.value = value
        return code

    def nvmlDeviceGetPersistenceMode(self, handle, out):
        return self._out("nvmlDeviceGetPersistenceMode", handle, out, self._gpu(handle).persistence)

    def nvmlDeviceGetEccMode(self, handle, current, pending):
        code = self._forced("nvmlDeviceGetEccMode", handle)
        if not code:
            current._obj.value, pending._obj.value = self._gpu(handle).ecc
        return code

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter, out):
        assert isinstance(error_type, ctypes.c_int) and isinstance(counter, ctypes.c_int)
        assert isinstance(out._obj, ctypes.c_ulonglong)
        value = self._gpu(handle).ecc_counts[(error_type.value, counter.value)]
        return self._out("nvmlDeviceGetTotalEccErrors", handle, out, value)

    def nvmlDeviceGetRetiredPages_v2(self, handle, cause, count, addresses, timestamps):
        assert isinstance(cause, ctypes.c_int) and addresses is None and timestamps is None
        code = self._forced("nvmlDeviceGetRetiredPages_v2", handle)
        if code:
            return code
        pages = self._gpu(handle).retired[cause.value]
        wanted = count._obj.value
        count._obj.value = pages
        return 7 if pages > wanted else 0  # NVML_ERROR_INSUFFICIENT_SIZE, with the count set

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle, out):
        return self._out("nvmlDeviceGetRetiredPagesPendingStatus", handle, out, self._gpu(handle).retired_pending)

    def nvmlDeviceGetRemappedRows(self, handle, corr, unc, pending, failure):
        code = self._forced("nvmlDeviceGetRemappedRows", handle)
        if not code:
            corr._obj.value, unc._obj.value, pending._obj.value, failure._obj.value = self._gpu(handle).remapped
        return code

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle, out):
        assert isinstance(out._obj, ctypes.c_ulonglong)
        return self._out("nvmlDeviceGetCurrentClocksEventReasons", handle, out, self._gpu(handle).clocks)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle, out):
        return self._out("nvmlDeviceGetCurrentClocksThrottleReasons", handle, out, self._gpu(handle).clocks)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle, out):
        return self._out("nvmlDeviceGetEnforcedPowerLimit", handle, out, self._gpu(handle).power[0])

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle, out):
        return self._out("nvmlDeviceGetPowerManagementDefaultLimit", handle, out, self._gpu(handle).power[1])

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle, low, high):
        code = self._forced("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        if not code:
            low._obj.value, high._obj.value = self._gpu(handle).power[2:]
        return code

    def nvmlDeviceGetTemperature(self, handle, sensor, out):
        assert isinstance(sensor, ctypes.c_int) and sensor.value == 0
        return self._out("nvmlDeviceGetTemperature", handle, out, self._gpu(handle).temperature)

    def nvmlDeviceGetMemoryBusWidth(self, handle, out):
        return self._out("nvmlDeviceGetMemoryBusWidth", handle, out, self._gpu(handle).memory[0])

    def nvmlDeviceGetMaxClockInfo(self, handle, clock, out):
        assert isinstance(clock, ctypes.c_int) and clock.value == 2
        return self._out("nvmlDeviceGetMaxClockInfo", handle, out, self._gpu(handle).memory[1])

    def nvmlDeviceGetBAR1MemoryInfo(self, handle, out):
        code = self._forced("nvmlDeviceGetBAR1MemoryInfo", handle)
        if not code:
            out._obj.bar1Total = self._gpu(handle).bar1
        return code

    def nvmlDeviceGetNvLinkState(self, handle, link, out):
        assert isinstance(link, ctypes.c_uint)
        code = self._forced("nvmlDeviceGetNvLinkState", handle)
        if code:
            return code
        links = self._gpu(handle).links
        if not links:
            return NOT_SUPPORTED
        if link.value >= len(links):
            return INVALID_ARGUMENT
        out._obj.value = 1 if links[link.value][0] else 0
        return 0

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, handle, link, out):
        assert isinstance(link, ctypes.c_uint)
        code = self._forced("nvmlDeviceGetNvLinkRemotePciInfo_v2", handle)
        if not code:
            far = self._gpu(handle).links[link.value][1]
            if far is None:  # what the H200 VMs answer for their NVSwitch links
                out._obj.busId, out._obj.busIdLegacy = b"FFFFFFFF:FF:FF.0", b"FFFFFFF:FF:FF.0"
                out._obj.domain, out._obj.bus, out._obj.device = 0xFFFFFFFF, 0xFF, 0xFF
            else:
                out._obj.busId = nvml_bus_id(far)
        return code

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link, out):
        assert isinstance(link, ctypes.c_uint) and isinstance(out._obj, ctypes.c_int)
        return self._out("nvmlDeviceGetNvLinkRemoteDeviceType", handle, out, self._gpu(handle).links[link.value][2])

    def nvmlDeviceGetP2PStatus(self, a, b, index, out):
        assert isinstance(index, ctypes.c_int)
        code = self._code("nvmlDeviceGetP2PStatus")
        if not code:
            out._obj.value = self.p2p.get((self._gpu(a).bdf, self._gpu(b).bdf, index.value), 0)
        return code

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b, out):
        code = self._code("nvmlDeviceGetTopologyCommonAncestor")
        if not code:
            out._obj.value = self.topology
        return code

    def nvmlDeviceGetCount_v2(self, out):
        assert isinstance(out._obj, ctypes.c_uint)
        code = self._code("nvmlDeviceGetCount_v2")
        if not code:
            out._obj.value = len(self.gpus)
        return code

    def nvmlDeviceGetFieldValues(self, handle, count, values):
        assert isinstance(count, ctypes.c_int) and isinstance(values, ctypes.Array)
        assert 0 < count.value <= len(values)
        assert _fields(values._type_) == FIELD_VALUE_FIELDS and ctypes.sizeof(values._type_) == FIELD_VALUE_SIZE
        code = self._forced("nvmlDeviceGetFieldValues", handle)
        if code:
            return code
        fields = self._gpu(handle).fields
        for index in range(count.value):
            entry = values[index]
            answer = fields.get((entry.fieldId, entry.scopeId), Error(INVALID_ARGUMENT))
            entry.timestamp = 1760000000000000 + index
            entry.latencyUsec = 3
            if isinstance(answer, Error):
                entry.nvmlReturn = answer.code
                continue
            value_type, value = answer
            entry.nvmlReturn = 0
            entry.valueType = value_type
            if value_type in VALUE_MEMBERS:
                setattr(entry.value, VALUE_MEMBERS[value_type], value)
        return 0

    def nvmlDeviceGetPcieReplayCounter(self, handle, out):
        assert isinstance(out._obj, ctypes.c_uint)
        return self._out("nvmlDeviceGetPcieReplayCounter", handle, out, self._gpu(handle).pcie_replay)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle, link, counter, out):
        assert isinstance(link, ctypes.c_uint) and isinstance(counter, ctypes.c_int)
        assert isinstance(out._obj, ctypes.c_ulonglong) and 0 <= counter.value <= 4
        code = self._forced("nvmlDeviceGetNvLinkErrorCounter", handle)
        if code:
            return code
        gpu = self._gpu(handle)
        if not gpu.links:
            return NOT_SUPPORTED
        if link.value >= len(gpu.links) or counter.value > 3:
            return INVALID_ARGUMENT
        value = gpu.nvlink_errors.get(link.value, (0, 0, 0, 0))[counter.value]
        if isinstance(value, Error):
            return value.code
        out._obj.value = value
        return 0

    def nvmlDeviceGetSramEccErrorStatus(self, handle, out):
        status = out._obj
        assert _fields(type(status)) == SRAM_FIELDS and ctypes.sizeof(status) == SRAM_SIZE
        code = self._forced("nvmlDeviceGetSramEccErrorStatus", handle)
        if code:
            return code
        if status.version != SRAM_VERSION_1:
            return ARGUMENT_VERSION_MISMATCH
        for name in SRAM_FIELDS[1:]:
            setattr(status, name, self._gpu(handle).sram.get(name, 0))
        return 0

    def nvmlDeviceGetGpuFabricInfo(self, handle, out):
        info = out._obj
        assert _fields(type(info)) == FABRIC_FIELDS and ctypes.sizeof(info) == FABRIC_SIZE
        code = self._forced("nvmlDeviceGetGpuFabricInfo", handle)
        if not code:
            info.state, info.status, info.cliqueId = self._gpu(handle).fabric
            info.clusterUuid[:] = list(range(16))
        return code

    def nvmlSystemGetDriverVersion(self, buf, length):
        assert isinstance(length, ctypes.c_uint) and length.value == len(buf)
        code = self._code("nvmlSystemGetDriverVersion")
        if not code:
            buf.value = self.driver.encode()
        return code

    def nvmlSystemGetCudaDriverVersion_v2(self, out):
        return self._out("nvmlSystemGetCudaDriverVersion_v2", None, out, self.cuda)


def nvlinked(bdf_a, bdf_b, count=18):
    """Two GPUs joined by ``count`` direct links (an NVLink bridge)."""
    return [(True, bdf_b, 0)] * count, [(True, bdf_a, 0)] * count


def switched(count=18, switch=None):
    """``count`` links to NVSwitches; ``switch`` None: NVML cannot name their PCI address, as
    on the H200 machines (VMs given two GPUs of an HGX board, NV18 in nvidia-smi topo -m)."""
    return [(True, switch, 2)] * count


def loaded(monkeypatch, nvml_mod, lib):
    """An nvml.Nvml over ``lib`` (ctypes.CDLL replaced)."""
    monkeypatch.setattr(nvml_mod.ctypes, "CDLL", lambda name: lib)
    return nvml_mod.Nvml()
