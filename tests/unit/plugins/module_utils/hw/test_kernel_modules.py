"""Kernel-module state, module files, symbols and modprobe.d/modules-load.d parsing against
fake /proc, /sys and /lib/modules trees."""

import gzip
import lzma
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_modules as km
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree


def test_canonical_and_file_names():
    assert km.canonical("nvidia-peermem") == "nvidia_peermem"
    assert km.module_name_of("/x/nvidia-peermem.ko.zst") == "nvidia_peermem"
    assert km.module_name_of("ib_core.ko.xz") == "ib_core"
    assert km.module_name_of("nvidia.ko.gz") == "nvidia"
    assert km.module_name_of("modules.dep") is None
    assert km.module_name_of("nvidia.kox") is None


def test_proc_modules_parses_refcount_users_and_state(tmp_path):
    write_tree(tmp_path, {"proc/modules": (
        "ib_core 462848 8 rdma_cm,ib_cm,iw_cm,ib_uverbs,mlx5_ib, Live 0xffffffffc0a00000\n"
        "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
        "nvidia_uvm 1798144 2 - Loading 0x0000000000000000 (POE)\n"
        "odd_line\n")})
    mods = km.proc_modules(str(tmp_path / "proc"))
    assert mods["ib_core"] == {"size": 462848, "refcnt": 8, "used_by": ["rdma_cm", "ib_cm", "iw_cm", "ib_uverbs",
                                                                        "mlx5_ib"], "state": "live"}
    assert mods["nvidia_peermem"]["used_by"] == [] and mods["nvidia_peermem"]["refcnt"] == 0
    assert mods["nvidia_uvm"]["state"] == "loading"
    assert sorted(mods) == ["ib_core", "nvidia_peermem", "nvidia_uvm"]


def test_proc_modules_none_without_module_support(tmp_path):
    assert km.proc_modules(str(tmp_path / "proc")) is None


def test_module_state_loaded_builtin_and_absent(tmp_path):
    write_tree(tmp_path, {
        "proc/modules": "ib_core 462848 2 ib_uverbs,mlx5_ib, Live 0x0\n",
        "sys/module/ib_core/initstate": "live\n",
        "sys/module/ib_core/refcnt": "2\n",
        "sys/module/ib_core/holders/ib_uverbs": "",
        "sys/module/ib_core/holders/rdma_ucm": "",
        "sys/module/ib_core/parameters/netns_mode": "Y\n",
        "sys/module/ib_core/version": "24.10-1.1.4\n",
        "sys/module/pcie_aspm/parameters/policy": "[default] performance\n",
    })
    proc, sys_root = str(tmp_path / "proc"), str(tmp_path / "sys")
    state = km.module_state("ib-core", proc, sys_root)
    assert state == {"name": "ib_core", "loaded": True, "builtin": False, "state": "live", "refcnt": 2,
                     "holders": ["ib_uverbs", "mlx5_ib", "rdma_ucm"], "version": "24.10-1.1.4",
                     "params": {"netns_mode": "Y"}}
    builtin = km.module_state("pcie_aspm", proc, sys_root)
    assert builtin["loaded"] is False and builtin["builtin"] is True
    assert builtin["params"] == {"policy": "[default] performance"}
    absent = km.module_state("nvidia_peermem", proc, sys_root)
    assert absent["loaded"] is False and absent["builtin"] is False and absent["params"] == {}


def test_in_use_reasons():
    assert km.in_use({"refcnt": 0, "holders": []}) is None
    assert km.in_use({"refcnt": 3, "holders": ["mlx5_ib"]}) == "reference count 3; used by mlx5_ib"


def test_find_module_file_prefers_modules_dep(tmp_path):
    kf.gpu_node(tmp_path, ko="dep")
    found = km.find_module_file("nvidia-peermem", str(tmp_path / "lib/modules"), kf.RELEASE,
                                [str(tmp_path / "usr/local/nvidia/modules")])
    assert found["path"] == str(tmp_path / "lib/modules" / kf.RELEASE / "updates/dkms/nvidia-peermem.ko")
    assert found["modprobe_visible"] is True and found["modules_dep"] is True


