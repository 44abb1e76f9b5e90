"""gpufleet.tuning.artifact_dir: an inventory name becomes one folder name that cannot leave the
artifacts root, and a planted symbolic link is refused instead of followed."""

import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import MAX_LENGTH
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import artifact_dir
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot


@pytest.mark.parametrize("name", [
    "pve-gpu-01.example.net", "localhost", "node_7", "192.0.2.11", "GPU-Host.Example.NET", "...", ".hidden",
])
def test_readable_names_stay_as_they_are(name):
    assert artifact_dir(name) == name


@pytest.mark.parametrize("name, encoded", [
    ("../x", "..%2Fx"),
    ("../../.ssh", "..%2F..%2F.ssh"),
    ("/etc", "%2Fetc"),
    ("a/b", "a%2Fb"),
    ("..", "%2E%2E"),
    (".", "%2E"),
    ("fe80::1%eth0", "fe80%3A%3A1%25eth0"),
    ("[2001:db8::1]", "%5B2001%3Adb8%3A%3A1%5D"),
    ("gpü01", "gp%C3%BC01"),
    ("节点", "%E8%8A%82%E7%82%B9"),
    ("a b\tc\n", "a%20b%09c%0A"),
    ("100%", "100%25"),
    ("~root", "%7Eroot"),
    ("\\x", "%5Cx"),
])
def test_everything_else_is_percent_encoded_into_one_component(name, encoded):
    out = artifact_dir(name)
    assert out == encoded
    assert "/" not in out and out not in (".", "..", "")
    assert os.path.basename(os.path.join("/artifacts", out)) == out


def test_distinct_names_get_distinct_folders():
    names = ["a/b", "a%2Fb", "a%b", "..", "%2E%2E", ".", "%2E", "fe80::1%eth0", "fe80%3A%3A1%25eth0"]
    assert len(set(artifact_dir(n) for n in names)) == len(names)


@pytest.mark.parametrize("name, fragment", [
    ("", "empty"),
    ("a\0b", "NUL"),
    (None, "must be a string"),
    (42, "must be a string"),
    (["a"], "must be a string"),
    ("\ud800", "not valid text"),
])
def test_names_that_cannot_be_a_folder_are_refused(name, fragment):
    with pytest.raises(AnsibleFilterError) as exc:
        artifact_dir(name)
    assert fragment in str(exc.value)


def test_long_names_are_bounded_and_stay_distinct():
    long_a = "a" * 300
    long_b = "a" * 299 + "b"
    out_a, out_b = artifact_dir(long_a), artifact_dir(long_b)
    assert len(out_a) == MAX_LENGTH and len(out_b) == MAX_LENGTH
    assert out_a != out_b and "~" in out_a and out_a.startswith("a" * 100)
    # Encoded triples are never cut in half.
    for name in ("/" * 100, "x" + "/" * 100, "xx" + "/" * 100):
        out = artifact_dir(name)
        assert len(out) <= MAX_LENGTH
        head = out.split("~")[0]
        assert head.replace("%2F", "").strip("x") == ""
    assert artifact_dir("a" * MAX_LENGTH) == "a" * MAX_LENGTH


def test_with_root_returns_the_folder_under_the_real_root(tmp_path):
    real = tmp_path / "real-artifacts"
    real.mkdir()
    (tmp_path / "artifacts").symlink_to(real)  # the root itself may be a link: resolved once
    root = str(tmp_path / "artifacts")
    assert artifact_dir("node1.example.net", root) == str(real / "node1.example.net")
    assert artifact_dir("../x", root) == str(real / "..%2Fx")
    assert artifact_dir("/etc", root, ["verify.json"]) == str(real / "%2Fetc")
    assert not os.path.exists(str(tmp_path / "x")) and snapshot(real) == {}


def test_a_planted_folder_link_is_refused(tmp_path):
    root = tmp_path / "artifacts"
    elsewhere = tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir(mode=0o700)
    (root / "node2").symlink_to(elsewhere)
    before = snapshot(tmp_path)
    with pytest.raises(AnsibleFilterError) as exc:
        artifact_dir("node2", str(root), ["verify.json"])
    assert "symbolic link" in str(exc.value) and str(root / "node2") in str(exc.value)
    assert "'node2'" in str(exc.value)
    assert snapshot(tmp_path) == before


def test_a_planted_file_link_is_refused(tmp_path):
    root = tmp_path / "artifacts"
    (root / "node3").mkdir(parents=True)
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE")
    (root / "node3" / "verify.json").symlink_to(secret)
    with pytest.raises(AnsibleFilterError) as exc:
        artifact_dir("node3", str(root), ["verify.json", "verify.previous.json"])
    assert "verify.json" in str(exc.value) and "symbolic link" in str(exc.value)
    # Not named, not checked: the caller lists what it writes.
    assert artifact_dir("node3", str(root), ["verify.previous.json"]) == str(root / "node3")


def test_a_file_or_fifo_where_the_folder_or_result_goes_is_refused(tmp_path):
    root = tmp_path / "artifacts"
    root.mkdir()
    (root / "node4").write_text("")
    with pytest.raises(AnsibleFilterError) as exc:
        artifact_dir("node4", str(root))
    assert "not a directory" in str(exc.value)
    (root / "node5").mkdir()
    os.mkfifo(str(root / "node5" / "verify.json"))
    with pytest.raises(AnsibleFilterError) as exc:
        artifact_dir("node5", str(root), ["verify.json"])
    assert "not a regular file" in str(exc.value)


def test_existing_regular_results_pass(tmp_path):
    root = tmp_path / "artifacts"
    (root / "node6").mkdir(parents=True)
    (root / "node6" / "verify.json").write_text("{}")
    assert artifact_dir("node6", str(root), ["verify.json", "verify.previous.json"]) == str(root / "node6")


@pytest.mark.parametrize("root, files, fragment", [
    ("", [], "root must be a folder path"),
    (None, [], None),  # no root: the name alone
    ("/x\0y", [], "root must be a folder path"),
    ("/tmp", "verify.json", "files must be a list"),
    ("/tmp", ["../verify.json"], "not a plain name"),
    ("/tmp", ["a/b"], "not a plain name"),
    ("/tmp", [".."], "not a plain name"),
])
def test_bad_root_or_file_names_are_refused(root, files, fragment):
    if fragment is None:
        assert artifact_dir("h", root, files) == "h"
        return
    with pytest.raises(AnsibleFilterError) as exc:
        artifact_dir("h", root, files)
    assert fragment in str(exc.value)
