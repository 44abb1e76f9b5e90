"""NVIDIA GPUs from a fake sysfs, and their architecture from the PCI device ID."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_gpus as ng
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree


def pci(bdf, vendor, device, klass):
    base = "sys/bus/pci/devices/%s/" % bdf
    return {base + "vendor": vendor + "\n", base + "device": device + "\n", base + "class": klass + "\n"}


@pytest.mark.parametrize("device_id, arch, chip", [
    (0x2335, "hopper", "gh100"),        # H200 SXM (the test machines)
    (0x2330, "hopper", "gh100"),        # H100 SXM
    (0x2901, "blackwell", "gb100"),     # B200
    (0x2BB1, "blackwell", "gb202"),     # RTX PRO 6000 Blackwell Workstation
    (0x2BB5, "blackwell", "gb202"),     # RTX PRO 6000 Blackwell Server
    (0x2B85, "blackwell", "gb202"),     # RTX 5090
    (0x2C02, "blackwell", "gb203"),
    (0x2D04, "blackwell", "gb206"),
    (0x2D83, "blackwell", "gb207"),
    (0x2F04, "blackwell", "gb205"),
    (0x3182, "blackwell", "gb110"),
    (0x2684, "ada", "ad102"),           # RTX 4090
    (0x26B9, "ada", "ad102"),           # L40S
    (0x20B2, "ampere", "ga100"),        # A100 SXM4 80GB
    (0x1EB8, "turing", "tu104"),        # T4
    (0x2A00, "unknown", None),          # between the blocks: never guessed
    (0x0FFF, "unknown", None),
])
def test_classify(device_id, arch, chip):
    assert ng.classify(device_id) == (arch, chip)


def test_list_gpus_filters_vendor_and_class(tmp_path):
    files = {}
    files.update(pci("0000:41:00.0", "0x10de", "0x2bb5", "0x030200"))   # 3D controller
    files.update(pci("0000:41:00.1", "0x10de", "0x22e8", "0x040300"))   # its HDMI audio function
    files.update(pci("0000:01:00.0", "0x10de", "0x2335", "0x030000"))   # VGA
    files.update(pci("0000:02:00.0", "0x1002", "0x74a1", "0x038000"))   # AMD, not ours
    files.update(pci("0000:03:00.0", "0x15b3", "0x1021", "0x020000"))   # a NIC
    files["sys/bus/pci/devices/0000:04:00.0/vendor"] = "0x10de\n"     # unreadable rest: left out
    write_tree(tmp_path, files)
    gpus = ng.list_gpus(str(tmp_path / "sys"))
    assert gpus == [
        {"bdf": "0000:01:00.0", "device_id": "10de:2335", "architecture": "hopper", "chip": "gh100"},
        {"bdf": "0000:41:00.0", "device_id": "10de:2bb5", "architecture": "blackwell", "chip": "gb202"},
    ]
    assert ng.describe(gpus[1]) == "0000:41:00.0 (10de:2bb5, blackwell gb202)"
    assert ng.describe({"bdf": "x", "device_id": "10de:2a00", "architecture": "unknown", "chip": None}) == \
        "x (10de:2a00, unknown)"


def test_list_gpus_without_pci_bus(tmp_path):
    assert ng.list_gpus(str(tmp_path / "nothing")) == []


def test_the_vendor_and_classes_are_written_as_sysfs_prints_them():
    """NVIDIA_VENDOR and GPU_CLASSES are the one source for every selection of NVIDIA GPUs
    (this module, pcie_maxreadreq's defaults, the p2p code): lower-case 0x and 4 hex digits,
    the vendor file's form and the class file's first 6 characters."""
    import re
    assert ng.NVIDIA_VENDOR == "0x10de"
    assert ng.GPU_CLASSES == ("0x0300", "0x0302")
    assert all(re.fullmatch(r"0x[0-9a-f]{4}", value) for value in (ng.NVIDIA_VENDOR,) + ng.GPU_CLASSES)
