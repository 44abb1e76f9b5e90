"""Error mapping and polling of the ctypes layer, against a stand-in for libcuda."""

import ctypes
import os
import stat

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver

NAMES = {1: (b"CUDA_ERROR_INVALID_VALUE", b"invalid argument"),
         100: (b"CUDA_ERROR_NO_DEVICE", b"no CUDA-capable device is detected"),
         719: (b"CUDA_ERROR_LAUNCH_FAILED", b"unspecified launch failure")}


class FakeLib:
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
        cuda_driver.Driver("libcuda.so.999")
    assert "libcuda.so.999" in str(exc.value)
    assert "NVIDIA driver installed" in str(exc.value)


def test_driver_version_decoding():
    drv = make({"cuDriverGetVersion": [0]})

    def fake(out):
        out._obj.value = 13000
        return 0

    drv.lib.cuDriverGetVersion = fake
    assert drv.driver_version() == "13.0"


# --- which library may be loaded (the module runs as root) ------------------------------------
class St:
    def __init__(self, mode, uid=0):
        self.st_mode = mode
        self.st_uid = uid


def tree_lstat(tmp_path, overrides=None):
    """lstat for a test tree: its ancestors (/tmp is 1777) count as root's 0755 folders, and its
    own files keep their real type and mode, owned by root unless ``overrides`` says otherwise."""
    top = str(tmp_path)

    def lstat(path):
        if overrides and path in overrides:
            return overrides[path]
        if path != top and not path.startswith(top + os.sep):
            return St(stat.S_IFDIR | 0o755)
        return St(os.lstat(path).st_mode)
    return lstat


def driver_tree(tmp_path):
    lib = tmp_path / "usr" / "lib"
    lib.mkdir(parents=True)
    os.chmod(str(tmp_path / "usr"), 0o755)
    os.chmod(str(lib), 0o755)
    target = lib / "libcuda.so.580.159.04"
    target.write_bytes(b"\x7fELF")
    os.chmod(str(target), 0o644)
    (lib / "libcuda.so.1").symlink_to("libcuda.so.580.159.04")
    return lib, target


@pytest.mark.parametrize("name", ["libcuda.so", "libcuda.so.1", "libcuda.so.580.159.04"])
def test_a_bare_libcuda_name_goes_to_the_dynamic_loader(name):
    assert cuda_driver.trusted_library(name) == name


@pytest.mark.parametrize("value, fragment", [
    ("libevil.so", "a bare name must be libcuda.so or libcuda.so.<version>"),
    ("libnvidia-ml.so.1", "a bare name must be libcuda.so"),
    ("libcuda.so.1x", "a bare name must be libcuda.so"),
    ("libcuda.so.", "a bare name must be libcuda.so"),
    ("libcuda.so.1\n", "a bare name must be libcuda.so"),
    ("LIBCUDA.SO.1", "a bare name must be libcuda.so"),
    ("libcuda-absent.so.1", "a bare name must be libcuda.so"),
    ("./libcuda.so.1", "a relative path"),
    ("lib/libcuda.so.1", "a relative path"),
    ("../libcuda.so.1", "a relative path"),
    ("/usr/lib/../lib/libcuda.so.1", "it holds '..'"),
    ("/usr/lib/x86_64-linux-gnu/..", "it holds '..'"),
    ("/usr/lib/libcuda.so.1\0", "NUL"),
    ("", "give a bare name"),
    (None, "give a bare name"),
    (1, "give a bare name"),
])
def test_other_names_and_paths_are_refused_naming_the_value(value, fragment):
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(value)
    assert fragment in str(exc.value)
    assert str(exc.value).startswith("cuda_library=%r is not loaded" % (value,))


def test_an_absolute_path_root_owns_all_the_way_up_is_loaded_by_its_real_path(tmp_path):
    lib, target = driver_tree(tmp_path)
    lstat = tree_lstat(tmp_path)
    assert cuda_driver.trusted_library(str(target), lstat=lstat) == str(target)
    # Through the driver's own symbolic link, and through a link in another trusted folder.
    assert cuda_driver.trusted_library(str(lib / "libcuda.so.1"), lstat=lstat) == str(target)
    (tmp_path / "usr" / "libcuda.so").symlink_to(lib / "libcuda.so.1")
    assert cuda_driver.trusted_library(str(tmp_path / "usr" / "libcuda.so"), lstat=lstat) == str(target)


