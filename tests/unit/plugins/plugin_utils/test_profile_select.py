"""Platform profiles chosen from node facts (plugin_utils/profile_node.py, profile_select.py):
each platform shape of tests/unit/profile_facts.py gets its platform, with reasons that name
the GPU and the interconnect; an inventory pin wins and keeps the facts' choice beside it; a node
no platform holds gets base and the reason; the layers (base -> platform -> intent) combine a
mapping key by key and replace a list, each setting naming its layer."""

import json

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_data, profile_node, profile_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_select
from ansible_collections.gpufleet.tuning.tests.unit import profile_facts as pf


def shipped():
    return profile_data.load_dir(pf.PROFILES_DIR)


def node_of(name):
    return profile_node.describe(pf.shape(name))


def select(name, **kwargs):
    return profile_select.select(node_of(name), shipped(), **kwargs)


# ------------------------------------------------------------------------------ what a node is

@pytest.mark.parametrize("name, kind, interconnect, vendor, gpus, cpus", [
    ("hgx-h100", "bare_metal", "nvswitch", "GenuineIntel", 8, 224),
    ("hgx-h200", "bare_metal", "nvswitch", "GenuineIntel", 8, 224),
    ("hgx-b200", "bare_metal", "nvswitch", "GenuineIntel", 8, 224),
    ("vm-h100-x1", "vm", "pcie", "GenuineIntel", 1, 16),
    ("vm-h100-x1-no-nvml", "vm", "pcie", "GenuineIntel", 1, 16),
    ("vm-h200-x2", "vm", "nvswitch", "GenuineIntel", 2, 32),
    ("h100-nvl-pair", "bare_metal", "nvlink", "AuthenticAMD", 2, 128),
    ("h100-pcie", "bare_metal", "pcie", "GenuineIntel", 2, 64),
    ("l40s-x4", "bare_metal", "pcie", "GenuineIntel", 4, 128),
    ("rtx-pro-6000-x8", "proxmox_host", "pcie_switch", "AuthenticAMD", 8, 128),
    ("a100", "bare_metal", "nvswitch", "AuthenticAMD", 2, 256),
    ("mixed", "bare_metal", "pcie", "GenuineIntel", 2, 64),
    ("no-gpu", "bare_metal", "pcie", "GenuineIntel", 0, 64),
    ("lxc-l40s", "lxc_guest", "pcie", "GenuineIntel", 2, 64),
])
def test_describe_reads_each_shape(name, kind, interconnect, vendor, gpus, cpus):
    node = node_of(name)
    assert (node["kind"], node["interconnect"], node["cpu_vendor"], node["gpu_count"], node["cpu_count"]) == (
        kind, interconnect, vendor, gpus, cpus)
    assert node["interconnects"][-1] == "pcie"


