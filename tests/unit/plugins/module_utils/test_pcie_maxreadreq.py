"""The MRRS engine against fake /sys/bus/pci trees, a fake /proc and temp udev/helper paths."""

import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_gpus
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config as pc
from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_maxreadreq as pm
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import (
    add_device, bridge_config, conventional_config, gpu_config, read_bytes, with_word)

IDENTITY = "         0          0 4294967295\n"
GPU0, GPU1, AUDIO, NIC, ROOT0 = "0000:41:00.0", "0000:c1:00.0", "0000:41:00.1", "0000:21:00.0", "0000:40:01.1"
FIXTURE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "fixtures", "pci")


def params(**kw):
    base = dict(size=4096, devices=[], vendor=nvidia_gpus.NVIDIA_VENDOR, classes=list(nvidia_gpus.GPU_CLASSES),
                include_bridges=False, persist=False, allow_in_container=False)
    base.update(kw)
    return base


# The Python the helpers in these tests run with: the system one (root's on any sane machine),
# reached through a link in the fake tree as /usr/bin/python3 would be on a node.
REAL_PYTHON = pm.system_interpreter() or os.path.realpath(sys.executable)
USER = 1000


def make_paths(tmp_path):
    os.makedirs(str(tmp_path / "usr/bin"), exist_ok=True)
    python = tmp_path / "usr/bin/python3"
    if not os.path.lexists(str(python)):
        os.symlink(REAL_PYTHON, str(python))
    return pm.Paths(str(tmp_path))


@pytest.fixture(autouse=True)
def every_run_keeps_the_record_contract(monkeypatch):
    """changed is true iff ``changes`` holds a record, on every path below; failures carry none."""
    contract.checking_records(monkeypatch, pm)


@pytest.fixture
def node(tmp_path):
    """Two GPUs (one behind a root port), the GPU's audio function, an NVIDIA NIC, a virtio device."""
    write_tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/sys": None})
    add_device(tmp_path, ROOT0, bridge_config(devctl=0x8020))
    add_device(tmp_path, GPU0, gpu_config(), parents=[ROOT0], driver="nvidia", numa_node=0,
               link={"current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16",
                     "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"})
    add_device(tmp_path, AUDIO, gpu_config(class_code=0x040300, device=0x22e8), parents=[ROOT0])
    add_device(tmp_path, GPU1, gpu_config(class_code=0x030000, devctl=0x5134), driver="nvidia", numa_node=1)
    add_device(tmp_path, NIC, gpu_config(class_code=0x020000, device=0x1021))
    add_device(tmp_path, "0000:00:02.0", conventional_config(vendor=0x1af4, device=0x1000, class_code=0x020000))
    return tmp_path, make_paths(tmp_path)


def config_of(tmp_path, bdf):
    return read_bytes(pc.config_path(str(tmp_path / "sys"), bdf))


def by_bdf(result):
    return dict((d["bdf"], d) for d in result["devices"])


# ----------------------------------------------------------------------------- validation

@pytest.mark.parametrize("bad, message", [
    (dict(size=8192), "size 8192 is not valid: use one of 128, 256, 512, 1024, 2048, 4096 (bytes)"),
    (dict(size=None), "size None is not valid"),
    (dict(devices=["0000:41:00.0", "41:0.0"]), "device '41:0.0' is not a PCI address"),
    (dict(vendor="10de"), "vendor '10de' is not valid"),
    (dict(vendor="NVIDIA"), "quote it in YAML"),
    (dict(classes=["0x03"]), "class '0x03' is not valid"),
    (dict(classes=[]), "classes is empty"),
])
def test_bad_options_are_refused_before_anything_is_read(tmp_path, monkeypatch, bad, message):
    monkeypatch.setattr(pm.container_mod, "detect", lambda **kw: pytest.fail("read before validating"))
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(**bad), paths=make_paths(tmp_path))
    assert message in exc.value.message
    assert exc.value.message.startswith("invalid options, nothing was read or changed")


def test_validate_normalizes():
    spec = pm.validate(params(devices=["41:00.0", "0000:41:00.0", "0000:C1:00.0"], vendor=0x10DE,
                              classes=[0x0302, "0x030000", 0x030200]))
    assert spec["devices"] == ["0000:41:00.0", "0000:c1:00.0"]
    assert spec["vendor"] == "0x10de"
    assert spec["classes"] == ["0x0302", "0x030000", "0x030200"]


# ------------------------------------------------------------------------------ selection

def test_selects_gpus_by_vendor_and_class_only(node):
    tmp_path, paths = node
    result = pm.run(params(), check_mode=True, paths=paths)
    assert [d["bdf"] for d in result["devices"]] == [GPU0, GPU1]
    gpu = by_bdf(result)[GPU0]
    assert {k: gpu[k] for k in ("vendor", "device", "class", "driver", "numa_node", "role", "port_type",
                                "express_cap", "devctl_before", "devctl_after", "mrrs_before", "mrrs_after",
                                "mps", "mps_supported", "changed", "reason")} == {
        "vendor": "0x10de", "device": "0x2335", "class": "0x030200", "driver": "nvidia", "numa_node": 0,
        "role": "selected", "port_type": "endpoint", "express_cap": "0x60", "devctl_before": "0x2134",
        "devctl_after": "0x5134", "mrrs_before": 512, "mrrs_after": 4096, "mps": 256, "mps_supported": 256,
        "changed": True, "reason": None}
    assert gpu["link"]["gen"] == 5 and gpu["link"]["width"] == 16 and gpu["link"]["degraded"] is False
    assert gpu["link"]["sysfs"]["current_link_speed"] == "32.0 GT/s PCIe"
    assert by_bdf(result)[GPU1]["changed"] is False and by_bdf(result)[GPU1]["numa_node"] == 1


