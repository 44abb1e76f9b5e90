"""The lxc_memlock engine against fake /etc/pve, /var/lib/lxc, /proc and cgroup trees."""

import fcntl
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock as lm
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import lxc_fixtures as fx
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_rlimit import LIMITS_8M

LIMITS_UNLIMITED = LIMITS_8M.replace("Max locked memory         8388608              8388608",
                                     "Max locked memory         unlimited            unlimited")


def make_paths(root):
    return lm.Paths(str(root))


def running_101(root, limits=LIMITS_8M):
    """Container 101 running under Proxmox, its init with the given limits."""
    write_tree(root, {
        "proc/500/stat": "500 (lxc-start) S 1 500 0 0\n", "proc/500/cgroup": "0::/lxc.monitor/101\n",
        "proc/501/stat": "501 (systemd) S 500 501 0 0\n", "proc/501/cgroup": "0::/lxc/101/ns/init.scope\n",
        "proc/501/limits": limits,
    })


@pytest.fixture
def host(tmp_path):
    write_tree(tmp_path, {
        "etc/pve/lxc/101.conf": fx.PVE_PLAIN,
        "etc/pve/lxc/102.conf": fx.PVE_SNAPSHOTS,
        "etc/pve/lxc/103.conf": fx.PVE_EXISTING_DUPLICATES,
        "var/lib/lxc/serving/config": fx.LXC_PLAIN,
        "var/lib/lxc/minus/config": fx.LXC_MINUS_ONE,
        "proc/1/stat": "1 (systemd) S 0 1 0 0\n", "proc/1/cgroup": "0::/init.scope\n",
        "sys/fs/cgroup": None,
    })
    return tmp_path, make_paths(tmp_path)


def params(**kw):
    base = dict(vmid=None, name=None, path=None, limit="unlimited", backup=True)
    base.update(kw)
    return base


def backups(directory):
    return sorted(n for n in os.listdir(str(directory)) if n.endswith(".gpufleet.bak"))


def test_proxmox_apply_backup_and_idempotence(host):
    root, paths = host
    conf = root / "etc/pve/lxc/101.conf"
    result = lm.run(params(vmid=101), paths=paths)
    assert conf.read_bytes() == fx.AFTER_PVE_PLAIN
    assert result["changed"] is True
    assert result["limit_before"] is None and result["limit_after"] == "unlimited"
    assert result["style"] == "proxmox" and result["container_name"] == "101"
    assert result["running"] is False and result["restart_required"] is False
    [backup] = backups(root / "etc/pve/lxc")
    assert result["backup_file"] == str(root / "etc/pve/lxc" / backup)
    assert (root / "etc/pve/lxc" / backup).read_bytes() == fx.PVE_PLAIN
    assert result["diff"][0]["before"] == "" and result["diff"][0]["after"] == "lxc.prlimit.memlock = unlimited\n"
    # only the changed line, with its number: the rest of a config can hold secrets
    added = len(fx.PVE_PLAIN.splitlines()) + 1
    assert result["diff"][1]["before"] == ""
    assert result["diff"][1]["after"] == "%d: lxc.prlimit.memlock: unlimited\n" % added
    assert result["diff"][1]["after_header"].endswith("(changed lines only)")

    before = snapshot(root)
    mtime = os.stat(str(conf)).st_mtime_ns
    again = lm.run(params(vmid=101), paths=paths)
    assert again["changed"] is False and again["backup_file"] is None
    assert again["limit_before"] == "unlimited" and len(again["diff"]) == 1
    assert snapshot(root) == before and os.stat(str(conf)).st_mtime_ns == mtime


def test_snapshot_sections_untouched_whole_file(host):
    root, paths = host
    result = lm.run(params(vmid=102, backup=False), paths=paths)
    assert (root / "etc/pve/lxc/102.conf").read_bytes() == fx.AFTER_PVE_SNAPSHOTS
    assert result["limit_before"] is None  # the snapshot's 65536 and pending 1024 are not live
    assert backups(root / "etc/pve/lxc") == []


def test_existing_value_and_duplicates(host):
    root, paths = host
    result = lm.run(params(vmid=103), paths=paths)
    assert (root / "etc/pve/lxc/103.conf").read_bytes() == fx.AFTER_PVE_EXISTING_DUPLICATES
    # the last line decides what LXC applies
    assert result["limit_before"] == "131072" and result["limit_before_raw"] == "131072"
    assert result["duplicates_removed"] == 1


def test_plain_lxc_by_name(host):
    root, paths = host
    result = lm.run(params(name="serving", limit="68719476736:unlimited"), paths=paths)
    assert (root / "var/lib/lxc/serving/config").read_bytes() == fx.LXC_PLAIN + (
        b"lxc.prlimit.memlock = 68719476736:unlimited\n")
    assert result["style"] == "lxc" and result["limit_after"] == "68719476736:unlimited"


