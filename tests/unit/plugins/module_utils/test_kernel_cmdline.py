"""The kernel_cmdline engine against fake /etc, /proc, /sys trees and fake boot loader tools.

The tools are real executables written into a temp bin directory: they record their argv in a
log file, and a failing one exits 1 after writing to stderr, so restore-on-failure is tested
against a real process.
"""

import os
import re
import subprocess

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_cmdline as bc
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot, write_tree

GRUB = (
    "# If you change this file, run 'update-grub' afterwards to update\n"
    "GRUB_DEFAULT=0\n"
    "GRUB_TIMEOUT=5\n"
    "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n"
    "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"
    "GRUB_CMDLINE_LINUX=\"\"\n"
)
RUNNING = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=UUID=0b7e ro quiet\n"
CPUINFO_AMD = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
CPUINFO_INTEL = "processor\t: 0\nvendor_id\t: GenuineIntel\n"


def gpu(bdf, device):
    base = "sys/bus/pci/devices/%s/" % bdf
    return {base + "vendor": "0x10de\n", base + "device": device + "\n", base + "class": "0x030200\n"}


HOPPER = gpu("0000:00:05.0", "0x2335")
BLACKWELL = gpu("0000:41:00.0", "0x2bb5")


class Fake:
    """A fake machine: the tree, its Paths, a bin dir of recording tools, and Tools over it."""

    def __init__(self, tmp_path):
        self.root = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.log = tmp_path / "calls.log"
        self.paths = bc.Paths(str(tmp_path))
        self.tools = self  # which() and run(), as commands.Commands offers them

    def tree(self, files):
        write_tree(self.root, files)
        return self

    def tool(self, name, rc=0, fail_times=None):
        """A fake executable that logs argv; exits ``rc`` (or fails only the first ``fail_times`` runs)."""
        counter = self.root / (".count-" + name)
        script = ["#!/bin/sh", 'echo "$(basename "$0") $*" >> "%s"' % self.log]
        if fail_times is not None:
            script += ['n=$(cat "%s" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "%s"' % (counter, counter),
                       'if [ "$n" -le %d ]; then echo "%s: broken ESP" >&2; exit 1; fi' % (fail_times, name)]
        elif rc:
            script += ['echo "%s: something broke" >&2' % name, "exit %d" % rc]
        path = self.bin / name
        path.write_text("\n".join(script) + "\n")
        path.chmod(0o755)
        return self

    def which(self, name):
        path = self.bin / name
        return str(path) if path.exists() else None

    def run(self, argv):
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        return commands.CommandResult(argv, proc.returncode, proc.stdout, proc.stderr)

    def calls(self):
        return read(self.log).splitlines() if self.log.exists() else []

    def text(self, rel):
        return read(self.root / rel)


class AlwaysFound:
    """Every tool is "installed" (at /bin/true); runs go to the fake's recorder."""

    def __init__(self, fake):
        self.run = fake.run

    def which(self, name):
        return "/bin/true"


@pytest.fixture(autouse=True)
def records_agree(monkeypatch):
    """Every run in this file: ``changes`` records agree with ``changed``, and a failure carries none."""
    kf.check_every_run(monkeypatch, bc, "kernel_cmdline")


@pytest.fixture
def fake(tmp_path):
    return Fake(tmp_path).tree({
        "proc/cmdline": RUNNING,
        "proc/cpuinfo": CPUINFO_AMD,
        "sys/bus/pci/devices": None,
    })


def params(**kw):
    base = dict(present=[], absent=[], present_by_cpu_vendor={}, bootloader="auto", on_harmful="fail", force=False)
    base.update(kw)
    return base


# --- GRUB ---------------------------------------------------------------------------------

