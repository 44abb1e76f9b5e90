"""The nvidia_peermem engine against fake /proc, /sys and module trees, with a fake modprobe
first on PATH (it logs its arguments and creates /sys/module/<m> like the kernel would)."""

import errno
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_peermem as pm
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot, write_tree

LOAD_FILE = "etc/modules-load.d/gpufleet-nvidia-peermem.conf"
OPTIONS_FILE = "etc/modprobe.d/gpufleet-nvidia-peermem.conf"
HEADER = ("# Managed by Ansible (gpufleet.tuning.nvidia_peermem): GPUDirect RDMA peer memory.\n"
          "# Local edits are overwritten on the next run; remove with state=absent.\n")
MLNX = dict(ib_core=True, peer_symbol=True, rdma=("mlx5_0",))


def params(**kw):
    base = dict(state="present", persist=True, params={}, require=True, only_with_rdma=False)
    base.update(kw)
    return base


@pytest.fixture(autouse=True)
def records_agree(monkeypatch):
    """Every run in this file: ``changes`` records agree with ``changed``, and a failure carries none."""
    kf.check_every_run(monkeypatch, pm, "peermem")


@pytest.fixture
def node(tmp_path, monkeypatch):
    """Return build(**gpu_node kwargs) -> (root, paths, fakebin)."""
    def build(**kw):
        root = tmp_path / "root"
        kf.gpu_node(root, **kw)
        fake = kf.FakeBin(tmp_path, monkeypatch, root)
        return root, pm.Paths(str(root)), fake
    return build


def run(paths, check_mode=False, **kw):
    return pm.run(params(**kw), check_mode=check_mode, paths=paths, tools=kf.PathCommands())


def test_loads_persists_and_reads_back(node):
    root, paths, fake = node(**MLNX)
    result = run(paths)
    assert fake.calls() == ["modprobe nvidia_peermem"]
    assert result["changed"] is True and result["loaded"] is True and result["needed"] is True
    assert result["driver_version"] == kf.DRIVER_VERSION and result["ib_core_loaded"] is True
    assert result["peer_symbol"] == {"name": kf.PEER_SYMBOL, "loaded": True, "module": "ib_core", "installed_in": []}
    assert result["rdma_devices"] == ["mlx5_0"]
    assert result["ko_path"] == str(root / "lib/modules" / kf.RELEASE / "updates/dkms/nvidia-peermem.ko")
    assert result["ko_version"] == kf.DRIVER_VERSION
    assert read(root / LOAD_FILE) == HEADER + "nvidia_peermem\n"
    assert not (root / OPTIONS_FILE).exists()
    assert result["persisted"] is True and result["persist_files"] == [str(root / LOAD_FILE)]
    assert result["plan"] == ["write %s" % (root / LOAD_FILE), "modprobe nvidia_peermem"]
    assert result["loaded_params"] == {"peerdirect_support": "0", "persistent_api_support": "1"}
    assert result["restart_required"] is False and result["pending"] == []
    assert result["diff"][0]["before"] == "nvidia_peermem = not loaded\n"
    assert result["diff"][0]["after"] == "nvidia_peermem = loaded\n"
    assert result["diff"][1]["after"] == HEADER + "nvidia_peermem\n"


def test_params_go_to_modprobe_and_to_modprobe_d(node):
    root, paths, fake = node(**MLNX)
    result = run(paths, params={"peerdirect-support": 1, "persistent_api_support": True})
    assert fake.calls() == ["modprobe nvidia_peermem peerdirect_support=1 persistent_api_support=1"]
    assert read(root / OPTIONS_FILE) == HEADER + "options nvidia_peermem peerdirect_support=1 persistent_api_support=1\n"
    assert read(root / "sys/module/nvidia_peermem/parameters/peerdirect_support") == "1\n"
    assert result["loaded_params"]["peerdirect_support"] == "1"


def test_already_loaded_is_unchanged_and_calls_nothing(node):
    root, paths, fake = node(peermem_loaded=True, **MLNX)
    first = run(paths)  # writes the modules-load.d entry only
    assert first["changed"] is True and first["plan"] == ["write %s" % (root / LOAD_FILE)]
    before = snapshot(root)
    second = run(paths)
    assert second["changed"] is False and second["plan"] == [] and second["loaded"] is True
    assert second["reason"] == "nvidia_peermem is loaded"
    assert fake.calls() == [] and snapshot(root) == before


