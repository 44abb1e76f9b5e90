"""The NVIDIA driver options engine: the modprobe.d file, risky options, the initramfs rebuild
with fake update-initramfs/dracut first on PATH, and the running-versus-configured comparison."""

import errno
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
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


@pytest.fixture(autouse=True)
def records_agree(monkeypatch):
    """Every run in this file: ``changes`` records agree with ``changed``, and a failure carries none."""
    kf.check_every_run(monkeypatch, do, "nvidia_options")


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
    return do.run(params(**kw), check_mode=check_mode, paths=paths, tools=kf.PathCommands())


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
    with pytest.raises(ModuleFailure) as exc:
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
    with pytest.raises(ModuleFailure) as exc:
        run(paths, options={"NVreg_EnableMSI": 1, "NVreg_EnableStreamMemOPs": 1})
    assert "rebuilding the initramfs failed" in exc.value.message
    assert "update-initramfs -u failed (exit status 1): E: /boot/initrd.img-6.1.0-28-amd64: No space left" in exc.value.message
    assert "everything applied before it was restored" in exc.value.message
    assert read(root / FILE) == old
    assert fake.calls() == ["update-initramfs -u"]


def test_failed_rebuild_of_a_new_file_removes_it(node):
    root, paths, fake = node(tools=("dracut",))
    fake.fail("dracut", "dracut: Cannot write to /boot")
    with pytest.raises(ModuleFailure):
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
    # RestrictProfilingToAdminUsers=0 is risky (issue 15) and here for the params name the
    # driver prints for it (RmProfilingAdminOnly): allowed on purpose.
    wanted = {"NVreg_RestrictProfilingToAdminUsers": 0, "NVreg_RegistryDwords": "A=1;B=2"}
    first = run(paths, options=wanted, allow_risky=True)
    second = run(paths, options=wanted, allow_risky=True)
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


# --- change records -----------------------------------------------------------------------

def _file_state(root, mode=True):
    """A file record's side as records.from_managed shows it: what is written carries its mode; an
    existing file's mode only when the write changes it."""
    return records.file_state(read(root / FILE), os.stat(str(root / FILE)).st_mode & 0o7777 if mode else None)


def test_records_of_a_new_file_an_edit_an_idempotent_run_and_a_removal(node):
    root, paths, _fake = node()
    path = str(root / FILE)
    first = run(paths, options={"NVreg_EnableMSI": True, "NVreg_RegistryDwords": "A=1;B=2"})
    assert first["changes"] == [
        {"area": "nvidia_options", "kind": "file", "target": path, "before": None, "after": _file_state(root)},
        {"area": "nvidia_options", "kind": "value", "target": "NVreg_EnableMSI", "before": None, "after": "1"},
        # as the driver receives it: the quotes the file needs are not part of the value
        {"area": "nvidia_options", "kind": "value", "target": "NVreg_RegistryDwords", "before": None,
         "after": "A=1;B=2"},
    ]
    assert "options nvidia" not in repr(first["changes"])  # a digest, never the text
    written = _file_state(root, mode=False)
    assert run(paths, options={"NVreg_EnableMSI": 1, "NVreg_RegistryDwords": "A=1;B=2"})["changes"] == []
    edit = run(paths, options={"NVreg_EnableMSI": 0, "NVreg_EnableStreamMemOPs": 1}, allow_risky=True)
    assert edit["changes"] == [
        {"area": "nvidia_options", "kind": "file", "target": path, "before": written, "after": _file_state(root)},
        {"area": "nvidia_options", "kind": "value", "target": "NVreg_EnableMSI", "before": "1", "after": "0"},
        {"area": "nvidia_options", "kind": "value", "target": "NVreg_EnableStreamMemOPs", "before": None, "after": "1"},
        {"area": "nvidia_options", "kind": "value", "target": "NVreg_RegistryDwords", "before": "A=1;B=2",
         "after": None},
    ]
    edited = _file_state(root, mode=False)
    gone = run(paths, state="absent")
    assert gone["changes"] == [
        {"area": "nvidia_options", "kind": "file", "target": path, "before": edited, "after": None},
        {"area": "nvidia_options", "kind": "value", "target": "NVreg_EnableMSI", "before": "0", "after": None},
        {"area": "nvidia_options", "kind": "value", "target": "NVreg_EnableStreamMemOPs", "before": "1",
         "after": None},
    ]
    assert run(paths, state="absent")["changes"] == []