@pytest.mark.parametrize("mode, who", [(0o664, "group"), (0o646, "others"), (0o666, "group and others")])
def test_a_library_others_can_write_is_refused(tmp_path, mode, who):
    lib, target = driver_tree(tmp_path)
    os.chmod(str(target), mode)
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(str(lib / "libcuda.so.1"), lstat=tree_lstat(tmp_path))
    assert "the file %s is writable by %s" % (target, who) in str(exc.value)
    assert str(exc.value).startswith("cuda_library=%r" % str(lib / "libcuda.so.1"))


@pytest.mark.parametrize("folder_mode", [0o775, 0o777, 0o1777])
def test_a_writable_folder_anywhere_above_is_refused(tmp_path, folder_mode):
    lib, target = driver_tree(tmp_path)
    os.chmod(str(tmp_path / "usr"), folder_mode)
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(str(target), lstat=tree_lstat(tmp_path))
    assert "the folder %s is writable by" % (tmp_path / "usr") in str(exc.value)


def test_a_trusted_link_to_a_file_in_a_writable_folder_is_refused(tmp_path):
    lib, target = driver_tree(tmp_path)
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(str(drop), 0o777)
    evil = drop / "libcuda.so.1"
    evil.write_bytes(b"\x7fELF")
    os.chmod(str(evil), 0o644)
    (lib / "libcuda.so").symlink_to(evil)
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(str(lib / "libcuda.so"), lstat=tree_lstat(tmp_path))
    assert "the folder %s is writable by group and others" % drop in str(exc.value)


def test_a_file_or_folder_not_owned_by_root_is_refused(tmp_path):
    lib, target = driver_tree(tmp_path)
    mine = {str(target): St(stat.S_IFREG | 0o644, uid=1000)}
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(str(target), lstat=tree_lstat(tmp_path, mine))
    assert "the file %s belongs to uid 1000, not root" % target in str(exc.value)
    theirs = {str(lib): St(stat.S_IFDIR | 0o755, uid=1000)}
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(str(target), lstat=tree_lstat(tmp_path, theirs))
    assert "the folder %s belongs to uid 1000" % lib in str(exc.value)


def test_a_folder_or_missing_path(tmp_path):
    lib, target = driver_tree(tmp_path)
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(str(lib), lstat=tree_lstat(tmp_path))
    assert "is not a regular file" in str(exc.value)
    with pytest.raises(cuda_driver.DriverMissing) as exc:
        cuda_driver.trusted_library(str(lib / "libcuda.so.2"), lstat=tree_lstat(tmp_path))
    assert "no such file" in str(exc.value)


def test_the_real_check_refuses_a_library_in_a_world_writable_folder(tmp_path):
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(str(drop), 0o777)
    (drop / "libcuda.so.1").write_bytes(b"\x7fELF")
    with pytest.raises(cuda_driver.UntrustedLibrary) as exc:
        cuda_driver.trusted_library(str(drop / "libcuda.so.1"))
    assert "the folder %s is writable by" % drop in str(exc.value)


def test_the_driver_checks_before_it_loads(monkeypatch):
    def explode(path):
        raise AssertionError("nothing may be loaded")

    monkeypatch.setattr(cuda_driver.ctypes, "CDLL", explode)
    for value in ("./libcuda.so.1", "/tmp/libcuda.so.1", "libevil.so"):
        with pytest.raises((cuda_driver.UntrustedLibrary, cuda_driver.DriverMissing)):
            cuda_driver.Driver(value)


def test_a_trusted_system_library_is_loaded_by_its_real_path():
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    real = os.path.realpath(libc)
    if not os.path.exists(libc) or os.stat(real).st_uid != 0:
        pytest.skip("no root-owned %s here" % libc)
    try:
        resolved = cuda_driver.trusted_library(libc)
    except cuda_driver.UntrustedLibrary as exc:
        pytest.skip("this machine's library folders are not root-only: %s" % exc)
    assert resolved == real
    # It loads (libc is not libcuda, so the driver's own symbols are missing).
    with pytest.raises(cuda_driver.DriverMissing) as exc:
        cuda_driver.Driver(libc)
    assert "libcuda has none of" in str(exc.value)