def test_minus_one_already_unlimited_is_left_alone(host):
    root, paths = host
    before = snapshot(root)
    result = lm.run(params(name="minus"), paths=paths)
    assert result["changed"] is False
    assert result["limit_before"] == "unlimited" and result["limit_before_raw"] == "-1"
    assert snapshot(root) == before
    # a number is a change, written over the -1 in place
    result = lm.run(params(name="minus", limit=65536, backup=False), paths=paths)
    assert (root / "var/lib/lxc/minus/config").read_bytes() == fx.LXC_MINUS_ONE.replace(
        b"memlock=-1\n", b"memlock=65536\n")
    assert result["limit_before"] == "unlimited" and result["limit_after"] == "65536"


def test_equal_halves_count_as_the_same_limit(host):
    root, paths = host
    lm.run(params(vmid=101, limit="4096"), paths=paths)
    before = snapshot(root)
    assert lm.run(params(vmid=101, limit="4096:4096"), paths=paths)["changed"] is False
    assert snapshot(root) == before


def test_check_mode_writes_nothing(host):
    root, paths = host
    running_101(root)
    before = snapshot(root)
    result = lm.run(params(vmid=101), check_mode=True, paths=paths)
    assert result["changed"] is True and result["restart_required"] is True
    assert result["diff"][1]["after"].endswith(": lxc.prlimit.memlock: unlimited\n")
    assert result["backup_file"] is None
    assert snapshot(root) == before


def test_restart_required_follows_the_running_init(host):
    root, paths = host
    running_101(root, LIMITS_8M)
    first = lm.run(params(vmid=101), paths=paths)
    assert first["running"] is True and first["limit_running"] == "8388608"
    assert first["restart_required"] is True
    # nothing to change, but the running container still has 8 MiB: the restart is pending
    second = lm.run(params(vmid=101), paths=paths)
    assert second["changed"] is False and second["restart_required"] is True
    # after a restart the init has the new limit
    write_tree(root, {"proc/501/limits": LIMITS_UNLIMITED})
    third = lm.run(params(vmid=101), paths=paths)
    assert third["restart_required"] is False and third["limit_running"] == "unlimited"


def test_only_dropping_a_duplicate_needs_no_restart(host):
    root, paths = host
    twice = b"lxc.prlimit.memlock: unlimited\n" * 2
    write_tree(root, {"etc/pve/lxc/101.conf": fx.PVE_PLAIN + twice})
    running_101(root, LIMITS_UNLIMITED)
    result = lm.run(params(vmid=101, backup=False), paths=paths)
    assert result["changed"] is True and result["duplicates_removed"] == 1
    assert result["restart_required"] is False
    assert (root / "etc/pve/lxc/101.conf").read_bytes() == fx.AFTER_PVE_PLAIN


def test_unknown_container_name_assumes_running(host):
    root, paths = host
    write_tree(root, {"srv/ct.conf.d/serving.lxc": fx.LXC_PLAIN})
    result = lm.run(params(path=str(root / "srv/ct.conf.d/serving.lxc")), paths=paths)
    assert result["running"] is None and result["restart_required"] is True
    assert result["container_name"] is None


def test_path_forms_name_the_container(host):
    root, paths = host
    running_101(root)
    write_tree(root, {"srv/pve/101.conf": fx.PVE_PLAIN})
    result = lm.run(params(path=str(root / "srv/pve/101.conf")), check_mode=True, paths=paths)
    assert result["container_name"] == "101" and result["running"] is True
    result = lm.run(params(path=str(root / "var/lib/lxc/serving/config")), check_mode=True, paths=paths)
    assert result["container_name"] == "serving" and result["style"] == "lxc"


def test_missing_config_names_the_path(host):
    _root, paths = host
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(vmid=199), paths=paths)
    assert "%s/199.conf does not exist" % paths.pve_lxc in exc.value.message
    with pytest.raises(ModuleFailure, match="var/lib/lxc/nope/config does not exist"):
        lm.run(params(name="nope"), paths=paths)


def test_not_a_container_config_is_refused(host):
    root, paths = host
    write_tree(root, {"etc/sysctl.d/99-local.conf": fx.NOT_A_CONTAINER})
    with pytest.raises(ModuleFailure, match="is not a container config"):
        lm.run(params(path=str(root / "etc/sysctl.d/99-local.conf")), paths=paths)
    assert (root / "etc/sysctl.d/99-local.conf").read_bytes() == fx.NOT_A_CONTAINER
    write_tree(root, {"etc/pve/lxc/150.conf": b"\x7fELF\0\0\0"})
    with pytest.raises(ModuleFailure, match="NUL bytes"):
        lm.run(params(vmid=150), paths=paths)


