"""plugins/plugin_utils/ansiballz_store.py: a module's packed payload kept between runs, put back
only while every file it holds is unchanged and the ansible-core and Python versions are the
same, never from a folder or file another user could have written, and never for a payload
holding files of anything but ansible-core and this collection. Run through ansible-playbook,
the first run keeps the payload and the second uses it, with the same result."""

import base64
import io
import json
import os
import zipfile

import pytest
from ansible import constants as C
from ansible.executor import module_common

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import ansiballz_store
from ansible_collections.gpufleet.tuning.tests.unit.helpers import result_of, run_playbook
# A play of one collection module (memlock_info) on this machine, as the module action's tests run it.
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils.test_module_action import INVENTORY, PLAY

FQN = "ansible_collections.gpufleet.tuning.plugins.modules.memlock_info"
CACHE_NAME = FQN + "-ZIP_DEFLATED-none"


@pytest.fixture
def run_tmp(local_tmp, monkeypatch):
    """A run's temporary folder of its own (C.DEFAULT_LOCAL_TMP, conftest.py), and a fake source tree."""
    tmp_path = local_tmp
    src = tmp_path / "src"
    (src / "plugins" / "module_utils").mkdir(parents=True)
    (src / "plugins" / "modules").mkdir(parents=True)
    (src / "plugins" / "modules" / "memlock_info.py").write_text("# module\n")
    (src / "plugins" / "module_utils" / "x.py").write_text("X = 1\n")
    monkeypatch.setattr(ansiballz_store, "COLLECTION_ROOT", str(src))
    return tmp_path


