"""PCI config space over a fake /sys/bus/pci: capability walk, Device Control, link, writes."""

import io
import os
import shutil

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config as pc
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import (
    Config, GPU_DEVCTL, add_device, bridge_config, conventional_config, gpu_config, read_bytes, with_word)

GPU = "0000:41:00.0"
FIXTURE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                           "fixtures", "pci")


def sysfs(tmp_path):
    return str(tmp_path / "sys")


# ------------------------------------------------------------------------------- addresses

@pytest.mark.parametrize("text, expected", [
    ("0000:41:00.0", "0000:41:00.0"),
    ("41:00.0", "0000:41:00.0"),
    ("0001:C1:1F.7", "0001:c1:1f.7"),
    (" 0000:00:03.0 ", "0000:00:03.0"),
    # one parser for every caller: the CUDA driver and NVML print 8-digit domains, VMD has 5
    ("00000000:1B:00.0", "0000:1b:00.0"),
    ("10000:e1:00.0", "10000:e1:00.0"),
])
def test_parse_bdf_accepts_both_forms(text, expected):
    assert pc.parse_bdf(text) == expected


@pytest.mark.parametrize("text", ["0000:41:00", "41:00", "0000:41:20.0", "0000:41:00.8", "00:41:00.0",
                                  "000000000:41:00.0", "0000:g1:00.0", "0000-41-00.0", "", None, 4100])
def test_parse_bdf_refuses_with_the_accepted_forms(text):
    with pytest.raises(pc.PciError) as exc:
        pc.parse_bdf(text)
    assert repr(text) in str(exc.value) and "DDDD:BB:DD.F or BB:DD.F" in str(exc.value)


# ----------------------------------------------------------------------- capability walk

def test_express_capability_found_behind_other_caps():
    data = gpu_config()
    assert list(pc.walk_capabilities(data)) == [
        (0x01, 0x40), (0x05, 0x48), (0x10, 0x60), (0x11, 0x9C)]
    assert pc.express_capability(data) == 0x60
    assert pc.port_type(data, 0x60) == "endpoint"


def test_conventional_device_has_no_express_capability():
    with pytest.raises(pc.Unsupported) as exc:
        pc.express_capability(conventional_config())
    assert "no PCI Express capability" in str(exc.value)


def test_status_bit_4_clear_means_no_list_even_with_a_pointer():
    config = Config().chain((0x60, 0x10)).express(0x60)
    config.u16(0x06, 0)  # the pointer at 0x34 is still there, but the list is not valid
    with pytest.raises(pc.Unsupported) as exc:
        pc.express_capability(config.bytes())
    assert "Status bit 4 clear" in str(exc.value)
    assert list(pc.walk_capabilities(config.bytes())) == []


def test_capability_list_that_loops_is_reported_not_followed_forever():
    config = Config().chain((0x40, 0x01), (0x48, 0x05))
    config.u8(0x49, 0x40)  # MSI points back to power management
    with pytest.raises(pc.Unsupported) as exc:
        pc.express_capability(config.bytes())
    assert "loops back to 0x40" in str(exc.value)


def test_capability_pointing_at_itself_is_a_loop():
    config = Config().chain((0x40, 0x01))
    config.u8(0x41, 0x40)
    with pytest.raises(pc.Unsupported, match="loops back to 0x40"):
        pc.express_capability(config.bytes())


@pytest.mark.parametrize("pointer", [0x10, 0x3C])
def test_pointer_into_the_header(pointer):
    config = Config().chain((0x40, 0x01))
    config.u8(0x41, pointer)
    with pytest.raises(pc.Unsupported, match="outside the capability area"):
        pc.express_capability(config.bytes())


def test_pointer_past_the_readable_bytes():
    config = Config(size=128).chain((0x40, 0x01))
    config.u8(0x41, 0x7F)  # 0x7c: the ID and next bytes fit in 128 bytes
    assert list(pc.walk_capabilities(config.bytes())) == [(0x01, 0x40), (0x00, 0x7C)]
    config.u8(0x41, 0x90)
    with pytest.raises(pc.Unsupported, match="pointer 0x90 is outside the capability area .0x40-0x7f."):
        pc.express_capability(config.bytes())


