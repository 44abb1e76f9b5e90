"""The node_facts module's main(): its engine's shell, read-only in and out of check mode."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import node_facts as nf
from ansible_collections.gpufleet.tuning.plugins.modules import node_facts
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, snapshot
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw import test_system_facts as fakes
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_node_facts import FakeGpuFacts


@pytest.fixture
def proxmox(tmp_path, monkeypatch):
    system = fakes.proxmox_host(tmp_path)
    paths = nf.Paths(system.root)
    paths.system.uname = lambda: fakes.Uname("x86_64")
    monkeypatch.setattr(nf, "Paths", lambda: paths)
    monkeypatch.setattr(nf, "gpu_facts", FakeGpuFacts())
    return tmp_path


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(node_facts, nf, monkeypatch)


def test_read_only_so_no_change_records(proxmox, capsys):
    before = snapshot(proxmox)
    results = []
    for check_mode in (False, True):
        failed, result = run_module(node_facts, {}, capsys, check_mode=check_mode)
        assert not failed and result["changed"] is False and result["changes"] == []
        results.append(result)
    assert snapshot(proxmox) == before
    assert results[0]["facts"] == results[1]["facts"]
    facts = results[1]["facts"]
    assert list(facts) == list(nf.SECTIONS)
    fakes.assert_all_facts(facts)
    assert facts["host"]["proxmox"]["value"] is True and facts["host"]["machine"]["value"] == "x86_64"
    assert [c["id"]["value"] for c in facts["containers"]["lxc"]] == ["101", "102"]
    assert "total" in results[1]["timings_ms"] and results[1]["msg"].startswith("gathered host, kernel, cpu")


def test_options_reach_the_engine(proxmox, capsys):
    failed, result = run_module(node_facts, {"sections": ["memory"], "sysctl_keys": ["vm.swappiness"]}, capsys,
                                check_mode=True)
    assert not failed and list(result["facts"]) == ["memory"]
    assert result["facts"]["memory"]["sysctls"] == {
        "vm.swappiness": {"value": "60", "source": str(proxmox / "proc/sys/vm/swappiness")}}


@pytest.mark.parametrize("args, message", [
    ({"sections": ["gpu"]}, "value of sections must be one or more of"),
    ({"sysctl_keys": ["../etc/passwd"]}, "sysctl_keys: '../etc/passwd' contains '/'"),
    ({"serving_unit": "a b"}, "serving_unit: unit 'a b' is not a systemd unit name"),
])
def test_bad_options_fail_naming_them(proxmox, capsys, args, message):
    failed, result = run_module(node_facts, args, capsys)
    assert failed and message in result["msg"]
    assert "facts" not in result and "changes" not in result
