"""hw/gpu_facts: the gpus, topology and driver sections of the node facts, from fake /sys and
/proc trees and a fake libnvidia-ml. Every leaf of every result is checked to be an envelope."""

import json
import os
import time

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts as gf
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pcie_ext
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree
from ansible_collections.gpufleet.tuning.tests.unit.nvml_fake import FakeNvmlLib, Gpu, loaded, nvlinked, switched
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import (
    ACS_CAPABLE, ACS_REDIRECT, Config, add_device, add_iommu_group, gpu_config,
    h200_fixtures, port_config)

GEN5 = {"current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16",
        "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"}
# Leaves whose value may be a known null (read, and there is none): a bridge without ACS, the
# remote end of an inactive link, the NVLink counters of a GPU without NVLink, the fabric probe's
# status before the probe completed.
KNOWN_NULLS = ("acs", "remote_bdf", "remote_type", "nvlink_errors", "fabric_status")


LINK_KEYS = ("link_speed_gts", "link_width", "max_link_speed_gts", "max_link_width", "degraded", "mrrs_bytes",
             "mps_bytes", "relaxed_ordering")


def link_values(pcie):
    """The values of a GPU's link facts (the AER and replay health facts have tests of their own)."""
    return dict((key, value) for key, value in values(pcie).items() if key in LINK_KEYS)


def assert_envelopes(tree, path="facts"):
    """Every leaf is an envelope (hw/facts.is_fact): a value with its source, or null with the
    reason it is unknown; plain dicts and lists only hold further leaves."""
    if isinstance(tree, dict) and facts.is_fact(tree):
        assert isinstance(tree["source"], str) and tree["source"], path
        if tree["value"] is None and "unknown" not in tree:
            assert path.rsplit(".", 1)[-1] in KNOWN_NULLS, "%s is null without a reason" % path
        if "unknown" in tree:
            assert tree["value"] is None and tree["unknown"], path
        return
    if isinstance(tree, dict):
        assert tree, "%s is an empty dict, not a fact" % path
        for key, item in tree.items():
            assert_envelopes(item, "%s.%s" % (path, key))
        return
    assert isinstance(tree, list), "%s is %r: not an envelope" % (path, tree)
    for index, item in enumerate(tree):
        assert_envelopes(item, "%s[%d]" % (path, index))


def value(item):
    return item["value"]


def values(tree):
    """The same structure with each envelope replaced by its value (for compact asserts)."""
    if isinstance(tree, dict) and facts.is_fact(tree):
        return tree["value"]
    if isinstance(tree, dict):
        return dict((k, values(v)) for k, v in tree.items())
    return [values(item) for item in tree]


def gather(root, lib=None, monkeypatch=None):
    nvml = loaded(monkeypatch, nvml_mod, lib) if lib is not None else absent_nvml(monkeypatch)
    result = gf.gather(gf.Paths(str(root)), nvml)
    assert_envelopes(result)
    json.dumps(result)  # what the module returns must serialise
    return result


def absent_nvml(monkeypatch):
    def missing(name):
        raise OSError("%s: cannot open shared object file: No such file or directory" % name)

    monkeypatch.setattr(nvml_mod.ctypes, "CDLL", missing)
    return nvml_mod.Nvml()


def gpu(root, bdf, parents=(), numa=0, link=None, **kw):
    add_device(root, bdf, kw.pop("config", None) or gpu_config(), parents=parents, driver="nvidia",
               numa_node=numa, link=link or GEN5, **kw)


def port(root, bdf, parents=(), port_type=6, acs_ctrl=None, numa=0):
    add_device(root, bdf, port_config(port_type=port_type, acs_ctrl=acs_ctrl), parents=parents, numa_node=numa)


def switch_tree(root, config_bytes=None):
    """Two GPUs behind one switch: root port 00:01.0, upstream port 01:00.0, downstream ports
    02:08.0 (ACS with the kernel's redirect bits) and 02:10.0 (no ACS), GPUs 03:00.0 and
    04:00.0; a NIC and an NVSwitch function beside them."""
    limit = (lambda data: data[:config_bytes]) if config_bytes else (lambda data: data)
    rp, usp, d1, d2 = "0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"
    add_device(root, rp, limit(port_config(port_type=4, acs_ctrl=ACS_REDIRECT)))
    add_device(root, usp, limit(port_config(port_type=5)), parents=(rp,))
    add_device(root, d1, limit(port_config(port_type=6, acs_ctrl=ACS_REDIRECT)), parents=(rp, usp))
    add_device(root, d2, limit(port_config(port_type=6)), parents=(rp, usp))
    gpu(root, "0000:03:00.0", parents=(rp, usp, d1), config=limit(gpu_config()))
    gpu(root, "0000:04:00.0", parents=(rp, usp, d2), config=limit(gpu_config()))
    add_device(root, "0000:05:00.0", Config(vendor=0x15B3, device=0x1021, class_code=0x020000).bytes(),
               parents=(rp, usp, "0000:02:18.0"))
    add_device(root, "0000:06:00.0", Config(device=0x22A3, class_code=0x068000).bytes())
    return ["0000:03:00.0", "0000:04:00.0"]