def test_pointer_low_two_bits_are_reserved_and_masked():
    config = Config().chain((0x40, 0x01), (0x60, 0x10)).express(0x60)
    config.u8(0x34, 0x43)  # 0x40 with both reserved bits set
    config.u8(0x41, 0x62)
    assert pc.express_capability(config.bytes()) == 0x60


def test_truncated_64_byte_config_says_needs_root():
    data = gpu_config()[:64]
    with pytest.raises(pc.Unsupported) as exc:
        pc.express_capability(data)
    assert "needs root" in str(exc.value) and "Express" not in str(exc.value)


def test_express_capability_cut_off_by_the_readable_length():
    config = Config(size=256).chain((0x40, 0x01), (0xF0, 0x10))
    with pytest.raises(pc.Unsupported, match="cut off"):
        pc.express_capability(config.bytes())


def test_all_ones_means_the_device_does_not_respond():
    with pytest.raises(pc.Unsupported, match="all ones"):
        pc.express_capability(b"\xff" * 4096)


def test_cardbus_header_keeps_its_pointer_at_0x14():
    config = Config(header_type=2, class_code=0x060700).chain((0x80, 0x10)).express(0x80)
    config.u8(0x34, 0).u8(0x14, 0x80)
    assert pc.express_capability(config.bytes()) == 0x80


# -------------------------------------------------------------------- Device Control bits

def test_size_encodings_and_reserved_values():
    assert [pc.decode_size(code) for code in range(8)] == [128, 256, 512, 1024, 2048, 4096, None, None]
    assert [pc.encode_size(size) for size in pc.SIZES] == [0, 1, 2, 3, 4, 5]
    assert pc.mrrs_of(0x5134) == 4096 and pc.mps_of(0x5134) == 256
    assert pc.mrrs_of(0x2134) == 512
    assert pc.mrrs_of(0x6000) is None and pc.mrrs_of(0x7000) is None


@pytest.mark.parametrize("size", [0, 64, 3000, 8192, True, "4096", None])
def test_encode_refuses_anything_else_with_the_list(size):
    with pytest.raises(pc.PciError) as exc:
        pc.encode_size(size)
    assert "128, 256, 512, 1024, 2048, 4096" in str(exc.value)


def test_with_mrrs_changes_only_bits_14_to_12_for_every_word():
    for word in range(0x10000):
        for code, size in enumerate(pc.SIZES):
            new = pc.with_mrrs(word, size)
            assert new & ~0x7000 == word & ~0x7000
            assert (new >> 12) & 7 == code
    # the public script's mistake: 0x4000 is encoding 4, i.e. 2048, not 4096
    assert pc.with_mrrs(0x2134, 4096) == 0x5134 and pc.mrrs_of(0x4134) == 2048


# ------------------------------------------------------------------------------ the link

def test_link_from_config_gen5_x16():
    data = gpu_config()
    link = pc.link_report(data, 0x60, {"current_link_speed": "32.0 GT/s PCIe"})
    assert link == {"speed": "32.0 GT/s", "width": 16, "gen": 5, "capable_speed": "32.0 GT/s",
                    "capable_width": 16, "capable_gen": 5, "degraded": False, "degraded_reason": None,
                    "source": "config", "sysfs": {"current_link_speed": "32.0 GT/s PCIe"}}


def test_link_trained_narrower_and_slower_is_degraded():
    data = Config().chain((0x60, 0x10)).express(0x60, lnksta=(8 << 4) | 4).bytes()
    link = pc.link_report(data, 0x60)
    assert link["degraded"] is True
    assert link["width"] == 8 and link["gen"] == 4 and link["capable_gen"] == 5
    assert link["degraded_reason"].startswith("width x8 below capable x16; speed 16.0 GT/s below capable 32.0 GT/s")


def test_link_from_sysfs_when_config_is_not_readable():
    link = pc.link_report(sysfs_attrs={"current_link_speed": "2.5 GT/s PCIe", "current_link_width": "16",
                                       "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"})
    assert (link["source"], link["gen"], link["capable_gen"], link["width"]) == ("sysfs", 1, 5, 16)
    assert link["degraded"] is True and "when idle" in link["degraded_reason"]
    assert pc.link_report()["source"] is None


def test_integrated_endpoint_without_a_link_is_not_degraded():
    data = Config().chain((0x60, 0x10)).express(0x60, port_type=9, lnkcap=0, lnksta=0).bytes()
    link = pc.link_report(data, 0x60)
    assert link["degraded"] is False and link["width"] is None and link["source"] == "config"