def test_exact_six_digit_class(node):
    _tmp, paths = node
    result = pm.run(params(classes=["0x030000"]), check_mode=True, paths=paths)
    assert [d["bdf"] for d in result["devices"]] == [GPU1]


def test_no_matching_device_is_zero_devices_not_an_error(node):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    result = pm.run(params(vendor="0x1002"), paths=paths)
    assert result["devices"] == [] and result["changed"] is False
    assert result["diff"][0]["before"] == "" and result["diff"][0]["after"] == ""
    assert snapshot(tmp_path) == before


def test_no_matching_device_installs_no_persistence(node):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    result = pm.run(params(vendor="0x1002", persist=True), paths=paths)
    assert result["changed"] is False and result["persisted"] is False
    assert snapshot(tmp_path) == before
    assert not os.path.exists(paths.rule)


def test_no_pci_bus_at_all(tmp_path):
    write_tree(tmp_path, {"proc/self/uid_map": IDENTITY})
    result = pm.run(params(), paths=make_paths(tmp_path))
    assert result["devices"] == [] and result["changed"] is False


def test_listed_device_that_does_not_exist_fails_before_writing(node):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(devices=[GPU0, "0000:99:00.0"]), paths=paths)
    assert "no PCI device 0000:99:00.0 under" in exc.value.message
    assert snapshot(tmp_path) == before


def test_devices_list_ignores_vendor_and_class(node):
    _tmp, paths = node
    result = pm.run(params(devices=["21:00.0"], vendor="0x1002"), check_mode=True, paths=paths)
    assert [d["bdf"] for d in result["devices"]] == [NIC]


# ------------------------------------------------------------------------------- writing

def test_512_to_4096_changes_only_bits_14_12_of_each_config_file(node):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    result = pm.run(params(), paths=paths)
    assert result["changed"] is True
    gpu0 = "sys/devices/pci0000:40/%s/%s/config" % (ROOT0, GPU0)
    after = snapshot(tmp_path)
    assert after[gpu0] == with_word(before[gpu0], 0x68, 0x5134)
    assert pc.u16(after[gpu0], 0x68) == (pc.u16(before[gpu0], 0x68) & ~0x7000) | 0x5000
    assert dict((k, v) for k, v in after.items() if k != gpu0) == dict((k, v) for k, v in before.items() if k != gpu0)
    gpu = by_bdf(result)[GPU0]
    assert (gpu["devctl_before"], gpu["devctl_after"], gpu["mrrs_before"], gpu["mrrs_after"]) == (
        "0x2134", "0x5134", 512, 4096)
    assert result["diff"][0] == {
        "before_header": "PCIe Max Read Request Size (before)", "after_header": "PCIe Max Read Request Size (after)",
        "before": "%s MRRS = 512\n%s MRRS = 4096\n" % (GPU0, GPU1),
        "after": "%s MRRS = 4096\n%s MRRS = 4096\n" % (GPU0, GPU1)}
    assert result["reboot_required"] is False and result["container"]["detected"] is False


def test_second_run_is_idempotent_and_writes_nothing(node, monkeypatch):
    tmp_path, paths = node
    pm.run(params(persist=True), paths=paths)
    before = snapshot(tmp_path)
    inodes = dict((p, os.stat(p).st_ino) for p in (paths.rule, paths.helper))
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote config space"))
    result = pm.run(params(persist=True), paths=paths)
    assert result["changed"] is False
    assert all(d["changed"] is False for d in result["devices"])
    assert result["diff"][1:] == []
    assert snapshot(tmp_path) == before
    assert dict((p, os.stat(p).st_ino) for p in (paths.rule, paths.helper)) == inodes


def test_check_mode_leaves_every_file_byte_unchanged(node, monkeypatch):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote config space in check mode"))
    result = pm.run(params(persist=True, include_bridges=True), check_mode=True, paths=paths)
    assert result["changed"] is True
    assert snapshot(tmp_path) == before
    assert not os.path.exists(paths.rule) and not os.path.exists(paths.helper)
    assert by_bdf(result)[GPU0]["mrrs_after"] == 4096 and by_bdf(result)[ROOT0]["devctl_after"] == "0xd020"
    assert [e["after_header"] for e in result["diff"][1:]] == [paths.helper, paths.rule]


