"""hw/pci_aer: the kernel's AER statistics files in a fake /sys, written as aer.c writes them."""

import errno
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_aer

GPU, ROOT, SWITCH_UP, SWITCH_DOWN = "0000:1b:00.0", "0000:00:01.1", "0000:19:00.0", "0000:1a:00.0"

# aer_correctable_error_string and aer_uncorrectable_error_string (drivers/pci/pcie/aer.c): the
# bit positions that have names.
CORRECTABLE = {0: "RxErr", 6: "BadTLP", 7: "BadDLLP", 8: "Rollover", 12: "Timeout", 13: "NonFatalErr",
               14: "CorrIntErr", 15: "HeaderOF"}
UNCORRECTABLE = {0: "Undefined", 4: "DLP", 5: "SDES", 12: "TLP", 13: "FCP", 14: "CmpltTO", 15: "CmpltAbrt",
                 16: "UnxCmplt", 17: "RxOF", 18: "MalfTLP", 19: "ECRC", 20: "UnsupReq", 21: "ACSViol",
                 22: "UncorrIntErr", 23: "BlockedTLP", 24: "AtomicOpBlocked", 25: "TLPBlockedErr",
                 26: "PoisonTLPBlocked"}


def render(names, array, total_name, total, bits=None, size=None):
    """aer_stats_dev_attr's output: "%s %llu\\n" for every named bit, "<array>_bit[%d] %llu\\n"
    for an unnamed bit that counted, then "TOTAL_%s %llu\\n"."""
    bits = bits or {}
    size = size or (16 if array == "dev_cor_errs" else 27)
    lines = []
    for bit in range(size):
        if bit in names:
            lines.append("%s %d\n" % (names[bit], bits.get(bit, 0)))
        elif bits.get(bit):
            lines.append("%s_bit[%d] %d\n" % (array, bit, bits[bit]))
    lines.append("TOTAL_%s %d\n" % (total_name, total))
    return "".join(lines)


def device(sys_root, bdf, cor=(0, None), nonfatal=(0, None), fatal=(0, None), rootport=None):
    """Write the three files (each (total, {bit: count})) and, for a root port, its three totals."""
    path = os.path.join(str(sys_root), "bus", "pci", "devices", bdf)
    os.makedirs(path, exist_ok=True)
    for name, names, array, total_name, (total, bits) in (
            ("aer_dev_correctable", CORRECTABLE, "dev_cor_errs", "ERR_COR", cor),
            ("aer_dev_nonfatal", UNCORRECTABLE, "dev_nonfatal_errs", "ERR_NONFATAL", nonfatal),
            ("aer_dev_fatal", UNCORRECTABLE, "dev_fatal_errs", "ERR_FATAL", fatal)):
        with open(os.path.join(path, name), "w") as handle:
            handle.write(render(names, array, total_name, total, bits))
    if rootport is not None:
        for name, value in zip(("aer_rootport_total_err_cor", "aer_rootport_total_err_nonfatal",
                                "aer_rootport_total_err_fatal"), rootport):
            with open(os.path.join(path, name), "w") as handle:
                handle.write("%d\n" % value)
    return path


def bare(sys_root, bdf):
    """A device without AER statistics: its directory, no aer_* files."""
    path = os.path.join(str(sys_root), "bus", "pci", "devices", bdf)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vendor"), "w") as handle:
        handle.write("0x10de\n")
    return path


def test_the_kernel_format_is_what_is_rendered(tmp_path):
    path = device(tmp_path, GPU, cor=(2, {0: 2}))
    with open(os.path.join(path, "aer_dev_correctable")) as handle:
        text = handle.read()
    assert text == ("RxErr 2\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\n"
                    "HeaderOF 0\nTOTAL_ERR_COR 2\n")


def test_a_clean_device(tmp_path):
    path = device(tmp_path, GPU)
    found = pci_aer.device_counters(str(tmp_path), GPU)
    assert found["correctable"] == {"value": 0, "source": os.path.join(path, "aer_dev_correctable")}
    assert found["nonfatal"] == {"value": 0, "source": os.path.join(path, "aer_dev_nonfatal")}
    assert found["fatal"] == {"value": 0, "source": os.path.join(path, "aer_dev_fatal")}
    assert found["counts"] == {"value": {"correctable": {}, "nonfatal": {}, "fatal": {}}, "source": path}


