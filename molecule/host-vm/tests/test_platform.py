# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM offers what the feature tests beside this file rely on (scripts/harness/vm).

If one of these fails, the harness changed, not the role: a real kernel with loadable modules
(and no nvidia ones), PCI Express devices behind root ports, ACPI C-states from the harness's
SSDT with the fake deep ones left disabled, and a clean reboot inside the same QEMU.
These tests read the guest; they leave it as they found it.
"""

from __future__ import annotations

import json
import struct

PCI_EXP_CAP_ID = 0x10
E1000E = (0x8086, 0x10D3)
NVME_CLASS = 0x010802


def test_real_debian_kernel_under_qemu(host):
    assert host.system_info.distribution == "debian"
    assert host.system_info.codename == "bookworm"
    assert host.run("systemd-detect-virt").stdout.strip() == "qemu"
    release = host.run("uname -r").stdout.strip()
    assert release.endswith("-amd64")
    assert host.file("/lib/modules/%s/modules.dep" % release).exists


def test_modules_load_and_nvidia_peermem_is_absent(host):
    loaded_before = host.file("/proc/modules").content_string
    assert "\ndummy " not in "\n" + loaded_before, "dummy is loaded before the test"
    host.run_test("modprobe dummy")
    try:
        assert "\ndummy " in "\n" + host.file("/proc/modules").content_string
    finally:
        host.run_test("modprobe -r dummy")
    missing = host.run("modprobe nvidia_peermem")
    assert missing.rc != 0
    assert "Module nvidia_peermem not found in directory /lib/modules/" in missing.stderr


# One ssh round trip: every PCI function's class, config space and upstream device.
PCI_DUMP = """python3 -c '
import json, os
out = {}
for name in sorted(os.listdir("/sys/bus/pci/devices")):
    path = os.path.realpath("/sys/bus/pci/devices/" + name)
    with open(path + "/config", "rb") as handle:
        config = handle.read()
    with open(path + "/class") as handle:
        devclass = int(handle.read(), 16)
    out[name] = {"class": devclass, "config": config.hex(), "parent": os.path.basename(os.path.dirname(path))}
print(json.dumps(out))'"""


def _pci_devices(host):
    """{address: {"class", "config" (bytes), "parent"}} of every PCI function, from sysfs."""
    devices = json.loads(host.check_output(PCI_DUMP))
    for device in devices.values():
        device["config"] = bytes.fromhex(device["config"])
    return devices


def _express_cap(config):
    """Offset of the PCI Express capability in a config space, or None."""
    if not struct.unpack_from("<H", config, 0x06)[0] & 0x10:
        return None
    offset, seen = config[0x34] & 0xFC, set()
    while offset and offset not in seen:
        seen.add(offset)
        if config[offset] == PCI_EXP_CAP_ID:
            return offset
        offset = config[offset + 1] & 0xFC
    return None


def test_nic_and_nvme_are_pci_express_endpoints_behind_root_ports(host):
    devices = _pci_devices(host)
    found = {}
    for address, device in devices.items():
        vendor, device_id = struct.unpack_from("<HH", device["config"], 0)
        if (vendor, device_id) == E1000E:
            found["e1000e"] = address
        elif device["class"] == NVME_CLASS:
            found["nvme"] = address
    assert sorted(found) == ["e1000e", "nvme"], sorted(devices)
    for name, address in found.items():
        config = devices[address]["config"]
        assert len(config) == 4096, "%s: %d bytes of config space readable" % (name, len(config))
        cap = _express_cap(config)
        assert cap is not None, "%s (%s) has no PCI Express capability" % (name, address)
        port_type = (struct.unpack_from("<H", config, cap + 2)[0] >> 4) & 0xF
        assert port_type == 0, "%s is not a PCI Express endpoint (type %d)" % (name, port_type)
        # QEMU keeps Max_Read_Request_Size at 128 bytes whatever is written to Device Control.
        devctl = struct.unpack_from("<H", config, cap + 8)[0]
        assert 128 << ((devctl >> 12) & 0x7) == 128
        parent = devices.get(devices[address]["parent"])
        assert parent is not None, "%s (%s) sits on a root bus, not behind a port" % (name, address)
        up_cap = _express_cap(parent["config"])
        assert up_cap is not None and (struct.unpack_from("<H", parent["config"], up_cap + 2)[0] >> 4) & 0xF == 4, \
            "%s is not behind a PCI Express root port (%s)" % (name, devices[address]["parent"])


def test_acpi_idle_offers_poll_c1_c2_c3_with_the_fake_deep_states_disabled(host):
    assert host.file("/sys/devices/system/cpu/cpuidle/current_driver").content_string.strip() == "acpi_idle"
    out = host.check_output("grep -H . /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/name "
                            "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable")
    cpus = {}
    for line in out.splitlines():
        path, _sep, value = line.partition(":")
        cpu, state, attr = path.split("/")[5], path.split("/")[7], path.split("/")[8]
        cpus.setdefault(cpu, {}).setdefault(state, {})[attr] = value
    assert len(cpus) == int(host.check_output("nproc")), cpus
    for cpu, states in cpus.items():
        by_name = dict((s["name"], s["disable"]) for s in states.values())
        assert sorted(by_name) == ["C1", "C2", "C3", "POLL"], "%s: %s" % (cpu, by_name)
        # C2/C3 are I/O-port reads nothing answers: entered, they busy-loop a host core.
        assert by_name["C2"] == "1" and by_name["C3"] == "1", "%s: fake deep states enabled: %s" % (cpu, by_name)


def test_the_scenario_rebooted_the_guest(rebooted, host):
    """reboot.yml rebooted the guest inside the same QEMU (the -snapshot overlay stays)."""
    uptime = float(host.file("/proc/uptime").content_string.split()[0])
    assert rebooted["before"] != rebooted["after"]
    assert uptime < 3600