def test_a_directory_is_an_error(host):
    root, paths = host
    os.makedirs(str(root / "etc/pve/lxc/160.conf"))
    with pytest.raises(ModuleFailure, match="cannot read .*160.conf"):
        lm.run(params(vmid=160), paths=paths)


@pytest.mark.parametrize("kw, message", [
    (dict(vmid=101, limit="64G"), "write 68719476736 for 64G"),
    (dict(vmid=101, limit="2:1"), "above the hard limit"),
    (dict(vmid=101, limit="lots"), "SOFT:HARD"),
    (dict(vmid=99), "vmid 99 is not valid"),
    (dict(vmid=True), "vmid True is not valid"),
    (dict(name="../etc"), "name '../etc' is not valid"),
    (dict(name="a/b"), "name 'a/b' is not valid"),
    (dict(path="relative/101.conf"), "an absolute path"),
    (dict(), "name the container(s): one of vmid, name or path, or select"),
    (dict(vmid=101, name="x"), "exactly one of vmid, name or path (got vmid, name)"),
    (dict(vmid=101, backup="yes"), "backup must be true or false"),
])
def test_bad_input_refused_before_reading(host, kw, message):
    root, paths = host
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(**kw), paths=paths)
    assert message in exc.value.message
    assert snapshot(root) == before


def test_bad_limit_is_reported_before_a_missing_file(host):
    _root, paths = host
    with pytest.raises(ModuleFailure, match="not valid.*nothing was read"):
        lm.run(params(vmid=199, limit="8M"), paths=paths)


def test_existing_value_lxc_cannot_read_is_replaced(host):
    root, paths = host
    write_tree(root, {"var/lib/lxc/bad/config": b"lxc.uts.name = bad\nlxc.prlimit.memlock = 64G\n"})
    result = lm.run(params(name="bad", backup=False), paths=paths)
    assert result["limit_before"] == "64G" and "not a limit LXC can read" in result["limit_before_error"]
    assert (root / "var/lib/lxc/bad/config").read_bytes() == b"lxc.uts.name = bad\nlxc.prlimit.memlock = unlimited\n"


def test_empty_value_clears_and_counts_as_unset(host):
    root, paths = host
    write_tree(root, {"var/lib/lxc/e/config": b"lxc.uts.name = e\nlxc.prlimit.memlock = 1\nlxc.prlimit.memlock =\n"})
    result = lm.run(params(name="e", backup=False), paths=paths)
    assert result["limit_before"] is None and result["limit_before_raw"] == ""
    assert (root / "var/lib/lxc/e/config").read_bytes() == b"lxc.uts.name = e\nlxc.prlimit.memlock = unlimited\n"


def test_proxmox_lock_refused(host):
    # on_locked=fail keeps the old behaviour (the default is now pending, see below)
    root, paths = host
    data = fx.PVE_PLAIN.replace(b"hostname:", b"lock: backup\nhostname:")
    write_tree(root, {"etc/pve/lxc/101.conf": data})
    with pytest.raises(ModuleFailure, match=r"locked by Proxmox \(lock: backup\)"):
        lm.run(params(vmid=101, on_locked="fail"), paths=paths)
    assert (root / "etc/pve/lxc/101.conf").read_bytes() == data
    # a lock recorded in a snapshot section is not a lock on the container
    write_tree(root, {"etc/pve/lxc/101.conf": fx.PVE_PLAIN + b"\n[s]\narch: amd64\nlock: snapshot\n"})
    assert lm.run(params(vmid=101, backup=False), paths=paths)["changed"] is True


def test_no_metadata_calls_anywhere(host, monkeypatch):
    root, paths = host

    def refuse(*_a, **_k):
        raise PermissionError(1, "Operation not permitted (pmxcfs)")

    for name in ("chmod", "fchmod", "chown", "fchown", "lchown"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(shutil, "copy2", refuse)
    monkeypatch.setattr(shutil, "copystat", refuse)
    result = lm.run(params(vmid=101), paths=paths)
    assert result["changed"] is True and result["backup_file"]
    assert (root / "etc/pve/lxc/101.conf").read_bytes() == fx.AFTER_PVE_PLAIN


def test_failed_write_rolls_back_backup_and_config(host, monkeypatch):
    root, paths = host
    real = fileops.write_atomic

    def fail_on_config(path, content, **kw):
        if path.endswith("101.conf"):
            raise OSError(28, "No space left on device", path)
        return real(path, content, **kw)

    monkeypatch.setattr(fileops, "write_atomic", fail_on_config)
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(vmid=101), paths=paths)
    assert "No space left on device" in exc.value.message and "restored" in exc.value.message
    assert exc.value.partial["backup_file"] is None
    assert (root / "etc/pve/lxc/101.conf").read_bytes() == fx.PVE_PLAIN
    assert backups(root / "etc/pve/lxc") == []