def test_counts_above_zero_are_kept_by_the_kernels_names(tmp_path):
    # one ERR_COR message can carry several bits: the total is not the sum
    path = device(tmp_path, GPU, cor=(5, {0: 3, 6: 2, 7: 1, 8: 1, 12: 1, 3: 4}),
                  nonfatal=(1, {14: 1, 20: 1}), fatal=(2, {4: 1, 5: 1, 18: 1}))
    found = pci_aer.device_counters(str(tmp_path), GPU)
    assert (found["correctable"]["value"], found["nonfatal"]["value"], found["fatal"]["value"]) == (5, 1, 2)
    assert found["counts"] == {"source": path, "value": {
        "correctable": {"RxErr": 3, "BadTLP": 2, "BadDLLP": 1, "Rollover": 1, "Timeout": 1,
                        "dev_cor_errs_bit[3]": 4},
        "nonfatal": {"CmpltTO": 1, "UnsupReq": 1},
        "fatal": {"DLP": 1, "SDES": 1, "MalfTLP": 1}}}


def test_the_older_kernels_names_with_spaces(tmp_path):
    """Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats's sample (kernel 4.19)."""
    path = bare(tmp_path, GPU)
    with open(os.path.join(path, "aer_dev_correctable"), "w") as handle:
        handle.write("Receiver Error 2\nBad TLP 0\nBad DLLP 0\nRELAY_NUM Rollover 1\nReplay Timer Timeout 0\n"
                     "Advisory Non-Fatal 0\nCorrected Internal Error 0\nHeader Log Overflow 0\nTOTAL_ERR_COR 2\n")
    found = pci_aer.device_counters(str(tmp_path), GPU)
    assert found["correctable"]["value"] == 2
    assert found["counts"]["value"] == {"correctable": {"Receiver Error": 2, "RELAY_NUM Rollover": 1}}
    # the two other files are absent here: unknown, and left out of counts
    assert found["fatal"]["value"] is None and "does not exist" in found["fatal"]["unknown"]


def test_a_device_without_the_files(tmp_path):
    path = bare(tmp_path, GPU)
    found = pci_aer.device_counters(str(tmp_path), GPU)
    for key, name in (("correctable", "aer_dev_correctable"), ("nonfatal", "aer_dev_nonfatal"),
                      ("fatal", "aer_dev_fatal")):
        where = os.path.join(path, name)
        assert found[key] == {"value": None, "source": where, "unknown": "%s does not exist: no AER capability, "
                              "or a kernel without AER statistics" % where}
    assert found["counts"]["value"] is None and found["counts"]["source"] == path
    assert found["counts"]["unknown"].startswith("none of aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal "
                                                 "could be read")
    # no device directory at all reads the same way
    gone = pci_aer.device_counters(str(tmp_path), "0000:99:00.0")
    assert "does not exist: no AER capability" in gone["fatal"]["unknown"]


@pytest.mark.parametrize("text, why", [
    ("RxErr 2\nBadTLP x\nTOTAL_ERR_COR 2\n", "line 2 'BadTLP x' is not '<name> <count>'"),
    ("RxErr -1\nTOTAL_ERR_COR 0\n", "line 1 'RxErr -1'"),
    ("RxErr\nTOTAL_ERR_COR 0\n", "line 1 'RxErr'"),
    ("RxErr 2\nBadTLP 0\n", "no TOTAL_ERR_COR line"),   # cut short
    ("RxErr 2\nTOTAL_ERR_COR 2\nTOTAL_ERR_COR 3\n", "line 3 repeats TOTAL_ERR_COR"),
    ("", "no TOTAL_ERR_COR line"),
])
def test_a_malformed_file_cannot_be_parsed(tmp_path, text, why):
    path = device(tmp_path, GPU, fatal=(1, {4: 1}))
    where = os.path.join(path, "aer_dev_correctable")
    with open(where, "w") as handle:
        handle.write(text)
    found = pci_aer.device_counters(str(tmp_path), GPU)
    assert found["correctable"]["value"] is None and found["correctable"]["source"] == where
    assert found["correctable"]["unknown"].startswith("cannot parse %s: " % where)
    assert why in found["correctable"]["unknown"]
    # the other files still answer, and counts holds what they said
    assert found["fatal"]["value"] == 1
    assert found["counts"]["value"] == {"nonfatal": {}, "fatal": {"DLP": 1}}


