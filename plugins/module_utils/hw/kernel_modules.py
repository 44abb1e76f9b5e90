# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel-module state from /proc and /sys, where a module's file is, and the modprobe.d and
modules-load.d files that configure and persist modules.

Why read /proc and /sys and not lsmod/modinfo: the GPU machines have neither, and the kernel
publishes everything itself. ``/proc/modules`` lists loaded modules with their reference count
and users; ``/sys/module/<m>/`` has ``initstate`` (only for loadable modules), ``refcnt``,
``holders/``, ``version`` and readable ``parameters/``. A built-in module has a
``/sys/module/<m>`` directory (when it has parameters) but no ``initstate``.

Module names: the kernel treats ``-`` and ``_`` in module and parameter names as the same
character and shows ``_`` (the file ``nvidia-peermem.ko`` is the module ``nvidia_peermem``), so
every comparison here goes through ``canonical()``.

Where modprobe looks: only at ``modules.dep`` of ``/lib/modules/<release>`` (written by
depmod). A ``.ko`` elsewhere, or one depmod has not seen yet, exists but cannot be loaded by
name; ``find_module_file`` reports both the path and whether modprobe can see it, so a caller
can say so before modprobe fails with "not found in directory".

Exported symbols: ``/proc/kallsyms`` lists those of the loaded kernel and modules (it is large,
so it is streamed); ``modules.symbols`` (depmod) says which installed module exports a symbol
that is not loaded yet.

modprobe.d: kmod reads every ``*.conf`` of /etc, /run, /usr/local/lib, /usr/lib and /lib
``modprobe.d``, sorted by file name across directories (a name in an earlier directory hides
the same name in a later one), and hands all ``options`` of a module to the kernel in that
order; the kernel applies them in turn, so for a parameter set twice the file read last wins.
``option_sources`` lists every setting in that order so a module can tell whether its own
file wins. Option values follow the kernel's parameter syntax (``kernel_args`` parses it): a
value with spaces or ``;`` is written in double quotes (``NVreg_RegistryDwords="A=1;B=2"``),
and no value can hold a double quote.

Parameter values as the kernel reads them: a module's ``int``, ``uint``, ``long``, ... parameter
is parsed by lib/kstrtox.c (``kstrtoint`` and kin, base 0: decimal, ``0x`` hex, a leading ``0``
for octal, an optional sign, nothing else), a ``charp`` takes any string of at most 1024
bytes. A value the kernel refuses for a known parameter (``2147483648`` for an int, ``yes``,
``1.5``) makes it refuse the WHOLE module at load (kernel/params.c parse_args: the module does
not load at all), so ``kernel_integer`` and ``check_param_value`` mirror those parsers exactly
and callers refuse such values before anything is written.

What stops a module from loading, or its options from applying (``load_blockers``): kmod's
``install <m> <command>`` runs the command instead of loading ``m`` (``/bin/true`` or
``/bin/false`` means it never loads through modprobe); an ``alias <m> <other>`` in modprobe.d
wins over the module's own name, so ``modprobe m`` loads ``other``; ``blacklist <m>`` stops only
the loads that honour it: udev's hardware autoload (aliases), systemd-modules-load and
``modprobe -b``, while a plain ``modprobe m`` and modules that depend on ``m`` still load it.
On the kernel command line ``module_blacklist=m`` makes the kernel refuse ``m`` outright and
``modprobe.blacklist=m`` is kmod's blacklist. ``softdep`` lines only add modules around a load
and are not reported.

