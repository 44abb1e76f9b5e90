"""The pcie_acs engine against fake config-space trees of real bridge shapes, and its module shell."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit import acs_fake as af
from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_acs as pa
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_acs
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config as pc
from ansible_collections.gpufleet.tuning.plugins.modules import pcie_acs
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import add_device, gpu_config, read_bytes

IDENTITY = "         0          0 4294967295\n"
PRIVILEGED_PODMAN = {"proc/1/environ": "container=podman\0", "run/.containerenv": ""}
REAL_PYTHON = pa.mrrs.system_interpreter() or os.path.realpath(sys.executable)


@pytest.fixture(autouse=True)
def every_run_keeps_the_record_contract(monkeypatch):
    contract.checking_records(monkeypatch, pa)


def make_paths(tmp_path):
    write_tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/sys": None})
    os.makedirs(str(tmp_path / "usr/bin"), exist_ok=True)
    if not os.path.lexists(str(tmp_path / "usr/bin/python3")):
        os.symlink(REAL_PYTHON, str(tmp_path / "usr/bin/python3"))
    return pa.Paths(str(tmp_path))


@pytest.fixture
def switch(tmp_path):
    af.switch_node(tmp_path)
    return tmp_path, make_paths(tmp_path)


def ctrl(tmp_path, bdf):
    return pci_acs.read_acs(str(tmp_path / "sys"), bdf)["ctrl"]


def by_bdf(result):
    return dict((b["bdf"], b) for b in result["bridges"])


def configs(tmp_path):
    return dict((k, v) for k, v in snapshot(tmp_path).items() if k.endswith("/config"))


# ----------------------------------------------------------------------------- plan, apply

def test_check_mode_plans_and_writes_no_byte(switch, monkeypatch):
    tmp_path, paths = switch
    before = snapshot(tmp_path)
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote config space in check mode"))
    result = pa.run({}, check_mode=True, paths=paths)
    assert snapshot(tmp_path) == before
    assert result["changed"] is True and sorted(by_bdf(result)) == [af.DSP0, af.DSP1]
    dsp = by_bdf(result)[af.DSP0]
    assert {k: dsp[k] for k in ("vendor", "device", "port_type", "acs_offset", "capability", "ctrl_before",
                                "ctrl_after", "cleared", "between", "reason")} == {
        "vendor": "0x10b5", "device": "0x8747", "port_type": "switch downstream port", "acs_offset": "0xf24",
        "capability": "0x007f", "ctrl_before": "0x001d", "ctrl_after": "0x0001",
        "cleared": ["request_redirect", "completion_redirect", "upstream_forwarding"], "between": [af.GPU0],
        "reason": None}
    assert "egress_control" in dsp["capability_bits"]
    assert [e["architecture"] for e in result["endpoints"]] == ["hopper", "hopper"]
    assert [(c["kind"], c["target"]) for c in result["changes"]] == [
        ("value", "%s acs_control" % af.DSP0), ("value", "%s acs_control" % af.DSP1),
        ("file", paths.state), ("file", paths.helper), ("file", paths.rule)]
    assert result["diff"][0]["before"] == "%s ACS Control = 0x001d\n%s ACS Control = 0x001d\n" % (af.DSP0, af.DSP1)


def test_apply_then_idempotent(switch, monkeypatch):
    tmp_path, paths = switch
    before = configs(tmp_path)
    result = pa.run({}, paths=paths)
    assert result["changed"] is True and result["persisted"] is True and result["reboot_required"] is False
    assert ctrl(tmp_path, af.DSP0) == ctrl(tmp_path, af.DSP1) == 0x0001
    after = configs(tmp_path)
    changed = sorted(k for k in after if after[k] != before[k])
    assert len(changed) == 2 and all(af.DSP0 in k or af.DSP1 in k for k in changed)
    state = json.loads(read_bytes(paths.state))
    assert state["bridges"][af.DSP0] == {"vendor": "0x10b5", "device": "0x8747", "offset": "0xf24",
                                         "ctrl": "0x001d", "cleared": "0x001c"}
    rule = read_bytes(paths.rule).decode()
    assert 'KERNEL=="%s", ATTR{vendor}=="0x10b5", ATTR{device}=="0x8747"' % af.DSP0 in rule
    assert "--clear 0x001c --vendor 0x10de --class 0x0300 --class 0x0302 $kernel" in rule
    snap = snapshot(tmp_path)
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote config space"))
    again = pa.run({}, paths=paths)
    assert again["changed"] is False and again["changes"] == [] and snapshot(tmp_path) == snap


def test_bridge_without_acs_is_reported_not_an_error(tmp_path):
    af.root_ports_node(tmp_path, with_plain=True)
    paths = make_paths(tmp_path)
    result = pa.run({"persist": False}, paths=paths)
    assert sorted(b["bdf"] for b in result["bridges"] if b["changed"]) == [af.RP0, af.RP1]
    plain = by_bdf(result)[af.RP2]
    assert plain["acs_offset"] is None and plain["reason"].startswith("no ACS capability")
    assert result["skipped_keys"][af.RP2] == plain["reason"]
    assert any(w.startswith("%s left alone: no ACS capability" % af.RP2) for w in result["warnings"])
    intel = by_bdf(result)[af.RP0]
    assert (intel["port_type"], intel["capability"], intel["acs_offset"]) == ("root port", "0x001f", "0x220")


def test_source_validation_only_when_asked_and_only_advertised_bits(tmp_path):
    af.root_ports_node(tmp_path)
    paths = make_paths(tmp_path)
    result = pa.run({"persist": False, "clear": ["source_validation", "request_redirect"]}, paths=paths)
    assert by_bdf(result)[af.RP0]["ctrl_after"] == "0x0018"
    assert result["clear"] == ["source_validation", "request_redirect"]


def test_devices_on_a_machine_without_gpus(tmp_path):
    """The test VM's shape: an e1000e and an NVMe behind two QEMU pcie-root-ports (1b36:000c,
    ACS at 0x148 advertising SV TB RR CR UF DT: QEMU's pcie_acs_init, as molecule host-vm reads it)."""
    for rp, ep, cls in (("0000:00:02.0", "0000:01:00.0", 0x020000), ("0000:00:02.1", "0000:02:00.0", 0x010802)):
        add_device(tmp_path, rp, af.acs_bridge(0x1B36, 0x000C, 0x148, 0x005F, port_type=4))
        add_device(tmp_path, ep, gpu_config(vendor=0x8086, device=0x10D3, class_code=cls), parents=[rp])
    paths = make_paths(tmp_path)
    result = pa.run({"devices": ["01:00.0", "02:00.0"], "persist": False}, paths=paths)
    assert [b["ctrl_after"] for b in result["bridges"]] == ["0x0001", "0x0001"]
    assert [e["architecture"] for e in result["endpoints"]] == [None, None]


