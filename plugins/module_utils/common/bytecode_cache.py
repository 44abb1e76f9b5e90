# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""This collection's module_utils compiled once per node, not at every module run.

Why: Ansible ships a module with its module_utils as Python source in a zip (AnsiballZ), and
Python cannot cache bytecode for code imported from a zip, so every run compiles it all again.
For gpufleet.tuning.host_tuning, the one call of a tuning pass, that is about 60 files; on the
test machines compiling them is about 0.15 s of CPU of a run of about 0.5 s, paid on every node
of a fleet at every pass (benchmarks/runtime_pass.py; README "Speed of a tuning pass"). Python
does the same for code on disk (``__pycache__``); this does it for the collection's own code:

- a meta-path finder, just ahead of Python's path finder, takes the imports of
  ``ansible_collections.gpufleet.tuning.plugins.module_utils.*`` once ``install()`` has run,
  and, given ``zip_prefixes`` (ZIP_PREFIXES: Ansible's own module_utils and the module itself,
  which the module action's boot prelude asks for, plugins/plugin_utils/module_action.py), the
  modules under those names that come from a zip; everything else is imported as usual;
- the cache key is the SHA-256 of the interpreter's bytecode magic, the module's name and its
  source, so code from another release, another Python or an edited file never matches: a
  stale entry is never used, only left until it ages out (KEEP_DAYS);
- an entry holds the magic and the marshalled code object; the file name inside it is set to
  the module's path in this run's zip, so tracebacks point where they always did;
- entries are only read from, and written to, a directory that only root can change, all the
  way up (common/trust.py, the rule the boot helpers follow): root runs this code. Not root, a
  directory that another user could change, an unreadable or damaged entry: the source is
  compiled as it would have been, and nothing is said about it;
- ``write=None`` (not known yet: the module installs the finder before it imports its engine,
  ahead of knowing check mode) keeps what it compiles in memory until ``commit(write)``;
- ``write=False`` (check mode) reads the cache and writes nothing; entries are written
  atomically (a temporary file beside the entry, renamed), mode 0600.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import stat
import sys
import tempfile
import time
import types
import zipimport

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust

PACKAGE = "ansible_collections.gpufleet.tuning.plugins.module_utils."
# What AnsiballZ's zip holds besides this collection's module_utils: Ansible's module_utils (about
# 100 files for host_tuning, some 0.1 s of CPU to compile at every run, imported by the wrapper
# before the module's own code runs) and the module itself (run by runpy, through get_code).
ZIP_PREFIXES = ("ansible.", "ansible_collections.")
CACHE_DIR = "/var/cache/gpufleet-tuning/bytecode"
KEEP_DAYS = 30


def refiled(code, filename):
    """``code`` with every (nested) code object's file name set to ``filename``."""
    consts = tuple(refiled(const, filename) if isinstance(const, types.CodeType) else const
                   for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


class Cache:
    """Entries under ``directory``, trusted when only ``uid`` can change it (``root`` as trust.py
    takes it: / on a node, a temp tree in tests)."""

    def __init__(self, directory=CACHE_DIR, write=True, root="/", uid=0):
        self.directory = directory
        self.write = write
        self.root = root
        self.uid = uid
        self.hits = 0
        self.compiled = 0
        self._trusted = None
        self._pending = []

    def _usable(self):
        if self._trusted is None:
            usable = os.geteuid() == self.uid and self._check()
            if usable or self.write is not None:
                self._trusted = usable
            return usable  # undecided and no folder yet: asked again once decided
        return self._trusted

    def _check(self):
        try:
            if not os.path.isdir(self.directory):
                if not self.write:
                    return False
                trust.check_directory_of(os.path.join(self.directory, "x"), self.root, self.uid)
                os.makedirs(self.directory, 0o700, exist_ok=True)
            trust.check_directory_of(os.path.join(self.directory, "x"), self.root, self.uid)
            return True
        except OSError:
            return False

    def key(self, name, source):
        digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
        digest.update(name.encode("utf-8") + b"\0")
        # Source as text from a zip or file loader; as bytes from some loaders (Ansible's
        # collection loader on the controller, the sanity tests' importer).
        if not isinstance(source, bytes):
            source = source.encode("utf-8", "surrogatepass")
        digest.update(source)
        return digest.hexdigest()

    def code(self, name, source, filename):
        """The module's code object: from the cache when a trusted entry matches, else compiled
        (and kept, when writing)."""
        usable = self._usable()
        path = os.path.join(self.directory, self.key(name, source)) if usable else None
        if path is not None:
            found = self._read(path)
            if found is not None:
                self.hits += 1
                return refiled(found, filename)
        code = compile(source, filename, "exec", dont_inherit=True)
        self.compiled += 1
        if path is not None and self.write:
            self._store(path, code)
        elif path is not None and self.write is None:
            self._pending.append((path, code))
        return code

    def commit(self, write):
        """Decide the undecided (``write=None``): store what was compiled so far when ``write``,
        else drop it; from now on write as ``write`` says."""
        pending, self._pending = self._pending, []
        self.write = bool(write)
        if self.write and pending and self._usable():
            for path, code in pending:
                self._store(path, code)

    def _read(self, path):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not (st.st_uid == self.uid and not st.st_mode & 0o022 and st.st_nlink == 1
                    and stat.S_ISREG(st.st_mode)):
                return None
            with os.fdopen(fd, "rb") as handle:
                fd = None
                data = handle.read()
        except OSError:
            return None
        finally:
            if fd is not None:
                os.close(fd)
        magic = importlib.util.MAGIC_NUMBER
        if not data.startswith(magic):
            return None
        try:
            code = marshal.loads(data[len(magic):])
        except (EOFError, ValueError, TypeError):
            return None
        return code if isinstance(code, types.CodeType) else None

    def _store(self, path, code):
        try:
            handle = tempfile.NamedTemporaryFile(dir=self.directory, prefix=".new-", delete=False)
            try:
                os.fchmod(handle.fileno(), 0o600)
                handle.write(importlib.util.MAGIC_NUMBER + marshal.dumps(code))
                handle.close()
                os.rename(handle.name, path)
            except BaseException:
                handle.close()
                os.unlink(handle.name)
                raise
            self._prune()
        except OSError:
            pass

    def _prune(self):
        """Entries older than KEEP_DAYS go (another release's, in practice); called after a write."""
        limit = time.time() - KEEP_DAYS * 86400
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            entry = os.path.join(self.directory, name)
            try:
                if os.lstat(entry).st_mtime < limit:
                    os.unlink(entry)
            except OSError:
                pass


class _Loader(importlib.abc.Loader):
    """The original loader's module, executed from the cache's code object."""

    def __init__(self, original, cache, origin=None):
        self._original = original
        self._cache = cache
        self._origin = origin

    def create_module(self, spec):
        create = getattr(self._original, "create_module", None)
        return create(spec) if create is not None else None

    def _cached(self, name):
        """The module's code object through the cache; None when its loader gives no source."""
        source = self._original.get_source(name)
        if source is None:
            return None
        return self._cache.code(name, source, self._origin or "<%s>" % name)

    def exec_module(self, module):
        code = self._cached(module.__name__)
        if code is None:
            self._original.exec_module(module)
            return
        exec(code, module.__dict__)

    def get_source(self, name):
        return self._original.get_source(name)

    def get_code(self, name):
        """The code object, for runpy (AnsiballZ runs the module itself with runpy.run_module)."""
        code = self._cached(name)
        return self._original.get_code(name) if code is None else code


def zip_spec(name, entries):
    """The spec of module ``name`` from the first zip entry of ``entries`` (a package's
    ``__path__``) that holds it, made without compiling it; None when no zip entry has it.

    Why not the zip importer's own find_spec: up to Python 3.12 it asks for the module's file
    name, and zipimport compiles the whole module to answer that, so every module imported from
    AnsiballZ's zip is compiled twice (find, then exec) and a cache that only replaces the
    second compile saves half of it."""
    last = name.rpartition(".")[2]
    for entry in entries or ():
        if ".zip" not in entry:
            continue
        try:
            importer = zipimport.zipimporter(entry)
            package = importer.is_package(name)
        except (zipimport.ZipImportError, OSError):
            continue
        where = os.path.join(entry, last)
        origin = os.path.join(where, "__init__.py") if package else where + ".py"
        spec = importlib.util.spec_from_loader(name, importer, origin=origin, is_package=package)
        spec.has_location = True
        if package:
            spec.submodule_search_locations = [where]
        return spec
    return None


class Finder(importlib.abc.MetaPathFinder):
    """Imports of the modules under ``prefix`` (PACKAGE), and of those under ``zip_prefixes``
    that come from a zip, through ``cache``; the spec is the one Python would have used (made
    without compiling for a zip, zip_spec), with its loader wrapped. A module under
    ``zip_prefixes`` found on disk is left to Python, which caches it in ``__pycache__``."""

    def __init__(self, cache, prefix=PACKAGE, zip_prefixes=()):
        self.cache = cache
        self.prefix = prefix
        self.zip_prefixes = tuple(zip_prefixes)

    def find_spec(self, name, path, target=None):
        ours = name.startswith(self.prefix)
        if not ours and not name.startswith(self.zip_prefixes):
            return None
        spec = zip_spec(name, path)
        if spec is None:
            if not ours:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_source"):
            return spec
        spec.loader = _Loader(spec.loader, self.cache, spec.origin)
        return spec


def _position():
    """Where the finder goes on sys.meta_path: just ahead of the path finder, the one that would
    find this collection's code in AnsiballZ's zip or on disk. Not simply first: finders that
    must see every import first (an importer that audits imports, as ansible-test's sanity
    importer does) stay first, and the built-in and frozen finders never see our names anyway."""
    for index, finder in enumerate(sys.meta_path):
        if finder is importlib.machinery.PathFinder:
            return index
    return len(sys.meta_path)


def install(write=True, cache=None, zip_prefixes=()):
    """Put the finder on sys.meta_path ahead of the path finder (once); returns its Cache.
    ``write=None``: not known yet, the cache's commit() decides. ``zip_prefixes``: more names
    to take from a zip (ZIP_PREFIXES), added to those of a finder already installed."""
    for finder in sys.meta_path:
        if isinstance(finder, Finder):
            finder.zip_prefixes += tuple(p for p in zip_prefixes if p not in finder.zip_prefixes)
            if write is not None:
                finder.cache.commit(write if finder.cache.write is None else finder.cache.write and write)
            return finder.cache
    finder = Finder(cache or Cache(write=write), zip_prefixes=zip_prefixes)
    sys.meta_path.insert(_position(), finder)
    return finder.cache
