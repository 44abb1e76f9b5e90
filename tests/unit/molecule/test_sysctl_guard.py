# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""molecule/resources/sysctl_guard.py against a fake /proc/sys: what it records, what it puts
back after the host scenario, and what it leaves alone."""

from __future__ import annotations

import importlib.util
import json
import os
import stat

import pytest

from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, write_tree

GUARD = os.path.join(os.path.dirname(__file__), "..", "..", "..", "molecule", "resources", "sysctl_guard.py")


@pytest.fixture(scope="module")
def guard():
    spec = importlib.util.spec_from_file_location("sysctl_guard", GUARD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def proc_sys(tmp_path):
    root = tmp_path / "sys"
    write_tree(root, {
        "vm/swappiness": "60\n",
        "fs/file-max": "2466174\n",
        "net/ipv4/tcp_rmem": "4096\t131072\t6291456\n",
        "net/ipv4/conf/all/forwarding": "0\n",
        "net/ipv4/conf/eth0/forwarding": "0\n",
        "kernel/ns_last_pid": "1234\n",
        "kernel/random/write_wakeup_threshold": "256\n",
        "kernel/nmi_watchdog": "0\n",
        "vm/drop_caches": "",
    })
    os.chmod(str(root / "kernel/nmi_watchdog"), 0o444)
    os.chmod(str(root / "vm/drop_caches"), stat.S_IWUSR)
    return root


def _set(root, key, value):
    with open(os.path.join(str(root), *key.split(".")), "w") as handle:
        handle.write(value + "\n")


def test_snapshot_records_writable_keys_folded(guard, proc_sys, tmp_path):
    snap = str(tmp_path / "state" / "before.json")
    assert guard.snapshot(snap, str(proc_sys)) == 0
    recorded = json.loads(read(snap))
    assert dict((k, v["value"]) for k, v in recorded.items()) == {
        "vm.swappiness": "60",
        "fs.file-max": "2466174",
        "net.ipv4.tcp_rmem": "4096 131072 6291456",
        "net.ipv4.conf.all.forwarding": "0",
    }
    assert recorded["vm.swappiness"]["path"] == os.path.join(str(proc_sys), "vm", "swappiness")


def test_restore_puts_back_what_differs_and_nothing_else(guard, proc_sys, tmp_path, capsys):
    snap = str(tmp_path / "before.json")
    guard.snapshot(snap, str(proc_sys))
    _set(proc_sys, "vm.swappiness", "10")
    _set(proc_sys, "fs.file-max", "9223372036854775807")
    _set(proc_sys, "net.ipv4.conf.eth0.forwarding", "1")   # another program's interface
    _set(proc_sys, "kernel.ns_last_pid", "5678")            # moves on its own
    capsys.readouterr()

    assert guard.diff(snap, str(proc_sys)) == 1
    assert capsys.readouterr().out.splitlines() == [
        "fs.file-max: 2466174 -> 9223372036854775807",
        "vm.swappiness: 60 -> 10",
    ]
    assert guard.restore(snap, str(proc_sys)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "restored fs.file-max: 9223372036854775807 -> 2466174",
        "restored vm.swappiness: 10 -> 60",
    ]
    assert read(proc_sys / "vm/swappiness") == "60"
    assert read(proc_sys / "fs/file-max") == "2466174"
    assert read(proc_sys / "net/ipv4/conf/eth0/forwarding") == "1\n"
    assert read(proc_sys / "kernel/ns_last_pid") == "5678\n"
    assert guard.diff(snap, str(proc_sys)) == 0


def test_restore_fails_naming_a_key_it_cannot_put_back(guard, proc_sys, tmp_path, capsys):
    snap = str(tmp_path / "before.json")
    guard.snapshot(snap, str(proc_sys))
    # The write of vm.swappiness fails (its recorded path is now a directory: EISDIR stands
    # in for a kernel that refuses); fs.file-max is still put back.
    recorded = json.loads(read(snap))
    recorded["vm.swappiness"]["path"] = str(tmp_path)
    with open(snap, "w") as handle:
        json.dump(recorded, handle)
    _set(proc_sys, "vm.swappiness", "10")
    _set(proc_sys, "fs.file-max", "1")
    capsys.readouterr()
    assert guard.restore(snap, str(proc_sys)) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "restored fs.file-max: 1 -> 2466174"
    assert len(out) == 2 and out[1].startswith("FAILED vm.swappiness: cannot write '60': ")
    assert read(proc_sys / "fs/file-max") == "2466174"


def test_usage_without_arguments(guard, capsys):
    assert guard.main(["sysctl_guard.py"]) == 2
    assert "snapshot FILE" in capsys.readouterr().err
