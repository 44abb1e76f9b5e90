import os

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import p2p_bandwidth as pb
from ansible_collections.gpufleet.tuning.plugins.modules import p2p_bandwidth
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module


def test_machine_without_driver_skips(capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda.so.999"}, capsys)
    assert not failed
    assert result["skipped"] is True and result["gpus"] == 0 and result["changed"] is False
    assert "no NVIDIA driver" in result["msg"]


def test_check_mode_skips_the_same_way(capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda.so.999"}, capsys, check_mode=True)
    assert not failed and result["skipped"] is True


def test_bad_threshold_fails_naming_it(capsys):
    failed, result = run_module(p2p_bandwidth, {"min_unidirectional_gbps": {"nvlnk": 380}}, capsys)
    assert failed
    assert "unknown link type(s) nvlnk" in result["msg"]


@pytest.mark.parametrize("args, fragment", [
    # Ansible's float type turns these strings into nan/inf: the module must still refuse them.
    ({"timeout_s": "nan"}, "timeout_s=nan is not a finite number"),
    ({"timeout_s": "inf"}, "timeout_s=inf is not a finite number"),
    ({"timeout_s": "1e999"}, "timeout_s=inf is not a finite number"),
    ({"timeout_s": "-inf"}, "timeout_s=-inf is not a finite number"),
    ({"timeout_s": 0}, "timeout_s=0.0 is out of range"),
    ({"timeout_s": 1e9}, "timeout_s=1000000000.0 is out of range"),
    ({"min_unidirectional_gbps": "nan"}, "min_unidirectional_gbps='nan' is not a finite number"),
    ({"min_bidirectional_gbps": {"pcie": "inf"}}, "min_bidirectional_gbps.pcie='inf' is not a finite number"),
    # min_p2p_speedup is min_speedup's old name, kept as an alias
    ({"min_p2p_speedup": {"default": "NaN"}}, "min_speedup.default='NaN' is not a finite number"),
    ({"min_speedup": 5000}, "min_speedup=5000 is out of range: give a finite number from 0 to 1000"),
])
def test_non_finite_or_huge_numbers_fail_before_the_driver_is_looked_for(args, fragment, capsys):
    # With no driver, an accepted input would end in skipped=true: a failure here proves the
    # input was refused before the library was even looked for.
    failed, result = run_module(p2p_bandwidth, dict(args, cuda_library="libcuda.so.999"), capsys)
    assert failed and not result.get("skipped")
    assert fragment in result["msg"]


@pytest.mark.parametrize("library", ["./libcuda.so.1", "libcuda-absent.so.1", "../lib/libcuda.so.1"])
def test_an_untrusted_cuda_library_fails_naming_it(library, capsys):
    # Before issue 15 each of these went to ctypes as given and, not found, ended in a skip.
    failed, result = run_module(p2p_bandwidth, {"cuda_library": library}, capsys)
    assert failed and not result.get("skipped")
    assert result["msg"].startswith("cuda_library=%r is not loaded: " % library)


def test_a_library_others_could_have_written_is_not_loaded(tmp_path, capsys):
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(str(drop), 0o777)
    planted = drop / "libcuda.so.1"
    planted.write_bytes(b"\x7fELF")  # not even a library: loading it would fail; refusing comes first
    failed, result = run_module(p2p_bandwidth, {"cuda_library": str(planted)}, capsys, check_mode=True)
    assert failed and not result.get("skipped")
    assert "the folder %s is writable by group and others" % drop in result["msg"]


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(p2p_bandwidth, pb, monkeypatch)


def _fake_gpus(monkeypatch, n=2):
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_p2p_bandwidth import (
        FakeDriver, FakeNvml)
    real = pb.Libraries
    monkeypatch.setattr(pb, "Libraries", lambda: real(driver=lambda lib: FakeDriver(n), nvml=FakeNvml))


def test_measured_and_skipped_results_carry_no_change_records(monkeypatch, capsys):
    failed, result = run_module(p2p_bandwidth, {"cuda_library": "libcuda.so.999"}, capsys)
    assert not failed and result["skipped"] is True and result["changed"] is False and result["changes"] == []
    _fake_gpus(monkeypatch)
    for check_mode in (False, True):
        failed, result = run_module(p2p_bandwidth, {"size_mib": 8}, capsys, check_mode=check_mode)
        assert not failed and result["changed"] is False and result["changes"] == []
        assert result["selected"] == [0, 1] and result["shortfalls"] == []


def test_the_old_option_name_is_an_alias(monkeypatch, capsys):
    _fake_gpus(monkeypatch)
    for name in ("min_speedup", "min_p2p_speedup"):
        failed, result = run_module(p2p_bandwidth, {"size_mib": 8, name: {"nvlink": 2}}, capsys)
        assert not failed, result.get("msg")
        assert result["thresholds"]["min_speedup"] == {"nvlink": 2.0, "pcie": None, "unknown": None}


def test_a_shortfall_fails_with_every_figure(monkeypatch, capsys):
    """The verify role and anyone registering the result read the figures of a failed run too."""
    _fake_gpus(monkeypatch, 3)
    failed, result = run_module(p2p_bandwidth, {"size_mib": 8, "min_unidirectional_gbps": 10000}, capsys)
    assert failed and result["msg"].startswith("GPU peer-to-peer falls short on 6 check(s): 0->1 ")
    assert len(result["pairs"]) == 6 and len(result["bidirectional"]) == 3 and len(result["shortfalls"]) == 6
    assert result["matrices"]["unidirectional_p2p_gbps"][0][1] == result["pairs"][0]["unidirectional_p2p_gbps"]
    assert "Unidirectional bandwidth, peer access ENABLED" in result["table"]
    assert result["thresholds"]["min_unidirectional_gbps"]["nvlink"] == 10000.0
    assert "changed" not in result and "changes" not in result and "skipped" not in result


# --- issue 18: link-derived floors, diagnosis, the no-peer-access policy -----------------------

def _engine_run(tmp_path, fake, link="pcie", **kw):
    """The engine over a fake driver, a link-only NVML and a fake sysfs tree whose GPUs are the
    fake driver's (0000:06:00.0, 0000:07:00.0 on two root ports), GPU 0 in a DMA-FQ domain."""
    from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
    from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts
    from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import add_iommu_group
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_gpu_facts import gpu, port
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_p2p_bandwidth import FakeNvml, params
    port(tmp_path, "0000:00:01.0", port_type=4)
    port(tmp_path, "0000:00:02.0", port_type=4)
    gpu(tmp_path, "0000:06:00.0", parents=("0000:00:01.0",))
    gpu(tmp_path, "0000:07:00.0", parents=("0000:00:02.0",))
    add_iommu_group(tmp_path, "0000:06:00.0", 1, kind="DMA-FQ")
    add_iommu_group(tmp_path, "0000:07:00.0", 2, kind="identity")
    try:
        return False, pb.run(params(**kw), paths=gpu_facts.Paths(str(tmp_path)),
                             tools=pb.Libraries(driver=lambda lib: fake, nvml=lambda: FakeNvml(link)))
    except ModuleFailure as exc:
        return True, dict(exc.partial, msg=exc.message)


def _driver(**kw):
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.test_p2p_bandwidth import FakeDriver
    return FakeDriver(2, **kw)


def test_a_pcie_pair_gets_the_floor_of_its_link(tmp_path):
    failed, res = _engine_run(tmp_path, _driver(rates={(0, 1): 80.0, (1, 0): 80.0}))
    assert not failed, res.get("msg")
    fwd = res["pairs"][0]
    assert fwd["floor_unidirectional_gbps"] == 40.3 and fwd["link_gbps"] == 50.41
    assert fwd["floor_source"] == "PCIe gen5 x16 (63.0 GB/s) x 0.8 protocol x 0.80"
    assert res["bidirectional"][0]["floor_bidirectional_gbps"] == 70.6
    assert res["diagnosis"] == [] and res["staged_pairs"] == [] and res["no_peer_access"] == "fail"


def test_a_slow_pair_is_diagnosed(tmp_path):
    failed, res = _engine_run(tmp_path, _driver(rates={(0, 1): 20.0}))
    assert failed and "0->1 20.0 GB/s over pcie is below the 40.3 GB/s floor (PCIe gen5 x16" in res["msg"]
    short = [s for s in res["shortfalls"] if s["pair"] == "0->1"][0]
    assert [c["id"] for c in short["causes"]] == ["iommu_translated"]
    assert short["reason"].endswith("; why: iommu_translated")
    assert res["diagnosis"][0]["pair"] == "0<->1" and res["diagnosis"][0]["why"] == ["below the floor"]
    assert "Why peer-to-peer is missing or slow" in res["table"] and "iommu_translated" in res["table"]


def test_an_override_beats_the_link_floor(tmp_path):
    failed, res = _engine_run(tmp_path, _driver(rates={(0, 1): 20.0}), min_unidirectional_gbps={"pcie": 15},
                              min_bidirectional_gbps=1)
    assert not failed, res.get("msg")
    assert res["pairs"][0]["floor_source"] == "override min_unidirectional_gbps.pcie"
    assert res["bidirectional"][0]["floor_source"] == "override min_bidirectional_gbps.pcie"


def test_link_floors_off_leaves_only_overrides(tmp_path):
    failed, res = _engine_run(tmp_path, _driver(rates={(0, 1): 20.0}), link_floors=False)
    assert not failed and res["pairs"][0]["floor_unidirectional_gbps"] is None


def test_no_peer_access_fails_with_the_causes_by_default(tmp_path):
    failed, res = _engine_run(tmp_path, _driver(no_peer=[(0, 1)]))
    assert failed and res["no_peer_access"] == "fail"
    assert sorted(s["metric"] for s in res["shortfalls"]) == ["peer_access", "peer_access"]
    assert all([c["id"] for c in s["causes"]] == ["iommu_translated"] for s in res["shortfalls"])
    assert res["diagnosis"][0]["why"] == ["no peer access"] and res["staged_pairs"] == []


def test_no_peer_access_staged_passes_and_reports_staged_copies(tmp_path):
    failed, res = _engine_run(tmp_path, _driver(no_peer=[(0, 1)]), no_peer_access="staged")
    assert not failed, res.get("msg")
    assert res["shortfalls"] == [] and res["no_peer_access"] == "staged"
    staged = res["staged_pairs"]
    assert [s["pair"] for s in staged] == ["0<->1"]
    assert staged[0]["staged_unidirectional_gbps"][0] == pytest.approx(38.0, rel=1e-2)
    assert [c["id"] for c in staged[0]["causes"]] == ["iommu_translated"]
    assert "accepted: copies staged through the host" in res["table"]


def test_the_older_require_peer_access_false_is_staged(tmp_path):
    failed, res = _engine_run(tmp_path, _driver(no_peer=[(0, 1)]), require_peer_access=False)
    assert not failed and res["no_peer_access"] == "staged" and len(res["staged_pairs"]) == 1


@pytest.mark.parametrize("args, fragment", [
    ({"no_peer_access": "maybe"}, "value of no_peer_access must be one of: fail, staged"),
    ({"floor_efficiency": {"nvlink": 0.8}}, "floor_efficiency has unknown key(s) nvlink"),
    ({"floor_efficiency": {"pcie_unidirectional": 2}}, "floor_efficiency.pcie_unidirectional=2 is out of range"),
])
def test_bad_policy_or_efficiency_fails_before_the_driver(args, fragment, capsys):
    failed, result = run_module(p2p_bandwidth, dict(args, cuda_library="libcuda.so.999"), capsys)
    assert failed and not result.get("skipped") and fragment in result["msg"]


def test_the_nvml_version_is_read_for_active_links(monkeypatch, tmp_path):
    from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import gpu_facts
    from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import nvml as nvml_mod
    from ansible_collections.gpufleet.tuning.tests.unit.nvml_fake import FakeNvmlLib, Gpu, loaded, switched
    from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_gpu_facts import host_bridge_tree

    class Lib(FakeNvmlLib):
        def nvmlDeviceGetNvLinkVersion(self, handle, link, out):
            return self._out("nvmlDeviceGetNvLinkVersion", handle, out, 6)

    bdfs = host_bridge_tree(tmp_path)
    lib = Lib([Gpu(b, links=switched(18)) for b in bdfs])
    node, versions = pb.node_facts(gpu_facts.Paths(str(tmp_path)), loaded(monkeypatch, nvml_mod, lib))
    assert versions == {bdfs[0]: 6, bdfs[1]: 6}
    assert node["topology"]["pairs"][0]["nvlink_count"]["value"] == 18
