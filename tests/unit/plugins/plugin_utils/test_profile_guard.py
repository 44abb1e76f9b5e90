"""Guard rails (plugin_utils/profile_guard.py and the filter gpufleet.tuning.profile_guard): no
identity IOMMU on the Blackwell platforms, the CPUs left to housekeeping, no PCIe writes from a
container, no ACS change in a VM; waived rails reported, not enforced; the kernel's CPU lists."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter import profile as profile_filter
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_data, profile_guard, profile_node
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_select
from ansible_collections.gpufleet.tuning.tests.unit import profile_facts as pf


def shipped():
    return profile_data.load_dir(pf.PROFILES_DIR)


def profile_of(facts, **kwargs):
    return profile_select.select(profile_node.describe(facts), shipped(), **kwargs)


def guard(values, facts, **kwargs):
    """The filter's lines for ``values`` under the profile chosen for ``facts``."""
    return profile_guard.profile_guard(values, profile_of(facts, **kwargs))


# ------------------------------------------------------------------------------ no identity IOMMU

IDENTITY = ["iommu=pt", "iommu.passthrough=1", "iommu.passthrough=on", "iommu.passthrough=Y", "amd_iommu=pt",
            "intel_iommu=pt", "intel_iommu=on,pt", "intel_iommu=pt,sm_on"]
HARMLESS = ["amd_pstate=active", "iommu=on", "iommu.passthrough=0", "amd_iommu=on", "intel_iommu=on", "intel_iommu=sm_on",
            "iommu.strict=1", "pci=realloc", "pcie_aspm=off", "xiommu=pt"]


@pytest.mark.parametrize("shape", ["hgx-b200", "rtx-pro-6000-x8"])
@pytest.mark.parametrize("variable", ["host_cmdline_present", "host_cmdline_extra"])
@pytest.mark.parametrize("arg", IDENTITY)
def test_identity_iommu_is_refused_on_blackwell(shape, variable, arg):
    values = {"host_cmdline_present": [], "host_cmdline_extra": []}
    values[variable] = ["amd_pstate=active", arg]
    lines = guard(values, pf.shape(shape))
    assert len(lines) == 1
    assert lines[0].startswith("guard rail no_identity_iommu: %s holds %r (forcing identity (passthrough) IOMMU domains "
                               "on NVIDIA Blackwell GPUs" % (variable, arg))


@pytest.mark.parametrize("shape", ["hgx-b200", "rtx-pro-6000-x8"])
def test_other_kernel_arguments_are_fine_on_blackwell(shape):
    assert guard({"host_cmdline_present": HARMLESS, "host_cmdline_extra": ["isolcpus=4-7"]}, pf.shape(shape)) == []


def test_every_identity_argument_is_named():
    lines = guard({"host_cmdline_present": ["iommu=pt"], "host_cmdline_extra": ["amd_iommu=pt", "quiet"]}, pf.hgx_b200())
    assert [line.split(" (")[0] for line in lines] == [
        "guard rail no_identity_iommu: host_cmdline_present holds 'iommu=pt'",
        "guard rail no_identity_iommu: host_cmdline_extra holds 'amd_iommu=pt'"]


@pytest.mark.parametrize("shape", ["hgx-h100", "h100-nvl-pair", "l40s-x4", "a100", "no-gpu"])
def test_identity_iommu_is_fine_elsewhere(shape):
    assert guard({"host_cmdline_present": ["iommu=pt"], "host_cmdline_extra": []}, pf.shape(shape)) == []


def test_blackwell_is_refused_identity_iommu_on_a_pin_too():
    # a Blackwell node pinned elsewhere holds that platform's rails, not Blackwell's
    assert guard({"host_cmdline_present": ["iommu=pt"]}, pf.hgx_b200(), pin="hgx-hopper") == []
    # any node pinned to a Blackwell platform holds its rails
    assert len(guard({"host_cmdline_present": ["iommu=pt"]}, pf.hgx_h100(), pin="hgx-blackwell")) == 1


# ------------------------------------------------------------------------------ housekeeping CPUs

def rtx(online="0-127"):
    facts = pf.rtx_pro_6000_x8()
    facts["cpu"]["online"] = pf.env(online, "/sys/devices/system/cpu/online") if online is not None else pf.unknown(
        "/sys/devices/system/cpu/online", "Permission denied")
    return facts