def test_find_module_file_outside_the_index(tmp_path):
    kf.gpu_node(tmp_path, ko="tree")
    found = km.find_module_file("nvidia_peermem", str(tmp_path / "lib/modules"), kf.RELEASE, [])
    assert found["path"].endswith("updates/dkms/nvidia-peermem.ko")
    assert found["modprobe_visible"] is False and found["modules_dep"] is True


def test_find_module_file_in_extra_dir_without_module_tree(tmp_path):
    kf.gpu_node(tmp_path, ko="extra")
    extra = str(tmp_path / "usr/local/nvidia/modules")
    found = km.find_module_file("nvidia_peermem", str(tmp_path / "lib/modules"), kf.RELEASE, [extra])
    assert found == {"path": os.path.join(extra, "nvidia-peermem.ko"), "modprobe_visible": False,
                     "searched": [str(tmp_path / "lib/modules" / kf.RELEASE), extra], "modules_dep": False}


def test_find_module_file_compressed_and_missing(tmp_path):
    base = tmp_path / "lib/modules" / kf.RELEASE
    write_tree(tmp_path, {"lib/modules/%s/kernel/drivers/infiniband/core/ib_core.ko.zst" % kf.RELEASE: b"x"})
    found = km.find_module_file("ib_core", str(tmp_path / "lib/modules"), kf.RELEASE, [])
    assert found["path"] == str(base / "kernel/drivers/infiniband/core/ib_core.ko.zst")
    missing = km.find_module_file("nvidia", str(tmp_path / "lib/modules"), kf.RELEASE, [str(tmp_path / "none")])
    assert missing["path"] is None and missing["modprobe_visible"] is False


@pytest.mark.parametrize("suffix,wrap", [(".ko", lambda b: b), (".ko.xz", lzma.compress), (".ko.gz", gzip.compress)])
def test_modinfo_reads_the_modinfo_section(tmp_path, suffix, wrap):
    path = tmp_path / ("nvidia-peermem" + suffix)
    path.write_bytes(wrap(kf.peermem_ko()))
    info = km.modinfo(str(path))
    assert info["version"] == kf.DRIVER_VERSION  # not the decoy in .rodata
    assert info["vermagic"] == "%s SMP preempt mod_unload modversions" % kf.RELEASE
    assert info["depends"] == "nvidia,ib_core"


def test_modinfo_of_unreadable_files_is_empty(tmp_path):
    (tmp_path / "a.ko").write_bytes(b"not an elf file at all" * 10)
    (tmp_path / "b.ko.zst").write_bytes(b"(\xb5/\xfd")
    (tmp_path / "c.ko").write_bytes(kf.peermem_ko()[:200])  # section headers cut off
    assert km.modinfo(str(tmp_path / "a.ko")) == {}
    assert km.modinfo(str(tmp_path / "b.ko.zst")) == {}
    assert km.modinfo(str(tmp_path / "c.ko")) == {}
    assert km.modinfo(str(tmp_path / "missing.ko")) == {}


def test_kallsyms_lookup_matches_the_exact_symbol(tmp_path):
    write_tree(tmp_path, {"proc/kallsyms": kf.kallsyms(True)})
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, str(tmp_path / "proc")) == {
        "readable": True, "found": True, "module": "ib_core"}
    write_tree(tmp_path, {"proc/kallsyms": kf.kallsyms(False)})  # only the __ksymtab decoy
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, str(tmp_path / "proc")) == {
        "readable": True, "found": False, "module": None}
    assert km.kallsyms_lookup("startup_64", str(tmp_path / "proc"))["module"] is None
    assert km.kallsyms_lookup("x", str(tmp_path / "nowhere"))["readable"] is False


def test_kallsyms_is_read_again_only_when_a_module_came_or_went(tmp_path, monkeypatch):
    """procfs gives /proc/kallsyms a fixed stat, so the loaded modules are what says it changed."""
    write_tree(tmp_path, {"proc/kallsyms": kf.kallsyms(False), "proc/modules": "nvidia 1 0 - Live 0x0\n"})
    proc = str(tmp_path / "proc")
    reads = []
    real = km._kallsyms_read
    monkeypatch.setattr(km, "_kallsyms_read", lambda path, symbol: reads.append(path) or real(path, symbol))
    fixed = os.stat(os.path.join(proc, "kallsyms"))
    monkeypatch.setattr(km.os, "stat", lambda path, *a, **k: fixed if path.endswith("/kallsyms") else os.lstat(path))
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, proc)["found"] is False
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, proc)["found"] is False
    assert len(reads) == 1
    # ib_core loaded: its symbols are in kallsyms now (same stat, as procfs reports it).
    write_tree(tmp_path, {"proc/kallsyms": kf.kallsyms(True), "proc/modules": "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n"})
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, proc) == {"readable": True, "found": True, "module": "ib_core"}
    assert len(reads) == 2


