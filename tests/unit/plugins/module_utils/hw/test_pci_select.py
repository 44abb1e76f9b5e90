"""hw/pci_select: the devices / vendor / classes options that pcie_maxreadreq and pcie_acs share."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_select


def select(**params):
    errors = []
    found = pci_select.selection(params, errors)
    return found, errors


def test_defaults_are_the_nvidia_gpus():
    (devices, vendor, classes), errors = select(vendor="0x10DE")
    assert (devices, vendor, classes, errors) == ([], "0x10de", ["0x0300", "0x0302"], [])


def test_addresses_are_parsed_and_deduplicated():
    (devices, _vendor, _classes), errors = select(devices=["1b:00.0", "0000:1B:00.0", "00000000:3d:00.0"], vendor=0x10DE)
    assert devices == ["0000:1b:00.0", "0000:3d:00.0"] and errors == []


@pytest.mark.parametrize("params, fragment", [
    ({"vendor": "10de"}, "vendor '10de' is not valid"),
    ({"vendor": True}, "vendor True is not valid"),
    ({"vendor": "0x10de", "classes": ["0x03"]}, "class '0x03' is not valid"),
    ({"vendor": "0x10de", "classes": []}, "classes is empty"),
    ({"vendor": "0x10de", "devices": "1b:00.0"}, "devices must be a list"),
    ({"vendor": "0x10de", "devices": ["1b:00"]}, "1b:00"),
])
def test_every_bad_value_is_named(params, fragment):
    _found, errors = select(**params)
    assert any(fragment in error for error in errors), errors


def test_classes_as_integers_and_with_the_programming_interface():
    (_devices, _vendor, classes), errors = select(vendor="0x10de", classes=[0x0302, "0x030200", 0x030000])
    assert classes == ["0x0302", "0x030200", "0x030000"] and errors == []