@pytest.mark.parametrize("args", [
    ["isolcpus=managed_irq,domain,2-127"],
    ["isolcpus=2-127"],
    ["nohz_full=2-127"],
    ["isolcpus=domain,2-63", "nohz_full=64-127"],
    ["isolcpus=nohz,managed_irq,2-127", "nohz_full=2-127", "rcu_nocbs=2-127"],
    ["isolcpus=4-255"],  # CPUs beyond those online isolate nothing more
    ["rcu_nocbs=0-127", "irqaffinity=0"],  # not isolation the rail counts
])
def test_isolation_that_leaves_two_cpus_is_fine(args):
    assert guard({"host_cmdline_extra": args}, rtx()) == []


@pytest.mark.parametrize("args, left", [
    (["isolcpus=managed_irq,domain,0-126"], 1),
    (["isolcpus=1-127"], 1),
    (["nohz_full=1-127"], 1),
    (["isolcpus=domain,2-63", "nohz_full=1-127"], 1),
    (["isolcpus=domain,2-64", "nohz_full=0,65-127"], 1),
    (["isolcpus=0-127"], 0),
])
def test_isolation_that_leaves_fewer_than_two_cpus_is_refused(args, left):
    lines = guard({"host_cmdline_present": [], "host_cmdline_extra": args}, rtx())
    assert len(lines) == 1
    assert lines[0].startswith("guard rail housekeeping_cpus: %s leave %d of the 128 online CPUs (0-127) to housekeeping, "
                               "fewer than 2 (CPU isolation" % (", ".join(args), left))


def test_isolation_in_host_cmdline_present_counts_too():
    lines = guard({"host_cmdline_present": ["iommu=pt", "isolcpus=1-15"], "host_cmdline_extra": []},
                  pf.build_facts([pf.gpu("0000:17:00.0", pf.L40S)], online="0-15"))
    assert lines[0].startswith("guard rail housekeeping_cpus: isolcpus=1-15 leave 1 of the 16 online CPUs (0-15)")


def test_isolation_with_the_online_cpus_unknown_is_refused():
    lines = guard({"host_cmdline_extra": ["isolcpus=2-7"]}, rtx(online=None))
    assert lines == ["guard rail housekeeping_cpus: 6 CPUs isolated (isolcpus=2-7), but the node's online CPUs are unknown: "
                     "the housekeeping CPUs left cannot be counted (CPU isolation (isolcpus=, nohz_full=) that leaves fewer "
                     "than two CPUs for the kernel's housekeeping (timers, RCU, interrupts, the serving stack's own threads) "
                     "stalls the node)"]
    assert guard({"host_cmdline_extra": ["quiet"]}, rtx(online=None)) == []


def test_an_unreadable_isolation_list_is_refused():
    lines = guard({"host_cmdline_extra": ["isolcpus=domain,two-seven"]}, rtx())
    assert lines[0].startswith("guard rail housekeeping_cpus: host_cmdline_present/host_cmdline_extra: 'two-seven' is not a "
                               "CPU list (like 0-3,8)")


def test_a_stricter_rail_from_the_inventory():
    data = profile_data.extend(shipped(), {"base": {"guard_rails": [
        {"name": "housekeeping_cpus", "why": "keep four", "min_housekeeping_cpus": 4,
         "variables": ["host_cmdline_present", "host_cmdline_extra"]}]}})
    profile = profile_select.select(profile_node.describe(rtx()), data)
    assert profile_guard.profile_guard({"host_cmdline_extra": ["isolcpus=4-127"]}, profile) == []
    assert profile_guard.profile_guard({"host_cmdline_extra": ["isolcpus=3-127"]}, profile) == [
        "guard rail housekeeping_cpus: isolcpus=3-127 leave 3 of the 128 online CPUs (0-127) to housekeeping, fewer than 4 "
        "(keep four)"]


def test_an_unreadable_online_list_is_a_problem_not_an_exception():
    profile = profile_of(rtx(online="0-127,abc"))
    lines = profile_guard.profile_guard({"host_cmdline_extra": ["isolcpus=2-127"]}, profile)
    assert len(lines) == 1 and "housekeeping_cpus" in lines[0]


# ------------------------------------------------------------------------------ containers and VMs

