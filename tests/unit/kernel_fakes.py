"""Fakes for kernel-module tests: a GPU node's /proc and /sys, module files with a real ELF
.modinfo section, and fake executables (modprobe, update-initramfs, dracut) put first on PATH;
and the change-record contract (``assert_changes_agree``, ``check_every_run``) that the
kernel_cmdline, nvidia_driver_options and nvidia_peermem tests hold every run to.

The fake executables are shell scripts that append their command line to ``$FAKE_LOG`` and can
be told to fail with a given message (``$FAKE_<NAME>_FAIL``; a failing modprobe first appends
``$FAKE_MODPROBE_ADD_SYMBOL`` to /proc/kallsyms and ib_core to /proc/modules, as a dependency it
loaded would). The fake modprobe also does what
the kernel would show afterwards: it creates or removes ``/sys/module/<m>`` and its
``/proc/modules`` line under ``$FAKE_ROOT``, so the modules' read-back is exercised.
"""

import os
import stat
import struct
import subprocess

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.commands import CommandResult
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree

RELEASE = "6.1.0-28-amd64"
DRIVER_VERSION = "580.159.04"
PEER_SYMBOL = "ib_register_peer_memory_client"

PARAMS_TEXT = (
    "ResmanDebugLevel: 4294967295\n"
    "RmLogonRC: 1\n"
    "ModifyDeviceFiles: 1\n"
    "EnableMSI: 1\n"
    "EnableStreamMemOPs: 0\n"
    "NvLinkDisable: 0\n"
    "RmProfilingAdminOnly: 1\n"
    "DynamicPowerManagement: 3\n"
    "EnableGpuFirmware: 18\n"
    "DmaRemapPeerMmio: 1\n"
    "GrdmaPciTopoCheckOverride: 0\n"
    "RegistryDwords: \"\"\n"
    "RegistryDwordsPerDevice: \"\"\n"
    "RmMsg: \"\"\n"
)


def elf_module(modinfo):
    """A minimal little-endian ELF64 relocatable file whose .modinfo section holds ``modinfo``
    (a list of (key, value)), like a .ko as modinfo(8) reads it."""
    section = b"".join(("%s=%s" % (k, v)).encode() + b"\0" for k, v in modinfo)
    rodata = b"\0version=wrong-place\0"  # a decoy outside .modinfo
    shstrtab = b"\0.rodata\0.modinfo\0.shstrtab\0"
    data = bytearray(b"\0" * 64)
    off_rodata = len(data)
    data += rodata
    off_modinfo = len(data)
    data += section
    off_shstr = len(data)
    data += shstrtab
    while len(data) % 8:
        data += b"\0"
    shoff = len(data)

    def sh(name, typ, offset, size):
        return struct.pack("<IIQQQQIIQQ", name, typ, 0, 0, offset, size, 0, 0, 1, 0)

    data += sh(0, 0, 0, 0)
    data += sh(shstrtab.index(b".rodata"), 1, off_rodata, len(rodata))
    data += sh(shstrtab.index(b".modinfo"), 1, off_modinfo, len(section))
    data += sh(shstrtab.index(b".shstrtab"), 3, off_shstr, len(shstrtab))
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header += struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 4, 3)
    data[:64] = header
    return bytes(data)


def peermem_ko(release=RELEASE, version=DRIVER_VERSION):
    return elf_module([("version", version), ("license", "Dual BSD/GPL"), ("depends", "nvidia,ib_core"),
                       ("name", "nvidia_peermem"), ("vermagic", "%s SMP preempt mod_unload modversions" % release)])


def kallsyms(with_peer_symbol, module="ib_core"):
    lines = [
        "ffffffff81000000 T startup_64",
        "ffffffff81000040 T __ksymtab_%s_decoy" % PEER_SYMBOL,
        "ffffffffc0a00000 t nv_mem_get_pages\t[nvidia]",
    ]
    if with_peer_symbol:
        lines.append("ffffffffc0b1b2c0 T %s\t[%s]" % (PEER_SYMBOL, module))
        lines.append("ffffffffc0b1b300 r __ksymtab_%s\t[%s]" % (PEER_SYMBOL, module))
    lines.append("ffffffffc0c00000 T ib_register_client\t[ib_core]")
    return "\n".join(lines) + "\n"


CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-%s root=UUID=0b1c ro quiet" % RELEASE


