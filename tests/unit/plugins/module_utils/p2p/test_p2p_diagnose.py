"""p2p_diagnose: every cause present and absent, from fake sysfs trees and a fake NVML."""

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts as gf
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_diagnose as pd
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_floor
from ansible_collections.gpufleet.tuning.tests.unit.nvml_fake import FakeNvmlLib, Gpu, loaded, nvlinked, switched
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import add_iommu_group, gpu_config
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_gpu_facts import (
    GEN5, gpu, host_bridge_tree, numa_tree, port, switch_tree)


def run(root, monkeypatch, lib=None, bdfs=None, versions=None):
    nvml = loaded(monkeypatch, nvml_mod, lib) if lib is not None else nvml_mod.Unavailable("no NVML here")
    node = gf.gather(gf.Paths(str(root)), nvml)
    inputs = pd.pair_inputs(node, bdfs[0], bdfs[1], gf.Paths(str(root)).sys, versions)
    return inputs, pd.diagnose(inputs)


def ids(found):
    return [c["id"] for c in found["causes"]]


def lib_for(bdfs, **kw):
    return FakeNvmlLib([Gpu(b) for b in bdfs], **kw)


def clean_switch(root):
    """Two GPUs behind one switch with no ACS redirect, identity IOMMU, full links."""
    rp, usp, d1, d2 = "0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"
    port(root, rp, port_type=4)
    port(root, usp, parents=(rp,), port_type=5)
    port(root, d1, parents=(rp, usp), acs_ctrl=0x0001)  # source validation only
    port(root, d2, parents=(rp, usp))
    gpu(root, "0000:03:00.0", parents=(rp, usp, d1))
    gpu(root, "0000:04:00.0", parents=(rp, usp, d2))
    bdfs = ["0000:03:00.0", "0000:04:00.0"]
    for n, bdf in enumerate(bdfs):
        add_iommu_group(root, bdf, n, kind="identity")
    return bdfs


def test_a_clean_pcie_pair_has_no_cause_but_no_nvlink(tmp_path, monkeypatch):
    bdfs = clean_switch(tmp_path)
    inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs, p2p={(bdfs[0], bdfs[1], 2): 5}), bdfs)
    # L40S-like GPUs without NVLink ports: no_nvlink is by design, said so
    assert ids(found) == ["no_nvlink"]
    assert found["causes"][0]["fix"].startswith("none: these GPUs have no NVLink")
    assert found["unchecked"] == []
    assert inputs["link"] == "pcie" and inputs["relation"] == "same_switch"
    assert p2p_floor.expected(inputs)["unidirectional"][0] == 40.3


def test_iommu_translated_present_and_absent(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    add_iommu_group(tmp_path, bdfs[0], 1, kind="DMA-FQ")
    add_iommu_group(tmp_path, bdfs[1], 2, kind="identity")
    _inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), bdfs)
    cause = [c for c in found["causes"] if c["id"] == "iommu_translated"][0]
    assert cause["values"] == {"iommu_group_type": {bdfs[0]: "DMA-FQ"}}
    assert cause["fix"].startswith("gpufleet.tuning.kernel_cmdline: iommu=pt")
    other = tmp_path / "other"
    bdfs = clean_switch(other)
    assert "iommu_translated" not in ids(run(other, monkeypatch, lib_for(bdfs), bdfs)[1])


def test_iommu_on_blackwell_never_says_iommu_pt(tmp_path, monkeypatch):
    rp = "0000:00:01.0"
    port(tmp_path, rp, port_type=4)
    port(tmp_path, "0000:00:03.0", port_type=4)
    gpu(tmp_path, "0000:01:00.0", parents=(rp,), config=gpu_config(device=0x2BB5))
    gpu(tmp_path, "0000:02:00.0", parents=("0000:00:03.0",), config=gpu_config(device=0x2BB5))
    bdfs = ["0000:01:00.0", "0000:02:00.0"]
    add_iommu_group(tmp_path, bdfs[0], 1, kind="DMA")
    _inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), bdfs)
    cause = [c for c in found["causes"] if c["id"] == "iommu_translated"][0]
    assert "iommu=pt" not in cause["fix"] and "gpufleet.tuning.pcie_acs" in cause["fix"]


def test_acs_redirect_present_and_absent(tmp_path, monkeypatch):
    bdfs = switch_tree(tmp_path)
    _inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), bdfs)
    cause = [c for c in found["causes"] if c["id"] == "acs_redirect"][0]
    assert cause["values"]["bridges"] == [{"bdf": "0000:02:08.0", "bits": ["request_redirect", "completion_redirect"],
                                          "ctrl": 0x001D}]
    assert cause["fix"].startswith("gpufleet.tuning.pcie_acs")
    other = tmp_path / "other"
    bdfs = clean_switch(other)
    assert "acs_redirect" not in ids(run(other, monkeypatch, lib_for(bdfs), bdfs)[1])