# ------------------------------------------------------------------------ sysfs identity

def test_identity_topology_and_link_attrs(tmp_path):
    add_device(tmp_path, "0000:40:01.1", bridge_config())
    add_device(tmp_path, "0000:41:00.0", bridge_config(port_type=5), parents=["0000:40:01.1"])
    add_device(tmp_path, "0000:42:00.0", bridge_config(port_type=6), parents=["0000:40:01.1", "0000:41:00.0"])
    add_device(tmp_path, "0000:43:00.0", gpu_config(), parents=["0000:40:01.1", "0000:41:00.0", "0000:42:00.0"],
               driver="nvidia", numa_node=1, link={"current_link_width": "16", "max_link_width": "16"})
    root = sysfs(tmp_path)
    assert pc.list_devices(root) == ["0000:40:01.1", "0000:41:00.0", "0000:42:00.0", "0000:43:00.0"]
    assert pc.identity(root, "0000:43:00.0") == {"vendor": "0x10de", "device": "0x2335", "class": "0x030200",
                                                 "driver": "nvidia", "numa_node": 1}
    assert pc.identity(root, "0000:40:01.1")["driver"] is None
    assert pc.upstream_bridges(root, "0000:43:00.0") == ["0000:40:01.1", "0000:41:00.0", "0000:42:00.0"]
    assert pc.upstream_bridges(root, "0000:40:01.1") == []
    assert pc.read_link_attrs(root, "0000:43:00.0") == {"current_link_width": "16", "max_link_width": "16"}
    assert pc.list_devices(str(tmp_path / "nothing")) == []


def test_lockdown_mode(tmp_path):
    sec = tmp_path / "sys/kernel/security"
    sec.mkdir(parents=True)
    assert pc.lockdown(sysfs(tmp_path)) is None
    (sec / "lockdown").write_text("[none] integrity confidentiality\n")
    assert pc.lockdown(sysfs(tmp_path)) is None
    (sec / "lockdown").write_text("none [integrity] confidentiality\n")
    assert pc.lockdown(sysfs(tmp_path)) == "integrity"


# ---------------------------------------------------------------------------- the write

def test_set_mrrs_512_to_4096_changes_only_bits_14_12_of_the_file(tmp_path):
    path = add_device(tmp_path, GPU, gpu_config(devctl=GPU_DEVCTL))
    before = read_bytes(path)
    old, new = pc.set_mrrs(sysfs(tmp_path), GPU, 0x60, 4096)
    assert (old, new) == (0x2134, 0x5134)
    assert read_bytes(path) == with_word(before, 0x68, 0x5134)


def test_bit_15_and_every_other_bit_go_back_as_read(tmp_path):
    # A bridge with bridge-configuration-retry (bit 15), no-snoop (11), aux power (10), MPS 512.
    devctl = 0x8000 | 0x0800 | 0x0400 | (2 << 5) | 0x000F
    path = add_device(tmp_path, "0000:00:01.0", bridge_config(devctl=devctl))
    before = read_bytes(path)
    old, new = pc.set_mrrs(sysfs(tmp_path), "0000:00:01.0", 0x40, 4096)
    assert old == devctl and new == devctl | 0x5000 == 0xDC4F
    assert read_bytes(path) == with_word(before, 0x48, 0xDC4F)


def test_set_mrrs_rereads_the_word_right_before_writing(tmp_path):
    path = add_device(tmp_path, GPU, gpu_config(devctl=GPU_DEVCTL))
    with open(path, "r+b") as handle:  # someone enabled no-snoop since the config was first read
        handle.seek(0x68)
        handle.write(b"\x34\x29")
    old, new = pc.set_mrrs(sysfs(tmp_path), GPU, 0x60, 4096)
    assert (old, new) == (0x2934, 0x5934)


def test_already_at_size_writes_nothing(tmp_path, monkeypatch):
    add_device(tmp_path, GPU, gpu_config(devctl=0x5134))
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote"))
    assert pc.set_mrrs(sysfs(tmp_path), GPU, 0x60, 4096) == (0x5134, 0x5134)