def test_second_run_after_load_is_idempotent(node):
    root, paths, fake = node(**MLNX)
    run(paths, params={"peerdirect_support": 0})
    before = snapshot(root)
    result = run(paths, params={"peerdirect_support": 0})
    assert result["changed"] is False and fake.calls() == ["modprobe nvidia_peermem peerdirect_support=0"]
    assert snapshot(root) == before


def test_symbol_missing_fails_before_modprobe(node):
    root, paths, fake = node(ib_core=False, peer_symbol=False)
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    message = exc.value.message
    assert "ib_register_peer_memory_client is not available (no loaded module exports it in /proc/kallsyms, " \
        "and no module of kernel %s does in modules.symbols)" % kf.RELEASE in message
    assert "MLNX_OFED or DOCA-OFED" in message and "DMA-BUF" in message
    assert "nothing was changed" in message
    assert fake.calls() == []  # modprobe was never run
    assert snapshot(root) == before
    assert exc.value.partial["peer_symbol"]["loaded"] is False
    assert exc.value.partial["driver_version"] == kf.DRIVER_VERSION


def test_inbox_ib_core_loaded_without_symbol_names_the_stack(node):
    _root, paths, fake = node(ib_core=True, peer_symbol=False, provider=True)
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "the loaded ib_core does not export ib_register_peer_memory_client" in exc.value.message
    assert "restart the RDMA stack (openibd) or reboot" in exc.value.message
    assert fake.calls() == []


def test_symbol_from_an_installed_ib_core_not_loaded_yet_is_enough(node):
    _root, paths, fake = node(ib_core=False, peer_symbol=False, provider=True)
    result = run(paths)
    assert result["needed"] is True and fake.calls() == ["modprobe nvidia_peermem"]
    assert result["peer_symbol"]["installed_in"] == ["ib_core"]


def test_require_false_reports_needed_false_and_changes_nothing(node):
    root, paths, fake = node(ib_core=False, peer_symbol=False)
    before = snapshot(root)
    result = run(paths, require=False)
    assert result["needed"] is False and result["changed"] is False and result["loaded"] is False
    assert "ib_register_peer_memory_client is not available" in result["reason"]
    assert result["persisted"] is False and result["plan"] == []
    assert fake.calls() == [] and snapshot(root) == before


def test_no_driver_says_not_installed(node):
    _root, paths, fake = node(driver=False, ko=None)
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "the NVIDIA driver is not installed" in exc.value.message
    assert "nvidia_peermem.ko is not installed for kernel %s" % kf.RELEASE in exc.value.message
    assert fake.calls() == []


def test_driver_installed_but_not_loaded(node):
    _root, paths, _fake = node(driver=False, ko="dep", **MLNX)
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "the NVIDIA driver is installed" in exc.value.message and "but not loaded" in exc.value.message


def test_ko_outside_the_module_tree_like_the_h200(node):
    root, paths, fake = node(ko="extra")
    result = run(paths, require=False, check_mode=True)
    assert result["ko_path"] == str(root / "usr/local/nvidia/modules/nvidia-peermem.ko")
    assert result["ko_modprobe_visible"] is False and result["ko_version"] == kf.DRIVER_VERSION
    assert "exists but modprobe cannot load it by name" in result["reason"]
    assert "modules.dep does not exist" in result["reason"]
    assert "%s/modules.symbols does not exist" % (root / "lib/modules" / kf.RELEASE) in result["reason"]
    assert result["peer_symbol"]["loaded"] is False and result["needed"] is False
    assert fake.calls() == []


def test_ko_built_for_another_kernel(node, tmp_path):
    root, paths, fake = node(**MLNX)
    (root / "lib/modules" / kf.RELEASE / "updates/dkms/nvidia-peermem.ko").write_bytes(kf.peermem_ko("6.1.0-27-amd64"))
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "was built for kernel 6.1.0-27-amd64, not the running %s" % kf.RELEASE in exc.value.message
    assert fake.calls() == []


