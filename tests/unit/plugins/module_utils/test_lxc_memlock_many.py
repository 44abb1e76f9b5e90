"""lxc_memlock over a selection (run_many) on a fake Proxmox node.

Proves that ``select``/``exclude``/``containers`` raise exactly the containers they name, each
config once (a selected container that the inventory also lists gets the entry's limit and
keeps its ``guest``); that a locked container is pending without failing the rest, and a
failing one fails the run only after the others were raised, with their records in their
``results`` items and none at the top level; that the options are checked (one container or a
selection, exclude only with select); that check mode writes nothing and a rerun changes
nothing; that the top-level ``changes`` is the items' changes (records.claimed agrees); and,
through the module's recorder, that a config's before content lands in the node's record.
"""

import base64
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock as lm
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import lxc_fixtures as fx

# Of the node's containers (lxc_fixtures.proxmox_node) select [gpu] picks these; 103 is locked
# by a backup.
GPU = ["101", "102", "103", "106"]
OTHERS = ["104", "105", "107", "900"]


@pytest.fixture
def pve(tmp_path):
    write_tree(tmp_path, fx.proxmox_node())
    write_tree(tmp_path, {"proc/1/stat": "1 (systemd) S 0 1 0 0\n", "proc/1/cgroup": "0::/init.scope\n",
                          "sys/fs/cgroup": None})
    os.symlink("nodes/pve-gpu-01/lxc", str(tmp_path / "etc/pve/lxc"))
    os.symlink("nodes/pve-gpu-01", str(tmp_path / "etc/pve/local"))
    return tmp_path, lm.Paths(str(tmp_path))


def conf(root, vmid):
    return root / ("etc/pve/nodes/pve-gpu-01/lxc/%s.conf" % vmid)


def by_vmid(result):
    return dict((str(item["item"]["vmid"]), item) for item in result["results"])


def backups(root):
    folder = root / "etc/pve/nodes/pve-gpu-01/lxc"
    return sorted(n for n in os.listdir(str(folder)) if n.endswith(".gpufleet.bak")
                  and not n.startswith("101.conf.20260101-000000"))  # the fixture's own


def test_select_gpu_raises_only_the_gpu_containers(pve):
    root, paths = pve
    result = lm.run({"select": ["gpu"]}, paths=paths)
    assert sorted(by_vmid(result)) == GPU
    assert result["discovery"]["selected"] == GPU and result["discovery"]["left_alone"] == OTHERS
    reasons = dict((r["id"], r["reason"]) for r in result["discovery"]["containers"])
    assert reasons["104"] == "no NVIDIA GPU passed through"
    assert conf(root, 101).read_bytes() == fx.AFTER_PVE_PLAIN
    assert conf(root, 102).read_bytes() == fx.AFTER_PVE_SNAPSHOTS
    assert conf(root, 106).read_bytes() == fx.PVE_UVM_MAJOR_ONLY + b"lxc.prlimit.memlock: unlimited\n"
    # the others are as they were, byte for byte
    assert conf(root, 104).read_bytes() == fx.PVE_WEB
    assert conf(root, 105).read_bytes() == fx.PVE_GPU_ONLY_OUTSIDE_LIVE
    assert conf(root, 107).read_bytes() == fx.PVE_ALL_DEVICES
    assert conf(root, 900).read_bytes() == fx.PVE_TEMPLATE
    assert (root / "etc/pve/nodes/pve-gpu-02/lxc/201.conf").read_bytes() == fx.PVE_PLAIN
    assert result["changed"] is True and result["msg"] == "4 container(s)"
    assert all(item["item"]["source"].startswith("selected: NVIDIA GPU") for item in result["results"])


def test_exclude_narrows_the_selection(pve):
    root, paths = pve
    result = lm.run({"select": ["gpu"], "exclude": ["102", "tag:llm"]}, paths=paths)
    assert sorted(by_vmid(result)) == ["101", "106"]
    assert conf(root, 102).read_bytes() == fx.PVE_SNAPSHOTS
    reasons = dict((r["id"], r["reason"]) for r in result["discovery"]["containers"])
    assert reasons["102"].startswith("excluded (102)") and reasons["103"].startswith("excluded (tag:llm)")


def test_a_selected_container_listed_with_its_own_limit_is_raised_once_with_it(pve):
    root, paths = pve
    result = lm.run({"select": ["gpu"], "containers": [{"vmid": 101, "limit": "65536", "guest": "llm-serve-01"}]},
                    paths=paths)
    assert [str(item["item"]["vmid"]) for item in result["results"]] == GPU  # 101 once
    item = by_vmid(result)["101"]
    assert item["item"]["guest"] == "llm-serve-01" and item["item"]["limit"] == "65536"
    assert "inventory host llm-serve-01" in item["item"]["source"] and item["item"]["source"].startswith("selected:")
    assert item["limit_after"] == "65536"
    assert conf(root, 101).read_bytes() == fx.PVE_PLAIN + b"lxc.prlimit.memlock: 65536\n"
    assert len([n for n in backups(root) if n.startswith("101.conf.")]) == 1
    # the others keep the common limit
    assert by_vmid(result)["102"]["limit_after"] == "unlimited"


