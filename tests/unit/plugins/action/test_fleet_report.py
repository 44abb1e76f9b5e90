"""gpufleet.tuning.fleet_report, run by ansible-playbook on this machine: it makes index.html from
an artifacts folder in one task on the controller, atomically, leaves an unchanged page alone,
writes nothing in check mode, and refuses links and bad input before writing anything."""

import json
import os
import stat

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake
from ansible_collections.gpufleet.tuning.tests.unit.helpers import result_of, run_playbook, snapshot

INVENTORY = {"all": {"hosts": {"node-a": {"ansible_connection": "local",
                                          "ansible_python_interpreter": "/usr/bin/python3"}}}}


def play(folder, extra=""):
    return """
- hosts: node-a
  gather_facts: false
  tasks:
    - name: Report
      gpufleet.tuning.fleet_report:
        path: %s
%s      register: made
    - name: Show
      ansible.builtin.debug:
        msg: "RESULT {{ made | to_json }}"
""" % (json.dumps(folder), extra)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet") / "artifacts"
    fake.write_fleet(str(root), 16)
    return root


def test_makes_the_page_then_leaves_it_alone(tmp_path, fleet):
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(fleet)))
    assert rc == 0, out
    first = result_of(out)
    page = fleet / "index.html"
    assert first["changed"] is True and first["path"] == str(page)
    assert first["size"] == page.stat().st_size and oct(stat.S_IMODE(page.stat().st_mode)) == "0o644"
    assert page.read_text().startswith("<!DOCTYPE html>")
    summary = first["summary"]
    assert summary["hosts"] == 16 and summary["p2p_short"] == ["gpu-node-01", "gpu-node-05"]
    assert summary["drifted"] == ["gpu-node-01", "gpu-node-02"]
    assert summary["rollout"]["status"] == "stopped" and summary["needs_a_look"][0] == "gpu-node-01"
    assert first["notes"] == [n for n in first["notes"] if "gpu-node-10/verify.json" in n] and first["notes"]
    assert not [n for n in os.listdir(str(fleet)) if n.startswith(".")], "no temporary file left behind"
    inode = page.stat().st_ino
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(fleet)))
    assert rc == 0, out
    again = result_of(out)
    assert again["changed"] is False and again["sha256"] == first["sha256"]
    assert page.stat().st_ino == inode, "an unchanged page is not written again"


def test_a_changed_record_changes_the_page(tmp_path, fleet):
    assert run_playbook(tmp_path, INVENTORY, play(str(fleet)))[0] == 0
    before = (fleet / "index.html").read_bytes()
    drift = json.loads((fleet / "fleet-drift.json").read_text())
    drift["gpu-node-03"] = [{"area": "sysctl", "kind": "sysctl", "target": "kernel.numa_balancing", "recorded": "0",
                             "current": "1", "recorded_by": "run-x"}]
    (fleet / "fleet-drift.json").write_text(json.dumps(drift))
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(fleet)))
    assert rc == 0, out
    assert result_of(out)["changed"] is True and (fleet / "index.html").read_bytes() != before
    assert "kernel.numa_balancing" in (fleet / "index.html").read_text()


def test_check_mode_writes_nothing_and_says_a_write_is_due(tmp_path):
    root = tmp_path / "artifacts"
    fake.write_fleet(str(root), 16)
    before = snapshot(root)
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(root)), ["--check"])
    assert rc == 0, out
    assert result_of(out)["changed"] is True
    assert snapshot(root) == before


@pytest.mark.parametrize("where", ["folder", "page"])
def test_a_symbolic_link_is_refused_and_nothing_is_written(tmp_path, where):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "index.html").write_text("precious\n")
    root = tmp_path / "artifacts"
    if where == "folder":
        fake.write_fleet(str(elsewhere), 2)
        root.symlink_to(elsewhere)
        link = root
    else:
        fake.write_fleet(str(root), 2)
        link = root / "index.html"
        link.symlink_to(elsewhere / "index.html")
    before = snapshot(tmp_path / "elsewhere"), snapshot(root) if where == "page" else None
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(root)))
    assert rc != 0
    assert "refusing %s: it is a symbolic link" % link in out, out
    assert (snapshot(tmp_path / "elsewhere"), snapshot(root) if where == "page" else None) == before


@pytest.mark.parametrize("path, extra, says", [
    ("artifacts", "", "path must be the absolute path of the artifacts folder, got 'artifacts'"),
    ("{missing}", "", "does not exist: there is nothing to report"),
    ("{file}", "", "it exists and is not a directory"),
    ("{root}", "        mode: 'rw'\n", "mode must be an octal mode such as '0644', got 'rw'"),
    ("{root}", "        title: ''\n", "title must be a non-empty text"),
    ("{root}", "        owner: root\n", "Invalid options for gpufleet.tuning.fleet_report: owner"),
])
def test_bad_input_fails_naming_it_and_writes_nothing(tmp_path, path, extra, says):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "file").write_text("x")
    before = snapshot(tmp_path)
    rc, out = run_playbook(tmp_path, INVENTORY, play(path.format(root=root, missing=tmp_path / "missing",
                                                                 file=tmp_path / "file"), extra))
    assert rc != 0
    assert says in out, out
    assert not (root / "index.html").exists() and not (tmp_path / "missing").exists()
    after = snapshot(tmp_path)
    assert dict((k, v) for k, v in after.items() if k.split(os.sep)[0] in ("root", "file")) == \
        dict((k, v) for k, v in before.items() if k.split(os.sep)[0] in ("root", "file"))


def test_a_page_with_another_mode_is_written_again(tmp_path):
    root = tmp_path / "artifacts"
    fake.write_fleet(str(root), 2)
    assert run_playbook(tmp_path, INVENTORY, play(str(root)))[0] == 0
    rc, out = run_playbook(tmp_path, INVENTORY, play(str(root), "        mode: '0600'\n"))
    assert rc == 0, out
    assert result_of(out)["changed"] is True
    assert oct(stat.S_IMODE((root / "index.html").stat().st_mode)) == "0o600"