@pytest.mark.parametrize("variable", ["host_pcie_allow_in_container", "host_pcie_acs_allow_in_container"])
@pytest.mark.parametrize("value", [True, "True"])
def test_pcie_writes_from_an_lxc_guest_are_refused(variable, value):
    lines = guard({variable: value}, pf.lxc_l40s())
    assert lines == ["guard rail no_pcie_writes_in_a_container: %s is True, must be False (a container shares its host's "
                     "PCIe devices: writing their config space from a guest changes the host's hardware behind its back; "
                     "tune the host instead)" % variable]


def test_pcie_writes_from_another_container_are_refused():
    facts = pf.build_facts([pf.gpu("0000:17:00.0", pf.L40S)], kind="docker")
    assert len(guard({"host_pcie_allow_in_container": True}, facts)) == 1


@pytest.mark.parametrize("shape", ["l40s-x4", "rtx-pro-6000-x8", "vm-h100-x1"])
def test_pcie_writes_outside_a_container_are_not_this_rail_s(shape):
    assert guard({"host_pcie_allow_in_container": True, "host_pcie_acs_allow_in_container": True}, pf.shape(shape)) == []


def test_a_container_with_the_defaults_is_fine():
    assert guard({"host_pcie_allow_in_container": False, "host_pcie_acs_allow_in_container": "False",
                  "host_pcie_acs_enabled": True}, pf.lxc_l40s()) == []


@pytest.mark.parametrize("value", [True, "True"])
def test_an_acs_change_in_a_vm_is_refused(value):
    lines = guard({"host_pcie_acs_enabled": value}, pf.vm_h200_x2())
    assert lines == ["guard rail no_acs_change_in_a_vm: host_pcie_acs_enabled is True, must be False (a VM's PCIe bridges "
                     "are the hypervisor's emulation: clearing ACS there does not reach the physical switches between the "
                     "GPUs; change ACS on the hypervisor host)"]


@pytest.mark.parametrize("shape", ["rtx-pro-6000-x8", "hgx-h100", "lxc-l40s"])
def test_an_acs_change_outside_a_vm_is_fine(shape):
    assert guard({"host_pcie_acs_enabled": True}, pf.shape(shape)) == []


def rtx_vm():
    """The RTX PRO 6000 server's GPUs passed into a KVM guest."""
    facts = pf.rtx_pro_6000_x8()
    facts["host"]["proxmox"] = pf.env(False, "/usr/share/pve-manager")
    facts["host"]["virtualization"] = pf.env("kvm", "/sys/devices/system/clocksource/clocksource0/available_clocksource")
    return facts


def test_a_vm_with_rtx_pro_6000_cards_gets_a_usable_profile():
    profile = profile_of(rtx_vm())
    assert profile["violations"] == [] and profile["settings"]["host_pcie_acs_enabled"] is False
    assert profile["sources"]["host_pcie_acs_enabled"] == "platform rtx-pro-6000-blackwell on a vm node"


# ------------------------------------------------------------------------------ waived rails

def test_a_waived_rail_is_reported_not_enforced():
    profile = profile_of(rtx_vm(), waive=["no_acs_change_in_a_vm", "no_such_rail"])
    assert profile["waived"] == ["no_acs_change_in_a_vm"]
    found = profile_guard.violations({"host_pcie_acs_enabled": True}, profile["guard_rails"], profile["node"],
                                     waive=profile["waived"])
    assert [(v["rail"], v["waived"]) for v in found] == [("no_acs_change_in_a_vm", True)]
    assert profile_guard.message(found) == ""
    assert profile_guard.profile_guard({"host_pcie_acs_enabled": True}, profile) == []
    # the other rails still hold
    assert profile_guard.profile_guard({"host_cmdline_present": ["iommu=pt"]}, profile)[0].startswith(
        "guard rail no_identity_iommu: host_cmdline_present holds 'iommu=pt'")