def test_bridge_and_endpoint_with_include_bridges(node):
    tmp_path, paths = node
    before = config_of(tmp_path, ROOT0)
    result = pm.run(params(include_bridges=True), paths=paths)
    assert [(d["bdf"], d["role"], d["upstream_of"]) for d in result["devices"]] == [
        (GPU0, "selected", []), (GPU1, "selected", []), (ROOT0, "upstream bridge", [GPU0])]
    bridge = by_bdf(result)[ROOT0]
    assert bridge["port_type"] == "root port" and bridge["express_cap"] == "0x40"
    assert (bridge["devctl_before"], bridge["devctl_after"]) == ("0x8020", "0xd020")  # bit 15 kept
    assert config_of(tmp_path, ROOT0) == with_word(before, 0x48, 0xD020)
    assert pc.mrrs_of(pc.u16(config_of(tmp_path, GPU0), 0x68)) == 4096


def test_without_include_bridges_the_bridge_is_untouched(node):
    tmp_path, paths = node
    before = config_of(tmp_path, ROOT0)
    pm.run(params(), paths=paths)
    assert config_of(tmp_path, ROOT0) == before


def qemu_like(monkeypatch, bdf_config_suffix):
    """Writes to the config file whose path ends with the suffix keep their MRRS (QEMU's devices)."""
    real = os.pwrite

    def pwrite(fd, payload, offset):
        path = os.readlink("/proc/self/fd/%d" % fd)
        if not path.endswith(bdf_config_suffix):
            return real(fd, payload, offset)
        with open(path, "rb") as handle:
            handle.seek(offset)
            held = int.from_bytes(handle.read(2), "little") & 0x7000
        value = (int.from_bytes(payload, "little") & ~0x7000) | held
        return real(fd, value.to_bytes(2, "little"), offset)
    monkeypatch.setattr(pc, "_pwrite", pwrite)


def test_device_that_does_not_take_it_fails_naming_it_and_everything_is_restored(node, monkeypatch):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    qemu_like(monkeypatch, "%s/config" % GPU0)  # the root port (first) takes it, the GPU does not
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(include_bridges=True, persist=True, devices=[ROOT0, GPU0]), paths=paths)
    assert exc.value.message.startswith(
        "0000:41:00.0 (10de:2335, class 0x030200) did not take MRRS 4096: Device Control reads 0x2134 "
        "(MRRS 512) after writing 0x5134; the old word 0x2134 was written back")
    assert exc.value.message.endswith("(everything applied before it was restored)")
    assert snapshot(tmp_path) == before  # the root port is back at 128, no udev files
    assert [d["mrrs_after"] for d in exc.value.partial["devices"]] == [128, 512]


def test_write_refused_by_the_kernel_names_the_device_and_lockdown(node, monkeypatch):
    tmp_path, paths = node
    write_tree(tmp_path, {"sys/kernel/security/lockdown": "none [integrity] confidentiality\n"})

    def eperm(*_a):
        raise OSError(1, "Operation not permitted")
    monkeypatch.setattr(pc, "_pwrite", eperm)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(), paths=paths)
    assert exc.value.message.startswith("failed to write Device Control of 0000:41:00.0 (10de:2335, class "
                                        "0x030200): Operation not permitted (kernel lockdown is integrity")


def test_failure_writing_the_rule_restores_config_space(node, monkeypatch):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    real = pm.managed_files.fileops.write_atomic

    def fail_rule(path, *a, **k):
        if path.endswith(".rules"):
            raise OSError(28, "No space left on device", path)
        return real(path, *a, **k)
    monkeypatch.setattr(pm.managed_files.fileops, "write_atomic", fail_rule)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(persist=True), paths=paths)
    assert "No space left on device" in exc.value.message
    assert snapshot(tmp_path) == before


def test_not_writable_config_fails_before_writing(node, monkeypatch):
    tmp_path, paths = node
    before = snapshot(tmp_path)
    monkeypatch.setattr(pc, "writable", lambda sysfs, bdf: False)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(), paths=paths)
    assert "config space of 0000:41:00.0 (10de:2335, class 0x030200) is not writable" in exc.value.message
    assert snapshot(tmp_path) == before
    # nothing to write: not an error, even read-only
    assert pm.run(params(classes=["0x0300"]), paths=paths)["changed"] is False


# ---------------------------------------------------------------------- devices skipped

def test_64_readable_bytes_is_reported_as_needs_root(node, monkeypatch):
    tmp_path, paths = node
    real = pc.read_config
    monkeypatch.setattr(pc, "read_config", lambda sysfs, bdf: real(sysfs, bdf)[:64])
    before = snapshot(tmp_path)
    result = pm.run(params(), paths=paths)
    gpu = by_bdf(result)[GPU0]
    assert "needs root" in gpu["reason"] and gpu["mrrs_before"] is None and gpu["changed"] is False
    assert gpu["link"]["source"] == "sysfs" and gpu["link"]["gen"] == 5
    assert result["skipped_keys"][GPU0] == gpu["reason"]
    assert result["changed"] is False and snapshot(tmp_path) == before


