# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA driver API (libcuda.so.1) through ctypes: only what the P2P check needs.

Why the driver API and ctypes: libcuda.so.1 ships with the NVIDIA driver itself, so a node
that can run a model can run this, with no CUDA toolkit, compiler, PyTorch or CuPy. Every
call goes through ``_call``, which turns a non-zero CUresult into CudaError naming the call,
the error name and the driver's own description.
"""

from __future__ import annotations

import ctypes
import os
import time

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_READY = 600
CU_STREAM_NON_BLOCKING = 0x1
CU_EVENT_DEFAULT = 0x0
CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK = 0x01
CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 0x02
CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 0x03
CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50

CUdeviceptr = ctypes.c_uint64
CUcontext = ctypes.c_void_p
CUstream = ctypes.c_void_p
CUevent = ctypes.c_void_p


class CudaError(Exception):
    """A driver call failed: ``call``, ``code``, ``name`` and ``text`` say which and why."""

    def __init__(self, call, code, name, text):
        self.call = call
        self.code = code
        self.name = name
        self.text = text
        super(CudaError, self).__init__("%s failed: %s (%d): %s" % (call, name, code, text))


class DriverMissing(Exception):
    """No usable NVIDIA driver: the reason says what was missing."""


class CopyTimeout(Exception):
    """A copy did not finish in time: usually a P2P path that hangs (IOMMU, ACS)."""


class Driver(object):
    """A loaded libcuda. Methods mirror the driver calls they wrap, minus the cu prefix."""

    def __init__(self, library="libcuda.so.1"):
        try:
            self.lib = ctypes.CDLL(library)
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


def prefer_pci_bus_order():
    """Make CUDA ordinals follow PCI bus order (as nvidia-smi does), before cuInit runs."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