def test_modprobe_missing(node):
    root, paths, fake = node(**MLNX)
    fake.remove("modprobe")
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "modprobe is not installed" in exc.value.message
    assert snapshot(root) == before


@pytest.mark.parametrize("message,hint", [
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument", "was built against another ib_core"),
    ("modprobe: FATAL: Module nvidia_peermem not found in directory /lib/modules/%s" % kf.RELEASE,
     "modprobe looks only at modules.dep"),
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Operation not permitted", "CAP_SYS_MODULE"),
])
def test_modprobe_failure_rolls_back_the_files(node, message, hint):
    root, paths, fake = node(**MLNX)
    before = snapshot(root)
    fake.fail("modprobe", message)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, params={"peerdirect_support": 1})
    assert message in exc.value.message and hint in exc.value.message
    assert "exit status 1" in exc.value.message
    assert "everything applied before it was restored" in exc.value.message
    assert fake.calls() == ["modprobe nvidia_peermem peerdirect_support=1"]
    assert snapshot(root) == before  # both files written, then removed again


def test_modprobe_success_without_module_is_a_failure(node, monkeypatch):
    root, paths, fake = node(**MLNX)
    before = snapshot(root)
    monkeypatch.setenv("FAKE_MODPROBE_NOLOAD", "1")
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "exited 0 but /sys/module/nvidia_peermem does not exist" in exc.value.message
    assert snapshot(root) == before
    assert fake.calls() == ["modprobe nvidia_peermem", "modprobe -r nvidia_peermem"]


def test_params_differing_from_the_loaded_module_need_a_restart(node):
    root, paths, fake = node(peermem_loaded=True, **MLNX)
    result = run(paths, params={"peerdirect_support": 1})
    assert result["restart_required"] is True
    assert result["pending"] == ["nvidia_peermem peerdirect_support: loaded with 0, wanted 1; reload nvidia_peermem "
                                 "(modprobe -r nvidia_peermem && modprobe nvidia_peermem) to apply"]
    assert fake.calls() == []  # never reloaded behind the operator's back
    assert read(root / OPTIONS_FILE) == HEADER + "options nvidia_peermem peerdirect_support=1\n"
    assert result["diff"][0]["before"] == result["diff"][0]["after"]  # runtime untouched


def test_absent_unloads_and_removes_the_files(node):
    root, paths, fake = node(**MLNX)
    run(paths, params={"peerdirect_support": 1})
    result = run(paths, state="absent")
    assert fake.calls()[-1] == "modprobe -r nvidia_peermem"
    assert result["changed"] is True and result["loaded"] is False and result["needed"] is False
    assert not (root / LOAD_FILE).exists() and not (root / OPTIONS_FILE).exists()
    assert not (root / "sys/module/nvidia_peermem").exists()
    again = run(paths, state="absent")
    assert again["changed"] is False and len(fake.calls()) == 2


def test_absent_while_in_use_is_refused(node):
    root, paths, fake = node(peermem_loaded=True, **MLNX)
    (root / "sys/module/nvidia_peermem/refcnt").write_text("2\n")
    (root / "sys/module/nvidia_peermem/holders/nv_fake_user").write_text("")
    (root / LOAD_FILE).write_text(HEADER + "nvidia_peermem\n")
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, state="absent")
    assert "nvidia_peermem is in use (reference count 2; used by nv_fake_user)" in exc.value.message
    assert fake.calls() == [] and snapshot(root) == before


def test_absent_reports_other_persistence(node):
    root, paths, _fake = node(**MLNX)
    (root / "etc/modules-load.d/rdma.conf").write_text("nvidia-peermem\n")
    result = run(paths, state="absent")
    assert result["persisted"] is True and result["persist_files"] == [str(root / "etc/modules-load.d/rdma.conf")]
    assert any("still lists nvidia_peermem" in w for w in result["warnings"])