# ----------------------------------------------------------------------- failures, restore

def sticky(monkeypatch, suffix):
    """Writes to the config file whose path ends with ``suffix`` do not stick (read back differs)."""
    real = os.pwrite

    def pwrite(fd, payload, offset):
        if os.readlink("/proc/self/fd/%d" % fd).endswith(suffix):
            return len(payload)
        return real(fd, payload, offset)
    monkeypatch.setattr(pc, "_pwrite", pwrite)


def test_read_back_refusal_restores_the_first_bridge(switch, monkeypatch):
    tmp_path, paths = switch
    before = snapshot(tmp_path)
    sticky(monkeypatch, "%s/config" % af.DSP1)  # DSP0 (first) takes it, DSP1 does not
    with pytest.raises(ModuleFailure) as exc:
        pa.run({}, paths=paths)
    message = exc.value.message
    assert message.startswith("0000:02:10.0 (10b5:8747, switch downstream port) refused the write: ACS Control "
                              "reads 0x001d after writing 0x0001")
    assert message.endswith("(everything applied before it was restored)")
    assert snapshot(tmp_path) == before
    refused = by_bdf(exc.value.partial)[af.DSP1]
    assert refused["ctrl_read_back"] == "0x001d" and refused["reason"].startswith("refused")
    assert all(b["changed"] is False for b in exc.value.partial["bridges"])


def test_kernel_refusing_a_write_restores_the_first(switch, monkeypatch):
    tmp_path, paths = switch
    before = snapshot(tmp_path)
    real = os.pwrite

    def pwrite(fd, payload, offset):
        if os.readlink("/proc/self/fd/%d" % fd).endswith("%s/config" % af.DSP1):
            raise OSError(1, "Operation not permitted")
        return real(fd, payload, offset)
    monkeypatch.setattr(pc, "_pwrite", pwrite)
    with pytest.raises(ModuleFailure) as exc:
        pa.run({}, paths=paths)
    assert "failed to write ACS Control of 0000:02:10.0" in exc.value.message
    assert snapshot(tmp_path) == before


