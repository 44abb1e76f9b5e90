"""NVML over a fake libnvidia-ml: which link a pair uses, NVML's absence, and the queries of the
node facts (hw/gpu_facts) with their errors."""

import ctypes

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod
from ansible_collections.gpufleet.tuning.tests.unit import nvml_fake

A, B = "0000:1b:00.0", "0000:43:00.0"


class FakeLib:
    """The NVML calls nvml.Nvml makes; out-parameters arrive as ctypes.byref and are set through
    ``_obj``, as the real library writes through the pointer."""

    def __init__(self, init=0, handles=(A, B), p2p=(0, 0), topology=(0, 10)):
        self.init = init
        self.handles = dict((bdf, n + 1) for n, bdf in enumerate(handles))
        self.p2p = p2p              # (return code, status)
        self.topology = topology    # (return code, level)
        self.calls = []

    def nvmlInit_v2(self):
        self.calls.append("init")
        return self.init

    def nvmlDeviceGetHandleByPciBusId_v2(self, bdf, out):
        self.calls.append(("handle", bdf.value))
        handle = self.handles.get(bdf.value.decode())
        if handle is None:
            return 6  # NVML_ERROR_NOT_FOUND
        out._obj.value = handle
        return 0

    def nvmlDeviceGetP2PStatus(self, a, b, index, out):
        self.calls.append(("p2p", a.value, b.value, index.value))
        code, status = self.p2p
        out._obj.value = status
        return code

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b, out):
        code, level = self.topology
        out._obj.value = level
        return code

    def nvmlShutdown(self):
        self.calls.append("shutdown")
        return 0


def loaded(monkeypatch, lib):
    seen = []

    def cdll(name):
        seen.append(name)
        return lib

    monkeypatch.setattr(nvml_mod.ctypes, "CDLL", cdll)
    nvml = nvml_mod.Nvml()
    assert seen == ["libnvidia-ml.so.1"]
    return nvml


def test_an_nvlink_pair(monkeypatch):
    lib = FakeLib()
    nvml = loaded(monkeypatch, lib)
    assert nvml.available is True and nvml.reason is None
    assert nvml.link(A, B) == ("nvlink", "single PCIe switch")
    # the NVLink capability is the one asked about, for the two handles of the pair
    assert ("p2p", 1, 2, nvml_mod.NVML_P2P_CAPS_INDEX_NVLINK) in lib.calls
    assert ("handle", A.encode()) in lib.calls and ("handle", B.encode()) in lib.calls


@pytest.mark.parametrize("p2p, topology, expected", [
    ((0, 5), (0, 40), ("pcie", "same NUMA node")),          # NVML answered: not over NVLink
    ((0, 2), (0, 70), ("pcie", "level 70")),                # a level this code does not name
    ((3, 0), (0, 50), ("unknown", "across NUMA nodes")),    # the P2P query itself failed
    ((0, 0), (999, 0), ("nvlink", None)),                   # no common ancestor known
])
def test_link_types_and_topologies(monkeypatch, p2p, topology, expected):
    nvml = loaded(monkeypatch, FakeLib(p2p=p2p, topology=topology))
    assert nvml.link(A, B) == expected


def test_a_gpu_nvml_does_not_know_is_unknown(monkeypatch):
    nvml = loaded(monkeypatch, FakeLib(handles=(A,)))
    assert nvml.handle(B) is None
    assert nvml.link(A, B) == ("unknown", None)


def test_without_nvml_every_pair_is_unknown(monkeypatch):
    def missing(name):
        raise OSError("%s: cannot open shared object file: No such file or directory" % name)

    monkeypatch.setattr(nvml_mod.ctypes, "CDLL", missing)
    nvml = nvml_mod.Nvml()
    assert nvml.available is False and nvml.reason.startswith("NVML unavailable: libnvidia-ml.so.1: cannot open")
    assert nvml.link(A, B) == ("unknown", None)
    nvml.shutdown()  # nothing to shut down, and no error


