"""The sysctl profile engine against a fake /proc/sys, /etc/sysctl.d and state dir."""

import errno
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.tests.unit.helpers import role_base_defaults
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


@pytest.fixture(autouse=True)
def every_run_keeps_the_record_contract(monkeypatch):
    contract.checking_records(monkeypatch, sp)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    write_tree(tmp_path, HOST)
    printing_kernel(monkeypatch)
    paths = sp.Paths(str(tmp_path))
    return tmp_path, paths


def printing_kernel(monkeypatch):
    """The fake /proc/sys files read back as the kernel prints: fields tab-separated and a
    newline, whatever was written (the real sysctl.write_value does the write). Snapshots
    of a restored tree then compare byte for byte."""
    real = sysctl.write_value

    def write_value(key, value, root=sysctl.PROC_SYS):
        real(key, value, root)
        path = sysctl.key_path(key, root)
        with open(path) as handle:
            text = handle.read()
        with open(path, "w") as handle:
            handle.write("\t".join(text.split()) + "\n")
    monkeypatch.setattr(sysctl, "write_value", write_value)


def params(**kw):
    base = dict(name="inference", settings={}, state="present", persist=True, apply=True, priority=90,
                on_unwritable="fail", host_wide="apply")
    base.update(kw)
    return base


def proc(tmp_path, key):
    return " ".join(read(tmp_path / "proc/sys" / key.replace(".", "/")).split())


SETTINGS = {"vm.swappiness": 10, "kernel.numa_balancing": 0, "net.ipv4.tcp_rmem": "4096 87380 134217728"}


def test_apply_changes_values_and_persists(fake):
    """SETTINGS carries the replayed node's tcp_rmem (87380, an old default): the kernel's
    131072 is kept (raise_only), the max raised, and the file persists what is live."""
    tmp_path, paths = fake
    result = sp.run(params(settings=SETTINGS), paths=paths)
    assert result["changed"] is True
    assert sorted(result["changed_keys"]) == ["kernel.numa_balancing", "net.ipv4.tcp_rmem", "vm.swappiness"]
    assert proc(tmp_path, "vm.swappiness") == "10"
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 131072 134217728"
    assert result["before"]["vm.swappiness"] == "60"
    assert result["after"]["vm.swappiness"] == "10"
    assert result["kept_higher"] == {"net.ipv4.tcp_rmem": {
        "wanted": "4096 87380 134217728", "effective": "4096 131072 134217728", "fields": [2]}}
    assert read(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf") == (
        "# Managed by Ansible (gpufleet.tuning.sysctl_profile), profile inference.\n"
        "# Local edits are overwritten on the next run; remove with state=absent.\n"
        "kernel.numa_balancing = 0\n"
        "net.ipv4.tcp_rmem = 4096 131072 134217728\n"
        "vm.swappiness = 10\n")
    state = json.loads(read(tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json"))
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
    with pytest.raises(ModuleFailure) as exc:
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
    with pytest.raises(ModuleFailure) as exc:
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
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(**kw), paths=paths)
    assert fragment in exc.value.message


class FailingKernel:
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
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings=SETTINGS), paths=paths)
    msg = exc.value.message
    assert "vm.swappiness" in msg and "'10'" in msg and "EINVAL 22" in msg
    assert "restored" in msg
    assert proc(tmp_path, "kernel.numa_balancing") == "1"
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 131072 6291456"
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert exc.value.partial["after"] == exc.value.partial["before"]  # reports the restored values
    assert os.listdir(str(tmp_path / "etc/sysctl.d")) == []
    assert not (tmp_path / "var/lib/gpufleet-tuning").exists()


def test_value_that_does_not_read_back_is_restored(fake, monkeypatch):
    tmp_path, paths = fake
    FailingKernel(monkeypatch, "vm.swappiness", None, clamp={"300": "100"})
    with pytest.raises(ModuleFailure) as exc:
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
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"kernel.nmi_watchdog": 0, "kernel.numa_balancing": 0}), paths=paths)
    assert "kernel.nmi_watchdog" in exc.value.message and "ENOTSUPP 524" in exc.value.message
    assert proc(tmp_path, "kernel.numa_balancing") == "1"


def test_einval_is_never_skipped(fake, monkeypatch):
    _tmp_path, paths = fake
    FailingKernel(monkeypatch, "vm.swappiness", errno.EINVAL)
    with pytest.raises(ModuleFailure):
        sp.run(params(settings={"vm.swappiness": 10}, on_unwritable="skip"), paths=paths)


