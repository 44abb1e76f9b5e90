"""The nvidia_driver_options module's main(): fake update-initramfs/dracut first on PATH,
found by AnsibleModule.get_bin_path and run with run_command, over a fake node."""

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options as do
from ansible_collections.gpufleet.tuning.plugins.modules import nvidia_driver_options
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, run_module, snapshot, write_tree

FILE = "etc/modprobe.d/zz-gpufleet-nvidia.conf"


@pytest.fixture
def node(tmp_path, monkeypatch):
    def build(tools=("update-initramfs",), **kw):
        root = tmp_path / "root"
        kf.gpu_node(root, **kw)
        write_tree(root, {"proc/stat": "btime 1700000000\n"})
        fake = kf.FakeBin(tmp_path, monkeypatch, root, names=tools)
        kf.confine_bin_lookup(monkeypatch)
        fake.warned = kf.capture_warnings(monkeypatch, nvidia_driver_options)
        paths = do.Paths(str(root))
        monkeypatch.setattr(do, "Paths", lambda: paths)
        return root, fake
    return build


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(nvidia_driver_options, do, monkeypatch)


def test_writes_rebuilds_and_reports_the_reboot(node, capsys):
    root, fake = node()
    # Risky since issue 15 (counters for every user): allowed here for the renamed params entry.
    args = {"options": {"NVreg_RestrictProfilingToAdminUsers": 0}, "allow_risky": True}
    failed, result = run_module(nvidia_driver_options, args, capsys)
    assert not failed and result["changed"] is True and result["reboot_required"] is True
    assert result["pending"] == ["NVreg_RestrictProfilingToAdminUsers: running 1, configured 0"]
    assert read(root / FILE).endswith("options nvidia NVreg_RestrictProfilingToAdminUsers=0\n")
    assert fake.calls() == ["update-initramfs -u"] and result["initramfs"]["rebuilt"] is True
    assert [(c["kind"], c["target"], c["after"]) for c in kf.assert_changes_agree(result, "nvidia_options")][1:] == [
        ("value", "NVreg_RestrictProfilingToAdminUsers", "0")]
    failed, result = run_module(nvidia_driver_options, args, capsys)
    assert not failed and result["changed"] is False and result["reboot_required"] is True
    assert result["changes"] == []
    assert fake.calls() == ["update-initramfs -u"]


def test_dracut_found_by_get_bin_path(node, capsys):
    _root, fake = node(tools=("dracut",))
    failed, result = run_module(nvidia_driver_options, {"options": {"NVreg_EnableMSI": 1}}, capsys)
    assert not failed and fake.calls() == ["dracut --force"]


def test_no_tool_is_a_warning(node, capsys):
    _root, fake = node(tools=())
    failed, result = run_module(nvidia_driver_options, {"options": {"NVreg_EnableMSI": 1}}, capsys)
    assert not failed and any("neither update-initramfs nor dracut" in w for w in fake.warned)


def test_risky_refused_with_fail_json(node, capsys):
    root, fake = node()
    failed, result = run_module(nvidia_driver_options,
                                {"options": {"NVreg_RegistryDwords": "PeerMappingOverride=1"}}, capsys)
    assert failed and "refusing risky NVIDIA driver options" in result["msg"]
    assert result["risky"] and not (root / FILE).exists() and fake.calls() == []


def test_rebuild_failure_restores_and_fails(node, capsys):
    root, fake = node()
    fake.fail("update-initramfs", "update-initramfs: failed for /boot/initrd.img-6.1.0-28-amd64 with 1.")
    failed, result = run_module(nvidia_driver_options, {"options": {"NVreg_EnableMSI": 1}}, capsys)
    assert failed and "failed for /boot/initrd.img-6.1.0-28-amd64 with 1." in result["msg"]
    assert not (root / FILE).exists()
    assert "changes" not in result and "changed" not in result


def test_check_and_diff(node, capsys):
    root, fake = node()
    failed, result = run_module(nvidia_driver_options, {"options": {"NVreg_EnableMSI": 1}}, capsys,
                                check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["before_header"].endswith("zz-gpufleet-nvidia.conf (absent)")
    assert result["diff"][0]["after"].endswith("options nvidia NVreg_EnableMSI=1\n")
    assert result["plan"][-1] == "update-initramfs -u"
    assert fake.calls() == [] and not (root / FILE).exists()
    assert [(c["kind"], c["target"]) for c in kf.assert_changes_agree(result, "nvidia_options")] == [
        ("file", str(root / FILE)), ("value", "NVreg_EnableMSI")]
    failed, result = run_module(nvidia_driver_options, {"options": {"NVreg_EnableMSI": 1}}, capsys)
    failed, result = run_module(nvidia_driver_options, {"state": "absent"}, capsys)
    assert not failed and [(c["kind"], c["before"], c["after"]) for c in kf.assert_changes_agree(
        result, "nvidia_options")][1:] == [("value", "1", None)]


def test_bad_choice_rejected_by_argspec(node, capsys):
    _root, _fake = node()
    failed, result = run_module(nvidia_driver_options, {"initramfs": "mkinitcpio"}, capsys)
    assert failed and "initramfs" in result["msg"] and "mkinitcpio" in result["msg"]


def test_a_value_the_kernel_refuses_fails_before_anything(node, capsys):
    root, fake = node()
    before = snapshot(root)
    failed, result = run_module(nvidia_driver_options, {"options": {"NVreg_EnableMSI": "0x80000000"}}, capsys)
    assert failed and "NVreg_EnableMSI='0x80000000' is not valid" in result["msg"]
    assert "-2147483648 to 2147483647" in result["msg"]
    assert snapshot(root) == before and fake.calls() == []


def test_a_foreign_file_is_refused_and_adopt_takes_it(node, capsys):
    root, fake = node()
    write_tree(root, {"etc/modprobe.d/nvidia.conf": "blacklist nouveau\n"})
    before = snapshot(root)
    args = {"filename": "nvidia.conf", "options": {"NVreg_EnableMSI": 1}}
    failed, result = run_module(nvidia_driver_options, args, capsys)
    assert failed and result["msg"].startswith("refusing to overwrite %s: " % (root / "etc/modprobe.d/nvidia.conf"))
    assert "adopt: true" in result["msg"] and "changed" not in result
    assert snapshot(root) == before and fake.calls() == []
    failed, result = run_module(nvidia_driver_options, dict(args, adopt=True), capsys)
    assert not failed and result["changed"] is True
    assert read(root / "etc/modprobe.d/nvidia.conf").endswith("options nvidia NVreg_EnableMSI=1\n")
    assert any("'blacklist nouveau'" in w for w in fake.warned)


def test_command_line_override_and_blockers_reach_ansible(node, capsys):
    root, fake = node(cmdline=kf.CMDLINE + " nvidia.NVreg_EnableStreamMemOPs=0")
    write_tree(root, {"etc/modprobe.d/bl.conf": "blacklist nvidia\n"})
    failed, result = run_module(nvidia_driver_options, {"options": {"NVreg_EnableStreamMemOPs": 1}}, capsys)
    assert not failed and result["reboot_required"] is False and result["pending"] == []
    assert result["cmdline_overrides"][0]["arg"] == "nvidia.NVreg_EnableStreamMemOPs=0"
    assert result["load_blockers"][0]["effect"] == "blacklist"
    assert any("never takes effect" in w for w in fake.warned) and any("bl.conf:1" in w for w in fake.warned)