def test_a_failed_init_is_unavailable_and_never_shut_down(monkeypatch):
    lib = FakeLib(init=3)
    nvml = loaded(monkeypatch, lib)
    assert nvml.available is False and nvml.reason == "nvmlInit_v2 failed with 3"
    assert nvml.link(A, B) == ("unknown", None)
    nvml.shutdown()
    assert lib.calls == ["init"]


def test_a_library_without_the_symbol_is_unavailable(monkeypatch):
    class Old:
        pass

    monkeypatch.setattr(nvml_mod.ctypes, "CDLL", lambda name: Old())
    nvml = nvml_mod.Nvml()
    assert nvml.available is False and "nvmlInit_v2" in nvml.reason


def test_shutdown_once(monkeypatch):
    lib = FakeLib()
    nvml = loaded(monkeypatch, lib)
    nvml.shutdown()
    nvml.shutdown()
    assert lib.calls.count("shutdown") == 1 and nvml.available is False
    assert nvml.link(A, B) == ("unknown", None)


def test_handles_are_passed_as_c_strings(monkeypatch):
    lib = FakeLib()
    nvml = loaded(monkeypatch, lib)
    handle = nvml.handle(A)
    assert isinstance(handle, ctypes.c_void_p) and handle.value == 1


# ------------------------------------------------------------- the queries of the node facts


def fake_nvml(monkeypatch, gpus=(A, B), **kw):
    lib = nvml_fake.FakeNvmlLib([g if isinstance(g, nvml_fake.Gpu) else nvml_fake.Gpu(g) for g in gpus], **kw)
    return nvml_fake.loaded(monkeypatch, nvml_mod, lib), lib


def test_struct_layouts_match_nvml_h():
    """nvmlPciInfo_t: char[16], five unsigned int, char[32]; nvmlBAR1Memory_t: three u64."""
    assert ctypes.sizeof(nvml_mod.PciInfo) == 16 + 5 * 4 + 32
    assert nvml_mod.PciInfo.busId.offset == 36 and nvml_mod.PciInfo.domain.offset == 16
    assert ctypes.sizeof(nvml_mod.Bar1Memory) == 24


def test_device_queries(monkeypatch):
    gpu = nvml_fake.Gpu(A, name="NVIDIA H100 80GB HBM3", persistence=0, ecc=(1, 0), clocks=0x5,
                        power=(650000, 700000, 200000, 700000), temperature=41, bar1=128 * 1048576)
    nvml, _lib = fake_nvml(monkeypatch, gpus=(gpu,))
    dev = nvml.device(A)
    assert nvml.name(dev) == "NVIDIA H100 80GB HBM3"
    assert (nvml.persistence_mode(dev), nvml.ecc_mode(dev)) == (False, (True, False))
    assert nvml.ecc_errors(dev, nvml_mod.NVML_MEMORY_ERROR_TYPE_CORRECTED) == {"volatile": 2, "aggregate": 7}
    assert nvml.clock_event_reasons(dev) == (0x5, "nvmlDeviceGetCurrentClocksEventReasons")
    assert (nvml.enforced_power_limit_mw(dev), nvml.power_default_limit_mw(dev),
            nvml.power_limit_constraints_mw(dev)) == (650000, 700000, (200000, 700000))
    assert (nvml.temperature_c(dev), nvml.bar1_total_bytes(dev)) == (41, 128 * 1048576)
    assert nvml.remapped_rows(dev) == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert (nvml.driver_version(), nvml.cuda_driver_version()) == ("580.159.04", "13.0")


@pytest.mark.parametrize("raw, text", [(13000, "13.0"), (12040, "12.4"), (11080, "11.8")])
def test_cuda_driver_version(monkeypatch, raw, text):
    nvml, _lib = fake_nvml(monkeypatch, cuda=raw)
    assert nvml.cuda_driver_version() == text


