# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's sysctl profile on a real kernel: applied, persisted, kept over a reboot.

kernel.nmi_watchdog is the honest case. This guest has no PMU ("NMI watchdog: Perf NMI
watchdog permanently disabled"), so its kernel reads the key as 0 and refuses every write to
it with ENOTSUPP (524), even of that same 0. The profile wants 0: the key already holds it,
so the role neither writes nor skips it, and the boot-time write of the persisted line fails
harmlessly (systemd-sysctl reads the value back after a failed write and accepts it when it
already matches). A value the kernel would have to change (1) goes through the module's
on_unwritable handling: skipped with the kernel's reason, or failed with it.
"""

from __future__ import annotations

import pytest

NMI = "kernel.nmi_watchdog"
MODULE = "gpufleet.tuning.sysctl_profile"
PROBE_WRITE = """python3 -c '
import os, sys
fd = os.open("/proc/sys/kernel/nmi_watchdog", os.O_WRONLY)
try:
    os.write(fd, sys.argv[1].encode())
except OSError as exc:
    print(exc.errno)
else:
    print(0)' %s"""


@pytest.fixture(scope="module")
def profile(host_defaults, fold):
    """What the role sets: its default profile with host_sysctl_extra merged over it."""
    settings = dict(host_defaults["host_sysctl_settings"])
    settings.update(host_defaults.get("host_sysctl_extra") or {})
    return dict((key, fold(value)) for key, value in settings.items())


@pytest.fixture(scope="module")
def effective(results, profile):
    """What the role must leave: the profile, except where raise_only kept a field the kernel
    already had higher. Each kept value is checked here to be the field-wise larger of the
    guest's value before the run and the profile's, so the module's word is not taken for it."""
    first = results("converge-1")["__host_sysctl_profile"]
    out = dict(profile)
    for key, kept in (first.get("kept_higher") or {}).items():
        before = [int(field) for field in first["before"][key].split()]
        wanted = [int(field) for field in profile[key].split()]
        assert kept["effective"] == " ".join(str(max(a, b)) for a, b in zip(before, wanted)), key
        out[key] = kept["effective"]
    return out


@pytest.fixture(scope="module")
def conf_path(host_defaults):
    return "/etc/sysctl.d/90-gpufleet-%s.conf" % host_defaults["host_sysctl_name"]


def test_kernel_refuses_every_nmi_watchdog_write_with_enotsupp(host, read_sysctl):
    """The fact the rest rests on: the key reads 0 and no write is taken, not even of 0."""
    assert read_sysctl(NMI) == "0"
    for value in ("0", "1"):
        probe = host.run(PROBE_WRITE % value)
        assert probe.rc == 0, probe.stderr
        assert probe.stdout.strip() == "524", "writing %s to %s: errno %s" % (value, NMI, probe.stdout)


def test_first_converge_set_the_profile_on_the_running_kernel(results, effective):
    first = results("converge-1")["__host_sysctl_profile"]
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] is True
    # Every key was read back from /proc/sys after the run and equals the profile (a buffer
    # field the kernel already had higher kept).
    assert dict((k, first["after"][k]) for k in effective) == effective
    # Exactly the keys whose stock Debian value differs were written.
    written = sorted(k for k in effective if first["before"][k] != effective[k])
    assert "vm.swappiness" in written and first["before"]["vm.swappiness"] == "60"
    assert sorted(first["changed_keys"]) == written


def test_nmi_watchdog_already_off_is_neither_written_nor_skipped(results, profile):
    assert profile[NMI] == "0", "the role's profile no longer sets %s to 0" % NMI
    for run in ("converge-1", "converge-2", "check"):
        result = results(run)["__host_sysctl_profile"]
        assert result["before"][NMI] == result["after"][NMI] == "0", run
        assert NMI not in result["changed_keys"], run
        assert result["skipped_keys"] == {}, "%s: %r" % (run, result["skipped_keys"])


def test_second_converge_changed_nothing(results):
    second = results("converge-2")["__host_sysctl_profile"]
    assert second["changed"] is False
    assert second["changed_keys"] == []
    assert second["before"] == second["after"]


def test_check_mode_converge_plans_nothing(results):
    check = results("check")["__host_sysctl_profile"]
    assert check["changed"] is False, "check mode plans %s; diff %s" % (check["changed_keys"], check.get("diff"))
    assert check["changed_keys"] == []


def test_profile_is_persisted(host, conf_path, effective, results, fold):
    conf = host.file(conf_path)
    assert conf.exists and conf.user == "root" and conf.group == "root" and conf.mode == 0o644
    settings = {}
    for line in conf.content_string.splitlines():
        if line.strip() and not line.startswith(("#", ";")):
            key, value = line.split("=", 1)
            settings[key.strip()] = fold(value)
    assert settings == effective
    assert results("converge-1")["__host_sysctl_profile"]["path"] == conf_path


def test_values_survive_a_reboot(rebooted, read_sysctl, effective):
    """After the real reboot /proc/sys holds the profile again: systemd-sysctl read the file."""
    assert dict((key, read_sysctl(key)) for key in effective) == effective


def test_persisted_file_applied_cleanly_at_boot(host, rebooted):
    """The boot-time apply did not fail on the key the kernel refuses (same value: accepted)."""
    state = host.run("systemctl is-failed systemd-sysctl.service").stdout.strip()
    assert state == "active", "systemd-sysctl.service is %s after the reboot" % state


def test_a_refused_change_is_skipped_with_the_kernels_reason(host, read_sysctl, run_module):
    """on_unwritable=skip (the role's default): the key is left alone and the reason given."""
    result = run_module(MODULE, dict(name="vm-probe", settings={NMI: 1}, persist=False, on_unwritable="skip"))
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False and result["changed_keys"] == []
    reason = result["skipped_keys"].get(NMI, "")
    assert reason.startswith("the kernel refused the write: ENOTSUPP 524"), result["skipped_keys"]
    assert "currently 0, wanted 1" in reason
    assert read_sysctl(NMI) == "0"
    assert not host.file("/etc/sysctl.d/90-gpufleet-vm-probe.conf").exists


def test_a_refused_change_fails_with_the_kernels_reason(host, read_sysctl, run_module):
    """on_unwritable=fail: the task fails naming the kernel's error, and the key written
    before it in the same call (kernel.core_uses_pid sorts first) is put back."""
    before = read_sysctl("kernel.core_uses_pid")
    wanted = 1 - int(before)
    result = run_module(MODULE, dict(name="vm-probe", persist=False, on_unwritable="fail",
                                     settings={NMI: 1, "kernel.core_uses_pid": wanted}))
    assert result.get("failed") is True, result
    assert "ENOTSUPP 524" in result["msg"] and NMI in result["msg"], result["msg"]
    assert read_sysctl("kernel.core_uses_pid") == before
    assert read_sysctl(NMI) == "0"
    assert not host.file("/etc/sysctl.d/90-gpufleet-vm-probe.conf").exists