def test_the_peer_symbol_is_not_looked_for_while_its_only_provider_is_not_loaded(tmp_path, monkeypatch):
    write_tree(tmp_path, {"proc/kallsyms": kf.kallsyms(True), "proc/modules": "nvidia 1 0 - Live 0x0\n", "sys/module": None})
    proc, sys_root = str(tmp_path / "proc"), str(tmp_path / "sys")
    reads = []
    real = km._kallsyms_read
    monkeypatch.setattr(km, "_kallsyms_read", lambda path, symbol: reads.append(path) or real(path, symbol))
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, proc, provider="ib_core", sys_root=sys_root) == {
        "readable": True, "found": False, "module": None}
    assert reads == []
    # Loaded as a module, or built in (its /sys/module entry): the file is read.
    write_tree(tmp_path, {"proc/modules": "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n"})
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, proc, provider="ib_core", sys_root=sys_root)["found"] is True
    write_tree(tmp_path, {"proc/modules": "nvidia 1 0 - Live 0x0\n", "sys/module/ib_core": None})
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, proc, provider="ib_core", sys_root=sys_root)["found"] is True
    assert len(reads) == 2


def test_symbol_providers_from_modules_symbols(tmp_path):
    kf.gpu_node(tmp_path, provider=True)
    lib = str(tmp_path / "lib/modules")
    assert km.symbol_providers(kf.PEER_SYMBOL, lib, kf.RELEASE) == ["ib_core"]
    assert km.symbol_providers("nothing_exports_this", lib, kf.RELEASE) == []
    assert km.symbol_providers(kf.PEER_SYMBOL, lib, "5.0.0-none") is None


def test_rdma_devices(tmp_path):
    kf.gpu_node(tmp_path, rdma=("mlx5_1", "mlx5_0"))
    assert km.rdma_devices(str(tmp_path / "sys")) == ["mlx5_0", "mlx5_1"]
    assert km.rdma_devices(str(tmp_path / "nosys")) == []


@pytest.mark.parametrize("value,written", [
    (1, "1"), (True, "1"), (False, "0"), (4294967295, "4294967295"),
    ("FULL", "FULL"), ("0x10", "0x10"), ("GPU-1234,GPU-5678", "GPU-1234,GPU-5678"),
    ("A=1;B=2", '"A=1;B=2"'), ("a b", '"a b"'), ("", '""'), ("PeerMappingOverride=1;", '"PeerMappingOverride=1;"'),
])
def test_format_value_quotes_only_what_needs_it(value, written):
    assert km.format_value(value) == written


@pytest.mark.parametrize("value,why", [
    ('a"b', "double quote"), ("a\\", "backslash"), ("a\nb", "control"), (1.5, "float"), ([1], "list"),
])
def test_format_value_refuses_what_cannot_be_written(value, why):
    with pytest.raises(km.OptionError) as exc:
        km.format_value(value)
    assert why in str(exc.value)


def test_render_options_line_sorted_and_quoted():
    line = km.render_options_line("nvidia", {"NVreg_RegistryDwords": "A=1;B=2", "NVreg_EnableMSI": 1})
    assert line == 'options nvidia NVreg_EnableMSI=1 NVreg_RegistryDwords="A=1;B=2"'
    with pytest.raises(km.OptionError):
        km.render_options_line("nvidia", {"bad name": 1})


def test_parse_options_handles_quotes_continuations_and_comments():
    text = (
        "# options nvidia NVreg_Commented=1\n"
        "options nvidia NVreg_EnableMSI=1 \\\n"
        "   NVreg_RegistryDwords=\"A=1; B=2\"\n"
        "options nvidia-drm modeset=1\n"
        "options  nvidia\tNVreg_Flag\n"
        "blacklist nouveau\n"
        "options nvidia_peermem peerdirect-support=1\n"
    )
    assert km.parse_options(text, "nvidia") == [
        ("NVreg_EnableMSI", "1"), ("NVreg_RegistryDwords", "A=1; B=2"), ("NVreg_Flag", None)]
    assert km.parse_options(text, "nvidia-peermem") == [("peerdirect_support", "1")]
    assert km.parse_options(text, "nvidia_drm") == [("modeset", "1")]