# --- the calls that hold a stream (latency as p2pBandwidthLatencyTest measures it) ---------------
class StrictLib:
    """Only the symbols given exist (a driver without cuStreamWaitValue32_v2 is a real case);
    each records its arguments and answers with the given function or 0."""

    def __init__(self, **funcs):
        self.funcs = funcs
        self.calls = []

    def __getattr__(self, name):
        if name not in self.funcs:
            raise AttributeError(name)

        def call(*args):
            self.calls.append((name, args))
            func = self.funcs[name]
            return func(*args) if callable(func) else func
        return call


def strict(**funcs):
    drv = object.__new__(cuda_driver.Driver)
    funcs.setdefault("cuGetErrorName", FakeLib({}).cuGetErrorName)
    funcs.setdefault("cuGetErrorString", FakeLib({}).cuGetErrorString)
    drv.lib = StrictLib(**funcs)
    return drv


def test_cuda_h_values_of_the_hold():
    assert (cuda_driver.CU_MEMHOSTALLOC_PORTABLE, cuda_driver.CU_MEMHOSTALLOC_DEVICEMAP) == (0x01, 0x02)
    assert (cuda_driver.CU_STREAM_WAIT_VALUE_GEQ, cuda_driver.CU_STREAM_WAIT_VALUE_EQ) == (0x0, 0x1)
    assert cuda_driver.CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 == 92
    assert cuda_driver.CUDA_ERROR_NOT_SUPPORTED == 801
    assert issubclass(cuda_driver.HoldTimeout, cuda_driver.CopyTimeout)


def attribute(value):
    def fake(out, attr, dev):
        out._obj.value = value if attr.value == cuda_driver.CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 else -1
        return 0
    return fake


def test_wait_value_support_prefers_v2_and_asks_the_device_for_v1():
    assert strict(cuStreamWaitValue32_v2=0).stream_wait_value_support(0)[0] is True
    ok, why = strict(cuStreamWaitValue32=0, cuDeviceGetAttribute=attribute(0)).stream_wait_value_support(0)
    assert ok is False and "CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS is 0" in why
    assert strict(cuStreamWaitValue32=0, cuDeviceGetAttribute=attribute(1)).stream_wait_value_support(0)[0] is True
    ok, why = strict().stream_wait_value_support(0)
    assert ok is False and "no cuStreamWaitValue32" in why


def test_stream_wait_value32_calls_v2_with_cuda_h_types_and_maps_not_supported():
    drv = strict(cuStreamWaitValue32_v2=0, cuStreamWaitValue32=1)
    stream = ctypes.c_void_p(0x1234)
    drv.stream_wait_value32(stream, 0x7F0000001000, 7)
    [(name, args)] = drv.lib.calls
    assert name == "cuStreamWaitValue32_v2" and args[0] is stream
    assert isinstance(args[1], ctypes.c_uint64) and args[1].value == 0x7F0000001000
    assert isinstance(args[2], ctypes.c_uint32) and args[2].value == 7
    assert args[3].value == cuda_driver.CU_STREAM_WAIT_VALUE_GEQ
    NAMES[801] = (b"CUDA_ERROR_NOT_SUPPORTED", b"operation not supported")
    try:
        drv = strict(cuStreamWaitValue32=801)
        with pytest.raises(cuda_driver.CudaError) as exc:
            drv.stream_wait_value32(stream, 0x1000, 1)
        assert (exc.value.call, exc.value.name) == ("cuStreamWaitValue32", "CUDA_ERROR_NOT_SUPPORTED")
    finally:
        del NAMES[801]


