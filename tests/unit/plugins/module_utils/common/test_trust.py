"""trust.py against trees built in a temp dir: owners set with os.chown (the tests run as root,
so uid 1000 stands for "another user"), modes with os.chmod, links relative and absolute."""

import errno
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust

USER = 1000


def tree(tmp_path):
    """tmp/usr/bin/python3.11 (root 0755), tmp/usr/bin/python3 -> python3.11, tmp/bin -> usr/bin."""
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/local/libexec").mkdir(parents=True)
    python = tmp_path / "usr/bin/python3.11"
    python.write_text("#!/bin/false\n")
    os.chmod(str(python), 0o755)
    os.symlink("python3.11", str(tmp_path / "usr/bin/python3"))
    os.symlink("usr/bin", str(tmp_path / "bin"))
    for directory in (tmp_path, tmp_path / "usr", tmp_path / "usr/bin", tmp_path / "usr/local",
                      tmp_path / "usr/local/libexec"):
        os.chmod(str(directory), 0o755)
    return tmp_path


def refused(call, *args, **kw):
    with pytest.raises(trust.Untrusted) as exc:
        call(*args, **kw)
    return exc.value


def test_a_root_owned_tree_passes_through_every_kind_of_link(tmp_path):
    root = tree(tmp_path)
    trust.check_runnable(str(root / "usr/bin/python3.11"), root=str(root))
    trust.check_runnable(str(root / "usr/bin/python3"), root=str(root))  # a link in the same directory
    trust.check_runnable(str(root / "bin/python3"), root=str(root))  # a directory link, then a file link
    os.symlink(str(root / "usr/bin/python3"), str(root / "usr/local/python"))  # absolute
    trust.check_runnable(str(root / "usr/local/python"), root=str(root))
    trust.check_directory_of(str(root / "usr/local/libexec/gpufleet/helper"), root=str(root))


def test_a_directory_owned_by_another_user_is_refused_naming_it_its_owner_and_mode(tmp_path):
    root = tree(tmp_path)
    os.chown(str(root / "usr/local"), USER, USER)
    exc = refused(trust.check_directory_of, str(root / "usr/local/libexec/gpufleet/helper"), root=str(root))
    assert exc.filename == str(root / "usr/local") and exc.errno == errno.EPERM
    assert exc.strerror.startswith("is not owned by uid 0 (root) (owner uid 1000")
    assert "group gid 1000, mode 0755" in exc.strerror
    assert "%s, which root runs at boot, must be changeable by root only" % (root / "usr/local/libexec/gpufleet/helper") \
        in exc.strerror


@pytest.mark.parametrize("mode, says", [
    (0o775, "is writable by its group"),
    (0o757, "is writable by every user"),
    (0o1777, "is writable by every user (the sticky bit does not help"),
])
def test_a_directory_others_can_write_is_refused_sticky_or_not(tmp_path, mode, says):
    root = tree(tmp_path)
    os.chmod(str(root / "usr/local/libexec"), mode)
    exc = refused(trust.check_directory_of, str(root / "usr/local/libexec/helper"), root=str(root))
    assert exc.filename == str(root / "usr/local/libexec")
    assert exc.strerror.startswith(says) and "mode %04o" % mode in exc.strerror


@pytest.mark.parametrize("change, says", [
    (lambda p: os.chown(p, USER, 0), "is not owned by uid 0 (root)"),
    (lambda p: os.chmod(p, 0o775), "is writable by its group"),
    (lambda p: os.chmod(p, 0o757), "is writable by every user"),
    (lambda p: os.chmod(p, 0o644), "is not executable"),
])
def test_the_interpreter_itself_must_be_roots_and_executable(tmp_path, change, says):
    root = tree(tmp_path)
    change(str(root / "usr/bin/python3.11"))
    exc = refused(trust.check_runnable, str(root / "usr/bin/python3"), root=str(root))
    assert exc.filename == str(root / "usr/bin/python3.11") and exc.strerror.startswith(says)


def test_an_interpreter_that_is_missing_or_not_a_file_is_refused(tmp_path):
    root = tree(tmp_path)
    exc = refused(trust.check_runnable, str(root / "usr/bin/python4"), root=str(root))
    assert exc.errno == errno.ENOENT and exc.filename == str(root / "usr/bin/python4")
    os.symlink("nowhere", str(root / "usr/bin/dangling"))
    assert refused(trust.check_runnable, str(root / "usr/bin/dangling"), root=str(root)).filename == \
        str(root / "usr/bin/nowhere")
    exc = refused(trust.check_runnable, str(root / "usr/bin"), root=str(root))
    assert exc.strerror.startswith("is not a regular file")


def test_every_link_in_the_chain_and_where_it_leads_is_checked(tmp_path):
    root = tree(tmp_path)
    # a link owned by another user (only possible where that user could write once)
    os.lchown(str(root / "usr/bin/python3"), USER, USER)
    exc = refused(trust.check_runnable, str(root / "usr/bin/python3"), root=str(root))
    assert exc.filename == str(root / "usr/bin/python3") and "owner uid 1000" in exc.strerror
    os.lchown(str(root / "usr/bin/python3"), 0, 0)
    # a root-owned link into a user's virtualenv: the venv's directory is what gives it away
    venv = root / "home/alice/.venv/bin"
    venv.mkdir(parents=True)
    os.chmod(str(root / "home"), 0o755)
    (venv / "python").write_text("")
    os.chmod(str(venv / "python"), 0o755)
    os.chown(str(root / "home/alice"), USER, USER)
    os.symlink(str(venv / "python"), str(root / "usr/bin/python-venv"))
    exc = refused(trust.check_runnable, str(root / "usr/bin/python-venv"), root=str(root))
    assert exc.filename == str(root / "home/alice")