def test_grub_adds_and_refreshes(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is True and result["bootloader"] == "grub"
    assert fake.text("etc/default/grub") == GRUB.replace('DEFAULT="quiet"', 'DEFAULT="quiet iommu=pt"')
    assert fake.calls() == ["update-grub "]
    assert result["cmdline_before"] == "quiet" and result["cmdline_after"] == "quiet iommu=pt"
    assert result["running"] == RUNNING.strip()
    assert result["reboot_required"] is True
    assert result["pending"] == ["iommu=pt (running: not set)"]
    assert result["config_files"] == [fake.paths.etc + "/default/grub"]
    assert result["refresh_command"] == [str(fake.bin / "update-grub")]
    assert result["diff"] == [{
        "before_header": fake.paths.etc + "/default/grub", "after_header": fake.paths.etc + "/default/grub",
        "before": GRUB, "after": GRUB.replace('DEFAULT="quiet"', 'DEFAULT="quiet iommu=pt"')}]


def test_grub_second_run_changes_nothing_and_runs_nothing(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    before = snapshot(fake.root)
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is False and result["diff"] == [] and result["refresh_command"] is None
    assert snapshot(fake.root) == before
    assert fake.calls() == ["update-grub "]
    # still not running: the reboot stays required until it happens
    assert result["reboot_required"] is True


def test_reboot_not_required_when_running_matches(fake):
    fake.tree({"etc/default/grub": GRUB.replace('"quiet"', '"quiet iommu=pt"'),
               "proc/cmdline": "BOOT_IMAGE=/vmlinuz ro quiet iommu=pt\n"})
    result = bc.run(params(present=["iommu=pt"], absent=["splash"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is False
    assert result["reboot_required"] is False and result["pending"] == []


def test_grub_replace_value_in_place_quoting_and_removal(fake):
    grub = GRUB.replace('DEFAULT="quiet"', "DEFAULT='quiet iommu=soft splash amd_pstate=passive'")
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt", 'foo="a b"'], absent=["splash"],
                           present_by_cpu_vendor={"AuthenticAMD": ["amd_pstate=active"], "GenuineIntel": ["x=1"]}),
                    paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB.replace(
        'DEFAULT="quiet"', "DEFAULT='quiet iommu=pt amd_pstate=active foo=\"a b\"'")
    assert result["cmdline_after"] == 'quiet iommu=pt amd_pstate=active foo="a b"'
    assert result["cpu_vendor"] == "AuthenticAMD"
    assert result["pending"] == ["iommu=pt (running: not set)", 'foo="a b" (running: not set)',
                                 "amd_pstate=active (running: not set)"]


def test_grub_unquoted_value_gets_double_quotes_when_it_needs_them(fake):
    fake.tree({"etc/default/grub": "GRUB_CMDLINE_LINUX_DEFAULT=quiet  # keep this comment\n"}).tool("update-grub")
    bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"  # keep this comment\n'


def test_grub_duplicates_collapse_and_linux_conflict_removed(fake):
    grub = GRUB.replace('DEFAULT="quiet"', 'DEFAULT="iommu=pt quiet iommu=pt"').replace(
        'GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="iommu=soft net.ifnames=0"')
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB.replace('DEFAULT="quiet"', 'DEFAULT="iommu=pt quiet"').replace(
        'GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="net.ifnames=0"')
    assert result["cmdline_after"] == "net.ifnames=0 iommu=pt quiet"


def test_grub_new_assignment_when_none_exists(fake):
    fake.tree({"etc/default/grub": "GRUB_TIMEOUT=5\n"}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="iommu=pt"\n'
    assert result["cmdline_before"] == "" and result["cmdline_after"] == "iommu=pt"


def test_grub_d_override_is_edited_there_and_reported(fake):
    cloud = 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"\n'
    fake.tree({"etc/default/grub": GRUB,
               "etc/default/grub.d/50-cloudimg-settings.cfg": cloud}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    cfg = fake.paths.etc + "/default/grub.d/50-cloudimg-settings.cfg"
    assert fake.text("etc/default/grub") == GRUB
    assert fake.text("etc/default/grub.d/50-cloudimg-settings.cfg") == \
        'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0 iommu=pt"\n'
    assert result["config_path"] == cfg and result["config_files"] == [cfg]
    assert result["grub_overrides"] == [cfg]
    assert any("grub.d file" in w and cfg in w for w in result["warnings"])


def test_grub_d_layer_that_conflicts_fails_naming_it(fake):
    layer = 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=soft"\n'
    fake.tree({"etc/default/grub": GRUB, "etc/default/grub.d/90-vendor.cfg": layer}).tool("update-grub")
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert "iommu=pt (effective: iommu=pt iommu=soft)" in exc.value.message
    assert "90-vendor.cfg line 1" in exc.value.message and "nothing was changed" in exc.value.message
    assert snapshot(fake.root) == before and fake.calls() == []


def test_grub_d_layer_that_agrees_counts_as_present(fake):
    layer = 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"\n'
    fake.tree({"etc/default/grub": GRUB, "etc/default/grub.d/90-vendor.cfg": layer}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is False and result["cmdline_after"] == "quiet iommu=pt"


def test_grub_value_with_expansions_is_not_rewritten(fake):
    fake.tree({"etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA"\n'}).tool("update-grub")
    with pytest.raises(ModuleFailure, match="uses shell expansions; edit it by hand"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA"\n'


def test_grub_double_dash_in_linux_refuses_additions(fake):
    grub = GRUB.replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="ro -- single"')
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    with pytest.raises(ModuleFailure, match="holds '--'"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == grub


def test_grub_mkconfig_fallback(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("grub-mkconfig")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.calls() == ["grub-mkconfig -o /boot/grub/grub.cfg"]
    assert result["refresh_command"][1:] == ["-o", "/boot/grub/grub.cfg"]


def test_grub_on_proxmox_managed_esps_refreshes_with_proxmox_boot_tool(fake):
    fake.tree({"etc/default/grub": GRUB, "etc/kernel/proxmox-boot-uuids": "1234-ABCD\n"})
    fake.tool("update-grub").tool("proxmox-boot-tool")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["bootloader"] == "grub"
    assert fake.calls() == ["proxmox-boot-tool refresh"]


def test_missing_refresh_tool_is_a_clear_error_and_nothing_is_written(fake):
    fake.tree({"etc/default/grub": GRUB})
    with pytest.raises(ModuleFailure, match="neither update-grub nor grub-mkconfig was found"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB


def test_failing_refresh_restores_the_file_and_reruns(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub", rc=1)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB
    assert "update-grub failed (exit status 1): update-grub: something broke" in exc.value.message
    assert "everything applied before it was restored" in exc.value.message
    assert "running it again on the restored files ALSO failed" in exc.value.message
    assert fake.calls() == ["update-grub ", "update-grub "]
    assert not [n for n in os.listdir(fake.paths.etc + "/default") if n.endswith(".tmp")]


def test_check_mode_writes_and_runs_nothing(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    before = snapshot(fake.root)
    result = bc.run(params(present=["iommu=pt"], absent=["quiet"]), check_mode=True, paths=fake.paths, tools=fake.tools)
    assert result["changed"] is True
    assert result["cmdline_after"] == "iommu=pt"
    assert result["diff"][0]["after"] == GRUB.replace('DEFAULT="quiet"', 'DEFAULT="iommu=pt"')
    assert result["reboot_required"] is True
    assert result["pending"] == ["iommu=pt (running: not set)", "remove quiet (running: quiet)"]
    assert snapshot(fake.root) == before and fake.calls() == []


def test_paths_hang_off_one_root():
    paths = bc.Paths("/srv/node")
    assert (paths.etc, paths.proc, paths.sys) == ("/srv/node/etc", "/srv/node/proc", "/srv/node/sys")
    assert paths.grub == "/srv/node/etc/default/grub" and paths.kernel_cmdline == "/srv/node/etc/kernel/cmdline"
    assert paths.boot_uuids == "/srv/node/etc/kernel/proxmox-boot-uuids"
    assert paths.efivars == "/srv/node/sys/firmware/efi/efivars"
    real = bc.Paths()
    assert (real.root, real.etc, real.proc, real.sys) == ("/", "/etc", "/proc", "/sys")


# --- change records -----------------------------------------------------------------------

def _grub_state(text):
    return records.file_state(text, 0o644)


def test_records_name_the_file_and_each_argument_that_changed(fake):
    grub = GRUB.replace('DEFAULT="quiet"', 'DEFAULT="quiet iommu=soft splash intel-idle.max_cstate=1"')
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    os.chmod(fake.paths.etc + "/default/grub", 0o644)
    args = params(present=["iommu=pt", "processor.max_cstate=1", "intel_idle.max_cstate=1"], absent=["splash", "nomodeset"])
    result = bc.run(args, paths=fake.paths, tools=fake.tools)
    path = fake.paths.etc + "/default/grub"
    after = fake.text("etc/default/grub")
    assert result["changes"] == [
        {"area": "kernel_cmdline", "kind": "file", "target": path, "before": _grub_state(grub),
         "after": _grub_state(after)},
        {"area": "kernel_cmdline", "kind": "value", "target": "iommu", "before": "iommu=soft", "after": "iommu=pt"},
        {"area": "kernel_cmdline", "kind": "value", "target": "processor.max_cstate", "before": None,
         "after": "processor.max_cstate=1"},
        {"area": "kernel_cmdline", "kind": "value", "target": "splash", "before": "splash", "after": None},
    ]
    # the digest is of the text, never the text itself
    assert "quiet" not in repr(result["changes"])
    # a second run: no change, no record, nothing run again
    again = bc.run(args, paths=fake.paths, tools=fake.tools)
    assert again["changed"] is False and again["changes"] == []
    assert fake.calls() == ["update-grub "]


def test_records_of_duplicates_and_a_conflict_across_the_grub_variables(fake):
    grub = GRUB.replace('DEFAULT="quiet"', 'DEFAULT="iommu=pt quiet iommu=pt"').replace(
        'GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="iommu=soft net.ifnames=0"')
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    values = [r for r in result["changes"] if r["kind"] == "value"]
    # the key's arguments as the kernel reads them, in order: what a revert puts back
    assert values == [{"area": "kernel_cmdline", "kind": "value", "target": "iommu",
                       "before": "iommu=soft iommu=pt iommu=pt", "after": "iommu=pt"}]


def test_records_in_check_mode_are_the_planned_ones_and_nothing_is_written(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    path = fake.paths.etc + "/default/grub"
    mode = os.stat(path).st_mode & 0o7777
    before = snapshot(fake.root)
    planned = bc.run(params(present=["iommu=pt"], absent=["quiet"]), check_mode=True, paths=fake.paths,
                     tools=fake.tools)
    assert snapshot(fake.root) == before and fake.calls() == []
    assert planned["changes"] == [
        records.file_change("kernel_cmdline", path, GRUB, GRUB.replace('DEFAULT="quiet"', 'DEFAULT="iommu=pt"'),
                            mode, mode),
        records.value("kernel_cmdline", "iommu", None, "iommu=pt"),
        records.value("kernel_cmdline", "quiet", "quiet", None),
    ]
    applied = bc.run(params(present=["iommu=pt"], absent=["quiet"]), paths=fake.paths, tools=fake.tools)
    assert applied["changes"] == planned["changes"]
    assert applied["changes"][0]["after"] == records.file_state(fake.text("etc/default/grub"), mode)


def test_records_of_a_removal_only_run_and_of_absent_arguments_already_gone(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    result = bc.run(params(absent=["quiet"]), paths=fake.paths, tools=fake.tools)
    assert [(r["kind"], r["target"], r["before"], r["after"]) for r in result["changes"]][1:] == [
        ("value", "quiet", "quiet", None)]
    again = bc.run(params(absent=["quiet", "splash"]), paths=fake.paths, tools=fake.tools)
    assert again["changed"] is False and again["changes"] == []


def test_records_on_systemd_boot_name_etc_kernel_cmdline(fake):
    pve(fake)
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert [(r["kind"], r["target"]) for r in result["changes"]] == [
        ("file", fake.paths.etc + "/kernel/cmdline"), ("value", "iommu")]
    assert result["changes"][0]["after"]["sha256"] == records.file_state(fake.text("etc/kernel/cmdline"))["sha256"]
    # the refresh command is an action, not state: reported, never a record
    assert result["refresh_command"][1:] == ["refresh"]
    assert bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)["changes"] == []


def test_no_configuration_to_edit_is_no_change_and_no_record(fake):
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["skipped"] is True and result["changed"] is False and result["changes"] == []


def test_a_failed_refresh_reports_no_records(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub", rc=1)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert "changes" not in exc.value.partial
    assert fake.text("etc/default/grub") == GRUB


# --- Proxmox systemd-boot -------------------------------------------------------------------

PVE_CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n"
EFIVARS = "sys/firmware/efi/efivars/"


def efivar(name, data):
    """An efivarfs file: 4 attribute bytes (non-volatile, boot and runtime access), then the data."""
    return {EFIVARS + name: b"\x07\x00\x00\x00" + data}


def loader_info(text):
    return efivar(bc.LOADER_INFO_VAR, (text + "\0").encode("utf-16-le"))


SECURE_BOOT_ON = efivar(bc.SECURE_BOOT_VAR, b"\x01")
SECURE_BOOT_OFF = efivar(bc.SECURE_BOOT_VAR, b"\x00")
# A UEFI boot through systemd-boot, as proxmox-boot-tool sets up ZFS installs without Secure Boot.
UEFI_SYSTEMD_BOOT = dict(SECURE_BOOT_OFF, **loader_info("systemd-boot 252.36-1~deb12u1"))


def pve(fake, cmdline=PVE_CMDLINE, boot=None):
    """Proxmox VE on ZFS: /etc/kernel/cmdline, managed ESPs, /etc/default/grub, both tools.

    ``boot`` is the /sys/firmware tree; by default a UEFI boot through systemd-boot.
    """
    fake.tree({"etc/kernel/cmdline": cmdline, "etc/kernel/proxmox-boot-uuids": "1234-ABCD\n5678-EF01\n",
               "etc/default/grub": GRUB})
    fake.tree(UEFI_SYSTEMD_BOOT if boot is None else boot)
    return fake.tool("proxmox-boot-tool").tool("update-grub")


def test_systemd_boot_detected_and_refreshed(fake):
    pve(fake)
    result = bc.run(params(present=["iommu=pt"], absent=["quiet"]), paths=fake.paths, tools=fake.tools)
    assert result["bootloader"] == "systemd-boot"
    assert result["config_path"] == fake.paths.etc + "/kernel/cmdline"
    assert fake.text("etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"
    assert fake.text("etc/default/grub") == GRUB
    assert fake.calls() == ["proxmox-boot-tool refresh"]
    assert bc.run(params(present=["iommu=pt"], absent=["quiet"]), paths=fake.paths, tools=fake.tools)["changed"] is False


def test_systemd_boot_keeps_init_arguments_and_later_lines(fake):
    pve(fake, 'root=ZFS=rpool/ROOT/pve-1 boot=zfs -- init-arg\n# second line kept\n')
    bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/kernel/cmdline") == \
        'root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt -- init-arg\n# second line kept\n'


def test_systemd_boot_needs_managed_esps(fake):
    # the tool is installed but manages no ESP (lines that are not vfat UUIDs do not count):
    # GRUB is what boots
    pve(fake, boot={})
    fake.tree({"etc/kernel/proxmox-boot-uuids": "\nnot-a-uuid\n"})
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["bootloader"] == "grub" and fake.calls() == ["update-grub "]


def test_failing_proxmox_refresh_restores_and_resyncs(fake):
    pve(fake)
    fake.tool("proxmox-boot-tool", fail_times=1)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/kernel/cmdline") == PVE_CMDLINE
    assert "proxmox-boot-tool: broken ESP" in exc.value.message
    assert "ran it again on the restored files" in exc.value.message
    assert fake.calls() == ["proxmox-boot-tool refresh", "proxmox-boot-tool refresh"]


def test_explicit_bootloader_choice(fake):
    pve(fake, boot={})  # legacy BIOS: GRUB on the ESPs
    result = bc.run(params(present=["iommu=pt"], bootloader="grub"), paths=fake.paths, tools=fake.tools)
    # GRUB on proxmox-boot-tool managed ESPs: proxmox-boot-tool refresh syncs them
    assert result["bootloader"] == "grub" and fake.calls() == ["proxmox-boot-tool refresh"]
    assert fake.text("etc/kernel/cmdline") == PVE_CMDLINE


def test_explicit_bootloader_missing_file(fake):
    with pytest.raises(ModuleFailure, match="bootloader=systemd-boot but .*/etc/kernel/cmdline does not exist"):
        bc.run(params(present=["iommu=pt"], bootloader="systemd-boot"), paths=fake.paths, tools=fake.tools)
    with pytest.raises(ModuleFailure, match="bootloader=grub but .*/etc/default/grub does not exist"):
        bc.run(params(present=["iommu=pt"], bootloader="grub"), paths=fake.paths, tools=fake.tools)


def test_nothing_found_is_skipped_not_failed(fake):
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["skipped"] is True and result["changed"] is False and result["reboot_required"] is False
    assert "no boot loader configuration found" in result["msg"]


# --- harmful arguments --------------------------------------------------------------------

def test_blackwell_refuses_identity_domains_naming_gpu_and_argument(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB})).tool("update-grub")
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt", "amd_pstate=active"]), paths=fake.paths, tools=fake.tools)
    msg = exc.value.message
    assert "refusing iommu=pt on NVIDIA Blackwell GPU 0000:41:00.0 (10de:2bb5, blackwell gb202)" in msg
    assert "FSP" in msg and "force=true" in msg and "Nothing was changed" in msg
    assert exc.value.partial["gpus"][0]["architecture"] == "blackwell"
    assert exc.value.partial["cpu_vendor"] == "AuthenticAMD"
    assert snapshot(fake.root) == before and fake.calls() == []


def test_blackwell_refuses_passthrough_spelled_otherwise(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB})).tool("update-grub")
    with pytest.raises(ModuleFailure, match="refusing iommu.passthrough=1 on NVIDIA Blackwell"):
        bc.run(params(present=["iommu.passthrough=1"]), paths=fake.paths, tools=fake.tools)


def test_blackwell_skip_applies_the_rest_and_reports(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB})).tool("update-grub")
    result = bc.run(params(present=["iommu=pt", "amd_pstate=active"], on_harmful="skip"),
                    paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB.replace('"quiet"', '"quiet amd_pstate=active"')
    assert list(result["skipped_keys"]) == ["iommu=pt"]
    assert "0000:41:00.0 (10de:2bb5, blackwell gb202)" in result["skipped_keys"]["iommu=pt"]
    assert result["pending"] == ["amd_pstate=active (running: not set)"]


def test_blackwell_force_applies_with_a_warning(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB})).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"], force=True), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is True and "iommu=pt" in fake.text("etc/default/grub")
    assert any("force=true" in w and "0000:41:00.0" in w for w in result["warnings"])


def test_blackwell_warns_about_identity_domains_already_configured(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB.replace('"quiet"', '"quiet iommu=pt"')}))
    result = bc.run(params(present=["amd_pstate=active"], bootloader="grub"), check_mode=True,
                    paths=fake.paths, tools=AlwaysFound(fake))
    assert any("configured command line holds iommu=pt" in w for w in result["warnings"])


def test_blackwell_removal_is_allowed(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB.replace('"quiet"', '"quiet iommu=pt"')})).tool("update-grub")
    result = bc.run(params(absent=["iommu"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is True and fake.text("etc/default/grub") == GRUB


def test_hopper_is_not_refused(fake):
    fake.tree(dict(HOPPER, **{"etc/default/grub": GRUB})).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is True and result["warnings"] == []
    assert result["gpus"] == [{"bdf": "0000:00:05.0", "device_id": "10de:2335", "architecture": "hopper",
                               "chip": "gh100"}]


# --- inputs -------------------------------------------------------------------------------

def test_invalid_inputs_fail_before_reading(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["a b"], absent=["x'y"], present_by_cpu_vendor={"AuthenticAMD": "amd_pstate=active"}),
               paths=fake.paths, tools=fake.tools)
    assert "present_by_cpu_vendor[AuthenticAMD] must be a list" in exc.value.message
    assert "nothing was changed" in exc.value.message
    with pytest.raises(ModuleFailure, match="present entry 'a b' is not valid"):
        bc.run(params(present=["a b"]), paths=fake.paths, tools=fake.tools)
    with pytest.raises(ModuleFailure, match="bootloader 'lilo' is not valid"):
        bc.run(params(bootloader="lilo"), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB and fake.calls() == []


def test_present_wins_over_vendor_extras(fake):
    fake.tree({"etc/default/grub": GRUB, "proc/cpuinfo": CPUINFO_INTEL}).tool("update-grub")
    result = bc.run(params(present=["intel_idle.max_cstate=2"],
                           present_by_cpu_vendor={"GenuineIntel": ["intel_idle.max_cstate=1", "intel_pstate=active"],
                                                  "AuthenticAMD": ["amd_pstate=active"]}),
                    paths=fake.paths, tools=fake.tools)
    assert result["cpu_vendor"] == "GenuineIntel"
    assert result["cmdline_after"] == "quiet intel_idle.max_cstate=2 intel_pstate=active"


def test_nothing_to_manage_is_a_no_op(fake):
    fake.tree({"etc/default/grub": GRUB})
    result = bc.run(params(), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is False and result["reboot_required"] is False


# --- arguments that would break the boot (GRUB script, kernel whitespace) -------------------

BOOT_BREAKING = [
    "x=1;reboot", "x=1&&reboot", "x=1||reboot", "x=1|reboot", "x=1&", "x=1>/boot/grub/grub.cfg", "x=1<y",
    "x={y}", "}", "{", "#x", "x=#", "x=$(reboot)", "x=${y}", "x=`reboot`", "x=\\;reboot", "x='a b'", "x='a",
    'x="a;b"', 'x="$y"', 'x="a`b`"', "x=1\nreboot", "x=1\r", "x=1\tquiet", "x=a\x0bb", "x=a\x0cb", "x=a\x00b",
    "x=a\x7fb", "x=a\xa0b", "x=\u00e0", "a\u2003b", "x=\u200b", "x=(a)", "x=*", "x=a?", "x=[a]",
]


@pytest.mark.parametrize("where", ["present", "absent", "present_by_cpu_vendor"])
@pytest.mark.parametrize("bad", BOOT_BREAKING)
def test_boot_breaking_arguments_are_refused_everywhere(fake, where, bad):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    before = snapshot(fake.root)
    if where == "present_by_cpu_vendor":
        kw = {"present_by_cpu_vendor": {"AuthenticAMD": ["amd_pstate=active", bad]}}
    else:
        kw = {where: ["iommu=pt", bad] if where == "present" else [bad]}
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(**kw), paths=fake.paths, tools=fake.tools)
    msg = exc.value.message
    assert repr(bad) in msg and "nothing was changed" in msg
    if where == "present_by_cpu_vendor":
        assert "present_by_cpu_vendor[AuthenticAMD]" in msg
    assert snapshot(fake.root) == before and fake.calls() == []


def test_quoted_value_with_spaces_matches_grubs_requoting(fake):
    # GRUB drops the quotes of foo="a b" and quotes the word again as "foo=a b"
    # (grub_create_loader_cmdline): the running line shows that spelling, and it is the same argument
    fake.tree({"etc/default/grub": GRUB.replace('"quiet"', "'quiet foo=\"a b\"'"),
               "proc/cmdline": 'BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet "foo=a b"\n'})
    result = bc.run(params(present=['foo="a b"', '"bar=c d"']), check_mode=True, paths=fake.paths,
                    tools=AlwaysFound(fake))
    assert result["pending"] == ['"bar=c d" (running: not set)']
    assert result["cmdline_after"] == 'quiet foo="a b" "bar=c d"'


@pytest.mark.parametrize("value, fragment", [
    ("quiet x=1;reboot", "'x=1;reboot' holds ';'"),
    ("quiet #x", "'#x' starts with '#'"),
    ('quiet foo="a', "'foo=\"a' has an unbalanced double quote"),
    ("quiet x=$y", "'x=$y' holds '$'"),
    ("quiet x=a\\b", "holds '\\\\'"),
    ("quiet x=a\u00a0b", "'x=a\\xa0b' holds '\\xa0' (U+00A0), which is not ASCII"),
])
def test_unsafe_existing_arguments_block_adding_next_to_them(fake, value, fragment):
    # single quotes in the shell file: the value is taken literally, as GRUB then reads it
    fake.tree({"etc/default/grub": "GRUB_CMDLINE_LINUX_DEFAULT='%s'\n" % value}).tool("update-grub")
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fragment in exc.value.message, exc.value.message
    assert "grub line 1" in exc.value.message and "nothing was changed" in exc.value.message
    assert snapshot(fake.root) == before and fake.calls() == []
    # nothing to add: no refusal, but a warning names it
    result = bc.run(params(absent=["nosuch"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is False
    assert any("not safe to add to" in w and fragment in w for w in result["warnings"])


def test_newline_in_an_unedited_assignment_blocks_adding(fake):
    grub = 'GRUB_CMDLINE_LINUX="ro\nreboot"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure, match="GRUB runs what follows a newline as a command"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert snapshot(fake.root) == before


def test_systemd_boot_unbalanced_quote_blocks_adding(fake):
    pve(fake, 'root=ZFS=rpool/ROOT/pve-1 boot=zfs foo="a\n')
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure, match="unbalanced double quote"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert snapshot(fake.root) == before and fake.calls() == []


def test_systemd_boot_refuses_to_drop_root(fake):
    pve(fake)
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure, match="would have no root= argument"):
        bc.run(params(absent=["root"]), paths=fake.paths, tools=fake.tools)
    assert snapshot(fake.root) == before and fake.calls() == []


# --- COMMAND_LINE_SIZE ----------------------------------------------------------------------

def test_too_long_a_line_is_refused_with_length_and_limit(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    before = snapshot(fake.root)
    long_arg = "x=" + "a" * 1795
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=[long_arg]), paths=fake.paths, tools=fake.tools, machine="x86_64")
    msg = exc.value.message
    # "quiet " + the argument: 1803 bytes, + 256 kept free for BOOT_IMAGE=, root=, ro = 2059 > 2047
    assert "1803 bytes long" in msg and "256 bytes kept free" in msg and "2059" in msg
    assert "2047 bytes the x86_64 kernel keeps (COMMAND_LINE_SIZE 2048" in msg and "Nothing was changed" in msg
    assert snapshot(fake.root) == before and fake.calls() == []
    # arm64 keeps 4096
    result = bc.run(params(present=[long_arg]), paths=fake.paths, tools=fake.tools, machine="aarch64")
    assert result["changed"] is True


def test_length_reserve_grows_with_what_the_boot_loader_adds(fake):
    boot_image = "BOOT_IMAGE=/" + "b" * 400
    fake.tree({"etc/default/grub": GRUB, "proc/cmdline": boot_image + " root=/dev/sda1 ro quiet\n"}).tool("update-grub")
    with pytest.raises(ModuleFailure, match=r"with 431 bytes kept free"):
        bc.run(params(present=["x=" + "a" * 1700]), paths=fake.paths, tools=fake.tools, machine="x86_64")
    # an unknown machine gets the smaller, x86 size
    assert bc.command_line_size("riscv64") == 2048 and bc.command_line_size("aarch64") == 4096


def test_shortening_an_over_long_line_is_allowed(fake):
    grub = GRUB.replace('"quiet"', '"quiet x=%s"' % ("a" * 2100))
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    result = bc.run(params(absent=["quiet"]), paths=fake.paths, tools=fake.tools, machine="x86_64")
    assert result["changed"] is True and not result["cmdline_after"].startswith("quiet")


# --- messages that name what failed, and clean failures --------------------------------------

def test_write_failure_names_the_path_and_restores_earlier_files(fake, monkeypatch):
    # both files change: GRUB_CMDLINE_LINUX in /etc/default/grub loses iommu=soft, the grub.d
    # override of _DEFAULT gains iommu=pt; the second write fails
    grub = GRUB.replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="iommu=soft"')
    cfg = "etc/default/grub.d/50-cloudimg-settings.cfg"
    fake.tree({"etc/default/grub": grub, cfg: 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"\n'}).tool("update-grub")
    os.chmod(str(fake.root / "etc/default/grub"), 0o640)
    before = snapshot(fake.root)
    real = bc.fileops.write_atomic

    def write_atomic(path, content, **kw):
        if path.endswith(".cfg"):
            raise OSError(30, "Read-only file system", path)
        return real(path, content, **kw)
    monkeypatch.setattr(bc.fileops, "write_atomic", write_atomic)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert ("failed to write %s/%s: Read-only file system (EROFS)" % (fake.root, cfg)) in exc.value.message
    assert "everything applied before it was restored" in exc.value.message
    assert snapshot(fake.root) == before and fake.calls() == []


@pytest.mark.parametrize("where", ["etc/default/grub", "etc/default/grub.d/60-x.cfg"])
def test_a_directory_where_a_config_file_should_be_is_a_clean_failure(fake, where):
    fake.tree({"etc/default/grub": GRUB} if where != "etc/default/grub" else {}).tool("update-grub")
    (fake.root / where).mkdir(parents=True)
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools, check_mode=True)
    assert str(fake.root / where) in exc.value.message and "nothing was changed" in exc.value.message
    assert snapshot(fake.root) == before


def test_unstartable_refresh_command_is_a_failure_with_restore(fake, monkeypatch):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    before = snapshot(fake.root)

    def run(argv):
        raise OSError(8, "Exec format error", argv[0])
    monkeypatch.setattr(fake, "run", run)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert "could not be run: %s: Exec format error (ENOEXEC)" % (fake.bin / "update-grub") in exc.value.message
    assert snapshot(fake.root) == before


# --- undecodable bytes ----------------------------------------------------------------------

@pytest.mark.parametrize("rel", ["etc/default/grub", "etc/default/grub.d/50-x.cfg"])
def test_undecodable_grub_file_fails_naming_it_before_writing(fake, rel):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    fake.tree({rel: b"# caf\xe9\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"})
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    msg = exc.value.message
    assert str(fake.root / rel) in msg and "not valid UTF-8" in msg and "offset 5" in msg
    assert "nothing was changed" in msg
    assert snapshot(fake.root) == before and fake.calls() == []


def test_undecodable_kernel_cmdline_fails_naming_it(fake):
    pve(fake, b"root=ZFS=rpool/ROOT/pve-1 boot=zfs caf\xe9\n")
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure, match=r"etc/kernel/cmdline: .*not valid UTF-8"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert snapshot(fake.root) == before


def test_kernel_provided_files_are_read_leniently(fake):
    fake.tree({"etc/default/grub": GRUB, "proc/cmdline": b"BOOT_IMAGE=/vmlinuz ro x=\xff\xfe iommu=pt\n",
               "proc/cpuinfo": b"vendor_id\t: AuthenticAMD\nmodel name\t: \xff\n"}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["cpu_vendor"] == "AuthenticAMD" and result["reboot_required"] is False


# --- lost updates ---------------------------------------------------------------------------

def _write_between_plan_and_write(monkeypatch, editor, path, content):
    real = editor.plan

    def plan(self, present, absent):
        out = real(self, present, absent)
        with open(path, "w") as handle:
            handle.write(content)
        return out
    monkeypatch.setattr(editor, "plan", plan)


def test_grub_file_changed_by_another_writer_is_not_overwritten(fake, monkeypatch):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    other = GRUB.replace('"quiet"', '"quiet splash"')
    _write_between_plan_and_write(monkeypatch, bc._Grub, str(fake.root / "etc/default/grub"), other)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert exc.value.message == ("%s/default/grub changed while this module was reading it; nothing was changed, "
                                 "run again" % fake.paths.etc)
    assert fake.text("etc/default/grub") == other and fake.calls() == []


def test_grub_d_file_appearing_meanwhile_is_a_change(fake, monkeypatch):
    fake.tree({"etc/default/grub": GRUB, "etc/default/grub.d": None}).tool("update-grub")
    cfg = str(fake.root / "etc/default/grub.d/99-late.cfg")
    _write_between_plan_and_write(monkeypatch, bc._Grub, cfg, 'GRUB_CMDLINE_LINUX_DEFAULT="late"\n')
    with pytest.raises(ModuleFailure, match="99-late.cfg changed while this module was reading it"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB and fake.calls() == []


def test_kernel_cmdline_changed_by_another_writer_is_not_overwritten(fake, monkeypatch):
    pve(fake)
    other = "root=ZFS=rpool/ROOT/pve-1 boot=zfs mitigations=off\n"
    _write_between_plan_and_write(monkeypatch, bc._SystemdBoot, str(fake.root / "etc/kernel/cmdline"), other)
    with pytest.raises(ModuleFailure, match="kernel/cmdline changed while this module was reading it; nothing "
                                            "was changed, run again"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/kernel/cmdline") == other and fake.calls() == []


def test_change_in_the_last_instant_is_caught_at_capture_and_restored(fake, monkeypatch):
    # the other writer gets in after the re-read: the bytes captured for the undo are not the
    # planned ones, so the write is undone and the other writer's file put back
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub")
    other = GRUB.replace('"quiet"', '"quiet splash"')
    path = str(fake.root / "etc/default/grub")

    def changed_since_load(self):
        with open(path, "w") as handle:
            handle.write(other)
        return []
    monkeypatch.setattr(bc._Grub, "changed_since_load", changed_since_load)
    with pytest.raises(ModuleFailure, match="grub changed while this module was reading it"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == other and fake.calls() == []


# --- exact restore: mode, owner, symlinks ---------------------------------------------------

def _linked_grub(fake, mode=0o640):
    """/etc/default/grub as a symlink into a config repository, mode ``mode``."""
    fake.tree({"srv/config/grub": GRUB, "etc/default": None})
    os.symlink("../../srv/config/grub", str(fake.root / "etc/default/grub"))
    os.chmod(str(fake.root / "srv/config/grub"), mode)


def test_symlinked_grub_stays_a_link_with_its_target_edited(fake):
    _linked_grub(fake)
    fake.tool("update-grub")
    bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert os.readlink(str(fake.root / "etc/default/grub")) == "../../srv/config/grub"
    assert fake.text("srv/config/grub") == GRUB.replace('"quiet"', '"quiet iommu=pt"')
    assert os.stat(str(fake.root / "srv/config/grub")).st_mode & 0o7777 == 0o640


def test_failing_refresh_restores_a_symlinked_grub_exactly(fake):
    _linked_grub(fake)
    fake.tool("update-grub", rc=1)
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure, match="update-grub failed"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    after = snapshot(fake.root)
    after.pop("calls.log"), after.pop("calls.log (mode)")
    assert after == before  # link, target bytes and its 0640 mode


def test_failing_refresh_restores_mode_and_owner(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub", rc=1)
    path = str(fake.root / "etc/default/grub")
    os.chmod(path, 0o600)
    if os.geteuid() == 0:
        os.chown(path, 1234, 5678)
    with pytest.raises(ModuleFailure):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    st = os.stat(path)
    assert fake.text("etc/default/grub") == GRUB and st.st_mode & 0o7777 == 0o600
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 5678)


def test_symlinked_grub_d_file_is_edited_through_the_link(fake):
    fake.tree({"etc/default/grub": GRUB, "srv/cloud.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"\n',
               "etc/default/grub.d": None}).tool("update-grub")
    link = str(fake.root / "etc/default/grub.d/50-cloudimg-settings.cfg")
    os.symlink("../../../srv/cloud.cfg", link)
    os.symlink("../../../srv/gone.cfg", str(fake.root / "etc/default/grub.d/60-dangling.cfg"))
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert os.readlink(link) == "../../../srv/cloud.cfg"
    assert fake.text("srv/cloud.cfg") == 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0 iommu=pt"\n'
    assert result["config_files"] == [link]  # the dangling link is skipped, as grub-mkconfig's [ -e ] does


# --- GRUB constructs the parser does not evaluate -------------------------------------------

@pytest.mark.parametrize("extra, fragment", [
    ('if [ -e /etc/x ]; then\n  GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nfi\n', "set conditionally"),
    ('[ -e /etc/x ] && GRUB_CMDLINE_LINUX_DEFAULT="splash"\n', "set conditionally"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="splash" true\n', "environment prefix"),
    ('unset GRUB_CMDLINE_LINUX_DEFAULT\n', "'unset GRUB_CMDLINE_LINUX_DEFAULT'"),
    ('GRUB_CMDLINE_LINUX_DEFAULT+=" splash"\n', "+="),
    ('. /etc/default/grub.local\n', "sources other shell code"),
    ('readonly GRUB_CMDLINE_LINUX_DEFAULT="x"\n', "'readonly'"),
])
def test_constructs_the_parser_cannot_evaluate_refuse_editing(fake, extra, fragment):
    fake.tree({"etc/default/grub": GRUB + extra}).tool("update-grub")
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert "cannot edit the GRUB configuration safely" in exc.value.message
    assert fragment in exc.value.message and re.search(r"grub line [78]:", exc.value.message)
    assert snapshot(fake.root) == before and fake.calls() == []


def test_two_assignments_on_one_line_edit_the_last(fake):
    grub = 'GRUB_TIMEOUT=5; GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT="a" GRUB_CMDLINE_LINUX_DEFAULT="b"\n'
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == grub.replace('"b"', '"b iommu=pt"')
    assert result["cmdline_before"] == "b" and result["cmdline_after"] == "b iommu=pt"


def test_conditional_layer_is_read_and_the_base_edited(fake):
    layer = 'if [ -x /sbin/upstart ]; then GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT init=/sbin/upstart"; fi\n'
    fake.tree({"etc/default/grub": GRUB, "etc/default/grub.d/init-select.cfg": layer}).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB.replace('"quiet"', '"quiet iommu=pt"')
    assert result["cmdline_after"] == "quiet iommu=pt init=/sbin/upstart"
    assert any("only under a condition" in w for w in result["warnings"])


# --- how the node boots ---------------------------------------------------------------------

@pytest.mark.parametrize("boot, mode, secure, fragment", [
    ({}, "legacy", None, "legacy BIOS boot"),
    (SECURE_BOOT_ON, "uefi", True, "Secure Boot on"),
    (dict(SECURE_BOOT_OFF, **loader_info("GRUB 2.12")), "uefi", False, "through GRUB 2.12"),
    (SECURE_BOOT_OFF, "uefi", False, "without the LoaderInfo EFI variable"),
])
def test_proxmox_node_booting_through_grub_edits_grub_not_kernel_cmdline(fake, boot, mode, secure, fragment):
    pve(fake, boot=boot)
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["bootloader"] == "grub" and result["boot_mode"] == mode and result["secure_boot"] is secure
    assert fragment in result["bootloader_reason"] and "kernel/cmdline is not used" in result["bootloader_reason"]
    assert fake.text("etc/kernel/cmdline") == PVE_CMDLINE
    assert fake.text("etc/default/grub") == GRUB.replace('"quiet"', '"quiet iommu=pt"')
    assert fake.calls() == ["proxmox-boot-tool refresh"]


def test_proxmox_uefi_systemd_boot_reports_why(fake):
    pve(fake)
    result = bc.run(params(present=["iommu=pt"]), check_mode=True, paths=fake.paths, tools=fake.tools)
    assert result["bootloader"] == "systemd-boot" and result["boot_mode"] == "uefi" and result["secure_boot"] is False
    assert "systemd-boot 252.36-1~deb12u1 (the LoaderInfo EFI variable)" in result["bootloader_reason"]
    assert "1234-ABCD, 5678-EF01" in result["bootloader_reason"]


def test_proxmox_uefi_without_readable_efivars_assumes_systemd_boot_and_says_so(fake):
    pve(fake, boot={"sys/firmware/efi/efivars": None})
    result = bc.run(params(present=["iommu=pt"]), check_mode=True, paths=fake.paths, tools=fake.tools)
    assert result["bootloader"] == "systemd-boot" and result["secure_boot"] is None
    assert "no EFI variable is readable" in result["bootloader_reason"]
    assert "is assumed to be what boots" in result["bootloader_reason"]


def test_no_reboot_for_a_file_the_boot_does_not_use(fake):
    # legacy BIOS Proxmox: /etc/kernel/cmdline lacks iommu=pt, but GRUB (what boots) has it and so
    # does the running line: nothing to change, no reboot
    pve(fake, boot={})
    fake.tree({"etc/default/grub": GRUB.replace('"quiet"', '"quiet iommu=pt"'),
               "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=ZFS=rpool/ROOT/pve-1 ro quiet iommu=pt\n"})
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is False and result["reboot_required"] is False and result["pending"] == []
    assert fake.text("etc/kernel/cmdline") == PVE_CMDLINE and fake.calls() == []


@pytest.mark.parametrize("boot, fragment", [
    ({}, "legacy BIOS boot"),
    (SECURE_BOOT_ON, "Secure Boot on"),
    (dict(SECURE_BOOT_OFF, **loader_info("GRUB 2.12")), "through GRUB 2.12"),
])
def test_forced_systemd_boot_on_a_grub_boot_fails_with_the_reason(fake, boot, fragment):
    pve(fake, boot=boot)
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"], bootloader="systemd-boot"), paths=fake.paths, tools=fake.tools)
    msg = exc.value.message
    assert "bootloader=systemd-boot, but this node does not boot through systemd-boot" in msg
    assert fragment in msg and "nothing was changed" in msg
    assert exc.value.partial["bootloader_reason"] and exc.value.partial["boot_mode"]
    assert snapshot(fake.root) == before and fake.calls() == []


def test_forced_grub_on_a_systemd_boot_boot_fails_with_the_reason(fake):
    pve(fake)
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure, match="bootloader=grub, but this node boots through systemd-boot"):
        bc.run(params(present=["iommu=pt"], bootloader="grub"), paths=fake.paths, tools=fake.tools)
    assert snapshot(fake.root) == before and fake.calls() == []


def test_forced_systemd_boot_without_managed_esps_fails(fake):
    pve(fake)
    fake.tree({"etc/kernel/proxmox-boot-uuids": ""})
    with pytest.raises(ModuleFailure, match="proxmox-boot-tool is installed but .* lists no ESP"):
        bc.run(params(present=["iommu=pt"], bootloader="systemd-boot"), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/kernel/cmdline") == PVE_CMDLINE


def test_systemd_boot_without_proxmox_boot_tool_is_skipped_not_grub(fake):
    fake.tree(dict(UEFI_SYSTEMD_BOOT, **{"etc/default/grub": GRUB})).tool("update-grub")
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["skipped"] is True and result["bootloader"] is None and result["reboot_required"] is False
    assert "boots through systemd-boot without proxmox-boot-tool" in result["msg"]
    assert fake.text("etc/default/grub") == GRUB and fake.calls() == []


def test_managed_systemd_boot_without_kernel_cmdline_is_a_clear_failure(fake):
    pve(fake)
    os.unlink(str(fake.root / "etc/kernel/cmdline"))
    with pytest.raises(ModuleFailure, match="kernel/cmdline does not exist .*create it"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)


def test_boot_facts_read_efivars(fake):
    fake.tree(dict(SECURE_BOOT_ON, **loader_info("systemd-boot 257")))
    assert bc.boot_facts(fake.paths) == ("uefi", True, "systemd-boot 257", True)
    fake.tree(efivar(bc.SECURE_BOOT_VAR, b""))  # attributes only: unknown
    assert bc.boot_facts(fake.paths)[1] is None


@pytest.mark.parametrize("value, after", [
    ("quiet x=1;reboot", "quiet"),
    ('quiet x="a', "quiet"),
    # the kernel splits x=a<NBSP>b at byte 0xA0 into x=a<0xC2> and b: removing x leaves b, as it reads it
    ("quiet x=a\u00a0b", "quiet b"),
])
def test_an_unsafe_argument_can_be_removed(fake, value, after):
    fake.tree({"etc/default/grub": "GRUB_CMDLINE_LINUX_DEFAULT='%s'\n" % value}).tool("update-grub")
    result = bc.run(params(absent=["x"]), paths=fake.paths, tools=fake.tools)
    assert result["changed"] is True and result["cmdline_after"] == after
    assert fake.text("etc/default/grub") == "GRUB_CMDLINE_LINUX_DEFAULT='%s'\n" % after


@pytest.mark.parametrize("rel", ["etc/default/grub", "etc/default/grub.d/60-x.cfg", "etc/kernel/proxmox-boot-uuids"])
def test_a_fifo_where_a_config_file_should_be_fails_without_blocking(fake, rel):
    pve(fake, boot={})
    fake.tree({"etc/default/grub.d": None})
    path = str(fake.root / rel)
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path)
    before = snapshot(fake.root)
    with pytest.raises(ModuleFailure) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert "%s: is a FIFO" % path in exc.value.message and "nothing was changed" in exc.value.message
    assert exc.value.message.count(path) == 1
    assert snapshot(fake.root) == before and fake.calls() == []


def test_symlink_loop_at_grub_fails_naming_it(fake):
    fake.tree({"etc/default": None}).tool("update-grub")
    os.symlink("grub", str(fake.root / "etc/default/grub"))
    with pytest.raises(ModuleFailure, match=r"default/grub: Too many levels of symbolic links \(ELOOP\); nothing"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
