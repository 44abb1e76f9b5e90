"""The module's main(): argument spec, exit/fail JSON, check mode, and fake tools found on PATH."""

import os

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_cmdline as bc
from ansible_collections.gpufleet.tuning.plugins.modules import kernel_cmdline
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, run_module, snapshot, write_tree

GRUB = 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'


def _fake(tmp_path, monkeypatch, gpu_device="0x2335", update_grub_rc=0):
    write_tree(tmp_path, {
        "etc/default/grub": GRUB,
        "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n",
        "proc/cpuinfo": "vendor_id\t: AuthenticAMD\n",
        "sys/bus/pci/devices/0000:41:00.0/vendor": "0x10de\n",
        "sys/bus/pci/devices/0000:41:00.0/device": gpu_device + "\n",
        "sys/bus/pci/devices/0000:41:00.0/class": "0x030200\n",
    })
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    script = '#!/bin/sh\necho "update-grub $*" >> "%s"\n' % log
    if update_grub_rc:
        script += 'echo "grub-probe: error: failed to get canonical path" >&2\nexit %d\n' % update_grub_rc
    (bindir / "update-grub").write_text(script)
    (bindir / "update-grub").chmod(0o755)
    # AnsibleModule.get_bin_path looks on PATH first, then the sbin directories
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))
    paths = bc.Paths(str(tmp_path))
    monkeypatch.setattr(bc, "Paths", lambda: paths)
    return log


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(kernel_cmdline, bc, monkeypatch)


def test_apply_then_idempotent(tmp_path, monkeypatch, capsys):
    log = _fake(tmp_path, monkeypatch)
    args = {"present": ["iommu=pt"], "present_by_cpu_vendor": {"AuthenticAMD": ["amd_pstate=active"]}}
    failed, result = run_module(kernel_cmdline, args, capsys)
    assert not failed and result["changed"] is True
    assert read(tmp_path / "etc/default/grub") == GRUB.replace('"quiet"', '"quiet iommu=pt amd_pstate=active"')
    assert read(log) == "update-grub \n"
    assert result["reboot_required"] is True
    assert result["pending"] == ["iommu=pt (running: not set)", "amd_pstate=active (running: not set)"]
    assert "warnings" not in result
    changes = kf.assert_changes_agree(result, "kernel_cmdline")
    assert [(c["kind"], c["target"], c["before"], c["after"]) for c in changes] == [
        ("file", str(tmp_path / "etc/default/grub"), changes[0]["before"], changes[0]["after"]),
        ("value", "amd_pstate", None, "amd_pstate=active"), ("value", "iommu", None, "iommu=pt")]
    failed, result = run_module(kernel_cmdline, args, capsys)
    assert not failed and result["changed"] is False and result["reboot_required"] is True
    assert result["changes"] == []
    assert read(log) == "update-grub \n"


def test_check_mode_and_diff(tmp_path, monkeypatch, capsys):
    log = _fake(tmp_path, monkeypatch)
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt"], "absent": ["quiet"]}, capsys,
                                check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["before"] == GRUB
    assert result["diff"][0]["after"] == GRUB.replace('"quiet"', '"iommu=pt"')
    assert read(tmp_path / "etc/default/grub") == GRUB
    assert not log.exists()
    assert [(c["kind"], c["target"]) for c in kf.assert_changes_agree(result, "kernel_cmdline")] == [
        ("file", str(tmp_path / "etc/default/grub")), ("value", "iommu"), ("value", "quiet")]


def test_blackwell_refusal_is_a_failure_with_the_gpu(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch, gpu_device="0x2bb1")
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt"]}, capsys)
    assert failed
    assert "refusing iommu=pt on NVIDIA Blackwell GPU 0000:41:00.0 (10de:2bb1, blackwell gb202)" in result["msg"]
    assert result["gpus"][0]["device_id"] == "10de:2bb1"
    assert read(tmp_path / "etc/default/grub") == GRUB


def test_force_warns_through_ansible(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch, gpu_device="0x2bb1")
    warned = []
    monkeypatch.setattr(kernel_cmdline.AnsibleModule, "warn", lambda self, text: warned.append(text))
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt"], "force": True}, capsys)
    assert not failed and result["changed"] is True
    assert len(warned) == 1 and "applying iommu=pt although" in warned[0] and "0000:41:00.0" in warned[0]


def test_failing_update_grub_restores_and_fails(tmp_path, monkeypatch, capsys):
    log = _fake(tmp_path, monkeypatch, update_grub_rc=1)
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt"]}, capsys)
    assert failed and "grub-probe: error" in result["msg"]
    assert read(tmp_path / "etc/default/grub") == GRUB
    assert read(log) == "update-grub \nupdate-grub \n"
    assert "changed" not in result or result["changed"] is False
    assert "changes" not in result


def test_argspec_rejects_bad_choice(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt"], "bootloader": "lilo"}, capsys)
    assert failed and "bootloader" in result["msg"] and "lilo" in result["msg"]


def test_boot_breaking_argument_fails_naming_it(tmp_path, monkeypatch, capsys):
    log = _fake(tmp_path, monkeypatch)
    before = snapshot(tmp_path)
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt", "x=1;reboot"]}, capsys)
    assert failed and "present entry 'x=1;reboot' is not valid: holds ';'" in result["msg"]
    assert "nothing was changed" in result["msg"]
    assert snapshot(tmp_path) == before and not log.exists()
    failed, result = run_module(kernel_cmdline, {"absent": ["quiet\u00a0splash"]}, capsys)
    assert failed and "absent entry 'quiet\\xa0splash' is not valid" in result["msg"] and "U+00A0" in result["msg"]
    assert snapshot(tmp_path) == before


def test_result_says_how_the_node_boots(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt"]}, capsys, check_mode=True)
    assert not failed and result["bootloader"] == "grub"
    assert result["boot_mode"] == "legacy" and result["secure_boot"] is None
    assert "legacy BIOS boot" in result["bootloader_reason"] and "/etc/default/grub exists" in result["bootloader_reason"]


def test_write_failure_names_the_file(tmp_path, monkeypatch, capsys):
    log = _fake(tmp_path, monkeypatch)
    before = snapshot(tmp_path)

    def write_atomic(path, content, **kw):
        raise OSError(30, "Read-only file system", path)
    monkeypatch.setattr(bc.fileops, "write_atomic", write_atomic)
    failed, result = run_module(kernel_cmdline, {"present": ["iommu=pt"]}, capsys)
    assert failed
    assert "failed to write %s: Read-only file system (EROFS)" % (tmp_path / "etc/default/grub") in result["msg"]
    assert snapshot(tmp_path) == before and not log.exists()
