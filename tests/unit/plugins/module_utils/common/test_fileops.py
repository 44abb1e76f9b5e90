import errno
import os
import stat

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction

from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot


def test_write_new_file_mode_and_content(tmp_path):
    target = tmp_path / "sub" / "f.conf"
    fileops.write_atomic(str(target), "a = 1\n", mode=0o640)
    assert target.read_text() == "a = 1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["f.conf"]  # no temp file left


def test_replace_keeps_existing_mode(tmp_path):
    target = tmp_path / "f"
    target.write_text("old")
    os.chmod(str(target), 0o600)
    fileops.write_atomic(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_metadata_false_makes_no_chmod(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "fchmod", lambda *a: calls.append(("fchmod", a)))
    monkeypatch.setattr(os, "fchown", lambda *a: calls.append(("fchown", a)))
    monkeypatch.setattr(os, "chmod", lambda *a, **k: calls.append(("chmod", a)))
    target = tmp_path / "101.conf"
    target.write_text("arch: amd64\n")
    fileops.write_atomic(str(target), "arch: amd64\nlxc.prlimit.memlock: unlimited\n", metadata=False)
    assert calls == []
    assert target.read_text().endswith("unlimited\n")


def test_failed_write_leaves_target_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "f"
    target.write_text("old")

    def boom(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    try:
        fileops.write_atomic(str(target), "new")
    except OSError:
        pass
    else:
        raise AssertionError("write_atomic should have failed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_restore_and_remove(tmp_path):
    target = tmp_path / "f"
    fileops.restore_file(str(target), b"x")
    assert target.read_bytes() == b"x"
    fileops.restore_file(str(target), None)
    assert not target.exists()
    assert fileops.remove_file(str(target)) is False
    assert fileops.read_text(str(target)) is None


def test_backup_beside_file(tmp_path):
    target = tmp_path / "101.conf"
    target.write_text("x")
    first = fileops.write_backup(str(target), b"x", metadata=False)
    second = fileops.write_backup(str(target), b"x", metadata=False)
    assert first != second
    assert os.path.dirname(first) == str(tmp_path)
    assert open(first, "rb").read() == b"x"


# --- what may be found where a config file should be ----------------------------------------

def test_write_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "repo" / "grub"
    real.parent.mkdir()
    real.write_text("old\n")
    os.chmod(str(real), 0o640)
    link = tmp_path / "grub"
    os.symlink("repo/grub", str(link))
    fileops.write_atomic(str(link), "new\n")
    assert os.path.islink(str(link)) and os.readlink(str(link)) == "repo/grub"
    assert real.read_text() == "new\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_replace_through_a_symlink_rolls_back_into_the_target(tmp_path):
    real = tmp_path / "101.conf.real"
    real.write_text("arch: amd64\n")
    link = tmp_path / "101.conf"
    os.symlink(str(real), str(link))
    before = snapshot(tmp_path)
    tx = Transaction()
    fileops.replace(tx, str(link), "arch: amd64\nlxc.prlimit.memlock: unlimited\n", metadata=False)
    assert os.path.islink(str(link)) and "unlimited" in real.read_text()
    assert tx.rollback() == []
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("make, words", [
    (os.mkfifo, "FIFO"),
    (os.mkdir, "directory"),
])
def test_non_regular_files_are_refused_by_name(tmp_path, make, words):
    path = str(tmp_path / "conf")
    make(path)
    for call in (lambda: fileops.read_bytes(path), lambda: fileops.read_text(path),
                 lambda: fileops.write_atomic(path, "x"), lambda: fileops.remove_file(path),
                 lambda: fileops.capture(path)):
        with pytest.raises(OSError) as exc:
            call()
        assert exc.value.filename == path and words in str(exc.value), exc.value
    assert fileops.read_quiet(path) is None


def test_nul_in_a_path_is_an_oserror_naming_it(tmp_path):
    bad = str(tmp_path / "a\0b")
    for call in (lambda: fileops.read_bytes(bad), lambda: fileops.write_atomic(bad, "x"),
                 lambda: fileops.remove_file(bad)):
        with pytest.raises(OSError) as exc:
            call()
        assert exc.value.errno == errno.EINVAL and "NUL" in str(exc.value)
    assert fileops.read_quiet(bad) is None


def test_undecodable_text_names_path_and_offset(tmp_path):
    path = tmp_path / "grub"
    path.write_bytes(b'GRUB_CMDLINE_LINUX="quiet\xff"\n')
    with pytest.raises(OSError) as exc:
        fileops.read_text(str(path))
    assert exc.value.errno == errno.EILSEQ and exc.value.filename == str(path)
    assert "offset 25" in fileops.describe(exc.value)
    assert fileops.read_bytes(str(path)).endswith(b'\xff"\n')


def test_describe_names_the_path(tmp_path, monkeypatch):
    def erofs(*_a, **_k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "rename", erofs)
    target = str(tmp_path / "f")
    with pytest.raises(OSError) as exc:
        fileops.write_atomic(target, "x")
    assert fileops.describe(exc.value) == "%s: Read-only file system (EROFS)" % target
    assert os.listdir(str(tmp_path)) == []


def test_directories_are_0755_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        fileops.write_atomic(str(tmp_path / "usr/local/libexec/h"), "x", mode=0o755)
    finally:
        os.umask(old)
    for rel in ("usr", "usr/local", "usr/local/libexec"):
        assert stat.S_IMODE((tmp_path / rel).stat().st_mode) == 0o755, rel


def test_failed_write_removes_the_directories_it_made(tmp_path, monkeypatch):
    def no_space(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError):
        fileops.write_atomic(str(tmp_path / "a/b/c.conf"), "x")
    assert os.listdir(str(tmp_path)) == []


def test_capture_restore_is_exact(tmp_path):
    helper = tmp_path / "helper"
    helper.write_text("#!/bin/sh\n")
    os.chmod(str(helper), 0o750)
    before = snapshot(tmp_path)
    tx = Transaction()
    fileops.replace(tx, str(helper), "#!/bin/sh\necho new\n", mode=0o644)
    fileops.replace(tx, str(tmp_path / "new/dir/x.rules"), "x\n")
    fileops.replace(tx, str(tmp_path / "absent"), None)
    assert stat.S_IMODE(helper.stat().st_mode) == 0o644
    assert tx.rollback() == []
    assert snapshot(tmp_path) == before


def test_backup_keeps_the_source_mode(tmp_path):
    config = tmp_path / "101.conf"
    config.write_text("lxc.environment = HF_TOKEN=secret\n")
    os.chmod(str(config), 0o600)
    backup = fileops.write_backup(str(config), config.read_bytes())
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
