"""plugin_utils/artifact_fs: the artifacts folder read and written through directory descriptors.

A link in any component, a FIFO, socket or device where a file goes and a folder others may
write without the sticky bit are refused, naming them, and nothing blocks; a write is atomic
(no temporary left by a failure), takes the mode asked for whatever the umask, replaces a link
swapped in after the check instead of following it, and a second write of the same bytes
changes nothing."""

import errno
import os
import socket
import stat

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_fs as fs
from ansible_collections.gpufleet.tuning.tests.unit.helpers import bounded


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "artifacts"
    path.mkdir()
    with fs.closing(fs.open_dir(str(path))) as fd:
        yield path, fd


def test_the_folder_named_is_refused_when_it_is_a_link(tmp_path):
    (tmp_path / "real" / "host").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(fs.Refused) as exc:
        fs.open_dir(str(tmp_path / "link"))
    assert exc.value.kind == "link" and exc.value.path == str(tmp_path / "link")
    assert str(exc.value) == "refusing %s: it is a symbolic link (to %s), which is never followed" % (
        tmp_path / "link", tmp_path / "real")


def test_links_above_the_folder_named_are_the_operators_and_resolved_once(tmp_path):
    """/srv -> /data/srv on the controller: the folders above the artifacts are the operator's
    setup; the folder itself and everything under it are never followed."""
    (tmp_path / "real" / "host").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with fs.closing(fs.open_dir(str(tmp_path / "link" / "host"))) as fd:
        assert os.path.samestat(os.fstat(fd), os.stat(str(tmp_path / "real" / "host")))


def test_a_link_in_any_component_below_is_refused_naming_it(tmp_path):
    (tmp_path / "real" / "host").mkdir(parents=True)
    os.symlink(str(tmp_path / "real" / "host"), str(tmp_path / "real" / "l"))
    with fs.closing(fs.open_dir(str(tmp_path / "real"))) as fd:
        with pytest.raises(fs.Refused, match="refusing .*/real/l: it is a symbolic link"):
            fs.open_subdir(fd, "l", where=str(tmp_path / "real"))


def test_a_file_where_a_folder_goes_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(fs.Refused, match="it exists and is not a directory"):
        fs.open_dir(str(tmp_path / "file"))


def test_a_missing_folder_is_not_found_unless_made_with_its_mode_whatever_the_umask(tmp_path):
    with pytest.raises(FileNotFoundError):
        fs.open_dir(str(tmp_path / "a" / "b"))
    old = os.umask(0o077)
    try:
        with fs.closing(fs.open_dir(str(tmp_path / "a" / "b"), create=True, mode=0o750)) as fd:
            assert stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.umask(old)
    assert oct(stat.S_IMODE(os.stat(str(tmp_path / "a")).st_mode)) == "0o750"
    assert oct(stat.S_IMODE(os.stat(str(tmp_path / "a" / "b")).st_mode)) == "0o750"


def test_a_folder_others_may_write_without_the_sticky_bit_is_refused_naming_it(tmp_path):
    shared = tmp_path / "shared"
    (shared / "host").mkdir(parents=True)
    shared.chmod(0o777)
    with pytest.raises(fs.Refused) as exc:
        fs.open_dir(str(shared / "host"))
    assert exc.value.kind == "other_writable" and exc.value.path == str(shared)
    assert "writable by other users without the sticky bit (mode 0777)" in str(exc.value)
    with fs.closing(fs.open_dir(str(tmp_path))) as fd:
        with pytest.raises(fs.Refused, match="refusing %s: it is writable by other users" % shared):
            fs.open_subdir(fd, "shared", where=str(tmp_path))
    shared.chmod(0o1777)  # sticky, as /tmp: others cannot rename or remove what is not theirs
    with fs.closing(fs.open_dir(str(shared / "host"))):
        pass


def test_a_fifo_is_refused_without_blocking(folder):
    path, fd = folder
    os.mkfifo(str(path / "audit.json"))
    with pytest.raises(fs.Refused) as exc:
        bounded(lambda: fs.read_file(fd, "audit.json", where=str(path)))
    assert exc.value.kind == "not_regular"
    assert str(exc.value) == "refusing %s: it is a FIFO (named pipe), not a regular file" % (path / "audit.json")
    with pytest.raises(fs.Refused, match="FIFO"):
        bounded(lambda: fs.write_file(fd, "audit.json", b"{}", 0o644))
    assert stat.S_ISFIFO(os.lstat(str(path / "audit.json")).st_mode)