def host_bridge_tree(root):
    """Two GPUs on two root ports of one host bridge (pci0000:00)."""
    port(root, "0000:00:01.0", port_type=4, acs_ctrl=ACS_REDIRECT)
    port(root, "0000:00:03.0", port_type=4)
    gpu(root, "0000:01:00.0", parents=("0000:00:01.0",))
    gpu(root, "0000:02:00.0", parents=("0000:00:03.0",))
    return ["0000:01:00.0", "0000:02:00.0"]


def numa_tree(root):
    """Three GPUs: two host bridges on NUMA node 0 (pci0000:00, pci0000:40), one on node 1."""
    write_tree(root, {"sys/devices/system/node/node0/cpulist": "0-31\n",
                      "sys/devices/system/node/node1/cpulist": "32-63\n"})
    for bus, numa in (("00", 0), ("40", 0), ("80", 1)):
        rp = "0000:%s:01.0" % bus
        port(root, rp, port_type=4, numa=numa)
        gpu(root, "0000:%02x:00.0" % (int(bus, 16) + 1), parents=(rp,), numa=numa)
    return ["0000:01:00.0", "0000:41:00.0", "0000:81:00.0"]


def h200_tree(root):
    """The two GPUs of nvidia-h200-x2 as read there: both on the root bus of the VM, NUMA -1."""
    found = h200_fixtures()
    for bdf, (data, attrs) in sorted(found.items()):
        add_device(root, bdf, data, driver="nvidia", numa_node=int(attrs["numa_node"]),
                   link=dict((k, v) for k, v in attrs.items() if "link" in k))
    return sorted(found)


def lib_for(bdfs, **kw):
    return FakeNvmlLib([Gpu(bdf) for bdf in bdfs], **kw)


def pair(result, a, b):
    for entry in result["topology"]["pairs"]:
        if (value(entry["a"]), value(entry["b"])) == (a, b):
            return entry
    raise AssertionError("no pair %d-%d" % (a, b))


# ------------------------------------------------------------------------------ topology

def test_two_gpus_behind_one_switch(tmp_path, monkeypatch):
    bdfs = switch_tree(tmp_path)
    result = gather(tmp_path, lib_for(bdfs, p2p={(bdfs[0], bdfs[1], 2): 5}, topology=10), monkeypatch)
    assert [value(g["bdf"]) for g in result["gpus"]] == bdfs
    entry = pair(result, 0, 1)
    assert value(entry["relation"]) == "same_switch" and entry["relation"]["source"] == "derived"
    assert value(entry["nvml_topology"]) == "single"
    # below the switch's upstream port: its two downstream ports, one with ACS redirect, one without
    bridges = values(entry["bridges"])
    assert [b["bdf"] for b in bridges] == ["0000:02:08.0", "0000:02:10.0"]
    assert [b["port_type"] for b in bridges] == ["switch downstream port"] * 2
    assert bridges[0]["acs"] == {"capable": ACS_CAPABLE, "ctrl": ACS_REDIRECT, "source_validation": True,
                                 "translation_blocking": False, "request_redirect": True,
                                 "completion_redirect": True, "upstream_forwarding": True,
                                 "egress_control": False, "direct_translated": False}
    no_acs = entry["bridges"][1]["acs"]
    assert no_acs["value"] is None and "unknown" not in no_acs and no_acs["source"].endswith("0000:02:10.0/config")
    # the pair has no NVLink and the driver says so: a PCIe pair
    assert (value(entry["link"]), value(entry["nvlink_count"])) == ("pcie", 0)
    assert entry["link"]["source"] == "nvml:nvmlDeviceGetP2PStatus"
    assert (value(entry["peer_access"]), value(entry["numa_nodes"])) == ("ok", [0, 0])
    assert value(result["driver"]["nvswitches"]) == 1


