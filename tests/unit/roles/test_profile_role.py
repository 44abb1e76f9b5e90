"""The profile role (issue 39): the profile chosen from the facts on the controller, its settings
reaching the host, verify and serving roles through their defaults, the inventory still winning,
and the guard rails holding before the host role changes anything.

The first tests read the roles' YAML: every variable a profile may set (profile_data.SETTABLE)
has a default that reads the profile, and no other default does (a profile setting any other
would be silently ignored); the audit's node_facts entry point chooses the profile. The last ones
run ansible-playbook on this machine with facts of other platforms (tests/unit/profile_facts.py).
"""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_data
from ansible_collections.gpufleet.tuning.tests.unit import profile_facts
from ansible_collections.gpufleet.tuning.tests.unit.helpers import result_of, role_base_defaults, run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
READS_PROFILE = re.compile(r"profile_settings\.(\w+)")
INVENTORY = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                             "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}


def raw_defaults(role):
    folder = os.path.join(REPO, "roles", role, "defaults")
    paths = [os.path.join(folder, "main.yml")] if os.path.isfile(os.path.join(folder, "main.yml")) else [
        os.path.join(folder, "main", n) for n in sorted(os.listdir(os.path.join(folder, "main")))]
    merged = {}
    for path in paths:
        with open(path) as handle:
            merged.update(yaml.safe_load(handle) or {})
    return merged


def test_every_settable_variable_reads_the_profile_and_no_other_does():
    reading = {}
    for role in ("host", "verify", "serving", "container", "audit", "rollout", "health"):
        for name, value in raw_defaults(role).items():
            for found in READS_PROFILE.findall(str(value)):
                reading[name] = found
    assert sorted(reading) == sorted(profile_data.SETTABLE), "defaults reading profile_settings vs SETTABLE"
    assert all(reading[name] == name for name in reading), "each default reads its own name: %s" % reading