def test_unwritable_precheck_skip_and_fail(fake, monkeypatch):
    tmp_path, paths = fake
    real = sysctl.writable
    monkeypatch.setattr(sysctl, "writable", lambda key, root=sysctl.PROC_SYS: (
        (False, "/proc/sys is on a read-only mount") if key.startswith("vm.") else real(key, root)))
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
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
    with pytest.raises(ModuleFailure) as exc:
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
    assert not (tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json").exists()
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
    with pytest.raises(ModuleFailure) as exc:
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
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/sysctl/inference.json": "{not json"})
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "inference.json" in exc.value.message


def test_file_write_failure_restores_runtime(fake, monkeypatch):
    tmp_path, paths = fake
    from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

    def refuse(path, *a, **k):
        raise OSError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(fileops, "write_atomic", refuse)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "EACCES" in exc.value.message
    assert str(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf") in exc.value.message
    assert proc(tmp_path, "vm.swappiness") == "60"


# ================================================================================================
# Fakes of what the kernel really does with a write (kernel/sysctl.c), and of file faults.
# ================================================================================================

INT_MAX = 2147483647


class IntVectorKernel:
    """sysctl.write_value for the fake tree, doing what __do_proc_dointvec_minmax does: the
    fields are parsed one by one (base 0: a leading 0 is octal, 0x hex) and each is stored into
    the live value before the next is parsed; a field out of [min, max] ends the write with
    EINVAL with the earlier fields already live; fewer fields leave the rest; extra ones are
    ignored. ``limits`` maps a key to (min, max); other keys are written as given."""

    def __init__(self, monkeypatch, limits, refuse_restore=None):
        self.real = sysctl.write_value
        self.limits = limits
        self.refuse_restore = refuse_restore or {}
        self.writes = []
        monkeypatch.setattr(sysctl, "write_value", self)

    @staticmethod
    def parse(field):
        sign = -1 if field.startswith("-") else 1
        digits = field.lstrip("-")
        if digits.lower().startswith("0x"):
            return sign * int(digits, 16)
        if len(digits) > 1 and digits.startswith("0"):
            return sign * int(digits, 8)
        return sign * int(digits, 10)

    def __call__(self, key, value, root=sysctl.PROC_SYS):
        self.writes.append((key, value))
        if value == self.refuse_restore.get(key):
            raise OSError(errno.EPERM, "Operation not permitted")
        if key not in self.limits:
            return self.real(key, value, root)
        low, high = self.limits[key]
        live = sysctl.read_value(key, root).split(" ")
        for index, field in enumerate(value.split()):
            if index >= len(live):
                break
            try:
                number = self.parse(field)
            except ValueError:
                raise OSError(errno.EINVAL, "Invalid argument")
            if (low is not None and number < low) or (high is not None and number > high):
                raise OSError(errno.EINVAL, "Invalid argument")
            live[index] = str(number)
            self.real(key, "\t".join(live) + "\n", root)


class FileFault:
    """Make file reads (fileops.read_bytes) or writes (fileops.write_atomic) under ``prefix``
    fail with ``err`` once the kernel has taken a first write in this run."""

    def __init__(self, monkeypatch, prefix, err, op="read"):
        self.prefix, self.err, self.armed = str(prefix), err, False
        real_write = sysctl.write_value

        def write_value(key, value, root=sysctl.PROC_SYS):
            real_write(key, value, root)
            self.armed = True
        monkeypatch.setattr(sysctl, "write_value", write_value)
        name = "read_bytes" if op == "read" else "write_atomic"
        real = getattr(fileops, name)

        def faulty(path, *args, **kwargs):
            if self.armed and str(path).startswith(self.prefix):
                raise OSError(self.err, os.strerror(self.err), str(path))
            return real(path, *args, **kwargs)
        monkeypatch.setattr(fileops, name, faulty)


CONF = "etc/sysctl.d/90-gpufleet-inference.conf"
MARKED = "# Managed by Ansible (gpufleet.tuning.sysctl_profile), profile inference.\n"


# ================================================================================================
# 1. Files the module does not own
# ================================================================================================

@pytest.mark.parametrize("foreign", [
    "90-gpufleet-other-a.conf",      # the reported case: a suffix match on "-a.conf"
    "90-gpufleet-xa.conf",
    "90-gpufleet-a.conf.bak",
    "90-gpufleet-a.confx",
    "x90-gpufleet-a.conf",
    "990-gpufleet-a.conf",
    "9-gpufleet-a.conf",
    "90-gpufleet-a-b.conf",
    "\u0669\u0660-gpufleet-a.conf",  # Arabic-Indic digits are \\d in a str regex, not a priority
    "90-gpufleet-A.conf",
])
@pytest.mark.parametrize("kw", [dict(priority=95), dict(state="absent")])
def test_other_profiles_files_are_never_touched(fake, foreign, kw):
    tmp_path, paths = fake
    write_tree(tmp_path, {"etc/sysctl.d/" + foreign: MARKED + "vm.swappiness = 1\n"})
    sp.run(params(name="a", settings={"vm.swappiness": 10}), paths=paths)
    before = snapshot(tmp_path / "etc/sysctl.d")
    result = sp.run(params(name="a", settings={"vm.swappiness": 10} if "state" not in kw else {}, **kw), paths=paths)
    after = snapshot(tmp_path / "etc/sysctl.d")
    assert after[foreign] == before[foreign]
    assert all(foreign not in d["before_header"] for d in result["diff"])


def test_profile_file_pattern_is_exact():
    pattern = sp.profile_file_re("a")
    assert pattern.fullmatch("00-gpufleet-a.conf") and pattern.fullmatch("99-gpufleet-a.conf")
    for name in ("90-gpufleet-other-a.conf", "90-gpufleet-a.conf\n", "90-gpufleet-a.conf.dpkg-old"):
        assert not pattern.fullmatch(name)


def test_an_owned_file_of_this_profile_under_another_priority_is_removed(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"etc/sysctl.d/50-gpufleet-inference.conf": MARKED + "vm.swappiness = 5\n"})
    result = sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert sorted(os.listdir(str(tmp_path / "etc/sysctl.d"))) == ["90-gpufleet-inference.conf"]
    assert any(d["before_header"].endswith("50-gpufleet-inference.conf") for d in result["diff"])


@pytest.mark.parametrize("where, kw, action", [
    ("etc/sysctl.d/90-gpufleet-inference.conf", dict(settings={"vm.swappiness": 10}), "overwrite"),
    ("etc/sysctl.d/90-gpufleet-inference.conf", dict(settings={"vm.swappiness": 10}, persist=False), "remove"),
    ("etc/sysctl.d/50-gpufleet-inference.conf", dict(settings={"vm.swappiness": 10}), "remove"),
    ("etc/sysctl.d/90-gpufleet-inference.conf", dict(state="absent"), "remove"),
    ("etc/sysctl.d/50-gpufleet-inference.conf", dict(state="absent"), "remove"),
])
def test_a_file_without_the_marker_is_refused_unless_adopted(fake, where, kw, action):
    tmp_path, paths = fake
    write_tree(tmp_path, {where: "# the operator's own tuning\nvm.swappiness = 1\n"})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(**kw), paths=paths)
    msg = exc.value.message
    assert str(tmp_path / where) in msg
    assert "not written by gpufleet.tuning" in msg and "refusing to %s it" % action in msg
    assert "adopt=true" in msg and "nothing was changed" in msg
    assert snapshot(tmp_path) == before
    result = sp.run(params(adopt=True, **kw), paths=paths)
    assert result["changed"] is True
    if action == "remove":
        assert not os.path.lexists(str(tmp_path / where))
    else:
        assert read(tmp_path / where).startswith(MARKED)


def test_absent_subset_refuses_a_foreign_file(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {CONF: "vm.swappiness = 1\n"})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(state="absent", settings={"vm.swappiness": None}), paths=paths)
    assert "refusing to edit it" in exc.value.message
    assert snapshot(tmp_path) == before


