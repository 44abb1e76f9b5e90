"""gpufleet.tuning.artifact_files, run by ansible-playbook on this machine: it writes a folder of
records on the controller in one task, atomically, leaves right files alone, refuses links and
bad input before writing anything, and writes nothing in check mode."""

import json
import os
import stat

import pytest

from ansible_collections.gpufleet.tuning.tests.unit.helpers import result_of, run_playbook

INVENTORY = {"all": {"hosts": {"node-a": {"ansible_connection": "local",
                                          "ansible_python_interpreter": "/usr/bin/python3"}}}}


def play(folder, files, extra=""):
    """A playbook of one artifact_files task (files: name -> content) that prints its result."""
    return """
- hosts: node-a
  gather_facts: false
  tasks:
    - name: Write
      gpufleet.tuning.artifact_files:
        path: %s
        files: %s
%s      register: written
    - name: Show
      ansible.builtin.debug:
        msg: "RESULT {{ written | to_json }}"
""" % (json.dumps(folder), json.dumps(files), extra)


def listing(folder):
    """Every entry under ``folder``: path -> (kind, mode, bytes or link target)."""
    found = {}
    for root, dirs, files in os.walk(str(folder)):
        for name in dirs + files:
            path = os.path.join(root, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[path] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[path] = ("dir", oct(stat.S_IMODE(info.st_mode)))
            else:
                with open(path, "rb") as handle:
                    found[path] = ("file", oct(stat.S_IMODE(info.st_mode)), handle.read())
    return found


FILES = {"audit.json": '{"host": "node-a"}\n', "system-improve.md": "# node-a\n\nnothing to improve\n"}


def test_writes_the_folder_and_its_files_then_changes_nothing(tmp_path):
    folder = tmp_path / "artifacts" / "node-a"
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), FILES))
    assert rc == 0, out
    first = result_of(out)
    assert first["changed"] is True and first["created"] is True
    assert [(f["name"], f["changed"], f["size"]) for f in first["files"]] == [
        ("audit.json", True, len(FILES["audit.json"])), ("system-improve.md", True, len(FILES["system-improve.md"]))]
    assert oct(stat.S_IMODE(os.stat(str(folder)).st_mode)) == "0o755"
    for name, content in FILES.items():
        assert (folder / name).read_text() == content
        assert oct(stat.S_IMODE(os.stat(str(folder / name)).st_mode)) == "0o644"
    assert sorted(os.listdir(str(folder))) == sorted(FILES), "no temporary file left behind"
    inode = os.stat(str(folder / "audit.json")).st_ino
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), FILES))
    assert rc == 0, out
    again = result_of(out)
    assert again["changed"] is False and not any(f["changed"] for f in again["files"])
    assert os.stat(str(folder / "audit.json")).st_ino == inode, "a right file is not written again"


def test_a_changed_file_is_replaced_and_the_others_left(tmp_path):
    folder = tmp_path / "node-a"
    assert run_playbook(tmp_path, INVENTORY, play(str(folder), FILES))[0] == 0
    kept = os.stat(str(folder / "system-improve.md")).st_ino
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), dict(FILES, **{"audit.json": "{}\n"}), "        mode: '0600'\n"))
    assert rc == 0, out
    files = {f["name"]: f for f in result_of(out)["files"]}
    # both change: audit.json's bytes, system-improve.md's mode
    assert files["audit.json"]["changed"] and files["system-improve.md"]["changed"]
    assert (folder / "audit.json").read_text() == "{}\n"
    assert oct(stat.S_IMODE(os.stat(str(folder / "audit.json")).st_mode)) == "0o600"
    assert os.stat(str(folder / "system-improve.md")).st_ino != kept


def test_check_mode_writes_nothing_and_says_a_write_is_due(tmp_path):
    folder = tmp_path / "node-a"
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), FILES), ["--check"])
    assert rc == 0, out
    assert result_of(out)["changed"] is True
    assert not folder.exists()


@pytest.mark.parametrize("where", ["folder", "file"])
def test_a_symbolic_link_is_refused_and_nothing_is_written(tmp_path, where):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "audit.json").write_text("precious\n")
    folder = tmp_path / "node-a"
    if where == "folder":
        folder.symlink_to(elsewhere)
        link = folder
    else:
        folder.mkdir()
        link = folder / "audit.json"
        link.symlink_to(elsewhere / "audit.json")
    before = listing(tmp_path / "elsewhere"), listing(folder) if where == "file" else None
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), FILES))
    assert rc != 0
    assert "refusing %s: it is a symbolic link" % link in out, out
    assert (listing(tmp_path / "elsewhere"), listing(folder) if where == "file" else None) == before


@pytest.mark.parametrize("files, extra, says", [
    ({"../escape": "x"}, "", "file name '../escape' is not a plain name"),
    ({".hidden": "x"}, "", "file name '.hidden' is not a plain name"),
    ({"a.json": "x"}, "        mode: 'rw'\n", "mode must be an octal mode such as '0644', got 'rw'"),
    ({"a.json": "x"}, "        owner: root\n", "Invalid options for gpufleet.tuning.artifact_files: owner"),
    ({"a.json": 5}, "", "the content of a.json must be text, got int"),
    ({}, "", "files must be a non-empty mapping"),
])
def test_bad_input_fails_naming_it_and_writes_nothing(tmp_path, files, extra, says):
    folder = tmp_path / "node-a"
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(folder), files, extra))
    assert rc != 0
    assert says in out, out
    assert not folder.exists()


def test_a_relative_folder_is_refused(tmp_path):
    rc, out = run_playbook(tmp_path, INVENTORY, play("artifacts/node-a", FILES))
    assert rc != 0
    assert "path must be an absolute folder path, got 'artifacts/node-a'" in out, out
    assert not (tmp_path / "artifacts").exists()