The kernel command line also carries module options (``m.param=value``): kmod appends them
after every modprobe.d file, so for a parameter set in both places the command line wins at
every load (``cmdline_options``).
"""

from __future__ import annotations

import fnmatch
import gzip
import os
import re
import struct
import zlib

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import kernel_args

KO_SUFFIXES = (".ko", ".ko.xz", ".ko.zst", ".ko.gz")
MODPROBE_D_DIRS = ("etc/modprobe.d", "run/modprobe.d", "usr/local/lib/modprobe.d",
                   "usr/lib/modprobe.d", "lib/modprobe.d")
MODULES_LOAD_D_DIRS = ("etc/modules-load.d", "run/modules-load.d", "usr/local/lib/modules-load.d",
                       "usr/lib/modules-load.d", "lib/modules-load.d")
# Values written bare in an options line; anything else is quoted.
_BARE_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:+/@%,-]+\Z")
_PARAM_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+\Z")
MAX_KO_BYTES = 64 * 1024 * 1024
# Module parameter types the kernel parses as integers (include/linux/moduleparam.h,
# kernel/params.c STANDARD_PARAM_DEF), with the range each accepts.
INTEGER_TYPES = {
    "byte": (0, 0xFF),
    "short": (-0x8000, 0x7FFF),
    "ushort": (0, 0xFFFF),
    "int": (-0x80000000, 0x7FFFFFFF),
    "uint": (0, 0xFFFFFFFF),
    "hexint": (0, 0xFFFFFFFF),
    "long": (-0x8000000000000000, 0x7FFFFFFFFFFFFFFF),
    "ulong": (0, 0xFFFFFFFFFFFFFFFF),
    "ullong": (0, 0xFFFFFFFFFFFFFFFF),
}
UNSIGNED_TYPES = frozenset(["byte", "ushort", "uint", "hexint", "ulong", "ullong"])
# param_set_charp refuses a longer string with ENOSPC.
CHARP_MAX_BYTES = 1024
# First words of an install command that never load anything.
_NO_LOAD_COMMANDS = ("true", "false", ":", "exit")
_SHELL_SPLIT_RE = re.compile(r"[\s;&|()]+")


def canonical(name):
    """A module or parameter name as the kernel shows it: ``-`` becomes ``_``."""
    return (name or "").replace("-", "_")


def module_name_of(filename):
    """``nvidia-peermem.ko.xz`` -> ``nvidia_peermem``; None when not a module file name."""
    base = os.path.basename(filename)
    for suffix in KO_SUFFIXES:
        if base.endswith(suffix):
            return canonical(base[:-len(suffix)])
    return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def kernel_release(proc_root="/proc"):
    """The running kernel's release (``uname -r``), from /proc/sys/kernel/osrelease."""
    text = fileops.read_quiet(os.path.join(proc_root, "sys", "kernel", "osrelease"))
    return text.strip() if text and text.strip() else None


# --- loaded modules ----------------------------------------------------------------------


def proc_modules(proc_root="/proc"):
    """``{name: {"size", "refcnt", "used_by", "state"}}`` from /proc/modules.

    None when the file does not exist: a kernel built without module support, where nothing
    can be loaded at all.
    """
    return _parse_proc_modules(fileops.read_quiet(os.path.join(proc_root, "modules")))


def _parse_proc_modules(text):
    """proc_modules() of the text of /proc/modules (None: the file does not exist)."""
    if text is None:
        return None
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        refcnt = int(fields[2]) if fields[2].isdigit() else None
        used_by = [canonical(m) for m in fields[3].split(",") if m and m != "-"]
        found[canonical(fields[0])] = {
            "size": int(fields[1]) if fields[1].isdigit() else None,
            "refcnt": refcnt,
            "used_by": used_by,
            "state": fields[4].lower(),
        }
    return found


def module_params(name, sys_root="/sys"):
    """The readable parameters of a module: ``{param: value}`` (unreadable ones left out)."""
    directory = os.path.join(sys_root, "module", canonical(name), "parameters")
    params = {}
    for entry in _listdir(directory):
        value = fileops.read_quiet(os.path.join(directory, entry))
        if value is not None:
            params[entry] = value.strip()
    return params


def module_state(name, proc_root="/proc", sys_root="/sys"):
    """What the kernel says about one module.

    Returns ``{"name", "loaded", "builtin", "state", "refcnt", "holders", "version",
    "params"}``: ``loaded`` for a loadable module that is in the kernel now (live, coming or
    going), ``builtin`` for one compiled into the kernel, ``holders`` the modules using it
    (sysfs ``holders/`` and /proc/modules together), ``refcnt`` the kernel's reference count.
    """
    name = canonical(name)
    sys_dir = os.path.join(sys_root, "module", name)
    modules = proc_modules(proc_root)
    entry = (modules or {}).get(name)
    initstate = fileops.read_quiet(os.path.join(sys_dir, "initstate"))
    loaded = entry is not None or initstate is not None
    refcnt = None
    text = fileops.read_quiet(os.path.join(sys_dir, "refcnt"))
    if text is not None and text.strip().isdigit():
        refcnt = int(text.strip())
    elif entry is not None:
        refcnt = entry["refcnt"]
    holders = set(canonical(h) for h in _listdir(os.path.join(sys_dir, "holders")))
    if entry is not None:
        holders.update(entry["used_by"])
    version = fileops.read_quiet(os.path.join(sys_dir, "version"))
    return {
        "name": name,
        "loaded": loaded,
        "builtin": not loaded and os.path.isdir(sys_dir),
        "state": (initstate or "").strip() or (entry or {}).get("state"),
        "refcnt": refcnt,
        "holders": sorted(holders),
        "version": version.strip() if version and version.strip() else None,
        "params": module_params(name, sys_root) if (loaded or os.path.isdir(sys_dir)) else {},
    }


