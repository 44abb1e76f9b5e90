"""The profiles as data (plugin_utils/profile_data.py): the shipped files load and pass their own
check; bad data (an unknown key, a variable no profile sets, a wrong type, a regular expression
that does not compile, a bad device id, a bad node kind, a bad guard rail) is refused with a
message naming the file, the entry and the value; the inventory's profiles merge over a shipped
one or add one, and a new platform is chosen for its GPU."""

import copy
import os
import re
import shutil

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_data, profile_node, profile_select
from ansible_collections.gpufleet.tuning.tests.unit import profile_facts as pf

ProfileError = profile_data.ProfileError


def shipped():
    return profile_data.load_dir(pf.PROFILES_DIR)


def platform(**over):
    entry = {"name": "p", "models": [{"model": "M", "device_ids": ["10de:2330"]}]}
    entry.update(over)
    return entry


def refused(entry, kind="platforms", label="platforms/p.yml"):
    with pytest.raises(ProfileError) as exc:
        profile_data.check(copy.deepcopy(entry), kind, label)
    return str(exc.value)


def extra_refused(extra):
    with pytest.raises(ProfileError) as exc:
        profile_data.extend(shipped(), extra)
    return str(exc.value)


# ------------------------------------------------------------------------------ the shipped files

def test_the_shipped_profiles_load():
    data = shipped()
    assert sorted(data["platforms"]) == ["h100-pcie", "hgx-blackwell", "hgx-hopper", "l40s", "rtx-pro-6000-blackwell"]
    assert sorted(data["intents"]) == ["latency", "throughput"]
    assert data["base"]["name"] == "base" and data["base"]["settings"] == {}
    assert [r["name"] for r in data["base"]["guard_rails"]] == ["housekeeping_cpus", "no_pcie_writes_in_a_container",
                                                                "no_acs_change_in_a_vm"]
    for name, entry in data["platforms"].items():
        assert entry["name"] == name and entry["description"] and entry["models"]
        for key in ("settings", "prefer", "expectations", "guard_rails"):
            assert key in entry, (name, key)
        for model in entry["models"]:
            assert all(profile_data.DEVICE_ID.match(d) for d in model["device_ids"])
            assert model["memory_bandwidth_gbps"] > 0
    blackwell = [n for n, e in data["platforms"].items() if any(r["name"] == "no_identity_iommu" for r in e["guard_rails"])]
    assert sorted(blackwell) == ["hgx-blackwell", "rtx-pro-6000-blackwell"]


def test_every_shipped_device_id_belongs_to_one_platform():
    seen = {}
    for name, entry in shipped()["platforms"].items():
        for model in entry["models"]:
            for device_id in model["device_ids"]:
                assert device_id not in seen, (device_id, seen.get(device_id), name)
                seen[device_id] = name
    assert seen["10de:2330"] == "hgx-hopper" and seen["10de:2335"] == "hgx-hopper" and seen["10de:2901"] == "hgx-blackwell"
    assert seen["10de:2321"] == "h100-pcie" and seen["10de:2331"] == "h100-pcie"
    assert seen["10de:26b9"] == "l40s" and seen["10de:2bb5"] == "rtx-pro-6000-blackwell"