def test_symlink_to_our_file_is_written_through_and_removed_as_a_link(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"srv/config/inference.conf": MARKED + "vm.swappiness = 1\n"})
    os.symlink(str(tmp_path / "srv/config/inference.conf"), str(tmp_path / CONF))
    sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert os.path.islink(str(tmp_path / CONF))
    assert "vm.swappiness = 10" in read(tmp_path / "srv/config/inference.conf")
    result = sp.run(params(state="absent"), paths=paths)
    assert result["changed"] is True
    assert not os.path.lexists(str(tmp_path / CONF))
    assert (tmp_path / "srv/config/inference.conf").exists()      # the target is not ours to delete


def test_symlink_to_dev_null_masks_the_profile_and_is_refused(fake):
    tmp_path, paths = fake
    os.symlink("/dev/null", str(tmp_path / CONF))
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "a symlink to /dev/null (masks it)" in exc.value.message
    assert snapshot(tmp_path) == before
    assert proc(tmp_path, "vm.swappiness") == "60"


def test_adopting_a_masking_symlink_replaces_it_and_a_rollback_puts_it_back(fake, monkeypatch):
    tmp_path, paths = fake
    os.symlink("/dev/null", str(tmp_path / CONF))
    before = snapshot(tmp_path)
    FileFault(monkeypatch, tmp_path / "var", errno.EROFS, op="write")
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}, adopt=True), paths=paths)
    assert "symlink %s -> /dev/null" % (tmp_path / CONF) in exc.value.message
    assert snapshot(tmp_path) == before
    monkeypatch.undo()
    sp.run(params(settings={"vm.swappiness": 10}, adopt=True), paths=paths)
    assert not os.path.islink(str(tmp_path / CONF)) and read(tmp_path / CONF).startswith(MARKED)


def test_dangling_symlink_is_refused(fake):
    tmp_path, paths = fake
    os.symlink("/nonexistent/inference.conf", str(tmp_path / CONF))
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(state="absent"), paths=paths)
    assert "a dangling symlink to /nonexistent/inference.conf" in exc.value.message
    assert os.path.islink(str(tmp_path / CONF))


@pytest.mark.parametrize("make, fragment", [
    (os.makedirs, "is a directory"),
    (os.mkfifo, "FIFO"),
    (lambda p: open(p, "wb").write(b"# gpufleet.tuning\nvm.swappiness = \xff\n"), "not valid UTF-8"),
])
def test_unusable_profile_file_is_refused_by_name(fake, make, fragment):
    tmp_path, paths = fake
    make(str(tmp_path / CONF))
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert str(tmp_path / CONF) in exc.value.message and fragment in exc.value.message
    assert "nothing was changed" in exc.value.message
    assert snapshot(tmp_path) == before


# ================================================================================================
# 2. A rollback is a restore
# ================================================================================================

def test_half_applied_vector_is_restored_with_every_key_and_file(fake, monkeypatch):
    """The kernel takes tcp_rmem's first two fields, then rejects the third (above INT_MAX):
    the write fails with part of it live. Everything is put back, byte for byte."""
    tmp_path, paths = fake
    kernel = IntVectorKernel(monkeypatch, {"net.ipv4.tcp_rmem": (1, INT_MAX)})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"kernel.numa_balancing": 0, "vm.swappiness": 10,
                                "net.ipv4.tcp_rmem": "8192 262144 99999999999"}), paths=paths)
    msg = exc.value.message
    assert "failed to set net.ipv4.tcp_rmem to '8192 262144 99999999999': EINVAL 22" in msg
    assert "after the kernel had taken part of it (it read '8192 262144 6291456', was '4096 131072 6291456')" in msg
    assert "restored: net.ipv4.tcp_rmem to '4096 131072 6291456' (it was '8192 262144 6291456')" in msg
    assert "kernel.numa_balancing to '1' (it was '0')" in msg
    assert "the machine is as it was before this run" in msg
    assert "NOT restored" not in msg
    assert snapshot(tmp_path) == before
    assert exc.value.partial["after"] == exc.value.partial["before"]
    assert exc.value.partial["rollback_errors"] == []
    # vm.swappiness sorts after tcp_rmem: never written
    assert ("vm.swappiness", "10") not in kernel.writes