def test_vfio_below_is_refused_unless_allowed(tmp_path):
    af.switch_node(tmp_path, gpu_driver="vfio-pci")
    paths = make_paths(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pa.run({"devices": [af.GPU0, af.GPU1]}, paths=paths)
    assert exc.value.message.startswith("refusing to clear ACS, nothing was changed: 0000:02:08.0 has "
                                        "0000:03:00.0 bound to vfio-pci")
    assert "allow_with_vfio=true" in exc.value.message
    assert snapshot(tmp_path) == before
    result = pa.run({"devices": [af.GPU0, af.GPU1], "allow_with_vfio": True, "persist": False}, paths=paths)
    assert result["changed"] is True and ctrl(tmp_path, af.DSP0) == 0x0001


def test_container_refuses_to_write_but_may_look(switch):
    tmp_path, paths = switch
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pa.run({}, paths=paths)
    assert exc.value.message.startswith("refusing to clear ACS request_redirect, completion_redirect, "
                                        "upstream_forwarding on 0000:02:08.0, 0000:02:10.0 from inside a container")
    assert snapshot(tmp_path) == before
    assert exc.value.partial["bridges"][0]["ctrl_before"] == "0x001d"  # looked, and reports it


def test_container_with_nothing_to_change_is_ok(switch):
    tmp_path, paths = switch
    pa.run({"persist": False}, paths=paths)
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    before = snapshot(tmp_path)
    result = pa.run({}, paths=paths)
    assert result["changed"] is False and snapshot(tmp_path) == before
    assert "inside a container" in result["skipped_keys"]["udev rule"]


@pytest.mark.parametrize("device, wording", [
    (af.H100, "iommu=pt (module gpufleet.tuning.kernel_cmdline), which needs a reboot"),
    (af.B200, "identity IOMMU domains (iommu=pt) must never be used with them, they break the GPU's boot firmware. "
              "Keep ACS and the IOMMU as they are and accept staged copies"),
])
def test_translating_iommu_is_refused(tmp_path, device, wording):
    af.switch_node(tmp_path, gpu_device=device, iommu="DMA-FQ")
    paths = make_paths(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pa.run({}, paths=paths)
    message = exc.value.message
    assert message.startswith("refusing to clear ACS, nothing was changed: the IOMMU domain of 0000:03:00.0, "
                              "0000:04:00.0 translates (0000:03:00.0 DMA-FQ, 0000:04:00.0 DMA-FQ)")
    assert "clearing ACS only moves the failure" in message and wording in message
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- state=absent

def test_absent_restores_the_remembered_words_and_is_idempotent(switch):
    tmp_path, paths = switch
    original = configs(tmp_path)
    pa.run({}, paths=paths)
    pa.run({"clear": ["source_validation"]}, paths=paths)  # more bits: remembered word kept
    assert ctrl(tmp_path, af.DSP0) == 0x0000
    assert json.loads(read_bytes(paths.state))["bridges"][af.DSP0]["cleared"] == "0x001d"
    planned = pa.run({"state": "absent"}, check_mode=True, paths=paths)
    assert planned["changed"] is True and ctrl(tmp_path, af.DSP0) == 0x0000
    result = pa.run({"state": "absent"}, paths=paths)
    assert result["changed"] is True and configs(tmp_path) == original
    assert [b["ctrl_after"] for b in result["bridges"]] == ["0x001d", "0x001d"]
    assert not os.path.exists(paths.state) and not os.path.exists(paths.rule) and not os.path.exists(paths.helper)
    again = pa.run({"state": "absent"}, paths=paths)
    assert again["changed"] is False and again["bridges"] == []


def test_absent_leaves_a_bridge_that_is_another_device_now(switch):
    tmp_path, paths = switch
    pa.run({"persist": False}, paths=paths)
    with open(str(tmp_path / "sys/bus/pci/devices" / af.DSP1 / "device"), "w") as handle:
        handle.write("0x9999\n")
    result = pa.run({"state": "absent"}, paths=paths)
    assert ctrl(tmp_path, af.DSP0) == 0x001D and ctrl(tmp_path, af.DSP1) == 0x0001
    assert "not the 0x10b5:0x8747 this module changed" in result["skipped_keys"][af.DSP1]
    assert list(json.loads(read_bytes(paths.state))["bridges"]) == [af.DSP1]


@pytest.mark.parametrize("text, message", [
    ("not json", "is not valid JSON"),
    (json.dumps({"kind": "gpufleet.tuning.pcie_acs", "bridges": {"../../x": {}}}), "key '../../x' is not a PCI address"),
    (json.dumps({"kind": "gpufleet.tuning.pcie_acs", "bridges": {af.DSP0: {
        "vendor": "0x10b5", "device": "0x8747", "offset": "0xf24", "ctrl": "0x001d", "cleared": "0x0020"}}}),
     "cleared 0x0020 holds bits this module never clears"),
    (json.dumps({"bridges": {}}), "is not a JSON object with kind"),
])
def test_a_state_file_that_is_not_ours_is_refused(switch, text, message):
    tmp_path, paths = switch
    write_tree(tmp_path, {os.path.relpath(paths.state, str(tmp_path)): text})
    before = snapshot(tmp_path)
    for state in ("present", "absent"):
        with pytest.raises(ModuleFailure) as exc:
            pa.run({"state": state}, paths=paths)
        assert message in exc.value.message and "nothing was changed" in exc.value.message
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("bad, message", [
    (dict(devices=["0000:03:00.0"]), "list at least two"),
    (dict(devices=["03:00.0", "3:0.0"]), "device '3:0.0' is not a PCI address"),
    (dict(clear=["egress_control"]), "clear 'egress_control' is not valid"),
    (dict(clear=[]), "clear [] is not valid"),
    (dict(state="gone"), "state 'gone' is not valid"),
    (dict(vendor="nvidia"), "vendor 'nvidia' is not valid"),
])
def test_bad_input_names_the_value_and_changes_nothing(switch, bad, message):
    tmp_path, paths = switch
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pa.run(bad, paths=paths)
    assert message in exc.value.message and exc.value.message.startswith("invalid options, nothing was read")
    assert snapshot(tmp_path) == before


def test_missing_device_fails_before_writing(switch):
    tmp_path, paths = switch
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pa.run({"devices": [af.GPU0, "0000:99:00.0"]}, paths=paths)
    assert "no PCI device 0000:99:00.0" in exc.value.message and snapshot(tmp_path) == before


# ------------------------------------------------------------------------------ persistence

def test_the_generated_helper_clears_the_bits_at_boot(switch):
    """Run the installed helper the way udev would after a reboot put the kernel's 0x001d back."""
    tmp_path, paths = switch
    original = configs(tmp_path)
    pa.run({}, paths=paths)
    for bdf in (af.DSP0, af.DSP1):  # "reboot": the kernel sets SV/RR/CR/UF again
        path = pc.config_path(str(tmp_path / "sys"), bdf)
        with open(path, "wb") as handle:
            handle.write(original[[k for k in original if bdf in k][0]])
    with open(paths.helper) as handle:
        assert handle.readline() == "#!%s -IS\n" % (tmp_path / "usr/bin/python3")
    args = pa.helper_args(pa.validate({}))
    proc = subprocess.run([paths.helper, "--sysfs", paths.sysfs] + args + [af.DSP0], env={"PATH": "/usr/bin:/bin"},
                          cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("%s: ACS Control 0x001d -> 0x0001 (cleared request_redirect, completion_redirect, "
                           "upstream_forwarding)\n" % af.DSP0)
    assert ctrl(tmp_path, af.DSP0) == 0x0001 and ctrl(tmp_path, af.DSP1) == 0x001D
    proc = subprocess.run([paths.helper, "--sysfs", paths.sysfs] + args + [af.USP], env={"PATH": "/usr/bin:/bin"},
                          cwd="/", stdout=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 0 and "not a bridge between two of" in proc.stdout


def test_the_helper_parses_as_python_3_6():
    import ast
    ast.parse(pa.render_helper("/usr/libexec/platform-python"), feature_version=(3, 6))


def test_persist_false_removes_the_files(switch):
    tmp_path, paths = switch
    pa.run({}, paths=paths)
    result = pa.run({"persist": False}, paths=paths)
    assert result["changed"] is True and result["persisted"] is False
    assert not os.path.exists(paths.rule) and not os.path.exists(paths.helper)


def test_a_foreign_rule_is_not_overwritten(switch):
    tmp_path, paths = switch
    write_tree(tmp_path, {os.path.relpath(paths.rule, str(tmp_path)): "# an operator's rule\n"})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pa.run({}, paths=paths)
    assert "was not written by gpufleet.tuning" in exc.value.message and snapshot(tmp_path) == before


def test_an_untrusted_directory_refuses_persistence_before_any_write(switch):
    tmp_path, paths = switch
    os.makedirs(str(tmp_path / "usr/local"), exist_ok=True)
    os.chmod(str(tmp_path / "usr/local"), 0o777)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pa.run({}, paths=paths)
    assert exc.value.message.startswith("cannot install the udev rule and its helper, nothing was changed")
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- module shell

def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(pcie_acs, pa, monkeypatch)


def test_module_check_mode_and_diff(switch, monkeypatch, capsys):
    tmp_path, paths = switch
    monkeypatch.setattr(pa, "Paths", lambda: paths)
    before = snapshot(tmp_path)
    failed, result = run_module(pcie_acs, {}, capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] is True and snapshot(tmp_path) == before
    assert result["diff"][0]["after"] == "%s ACS Control = 0x0001\n%s ACS Control = 0x0001\n" % (af.DSP0, af.DSP1)
    assert result["msg"].startswith("cleared ACS request_redirect, completion_redirect, upstream_forwarding on")


def test_module_failure_carries_no_changes(switch, monkeypatch, capsys):
    tmp_path, paths = switch
    monkeypatch.setattr(pa, "Paths", lambda: paths)
    sticky(monkeypatch, "%s/config" % af.DSP0)
    failed, result = run_module(pcie_acs, {"persist": False}, capsys)
    assert failed and "changes" not in result and "refused the write" in result["msg"]