def test_devices_without_express_and_with_a_looping_list_are_skipped(node):
    tmp_path, paths = node
    looping = bytearray(gpu_config())
    looping[0x49] = 0x40  # MSI points back at power management
    add_device(tmp_path, "0000:e1:00.0", bytes(looping))
    result = pm.run(params(devices=["0000:00:02.0", "e1:00.0", GPU1]), paths=paths)
    found = by_bdf(result)
    assert "no PCI Express capability" in found["0000:00:02.0"]["reason"]
    assert "loops back to 0x40" in found["0000:e1:00.0"]["reason"]
    assert found[GPU1]["reason"] is None
    assert sorted(result["skipped_keys"]) == ["0000:00:02.0", "0000:e1:00.0"]
    assert result["changed"] is False


# -------------------------------------------------------------------------- containers

def test_container_refuses_with_a_message_that_says_so(node):
    tmp_path, paths = node
    write_tree(tmp_path, {"proc/self/uid_map": "         0     100000      65536\n",
                          "proc/1/environ": "container=lxc\0"})
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(), check_mode=True, paths=paths)
    message = exc.value.message
    assert message.startswith("refusing to set MRRS 4096 on 0000:41:00.0 from inside a container (PID 1 "
                              "environment has container=lxc")
    assert "config space and udev belong to the host" in message and "allow_in_container=true" in message
    assert exc.value.partial["container"]["kind"] == "lxc"
    assert snapshot(tmp_path) == before
    # Nothing to change: reading in a container is fine.
    assert pm.run(params(classes=["0x0300"]), paths=paths)["container"]["detected"] is True
    # The operator's override.
    result = pm.run(params(allow_in_container=True), paths=paths)
    assert result["changed"] is True and by_bdf(result)[GPU0]["mrrs_after"] == 4096


def test_stale_dockerenv_alone_does_not_refuse(node):
    tmp_path, paths = node
    write_tree(tmp_path, {".dockerenv": ""})
    result = pm.run(params(), paths=paths)
    assert result["container"]["detected"] is False and result["changed"] is True


PRIVILEGED_PODMAN = {"proc/1/environ": "container=podman\0", "run/.containerenv": ""}


def test_container_with_nothing_to_set_is_ok_and_leaves_udev_alone(node):
    # GPU1 is at 4096 already: the plan holds only the udev persistence, which a container
    # cannot give the host (its rule would act for the container's udev, not at the host's boot)
    tmp_path, paths = node
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    before = snapshot(tmp_path)
    for check_mode in (True, False):
        result = pm.run(params(devices=[GPU1], persist=True), check_mode=check_mode, paths=paths)
        assert snapshot(tmp_path) == before
        assert result["changed"] is False and result["persisted"] is False
        assert by_bdf(result)[GPU1]["mrrs_after"] == 4096
        note = result["skipped_keys"]["udev rule"]
        assert note.startswith("inside a container (PID 1 environment has container=podman; /run/.containerenv "
                               "exists): a udev rule written here acts when the container starts, not when the "
                               "host boots"), note
        assert "the plan would write %s, write %s" % (paths.helper, paths.rule) in note
        assert ("udev rule left alone: " + note) in result["warnings"]
        assert [d for d in result["diff"] if d["before"] != d["after"]] == []


def test_container_refusal_names_the_devices_only(node):
    tmp_path, paths = node
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(persist=True), paths=paths)
    assert exc.value.message.startswith("refusing to set MRRS 4096 on 0000:41:00.0 from inside a container "
                                        "(PID 1 environment has container=podman; /run/.containerenv exists): PCI "
                                        "config space and udev belong to the host")
    assert "udev persistence" not in exc.value.message and "udev rule" not in exc.value.message
    assert "udev rule" in exc.value.partial["skipped_keys"]
    assert snapshot(tmp_path) == before


def test_container_leaves_an_installed_rule_alone_both_ways(node):
    tmp_path, paths = node
    pm.run(params(persist=True), paths=paths)  # on the host
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    before = snapshot(tmp_path)
    result = pm.run(params(persist=True), paths=paths)
    assert result["changed"] is False and result["persisted"] is True and "udev rule" not in result["skipped_keys"]
    result = pm.run(params(persist=False), paths=paths)
    assert result["changed"] is False and result["persisted"] is True
    assert "the plan would remove %s, remove %s" % (paths.rule, paths.helper) in result["skipped_keys"]["udev rule"]
    assert snapshot(tmp_path) == before


def test_container_with_allow_writes_device_and_rule(node):
    tmp_path, paths = node
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    result = pm.run(params(persist=True, allow_in_container=True), paths=paths)
    assert result["changed"] is True and result["persisted"] is True and "udev rule" not in result["skipped_keys"]
    assert os.path.exists(paths.rule) and os.path.exists(paths.helper)
    assert by_bdf(result)[GPU0]["mrrs_after"] == 4096


# -------------------------------------------------------------------------- persistence