def test_violations_and_message_directly():
    rails = shipped()["platforms"]["hgx-blackwell"]["guard_rails"] + shipped()["base"]["guard_rails"]
    node = {"kind": "vm", "cpus_online": "0-3"}
    found = profile_guard.violations({"host_cmdline_extra": ["iommu=pt", "isolcpus=1-3"], "host_pcie_acs_enabled": True},
                                     rails, node, waive=["no_identity_iommu"])
    assert [(v["rail"], v["waived"]) for v in found] == [
        ("no_identity_iommu", True), ("housekeeping_cpus", False), ("no_acs_change_in_a_vm", False)]
    message = profile_guard.message(found)
    assert message.startswith("guard rail housekeeping_cpus: isolcpus=1-3 leave 1 of the 4 online CPUs (0-3)")
    assert "; guard rail no_acs_change_in_a_vm: host_pcie_acs_enabled is True, must be False (" in message
    assert "no_identity_iommu" not in message
    assert profile_guard.violations({}, None, node) == []


def test_the_filter():
    profile = profile_of(pf.hgx_b200())
    assert profile_filter.FilterModule().filters()["profile_guard"] is profile_filter.profile_guard
    assert profile_filter.profile_guard({"host_cmdline_present": ["iommu=pt"]}, profile)[0].startswith(
        "guard rail no_identity_iommu")
    assert profile_filter.profile_guard({"host_cmdline_present": ["iommu=pt"]}, None) == []
    assert profile_filter.profile_guard({"host_cmdline_present": ["iommu=pt"]}, {}) == []
    with pytest.raises(AnsibleFilterError, match="profile_guard: the input must map host role variables to their values, got list"):
        profile_filter.profile_guard(["iommu=pt"], profile)


def test_variables_are_the_rails_inputs_once_each():
    assert profile_guard.variables(profile_of(pf.rtx_pro_6000_x8())) == [
        "host_cmdline_present", "host_cmdline_extra", "host_pcie_allow_in_container", "host_pcie_acs_allow_in_container",
        "host_pcie_acs_enabled"]
    assert profile_guard.variables(None) == [] and profile_guard.variables({}) == []


def test_plain_values():
    assert profile_guard.plain_values({"a": "True", "b": "False", "c": "true", "d": 1, "e": ["x"]}) == {
        "a": True, "b": False, "c": "true", "d": 1, "e": ["x"]}


# ------------------------------------------------------------------------------ CPU lists

@pytest.mark.parametrize("text, cpus", [
    ("0", {0}),
    ("0-3", {0, 1, 2, 3}),
    ("0-3,8", {0, 1, 2, 3, 8}),
    (" 0-1 , 4 ", {0, 1, 4}),
    ("0-3,,8,", {0, 1, 2, 3, 8}),
    ("", set()),
    ("2-127", set(range(2, 128))),
    (7, {7}),
])
def test_cpu_set_reads_the_kernel_s_lists(text, cpus):
    assert profile_guard.cpu_set(text) == cpus


@pytest.mark.parametrize("text", ["a", "0-", "-3", "0-x", "0..3", "1;2", "0-3:x/4", "0x1", "1.5", "0-3-5"])
def test_cpu_set_refuses_what_is_not_a_cpu_list(text):
    with pytest.raises(ValueError, match=r"is not a CPU list"):
        profile_guard.cpu_set(text)


@pytest.mark.parametrize("text, cpus", [
    ("0-15:2/4", {0, 1, 4, 5, 8, 9, 12, 13}),
    ("0-127:1/4", set(range(0, 128, 4))),
    ("100-200:2/25", {100, 101, 125, 126, 150, 151, 175, 176, 200}),
])
def test_cpu_set_reads_the_kernel_s_groups(text, cpus):
    assert profile_guard.cpu_set(text) == cpus


def test_a_grouped_isolation_that_leaves_one_cpu_is_refused():
    facts = pf.build_facts([pf.gpu("0000:17:00.0", pf.L40S)], online="0-7")
    assert len(guard({"host_cmdline_extra": ["isolcpus=0-7:7/8"]}, facts)) == 1


@pytest.mark.parametrize("text", ["7-2", "0-15:2"])
def test_cpu_set_refuses_what_the_kernel_refuses(text):
    with pytest.raises(ValueError):
        profile_guard.cpu_set(text)


def test_isolated_reads_isolcpus_flags_and_nohz_full():
    assert profile_guard.isolated(["isolcpus=managed_irq,domain,2-5", "nohz_full=8", "quiet", "isolcpus"]) == {2, 3, 4, 5, 8}
    assert profile_guard.isolated(["rcu_nocbs=1-3", "irqaffinity=0-1"]) == set()
    with pytest.raises(ValueError):
        profile_guard.isolated(["isolcpus=fast,2-5"])
