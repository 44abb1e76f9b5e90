import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import managed_files as mf
from ansible_collections.gpufleet.tuning.plugins.module_utils.transaction import Transaction

from ...helpers import snapshot

MARK = "# Managed by Ansible (gpufleet.tuning.test)\n"


def test_plan_apply_and_idempotence(tmp_path):
    unit = str(tmp_path / "system/gpufleet-x.service")
    wanted = [mf.Wanted(unit, MARK + "[Unit]\n"), mf.unit_wants_link(str(tmp_path / "system"), "gpufleet-x.service")]
    changes = mf.plan(wanted)
    assert [c.describe() for c in changes] == [
        "write %s" % unit,
        "link %s -> ../gpufleet-x.service" % (tmp_path / "system/multi-user.target.wants/gpufleet-x.service")]
    entries = mf.diff_entries(changes)
    assert entries[0]["after"] == MARK + "[Unit]\n" and entries[0]["before"] == ""
    assert entries[1]["after"] == "-> ../gpufleet-x.service\n"
    mf.apply(changes, Transaction())
    assert open(unit).read() == MARK + "[Unit]\n"
    assert os.readlink(str(tmp_path / "system/multi-user.target.wants/gpufleet-x.service")) == "../gpufleet-x.service"
    assert mf.plan(wanted) == []


def test_mode_difference_is_a_change(tmp_path):
    path = tmp_path / "helper"
    path.write_text("#!/bin/sh\n" + MARK)
    os.chmod(str(path), 0o644)
    changes = mf.plan([mf.Wanted(str(path), "#!/bin/sh\n" + MARK, mode=0o755)])
    assert len(changes) == 1
    mf.apply(changes, Transaction())
    assert os.stat(str(path)).st_mode & 0o777 == 0o755


def test_rollback_restores_files_and_links(tmp_path):
    keep = tmp_path / "a.conf"
    keep.write_text(MARK + "old\n")
    link = tmp_path / "l"
    os.symlink("elsewhere", str(link))
    wanted = [mf.Wanted(str(keep), MARK + "new\n"), mf.Wanted(str(link), symlink="here"),
              mf.Wanted(str(tmp_path / "new.conf"), MARK + "x\n")]
    tx = Transaction()
    mf.apply(mf.plan(wanted), tx)
    assert keep.read_text() == MARK + "new\n" and os.readlink(str(link)) == "here"
    assert tx.rollback() == []
    assert keep.read_text() == MARK + "old\n"
    assert os.readlink(str(link)) == "elsewhere"
    assert not (tmp_path / "new.conf").exists()


def test_absent_removes_and_rollback_recreates(tmp_path):
    path = tmp_path / "gone.conf"
    path.write_text(MARK + "x\n")
    changes = mf.plan([mf.Wanted(str(path))])
    assert changes[0].describe() == "remove %s" % path
    assert mf.diff_entries(changes)[0]["after_header"].endswith("(absent)")
    tx = Transaction()
    mf.apply(changes, tx)
    assert not path.exists()
    tx.rollback()
    assert path.read_text() == MARK + "x\n"
    assert mf.plan([mf.Wanted(str(tmp_path / "never"))]) == []


def test_failure_midway_leaves_earlier_changes_undoable(tmp_path, monkeypatch):
    first = tmp_path / "one"
    tx = Transaction()
    wanted = [mf.Wanted(str(first), MARK + "1\n"), mf.Wanted(str(tmp_path / "two"), MARK + "2\n")]
    changes = mf.plan(wanted)
    from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops
    real = fileops.write_atomic

    def fail_second(path, *a, **k):
        if str(path).endswith("two"):
            raise OSError(28, "No space left on device")
        return real(path, *a, **k)

    monkeypatch.setattr(fileops, "write_atomic", fail_second)
    with pytest.raises(OSError):
        mf.apply(changes, tx)
    assert first.exists()
    tx.rollback()
    assert not first.exists()


def test_a_file_without_the_marker_is_neither_overwritten_nor_removed(tmp_path):
    """The distribution's nvidia.conf (blacklist nouveau) must survive a module that wants
    the same name, both for writing and for state=absent."""
    theirs = tmp_path / "modprobe.d" / "nvidia.conf"
    theirs.parent.mkdir()
    theirs.write_text("blacklist nouveau\noptions nouveau modeset=0\n")
    before = snapshot(tmp_path)
    for wanted in (mf.Wanted(str(theirs), MARK + "options nvidia NVreg_X=1\n"), mf.Wanted(str(theirs))):
        with pytest.raises(mf.NotOwned) as exc:
            mf.plan([wanted])
        assert str(theirs) in str(exc.value) and exc.value.filename == str(theirs)
    assert snapshot(tmp_path) == before


def test_adopt_takes_over_a_foreign_file(tmp_path):
    theirs = tmp_path / "nvidia.conf"
    theirs.write_text("blacklist nouveau\n")
    changes = mf.plan([mf.Wanted(str(theirs), MARK + "x\n", adopt=True)])
    mf.apply(changes, Transaction())
    assert theirs.read_text() == MARK + "x\n"


def test_content_without_marker_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError):
        mf.plan([mf.Wanted(str(tmp_path / "f"), "no marker\n")])


def test_rollback_restores_mode_owner_and_removes_created_dirs(tmp_path):
    helper = tmp_path / "libexec" / "helper"
    helper.parent.mkdir()
    helper.write_text("#!/bin/sh\n" + MARK + "old\n")
    os.chmod(str(helper), 0o750)
    before = snapshot(tmp_path)
    tx = Transaction()
    wanted = [mf.Wanted(str(helper), "#!/bin/sh\n" + MARK + "new\n", mode=0o755),
              mf.Wanted(str(tmp_path / "etc/udev/rules.d/99-x.rules"), MARK),
              mf.unit_wants_link(str(tmp_path / "systemd"), "x.service")]
    mf.apply(mf.plan(wanted), tx)
    assert (tmp_path / "etc/udev/rules.d").is_dir()
    assert tx.rollback() == []
    assert snapshot(tmp_path) == before
    assert os.stat(str(helper)).st_mode & 0o777 == 0o750


def test_a_fifo_where_a_file_belongs_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "zz.conf"
    os.mkfifo(str(fifo))
    with pytest.raises(OSError) as exc:
        mf.plan([mf.Wanted(str(fifo), MARK)])
    assert "FIFO" in str(exc.value) and exc.value.filename == str(fifo)