def test_persist_writes_rule_and_helper_and_false_removes_them(node):
    tmp_path, paths = node
    result = pm.run(params(persist=True), paths=paths)
    assert result["persisted"] is True and result["files"] == [paths.helper, paths.rule]
    run = 'RUN+="%s --size 4096 $kernel"' % paths.helper
    with open(paths.rule) as handle:
        assert handle.read() == (
            "# Managed by Ansible (gpufleet.tuning.pcie_maxreadreq); local edits are overwritten.\n"
            "# Sets PCIe Max Read Request Size 4096 bytes when a selected device is added (udev replays\n"
            "# add for every device at boot) or a driver binds to it. Removed with persist=false.\n"
            'ACTION=="add|bind", SUBSYSTEM=="pci", ATTR{vendor}=="0x10de", ATTR{class}=="0x0300??", %s\n'
            'ACTION=="add|bind", SUBSYSTEM=="pci", ATTR{vendor}=="0x10de", ATTR{class}=="0x0302??", %s\n'
            % (run, run))
    assert os.stat(paths.rule).st_mode & 0o777 == 0o644
    assert os.stat(paths.helper).st_mode & 0o777 == 0o755
    with open(paths.helper) as handle:
        helper = handle.read()
    assert helper.startswith("#!%s -IS\n# Generated by gpufleet.tuning.pcie_maxreadreq" % (tmp_path / "usr/bin/python3"))
    assert pm.helper_source().replace("from __future__ import annotations\n", "") in helper
    assert helper.endswith("    sys.exit(cli_main())\n")
    assert [e["after_header"] for e in result["diff"][1:]] == [paths.helper, paths.rule]

    result = pm.run(params(persist=False), paths=paths)
    assert result["changed"] is True and result["persisted"] is False
    assert not os.path.exists(paths.rule) and not os.path.exists(paths.helper)
    assert [e["after_header"] for e in result["diff"][1:]] == [paths.rule + " (absent)", paths.helper + " (absent)"]
    assert pm.run(params(persist=False), paths=paths)["changed"] is False


def test_rule_for_listed_devices_and_bridges(node):
    _tmp, paths = node
    pm.run(params(persist=True, devices=[GPU0, "c1:00.0"], include_bridges=True, size=2048), paths=paths)
    with open(paths.rule) as handle:
        rules = [line for line in handle.read().splitlines() if not line.startswith("#")]
    run = 'RUN+="%s --size 2048 --include-bridges $kernel"' % paths.helper
    assert rules == ['ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="0000:41:00.0", %s' % run,
                     'ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="0000:c1:00.0", %s' % run]


def test_changed_size_rewrites_the_rule(node):
    _tmp, paths = node
    pm.run(params(persist=True), paths=paths)
    result = pm.run(params(persist=True, size=1024), paths=paths)
    assert result["changed"] is True
    assert [e["after_header"] for e in result["diff"][1:]] == [paths.rule]


def test_installed_helper_runs_the_same_code_as_the_module(node):
    """The helper is executed as udev would: a new process, only its own file and the stdlib."""
    tmp_path, paths = node
    pm.run(params(persist=True, include_bridges=True, size=128), paths=paths)
    assert pc.mrrs_of(pc.u16(config_of(tmp_path, GPU0), 0x68)) == 128
    gpu_before = config_of(tmp_path, GPU0)
    env = {"PATH": "/usr/bin:/bin"}
    proc = subprocess.run([paths.helper, "--sysfs", paths.sysfs, "--size", "4096", "--include-bridges", GPU0],
                          env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "%s: MRRS 128 -> 4096 (Device Control 0x8020 -> 0xd020)" % ROOT0,
        "%s: MRRS 128 -> 4096 (Device Control 0x0134 -> 0x5134)" % GPU0]
    assert config_of(tmp_path, GPU0) == with_word(gpu_before, 0x68, 0x5134)


def test_helper_source_falls_back_to_the_loader(monkeypatch):
    def no_file(_obj):
        raise OSError("could not get source code")
    monkeypatch.setattr(pm.inspect, "getsource", no_file)
    assert "def set_mrrs(" in pm.helper_source()


# ------------------------------------------------------------------------ change records

def mrrs(bdf, before, after):
    return {"area": "pcie", "kind": "value", "target": "%s max_read_request_size" % bdf, "before": before,
            "after": after}


def file_record(path, before, after):
    return {"area": "pcie", "kind": "file", "target": path, "before": before, "after": after}


def read_text(path):
    with open(path) as handle:
        return handle.read()


def test_records_name_each_device_set_and_each_file_written(node):
    _tmp, paths = node
    result = pm.run(params(persist=True, include_bridges=True), paths=paths)
    assert result["changes"] == [
        mrrs(GPU0, "512", "4096"), mrrs(ROOT0, "128", "4096"),       # GPU1 already held 4096
        file_record(paths.helper, None, records.file_state(read_text(paths.helper), 0o755)),
        file_record(paths.rule, None, records.file_state(read_text(paths.rule), 0o644))]
    assert pm.run(params(persist=True, include_bridges=True), paths=paths)["changes"] == []
    # records.from_managed shows the mode of a file found only where it differs from the wanted one
    helper, rule = records.file_state(read_text(paths.helper)), records.file_state(read_text(paths.rule))
    result = pm.run(params(persist=False, include_bridges=True), paths=paths)
    assert result["changes"] == [file_record(paths.rule, rule, None), file_record(paths.helper, helper, None)]


def test_check_mode_records_are_the_ones_the_run_then_makes(node):
    _tmp, paths = node
    for kw in (dict(persist=True, size=1024), dict(persist=True, size=2048, devices=[GPU1]), dict(persist=False)):
        planned = pm.run(params(**kw), check_mode=True, paths=paths)
        assert pm.run(params(**kw), paths=paths)["changes"] == planned["changes"] != []


