import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import managed_files as mf
from ansible_collections.gpufleet.tuning.plugins.module_utils.transaction import Transaction


def test_plan_apply_and_idempotence(tmp_path):
    unit = str(tmp_path / "system/gpufleet-x.service")
    wanted = [mf.Wanted(unit, "[Unit]\n"), mf.unit_wants_link(str(tmp_path / "system"), "gpufleet-x.service")]
    changes = mf.plan(wanted)
    assert [c.describe() for c in changes] == [
        "write %s" % unit,
        "link %s -> ../gpufleet-x.service" % (tmp_path / "system/multi-user.target.wants/gpufleet-x.service")]
    entries = mf.diff_entries(changes)
    assert entries[0]["after"] == "[Unit]\n" and entries[0]["before"] == ""
    assert entries[1]["after"] == "-> ../gpufleet-x.service\n"
    mf.apply(changes, Transaction())
    assert open(unit).read() == "[Unit]\n"
    assert os.readlink(str(tmp_path / "system/multi-user.target.wants/gpufleet-x.service")) == "../gpufleet-x.service"
    assert mf.plan(wanted) == []


def test_mode_difference_is_a_change(tmp_path):
    path = tmp_path / "helper"
    path.write_text("#!/bin/sh\n")
    os.chmod(str(path), 0o644)
    changes = mf.plan([mf.Wanted(str(path), "#!/bin/sh\n", mode=0o755)])
    assert len(changes) == 1
    mf.apply(changes, Transaction())
    assert os.stat(str(path)).st_mode & 0o777 == 0o755


def test_rollback_restores_files_and_links(tmp_path):
    keep = tmp_path / "a.conf"
    keep.write_text("old\n")
    link = tmp_path / "l"
    os.symlink("elsewhere", str(link))
    wanted = [mf.Wanted(str(keep), "new\n"), mf.Wanted(str(link), symlink="here"),
              mf.Wanted(str(tmp_path / "new.conf"), "x\n")]
    tx = Transaction()
    mf.apply(mf.plan(wanted), tx)
    assert keep.read_text() == "new\n" and os.readlink(str(link)) == "here"
    assert tx.rollback() == []
    assert keep.read_text() == "old\n"
    assert os.readlink(str(link)) == "elsewhere"
    assert not (tmp_path / "new.conf").exists()


def test_absent_removes_and_rollback_recreates(tmp_path):
    path = tmp_path / "gone.conf"
    path.write_text("x\n")
    changes = mf.plan([mf.Wanted(str(path))])
    assert changes[0].describe() == "remove %s" % path
    assert mf.diff_entries(changes)[0]["after_header"].endswith("(absent)")
    tx = Transaction()
    mf.apply(changes, tx)
    assert not path.exists()
    tx.rollback()
    assert path.read_text() == "x\n"
    assert mf.plan([mf.Wanted(str(tmp_path / "never"))]) == []


def test_failure_midway_leaves_earlier_changes_undoable(tmp_path, monkeypatch):
    first = tmp_path / "one"
    tx = Transaction()
    wanted = [mf.Wanted(str(first), "1\n"), mf.Wanted(str(tmp_path / "two"), "2\n")]
    changes = mf.plan(wanted)
    from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops
    real = fileops.write_atomic

    def fail_second(path, *a, **k):
        if path.endswith("two"):
            raise OSError(28, "No space left on device")
        return real(path, *a, **k)

    monkeypatch.setattr(fileops, "write_atomic", fail_second)
    with pytest.raises(OSError):
        mf.apply(changes, tx)
    assert first.exists()
    tx.rollback()
    assert not first.exists()