def test_records_in_check_mode_are_the_planned_ones_and_the_rebuild_has_none(node):
    root, paths, fake = node()
    before = snapshot(root)
    planned = run(paths, check_mode=True, options={"NVreg_EnableMSI": 1})
    assert snapshot(root) == before and fake.calls() == []
    assert [(r["kind"], r["target"], r["before"], r["after"]) for r in planned["changes"]] == [
        ("file", str(root / FILE), None, planned["changes"][0]["after"]), ("value", "NVreg_EnableMSI", None, "1")]
    applied = run(paths, options={"NVreg_EnableMSI": 1})
    assert applied["changes"] == planned["changes"] and applied["changes"][0]["after"] == _file_state(root)
    # the initramfs rebuild is an action: reported in initramfs, never a record
    assert applied["initramfs"]["rebuilt"] is True and fake.calls() == ["update-initramfs -u"]


def test_a_header_only_rewrite_is_a_file_record_without_value_records(node):
    root, paths, _fake = node()
    (root / FILE).write_text("# gpufleet.tuning\noptions nvidia NVreg_EnableMSI=1\n")
    result = run(paths, options={"NVreg_EnableMSI": 1})
    assert [(r["kind"], r["target"]) for r in result["changes"]] == [("file", str(root / FILE))]


def test_a_failed_rebuild_reports_no_records(node):
    root, paths, fake = node()
    fake.fail("update-initramfs", "E: no space")
    with pytest.raises(ModuleFailure) as exc:
        run(paths, options={"NVreg_EnableMSI": 1})
    assert exc.value.partial["changes"] == [] and exc.value.partial["changed"] is False
    assert not (root / FILE).exists()


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
    ("NVreg_RmNvlinkBandwidth", "", "caps NVLink"),    # the driver matches an empty value to OFF
    ("NVreg_RmNvlinkBandwidth", "O", "caps NVLink"),   # a prefix of OFF
    ("NVreg_RmNvlinkBandwidth", "3Q", "caps NVLink"),
    ("NVreg_RmNvlinkBandwidth", "LINKCOUNT", "caps NVLink"),
    ("NVreg_RmNvlinkBandwidthLinkCount", 2, "NVLink links"),
    ("NVreg_EnableGpuFirmware", 0, "GSP firmware off"),
    ("NVreg_EnableGpuFirmware", "0x10", "GSP firmware off"),
    ("NVreg_EnableMSI", False, "INTx"),
    ("NVreg_DynamicPowerManagement", 2, "power idle GPUs off"),
    ("NVreg_RegisterPCIDriver", 0, "binds no GPU"),
    ("NVreg_InitializeSystemMemoryAllocations", 0, "clearing"),
    # Isolation (issue 15): the driver restricts the counters only for exactly 1.
    ("NVreg_RestrictProfilingToAdminUsers", 0, "performance counters"),
    ("NVreg_RestrictProfilingToAdminUsers", False, "performance counters"),
    ("NVreg_RestrictProfilingToAdminUsers", 2, "only for exactly 1"),
    ("NVreg_RestrictProfilingToAdminUsers", -1, "performance counters"),
    ("NVreg_DeviceFileUID", 1000, "non-root owner"),
    ("NVreg_DeviceFileUID", -1, "non-root owner"),
    ("NVreg_DeviceFileMode", "0666", "read or write for others"),   # NVIDIA's default, written out
    ("NVreg_DeviceFileMode", 438, "read or write for others"),      # the same, as params prints it
    ("NVreg_DeviceFileMode", "0664", "read or write for others"),
    ("NVreg_DeviceFileMode", "0606", "read or write for others"),
    ("NVreg_DeviceFileMode", "0777", "execute, setuid"),
    ("NVreg_DeviceFileMode", "0770", "execute, setuid"),
    ("NVreg_DeviceFileMode", "04660", "setuid"),
    ("NVreg_DeviceFileMode", -1, "negative value"),
])
def test_risky_options_are_refused_unless_allowed(node, name, value, needle):
    root, paths, fake = node()
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, options={name: value, "NVreg_EnableStreamMemOPs": 1})
    assert "refusing risky NVIDIA driver options" in exc.value.message and "allow_risky=true" in exc.value.message
    assert name in exc.value.message and needle in exc.value.message
    assert snapshot(root) == before and fake.calls() == []
    result = run(paths, options={name: value}, allow_risky=True)
    assert result["changed"] is True and len(result["risky"]) == 1 and name in result["risky"][0]