def test_errors_name_the_function_the_text_and_the_constant(monkeypatch):
    nvml, lib = fake_nvml(monkeypatch, codes={"nvmlDeviceGetEccMode": 3})
    dev = nvml.device(A)
    with pytest.raises(nvml_mod.NvmlError) as exc:
        nvml.ecc_mode(dev)
    assert str(exc.value) == "nvmlDeviceGetEccMode: Not Supported (NVML_ERROR_NOT_SUPPORTED)"
    assert (exc.value.function, exc.value.code) == ("nvmlDeviceGetEccMode", 3)
    # without nvmlErrorString: the constant's name alone; an unlisted code by number
    lib.missing.add("nvmlErrorString")
    assert nvml.error_text(3) == "NVML_ERROR_NOT_SUPPORTED" and nvml.error_text(77) == "NVML error 77"


def test_a_function_missing_from_an_older_library(monkeypatch):
    nvml, _lib = fake_nvml(monkeypatch, missing={"nvmlDeviceGetCurrentClocksEventReasons",
                                                 "nvmlDeviceGetRemappedRows"})
    dev = nvml.device(A)
    assert nvml.clock_event_reasons(dev) == (0x1, "nvmlDeviceGetCurrentClocksThrottleReasons")
    with pytest.raises(nvml_mod.NvmlError, match="nvmlDeviceGetRemappedRows: not in this libnvidia-ml") as exc:
        nvml.remapped_rows(dev)
    assert exc.value.code == nvml_mod.NVML_ERROR_FUNCTION_NOT_FOUND


def test_queries_without_nvml_say_why(monkeypatch):
    def missing(name):
        raise OSError("%s: cannot open shared object file: No such file or directory" % name)

    monkeypatch.setattr(nvml_mod.ctypes, "CDLL", missing)
    nvml = nvml_mod.Nvml()
    with pytest.raises(nvml_mod.NvmlError) as exc:
        nvml.device(A)
    assert exc.value.code is None and str(exc.value).startswith("NVML unavailable: libnvidia-ml.so.1")
    nvml_ok, _lib = fake_nvml(monkeypatch)
    nvml_ok.shutdown()
    with pytest.raises(nvml_mod.NvmlError, match="NVML was shut down"):
        nvml_ok.driver_version()


def test_device_is_found_by_bus_id_and_checked(monkeypatch):
    nvml, lib = fake_nvml(monkeypatch)
    assert nvml.device(B).value == 2
    with pytest.raises(nvml_mod.NvmlError, match="Not Found .NVML_ERROR_NOT_FOUND."):
        nvml.device("0000:99:00.0")
    # a handle whose PCI info names another GPU is not that GPU
    lib.gpus[1].bdf = "0000:44:00.0"
    lib.nvmlDeviceGetHandleByPciBusId_v2 = lambda bus, out: (setattr(out._obj, "value", 2), 0)[1]
    with pytest.raises(nvml_mod.NvmlError, match="the handle for 0000:43:00.0 reports bus id 00000000:44:00.0"):
        nvml.device(B)
    lib.gpus[1].bdf = "0000:zz:00.0"   # nonsense from the library: an NVML error, never a crash
    lib.nvmlDeviceGetPciInfo_v3 = lambda handle, out: (setattr(out._obj, "busId", b"garbage"), 0)[1]
    with pytest.raises(nvml_mod.NvmlError, match="nvmlDeviceGetPciInfo_v3: answers device 'garbage' is not a PCI"):
        nvml.device(B)


def test_bus_ids_as_sysfs_names_them():
    info = nvml_mod.PciInfo()
    info.busId = b"00000000:1B:00.0"
    assert nvml_mod.bus_id(info) == "0000:1b:00.0"
    info = nvml_mod.PciInfo()
    info.busIdLegacy = b"0000:C1:00.0"
    assert nvml_mod.bus_id(info) == "0000:c1:00.0"


