"""The node's bytecode cache of the collection's module_utils: used when trusted, never stale,
nothing written in check mode, and the code as it would have been compiled."""

import importlib
import importlib.machinery
import os
import sys
import zipfile

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import bytecode_cache as bc

PACKAGE = "gpufleet_cache_probe"


@pytest.fixture
def zipped(tmp_path):
    """A package in a zip on sys.path, as AnsiballZ ships module_utils; removed afterwards."""
    def build(source="VALUE = 41 + 1\n\ndef where():\n    raise RuntimeError('here')\n"):
        path = tmp_path / ("payload-%d.zip" % len(list(tmp_path.glob("payload-*.zip"))))
        with zipfile.ZipFile(str(path), "w") as archive:
            archive.writestr(PACKAGE + "/__init__.py", "")
            archive.writestr(PACKAGE + "/mod.py", source)
        sys.path.insert(0, str(path))
        return str(path)
    yield build
    sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, bc.Finder)]
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def load(cache):
    for name in [n for n in sys.modules if n.startswith(PACKAGE)]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, bc.Finder)]
    sys.meta_path.insert(0, bc.Finder(cache, prefix=PACKAGE + "."))
    importlib.invalidate_caches()
    return importlib.import_module(PACKAGE + ".mod")


def cache(tmp_path, **kw):
    return bc.Cache(directory=str(tmp_path / "var/cache/gpufleet-tuning/bytecode"), root=str(tmp_path),
                    uid=os.geteuid(), **kw)


def entries(tmp_path):
    folder = tmp_path / "var/cache/gpufleet-tuning/bytecode"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_the_second_import_is_read_from_the_cache(tmp_path, zipped):
    payload = zipped()
    first = cache(tmp_path)
    assert load(first).VALUE == 42 and (first.compiled, first.hits) == (1, 0)
    [name] = entries(tmp_path)
    entry = tmp_path / "var/cache/gpufleet-tuning/bytecode" / name
    assert oct(entry.stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "var/cache/gpufleet-tuning/bytecode").stat().st_mode & 0o777) == "0o700"
    second = cache(tmp_path)
    module = load(second)
    assert module.VALUE == 42 and (second.compiled, second.hits) == (0, 1)
    # Tracebacks point at this run's zip, as a compile of it would.
    assert module.where.__code__.co_filename == os.path.join(payload, PACKAGE, "mod.py")
    with pytest.raises(RuntimeError):
        module.where()


def test_an_edited_source_is_compiled_again_never_the_stale_entry(tmp_path, zipped):
    zipped()
    load(cache(tmp_path))
    zipped("VALUE = 7\n")
    again = cache(tmp_path)
    assert load(again).VALUE == 7 and again.compiled == 1
    assert len(entries(tmp_path)) == 2


def test_check_mode_reads_and_writes_nothing(tmp_path, zipped):
    zipped()
    dry = cache(tmp_path, write=False)
    assert load(dry).VALUE == 42 and dry.compiled == 1
    assert not (tmp_path / "var").exists()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_folder_others_could_change_is_not_used(tmp_path, zipped, mode):
    zipped()
    load(cache(tmp_path))
    folder = tmp_path / "var/cache/gpufleet-tuning"
    folder.chmod(mode)
    untrusted = cache(tmp_path)
    assert load(untrusted).VALUE == 42 and (untrusted.compiled, untrusted.hits) == (1, 0)


def test_a_damaged_or_foreign_entry_is_compiled_over(tmp_path, zipped):
    zipped()
    load(cache(tmp_path))
    [name] = entries(tmp_path)
    entry = tmp_path / "var/cache/gpufleet-tuning/bytecode" / name
    entry.write_bytes(b"not bytecode")
    damaged = cache(tmp_path)
    assert load(damaged).VALUE == 42 and damaged.compiled == 1
    entry.chmod(0o666)  # writable by others: not trusted, whatever it holds
    loose = cache(tmp_path)
    assert load(loose).VALUE == 42 and loose.hits == 0


def test_old_entries_age_out_when_one_is_written(tmp_path, zipped):
    zipped()
    load(cache(tmp_path))
    [name] = entries(tmp_path)
    old = tmp_path / "var/cache/gpufleet-tuning/bytecode" / name
    os.utime(str(old), (0, 0))
    zipped("VALUE = 1\n")
    load(cache(tmp_path))
    assert name not in entries(tmp_path) and len(entries(tmp_path)) == 1


def test_other_imports_are_left_alone(tmp_path, zipped):
    zipped()
    finder = bc.Finder(cache(tmp_path), prefix=PACKAGE + ".")
    assert finder.find_spec("json.decoder", None) is None


def test_a_module_from_the_zip_is_not_compiled_to_be_found(tmp_path, zipped, monkeypatch):
    """Up to Python 3.12 the zip importer compiles a module to find it (its file name); the
    finder makes the spec itself, so a cache hit compiles nothing and a miss compiles once."""
    import builtins
    payload = zipped()
    compiled = []
    real = builtins.compile

    def counting(source, filename, *args, **kwargs):
        compiled.append(filename)
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", counting)
    target = os.path.join(payload, PACKAGE, "mod.py")
    first = cache(tmp_path)
    assert load(first).VALUE == 42
    assert compiled.count(target) == 1, compiled
    del compiled[:]
    module = load(cache(tmp_path))
    assert module.VALUE == 42 and target not in compiled, compiled
    assert module.__file__ == target and module.__spec__.origin == target


