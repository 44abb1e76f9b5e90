"""A crafted state file cannot make tuning_revert write what the collection never writes.

The finding this reproduces: /var/lib/gpufleet-tuning/state.json is data, but revert used to
restore ``file`` and ``sysfs`` items to any path (a root-owned 0755 file under /usr/local/bin, a
line in /etc/cron.d, a symlink to /etc/shadow) and load any kernel module it named. Each item is
now checked when the record is loaded (state/checks.py): the refused ones are named in the
result, never written, and the valid rest of the same record is still put back.
"""

import base64
import hashlib
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_state
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.commands import CommandResult
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store
from ansible_collections.gpufleet.tuning.plugins.modules import tuning_revert as revert_module
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, write_tree

MARKED = "# Managed by Ansible (gpufleet.tuning.sysctl_profile), profile t.\nvm.swappiness = 10\n"
PCI = "sys/bus/pci/devices/0000:01:00.0/remove"


class Tools:
    """modprobe "installed" on the fake tree: ``modprobe NAME`` lists NAME in /proc/modules."""

    def __init__(self, root):
        self.root = root
        self.ran = []

    def which(self, name):
        return "/sbin/" + name if name == "modprobe" else None

    def run(self, argv):
        self.ran.append(argv)
        if argv[1:2] != ["-r"]:
            with open(os.path.join(str(self.root), "proc/modules"), "a") as handle:
                handle.write("%s 16384 0 - Live 0x0\n" % argv[-1])
        return CommandResult(argv, 0, "", "")


def _content(text, mode="0644"):
    return {"content_b64": base64.b64encode(text.encode()).decode(), "mode": mode,
            "uid": os.geteuid(), "gid": os.getegid()}


def _entry(how, target, area, before, after, **extra):
    entry = {"key": state_items.key_of(how, target), "how": how, "target": target, "area": area, "reboot": False,
             "before": before, "after": after, "applied": True, "first_run": "r1", "first_time": "t",
             "last_run": "r1", "last_time": "t"}
    entry.update(extra)
    return entry


def _crafted_node(tmp_path):
    """A node tuned by the collection (swappiness 10, its sysctl.d file) whose record also holds
    five crafted items; returns (Paths, state path, {name: key})."""
    root = str(tmp_path)
    write_tree(tmp_path, {
        "proc/sys/vm/swappiness": "10\n",
        "proc/modules": "",
        PCI: "0\n",
        "etc/sysctl.d/90-gpufleet-t.conf": MARKED,
        "etc/cron.d/.keep": "",
    })
    paths = state_items.Paths(root)
    entries = {
        "valid_sysctl": _entry("sysctl", "vm.swappiness", "sysctl", "60", "10"),
        "valid_file": _entry("file", os.path.join(root, "etc/sysctl.d/90-gpufleet-t.conf"), "sysctl", None,
                             {"sha256": hashlib.sha256(MARKED.encode()).hexdigest(), "size": len(MARKED),
                              "mode": "0644"}),
        "bin": _entry("file", os.path.join(root, "usr/local/bin/x"), "sysctl", _content("#!/bin/sh\nid\n", "0755"),
                      None),
        "cron": _entry("file", os.path.join(root, "etc/cron.d/evil"), "kernel_cmdline",
                       _content("* * * * * root /tmp/x\n"), None),
        "link": _entry("file", os.path.join(root, "etc/victim-link"), "sysctl", {"link": "/etc/shadow"}, None, link=True),
        "sysfs": _entry("sysfs", os.path.join(root, PCI), "cpu_power", "1", "0"),
        "kmod": _entry("kmod", "evil_module", "peermem", "loaded", "not loaded"),
    }
    state = {"version": 1, "items": dict((e["key"], e) for e in entries.values()), "runs": []}
    state_path = str(tmp_path / "var/lib/gpufleet-tuning/state.json")
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/state.json": json.dumps(state)})
    return paths, state_path, dict((name, e["key"]) for name, e in entries.items())


def test_revert_restores_the_valid_items_and_refuses_the_crafted_ones(tmp_path):
    paths, state_path, keys = _crafted_node(tmp_path)
    tools = Tools(tmp_path)
    result = tuning_revert.run({"path": state_path}, paths=paths, tools=tools)

    # nothing was written at the crafted paths, no module was loaded, the sysfs file is as it was
    assert not os.path.lexists(str(tmp_path / "usr/local/bin/x"))
    assert not os.path.lexists(str(tmp_path / "etc/cron.d/evil"))
    assert not os.path.lexists(str(tmp_path / "etc/victim-link"))
    assert (tmp_path / PCI).read_text() == "0\n"
    assert tools.ran == []

    # the collection's own items went back
    assert (tmp_path / "proc/sys/vm/swappiness").read_text().strip() == "60"
    assert not (tmp_path / "etc/sysctl.d/90-gpufleet-t.conf").exists()
    assert sorted(r["key"] for r in result["restored"]) == sorted([keys["valid_sysctl"], keys["valid_file"]])

    # the refused ones are named, each with its reason, and in a warning
    refused = dict((r["key"], r) for r in result["refused"])
    assert sorted(refused) == sorted(keys[n] for n in ("bin", "cron", "link", "sysfs", "kmod"))
    assert all(r["why"] for r in refused.values())
    assert "/etc/cron.d/evil is not a file the kernel_cmdline area writes" in refused[keys["cron"]]["why"]
    assert "/usr/local/bin/x is not a file the sysctl area writes" in refused[keys["bin"]]["why"]
    assert "/etc/victim-link" in refused[keys["link"]]["why"]
    assert "cpu_power writes" in refused[keys["sysfs"]]["why"]
    assert "'evil_module' is not a kernel module the collection loads" in refused[keys["kmod"]]["why"]
    assert refused[keys["kmod"]]["kind"] == "kmod" and refused[keys["kmod"]]["target"] == "evil_module"
    assert any(w.startswith("not put back") and keys["cron"] in w for w in result["warnings"])


