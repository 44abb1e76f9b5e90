"""cpu_power_boot: the files it wants and the trust checks they carry (the engine's own tests,
test_cpu_power.py, run the script and install the unit)."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import cpu_power_boot as boot
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files as mf
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust

SETTINGS = (10, False, "performance", None)


def test_on_a_node_every_file_is_checked_from_slash():
    items = boot.wanted(True, SETTINGS)
    assert [(i.path, i.trust_root, i.trusted_uid, i.owner) for i in items] == [
        ("/usr/local/sbin/gpufleet-cpu-power", "/", 0, (0, 0)),
        ("/etc/systemd/system/gpufleet-cpu-power.service", "/", 0, (0, 0)),
        ("/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service", "/", 0, (0, 0))]
    assert trust.interpreter_of(items[0].content) == boot.SHELL == "/bin/sh"


def test_removing_needs_no_trust_check():
    assert [i.trust_root for i in boot.wanted(False, SETTINGS)] == [None, None, None]


def test_a_temp_tree_is_checked_from_its_top_or_the_root_given(tmp_path):
    items = boot.wanted(True, SETTINGS, systemd_dir=str(tmp_path / "etc/systemd/system"),
                        script_path=str(tmp_path / "usr/local/sbin/x"))
    assert set(i.trust_root for i in items) == {str(tmp_path)}
    items = boot.wanted(True, SETTINGS, systemd_dir=str(tmp_path / "a"), script_path=str(tmp_path / "b/x"),
                        root=str(tmp_path / "a"), trusted_uid=1000)
    assert set((i.trust_root, i.trusted_uid) for i in items) == {(str(tmp_path / "a"), 1000)}


def test_a_shell_another_user_can_change_is_refused(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    shell = tmp_path / "bin/sh"
    shell.write_text("")
    os.chmod(str(shell), 0o755)
    os.chown(str(shell), 1000, 1000)
    monkeypatch.setattr(boot, "SHELL", str(shell))
    items = boot.wanted(True, SETTINGS, systemd_dir=str(tmp_path / "etc/systemd/system"),
                        script_path=str(tmp_path / "usr/local/sbin/x"))
    assert items[0].content.startswith("#!%s\n" % shell)
    with pytest.raises(trust.Untrusted) as exc:
        mf.plan(items)
    assert exc.value.filename == str(shell)
    assert "the interpreter %s, which root runs %s with" % (shell, tmp_path / "usr/local/sbin/x") in exc.value.strerror
    os.chown(str(shell), 0, 0)
    assert len(mf.plan(items)) == 3


def test_the_script_path_must_be_absolute():
    with pytest.raises(ValueError):
        boot.wanted(True, SETTINGS, script_path="gpufleet-cpu-power")


def test_the_script_carries_the_settings_a_null_as_an_empty_word():
    script = boot.render_script(None, True, "performance", None)
    assert script.startswith("#!/bin/sh\n# Managed by Ansible (gpufleet.tuning.cpu_power)")
    assert mf.is_owned(script)
    assert script.splitlines()[6:10] == ["max_idle_latency_us=''", "enable_within_bound='1'",
                                         "governor='performance'", "epp=''"]
    assert "GPUFLEET_CPU_SYSFS:-/sys/devices/system/cpu" in script


@pytest.mark.skipif(not os.path.exists("/bin/sh"), reason="no /bin/sh to parse the script")
def test_the_script_parses_as_posix_sh(tmp_path):
    import subprocess
    path = tmp_path / "script"
    path.write_text(boot.render_script(170, False, "performance", "performance"))
    subprocess.run(["/bin/sh", "-n", str(path)], check=True)


def test_the_unit_runs_the_script_once_after_coldplug():
    unit = boot.render_unit("/usr/local/sbin/gpufleet-cpu-power")
    assert mf.is_owned(unit)
    assert "\nExecStart=/usr/local/sbin/gpufleet-cpu-power\n" in unit
    assert "\nType=oneshot\n" in unit and "\nRemainAfterExit=yes\n" in unit
    assert "After=systemd-modules-load.service systemd-udev-trigger.service\n" in unit
    assert unit.endswith("[Install]\nWantedBy=multi-user.target\n")


def test_removing_names_the_link_the_unit_and_the_script():
    assert [(i.path, i.absent) for i in boot.wanted(False, SETTINGS)] == [
        ("/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service", True),
        ("/etc/systemd/system/gpufleet-cpu-power.service", True),
        ("/usr/local/sbin/gpufleet-cpu-power", True)]
