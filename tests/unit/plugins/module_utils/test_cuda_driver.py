"""Error mapping and polling of the ctypes layer, against a stand-in for libcuda."""

import ctypes

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import cuda_driver

NAMES = {1: (b"CUDA_ERROR_INVALID_VALUE", b"invalid argument"),
         100: (b"CUDA_ERROR_NO_DEVICE", b"no CUDA-capable device is detected"),
         719: (b"CUDA_ERROR_LAUNCH_FAILED", b"unspecified launch failure")}


class FakeLib(object):
    """Answers like libcuda: CUresult codes, strings through char** out-parameters."""

    def __init__(self, codes):
        self.codes = codes  # call name -> list of return codes, consumed in order

    def cuGetErrorName(self, code, out):
        if code not in NAMES:
            return 1
        out._obj.value = NAMES[code][0]
        return 0

    def cuGetErrorString(self, code, out):
        out._obj.value = NAMES[code][1]
        return 0

    def __getattr__(self, name):
        if name.startswith("cu"):
            return lambda *args: self.codes[name].pop(0)
        raise AttributeError(name)


def make(codes):
    drv = object.__new__(cuda_driver.Driver)
    drv.lib = FakeLib(codes)
    drv._elapsed = (drv.lib.cuEventElapsedTime, "cuEventElapsedTime")
    return drv


def test_error_names_call_code_and_text():
    drv = make({"cuMemAlloc_v2": [1]})
    with pytest.raises(cuda_driver.CudaError) as exc:
        drv.mem_alloc(1 << 20)
    err = exc.value
    assert (err.call, err.code, err.name) == ("cuMemAlloc_v2", 1, "CUDA_ERROR_INVALID_VALUE")
    assert str(err) == "cuMemAlloc_v2 failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument"


def test_unknown_code_still_named():
    drv = make({"cuInit": [4242]})
    with pytest.raises(cuda_driver.CudaError) as exc:
        drv.init()
    assert str(exc.value) == "cuInit failed: CUDA error 4242 (4242): unknown error"


def test_event_wait_polls_until_ready_and_maps_errors():
    drv = make({"cuEventQuery": [cuda_driver.CUDA_ERROR_NOT_READY, cuda_driver.CUDA_ERROR_NOT_READY, 0]})
    drv.event_wait(ctypes.c_void_p(1), timeout_s=5)
    drv = make({"cuEventQuery": [719]})
    with pytest.raises(cuda_driver.CudaError) as exc:
        drv.event_wait(ctypes.c_void_p(1), timeout_s=5)
    assert exc.value.name == "CUDA_ERROR_LAUNCH_FAILED"


def test_event_wait_times_out_instead_of_hanging():
    drv = make({"cuEventQuery": [cuda_driver.CUDA_ERROR_NOT_READY] * 100000})
    with pytest.raises(cuda_driver.CopyTimeout) as exc:
        drv.event_wait(ctypes.c_void_p(1), timeout_s=0.05)
    assert "did not finish within" in str(exc.value)


def test_missing_library_is_driver_missing():
    with pytest.raises(cuda_driver.DriverMissing) as exc:
        cuda_driver.Driver("libcuda-does-not-exist.so.1")
    assert "libcuda-does-not-exist.so.1" in str(exc.value)
    assert "NVIDIA driver installed" in str(exc.value)


def test_driver_version_decoding():
    drv = make({"cuDriverGetVersion": [0]})

    def fake(out):
        out._obj.value = 13000
        return 0

    drv.lib.cuDriverGetVersion = fake
    assert drv.driver_version() == "13.0"
