"""NVIDIA driver facts from fake /proc/driver/nvidia and /sys/module/nvidia."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_driver
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree


def test_state_of_a_loaded_open_driver(tmp_path):
    kf.gpu_node(tmp_path)
    assert nvidia_driver.state(str(tmp_path / "proc"), str(tmp_path / "sys")) == {
        "loaded": True, "version": kf.DRIVER_VERSION, "flavor": "open"}


def test_version_from_proc_when_sysfs_lacks_it(tmp_path):
    write_tree(tmp_path, {"proc/driver/nvidia/version": (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")})
    assert nvidia_driver.state(str(tmp_path / "proc"), str(tmp_path / "sys")) == {
        "loaded": True, "version": "550.127.05", "flavor": "proprietary"}


def test_state_without_driver(tmp_path):
    assert nvidia_driver.state(str(tmp_path / "proc"), str(tmp_path / "sys")) == {
        "loaded": False, "version": None, "flavor": None}


def test_running_params_are_mapped_back_to_nvreg_names(tmp_path):
    kf.gpu_node(tmp_path)
    params = nvidia_driver.running_params(str(tmp_path / "proc"))
    assert params["NVreg_EnableMSI"] == "1"
    assert params["NVreg_ResmanDebugLevel"] == "4294967295"
    assert params["NVreg_RegistryDwords"] == ""
    assert params["NVreg_RmProfilingAdminOnly"] == "1"
    assert len(params) == kf.PARAMS_TEXT.count("\n")
    assert nvidia_driver.running_params(str(tmp_path / "nowhere")) is None


def test_parse_params_keeps_quoted_strings_whole():
    assert nvidia_driver.parse_params('RegistryDwords: "A=1;B: 2"\nEnableMSI: 0\ngarbage\n') == {
        "NVreg_RegistryDwords": "A=1;B: 2", "NVreg_EnableMSI": "0"}


@pytest.mark.parametrize("configured,running,same", [
    (1, "1", True), ("0x1", "1", True), (True, "1", True), ("010", "8", True), ("2", "1", False),
    ("A=1;B=2", "A=1;B=2", True), ('"A=1"', "A=1", True), ("", "", True), ("FULL", "HALF", False),
    (4294967295, "4294967295", True),
    # The driver prints its 32-bit values unsigned (%u): -1 configured is 4294967295 running.
    (-1, "4294967295", True), ("-1", "4294967295", True), ("-0x1", "4294967295", True), (-2, "4294967295", False),
    ("0xFFFFFFFF", "4294967295", True), (" 1", "1", True), ("1_0", "10", False), ("1.0", "1", False),
    (1.0, "1", False), (float("nan"), "0", False), ("0o17", "15", False), (-1, "-1", True),
    (4294967296, "0", False),
])
def test_same_value(configured, running, same):
    assert nvidia_driver.same_value(configured, running) is same


def test_as_number_reads_like_the_kernel():
    assert nvidia_driver.as_number("0x10") == 16 and nvidia_driver.as_number("010") == 8
    assert nvidia_driver.as_number(True) == 1 and nvidia_driver.as_number(" 7\n") == 7
    for value in ("1_0", "0o7", "0b1", "\u0663", "1.5", 1.5, float("nan"), "nan", "", "FULL"):
        assert nvidia_driver.as_number(value) is None, value


def test_param_table_follows_nv_reg_h():
    types = nvidia_driver.PARAM_TYPES
    assert set(types.values()) == {"int", "charp"}  # no uint, ulong or bool NVreg_ parameter exists
    assert len(types) == 52
    for name in ("NVreg_RegistryDwords", "NVreg_RegistryDwordsPerDevice", "NVreg_RmNvlinkBandwidth",
                 "NVreg_ExcludedGpus", "NVreg_TemporaryFilePath", "NVreg_CoherentGPUMemoryMode", "NVreg_RmMsg",
                 "NVreg_GpuBlacklist"):
        assert types[name] == "charp", name
    for name in ("NVreg_EnableMSI", "NVreg_ResmanDebugLevel", "NVreg_RestrictProfilingToAdminUsers",
                 "NVreg_EnablePCIERelaxedOrderingMode", "NVreg_RmNvlinkBandwidthLinkCount", "NVreg_DeviceFileMode",
                 "NVreg_ImexChannelCount", "NVreg_EnableGpuFirmware"):
        assert types[name] == "int", name
    assert "NVreg_RmProfilingAdminOnly" not in types  # printed in params, not a module parameter
    assert nvidia_driver.NOT_PARAMETERS == {"NVreg_RmProfilingAdminOnly": "NVreg_RestrictProfilingToAdminUsers"}


@pytest.mark.parametrize("value,mode", [
    ("FULL", "FULL"), ("OFF", "OFF"), ("O", "OFF"), ("", "OFF"), ("MIN", "MIN"), ("H", "HALF"),
    ("3QUARTER", "3QUARTER"), ("3", "3QUARTER"), ("LINKCOUNT", "LINKCOUNT"), ("off", "FULL"), ("HALF ", "FULL"),
    ("OFFX", "FULL"), ("full", "FULL"),
])
def test_nvlink_bandwidth_mode_as_the_driver_compares(value, mode):
    assert nvidia_driver.nvlink_bandwidth_mode(value) == mode
