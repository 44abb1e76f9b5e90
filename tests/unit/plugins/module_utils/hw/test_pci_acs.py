"""hw/pci_acs: the bridges between two devices, the masked ACS Control write, the helper's namespace."""

import ast
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_acs
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config as pc
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pcie_ext
from ansible_collections.gpufleet.tuning.tests.unit import acs_fake as af
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import read_bytes, with_word


def sysfs(tmp_path):
    return str(tmp_path / "sys")


def test_bridges_below_the_lowest_common_ancestor_of_a_switch(tmp_path):
    af.switch_node(tmp_path)
    found, unknown = pci_acs.bridges_between(sysfs(tmp_path), [af.GPU0, af.GPU1])
    # the root port and the upstream port are shared: peer traffic turns in the switch
    assert found == {af.DSP0: [af.GPU0], af.DSP1: [af.GPU1]} and unknown == {}


def test_across_root_ports_both_root_ports(tmp_path):
    af.root_ports_node(tmp_path, with_plain=True)
    found, _unknown = pci_acs.bridges_between(sysfs(tmp_path), [af.EP0, af.EP1, af.EP2])
    assert sorted(found) == [af.RP0, af.RP1, af.RP2]
    assert found[af.RP0] == [af.EP0]


def test_path_bridges_across_root_buses():
    a = ["pci0000:00", "0000:00:01.0", "0000:01:00.0"]
    b = ["pci0000:80", "0000:80:01.0", "0000:81:00.0"]
    assert pc.path_bridges(a, b) == ["0000:00:01.0", "0000:80:01.0"]


@pytest.mark.parametrize("kind, capable", [(af.PLX, 0x007F), (af.AMD, 0x005F), (af.INTEL, 0x001F)])
def test_real_shapes_parse_with_pcie_ext(tmp_path, kind, capable):
    from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import add_device
    add_device(tmp_path, "0000:00:01.0", af.shape(kind, 4))
    found = pci_acs.read_acs(sysfs(tmp_path), "0000:00:01.0")
    assert (found["offset"], found["capable"], found["ctrl"]) == (kind["acs_offset"], capable, 0x001D)
    assert found["request_redirect"] and found["source_validation"] and not found["egress_control"]


def test_write_ctrl_changes_only_the_masked_bits(tmp_path):
    af.switch_node(tmp_path)
    config = pc.config_path(sysfs(tmp_path), af.DSP0)
    before = read_bytes(config)
    old, new = pci_acs.write_ctrl(sysfs(tmp_path), af.DSP0, af.PLX["acs_offset"], 0x001C, 0)
    assert (old, new) == (0x001D, 0x0001)
    assert read_bytes(config) == with_word(before, af.PLX["acs_offset"] + 6, 0x0001)
    assert pci_acs.write_ctrl(sysfs(tmp_path), af.DSP0, af.PLX["acs_offset"], 0x001C, 0) == (0x0001, 0x0001)
    assert pci_acs.write_ctrl(sysfs(tmp_path), af.DSP0, af.PLX["acs_offset"], 0x001C, 0x001D) == (0x0001, 0x001D)
    assert read_bytes(config) == before


def test_write_ctrl_that_does_not_stick_is_put_back_and_reports_the_read_back(tmp_path, monkeypatch):
    af.switch_node(tmp_path)
    config = pc.config_path(sysfs(tmp_path), af.DSP0)
    before = read_bytes(config)
    monkeypatch.setattr(pc, "_pwrite", lambda fd, payload, offset: 2)  # accepted, nothing changes
    with pytest.raises(pci_acs.AcsNotTaken) as exc:
        pci_acs.write_ctrl(sysfs(tmp_path), af.DSP0, af.PLX["acs_offset"], 0x001C, 0)
    assert exc.value.got == 0x001D
    assert str(exc.value) == ("refused the write: ACS Control reads 0x001d after writing 0x0001 (was 0x001d); "
                              "the old word 0x001d was written back")
    assert read_bytes(config) == before


def test_vfio_below_and_iommu_domain(tmp_path):
    af.switch_node(tmp_path, iommu="DMA-FQ", gpu_driver="vfio-pci")
    assert pci_acs.vfio_below(sysfs(tmp_path), af.DSP0) == [af.GPU0]
    assert pci_acs.vfio_below(sysfs(tmp_path), af.ROOT) == [af.GPU0, af.GPU1]
    assert pci_acs.translated(sysfs(tmp_path), [af.GPU0, af.GPU1]) == {af.GPU0: "DMA-FQ", af.GPU1: "DMA-FQ"}


def test_the_helper_namespace_has_no_clashing_names():
    """The helper pastes pci_config, pcie_ext and pci_acs into one namespace: a name defined twice
    would make one module's function call the other's. Only cli_main (pci_acs's is the helper's
    entry) and constants with equal values may repeat."""
    def top(module):
        with open(module.__file__) as handle:
            tree = ast.parse(handle.read())
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return names
    config, ext, acs = top(pc), top(pcie_ext), top(pci_acs)
    for name in config & ext:
        assert getattr(pc, name) == getattr(pcie_ext, name), name
    assert (acs & (config | ext)) == {"cli_main"}
    source = open(pci_acs.__file__).read().replace("from __future__ import annotations\n", "", 1)
    ast.parse(source, feature_version=(3, 6))


def test_reapply_acts_only_on_bridges_still_between_the_devices(tmp_path):
    import io
    af.switch_node(tmp_path)
    out = io.StringIO()
    assert pci_acs.reapply_acs(sysfs(tmp_path), af.USP, 0x1C, [af.GPU0, af.GPU1], out=out) == 0
    assert out.getvalue().startswith("0000:01:00.0: not a bridge between two of")
    out = io.StringIO()
    assert pci_acs.reapply_acs(sysfs(tmp_path), af.GPU1, 0x1C, [af.GPU0, af.GPU1], out=out) == 0
    assert out.getvalue() == "%s: ACS Control 0x001d -> 0x0001 (cleared request_redirect, completion_redirect, " \
        "upstream_forwarding)\n" % af.DSP1
    assert pci_acs.read_acs(sysfs(tmp_path), af.DSP0)["ctrl"] == 0x001D
    assert os.path.exists(pc.config_path(sysfs(tmp_path), af.DSP0))
