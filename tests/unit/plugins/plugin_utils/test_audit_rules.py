"""gpufleet.tuning.audit_rules: the shipped rules on fixed fact sets, unknown facts never
becoming findings, and rules that are wrong refused with the rule's name.

The fact sets (tests/unit/fixtures/audit/) are an untuned Proxmox host with 4 H100s, the same
host tuned, a Blackwell PCIe node with ACS redirect and translated IOMMU domains, and the
2 x H200 NVLink machine as measured.
"""

import copy
import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_planned import audit_planned
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import audit_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import cpu_count
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import load_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import plain
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import render
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases as cases

GPUS = ["GPU %d (%s)" % (i, bdf) for i, bdf in enumerate(["0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"])]
BUFFERS = ["net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]


def facts_of(name):
    return cases.fixture(name)["facts"]


def env(value, source="/sys/x"):
    return {"value": value, "source": source}


def unknown(reason, source="nvml:nvmlDeviceGetX"):
    return {"value": None, "source": source, "unknown": reason}


def rule(**overrides):
    """A minimal valid rule, changed by ``overrides`` (a key set to None is removed)."""
    base = {"id": "test_rule", "severity": "P1", "title": "Test rule", "facts": {"v": "thing.v"},
            "when": "v == `1`", "message": "v is {v}", "fix": {"class": "manual", "steps": "do it"},
            "rationale": "because"}
    base.update(overrides)
    return dict((k, v) for k, v in base.items() if v is not None)


def run(facts, *rule_list, **kwargs):
    return audit_rules(facts, list(rule_list), **kwargs)


# ------------------------------------------------------------------------------ shipped rules

SHIPPED = {
    # id: (severity, fix class) for the rules issue 17 asks for
    "peermem_not_loaded": ("P0", "runtime"),
    "gpu_mrrs_low": ("P0", "runtime"),
    "numa_balancing_on": ("P0", "runtime"),
    "cpu_deep_idle_states": ("P0", "runtime"),
    "cpu_governor": ("P0", "runtime"),
    "lxc_memlock_capped": ("P0", "runtime"),
    "nmi_watchdog_on": ("P0", "runtime"),
    "sched_autogroup_on": ("P0", "runtime"),
    "swappiness_high": ("P0", "runtime"),
    "net_buffers_low": ("P0", "runtime"),
    "thp_defrag_always": ("P2", "manual"),
    "pcie_link_width_degraded": ("H", "manual"),
    "pcie_link_speed_degraded": ("P1", "manual"),
    "gpu_remapped_rows_pending": ("H", "manual"),
    "gpu_ecc_uncorrected": ("H", "manual"),
    "gpu_persistence_off": ("P2", "manual"),
    "gpu_clock_events": ("P1", "manual"),
    "gpu_power_limit_below_max": ("P2", "manual"),
    "tuner_tuned_active": ("P1", "manual"),
    "tuner_power_profiles_daemon_active": ("P1", "manual"),
    "tuner_cpupower_enabled": ("P2", "manual"),
    "tuner_irqbalance_active": ("P2", "manual"),
    "iommu_translated": ("P1", "reboot_required"),
    "iommu_translated_blackwell": ("P1", "manual"),
    "p2p_acs_redirect": ("P0", "runtime"),
    "p2p_across_cpus": ("P1", "manual"),
    "p2p_peer_access": ("P1", "manual"),
    "fabric_manager_not_running": ("H", "manual"),
    "kernel_cmdline_reboot_pending": ("P1", "reboot_required"),
    "nvidia_options_reboot_pending": ("P1", "reboot_required"),
    # the health rules (issue 38): severity H, each with its action
    "gpu_remap_failure": ("H", "manual"),
    "gpu_retired_pages_pending": ("H", "manual"),
    "xid_events": ("H", "manual"),
    "gpu_count_driver": ("H", "manual"),
    "gpu_lost": ("H", "manual"),
    "gpu_nvlink_down": ("H", "manual"),
    "gpu_pcie_aer_fatal": ("H", "manual"),
}


def test_the_shipped_rules_load_and_hold_the_rules_asked_for():
    loaded, summary = load_rules(cases.rules())
    by_id = dict((r.id, r) for r in loaded)
    assert len(by_id) == len(loaded)
    for rule_id, (severity, fix_class) in SHIPPED.items():
        assert rule_id in by_id, rule_id
        assert (by_id[rule_id].severity, by_id[rule_id].fix["class"]) == (severity, fix_class), rule_id
    for item in loaded:
        if item.fix["class"] != "manual":
            assert item.fix["module"].startswith("gpufleet.tuning.") and item.fix["tag"] == item.fix["class"], item.id
        # P0 is runtime-fixable: by a module, or by hand at runtime; never one that needs a reboot
        if item.severity == "P0":
            assert item.fix["class"] != "reboot_required", item.id


def test_the_untuned_node():
    result = cases.audit("untuned")
    assert cases.found(result) == set(
        [("peermem_not_loaded", None), ("cpu_deep_idle_states", "C2"), ("cpu_governor", "CPUs 0-191"),
         ("numa_balancing_on", None), ("lxc_memlock_capped", "container 101 (vllm)"),
         ("lxc_memlock_capped", "container 103 (batch)"), ("pcie_link_width_degraded", GPUS[3]),
         ("amd_pstate_not_active", None), ("gpu_remapped_rows_pending", GPUS[2]),
         ("kernel_cmdline_reboot_pending", None), ("nmi_watchdog_on", None), ("sched_autogroup_on", None),
         ("swappiness_high", None), ("gpu_power_limit_below_max", GPUS[1]), ("tuner_irqbalance_active", None)]
        + [("gpu_mrrs_low", gpu) for gpu in GPUS] + [("iommu_translated", gpu) for gpu in GPUS]
        + [("gpu_persistence_off", gpu) for gpu in GPUS] + [("net_buffers_low", key) for key in BUFFERS])
    # a GPU at x8 and one with rows waiting to be remapped are health findings now, ahead of P0
    assert result["counts"]["P0"] == 17 and result["counts"]["H"] == 2 and result["worst"] == "H"
    # The typical untuned state, item by item: P0, with the runtime module that fixes it.
    fixes = {"peermem_not_loaded": "nvidia_peermem", "gpu_mrrs_low": "pcie_maxreadreq",
             "numa_balancing_on": "sysctl_profile", "cpu_deep_idle_states": "cpu_power",
             "lxc_memlock_capped": "lxc_memlock", "nmi_watchdog_on": "sysctl_profile",
             "sched_autogroup_on": "sysctl_profile", "swappiness_high": "sysctl_profile",
             "net_buffers_low": "sysctl_profile"}
    for finding in result["findings"]:
        if finding["rule"] in fixes:
            assert finding["severity"] == "P0", finding
            assert (finding["fix"]["class"], finding["fix"]["module"], finding["fix"]["tag"]) == (
                "runtime", "gpufleet.tuning." + fixes[finding["rule"]], "runtime"), finding
    assert set(fixes) <= set(f["rule"] for f in result["findings"])
    # Most severe first, and the measured values in the message.
    assert [f["severity"] for f in result["findings"]] == sorted(f["severity"] for f in result["findings"])
    mrrs = [f for f in result["findings"] if f["rule"] == "gpu_mrrs_low"][0]
    assert mrrs["message"] == "MRRS is 512 bytes, below 4096"
    assert mrrs["values"]["mrrs"] == 512 and mrrs["sources"]["mrrs"] == "/sys/bus/pci/devices/0000:01:00.0/config"
    assert mrrs["fix"] == {"class": "runtime", "module": "gpufleet.tuning.pcie_maxreadreq", "tag": "runtime",
                           "steps": "set now in config space, and kept across reboots and driver reloads by a udev rule"}
    # Hopper GPUs have no page retirement: unknown with NVML's reason, never a finding.
    # H100s remap rows and do not retire pages: NVML answers Not Supported for both page queries
    assert cases.found(result, "unknown") == set((rule, gpu) for gpu in GPUS
                                                 for rule in ("gpu_retired_pages_pending", "gpu_retired_pages_many"))
    pending = [u for u in result["unknown"] if u["rule"] == "gpu_retired_pages_pending"]
    assert pending[0]["reasons"] == [
        "nvml:nvmlDeviceGetRetiredPagesPendingStatus: nvmlDeviceGetRetiredPagesPendingStatus: Not Supported "
        "(NVML_ERROR_NOT_SUPPORTED)"]
    # NVLink pairs: ACS and sockets do not matter to their P2P.
    assert ("p2p_acs_redirect", "GPUs 0 and 2") in cases.found(result, "not_applicable")
    assert ("p2p_peer_access", "GPUs 0 and 2") in cases.found(result, "optimal")
    json.dumps(result)


def test_the_tuned_node_keeps_only_what_tuning_cannot_fix():
    result = cases.audit("tuned")
    assert cases.found(result) == set([("pcie_link_width_degraded", GPUS[3]), ("gpu_power_limit_below_max", GPUS[1]),
                                       ("tuner_irqbalance_active", None)]
                                      + [("gpu_persistence_off", gpu) for gpu in GPUS])
    assert not [f for f in result["findings"] if f["fix"]["class"] != "manual"]
    assert result["worst"] == "H"  # the GPU at x8 is a health finding
    # A stopped container gets its limit when it starts.
    assert ("lxc_memlock_not_live", "container 103 (batch)") in cases.found(result, "not_applicable")
    assert ("lxc_memlock_not_live", "container 101 (vllm)") in cases.found(result, "optimal")


def test_the_blackwell_node_never_gets_iommu_pt():
    result = cases.audit("blackwell-pcie")
    findings = cases.found(result)
    gpus = ["GPU 0 (0000:17:00.0)", "GPU 1 (0000:18:00.0)"]
    for gpu in gpus:
        assert ("iommu_translated_blackwell", gpu) in findings
        assert ("iommu_translated", gpu) in cases.found(result, "not_applicable")
    assert ("p2p_acs_redirect", "GPUs 0 and 1") in findings
    assert ("p2p_peer_access", "GPUs 0 and 1") in findings
    assert ("p2p_across_cpus", "GPUs 0 and 1") in cases.found(result, "optimal")
    assert ("gpu_clock_events", gpus[1]) in findings and ("gpu_clock_events", gpus[0]) in cases.found(result, "optimal")
    assert ("tuner_power_profiles_daemon_active", None) in findings
    assert ("thp_defrag_always", None) in findings
    blackwell = [f for f in result["findings"] if f["rule"] == "iommu_translated_blackwell"][0]
    assert "do NOT switch it to identity" in blackwell["message"] and "FSP" in blackwell["rationale"]
    acs = [f for f in result["findings"] if f["rule"] == "p2p_acs_redirect"][0]
    assert "0000:16:00.0, 0000:16:01.0" in acs["message"]
    assert not [f for f in result["findings"] if "iommu=pt" in f["fix"].get("steps", "") and f["fix"]["class"] != "manual"]


def test_identity_domains_forced_on_a_blackwell_node_are_pointed_at():
    facts = facts_of("blackwell-pcie")
    facts["kernel"]["iommu_args"]["iommu"] = env("pt", "/proc/cmdline")
    facts["kernel"]["iommu_passthrough_forced"] = env(True, "/proc/cmdline")
    for gpu in facts["gpus"]:
        gpu["iommu_group_type"] = env("identity", "/sys/bus/pci/devices/x/iommu_group/type")
    result = cases.evaluate(facts)
    entry = [f for f in result["findings"] if f["rule"] == "iommu_pt_on_blackwell"][0]
    assert "forces identity IOMMU domains (intel_iommu=on iommu=pt)" in entry["message"]
    assert ("iommu_translated_blackwell", "GPU 0 (0000:17:00.0)") in cases.found(result, "optimal")


def test_the_measured_h200_node():
    """The facts as gpufleet.tuning.node_facts read them on the machine, unedited."""
    result = cases.audit("h200-nvlink")
    assert cases.found(result) == set([("sched_autogroup_on", None), ("swappiness_high", None)]
                                      + [("net_buffers_low", key) for key in BUFFERS])
    na = set(rule_id for rule_id, item in cases.found(result, "not_applicable"))
    assert ("numa_balancing_on", None) in cases.found(result, "optimal")
    for rule_id in ("peermem_not_loaded", "fabric_manager_not_running",
                    "kernel_cmdline_reboot_pending", "cpu_deep_idle_states", "lxc_memlock_capped"):
        assert rule_id in na, rule_id
    # A VM with no cpufreq and no IOMMU group: the reader says why, and so does the audit.
    unknown = dict(((u["rule"], u["item"]), u["reasons"]) for u in result["unknown"])
    assert unknown[("cpu_governor", None)] == [
        "/sys/devices/system/cpu/cpufreq/policy*/scaling_governor: no active cpufreq policy under "
        "/sys/devices/system/cpu/cpufreq: no cpufreq driver (a VM, or firmware that keeps P-states to itself)"]
    assert unknown[("iommu_translated", "GPU 0 (0000:00:06.0)")] == [
        "/sys/bus/pci/devices/0000:00:06.0/iommu_group: no IOMMU group: the IOMMU is off or the device is not translated"]
    assert ("p2p_peer_access", "GPUs 0 and 1") in cases.found(result, "optimal")
    assert ("gpu_persistence_off", "GPU 1 (0000:00:07.0)") in cases.found(result, "optimal")
    tcp = [f for f in result["findings"] if f["item"] == "net.ipv4.tcp_rmem"][0]
    assert tcp["message"] == "4096 131072 33554432: the largest buffer, 33554432 bytes, is below the profile's 134217728"


# ------------------------------------------------------------------------------ unknown facts

def test_a_node_without_nvml_gets_unknowns_not_findings():
    facts = facts_of("untuned")
    for gpu in facts["gpus"]:
        for key, value in list(gpu.items()):
            if isinstance(value, dict) and str(value.get("source", "")).startswith("nvml:"):
                gpu[key] = unknown("NVML not loadable: libnvidia-ml.so.1: cannot open shared object file", value["source"])
    result = cases.evaluate(facts)
    nvml_rules = ("gpu_remapped_rows_pending", "gpu_persistence_off", "gpu_power_limit_below_max",
                  "gpu_clock_events", "gpu_ecc_uncorrected")
    for rule_id in nvml_rules:
        assert not [f for f in result["findings"] if f["rule"] == rule_id], rule_id
        entries = [u for u in result["unknown"] if u["rule"] == rule_id]
        assert len(entries) == 4, rule_id
        assert all("NVML not loadable" in reason for u in entries for reason in u["reasons"])
    # sysfs facts still decide
    assert len([f for f in result["findings"] if f["rule"] == "gpu_mrrs_low"]) == 4


def test_a_missing_fact_is_unknown_with_its_path():
    facts = facts_of("untuned")
    del facts["driver"]["peer_symbol"]
    result = cases.evaluate(facts)
    entry = [u for u in result["unknown"] if u["rule"] == "peermem_not_loaded"][0]
    assert entry["reasons"] == ["driver.peer_symbol is not in the facts"]


def test_a_value_reported_as_unknown_is_unknown():
    facts = facts_of("blackwell-pcie")
    facts["topology"]["pairs"][0]["peer_access"] = env("unknown", "nvml:nvmlDeviceGetP2PStatus")
    result = cases.evaluate(facts)
    assert ("p2p_peer_access", "GPUs 0 and 1") in cases.found(result, "unknown")
    assert [u["reasons"] for u in result["unknown"] if u["rule"] == "p2p_peer_access"] == [
        ["nvml:nvmlDeviceGetP2PStatus: reported as unknown"]]


def test_an_unknown_list_makes_a_per_rule_unknown_once():
    facts = facts_of("untuned")
    facts["gpus"] = unknown("/sys/bus/pci/devices cannot be listed: Permission denied", "/sys/bus/pci/devices")
    result = cases.evaluate(facts)
    entries = [u for u in result["unknown"] if u["rule"] == "gpu_mrrs_low"]
    assert entries == [{"rule": "gpu_mrrs_low", "severity": "P0", "title": "PCIe Max Read Request Size of the GPUs",
                        "item": None, "reasons": ["/sys/bus/pci/devices: /sys/bus/pci/devices cannot be listed: Permission denied"]}]


def test_a_fact_only_in_the_message_is_shown_as_unknown():
    facts = facts_of("untuned")
    facts["containers"]["lxc"][0]["memlock_running"] = unknown("Permission denied", "/proc/41877/limits")
    result = cases.evaluate(facts)
    entry = [f for f in result["findings"] if f["item"] == "container 101 (vllm)"][0]
    assert entry["message"].endswith("(running: yes; the running init's limit: unknown)")


def test_applies_decides_before_an_unknown_in_when_matters():
    facts = {"thing": {"on": env(False), "v": unknown("unreadable")}}
    result = run(facts, rule(facts={"on": "thing.on", "v": "thing.v"}, applies="on"))
    assert cases.found(result, "not_applicable") == set([("test_rule", None)])
    result = run({"thing": {"on": env(True), "v": unknown("unreadable")}},
                 rule(facts={"on": "thing.on", "v": "thing.v"}, applies="on"))
    assert result["unknown"][0]["reasons"] == ["nvml:nvmlDeviceGetX: unreadable"]


def test_an_unknown_inside_what_a_function_or_filter_reads_makes_the_fact_unknown():
    facts = {"gpus": [{"mrrs": env(512)}, {"mrrs": unknown("needs root", "/sys/bus/pci/devices/0000:41:00.0/config")}]}
    for expression in ("length(gpus[?mrrs < `4096`])", "gpus[?mrrs < `4096`]", "max(gpus[].mrrs)"):
        result = run(facts, rule(facts={"v": expression}, when="v"))
        assert cases.found(result, "unknown") == set([("test_rule", None)]), expression
    # A projection keeps the unknown element: unknown too.
    result = run(facts, rule(facts={"v": "gpus[].mrrs"}, when="length(v) > `0`"))
    assert result["unknown"][0]["reasons"] == ["/sys/bus/pci/devices/0000:41:00.0/config: needs root"]


def test_a_known_null_is_a_value_and_a_missing_key_is_unknown():
    facts = {"kernel": {"iommu_args": env({"iommu": None})}}
    result = run(facts, rule(facts={"v": "kernel.iommu_args.iommu"}, when="v == `null`"))
    assert cases.found(result) == set([("test_rule", None)])
    result = run(facts, rule(facts={"v": "kernel.iommu_args.intel_iommu"}, when="v == `null`"))
    assert result["unknown"][0]["reasons"] == ["kernel.iommu_args.intel_iommu is not in the facts"]


def test_a_plan_that_failed_makes_its_rule_unknown():
    plan = audit_planned({"reboot_required": {"kernel_cmdline": {"failed": True, "msg": "update-grub not found"}}})
    result = cases.evaluate(facts_of("untuned"), plan)
    entry = [u for u in result["unknown"] if u["rule"] == "kernel_cmdline_reboot_pending"][0]
    assert entry["reasons"] == ["gpufleet.tuning.kernel_cmdline in check mode: update-grub not found"]
    result = cases.evaluate(facts_of("untuned"), {})
    entry = [u for u in result["unknown"] if u["rule"] == "kernel_cmdline_reboot_pending"][0]
    assert entry["reasons"] == ["no check-mode result of gpufleet.tuning.kernel_cmdline"]


# ------------------------------------------------------------------------------ rules from the inventory

def test_an_extra_rule_with_a_shipped_id_is_merged_over_it():
    result = cases.evaluate(facts_of("untuned"), extra=[{"id": "swappiness_high", "severity": "P0"}])
    entry = [f for f in result["findings"] if f["rule"] == "swappiness_high"][0]
    assert entry["severity"] == "P0" and entry["message"] == "vm.swappiness = 60, above 10"
    assert result["rules"]["overridden"] == ["swappiness_high"]


def test_an_extra_rule_is_added_and_a_disabled_rule_left_out():
    extra = rule(id="site_hugepages", facts={"total": "memory.hugepages_total"}, when="total == `0`",
                 message="no huge pages reserved ({total})", severity="P2")
    result = cases.evaluate(facts_of("untuned"), extra=[extra], disabled=["tuner_irqbalance_active", "gpu_mrrs_low"])
    assert ("site_hugepages", None) in cases.found(result)
    assert not [f for f in result["findings"] if f["rule"] in ("tuner_irqbalance_active", "gpu_mrrs_low")]
    assert result["rules"]["added"] == ["site_hugepages"]
    assert result["rules"]["disabled"] == ["tuner_irqbalance_active", "gpu_mrrs_low"]
    assert "gpu_mrrs_low" not in result["rules"]["ids"]


@pytest.mark.parametrize("extra, disabled, fragment", [
    ([], ["no_such_rule"], "audit_rules_disabled names no rule: no_such_rule"),
    ([{"id": "site_rule", "severity": "P2"}], [], "audit rule 'site_rule' (audit_rules_extra item 1) lacks"),
    (["not a rule"], [], "audit_rules_extra item 1 must be a dict with an id"),
    ({"id": "x"}, [], "audit_rules: extra (audit_rules_extra) must be a list of rules"),
    ([], "gpu_mrrs_low", "disabled (audit_rules_disabled) must be a list of rule ids"),
])
def test_bad_inventory_rules_are_refused(extra, disabled, fragment):
    with pytest.raises(AnsibleFilterError) as exc:
        cases.evaluate(facts_of("untuned"), extra=extra, disabled=disabled)
    assert fragment in str(exc.value)


# ------------------------------------------------------------------------------ malformed rules

@pytest.mark.parametrize("overrides, fragment", [
    ({"when": "v == "}, "audit rule 'test_rule': when: 'v == ' is not a valid JMESPath expression"),
    ({"facts": {"v": "thing.[v"}}, "audit rule 'test_rule': facts.v: 'thing.[v' is not a valid JMESPath expression"),
    ({"when": "frobnicate(v)"}, "audit rule 'test_rule': when: 'frobnicate(v)' calls frobnicate()"),
    ({"when": "v != null"}, "reads 'null', which is not a fact or an earlier value"),
    ({"when": "w == `1`"}, "audit rule 'test_rule': when: 'w == `1`' reads 'w'"),
    ({"message": "v is {w}"}, "message uses {w}, which no fact or value of the rule is named"),
    ({"message": "v is {v"}, "message: '{' is not a placeholder"),
    ({"message": "v is {v.x}"}, "message: '{v.x}' is not a placeholder"),
    ({"severity": "P3"}, "severity must be one of H, P0, P1, P2, got 'P3'"),
    ({"fix": {"class": "runtime"}}, "a runtime fix needs the module that applies it"),
    ({"fix": {"class": "runtime", "module": "gpufleet.tuning.cpu_power", "tag": "now"}}, "a runtime fix needs tag runtime or reboot_required"),
    ({"fix": {"class": "manual"}}, "a manual fix needs steps"),
    ({"fix": {"class": "sometime", "steps": "x"}}, "fix.class must be one of runtime, reboot_required, manual"),
    ({"whne": "v"}, "unknown keys whne"),
    ({"when": None}, "lacks when"),
    ({"id": "Bad-Id"}, "id must be lower-case letters, digits and _"),
    ({"per": "gpus"}, "a rule with per needs a label"),
    ({"label": "x"}, "label names the items of per, and the rule has no per"),
    ({"facts": {"v": "item.v"}}, "reads item, and the rule has no per"),
    ({"facts": {True: "thing.v"}}, "facts name True is not a name"),
    ({"values": {"v": "`1`"}}, "v named both in facts and in values"),
    ({"values": {"a": "b", "b": "v"}}, "values.a: 'b' reads 'b', which is not a fact or an earlier value"),
    ({"title": ""}, "title must be a non-empty string"),
])
def test_a_malformed_rule_is_an_error_naming_it(overrides, fragment):
    with pytest.raises(AnsibleFilterError) as exc:
        run({"thing": {"v": env(1)}}, rule(**overrides))
    assert fragment in str(exc.value)


def test_a_duplicate_id_is_an_error():
    with pytest.raises(AnsibleFilterError) as exc:
        run({}, rule(), rule())
    assert "audit rule 'test_rule' is defined twice" in str(exc.value)


def test_an_expression_that_fails_on_the_facts_names_the_rule_and_the_item():
    with pytest.raises(AnsibleFilterError) as exc:
        run({"gpus": [{"v": env(5)}]}, rule(per="gpus", label="g", facts={"v": "item.v"}, when="length(v) > `0`", message="m"))
    assert "audit rule 'test_rule': when (g): 'length(v) > `0`' cannot be evaluated" in str(exc.value)


def test_a_per_that_is_not_a_list_is_an_error():
    with pytest.raises(AnsibleFilterError) as exc:
        run({"thing": {"v": env(1)}}, rule(per="thing", label="x", facts={"v": "item.v"}))
    assert "audit rule 'test_rule': per: 'thing' must give a list, it gives dict" in str(exc.value)


# ------------------------------------------------------------------------------ templates and functions

def test_templates_substitute_names_and_keep_escaped_braces():
    assert render("{a} {{literal}} {b}", {"a": 1.0, "b": [1, "x"]}) == "1 {literal} 1, x"
    assert render("{a}/{b}/{c}", {"a": None, "b": True, "c": {"k": 26.5625}}) == "none/yes/k: 26.562"


def test_the_added_functions():
    facts = {"s": env("4096 131072 6291456"), "cpus": env("0-3,8,10-11"), "m": env({"b": 2, "a": 1}), "t": env("ABC")}
    result = run(facts, rule(facts={"s": "s", "cpus": "cpus", "m": "m", "t": "t"},
                             values={"last": "to_number(words(s)[-1])", "n": "cpu_count(cpus)", "pairs": "items(m)",
                                     "b": "get(m, 'b')", "low": "lower(t)"},
                             when="`true`", message="{last} {n} {pairs} {b} {low}"))
    assert result["findings"][0]["message"] == "6291456 7 a, 1, b, 2 2 abc"
    assert cpu_count(None) == 0 and cpu_count("") == 0 and cpu_count("none") == 0 and cpu_count([0, 1]) == 2
    with pytest.raises(ValueError):
        cpu_count("0-x")


def test_ansible_typed_values_are_read_as_plain_ones():
    class Tagged(dict):
        pass

    class TaggedStr(str):
        pass

    class TaggedInt(int):
        pass

    facts = Tagged(thing=Tagged(v=Tagged(value=TaggedInt(1), source=TaggedStr("/x"))))
    converted = plain(facts)
    assert converted.__class__ is dict and converted["thing"]["v"]["value"].__class__ is int
    assert converted["thing"]["v"]["source"].__class__ is str
    result = run(facts, rule(facts={"v": "thing.v"}, values={"t": "type(v)"}, when="t == 'number'"))
    assert cases.found(result) == set([("test_rule", None)])


def test_the_input_is_left_as_it_was():
    facts = facts_of("untuned")
    before = copy.deepcopy(facts)
    cases.evaluate(facts)
    assert facts == before


@pytest.mark.parametrize("spelling, canonical, hard", [
    ("unlimited", "unlimited", 2 ** 64 - 1),
    ("infinity", "unlimited", 2 ** 64 - 1),
    ("unlimited:unlimited", "unlimited", 2 ** 64 - 1),
    ("8388608", "8388608", 8388608),
    ("8388608:8388608", "8388608", 8388608),
    ("65536:unlimited", "65536:unlimited", 2 ** 64 - 1),
    ("8388608:65536", "8388608:65536", 65536),
    ("not a limit", "not a limit", None),
    ("-1", "-1", None),
])
def test_limits_compare_as_limits_not_spellings(spelling, canonical, hard):
    facts = {"l": env(spelling)}
    result = run(facts, rule(facts={"l": "l"}, values={"c": "limit(l)", "h": "limit_hard(l)"},
                             when="`true`", message="{c}|{h}"))
    values = result["findings"][0]["values"]
    assert (values["c"], values["h"]) == (canonical, hard)