@pytest.mark.parametrize("name,value", [
    ("NVreg_RegistryDwords", "RMIntrLockingMode=1"), ("NVreg_EnableGpuFirmware", 18), ("NVreg_EnableMSI", 1),
    ("NVreg_RmNvlinkBandwidth", "full"), ("NVreg_DynamicPowerManagement", 0), ("NVreg_NvLinkDisable", 0),
    # What only restricts: counters for admins, root-owned device files, modes within 0660, any
    # group (the group gets only the mode's group bits; root:video 0660 is the hardening recipe).
    ("NVreg_RestrictProfilingToAdminUsers", 1), ("NVreg_RestrictProfilingToAdminUsers", True),
    ("NVreg_DeviceFileUID", 0), ("NVreg_DeviceFileMode", "0660"), ("NVreg_DeviceFileMode", 432),
    ("NVreg_DeviceFileMode", "0600"), ("NVreg_DeviceFileMode", "0640"), ("NVreg_DeviceFileMode", 0),
    ("NVreg_DeviceFileGID", 44), ("NVreg_DeviceFileGID", 0),
])
def test_safe_values_of_risky_options_pass(node, name, value):
    _root, paths, _fake = node()
    assert run(paths, options={name: value})["risky"] == []


def test_the_device_file_hardening_recipe_needs_no_allow_risky(node):
    # Restricting the GPUs to a group must not sit behind allow_risky, which would unlock every
    # other risky option with it.
    _root, paths, _fake = node()
    result = run(paths, options={"NVreg_DeviceFileUID": 0, "NVreg_DeviceFileGID": 44, "NVreg_DeviceFileMode": "0660",
                                 "NVreg_RestrictProfilingToAdminUsers": 1})
    assert result["risky"] == [] and result["changed"] is True


@pytest.mark.parametrize("options,needle", [
    ({"EnableMSI": 1}, "option 'EnableMSI' is not valid: NVIDIA driver options are named NVreg_<Name>"),
    ({"NVreg_EnableMSI": -2147483649}, "-2147483648 to 2147483647"),
    ({"NVreg_EnableMSI": 4294967296}, "-2147483648 to 2147483647"),
    ({"NVreg_EnableMSI": 1.5}, "give an integer, a boolean or a string"),
    ({"NVreg_EnableMSI": None}, "give an integer, a boolean or a string"),
    ({"NVreg_RegistryDwords": 'A="1"'}, "double quote"),
    ({"NVreg_RegistryDwords": "A=1\nB=2"}, "control characters"),
])
def test_invalid_options_fail_before_anything(node, options, needle):
    root, paths, fake = node()
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, options=options)
    assert needle in exc.value.message and "nothing was changed" in exc.value.message
    assert not (root / FILE).exists() and fake.calls() == [] and snapshot(root) == before


@pytest.mark.parametrize("filename", ["../evil.conf", "nvidia", "a/b.conf", ".hidden.conf", "", "x.conf\n",
                                      "a b.conf", None])
def test_invalid_filename(node, filename):
    message = refused(node(), options={"NVreg_EnableMSI": 1}, filename=filename)
    assert "filename %r is not valid" % (filename,) in message


def test_a_later_file_that_overrides_is_refused(node):
    root, paths, fake = node()
    (root / "etc/modprobe.d/zzz-site.conf").write_text("options nvidia NVreg_EnableMSI=0\n")
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
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


def refused(built, **kw):
    """Run on ``built`` (root, paths, fake) with ``kw``; assert it raised, wrote nothing and ran
    nothing; return the message."""
    root, paths, fake = built
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, **kw)
    assert snapshot(root) == before and fake.calls() == []
    return exc.value.message


# --- class 1: values the kernel refuses (NVreg_* are signed int or charp, nv-reg.h) ---------

INT_RANGE = "-2147483648 to 2147483647"