def test_read_back_mismatch_rolls_back(host, monkeypatch):
    root, paths = host
    real_read = fileops.read_bytes
    calls = {"n": 0}

    def lying_read(path):
        data = real_read(path)
        if path.endswith("101.conf") and data == fx.AFTER_PVE_PLAIN:
            calls["n"] += 1
            return data[:-5]
        return data

    monkeypatch.setattr(fileops, "read_bytes", lying_read)
    with pytest.raises(ModuleFailure, match="does not hold what was written"):
        lm.run(params(vmid=101), paths=paths)
    assert calls["n"] == 1
    assert real_read(str(root / "etc/pve/lxc/101.conf")) == fx.PVE_PLAIN
    assert backups(root / "etc/pve/lxc") == []


def test_file_changed_between_read_and_lock(host, monkeypatch):
    root, paths = host
    conf = root / "etc/pve/lxc/101.conf"

    class Racing:
        def __init__(self, *_a, **_k):
            pass

        def __enter__(self):
            conf.write_bytes(fx.PVE_PLAIN + b"tags: gpu\n")  # pct set ran meanwhile
            return self

        def __exit__(self, *_a):
            return False

    monkeypatch.setattr(lm, "_ConfigLock", Racing)
    with pytest.raises(ModuleFailure, match="changed while this module was reading it"):
        lm.run(params(vmid=101), paths=paths)
    assert conf.read_bytes() == fx.PVE_PLAIN + b"tags: gpu\n"