def test_an_unreadable_file(tmp_path, monkeypatch):
    """A file the reader may not open (the tests may run as root, so the open is refused here)."""
    path = device(tmp_path, GPU)
    where = os.path.join(path, "aer_dev_nonfatal")
    real = pci_aer.fileops.read_bytes

    def read_bytes(name):
        if name == where:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), name)
        return real(name)

    monkeypatch.setattr(pci_aer.fileops, "read_bytes", read_bytes)
    found = pci_aer.device_counters(str(tmp_path), GPU)
    assert found["nonfatal"] == {"value": None, "source": where,
                                 "unknown": "%s: Permission denied (EACCES)" % where}
    assert found["correctable"]["value"] == 0 and set(found["counts"]["value"]) == {"correctable", "fatal"}


def test_a_bad_bdf_reads_nothing(tmp_path):
    found = pci_aer.device_counters(str(tmp_path), "../../../etc")
    assert set(found) == {"correctable", "nonfatal", "fatal", "counts"}
    assert all(item["value"] is None and "not a PCI address" in item["unknown"] for item in found.values())


def test_a_root_port(tmp_path):
    """A root port has the three device files (what it saw itself) and the three totals of the
    messages its hierarchy sent it."""
    path = device(tmp_path, ROOT, cor=(4, {0: 4}), rootport=(9, 1, 0))
    found = pci_aer.device_counters(str(tmp_path), ROOT)
    assert (found["correctable"]["value"], found["nonfatal"]["value"], found["fatal"]["value"]) == (4, 0, 0)
    assert found["counts"]["value"]["correctable"] == {"RxErr": 4}
    totals = pci_aer.rootport_counters(str(tmp_path), ROOT)
    assert totals == {
        "correctable": {"value": 9, "source": os.path.join(path, "aer_rootport_total_err_cor")},
        "nonfatal": {"value": 1, "source": os.path.join(path, "aer_rootport_total_err_nonfatal")},
        "fatal": {"value": 0, "source": os.path.join(path, "aer_rootport_total_err_fatal")}}
    # an endpoint has no root port totals
    device(tmp_path, GPU)
    endpoint = pci_aer.rootport_counters(str(tmp_path), GPU)
    assert all(item["value"] is None and "not a root port" in item["unknown"] for item in endpoint.values())
    with open(os.path.join(path, "aer_rootport_total_err_fatal"), "w") as handle:
        handle.write("lots\n")
    assert "cannot parse" in pci_aer.rootport_counters(str(tmp_path), ROOT)["fatal"]["unknown"]


def test_path_counters_mix_reporting_and_silent_bridges(tmp_path):
    device(tmp_path, ROOT, cor=(7, {0: 5, 6: 2}), nonfatal=(1, {14: 1}), rootport=(12, 1, 0))
    bare(tmp_path, SWITCH_UP)                              # no AER capability
    device(tmp_path, SWITCH_DOWN, cor=(3, {7: 3}))
    half = device(tmp_path, "0000:1a:08.0")                 # one total unreadable: not reported
    with open(os.path.join(half, "aer_dev_fatal"), "w") as handle:
        handle.write("garbage\n")
    envelope, unreported = pci_aer.path_counters(str(tmp_path), [ROOT, SWITCH_UP, SWITCH_DOWN, "0000:1a:08.0"])
    assert envelope == {"source": "derived", "value": [
        {"bdf": ROOT, "correctable": 7, "nonfatal": 1, "fatal": 0},
        {"bdf": SWITCH_DOWN, "correctable": 3, "nonfatal": 0, "fatal": 0}]}
    assert unreported == [SWITCH_UP, "0000:1a:08.0"]
    assert pci_aer.path_counters(str(tmp_path), []) == ({"value": [], "source": "derived"}, [])
    envelope, unreported = pci_aer.path_counters(str(tmp_path), [SWITCH_UP])
    assert envelope["value"] == [] and unreported == [SWITCH_UP]