def test_render_then_parse_round_trips():
    options = {"NVreg_RegistryDwords": "RMIntrLockingMode=1;EnableStreamMemOPs=1", "NVreg_TemporaryFilePath": "/var/tmp x"}
    line = km.render_options_line("nvidia", options)
    assert dict(km.parse_options(line + "\n", "nvidia")) == options


def test_config_files_order_and_masking(tmp_path):
    write_tree(tmp_path, {
        "lib/modprobe.d/nvidia.conf": "options nvidia NVreg_EnableMSI=0\n",
        "lib/modprobe.d/aliases.conf": "",
        "etc/modprobe.d/nvidia.conf": "options nvidia NVreg_EnableMSI=1\n",  # hides /lib's
        "usr/lib/modprobe.d/50-x.conf": "",
        "etc/modprobe.d/README": "not a conf file",
        "etc/modprobe.d/.hidden.conf": "",
    })
    files = km.config_files(str(tmp_path))
    assert files == [str(tmp_path / "usr/lib/modprobe.d/50-x.conf"), str(tmp_path / "lib/modprobe.d/aliases.conf"),
                     str(tmp_path / "etc/modprobe.d/nvidia.conf")]
    mine = str(tmp_path / "etc/modprobe.d/zz-mine.conf")
    assert km.config_files(str(tmp_path), extra_names=[("zz-mine.conf", mine)])[-1] == mine


def test_option_conflicts_split_by_read_order(tmp_path):
    write_tree(tmp_path, {
        "lib/modprobe.d/nvidia-graphics.conf": "options nvidia NVreg_EnableMSI=0 NVreg_DeviceFileMode=0660\n",
        "etc/modprobe.d/zzz-local.conf": "options nvidia NVreg_RegistryDwords=\"A=2\"\n",
        "etc/modprobe.d/aaa.conf": "options nvidia NVreg_DynamicPowerManagement=0\n",
    })
    own = str(tmp_path / "etc/modprobe.d/zz-gpufleet-nvidia.conf")
    wanted = {"NVreg_EnableMSI": "1", "NVreg_RegistryDwords": '"A=1"', "NVreg_DynamicPowerManagement": "0"}

    def same(ours, theirs):
        return ours.strip('"') == (theirs or "")
    overriding, overridden = km.option_conflicts("nvidia", own, wanted, str(tmp_path), same)
    assert overriding == [{"path": str(tmp_path / "etc/modprobe.d/zzz-local.conf"),
                           "param": "NVreg_RegistryDwords", "value": "A=2"}]
    assert overridden == [{"path": str(tmp_path / "lib/modprobe.d/nvidia-graphics.conf"),
                           "param": "NVreg_EnableMSI", "value": "0"}]


def test_modules_load_files(tmp_path):
    write_tree(tmp_path, {
        "etc/modules-load.d/rdma.conf": "# RDMA\nib_umad\nnvidia-peermem\n",
        "etc/modules-load.d/other.conf": "; nvidia_peermem commented\nbr_netfilter\n",
        "usr/lib/modules-load.d/nvidia.conf": "nvidia_peermem\n",
    })
    assert km.modules_load_files("nvidia_peermem", str(tmp_path)) == [
        str(tmp_path / "usr/lib/modules-load.d/nvidia.conf"), str(tmp_path / "etc/modules-load.d/rdma.conf")]


def test_kernel_release(tmp_path):
    write_tree(tmp_path, {"proc/sys/kernel/osrelease": "6.18.44-fc-v782\n"})
    assert km.kernel_release(str(tmp_path / "proc")) == "6.18.44-fc-v782"
    assert km.kernel_release(str(tmp_path / "none")) is None


# --- values as the kernel parses them (lib/kstrtox.c, kernel/params.c) ------------------------