def qemu_like(monkeypatch):
    """Emulate a device that accepts writes but keeps its MRRS (QEMU's e1000e and nvme keep 128)."""
    real = os.pwrite

    def pwrite(fd, payload, offset):
        with open("/proc/self/fd/%d" % fd, "rb") as handle:
            handle.seek(offset)
            held = int.from_bytes(handle.read(2), "little") & 0x7000
        value = (int.from_bytes(payload, "little") & ~0x7000) | held
        return real(fd, value.to_bytes(2, "little"), offset)
    monkeypatch.setattr(pc, "_pwrite", pwrite)


def test_device_that_does_not_take_the_write_is_restored(tmp_path, monkeypatch):
    path = add_device(tmp_path, GPU, gpu_config(devctl=0x0810))
    before = read_bytes(path)
    qemu_like(monkeypatch)
    with pytest.raises(pc.NotTaken) as exc:
        pc.set_mrrs(sysfs(tmp_path), GPU, 0x60, 4096)
    assert str(exc.value) == ("did not take MRRS 4096: Device Control reads 0x0810 (MRRS 128) after "
                              "writing 0x5810; the old word 0x0810 was written back")
    assert read_bytes(path) == before


def test_device_that_clamps_the_value_gets_its_old_word_back(tmp_path, monkeypatch):
    # A device that supports at most 1024: it stores encoding 3 for anything larger.
    path = add_device(tmp_path, GPU, gpu_config(devctl=0x2134))
    before = read_bytes(path)
    real = os.pwrite

    def clamps(fd, payload, offset):
        value = int.from_bytes(payload, "little")
        if (value >> 12) & 7 > 3:
            value = (value & ~0x7000) | 0x3000
        return real(fd, value.to_bytes(2, "little"), offset)
    monkeypatch.setattr(pc, "_pwrite", clamps)
    with pytest.raises(pc.NotTaken) as exc:
        pc.set_mrrs(sysfs(tmp_path), GPU, 0x60, 4096)
    assert str(exc.value) == ("did not take MRRS 4096: Device Control reads 0x3134 (MRRS 1024) after "
                              "writing 0x5134; the old word 0x2134 was written back")
    assert read_bytes(path) == before


def test_restore_that_does_not_stick_is_reported(tmp_path, monkeypatch):
    path = add_device(tmp_path, GPU, gpu_config(devctl=0x2810))
    real = os.pwrite

    def clears_mrrs(fd, payload, offset):  # every write lands with MRRS 128
        return real(fd, (int.from_bytes(payload, "little") & ~0x7000).to_bytes(2, "little"), offset)
    monkeypatch.setattr(pc, "_pwrite", clears_mrrs)
    with pytest.raises(pc.NotTaken) as exc:
        pc.set_mrrs(sysfs(tmp_path), GPU, 0x60, 4096)
    assert str(exc.value).endswith("writing the old word 0x2810 back left 0x0810")
    assert read_bytes(path)[0x68:0x6A] == b"\x10\x08"


def test_reserved_encoding_is_left_alone(tmp_path, monkeypatch):
    add_device(tmp_path, GPU, gpu_config(devctl=0x6134))
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote"))
    with pytest.raises(pc.Unsupported, match="reserved MRRS encoding 6"):
        pc.set_mrrs(sysfs(tmp_path), GPU, 0x60, 4096)


def test_short_write_is_an_error(tmp_path, monkeypatch):
    add_device(tmp_path, GPU, gpu_config())
    monkeypatch.setattr(pc, "_pwrite", lambda fd, payload, offset: 1)
    with pytest.raises(pc.PciError, match="wrote 1 bytes"):
        pc.write_word(sysfs(tmp_path), GPU, 0x68, 0x5134)


# ------------------------------------------------------------------- the installed helper