def test_nvlinks(monkeypatch):
    links_a, links_b = nvml_fake.nvlinked(A, B, 18)
    links_a[5] = (False, B)
    nvml, lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, links=links_a), nvml_fake.Gpu(B)))
    found = nvml.nvlinks(nvml.device(A))
    assert [link["link"] for link in found] == list(range(18))   # links 18-35: INVALID_ARGUMENT, left out
    assert found[5] == {"link": 5, "active": False, "remote_type": None, "remote_bdf": None}
    assert set((link["remote_type"], link["remote_bdf"]) for link in found if link["active"]) == {("gpu", B)}
    assert lib.calls.count("nvmlDeviceGetNvLinkState") == nvml_mod.NVML_NVLINK_MAX_LINKS
    assert nvml.nvlinks(nvml.device(B)) == []   # NOT_SUPPORTED on every link: no NVLink
    # the remote end alone failing is that link's answer; the state failing is the whole list's
    lib.codes["nvmlDeviceGetNvLinkRemotePciInfo_v2"] = 999
    remote = nvml.nvlinks(nvml.device(A))[0]["remote_bdf"]
    assert isinstance(remote, nvml_mod.NvmlError) and "NVML_ERROR_UNKNOWN" in str(remote)
    lib.codes["nvmlDeviceGetNvLinkState"] = 15
    with pytest.raises(nvml_mod.NvmlError, match="GPU is lost"):
        nvml.nvlinks(nvml.device(A))


def test_nvswitch_links_as_the_h200_vms_answer(monkeypatch):
    """Every far end a switch, whose PCI address NVML gives as FFFFFFFF:FF:FF.0 (not in the VM)."""
    nvml, lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, links=nvml_fake.switched(18)),))
    found = nvml.nvlinks(nvml.device(A))
    assert len(found) == 18 and set(link["remote_type"] for link in found) == {"switch"}
    far = found[0]["remote_bdf"]
    assert isinstance(far, nvml_mod.NvmlError) and str(far).startswith(
        "nvmlDeviceGetNvLinkRemotePciInfo_v2: answers FFFFFFFF:FF:FF.0: no PCI address for the far end")
    # an older library without nvmlDeviceGetNvLinkRemoteDeviceType: the type alone is unknown
    lib.missing.add("nvmlDeviceGetNvLinkRemoteDeviceType")
    kind = nvml.nvlinks(nvml.device(A))[0]["remote_type"]
    assert isinstance(kind, nvml_mod.NvmlError) and kind.code == nvml_mod.NVML_ERROR_FUNCTION_NOT_FOUND


def test_retired_pages_count_query(monkeypatch):
    nvml, lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, retired=(4, 0)),))
    # a count of 0 asked with pageCount 0 is success; 4 pages answer INSUFFICIENT_SIZE with the count
    assert nvml.retired_pages(nvml.device(A)) == {"multiple_single_bit_ecc": 4, "double_bit_ecc": 0}
    lib.codes["nvmlDeviceGetRetiredPages_v2"] = 3
    with pytest.raises(nvml_mod.NvmlError, match="NOT_SUPPORTED"):
        nvml.retired_pages(nvml.device(A))


@pytest.mark.parametrize("status, name", [
    (0, "ok"), (1, "chipset_not_supported"), (2, "gpu_not_supported"), (3, "ioh_topology_not_supported"),
    (4, "disabled_by_regkey"), (5, "not_supported"), (6, "unknown"), (9, "status_9"),
])
def test_p2p_status_names(monkeypatch, status, name):
    nvml, _lib = fake_nvml(monkeypatch, p2p={(A, B, nvml_mod.NVML_P2P_CAPS_INDEX_READ): status})
    assert nvml.p2p_status(nvml.device(A), nvml.device(B), nvml_mod.NVML_P2P_CAPS_INDEX_READ) == name


@pytest.mark.parametrize("level, name", [(0, "internal"), (10, "single"), (20, "multiple"), (30, "hostbridge"),
                                         (40, "node"), (50, "system"), (60, "level_60")])