@pytest.mark.parametrize("value", [
    2147483648, 4294967295, -2147483649, 2 ** 64, "2147483648", "4294967295", "0x80000000", "0X80000000",
    "0xffffffff", "020000000000", "037777777777", "-2147483649", "-0x80000001", "99999999999999999999999",
])
def test_int_option_out_of_the_kernel_int_range_is_refused(node, value):
    message = refused(node(), options={"NVreg_EnableStreamMemOPs": value})
    assert "NVreg_EnableStreamMemOPs=%r is not valid" % (value,) in message
    assert INT_RANGE in message and "refuse to load the whole nvidia module" in message
    assert "nothing was changed" in message


@pytest.mark.parametrize("value", [
    1.5, 1.0, float("nan"), float("inf"), "1.5", "nan", "inf", "1e3", "yes", "true", "on", "", " 1", "1 ",
    "1_000", "0o17", "0b1", "08", "0x", "+-1", "--1", "\u0663", "0x1g", "FULL",
])
def test_int_option_that_is_not_a_kernel_integer_is_refused(node, value):
    message = refused(node(), options={"NVreg_EnableMSI": value})
    assert "NVreg_EnableMSI=%r is not valid" % (value,) in message
    assert INT_RANGE in message or "give an integer, a boolean or a string" in message


@pytest.mark.parametrize("value,written", [
    (-1, "-1"), (-2147483648, "-2147483648"), (2147483647, "2147483647"), ("0x7fffffff", "0x7fffffff"),
    ("017", "017"), ("-0x10", "-0x10"), ("+5", "+5"), (True, "1"), (False, "0"), ("0", "0"),
])
def test_int_option_values_the_kernel_accepts_are_written_as_given(node, value, written):
    root, paths, _fake = node()
    run(paths, options={"NVreg_ResmanDebugLevel": value})
    assert read(root / FILE) == HEADER + "options nvidia NVreg_ResmanDebugLevel=%s\n" % written


def test_all_ones_is_minus_one_and_matches_what_the_driver_prints(node):
    _root, paths, _fake = node()  # the fake driver prints ResmanDebugLevel: 4294967295
    result = run(paths, options={"NVreg_ResmanDebugLevel": -1})
    assert result["pending"] == [] and result["reboot_required"] is False


@pytest.mark.parametrize("options,needle", [
    ({"NVreg_RegistryDwords": True}, "string (charp) parameter"),
    ({"NVreg_RmNvlinkBandwidth": False}, "string (charp) parameter"),
    ({"NVreg_RegistryDwords": "A=1;" * 256 + "B"}, "at most 1024 bytes"),
    ({"NVreg_RegistryDwords": "x\udcff"}, "UTF-8"),
    ({"NVreg_RegistryDwords": [1]}, "a list is not a parameter value"),
    ({"NVreg_RegistryDwords": {"a": 1}}, "a dict is not a parameter value"),
])
def test_string_option_values_the_kernel_refuses(node, options, needle):
    message = refused(node(), options=options)
    assert needle in message and list(options)[0] in message


def test_string_option_of_1024_bytes_and_with_spaces_is_written(node):
    root, paths, _fake = node()
    run(paths, options={"NVreg_RegistryDwords": "A" * 1024})
    assert read(root / FILE).endswith("NVreg_RegistryDwords=%s\n" % ("A" * 1024))
    run(paths, options={"NVreg_TemporaryFilePath": "/var/tmp/gpu dumps"})
    assert read(root / FILE).endswith('NVreg_TemporaryFilePath="/var/tmp/gpu dumps"\n')


@pytest.mark.parametrize("value", [2147483648, "0x80000000", "4294967296", -2147483649, 1.5, "1.5", "nan",
                                   float("nan"), "1e3", ".5"])
def test_unknown_name_with_a_numeric_value_must_be_int_safe(node, value):
    message = refused(node(), options={"NVreg_SomeFutureOption": value})
    assert "NVreg_SomeFutureOption=%r is not valid" % (value,) in message
    assert INT_RANGE in message or "give an integer, a boolean or a string" in message


def test_unknown_name_keeps_working_with_a_warning(node):
    root, paths, _fake = node()
    result = run(paths, options={"NVreg_SomeFutureOption": "abc", "NVreg_OtherFuture": 7,
                                 "NVreg_NegFuture": "-0x10"})
    assert read(root / FILE).endswith("NVreg_NegFuture=-0x10 NVreg_OtherFuture=7 NVreg_SomeFutureOption=abc\n")
    for name in ("NVreg_SomeFutureOption", "NVreg_OtherFuture", "NVreg_NegFuture"):
        assert sum(name in w and "type cannot be checked" in w for w in result["warnings"]) == 1
    assert not any("not reported by the running driver" in w for w in result["warnings"])