def test_a_package_from_the_zip_keeps_its_search_path(tmp_path, zipped):
    payload = zipped()
    with zipfile.ZipFile(payload, "a") as archive:
        archive.writestr(PACKAGE + "/sub/__init__.py", "NAME = 'sub'\n")
        archive.writestr(PACKAGE + "/sub/leaf.py", "from . import NAME\nLEAF = NAME + '.leaf'\n")
    load(cache(tmp_path))
    leaf = importlib.import_module(PACKAGE + ".sub.leaf")
    assert leaf.LEAF == "sub.leaf"
    package = sys.modules[PACKAGE + ".sub"]
    assert package.__path__ == [os.path.join(payload, PACKAGE, "sub")]
    assert isinstance(package.__loader__, bc._Loader)


@pytest.mark.parametrize("write", [False, True])
def test_undecided_keeps_what_it_compiled_until_check_mode_is_known(tmp_path, zipped, write):
    """write=None: installed before the module knows check mode; commit(False) writes nothing,
    commit(True) the entries compiled meanwhile."""
    zipped()
    folder = tmp_path / "var/cache/gpufleet-tuning/bytecode"
    folder.mkdir(parents=True, mode=0o700)
    undecided = cache(tmp_path, write=None)
    assert load(undecided).VALUE == 42 and undecided.compiled == 1
    assert entries(tmp_path) == [], "nothing is written before check mode is known"
    undecided.commit(write)
    assert len(entries(tmp_path)) == (1 if write else 0)
    again = cache(tmp_path)
    load(again)
    assert again.hits == (1 if write else 0)


def test_undecided_makes_no_folder(tmp_path, zipped):
    zipped()
    undecided = cache(tmp_path, write=None)
    assert load(undecided).VALUE == 42
    assert not (tmp_path / "var/cache").exists(), "the folder is made only once the run may write"
    undecided.commit(False)
    assert not (tmp_path / "var/cache").exists()


class _Auditor:
    """A finder that wants to see every import first, as ansible-test's sanity importer does."""

    def find_spec(self, name, path, target=None):  # pylint: disable=unused-argument
        return None


def test_install_goes_ahead_of_the_path_finder_and_leaves_the_first_finder_first(tmp_path, zipped):
    zipped()
    auditor = _Auditor()
    saved = list(sys.meta_path)
    sys.meta_path.insert(0, auditor)
    try:
        installed = bc.install(write=False, cache=cache(tmp_path, write=False))
        assert sys.meta_path[0] is auditor
        finders = [type(f) for f in sys.meta_path]
        index = finders.index(bc.Finder)
        assert sys.meta_path[index].cache is installed
        assert sys.meta_path.index(importlib.machinery.PathFinder) == index + 1
    finally:
        sys.meta_path[:] = saved


def test_a_loader_that_gives_bytes_is_compiled_and_cached_like_text(tmp_path):
    text = cache(tmp_path)
    code = text.code("probe.mod", b"VALUE = 6 * 7\n", "<probe>")
    namespace = {}
    exec(code, namespace)  # pylint: disable=exec-used
    assert namespace["VALUE"] == 42
    again = cache(tmp_path)
    again.code("probe.mod", "VALUE = 6 * 7\n", "<probe>")
    assert (again.hits, again.compiled) == (1, 0)


def test_zip_prefixes_take_those_modules_from_a_zip_only(tmp_path, zipped):
    """The boot prelude's names (Ansible's module_utils, the module): from AnsiballZ's zip they
    go through the cache; found on disk they are Python's, which caches them in __pycache__."""
    payload = zipped()
    finder = bc.Finder(cache(tmp_path), prefix="gpufleet_not_this.", zip_prefixes=(PACKAGE + ".",))
    spec = finder.find_spec(PACKAGE + ".mod", [os.path.join(payload, PACKAGE)])
    assert isinstance(spec.loader, bc._Loader)  # pylint: disable=protected-access
    on_disk = tmp_path / "disk" / PACKAGE
    on_disk.mkdir(parents=True)
    (on_disk / "mod.py").write_text("VALUE = 1\n")
    assert finder.find_spec(PACKAGE + ".mod", [str(on_disk)]) is None
    assert finder.find_spec("json.decoder", None) is None


def test_a_module_run_with_runpy_from_the_zip_comes_from_the_cache(tmp_path, zipped):
    """AnsiballZ runs the module itself with runpy.run_module, which asks the loader for its code."""
    import runpy
    payload = zipped("import sys\nRAN = __name__\nFILE = __file__\n")
    saved = list(sys.meta_path)
    try:
        for run in range(2):
            used = cache(tmp_path)
            sys.meta_path.insert(0, bc.Finder(used, prefix="gpufleet_not_this.", zip_prefixes=(PACKAGE + ".",)))
            importlib.invalidate_caches()
            result = runpy.run_module(PACKAGE + ".mod", run_name="__main__")
            assert result["RAN"] == "__main__" and result["FILE"] == os.path.join(payload, PACKAGE, "mod.py")
            assert (used.compiled, used.hits) == ((1, 0) if run == 0 else (0, 1))
            sys.meta_path[:] = saved
    finally:
        sys.meta_path[:] = saved


def test_install_adds_zip_prefixes_to_the_finder_already_there(tmp_path):
    saved = list(sys.meta_path)
    try:
        first = bc.install(write=None, cache=cache(tmp_path, write=None))
        again = bc.install(write=None, zip_prefixes=bc.ZIP_PREFIXES)
        [finder] = [f for f in sys.meta_path if isinstance(f, bc.Finder)]
        assert again is first and finder.zip_prefixes == bc.ZIP_PREFIXES
        bc.install(write=None, zip_prefixes=bc.ZIP_PREFIXES)
        assert finder.zip_prefixes == bc.ZIP_PREFIXES
    finally:
        sys.meta_path[:] = saved