def test_no_matching_device_and_a_refused_run_have_no_records(node, monkeypatch):
    tmp_path, paths = node
    assert pm.run(params(vendor="0x1002", persist=True), paths=paths)["changes"] == []
    qemu_like(monkeypatch, "%s/config" % GPU0)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(persist=True), paths=paths)
    assert "changes" not in exc.value.partial
    monkeypatch.undo()
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(persist=True), check_mode=True, paths=paths)
    assert "changes" not in exc.value.partial and exc.value.message.startswith("refusing")


# ------------------------------------------------------------- one source for each constant

def _role_options(role):
    """Every option of every entry point of ``role``'s meta/argument_specs.yml, by name."""
    import yaml
    top = os.path.dirname(os.path.abspath(__file__))
    for _level in range(4):
        top = os.path.dirname(top)
    with open(os.path.join(top, "roles", role, "meta", "argument_specs.yml")) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    options = {}
    for entry in specs.values():
        options.update(entry.get("options") or {})
    return options


def test_the_sizes_are_pci_configs_everywhere():
    """pci_config.SIZES (the MRRS encodings 0-5) is the one list: the module's choices, and
    every role variable that passes a size on (host_pcie_size, or the verify role's own)."""
    assert pm.ARGUMENT_SPEC["size"]["choices"] == list(pc.SIZES)
    assert pm.ARGUMENT_SPEC["size"]["default"] in pc.SIZES
    found = {}
    for role in ("host", "verify"):
        for name, option in _role_options(role).items():
            if "pcie" in name and "size" in name or "mrrs_size" in name:
                found[name] = option
                assert option.get("choices") == list(pc.SIZES), "roles/%s %s: %r" % (role, name, option.get("choices"))
                assert option.get("default", pc.SIZES[-1]) in pc.SIZES, name
    assert any(name.startswith("host_") for name in found), found


def test_the_default_selection_is_nvidia_gpus():
    """One NVIDIA vendor and GPU class list (hw/nvidia_gpus): the module's defaults, the form the
    engine accepts, and the host role's defaults."""
    assert pm.ARGUMENT_SPEC["vendor"]["default"] == nvidia_gpus.NVIDIA_VENDOR
    assert pm.ARGUMENT_SPEC["classes"]["default"] == list(nvidia_gpus.GPU_CLASSES)
    spec = pm.validate({})
    assert (spec["vendor"], spec["classes"], spec["size"]) == (
        nvidia_gpus.NVIDIA_VENDOR, list(nvidia_gpus.GPU_CLASSES), 4096)
    host = _role_options("host")
    vendor = [option["default"] for name, option in host.items() if name.endswith("pcie_vendor")]
    classes = [option["default"] for name, option in host.items() if name.endswith("pcie_classes")]
    assert vendor == [nvidia_gpus.NVIDIA_VENDOR] and classes == [list(nvidia_gpus.GPU_CLASSES)]


# --------------------------------------------------------------- the real H200 fixture

def _fixtures():
    if not os.path.isdir(FIXTURE_DIR):
        return []
    return sorted(name[:-len(".config")] for name in os.listdir(FIXTURE_DIR)
                  if name.startswith("h200-") and name.endswith(".config"))


def _attrs(name):
    with open(os.path.join(FIXTURE_DIR, name + ".attrs")) as handle:
        return dict(line.strip().split("=", 1) for line in handle if "=" in line)


@pytest.mark.skipif(not _fixtures(), reason="the H200 config space fixture has not landed yet")
def test_real_h200_node(tmp_path, monkeypatch):
    """The two GPUs of nvidia-h200-x2 as read there (config bytes and sysfs attributes)."""
    write_tree(tmp_path, {"proc/self/uid_map": IDENTITY, ".dockerenv": ""})
    originals = {}
    for name in _fixtures():
        bdf = name[len("h200-"):].replace("_", ":")
        attrs = _attrs(name)
        data = read_bytes(os.path.join(FIXTURE_DIR, name + ".config"))
        originals[bdf] = data
        add_device(tmp_path, bdf, data, driver="nvidia", numa_node=int(attrs["numa_node"]),
                   link=dict((k, v) for k, v in attrs.items() if "link" in k))
    paths = make_paths(tmp_path)
    monkeypatch.setattr(pc, "_pwrite", lambda *a: pytest.fail("wrote config space"))
    result = pm.run(params(), check_mode=True, paths=paths)
    assert result["changed"] is False and result["container"]["detected"] is False
    assert [d["bdf"] for d in result["devices"]] == sorted(originals)
    for dev in result["devices"]:
        assert (dev["vendor"], dev["device"], dev["class"], dev["express_cap"]) == ("0x10de", "0x2335", "0x030200", "0x60")
        assert (dev["devctl_before"], dev["mrrs_before"], dev["mps"], dev["changed"]) == ("0x5134", 4096, 256, False)
        assert (dev["link"]["gen"], dev["link"]["width"], dev["link"]["capable_gen"], dev["link"]["capable_width"],
                dev["link"]["degraded"]) == (5, 16, 5, 16, False)
        assert dev["link"]["sysfs"]["current_link_speed"] == "32.0 GT/s PCIe"
    monkeypatch.undo()
    # 512 on the copies in the fake tree: each file differs from the real bytes in bits 14:12 only.
    first = sorted(originals)[0]
    result = pm.run(params(size=512, devices=[first]), paths=paths)
    assert by_bdf(result)[first]["devctl_after"] == "0x2134"
    assert config_of(tmp_path, first) == with_word(originals[first], 0x68, 0x2134)
    assert read_bytes(os.path.join(FIXTURE_DIR, "h200-%s.config" % first.replace(":", "_"))) == originals[first]
    shutil.rmtree(str(tmp_path / "sys"))