def test_half_applied_first_key_is_restored(fake, monkeypatch):
    tmp_path, paths = fake
    IntVectorKernel(monkeypatch, {"net.ipv4.tcp_rmem": (1, INT_MAX)})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"net.ipv4.tcp_rmem": "4097 131073 0"}, raise_only=[]), paths=paths)
    assert "restored: net.ipv4.tcp_rmem to '4096 131072 6291456' (it was '4097 131073 6291456')" in exc.value.message
    assert snapshot(tmp_path) == before


def test_rejected_write_that_changed_nothing_says_so(fake, monkeypatch):
    tmp_path, paths = fake
    IntVectorKernel(monkeypatch, {"net.ipv4.tcp_rmem": (1, INT_MAX)})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"net.ipv4.tcp_rmem": "0 131072 6291456"}, raise_only=[]), paths=paths)
    msg = exc.value.message
    assert "(the kernel left it at '4096 131072 6291456')" in msg
    assert "nothing had been changed yet" in msg
    assert snapshot(tmp_path) == before


def test_a_key_never_reached_needs_no_undo(fake, monkeypatch):
    tmp_path, paths = fake
    # the kernel takes the new swappiness but refuses to take the old value back
    IntVectorKernel(monkeypatch, {"net.ipv4.tcp_rmem": (1, INT_MAX)}, refuse_restore={"vm.swappiness": "60"})
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"kernel.numa_balancing": 0, "net.core.somaxconn": 8192,
                                "net.ipv4.tcp_rmem": "4097 131073 99999999999", "vm.swappiness": 10},
                      raise_only=[]), paths=paths)
    msg = exc.value.message
    # sorted: kernel.numa_balancing, net.core.somaxconn, net.ipv4.tcp_rmem (fails), vm.swappiness (not reached)
    assert "restored: net.ipv4.tcp_rmem" in msg and "NOT restored" not in msg
    assert proc(tmp_path, "vm.swappiness") == "60"


def test_a_failed_undo_is_reported_with_the_value_left(fake, monkeypatch):
    tmp_path, paths = fake
    IntVectorKernel(monkeypatch, {}, refuse_restore={"kernel.numa_balancing": "1"})
    FileFault(monkeypatch, tmp_path / "etc", errno.EROFS, op="write")
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"kernel.numa_balancing": 0, "vm.swappiness": 10}), paths=paths)
    msg = exc.value.message
    assert "restored: vm.swappiness to '60' (it was '10')" in msg
    assert ("NOT restored (fix by hand): undo of sysctl kernel.numa_balancing: kernel.numa_balancing is still "
            "'0': writing back '1' failed: EPERM 1 (Operation not permitted)") in msg
    assert exc.value.partial["after"]["kernel.numa_balancing"] == "0"   # what is really there
    assert exc.value.partial["rollback_errors"]


def test_file_read_error_after_the_runtime_writes_rolls_back_cleanly(fake, monkeypatch):
    """The reported traceback: a file read failing once /proc/sys was written. Now a clean
    ModuleFailure naming the file, and every runtime write undone."""
    tmp_path, paths = fake
    write_tree(tmp_path, {CONF: MARKED + "vm.swappiness = 20\n"})
    before = snapshot(tmp_path)
    FileFault(monkeypatch, tmp_path / "etc", errno.EIO, op="read")
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings=SETTINGS), paths=paths)
    msg = exc.value.message
    assert "%s: Input/output error (EIO)" % (tmp_path / CONF) in msg
    assert "restored:" in msg and "vm.swappiness to '60'" in msg
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("fault_on", ["etc", "var"])
def test_read_only_filesystem_names_the_path_and_leaves_no_directories(fake, monkeypatch, fault_on):
    tmp_path, paths = fake
    os.rmdir(str(tmp_path / "etc/sysctl.d"))     # the run creates /etc/sysctl.d and the state dirs
    before = snapshot(tmp_path)
    FileFault(monkeypatch, tmp_path / fault_on, errno.EROFS, op="write")
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings=SETTINGS), paths=paths)
    msg = exc.value.message
    expected = tmp_path / (CONF if fault_on == "etc" else "var/lib/gpufleet-tuning/sysctl/inference.json")
    assert "failed to update %s: Read-only file system (EROFS)" % expected in msg
    assert "EROFS 30" not in msg
    assert snapshot(tmp_path) == before            # no sysctl.d, no var/lib/gpufleet-tuning left behind
    assert not (tmp_path / "var").exists() and not (tmp_path / "etc/sysctl.d").exists()


def test_rollback_restores_an_owned_files_bytes_and_mode(fake, monkeypatch):
    tmp_path, paths = fake
    write_tree(tmp_path, {CONF: MARKED + "vm.swappiness = 20\n",
                          "etc/sysctl.d/50-gpufleet-inference.conf": MARKED + "vm.swappiness = 5\n"})
    os.chmod(str(tmp_path / CONF), 0o600)
    before = snapshot(tmp_path)
    FileFault(monkeypatch, tmp_path / "var", errno.ENOSPC, op="write")
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "No space left on device (ENOSPC)" in exc.value.message
    assert "file %s" % (tmp_path / CONF) in exc.value.message
    assert snapshot(tmp_path) == before


def test_an_existing_files_mode_is_kept(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {CONF: MARKED + "vm.swappiness = 20\n"})
    os.chmod(str(tmp_path / CONF), 0o640)
    sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert os.stat(str(tmp_path / CONF)).st_mode & 0o777 == 0o640


