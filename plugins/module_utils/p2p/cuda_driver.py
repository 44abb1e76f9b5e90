# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA driver API (libcuda.so.1) through ctypes: only what the P2P check needs.

Why the driver API and ctypes: libcuda.so.1 ships with the NVIDIA driver itself, so a node
that can run a model can run this, with no CUDA toolkit, compiler, PyTorch or CuPy. Every
call goes through ``_call``, which turns a non-zero CUresult into CudaError naming the call,
the error name and the driver's own description.

Which library is loaded: the module runs as root, and loading a library runs its code, so
``trusted_library`` decides before anything is loaded. A bare ``libcuda.so`` or
``libcuda.so.<version>`` is handed to the dynamic loader, which finds it in its own search path
(ld.so.cache and the system library folders, the driver's install location). An absolute path
is resolved (symbolic links included) and loaded by its real path only when that file and every
folder above it up to ``/`` belong to root and are not writable by group or others: nobody but
root can then have put the code there or swap it before it is loaded. Anything else (another
name, a relative path, ``..``) is refused naming the value.
"""

from __future__ import annotations

import ctypes
import os
import re
import stat
import time

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_READY = 600
CUDA_ERROR_NOT_SUPPORTED = 801  # cuda.h (13.0) CUresult: CUDA_ERROR_NOT_SUPPORTED = 801
CU_STREAM_NON_BLOCKING = 0x1
CU_EVENT_DEFAULT = 0x0
CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK = 0x01
CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 0x02
CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 0x03
CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50

# Holding a stream (the latency method of p2pBandwidthLatencyTest), values from cuda.h (CUDA 13.0):
# - cuMemHostAlloc flags: ``#define CU_MEMHOSTALLOC_PORTABLE 0x01`` (pinned for every context) and
#   ``#define CU_MEMHOSTALLOC_DEVICEMAP 0x02`` (mapped into the device address space).
CU_MEMHOSTALLOC_PORTABLE = 0x01
CU_MEMHOSTALLOC_DEVICEMAP = 0x02
# - CUstreamWaitValue_flags: ``CU_STREAM_WAIT_VALUE_GEQ = 0x0``, "wait until (int32_t)(*addr - value)
#   >= 0, a cyclic comparison"; ``CU_STREAM_WAIT_VALUE_EQ = 0x1``. GEQ lets the flag only grow: each
#   hold waits for a new value, so a late release of an earlier hold cannot open a later one.
CU_STREAM_WAIT_VALUE_GEQ = 0x0
CU_STREAM_WAIT_VALUE_EQ = 0x1
# - CUdevice_attribute: ``CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 92`` says whether the v1
#   memory operations (the plain ``cuStreamWaitValue32`` symbol, which drivers before 11.7 only had
#   with ``NVreg_EnableStreamMemOPs=1``) work. The v2 entry point ``cuStreamWaitValue32_v2`` (what
#   ``cuStreamWaitValue32`` names in cuda.h since CUDA 11.7) is "available by default on all
#   platforms" (driver API manual, Stream Memory Operations) and has no attribute of its own; only
#   NOR waits do, ``CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR = 123`` (``..._NOR_V2`` before
#   13.0), which a GEQ wait does not need.
CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 92
CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR = 123

# The fallback hold when stream memory operations are refused: the ``delay`` kernel of
# p2pBandwidthLatencyTest, as PTX the driver compiles itself (cuModuleLoadData), so no toolkit is
# needed on the node. Its CUDA C, with the flag compared as the GEQ wait compares it:
#   extern "C" __global__ void gpufleet_hold(volatile unsigned int *flag, unsigned int target,
#                                            unsigned long long timeout_clocks) {
#       long long start = clock64();
#       while ((int)(*flag - target) < 0)
#           if ((unsigned long long)(clock64() - start) > timeout_clocks) break;
#   }
# PTX ISA 6.0 for sm_52 and later, so drivers from r396 on JIT it for any newer GPU; ptxas 13.0
# compiles it for sm_75, sm_80, sm_90, sm_100 and sm_120. Like the sample's kernel it gives up
# after ``timeout_clocks`` SM clocks, so it cannot hold a stream forever.
HOLD_KERNEL_NAME = "gpufleet_hold"
HOLD_KERNEL_PTX = """\
.version 6.0
.target sm_52
.address_size 64

.visible .entry gpufleet_hold(
    .param .u64 gpufleet_hold_flag,
    .param .u32 gpufleet_hold_target,
    .param .u64 gpufleet_hold_timeout_clocks
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd5, [gpufleet_hold_flag];
    ld.param.u32 %r1, [gpufleet_hold_target];
    ld.param.u64 %rd3, [gpufleet_hold_timeout_clocks];
    cvta.to.global.u64 %rd1, %rd5;
    mov.u64 %rd4, %clock64;
WAIT:
    ld.volatile.global.u32 %r2, [%rd1];
    sub.s32 %r3, %r2, %r1;
    setp.gt.s32 %p1, %r3, -1;
    @%p1 bra DONE;
    mov.u64 %rd6, %clock64;
    sub.s64 %rd7, %rd6, %rd4;
    setp.le.u64 %p2, %rd7, %rd3;
    @%p2 bra WAIT;
DONE:
    ret;
}
"""

CUdeviceptr = ctypes.c_uint64
CUcontext = ctypes.c_void_p
CUstream = ctypes.c_void_p
CUevent = ctypes.c_void_p
CUmodule = ctypes.c_void_p
CUfunction = ctypes.c_void_p


class CudaError(Exception):
    """A driver call failed: ``call``, ``code``, ``name`` and ``text`` say which and why."""

    def __init__(self, call, code, name, text):
        self.call = call
        self.code = code
        self.name = name
        self.text = text
        super().__init__("%s failed: %s (%d): %s" % (call, name, code, text))


class DriverMissing(Exception):
    """No usable NVIDIA driver: the reason says what was missing."""


class UntrustedLibrary(Exception):
    """A library that is not loaded: another name, or a file or folder others could change."""


DEFAULT_LIBRARY = "libcuda.so.1"
LIBRARY_NAME_RE = re.compile(r"^libcuda\.so(?:\.[0-9]+)*\Z")
_ACCEPTED = ("a bare name libcuda.so or libcuda.so.<version> (found by the dynamic loader), or an absolute "
             "path of a file that root owns, in folders root owns, none of them writable by group or others")


def _check_owner(path, info, what, value, owner_uids):
    if info.st_uid not in owner_uids:
        raise UntrustedLibrary("cuda_library=%r is not loaded: %s %s belongs to uid %d, not root; give %s"
                               % (value, what, path, info.st_uid, _ACCEPTED))
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        writers = " and ".join(who for bit, who in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "others"))
                               if info.st_mode & bit)
        raise UntrustedLibrary("cuda_library=%r is not loaded: %s %s is writable by %s (mode %04o); give %s"
                               % (value, what, path, writers, stat.S_IMODE(info.st_mode), _ACCEPTED))


def trusted_library(value, owner_uids=(0,), lstat=os.lstat):
    """What to hand to the dynamic loader for ``cuda_library=value``.

    A bare libcuda name is returned as it is; an absolute path is returned resolved, after its
    file and every folder above it passed the owner and mode check. Raises UntrustedLibrary
    for anything else, and DriverMissing for an absolute path that does not exist (no driver
    there: a skip, as for a bare name the loader does not find). ``owner_uids`` and ``lstat``
    exist for tests.
    """
    if not isinstance(value, str) or value == "":
        raise UntrustedLibrary("cuda_library=%r is not loaded: give %s" % (value, _ACCEPTED))
    if "\0" in value:
        raise UntrustedLibrary("cuda_library=%r is not loaded: it holds a NUL character; give %s" % (value, _ACCEPTED))
    if "/" not in value:
        if LIBRARY_NAME_RE.match(value):
            return value
        raise UntrustedLibrary("cuda_library=%r is not loaded: a bare name must be libcuda.so or "
                               "libcuda.so.<version>; give %s" % (value, _ACCEPTED))
    if not value.startswith("/"):
        raise UntrustedLibrary("cuda_library=%r is not loaded: a relative path depends on the directory the module "
                               "runs in; give %s" % (value, _ACCEPTED))
    if ".." in value.split("/"):
        raise UntrustedLibrary("cuda_library=%r is not loaded: it holds '..'; give %s" % (value, _ACCEPTED))
    real = os.path.realpath(value)
    try:
        info = lstat(real)
    except FileNotFoundError:
        raise DriverMissing("cannot load %s: no such file (is the NVIDIA driver installed?)" % value)
    except OSError as exc:
        raise UntrustedLibrary("cuda_library=%r is not loaded: %s cannot be examined (%s)"
                               % (value, real, exc.strerror))
    if not stat.S_ISREG(info.st_mode):
        raise UntrustedLibrary("cuda_library=%r is not loaded: %s is not a regular file; give %s"
                               % (value, real, _ACCEPTED))
    _check_owner(real, info, "the file", value, owner_uids)
    folder = real
    while True:
        folder = os.path.dirname(folder)
        try:
            info = lstat(folder)
        except OSError as exc:
            raise UntrustedLibrary("cuda_library=%r is not loaded: the folder %s cannot be examined (%s)"
                                   % (value, folder, exc.strerror))
        if not stat.S_ISDIR(info.st_mode):
            raise UntrustedLibrary("cuda_library=%r is not loaded: %s is not a folder" % (value, folder))
        _check_owner(folder, info, "the folder", value, owner_uids)
        if folder == "/":
            return real


class CopyTimeout(Exception):
    """A copy did not finish in time: usually a P2P path that hangs (IOMMU, ACS)."""


class HoldTimeout(CopyTimeout):
    """A held stream never started after its flag was released: the hold, not the P2P path, is stuck."""


class Driver:
    """A loaded libcuda. Methods mirror the driver calls they wrap, minus the cu prefix."""

    def __init__(self, library=DEFAULT_LIBRARY):
        # Checked here too, so no caller can load a library by path unchecked.
        path = trusted_library(library)
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise DriverMissing("cannot load %s: %s (is the NVIDIA driver installed?)" % (library, exc))
        self._elapsed = self._symbol("cuEventElapsedTime_v2", "cuEventElapsedTime")

    def _symbol(self, *names):
        for name in names:
            try:
                return getattr(self.lib, name), name
            except AttributeError:
                continue
        raise DriverMissing("libcuda has none of %s (driver too old?)" % ", ".join(names))

    def error_strings(self, code):
        name = ctypes.c_char_p()
        text = ctypes.c_char_p()
        if self.lib.cuGetErrorName(code, ctypes.byref(name)) != CUDA_SUCCESS or not name.value:
            return "CUDA error %d" % code, "unknown error"
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        return name.value.decode(), (text.value or b"").decode()

    def _call(self, name, *args, **kwargs):
        func = kwargs.get("func") or getattr(self.lib, name)
        code = func(*args)
        if code != CUDA_SUCCESS:
            err_name, err_text = self.error_strings(code)
            raise CudaError(name, code, err_name, err_text)

    # --- initialisation and devices ---------------------------------------------------------
    def init(self):
        self._call("cuInit", ctypes.c_uint(0))

    def driver_version(self):
        value = ctypes.c_int()
        self._call("cuDriverGetVersion", ctypes.byref(value))
        return "%d.%d" % (value.value // 1000, (value.value % 1000) // 10)

    def device_count(self):
        value = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(value))
        return value.value

    def device(self, ordinal):
        dev = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(ordinal))
        return dev.value

    def device_name(self, dev):
        buf = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", buf, ctypes.c_int(256), ctypes.c_int(dev))
        return buf.value.decode()

    def pci_bus_id(self, dev):
        buf = ctypes.create_string_buffer(64)
        self._call("cuDeviceGetPCIBusId", buf, ctypes.c_int(64), ctypes.c_int(dev))
        return buf.value.decode().lower()

    def total_mem(self, dev):
        value = ctypes.c_size_t()
        self._call("cuDeviceTotalMem_v2", ctypes.byref(value), ctypes.c_int(dev))
        return value.value

    def can_access_peer(self, dev, peer):
        value = ctypes.c_int()
        self._call("cuDeviceCanAccessPeer", ctypes.byref(value), ctypes.c_int(dev), ctypes.c_int(peer))
        return bool(value.value)

    def p2p_attribute(self, attribute, src, dst):
        value = ctypes.c_int()
        self._call("cuDeviceGetP2PAttribute", ctypes.byref(value), ctypes.c_int(attribute),
                   ctypes.c_int(src), ctypes.c_int(dst))
        return value.value

    # --- contexts ----------------------------------------------------------------------------
    def primary_ctx_retain(self, dev):
        ctx = CUcontext()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), ctypes.c_int(dev))
        return ctx

    def primary_ctx_release(self, dev):
        func, name = self._symbol("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
        self._call(name, ctypes.c_int(dev), func=func)

    def set_current(self, ctx):
        self._call("cuCtxSetCurrent", ctx)

    def ctx_synchronize(self):
        """Wait for all work of the current context, the legacy stream included."""
        self._call("cuCtxSynchronize")

    def enable_peer(self, peer_ctx):
        """Let the current context access ``peer_ctx``'s memory (released with the context)."""
        self._call("cuCtxEnablePeerAccess", peer_ctx, ctypes.c_uint(0))

    def disable_peer(self, peer_ctx):
        self._call("cuCtxDisablePeerAccess", peer_ctx)

    # --- memory, streams, events -----------------------------------------------------------
    def mem_alloc(self, size):
        ptr = CUdeviceptr()
        self._call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(size))
        return ptr.value

    def mem_free(self, ptr):
        self._call("cuMemFree_v2", CUdeviceptr(ptr))

    def memset_d8(self, ptr, value, size):
        """Fill device memory. It runs on the legacy stream and may return before it is done,
        and non-blocking streams do not wait for it: callers synchronize the context after."""
        self._call("cuMemsetD8_v2", CUdeviceptr(ptr), ctypes.c_ubyte(value), ctypes.c_size_t(size))

    def memcpy_dtoh(self, ptr, size):
        buf = ctypes.create_string_buffer(size)
        self._call("cuMemcpyDtoH_v2", buf, CUdeviceptr(ptr), ctypes.c_size_t(size))
        return buf.raw

    def stream_create(self):
        stream = CUstream()
        self._call("cuStreamCreate", ctypes.byref(stream), ctypes.c_uint(CU_STREAM_NON_BLOCKING))
        return stream

    def stream_destroy(self, stream):
        self._call("cuStreamDestroy_v2", stream)

    def stream_wait_event(self, stream, event):
        self._call("cuStreamWaitEvent", stream, event, ctypes.c_uint(0))

    def stream_synchronize(self, stream):
        self._call("cuStreamSynchronize", stream)

    def event_create(self):
        event = CUevent()
        self._call("cuEventCreate", ctypes.byref(event), ctypes.c_uint(CU_EVENT_DEFAULT))
        return event

    def event_destroy(self, event):
        self._call("cuEventDestroy_v2", event)

    def event_record(self, event, stream):
        self._call("cuEventRecord", event, stream)

    def event_wait(self, event, timeout_s):
        """Wait for ``event`` by polling, so a hung P2P copy becomes an error, not a hang."""
        deadline = time.monotonic() + timeout_s
        delay = 0.0002
        while True:
            code = self.lib.cuEventQuery(event)
            if code == CUDA_SUCCESS:
                return
            if code != CUDA_ERROR_NOT_READY:
                err_name, err_text = self.error_strings(code)
                raise CudaError("cuEventQuery", code, err_name, err_text)
            if time.monotonic() > deadline:
                raise CopyTimeout("copies did not finish within %.0f s" % timeout_s)
            time.sleep(delay)
            delay = min(delay * 2, 0.01)

    def elapsed_ms(self, start, end):
        value = ctypes.c_float()
        func, name = self._elapsed
        self._call(name, ctypes.byref(value), start, end, func=func)
        return float(value.value)

    def memcpy_peer_async(self, dst, dst_ctx, src, src_ctx, size, stream):
        self._call("cuMemcpyPeerAsync", CUdeviceptr(dst), dst_ctx, CUdeviceptr(src), src_ctx,
                   ctypes.c_size_t(size), stream)

    def event_query(self, event):
        """True when ``event`` has completed, False while it is pending; other codes raise."""
        code = self.lib.cuEventQuery(event)
        if code == CUDA_SUCCESS:
            return True
        if code == CUDA_ERROR_NOT_READY:
            return False
        err_name, err_text = self.error_strings(code)
        raise CudaError("cuEventQuery", code, err_name, err_text)

    # --- holding a stream: a host flag, a wait on it, or a kernel that spins on it -------------
    def device_attribute(self, attribute, dev):
        value = ctypes.c_int()
        self._call("cuDeviceGetAttribute", ctypes.byref(value), ctypes.c_int(attribute), ctypes.c_int(dev))
        return value.value

    def mem_host_alloc_mapped(self, size):
        """Pinned host memory, portable to every context and mapped into their address space."""
        ptr = ctypes.c_void_p()
        self._call("cuMemHostAlloc", ctypes.byref(ptr), ctypes.c_size_t(size),
                   ctypes.c_uint(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP))
        return ptr.value

    def mem_host_device_pointer(self, host_ptr):
        """The device address of mapped host memory, in the current context."""
        func, name = self._symbol("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer")
        dptr = CUdeviceptr()
        self._call(name, ctypes.byref(dptr), ctypes.c_void_p(host_ptr), ctypes.c_uint(0), func=func)
        return dptr.value

    def mem_free_host(self, host_ptr):
        self._call("cuMemFreeHost", ctypes.c_void_p(host_ptr))

    @staticmethod
    def host_write_u32(host_ptr, value):
        """Store a 32-bit word in host memory the GPU reads. A ctypes store is a real store to that
        address (never kept in a register), which is what ``volatile`` gives the C sample."""
        ctypes.c_uint32.from_address(host_ptr).value = value & 0xFFFFFFFF

    @staticmethod
    def host_read_u32(host_ptr):
        return ctypes.c_uint32.from_address(host_ptr).value

    def stream_wait_value_support(self, dev):
        """(supported, why) for ``stream_wait_value32`` on device ``dev``."""
        if hasattr(self.lib, "cuStreamWaitValue32_v2"):
            return True, "cuStreamWaitValue32_v2 (v2 stream memory operations, on by default)"
        if not hasattr(self.lib, "cuStreamWaitValue32"):
            return False, "libcuda has no cuStreamWaitValue32"
        if self.device_attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, dev) != 1:
            return False, ("CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS is 0 (v1 stream memory operations "
                           "are off: nvidia NVreg_EnableStreamMemOPs=0)")
        return True, "cuStreamWaitValue32 (v1 stream memory operations)"

    def stream_wait_value32(self, stream, dptr, value, flags=CU_STREAM_WAIT_VALUE_GEQ):
        """Enqueue on ``stream`` a wait until the 32-bit word at ``dptr`` satisfies ``flags``/``value``."""
        func, name = self._symbol("cuStreamWaitValue32_v2", "cuStreamWaitValue32")
        self._call(name, stream, CUdeviceptr(dptr), ctypes.c_uint32(value & 0xFFFFFFFF), ctypes.c_uint(flags),
                   func=func)

    def module_load_data(self, image):
        """Load a module from ``image`` (PTX text or a cubin) into the current context."""
        if isinstance(image, str):
            image = image.encode()
        buf = ctypes.create_string_buffer(image)  # NUL-terminated, as PTX must be
        module = CUmodule()
        self._call("cuModuleLoadData", ctypes.byref(module), buf)
        return module

    def module_get_function(self, module, name):
        func = CUfunction()
        self._call("cuModuleGetFunction", ctypes.byref(func), module, name.encode())
        return func

    def module_unload(self, module):
        self._call("cuModuleUnload", module)

    def launch_kernel(self, func, args, stream, grid=(1, 1, 1), block=(1, 1, 1), shared_bytes=0):
        """Launch ``func`` on ``stream``; ``args`` are ctypes values in the kernel's parameter order."""
        params = (ctypes.c_void_p * max(1, len(args)))(
            *[ctypes.cast(ctypes.pointer(arg), ctypes.c_void_p) for arg in args])
        dims = [ctypes.c_uint(n) for n in tuple(grid) + tuple(block)]
        self._call("cuLaunchKernel", func, *(dims + [ctypes.c_uint(shared_bytes), stream, params, None]))


def prefer_pci_bus_order():
    """Make CUDA ordinals follow PCI bus order (as nvidia-smi does), before cuInit runs."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
