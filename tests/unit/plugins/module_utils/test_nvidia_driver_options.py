"""The NVIDIA driver options engine: the modprobe.d file, risky options, the initramfs rebuild
with fake update-initramfs/dracut first on PATH, and the running-versus-configured comparison."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options as do
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot, write_tree

FILE = "etc/modprobe.d/zz-gpufleet-nvidia.conf"
HEADER = ("# Managed by Ansible (gpufleet.tuning.nvidia_driver_options): NVIDIA driver options.\n"
          "# They take effect when the nvidia module next loads (a reboot); local edits are overwritten.\n")
BOOT = 1_700_000_000


def params(**kw):
    base = dict(options={}, state="present", filename="zz-gpufleet-nvidia.conf", initramfs="auto",
                allow_risky=False)
    base.update(kw)
    return base


@pytest.fixture
def node(tmp_path, monkeypatch):
    """Return build(tools=..., **gpu_node kwargs) -> (root, paths, fakebin)."""
    def build(tools=("update-initramfs",), **kw):
        root = tmp_path / "root"
        kf.gpu_node(root, **kw)
        write_tree(root, {"proc/stat": "cpu  1 2 3\nbtime %d\nprocesses 42\n" % BOOT})
        fake = kf.FakeBin(tmp_path, monkeypatch, root, names=tools)
        return root, do.Paths(str(root)), fake
    return build


def run(paths, check_mode=False, **kw):
    return do.run(params(**kw), check_mode=check_mode, paths=paths, commands=kf.PathCommands())


def test_file_content_quoting_and_rebuild(node):
    root, paths, fake = node()
    result = run(paths, options={"NVreg_RegistryDwords": "RMIntrLockingMode=1;EnableStreamMemOPs=1",
                                 "NVreg_EnableMSI": True, "NVreg_TemporaryFilePath": "/var/tmp",
                                 "NVreg_ExcludedGpus": ""})
    assert read(root / FILE) == HEADER + (
        'options nvidia NVreg_EnableMSI=1 NVreg_ExcludedGpus="" '
        'NVreg_RegistryDwords="RMIntrLockingMode=1;EnableStreamMemOPs=1" NVreg_TemporaryFilePath=/var/tmp\n')
    assert oct(os.stat(str(root / FILE)).st_mode & 0o777) == "0o644"
    assert fake.calls() == ["update-initramfs -u"]
    assert result["initramfs"]["tool"] == "update-initramfs" and result["initramfs"]["rebuilt"] is True
    assert result["initramfs"]["command"] == "update-initramfs -u"
    assert result["options"]["NVreg_RegistryDwords"] == "RMIntrLockingMode=1;EnableStreamMemOPs=1"
    assert result["plan"] == ["write %s" % (root / FILE), "update-initramfs -u"]
    assert result["changed"] is True


def test_second_run_is_idempotent_and_rebuilds_nothing(node):
    root, paths, fake = node()
    run(paths, options={"NVreg_EnableMSI": 1})
    before = snapshot(root)
    result = run(paths, options={"NVreg_EnableMSI": 1})
    assert result["changed"] is False and result["plan"] == [] and result["diff"] == []
    assert fake.calls() == ["update-initramfs -u"]
    assert snapshot(root) == before


def test_dracut_when_update_initramfs_is_missing(node):
    _root, paths, fake = node(tools=("dracut",))
    result = run(paths, options={"NVreg_EnableMSI": 1})
    assert fake.calls() == ["dracut --force"] and result["initramfs"]["tool"] == "dracut"


def test_update_initramfs_preferred_over_dracut(node):
    _root, paths, fake = node(tools=("dracut", "update-initramfs"))
    run(paths, options={"NVreg_EnableMSI": 1})
    assert fake.calls() == ["update-initramfs -u"]


def test_no_tool_writes_the_file_and_warns(node):
    root, paths, fake = node(tools=())
    result = run(paths, options={"NVreg_EnableMSI": 1})
    assert (root / FILE).exists() and fake.calls() == []
    assert result["initramfs"]["tool"] is None and result["initramfs"]["rebuilt"] is False
    assert any("neither update-initramfs nor dracut is installed" in w for w in result["warnings"])


def test_named_tool_missing_fails_before_writing(node):
    root, paths, fake = node(tools=("update-initramfs",))
    with pytest.raises(do.OptionsError) as exc:
        run(paths, options={"NVreg_EnableMSI": 1}, initramfs="dracut")
    assert "initramfs=dracut but dracut is not installed" in exc.value.message
    assert not (root / FILE).exists() and fake.calls() == []


def test_initramfs_none_never_rebuilds(node):
    root, paths, fake = node()
    result = run(paths, options={"NVreg_EnableMSI": 1}, initramfs="none")
    assert (root / FILE).exists() and fake.calls() == [] and result["initramfs"]["rebuilt"] is False


def test_failed_rebuild_puts_the_old_file_back(node):
    root, paths, fake = node()
    old = HEADER + "options nvidia NVreg_EnableMSI=1\n"
    (root / FILE).write_text(old)
    fake.fail("update-initramfs", "E: /boot/initrd.img-6.1.0-28-amd64: No space left on device")
    with pytest.raises(do.OptionsError) as exc:
        run(paths, options={"NVreg_EnableMSI": 1, "NVreg_EnableStreamMemOPs": 1})
    assert "rebuilding the initramfs failed" in exc.value.message
    assert "update-initramfs -u failed (exit status 1): E: /boot/initrd.img-6.1.0-28-amd64: No space left" in exc.value.message
    assert "everything applied before it was restored" in exc.value.message
    assert read(root / FILE) == old
    assert fake.calls() == ["update-initramfs -u"]


def test_failed_rebuild_of_a_new_file_removes_it(node):
    root, paths, fake = node(tools=("dracut",))
    fake.fail("dracut", "dracut: Cannot write to /boot")
    with pytest.raises(do.OptionsError):
        run(paths, options={"NVreg_EnableMSI": 1})
    assert not (root / FILE).exists()


def test_check_mode_writes_nothing_and_runs_nothing(node):
    root, paths, fake = node()
    before = snapshot(root)
    result = run(paths, check_mode=True, options={"NVreg_EnableMSI": 0, "NVreg_EnableStreamMemOPs": 1},
                 allow_risky=True)
    assert result["changed"] is True
    assert result["plan"] == ["write %s" % (root / FILE), "update-initramfs -u"]
    assert result["reboot_required"] is True
    assert result["pending"] == ["NVreg_EnableMSI: running 1, configured 0",
                                 "NVreg_EnableStreamMemOPs: running 0, configured 1"]
    assert result["diff"][0]["after"] == HEADER + "options nvidia NVreg_EnableMSI=0 NVreg_EnableStreamMemOPs=1\n"
    assert fake.calls() == [] and snapshot(root) == before


def test_running_equal_to_configured_needs_no_reboot(node):
    _root, paths, _fake = node()
    result = run(paths, options={"NVreg_EnableMSI": 1, "NVreg_RestrictProfilingToAdminUsers": 1,
                                 "NVreg_EnableGpuFirmware": "0x12"})
    assert result["reboot_required"] is False and result["pending"] == [] and result["unverified"] == []
    assert result["running"]["NVreg_EnableMSI"] == "1"


def test_running_different_needs_a_reboot_on_every_run(node):
    _root, paths, _fake = node()
    wanted = {"NVreg_RestrictProfilingToAdminUsers": 0, "NVreg_RegistryDwords": "A=1;B=2"}
    first = run(paths, options=wanted)
    second = run(paths, options=wanted)
    for result in (first, second):
        assert result["reboot_required"] is True
        assert result["pending"] == ['NVreg_RegistryDwords: running "", configured "A=1;B=2"',
                                     "NVreg_RestrictProfilingToAdminUsers: running 1, configured 0"]
    assert second["changed"] is False


def test_unverified_options_are_pending_until_the_next_boot(node):
    root, paths, _fake = node()
    result = run(paths, options={"NVreg_RmNvlinkBandwidth": "FULL"})
    assert result["unverified"] == ["NVreg_RmNvlinkBandwidth"] and result["reboot_required"] is True
    assert any("not reported by the running driver" in w for w in result["warnings"])
    os.utime(str(root / FILE), (BOOT - 60, BOOT - 60))  # the file predates the last boot
    after_boot = run(paths, options={"NVreg_RmNvlinkBandwidth": "FULL"})
    assert after_boot["reboot_required"] is False and after_boot["pending"] == []


def test_driver_not_loaded(node):
    root, paths, _fake = node(driver=False)
    result = run(paths, options={"NVreg_EnableMSI": 1})
    assert result["driver_loaded"] is False and result["running"] is None
    assert result["pending"] == ["NVreg_EnableMSI=1: the nvidia driver is not loaded; the file was written after "
                                 "the last boot, so it takes effect at the next driver load (reboot)"]
    assert result["warnings"] == []  # no per-option noise without a driver
    os.utime(str(root / FILE), (BOOT - 1, BOOT - 1))
    assert run(paths, options={"NVreg_EnableMSI": 1})["reboot_required"] is False


def test_absent_removes_the_file_and_reports_what_still_runs(node):
    root, paths, fake = node()
    (root / FILE).write_text(HEADER + "options nvidia NVreg_EnableMSI=1 NVreg_RestrictProfilingToAdminUsers=0\n")
    result = run(paths, state="absent", options={"NVreg_EnableMSI": 1})
    assert not (root / FILE).exists() and fake.calls() == ["update-initramfs -u"]
    assert result["options"] == {} and result["plan"] == ["remove %s" % (root / FILE), "update-initramfs -u"]
    assert result["pending"] == ["NVreg_EnableMSI: no longer configured here; the driver keeps running with 1 "
                                 "until it reloads"]
    assert run(paths, state="absent")["changed"] is False


def test_empty_options_without_file_do_nothing(node):
    root, paths, fake = node()
    result = run(paths)
    assert result["changed"] is False and result["reboot_required"] is False and fake.calls() == []
    assert not (root / FILE).exists()


@pytest.mark.parametrize("name,value,needle", [
    ("NVreg_RegistryDwords", "PeerMappingOverride=1;", "PeerMappingOverride is undocumented"),
    ("NVreg_RegistryDwordsPerDevice", "pci=0000:01:00.0;peermappingoverride=1", "PeerMappingOverride"),
    ("NVreg_GrdmaPciTopoCheckOverride", 1, "topology check"),
    ("NVreg_DmaRemapPeerMmio", 0, "IOMMU"),
    ("NVreg_NvLinkDisable", 1, "NVLink is not trained"),
    ("NVreg_RmNvlinkBandwidth", "HALF", "caps NVLink"),
    ("NVreg_RmNvlinkBandwidthLinkCount", 2, "NVLink links"),
    ("NVreg_EnableGpuFirmware", 0, "GSP firmware off"),
    ("NVreg_EnableGpuFirmware", "0x10", "GSP firmware off"),
    ("NVreg_EnableMSI", False, "INTx"),
    ("NVreg_DynamicPowerManagement", 2, "power idle GPUs off"),
    ("NVreg_RegisterPCIDriver", 0, "binds no GPU"),
    ("NVreg_InitializeSystemMemoryAllocations", 0, "clearing"),
])
def test_risky_options_are_refused_unless_allowed(node, name, value, needle):
    root, paths, fake = node()
    before = snapshot(root)
    with pytest.raises(do.OptionsError) as exc:
        run(paths, options={name: value, "NVreg_EnableStreamMemOPs": 1})
    assert "refusing risky NVIDIA driver options" in exc.value.message and "allow_risky=true" in exc.value.message
    assert name in exc.value.message and needle in exc.value.message
    assert snapshot(root) == before and fake.calls() == []
    result = run(paths, options={name: value}, allow_risky=True)
    assert result["changed"] is True and len(result["risky"]) == 1 and name in result["risky"][0]


@pytest.mark.parametrize("name,value", [
    ("NVreg_RegistryDwords", "RMIntrLockingMode=1"), ("NVreg_EnableGpuFirmware", 18), ("NVreg_EnableMSI", 1),
    ("NVreg_RmNvlinkBandwidth", "full"), ("NVreg_DynamicPowerManagement", 0), ("NVreg_NvLinkDisable", 0),
])
def test_safe_values_of_risky_options_pass(node, name, value):
    _root, paths, _fake = node()
    assert run(paths, options={name: value})["risky"] == []


@pytest.mark.parametrize("options,needle", [
    ({"EnableMSI": 1}, "option 'EnableMSI' is not valid: NVIDIA driver options are named NVreg_<Name>"),
    ({"NVreg_EnableMSI": -1}, "unsigned 32-bit"),
    ({"NVreg_EnableMSI": 4294967296}, "unsigned 32-bit"),
    ({"NVreg_EnableMSI": 1.5}, "give an integer, a boolean or a string"),
    ({"NVreg_EnableMSI": None}, "give an integer, a boolean or a string"),
    ({"NVreg_RegistryDwords": 'A="1"'}, "double quote"),
    ({"NVreg_RegistryDwords": "A=1\nB=2"}, "control characters"),
])
def test_invalid_options_fail_before_anything(node, options, needle):
    root, paths, fake = node()
    with pytest.raises(do.OptionsError) as exc:
        run(paths, options=options)
    assert needle in exc.value.message and "nothing was changed" in exc.value.message
    assert not (root / FILE).exists() and fake.calls() == []


@pytest.mark.parametrize("filename", ["../evil.conf", "nvidia", "a/b.conf", ".hidden.conf", ""])
def test_invalid_filename(node, filename):
    _root, paths, _fake = node()
    with pytest.raises(do.OptionsError) as exc:
        run(paths, options={"NVreg_EnableMSI": 1}, filename=filename)
    assert "filename %r is not valid" % filename in exc.value.message


def test_a_later_file_that_overrides_is_refused(node):
    root, paths, fake = node()
    (root / "etc/modprobe.d/zzz-site.conf").write_text("options nvidia NVreg_EnableMSI=0\n")
    before = snapshot(root)
    with pytest.raises(do.OptionsError) as exc:
        run(paths, options={"NVreg_EnableMSI": 1})
    assert "zzz-site.conf sets NVreg_EnableMSI=0 and is read after" in exc.value.message
    assert snapshot(root) == before and fake.calls() == []


def test_an_earlier_file_is_reported_and_loses(node):
    root, paths, _fake = node()
    write_tree(root, {"lib/modprobe.d/nvidia-graphics-drivers.conf": "options nvidia NVreg_EnableMSI=0\n"})
    result = run(paths, options={"NVreg_EnableMSI": "0x1"})
    assert result["conflicts"] == [{"path": str(root / "lib/modprobe.d/nvidia-graphics-drivers.conf"),
                                    "param": "NVreg_EnableMSI", "value": "0"}]
    assert any("is read after it and wins" in w for w in result["warnings"])


def test_same_value_elsewhere_is_no_conflict(node):
    root, paths, _fake = node()
    (root / "etc/modprobe.d/zzz-site.conf").write_text("options nvidia NVreg_EnableMSI=0x1\n")
    assert run(paths, options={"NVreg_EnableMSI": 1})["conflicts"] == []


def test_container_is_reported(node):
    root, paths, _fake = node()
    (root / "proc/self/uid_map").write_text("0 100000 65536\n")
    result = run(paths, options={"NVreg_EnableMSI": 1})
    assert result["container"]["detected"] is True
    assert any("inside a container" in w for w in result["warnings"])