def test_a_value_the_kernel_rounds_fails_naming_what_it_keeps(fake, monkeypatch):
    """ms-to-jiffies handlers round (HZ=250: 1 ms is stored as 4): the write did not stick,
    so the run fails, restores, and names the value to put in the profile."""
    tmp_path, paths = fake
    write_tree(tmp_path, {"proc/sys/net/ipv4/neigh/default/retrans_time_ms": "1000\n"})
    FailingKernel(monkeypatch, "net.ipv4.neigh.default.retrans_time_ms", None, clamp={"1001": "1004"})
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"net.ipv4.neigh.default.retrans_time_ms": 1001}), paths=paths)
    assert "did not take '1001': the kernel reports '1004'" in exc.value.message
    assert "put '1004' in the profile" in exc.value.message
    assert proc(tmp_path, "net.ipv4.neigh.default.retrans_time_ms") == "1000"
    result = sp.run(params(settings={"net.ipv4.neigh.default.retrans_time_ms": 1004}), paths=paths)
    assert result["changed"] is True
    assert sp.run(params(settings={"net.ipv4.neigh.default.retrans_time_ms": 1004}), paths=paths)["changed"] is False


def test_absent_restore_that_half_applies_is_rolled_back(fake, monkeypatch):
    tmp_path, paths = fake
    sp.run(params(settings={"net.ipv4.tcp_rmem": "8192 262144 134217728", "vm.swappiness": 10}), paths=paths)
    # the remembered original is one the kernel now rejects in its last field
    state = tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json"
    data = json.loads(read(state))
    data["originals"]["net.ipv4.tcp_rmem"] = "4096 131072 99999999999"
    state.write_text(json.dumps(data))
    IntVectorKernel(monkeypatch, {"net.ipv4.tcp_rmem": (1, INT_MAX)})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(state="absent"), paths=paths)
    assert "failed to remove profile inference: failed to set net.ipv4.tcp_rmem" in exc.value.message
    assert "restored: net.ipv4.tcp_rmem to '8192 262144 134217728'" in exc.value.message
    assert snapshot(tmp_path) == before


# ================================================================================================
# 3. The state file is data
# ================================================================================================

@pytest.mark.parametrize("originals, fragment", [
    ({"vm.swappiness": None}, "vm.swappiness: value None is null"),
    ({"vm.swappiness": 60}, "vm.swappiness: value 60 is a int"),
    ({"vm.swappiness": ["60"]}, "is a list"),
    ({"vm.swappiness": "6\n0"}, "newline"),
    ({"vm.swappiness": "60\t"}, "whitespace-folded"),
    ({"vm/swappiness": "60"}, "key 'vm/swappiness' contains '/'"),
    ({"..": "60"}, "key '..' has an empty component"),
    ({"vm..swappiness": "60"}, "empty component"),
    ({"../../../etc/passwd": "x"}, "contains '/'"),
    ({"": "60"}, "empty key"),
    ({"vm swappiness": "60"}, "is not a dotted sysctl name"),
])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_state_file_entries_are_validated_before_use(fake, originals, fragment, state):
    tmp_path, paths = fake
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/sysctl/inference.json": json.dumps({"profile": "inference", "originals": originals}),
                          CONF: MARKED + "vm.swappiness = 10\n"})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(state=state, settings={"vm.swappiness": 10} if state == "present" else {}), paths=paths)
    msg = exc.value.message
    assert str(tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json") in msg
    assert fragment in msg and "nothing was changed" in msg
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("text, fragment", [
    ("[]", "not a JSON object"),
    ('{"originals": []}', "not a JSON object"),
    ('{"originals": null}', "not a JSON object"),
    ('{"profile": "other", "originals": {}}', "belongs to profile 'other'"),
    ("{not json", "not valid JSON"),
])
def test_malformed_state_file_is_refused_naming_it(fake, text, fragment):
    tmp_path, paths = fake
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/sysctl/inference.json": text})
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(state="absent"), paths=paths)
    assert "inference.json" in exc.value.message and fragment in exc.value.message


