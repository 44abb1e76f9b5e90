"""The NVML link probe over a fake libnvidia-ml: which link a pair uses, and NVML's absence."""

import ctypes

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod

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