def test_reapply_sets_device_and_bridges_and_reports(tmp_path):
    add_device(tmp_path, "0000:40:01.1", bridge_config(devctl=0x8020))
    gpu = add_device(tmp_path, GPU, gpu_config(), parents=["0000:40:01.1"])
    add_device(tmp_path, "0000:00:02.0", conventional_config())
    out = io.StringIO()
    status = pc.reapply(sysfs(tmp_path), [GPU, "0000:00:02.0"], 4096, include_bridges=True, out=out)
    assert status == 0
    assert out.getvalue().splitlines() == [
        "0000:40:01.1: MRRS 128 -> 4096 (Device Control 0x8020 -> 0xd020)",
        "0000:41:00.0: MRRS 512 -> 4096 (Device Control 0x2134 -> 0x5134)",
        "0000:00:02.0: skipped: no PCI Express capability (ID 0x10) in the capability list: a "
        "conventional PCI device has no Max Read Request Size",
    ]
    assert pc.mrrs_of(pc.read_word(sysfs(tmp_path), GPU, 0x68)) == 4096
    out = io.StringIO()
    assert pc.reapply(sysfs(tmp_path), [GPU], 4096, out=out) == 0
    assert out.getvalue() == "0000:41:00.0: MRRS already 4096\n"
    assert read_bytes(gpu)[0x68:0x6A] == b"\x34\x51"


def test_cli_main_fails_and_restores_on_a_device_that_keeps_its_value(tmp_path, monkeypatch, capsys):
    path = add_device(tmp_path, GPU, gpu_config(devctl=0x0810))
    before = read_bytes(path)
    qemu_like(monkeypatch)
    assert pc.cli_main(["--sysfs", sysfs(tmp_path), "--size", "4096", GPU]) == 1
    assert capsys.readouterr().out.startswith("0000:41:00.0: FAILED: did not take MRRS 4096")
    assert read_bytes(path) == before


def test_cli_main_refuses_bad_size_and_address(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        pc.cli_main(["--size", "8192", GPU])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        pc.cli_main(["--size", "4096", "41:00.0;reboot"])
    assert "not a PCI address" in capsys.readouterr().err


# --------------------------------------------------------------- a real H200's config space

def _real_fixtures():
    if not os.path.isdir(FIXTURE_DIR):
        return []
    return sorted(os.path.join(FIXTURE_DIR, name) for name in os.listdir(FIXTURE_DIR)
                  if name.startswith("h200-") and name.endswith(".config"))


@pytest.mark.skipif(not _real_fixtures(), reason="the H200 config space fixture has not landed yet")
@pytest.mark.parametrize("fixture", _real_fixtures() or [None])
def test_real_h200_config_space(fixture, tmp_path, monkeypatch):
    data = read_bytes(fixture)
    assert len(data) == 4096
    cap = pc.express_capability(data)
    assert cap == 0x60
    devctl = pc.u16(data, cap + pc.EXP_DEVCTL)
    assert devctl == 0x5134
    assert pc.mrrs_of(devctl) == 4096 and pc.mps_of(devctl) == 256
    link = pc.link_report(data, cap)
    assert (link["capable_gen"], link["capable_width"]) == (5, 16)
    assert link["width"] == 16
    assert pc.port_type(data, cap) == "endpoint"
    # Already 4096: nothing is written.
    path = add_device(tmp_path, GPU, data)
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote"))
    assert pc.set_mrrs(sysfs(tmp_path), GPU, cap, 4096) == (0x5134, 0x5134)
    monkeypatch.undo()
    # 512 on a copy: only bits 14:12 of the word at 0x68 change, every other byte stays.
    copy = str(tmp_path / "copy.config")
    shutil.copyfile(path, copy)
    os.unlink(path)
    os.symlink(copy, path)
    assert pc.set_mrrs(sysfs(tmp_path), GPU, cap, 512) == (0x5134, 0x2134)
    assert read_bytes(copy) == with_word(data, 0x68, 0x2134)
    assert read_bytes(fixture) == data


def test_pci_config_imports_the_standard_library_only():
    """The udev helper is this file's source run by a bare system Python (-IS): an import from
    the collection, or of anything not in the standard library, would fail there at boot."""
    import ast
    import sys
    with open(pc.__file__) as handle:
        tree = ast.parse(handle.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import in pci_config"
            imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_attributes_and_writability_of_a_device(tmp_path, monkeypatch):
    root = sysfs(tmp_path)
    bdf = "0000:41:00.0"
    add_device(tmp_path, bdf, gpu_config(), numa_node=1)
    assert pc.exists(root, bdf) and not pc.exists(root, "0000:42:00.0")
    assert pc.read_attr(root, bdf, "numa_node") == "1"
    assert pc.read_attr(root, bdf, "no_such_attribute") is None
    assert pc.read_config(root, bdf) == gpu_config()
    assert pc.writable(root, bdf) is True
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert pc.writable(root, bdf) is False
