import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files as mf
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction

from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot

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
    from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
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


# --- owner: what root runs stays root's -------------------------------------------------------

USER = 1000


def owner_of(path):
    st = os.lstat(str(path))
    return st.st_uid, st.st_gid


def test_a_file_owned_by_another_user_is_a_change_and_the_write_gives_it_to_root(tmp_path):
    helper = tmp_path / "helper"
    helper.write_text("#!/bin/sh\n" + MARK)
    os.chmod(str(helper), 0o755)
    os.chown(str(helper), USER, USER)
    wanted = [mf.Wanted(str(helper), "#!/bin/sh\n" + MARK, mode=0o755)]
    changes = mf.plan(wanted)
    assert len(changes) == 1 and changes[0].before_owner == (USER, USER) and changes[0].before_mode is None
    assert changes[0].describe() == "set owner 1000:1000 -> 0:0 of %s" % helper
    assert mf.diff_entries(changes) == [{
        "before_header": "%s owner and mode (before)" % helper, "after_header": "%s owner and mode (after)" % helper,
        "before": "owner = 1000:1000\n", "after": "owner = 0:0\n"}]
    tx = Transaction()
    mf.apply(changes, tx)
    assert owner_of(helper) == (0, 0) and os.stat(str(helper)).st_mode & 0o7777 == 0o755
    assert mf.plan(wanted) == []
    tx.rollback()
    assert owner_of(helper) == (USER, USER)


def test_content_mode_and_owner_changes_show_the_text_and_the_metadata(tmp_path):
    rule = tmp_path / "99-x.rules"
    rule.write_text(MARK + "old\n")
    os.chmod(str(rule), 0o666)
    os.chown(str(rule), USER, 0)
    (change,) = mf.plan([mf.Wanted(str(rule), MARK + "new\n")])
    assert change.describe() == "write %s" % rule
    text, meta = mf.diff_entries([change])
    assert (text["before"], text["after"]) == (MARK + "old\n", MARK + "new\n")
    assert (meta["before"], meta["after"]) == ("mode = 0666\nowner = 1000:0\n", "mode = 0644\nowner = 0:0\n")
    mf.apply([change], Transaction())
    assert owner_of(rule) == (0, 0) and os.stat(str(rule)).st_mode & 0o7777 == 0o644


