"""The host_tuning engine: a host's whole pass in one call, against fake /proc, /sys and /etc trees.

What must hold: each part gives what its module gives on its own (same engine, same options),
every input is checked before anything is read, check mode writes nothing, the before-state is
recorded before the first write and what changed after it (also when a part fails), a part that
cannot be planned stops the call before anything is written, and a failing part leaves the
parts before it applied, recorded and revertible.
"""

import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power
from ansible_collections.gpufleet.tuning.plugins.module_utils import host_tuning as ht
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_containers
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import lxc_fixtures
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_cpu_power import cpu_tree

STATE = "var/lib/gpufleet-tuning/state.json"
GRUB = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'

SYSCTL = {"name": "inference", "settings": {"vm.swappiness": 10, "kernel.numa_balancing": 0}}
CPU = {"max_idle_latency_us": 10, "governor": "performance", "persist": False}
LXC = {"limit": "unlimited", "backup": False}
CMDLINE = {"present": ["iommu=pt"]}


def node(root):
    """A Proxmox GPU host: two sysctls to lower, intel_idle with a deep C6, container 101 with
    an NVIDIA GPU passed through and no memlock line, GRUB's defaults file."""
    write_tree(root, {
        "proc/sys/vm/swappiness": "60\n",
        "proc/sys/kernel/numa_balancing": "1\n",
        "proc/self/uid_map": "         0          0 4294967295\n",
        "proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz root=UUID=0b7e ro quiet\n",
        "proc/cpuinfo": "processor\t: 0\nvendor_id\t: GenuineIntel\n",
        "etc/sysctl.d": None,
        "etc/default/grub": GRUB,
        "etc/pve/nodes/pve-gpu-01/lxc/101.conf": lxc_fixtures.PVE_PLAIN,
        "etc/pve/.version": "1\n",
        "proc/devices": lxc_fixtures.PROC_DEVICES,
    })
    os.symlink("nodes/pve-gpu-01/lxc", str(root / "etc/pve/lxc"))
    cpu_tree(root, cpus=2)
    return root


def params(root, **kw):
    base = {"parts": {"sysctl_profile": SYSCTL, "cpu_power": CPU, "lxc_memlock": LXC, "kernel_cmdline": CMDLINE},
            "apply": ["sysctl_profile", "cpu_power", "lxc_memlock"], "state_path": str(root / STATE), "run_id": "run-1"}
    base.update(kw)
    return base


def run(root, check_mode=False, **kw):
    return ht.run(params(root, **kw), check_mode=check_mode, paths=ht.Paths(str(root)), tools=kf.PathCommands())


@pytest.fixture(autouse=True)
def tools(tmp_path, monkeypatch):
    """Executables found on $PATH only: a recording update-grub, no real boot tool of this machine."""
    return kf.FakeBin(tmp_path / "bin", monkeypatch, tmp_path, names=("update-grub",))


def saved(root):
    with open(str(root / STATE)) as handle:
        return json.load(handle)


def sysctls(root):
    return dict((key, (root / ("proc/sys/" + key.replace(".", "/"))).read_text().split()[0]) for key in SYSCTL["settings"])


def without_state(tree):
    return dict((key, value) for key, value in tree.items() if key not in ("var", "var/lib") and
                not key.startswith("var/lib/gpufleet-tuning"))


# ------------------------------------------------------------------------------ one pass

def test_a_pass_applies_every_part_and_records_the_before_state(tmp_path):
    node(tmp_path)
    result = run(tmp_path)
    assert result["applied"] == ["sysctl_profile", "cpu_power", "lxc_memlock"]
    assert sysctls(tmp_path) == {"vm.swappiness": "10", "kernel.numa_balancing": "0"}
    assert (tmp_path / "sys/devices/system/cpu/cpu0/cpuidle/state3/disable").read_text().strip() == "1"
    assert b"lxc.prlimit.memlock: unlimited\n" in (tmp_path / "etc/pve/nodes/pve-gpu-01/lxc/101.conf").read_bytes()
    # Results keyed by module, in each module's own shape; the LXC part as discovery + a loop.
    assert set(result["modules"]) == {"sysctl_profile", "cpu_power", "lxc_containers", "lxc_memlock"}
    assert result["modules"]["lxc_containers"]["selected"] == ["101"]
    [item] = result["modules"]["lxc_memlock"]["results"]
    assert item["item"]["vmid"] == 101 and item["changed"] is True
    # Every record of the parts is in changes, with the state file's; changed agrees.
    part_records = ht.records_of(result["modules"])
    assert {r["area"] for r in part_records} == {"sysctl", "cpu_power", "lxc_memlock"}
    assert result["changes"][:len(part_records)] == part_records
    assert [r["target"] for r in result["changes"][len(part_records):]] == [str(tmp_path / STATE)]
    assert result["changed"] is True and result["state_changed"] is True
    # The record: the first before of each item, applied, with the run id.
    items = saved(tmp_path)["items"]
    swap = items["sysctl:vm.swappiness"]
    assert (swap["before"], swap["after"], swap["applied"], swap["first_run"]) == ("60", "10", True, "run-1")
    conf = items["file:%s" % (tmp_path / "etc/pve/lxc/101.conf")]
    assert conf["applied"] is True and conf["before"]["content_b64"]
    # kernel_cmdline is only planned: in the plan, not applied, not recorded.
    assert result["plan"]["kernel_cmdline"]["changed"] is True and "kernel_cmdline" not in result["modules"]
    assert not any(key.startswith("file:%s" % (tmp_path / "etc/default")) for key in items)
    assert "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"" in (tmp_path / "etc/default/grub").read_text()


