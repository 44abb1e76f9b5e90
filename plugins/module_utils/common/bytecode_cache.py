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

- a meta-path finder takes the imports of ``ansible_collections.gpufleet.tuning.plugins.
  module_utils.*`` once ``install()`` has run; everything else is imported as usual;
- the cache key is the SHA-256 of the interpreter's bytecode magic, the module's name and its
  source, so code from another release, another Python or an edited file never matches: a
  stale entry is never used, only left until it ages out (KEEP_DAYS);
- an entry holds the magic and the marshalled code object; the file name inside it is set to
  the module's path in this run's zip, so tracebacks point where they always did;
- entries are only read from, and written to, a directory that only root can change, all the
  way up (common/trust.py, the rule the boot helpers follow): root runs this code. Not root, a
  directory that another user could change, an unreadable or damaged entry: the source is
  compiled as it would have been, and nothing is said about it;
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

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust

PACKAGE = "ansible_collections.gpufleet.tuning.plugins.module_utils."
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

    def _usable(self):
        if self._trusted is None:
            self._trusted = os.geteuid() == self.uid and self._check()
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
        digest.update(source.encode("utf-8", "surrogatepass"))
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
        return code

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

    def __init__(self, original, cache):
        self._original = original
        self._cache = cache

    def create_module(self, spec):
        create = getattr(self._original, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        source = self._original.get_source(module.__name__)
        if source is None:
            self._original.exec_module(module)
            return
        filename = module.__spec__.origin or "<%s>" % module.__name__
        exec(self._cache.code(module.__name__, source, filename), module.__dict__)

    def get_source(self, name):
        return self._original.get_source(name)


class Finder(importlib.abc.MetaPathFinder):
    """Imports of the modules under ``prefix`` (PACKAGE) through ``cache``; the spec is the one
    Python would have used, with its loader wrapped."""

    def __init__(self, cache, prefix=PACKAGE):
        self.cache = cache
        self.prefix = prefix

    def find_spec(self, name, path, target=None):
        if not name.startswith(self.prefix):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_source"):
            return spec
        spec.loader = _Loader(spec.loader, self.cache)
        return spec


def install(write=True, cache=None):
    """Put the finder first on sys.meta_path (once); returns its Cache."""
    for finder in sys.meta_path:
        if isinstance(finder, Finder):
            finder.cache.write = finder.cache.write and write
            return finder.cache
    finder = Finder(cache or Cache(write=write))
    sys.meta_path.insert(0, finder)
    return finder.cache