@pytest.mark.parametrize("value,number", [
    (0, 0), (True, 1), (False, 0), (-1, -1), (2147483647, 2147483647), (-2147483648, -2147483648),
    ("0", 0), ("00", 0), ("-0", 0), ("+5", 5), ("017", 15), ("0x1f", 31), ("0X1F", 31), ("-0x10", -16),
    ("0x7fffffff", 2147483647), ("-2147483648", -2147483648), ("-020000000000", -2147483648),
])
def test_kernel_integer_accepts_what_kstrtoint_accepts(value, number):
    assert km.kernel_integer(value, "int") == number


@pytest.mark.parametrize("value,why", [
    (2147483648, "out of range"), ("2147483648", "out of range"), ("0x80000000", "out of range"),
    ("020000000000", "out of range"), (-2147483649, "out of range"), ("4294967295", "out of range"),
    ("0xffffffff", "out of range"), ("99999999999999999999999", "overflows 64 bits"),
    ("", "no digits"), ("-", "no digits"), ("0x", "'x' is not a digit of an octal number"),
    ("08", "'8' is not a digit of an octal number"), ("1.5", "'.' is not a digit"), ("1e3", "'e' is not a digit"),
    ("nan", "'n' is not a digit"), ("inf", "'i' is not a digit"), (" 1", "' ' is not a digit"),
    ("1 ", "' ' is not a digit"), ("1_000", "'_' is not a digit"), ("0o17", "'o' is not a digit"),
    ("0b1", "'b' is not a digit"), ("+-1", "'-' is not a digit"), ("-+1", "'+' is not a digit"),
    ("--1", "'-' is not a digit"), ("\u0663", "is not a digit"), ("yes", "'y' is not a digit"),
    (1.0, "floating-point"), (float("nan"), "floating-point"), (float("inf"), "floating-point"),
    ([1], "a list is not an integer"), (None, "a NoneType is not an integer"),
])
def test_kernel_integer_refuses_what_the_kernel_refuses(value, why):
    with pytest.raises(km.OptionError) as exc:
        km.kernel_integer(value, "int")
    assert why in str(exc.value)
    assert "-2147483648 to 2147483647" in str(exc.value)


def test_kernel_integer_other_types():
    assert km.kernel_integer("4294967295", "uint") == 4294967295
    assert km.kernel_integer("0xffffffffffffffff", "ulong") == 2 ** 64 - 1
    assert km.kernel_integer("-9223372036854775808", "long") == -2 ** 63
    for value, kind in (("-1", "uint"), ("4294967296", "uint"), ("256", "byte"), ("-32769", "short"),
                        ("9223372036854775808", "long"), ("-1", "ulong")):
        with pytest.raises(km.OptionError):
            km.kernel_integer(value, kind)


@pytest.mark.parametrize("value,numeric", [
    (1, True), (1.5, True), (True, True), ("0x10", True), ("-3", True), (".5", True), ("nan", True),
    ("inf", True), ("1e3", True), ("FULL", False), ("A=1;B=2", False), ("", False), ("/var/tmp", False),
    ("GPU-1234", False), (None, False),
])
def test_looks_numeric(value, numeric):
    assert km.looks_numeric(value) is numeric


def test_check_param_value_charp_and_bool():
    assert km.check_param_value("A=1;B=2", "charp") == "A=1;B=2"
    assert km.check_param_value(5, "charp") == "5"
    assert km.check_param_value("x" * 1024, "charp") == "x" * 1024
    with pytest.raises(km.OptionError) as exc:
        km.check_param_value("x" * 1025, "charp")
    assert "at most 1024 bytes" in str(exc.value) and "1025" in str(exc.value)
    with pytest.raises(km.OptionError):
        km.check_param_value("\u00e9" * 513, "charp")  # 1026 bytes in UTF-8
    with pytest.raises(km.OptionError):
        km.check_param_value(True, "charp")
    assert km.check_param_value("on", "bool") == 1 and km.check_param_value("N", "bool") == 0
    with pytest.raises(km.OptionError):
        km.check_param_value("maybe", "bool")
    assert km.check_param_value("0x10", "int") == 16


def test_format_value_refuses_undecodable_text():
    with pytest.raises(km.OptionError) as exc:
        km.format_value("a\udcffb")
    assert "UTF-8" in str(exc.value)


