"""hw/pcie_ext: the extended capability walk from 0x100, its guards, and ACS decoded."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pcie_ext as px
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import (
    ACS_CAPABLE, ACS_REDIRECT, Config, FIXTURE_DIR, conventional_config, gpu_config, h200_fixtures,
    port_config)


def space(data):
    return px.ConfigSpace(data=data)


def caps(data):
    return list(px.walk(space(data)))


@pytest.mark.skipif(not h200_fixtures(), reason="the H200 config space fixture has not landed yet")
@pytest.mark.parametrize("bdf", sorted(h200_fixtures()))
def test_the_real_h200_list(bdf, tmp_path):
    """As read on nvidia-h200-x2: the list starts with an ID-0 placeholder at 0x100 (and holds
    another at 0x134, 0x248, 0x250), then LTR, AER, vendor-specific, power budgeting, serial
    number. No ACS on the GPU itself."""
    data = h200_fixtures()[bdf][0]
    expected = [(0x18, 1, 0x12C), (0x01, 2, 0x1B8), (0x0B, 1, 0x2A4), (0x04, 1, 0x2B8), (0x03, 1, 0x2F0)]
    assert caps(data) == expected
    assert px.acs(space(data)) is None
    # the same through the sysfs file, read lazily
    path = os.path.join(FIXTURE_DIR, "h200-%s.config" % bdf.replace(":", "_"))
    from_file = px.ConfigSpace(path=path)
    assert from_file.size == 4096 and len(from_file.head) == 256 and not from_file.restricted
    assert list(px.walk(from_file)) == expected


def test_a_downstream_port_with_acs_redirect():
    found = px.acs(space(port_config(acs_ctrl=ACS_REDIRECT)))
    assert found == {"offset": 0x148, "capable": ACS_CAPABLE, "ctrl": ACS_REDIRECT,
                     "source_validation": True, "translation_blocking": False, "request_redirect": True,
                     "completion_redirect": True, "upstream_forwarding": True, "egress_control": False,
                     "direct_translated": False}
    assert caps(port_config(acs_ctrl=0)) == [(0x01, 2, 0x100), (0x0D, 1, 0x148)]


def test_a_port_without_acs():
    assert px.acs(space(port_config())) is None
    assert caps(port_config()) == [(0x01, 2, 0x100)]


# The kernel's include/uapi/linux/pci_regs.h: PCI_ACS_SV 0x01, TB 0x02, RR 0x04, CR 0x08,
# UF 0x10, EC 0x20, DT 0x40; Capability at +4, Control at +6.
@pytest.mark.parametrize("name, bit", [
    ("source_validation", 0x01), ("translation_blocking", 0x02), ("request_redirect", 0x04),
    ("completion_redirect", 0x08), ("upstream_forwarding", 0x10), ("egress_control", 0x20),
    ("direct_translated", 0x40),
])
def test_each_acs_bit_as_the_kernel_defines_it(name, bit):
    decoded = px.decode_acs(bit)
    assert decoded[name] is True and sum(decoded.values()) == 1
    found = px.acs(space(port_config(acs_ctrl=bit, acs_capable=0x7F)))
    assert found[name] is True and found["ctrl"] == bit and found["capable"] == 0x7F
    # control bits above the seven named ones are not flags of their own
    assert sum(px.decode_acs(0xFF80).values()) == 0


def test_capability_and_control_are_separate_words():
    """+4 is Capability (read-only, what the port can do), +6 Control (what is on)."""
    found = px.acs(space(port_config(acs_ctrl=0x0004, acs_capable=0x001D)))
    assert (found["capable"], found["ctrl"]) == (0x001D, 0x0004)
    assert found["request_redirect"] and not found["source_validation"]


def test_empty_and_absent_lists():
    assert caps(gpu_config()) == []                   # header 0 at 0x100: no extended capabilities
    assert caps(conventional_config()) == []          # 256 bytes: no extended space at all
    assert px.find(space(gpu_config()), px.EXT_CAP_ID_ACS) is None


def test_version_and_placeholders():
    data = Config().extended((0x100, 0x0000, 0), (0x140, 0x0019, 2), (0x160, 0x000D, 1)).bytes()
    assert caps(data) == [(0x19, 2, 0x140), (0x0D, 1, 0x160)]
    # the low 2 bits of a next pointer are reserved and masked, as the kernel does (0xffc)
    raw = Config().extended((0x100, 0x0001)).u32(0x100, 0x0001 | (1 << 16) | ((0x150 | 0x3) << 20))
    raw.extended((0x150, 0x000D))
    assert caps(raw.bytes()) == [(0x01, 1, 0x100), (0x0D, 1, 0x150)]


def test_not_root_is_needs_root_not_no_capability():
    data = port_config(acs_ctrl=ACS_REDIRECT)[:64]
    with pytest.raises(px.ExtCapError, match="only the first 64 bytes .* needs root"):
        caps(data)
    with pytest.raises(px.ExtCapError, match="needs root"):
        px.acs(space(data))


@pytest.mark.parametrize("build, message", [
    (lambda c: c.extended((0x100, 0x01), (0x140, 0x0D)).u32(0x140, 0x0D | (1 << 16) | (0x100 << 20)),
     "loops back to 0x100"),
    (lambda c: c.extended((0x100, 0x01), (0x140, 0x0D)).u32(0x140, 0x0D | (1 << 16) | (0x140 << 20)),
     "loops back to 0x140"),
    (lambda c: c.u32(0x100, 0x0001 | (1 << 16) | (0x0C0 << 20)), "points to 0x0c0, outside"),
    (lambda c: c.u32(0x100, 0x0001 | (1 << 16) | (0x0FF << 20)), "points to 0x0fc, outside"),
    (lambda c: c.u32(0x100, 0xFFFFFFFF), "all ones: the device does not respond"),
])
def test_corrupt_lists_are_errors_naming_the_offset(build, message):
    config = Config()
    build(config)
    with pytest.raises(px.ExtCapError, match=message):
        caps(config.bytes())


def test_a_pointer_past_a_short_space():
    data = Config().extended((0x100, 0x01), (0x800, 0x0D)).bytes()[:0x400]
    with pytest.raises(px.ExtCapError, match="points to 0x800, outside the extended space .0x100-0x3ff."):
        caps(data)


def test_an_acs_capability_cut_off():
    data = Config().extended((0x100, 0x01), (0xFFC, 0x0D)).bytes()
    with pytest.raises(px.ExtCapError, match="ACS capability at 0xffc is cut off"):
        px.acs(space(data))


def test_a_long_chain_stops_at_the_entry_limit():
    """480 entries of 8 bytes fill 0x100-0xFFF; a chain can never be longer."""
    config = Config()
    offsets = list(range(0x100, 0x1000, 8))
    config.extended(*[(offset, 0x0B) for offset in offsets])
    assert len(caps(config.bytes())) == px.MAX_ENTRIES == len(offsets)


def test_file_reads_are_lazy_and_cached(tmp_path):
    path = tmp_path / "config"
    path.write_bytes(port_config(acs_ctrl=ACS_REDIRECT))
    reads = []
    real = px.os.pread

    def pread(fd, width, offset):
        reads.append((offset, width))
        return real(fd, width, offset)

    px.os.pread, saved = pread, px.os.pread
    try:
        config = px.ConfigSpace(path=str(path))
        assert px.acs(config)["ctrl"] == ACS_REDIRECT
        assert px.acs(config)["ctrl"] == ACS_REDIRECT
    finally:
        px.os.pread = saved
    # the standard 256 bytes (never the whole 4096: each dword is a config cycle), then the
    # headers at 0x100 and 0x148, then Capability and Control: once each
    assert reads == [(0, 256), (0x100, 4), (0x148, 4), (0x14C, 2), (0x14E, 2)]


def test_a_file_only_root_may_read_in_full(tmp_path):
    """As the kernel serves a non-root reader: the file is 4096 long, reads stop at 64."""
    path = tmp_path / "config"
    path.write_bytes(port_config(acs_ctrl=ACS_REDIRECT)[:64])
    config = px.ConfigSpace(path=str(path))
    assert config.restricted and len(config.head) == 64
    with pytest.raises(px.ExtCapError, match="needs root"):
        px.acs(config)
    with pytest.raises(px.ExtCapError, match="needs root"):
        config.u32(0x100)


def test_out_of_range_reads():
    config = space(gpu_config())
    with pytest.raises(px.ExtCapError, match="outside the 4096 bytes"):
        config.u32(4094)
    assert config.u16(0) == 0x10DE
