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


def prefer_pci_bus_order():
    """Make CUDA ordinals follow PCI bus order (as nvidia-smi does), before cuInit runs."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