def test_numbered_lines_keep_the_first_line_of_a_continuation():
    text = "# comment\n\nblacklist a\noptions b x=1 \\\n  y=2\n  install c /bin/false\n"
    assert km.numbered_lines(text) == [(3, "blacklist a"), (4, "options b x=1   y=2"), (6, "install c /bin/false")]
    assert km.logical_lines(text) == ["blacklist a", "options b x=1   y=2", "install c /bin/false"]


# --- load blockers and command-line options ------------------------------------------------

def _blockers(tmp_path, files, module="nvidia"):
    write_tree(tmp_path, files)
    return [(os.path.relpath(b["path"], str(tmp_path)), b["line"], b["rule"], b["effect"])
            for b in km.load_blockers(module, str(tmp_path))]


def test_load_blockers_in_every_modprobe_d_directory(tmp_path):
    found = _blockers(tmp_path, {
        "etc/modprobe.d/a-disable.conf": "# install nvidia /bin/true\ninstall nvidia /bin/false\n",
        "run/modprobe.d/b-noop.conf": "install  nvidia\t/bin/true\n",
        "usr/lib/modprobe.d/c-bl.conf": "blacklist nouveau\nblacklist nvidia\n",
        "lib/modprobe.d/d-dash.conf": "blacklist nvidia-drm\n",  # another module
        "usr/local/lib/modprobe.d/e-alias.conf": "alias nvidia off\nalias nvidia nvidia\n",
        "etc/modprobe.d/f-cmd.conf": "install nvidia /sbin/modprobe --ignore-install nvidia $CMDLINE_OPTS; "
                                     "/sbin/modprobe nvidia-uvm\n",
        "etc/modprobe.d/g-script.conf": "install nvidia /usr/local/sbin/load-nvidia.sh\n",
        "etc/modprobe.d/h-README": "install nvidia /bin/false\n",  # not a .conf file: kmod skips it
        "proc/cmdline": "root=/dev/sda1 quiet\n",
    })
    assert found == [
        ("etc/modprobe.d/a-disable.conf", 2, "install nvidia /bin/false", "never_loads"),
        ("run/modprobe.d/b-noop.conf", 1, "install  nvidia\t/bin/true", "never_loads"),
        ("usr/lib/modprobe.d/c-bl.conf", 2, "blacklist nvidia", "blacklist"),
        ("usr/local/lib/modprobe.d/e-alias.conf", 1, "alias nvidia off", "redirected"),
        ("etc/modprobe.d/f-cmd.conf", 1, "install nvidia /sbin/modprobe --ignore-install nvidia $CMDLINE_OPTS; "
                                         "/sbin/modprobe nvidia-uvm", "loads_via_command"),
        ("etc/modprobe.d/g-script.conf", 1, "install nvidia /usr/local/sbin/load-nvidia.sh", "runs_command"),
    ]


def test_load_blockers_meanings_are_precise(tmp_path):
    write_tree(tmp_path, {"etc/modprobe.d/x.conf": "blacklist nvidia\ninstall nvidia /bin/false\n"
                                                   "install nvidia /bin/true\n"})
    blacklist, false, true = km.load_blockers("nvidia", str(tmp_path))
    assert "a plain 'modprobe nvidia'" in blacklist["meaning"] and "still load it" in blacklist["meaning"]
    assert "udev" in blacklist["meaning"] and "systemd-modules-load" in blacklist["meaning"]
    assert not km.blocks_loading(blacklist)
    assert "modprobe fails" in false["meaning"] and "options never apply" in false["meaning"]
    assert "modprobe reports success" in true["meaning"]
    assert km.blocks_loading(false) and km.blocks_loading(true)
    assert km.describe_blocker(false).startswith(str(tmp_path / "etc/modprobe.d/x.conf") + ":2: 'install nvidia")


def test_load_blockers_dash_and_underscore_spellings(tmp_path):
    found = _blockers(tmp_path, {
        "etc/modprobe.d/rdma.conf": "blacklist nvidia-peermem\ninstall nvidia_peermem /bin/true\n"
                                    "alias nvidia-peer* off\n",
    }, module="nvidia-peermem")
    assert [f[3] for f in found] == ["blacklist", "never_loads", "redirected"]


def test_load_blockers_follow_kmod_masking(tmp_path):
    found = _blockers(tmp_path, {
        "lib/modprobe.d/nvidia.conf": "install nvidia /bin/false\n",
        "etc/modprobe.d/nvidia.conf": "options nvidia NVreg_EnableMSI=1\n",  # hides /lib's file
    })
    assert found == []