def test_a_directory_link_is_followed_and_its_target_checked(tmp_path):
    root = tree(tmp_path)  # bin -> usr/bin, as on merged-/usr systems
    os.chmod(str(root / "usr/bin"), 0o777)
    exc = refused(trust.check_runnable, str(root / "bin/python3"), root=str(root))
    assert exc.filename == str(root / "usr/bin")


def test_a_link_loop_is_an_error(tmp_path):
    root = tree(tmp_path)
    os.symlink("b", str(root / "usr/bin/a"))
    os.symlink("a", str(root / "usr/bin/b"))
    with pytest.raises(OSError) as exc:
        trust.check_runnable(str(root / "usr/bin/a"), root=str(root))
    assert exc.value.errno == errno.ELOOP


def test_missing_directories_end_the_walk_after_the_existing_ones_are_checked(tmp_path):
    root = tree(tmp_path)
    trust.check_directory_of(str(root / "usr/local/libexec/a/b/c/helper"), root=str(root))
    os.chmod(str(root / "usr/local"), 0o777)
    assert refused(trust.check_directory_of, str(root / "usr/local/libexec/a/b/helper"),
                   root=str(root)).filename == str(root / "usr/local")


def test_a_file_where_a_directory_belongs_is_refused(tmp_path):
    root = tree(tmp_path)
    (root / "usr/local/sbin").write_text("")
    exc = refused(trust.check_directory_of, str(root / "usr/local/sbin/script"), root=str(root))
    assert exc.filename == str(root / "usr/local/sbin") and exc.strerror.startswith("is not a directory")


def test_root_itself_is_checked_and_nothing_above_it(tmp_path):
    root = tree(tmp_path)
    os.chmod(str(root), 0o775)
    assert refused(trust.check_directory_of, str(root / "usr/local/x"), root=str(root)).filename == str(root)
    os.chmod(str(root), 0o755)
    # with / as root the real /tmp above the temp dir counts, and it is world-writable and sticky
    if os.stat("/tmp").st_mode & 0o002 and str(root).startswith("/tmp/"):
        exc = refused(trust.check_directory_of, str(root / "usr/local/x"), root="/")
        assert exc.filename == "/tmp" and "sticky bit does not help" in exc.strerror


def test_a_link_out_of_root_is_checked_outside_too(tmp_path):
    root = tree(tmp_path / "node")
    os.chmod(str(tmp_path / "node"), 0o755)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "python").write_text("")
    os.chmod(str(outside / "python"), 0o755)
    os.chmod(str(outside), 0o777)
    os.symlink(str(outside / "python"), str(root / "usr/bin/python-out"))
    exc = refused(trust.check_runnable, str(root / "usr/bin/python-out"), root=str(root))
    assert exc.filename == str(outside)


def test_the_expected_owner_is_a_parameter(tmp_path):
    root = tree(tmp_path)
    for dirpath, dirs, files in os.walk(str(root)):
        for name in dirs + files + [""]:
            os.lchown(os.path.join(dirpath, name) if name else dirpath, USER, USER)
    trust.check_runnable(str(root / "bin/python3"), root=str(root), uid=USER)
    assert refused(trust.check_runnable, str(root / "bin/python3"), root=str(root)).filename == str(root)


@pytest.mark.parametrize("text, interpreter", [
    ("#!/usr/bin/python3 -IS\nimport sys\n", "/usr/bin/python3"),
    ("#!/bin/sh\n# x\n", "/bin/sh"),
    ("#! /bin/sh -e\n", "/bin/sh"),
    ("# Managed by Ansible\n[Unit]\n", None),
    ("", None),
    (None, None),
])
def test_interpreter_of_reads_the_hashbang_as_linux_does(text, interpreter):
    assert trust.interpreter_of(text) == interpreter


@pytest.mark.parametrize("text, says", [
    ("#!python3\n", "names no absolute interpreter path"),
    ("#!\n", "names no absolute interpreter path"),
    ("#!/usr/bin/env python3\n", "runs env, which searches PATH"),
])
def test_interpreter_of_refuses_a_relative_interpreter_or_env(text, says):
    with pytest.raises(ValueError) as exc:
        trust.interpreter_of(text)
    assert says in str(exc.value)


def test_check_boot_file_checks_the_directory_and_the_interpreter_it_names(tmp_path):
    root = tree(tmp_path)
    helper = str(root / "usr/local/libexec/gpufleet/helper")
    trust.check_boot_file(helper, "#!%s -IS\n" % (root / "usr/bin/python3"), root=str(root))
    trust.check_boot_file(helper, "# a rule, no interpreter\n", root=str(root))
    os.chmod(str(root / "usr/bin/python3.11"), 0o777)
    exc = refused(trust.check_boot_file, helper, "#!%s -IS\n" % (root / "usr/bin/python3"), root=str(root))
    assert exc.filename == str(root / "usr/bin/python3.11")
    assert "the interpreter %s, which root runs %s with," % (root / "usr/bin/python3", helper) in exc.strerror


def test_the_real_shell_is_roots():
    """What cpu_power's boot script names, on this machine: / down to the file and every link."""
    trust.check_runnable("/bin/sh")


def test_common_root(tmp_path):
    assert trust.common_root("/etc/systemd/system", "/usr/local/sbin/gpufleet-cpu-power") == "/"
    assert trust.common_root(str(tmp_path / "etc/udev/rules.d"), str(tmp_path / "usr/x")) == str(tmp_path)