def test_describe_hgx_sees_the_switches_and_the_pcie_switch_under_them():
    node = node_of("hgx-h100")
    assert node["interconnects"] == ["nvswitch", "pcie_switch", "pcie"]
    assert {g["device_id"] for g in node["gpus"]} == {"10de:2330"}
    assert {g["name"] for g in node["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert {(g["nvlink_links"], g["nvlink_active"]) for g in node["gpus"]} == {(18, 18)}


def test_describe_a_vm_of_an_hgx_board_sees_nvswitch_from_the_link_ends_alone():
    facts = pf.vm_h200_x2()
    assert facts["driver"]["nvswitches"]["value"] == 0
    facts["topology"]["pairs"] = []  # the far ends alone decide
    assert profile_node.describe(facts)["interconnect"] == "nvswitch"


def test_describe_the_generated_h200_vm_reads_as_the_real_one():
    """docs/examples/h200-x2/audit.json: node_facts of a KVM guest with two H200 of an HGX board."""
    with open(pf.REAL_H200_X2) as handle:
        real = profile_node.describe(json.load(handle)["facts"])
    made = profile_node.describe(pf.vm_h200_x2())
    for key in ("gpu_count", "interconnect", "interconnects", "kind", "cpu_vendor", "cpus_online", "cpu_count"):
        assert made[key] == real[key], key
    keys = ("bdf", "device_id", "name", "architecture", "nvlink_active", "nvlink_links")
    assert [[g[k] for k in keys] for g in made["gpus"]] == [[g[k] for k in keys] for g in real["gpus"]]


def test_describe_kinds_and_why():
    assert node_of("lxc-l40s")["kind_why"].startswith("container lxc (")
    assert node_of("rtx-pro-6000-x8")["kind_why"] == "Proxmox VE (/usr/share/pve-manager)"
    assert node_of("vm-h100-x1")["kind_why"].startswith("hypervisor kvm (")
    docker = profile_node.describe(pf.build_facts([pf.gpu("0000:17:00.0", pf.L40S)], kind="docker"))
    assert docker["kind"] == "container"
    unread = pf.l40s_x4()
    unread["host"]["virtualization"] = pf.unknown("/proc/cpuinfo", "Permission denied")
    node = profile_node.describe(unread)
    assert node["kind"] == "bare_metal" and "Permission denied" in node["kind_why"]


def test_describe_without_nvml_keeps_the_sysfs_device_id():
    gpu = node_of("vm-h100-x1-no-nvml")["gpus"][0]
    assert gpu["device_id"] == "10de:2330" and gpu["name"] is None
    assert gpu["nvlink_active"] is None and gpu["memory_bandwidth_gbps"] is None


def test_describe_of_nothing_is_a_node_without_gpus():
    for facts in ({}, None, {"gpus": "x"}):
        node = profile_node.describe(facts)
        assert node["gpus"] == [] and node["kind"] == "bare_metal" and node["cpu_count"] is None


# ------------------------------------------------------------------------------ the choice

@pytest.mark.parametrize("name, platform, gpu, interconnect", [
    ("hgx-h100", "hgx-hopper", "8 x H100 SXM 80GB, by device id 10de:2330", "interconnect nvswitch, as the platform prefers"),
    ("hgx-h200", "hgx-hopper", "8 x H200 SXM 141GB, by device id 10de:2335", "interconnect nvswitch, as the platform prefers"),
    ("hgx-b200", "hgx-blackwell", "8 x B200 SXM 180GB, by device id 10de:2901", "interconnect nvswitch, as the platform prefers"),
    ("vm-h100-x1", "hgx-hopper", "1 x H100 SXM 80GB, by device id 10de:2330",
     "interconnect pcie, where the platform prefers nvswitch (chosen for its GPUs all the same)"),
    ("vm-h100-x1-no-nvml", "hgx-hopper", "1 x H100 SXM 80GB, by device id 10de:2330",
     "interconnect pcie, where the platform prefers nvswitch (chosen for its GPUs all the same)"),
    ("vm-h200-x2", "hgx-hopper", "2 x H200 SXM 141GB, by device id 10de:2335", "interconnect nvswitch, as the platform prefers"),
    ("h100-nvl-pair", "h100-pcie", "2 x H100 NVL 94GB, by device id 10de:2321", "interconnect nvlink, as the platform prefers"),
    ("h100-pcie", "h100-pcie", "2 x H100 PCIe 80GB, by device id 10de:2331", "interconnect pcie, as the platform prefers"),
    ("l40s-x4", "l40s", "4 x L40S 48GB, by device id 10de:26b9", "interconnect pcie, as the platform prefers"),
    ("lxc-l40s", "l40s", "2 x L40S 48GB, by device id 10de:26b9", "interconnect pcie, as the platform prefers"),
    ("rtx-pro-6000-x8", "rtx-pro-6000-blackwell", "8 x RTX PRO 6000 Blackwell Server 96GB, by device id 10de:2bb5",
     "interconnect pcie_switch, as the platform prefers"),
])
def test_each_platform_is_chosen_from_its_facts_with_its_reasons(name, platform, gpu, interconnect):
    result = select(name)
    assert result["platform"] == platform and result["name"] == platform + "/throughput"
    assert result["pinned"] is False and "auto" not in result
    assert result["reasons"][0] == gpu
    assert interconnect in result["reasons"]
    assert result["violations"] == [] and result["waived"] == []
    assert result["description"] == shipped()["platforms"][platform]["description"]


def test_rtx_pro_6000_on_epyc_matches_both_preferences():
    reasons = select("rtx-pro-6000-x8")["reasons"]
    assert "cpu vendor AuthenticAMD, as the platform prefers" in reasons
    intel = pf.rtx_pro_6000_x8()
    intel["cpu"]["vendor"]["value"] = "GenuineIntel"
    reasons = profile_select.select(profile_node.describe(intel), shipped())["reasons"]
    assert "cpu vendor GenuineIntel, where the platform prefers AuthenticAMD (chosen for its GPUs all the same)" in reasons


def test_rtx_pro_6000_on_root_ports_is_still_its_platform():
    facts = pf.build_facts([pf.gpu(bdf, pf.RTX_PRO_6000) for bdf in ("0000:41:00.0", "0000:c1:00.0")],
                           cpu_vendor="AuthenticAMD")
    result = profile_select.select(profile_node.describe(facts), shipped())
    assert result["platform"] == "rtx-pro-6000-blackwell"
    assert ("interconnect pcie, where the platform prefers pcie_switch (chosen for its GPUs all the same)"
            in result["reasons"])


def test_the_model_is_recognised_by_name_where_the_device_id_is_unknown():
    facts = pf.l40s_x4()
    for entry in facts["gpus"]:
        entry["device_id"] = pf.unknown(entry["device_id"]["source"], "Permission denied")
    result = profile_select.select(profile_node.describe(facts), shipped())
    assert result["platform"] == "l40s"
    assert result["reasons"][0] == "4 x L40S 48GB, by name 'NVIDIA L40S'"


def test_the_chosen_models_are_the_expectations_models():
    result = select("hgx-h200")
    assert [m["model"] for m in result["expectations"]["models"]] == ["H200 SXM 141GB"]
    assert result["expectations"]["gpu_count"]["bare_metal"] == [8, 4]
    assert result["expectations"]["p2p_floors"] == "link"  # base's, under the platform's


def test_an_unknown_gpu_gets_base_and_the_reason_says_so():
    result = select("a100")
    assert result["platform"] == "base" and result["name"] == "base/throughput"
    assert result["reasons"] == [
        "GPU NVIDIA A100-SXM4-40GB (10de:20b0): no platform profile knows it; the base profile (the roles' defaults; "
        "pin one with gpufleet_profile, or add one with gpufleet_profiles_extra)"]
    assert result["expectations"]["models"] == []
    assert result["description"] == shipped()["base"]["description"]


def test_mixed_gpus_get_base_and_the_reason_names_both():
    result = select("mixed")
    assert result["platform"] == "base"
    assert result["reasons"][0].startswith(
        "GPUs NVIDIA H100 PCIe (10de:2331), NVIDIA L40S (10de:26b9): no platform profile holds all of them; the base profile")


def test_no_gpu_gets_base():
    result = select("no-gpu")
    assert result["platform"] == "base"
    assert result["reasons"] == ["no NVIDIA GPU on the PCI bus: the base profile"]


def test_an_unknown_gpu_without_nvml_names_what_is_known():
    facts = pf.build_facts([pf.gpu("0000:07:00.0", pf.A100_SXM4, links=12, nvml=False)])
    result = profile_select.select(profile_node.describe(facts), shipped())
    assert result["platform"] == "base"
    assert result["reasons"][0].startswith("GPU name unknown (10de:20b0): no platform profile knows it")


def test_gpus_that_could_not_be_read_are_not_reported_as_no_gpu():
    facts = pf.no_gpu()
    facts["gpus"] = pf.unknown("/sys/bus/pci/devices", "Permission denied")
    result = profile_select.select(profile_node.describe(facts), shipped())
    assert result["platform"] == "base"
    assert "no NVIDIA GPU on the PCI bus" not in " ".join(result["reasons"])
    assert "Permission denied" in " ".join(result["reasons"]) or "unknown" in " ".join(result["reasons"])


def test_a_tie_is_broken_by_name_and_said():
    profiles = profile_data.extend(shipped(), {"platforms": {"l40s-twin": {
        "models": [{"model": "L40S 48GB", "device_ids": ["10de:26b9"], "memory_bandwidth_gbps": 864}],
        "prefer": {"interconnect": ["pcie"]}}}})
    result = profile_select.select(node_of("l40s-x4"), profiles)
    assert result["platform"] == "l40s"
    assert result["reasons"][-1] == "as good a match: l40s-twin (chosen by name order; pin one with gpufleet_profile)"


def test_the_better_preference_wins_over_name_order():
    profiles = profile_data.extend(shipped(), {"platforms": {"a-l40s-switch": {
        "models": [{"model": "L40S 48GB", "device_ids": ["10de:26b9"]}],
        "prefer": {"interconnect": ["pcie"], "node_kind": ["bare_metal"]}}}})
    assert profile_select.select(node_of("l40s-x4"), profiles)["platform"] == "a-l40s-switch"
    assert profile_select.select(node_of("lxc-l40s"), profiles)["platform"] == "a-l40s-switch"  # 1 to 1: name order


# ------------------------------------------------------------------------------ pins

def test_a_pin_wins_and_the_auto_choice_is_kept():
    result = select("hgx-h100", pin="h100-pcie")
    assert result["platform"] == "h100-pcie" and result["name"] == "h100-pcie/throughput" and result["pinned"] is True
    assert result["reasons"][0] == "pinned by the inventory (gpufleet_profile: h100-pcie)"
    assert result["reasons"][1].startswith("the facts alone would choose hgx-hopper: 8 x H100 SXM 80GB, by device id 10de:2330")
    assert result["reasons"][2] == ("GPU NVIDIA H100 80GB HBM3 (10de:2330) is not a model of h100-pcie: its per-model "
                                    "expectations do not hold it")
    assert result["auto"]["platform"] == "hgx-hopper"
    assert result["auto"]["reasons"][0] == "8 x H100 SXM 80GB, by device id 10de:2330"
    assert result["expectations"]["models"] == []
    assert result["settings"]["verify_p2p_min_speedup"] == {"nvlink": 4, "pcie": 1.2}


def test_a_pin_of_the_auto_choice_says_only_pinned():
    result = select("l40s-x4", pin="l40s")
    assert result["reasons"] == ["pinned by the inventory (gpufleet_profile: l40s)"]
    assert result["auto"] == {"platform": "l40s", "reasons": select("l40s-x4")["reasons"]}
    assert [m["model"] for m in result["expectations"]["models"]] == ["L40S 48GB"]


def test_a_pin_holds_a_gpu_the_facts_leave_on_base():
    result = select("a100", pin="hgx-hopper")
    assert result["platform"] == "hgx-hopper"
    assert result["reasons"][1].startswith("the facts alone would choose base: GPU NVIDIA A100-SXM4-40GB (10de:20b0)")
    assert result["auto"]["platform"] == "base"


def test_pin_base():
    result = select("hgx-b200", pin="base")
    assert result["platform"] == "base" and result["name"] == "base/throughput" and result["pinned"] is True
    assert result["reasons"][0] == "pinned by the inventory (gpufleet_profile: base)"
    assert result["reasons"][1].startswith("the facts alone would choose hgx-blackwell")
    assert result["auto"]["platform"] == "hgx-blackwell"
    assert "host_cmdline_present" not in result["settings"]
    assert [r["name"] for r in result["guard_rails"]] == ["housekeeping_cpus", "no_pcie_writes_in_a_container",
                                                          "no_acs_change_in_a_vm"]
    assert select("no-gpu", pin="base")["reasons"] == ["pinned by the inventory (gpufleet_profile: base)"]


@pytest.mark.parametrize("pin", ["hgx", "HGX-HOPPER", "latency", "base/throughput"])
def test_a_bad_pin_is_named(pin):
    with pytest.raises(profile_data.ProfileError) as exc:
        select("hgx-h100", pin=pin)
    assert str(exc.value).startswith("gpufleet_profile %r is not a platform profile (known: base, h100-pcie, "
                                     "hgx-blackwell, hgx-hopper, l40s, rtx-pro-6000-blackwell)" % pin)


@pytest.mark.parametrize("intent", ["fast", "hgx-hopper", "", "Latency"])
def test_a_bad_intent_is_named(intent):
    with pytest.raises(profile_data.ProfileError) as exc:
        select("hgx-h100", intent=intent)
    assert str(exc.value) == "gpufleet_profile_intent %r is not an intent (known: latency, throughput)" % intent


# ------------------------------------------------------------------------------ layers

def test_throughput_layers_base_platform_intent_with_sources():
    result = select("l40s-x4")
    assert result["settings"] == {
        "verify_p2p_no_peer_access": "staged",
        "verify_p2p_min_speedup": {"pcie": 1.1},
        "serving_benchmark_concurrency": [1, 4, 16, 64],
        "serving_gate_figures": ["output_tokens_per_s", "decode_tokens_per_s"],
    }
    assert result["sources"] == {
        "verify_p2p_no_peer_access": "platform l40s",
        "verify_p2p_min_speedup": "platform l40s",
        "serving_benchmark_concurrency": "intent throughput",
        "serving_gate_figures": "intent throughput",
    }


def test_latency_layers_its_settings():
    result = select("hgx-b200", intent="latency")
    assert result["name"] == "hgx-blackwell/latency" and result["intent"] == "latency"
    assert result["settings"] == {
        "host_cmdline_present": [],
        "verify_p2p_min_speedup": {"nvlink": 4, "pcie": 1.2},
        "host_cpu_power_max_idle_latency_us": 0,
        "host_cmdline_cstate_cap": True,
        "serving_benchmark_concurrency": [1, 2],
        "serving_gate_figures": ["decode_tokens_per_s", "ttft_ms.p50"],
    }
    assert result["sources"]["host_cmdline_present"] == "platform hgx-blackwell"
    assert result["sources"]["host_cmdline_cstate_cap"] == "intent latency"
    assert [r["name"] for r in result["guard_rails"]][-1] == "no_identity_iommu"
    assert result["guard_variables"] == ["host_cmdline_present", "host_cmdline_extra", "host_pcie_allow_in_container",
                                         "host_pcie_acs_allow_in_container", "host_pcie_acs_enabled"]


def test_base_alone_takes_only_the_intent():
    result = select("no-gpu", intent="latency")
    assert set(result["sources"].values()) == {"intent latency"}


def test_a_mapping_is_merged_key_by_key_and_a_list_replaced_across_layers():
    profiles = profile_data.extend(shipped(), {
        "base": {"settings": {"host_sysctl_settings": {"vm.swappiness": 10, "kernel.numa_balancing": 0},
                              "host_cmdline_present": ["iommu=pt", "pci=realloc"],
                              "verify_p2p_min_speedup": {"nvlink": 2, "pcie": 1.0, "unknown": 1.0}}},
        "platforms": {"rtx-pro-6000-blackwell": {"settings": {"host_sysctl_settings": {"vm.swappiness": 1}}}},
        "intents": {"throughput": {"settings": {"host_sysctl_settings": {"vm.max_map_count": 262144},
                                                "serving_benchmark_concurrency": [8]}}},
    })
    result = profile_select.select(node_of("rtx-pro-6000-x8"), profiles)
    settings, sources = result["settings"], result["sources"]
    assert settings["host_sysctl_settings"] == {"vm.swappiness": 1, "kernel.numa_balancing": 0, "vm.max_map_count": 262144}
    assert sources["host_sysctl_settings"] == "intent throughput"
    assert settings["host_cmdline_present"] == [] and sources["host_cmdline_present"] == "platform rtx-pro-6000-blackwell"
    assert settings["verify_p2p_min_speedup"] == {"nvlink": 2, "pcie": 1.2, "unknown": 1.0}
    assert settings["serving_benchmark_concurrency"] == [8]
    # the shipped data is not changed by a selection
    assert shipped()["platforms"]["rtx-pro-6000-blackwell"]["settings"]["host_cmdline_present"] == []
    assert "host_sysctl_settings" not in profiles["platforms"]["l40s"]["settings"]


def test_layer_directly():
    profiles = shipped()
    settings, sources, expectations, rails = profile_select.layer(profiles, "hgx-hopper", "latency", [])
    assert sources == {"verify_p2p_min_speedup": "platform hgx-hopper", "host_cpu_power_max_idle_latency_us": "intent latency",
                       "host_cmdline_cstate_cap": "intent latency", "serving_benchmark_concurrency": "intent latency",
                       "serving_gate_figures": "intent latency"}
    assert settings["serving_benchmark_concurrency"] == [1, 2]
    assert expectations["decode_efficiency_pct"] == [20, 95] and expectations["models"] == []
    assert [r["name"] for r in rails] == ["housekeeping_cpus", "no_pcie_writes_in_a_container", "no_acs_change_in_a_vm"]
    settings, sources, expectations, rails = profile_select.layer(profiles, None, "throughput", [])
    assert set(sources.values()) == {"intent throughput"} and "gpu_count" not in expectations


def test_merge_keeps_its_inputs():
    base = {"a": {"x": 1, "y": [1, 2]}, "b": [1]}
    over = {"a": {"y": [3]}, "b": [2, 3], "c": {"z": 1}}
    merged = profile_data.merge(base, over)
    assert merged == {"a": {"x": 1, "y": [3]}, "b": [2, 3], "c": {"z": 1}}
    merged["a"]["x"] = 9
    merged["c"]["z"] = 9
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": [1]} and over["c"] == {"z": 1}
    assert profile_data.merge({"a": 1}, None) is None and profile_data.merge([1], {"a": 1}) == {"a": 1}


# ------------------------------------------------------------------------------ the record

def test_the_record_keeps_the_choice_and_the_rail_names():
    result = select("vm-h100-x1", pin="h100-pcie")
    record = profile_report.record(result)
    assert record["auto"]["platform"] == "hgx-hopper" and record["pinned"] is True
    assert record["guard_rails"] == ["housekeeping_cpus", "no_pcie_writes_in_a_container", "no_acs_change_in_a_vm"]
    assert "node" not in record
    assert profile_report.record({}) is None
    lines = profile_report.lines(result, {})
    assert lines[2].startswith("**h100-pcie/throughput** - ") and lines[2].endswith("; pinned by the inventory:")
    assert "- pinned by the inventory (gpufleet_profile: h100-pcie)" in lines
