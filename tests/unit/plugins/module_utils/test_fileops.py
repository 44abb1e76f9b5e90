import os
import stat

from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops


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