def test_check_mode_writes_nothing_and_runs_nothing(node):
    root, paths, fake = node(**MLNX)
    before = snapshot(root)
    result = run(paths, check_mode=True, params={"peerdirect_support": 1})
    assert result["changed"] is True and result["loaded"] is True and result["needed"] is True
    assert result["plan"] == ["write %s" % (root / LOAD_FILE), "write %s" % (root / OPTIONS_FILE),
                              "modprobe nvidia_peermem peerdirect_support=1"]
    assert result["persisted"] is True
    assert fake.calls() == [] and snapshot(root) == before


def test_check_mode_of_absent(node):
    root, paths, fake = node(peermem_loaded=True, **MLNX)
    before = snapshot(root)
    result = run(paths, state="absent", check_mode=True)
    assert result["plan"] == ["modprobe -r nvidia_peermem"] and result["changed"] is True
    assert fake.calls() == [] and snapshot(root) == before


# --- change records -----------------------------------------------------------------------

def _state(root, rel, mode=True):
    """A file record's side as records.from_managed shows it (the mode of what is written)."""
    return records.file_state(read(root / rel), os.stat(str(root / rel)).st_mode & 0o7777 if mode else None)


def test_records_of_a_load_with_params_then_none_on_the_second_run(node):
    root, paths, _fake = node(**MLNX)
    result = run(paths, params={"peerdirect_support": 1})
    assert result["changes"] == [
        {"area": "peermem", "kind": "file", "target": str(root / LOAD_FILE), "before": None,
         "after": _state(root, LOAD_FILE)},
        {"area": "peermem", "kind": "file", "target": str(root / OPTIONS_FILE), "before": None,
         "after": _state(root, OPTIONS_FILE)},
        {"area": "peermem", "kind": "module", "target": "nvidia_peermem", "before": "not loaded", "after": "loaded"},
        # only the parameters given: what the module was loaded with, as /sys/module shows it
        {"area": "peermem", "kind": "value", "target": "nvidia_peermem.peerdirect_support", "before": None,
         "after": "1"},
    ]
    assert "options nvidia_peermem" not in repr(result["changes"])  # a digest, never the text
    assert run(paths, params={"peerdirect_support": 1})["changes"] == []


def test_records_in_check_mode_are_the_planned_ones(node):
    root, paths, fake = node(**MLNX)
    before = snapshot(root)
    planned = run(paths, check_mode=True, params={"peerdirect_support": 1})
    assert snapshot(root) == before and fake.calls() == []
    applied = run(paths, params={"peerdirect_support": 1})
    assert planned["changes"] == applied["changes"]
    assert [(r["kind"], r["target"]) for r in planned["changes"]] == [
        ("file", str(root / LOAD_FILE)), ("file", str(root / OPTIONS_FILE)), ("module", "nvidia_peermem"),
        ("value", "nvidia_peermem.peerdirect_support")]


def test_a_loaded_module_with_other_params_has_only_the_file_record(node):
    root, paths, _fake = node(peermem_loaded=True, **MLNX)
    result = run(paths, persist=False, params={"peerdirect_support": 1})
    # nothing written, nothing loaded: the difference is pending, not a change
    assert result["changes"] == [] and result["restart_required"] is True
    result = run(paths, params={"peerdirect_support": 1})
    assert [(r["kind"], r["target"]) for r in result["changes"]] == [
        ("file", str(root / LOAD_FILE)), ("file", str(root / OPTIONS_FILE))]


def test_records_of_absent_and_of_its_check_mode(node):
    root, paths, _fake = node(**MLNX)
    run(paths, params={"peerdirect_support": 1})
    load_file, options_file = _state(root, LOAD_FILE, False), _state(root, OPTIONS_FILE, False)
    expected = [
        {"area": "peermem", "kind": "file", "target": str(root / LOAD_FILE), "before": load_file, "after": None},
        {"area": "peermem", "kind": "file", "target": str(root / OPTIONS_FILE), "before": options_file,
         "after": None},
        {"area": "peermem", "kind": "module", "target": "nvidia_peermem", "before": "loaded", "after": "not loaded"},
    ]
    assert run(paths, state="absent", check_mode=True)["changes"] == expected
    assert run(paths, state="absent")["changes"] == expected
    assert run(paths, state="absent")["changes"] == []


