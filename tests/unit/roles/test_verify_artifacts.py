"""The verify role's result files on the controller, with inventory names that are paths.

The role writes ARTIFACTS/<host>/verify.json. Before issue 15 the inventory name was joined in
as it was: a host called ``../escape`` wrote (and chmodded) a folder beside the artifacts root,
and a link planted in the artifacts folder was followed. This runs the role itself with
ansible-playbook (the P2P measurement and the read-back off, so no GPU or root is needed) and
looks at what landed where.
"""

import json
import os
import stat
import sys

import pytest

from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

PLAYBOOK = """
- name: Verify, results only
  hosts: all
  gather_facts: false
  roles:
    - role: gpufleet.tuning.verify
      vars:
        verify_p2p_enabled: false
        verify_readback_enabled: false
"""


def run_verify(tmp_path, hosts):
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "verify_artifacts_dir": str(tmp_path / "artifacts")},
                         "hosts": dict((name, None) for name in hosts)}}
    return run_playbook(tmp_path, inventory, PLAYBOOK, cfg_extra="forks = 10\n")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify-artifacts")
    (tmp / "artifacts").mkdir()
    # A folder beside the artifacts root that a ../ name would reach, with its own mode.
    (tmp / "escape").mkdir(mode=0o700)
    os.chmod(str(tmp / "escape"), 0o700)
    # A link planted where node2's folder goes, to a private folder.
    (tmp / "private").mkdir(mode=0o700)
    os.chmod(str(tmp / "private"), 0o700)
    (tmp / "artifacts" / "node2.example.net").symlink_to(tmp / "private")
    # A link planted where node3's previous result is read from, to a key.
    (tmp / "artifacts" / "node3.example.net").mkdir()
    (tmp / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    os.chmod(str(tmp / "id_ed25519"), 0o600)
    (tmp / "artifacts" / "node3.example.net" / "verify.json").symlink_to(tmp / "id_ed25519")
    rc, out = run_verify(tmp, ["node1.example.net", "../escape", "/etc", "fe80::1%eth0", "..",
                               "node2.example.net", "node3.example.net"])
    return tmp, rc, out


def test_a_normal_name_keeps_its_folder(fleet):
    tmp, rc, out = fleet
    result = tmp / "artifacts" / "node1.example.net" / "verify.json"
    assert result.is_file(), out
    assert json.loads(result.read_text())["host"] == "node1.example.net"
    assert stat.S_IMODE(os.stat(str(result)).st_mode) == 0o644


@pytest.mark.parametrize("name, folder", [
    ("../escape", "..%2Fescape"),
    ("/etc", "%2Fetc"),
    ("fe80::1%eth0", "fe80%3A%3A1%25eth0"),
    ("..", "%2E%2E"),
])
def test_path_like_names_stay_inside_the_artifacts_folder(fleet, name, folder):
    tmp, rc, out = fleet
    result = tmp / "artifacts" / folder / "verify.json"
    assert result.is_file(), out
    assert json.loads(result.read_text())["host"] == name


def test_nothing_was_written_or_chmodded_outside(fleet):
    tmp, rc, out = fleet
    assert os.listdir(str(tmp / "escape")) == []
    assert stat.S_IMODE(os.stat(str(tmp / "escape")).st_mode) == 0o700
    assert not (tmp / "verify.json").exists()
    assert sorted(os.listdir(str(tmp))) == sorted(
        ["artifacts", "escape", "private", "id_ed25519", "inventory.yml", "play.yml", "ansible.cfg", "home", "tmp"])


def test_a_planted_folder_link_fails_the_host_and_is_not_followed(fleet):
    tmp, rc, out = fleet
    assert rc != 0
    assert os.listdir(str(tmp / "private")) == []
    assert stat.S_IMODE(os.stat(str(tmp / "private")).st_mode) == 0o700
    assert os.path.islink(str(tmp / "artifacts" / "node2.example.net"))
    assert "node2.example.net" in out and "symbolic link" in out


def test_a_planted_result_link_is_not_read_or_copied(fleet):
    tmp, rc, out = fleet
    folder = tmp / "artifacts" / "node3.example.net"
    assert not (folder / "verify.previous.json").exists()
    assert os.path.islink(str(folder / "verify.json"))
    assert (tmp / "id_ed25519").read_text() == "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    assert "PRIVATE KEY" not in out


def test_a_second_run_keeps_the_previous_result_byte_for_byte(tmp_path):
    (tmp_path / "artifacts").mkdir()
    rc, out = run_verify(tmp_path, ["node1.example.net"])
    assert rc == 0, out
    folder = tmp_path / "artifacts" / "node1.example.net"
    first = (folder / "verify.json").read_bytes()
    assert first.endswith(b"}\n") and not (folder / "verify.previous.json").exists()
    rc, out = run_verify(tmp_path, ["node1.example.net"])
    assert rc == 0, out
    assert (folder / "verify.previous.json").read_bytes() == first
    second = json.loads((folder / "verify.json").read_text())
    assert second["comparison"]["previous_time"] == json.loads(first)["time"]
    assert sorted(os.listdir(str(folder))) == ["normal.json", "verify.json", "verify.previous.json"]