def test_unreadable_state_file_names_it(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/sysctl/inference.json": b"{\"originals\": {\"vm.swappiness\": \"\xff\"}}"})
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "%s: is not valid UTF-8" % (tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json") in exc.value.message


def test_only_written_keys_are_remembered(fake):
    tmp_path, paths = fake
    sp.run(params(settings={"vm.swappiness": 10, "net.core.somaxconn": 4096}), paths=paths)
    state = json.loads(read(tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json"))
    assert state == {"profile": "inference", "originals": {"vm.swappiness": "60"}}


# ================================================================================================
# 4. Buffer and limit keys are only raised
# ================================================================================================

def test_raise_only_replayed_node_is_idempotent_and_check_mode_agrees(fake):
    tmp_path, paths = fake
    settings = {"net.ipv4.tcp_rmem": "4096 87380 134217728"}
    first = sp.run(params(settings=settings), paths=paths)
    assert first["before"]["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    assert first["after"]["net.ipv4.tcp_rmem"] == "4096 131072 134217728"
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 131072 134217728"
    assert "net.ipv4.tcp_rmem = 4096 131072 134217728\n" in read(tmp_path / CONF)
    snap = snapshot(tmp_path)
    for check in (False, True):
        again = sp.run(params(settings=settings), check_mode=check, paths=paths)
        assert again["changed"] is False and again["changed_keys"] == []
        assert again["kept_higher"]["net.ipv4.tcp_rmem"]["fields"] == [2]
    assert snapshot(tmp_path) == snap


def test_raise_only_kernel_higher_everywhere_writes_nothing_at_runtime(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"proc/sys/net/core/rmem_max": "4194304\n"})
    result = sp.run(params(settings={"net.core.rmem_max": 212992}), paths=paths)
    assert result["changed_keys"] == []
    assert result["kept_higher"] == {"net.core.rmem_max": {"wanted": "212992", "effective": "4194304", "fields": [1]}}
    assert "net.core.rmem_max = 4194304\n" in read(tmp_path / CONF)   # the file must not lower it at boot
    assert proc(tmp_path, "net.core.rmem_max") == "4194304"


def test_raise_only_check_mode_plans_the_effective_value(fake):
    tmp_path, paths = fake
    before = snapshot(tmp_path)
    result = sp.run(params(settings={"net.ipv4.tcp_rmem": [4096, 87380, 134217728]}), check_mode=True, paths=paths)
    assert result["after"]["net.ipv4.tcp_rmem"] == "4096 131072 134217728"
    file_diff = [d for d in result["diff"] if d["after_header"].endswith(os.path.basename(CONF))][0]
    assert "net.ipv4.tcp_rmem = 4096 131072 134217728" in file_diff["after"]
    assert snapshot(tmp_path) == before


def test_raise_only_off_writes_exactly_and_lowers(fake):
    tmp_path, paths = fake
    result = sp.run(params(settings={"net.ipv4.tcp_rmem": "4096 87380 134217728"}, raise_only=[]), paths=paths)
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 87380 134217728"
    assert result["kept_higher"] == {}


def test_raise_only_persists_the_effective_value_with_apply_false(fake):
    tmp_path, paths = fake
    result = sp.run(params(settings={"net.ipv4.tcp_rmem": "4096 87380 134217728"}, apply=False), paths=paths)
    assert proc(tmp_path, "net.ipv4.tcp_rmem") == "4096 131072 6291456"
    assert "net.ipv4.tcp_rmem = 4096 131072 134217728\n" in read(tmp_path / CONF)
    assert result["reboot_required"] is True


@pytest.mark.parametrize("settings, fragment", [
    ({"net.ipv4.tcp_rmem": "4096 131072"}, "holds 3 integers"),
    ({"net.ipv4.tcp_rmem": "4096 0x20000 6291456"}, "would store 131072"),
    ({"vm.swappiness": "010"}, "octal: it would store 8"),
    ({"net.ipv4.tcp_rmem": "small medium large"}, "is in raise_only"),
])
def test_values_the_kernel_would_not_read_back_are_refused_before_any_write(fake, settings, fragment):
    tmp_path, paths = fake
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings=dict(settings, **{"kernel.numa_balancing": 0})), paths=paths)
    assert fragment in exc.value.message and "nothing was changed" in exc.value.message
    assert snapshot(tmp_path) == before


def test_host_wide_key_the_host_already_raised_is_not_reported_as_pending(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"run/.containerenv": "", "proc/1/environ": "container=podman\0",
                          "proc/sys/net/core/rmem_max": "268435456\n", "proc/sys/net/core/wmem_max": "212992\n"})
    result = sp.run(params(settings={"net.core.rmem_max": 134217728, "net.core.wmem_max": 134217728},
                           host_wide="skip"), paths=paths)
    assert result["skipped_keys"]["net.core.rmem_max"] == (
        "host-wide key: the host sets it (gpufleet.tuning.host role); already 268435456 (not lower than the "
        "wanted 134217728)")
    assert "currently 212992, wanted 134217728" in result["skipped_keys"]["net.core.wmem_max"]


def test_raise_only_option_is_validated(fake):
    _tmp_path, paths = fake
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}, raise_only=["net/core/rmem_max"]), paths=paths)
    assert "raise_only entry 'net/core/rmem_max' contains '/'" in exc.value.message


# ================================================================================================
# 6. Siblings
# ================================================================================================

def test_key_missing_from_a_containers_namespace_is_skipped_with_host_wide_skip(fake):
    """net.core.optmem_max is per-namespace only on newer kernels: in an older kernel's
    container it does not exist. With host_wide=skip that is the host's, not an error."""
    tmp_path, paths = fake
    write_tree(tmp_path, {"run/.containerenv": "", "proc/1/environ": "container=podman\0"})
    result = sp.run(params(settings={"net.core.optmem_max": 131072, "net.core.somaxconn": 8192},
                           host_wide="skip"), paths=paths)
    assert "not visible in this container's namespace" in result["skipped_keys"]["net.core.optmem_max"]
    assert result["changed_keys"] == ["net.core.somaxconn"]
    assert "optmem_max" not in read(tmp_path / CONF)


def test_key_missing_outside_a_container_is_still_an_error(fake):
    _tmp_path, paths = fake
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"net.core.optmem_max": 131072}, host_wide="skip"), paths=paths)
    assert "unknown key net.core.optmem_max" in exc.value.message


def test_a_directory_of_keys_is_not_a_key(fake):
    _tmp_path, paths = fake
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"net.ipv4": 1}), paths=paths)
    assert "net.ipv4 is a directory of keys" in exc.value.message


def test_tabs_in_settings_are_no_change(fake):
    _tmp_path, paths = fake
    result = sp.run(params(settings={"net.ipv4.tcp_rmem": "4096\t131072\t6291456"}, persist=False), paths=paths)
    assert result["changed"] is False


@pytest.mark.parametrize("value", ["", "   ", "\t"])
def test_empty_values_are_refused(fake, value):
    _tmp_path, paths = fake
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": value}), paths=paths)
    assert "empty" in exc.value.message