def test_load_blockers_on_the_kernel_command_line(tmp_path):
    found = _blockers(tmp_path, {"proc/cmdline": "root=/dev/sda1 module_blacklist=nouveau,nvidia "
                                                 "modprobe.blacklist=nvidia_drm,nvidia -- module_blacklist=x\n"})
    assert found == [("proc/cmdline", None, "module_blacklist=nouveau,nvidia", "never_loads"),
                     ("proc/cmdline", None, "modprobe.blacklist=nvidia_drm,nvidia", "blacklist")]
    # The kernel and kmod compare these lists as written: nvidia-peermem is not nvidia_peermem there.
    assert _blockers(tmp_path, {"proc/cmdline": "module_blacklist=nvidia-peermem\n"}, "nvidia_peermem") == []
    assert _blockers(tmp_path, {"proc/cmdline": "module_blacklist=nvidia_peermem\n"}, "nvidia-peermem")[0][3] \
        == "never_loads"


def test_load_blockers_without_config(tmp_path):
    assert km.load_blockers("nvidia", str(tmp_path)) == []


def test_cmdline_options_read_like_kmod(tmp_path):
    write_tree(tmp_path, {"proc/cmdline": (
        'BOOT_IMAGE=/vmlinuz root=/dev/sda1 nvidia.NVreg_EnableMSI=0 nvidia-drm.modeset=1 '
        'nvidia.NVreg-EnableStreamMemOPs=1 "nvidia.NVreg_RegistryDwords=A=1;B 2" '
        'nvidia.NVreg_TemporaryFilePath="/var/tmp x" nvidia.NVreg_Flag nvidia.a.b=1 nvidia=1 '
        'x.nvidia.NVreg_X=1 nvidia.NVreg_Dup=1 -- nvidia.NVreg_Dup=2\n')})
    found = km.cmdline_options("nvidia", str(tmp_path / "proc"))
    assert [(f["param"], f["value"]) for f in found] == [
        ("NVreg_EnableMSI", "0"), ("NVreg_EnableStreamMemOPs", "1"), ("NVreg_RegistryDwords", "A=1;B 2"),
        ("NVreg_TemporaryFilePath", "/var/tmp x"), ("NVreg_Flag", None), ("NVreg_Dup", "1"), ("NVreg_Dup", "2")]
    assert found[2]["arg"] == '"nvidia.NVreg_RegistryDwords=A=1;B 2"'
    assert [f["param"] for f in km.cmdline_options("nvidia_drm", str(tmp_path / "proc"))] == ["modeset"]
    assert km.cmdline_options("nvidia", str(tmp_path / "none")) == []


def _filler(count):
    return "".join("ffffffff%08x t filler_symbol_%06d\n" % (i, i) for i in range(count))


@pytest.mark.parametrize("shift", range(0, 90, 7))
def test_kallsyms_lookup_finds_a_line_split_across_blocks(tmp_path, shift):
    """/proc/kallsyms is read in 1 MiB blocks: the symbol's line can straddle two of them,
    a longer symbol it prefixes must not match, and the last line may lack its newline."""
    head = _filler(20000)
    head += "ffffffff00000000 t %s\n" % ("p" * ((1 << 20) - len(head) - 120 + shift))
    line = "ffffffffc0a01230 T %s\t[ib_core]" % kf.PEER_SYMBOL
    decoy = "ffffffffc0a01200 T %s_v2\t[other]\n" % kf.PEER_SYMBOL
    assert len(head) < 1 << 20 < len(head + decoy + line)  # the first block ends in these two lines
    write_tree(tmp_path, {"proc/kallsyms": head + decoy + line + "\n" + _filler(10)})
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, str(tmp_path / "proc")) == {
        "readable": True, "found": True, "module": "ib_core"}
    write_tree(tmp_path, {"proc/kallsyms": head + decoy + line})  # no newline at the end
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, str(tmp_path / "proc"))["found"] is True
    write_tree(tmp_path, {"proc/kallsyms": head + decoy})
    assert km.kallsyms_lookup(kf.PEER_SYMBOL, str(tmp_path / "proc"))["found"] is False