def test_proxmox_config_lock_taken_and_waited_for(host, monkeypatch):
    root, paths = host
    os.makedirs(paths.pve_lock_dir)
    lm.run(params(vmid=101, backup=False), paths=paths)
    assert os.path.exists(os.path.join(paths.pve_lock_dir, "pve-config-101.lock"))
    # someone (pct set) holds it: the module gives up, nothing changed
    with open(os.path.join(paths.pve_lock_dir, "pve-config-102.lock"), "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        monkeypatch.setattr(lm, "LOCK_TIMEOUT", 0.3)
        with pytest.raises(ModuleFailure, match="could not take Proxmox's config lock"):
            lm.run(params(vmid=102, on_locked="fail"), paths=paths)
        # the default reports it as pending and succeeds
        result = lm.run(params(vmid=102), paths=paths)
        assert result["pending"] is True and result["changed"] is False
        assert "could not take Proxmox's config lock" in result["pending_reason"]
    assert (root / "etc/pve/lxc/102.conf").read_bytes() == fx.PVE_SNAPSHOTS
    assert backups(root / "etc/pve/lxc") == []


# --- a real filesystem that refuses chmod/chown, as pmxcfs does -------------------------------

def _bindfs_unavailable():
    if shutil.which("bindfs") is None:
        return "bindfs is not installed (Debian: apt-get install bindfs fuse3)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist: no FUSE in this kernel or container"
    if os.geteuid() != 0:
        return "mounting bindfs here needs root"
    return None


@pytest.fixture
def chmod_refusing_mount(tmp_path):
    reason = _bindfs_unavailable()
    if reason:
        pytest.skip(reason)
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    proc = subprocess.run(["bindfs", "--chmod-deny", "--chown-deny", "--chgrp-deny", str(src), str(mnt)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip("bindfs could not mount (FUSE unavailable here?): %s" % proc.stderr.strip())
    try:
        yield src, mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_on_a_filesystem_that_refuses_chmod_and_chown(chmod_refusing_mount, tmp_path):
    src, mnt = chmod_refusing_mount
    (mnt / "101.conf").write_bytes(fx.PVE_SNAPSHOTS)
    # the trap is real here: chmod and shutil.copy2 (the usual backup) fail on this mount
    with pytest.raises(PermissionError):
        os.chmod(str(mnt / "101.conf"), 0o600)
    with pytest.raises(PermissionError):
        shutil.copy2(str(mnt / "101.conf"), str(mnt / "copy2.bak"))
    for leftover in mnt.iterdir():
        if leftover.name == "copy2.bak":
            leftover.unlink()
    paths = make_paths(tmp_path)
    paths.pve_lxc = str(mnt)
    result = lm.run(params(vmid=101), paths=paths)
    assert result["changed"] is True
    assert (mnt / "101.conf").read_bytes() == fx.AFTER_PVE_SNAPSHOTS
    assert (src / "101.conf").read_bytes() == fx.AFTER_PVE_SNAPSHOTS  # it went through FUSE
    assert open(result["backup_file"], "rb").read() == fx.PVE_SNAPSHOTS
    assert sorted(p.name for p in mnt.iterdir()) == ["101.conf", os.path.basename(result["backup_file"])]
    again = lm.run(params(vmid=101), paths=paths)
    assert again["changed"] is False and again["backup_file"] is None


# --- Proxmox locks: pending, not a failure of the host ----------------------------------------

def locked(lock, data=fx.PVE_PLAIN):
    return data.replace(b"hostname:", b"lock: %s\nhostname:" % lock.encode())


@pytest.mark.parametrize("lock", sorted(lm.LOCK_MEANING) + ["some-future-lock"])
def test_a_locked_container_is_pending_by_default(host, lock):
    root, paths = host
    running_101(root)
    write_tree(root, {"etc/pve/lxc/101.conf": locked(lock)})
    before = snapshot(root)
    result = lm.run(params(vmid=101), paths=paths)
    assert result["pending"] is True and result["changed"] is False and result["lock"] == lock
    assert "container 101 is locked by Proxmox (lock: %s)" % lock in result["pending_reason"]
    assert lm.LOCK_MEANING.get(lock, "a Proxmox operation holds it") in result["pending_reason"]
    assert "pct unlock 101" in result["pending_reason"]
    # nothing applied, so nothing to restart (pct would refuse it anyway) and no diff to show
    assert result["restart_required"] is False and result["diff"] == [] and result["backup_file"] is None
    assert result["limit_before"] is None and result["limit_after"] is None and result["limit_wanted"] == "unlimited"
    assert any("nothing was changed" in w for w in result["warnings"])
    assert snapshot(root) == before


def test_a_locked_container_fails_when_asked_to(host):
    root, paths = host
    write_tree(root, {"etc/pve/lxc/101.conf": locked("snapshot")})
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(vmid=101, on_locked="fail"), paths=paths)
    assert "locked by Proxmox (lock: snapshot): a snapshot is being taken" in exc.value.message
    assert exc.value.partial["path"].endswith("101.conf") and exc.value.partial["lock"] == "snapshot"


def test_a_lock_does_not_matter_when_there_is_nothing_to_do(host):
    root, paths = host
    write_tree(root, {"etc/pve/lxc/101.conf": locked("backup", fx.AFTER_PVE_PLAIN)})
    running_101(root, LIMITS_UNLIMITED)
    for on_locked in ("fail", "pending"):
        result = lm.run(params(vmid=101, on_locked=on_locked), paths=paths)
        assert result["changed"] is False and result["pending"] is False and result["lock"] == "backup"
        assert result["pending_reason"] is None and result["restart_required"] is False


def test_a_locked_container_waiting_for_a_restart_is_pending(host):
    # the config is right but the running init still has 8 MiB: the restart is what is left,
    # and pct refuses it while the lock is held
    root, paths = host
    write_tree(root, {"etc/pve/lxc/101.conf": locked("backup", fx.AFTER_PVE_PLAIN)})
    running_101(root, LIMITS_8M)
    result = lm.run(params(vmid=101), paths=paths)
    assert result["pending"] is True and result["restart_required"] is False
    assert result["limit_running"] == "8388608" and result["limit_after"] == "unlimited"


def test_a_lock_in_a_plain_lxc_file_style_proxmox_path(host):
    # a Proxmox config whose raw lines outnumber its own keys is still a Proxmox config
    root, paths = host
    data = b"lock: migrate\nlxc.a = 1\nlxc.b = 2\nlxc.c = 3\n"
    write_tree(root, {"etc/pve/lxc/170.conf": data})
    result = lm.run(params(vmid=170), paths=paths)
    assert result["pending"] is True and result["style"] == "lxc"


def test_on_locked_is_validated_first(host):
    root, paths = host
    before = snapshot(root)
    with pytest.raises(ModuleFailure, match="on_locked 'skip' is not valid: use fail or pending"):
        lm.run(params(vmid=101, on_locked="skip"), paths=paths)
    assert snapshot(root) == before


# --- rollback and restore: links, modes, no leftovers ------------------------------------------

def _failing_read_back(monkeypatch, wrote):
    real_read = fileops.read_bytes

    def lying_read(path):
        data = real_read(path)
        if data == wrote:
            return data[:-1]
        return data

    monkeypatch.setattr(fileops, "read_bytes", lying_read)


def test_a_symlinked_config_is_edited_through_the_link(host):
    root, paths = host
    write_tree(root, {"srv/configs/serving.conf": fx.LXC_PLAIN, "var/lib/lxc/linked": None})
    os.symlink(str(root / "srv/configs/serving.conf"), str(root / "var/lib/lxc/linked/config"))
    result = lm.run(params(name="linked"), paths=paths)
    assert result["changed"] is True
    assert os.path.islink(str(root / "var/lib/lxc/linked/config"))
    assert (root / "srv/configs/serving.conf").read_bytes() == fx.AFTER_LXC_PLAIN
    assert open(result["backup_file"], "rb").read() == fx.LXC_PLAIN


def test_a_symlinked_config_is_restored_through_the_link(host, monkeypatch):
    root, paths = host
    write_tree(root, {"srv/configs/serving.conf": fx.LXC_PLAIN, "var/lib/lxc/linked": None})
    os.symlink("../../../../srv/configs/serving.conf", str(root / "var/lib/lxc/linked/config"))
    before = snapshot(root)
    _failing_read_back(monkeypatch, fx.AFTER_LXC_PLAIN)
    with pytest.raises(ModuleFailure, match="does not hold what was written.*restored"):
        lm.run(params(name="linked"), paths=paths)
    assert snapshot(root) == before  # the link, the target's bytes and mode, no backup


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644])
def test_a_failed_edit_restores_bytes_and_mode_and_leaves_nothing(host, monkeypatch, mode):
    root, paths = host
    conf = root / "var/lib/lxc/serving/config"
    os.chmod(str(conf), mode)
    before = snapshot(root)
    _failing_read_back(monkeypatch, fx.AFTER_LXC_PLAIN)
    old_umask = os.umask(0o077)  # a restore must not depend on the umask
    try:
        with pytest.raises(ModuleFailure) as exc:
            lm.run(params(name="serving"), paths=paths)
    finally:
        os.umask(old_umask)
    assert "everything applied before it was restored" in exc.value.message
    assert snapshot(root) == before


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644])
def test_the_mode_survives_a_successful_edit_whatever_the_umask(host, mode):
    root, paths = host
    conf = root / "var/lib/lxc/serving/config"
    os.chmod(str(conf), mode)
    old_umask = os.umask(0o077)
    try:
        lm.run(params(name="serving", backup=False), paths=paths)
    finally:
        os.umask(old_umask)
    assert os.stat(str(conf)).st_mode & 0o777 == mode and conf.read_bytes() == fx.AFTER_LXC_PLAIN