def test_common_ancestor_names(monkeypatch, level, name):
    nvml, _lib = fake_nvml(monkeypatch, topology=level)
    assert nvml.common_ancestor(nvml.device(A), nvml.device(B)) == name


def test_clock_event_names():
    assert nvml_mod.clock_event_names(0) == []
    assert nvml_mod.clock_event_names(0x1 | 0x8 | 0x100) == ["gpu_idle", "hw_slowdown", "display_clock_setting"]
    assert nvml_mod.clock_event_names(0x200 | 0x4) == ["sw_power_cap", "bit_9"]


def test_a_ctypes_failure_is_an_nvml_error(monkeypatch):
    nvml, lib = fake_nvml(monkeypatch)

    def bad(*args):
        raise ctypes.ArgumentError("argument 2: wrong type")

    lib.nvmlSystemGetDriverVersion = bad
    with pytest.raises(nvml_mod.NvmlError, match="nvmlSystemGetDriverVersion: the call failed in ctypes"):
        nvml.driver_version()


# ------------------------------------------------ health: field values, error counters, fabric


def test_health_struct_layouts_match_nvml_h():
    """nvmlFieldValue_t: uint, uint, long long, long long, two int enums, the 8-byte union;
    nvmlEccSramErrorStatus_v1_t: uint (padded to 8), eleven u64, uint (padded); the v1
    nvmlGpuFabricInfo_t: uchar[16], an int enum, uint, uchar (padded to 4)."""
    assert ctypes.sizeof(nvml_mod.Value) == 8 and ctypes.alignment(nvml_mod.Value) == 8
    assert ctypes.sizeof(nvml_mod.FieldValue) == 40
    assert (nvml_mod.FieldValue.timestamp.offset, nvml_mod.FieldValue.valueType.offset,
            nvml_mod.FieldValue.nvmlReturn.offset, nvml_mod.FieldValue.value.offset) == (8, 24, 28, 32)
    assert ctypes.sizeof(nvml_mod.EccSramErrorStatus) == 104
    assert nvml_mod.EccSramErrorStatus.aggregateUncParity.offset == 8
    assert nvml_mod.EccSramErrorStatus.bThresholdExceeded.offset == 96
    assert nvml_mod.struct_version(nvml_mod.EccSramErrorStatus, 1) == 0x01000068
    assert ctypes.sizeof(nvml_mod.GpuFabricInfo) == 28
    assert (nvml_mod.GpuFabricInfo.status.offset, nvml_mod.GpuFabricInfo.cliqueId.offset,
            nvml_mod.GpuFabricInfo.state.offset) == (16, 20, 24)
    # the fake's independent copy of nvml.h agrees
    assert nvml_fake.SRAM_VERSION_1 == nvml_mod.struct_version(nvml_mod.EccSramErrorStatus, 1)


def test_device_count(monkeypatch):
    nvml, lib = fake_nvml(monkeypatch, gpus=(A, B, "0000:c1:00.0"))
    assert nvml.device_count() == 3
    lib.codes["nvmlDeviceGetCount_v2"] = 999
    with pytest.raises(nvml_mod.NvmlError, match="NVML_ERROR_UNKNOWN") as exc:
        nvml.device_count()
    assert exc.value.code == 999


def test_field_values_read_through_the_member_valuetype_names(monkeypatch):
    fields = {(100, 0): (0, 2.5), (101, 0): (1, 4000000000), (102, 0): (2, 2 ** 40), (103, 0): (3, 2 ** 63 + 5),
              (104, 0): (4, -(2 ** 40)), (105, 0): (5, -7), (106, 0): (6, 65535), (161, 3): (3, 12),
              (107, 0): (9, 1)}
    nvml, lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, fields=fields),))
    dev = nvml.device(A)
    requests = [(100, 0), (101, 0), (102, 0), (103, 0), (104, 0), (105, 0), (106, 0), (161, 3)]
    assert nvml.field_values(dev, requests) == [2.5, 4000000000, 2 ** 40, 2 ** 63 + 5, -(2 ** 40), -7, 65535, 12]
    # a value type nvml.h does not define is that entry's error, never a guess
    odd = nvml.field_values(dev, [(107, 0)])[0]
    assert isinstance(odd, nvml_mod.NvmlError) and odd.code == nvml_mod.NVML_SUCCESS
    assert "field 107 (scope 0) answers value type 9" in str(odd)
    assert nvml.field_values(dev, []) == [] and lib.calls.count("nvmlDeviceGetFieldValues") == 2