# ------------------------------------------------------- what runs as root stays root's

def test_the_helper_never_runs_with_the_modules_own_python(tmp_path):
    """A localhost inventory runs the module with the checkout's virtualenv: whoever can write
    that would run as root at every boot. Only fixed system paths are looked at, never PATH."""
    assert pm.SYSTEM_PYTHONS == ("/usr/bin/python3", "/usr/libexec/platform-python")
    assert pm.Paths().interpreters == pm.SYSTEM_PYTHONS
    nowhere = (str(tmp_path / "usr/bin/python3"), str(tmp_path / "usr/libexec/platform-python"))
    assert pm.Paths(str(tmp_path)).interpreters == nowhere
    assert pm.Paths(str(tmp_path)).interpreter is None
    assert pm.system_interpreter(nowhere) is None


def test_without_a_system_python_persisting_is_refused_and_the_runtime_part_still_works(node):
    tmp_path, paths = node
    paths.interpreters = (str(tmp_path / "usr/bin/python3-missing"), str(tmp_path / "usr/libexec/platform-python"))
    before = snapshot(tmp_path)
    for check_mode in (True, False):
        with pytest.raises(ModuleFailure) as exc:
            pm.run(params(persist=True), check_mode=check_mode, paths=paths)
        message = exc.value.message
        assert message.startswith("cannot install the udev rule and its helper, nothing was changed: no system "
                                  "Python for the udev helper: none of %s, %s exists" % paths.interpreters), message
        assert "never runs with the Python that runs this module" in message
        assert message.endswith("Setting MRRS does not need them: persist=false sets it now, until the next "
                                "reboot or driver reload")
        assert by_bdf(exc.value.partial)[GPU0]["mrrs_before"] == 512
        assert snapshot(tmp_path) == before
    result = pm.run(params(persist=False), paths=paths)
    assert result["changed"] is True and by_bdf(result)[GPU0]["mrrs_after"] == 4096
    assert result["persisted"] is False


def test_the_helper_starts_isolated_from_the_environment_and_its_own_directory(node):
    """udev runs the helper through its #! line; -IS keeps a planted module out of a root process."""
    tmp_path, paths = node
    pm.run(params(persist=True, size=128), paths=paths)
    with open(paths.helper) as handle:
        assert handle.readline() == "#!%s -IS\n" % (tmp_path / "usr/bin/python3")
    marker = tmp_path / "planted-code-ran"
    plant = "open(%r, 'a').write(__name__ + '\\n')\n" % str(marker)
    write_tree(tmp_path, {"usr/local/libexec/gpufleet/argparse.py": plant, "pythonpath/struct.py": plant,
                          "pythonpath/sitecustomize.py": plant})
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "pythonpath"),
           "PYTHONSTARTUP": str(tmp_path / "pythonpath/struct.py")}
    proc = subprocess.run([paths.helper, "--sysfs", paths.sysfs, "--size", "4096", GPU0], env=env, cwd="/",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "%s: MRRS 128 -> 4096 (Device Control 0x0134 -> 0x5134)\n" % GPU0
    assert not marker.exists(), marker.read_text()


def test_linux_hands_the_combined_flags_to_python_as_one_argument(tmp_path):
    """One argument after the interpreter on a #! line: -IS must mean both flags."""
    python = make_paths(tmp_path).interpreter
    first = pm.render_helper(python).split("\n", 1)[0]
    script = tmp_path / "flags"
    script.write_text(first + "\nimport sys\nprint(sys.flags.isolated, sys.flags.no_site, "
                      "sys.flags.ignore_environment, 'site' in sys.modules)\n")
    os.chmod(str(script), 0o755)
    out = subprocess.run([str(script)], env={"PYTHONPATH": "/nonexistent"}, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    assert out == "1 1 1 False\n"


def test_the_helper_is_pci_config_without_its_no_op_future_import(tmp_path):
    """RHEL 8's platform-python is 3.6, which does not know the annotations future: pci_config
    has no annotation, so the helper leaves the import out and parses as 3.6 code."""
    import ast
    source = pm.helper_source()
    assert "from __future__ import annotations\n" in source
    tree = ast.parse(source)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)
                or (isinstance(n, ast.arg) and n.annotation is not None)
                or (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None)]
    helper = pm.render_helper("/usr/libexec/platform-python")
    assert "from __future__" not in helper
    ast.parse(helper, feature_version=(3, 6))