@pytest.mark.parametrize("which", ["proxmox", "lxc"])
def test_the_backup_of_a_0600_config_is_0600(host, which):
    root, paths = host
    conf = root / ("etc/pve/lxc/101.conf" if which == "proxmox" else "var/lib/lxc/serving/config")
    os.chmod(str(conf), 0o600)
    result = lm.run(params(vmid=101) if which == "proxmox" else params(name="serving"), paths=paths)
    assert os.stat(result["backup_file"]).st_mode & 0o777 == 0o600
    assert os.stat(str(conf)).st_mode & 0o777 == 0o600


def test_a_failed_backup_leaves_nothing(host, monkeypatch):
    root, paths = host
    before = snapshot(root)
    real = fileops.write_atomic

    def no_space_for_backups(path, content, **kw):
        if path.endswith(".gpufleet.bak"):
            raise OSError(28, "No space left on device", path)
        return real(path, content, **kw)

    monkeypatch.setattr(fileops, "write_atomic", no_space_for_backups)
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(name="serving"), paths=paths)
    assert ".gpufleet.bak: No space left on device (ENOSPC)" in exc.value.message
    assert snapshot(root) == before


# --- what sits at the path: refused by name, never a hang or a traceback ------------------------

@pytest.fixture
def no_hang():
    """Fail the test instead of hanging for ever (a plain open() of a FIFO blocks)."""
    import signal

    def alarm(*_a):
        raise AssertionError("the module blocked")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_fifo_at_the_config_path_is_refused_by_name(host, no_hang):
    root, paths = host
    os.makedirs(str(root / "var/lib/lxc/piped"))
    os.mkfifo(str(root / "var/lib/lxc/piped/config"))
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(name="piped"), paths=paths)
    assert "cannot read the container config %s/var/lib/lxc/piped/config: is a FIFO" % root in exc.value.message
    assert snapshot(root) == before


def test_a_directory_at_the_config_path_is_refused_by_name(host):
    root, paths = host
    os.makedirs(str(root / "var/lib/lxc/dir/config"))
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(name="dir"), paths=paths)
    assert "%s/var/lib/lxc/dir/config: is a directory where a regular file was expected (EISDIR)" % root \
        in exc.value.message


def test_a_nul_byte_in_the_path_is_refused_before_reading(host):
    root, paths = host
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(path=str(root / "var/lib/lxc/serving/config\0x")), paths=paths)
    assert "is not valid: an absolute path to a container config (it holds a NUL byte)" in exc.value.message
    assert "\\x00" in exc.value.message  # shown escaped, not as a raw NUL
    assert snapshot(root) == before


LATIN1 = (
    b"# Beschreibung: Gr\xf6\xdfe Modelle, M\xfcnchen\n"
    b"lxc.uts.name = serving\n"
    b"lxc.rootfs.path = dir:/var/lib/lxc/serving/rootfs\n"
)