def test_a_field_entry_with_its_own_error(monkeypatch):
    fields = {(173, 0): (3, 9), (174, 0): nvml_fake.Error(3)}
    nvml, _lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, fields=fields),))
    good, bad, unknown_id = nvml.field_values(nvml.device(A), [(173, 0), (174, 0), (9999, 0)])
    assert good == 9
    assert isinstance(bad, nvml_mod.NvmlError) and (bad.function, bad.code) == ("nvmlDeviceGetFieldValues", 3)
    assert str(bad) == "nvmlDeviceGetFieldValues: field 174 (scope 0): Not Supported (NVML_ERROR_NOT_SUPPORTED)"
    assert isinstance(unknown_id, nvml_mod.NvmlError) and unknown_id.code == nvml_mod.NVML_ERROR_INVALID_ARGUMENT


def test_field_values_call_failing_raises(monkeypatch):
    nvml, lib = fake_nvml(monkeypatch, codes={("nvmlDeviceGetFieldValues", B): 15})
    assert nvml.field_values(nvml.device(A), [(230, 0)]) == [0]
    with pytest.raises(nvml_mod.NvmlError, match="GPU is lost") as exc:
        nvml.field_values(nvml.device(B), [(230, 0)])
    assert exc.value.code == nvml_mod.NVML_ERROR_GPU_IS_LOST
    lib.missing.add("nvmlDeviceGetFieldValues")
    with pytest.raises(nvml_mod.NvmlError) as exc:
        nvml.field_values(nvml.device(A), [(230, 0)])
    assert exc.value.code == nvml_mod.NVML_ERROR_FUNCTION_NOT_FOUND


@pytest.mark.parametrize("value, name", [(0, "none"), (1, "gpu_reset"), (2, "node_reboot"), (3, "drain_p2p"),
                                         (4, "drain_and_reset"), (5, "recover_imex_domain"), (6, "action_6")])
def test_recovery_action_names(monkeypatch, value, name):
    nvml, lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, recovery_action=value),))
    assert nvml.recovery_action(nvml.device(A)) == name
    assert "nvmlDeviceGetFieldValues" in lib.calls


@pytest.mark.parametrize("code", [nvml_mod.NVML_ERROR_NOT_SUPPORTED, nvml_mod.NVML_ERROR_INVALID_ARGUMENT])
def test_recovery_action_from_a_driver_before_r575(monkeypatch, code):
    """The field id is unknown to the driver: the entry answers the error, the code is kept."""
    nvml, _lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, recovery_action=nvml_fake.Error(code)),))
    with pytest.raises(nvml_mod.NvmlError, match="field 230 .scope 0.") as exc:
        nvml.recovery_action(nvml.device(A))
    assert (exc.value.function, exc.value.code) == ("nvmlDeviceGetFieldValues", code)


def test_recovery_action_read_through_another_integer_type(monkeypatch):
    gpu = nvml_fake.Gpu(A, fields={(230, 0): (3, 2)})   # unsigned long long
    nvml, _lib = fake_nvml(monkeypatch, gpus=(gpu,))
    assert nvml.recovery_action(nvml.device(A)) == "node_reboot"