@pytest.mark.parametrize("name,needle", [
    ("NVreg_enableMSI", "spelt NVreg_EnableMSI"),
    ("NVreg_ENABLEMSI", "spelt NVreg_EnableMSI"),
    ("NVreg_RegistryDWords", "spelt NVreg_RegistryDwords"),
    ("NVreg_RmProfilingAdminOnly", "NVreg_RestrictProfilingToAdminUsers"),
])
def test_names_the_kernel_would_ignore_are_refused(node, name, needle):
    message = refused(node(), options={name: 1, "NVreg_EnableMSI": 1})
    assert repr(name) in message and needle in message


def test_every_error_is_reported_at_once(node):
    options = {"NVreg_EnableMSI": "0x80000000", "NVreg_RegistryDwords": True, "bad": 1}
    message = refused(node(), options=options)
    assert "NVreg_EnableMSI='0x80000000'" in message and "NVreg_RegistryDwords=True" in message and "'bad'" in message


# --- class 3: files this module did not write ----------------------------------------------

DISTRO = "# installed by nvidia-kernel-common\nblacklist nouveau\noptions nouveau modeset=0\n"


@pytest.mark.parametrize("kw,action", [
    (dict(filename="nvidia.conf", options={"NVreg_EnableMSI": 1}), "overwrite"),
    (dict(filename="nvidia.conf", state="absent"), "remove"),
    (dict(filename="nvidia.conf"), "remove"),  # no options: the file would be removed
])
def test_a_file_without_our_marker_is_refused(node, kw, action):
    root, paths, fake = node()
    (root / "etc/modprobe.d/nvidia.conf").write_text(DISTRO)
    for check_mode in (True, False):
        before = snapshot(root)
        with pytest.raises(ModuleFailure) as exc:
            run(paths, check_mode=check_mode, **kw)
        assert exc.value.message.startswith("refusing to %s %s: " % (action, root / "etc/modprobe.d/nvidia.conf"))
        assert "choose another filename, or set adopt: true" in exc.value.message
        assert snapshot(root) == before and fake.calls() == []


def test_adopt_takes_a_foreign_file_over_and_says_what_is_lost(node):
    root, paths, fake = node()
    (root / "etc/modprobe.d/nvidia.conf").write_text(DISTRO + "options nvidia NVreg_EnableMSI=0\n")
    result = run(paths, filename="nvidia.conf", adopt=True, options={"NVreg_EnableMSI": 1})
    assert read(root / "etc/modprobe.d/nvidia.conf") == HEADER + "options nvidia NVreg_EnableMSI=1\n"
    assert managed_files.is_owned(read(root / "etc/modprobe.d/nvidia.conf"))
    assert any("adopt=true" in w and "'blacklist nouveau'" in w and "'options nouveau modeset=0'" in w
               and "NVreg_EnableMSI" not in w for w in result["warnings"])
    assert fake.calls() == ["update-initramfs -u"]
    again = run(paths, filename="nvidia.conf", options={"NVreg_EnableMSI": 1})  # ours now: no adopt needed
    assert again["changed"] is False and not any("adopt" in w for w in again["warnings"])


def test_adopt_with_absent_removes_a_foreign_file(node):
    root, paths, _fake = node()
    (root / "etc/modprobe.d/nvidia.conf").write_text(DISTRO)
    run(paths, filename="nvidia.conf", adopt=True, state="absent")
    assert not (root / "etc/modprobe.d/nvidia.conf").exists()


def test_every_file_written_carries_the_marker(node):
    root, paths, _fake = node()
    run(paths, options={"NVreg_EnableMSI": 1})
    assert managed_files.is_owned(read(root / FILE))
    assert managed_files.MARKER in read(root / FILE).splitlines()[0]


def test_adopt_must_be_a_boolean(node):
    message = refused(node(), options={"NVreg_EnableMSI": 1}, adopt="yes")
    assert "adopt must be true or false" in message


# --- class 8: writes and reads that fail name the path -------------------------------------