def test_a_failed_load_reports_no_records(node):
    root, paths, fake = node(**MLNX)
    fake.fail("modprobe", "modprobe: ERROR: could not insert 'nvidia_peermem': Operation not permitted")
    with pytest.raises(ModuleFailure) as exc:
        run(paths, params={"peerdirect_support": 1})
    assert exc.value.partial["changes"] == [] and exc.value.partial["changed"] is False
    assert not (root / LOAD_FILE).exists() and not (root / OPTIONS_FILE).exists()


def test_only_with_rdma_without_devices_is_not_needed(node):
    root, paths, fake = node(ib_core=False, peer_symbol=False)
    before = snapshot(root)
    result = run(paths, only_with_rdma=True)  # require stays true: no failure, nothing to serve
    assert result["needed"] is False and result["changed"] is False
    assert "no RDMA device" in result["reason"]
    assert fake.calls() == [] and snapshot(root) == before


def test_only_with_rdma_with_devices_still_requires(node):
    _root, paths, fake = node(ib_core=True, peer_symbol=False, rdma=("mlx5_0",))
    with pytest.raises(ModuleFailure):
        run(paths, only_with_rdma=True)
    assert fake.calls() == []


def test_persist_false_removes_our_entry_and_only_loads(node):
    root, paths, fake = node(**MLNX)
    (root / LOAD_FILE).write_text(HEADER + "nvidia_peermem\n")
    result = run(paths, persist=False)
    assert not (root / LOAD_FILE).exists() and result["persisted"] is False
    assert fake.calls() == ["modprobe nvidia_peermem"]


def test_conflicting_options_read_later_are_refused(node):
    root, paths, fake = node(**MLNX)
    (root / "etc/modprobe.d/zz-rdma.conf").write_text("options nvidia-peermem peerdirect_support=0\n")
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, params={"peerdirect_support": 1})
    assert "zz-rdma.conf sets peerdirect_support=0 after" in exc.value.message
    assert fake.calls() == [] and snapshot(root) == before


def test_container_is_a_blocker(node):
    root, paths, fake = node(**MLNX)
    (root / "proc/self/uid_map").write_text("0 100000 65536\n")
    result = run(paths, require=False)
    assert result["needed"] is False and "inside a container" in result["reason"]
    assert result["container"]["detected"] is True and fake.calls() == []


@pytest.mark.parametrize("given,error", [
    ({"peerdirect_support": 2}, "peerdirect_support=2 is not valid: accepted 0 or 1"),
    ({"peerdirect_support": 2147483648}, "peerdirect_support=2147483648 is not valid: accepted 0 or 1"),
    ({"peerdirect_support": "0x100000001"}, "peerdirect_support='0x100000001' is not valid"),
    ({"peerdirect_support": float("nan")}, "peerdirect_support=nan is not valid"),
    ({"peerdirect_support": "nan"}, "peerdirect_support='nan' is not valid"),
    ({"peerdirect_support": "1.0"}, "peerdirect_support='1.0' is not valid"),
    ({"peerdirect_support": " 1"}, "peerdirect_support=' 1' is not valid"),
    ({"peerdirect_support": "01_"}, "peerdirect_support='01_' is not valid"),
    ({"peerdirect_support": None}, "peerdirect_support=None is not valid"),
    ({"peerdirect_support": 1, "peerdirect-support": 1},
     "params sets peerdirect_support twice, as 'peerdirect-support' and 'peerdirect_support'"),
    ({"peerdirect_support": 0, "peerdirect-support": 1},
     "params sets peerdirect_support twice, as 'peerdirect-support' and 'peerdirect_support'"),
    ({"persistent-api-support": 1, "persistent_api_support": 0, "persistent-api_support": 1},
     "params sets persistent_api_support twice, as 'persistent-api-support' and 'persistent-api_support'"),
    ({"bogus": 1}, "unknown parameter 'bogus' (nvidia_peermem takes: peerdirect_support, persistent_api_support)"),
    ({"persistent_api_support": "yes"}, "persistent_api_support='yes' is not valid"),
    ({"peerdirect_support": 1.0}, "peerdirect_support=1.0 is not valid"),
])
def test_invalid_params_fail_before_reading(node, given, error):
    root, paths, fake = node(**MLNX)
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, params=given)
    assert error in exc.value.message and "nothing was changed" in exc.value.message
    assert fake.calls() == [] and not os.path.exists(str(root / LOAD_FILE)) and snapshot(root) == before


