# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the host-vm verifier: one test file per feature sits beside this one.

Shared ones (fold, read_sysctl, results) come from molecule/conftest.py; these are the VM's own.

The verifier runs after the scenario's real reboot of the guest, so what ``host`` reads comes
from the rebooted kernel. What happened before the reboot was saved on the controller:
``results/<host>/converge-1.json`` (first converge), ``converge-2.json`` (idempotence run),
``check.json`` (the check-mode converge) hold every registered ``__host_*`` module result of
the host role, and ``reboot.json`` the boot ids around the reboot.

A feature's test file typically asserts three things: the live state on the rebooted guest
(persistence), the first converge's result (what the module did on a real kernel), and the
later runs' results (idempotent, check mode agrees).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

PROJECT_DIR = os.environ.get(
    "MOLECULE_PROJECT_DIRECTORY",
    os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))


def role_defaults(role):
    """The merged defaults of a role, those a profile may set as the base profile gives them (the
    VM has no GPU: the profile chosen for it is base), as the unit tests read them."""
    sys.path.insert(0, os.path.join(PROJECT_DIR, ".collections"))
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpufleet.tuning.tests.unit.helpers import role_base_defaults
    return role_base_defaults(PROJECT_DIR, role)


@pytest.fixture(scope="session")
def host_defaults():
    return role_defaults("host")


@pytest.fixture(scope="module")
def rebooted(host, results):
    """The boot ids around the scenario's reboot, once checked that the guest really rebooted
    and that this is the boot after it (tests reading persisted state depend on it)."""
    ids = results("reboot")
    assert ids["before"] != ids["after"], "the guest did not reboot: boot id %s before and after" % ids["before"]
    now = host.file("/proc/sys/kernel/random/boot_id").content_string.strip()
    assert now == ids["after"], "the guest booted again since the scenario's reboot (%s, expected %s)" % (now, ids["after"])
    return ids


# fold, read_sysctl and results come from molecule/conftest.py (shared with the podman scenarios).


@pytest.fixture(scope="module")
def run_module(host):
    """Run one module on the guest through `ansible` and return its result, failed or not:
    run_module("gpufleet.tuning.sysctl_profile", {"name": ...}, check=False).

    testinfra's host.ansible() cannot tell a failed module under ansible-core 2.19: the tree
    output it reads no longer carries "failed". The JSON callback does, and so does this.
    """
    binary = os.path.join(os.path.dirname(sys.executable), "ansible")
    if not os.path.exists(binary):
        binary = shutil.which("ansible")
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    name = host.backend.host

    def run(module, args, check=False):
        cmd = [binary, "-i", host.backend.ansible_inventory, "-m", module, "-a", json.dumps(args), name]
        if check:
            cmd.append("--check")
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False)
        try:
            return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"][name]
        except (ValueError, KeyError, IndexError):
            raise AssertionError("ansible -m %s gave no result (rc %d): %s %s" % (module, proc.returncode, proc.stdout, proc.stderr))

    return run


# The guest's two PCI Express endpoints, each behind its own QEMU pcie-root-port.
E1000E = ("0x8086", "0x10d3")
NVME_CLASS = "0x010802"


@pytest.fixture(scope="module")
def endpoints(host):
    """{"e1000e": bdf, "nvme": bdf}, found from sysfs in one command."""
    out = host.check_output("grep -H . /sys/bus/pci/devices/*/vendor /sys/bus/pci/devices/*/device "
                            "/sys/bus/pci/devices/*/class")
    attrs = {}
    for line in out.splitlines():
        path, value = line.rsplit(":", 1)  # the path has colons, the value has none
        bdf, name = path.split("/")[-2:]
        attrs.setdefault(bdf, {})[name] = value.strip()
    found = {}
    for bdf, attr in sorted(attrs.items()):
        if (attr.get("vendor"), attr.get("device")) == E1000E:
            found["e1000e"] = bdf
        elif attr.get("class") == NVME_CLASS:
            found["nvme"] = bdf
    assert sorted(found) == ["e1000e", "nvme"], attrs
    return found