def test_mapped_host_memory_flags_device_pointer_and_a_real_store():
    buf = ctypes.create_string_buffer(4)
    address = ctypes.addressof(buf)

    def alloc(out, size, flags):
        assert size.value == 4 and flags.value == 0x03  # PORTABLE | DEVICEMAP
        out._obj.value = address
        return 0

    def device_pointer(out, host, flags):
        assert host.value == address and flags.value == 0
        out._obj.value = address
        return 0

    drv = strict(cuMemHostAlloc=alloc, cuMemHostGetDevicePointer_v2=device_pointer, cuMemFreeHost=0)
    assert drv.mem_host_alloc_mapped(4) == address
    assert drv.mem_host_device_pointer(address) == address
    drv.host_write_u32(address, 0x1_0000_0005)  # kept to 32 bits
    assert drv.host_read_u32(address) == 5 and buf.raw == b"\x05\x00\x00\x00"
    drv.mem_free_host(address)
    assert drv.lib.calls[-1][0] == "cuMemFreeHost" and drv.lib.calls[-1][1][0].value == address


def test_event_query_done_pending_or_error():
    assert strict(cuEventQuery=0).event_query(ctypes.c_void_p(1)) is True
    assert strict(cuEventQuery=cuda_driver.CUDA_ERROR_NOT_READY).event_query(ctypes.c_void_p(1)) is False
    with pytest.raises(cuda_driver.CudaError) as exc:
        strict(cuEventQuery=719).event_query(ctypes.c_void_p(1))
    assert exc.value.name == "CUDA_ERROR_LAUNCH_FAILED"


def test_the_spin_kernel_is_loaded_from_nul_terminated_ptx_and_launched_with_its_parameters():
    seen = {}

    def load(out, image):
        seen["image"] = ctypes.string_at(ctypes.addressof(image))
        seen["terminated"] = image.raw[-1:] == b"\0"
        out._obj.value = 0xAB
        return 0

    def get_function(out, module, name):
        seen["name"] = name
        out._obj.value = 0xCD
        return 0

    def launch(func, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        seen["dims"] = [d.value for d in (gx, gy, gz, bx, by, bz, shared)]
        seen["args"] = (ctypes.c_uint64.from_address(params[0]).value, ctypes.c_uint32.from_address(params[1]).value,
                        ctypes.c_uint64.from_address(params[2]).value)
        seen["func"], seen["stream"], seen["extra"] = func.value, stream, extra
        return 0

    drv = strict(cuModuleLoadData=load, cuModuleGetFunction=get_function, cuLaunchKernel=launch, cuModuleUnload=0)
    module = drv.module_load_data(cuda_driver.HOLD_KERNEL_PTX)
    func = drv.module_get_function(module, cuda_driver.HOLD_KERNEL_NAME)
    assert seen["image"] == cuda_driver.HOLD_KERNEL_PTX.encode() and seen["terminated"]
    assert seen["name"] == b"gpufleet_hold" and (module.value, func.value) == (0xAB, 0xCD)
    stream = ctypes.c_void_p(0x99)
    drv.launch_kernel(func, [ctypes.c_uint64(0x7F00DEAD0000), ctypes.c_uint32(3), ctypes.c_uint64(2 * 10 ** 9)], stream)
    assert seen["dims"] == [1, 1, 1, 1, 1, 1, 0] and seen["extra"] is None and seen["stream"] is stream
    assert seen["args"] == (0x7F00DEAD0000, 3, 2 * 10 ** 9) and seen["func"] == 0xCD
    drv.module_unload(module)


def test_the_hold_kernel_ptx_declares_what_the_launch_passes():
    ptx = cuda_driver.HOLD_KERNEL_PTX
    assert ".entry gpufleet_hold(" in ptx and ".address_size 64" in ptx
    params = [line.split()[1] for line in ptx.splitlines() if line.strip().startswith(".param")]
    assert params == [".u64", ".u32", ".u64"]  # flag address, target, timeout clocks
    assert "ld.volatile.global.u32" in ptx and "%clock64" in ptx


def test_the_hold_kernel_ptx_assembles_for_hopper_where_ptxas_is_installed(tmp_path):
    import shutil
    import subprocess
    ptxas = shutil.which("ptxas")
    if not ptxas:
        pytest.skip("no ptxas here (the CUDA toolkit is optional: the driver compiles the PTX on the node)")
    source = tmp_path / "hold.ptx"
    source.write_text(cuda_driver.HOLD_KERNEL_PTX)
    for arch in ("sm_80", "sm_90"):
        run = subprocess.run([ptxas, "-arch=" + arch, str(source), "-o", str(tmp_path / (arch + ".cubin"))],
                             capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr
