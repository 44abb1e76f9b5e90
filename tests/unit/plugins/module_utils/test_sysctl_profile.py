"""The sysctl profile engine against a fake /proc/sys, /etc/sysctl.d and state dir."""

import errno
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot, write_tree

HOST = {
    "proc/sys/vm/swappiness": "60\n",
    "proc/sys/kernel/numa_balancing": "1\n",
    "proc/sys/kernel/nmi_watchdog": "1\n",
    "proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t6291456\n",
    "proc/sys/net/core/somaxconn": "4096\n",
    "proc/sys/net/core/rmem_max": "212992\n",
    "proc/self/uid_map": "         0          0 4294967295\n",
    "etc/sysctl.d": None,
}


@pytest.fixture
def fake(tmp_path):
    write_tree(tmp_path, HOST)
    paths = sp.Paths(proc_sys=str(tmp_path / "proc/sys"), sysctl_d=str(tmp_path / "etc/sysctl.d"),
                     state_dir=str(tmp_path / "var/lib/gpufleet"), proc=str(tmp_path / "proc"),
                     root=str(tmp_path))
    return tmp_path, paths


def params(**kw):
    base = dict(name="inference", settings={}, state="present", persist=True, apply=True, priority=90,
                on_unwritable="fail", host_wide="apply")
    base.update(kw)
    return base


def proc(tmp_path, key):
    return read(tmp_path / "proc/sys" / key.replace(".", "/")).strip()


SETTINGS = {"vm.swappiness": 10, "kernel.numa_balancing": 0, "net.ipv4.tcp_rmem": "4096 87380 134217728"}


def test_apply_changes_values_and_persists(fake):
    tmp_path, paths = fake
    result = sp.run(params(settings=SETTINGS), paths=paths)
    assert result["changed"] is True
    assert sorted(result["changed_keys"]) == ["kernel.numa_balancing", "net.ipv4.tcp_rmem", "vm.swappiness"]
    assert proc(tmp_path, "vm.swappiness") == "10"
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 87380 134217728"
    assert result["before"]["vm.swappiness"] == "60"
    assert result["after"]["vm.swappiness"] == "10"
    assert read(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf") == (
        "# Managed by Ansible (gpufleet.tuning.sysctl_profile), profile inference.\n"
        "# Local edits are overwritten on the next run; remove with state=absent.\n"
        "kernel.numa_balancing = 0\n"
        "net.ipv4.tcp_rmem = 4096 87380 134217728\n"
        "vm.swappiness = 10\n")
    state = json.loads(read(tmp_path / "var/lib/gpufleet/inference.json"))
    assert state["originals"] == {"kernel.numa_balancing": "1", "net.ipv4.tcp_rmem": "4096 131072 6291456",
                                  "vm.swappiness": "60"}
    assert result["persisted"] is True and result["reboot_required"] is False


def test_second_run_is_unchanged_and_writes_nothing(fake):
    tmp_path, paths = fake
    sp.run(params(settings=SETTINGS), paths=paths)
    before = snapshot(tmp_path)
    mtime = os.stat(str(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf")).st_mtime_ns
    result = sp.run(params(settings=SETTINGS), paths=paths)
    assert result["changed"] is False
    assert result["changed_keys"] == []
    assert snapshot(tmp_path) == before
    assert os.stat(str(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf")).st_mtime_ns == mtime


def test_tabs_versus_spaces_is_no_change(fake):
    tmp_path, paths = fake
    result = sp.run(params(settings={"net.ipv4.tcp_rmem": [4096, 131072, 6291456]}, persist=False), paths=paths)
    assert result["changed"] is False


def test_check_mode_writes_nothing_and_reports_plan(fake):
    tmp_path, paths = fake
    before = snapshot(tmp_path)
    result = sp.run(params(settings=SETTINGS), check_mode=True, paths=paths)
    assert snapshot(tmp_path) == before
    assert result["changed"] is True
    assert result["after"]["vm.swappiness"] == "10"
    file_diff = [d for d in result["diff"] if d["after_header"].endswith("90-gpufleet-inference.conf")]
    assert "vm.swappiness = 10" in file_diff[0]["after"]
    assert file_diff[0]["before"] == ""


def test_unknown_key_fails_before_any_write(fake):
    tmp_path, paths = fake
    before = snapshot(tmp_path)
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings={"vm.swappiness": 10, "vm.no_such_key": 1}), paths=paths)
    assert "unknown key vm.no_such_key" in exc.value.message
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("settings, fragment", [
    ({"vm/swappiness": 10}, "contains '/'"),
    ({"vm..swappiness": 10}, "empty component"),
    ({"": 10}, "empty key"),
    ({"vm.swappiness": "10\n20"}, "newline"),
    ({"vm.swappiness": 0.5}, "float"),
])
def test_bad_input_fails_with_nothing_written(fake, settings, fragment):
    tmp_path, paths = fake
    before = snapshot(tmp_path)
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings=dict(settings, **{"kernel.numa_balancing": 0})), paths=paths)
    assert fragment in exc.value.message
    assert "nothing was changed" in exc.value.message
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("kw, fragment", [
    (dict(name="Bad Name"), "name 'Bad Name' is not valid"),
    (dict(name="../x"), "is not valid"),
    (dict(priority=100), "priority 100"),
    (dict(settings={}), "settings is empty"),
])
def test_bad_parameters(fake, kw, fragment):
    _tmp_path, paths = fake
    kw.setdefault("settings", {"vm.swappiness": 10})
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(**kw), paths=paths)
    assert fragment in exc.value.message


class FailingKernel(object):
    """Stands in for the kernel refusing one key: sysctl.write_value raises for it."""

    def __init__(self, monkeypatch, key, err, clamp=None):
        self.real = sysctl.write_value
        self.key, self.err, self.clamp = key, err, clamp
        monkeypatch.setattr(sysctl, "write_value", self)

    def __call__(self, key, value, root=sysctl.PROC_SYS):
        if key == self.key and self.clamp is not None:
            # like the kernel clamping an out-of-range value: only that value is altered
            return self.real(key, self.clamp.get(value, value), root)
        if key == self.key:
            raise OSError(self.err, os.strerror(self.err) if self.err < 200 else "Unknown error %d" % self.err)
        return self.real(key, value, root)


def test_failing_write_in_the_middle_restores_earlier_keys(fake, monkeypatch):
    tmp_path, paths = fake
    # Keys are applied in sorted order: kernel.numa_balancing, net.ipv4.tcp_rmem, vm.swappiness.
    FailingKernel(monkeypatch, "vm.swappiness", errno.EINVAL)
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings=SETTINGS), paths=paths)
    msg = exc.value.message
    assert "vm.swappiness" in msg and "'10'" in msg and "EINVAL 22" in msg
    assert "restored" in msg
    assert proc(tmp_path, "kernel.numa_balancing") == "1"
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 131072 6291456"
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert exc.value.partial["after"] == exc.value.partial["before"]  # reports the restored values
    assert os.listdir(str(tmp_path / "etc/sysctl.d")) == []
    assert not (tmp_path / "var/lib/gpufleet").exists()


def test_value_that_does_not_read_back_is_restored(fake, monkeypatch):
    tmp_path, paths = fake
    FailingKernel(monkeypatch, "vm.swappiness", None, clamp={"300": "100"})
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings={"kernel.numa_balancing": 0, "vm.swappiness": 300}), paths=paths)
    assert "vm.swappiness did not take '300'" in exc.value.message
    assert "'100'" in exc.value.message
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert proc(tmp_path, "kernel.numa_balancing") == "1"
    assert not (tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf").exists()


def test_enotsupp_with_skip_is_reported_not_persisted(fake, monkeypatch):
    tmp_path, paths = fake
    FailingKernel(monkeypatch, "kernel.nmi_watchdog", 524)
    result = sp.run(params(settings={"kernel.nmi_watchdog": 0, "vm.swappiness": 10}, on_unwritable="skip"),
                    paths=paths)
    assert result["changed"] is True
    assert result["changed_keys"] == ["vm.swappiness"]
    assert "ENOTSUPP 524" in result["skipped_keys"]["kernel.nmi_watchdog"]
    assert "currently 1, wanted 0" in result["skipped_keys"]["kernel.nmi_watchdog"]
    text = read(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf")
    assert "kernel.nmi_watchdog" not in text
    assert text.endswith("vm.swappiness = 10\n")
    assert proc(tmp_path, "vm.swappiness") == "10"


def test_enotsupp_with_fail_restores(fake, monkeypatch):
    tmp_path, paths = fake
    FailingKernel(monkeypatch, "kernel.nmi_watchdog", 524)
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings={"kernel.nmi_watchdog": 0, "kernel.numa_balancing": 0}), paths=paths)
    assert "kernel.nmi_watchdog" in exc.value.message and "ENOTSUPP 524" in exc.value.message
    assert proc(tmp_path, "kernel.numa_balancing") == "1"


def test_einval_is_never_skipped(fake, monkeypatch):
    _tmp_path, paths = fake
    FailingKernel(monkeypatch, "vm.swappiness", errno.EINVAL)
    with pytest.raises(sp.ProfileError):
        sp.run(params(settings={"vm.swappiness": 10}, on_unwritable="skip"), paths=paths)


def test_unwritable_precheck_skip_and_fail(fake, monkeypatch):
    tmp_path, paths = fake
    real = sysctl.writable
    monkeypatch.setattr(sysctl, "writable", lambda key, root=sysctl.PROC_SYS: (
        (False, "/proc/sys is on a read-only mount") if key.startswith("vm.") else real(key, root)))
    before = snapshot(tmp_path)
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings={"vm.swappiness": 10, "net.core.somaxconn": 8192}), paths=paths)
    assert "cannot write vm.swappiness" in exc.value.message and "read-only" in exc.value.message
    assert snapshot(tmp_path) == before
    result = sp.run(params(settings={"vm.swappiness": 10, "net.core.somaxconn": 8192}, on_unwritable="skip"),
                    paths=paths)
    assert "read-only" in result["skipped_keys"]["vm.swappiness"]
    assert proc(tmp_path, "net.core.somaxconn") == "8192"
    assert proc(tmp_path, "vm.swappiness") == "60"