@pytest.mark.parametrize("role", ["host", "verify", "serving"])
def test_the_base_values_are_the_argument_specs_defaults(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    base = role_base_defaults(REPO, role)
    for name in profile_data.SETTABLE:
        if name in base:
            assert base[name] == options[name].get("default"), name
            assert isinstance(base[name], profile_data.SETTABLE[name]), name


def test_the_audit_chooses_the_profile_right_after_reading_the_node():
    with open(os.path.join(REPO, "roles", "audit", "tasks", "node_facts.yml")) as handle:
        tasks = yaml.safe_load(handle)
    assert "gpufleet.tuning.node_facts" in tasks[0]
    profile = tasks[1]
    assert profile["ansible.builtin.import_role"]["name"] == "gpufleet.tuning.profile"
    assert profile["when"] == "audit_node_facts.facts is defined"


def test_the_host_role_holds_the_guard_rails_before_anything_else():
    with open(os.path.join(REPO, "roles", "host", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    names = [t.get("name") for t in tasks]
    guard = names.index("Hold the profile's guard rails")
    assert guard < names.index("Start this run's record") < names.index("Tune")
    assert "gpufleet.tuning.profile_guard" in str(tasks[guard]["vars"])
    assert "always" in tasks[guard]["tags"]


PROFILE_PLAY = """
- hosts: localhost
  gather_facts: false
  vars:
    facts_file: "{{ playbook_dir }}/facts.json"
  tasks:
    - name: Choose the profile from these facts
      ansible.builtin.import_role:
        name: gpufleet.tuning.profile
      vars:
        profile_facts: "{{ lookup('ansible.builtin.file', facts_file) | from_json }}"
        profile_artifacts_dir: "{{ playbook_dir }}/artifacts"
    - name: Make the host role's defaults visible
      ansible.builtin.include_role:
        name: gpufleet.tuning.host
        tasks_from: plan
        public: true
      vars:
        host_plan_parts: []
    - name: Show them
      ansible.builtin.debug:
        msg: "RESULT {{ {'profile': profile_selected.profile.name, 'reasons': profile_selected.profile.reasons,
                         'cmdline': host_cmdline_present, 'acs': host_pcie_acs_enabled,
                         'sysctl': host_sysctl_settings, 'idle': host_cpu_power_max_idle_latency_us | int,
                         'cstate': host_cmdline_cstate_cap | bool} | to_json }}"
"""


def choose(tmp_path, facts, *args, inventory_vars=None):
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    inventory = json.loads(json.dumps(INVENTORY))
    inventory["all"]["hosts"]["localhost"].update(inventory_vars or {})
    rc, out = run_playbook(tmp_path, inventory, PROFILE_PLAY, list(args))
    assert rc == 0, out
    return out


def test_the_facts_choose_the_platform_and_its_settings_reach_the_host_role(tmp_path):
    result = result_of(choose(tmp_path, profile_facts.rtx_pro_6000_x8()))
    assert result["profile"] == "rtx-pro-6000-blackwell/throughput"
    assert any("10de:2bb5" in r for r in result["reasons"]) and any("pcie_switch" in r for r in result["reasons"])
    assert result["cmdline"] == [] and result["acs"] is True, "the platform's settings, not the base's"
    assert result["sysctl"]["vm.swappiness"] == 10, "base where the platform sets nothing"
    record = json.loads((tmp_path / "artifacts" / "localhost" / "profile.json").read_text())
    assert record["name"] == "rtx-pro-6000-blackwell/throughput" and record["sources"]["host_pcie_acs_enabled"] == \
        "platform rtx-pro-6000-blackwell"


def test_an_unknown_gpu_gets_base_and_the_roles_defaults(tmp_path):
    result = result_of(choose(tmp_path, profile_facts.unknown_gpu()))
    assert result["profile"] == "base/throughput"
    assert "no platform profile knows it" in " ".join(result["reasons"])
    assert result["cmdline"] == ["iommu=pt"] and result["acs"] is False


def test_the_intent_and_a_pin_layer_over_the_facts_and_the_inventory_wins(tmp_path):
    result = result_of(choose(tmp_path, profile_facts.hgx_h100(), "-e", "gpufleet_profile_intent=latency",
                              inventory_vars={"gpufleet_profile": "rtx-pro-6000-blackwell", "host_pcie_acs_enabled": False}))
    assert result["profile"] == "rtx-pro-6000-blackwell/latency"
    assert "pinned by the inventory" in result["reasons"][0] and "hgx-hopper" in result["reasons"][1]
    assert result["idle"] == 0 and result["cstate"] is True, "the latency intent"
    assert result["acs"] is False, "the inventory's own value wins over the platform's"


def test_a_pinned_profile_shows_its_settings_against_the_facts_choice_in_diff_mode(tmp_path):
    out = choose(tmp_path, profile_facts.hgx_h100(), "--check", "--diff", "-e", "gpufleet_profile=l40s")
    assert "profile hgx-hopper/throughput (chosen from the facts)" in out
    assert "profile l40s/throughput (gpufleet_profile)" in out
    assert any("verify_p2p_no_peer_access: " in line and "staged" in line and "platform l40s" in line for line in out.splitlines())


def test_a_bad_pin_is_named_and_nothing_is_written(tmp_path):
    (tmp_path / "facts.json").write_text(json.dumps(profile_facts.hgx_h100()))
    rc, out = run_playbook(tmp_path, INVENTORY, PROFILE_PLAY, ["-e", "gpufleet_profile=hgx-h900"])
    assert rc != 0 and "'hgx-h900' is not a platform profile" in out
    assert not (tmp_path / "artifacts").exists()


GUARD_PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Choose the profile from these facts (always, as tune.yml's audit import)
      ansible.builtin.import_role:
        name: gpufleet.tuning.profile
      vars:
        profile_facts: "{{ lookup('ansible.builtin.file', playbook_dir ~ '/facts.json') | from_json }}"
        profile_artifacts_dir: "{{ playbook_dir }}/artifacts"
      tags: [always]
    - name: Tune
      ansible.builtin.import_role:
        name: gpufleet.tuning.host
"""


@pytest.mark.parametrize("extra, waive, refused", [
    (["iommu=pt"], [], "guard rail no_identity_iommu: host_cmdline_extra holds 'iommu=pt'"),
    (["isolcpus=managed_irq,domain,1-127"], [], "guard rail housekeeping_cpus: isolcpus=managed_irq,domain,1-127 leave 1"),
    (["iommu=pt"], ["no_identity_iommu"], None),
])
def test_the_guard_rails_refuse_before_anything_changes(tmp_path, extra, waive, refused):
    (tmp_path / "facts.json").write_text(json.dumps(profile_facts.rtx_pro_6000_x8()))
    inventory = json.loads(json.dumps(INVENTORY))
    inventory["all"]["hosts"]["localhost"].update(host_cmdline_extra=extra, gpufleet_profile_waive=waive,
                                                  host_state_path=str(tmp_path / "state.json"))
    rc, out = run_playbook(tmp_path, inventory, GUARD_PLAY, ["--check", "--tags", "runtime"])
    if refused:
        assert rc != 0 and refused in out, out
        assert "Nothing was changed" in out
        assert not (tmp_path / "state.json").exists()
    else:
        assert "Hold the profile's guard rails" in out and "guard rail" not in out.split("Hold the profile's guard rails")[1][:400]


def test_a_mapping_a_profile_sets_is_combined_with_the_role_s_base_key_by_key(tmp_path):
    extra = {"intents": {"quiet-swap": {"settings": {"host_sysctl_settings": {"vm.swappiness": 1}}}}}
    result = result_of(choose(tmp_path, profile_facts.l40s_x4(), "-e", "gpufleet_profile_intent=quiet-swap",
                              "-e", json.dumps({"gpufleet_profiles_extra": extra})))
    assert result["profile"] == "l40s/quiet-swap"
    assert result["sysctl"]["vm.swappiness"] == 1, "the intent's key"
    assert result["sysctl"]["kernel.numa_balancing"] == 0, "the base's other keys kept"