def gpu_node(root, driver=True, ib_core=False, peer_symbol=False, peermem_loaded=False,
             ko="dep", rdma=(), provider=False, peermem_params=None, release=RELEASE,
             legacy_loaded=False, cmdline=CMDLINE):
    """Build a node: ``ko`` is 'dep' (in modules.dep), 'extra' (/usr/local/nvidia/modules only),
    'tree' (under /lib/modules but not indexed) or None. ``legacy_loaded`` loads MLNX_OFED's
    nv_peer_mem; ``cmdline`` is /proc/cmdline (without its newline)."""
    files = {
        "proc/cmdline": cmdline + "\n",
        "proc/sys/kernel/osrelease": release + "\n",
        "proc/self/uid_map": "         0          0 4294967295\n",
        "proc/kallsyms": kallsyms(peer_symbol),
        "sys/class/infiniband": None,
        "etc/modules-load.d": None,
        "etc/modprobe.d": None,
    }
    modules = ["nvme 61440 3 - Live 0x0000000000000000"]
    if driver:
        modules.append("nvidia 11218944 42 nvidia_uvm, Live 0x0000000000000000 (POE)")
        files["sys/module/nvidia/version"] = DRIVER_VERSION + "\n"
        files["sys/module/nvidia/initstate"] = "live\n"
        files["proc/driver/nvidia/version"] = (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  "
            "(dvs-builder@U22-I3-AM02-24-3)  Thu Oct  9 2025\nGCC version:  gcc version 12.2.0\n" % DRIVER_VERSION)
        files["proc/driver/nvidia/params"] = PARAMS_TEXT
    if ib_core:
        modules.append("ib_core 462848 2 ib_uverbs,mlx5_ib, Live 0x0000000000000000")
        files["sys/module/ib_core/initstate"] = "live\n"
        files["sys/module/ib_core/refcnt"] = "2\n"
    if peermem_loaded:
        modules.append("nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)")
        files["sys/module/nvidia_peermem/initstate"] = "live\n"
        files["sys/module/nvidia_peermem/refcnt"] = "0\n"
        files["sys/module/nvidia_peermem/holders"] = None
        files["sys/module/nvidia_peermem/version"] = DRIVER_VERSION + "\n"
        for key, value in (peermem_params or {"peerdirect_support": "0", "persistent_api_support": "1"}).items():
            files["sys/module/nvidia_peermem/parameters/%s" % key] = "%s\n" % value
    if legacy_loaded:
        modules.append("nv_peer_mem 16384 0 - Live 0x0000000000000000 (OE)")
        files["sys/module/nv_peer_mem/initstate"] = "live\n"
        files["sys/module/nv_peer_mem/refcnt"] = "0\n"
    files["proc/modules"] = "\n".join(modules) + "\n"
    for name in rdma:
        files["sys/class/infiniband/%s/node_type" % name] = "1: CA\n"
    base = "lib/modules/%s" % release
    dep_lines = ["kernel/drivers/nvme/host/nvme.ko.xz: kernel/drivers/nvme/host/nvme-core.ko.xz"]
    if ko == "dep":
        files[base + "/updates/dkms/nvidia-peermem.ko"] = peermem_ko(release)
        dep_lines.append("updates/dkms/nvidia-peermem.ko: updates/dkms/nvidia.ko kernel/drivers/infiniband/core/ib_core.ko")
        files[base + "/updates/dkms/nvidia.ko"] = elf_module([("version", DRIVER_VERSION)])
        dep_lines.append("updates/dkms/nvidia.ko:")
    elif ko == "tree":
        files[base + "/updates/dkms/nvidia-peermem.ko"] = peermem_ko(release)
    elif ko == "extra":
        files["usr/local/nvidia/modules/nvidia-peermem.ko"] = peermem_ko(release)
        files["usr/local/nvidia/modules/nvidia.ko"] = elf_module([("version", DRIVER_VERSION)])
    if ko != "extra":
        files[base + "/modules.dep"] = "\n".join(dep_lines) + "\n"
        symbols = ["alias symbol:nvme_complete_rq nvme_core"]
        if provider:
            symbols.append("alias symbol:%s ib_core" % PEER_SYMBOL)
        files[base + "/modules.symbols"] = "# Aliases for symbols, used by symbol_request().\n" + "\n".join(symbols) + "\n"
    write_tree(root, files)
    return root


# --- fake executables --------------------------------------------------------------------

