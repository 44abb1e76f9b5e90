# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.tuning.pcie_acs on a real kernel and QEMU's PCI Express root ports (issue 18).

The guest's e1000e and nvme sit behind two QEMU pcie-root-ports. QEMU gives each root port an
ACS capability (hw/pci/pcie.c pcie_acs_init: Source Validation, Translation Blocking, P2P
Request Redirect, P2P Completion Redirect, Upstream Forwarding and Direct Translated P2P, all
writable in ACS Control), so the path between the two endpoints is exactly what the module
clears on a GPU host: both root ports, below the root complex they share. The guest boots
without an IOMMU, so the kernel leaves ACS Control at 0; each test sets the redirect bits
itself the way the kernel does with an IOMMU on, with pciutils' setpci (an independent path to
config space: the module never runs it), and leaves the ports at 0 afterwards.

QEMU's ports take every write to a bit they advertise, so the refusal path (a port whose
read-back differs) is covered by the unit tests' fake trees, not here.
"""

from __future__ import annotations

import pytest

MODULE = "gpufleet.tuning.pcie_acs"
RULE = "/etc/udev/rules.d/90-gpufleet-pcie-acs.rules"
HELPER = "/usr/local/libexec/gpufleet/pcie-acs"
STATE = "/var/lib/gpufleet-tuning/pcie-acs/state.json"
REDIRECT = 0x001C  # RR | CR | UF
QEMU_ACS_CAP = 0x005F  # SV | TB | RR | CR | UF | DT


def acs(host, bdf, offset):
    return int(host.check_output("setpci -s %s ECAP0d+%d.w" % (bdf, offset)), 16)


def set_ctrl(host, bdf, value):
    host.check_output("setpci -s %s ECAP0d+6.w=%04x" % (bdf, value))


@pytest.fixture
def ports(host, endpoints):
    """The two root ports above the e1000e and the nvme, with RR, CR and UF set (as the kernel
    sets them with an IOMMU on); put back to 0 and the module's files removed afterwards."""
    found = []
    for name in ("e1000e", "nvme"):
        real = host.check_output("readlink -f /sys/bus/pci/devices/%s" % endpoints[name])
        found.append(real.rstrip("/").split("/")[-2])
    for bdf in found:
        set_ctrl(host, bdf, REDIRECT)
    yield sorted(found)
    for bdf in found:
        set_ctrl(host, bdf, 0)
    host.run("rm -f %s %s %s && udevadm control --reload" % (RULE, HELPER, STATE))


@pytest.fixture
def args(endpoints):
    return {"devices": sorted(endpoints.values())}


def test_qemu_root_ports_advertise_acs(host, ports):
    for bdf in ports:
        assert acs(host, bdf, 4) == QEMU_ACS_CAP, bdf
        assert acs(host, bdf, 6) == REDIRECT, bdf


def test_check_mode_plans_both_root_ports_and_writes_nothing(host, ports, args, run_module):
    result = run_module(MODULE, dict(args, persist=True), check=True)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    bridges = dict((b["bdf"], b) for b in result["bridges"])
    assert sorted(bridges) == ports
    for bdf in ports:
        bridge = bridges[bdf]
        assert bridge["port_type"] == "root port", bridge
        assert int(bridge["capability"], 16) == acs(host, bdf, 4)
        assert int(bridge["ctrl_before"], 16) == REDIRECT and int(bridge["ctrl_after"], 16) == 0, bridge
        assert sorted(bridge["cleared"]) == ["completion_redirect", "request_redirect", "upstream_forwarding"]
        assert acs(host, bdf, 6) == REDIRECT, "check mode wrote %s" % bdf
    targets = [rec["target"] for rec in result["changes"] if rec["kind"] == "value"]
    assert len(targets) == 2 and all(any(bdf in target for bdf in ports) for target in targets), targets
    assert not host.file(RULE).exists and not host.file(STATE).exists


def test_apply_clears_reads_back_persists_and_is_idempotent(host, ports, args, run_module):
    first = run_module(MODULE, dict(args, persist=True))
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] is True and first["persisted"] is True
    for bdf in ports:
        assert acs(host, bdf, 6) == 0, bdf
    assert host.file(RULE).is_file and host.file(HELPER).is_file and host.file(STATE).is_file
    second = run_module(MODULE, dict(args, persist=True))
    assert second["changed"] is False, second.get("diff")
    assert second["changes"] == []


def test_the_udev_rule_clears_the_bits_again_after_a_hotplug_event(host, ports, args, run_module):
    assert not run_module(MODULE, dict(args, persist=True)).get("failed")
    for bdf in ports:
        set_ctrl(host, bdf, REDIRECT)  # as a bridge reset or the kernel at boot leaves it
        host.check_output("udevadm trigger --action=add --settle /sys/bus/pci/devices/%s" % bdf)
    for bdf in ports:
        assert acs(host, bdf, 6) == 0, "the udev helper did not clear %s again" % bdf


def test_absent_restores_the_recorded_words_and_removes_the_rule(host, ports, args, run_module):
    assert not run_module(MODULE, dict(args, persist=True)).get("failed")
    gone = run_module(MODULE, {"state": "absent"})
    assert not gone.get("failed"), gone.get("msg")
    assert gone["changed"] is True
    for bdf in ports:
        assert acs(host, bdf, 6) == REDIRECT, bdf
    assert not host.file(RULE).exists and not host.file(HELPER).exists
    again = run_module(MODULE, {"state": "absent"})
    assert again["changed"] is False, again.get("diff")