def test_pcie_replay_counter(monkeypatch):
    nvml, lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, pcie_replay=17), nvml_fake.Gpu(B)))
    assert (nvml.pcie_replay_counter(nvml.device(A)), nvml.pcie_replay_counter(nvml.device(B))) == (17, 0)
    lib.codes[("nvmlDeviceGetPcieReplayCounter", B)] = 15
    with pytest.raises(nvml_mod.NvmlError, match="GPU is lost .NVML_ERROR_GPU_IS_LOST.") as exc:
        nvml.pcie_replay_counter(nvml.device(B))
    assert exc.value.code == 15


@pytest.mark.parametrize("method, function, args", [
    ("pcie_replay_counter", "nvmlDeviceGetPcieReplayCounter", ()),
    ("sram_ecc_status", "nvmlDeviceGetSramEccErrorStatus", ()),
    ("fabric_info", "nvmlDeviceGetGpuFabricInfo", ()),
    ("recovery_action", "nvmlDeviceGetFieldValues", ()),
])
@pytest.mark.parametrize("how", ["not_supported", "missing"])
def test_not_supported_and_missing_raise_with_the_code(monkeypatch, method, function, args, how):
    if how == "missing":
        nvml, _lib = fake_nvml(monkeypatch, missing={function})
        code = nvml_mod.NVML_ERROR_FUNCTION_NOT_FOUND
    else:
        nvml, _lib = fake_nvml(monkeypatch, codes={function: nvml_mod.NVML_ERROR_NOT_SUPPORTED})
        code = nvml_mod.NVML_ERROR_NOT_SUPPORTED
    with pytest.raises(nvml_mod.NvmlError) as exc:
        getattr(nvml, method)(nvml.device(A), *args)
    assert (exc.value.function, exc.value.code) == (function, code)


def test_nvlink_error_counters(monkeypatch):
    links, _far = nvml_fake.nvlinked(A, B, 18)
    gpu = nvml_fake.Gpu(A, links=links, nvlink_errors={2: (5, 1, 0, 3), 4: (0, nvml_fake.Error(3), 7, 0)})
    nvml, lib = fake_nvml(monkeypatch, gpus=(gpu, nvml_fake.Gpu(B)))
    dev = nvml.device(A)
    assert nvml.nvlink_error_counters(dev, 0) == {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}
    assert nvml.nvlink_error_counters(dev, 2) == {"replay": 5, "recovery": 1, "crc_flit": 0, "crc_data": 3}
    # one counter failing is that counter's answer
    one = nvml.nvlink_error_counters(dev, 4)
    assert (one["replay"], one["crc_flit"], one["crc_data"]) == (0, 7, 0)
    assert isinstance(one["recovery"], nvml_mod.NvmlError) and one["recovery"].code == 3
    # a link the GPU lacks: INVALID_ARGUMENT for each counter, not a failure of the call
    beyond = nvml.nvlink_error_counters(dev, 20)
    assert set(err.code for err in beyond.values()) == {nvml_mod.NVML_ERROR_INVALID_ARGUMENT}
    # every counter asked with the header's enum values, for the link asked
    assert lib.calls.count("nvmlDeviceGetNvLinkErrorCounter") == 16


def test_nvlink_error_counters_on_blackwell(monkeypatch):
    """Blackwell answers NOT_SUPPORTED for the four DL counters: the dict holds the errors."""
    links = nvml_fake.switched(18)
    nvml, _lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, name="NVIDIA B200", links=links),),
                           codes={"nvmlDeviceGetNvLinkErrorCounter": 3})
    found = nvml.nvlink_error_counters(nvml.device(A), 0)
    assert sorted(found) == ["crc_data", "crc_flit", "recovery", "replay"]
    assert all(isinstance(err, nvml_mod.NvmlError) and err.code == 3 for err in found.values())
    assert str(found["replay"]) == "nvmlDeviceGetNvLinkErrorCounter: Not Supported (NVML_ERROR_NOT_SUPPORTED)"