MODPROBE = r"""#!/bin/sh
echo "modprobe $*" >> "$FAKE_LOG"
if [ -n "$FAKE_MODPROBE_FAIL" ]; then
    # A dependency (ib_core) loaded before the module itself failed: its symbols appear, and
    # the module is listed in /proc/modules as the kernel lists it.
    if [ -n "$FAKE_MODPROBE_ADD_SYMBOL" ]; then
        printf '%s\n' "$FAKE_MODPROBE_ADD_SYMBOL" >> "$FAKE_ROOT/proc/kallsyms"
        grep -q '^ib_core ' "$FAKE_ROOT/proc/modules" 2>/dev/null ||
            echo "ib_core 462848 0 - Live 0x0000000000000000" >> "$FAKE_ROOT/proc/modules"
    fi
    echo "$FAKE_MODPROBE_FAIL" >&2
    exit 1
fi
[ -n "$FAKE_MODPROBE_NOLOAD" ] && exit 0
if [ "$1" = "-r" ]; then
    rm -rf "$FAKE_ROOT/sys/module/$2"
    grep -v "^$2 " "$FAKE_ROOT/proc/modules" > "$FAKE_ROOT/proc/modules.new"
    mv "$FAKE_ROOT/proc/modules.new" "$FAKE_ROOT/proc/modules"
    exit 0
fi
mod="$1"; shift
dir="$FAKE_ROOT/sys/module/$mod"
mkdir -p "$dir/parameters" "$dir/holders"
echo live > "$dir/initstate"
echo 0 > "$dir/refcnt"
for pair in ${FAKE_MODPROBE_DEFAULTS:-peerdirect_support=0 persistent_api_support=1} "$@"; do
    echo "${pair#*=}" > "$dir/parameters/${pair%%=*}"
done
echo "$mod 16384 0 - Live 0x0000000000000000" >> "$FAKE_ROOT/proc/modules"
"""

RECORDER = r"""#!/bin/sh
echo "%(name)s $*" >> "$FAKE_LOG"
if [ -n "$%(fail_var)s" ]; then
    echo "$%(fail_var)s" >&2
    exit 1
fi
exit 0
"""


def _write_exec(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def fail_var(name):
    return "FAKE_%s_FAIL" % name.upper().replace("-", "_")


class FakeBin:
    """A directory of fake executables first on PATH, and the log they append to."""

    def __init__(self, tmp_path, monkeypatch, root, names=("modprobe",)):
        self.dir = os.path.join(str(tmp_path), "fakebin")
        self.log = os.path.join(str(tmp_path), "fakebin.log")
        os.makedirs(self.dir, exist_ok=True)
        for name in names:
            self.add(name)
        self._monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", self.dir + os.pathsep + "/usr/bin" + os.pathsep + "/bin")
        monkeypatch.setenv("FAKE_LOG", self.log)
        monkeypatch.setenv("FAKE_ROOT", str(root))
        for name in ("modprobe", "update-initramfs", "dracut"):
            monkeypatch.delenv(fail_var(name), raising=False)

    def add(self, name):
        text = MODPROBE if name == "modprobe" else RECORDER % {"name": name, "fail_var": fail_var(name)}
        _write_exec(os.path.join(self.dir, name), text)

    def remove(self, name):
        os.unlink(os.path.join(self.dir, name))

    def fail(self, name, message):
        self._monkeypatch.setenv(fail_var(name), message)

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as handle:
            return [line.rstrip("\n") for line in handle]


def path_only_get_bin_path(arg, opt_dirs=None, required=None):
    """get_bin_path limited to $PATH: the real one adds /sbin and /usr/sbin, where a real
    modprobe or update-initramfs of the test machine would be found (and run)."""
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, arg)
        if directory and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise ValueError("Failed to find required executable %r in paths: %s" % (arg, os.environ.get("PATH")))


def confine_bin_lookup(monkeypatch):
    """Make AnsibleModule.get_bin_path search $PATH only (see path_only_get_bin_path)."""
    from ansible.module_utils import basic
    monkeypatch.setattr(basic, "get_bin_path", path_only_get_bin_path)


class PathCommands:
    """The Commands interface for engine tests: $PATH lookup and subprocess, no AnsibleModule."""

    def which(self, name):
        try:
            return path_only_get_bin_path(name)
        except ValueError:
            return None

    def run(self, argv):
        proc = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False, env=dict(os.environ, LANG="C", LC_ALL="C"))
        return CommandResult(argv, proc.returncode, proc.stdout, proc.stderr)


def capture_warnings(monkeypatch, module):
    """Collect what a module passes to AnsibleModule.warn. Warnings do not come back in the
    result when tests run in one process: once any test has loaded controller code, ansible-core
    sends module warnings to the controller's display instead."""
    warned = []
    monkeypatch.setattr(module.AnsibleModule, "warn", lambda self, text: warned.append(text))
    return warned


# --- the change-record contract -------------------------------------------------------------

# The record contract is tests/unit/contract.py's; these names are what the kernel tests use.
assert_changes_agree = contract.assert_records
assert_no_change_claimed = contract.assert_no_change_claimed


def check_every_run(monkeypatch, engine, area):
    """Every call of ``engine.run`` in a test keeps the record contract."""
    contract.checking_records(monkeypatch, engine, area)
