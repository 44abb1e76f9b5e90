"""The module's main(): argument handling, exit/fail JSON, warnings, --diff output."""

import os
import sys

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config as pc
from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_maxreadreq as pm
from ansible_collections.gpufleet.tuning.plugins.modules import pcie_maxreadreq
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import (
    add_device, conventional_config, gpu_config, read_bytes)

GPU = "0000:41:00.0"
# The udev helper runs under a root-owned system interpreter (the module refuses others).
REAL_PYTHON = pm.system_interpreter() or os.path.realpath(sys.executable)


def _fake(tmp_path, monkeypatch):
    write_tree(tmp_path, {"proc/self/uid_map": "0 0 4294967295\n"})
    add_device(tmp_path, GPU, gpu_config(), driver="nvidia")
    os.makedirs(str(tmp_path / "usr/bin"))
    os.symlink(REAL_PYTHON, str(tmp_path / "usr/bin/python3"))
    paths = pm.Paths(str(tmp_path))
    monkeypatch.setattr(pm, "Paths", lambda: paths)
    return paths


def test_defaults_set_4096_persist_and_are_idempotent(tmp_path, monkeypatch, capsys):
    paths = _fake(tmp_path, monkeypatch)
    failed, result = run_module(pcie_maxreadreq, {}, capsys)
    assert not failed and result["changed"] is True
    assert result["size"] == 4096 and result["persisted"] is True and result["reboot_required"] is False
    (dev,) = result["devices"]
    assert (dev["bdf"], dev["mrrs_before"], dev["mrrs_after"], dev["changed"]) == (GPU, 512, 4096, True)
    assert read_bytes(paths.rule).startswith(b"# Managed by Ansible")
    assert [(c["kind"], c["target"], c["before"]) for c in result["changes"]] == [
        ("value", "%s max_read_request_size" % GPU, "512"), ("file", paths.helper, None), ("file", paths.rule, None)]
    failed, result = run_module(pcie_maxreadreq, {}, capsys)
    assert not failed and result["changed"] is False and result["changes"] == []


def test_check_mode_and_diff(tmp_path, monkeypatch, capsys):
    paths = _fake(tmp_path, monkeypatch)
    config = str(tmp_path / "sys/bus/pci/devices" / GPU / "config")
    before = read_bytes(config)
    failed, result = run_module(pcie_maxreadreq, {"size": 4096}, capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["before"] == "0000:41:00.0 MRRS = 512\n"
    assert result["diff"][0]["after"] == "0000:41:00.0 MRRS = 4096\n"
    assert result["changes"][0] == {"area": "pcie", "kind": "value", "target": "0000:41:00.0 max_read_request_size",
                                    "before": "512", "after": "4096"}
    assert read_bytes(config) == before
    assert not (tmp_path / "etc/udev/rules.d").exists() and paths.rule.startswith(str(tmp_path))


def test_fail_json_names_the_device_that_did_not_take_it(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    monkeypatch.setattr(pc, "_pwrite", lambda fd, payload, offset: 2)  # accepted, nothing changes
    failed, result = run_module(pcie_maxreadreq, {"persist": False}, capsys)
    assert failed
    assert result["msg"].startswith("0000:41:00.0 (10de:2335, class 0x030200) did not take MRRS 4096")
    assert result["devices"][0]["mrrs_after"] == 512
    assert "changed" not in result or result["changed"] is False
    assert "changes" not in result


def test_bad_size_is_refused_with_the_list(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(pcie_maxreadreq, {"size": 8192}, capsys)
    assert failed and "size" in result["msg"] and "128, 256, 512, 1024, 2048, 4096" in result["msg"]


def test_bad_bdf_is_refused(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(pcie_maxreadreq, {"devices": ["41:00"]}, capsys)
    assert failed and "'41:00' is not a PCI address: use DDDD:BB:DD.F or BB:DD.F" in result["msg"]


def test_skipped_devices_warn_and_are_reported(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    add_device(tmp_path, "0000:00:02.0", conventional_config())
    warned = []
    monkeypatch.setattr(pcie_maxreadreq.AnsibleModule, "warn", lambda self, text: warned.append(text))
    failed, result = run_module(pcie_maxreadreq, {"devices": ["00:02.0"], "persist": False}, capsys)
    assert not failed and result["changed"] is False
    assert "no PCI Express capability" in result["skipped_keys"]["0000:00:02.0"]
    assert len(warned) == 1 and warned[0].startswith("0000:00:02.0 left alone: no PCI Express capability")
    assert "skipped" not in result


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(pcie_maxreadreq, pm, monkeypatch)