def test_a_locked_container_is_pending_and_the_others_are_raised(pve):
    root, paths = pve
    result = lm.run({"select": ["gpu"]}, paths=paths)
    locked = by_vmid(result)["103"]
    assert locked["pending"] is True and locked["changed"] is False and locked["changes"] == []
    assert not locked.get("failed")
    assert "locked by Proxmox (lock: backup)" in locked["pending_reason"]
    assert conf(root, 103).read_bytes() == fx.PVE_DEV_ENTRIES
    assert any("container 103 is locked by Proxmox" in w for w in result["warnings"])
    for vmid in ("101", "102", "106"):
        assert by_vmid(result)[vmid]["changed"] is True
    assert not any(item.get("failed") for item in result["results"])


def test_a_missing_config_fails_the_run_after_the_others_were_raised(pve):
    root, paths = pve
    missing = str(root / "etc/pve/lxc/150.conf")
    with pytest.raises(ModuleFailure) as exc:
        # 150 comes first: its failure must not stop 104 after it, nor the selected ones
        lm.run({"select": ["101"], "containers": [{"vmid": 150}, {"vmid": 104}]}, paths=paths)
    message = exc.value.message
    assert message.startswith("1 of 3 container(s) failed: 150: container config %s does not exist" % missing)
    partial = exc.value.partial
    assert "changes" not in partial and "changed" not in partial
    assert contract.assert_no_change_claimed(partial) is None
    items = by_vmid(partial)
    assert list(items) == ["101", "150", "104"]
    assert items["150"]["failed"] is True and items["150"]["changes"] == [] and "150.conf" in items["150"]["msg"]
    for vmid, after in (("101", fx.AFTER_PVE_PLAIN), ("104", fx.PVE_WEB + b"lxc.prlimit.memlock: unlimited\n")):
        assert conf(root, vmid).read_bytes() == after
        assert items[vmid]["changed"] is True
        assert str(conf(root, vmid)).replace("nodes/pve-gpu-01/", "") in [
            rec["target"] for rec in items[vmid]["changes"] if rec["kind"] == "file"]
    # what the failure still claims: the records of the items that changed
    assert records.claimed(partial) == items["101"]["changes"] + items["104"]["changes"]
    assert records.claimed(dict(partial, failed=True)) == records.claimed(partial)


def test_both_one_container_and_a_selection_are_refused(pve):
    root, paths = pve
    untouched = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        lm.run({"vmid": 101, "select": ["gpu"]}, paths=paths)
    assert "not both: got vmid, select" in exc.value.message
    with pytest.raises(ModuleFailure) as exc:
        lm.run({"name": "serving", "containers": [{"vmid": 101}]}, paths=paths)
    assert "not both: got name, containers" in exc.value.message
    assert snapshot(root) == untouched


@pytest.mark.parametrize("params", [{}, {"select": None, "exclude": [], "containers": [], "vmid": None}])
def test_naming_no_container_is_refused(pve, params):
    root, paths = pve
    untouched = snapshot(root)
    with pytest.raises(ModuleFailure, match=r"name the container\(s\): one of vmid, name or path, or select"):
        lm.run(params, paths=paths)
    assert snapshot(root) == untouched


def test_exclude_without_select_is_refused(pve):
    root, paths = pve
    untouched = snapshot(root)
    for params in ({"exclude": ["104"]}, {"exclude": ["104"], "containers": [{"vmid": 101}]}):
        with pytest.raises(ModuleFailure, match="exclude narrows select: give select too"):
            lm.run(params, paths=paths)
    assert snapshot(root) == untouched


def test_a_bad_containers_entry_is_refused_before_anything_is_written(pve):
    root, paths = pve
    untouched = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        lm.run({"select": ["gpu"], "containers": [{"vmid": 104}, {"path": "/x/config", "guest": "web"}]},
               paths=paths)
    assert exc.value.message.startswith("containers[1]: the inventory host web must name its container by vmid")
    assert exc.value.message.endswith("; nothing was changed")
    assert snapshot(root) == untouched


def test_check_mode_writes_nothing(pve):
    root, paths = pve
    untouched = snapshot(root)
    result = lm.run({"select": ["gpu"], "containers": [{"vmid": 104}]}, check_mode=True, paths=paths)
    assert snapshot(root) == untouched
    assert result["changed"] is True
    assert [vmid for vmid, item in by_vmid(result).items() if item["changed"]] == ["101", "102", "106", "104"]


def test_a_second_run_changes_nothing(pve):
    root, paths = pve
    params = {"select": ["gpu"], "containers": [{"vmid": 104, "limit": "1048576"}]}
    lm.run(params, paths=paths)
    untouched = snapshot(root)
    again = lm.run(params, paths=paths)
    assert again["changed"] is False and again["changes"] == []
    assert not any(item["changed"] for item in again["results"])
    assert snapshot(root) == untouched