def test_absent_forgets_a_key_that_no_longer_exists_and_reports_it(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"proc/sys/net/ipv4/conf/eth9/rp_filter": "0\n"})
    sp.run(params(settings={"net.ipv4.conf.eth9.rp_filter": 2, "vm.swappiness": 10}), paths=paths)
    os.remove(str(tmp_path / "proc/sys/net/ipv4/conf/eth9/rp_filter"))     # the interface went away
    result = sp.run(params(state="absent"), paths=paths)
    assert "does not exist here" in result["skipped_keys"]["net.ipv4.conf.eth9.rp_filter"]
    assert proc(tmp_path, "vm.swappiness") == "60"
    assert not (tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json").exists()
    assert not (tmp_path / CONF).exists()


def test_absent_keeps_what_it_could_not_restore(fake, monkeypatch):
    tmp_path, paths = fake
    sp.run(params(settings={"kernel.nmi_watchdog": 0, "vm.swappiness": 10}), paths=paths)
    FailingKernel(monkeypatch, "kernel.nmi_watchdog", 524)
    result = sp.run(params(state="absent", on_unwritable="skip"), paths=paths)
    assert "ENOTSUPP 524" in result["skipped_keys"]["kernel.nmi_watchdog"]
    assert proc(tmp_path, "vm.swappiness") == "60"
    state = json.loads(read(tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json"))
    assert state["originals"] == {"kernel.nmi_watchdog": "1"}


def test_absent_subset_that_empties_the_file_removes_it(fake):
    tmp_path, paths = fake
    sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    result = sp.run(params(state="absent", settings={"vm.swappiness": None}), paths=paths)
    assert not (tmp_path / CONF).exists() and result["persisted"] is False


def test_skipped_refused_key_is_not_remembered(fake, monkeypatch):
    tmp_path, paths = fake
    FailingKernel(monkeypatch, "kernel.nmi_watchdog", 524)
    sp.run(params(settings={"kernel.nmi_watchdog": 0, "vm.swappiness": 10}, on_unwritable="skip"), paths=paths)
    state = json.loads(read(tmp_path / "var/lib/gpufleet-tuning/sysctl/inference.json"))
    assert state["originals"] == {"vm.swappiness": "60"}


# ================================================================================================
# Change records (common/records.py)
# ================================================================================================

STATE = "var/lib/gpufleet-tuning/sysctl/inference.json"


def digest(tmp_path, rel):
    return records.file_state(read(tmp_path / rel))


def test_records_of_an_apply_name_each_key_the_file_and_the_state_file(fake):
    tmp_path, paths = fake
    result = sp.run(params(settings=SETTINGS), paths=paths)
    assert result["changes"] == [
        {"area": "sysctl", "kind": "value", "target": "kernel.numa_balancing", "before": "1", "after": "0"},
        {"area": "sysctl", "kind": "value", "target": "net.ipv4.tcp_rmem",
         "before": "4096 131072 6291456", "after": "4096 131072 134217728"},
        {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"},
        {"area": "sysctl", "kind": "file", "target": str(tmp_path / CONF), "before": None,
         "after": digest(tmp_path, CONF)},
        {"area": "sysctl", "kind": "file", "target": str(tmp_path / STATE), "before": None,
         "after": digest(tmp_path, STATE)},
    ]
    assert "vm.swappiness = 10" not in json.dumps(result["changes"])   # a digest, never the content
    assert sp.run(params(settings=SETTINGS), paths=paths)["changes"] == []


def test_check_mode_records_are_the_ones_the_run_then_makes(fake):
    tmp_path, paths = fake
    planned = sp.run(params(settings=SETTINGS), check_mode=True, paths=paths)
    assert sp.run(params(settings=SETTINGS), paths=paths)["changes"] == planned["changes"]
    conf = read(tmp_path / CONF)
    planned = sp.run(params(state="absent"), check_mode=True, paths=paths)
    done = sp.run(params(state="absent"), paths=paths)
    assert done["changes"] == planned["changes"]
    assert done["changes"][:3] == [
        {"area": "sysctl", "kind": "value", "target": "kernel.numa_balancing", "before": "0", "after": "1"},
        {"area": "sysctl", "kind": "value", "target": "net.ipv4.tcp_rmem",
         "before": "4096 131072 134217728", "after": "4096 131072 6291456"},
        {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "10", "after": "60"}]
    assert done["changes"][3:] == [
        {"area": "sysctl", "kind": "file", "target": str(tmp_path / CONF), "before": records.file_state(conf),
         "after": None},
        {"area": "sysctl", "kind": "file", "target": str(tmp_path / STATE), "before": done["changes"][4]["before"],
         "after": None}]
    assert done["changes"][4]["before"]["sha256"]
    assert sp.run(params(state="absent"), paths=paths)["changes"] == []


def test_apply_false_records_the_file_only(fake):
    tmp_path, paths = fake
    result = sp.run(params(settings={"vm.swappiness": 10}, apply=False), paths=paths)
    assert [(c["kind"], c["target"]) for c in result["changes"]] == [("file", str(tmp_path / CONF))]


def test_a_moved_priority_records_the_new_file_and_the_old_one_removed(fake):
    tmp_path, paths = fake
    sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    old = records.file_state(read(tmp_path / CONF))
    result = sp.run(params(settings={"vm.swappiness": 10}, priority=95), paths=paths)
    assert [(c["target"], c["before"], c["after"]) for c in result["changes"]] == [
        (str(tmp_path / "etc/sysctl.d/95-gpufleet-inference.conf"), None,
         digest(tmp_path, "etc/sysctl.d/95-gpufleet-inference.conf")),
        (str(tmp_path / CONF), old, None)]


def test_a_symlink_removed_is_recorded_as_the_link(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"srv/config/inference.conf": MARKED + "vm.swappiness = 1\n"})
    os.symlink(str(tmp_path / "srv/config/inference.conf"), str(tmp_path / CONF))
    written = sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert written["changes"][1]["target"] == str(tmp_path / CONF)       # written through the link
    assert written["changes"][1]["after"] == digest(tmp_path, "srv/config/inference.conf")
    result = sp.run(params(state="absent"), paths=paths)
    assert result["changes"][1] == {"area": "sysctl", "kind": "file", "target": str(tmp_path / CONF),
                                    "before": {"link": str(tmp_path / "srv/config/inference.conf")},
                                    "after": None}


def test_a_skipped_key_has_no_record(fake):
    tmp_path, paths = fake
    write_tree(tmp_path, {"proc/1/environ": "container=lxc\0", "proc/self/uid_map": "0 100000 65536\n"})
    result = sp.run(params(settings={"vm.swappiness": 10, "net.core.somaxconn": 8192}, host_wide="skip"),
                    paths=paths)
    assert "vm.swappiness" in result["skipped_keys"]
    assert [c["target"] for c in result["changes"] if c["kind"] == "value"] == ["net.core.somaxconn"]


def test_a_failed_run_returns_no_records(fake, monkeypatch):
    tmp_path, paths = fake

    def read_only(path, *a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    monkeypatch.setattr(fileops, "write_atomic", read_only)
    with pytest.raises(ModuleFailure) as exc:
        sp.run(params(settings={"vm.swappiness": 10}), paths=paths)
    assert "changes" not in exc.value.partial and "restored: vm.swappiness" in exc.value.message


# ================================================================================================
# The real kernel, in a throwaway network namespace (its net.* keys vanish with it)
# ================================================================================================

LIVE = """
import json, os, sys, tempfile
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
tmp = tempfile.mkdtemp()
os.symlink("/proc", tmp + "/proc")  # the real /proc/sys; sysctl.d and the state file in the temp tree
paths = sp.Paths(tmp)
keys = ["net.core.somaxconn", "net.ipv4.tcp_rmem"]
start = dict((k, sysctl.read_value(k)) for k in keys)
a, b, c = (int(x) for x in start["net.ipv4.tcp_rmem"].split())
out = {"start": start}
try:
    sp.run(dict(name="live", raise_only=[], settings={
        "net.core.somaxconn": int(start["net.core.somaxconn"]) + 1,
        "net.ipv4.tcp_rmem": "%d %d 99999999999" % (a + 1, b + 1)}), paths=paths)
except sp.ModuleFailure as exc:
    out["msg"] = exc.message
out["after_failure"] = dict((k, sysctl.read_value(k)) for k in keys)
res = sp.run(dict(name="live", settings={"net.ipv4.tcp_rmem": "4096 87380 134217728"}), paths=paths)
out["raised"] = {"after": res["after"], "kept_higher": res["kept_higher"],
                 "file": open(res["path"]).read()}
out["again"] = sp.run(dict(name="live", settings={"net.ipv4.tcp_rmem": "4096 87380 134217728"}), paths=paths)["changed"]
print(json.dumps(out))
"""


def test_live_kernel_half_applied_write_is_restored_and_raise_only_holds():
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_sysctl import run_in_new_netns
    out = json.loads(run_in_new_netns(LIVE))
    start = out["start"]
    assert out["after_failure"] == start
    assert "after the kernel had taken part of it" in out["msg"]
    assert "restored: net.ipv4.tcp_rmem to %r" % start["net.ipv4.tcp_rmem"] in out["msg"]
    assert "net.core.somaxconn to %r" % start["net.core.somaxconn"] in out["msg"]
    have = [int(x) for x in start["net.ipv4.tcp_rmem"].split()]
    effective = " ".join(str(max(x, y)) for x, y in zip(have, [4096, 87380, 134217728]))
    assert out["raised"]["after"]["net.ipv4.tcp_rmem"] == effective
    assert "net.ipv4.tcp_rmem = %s\n" % effective in out["raised"]["file"]
    assert out["again"] is False


# ================================================================================================
# 4b. The roles' defaults never cut a current kernel's default
# ================================================================================================

# Current kernel defaults: Documentation/networking/ip-sysctl.rst (tcp_rmem default 131072 since
# 4.20, max up to 6 MiB by RAM; tcp_wmem 4096 16384, max up to 4 MiB; somaxconn 4096 since 5.4)
# and the 6.18 kernel of the CI machines (rmem_max/wmem_max 4 MiB, tcp_rmem max 32 MiB).
KERNEL_DEFAULTS = {
    "net.ipv4.tcp_rmem": ["4096 131072 6291456", "4096 131072 33554432"],
    "net.ipv4.tcp_wmem": ["4096 16384 4194304"],
    "net.core.rmem_max": ["212992", "4194304"],
    "net.core.wmem_max": ["212992", "4194304"],
    "net.core.somaxconn": ["4096"],
}


@pytest.mark.parametrize("role, variables", [
    ("host", ["host_sysctl_settings"]),
    ("container", ["container_sysctl_settings", "container_host_expected"]),
])
def test_role_defaults_never_lower_a_current_kernel_default(role, variables):
    import yaml
    root = os.path.dirname(os.path.abspath(__file__))
    for _level in range(4):
        root = os.path.dirname(root)
    defaults = role_base_defaults(root, role)
    with open(os.path.join(root, "roles", role, "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    checked = 0
    for variable in variables:
        settings = defaults[variable]
        assert options[variable]["default"] == settings, "%s: argument_specs default out of step" % variable
        for key, value in settings.items():
            wanted = sysctl.normalize_value(value)
            for kernel in KERNEL_DEFAULTS.get(key, []):
                effective, kept = sysctl.raise_fields(kernel, wanted)
                assert kept == [], "%s %s = %r would cut the kernel's %r in field %s" % (
                    role, key, wanted, kernel, kept)
                checked += 1
    assert checked