def test_latin1_bytes_are_edited_byte_exact(host):
    root, paths = host
    write_tree(root, {"var/lib/lxc/latin/config": LATIN1})
    result = lm.run(params(name="latin"), paths=paths)
    assert (root / "var/lib/lxc/latin/config").read_bytes() == LATIN1 + b"lxc.prlimit.memlock = unlimited\n"
    assert open(result["backup_file"], "rb").read() == LATIN1
    # only the changed line is shown, so the Latin-1 comment never reaches the result
    assert result["diff"][1]["after"] == "4: lxc.prlimit.memlock = unlimited\n"
    assert lm.run(params(name="latin"), paths=paths)["changed"] is False


def test_a_latin1_value_is_a_limit_lxc_cannot_read(host):
    root, paths = host
    write_tree(root, {"var/lib/lxc/latin/config": LATIN1 + b"lxc.prlimit.memlock = 8388608\xa0\n"})
    result = lm.run(params(name="latin", backup=False), paths=paths)
    assert result["limit_before_error"] and result["limit_before_raw"] == "8388608\udca0"
    assert (root / "var/lib/lxc/latin/config").read_bytes() == LATIN1 + b"lxc.prlimit.memlock = unlimited\n"


# --- where a container's config is --------------------------------------------------------------

def test_proxmox_generated_runtime_config_is_refused(host):
    root, paths = host
    write_tree(root, {"var/lib/lxc/101/config": b"lxc.uts.name = llm-serve-01\n"})
    before = snapshot(root)
    for kw in (dict(name="101"), dict(path=str(root / "var/lib/lxc/101/config"))):
        with pytest.raises(ModuleFailure) as exc:
            lm.run(params(**kw), paths=paths)
        assert "generated by Proxmox from %s/101.conf" % paths.pve_lxc in exc.value.message
        assert "use vmid: 101" in exc.value.message
    assert snapshot(root) == before
    # another LXC path is not where Proxmox writes its runtime copies
    write_tree(root, {"srv/lxc/101/config": b"lxc.uts.name = elsewhere\n"})
    assert lm.run(params(path=str(root / "srv/lxc/101/config"), backup=False), paths=paths)["changed"] is True
    # a numeric plain LXC container with no Proxmox config of that ID is an ordinary container
    write_tree(root, {"var/lib/lxc/42/config": b"lxc.uts.name = answer\n"})
    assert lm.run(params(name="42", backup=False), paths=paths)["changed"] is True


def test_a_name_is_found_under_the_configured_lxcpath(host):
    root, paths = host
    write_tree(root, {"etc/lxc/lxc.conf": "# local\nlxc.lxcpath = %s/srv/lxc\n" % root,
                      "srv/lxc/web/config": fx.LXC_PLAIN})
    result = lm.run(params(name="web", backup=False), paths=paths)
    assert result["path"] == "%s/srv/lxc/web/config" % root and result["lxc_path"] == "%s/srv/lxc" % root
    assert (root / "srv/lxc/web/config").read_bytes() == fx.AFTER_LXC_PLAIN
    # the default path wins when it holds the container
    assert lm.run(params(name="serving"), check_mode=True, paths=paths)["path"] == str(
        root / "var/lib/lxc/serving/config")
    with pytest.raises(ModuleFailure, match="var/lib/lxc/nowhere/config does not exist"):
        lm.run(params(name="nowhere"), paths=paths)


def test_secrets_in_the_config_never_reach_the_result(host):
    """An LXC config can hold lxc.environment = HF_TOKEN=...: the result (and the controller's
    verify.json, which stores it on drift) carries the changed lines only."""
    root, paths = host
    config = fx.PVE_PLAIN + b"lxc.environment: HF_TOKEN=hf_secret_value\n"
    write_tree(root, {"etc/pve/lxc/101.conf": config})
    os.chmod(str(root / "etc/pve/lxc/101.conf"), 0o600)
    for check_mode in (True, False):
        result = lm.run(params(vmid=101), check_mode=check_mode, paths=paths)
        assert "hf_secret_value" not in json.dumps(result)
    [backup] = backups(root / "etc/pve/lxc")
    assert os.stat(str(root / "etc/pve/lxc" / backup)).st_mode & 0o777 == 0o600


# --- change records (issue 16): what changed, for programs; changed iff there are records -------

def _digest(data):
    import hashlib
    return hashlib.sha256(data).hexdigest()


