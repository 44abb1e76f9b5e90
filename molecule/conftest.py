# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures shared by the verifiers of the molecule scenarios (container, host, host-vm).

One test file per feature sits in each scenario's tests/ (test_sysctl.py, test_memlock.py, ...).
``host`` is testinfra's podman backend on the scenario's container (molecule.yml sets
``--hosts podman://NAME``): every command runs inside the container with ``podman exec``;
for host-vm it is the ansible backend over ssh to the VM.

What the converges returned was saved on the controller by
molecule/resources/tasks/save_results.yml: ``results("converge-1")`` (first converge),
``results("converge-2")`` (idempotence run) and ``results("check")`` (the check-mode converge)
hold every registered ``__host_*`` or ``__container_*`` module result of the role.

Helpers come as fixtures: the repository's pytest.ini imports test files with
--import-mode=importlib, so a test file cannot import this conftest as a module.
"""

from __future__ import annotations

import json
import os
import re

import pytest


def _fold(value):
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return " ".join(str(value).split())


def _key_path(key):
    return "/proc/sys/" + key.replace(".", "/")


@pytest.fixture(scope="session")
def fold():
    """A sysctl value as the modules compare it: whitespace folded to single spaces."""
    return _fold


@pytest.fixture(scope="module")
def read_sysctl(host):
    """The live value of a dotted sysctl key inside the container, whitespace folded."""
    def read(key):
        return _fold(host.file(_key_path(key)).content_string)
    return read


@pytest.fixture(scope="module")
def sysctl_conf(host):
    """The settings of a sysctl.d file inside the container as {key: folded value};
    comments and blank lines are left out, a key set twice fails the test."""
    def parse(path):
        settings = {}
        for line in host.file(path).content_string.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            key, sep, value = line.partition("=")
            assert sep, "%s: not a 'key = value' line: %r" % (path, line)
            key = key.strip()
            assert key not in settings, "%s sets %s twice" % (path, key)
            settings[key] = _fold(value)
        return settings
    return parse


@pytest.fixture(scope="module")
def results(host):
    """Loader of the saved run results of this container or VM:
    results("converge-1")["__container_sysctl"]. get_hostname() is the instance name under
    every testinfra backend (podman://NAME for the containers, ansible://NAME for host-vm)."""
    directory = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "results", host.backend.get_hostname())

    def load(name):
        path = os.path.join(directory, name + ".json")
        assert os.path.exists(path), "%s is missing: did the %s step run?" % (path, name)
        with open(path) as handle:
            return json.load(handle)
    return load


def _nudged(value):
    """A value one off the given one (the last number + 1): a write that must show."""
    match = re.search(r"(\d+)$", value)
    assert match, "cannot derive another value from %r" % value
    return value[:match.start()] + str(int(match.group(1)) + 1)


@pytest.fixture(scope="module")
def sysctl_system_reload(host, read_sysctl):
    """Proves persistence without a reboot: moves each key away from its wanted value inside
    the container (``sysctl -w``; keys this container may not write are left), runs
    ``sysctl --system`` there, and returns what it found afterwards:
    {"nudged": keys moved, "output": sysctl's output, "after": {key: value}}."""
    def reload(wanted):
        nudged = []
        for key in sorted(wanted):
            probe = host.run("sysctl -w %s", "%s=%s" % (key, _nudged(wanted[key])))
            if probe.rc == 0 and read_sysctl(key) != wanted[key]:
                nudged.append(key)
        assert nudged, "no key of %s could be moved away from its value: the test would prove nothing" % sorted(wanted)
        # rc is not asserted: sysctl --system also applies the distribution's files, whose
        # host-wide keys a container may be refused.
        run = host.run("sysctl --system")
        return {"nudged": nudged, "output": run.stdout + run.stderr,
                "after": dict((key, read_sysctl(key)) for key in wanted)}
    return reload


@pytest.fixture(scope="module")
def process_memlock(host):
    """The memlock limit of process PID as (soft, hard), as /proc/PID/limits spells them
    ("unlimited" or bytes)."""
    def read(pid):
        for line in host.file("/proc/%s/limits" % pid).content_string.splitlines():
            if line.startswith("Max locked memory"):
                soft, hard = line[len("Max locked memory"):].split()[:2]
                return soft, hard
        raise AssertionError("no 'Max locked memory' row in /proc/%s/limits" % pid)
    return read