@pytest.mark.parametrize("value,number", [("0x1", 1), ("01", 1), (True, 1), ("+1", 1), (False, 0), ("0", 0)])
def test_params_read_as_the_kernel_reads_an_int(node, value, number):
    _root, paths, fake = node(**MLNX)
    run(paths, params={"peerdirect_support": value}, persist=False)
    assert fake.calls() == ["modprobe nvidia_peermem peerdirect_support=%d" % number]


def refused(built, **kw):
    """Run on ``built`` (root, paths, fake); assert it raised, wrote nothing and ran nothing."""
    root, paths, fake = built
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, **kw)
    assert snapshot(root) == before and fake.calls() == []
    return exc.value


def test_every_file_written_carries_the_marker(node):
    root, paths, _fake = node(**MLNX)
    run(paths, params={"peerdirect_support": 1})
    for rel in (LOAD_FILE, OPTIONS_FILE):
        assert managed_files.is_owned(read(root / rel))


# --- class 6: the legacy nv_peer_mem ----------------------------------------------------------

def test_loaded_nv_peer_mem_is_never_joined_by_nvidia_peermem(node):
    built = node(legacy_loaded=True, **MLNX)
    error = refused(built)
    assert "nv_peer_mem is loaded" in error.message and "must not be loaded together" in error.message
    assert "modprobe -r nv_peer_mem" in error.message and "remove the nvidia-peer-memory package" in error.message
    assert error.partial["nv_peer_mem"]["loaded"] is True


def test_loaded_nv_peer_mem_with_require_false_is_reported(node):
    root, paths, fake = node(legacy_loaded=True, **MLNX)
    before = snapshot(root)
    result = run(paths, require=False)
    assert result["needed"] is False and result["changed"] is False and result["loaded"] is False
    assert "nv_peer_mem is loaded" in result["reason"] and result["nv_peer_mem"]["loaded"] is True
    assert fake.calls() == [] and snapshot(root) == before


def test_loaded_nv_peer_mem_in_check_mode_plans_no_modprobe(node):
    error = refused(node(legacy_loaded=True, **MLNX), check_mode=True)
    assert "nv_peer_mem is loaded" in error.message


def test_both_loaded_is_a_warning(node):
    root, paths, fake = node(legacy_loaded=True, peermem_loaded=True, **MLNX)
    result = run(paths, persist=False)
    assert result["loaded"] is True and fake.calls() == []
    assert any("both loaded" in w for w in result["warnings"])


@pytest.mark.parametrize("files,evidence", [
    ({"etc/modules-load.d/mlnx.conf": "ib_umad\nnv_peer_mem\n"}, "mlnx.conf lists nv_peer_mem"),
    ({"usr/lib/modules-load.d/nv.conf": "nv-peer-mem\n"}, "nv.conf lists nv_peer_mem"),
    ({"etc/init.d/nv_peer_mem": "#!/bin/bash\n", "etc/infiniband/nv_peer_mem.conf": "# Load upon boot\nONBOOT=yes\n"},
     "ONBOOT=yes"),
    ({"etc/init.d/nv_peer_mem": "#!/bin/bash\n", "etc/infiniband/nv_peer_mem.conf": 'ONBOOT="yes"\n'}, "ONBOOT=yes"),
    ({"etc/systemd/system/multi-user.target.wants/nv_peer_mem.service": "[Unit]\n"}, "enables nv_peer_mem.service"),
])
def test_nv_peer_mem_persisted_at_boot_is_a_warning(node, files, evidence):
    root, paths, fake = node(**MLNX)
    write_tree(root, files)
    result = run(paths)
    assert fake.calls() == ["modprobe nvidia_peermem"]
    assert len(result["nv_peer_mem"]["persisted_by"]) == 1 and evidence in result["nv_peer_mem"]["persisted_by"][0]
    assert any(evidence in w and "remove the nvidia-peer-memory package" in w for w in result["warnings"])