def write_run_cache(names, changed=()):
    """Ansible's cache file for FQN in this run's cache, its payload holding ``names``: each the
    bytes of its controller file (empty where there is none), ``changed`` ones other bytes."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as payload:
        for name in names:
            path = ansiballz_store.source_path(name)
            content = open(path, "rb").read() if path and os.path.exists(path) else b""
            payload.writestr(name, b"# not the controller's\n" if name in changed else content)
    folder = ansiballz_store.run_cache_dir()
    os.makedirs(folder, exist_ok=True)
    cached = module_common._CachedModule(zip_data=base64.b64encode(data.getvalue()), metadata=None, source_mapping={})
    path = os.path.join(folder, CACHE_NAME)
    cached.dump(path)
    return path


NAMES = ["ansible/__init__.py", "ansible/module_utils/basic.py", "ansible_collections/__init__.py",
         "ansible_collections/gpufleet/tuning/plugins/__init__.py",
         "ansible_collections/gpufleet/tuning/plugins/module_utils/x.py",
         "ansible_collections/gpufleet/tuning/plugins/modules/memlock_info.py"]


def new_run(tmp_path, number):
    """The next run: a new temporary folder beside the last, its cache empty."""
    local = tmp_path / "tmp" / ("ansible-local-%d" % number)
    local.mkdir(parents=True)
    C.DEFAULT_LOCAL_TMP = str(local)


def test_kept_then_put_back_into_the_next_run(run_tmp):
    first = open(write_run_cache(NAMES), "rb").read()
    assert ansiballz_store.keep(FQN)
    meta = json.loads((run_tmp / "tmp" / "gpufleet-tuning-cache" / ("ansiballz-" + FQN + ".json")).read_text())
    assert meta["cache_file"] == CACHE_NAME and len(meta["files"]) == len(NAMES)
    # A namespace package's __init__.py that Ansible writes itself: recorded as absent.
    assert meta["files"][os.path.normpath(str(run_tmp / "src" / "plugins" / "__init__.py"))] is None
    assert oct(os.stat(str(run_tmp / "tmp" / "gpufleet-tuning-cache")).st_mode & 0o777) == "0o700"
    new_run(run_tmp, 2)
    assert ansiballz_store.restore(FQN)
    restored = os.path.join(ansiballz_store.run_cache_dir(), CACHE_NAME)
    assert open(restored, "rb").read() == first
    assert oct(os.stat(restored).st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("change", [
    lambda tmp: (tmp / "src" / "plugins" / "module_utils" / "x.py").write_text("X = 22\n"),
    lambda tmp: (tmp / "src" / "plugins" / "__init__.py").write_text(""),
    lambda tmp: os.unlink(str(tmp / "src" / "plugins" / "modules" / "memlock_info.py")),
])
def test_a_changed_file_is_packed_again(run_tmp, change):
    write_run_cache(NAMES)
    assert ansiballz_store.keep(FQN)
    change(run_tmp)
    new_run(run_tmp, 2)
    assert not ansiballz_store.restore(FQN)
    assert not os.path.exists(os.path.join(ansiballz_store.run_cache_dir(), CACHE_NAME))


def test_another_ansible_core_or_python_is_packed_again(run_tmp, monkeypatch):
    write_run_cache(NAMES)
    assert ansiballz_store.keep(FQN)
    new_run(run_tmp, 2)
    monkeypatch.setattr(ansiballz_store, "ANSIBLE_VERSION", "9.99.0")
    assert not ansiballz_store.restore(FQN)


def test_a_folder_or_file_others_could_write_is_never_used(run_tmp):
    write_run_cache(NAMES)
    assert ansiballz_store.keep(FQN)
    new_run(run_tmp, 2)
    blob = run_tmp / "tmp" / "gpufleet-tuning-cache" / ("ansiballz-" + FQN + ".pickle")
    os.chmod(str(blob), 0o620)
    assert not ansiballz_store.restore(FQN)
    os.chmod(str(blob), 0o600)
    os.chmod(str(run_tmp / "tmp" / "gpufleet-tuning-cache"), 0o777)
    assert not ansiballz_store.restore(FQN)
    assert not ansiballz_store.keep(FQN)


@pytest.mark.parametrize("changed", ["ansible_collections/gpufleet/tuning/plugins/module_utils/x.py",
                                     "ansible/module_utils/basic.py",
                                     "ansible_collections/gpufleet/tuning/plugins/__init__.py"])
def test_a_payload_that_is_not_the_controller_s_files_is_not_kept(run_tmp, changed):
    """A module_utils file packed from elsewhere (a configured module_utils folder, say), or an
    __init__.py Ansible wrote with content: the manifest could not tell when it changes."""
    write_run_cache(NAMES, changed=[changed])
    assert not ansiballz_store.keep(FQN)
    assert not os.path.exists(str(run_tmp / "tmp" / "gpufleet-tuning-cache" / ("ansiballz-" + FQN + ".json")))


def test_a_payload_with_files_of_another_collection_is_not_kept(run_tmp):
    write_run_cache(NAMES + ["ansible_collections/community/general/plugins/module_utils/y.py"])
    assert not ansiballz_store.keep(FQN)
    assert not os.path.exists(str(run_tmp / "tmp" / "gpufleet-tuning-cache" / ("ansiballz-" + FQN + ".json")))


@pytest.mark.parametrize("value, wanted", [(None, True), (True, True), ("yes", True), (False, False), ("false", False),
                                           ("no", False), ("0", False)])
def test_the_switch(value, wanted):
    assert ansiballz_store.wanted({} if value is None else {"gpufleet_ansiballz_store": value}) is wanted


def test_a_second_run_uses_the_payload_the_first_kept(tmp_path):
    store = tmp_path / "tmp" / "gpufleet-tuning-cache"
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY)
    assert rc == 0, out
    first = result_of(out)
    meta = store / ("ansiballz-" + FQN + ".json")
    kept = json.loads(meta.read_text())
    assert any(path.endswith("plugins/modules/memlock_info.py") for path in kept["files"])
    written = os.stat(str(meta)).st_mtime_ns
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY, cfg_extra="")
    assert rc == 0, out
    assert os.stat(str(meta)).st_mtime_ns == written, "put back, not kept again"
    second = result_of(out)
    assert second.keys() == first.keys()
    # Off: nothing kept.
    other = tmp_path / "off"
    other.mkdir()
    rc, out = run_playbook(other, INVENTORY, PLAY, ["-e", "gpufleet_ansiballz_store=false"])
    assert rc == 0, out
    assert not list((other / "tmp" / "gpufleet-tuning-cache").glob("ansiballz-*"))