def test_a_socket_is_refused(folder):
    path, fd = folder
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path / "verify.json"))
        with pytest.raises(fs.Refused, match="it is a socket, not a regular file"):
            bounded(lambda: fs.read_file(fd, "verify.json"))


def test_a_device_is_refused(folder):
    path, fd = folder
    try:
        os.mknod(str(path / "index.html"), stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            pytest.skip("making a device needs CAP_MKNOD (%s)" % exc.strerror)
        raise
    with pytest.raises(fs.Refused, match="it is a character device, not a regular file"):
        bounded(lambda: fs.read_file(fd, "index.html"))
    with pytest.raises(fs.Refused, match="character device"):
        fs.write_file(fd, "index.html", b"page", 0o644)


def test_a_link_where_a_file_goes_is_refused_and_not_followed(folder, tmp_path):
    path, fd = folder
    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA operator\n")
    (path / "index.html").symlink_to(victim)
    for work in (lambda: fs.read_file(fd, "index.html"), lambda: fs.write_file(fd, "index.html", b"x", 0o644)):
        with pytest.raises(fs.Refused, match="it is a symbolic link \\(to %s\\)" % victim):
            work()
    assert victim.read_text() == "ssh-ed25519 AAAA operator\n"


def test_a_link_swapped_in_after_the_check_is_replaced_not_followed(folder, tmp_path, monkeypatch):
    path, fd = folder
    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA operator\n")
    victim.chmod(0o600)
    (path / "index.html").write_text("old page")
    checked = fs.same

    def swap_after_check(*args, **kwargs):
        answer = checked(*args, **kwargs)
        os.unlink(str(path / "index.html"))
        os.symlink(str(victim), str(path / "index.html"))
        return answer
    monkeypatch.setattr(fs, "same", swap_after_check)
    assert fs.write_file(fd, "index.html", b"new page", 0o644) is True
    assert (path / "index.html").read_bytes() == b"new page" and not (path / "index.html").is_symlink()
    assert victim.read_text() == "ssh-ed25519 AAAA operator\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_a_write_sets_the_mode_whatever_the_umask_and_a_second_changes_nothing(folder):
    path, fd = folder
    old = os.umask(0o077)
    try:
        assert fs.write_file(fd, "audit.json", b"{}\n", 0o644) is True
    finally:
        os.umask(old)
    info = os.stat(str(path / "audit.json"))
    assert oct(stat.S_IMODE(info.st_mode)) == "0o644" and (path / "audit.json").read_bytes() == b"{}\n"
    assert fs.write_file(fd, "audit.json", b"{}\n", 0o644) is False
    assert os.stat(str(path / "audit.json")).st_ino == info.st_ino, "a right file is not written again"
    assert fs.write_file(fd, "audit.json", b"{}\n", 0o600, check=True) is True, "another mode is a change"
    assert oct(stat.S_IMODE(os.stat(str(path / "audit.json")).st_mode)) == "0o644", "check writes nothing"
    assert fs.write_file(fd, "audit.json", b"{}\n", 0o600) is True
    assert oct(stat.S_IMODE(os.stat(str(path / "audit.json")).st_mode)) == "0o600"
    assert sorted(os.listdir(str(path))) == ["audit.json"]


@pytest.mark.parametrize("failing", ["fsync", "rename"])
def test_a_failed_write_leaves_no_temporary_and_the_old_file(folder, monkeypatch, failing):
    path, fd = folder
    (path / "audit.json").write_text("old\n")

    def broken(*_args, **_kwargs):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(fs.os, failing, broken)
    with pytest.raises(OSError) as exc:
        fs.write_file(fd, "audit.json", b"new\n", 0o644, where=str(path))
    assert exc.value.filename == str(path / "audit.json"), "the error names the file, not the temporary"
    monkeypatch.undo()
    assert sorted(os.listdir(str(path))) == ["audit.json"] and (path / "audit.json").read_text() == "old\n"


def test_reads_a_file_and_says_absent_or_too_big(folder):
    path, fd = folder
    assert fs.read_file(fd, "missing.json") is None
    (path / "audit.json").write_bytes(b"x" * 10)
    assert fs.read_file(fd, "audit.json") == b"x" * 10
    with pytest.raises(fs.Refused) as exc:
        fs.read_file(fd, "audit.json", limit=9)
    assert exc.value.kind == "too_big"