def test_acs_unreadable_without_root_is_unchecked(tmp_path, monkeypatch):
    bdfs = switch_tree(tmp_path, config_bytes=64)
    _inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), bdfs)
    assert "acs_redirect" not in ids(found)
    assert [u["id"] for u in found["unchecked"]].count("acs_redirect") == 1


def test_link_degraded_present_and_absent(tmp_path, monkeypatch):
    slow = dict(GEN5, current_link_speed="16.0 GT/s PCIe", current_link_width="8")
    rp = "0000:00:01.0"
    port(tmp_path, rp, port_type=4)
    port(tmp_path, "0000:00:03.0", port_type=4)
    gpu(tmp_path, "0000:01:00.0", parents=(rp,), link=slow)
    gpu(tmp_path, "0000:02:00.0", parents=("0000:00:03.0",))
    bdfs = ["0000:01:00.0", "0000:02:00.0"]
    inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), bdfs)
    cause = [c for c in found["causes"] if c["id"] == "link_degraded"][0]
    expected = {"link_speed_gts": 16.0, "max_link_speed_gts": 32.0, "link_width": 8, "max_link_width": 16}
    assert cause["values"]["gpus"][bdfs[0]] == expected
    assert cause["fix"].startswith("manual:")
    # the floor takes the capable speed (idle GPUs train down) and the negotiated width
    assert p2p_floor.expected(dict(inputs, link="pcie"))["unidirectional"][1].startswith("PCIe gen5 (capable")
    other = tmp_path / "other"
    bdfs = host_bridge_tree(other)
    assert "link_degraded" not in ids(run(other, monkeypatch, lib_for(bdfs), bdfs)[1])


def test_across_cpus_present_and_absent(tmp_path, monkeypatch):
    bdfs = numa_tree(tmp_path)
    _inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), [bdfs[0], bdfs[2]])
    cause = [c for c in found["causes"] if c["id"] == "across_cpus"][0]
    assert cause["values"] == {"relation": "across_cpus", "numa_nodes": [0, 1]}
    _inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), [bdfs[0], bdfs[1]])
    assert "across_cpus" not in ids(found)


def test_no_nvlink_with_ports_but_no_active_link(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs, p2p={(bdfs[0], bdfs[1], 2): 5})
    for g in lib.gpus:
        g.links = [(False, None, 0)] * 12
    _inputs, found = run(tmp_path, monkeypatch, lib, bdfs)
    cause = [c for c in found["causes"] if c["id"] == "no_nvlink"][0]
    assert cause["values"]["gpus"][bdfs[0]] == {"links": 12, "active": 0}
    assert "NVLink bridge" in cause["fix"]


def test_nvlink_present_means_no_no_nvlink_cause(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs)
    lib.gpus[0].links, lib.gpus[1].links = nvlinked(bdfs[0], bdfs[1], 12)  # an H100 NVL bridge
    inputs, found = run(tmp_path, monkeypatch, lib, bdfs)
    assert "no_nvlink" not in ids(found)
    assert inputs["nvlink_count"] == 12 and inputs["link"] == "nvlink"
    assert p2p_floor.expected(inputs)["unidirectional"] == (225.0, "NVLink 4 x 12 links x 25 GB/s x 0.75")


def test_nvswitch_pair_count_and_version(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs)
    lib.gpus[0].links = lib.gpus[1].links = switched(18)
    inputs, _found = run(tmp_path, monkeypatch, lib, bdfs, versions={bdfs[0]: 6})
    assert inputs["nvlink_count"] == 18 and inputs["nvml_nvlink_version"] == 6


def test_driver_p2p_status_present_and_absent(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs, p2p={(bdfs[0], bdfs[1], 0): 4, (bdfs[0], bdfs[1], 1): 4})
    _inputs, found = run(tmp_path, monkeypatch, lib, bdfs)
    cause = [c for c in found["causes"] if c["id"] == "driver_p2p_status"][0]
    assert cause["values"] == {"peer_access": {"read": "disabled_by_regkey", "write": "disabled_by_regkey"}}
    assert cause["fix"].startswith("gpufleet.tuning.nvidia_driver_options")
    _inputs, found = run(tmp_path, monkeypatch, lib_for(bdfs), bdfs)
    assert "driver_p2p_status" not in ids(found)


def test_without_nvml_the_nvml_causes_are_unchecked(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    _inputs, found = run(tmp_path, monkeypatch, None, bdfs)
    unchecked = [u["id"] for u in found["unchecked"]]
    assert "no_nvlink" in unchecked and "driver_p2p_status" in unchecked


def test_gpus_the_facts_do_not_know():
    found = pd.diagnose(pd.pair_inputs({"unknown": "boom"}, "0000:01:00.0", "0000:02:00.0"))
    assert found["causes"] == [] and found["unchecked"][0]["id"] == "all"
    assert "0000:01:00.0" in found["unchecked"][0]["reason"]