def test_a_second_pass_changes_nothing_and_leaves_the_record_byte_for_byte(tmp_path):
    node(tmp_path)
    run(tmp_path)
    before = snapshot(tmp_path)
    again = run(tmp_path, run_id="run-2")
    assert again["changed"] is False and again["changes"] == [] and again["state_changed"] is False
    assert snapshot(tmp_path) == before


def test_each_part_gives_what_its_module_gives_on_its_own(tmp_path):
    """Same engines, same options: the pass on one copy of the node, the modules one by one on
    another, and the same records and the same files."""
    one, alone = tmp_path / "pass", tmp_path / "alone"
    node(one)
    node(alone)
    combined = ht.run(params(one, state_path=None), paths=ht.Paths(str(one)), tools=kf.PathCommands())
    by_module = []
    by_module += sysctl_profile.run(dict(SYSCTL), paths=sysctl_profile.Paths(str(alone)))["changes"]
    by_module += cpu_power.run(dict(CPU), paths=cpu_power.Paths(str(alone)))["changes"]
    found = lxc_containers.run({}, paths=lxc_containers.Paths(str(alone)))
    assert found["selected"] == ["101"]
    by_module += lxc_memlock.run({"vmid": 101, "limit": "unlimited", "backup": False},
                                 paths=lxc_memlock.Paths(str(alone)))["changes"]

    def relative(recs, root):
        return [json.loads(json.dumps(r).replace(str(root), "ROOT")) for r in recs]
    assert relative(combined["changes"], one) == relative(by_module, alone)
    assert snapshot(one) == snapshot(alone)


def test_facts_are_read_before_anything_is_written(tmp_path):
    node(tmp_path)
    result = run(tmp_path, facts={"sections": ["memory"], "sysctl_keys": ["vm.swappiness"]})
    assert result["facts"]["memory"]["sysctls"]["vm.swappiness"]["value"] in (60, "60")
    assert sysctls(tmp_path)["vm.swappiness"] == "10"


# ------------------------------------------------------------------------------ check mode

def test_check_mode_plans_every_part_and_writes_nothing(tmp_path):
    node(tmp_path)
    before = snapshot(tmp_path)
    result = run(tmp_path, check_mode=True, facts={})
    assert snapshot(tmp_path) == before
    assert "sysctl_profile" not in result["plan"]  # its plan is its result, in modules
    assert {r["target"] for r in result["modules"]["sysctl_profile"]["changes"]} >= set(SYSCTL["settings"])
    assert result["changed"] is True and result["state_changed"] is True and "facts" in result
    assert result["plan"]["kernel_cmdline"]["changed"] is True
    # What check mode predicted is what the pass then does.
    applied = run(tmp_path)
    assert ht.records_of(applied["modules"]) == ht.records_of(result["modules"])


def test_check_mode_after_a_pass_reports_nothing_to_change(tmp_path):
    node(tmp_path)
    run(tmp_path)
    check = run(tmp_path, check_mode=True)
    assert check["changed"] is False and check["changes"] == []


# ------------------------------------------------------------------------------ inputs