def test_nv_peer_mem_service_with_onboot_no_is_not_persistence(node):
    root, paths, _fake = node(**MLNX)
    write_tree(root, {"etc/init.d/nv_peer_mem": "#!/bin/bash\n", "etc/infiniband/nv_peer_mem.conf": "ONBOOT=no\n"})
    result = run(paths)
    assert result["nv_peer_mem"] == {"loaded": False, "persisted_by": []}
    assert not any("nv_peer_mem" in w for w in result["warnings"])


# --- class 7: the symbol is there, the module was built against another ib_core --------------

@pytest.mark.parametrize("said", [
    "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument",
    "modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module, or unknown parameter (see dmesg)",
])
def test_symbol_present_but_load_fails_means_rebuild(node, said):
    root, paths, fake = node(**MLNX)
    fake.fail("modprobe", said)
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    message = exc.value.message
    assert "ib_core exports ib_register_peer_memory_client (/proc/kallsyms)" in message
    assert "built against another ib_core" in message and "before MLNX_OFED or DOCA-OFED" in message
    assert "reinstall the NVIDIA driver after MLNX_OFED/DOCA-OFED" in message and "dkms" in message
    assert "lacks" not in message
    assert snapshot(root) == before


def test_symbol_that_appears_during_the_failed_load_means_rebuild(node, monkeypatch):
    _root, paths, fake = node(ib_core=False, peer_symbol=False, provider=True)
    monkeypatch.setenv("FAKE_MODPROBE_ADD_SYMBOL", "ffffffffc0b1b2c0 T %s\t[ib_core]" % kf.PEER_SYMBOL)
    fake.fail("modprobe", "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument")
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "built against another ib_core" in exc.value.message and "lacks" not in exc.value.message


def test_symbol_only_in_modules_symbols_points_at_dmesg(node):
    _root, paths, fake = node(ib_core=False, peer_symbol=False, provider=True)
    fake.fail("modprobe", "modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module")
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "ib_core exports ib_register_peer_memory_client according to modules.symbols" in exc.value.message
    assert "disagrees about version of symbol" in exc.value.message


# --- class 5: modprobe.d rules about nvidia_peermem are facts -------------------------------

@pytest.mark.parametrize("text", [
    "install nvidia_peermem /bin/true\n", "install nvidia-peermem /bin/false\n", "alias nvidia_peermem off\n",
])
def test_a_rule_that_never_loads_it_is_a_blocker(node, text):
    root, paths, fake = node(**MLNX)
    write_tree(root, {"etc/modprobe.d/no-peermem.conf": "# site policy\n" + text})
    error = refused((root, paths, fake))
    assert "modprobe would not load nvidia_peermem: %s:2: %r" % (root / "etc/modprobe.d/no-peermem.conf",
                                                                 text.strip()) in error.message
    assert error.partial["load_blockers"][0]["line"] == 2
    result = run(paths, require=False)
    assert result["needed"] is False and "no-peermem.conf:2" in result["reason"] and fake.calls() == []


def test_a_never_loads_rule_on_the_kernel_command_line(node):
    error = refused(node(cmdline=kf.CMDLINE + " module_blacklist=nvidia_peermem", **MLNX))
    assert "module_blacklist=nvidia_peermem" in error.message


def test_a_blacklist_warns_that_boot_will_not_load_it(node):
    root, paths, fake = node(**MLNX)
    write_tree(root, {"usr/lib/modprobe.d/bl.conf": "blacklist nvidia-peermem\n"})
    result = run(paths)
    assert fake.calls() == ["modprobe nvidia_peermem"] and result["loaded"] is True  # a plain modprobe loads it
    assert any("modules-load.d entry will not load nvidia_peermem at boot" in w and "bl.conf:1" in w
               for w in result["warnings"])
    quiet = run(paths, persist=False)
    assert not any("bl.conf" in w for w in quiet["warnings"])


def test_modprobe_exit_0_without_the_module_names_the_rule(node, monkeypatch):
    root, paths, fake = node(**MLNX)
    write_tree(root, {"etc/modprobe.d/gate.conf": "install nvidia_peermem /usr/local/sbin/peermem-gate\n"})
    before = snapshot(root)
    monkeypatch.setenv("FAKE_MODPROBE_NOLOAD", "1")
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "exited 0 but /sys/module/nvidia_peermem does not exist: %s:1: " % (root / "etc/modprobe.d/gate.conf") \
        in exc.value.message
    assert "is up to that command" in exc.value.message and snapshot(root) == before