def in_use(state):
    """Why a loaded module cannot be unloaded now, or None: references or holders."""
    reasons = []
    if state.get("refcnt"):
        reasons.append("reference count %d" % state["refcnt"])
    if state.get("holders"):
        reasons.append("used by %s" % ", ".join(state["holders"]))
    return "; ".join(reasons) or None


# --- module files ------------------------------------------------------------------------


def release_dir(lib_modules, release):
    return os.path.join(lib_modules, release or "")


def modules_dep(lib_modules, release):
    """``{module name: absolute path}`` from modules.dep; None when there is no modules.dep."""
    base = release_dir(lib_modules, release)
    text = fileops.read_quiet(os.path.join(base, "modules.dep"))
    if text is None:
        return None
    found = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        rel = line.split(":", 1)[0].strip()
        name = module_name_of(rel)
        if name and name not in found:
            found[name] = rel if os.path.isabs(rel) else os.path.join(base, rel)
    return found


def _search(directory, name, follow=False):
    for dirpath, dirnames, filenames in os.walk(directory, followlinks=follow):
        dirnames.sort()
        for filename in sorted(filenames):
            if module_name_of(filename) == name:
                return os.path.join(dirpath, filename)
    return None


def find_module_file(name, lib_modules="/lib/modules", release=None, extra_dirs=()):
    """Where the ``.ko`` of module ``name`` is, and whether modprobe can load it by name.

    Looks in modules.dep first (what modprobe uses), then walks ``/lib/modules/<release>``
    (a file depmod has not indexed) and ``extra_dirs`` (drivers installed outside the module
    tree, such as /usr/local/nvidia/modules). Compressed modules (.ko.xz, .ko.zst, .ko.gz)
    count. Returns ``{"path", "modprobe_visible", "searched", "modules_dep"}``; ``path`` is
    None when no file was found.
    """
    name = canonical(name)
    base = release_dir(lib_modules, release)
    dep = modules_dep(lib_modules, release) if release else None
    searched = [base] + list(extra_dirs)
    result = {"path": None, "modprobe_visible": False, "searched": searched,
              "modules_dep": dep is not None}
    if dep and name in dep:
        result["path"] = dep[name]
        result["modprobe_visible"] = True
        return result
    for directory in ([base] if release else []) + list(extra_dirs):
        if os.path.isdir(directory):
            path = _search(directory, name)
            if path:
                result["path"] = path
                return result
    return result


def _ko_bytes(path, limit=MAX_KO_BYTES):
    """The uncompressed bytes of a module file; None for zstd (no stdlib decoder) or too big."""
    if path.endswith(".ko.zst"):
        return None
    try:
        import lzma  # not in every Python build (needs liblzma); only .ko.xz needs it
    except ImportError:  # pragma: no cover
        lzma = None
    if lzma is None and path.endswith(".ko.xz"):
        return None
    errors = (OSError, IOError, EOFError, zlib.error) + ((lzma.LZMAError,) if lzma is not None else ())
    try:
        if os.path.getsize(path) > limit:
            return None
        if path.endswith(".ko.xz"):
            with lzma.open(path, "rb") as handle:
                return handle.read(limit + 1)
        if path.endswith(".ko.gz"):
            with gzip.open(path, "rb") as handle:
                return handle.read(limit + 1)
        with open(path, "rb") as handle:
            return handle.read()
    except errors:
        return None


def _elf_section(data, wanted):
    """Bytes of the ELF section named ``wanted``; None when absent or the file is not ELF."""
    if len(data) < 0x40 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return None
    end = "<" if data[5] == 1 else ">"
    try:
        if data[4] == 2:
            shoff = struct.unpack_from(end + "Q", data, 0x28)[0]
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
            off_fmt, off_at, size_at = end + "Q", 0x18, 0x20
        else:
            shoff = struct.unpack_from(end + "I", data, 0x20)[0]
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
            off_fmt, off_at, size_at = end + "I", 0x10, 0x14

        def header(index):
            at = shoff + index * shentsize
            name_off = struct.unpack_from(end + "I", data, at)[0]
            offset = struct.unpack_from(off_fmt, data, at + off_at)[0]
            size = struct.unpack_from(off_fmt, data, at + size_at)[0]
            return name_off, offset, size

        if shstrndx >= shnum:
            return None
        _name, str_off, str_size = header(shstrndx)
        names = data[str_off:str_off + str_size]
        for index in range(shnum):
            name_off, offset, size = header(index)
            name_end = names.find(b"\0", name_off)
            if names[name_off:name_end if name_end >= 0 else None] == wanted.encode():
                if offset + size > len(data):
                    return None
                return data[offset:offset + size]
    except struct.error:
        return None
    return None