def test_a_new_file_in_a_setgid_directory_is_still_roots_group(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(str(shared), 0, USER)
    os.chmod(str(shared), 0o2755)
    mf.apply(mf.plan([mf.Wanted(str(shared / "a.conf"), MARK)]), Transaction())
    assert owner_of(shared / "a.conf") == (0, 0)  # not the directory's group


def test_owner_none_leaves_the_owner_alone(tmp_path):
    conf = tmp_path / "a.conf"
    conf.write_text(MARK)
    os.chown(str(conf), USER, USER)
    assert mf.plan([mf.Wanted(str(conf), MARK, owner=None)]) == []


def test_owners_are_compared_only_where_they_can_be_set(tmp_path, monkeypatch):
    conf = tmp_path / "a.conf"
    conf.write_text(MARK)
    os.chown(str(conf), USER, USER)
    monkeypatch.setattr(mf, "_can_chown", lambda: False)
    assert mf.plan([mf.Wanted(str(conf), MARK)]) == []


def test_a_link_owned_by_another_user_is_made_again_by_root(tmp_path):
    """The enable link pointing where it should, but created by a user: replaced, root's."""
    system = tmp_path / "system"
    (system / "multi-user.target.wants").mkdir(parents=True)
    link = system / "multi-user.target.wants/x.service"
    os.symlink("../x.service", str(link))
    os.lchown(str(link), USER, USER)
    wanted = [mf.unit_wants_link(str(system), "x.service")]
    (change,) = mf.plan(wanted)
    assert change.before_owner == (USER, USER) and change.describe() == "set owner 1000:1000 -> 0:0 of %s" % link
    assert [e["before"] for e in mf.diff_entries([change])] == ["owner = 1000:1000\n"]
    tx = Transaction()
    mf.apply([change], tx)
    assert owner_of(link) == (0, 0) and os.readlink(str(link)) == "../x.service"
    assert mf.plan(wanted) == []
    tx.rollback()
    assert owner_of(link) == (USER, USER) and os.readlink(str(link)) == "../x.service"


def test_umask_000_still_gives_0755_directories_and_the_wanted_modes(tmp_path):
    old = os.umask(0)
    try:
        wanted = [mf.Wanted(str(tmp_path / "usr/local/libexec/gpufleet/helper"), "#!/bin/sh\n" + MARK, mode=0o755),
                  mf.Wanted(str(tmp_path / "etc/udev/rules.d/99-x.rules"), MARK),
                  mf.unit_wants_link(str(tmp_path / "etc/systemd/system"), "x.service")]
        mf.apply(mf.plan(wanted), Transaction())
    finally:
        os.umask(old)
    for rel in ("usr", "usr/local", "usr/local/libexec", "usr/local/libexec/gpufleet", "etc", "etc/udev",
                "etc/udev/rules.d", "etc/systemd", "etc/systemd/system", "etc/systemd/system/multi-user.target.wants"):
        st = os.stat(str(tmp_path / rel))
        assert (rel, st.st_mode & 0o7777, st.st_uid) == (rel, 0o755, 0)
    assert os.stat(str(tmp_path / "usr/local/libexec/gpufleet/helper")).st_mode & 0o7777 == 0o755
    assert os.stat(str(tmp_path / "etc/udev/rules.d/99-x.rules")).st_mode & 0o7777 == 0o644


# --- trust: boot code only where root alone can change it --------------------------------------

def test_boot_code_in_a_directory_others_can_write_is_refused_before_anything_is_read(tmp_path):
    libexec = tmp_path / "libexec"
    libexec.mkdir()
    os.chmod(str(libexec), 0o777)
    before = snapshot(tmp_path)
    for wanted in (mf.Wanted(str(libexec / "helper"), "#!/bin/sh\n" + MARK, mode=0o755, trust_root=str(tmp_path)),
                   mf.Wanted(str(libexec / "sub/99-x.rules"), MARK, trust_root=str(tmp_path)),
                   mf.Wanted(str(libexec / "l"), symlink="x", trust_root=str(tmp_path))):
        with pytest.raises(trust.Untrusted) as exc:
            mf.plan([wanted])
        assert exc.value.filename == str(libexec) and "mode 0777" in exc.value.strerror
    assert snapshot(tmp_path) == before
    # removing is always allowed: nothing of ours is left to run
    assert mf.plan([mf.Wanted(str(libexec / "helper"), trust_root=str(tmp_path))]) == []
    # and without trust_root (a plain config file) there is no check
    assert len(mf.plan([mf.Wanted(str(libexec / "a.conf"), MARK)])) == 1


def test_boot_code_naming_an_interpreter_others_can_change_is_refused(tmp_path):
    (tmp_path / "bin").mkdir()
    shell = tmp_path / "bin/sh"
    shell.write_text("")
    os.chmod(str(shell), 0o755)
    os.chown(str(shell), USER, USER)
    helper = str(tmp_path / "libexec/helper")
    with pytest.raises(trust.Untrusted) as exc:
        mf.plan([mf.Wanted(helper, "#!%s\n%s" % (shell, MARK), mode=0o755, trust_root=str(tmp_path))])
    assert exc.value.filename == str(shell) and "owner uid 1000" in exc.value.strerror
    os.chown(str(shell), 0, 0)
    assert len(mf.plan([mf.Wanted(helper, "#!%s\n%s" % (shell, MARK), mode=0o755, trust_root=str(tmp_path))])) == 1
    with pytest.raises(ValueError) as exc:
        mf.plan([mf.Wanted(helper, "#!/usr/bin/env sh\n" + MARK, mode=0o755, trust_root=str(tmp_path))])
    assert str(exc.value).startswith(helper + ": the #! line")