@pytest.mark.parametrize("bad, words", [
    ({"parts": {"sysctl_profil": SYSCTL}}, ["sysctl_profil", "sysctl_profile"]),
    ({"parts": {"sysctl_profile": dict(SYSCTL, priority="high")}}, ["parts.sysctl_profile", "priority", "high"]),
    ({"parts": {"sysctl_profile": dict(SYSCTL, colour="red")}}, ["parts.sysctl_profile", "colour"]),
    ({"parts": {"lxc_memlock": dict(LXC, on_locked="wait")}}, ["parts.lxc_memlock", "on_locked", "wait"]),
    ({"parts": {"cpu_power": "fast"}}, ["parts.cpu_power", "fast"]),
    ({"apply": ["pcie_maxreadreq"]}, ["pcie_maxreadreq", "parts does not give"]),
    ({"apply": ["turbo"]}, ["turbo"]),
    ({"facts": {"sections": ["gpu", "colour"]}}, ["facts", "colour"]),
    ({"run_id": "  "}, ["run_id"]),
    ({"state_path": "relative/state.json"}, ["relative/state.json", "absolute"]),
])
def test_bad_input_is_refused_naming_it_and_nothing_changes(tmp_path, bad, words):
    node(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as failure:
        run(tmp_path, **bad)
    for word in words:
        assert word in failure.value.message, failure.value.message
    assert snapshot(tmp_path) == before


def test_a_null_part_is_reported_not_enabled_and_a_null_option_takes_its_default(tmp_path):
    node(tmp_path)
    result = run(tmp_path, parts={"sysctl_profile": dict(SYSCTL, priority=None), "pcie_maxreadreq": None},
                 apply=None)
    assert result["applied"] == ["sysctl_profile"]
    assert result["plan"]["pcie_maxreadreq"]["skipped"] is True
    assert os.path.exists(str(tmp_path / "etc/sysctl.d/90-gpufleet-inference.conf"))  # priority 90, the default


# ------------------------------------------------------------------------------ failures

def test_a_part_that_cannot_be_planned_stops_the_call_before_anything_is_written(tmp_path):
    node(tmp_path)
    conf = tmp_path / "etc/pve/nodes/pve-gpu-01/lxc/101.conf"
    conf.write_bytes(conf.read_bytes().replace(b"arch: amd64\n", b"arch: amd64\nlock: backup\n"))
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as failure:
        run(tmp_path, parts=dict(params(tmp_path)["parts"], lxc_memlock=dict(LXC, on_locked="fail")))
    assert failure.value.message.startswith("lxc_memlock: ") and "backup" in failure.value.message
    assert failure.value.partial["failed_part"] == "lxc_memlock"
    assert failure.value.partial["modules"] == {} and failure.value.partial["plan"]["lxc_memlock"]["failed"]
    assert failure.value.partial["plan"]["sysctl_profile"]["changed"] is True  # planned, never applied
    assert snapshot(tmp_path) == before  # the sysctls and the idle states too: nothing was applied


def test_a_part_only_planned_that_cannot_be_planned_is_reported_and_the_pass_goes_on(tmp_path):
    node(tmp_path)
    # systemd-boot asked for on a machine that boots with BIOS: the module refuses to plan.
    result = run(tmp_path, parts=dict(params(tmp_path)["parts"], kernel_cmdline=dict(CMDLINE, bootloader="systemd-boot")))
    assert result["plan"]["kernel_cmdline"]["failed"] is True and result["plan"]["kernel_cmdline"]["msg"]
    assert result["applied"] == ["sysctl_profile", "cpu_power", "lxc_memlock"]


def test_a_part_failing_while_applying_keeps_the_parts_before_it_recorded_and_revertible(tmp_path, monkeypatch):
    node(tmp_path)
    untouched = without_state(snapshot(tmp_path))
    real = cpu_power.run

    def refused(params, check_mode=False, paths=None, tools=None):
        if check_mode:
            return real(params, check_mode, paths, tools)
        raise ModuleFailure("write of cpu0/cpuidle/state3/disable refused (everything applied before it was restored)",
                            {"cpus": [0, 1]})
    monkeypatch.setattr(cpu_power, "run", refused)
    with pytest.raises(ModuleFailure) as failure:
        run(tmp_path)
    partial = failure.value.partial
    assert failure.value.message.startswith("cpu_power: write of cpu0")
    assert partial["failed_part"] == "cpu_power" and partial["applied"] == ["sysctl_profile"]
    assert partial["modules"]["cpu_power"]["failed"] is True and partial["modules"]["cpu_power"]["cpus"] == [0, 1]
    assert {r["target"] for r in partial["modules"]["sysctl_profile"]["changes"] if r["kind"] == "value"} == set(SYSCTL["settings"])
    # The sysctls stay applied and are in the record, applied; nothing of the LXC part ran.
    assert sysctls(tmp_path) == {"vm.swappiness": "10", "kernel.numa_balancing": "0"}
    items = saved(tmp_path)["items"]
    assert items["sysctl:vm.swappiness"]["applied"] is True
    assert not any(entry["area"] in ("cpu_power", "lxc_memlock") for entry in items.values())
    assert b"memlock" not in (tmp_path / "etc/pve/nodes/pve-gpu-01/lxc/101.conf").read_bytes()
    # A revert of the run puts the node back as it was.
    reverted = tuning_revert.run({"path": str(tmp_path / STATE), "only_run": "run-1"}, paths=state_items.Paths(str(tmp_path)))
    assert reverted["changed"] is True
    assert proc_values(without_state(snapshot(tmp_path))) == proc_values(untouched)


def test_a_bad_container_limit_is_refused_before_anything_is_written(tmp_path):
    node(tmp_path)
    write_tree(tmp_path, {"etc/pve/nodes/pve-gpu-01/lxc/102.conf": lxc_fixtures.PVE_PLAIN.replace(b"llm-serve-01", b"llm-serve-02")})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as failure:
        run(tmp_path, parts=dict(params(tmp_path)["parts"], lxc_memlock=dict(LXC, containers=[{"vmid": 102, "limit": "lots"}])))
    assert failure.value.message.startswith("lxc_memlock: ")
    assert "102" in failure.value.message and "lots" in failure.value.message
    assert snapshot(tmp_path) == before


def proc_values(tree):
    """/proc/sys files by value: the kernel prints a value with its newline, a write need not."""
    return dict((key, value.strip() if key.startswith("proc/sys/") and isinstance(value, bytes) else value)
                for key, value in tree.items())