@pytest.mark.parametrize("code, missing", [(15, ()), (0, ("nvmlDeviceGetNvLinkErrorCounter",))])
def test_nvlink_error_counters_raise_for_the_gpu_or_the_library(monkeypatch, code, missing):
    links, _far = nvml_fake.nvlinked(A, B, 18)
    codes = {"nvmlDeviceGetNvLinkErrorCounter": code} if code else {}
    nvml, _lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, links=links),), codes=codes, missing=set(missing))
    with pytest.raises(nvml_mod.NvmlError) as exc:
        nvml.nvlink_error_counters(nvml.device(A), 0)
    assert exc.value.code == (code or nvml_mod.NVML_ERROR_FUNCTION_NOT_FOUND)


def test_sram_ecc_status(monkeypatch):
    sram = {"volatileUncParity": 1, "volatileUncSecDed": 2, "aggregateUncParity": 4, "aggregateUncSecDed": 8,
            "volatileCor": 16, "aggregateCor": 32, "aggregateUncBucketL2": 12, "bThresholdExceeded": 1}
    nvml, lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, sram=sram), nvml_fake.Gpu(B)))
    assert nvml.sram_ecc_status(nvml.device(A)) == {
        "uncorrected_volatile": 3, "uncorrected_aggregate": 12, "corrected_volatile": 16,
        "corrected_aggregate": 32, "threshold_exceeded": True}
    assert nvml.sram_ecc_status(nvml.device(B)) == {
        "uncorrected_volatile": 0, "uncorrected_aggregate": 0, "corrected_volatile": 0,
        "corrected_aggregate": 0, "threshold_exceeded": False}
    lib.codes["nvmlDeviceGetSramEccErrorStatus"] = 4
    with pytest.raises(nvml_mod.NvmlError, match="NVML_ERROR_NO_PERMISSION") as exc:
        nvml.sram_ecc_status(nvml.device(A))
    assert exc.value.code == 4


def test_sram_ecc_status_sends_the_struct_version(monkeypatch):
    """The fake answers ARGUMENT_VERSION_MISMATCH unless version is sizeof | 1 << 24."""
    nvml, _lib = fake_nvml(monkeypatch)
    monkeypatch.setattr(nvml_mod, "struct_version", lambda struct, version: 104)
    with pytest.raises(nvml_mod.NvmlError) as exc:
        nvml.sram_ecc_status(nvml.device(A))
    assert exc.value.code == nvml_mod.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


@pytest.mark.parametrize("fabric, expected", [
    ((3, 0), {"state": "completed", "status": "ok"}),
    ((3, 9), {"state": "completed", "status": "NVML_ERROR_DRIVER_NOT_LOADED"}),
    ((3, 77), {"state": "completed", "status": "error_77"}),
    ((2, 0), {"state": "in_progress", "status": None}),
    ((1, 0), {"state": "not_started", "status": None}),
    ((0, 3), {"state": "not_supported", "status": None}),
    ((7, 0), {"state": "state_7", "status": None}),
])
def test_fabric_info(monkeypatch, fabric, expected):
    nvml, _lib = fake_nvml(monkeypatch, gpus=(nvml_fake.Gpu(A, fabric=fabric),))
    assert nvml.fabric_info(nvml.device(A)) == expected


def test_fabric_info_gpu_lost(monkeypatch):
    nvml, _lib = fake_nvml(monkeypatch, codes={"nvmlDeviceGetGpuFabricInfo": 15})
    with pytest.raises(nvml_mod.NvmlError, match="GPU is lost") as exc:
        nvml.fabric_info(nvml.device(A))
    assert exc.value.code == nvml_mod.NVML_ERROR_GPU_IS_LOST


def test_health_queries_without_nvml(monkeypatch):
    nvml, _lib = fake_nvml(monkeypatch)
    dev = nvml.device(A)
    nvml.shutdown()
    for query in (nvml.device_count, lambda: nvml.recovery_action(dev),
                  lambda: nvml.nvlink_error_counters(dev, 0), lambda: nvml.fabric_info(dev)):
        with pytest.raises(nvml_mod.NvmlError, match="NVML was shut down") as exc:
            query()
        assert exc.value.code is None