def test_records_of_an_edit_name_the_limit_the_config_and_the_backup(host):
    root, paths = host
    conf = root / "etc/pve/lxc/101.conf"
    mode = "%04o" % (os.stat(str(conf)).st_mode & 0o777)
    result = lm.run(params(vmid=101), paths=paths)
    assert result["changed"] is True
    value, config, backup = result["changes"]
    assert value == {"area": "lxc_memlock", "kind": "value", "target": "%s lxc.prlimit.memlock" % conf,
                     "before": None, "after": "unlimited"}
    assert config == {"area": "lxc_memlock", "kind": "file", "target": str(conf),
                      "before": {"sha256": _digest(fx.PVE_PLAIN), "size": len(fx.PVE_PLAIN), "mode": mode},
                      "after": {"sha256": _digest(fx.AFTER_PVE_PLAIN), "size": len(fx.AFTER_PVE_PLAIN),
                                "mode": mode}}
    # the backup is a new file: nothing before, the old config's bytes after
    assert backup["kind"] == "file" and backup["target"] == result["backup_file"]
    assert backup["before"] is None and backup["after"] == dict(config["before"])
    # the second run changes nothing and says so
    again = lm.run(params(vmid=101), paths=paths)
    assert again["changed"] is False and again["changes"] == []


def test_records_in_check_mode_are_the_planned_ones_and_nothing_is_written(host):
    root, paths = host
    running_101(root)
    before = snapshot(root)
    result = lm.run(params(vmid=101, limit=65536), check_mode=True, paths=paths)
    assert result["changed"] is True and result["backup_file"] is None
    kinds = [(r["kind"], r["before"] is None) for r in result["changes"]]
    assert kinds == [("value", True), ("file", False), ("file", True)]
    assert result["changes"][0]["after"] == "65536"
    planned = result["changes"][2]["target"]
    assert planned.startswith(str(root / "etc/pve/lxc/101.conf.")) and planned.endswith(".gpufleet.bak")
    assert snapshot(root) == before
    # without a backup there is no backup record
    result = lm.run(params(vmid=101, backup=False), check_mode=True, paths=paths)
    assert [r["kind"] for r in result["changes"]] == ["value", "file"]


def test_only_dropping_a_duplicate_is_a_file_record_without_a_value_record(host):
    root, paths = host
    write_tree(root, {"etc/pve/lxc/101.conf": fx.PVE_PLAIN + b"lxc.prlimit.memlock: unlimited\n" * 2})
    result = lm.run(params(vmid=101, backup=False), paths=paths)
    assert result["changed"] is True and result["duplicates_removed"] == 1
    assert [(r["kind"], r["target"]) for r in result["changes"]] == [("file", str(root / "etc/pve/lxc/101.conf"))]


def test_records_of_a_pending_or_unchanged_container_are_empty(host):
    root, paths = host
    running_101(root, LIMITS_8M)
    write_tree(root, {"etc/pve/lxc/101.conf": locked("backup")})
    result = lm.run(params(vmid=101), paths=paths)
    assert result["pending"] is True and result["changed"] is False and result["changes"] == []
    # a restart still due is not a change of this run
    write_tree(root, {"etc/pve/lxc/101.conf": fx.AFTER_PVE_PLAIN})
    result = lm.run(params(vmid=101), check_mode=True, paths=paths)
    assert result["restart_required"] is True and result["changed"] is False and result["changes"] == []


def test_a_failed_edit_claims_no_records(host, monkeypatch):
    root, paths = host
    _failing_read_back(monkeypatch, fx.AFTER_PVE_PLAIN)
    with pytest.raises(ModuleFailure) as exc:
        lm.run(params(vmid=101), paths=paths)
    assert "changes" not in exc.value.partial
    with pytest.raises(ModuleFailure) as exc:
        write_tree(root, {"etc/pve/lxc/101.conf": locked("backup")})
        lm.run(params(vmid=101, on_locked="fail"), paths=paths)
    assert "changes" not in exc.value.partial


def test_records_carry_digests_never_the_secrets_of_a_config(host):
    root, paths = host
    write_tree(root, {"var/lib/lxc/serving/config": fx.LXC_PLAIN + b"lxc.environment = HF_TOKEN=hf_secret_value\n"})
    for check_mode in (True, False):
        result = lm.run(params(name="serving"), check_mode=check_mode, paths=paths)
        assert result["changes"] and "hf_secret_value" not in json.dumps(result["changes"])


def test_paths_all_under_one_root():
    paths = lm.Paths()
    assert (paths.pve_lxc, paths.lxc_path, paths.lxc_conf, paths.proc, paths.cgroup, paths.pve_lock_dir) == (
        "/etc/pve/lxc", "/var/lib/lxc", "/etc/lxc/lxc.conf", "/proc", "/sys/fs/cgroup", "/run/lock/lxc")
    paths = lm.Paths("/srv/t")
    assert (paths.pve_lxc, paths.cgroup, paths.pve_lock_dir) == (
        "/srv/t/etc/pve/lxc", "/srv/t/sys/fs/cgroup", "/srv/t/run/lock/lxc")