def test_two_gpus_on_root_ports_of_one_host_bridge(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    result = gather(tmp_path, lib_for(bdfs, p2p={(bdfs[0], bdfs[1], 0): 3, (bdfs[0], bdfs[1], 2): 5}),
                    monkeypatch)
    entry = pair(result, 0, 1)
    assert value(entry["relation"]) == "same_host_bridge"
    assert [(b["bdf"], b["port_type"], b["acs"] is not None) for b in values(entry["bridges"])] == [
        ("0000:00:01.0", "root port", True), ("0000:00:03.0", "root port", False)]
    # the driver refuses peer reads across the root complex: that answer, named
    assert value(entry["peer_access"]) == "ioh_topology_not_supported"
    assert (value(entry["peer_access_read"]), value(entry["peer_access_write"])) == ("ioh_topology_not_supported", "ok")
    assert value(result["gpus"][0]["pci_path"]) == ["pci0000:00", "0000:00:01.0", "0000:01:00.0"]


def test_gpus_on_different_host_bridges_and_numa_nodes(tmp_path, monkeypatch):
    bdfs = numa_tree(tmp_path)
    result = gather(tmp_path, lib_for(bdfs), monkeypatch)
    assert [value(g["numa_node"]) for g in result["gpus"]] == [0, 0, 1]
    assert values(pair(result, 0, 1))["relation"] == "across_host_bridges"
    assert values(pair(result, 0, 2))["relation"] == "across_cpus"
    assert values(pair(result, 1, 2))["relation"] == "across_cpus"
    assert values(pair(result, 1, 2))["numa_nodes"] == [0, 1]
    # across host bridges every bridge of both paths is on the way
    assert [b["bdf"] for b in values(pair(result, 0, 2))["bridges"]] == ["0000:00:01.0", "0000:80:01.0"]
    assert len(result["topology"]["pairs"]) == 3


def test_numa_minus_one_on_a_multi_node_machine_is_unknown(tmp_path, monkeypatch):
    """-1 means "no affinity"; on a machine with two nodes it cannot say which CPU holds a GPU."""
    write_tree(tmp_path, {"sys/devices/system/node/node0/cpulist": "0\n",
                          "sys/devices/system/node/node1/cpulist": "1\n"})
    port(tmp_path, "0000:00:01.0", port_type=4)
    port(tmp_path, "0000:80:01.0", port_type=4)
    gpu(tmp_path, "0000:01:00.0", parents=("0000:00:01.0",), numa=-1)
    gpu(tmp_path, "0000:81:00.0", parents=("0000:80:01.0",), numa=1)
    result = gather(tmp_path, monkeypatch=monkeypatch)
    relation = pair(result, 0, 1)["relation"]
    assert relation["value"] is None and "different host bridges (pci0000:00, pci0000:80)" in relation["unknown"]
    # on a one-node machine (no node directories, or one) -1 is simply that node
    for name in ("node0", "node1"):
        os.rename(str(tmp_path / "sys/devices/system/node" / name), str(tmp_path / name))
    assert value(pair(gather(tmp_path, monkeypatch=monkeypatch), 0, 1)["relation"]) == "across_host_bridges"


def test_a_shared_bridge_below_the_root_port(tmp_path, monkeypatch):
    """A bridge both paths share below the root bus is where the traffic turns (a switch, or
    here a PCIe-to-PCI bridge); a shared root port turns it inside the root complex."""
    rp = "0000:00:01.0"
    port(tmp_path, rp, port_type=4)
    port(tmp_path, "0000:01:00.0", port_type=7)   # a PCIe-to-PCI bridge
    gpu(tmp_path, "0000:02:00.0", parents=(rp, "0000:01:00.0"))
    gpu(tmp_path, "0000:02:01.0", parents=(rp, "0000:01:00.0"))
    entry = pair(gather(tmp_path, monkeypatch=monkeypatch), 0, 1)
    assert value(entry["relation"]) == "same_switch"  # the PCIe-to-PCI bridge is shared
    # now with the GPUs directly below the root port (two functions of one device)
    tree = tmp_path / "b"
    port(tree, rp, port_type=4)
    gpu(tree, "0000:01:00.0", parents=(rp,))
    gpu(tree, "0000:01:00.1", parents=(rp,))
    entry = pair(gather(tree, monkeypatch=monkeypatch), 0, 1)
    assert value(entry["relation"]) == "same_host_bridge" and entry["bridges"] == []


@pytest.mark.skipif(not h200_fixtures(), reason="the H200 config space fixture has not landed yet")
def test_the_h200_pair_with_nv18(tmp_path, monkeypatch):
    """As read on nvidia-h200-x2 (2026-11-30): two GPUs of an HGX board on the root bus of a VM,
    18 active links each whose far end NVML calls a switch at FFFFFFFF:FF:FF.0 (the NVSwitches
    stay with the host), P2P over NVLink ok: nvidia-smi topo -m prints NV18."""
    a, b = h200_tree(tmp_path)
    lib = FakeNvmlLib([Gpu(a, links=switched(18), bar1=262144 * 1048576), Gpu(b, links=switched(18))],
                      topology=30, codes={"nvmlDeviceGetRetiredPagesPendingStatus": 3,
                                          "nvmlDeviceGetRetiredPages_v2": 3})
    result = gather(tmp_path, lib, monkeypatch)
    entry = values(pair(result, 0, 1))
    assert entry == {"a": 0, "b": 1, "relation": "same_host_bridge", "link": "nvlink", "nvlink_count": 18,
                     "nvlink_via": "nvswitch", "peer_access": "ok", "peer_access_read": "ok",
                     "peer_access_write": "ok", "nvml_topology": "hostbridge", "numa_nodes": [-1, -1],
                     "bridges": []}
    first = result["gpus"][0]
    assert link_values(first["pcie"]) == {"link_speed_gts": 32.0, "link_width": 16, "max_link_speed_gts": 32.0,
                                          "max_link_width": 16, "degraded": False, "mrrs_bytes": 4096,
                                          "mps_bytes": 256, "relaxed_ordering": True}
    assert (value(first["device_id"]), value(first["architecture"]), value(first["chip"])) == (
        "10de:2335", "hopper", "gh100")
    assert [(link["active"]["value"], link["remote_type"]["value"]) for link in first["nvlink"]] == [
        (True, "switch")] * 18
    assert first["nvlink"][0]["remote_bdf"]["unknown"].startswith(
        "nvmlDeviceGetNvLinkRemotePciInfo_v2: answers FFFFFFFF:FF:FF.0: no PCI address for the far end")
    # what nvidia-smi -q showed there: persistence on, ECC on (pending on), remapped rows pending
    # No, retired pages N/A, 700 W = default = max, 200 W min, only the idle clock reason, BAR1
    # 262144 MiB, no IOMMU group
    assert values(dict((k, first[k]) for k in (
        "name", "persistence_mode", "ecc_mode", "ecc_pending_mode", "remapped_rows_pending",
        "power_limit_w", "power_default_limit_w", "power_max_limit_w", "power_min_limit_w",
        "clock_event_reasons", "clock_event_idle", "bar1_mib"))) == {
        "name": "NVIDIA H200", "persistence_mode": True, "ecc_mode": True, "ecc_pending_mode": True,
        "remapped_rows_pending": False, "power_limit_w": 700, "power_default_limit_w": 700,
        "power_max_limit_w": 700, "power_min_limit_w": 200, "clock_event_reasons": [], "clock_event_idle": True,
        "bar1_mib": 262144}
    assert first["retired_pages_pending"]["unknown"] == (
        "nvmlDeviceGetRetiredPagesPendingStatus: Not Supported (NVML_ERROR_NOT_SUPPORTED)")
    assert first["iommu_group_type"]["unknown"] == gf.NO_IOMMU_GROUP


def test_a_direct_nvlink_bridge(tmp_path, monkeypatch):
    """Two GPUs joined by a bridge (H100 NVL, say): the links' far ends are the other GPU."""
    bdfs = host_bridge_tree(tmp_path)
    links_a, links_b = nvlinked(bdfs[0], bdfs[1], 12)
    lib = FakeNvmlLib([Gpu(bdfs[0], links=links_a), Gpu(bdfs[1], links=links_b)])
    entry = values(pair(gather(tmp_path, lib, monkeypatch), 0, 1))
    assert (entry["link"], entry["nvlink_count"], entry["nvlink_via"]) == ("nvlink", 12, "direct")


@pytest.mark.parametrize("status, expected", [(0, ("nvlink", 18, "nvswitch")), (5, ("pcie", 0, "none"))])
def test_nvswitch_links_count_when_the_driver_says_nvlink_p2p_works(tmp_path, monkeypatch, status, expected):
    """Links to a visible NVSwitch (its BDF known): the pair's count is the bonded set through
    the fabric, as nvidia-smi prints NV#, only when the driver's NVLink P2P answer is ok (GPUs of
    another fabric partition share switches but not a path)."""
    bdfs = host_bridge_tree(tmp_path)
    lib = FakeNvmlLib([Gpu(bdfs[0], links=switched(18, "0000:c0:00.0")),
                       Gpu(bdfs[1], links=switched(18, "0000:c1:00.0"))], p2p={(bdfs[0], bdfs[1], 2): status})
    entry = values(pair(gather(tmp_path, lib, monkeypatch), 0, 1))
    assert (entry["link"], entry["nvlink_count"], entry["nvlink_via"]) == expected


# ------------------------------------------------------------------------------ gpus

def test_not_root_sees_64_bytes_of_config_space(tmp_path, monkeypatch):
    bdfs = switch_tree(tmp_path, config_bytes=64)
    result = gather(tmp_path, lib_for(bdfs), monkeypatch)
    pcie = result["gpus"][0]["pcie"]
    for key in ("mrrs_bytes", "mps_bytes", "relaxed_ordering"):
        assert pcie[key]["value"] is None and "needs root" in pcie[key]["unknown"], key
    # the sysfs link attributes need no root
    assert (value(pcie["link_speed_gts"]), value(pcie["degraded"])) == (32.0, False)
    entry = pair(result, 0, 1)
    # the tree alone says the paths meet in a bridge below the root bus: a switch
    assert value(entry["relation"]) == "same_switch"
    for bridge in entry["bridges"]:
        assert "needs root" in bridge["acs"]["unknown"] and "needs root" in bridge["port_type"]["unknown"]


def test_gpu_identity_link_and_iommu(tmp_path, monkeypatch):
    gpu(tmp_path, "0000:41:00.0", link={"current_link_speed": "16.0 GT/s PCIe", "current_link_width": "8",
                                        "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"},
        config=gpu_config(devctl=0x5020, device=0x2BB5))     # MRRS 4096, MPS 256, relaxed ordering off
    gpu(tmp_path, "0000:01:00.0", config=gpu_config(device=0x2A00))   # an ID in no known block
    add_device(tmp_path, "0000:41:00.1", Config(device=0x22E8, class_code=0x040300).bytes())  # its audio
    add_iommu_group(tmp_path, "0000:41:00.0", 27, "DMA-FQ")
    result = gather(tmp_path, monkeypatch=monkeypatch)
    assert [value(g["bdf"]) for g in result["gpus"]] == ["0000:01:00.0", "0000:41:00.0"]
    assert [value(g["index"]) for g in result["gpus"]] == [0, 1]
    blackwell = result["gpus"][1]
    assert (value(blackwell["device_id"]), value(blackwell["architecture"]), value(blackwell["chip"])) == (
        "10de:2bb5", "blackwell", "gb202")
    assert link_values(blackwell["pcie"]) == {"link_speed_gts": 16.0, "link_width": 8, "max_link_speed_gts": 32.0,
                                              "max_link_width": 16, "degraded": True, "mrrs_bytes": 4096,
                                              "mps_bytes": 256, "relaxed_ordering": False}
    assert (value(blackwell["iommu_group"]), value(blackwell["iommu_group_type"])) == ("27", "DMA-FQ")
    assert blackwell["iommu_group_type"]["source"].endswith("0000:41:00.0/iommu_group/type")
    unknown_chip = result["gpus"][0]
    assert "10de:2a00 is in none of the device ID blocks" in unknown_chip["architecture"]["unknown"]
    assert unknown_chip["iommu_group_type"]["unknown"] == gf.NO_IOMMU_GROUP


def test_a_gpu_without_a_link_speed(tmp_path, monkeypatch):
    gpu(tmp_path, "0000:01:00.0", link={"current_link_speed": "Unknown", "current_link_width": "0",
                                        "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"})
    pcie = gather(tmp_path, monkeypatch=monkeypatch)["gpus"][0]["pcie"]
    assert "cannot parse 'Unknown'" in pcie["link_speed_gts"]["unknown"]
    assert pcie["degraded"]["value"] is None and "cannot parse 'Unknown'" in pcie["degraded"]["unknown"]


def test_a_reserved_mrrs_encoding_is_unknown(tmp_path, monkeypatch):
    gpu(tmp_path, "0000:01:00.0", config=gpu_config(devctl=0x6000 | 0x00C0))
    pcie = gather(tmp_path, monkeypatch=monkeypatch)["gpus"][0]["pcie"]
    assert "reserved encoding 6" in pcie["mrrs_bytes"]["unknown"] and "reserved encoding 6" in pcie["mps_bytes"]["unknown"]


def test_without_nvml_every_nvml_fact_is_unknown_and_sysfs_still_answers(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    result = gather(tmp_path, monkeypatch=monkeypatch)
    reason = "NVML unavailable: libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
    first = result["gpus"][0]
    nvml_keys = [k for k, v in first.items() if isinstance(v, dict) and v.get("source", "").startswith("nvml:")]
    assert len(nvml_keys) >= 20
    for key in nvml_keys + ["nvlink"]:
        assert first[key]["value"] is None and first[key]["unknown"] == reason, key
    assert first["name"]["source"] == "nvml:nvmlDeviceGetName"
    entry = pair(result, 0, 1)
    for key in ("link", "peer_access", "nvlink_count", "nvml_topology"):
        assert entry[key]["value"] is None and reason in entry[key]["unknown"], key
    assert value(entry["relation"]) == "same_host_bridge" and value(first["bdf"]) == bdfs[0]
    assert result["driver"]["cuda_driver_version"]["unknown"] == reason


def test_ecc_not_supported_makes_only_the_ecc_facts_unknown(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs, codes={"nvmlDeviceGetEccMode": 3, "nvmlDeviceGetTotalEccErrors": 3})
    first = gather(tmp_path, lib, monkeypatch)["gpus"][0]
    expected = "nvmlDeviceGetEccMode: Not Supported (NVML_ERROR_NOT_SUPPORTED)"
    assert first["ecc_mode"] == {"value": None, "source": "nvml:nvmlDeviceGetEccMode", "unknown": expected}
    assert first["ecc_pending_mode"]["unknown"] == expected
    assert first["ecc_errors_corrected"]["unknown"] == (
        "nvmlDeviceGetTotalEccErrors: Not Supported (NVML_ERROR_NOT_SUPPORTED)")
    assert (value(first["name"]), value(first["temperature_c"]), value(first["persistence_mode"])) == (
        "NVIDIA H200", 35, True)


def test_nvml_values(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = FakeNvmlLib([Gpu(bdfs[0], persistence=0, ecc=(1, 0), retired=(3, 1), retired_pending=1,
                           remapped=(2, 1, 1, 0), clocks=0x1 | 0x4 | 0x40 | 0x400,
                           power=(450500, 700000, 200000, 700000), bar1=131072 * 1048576, temperature=81),
                       Gpu(bdfs[1])])
    first = values(gather(tmp_path, lib, monkeypatch)["gpus"][0])
    assert dict((k, first[k]) for k in (
        "persistence_mode", "ecc_mode", "ecc_pending_mode", "ecc_errors_corrected", "ecc_errors_uncorrected",
        "retired_pages", "retired_pages_pending", "remapped_rows_correctable", "remapped_rows_uncorrectable",
        "remapped_rows_pending", "remapped_rows_failure", "clock_event_reasons", "clock_event_idle",
        "power_limit_w", "bar1_mib", "temperature_c", "nvlink")) == {
        "persistence_mode": False, "ecc_mode": True, "ecc_pending_mode": False,
        "ecc_errors_corrected": {"volatile": 2, "aggregate": 7}, "ecc_errors_uncorrected": {"volatile": 0, "aggregate": 1},
        "retired_pages": {"multiple_single_bit_ecc": 3, "double_bit_ecc": 1}, "retired_pages_pending": True,
        "remapped_rows_correctable": 2, "remapped_rows_uncorrectable": 1, "remapped_rows_pending": True,
        "remapped_rows_failure": False, "clock_event_reasons": ["sw_power_cap", "hw_thermal_slowdown", "bit_10"],
        "clock_event_idle": True, "power_limit_w": 450.5, "bar1_mib": 131072, "temperature_c": 81, "nvlink": []}


def test_an_older_library_reports_throttle_reasons(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs, missing={"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperature"})
    first = gather(tmp_path, lib, monkeypatch)["gpus"][0]
    assert first["clock_event_reasons"] == {"value": [], "source": "nvml:nvmlDeviceGetCurrentClocksThrottleReasons"}
    assert first["temperature_c"]["unknown"] == (
        "nvmlDeviceGetTemperature: not in this libnvidia-ml (an older driver) (NVML_ERROR_FUNCTION_NOT_FOUND)")


def test_a_gpu_nvml_does_not_know(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    result = gather(tmp_path, FakeNvmlLib([Gpu(bdfs[0])]), monkeypatch)
    second = result["gpus"][1]
    assert second["name"]["unknown"] == ("NVML has no usable handle for 0000:02:00.0: "
                                         "nvmlDeviceGetHandleByPciBusId_v2: Not Found (NVML_ERROR_NOT_FOUND)")
    assert value(result["gpus"][0]["name"]) == "NVIDIA H200"
    entry = pair(result, 0, 1)
    assert "NVML has no usable handle for 0000:02:00.0" in entry["peer_access"]["unknown"]


def test_a_lost_gpu_fails_its_calls_not_the_read(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs, codes=dict(((name, bdfs[1]), 15) for name in (
        "nvmlDeviceGetNvLinkState", "nvmlDeviceGetTemperature")))
    lib.codes["nvmlDeviceGetNvLinkRemotePciInfo_v2"] = 999
    lib.gpus[0].links = [(True, bdfs[1]), (False, bdfs[1])]
    result = gather(tmp_path, lib, monkeypatch)
    links = values(result["gpus"][0]["nvlink"])
    assert [(link["link"], link["active"], link["remote_type"], link["remote_bdf"]) for link in links] == [
        (0, True, "gpu", None), (1, False, None, None)]
    assert "Unknown Error (NVML_ERROR_UNKNOWN)" in result["gpus"][0]["nvlink"][0]["remote_bdf"]["unknown"]
    assert result["gpus"][1]["nvlink"]["unknown"] == "nvmlDeviceGetNvLinkState: GPU is lost (NVML_ERROR_GPU_IS_LOST)"
    assert "GPU is lost" in result["gpus"][1]["temperature_c"]["unknown"]
    # the far end of an active link is unknown: so is the count, and the driver's P2P answer
    # for NVLink decides the link
    entry = pair(result, 0, 1)
    assert entry["nvlink_count"]["unknown"].startswith("the far end of NVLink 0 of 0000:01:00.0 is unknown: ")
    assert entry["link"] == {"value": "nvlink", "source": "nvml:nvmlDeviceGetP2PStatus"}


def test_p2p_query_failures(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs, codes={"nvmlDeviceGetP2PStatus": 3, "nvmlDeviceGetTopologyCommonAncestor": 3})
    entry = pair(gather(tmp_path, lib, monkeypatch), 0, 1)
    assert entry["peer_access"]["unknown"] == "nvmlDeviceGetP2PStatus: Not Supported (NVML_ERROR_NOT_SUPPORTED)"
    # the GPUs have no NVLink at all (NVML says so for every link): a PCIe pair
    assert entry["link"] == {"value": "pcie", "source": "derived"}
    assert "NVML_ERROR_NOT_SUPPORTED" in entry["nvml_topology"]["unknown"]


def test_gather_loads_and_shuts_down_nvml_itself(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs)
    monkeypatch.setattr(nvml_mod.ctypes, "CDLL", lambda name: lib)
    result = gf.gather(gf.Paths(str(tmp_path)))
    assert value(result["gpus"][0]["name"]) == "NVIDIA H200"
    assert lib.calls[0] == "nvmlInit_v2" and lib.calls[-1] == "nvmlShutdown"


def test_no_gpus_and_no_pci_bus(tmp_path, monkeypatch):
    result = gather(tmp_path, monkeypatch=monkeypatch)
    assert result["gpus"] == [] and result["topology"] == {"pairs": []}
    assert value(result["driver"]["nvswitches"]) == 0


def test_an_unreadable_pci_bus(tmp_path, monkeypatch):
    def refuse(sysfs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(gf.pci_config, "list_devices", refuse)
    result = gather(tmp_path, monkeypatch=monkeypatch)
    assert result["gpus"]["value"] is None and "Permission denied" in result["gpus"]["unknown"]
    assert result["topology"]["pairs"]["value"] is None
    assert "Permission denied" in result["driver"]["nvswitches"]["unknown"]


# ------------------------------------------------------------------------------ driver

def driver_tree(root):
    write_tree(root, {
        "proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
                                      "Release Build  (dvs-builder@U22)  Thu Oct 30 2025\nGCC version:  gcc 12\n",
        "sys/module/nvidia/version": "580.159.04\n",
        "sys/module/nvidia/initstate": "live\n",
        "proc/modules": "nvidia_peermem 16384 0 - Live 0x0\nib_core 458752 1 nvidia_peermem, Live 0x0\n"
                        "nvidia 14381056 10 nvidia_peermem, Live 0x0\n",
        "proc/kallsyms": "0000000000000000 T ib_register_peer_memory_client\t[ib_core]\n"
                         "0000000000000000 T nvidia_p2p_get_pages\t[nvidia]\n",
        "proc/1/comm": "systemd\n",
        "proc/812/comm": "nvidia-persiste\n",
        "proc/813/comm": "nv-fabricmanage\n",
        "proc/self/comm": "python3\n",
        "sys/class/infiniband/mlx5_0/node_type": "1: CA\n",
        "sys/class/infiniband/mlx5_1/node_type": "1: CA\n",
    })


def test_driver_section(tmp_path, monkeypatch):
    driver_tree(tmp_path)
    bdfs = host_bridge_tree(tmp_path)
    driver = gather(tmp_path, lib_for(bdfs), monkeypatch)["driver"]
    assert values(driver) == {
        "version": "580.159.04", "flavor": "open", "cuda_driver_version": "13.0",
        "nvml_driver_version": "580.159.04", "loaded": True, "persistenced_active": True,
        "fabricmanager_active": True, "nvswitches": 0, "peermem_loaded": True, "nv_peer_mem_loaded": False,
        "ib_core_loaded": True, "peer_symbol": True, "rdma_devices": ["mlx5_0", "mlx5_1"]}
    assert driver["version"]["source"] == str(tmp_path / "sys/module/nvidia/version")
    assert driver["flavor"]["source"] == str(tmp_path / "proc/driver/nvidia/version")
    assert driver["persistenced_active"]["source"] == str(tmp_path / "proc/*/comm")


def test_driver_section_on_a_node_without_the_driver(tmp_path, monkeypatch):
    write_tree(tmp_path, {"proc/1/comm": "init\n", "proc/kallsyms": "0000000000000000 T printk\n"})
    driver = gather(tmp_path, monkeypatch=monkeypatch)["driver"]
    assert "the nvidia module is not loaded" in driver["version"]["unknown"]
    assert "the nvidia module is not loaded" in driver["flavor"]["unknown"]
    assert values(driver)["loaded"] is False and values(driver)["persistenced_active"] is False
    assert (values(driver)["peer_symbol"], values(driver)["rdma_devices"]) == (False, [])
    assert "kallsyms cannot be read" in gather(tmp_path / "none", monkeypatch=monkeypatch)["driver"]["peer_symbol"]["unknown"]


def test_proprietary_flavor_from_proc_only(tmp_path, monkeypatch):
    write_tree(tmp_path, {"proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
                                                        "550.127.05  Tue Oct  8 2024\n"})
    driver = values(gather(tmp_path, monkeypatch=monkeypatch)["driver"])
    assert (driver["version"], driver["flavor"], driver["loaded"]) == ("550.127.05", "proprietary", True)


# ------------------------------------------------------------------------------ speed

def eight_gpu_tree(root):
    """An HGX-like node: two sockets, each with two switches holding two GPUs and a NIC each,
    ACS on every downstream port, IOMMU groups, NVSwitches."""
    write_tree(root, {"sys/devices/system/node/node0/cpulist": "0-55\n",
                      "sys/devices/system/node/node1/cpulist": "56-111\n"})
    bdfs = []
    group = 10
    for socket, buses in ((0, (0x00, 0x20)), (1, (0x80, 0xA0))):
        for base in buses:
            rp = "0000:%02x:01.0" % base
            usp = "0000:%02x:00.0" % (base + 1)
            port(root, rp, port_type=4, acs_ctrl=ACS_REDIRECT, numa=socket)
            port(root, usp, port_type=5, numa=socket)
            for slot, offset in ((0x00, 3), (0x08, 4), (0x10, 5)):
                dsp = "0000:%02x:%02x.0" % (base + 2, slot)
                port(root, dsp, port_type=6, acs_ctrl=ACS_REDIRECT, numa=socket)
                endpoint = "0000:%02x:00.0" % (base + offset)
                if slot == 0x10:
                    add_device(root, endpoint, Config(vendor=0x15B3, device=0x1021, class_code=0x020000).bytes(),
                               parents=(rp, usp, dsp), numa_node=socket)
                else:
                    gpu(root, endpoint, parents=(rp, usp, dsp), numa=socket)
                    bdfs.append(endpoint)
                add_iommu_group(root, endpoint, group, "DMA")
                group += 1
    for n in range(4):
        add_device(root, "0000:%02x:00.0" % (0xC0 + n), Config(device=0x22A3, class_code=0x068000).bytes())
    return bdfs


def test_eight_gpus_in_well_under_a_second(tmp_path, monkeypatch):
    bdfs = eight_gpu_tree(tmp_path)
    driver_tree(tmp_path)
    lib = lib_for(bdfs)
    for gpu_entry in lib.gpus:
        gpu_entry.links = switched(18, "0000:c0:00.0")
    opened = []
    real = pcie_ext.ConfigSpace

    class Counting(real):
        def __init__(self, data=None, path=None):
            opened.append(path)
            real.__init__(self, data, path)

    monkeypatch.setattr(pcie_ext, "ConfigSpace", Counting)
    start = time.perf_counter()
    result = gather(tmp_path, lib, monkeypatch)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5, "8 GPUs, 28 pairs: gather took %.1f ms" % (elapsed * 1000)  # ~20-30 ms here
    assert len(result["gpus"]) == 8 and len(result["topology"]["pairs"]) == 28
    # every config space read once, however many pairs its bridge is on
    assert len(opened) == len(set(opened)) == 8 + 4 * 4
    assert values(pair(result, 0, 1))["relation"] == "same_switch"
    assert values(pair(result, 0, 2))["relation"] == "across_host_bridges"
    assert values(pair(result, 0, 7))["relation"] == "across_cpus"
    assert [b["bdf"] for b in values(pair(result, 0, 2))["bridges"]] == [
        "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:20:01.0", "0000:21:00.0", "0000:22:00.0"]
    assert [b["bdf"] for b in values(pair(result, 0, 1))["bridges"]] == ["0000:02:00.0", "0000:02:08.0"]
    assert values(result["driver"])["nvswitches"] == 4
    assert all(values(p)["link"] == "nvlink" for p in result["topology"]["pairs"])


# ------------------------------------------------------------------------------ health facts

AER_COR = ("RxErr 3\nBadTLP 1\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\n"
           "TOTAL_ERR_COR 4\n")
AER_ZERO = {"aer_dev_correctable": "RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 0\n",
            "aer_dev_nonfatal": "Undefined 0\nDLP 0\nTOTAL_ERR_NONFATAL 0\n",
            "aer_dev_fatal": "Undefined 0\nDLP 0\nTOTAL_ERR_FATAL 0\n"}


def _aer_files(root, path_parts, files):
    write_tree(root, dict((os.path.join("sys", "devices", *path_parts, name), text) for name, text in files.items()))


def test_health_facts_of_two_gpus_behind_a_switch(tmp_path, monkeypatch):
    bdfs = switch_tree(tmp_path)
    rp, usp, d1 = "0000:00:01.0", "0000:01:00.0", "0000:02:08.0"
    _aer_files(tmp_path, ("pci0000:00", rp, usp, d1, "0000:03:00.0"),
               dict(AER_ZERO, aer_dev_correctable=AER_COR))
    _aer_files(tmp_path, ("pci0000:00", rp), dict(AER_ZERO, aer_dev_fatal="DLP 1\nTOTAL_ERR_FATAL 1\n"))
    write_tree(tmp_path, {"dev/kmsg": "6,0,1000,-;Linux version 6.8.0\n"
                                      "3,41,812500000,-;NVRM: Xid (PCI:0000:04:00): 79, pid=0, GPU has fallen off the bus.\n"
                                      "3,42,900000000,-;NVRM: Xid (PCI:0000:04:00): 79, pid=0, GPU has fallen off the bus.\n"})
    lib = FakeNvmlLib([Gpu(bdfs[0], recovery_action=1, pcie_replay=7, links=switched(4)),
                       Gpu(bdfs[1], links=switched(4)[:2] + [(False, None, 0)] * 2,
                           nvlink_errors={0: (5, 1, 2, 3)})])
    result = gather(tmp_path, lib, monkeypatch)
    first, second = result["gpus"]
    assert value(first["nvml_status"]) == "ok"
    assert value(first["recovery_action"]) == "gpu_reset"
    assert value(first["pcie"]["replay_count"]) == 7
    assert (value(first["pcie"]["aer_correctable"]), value(first["pcie"]["aer_fatal"])) == (4, 0)
    assert value(first["pcie"]["aer_counts"])["correctable"] == {"RxErr": 3, "BadTLP": 1}
    # the root port above reports a fatal error; the switch ports report nothing
    assert value(first["pcie"]["path_aer"]) == [{"bdf": rp, "correctable": 0, "nonfatal": 0, "fatal": 1}]
    assert value(first["pcie"]["path_aer_unreported"]) == [usp, d1]
    # the second GPU has no AER files: unknown, with the reason
    assert "no AER capability" in second["pcie"]["aer_fatal"]["unknown"]
    assert (value(first["nvlink_links"]), value(first["nvlink_active"])) == (4, 4)
    assert (value(second["nvlink_links"]), value(second["nvlink_active"])) == (4, 2)
    assert value(second["nvlink_errors"]) == {"replay": 5, "recovery": 1, "crc": 5}
    assert value(second["nvlink"][0]["crc_errors"]) == 5
    health = result["health"]
    assert (value(health["gpus_pci"]), value(health["gpus_driver"])) == (2, 2)
    assert value(health["nvlink_most"]) == {"10de:2335": 4}
    assert value(health["kernel_log"]) == "/dev/kmsg" and value(health["kernel_log_complete"]) is True
    assert value(health["xid"]) == [{"bdf": "0000:04:00.0", "gpu": 1, "code": 79, "count": 2, "first_s": 812.5,
                                     "last_s": 900.0, "last_message": "GPU has fallen off the bus."}]
    assert value(health["xid_total"]) == 2


def test_a_lost_gpu_is_named_by_nvml_status(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = lib_for(bdfs, codes={"nvmlDeviceGetHandleByPciBusId_v2": 15})
    result = gather(tmp_path, lib, monkeypatch)
    assert [value(g["nvml_status"]) for g in result["gpus"]] == ["gpu_is_lost", "gpu_is_lost"]
    assert "GPU is lost" in result["gpus"][0]["recovery_action"]["unknown"]


def test_without_nvml_the_health_facts_are_unknown_with_the_reason(tmp_path, monkeypatch):
    host_bridge_tree(tmp_path)
    result = gather(tmp_path, None, monkeypatch)
    gpu0 = result["gpus"][0]
    for key in ("nvml_status", "recovery_action", "sram_threshold_exceeded", "fabric_state", "nvlink_errors"):
        assert "cannot open shared object file" in gpu0[key]["unknown"], key
    assert value(result["health"]["gpus_pci"]) == 2
    assert "cannot open shared object file" in result["health"]["gpus_driver"]["unknown"]


def test_counters_a_gpu_cannot_give_leave_its_nvlink_errors_unknown(tmp_path, monkeypatch):
    bdfs = host_bridge_tree(tmp_path)
    lib = FakeNvmlLib([Gpu(bdfs[0], links=nvlinked(bdfs[0], bdfs[1], 2)[0]), Gpu(bdfs[1])],
                      codes={"nvmlDeviceGetNvLinkErrorCounter": 3})
    result = gather(tmp_path, lib, monkeypatch)
    assert "Not Supported" in result["gpus"][0]["nvlink_errors"]["unknown"]
    assert value(result["gpus"][1]["nvlink_errors"]) is None  # no NVLink at all: a known null
