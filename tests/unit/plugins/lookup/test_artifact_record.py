"""The lookup gpufleet.tuning.artifact_record: a record read through its folder's descriptor.

The verify role copies a host's previous verify.json into verify.previous.json (0644) and the
serving role reads benchmark-before.json; ansible.builtin.file followed a link planted there and
would have copied whatever it pointed at (a private key) into a record others can read.
"""

import os
import stat

import pytest
import yaml

from ansible import constants as C
from ansible.errors import AnsibleLookupError

from ansible_collections.gpufleet.tuning.plugins.lookup import artifact_record
from ansible_collections.gpufleet.tuning.plugins.lookup.artifact_record import LookupModule
from ansible_collections.gpufleet.tuning.tests.unit.helpers import bounded


@pytest.fixture
def host_dir(tmp_path):
    folder = tmp_path / "artifacts" / "node1"
    folder.mkdir(parents=True)
    return folder


NAME = "gpufleet.tuning.artifact_record"


@pytest.fixture(autouse=True, scope="module")
def option_definitions():
    """The options from the plugin's own DOCUMENTATION, as Ansible's plugin loader gives them."""
    C.config.initialize_plugin_configuration_definitions(
        "lookup", NAME, yaml.safe_load(artifact_record.DOCUMENTATION)["options"])


def run(*terms, **options):
    lookup = LookupModule()
    lookup._load_name = NAME
    return lookup.run(list(terms), variables={}, **options)


def test_reads_the_record_byte_for_byte(host_dir):
    (host_dir / "verify.json").write_text('{"a": 1}\n\n')
    assert run(str(host_dir / "verify.json")) == ['{"a": 1}\n\n']


def test_a_missing_record_or_folder_gives_the_default(host_dir):
    assert run(str(host_dir / "verify.json")) == [""]
    assert run(str(host_dir / "nope" / "verify.json"), default="none") == ["none"]


def test_a_link_to_a_private_file_is_refused_and_never_read(host_dir, tmp_path):
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    os.symlink(str(secret), str(host_dir / "verify.json"))
    with pytest.raises(AnsibleLookupError, match=r"refusing .*verify\.json: it is a symbolic link"):
        run(str(host_dir / "verify.json"))


def test_a_linked_host_folder_is_refused(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    (real / "verify.json").write_text("{}")
    (tmp_path / "artifacts").mkdir()
    os.symlink(str(real), str(tmp_path / "artifacts" / "node1"))
    with pytest.raises(AnsibleLookupError, match=r"refusing .*node1: it is a symbolic link"):
        run(str(tmp_path / "artifacts" / "node1" / "verify.json"))


def test_a_fifo_is_refused_without_blocking(host_dir):
    os.mkfifo(str(host_dir / "verify.json"))
    with pytest.raises(AnsibleLookupError, match="FIFO"):
        bounded(lambda: run(str(host_dir / "verify.json")))


def test_a_folder_others_may_write_without_the_sticky_bit_is_refused(host_dir):
    (host_dir / "verify.json").write_text("{}")
    os.chmod(str(host_dir), 0o777)
    with pytest.raises(AnsibleLookupError, match=r"node1: it is writable by other users"):
        run(str(host_dir / "verify.json"))
    os.chmod(str(host_dir), 0o777 | stat.S_ISVTX)
    assert run(str(host_dir / "verify.json")) == ["{}"]


def test_a_record_larger_than_max_bytes_is_refused(host_dir):
    (host_dir / "verify.json").write_text("x" * 100)
    with pytest.raises(AnsibleLookupError, match="more than the 10 bytes"):
        run(str(host_dir / "verify.json"), max_bytes=10)


@pytest.mark.parametrize("term", ["verify.json", "", "/a/b/", "/a/\0b"])
def test_a_term_that_is_not_an_absolute_file_path_is_named(term):
    with pytest.raises(AnsibleLookupError, match="is not the absolute path of a file"):
        artifact_record.read(term)