def test_the_shipped_names_match_the_gpus_nvml_names():
    names = {
        "hgx-hopper": ["NVIDIA H100 80GB HBM3", "NVIDIA H200"],
        "hgx-blackwell": ["NVIDIA B200"],
        "h100-pcie": ["NVIDIA H100 NVL", "NVIDIA H100 PCIe", "NVIDIA H200 NVL"],
        "l40s": ["NVIDIA L40S", "NVIDIA L40"],
        "rtx-pro-6000-blackwell": ["NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                   "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"],
    }
    data = shipped()
    for platform_name, gpu_names in names.items():
        for gpu_name in gpu_names:
            holders = [p for p, e in data["platforms"].items()
                       if any(re.search(pattern, gpu_name) for m in e["models"] for pattern in m.get("names") or [])]
            assert holders == [platform_name], (gpu_name, holders)


def test_every_settable_variable_is_read_by_its_role_default():
    """The module docstring: only SETTABLE variables are read from profile_settings by the
    roles' defaults (a profile setting any other would be ignored)."""
    texts = []
    for role in ("host", "verify", "serving"):
        for folder, _dirs, files in os.walk(os.path.join(pf.REPO, "roles", role, "defaults")):
            for filename in files:
                with open(os.path.join(folder, filename)) as handle:
                    texts.append(handle.read())
    text = "\n".join(texts)
    for name in profile_data.SETTABLE:
        assert "profile_settings.%s " % name in text or "profile_settings.%s|" % name in text, name


def test_load_dir_needs_an_absolute_folder():
    with pytest.raises(ProfileError, match=r"profiles_dir must be an absolute path, got 'roles/profile/files'"):
        profile_data.load_dir("roles/profile/files")
    with pytest.raises(ProfileError, match=r"profiles_dir must be an absolute path, got None"):
        profile_data.load_dir(None)


def copy_profiles(tmp_path):
    target = tmp_path / "files"
    shutil.copytree(pf.PROFILES_DIR, str(target))
    return target


def test_a_file_whose_name_is_not_its_file_name_is_refused(tmp_path):
    target = copy_profiles(tmp_path)
    (target / "platforms" / "l40s.yml").rename(target / "platforms" / "ada.yml")
    with pytest.raises(ProfileError, match=r"^platforms/ada.yml: name 'l40s' is not its file name$"):
        profile_data.load_dir(str(target))


def test_a_file_that_is_not_yaml_or_not_a_mapping_is_refused(tmp_path):
    target = copy_profiles(tmp_path)
    bad = target / "intents" / "batch.yml"
    bad.write_text("name: batch\nsettings: {serving_benchmark_concurrency: [1, 2\n")
    with pytest.raises(ProfileError, match=r"the profile file .*/intents/batch.yml is not YAML: "):
        profile_data.load_dir(str(target))
    bad.write_text("- name: batch\n")
    with pytest.raises(ProfileError, match=r"the profile file .*/intents/batch.yml must hold a mapping, not list"):
        profile_data.load_dir(str(target))


def test_a_missing_file_or_folder_is_named(tmp_path):
    target = copy_profiles(tmp_path)
    shutil.rmtree(str(target / "intents"))
    with pytest.raises(ProfileError, match=r"cannot list the profile folder .*/intents: "):
        profile_data.load_dir(str(target))
    (target / "base.yml").unlink()
    with pytest.raises(ProfileError, match=r"cannot read the profile file .*/base.yml: "):
        profile_data.load_dir(str(target))


def test_a_bad_shipped_setting_names_the_file(tmp_path):
    target = copy_profiles(tmp_path)
    path = target / "platforms" / "l40s.yml"
    path.write_text(path.read_text().replace("verify_p2p_no_peer_access: staged", "verify_p2p_no_peer_acess: staged"))
    with pytest.raises(ProfileError, match=r"^platforms/l40s.yml: 'verify_p2p_no_peer_acess' is not a variable a profile can set"):
        profile_data.load_dir(str(target))


def test_the_yaml_is_read_safely(tmp_path):
    target = copy_profiles(tmp_path)
    (target / "intents" / "evil.yml").write_text("name: evil\nsettings: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ProfileError, match=r"intents/evil.yml is not YAML"):
        profile_data.load_dir(str(target))


# ------------------------------------------------------------------------------ refused data

@pytest.mark.parametrize("entry, kind, message", [
    (platform(model="M"), "platforms", "platforms/p.yml: unknown key 'model' (known for platforms: description, expectations, "
                                       "guard_rails, models, name, origin, prefer, settings, settings_by_node_kind)"),
    ({"name": "fast", "models": []}, "intents", "platforms/p.yml: unknown key 'models' (known for intents: description, name, "
                                                "origin, settings)"),
    ({"name": "base", "prefer": {}}, "base", "platforms/p.yml: unknown key 'prefer' (known for base: description, "
                                             "expectations, guard_rails, name, origin, settings)"),
])
def test_an_unknown_key_is_refused(entry, kind, message):
    assert refused(entry, kind) == message


@pytest.mark.parametrize("name", [None, "", "Hopper", "a b", "-x", "x" * 65, 3])
def test_a_bad_name_is_refused(name):
    assert refused(platform(name=name)) == "platforms/p.yml: name must be lower-case letters, digits, _ . - (got %r)" % (name,)


def test_an_unsettable_variable_is_refused():
    message = refused(platform(settings={"host_cmdline_absent": ["iommu=pt"]}))
    assert message.startswith("platforms/p.yml: 'host_cmdline_absent' is not a variable a profile can set (settable: "
                              "host_cmdline_cstate_cap, host_cmdline_extra, ")
    assert refused(platform(settings=["verify_p2p_enabled"])) == (
        "platforms/p.yml: settings must be a mapping of role variable to value, got list")


@pytest.mark.parametrize("name, value, want", [
    ("host_cmdline_present", "iommu=pt", "a list"),
    ("host_cmdline_cstate_cap", "yes", "true or false"),
    ("host_cpu_power_max_idle_latency_us", True, "an integer"),
    ("host_cpu_power_max_idle_latency_us", 0.5, "an integer"),
    ("host_pcie_size", "4096", "an integer"),
    ("verify_p2p_min_speedup", 4, "a mapping"),
    ("verify_p2p_no_peer_access", None, "a string"),
    ("serving_benchmark_concurrency", {"1": 1}, "a list"),
])
def test_a_value_of_the_wrong_type_is_refused(name, value, want):
    assert refused(platform(settings={name: value})) == (
        "platforms/p.yml: %s must be %s, got %r" % (name, want, value))


@pytest.mark.parametrize("models, message", [
    (None, "platforms/p.yml: models must be a non-empty list of GPU models"),
    ([], "platforms/p.yml: models must be a non-empty list of GPU models"),
    (["H100"], "platforms/p.yml: models[0] must be a mapping with a model name (model: ...)"),
    ([{"device_ids": ["10de:2330"]}], "platforms/p.yml: models[0] must be a mapping with a model name (model: ...)"),
    ([{"model": "M"}], "platforms/p.yml: models[0] (M): device_ids or names must list how the GPU is recognised"),
    ([{"model": "M", "device_ids": "10de:2330"}], "platforms/p.yml: models[0] (M): device_ids or names must list how the GPU is "
                                                  "recognised"),
    ([{"model": "M", "device_ids": ["10de:2330"]}, {"model": "N", "device_ids": ["2330"]}],
     "platforms/p.yml: models[1] (N): device id '2330' is not like 10de:2330"),
    ([{"model": "M", "device_ids": ["1002:74a1"]}], "platforms/p.yml: models[0] (M): device id '1002:74a1' is not like 10de:2330"),
    ([{"model": "M", "device_ids": ["10de:23301"]}], "platforms/p.yml: models[0] (M): device id '10de:23301' is not like 10de:2330"),
    ([{"model": "M", "device_ids": [0x2330]}], "platforms/p.yml: models[0] (M): device id 9008 is not like 10de:2330"),
    ([{"model": "M", "names": ["^NVIDIA H100 ("]}], "platforms/p.yml: models[0] (M): names: '^NVIDIA H100 (' does not compile: "),
    ([{"model": "M", "names": [42]}], "platforms/p.yml: models[0] (M): names: 42 is not a regular expression (a string)"),
    ([{"model": "M", "names": ["x"], "memory_bandwidth_gbps": -1}],
     "platforms/p.yml: models[0] (M): memory_bandwidth_gbps must be a number of at least 0, got -1"),
    ([{"model": "M", "names": ["x"], "nvlink_links": "18"}],
     "platforms/p.yml: models[0] (M): nvlink_links must be a number of at least 0, got '18'"),
    ([{"model": "M", "names": ["x"], "memory_gib": True}], "platforms/p.yml: models[0] (M): memory_gib must be a number of at "
                                                           "least 0, got True"),
])
def test_a_bad_model_is_refused(models, message):
    assert refused(platform(models=models)).startswith(message)


def test_an_upper_case_device_id_is_accepted_and_matched():
    entry = profile_data.check(platform(models=[{"model": "L40S", "device_ids": ["10DE:26B9"]}]), "platforms", "x")
    node = profile_node.describe(pf.l40s_x4())
    assert profile_select.choose(node, {"p": entry})[0] == "p"


@pytest.mark.parametrize("model, key", [
    ({"model": "M", "names": ["^NVIDIA H100"], "device_id": ["10de:2330"]}, "device_id"),
    ({"model": "M", "device_ids": ["10de:2330"], "nvlinks": 18}, "nvlinks"),
])
def test_an_unknown_key_of_a_model_is_refused(model, key):
    assert repr(key) in refused(platform(models=[model]))


@pytest.mark.parametrize("prefer, message", [
    ([], "platforms/p.yml: prefer must be a mapping (interconnect, cpu_vendor, node_kind)"),
    ({"gpu": ["h100"]}, "platforms/p.yml: prefer.gpu is not something a node is chosen by (known: interconnect, cpu_vendor, "
                        "node_kind)"),
    ({"interconnect": "nvswitch"}, "platforms/p.yml: prefer.interconnect must be a non-empty list"),
    ({"interconnect": []}, "platforms/p.yml: prefer.interconnect must be a non-empty list"),
    ({"interconnect": ["infiniband"]}, "platforms/p.yml: prefer.interconnect: 'infiniband' is not one of nvswitch, nvlink, "
                                       "pcie_switch, pcie"),
    ({"node_kind": ["kvm"]}, "platforms/p.yml: prefer.node_kind: 'kvm' is not one of bare_metal, proxmox_host, vm, lxc_guest, "
                             "container"),
])
def test_a_bad_preference_is_refused(prefer, message):
    assert refused(platform(prefer=prefer)) == message


def test_any_cpu_vendor_may_be_preferred():
    assert profile_data.check(platform(prefer={"cpu_vendor": ["HygonGenuine"]}), "platforms", "x")["prefer"] == {
        "cpu_vendor": ["HygonGenuine"]}


@pytest.mark.parametrize("expectations, message", [
    ([], "platforms/p.yml: expectations must be a mapping"),
    ({"gpu_count": [8]}, "platforms/p.yml: expectations.gpu_count must map node kinds (bare_metal, proxmox_host, vm, "
                         "lxc_guest, container) to GPU counts"),
    ({"gpu_count": {"kvm": [1]}}, "platforms/p.yml: expectations.gpu_count: 'kvm' is not a node kind (bare_metal, "
                                  "proxmox_host, vm, lxc_guest, container)"),
    ({"gpu_count": {"vm": 8}}, "platforms/p.yml: expectations.gpu_count.vm must be a list of GPU counts, got 8"),
    ({"gpu_count": {"vm": [0]}}, "platforms/p.yml: expectations.gpu_count.vm must be a list of GPU counts, got [0]"),
    ({"gpu_count": {"vm": [True]}}, "platforms/p.yml: expectations.gpu_count.vm must be a list of GPU counts, got [True]"),
    ({"decode_efficiency_pct": [95, 20]}, "platforms/p.yml: expectations.decode_efficiency_pct must be [low, high] percent, "
                                          "got [95, 20]"),
    ({"decode_efficiency_pct": [20]}, "platforms/p.yml: expectations.decode_efficiency_pct must be [low, high] percent, got [20]"),
    ({"decode_efficiency_pct": [-1, 20]}, "platforms/p.yml: expectations.decode_efficiency_pct must be [low, high] percent, "
                                          "got [-1, 20]"),
    ({"p2p_floors": "datasheet"}, "platforms/p.yml: expectations.p2p_floors must be link or none, got 'datasheet'"),
])
def test_bad_expectations_are_refused(expectations, message):
    assert refused(platform(expectations=expectations)) == message


RAIL = {"name": "r", "why": "because", "variables": ["host_cmdline_extra"], "forbid_args": ["^x$"]}


def rail(**over):
    entry = dict(RAIL)
    entry.update(over)
    return {k: v for k, v in entry.items() if v is not None}


@pytest.mark.parametrize("rails, message", [
    ({"name": "r"}, "platforms/p.yml: guard_rails must be a list"),
    (["r"], "platforms/p.yml: guard_rails[0] must be a mapping with a name (letters, digits, _ . -)"),
    ([rail(name="No Rail")], "platforms/p.yml: guard_rails[0] must be a mapping with a name (letters, digits, _ . -)"),
    ([rail(why=" ")], "platforms/p.yml: guard_rails[0] (r): why must say what the rail protects"),
    ([rail(why=None)], "platforms/p.yml: guard_rails[0] (r): why must say what the rail protects"),
    ([rail(forbid_args=None)], "platforms/p.yml: guard_rails[0] (r): exactly one of forbid_args, require, "
                               "min_housekeeping_cpus, got none"),
    ([rail(min_housekeeping_cpus=2)], "platforms/p.yml: guard_rails[0] (r): exactly one of forbid_args, require, "
                                      "min_housekeeping_cpus, got ['forbid_args', 'min_housekeeping_cpus']"),
    ([rail(node_kinds=["kvm"])], "platforms/p.yml: guard_rails[0] (r): node_kinds must list node kinds (bare_metal, "
                                 "proxmox_host, vm, lxc_guest, container), got ['kvm']"),
    ([rail(node_kinds="vm")], "platforms/p.yml: guard_rails[0] (r): node_kinds must list node kinds (bare_metal, "
                              "proxmox_host, vm, lxc_guest, container), got 'vm'"),
    ([rail(variables=None)], "platforms/p.yml: guard_rails[0] (r): variables must list the host role variables it reads"),
    ([rail(variables=["verify_p2p_enabled"])], "platforms/p.yml: guard_rails[0] (r): 'verify_p2p_enabled' is not a host role "
                                               "variable"),
    ([rail(forbid_args=[])], "platforms/p.yml: guard_rails[0] (r): forbid_args must list regular expressions of kernel "
                             "arguments"),
    ([rail(forbid_args=["^iommu=(pt$"])], "platforms/p.yml: guard_rails[0] (r): forbid_args: '^iommu=(pt$' does not compile: "),
    ([rail(forbid_args=None, variables=None, require={})], "platforms/p.yml: guard_rails[0] (r): require must map host role "
                                                           "variables to the value they must hold"),
    ([rail(forbid_args=None, variables=None, require={"serving_x": False})], "platforms/p.yml: guard_rails[0] (r): "
                                                                             "'serving_x' is not a host role variable"),
    ([rail(forbid_args=None, min_housekeeping_cpus=0)], "platforms/p.yml: guard_rails[0] (r): min_housekeeping_cpus must be "
                                                        "an integer of at least 1, got 0"),
    ([rail(forbid_args=None, min_housekeeping_cpus=True)], "platforms/p.yml: guard_rails[0] (r): min_housekeeping_cpus must "
                                                           "be an integer of at least 1, got True"),
    ([RAIL, rail(name="s", why="")], "platforms/p.yml: guard_rails[1] (s): why must say what the rail protects"),
])
def test_a_bad_guard_rail_is_refused(rails, message):
    assert refused(platform(guard_rails=rails)).startswith(message)


def test_an_unknown_key_of_a_guard_rail_is_refused():
    message = refused(platform(guard_rails=[rail(forbid_args=None, variables=None, require={"host_pcie_acs_enabled": False},
                                                 node_kind=["vm"])]))
    assert "node_kind" in message


@pytest.mark.parametrize("entry", [
    platform(models=[{"model": "M", "device_ids": ["10de:2330\n"]}]),
    platform(name="p\n"),
    platform(guard_rails=[rail(name="r\n")]),
])
def test_a_trailing_newline_is_refused(entry):
    refused(entry)


def test_a_check_fills_the_defaults():
    entry = profile_data.check(platform(), "platforms", "x")
    assert entry["settings"] == {} and entry["prefer"] == {} and entry["expectations"] == {}
    assert entry["guard_rails"] == [] and entry["description"] == ""
    intent = profile_data.check({"name": "fast"}, "intents", "x")
    assert intent == {"name": "fast", "settings": {}, "description": ""}


# ------------------------------------------------------------------------------ extend

def test_extend_with_nothing_is_the_shipped_profiles():
    data = shipped()
    assert profile_data.extend(data, None) is data and profile_data.extend(data, {}) is data


def test_the_inventory_merges_over_a_shipped_platform():
    data = shipped()
    out = profile_data.extend(data, {"platforms": {"l40s": {
        "expectations": {"decode_efficiency_pct": [30, 90]},
        "settings": {"verify_p2p_min_speedup": {"nvlink": 3}, "host_pcie_size": 4096}}}})
    l40s = out["platforms"]["l40s"]
    assert l40s["expectations"]["decode_efficiency_pct"] == [30, 90]
    assert l40s["expectations"]["gpu_count"] == data["platforms"]["l40s"]["expectations"]["gpu_count"]
    assert l40s["settings"] == {"verify_p2p_no_peer_access": "staged", "verify_p2p_min_speedup": {"pcie": 1.1, "nvlink": 3},
                                "host_pcie_size": 4096}
    assert l40s["models"] == data["platforms"]["l40s"]["models"] and "origin" not in l40s
    assert l40s["description"] == data["platforms"]["l40s"]["description"]
    # the shipped data and the other platforms are left as they were
    assert data["platforms"]["l40s"]["expectations"]["decode_efficiency_pct"] == [20, 95]
    assert out["platforms"]["hgx-hopper"] is data["platforms"]["hgx-hopper"]


def test_the_inventory_replaces_a_shipped_list_whole():
    out = profile_data.extend(shipped(), {"platforms": {"hgx-hopper": {
        "models": [{"model": "H100 SXM 64GB", "device_ids": ["10de:2330"], "nvlink_links": 18}]}}})
    assert [m["model"] for m in out["platforms"]["hgx-hopper"]["models"]] == ["H100 SXM 64GB"]
    out = profile_data.extend(shipped(), {"platforms": {"hgx-blackwell": {"guard_rails": []}}})
    assert out["platforms"]["hgx-blackwell"]["guard_rails"] == []


def test_the_inventory_adds_a_platform_and_it_is_chosen_for_its_gpu():
    extra = {"platforms": {"a100-sxm": {
        "description": "HGX A100",
        "models": [{"model": "A100 SXM 40GB", "device_ids": ["10de:20b0"], "memory_bandwidth_gbps": 1555, "nvlink_links": 12}],
        "prefer": {"interconnect": ["nvswitch"]},
        "settings": {"verify_p2p_min_speedup": {"nvlink": 4}},
        "expectations": {"gpu_count": {"bare_metal": [8, 2], "vm": [1, 2, 4, 8]}, "decode_efficiency_pct": [20, 95]}}}}
    data = profile_data.extend(shipped(), extra)
    assert data["platforms"]["a100-sxm"]["origin"] == "inventory"
    assert data["platforms"]["a100-sxm"]["name"] == "a100-sxm"
    result = profile_select.select(profile_node.describe(pf.unknown_gpu()), data)
    assert result["platform"] == "a100-sxm" and result["description"] == "HGX A100"
    assert result["reasons"] == ["2 x A100 SXM 40GB, by device id 10de:20b0", "interconnect nvswitch, as the platform prefers"]
    assert result["settings"]["verify_p2p_min_speedup"] == {"nvlink": 4}
    assert result["sources"]["verify_p2p_min_speedup"] == "platform a100-sxm"
    assert extra["platforms"]["a100-sxm"].get("origin") is None  # the inventory's data is not changed


def test_the_inventory_adds_an_intent_and_changes_base():
    data = profile_data.extend(shipped(), {
        "intents": {"batch-offline": {"settings": {"serving_benchmark_concurrency": [64, 128]}}},
        "base": {"settings": {"host_peermem_state": "present"}, "expectations": {"p2p_floors": "none"}}})
    assert data["intents"]["batch-offline"]["origin"] == "inventory"
    assert data["base"]["expectations"] == {"p2p_floors": "none"} and len(data["base"]["guard_rails"]) == 3
    result = profile_select.select(profile_node.describe(pf.l40s_x4()), data, intent="batch-offline")
    assert result["name"] == "l40s/batch-offline"
    assert result["sources"] == {"host_peermem_state": "base", "verify_p2p_no_peer_access": "platform l40s",
                                 "verify_p2p_min_speedup": "platform l40s", "serving_benchmark_concurrency": "intent batch-offline"}


@pytest.mark.parametrize("extra, message", [
    (["l40s"], "gpufleet_profiles_extra must be a mapping (base, platforms, intents), got list"),
    ({"platform": {}}, "gpufleet_profiles_extra: unknown key 'platform' (known: base, platforms, intents)"),
    ({"base": "x"}, "gpufleet_profiles_extra.base must be a mapping, got str"),
    ({"platforms": ["l40s"]}, "gpufleet_profiles_extra.platforms must be a mapping of name to profile, got list"),
    ({"platforms": {"l40s": "x"}}, "gpufleet_profiles_extra.platforms.l40s must be a mapping, got str"),
    ({"platforms": {"l40s": {"settings": {"host_pcie_size": "4k"}}}},
     "gpufleet_profiles_extra.platforms.l40s: host_pcie_size must be an integer, got '4k'"),
    ({"platforms": {"l40s": {"settings": {"host_lxc_memlock_limit": "unlimited"}}}},
     "gpufleet_profiles_extra.platforms.l40s: 'host_lxc_memlock_limit' is not a variable a profile can set"),
    ({"platforms": {"new": {"settings": {}}}}, "gpufleet_profiles_extra.platforms.new: models must be a non-empty list"),
    ({"platforms": {"Bad Name": {"models": [{"model": "M", "device_ids": ["10de:2330"]}]}}},
     "gpufleet_profiles_extra.platforms.Bad Name: name must be lower-case letters, digits, _ . - (got 'Bad Name')"),
    ({"platforms": {"new": {"models": [{"model": "M", "device_ids": ["10de:xyz1"]}]}}},
     "gpufleet_profiles_extra.platforms.new: models[0] (M): device id '10de:xyz1' is not like 10de:2330"),
    ({"platforms": {"new": {"models": [{"model": "M", "names": ["[H100"]}]}}},
     "gpufleet_profiles_extra.platforms.new: models[0] (M): names: '[H100' does not compile"),
    ({"platforms": {"l40s": {"expectations": {"gpu_count": {"lxc": [1]}}}}},
     "gpufleet_profiles_extra.platforms.l40s: expectations.gpu_count: 'lxc' is not a node kind"),
    ({"platforms": {"l40s": {"guard_rails": [{"name": "r", "why": "w", "node_kinds": ["qemu"], "require": {"host_x": 1}}]}}},
     "gpufleet_profiles_extra.platforms.l40s: guard_rails[0] (r): node_kinds must list node kinds"),
    ({"intents": {"latency": {"prefer": {"interconnect": ["pcie"]}}}},
     "gpufleet_profiles_extra.intents.latency: unknown key 'prefer' (known for intents: description, name, origin, settings)"),
    ({"base": {"models": []}}, "gpufleet_profiles_extra.base: unknown key 'models'"),
])
def test_bad_inventory_profiles_are_named(extra, message):
    assert extra_refused(extra).startswith(message)
