# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module's AnsiballZ payload kept from one run of ansible-playbook to the next.

Why: before a module runs, Ansible packs it with every module_utils file it imports, parsing each
one to find its imports (module_common.recursive_finder). It keeps the packed module in a cache
of the run's own temporary folder (C.DEFAULT_LOCAL_TMP/ansiballz_cache), which is removed when
the run ends, so every run packs its modules again. For host_tuning that is about 110 files and
1.5 MB of source: 0.2-0.3 s of controller CPU per run on a 2-core controller, a sixth of a
one-host pass (README "Speed of a tuning pass"), the same on every run while nothing changed.

Here the run's cache file, once Ansible has written it, is copied into the collection's folder
on the controller that outlives the run (plugin_utils/controller_cache.py), with a manifest: every file the payload holds, by its path on the controller, with
its size, modification time and inode, and the ansible-core and Python versions. The next run
puts the copy back into its own cache folder before Ansible looks there, and only when the
versions are the same and every file of the manifest is unchanged (a file the payload holds but
the controller has not, such as a namespace package's __init__.py that Ansible writes itself,
must still be absent). A payload is kept only when each of its files holds exactly the bytes of
the controller file the manifest names (so a module_utils file found somewhere else, such as a
configured module_utils folder, keeps nothing). A module_utils file that starts importing another one has changed, so a
new import is always seen. Anything unexpected (a payload entry that is neither ansible-core's
nor this collection's, a cache layout this code does not know) keeps nothing, and Ansible packs
as it always does.

Ansible loads its cache file with pickle, so the kept copies are trusted as Ansible trusts its
own temporary folder (controller_cache's rule: this user's own, 0700, writable by no one else, or
never used). gpufleet_ansiballz_store=false turns it off.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import sys
import zipfile

import ansible
from ansible import constants as C
from ansible.release import __version__ as ANSIBLE_VERSION

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import controller_cache

# What the payload's entries are, on the controller: ansible-core's package and this collection.
ANSIBLE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(ansible.__file__)))
COLLECTION_PREFIX = "ansible_collections/gpufleet/tuning/"
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE_PREFIX = "ansible_collections.gpufleet.tuning.plugins.modules."


def run_cache_dir():
    """The run's own AnsiballZ cache folder (module_common's lookup path)."""
    return os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache")  # type: ignore[attr-defined]


def _versions():
    return {"ansible_core": ANSIBLE_VERSION, "python": sys.version}


def source_path(name):
    """The controller file of payload entry ``name``; None for an entry of anything else."""
    if name.startswith("ansible/"):
        return os.path.join(ANSIBLE_ROOT, name)
    if name.startswith(COLLECTION_PREFIX):
        return os.path.join(COLLECTION_ROOT, name[len(COLLECTION_PREFIX):])
    if name in ("ansible_collections/__init__.py", "ansible_collections/gpufleet/__init__.py"):
        return os.path.join(COLLECTION_ROOT, "..", "..", name[len("ansible_collections/"):])
    return None


# Written by Ansible itself, not copied from the controller's file (they follow the ansible-core
# version, which the kept entry is keyed by).
ANSIBLE_WRITTEN = frozenset(("ansible/__init__.py", "ansible/module_utils/__init__.py"))


def manifest(payload):
    """The manifest of ``payload`` (the packed module's zipfile.ZipFile): each entry's controller
    file and its stat (None: not on the controller). None, keep nothing, unless every entry is
    ansible-core's or this collection's and holds exactly its controller file's bytes, or is one
    of the package __init__.py files Ansible writes itself (empty where the controller has none)."""
    files = {}
    for name in payload.namelist():
        path = source_path(name)
        if path is None:
            return None
        key = controller_cache.stat_key(path)
        if name not in ANSIBLE_WRITTEN:
            data = payload.read(name)
            if key is None:
                if not name.endswith("/__init__.py") or data.strip():
                    return None
            else:
                with open(path, "rb") as handle:
                    if handle.read() != data:
                        return None
        files[os.path.normpath(path)] = key
    return files


def _unchanged(files):
    return all(controller_cache.stat_key(path) == want for path, want in files.items())


def _entry_paths(module_fqn):
    folder = controller_cache.folder()
    return (os.path.join(folder, "ansiballz-%s.json" % module_fqn), os.path.join(folder, "ansiballz-%s.pickle" % module_fqn))


def restore(module_fqn):
    """Put the kept payload of ``module_fqn`` into this run's cache when it is still valid.
    Returns True when the run's cache has it now (put back, or there already)."""
    meta_path, blob_path = _entry_paths(module_fqn)
    if not (controller_cache.trusted(controller_cache.folder(), True) and controller_cache.trusted(meta_path)
            and controller_cache.trusted(blob_path)):
        return False
    try:
        with open(meta_path) as handle:
            meta = json.load(handle)
        if meta.get("versions") != _versions() or not isinstance(meta.get("files"), dict):
            return False
        target = os.path.join(run_cache_dir(), os.path.basename(meta["cache_file"]))
        if not target.startswith(run_cache_dir() + os.sep) or not os.path.basename(target).startswith(module_fqn + "-"):
            return False
        if os.path.exists(target):
            return True
        if not _unchanged(meta["files"]):
            return False
        os.makedirs(run_cache_dir(), exist_ok=True)
        with open(blob_path, "rb") as handle:
            data = handle.read()
        controller_cache.write(target, data)
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _payload(cache_file):
    """The packed module in Ansible's cache file (a pickled module_common._CachedModule), as a
    zipfile.ZipFile."""
    from ansible.executor import module_common  # pylint: disable=import-outside-toplevel

    cached = module_common._CachedModule.load(cache_file)  # pylint: disable=protected-access
    return zipfile.ZipFile(io.BytesIO(base64.b64decode(cached.zip_data)))


def keep(module_fqn):
    """Keep this run's packed ``module_fqn`` for the next runs, unless a valid copy is kept
    already. Errors keep nothing: the next run packs it again."""
    meta_path, blob_path = _entry_paths(module_fqn)
    try:
        names = [name for name in os.listdir(run_cache_dir())
                 if name.startswith(module_fqn + "-") and not name.endswith((".lock", ".part", "-part"))]
        if len(names) != 1:
            return False
        cache_file = os.path.join(run_cache_dir(), names[0])
        folder = controller_cache.ready()
        if folder is None:
            return False
        with os.fdopen(os.open(os.path.join(folder, ".lock"), os.O_WRONLY | os.O_CREAT, 0o600), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if controller_cache.trusted(meta_path):
                with open(meta_path) as handle:
                    meta = json.load(handle)
                if meta.get("versions") == _versions() and meta.get("cache_file") == names[0] and _unchanged(meta.get("files") or {}):
                    return True
            with _payload(cache_file) as payload:
                files = manifest(payload)
            if files is None:
                return False
            with open(cache_file, "rb") as handle:
                data = handle.read()
            controller_cache.write(blob_path, data)
            controller_cache.write(meta_path, json.dumps({"versions": _versions(), "cache_file": names[0], "files": files}).encode())
        return True
    except (OSError, ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile):
        return False


def wanted(task_vars):
    """gpufleet_ansiballz_store, true unless set false."""
    value = (task_vars or {}).get("gpufleet_ansiballz_store", True)
    return str(value).strip().lower() not in ("false", "no", "off", "0", "n", "f")