@pytest.mark.parametrize("interpreter", ["python3", "/opt/my python/bin/python3"])
def test_the_interpreter_is_an_absolute_path_without_blanks(interpreter):
    with pytest.raises(ValueError):
        pm.render_helper(interpreter)


@pytest.mark.parametrize("helper", ["pcie-maxreadreq", "/usr/local/lib exec/x", '/x"y', "/x$y", "/x%y"])
def test_the_rule_runs_the_helper_by_an_absolute_path_udev_reads_as_one(helper):
    spec = pm.validate(params(persist=True))
    with pytest.raises(ValueError) as exc:
        pm.render_rule(spec, helper)
    assert "cannot go into a udev RUN key" in str(exc.value)


@pytest.mark.parametrize("where, how", [
    ("usr/local", lambda p: os.chmod(p, 0o777)),
    ("usr/local/libexec", lambda p: os.chown(p, USER, USER)),
    ("etc/udev/rules.d", lambda p: os.chmod(p, 0o775)),
    ("etc", lambda p: os.chmod(p, 0o1777)),
])
def test_persistence_where_another_user_could_change_it_is_refused_before_any_write(node, where, how):
    tmp_path, paths = node
    os.makedirs(str(tmp_path / "usr/local/libexec"), exist_ok=True)
    os.makedirs(str(tmp_path / "etc/udev/rules.d"), exist_ok=True)
    how(str(tmp_path / where))
    st = os.stat(str(tmp_path / where))
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(persist=True), paths=paths)
    message = exc.value.message
    assert message.startswith("cannot install the udev rule and its helper, nothing was changed: %s: is "
                              % (tmp_path / where)), message
    assert "(owner %s, group gid %d, mode %04o)" % (
        pm.trust.describe_owner(st.st_uid), st.st_gid, st.st_mode & 0o7777) in message
    assert "persist=false sets it now" in message
    assert snapshot(tmp_path) == before  # no config space write either


def test_an_interpreter_in_a_users_virtualenv_is_refused(node):
    """The README's localhost case: the system path links to a venv a user can write."""
    tmp_path, paths = node
    venv = tmp_path / "home/alice/checkout/.venv/bin"
    venv.mkdir(parents=True)
    os.symlink(REAL_PYTHON, str(venv / "python3"))
    os.chown(str(tmp_path / "home/alice"), USER, USER)
    os.unlink(str(tmp_path / "usr/bin/python3"))
    os.symlink(str(venv / "python3"), str(tmp_path / "usr/bin/python3"))
    with pytest.raises(ModuleFailure) as exc:
        pm.run(params(persist=True), paths=paths)
    assert exc.value.message.startswith("cannot install the udev rule and its helper, nothing was changed: %s: is not "
                                        "owned by uid 0 (root) (owner uid 1000" % (tmp_path / "home/alice"))
    assert "the interpreter %s, which root runs %s with" % (tmp_path / "usr/bin/python3", paths.helper) \
        in exc.value.message
    assert not os.path.exists(paths.helper)


def test_a_helper_left_owned_by_a_user_is_given_back_to_root(node):
    tmp_path, paths = node
    pm.run(params(persist=True), paths=paths)
    os.chown(paths.helper, USER, USER)
    os.chown(paths.rule, USER, 0)
    result = pm.run(params(persist=True), paths=paths)
    assert result["changed"] is True
    assert [(os.stat(p).st_uid, os.stat(p).st_gid) for p in (paths.helper, paths.rule)] == [(0, 0), (0, 0)]
    assert [(e["after_header"], e["before"], e["after"]) for e in result["diff"][1:]] == [
        ("%s owner and mode (after)" % paths.helper, "owner = 1000:1000\n", "owner = 0:0\n"),
        ("%s owner and mode (after)" % paths.rule, "owner = 1000:0\n", "owner = 0:0\n")]
    assert pm.run(params(persist=True), paths=paths)["changed"] is False


def test_umask_000_still_installs_root_owned_0755_directories(node):
    tmp_path, paths = node
    old = os.umask(0)
    try:
        pm.run(params(persist=True), paths=paths)
    finally:
        os.umask(old)
    for rel in ("usr/local", "usr/local/libexec", "usr/local/libexec/gpufleet", "etc", "etc/udev", "etc/udev/rules.d"):
        st = os.stat(str(tmp_path / rel))
        assert (rel, st.st_mode & 0o7777, st.st_uid, st.st_gid) == (rel, 0o755, 0, 0)
    assert [(os.stat(p).st_mode & 0o7777, os.stat(p).st_uid) for p in (paths.helper, paths.rule)] == \
        [(0o755, 0), (0o644, 0)]


def test_container_reports_persistence_it_could_not_install_safely(node):
    tmp_path, paths = node
    write_tree(tmp_path, PRIVILEGED_PODMAN)
    os.makedirs(str(tmp_path / "usr/local"))
    os.chmod(str(tmp_path / "usr/local"), 0o777)
    result = pm.run(params(devices=[GPU1], persist=True), paths=paths)
    assert result["changed"] is False
    assert "the plan would install it, which it cannot do safely: %s: is writable by every user" % (
        tmp_path / "usr/local") in result["skipped_keys"]["udev rule"]
