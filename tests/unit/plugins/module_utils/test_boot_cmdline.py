"""The kernel_cmdline engine against fake /etc, /proc, /sys trees and fake boot loader tools.

The tools are real executables written into a temp bin directory: they record their argv in a
log file, and a failing one exits 1 after writing to stderr, so restore-on-failure is tested
against a real process.
"""

import os
import subprocess

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import boot_cmdline as bc
from ansible_collections.gpufleet.tuning.plugins.module_utils import commands
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


class Fake(object):
    """A fake machine: the tree, its Paths, a bin dir of recording tools, and Tools over it."""

    def __init__(self, tmp_path):
        self.root = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.log = tmp_path / "calls.log"
        self.paths = bc.Paths(etc=str(tmp_path / "etc"), proc=str(tmp_path / "proc"), sys=str(tmp_path / "sys"))
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


class AlwaysFound(object):
    """Every tool is "installed" (at /bin/true); runs go to the fake's recorder."""

    def __init__(self, fake):
        self.run = fake.run

    def which(self, name):
        return "/bin/true"


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
    with pytest.raises(bc.CmdlineError) as exc:
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
    with pytest.raises(bc.CmdlineError, match="uses shell expansions; edit it by hand"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA"\n'


def test_grub_double_dash_in_linux_refuses_additions(fake):
    grub = GRUB.replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="ro -- single"')
    fake.tree({"etc/default/grub": grub}).tool("update-grub")
    with pytest.raises(bc.CmdlineError, match="holds '--'"):
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
    with pytest.raises(bc.CmdlineError, match="neither update-grub nor grub-mkconfig was found"):
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/default/grub") == GRUB


def test_failing_refresh_restores_the_file_and_reruns(fake):
    fake.tree({"etc/default/grub": GRUB}).tool("update-grub", rc=1)
    with pytest.raises(bc.CmdlineError) as exc:
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


# --- Proxmox systemd-boot -------------------------------------------------------------------

PVE_CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n"


def pve(fake, cmdline=PVE_CMDLINE):
    fake.tree({"etc/kernel/cmdline": cmdline, "etc/kernel/proxmox-boot-uuids": "1234-ABCD\n5678-EF01\n",
               "etc/default/grub": GRUB})
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
    # the tool is installed but manages no ESP: GRUB is what boots
    pve(fake)
    fake.tree({"etc/kernel/proxmox-boot-uuids": "\n"})
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["bootloader"] == "grub" and fake.calls() == ["update-grub "]


def test_failing_proxmox_refresh_restores_and_resyncs(fake):
    pve(fake)
    fake.tool("proxmox-boot-tool", fail_times=1)
    with pytest.raises(bc.CmdlineError) as exc:
        bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert fake.text("etc/kernel/cmdline") == PVE_CMDLINE
    assert "proxmox-boot-tool: broken ESP" in exc.value.message
    assert "ran it again on the restored files" in exc.value.message
    assert fake.calls() == ["proxmox-boot-tool refresh", "proxmox-boot-tool refresh"]


def test_explicit_bootloader_choice(fake):
    pve(fake)
    result = bc.run(params(present=["iommu=pt"], bootloader="grub"), paths=fake.paths, tools=fake.tools)
    # GRUB on proxmox-boot-tool managed ESPs: proxmox-boot-tool refresh syncs them
    assert result["bootloader"] == "grub" and fake.calls() == ["proxmox-boot-tool refresh"]
    assert fake.text("etc/kernel/cmdline") == PVE_CMDLINE


def test_explicit_bootloader_missing_file(fake):
    with pytest.raises(bc.CmdlineError, match="bootloader=systemd-boot but .*/etc/kernel/cmdline does not exist"):
        bc.run(params(present=["iommu=pt"], bootloader="systemd-boot"), paths=fake.paths, tools=fake.tools)
    with pytest.raises(bc.CmdlineError, match="bootloader=grub but .*/etc/default/grub does not exist"):
        bc.run(params(present=["iommu=pt"], bootloader="grub"), paths=fake.paths, tools=fake.tools)


def test_nothing_found_is_skipped_not_failed(fake):
    result = bc.run(params(present=["iommu=pt"]), paths=fake.paths, tools=fake.tools)
    assert result["skipped"] is True and result["changed"] is False and result["reboot_required"] is False
    assert "no boot loader configuration found" in result["msg"]


# --- harmful arguments --------------------------------------------------------------------

def test_blackwell_refuses_identity_domains_naming_gpu_and_argument(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB})).tool("update-grub")
    before = snapshot(fake.root)
    with pytest.raises(bc.CmdlineError) as exc:
        bc.run(params(present=["iommu=pt", "amd_pstate=active"]), paths=fake.paths, tools=fake.tools)
    msg = exc.value.message
    assert "refusing iommu=pt on NVIDIA Blackwell GPU 0000:41:00.0 (10de:2bb5, blackwell gb202)" in msg
    assert "FSP" in msg and "force=true" in msg and "Nothing was changed" in msg
    assert exc.value.partial["gpus"][0]["architecture"] == "blackwell"
    assert exc.value.partial["cpu_vendor"] == "AuthenticAMD"
    assert snapshot(fake.root) == before and fake.calls() == []


def test_blackwell_refuses_passthrough_spelled_otherwise(fake):
    fake.tree(dict(BLACKWELL, **{"etc/default/grub": GRUB})).tool("update-grub")
    with pytest.raises(bc.CmdlineError, match="refusing iommu.passthrough=1 on NVIDIA Blackwell"):
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
    with pytest.raises(bc.CmdlineError) as exc:
        bc.run(params(present=["a b"], absent=["x'y"], present_by_cpu_vendor={"AuthenticAMD": "amd_pstate=active"}),
               paths=fake.paths, tools=fake.tools)
    assert "present_by_cpu_vendor[AuthenticAMD] must be a list" in exc.value.message
    assert "nothing was changed" in exc.value.message
    with pytest.raises(bc.CmdlineError, match="present entry 'a b' is not valid"):
        bc.run(params(present=["a b"]), paths=fake.paths, tools=fake.tools)
    with pytest.raises(bc.CmdlineError, match="bootloader 'lilo' is not valid"):
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