def test_modprobe_exit_0_without_any_rule_says_so(node, monkeypatch):
    root, paths, fake = node(**MLNX)
    write_tree(root, {"etc/modprobe.d/bl.conf": "blacklist nvidia_peermem\n"})
    monkeypatch.setenv("FAKE_MODPROBE_NOLOAD", "1")
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "no install or alias rule for nvidia_peermem" in exc.value.message
    assert "a blacklist does not stop 'modprobe nvidia_peermem'" in exc.value.message


# --- command-line options win at boot --------------------------------------------------------

@pytest.mark.parametrize("arg", ["nvidia_peermem.peerdirect_support=0", "nvidia-peermem.peerdirect-support=0",
                                 '"nvidia_peermem.peerdirect_support=0"'])
def test_a_command_line_option_that_wins_at_boot_is_reported(node, arg):
    _root, paths, fake = node(cmdline=kf.CMDLINE + " " + arg, **MLNX)
    result = run(paths, params={"peerdirect_support": 1})
    assert result["cmdline_overrides"] == [{"param": "peerdirect_support", "value": "0", "configured": "1",
                                            "arg": arg}]
    assert any(arg in w and "at boot" in w for w in result["warnings"])
    assert fake.calls() == ["modprobe nvidia_peermem peerdirect_support=1"]  # modprobe's own args win now
    same = run(paths, params={"peerdirect_support": 0}, persist=False)
    assert same["cmdline_overrides"] == []


# --- class 3 and 8: files we do not own, writes that fail ------------------------------------

@pytest.mark.parametrize("rel,kw,action", [
    (LOAD_FILE, {}, "overwrite"),
    (LOAD_FILE, {"persist": False}, "remove"),
    (OPTIONS_FILE, {"params": {"peerdirect_support": 1}}, "overwrite"),
    (OPTIONS_FILE, {}, "remove"),
    (OPTIONS_FILE, {"state": "absent"}, "remove"),
    (LOAD_FILE, {"state": "absent"}, "remove"),
])
def test_a_file_without_our_marker_is_refused(node, rel, kw, action):
    root, paths, fake = node(**MLNX)
    write_tree(root, {rel: "# written by hand\nnvidia_peermem\n"})
    for check_mode in (True, False):
        error = refused((root, paths, fake), check_mode=check_mode, **kw)
        assert error.message.startswith("refusing to %s %s: " % (action, root / rel))
        assert "not written by gpufleet.tuning" in error.message and "nothing was changed" in error.message


def test_a_failed_write_names_the_path_and_rolls_back(node, monkeypatch):
    root, paths, fake = node(**MLNX)
    before = snapshot(root)

    def refuse(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", path)
    monkeypatch.setattr(fileops, "write_atomic", refuse)
    with pytest.raises(ModuleFailure) as exc:
        run(paths)
    assert "%s: Read-only file system (EROFS)" % (root / LOAD_FILE) in exc.value.message
    assert snapshot(root) == before and fake.calls() == []


def test_a_failed_removal_names_the_path(node, monkeypatch):
    root, paths, fake = node(**MLNX)
    write_tree(root, {LOAD_FILE: HEADER + "nvidia_peermem\n"})
    before = snapshot(root)

    def refuse(path):
        raise OSError(errno.EBUSY, "Device or resource busy", path)
    monkeypatch.setattr(fileops, "remove_file", refuse)
    with pytest.raises(ModuleFailure) as exc:
        run(paths, state="absent")
    assert "%s: Device or resource busy (EBUSY)" % (root / LOAD_FILE) in exc.value.message
    assert snapshot(root) == before and fake.calls() == []


def test_a_directory_where_our_file_belongs_is_a_clean_failure(node):
    root, paths, fake = node(**MLNX)
    os.makedirs(str(root / LOAD_FILE))
    error = refused((root, paths, fake))
    assert str(root / LOAD_FILE) in error.message and "directory" in error.message