def test_refused_items_stay_in_the_record_and_stay_refused(tmp_path):
    paths, state_path, keys = _crafted_node(tmp_path)
    tuning_revert.run({"path": state_path}, paths=paths, tools=Tools(tmp_path))
    with open(state_path) as handle:
        left = json.load(handle)["items"]
    # the restored items left the record; the crafted ones were neither acted on nor dropped
    assert sorted(left) == sorted(keys[n] for n in ("bin", "cron", "link", "sysfs", "kmod"))
    again = tuning_revert.run({"path": state_path}, paths=paths, tools=Tools(tmp_path))
    assert again["changed"] is False and len(again["refused"]) == 5
    assert not os.path.lexists(str(tmp_path / "usr/local/bin/x"))


def test_check_mode_lists_the_refused_items_too(tmp_path):
    paths, state_path, keys = _crafted_node(tmp_path)
    result = tuning_revert.run({"path": state_path}, check_mode=True, paths=paths, tools=Tools(tmp_path))
    assert len(result["refused"]) == 5
    assert keys["bin"] not in [r["key"] for r in result["restored"]]


def test_drift_skips_and_names_the_refused_items(tmp_path):
    paths, state_path, keys = _crafted_node(tmp_path)
    result = tuning_state.run({"path": state_path, "mode": "drift"}, paths=paths)
    crafted = sorted(keys[n] for n in ("bin", "cron", "link", "sysfs", "kmod"))
    assert sorted(r["key"] for r in result["refused"]) == crafted
    assert [d["key"] for d in result["drift"]] == [] and result["checked"] == 2


def test_the_module_returns_the_refused_items_and_warns(tmp_path, capsys, monkeypatch):
    """Through tuning_revert's main(), which works on the node's own /: the record holds only crafted
    files (under the test's folder, none a file the collection writes), so nothing of this machine
    is read or written."""
    cron = str(tmp_path / "etc/cron.d/evil")
    entry = _entry("file", cron, "kernel_cmdline", _content("* * * * * root /tmp/x\n"), None)
    state_path = str(tmp_path / "state.json")
    write_tree(tmp_path, {"state.json": json.dumps({"version": 1, "items": {entry["key"]: entry}, "runs": []}),
                          "etc/cron.d/.keep": ""})
    warned = kf.capture_warnings(monkeypatch, revert_module)
    failed, result = run_module(revert_module, {"path": state_path}, capsys)
    assert not failed and result["changed"] is False and result["restored"] == []
    assert [r["key"] for r in result["refused"]] == [entry["key"]]
    assert any(entry["key"] in w for w in warned + result.get("warnings", []))
    assert not os.path.lexists(cron)


def test_recording_a_file_no_module_writes_is_refused_before_anything_is_written(tmp_path):
    write_tree(tmp_path, {"etc/cron.d/.keep": ""})
    paths = state_items.Paths(str(tmp_path))
    state_path = str(tmp_path / "var/lib/gpufleet-tuning/state.json")
    evil = records.file_change("kernel_cmdline", str(tmp_path / "etc/cron.d/evil"), None, "* * * * * root id\n")
    with pytest.raises(ModuleFailure) as exc:
        tuning_state.run({"path": state_path, "planned": [evil]}, paths=paths)
    assert "nothing was recorded" in exc.value.message and "/etc/cron.d/evil" in exc.value.message
    assert not os.path.exists(state_path)


def test_a_run_that_records_the_same_file_replaces_a_refused_entry(tmp_path):
    """A refused entry keeps its place in the file until the module that owns the path records
    it again: the before that run finds is then the record's."""
    write_tree(tmp_path, {"proc/sys/vm/swappiness": "60\n", "proc/self/uid_map": "0 0 4294967295\n"})
    conf = str(tmp_path / "etc/sysctl.d/90-gpufleet-t.conf")
    crafted = _entry("file", conf, "sysctl", {"link": "/etc/shadow"}, None, link=True)
    state_path = str(tmp_path / "var/lib/gpufleet-tuning/state.json")
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/state.json": json.dumps(
        {"version": 1, "items": {crafted["key"]: crafted}, "runs": []})})
    paths = state_items.Paths(str(tmp_path))
    assert "link to /etc/shadow" in store.load(state_path, str(tmp_path))["refused"][crafted["key"]]["why"]

    params = {"name": "t", "settings": {"vm.swappiness": 10}}
    recorder.run(lambda check: sp.run(params, check, sp.Paths(str(tmp_path))), False,
                 {"state_path": state_path, "run_id": "r1"}, paths)
    state = store.load(state_path, str(tmp_path))
    assert state["refused"] == {} and state["items"][crafted["key"]]["before"] is None
    result = tuning_revert.run({"path": state_path}, paths=paths)
    assert result["refused"] == [] and not os.path.lexists(conf)
    assert (tmp_path / "proc/sys/vm/swappiness").read_text().strip() == "60"
