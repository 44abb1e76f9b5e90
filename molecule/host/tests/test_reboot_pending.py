"""Issue 10: the host scenario with gpufleet_reboot_ok false converges, is idempotent, and
reports the pending reboot without rebooting.

prepare_kernel_cmdline.yml gave the container Debian's stock /etc/default/grub (a copy in
/root/gpufleet-grub.stock) and a fake update-grub that records its calls; vars_kernel_cmdline.yml
keeps rebooting off. The role's defaults add iommu=pt, and amd_pstate=active on AMD CPUs. The
container shares this machine's kernel, so /proc/cmdline and /proc/cpuinfo are the CI VM's:
the expected line is derived from them, not hard-coded. Checked: the edited file (only the one
value changed), one refresh call over converge, idempotence and check mode, the reboot-required
flag with the pending arguments, the module results, and that no reboot task ran.
"""

import shlex

import pytest

GRUB = "/etc/default/grub"
STOCK = "/root/gpufleet-grub.stock"
CALLS = "/var/log/gpufleet-fake-update-grub.log"
FLAG = "/run/reboot-required"
ASSIGNMENT = "GRUB_CMDLINE_LINUX_DEFAULT="


@pytest.fixture(scope="module")
def wanted(host):
    """The arguments the role's defaults manage on this CPU, in the order they are added."""
    vendor = None
    for line in host.file("/proc/cpuinfo").content_string.splitlines():
        if line.startswith("vendor_id"):
            vendor = line.split(":", 1)[1].strip()
            break
    return ["iommu=pt"] + (["amd_pstate=active"] if vendor == "AuthenticAMD" else [])


@pytest.fixture(scope="module")
def running(host):
    """The kernel part of the running command line (what comes before a bare --)."""
    tokens = host.file("/proc/cmdline").content_string.split()
    return tokens[:tokens.index("--")] if "--" in tokens else tokens


def test_grub_file_changed_only_in_the_managed_value(host, wanted):
    stock = host.file(STOCK).content_string.splitlines()
    edited = host.file(GRUB).content_string.splitlines()
    assert len(edited) == len(stock)
    for before, after in zip(stock, edited):
        if before.startswith(ASSIGNMENT):
            assert after == '%s"%s"' % (ASSIGNMENT, " ".join(["quiet"] + wanted))
        else:
            assert after == before
    grub = host.file(GRUB)
    assert grub.mode == 0o644 and grub.user == "root"


def test_grub_value_reads_back_through_the_shell(host, wanted):
    # what grub-mkconfig will see when it sources the file
    out = host.check_output(". %s && printf '%%s' \"$GRUB_CMDLINE_LINUX_DEFAULT\"" % GRUB)
    assert shlex.split(out) == ["quiet"] + wanted


def test_update_grub_ran_once_over_converge_idempotence_and_check(host):
    assert host.file(CALLS).content_string.splitlines() == ["update-grub "]


def test_reboot_flag_lists_the_pending_arguments(host, wanted, running):
    flag = host.file(FLAG)
    assert flag.is_file and flag.mode == 0o644
    lines = flag.content_string.splitlines()
    pending = [arg for arg in wanted if arg not in running]
    assert pending, "the running command line already has %s: nothing would be pending" % wanted
    assert lines[0] == "*** System restart required ***"
    assert all(line.startswith("gpufleet.tuning: ") for line in lines[1:]), lines
    # other reboot_required parts of the role (NVIDIA driver options) may add their own lines
    assert [line for line in lines if line.startswith("gpufleet.tuning: kernel command line: ")] == [
        "gpufleet.tuning: kernel command line: %s (running: not set)" % arg for arg in pending]


def test_results_first_converge_changed_and_reported(results, wanted):
    first = results("converge-1")["__host_kernel_cmdline"]
    assert first["changed"] is True and first["bootloader"] == "grub"
    assert first["config_files"] == [GRUB]
    assert first["cmdline_before"] == "quiet" and first["cmdline_after"] == " ".join(["quiet"] + wanted)
    assert first["reboot_required"] is True and first["pending"]
    assert first["refresh_command"] == ["/usr/local/sbin/update-grub"]


def test_results_idempotent_and_still_pending(results):
    for run in ("converge-2", "check"):
        again = results(run)["__host_kernel_cmdline"]
        assert again["changed"] is False, run
        assert again["config_files"] == [] and again["refresh_command"] is None, run
        assert again["reboot_required"] is True, run


def test_no_reboot_was_attempted(results):
    for run in ("converge-1", "converge-2", "check"):
        saved = results(run)
        # the reboot task registers __host_reboot; skipped (or never reached) means no reboot
        if "__host_reboot" in saved:
            assert saved["__host_reboot"].get("skipped") is True, run
        if "__host_reboot_drain" in saved:
            assert saved["__host_reboot_drain"].get("skipped") is True, run
