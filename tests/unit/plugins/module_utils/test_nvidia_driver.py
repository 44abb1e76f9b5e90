"""NVIDIA driver facts from fake /proc/driver/nvidia and /sys/module/nvidia."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver
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
])
def test_same_value(configured, running, same):
    assert nvidia_driver.same_value(configured, running) is same