def test_a_failed_write_names_the_path_and_restores(node, monkeypatch):
    root, paths, fake = node()
    before = snapshot(root)

    def refuse(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", path)
    monkeypatch.setattr(fileops, "write_atomic", refuse)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, options={"NVreg_EnableMSI": 1})
    assert "failed to write %s: %s: Read-only file system (EROFS)" % (root / FILE, root / FILE) in exc.value.message
    assert snapshot(root) == before and fake.calls() == []


def test_a_failed_removal_names_the_path(node, monkeypatch):
    root, paths, fake = node()
    (root / FILE).write_text(HEADER + "options nvidia NVreg_EnableMSI=1\n")
    before = snapshot(root)

    def refuse(path):
        raise OSError(errno.EBUSY, "Device or resource busy", path)
    monkeypatch.setattr(fileops, "remove_file", refuse)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, state="absent")
    assert "failed to remove %s" % (root / FILE) in exc.value.message and "(EBUSY)" in exc.value.message
    assert snapshot(root) == before and fake.calls() == []


@pytest.mark.parametrize("make,needle", [
    (lambda p: os.makedirs(str(p)), "is a directory where a regular file was expected"),
    (lambda p: p.write_bytes(b"# gpufleet.tuning\noptions nvidia NVreg_EnableMSI=\xff\n"), "is not valid UTF-8"),
    (lambda p: os.mkfifo(str(p)), "FIFO"),
])
def test_an_unreadable_file_is_a_clean_failure_naming_it(node, make, needle):
    root, paths, fake = node()
    make(root / FILE)
    message = refused((root, paths, fake), options={"NVreg_EnableMSI": 1})
    assert str(root / FILE) in message and needle in message and "nothing was changed" in message


# --- class 4: options the kernel command line overrides -------------------------------------

def test_an_option_on_the_kernel_command_line_wins_and_is_never_pending(node):
    root, paths, _fake = node(cmdline=kf.CMDLINE + " nvidia.NVreg_EnableStreamMemOPs=0 nvidia-drm.modeset=1")
    result = run(paths, options={"NVreg_EnableStreamMemOPs": 1, "NVreg_EnableMSI": 0}, allow_risky=True)
    assert result["cmdline_overrides"] == [{"param": "NVreg_EnableStreamMemOPs", "value": "0", "configured": "1",
                                            "arg": "nvidia.NVreg_EnableStreamMemOPs=0"}]
    # Running 0, configured 1: without the command line this would wait for a reboot.
    assert result["pending"] == ["NVreg_EnableMSI: running 1, configured 0"]
    assert any("nvidia.NVreg_EnableStreamMemOPs=0" in w and "never takes effect" in w for w in result["warnings"])
    assert read(root / FILE).endswith("NVreg_EnableMSI=0 NVreg_EnableStreamMemOPs=1\n")


@pytest.mark.parametrize("arg,overrides", [
    ("nvidia.NVreg-EnableStreamMemOPs=0", True),       # the kernel reads - and _ alike in names
    ('"nvidia.NVreg_EnableStreamMemOPs=0"', True),
    ("nvidia.NVreg_EnableStreamMemOPs", True),         # a bare flag: no value at all
    ("nvidia.NVreg_EnableStreamMemOPs=0x1", False),    # the same value
    ("nvidia.NVreg_EnableStreamMemOPs=1", False),
    ("nvidia_drm.NVreg_EnableStreamMemOPs=0", False),  # another module
    ("NVreg_EnableStreamMemOPs=0", False),             # no module: not an option of nvidia
    ("nvidia.nvreg_EnableStreamMemOPs=0", False),      # names are case-sensitive
])
def test_command_line_spellings(node, arg, overrides):
    _root, paths, _fake = node(cmdline=kf.CMDLINE + " " + arg)
    result = run(paths, options={"NVreg_EnableStreamMemOPs": 1})
    assert bool(result["cmdline_overrides"]) is overrides
    assert (result["pending"] == []) is overrides and result["reboot_required"] is not overrides


def test_a_string_option_on_the_command_line(node):
    _root, paths, _fake = node(cmdline=kf.CMDLINE + ' "nvidia.NVreg_RegistryDwords=A=2;B=3"')
    result = run(paths, options={"NVreg_RegistryDwords": "A=1"})
    assert result["cmdline_overrides"][0]["value"] == "A=2;B=3"
    assert result["reboot_required"] is False


# --- class 5: rules that keep the driver from loading ----------------------------------------