def modinfo(path):
    """``{key: value}`` of a module file's .modinfo section (version, vermagic, depends, ...).

    The first value of each key is kept. Empty when the file cannot be read or decoded
    (.ko.zst needs a decoder the standard library lacks).
    """
    data = _ko_bytes(path) if path else None
    section = _elf_section(data, ".modinfo") if data else None
    info = {}
    for item in (section or b"").split(b"\0"):
        if b"=" not in item:
            continue
        key, value = item.split(b"=", 1)
        key = key.decode("ascii", "replace")
        if key not in info:
            info[key] = value.decode("utf-8", "replace")
    return info


# --- symbols and RDMA devices ------------------------------------------------------------


def _kallsyms_line(data, needle, wanted):
    """The fields of the line of ``data`` (whole lines) that names ``wanted``, or None."""
    start = data.find(needle)
    while start != -1:
        begin = data.rfind(b"\n", 0, start) + 1
        end = data.find(b"\n", start)
        fields = data[begin:end if end != -1 else len(data)].split()
        if len(fields) >= 3 and fields[2] == wanted:
            return fields
        start = data.find(needle, start + 1)
    return None


# kallsyms_lookup's answers in this process, each kept with what it was read under: the
# /proc/modules text and the file's own stat (procfs reports a fixed one; a test's tree does not).
_KALLSYMS_SEEN = {}


