"""The node_facts engine: every section merged in the contract's order, timed, read-only, with
the GPU sections from hw/gpu_facts (a stand-in in most tests: its own tests are beside it)."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import node_facts as nf
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw import test_system_facts as fakes


@pytest.fixture(autouse=True)
def records_contract(monkeypatch):
    contract.checking_records(monkeypatch, nf, area="node_facts")


class FakeGpuFacts:
    """Stands in for hw/gpu_facts: ``gather(paths, nvml=None)`` and ``Paths(root)``."""

    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail

    class Paths:
        def __init__(self, root="/"):
            self.root = root

    def gather(self, paths, nvml=None):
        self.calls.append((paths.root, nvml))
        if self.fail:
            raise self.fail
        return {
            "gpus": [{"index": facts.fact(0, "nvml:nvmlDeviceGetIndex"),
                      "bdf": facts.fact("0000:41:00.0", "/sys/bus/pci/devices/0000:41:00.0")}],
            "topology": {"pairs": []},
            "driver": {"version": facts.unknown("/sys/module/nvidia/version", "the nvidia module is not loaded")},
        }


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeGpuFacts()
    monkeypatch.setattr(nf, "gpu_facts", fake)
    return fake


def engine_paths(system_paths, nvml=None):
    paths = nf.Paths(system_paths.root, nvml=nvml)
    paths.system.uname = lambda: fakes.Uname("x86_64")
    return paths


def test_every_section_in_order_timed_and_read_only(tmp_path, gpu):
    paths = engine_paths(fakes.intel_host(tmp_path), nvml="an NVML handle")
    before = snapshot(tmp_path)
    result = nf.run({}, paths=paths)
    assert snapshot(tmp_path) == before
    assert result["changed"] is False and result["changes"] == []
    assert list(result["facts"]) == list(nf.SECTIONS)
    fakes.assert_all_facts(result["facts"])
    assert result["facts"]["gpus"][0]["bdf"]["value"] == "0000:41:00.0"
    assert gpu.calls == [(str(tmp_path), "an NVML handle")]  # one pass for the three sections
    timings = result["timings_ms"]
    assert sorted(timings) == sorted(["host", "kernel", "cpu", "memory", "gpu_facts", "containers", "tuners",
                                      "total"])
    assert all(isinstance(ms, float) and ms >= 0 for ms in timings.values())
    assert timings["total"] >= max(ms for name, ms in timings.items() if name != "total")
    unknown = nf.count_unknown(result["facts"])
    assert result["msg"] == ("gathered host, kernel, cpu, memory, gpus, topology, driver, health, containers, tuners in "
                             "%s ms; %d fact(s) unknown" % (timings["total"], unknown))
    assert result["warnings"] == []


def test_default_sysctls_are_the_profile_keys(tmp_path, gpu):
    result = nf.run({"sections": ["memory"]}, paths=engine_paths(fakes.intel_host(tmp_path)))
    sysctls = result["facts"]["memory"]["sysctls"]
    assert list(sysctls) == list(nf.DEFAULT_SYSCTL_KEYS)
    assert sysctls["vm.swappiness"]["value"] == "60" and sysctls["kernel.numa_balancing"]["value"] == "1"
    assert sysctls["vm.zone_reclaim_mode"]["unknown"].startswith("unknown key vm.zone_reclaim_mode")
    assert gpu.calls == [] and list(result["timings_ms"]) == ["memory", "total"]
    assert nf.ARGUMENT_SPEC["sysctl_keys"]["default"] == list(nf.DEFAULT_SYSCTL_KEYS)
    # the host role's profile keys are all among the defaults
    for key in ("kernel.numa_balancing", "kernel.nmi_watchdog", "kernel.sched_autogroup_enabled", "vm.swappiness",
                "net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        assert key in nf.DEFAULT_SYSCTL_KEYS


def test_some_sections_in_the_contracts_order(tmp_path, gpu):
    options = {"sections": ["tuners", "driver", "cpu", "cpu"], "sysctl_keys": ["vm.swappiness"]}
    result = nf.run(options, paths=engine_paths(fakes.tuned_host(tmp_path)))
    assert list(result["facts"]) == ["cpu", "driver", "tuners"]
    assert list(result["timings_ms"]) == ["cpu", "gpu_facts", "tuners", "total"]
    assert result["facts"]["tuners"]["tuned"]["active"]["value"] is True
    assert nf.run({"sections": []}, paths=engine_paths(fakes.vm_host(tmp_path / "vm")))["facts"] == {}


def test_check_mode_is_the_same_read(tmp_path, gpu):
    paths = engine_paths(fakes.proxmox_host(tmp_path))
    before = snapshot(tmp_path)
    plain = nf.run({}, paths=paths)
    checked = nf.run({}, check_mode=True, paths=paths)
    assert snapshot(tmp_path) == before
    assert checked["facts"] == plain["facts"] and checked["changed"] is False
    lxc = fakes.values(checked["facts"]["containers"]["lxc"])
    assert [(c["id"], c["gpu"], c["memlock_limit"], c["memlock_running"], c["locked"]) for c in lxc] == [
        ("101", True, "65536", "65536", False), ("102", False, None, None, True)]


def test_inside_a_container_with_the_serving_unit(tmp_path, gpu):
    paths = engine_paths(fakes.inside_lxc(tmp_path, serving_limits=fakes.LIMITS_64K))
    result = nf.run({"sections": ["containers"], "serving_unit": "vllm"}, paths=paths)
    assert fakes.values(result["facts"]["containers"]["inside"]) == {
        "pid1_memlock": "8388608", "serving_unit": "vllm.service", "serving_unit_memlock": "65536"}


def test_a_gpu_reader_that_breaks_leaves_the_rest(tmp_path, monkeypatch):
    fake = FakeGpuFacts(fail=RuntimeError("NVML exploded"))
    monkeypatch.setattr(nf, "gpu_facts", fake)
    result = nf.run({"sections": ["kernel", "gpus", "topology"]}, paths=engine_paths(fakes.vm_host(tmp_path)))
    reason = "reading the GPU facts failed: RuntimeError: NVML exploded"
    assert result["facts"]["gpus"] == result["facts"]["topology"] == facts.unknown("derived", reason)
    assert result["warnings"] == [reason] and result["facts"]["kernel"]["release"]["value"] == "6.8.0-45-generic"


def test_a_section_the_gpu_reader_does_not_return(tmp_path, monkeypatch):
    fake = FakeGpuFacts()
    fake.gather = lambda paths, nvml=None: {"gpus": []}
    monkeypatch.setattr(nf, "gpu_facts", fake)
    result = nf.run({"sections": ["gpus", "driver"]}, paths=engine_paths(fakes.vm_host(tmp_path)))
    assert result["facts"] == {"gpus": [], "driver": facts.unknown("derived", "hw/gpu_facts returned no driver")}


def test_the_real_gpu_reader_on_a_host_without_gpus(tmp_path):
    """hw/gpu_facts itself, with an NVML that cannot load: no GPU, and the reason NVML is missing."""
    missing = nvml.Nvml(library=str(tmp_path / "libnvidia-ml.so.1"))
    paths = engine_paths(fakes.intel_host(tmp_path), nvml=missing)
    before = snapshot(tmp_path)
    result = nf.run({"sections": ["gpus", "topology", "driver"]}, paths=paths)
    assert snapshot(tmp_path) == before
    fakes.assert_all_facts(result["facts"])
    assert result["facts"]["gpus"] == [] and result["warnings"] == []
    assert "NVML unavailable" in result["facts"]["driver"]["cuda_driver_version"]["unknown"]


@pytest.mark.parametrize("options, message", [
    ({"sections": ["gpu"]}, "sections: 'gpu' is not a section; use host, kernel, cpu, memory, gpus, topology, "
                            "driver, health, containers, tuners"),
    ({"sections": "cpu"}, "sections must be a list of section names"),
    ({"sysctl_keys": ["vm/swappiness"]}, "sysctl_keys: 'vm/swappiness' contains '/'"),
    ({"sysctl_keys": "vm.swappiness"}, "sysctl_keys must be a list of dotted sysctl names"),
    ({"serving_unit": "../vllm"}, "serving_unit: unit '../vllm' is not a systemd unit name"),
])
def test_bad_options_fail_before_reading(tmp_path, monkeypatch, options, message):
    monkeypatch.setattr(nf.system_facts, "section", lambda *a, **k: pytest.fail("read before validating"))
    with pytest.raises(ModuleFailure) as exc:
        nf.run(options, paths=nf.Paths(str(tmp_path)))
    assert exc.value.message.startswith(message)


def test_the_real_machine_read_only(gpu):
    """Against / itself (read-only): whatever this machine has, every leaf is an envelope."""
    result = nf.run({"sections": ["host", "kernel", "cpu", "memory", "containers", "tuners"]}, check_mode=True)
    fakes.assert_all_facts(result["facts"])
    assert result["facts"]["host"]["machine"]["source"] == "uname(2)"
    assert result["timings_ms"]["total"] < 5000
