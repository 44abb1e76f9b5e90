"""The nvidia_peermem engine against fake /proc, /sys and module trees, with a fake modprobe
first on PATH (it logs its arguments and creates /sys/module/<m> like the kernel would)."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_peermem as pm
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot

LOAD_FILE = "etc/modules-load.d/gpufleet-nvidia-peermem.conf"
OPTIONS_FILE = "etc/modprobe.d/gpufleet-nvidia-peermem.conf"
HEADER = ("# Managed by Ansible (gpufleet.tuning.nvidia_peermem): GPUDirect RDMA peer memory.\n"
          "# Local edits are overwritten on the next run; remove with state=absent.\n")
MLNX = dict(ib_core=True, peer_symbol=True, rdma=("mlx5_0",))


def params(**kw):
    base = dict(state="present", persist=True, params={}, require=True, only_with_rdma=False)
    base.update(kw)
    return base


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
    return pm.run(params(**kw), check_mode=check_mode, paths=paths, commands=kf.PathCommands())


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
    with pytest.raises(pm.PeermemError) as exc:
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
    with pytest.raises(pm.PeermemError) as exc:
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
    with pytest.raises(pm.PeermemError) as exc:
        run(paths)
    assert "the NVIDIA driver is not installed" in exc.value.message
    assert "nvidia_peermem.ko is not installed for kernel %s" % kf.RELEASE in exc.value.message
    assert fake.calls() == []


def test_driver_installed_but_not_loaded(node):
    _root, paths, _fake = node(driver=False, ko="dep", **MLNX)
    with pytest.raises(pm.PeermemError) as exc:
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
    with pytest.raises(pm.PeermemError) as exc:
        run(paths)
    assert "was built for kernel 6.1.0-27-amd64, not the running %s" % kf.RELEASE in exc.value.message
    assert fake.calls() == []


def test_modprobe_missing(node):
    root, paths, fake = node(**MLNX)
    fake.remove("modprobe")
    before = snapshot(root)
    with pytest.raises(pm.PeermemError) as exc:
        run(paths)
    assert "modprobe is not installed" in exc.value.message
    assert snapshot(root) == before


@pytest.mark.parametrize("message,hint", [
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument", "MLNX_OFED or DOCA-OFED"),
    ("modprobe: FATAL: Module nvidia_peermem not found in directory /lib/modules/%s" % kf.RELEASE,
     "modprobe looks only at modules.dep"),
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Operation not permitted", "CAP_SYS_MODULE"),
])
def test_modprobe_failure_rolls_back_the_files(node, message, hint):
    root, paths, fake = node(**MLNX)
    before = snapshot(root)
    fake.fail("modprobe", message)
    with pytest.raises(pm.PeermemError) as exc:
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
    with pytest.raises(pm.PeermemError) as exc:
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
    with pytest.raises(pm.PeermemError) as exc:
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


def test_only_with_rdma_without_devices_is_not_needed(node):
    root, paths, fake = node(ib_core=False, peer_symbol=False)
    before = snapshot(root)
    result = run(paths, only_with_rdma=True)  # require stays true: no failure, nothing to serve
    assert result["needed"] is False and result["changed"] is False
    assert "no RDMA device" in result["reason"]
    assert fake.calls() == [] and snapshot(root) == before


def test_only_with_rdma_with_devices_still_requires(node):
    _root, paths, fake = node(ib_core=True, peer_symbol=False, rdma=("mlx5_0",))
    with pytest.raises(pm.PeermemError):
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
    with pytest.raises(pm.PeermemError) as exc:
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
    ({"bogus": 1}, "unknown parameter 'bogus' (nvidia_peermem takes: peerdirect_support, persistent_api_support)"),
    ({"persistent_api_support": "yes"}, "persistent_api_support='yes' is not valid"),
    ({"peerdirect_support": 1.0}, "peerdirect_support=1.0 is not valid"),
])
def test_invalid_params_fail_before_reading(node, given, error):
    root, paths, fake = node(**MLNX)
    with pytest.raises(pm.PeermemError) as exc:
        run(paths, params=given)
    assert error in exc.value.message
    assert fake.calls() == [] and not os.path.exists(str(root / LOAD_FILE))