@pytest.mark.parametrize("where,text", [
    ("etc/modprobe.d/disable-gpu.conf", "install nvidia /bin/false\n"),
    ("usr/lib/modprobe.d/disable-gpu.conf", "install nvidia /bin/true\n"),
    ("run/modprobe.d/disable-gpu.conf", "# off\nalias nvidia off\n"),
    ("proc/cmdline", kf.CMDLINE + " module_blacklist=nouveau,nvidia\n"),
])
def test_a_driver_that_never_loads_is_reported_and_nothing_is_pending(node, where, text):
    root, paths, fake = node()
    write_tree(root, {where: text})
    result = run(paths, options={"NVreg_EnableStreamMemOPs": 1})
    assert len(result["load_blockers"]) == 1
    blocker = result["load_blockers"][0]
    assert blocker["path"] == str(root / where) and blocker["effect"] in ("never_loads", "redirected")
    assert blocker["line"] == (None if where == "proc/cmdline" else text.count("\n"))
    assert result["pending"] == [] and result["reboot_required"] is False
    assert any(blocker["rule"] in w and "not reported as pending" in w for w in result["warnings"])
    assert (root / FILE).exists() and fake.calls() == ["update-initramfs -u"]


@pytest.mark.parametrize("rule", ["blacklist nvidia", "blacklist  nvidia  # old", "\tblacklist\tnvidia"])
def test_a_blacklist_is_reported_precisely_and_options_still_pend(node, rule):
    root, paths, _fake = node()
    write_tree(root, {"lib/modprobe.d/blacklist-gpu.conf": rule + "\n"})
    result = run(paths, options={"NVreg_EnableStreamMemOPs": 1})
    assert [b["effect"] for b in result["load_blockers"]] == ["blacklist"]
    assert any("a plain 'modprobe nvidia'" in w and "udev" in w for w in result["warnings"])
    assert result["pending"] == ["NVreg_EnableStreamMemOPs: running 0, configured 1"]


def test_an_install_command_that_loads_the_driver_itself_is_no_warning(node):
    root, paths, _fake = node()
    write_tree(root, {"etc/modprobe.d/nv.conf": "install nvidia /sbin/modprobe -i nvidia $CMDLINE_OPTS && "
                                                "/usr/bin/nvidia-modprobe -c0 -u\n"})
    result = run(paths, options={"NVreg_EnableStreamMemOPs": 1})
    assert [b["effect"] for b in result["load_blockers"]] == ["loads_via_command"]
    assert not any("nv.conf" in w for w in result["warnings"])
    assert result["reboot_required"] is True


def test_another_install_command_is_a_warning(node):
    root, paths, _fake = node()
    write_tree(root, {"etc/modprobe.d/nv.conf": "install nvidia /usr/local/sbin/gpu-gate.sh\n"})
    result = run(paths, options={"NVreg_EnableStreamMemOPs": 1})
    assert [b["effect"] for b in result["load_blockers"]] == ["runs_command"]
    assert any("gpu-gate.sh" in w and "is up to that command" in w for w in result["warnings"])
    assert result["reboot_required"] is True


@pytest.mark.parametrize("value,warned", [("FULL", False), ("full", True), ("half", True), ("HALFX", True),
                                          ("FULL ", True)])
def test_nvlink_bandwidth_values_the_driver_reads_as_full(node, value, warned):
    _root, paths, _fake = node()
    result = run(paths, options={"NVreg_RmNvlinkBandwidth": value})
    assert result["risky"] == []
    assert any("reads NVreg_RmNvlinkBandwidth=%r as FULL" % value in w for w in result["warnings"]) is warned


def test_a_write_that_did_not_stick_is_rolled_back(node, monkeypatch):
    root, paths, fake = node()
    (root / FILE).write_text(HEADER + "options nvidia NVreg_EnableMSI=1\n")
    before = snapshot(root)
    real = fileops.write_atomic

    def garble(path, content, *args, **kwargs):
        return real(path, content + "# garbled\n" if isinstance(content, str) else content, *args, **kwargs)
    monkeypatch.setattr(fileops, "write_atomic", garble)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, options={"NVreg_EnableMSI": 1, "NVreg_EnableStreamMemOPs": 1})
    assert "%s does not hold the new options after the write" % (root / FILE) in exc.value.message
    assert snapshot(root) == before and fake.calls() == []