def test_unwritable_but_already_right_is_fine(fake, monkeypatch):
    _tmp_path, paths = fake
    monkeypatch.setattr(sysctl, "writable", lambda key, root=sysctl.PROC_SYS: (False, "read-only"))
    result = sp.run(params(settings={"vm.swappiness": 60}, persist=False), paths=paths)
    assert result["changed"] is False and result["skipped_keys"] == {}


def test_host_wide_skip_in_container(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"run/.containerenv": "", "proc/1/environ": "container=podman\0"})
    os.remove(str(tmp_path / "proc/sys/net/core/rmem_max"))  # absent outside the initial netns
    result = sp.run(params(settings={"vm.swappiness": 10, "net.core.somaxconn": 8192, "net.core.rmem_max": 1 << 27},
                           host_wide="skip"), paths=paths)
    assert result["container"]["detected"] is True
    assert result["changed_keys"] == ["net.core.somaxconn"]
    assert "host-wide" in result["skipped_keys"]["vm.swappiness"]
    assert "currently 60, wanted 10" in result["skipped_keys"]["vm.swappiness"]
    assert "not visible" in result["skipped_keys"]["net.core.rmem_max"]
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert "vm.swappiness = " not in read(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf")


def test_missing_host_wide_key_in_container_hints_at_host(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"run/.containerenv": "", "proc/1/environ": "container=podman\0"})
    os.remove(str(tmp_path / "proc/sys/net/core/rmem_max"))
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings={"net.core.rmem_max": 1 << 27}), paths=paths)
    assert "set it on the host" in exc.value.message


def test_absent_restores_originals_and_removes_files(fake):
    tmp_path, paths = fake
    sp.run(params(settings=SETTINGS), paths=paths)
    result = sp.run(params(state="absent"), paths=paths)
    assert result["changed"] is True
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 131072 6291456"
    assert not (tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf").exists()
    assert not (tmp_path / "var/lib/gpufleet/inference.json").exists()
    again = sp.run(params(state="absent"), paths=paths)
    assert again["changed"] is False


def test_absent_check_mode_writes_nothing(fake):
    tmp_path, paths = fake
    sp.run(params(settings=SETTINGS), paths=paths)
    before = snapshot(tmp_path)
    result = sp.run(params(state="absent"), check_mode=True, paths=paths)
    assert result["changed"] is True and result["after"]["vm.swappiness"] == "60"
    assert snapshot(tmp_path) == before


def test_absent_subset_and_unmappable_keys(fake):
    tmp_path, paths = fake
    sp.run(params(settings=SETTINGS), paths=paths)
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(state="absent", settings={"vm.dirty_ratio": 0}), paths=paths)
    assert "cannot remove vm.dirty_ratio" in exc.value.message
    result = sp.run(params(state="absent", settings={"vm.swappiness": None}), paths=paths)
    assert result["changed_keys"] == ["vm.swappiness"]
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert proc(tmp_path, "kernel.numa_balancing") == "0"
    text = read(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf")
    assert "vm.swappiness" not in text and "kernel.numa_balancing = 0" in text
    assert result["persisted"] is True


def test_persist_false_removes_file_apply_false_reports_reboot(fake):
    tmp_path, paths = fake
    result = sp.run(params(settings={"vm.swappiness": 10}, apply=False), paths=paths)
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert result["reboot_required"] is True and result["persisted"] is True
    assert (tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf").exists()
    result = sp.run(params(settings={"vm.swappiness": 10}, persist=False), paths=paths)
    assert not (tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf").exists()
    assert result["persisted"] is False and proc(tmp_path, "vm.swappiness") == "10"


def test_priority_change_moves_the_file(fake):
    tmp_path, paths = fake
    sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    result = sp.run(params(settings={"vm.swappiness": 10}, priority=95), paths=paths)
    assert result["changed"] is True
    assert sorted(os.listdir(str(tmp_path / "etc/sysctl.d"))) == ["95-gpufleet-inference.conf"]


def test_corrupt_state_file_is_an_error_naming_it(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"var/lib/gpufleet/inference.json": "{not json"})
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "inference.json" in exc.value.message


def test_file_write_failure_restores_runtime(fake, monkeypatch):
    tmp_path, paths = fake
    from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops

    def refuse(path, *a, **k):
        raise OSError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(fileops, "write_atomic", refuse)
    with pytest.raises(sp.ProfileError) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "EACCES" in exc.value.message
    assert proc(tmp_path, "vm.swappiness") == "60"