def kallsyms_lookup(symbol, proc_root="/proc", provider=None, sys_root=None):
    """Find ``symbol`` in /proc/kallsyms.

    The file holds 100k+ lines (5 MB on a distribution kernel): it is read in 1 MiB blocks
    and searched with bytes.find, a fraction of the time a Python loop over its lines takes
    (most of what is left is the kernel writing the file). Returns ``{"readable", "found",
    "module"}``; ``module`` is the module that provides it (None for the kernel image itself).

    A module's symbols come and go with the module, so an answer is reused while /proc/modules
    reads the same (a few KB): a tuning module plans and then applies in one process,
    and each reads the symbol once (about 45 ms each on the test machines) otherwise.

    ``provider``: the only module that can export ``symbol`` (ib_core for the peer-memory symbol,
    which only MLNX_OFED/DOCA's ib_core exports). When it is neither in /proc/modules nor under
    ``sys_root``/module (where a built-in module with parameters shows), the symbol cannot be
    there and the file is not read: most GPU nodes have no RDMA stack at all.
    """
    path = os.path.join(proc_root, "kallsyms")
    modules_text = fileops.read_quiet(os.path.join(proc_root, "modules"))
    if provider is not None and os.access(path, os.R_OK):
        loaded = _parse_proc_modules(modules_text)
        builtin = sys_root is not None and os.path.isdir(os.path.join(sys_root, "module", provider))
        if not builtin and (loaded is None or canonical(provider) not in loaded):
            return {"readable": True, "found": False, "module": None}
    try:
        st = os.stat(path)
        under = (modules_text, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        under = None
    seen = _KALLSYMS_SEEN.get((path, symbol))
    if under is not None and seen is not None and seen[0] == under:
        return dict(seen[1])
    answer = _kallsyms_read(path, symbol)
    if under is not None:
        _KALLSYMS_SEEN[(path, symbol)] = (under, dict(answer))
    return answer


def _kallsyms_read(path, symbol):
    needle = (" " + symbol).encode()
    wanted = symbol.encode()
    try:
        with open(path, "rb") as handle:
            pending = b""
            while True:
                block = handle.read(1 << 20)
                data = pending + block
                if not block:
                    whole, pending = data, b""
                else:
                    cut = data.rfind(b"\n") + 1
                    whole, pending = data[:cut], data[cut:]
                fields = _kallsyms_line(whole, needle, wanted) if needle in whole else None
                if fields is not None:
                    module = fields[3].decode().strip("[]") if len(fields) > 3 else None
                    return {"readable": True, "found": True, "module": module}
                if not block:
                    break
    except (OSError, IOError):
        return {"readable": False, "found": False, "module": None}
    return {"readable": True, "found": False, "module": None}


def symbol_providers(symbol, lib_modules="/lib/modules", release=None):
    """Installed modules that export ``symbol``, from depmod's modules.symbols; None when that
    file is missing."""
    text = fileops.read_quiet(os.path.join(release_dir(lib_modules, release), "modules.symbols"))
    if text is None or not release:
        return None
    wanted = "symbol:" + symbol
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == "alias" and fields[1] == wanted:
            found.append(canonical(fields[2]))
    return found


def rdma_devices(sys_root="/sys"):
    """RDMA devices (mlx5_0, ...) registered under /sys/class/infiniband."""
    return _listdir(os.path.join(sys_root, "class", "infiniband"))


# --- modprobe.d and modules-load.d -------------------------------------------------------


class OptionError(ValueError):
    """An option name or value that cannot be written in a modprobe.d options line."""


def format_value(value):
    """One parameter value as modprobe.d needs it: integers and booleans (1/0) bare, strings
    bare when plain and in double quotes otherwise (``"A=1;B=2"``, ``""``)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise OptionError("a %s cannot be a module parameter value: give a string or an integer"
                          % type(value).__name__)
    if '"' in value:
        raise OptionError("a value cannot hold a double quote: the kernel has no escape for it")
    if "\\" in value:
        raise OptionError("a value cannot hold a backslash: modprobe reads one at the end of a line "
                          "as a continuation")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise OptionError("a value cannot hold control characters (newline, tab)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise OptionError("a value must be text that can be written as UTF-8 (it holds undecodable bytes)")
    if _BARE_VALUE_RE.match(value):
        return value
    return '"%s"' % value


_DIGITS = "0123456789abcdef"


def _kstrtoull(text):
    """An unsigned integer as lib/kstrtox.c _kstrtoull reads it with base 0: ``0x`` then hex
    digits, a leading ``0`` then octal digits, else decimal; the whole string must be
    digits (no spaces, no ``_``, no ``0o``/``0b``). Raises ValueError with the reason."""
    base = 10
    digits = text
    if text[:1] == "0":
        if text[1:2] in ("x", "X") and text[2:3] and text[2:3].lower() in _DIGITS:
            base = 16
            digits = text[2:]
        else:
            base = 8
    if not digits:
        raise ValueError("no digits")
    value = 0
    for char in digits:
        digit = _DIGITS.find(char.lower()) if ord(char) < 128 else -1
        if digit < 0 or digit >= base:
            what = {8: "an octal number (a leading 0 means octal: digits 0-7)",
                    10: "a decimal number", 16: "a hex number"}[base]
            raise ValueError("%r is not a digit of %s" % (char, what))
        value = value * base + digit
    if value > 0xFFFFFFFFFFFFFFFF:
        raise ValueError("it overflows 64 bits")
    return value


def kernel_integer(value, kind="int"):
    """``value`` (an int, a bool or a string) as the kernel would store it in a module
    parameter of type ``kind`` (``int``, ``uint``, ``long``, ... see INTEGER_TYPES).

    Strings are read the way kernel/params.c reads them (kstrtoint and kin, base 0): an
    optional ``-`` (signed types) or ``+``, then decimal, ``0x`` hex or ``0`` octal, and
    nothing else. Python bools are 1 and 0; floats are refused (the kernel has no
    fractional parameter). Raises OptionError naming the accepted range.
    """
    low, high = INTEGER_TYPES[kind]
    accepted = "a kernel parameter of type %s accepts %d to %d (decimal, 0x hex or 0-prefixed octal)" % (
        kind, low, high)
    if isinstance(value, bool):
        number = int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        raise OptionError("%r is a floating-point number, not an integer: %s" % (value, accepted))
    elif isinstance(value, str):
        negative = value[:1] == "-" and kind not in UNSIGNED_TYPES
        try:
            number = _kstrtoull(value[1:] if negative or value[:1] == "+" else value)
        except ValueError as exc:
            raise OptionError("%r is not an integer as the kernel reads one (%s): %s" % (value, exc, accepted))
        if negative:
            number = -number
    else:
        raise OptionError("a %s is not an integer: %s" % (type(value).__name__, accepted))
    if not low <= number <= high:
        raise OptionError("%r is out of range: %s" % (value, accepted))
    return number


def looks_numeric(value):
    """True for a value a person meant as a number: a Python number, or a string that starts
    like one (a digit after an optional sign, a decimal point) or that float() reads
    (``nan``, ``inf``, ``1e3``). Used where a parameter's type is unknown: such a value
    must then be an integer the kernel accepts for ``int``."""
    if isinstance(value, (bool, int, float)):
        return True
    if not isinstance(value, str):
        return False
    text = value.strip()
    if re.match(r"[+-]?\.?[0-9]", text):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_param_value(value, kind):
    """Raise OptionError unless the kernel accepts ``value`` for a parameter of type ``kind``
    (an INTEGER_TYPES name, ``charp`` or ``bool``); return the value as it will be written
    (kernel_integer's int for integers, the string for charp, 1/0 for bool)."""
    if kind in INTEGER_TYPES:
        return kernel_integer(value, kind)
    if kind == "charp":
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise OptionError("%r is not a string: this is a string (charp) parameter" % (value,))
        text = str(value)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise OptionError("a value must be text that can be written as UTF-8")
        if size > CHARP_MAX_BYTES:
            raise OptionError("a string parameter takes at most %d bytes and this value has %d: the kernel "
                              "refuses the whole module (ENOSPC)" % (CHARP_MAX_BYTES, size))
        return text
    if kind == "bool":
        # param_set_bool -> kstrtobool: y/Y/1/n/N/0 and on/off by their first letters.
        if isinstance(value, bool) or value in (0, 1):
            return 1 if value else 0
        text = str(value)
        if text[:1] in ("y", "Y", "1") or text[:2].lower() == "on":
            return 1
        if text[:1] in ("n", "N", "0") or text[:2].lower() == "of":
            return 0
        raise OptionError("%r is not a boolean the kernel reads (y, n, 1, 0, on, off)" % (value,))
    raise ValueError("unknown parameter type %r" % (kind,))


def check_param_name(name):
    if not isinstance(name, str) or not _PARAM_NAME_RE.match(name):
        raise OptionError("%r is not a parameter name: letters, digits, '_' and '-' only" % (name,))


def render_options_line(module, options):
    """``options <module> k=v ...`` with keys sorted; raises OptionError for a bad name/value."""
    parts = []
    for key in sorted(options):
        check_param_name(key)
        parts.append("%s=%s" % (key, format_value(options[key])))
    return "options %s %s" % (module, " ".join(parts))


def numbered_lines(text):
    """``[(number, line)]`` of a modprobe.d file as kmod reads it: a trailing backslash joins the
    next line (the number is that of the first); blank lines and ``#`` comments are dropped."""
    lines = []
    pending = ""
    start = None
    for number, raw in enumerate((text or "").splitlines(), 1):
        if start is None:
            start = number
        if raw.endswith("\\"):
            pending += raw[:-1]
            continue
        line = (pending + raw).strip()
        pending = ""
        if line and not line.startswith("#"):
            lines.append((start, line))
        start = None
    if pending.strip() and not pending.strip().startswith("#"):
        lines.append((start, pending.strip()))
    return lines


def logical_lines(text):
    """Lines of a modprobe.d file as kmod reads them (see numbered_lines), without numbers."""
    return [line for _number, line in numbered_lines(text)]


def parse_options(text, module):
    """``[(param, value), ...]`` that ``options`` lines of ``text`` set for ``module``, in
    order; the value is None for a bare flag. Parameter names come back canonical."""
    wanted = canonical(module)
    found = []
    for line in logical_lines(text):
        fields = line.split(None, 2)
        if len(fields) < 3 or fields[0] != "options" or canonical(fields[1]) != wanted:
            continue
        for raw in kernel_args.split(fields[2]):
            arg = kernel_args.Arg(raw)
            found.append((canonical(arg.name), arg.value))
    return found


def config_files(root="/", dirs=MODPROBE_D_DIRS, extra_names=()):
    """The ``*.conf`` files kmod (or systemd-modules-load) reads, in the order it reads them.

    A name in an earlier directory hides the same name in later ones; the files are then
    read in name order. ``extra_names`` adds ``(name, path)`` pairs not on disk yet (a file a
    module is about to write) so its place in the order can be known beforehand.
    """
    chosen = {}
    for name, path in extra_names:
        chosen[name] = path
    for directory in dirs:
        full = os.path.join(root, directory)
        for entry in _listdir(full):
            if not entry.endswith(".conf") or entry.startswith(".") or entry in chosen:
                continue
            path = os.path.join(full, entry)
            if os.path.isfile(path) or os.path.islink(path):
                chosen[entry] = path
    return [chosen[name] for name in sorted(chosen)]


def option_sources(module, root="/", extra_names=()):
    """Every parameter setting of ``module`` in modprobe.d, in the order the kernel applies
    them: ``[{"path", "param", "value", "order"}]`` (``order`` is the file's place)."""
    found = []
    for order, path in enumerate(config_files(root, MODPROBE_D_DIRS, extra_names)):
        for param, value in parse_options(fileops.read_quiet(path) or "", module):
            found.append({"path": path, "param": param, "value": value, "order": order})
    return found


def option_conflicts(module, own_path, wanted, root="/", same=None):
    """Settings of ``wanted`` params in other modprobe.d files that differ from ours.

    Returns ``(overriding, overridden)``: lists of ``{"path", "param", "value"}`` read after our
    file (they win over it) and before it (ours wins). ``wanted`` maps canonical param names to
    our values as written in the file; ``same(ours, theirs)`` compares two values (default:
    equal strings).
    """
    same = same or (lambda a, b: a == b)
    name = os.path.basename(own_path)
    sources = option_sources(module, root, extra_names=[(name, own_path)])
    own_order = None
    for order, path in enumerate(config_files(root, MODPROBE_D_DIRS, [(name, own_path)])):
        if path == own_path:
            own_order = order
    overriding, overridden = [], []
    for item in sources:
        if item["path"] == own_path or item["param"] not in wanted:
            continue
        if same(wanted[item["param"]], item["value"]):
            continue
        entry = {"path": item["path"], "param": item["param"], "value": item["value"]}
        if own_order is None or item["order"] > own_order:
            overriding.append(entry)
        else:
            overridden.append(entry)
    return overriding, overridden


def modules_load_files(module, root="/"):
    """modules-load.d files (systemd-modules-load order) that list ``module``."""
    wanted = canonical(module)
    found = []
    for path in config_files(root, MODULES_LOAD_D_DIRS):
        for line in (fileops.read_quiet(path) or "").splitlines():
            line = line.strip()
            if line and not line.startswith(("#", ";")) and canonical(line.split()[0]) == wanted:
                found.append(path)
                break
    return found


# --- what stops a module from loading, and options on the kernel command line ---------------


def _install_effect(module, command):
    """``(effect, meaning)`` of ``install <module> <command>``."""
    words = [w for w in _SHELL_SPLIT_RE.split(command) if w]
    for index, word in enumerate(words):
        if os.path.basename(word) != "modprobe":
            continue
        rest = words[index + 1:]
        ignores = any(w in ("-i", "--ignore-install") or (w.startswith("-") and not w.startswith("--")
                                                          and "i" in w[1:]) for w in rest)
        names = [canonical(w) for w in rest if not w.startswith("-")]
        if ignores and (canonical(module) in names or "$MODPROBE_MODULE" in rest):
            return ("loads_via_command",
                    "modprobe runs this command instead, and it loads %s itself (modprobe --ignore-install), "
                    "reading the modprobe.d options again" % module)
    first = os.path.basename(words[0]) if words else ""
    if first in _NO_LOAD_COMMANDS:
        outcome = {"false": "modprobe fails", "exit": "modprobe fails unless it exits 0"}.get(
            first, "modprobe reports success")
        return ("never_loads",
                "modprobe runs %r instead of loading %s (%s): nothing that loads modules through modprobe "
                "(udev at boot, systemd-modules-load, nvidia-modprobe, a plain modprobe) ever loads it, so its "
                "options never apply" % (command, module, outcome))
    return ("runs_command",
            "modprobe runs %r instead of loading %s: whether it loads, and with which options, is up to that "
            "command" % (command, module))


def _blacklist_meaning(module):
    return ("%s is not loaded through its aliases (udev's hardware autoload at boot), by systemd-modules-load "
            "(modules-load.d) or by modprobe -b; a plain 'modprobe %s' and modules that depend on it still load it, "
            "with its options" % (module, module))


def load_blockers(module, root="/", proc_root=None):
    """Rules that stop ``module`` from loading, or change what loading it means.

    Reads every modprobe.d file kmod reads (in its order) and the running kernel command line
    (``proc_root``/cmdline, default ``root``/proc). Returns ``[{"path", "line", "rule",
    "effect", "meaning"}]`` (``line`` None for the command line); ``effect`` is one of:

    - ``never_loads``: an install command that loads nothing (``/bin/true``, ``/bin/false``),
      or ``module_blacklist=`` on the command line (the kernel refuses the module);
    - ``redirected``: an ``alias`` whose name matches the module, so modprobe loads another
      module under that name (a config alias wins over the module's own name);
    - ``runs_command``: any other install command (it may or may not load the module);
    - ``loads_via_command``: an install command that loads it itself with
      ``modprobe --ignore-install`` (options still apply);
    - ``blacklist``: ``blacklist`` in modprobe.d or ``modprobe.blacklist=`` (see
      _blacklist_meaning: autoload, systemd-modules-load and ``modprobe -b`` skip it, a plain
      modprobe still loads it).

    Module names in modprobe.d compare with ``-`` and ``_`` equal (kmod normalises them); the
    command-line lists are compared as written, as the kernel and kmod do.
    """
    wanted = canonical(module)
    found = []
    for path in config_files(root, MODPROBE_D_DIRS):
        for number, line in numbered_lines(fileops.read_quiet(path) or ""):
            fields = line.split(None, 2)
            if len(fields) < 2:
                continue
            verb, name = fields[0], fields[1]
            entry = {"path": path, "line": number, "rule": line}
            if verb == "blacklist" and canonical(name) == wanted:
                entry.update(effect="blacklist", meaning=_blacklist_meaning(wanted))
            elif verb == "install" and canonical(name) == wanted and len(fields) == 3:
                effect, meaning = _install_effect(wanted, fields[2])
                entry.update(effect=effect, meaning=meaning)
            elif verb == "alias" and len(fields) == 3 and fnmatch.fnmatchcase(wanted, canonical(name)):
                target = fields[2].split()[0] if fields[2].split() else ""
                if canonical(target) == wanted:
                    continue
                entry.update(effect="redirected",
                             meaning="'modprobe %s' loads %r instead (an alias in modprobe.d wins over the module's "
                                     "own name), so %s and its options never load that way" % (wanted, target, wanted))
            else:
                continue
            found.append(entry)
    cmdline_path = os.path.join(proc_root or os.path.join(root, "proc"), "cmdline")
    tokens = kernel_args.split(fileops.read_quiet(cmdline_path) or "")
    for token in kernel_args.kernel_part(tokens):
        arg = kernel_args.Arg(token)
        if arg.value is None or arg.key not in ("module_blacklist", "modprobe.blacklist"):
            continue
        if wanted not in arg.value.split(","):
            continue
        entry = {"path": cmdline_path, "line": None, "rule": token}
        if arg.key == "module_blacklist":
            entry.update(effect="never_loads",
                         meaning="the running kernel refuses to load %s (module_blacklist= on its command line): it "
                                 "cannot load until a boot without it" % wanted)
        else:
            entry.update(effect="blacklist", meaning=_blacklist_meaning(wanted))
        found.append(entry)
    return found


def blocks_loading(entry):
    """True for a load_blockers entry after which the module never loads through modprobe."""
    return entry["effect"] in ("never_loads", "redirected")


def describe_blocker(entry):
    """``/etc/modprobe.d/x.conf:3: install nvidia /bin/false: <meaning>``."""
    where = entry["path"] if entry["line"] is None else "%s:%d" % (entry["path"], entry["line"])
    return "%s: %r: %s" % (where, entry["rule"], entry["meaning"])


def _kcmdline_option(token):
    """``(module, param, value)`` of one command-line token as kmod reads ``module.param=value``
    (value None for a bare ``module.param``); None for anything else."""
    quoted = token.startswith('"')
    body = token[1:] if quoted else token
    dot = body.find(".")
    if dot <= 0:
        return None
    modname = body[:dot]
    if "=" in modname or '"' in modname:
        return None
    rest = body[dot + 1:]
    equals = rest.find("=")
    param = rest if equals < 0 else rest[:equals]
    if quoted and equals < 0 and param.endswith('"'):
        param = param[:-1]
    if not param or "." in param or '"' in param:
        return None
    value = None
    if equals >= 0:
        value = rest[equals + 1:]
        if value.startswith('"'):
            value = value[1:]
            if value.endswith('"'):
                value = value[:-1]
        elif quoted and value.endswith('"'):
            value = value[:-1]
    return canonical(modname), canonical(param), value


def cmdline_options(module, proc_root="/proc"):
    """Options for ``module`` on the running kernel command line (``module.param=value``):
    ``[{"param", "value", "arg"}]`` in order, param names canonical.

    kmod reads /proc/cmdline after every modprobe.d file and appends these options last, so
    they win over modprobe.d at every load (a reboot with the same command line changes
    nothing). Like kmod, the whole line is read, ``--`` included.
    """
    wanted = canonical(module)
    found = []
    for token in kernel_args.split(fileops.read_quiet(os.path.join(proc_root, "cmdline")) or ""):
        parsed = _kcmdline_option(token)
        if parsed and parsed[0] == wanted:
            found.append({"param": parsed[1], "value": parsed[2], "arg": token})
    return found