def test_top_level_changes_are_the_items_changes(pve):
    root, paths = pve
    result = lm.run({"select": ["gpu"], "containers": [{"vmid": 104}]}, paths=paths)
    joined = [rec for item in result["results"] for rec in item["changes"]]
    assert result["changes"] == joined and len(joined) == 4 * 3  # limit, config, backup for 4 containers
    assert records.claimed(result) == result["changes"]
    contract.assert_records(result, lm.AREA)


# --- with the module's recorder ------------------------------------------------------------------

def _record(root, paths, params, check_mode=False):
    state_path = str(root / "var/lib/gpufleet-tuning/state.json")
    result = recorder.run(lambda check: lm.run(params, check, paths), check_mode,
                          {"state_path": state_path, "run_id": "r1"}, state_items.Paths(str(root)))
    return result, state_path


def test_the_recorder_keeps_the_configs_before_content(pve):
    root, paths = pve
    result, state_path = _record(root, paths, {"select": ["101", "102"]})
    with open(state_path) as handle:
        items = json.load(handle)["items"]
    for vmid, before in (("101", fx.PVE_PLAIN), ("102", fx.PVE_SNAPSHOTS)):
        entry = items["file:%s" % (root / ("etc/pve/lxc/%s.conf" % vmid))]
        assert entry["applied"] is True
        assert base64.b64decode(entry["before"]["content_b64"]) == before
    assert result["state_record"]["dropped"] == []


def test_the_recorder_marks_the_raised_configs_applied(pve):
    root, paths = pve
    result, state_path = _record(root, paths, {"select": ["gpu"]})
    with open(state_path) as handle:
        items = json.load(handle)["items"]
    keys = ["file:%s" % (root / ("etc/pve/lxc/%s.conf" % vmid)) for vmid in ("101", "102", "106")]
    for key in keys:
        assert items[key]["applied"] is True and items[key]["first_run"] == "r1"
    assert "file:%s" % (root / "etc/pve/lxc/103.conf") not in items  # pending: nothing changed
    # the backups are new files: their before is "absent"
    backup_keys = [key for key in items if key.endswith(".gpufleet.bak")]
    assert len(backup_keys) == 3 and all(items[key]["before"] is None for key in backup_keys)
    assert set(keys) <= set(result["state_record"]["recorded"])


def test_the_recorder_in_check_mode_writes_nothing(pve):
    root, paths = pve
    untouched = snapshot(root)
    result, state_path = _record(root, paths, {"select": ["gpu"]}, check_mode=True)
    assert snapshot(root) == untouched and not os.path.exists(state_path)
    assert "file:%s" % (root / "etc/pve/lxc/101.conf") in result["state_record"]["recorded"]


def test_the_recorder_still_raises_the_others_when_one_container_fails(pve):
    root, paths = pve
    with pytest.raises(ModuleFailure) as exc:
        _record(root, paths, {"containers": [{"vmid": 150}, {"vmid": 104}]})
    assert conf(root, 104).read_bytes() == fx.PVE_WEB + b"lxc.prlimit.memlock: unlimited\n"
    state = exc.value.partial["state_record"]
    with open(state["path"]) as handle:
        items = json.load(handle)["items"]
    assert items["file:%s" % (root / "etc/pve/lxc/104.conf")]["applied"] is True


def test_merge_takes_the_callers_resolution_of_a_config():
    """A plain LXC container under a configured lxc.lxcpath is found by discovery at that path
    and named by the inventory by name: the caller's key_of (the engine resolves both as it
    would edit them) makes it one target, with the entry's limit and its guest."""
    from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_targets
    discovery = {"containers": [{"selected": True, "vmid": None, "path": "/srv/lxc/web/config", "id": "web",
                                 "reason": "named in the selector (web)"}]}
    entries = [{"name": "web", "limit": "65536", "guest": "web-guest"}]
    assert len(lxc_targets.merge(discovery, entries)) == 2  # the stock paths know nothing of /srv/lxc

    def key_of(entry):
        return "/srv/lxc/web/config" if entry.get("name") == "web" else lxc_targets.default_key(entry)
    [target] = lxc_targets.merge(discovery, entries, key_of)
    assert target["guest"] == "web-guest" and target["limit"] == "65536"


def test_a_config_named_by_its_node_path_and_selected_is_raised_once(pve):
    """/etc/pve/lxc is a link to this node's folder: the engine resolves both names of 101's
    config to one file, so it is edited (and backed up) once."""
    root, paths = pve
    node_path = str(root / "etc/pve/nodes/pve-gpu-01/lxc/101.conf")
    result = lm.run({"select": ["gpu"], "containers": [{"path": node_path, "limit": "65536"}]}, paths=paths)
    raised = [item for item in result["results"] if item.get("container_name") == "101"]
    assert len(raised) == 1 and raised[0]["limit_after"] == "65536"
