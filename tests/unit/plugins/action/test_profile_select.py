"""gpufleet.tuning.profile_select: one host's profile chosen in the controller process from its
facts, with the shipped profiles and the inventory's; bad input named before anything is
written; a profile that breaks its own guard rails refused unless the rail is waived; an unknown
rail refused for a waiver; profile.json written as the action writes it, a link refused; the
diff of a pin against the facts' choice."""

import datetime
import json
import os
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.tuning.plugins.action import profile_select as action
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files, profile_report
from ansible_collections.gpufleet.tuning.tests.unit import profile_facts as pf

NOW = datetime.datetime(2026, 3, 1, 12, 30, 5, tzinfo=datetime.timezone.utc)


def args(node_facts, **extra):
    found = {"host": "node-a", "facts": node_facts, "profiles_dir": pf.PROFILES_DIR}
    found.update(extra)
    return found


def choose(facts, **extra):
    return action.choose(args(facts, **extra), now=NOW)


def run_action(task_args, check_mode=False, diff=False):
    task = mock.MagicMock(args=task_args, check_mode=check_mode, diff=diff, async_val=0, action="gpufleet.tuning.profile_select")
    module = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    return module.run(task_vars={})


# ------------------------------------------------------------------------------ the choice

@pytest.mark.parametrize("shape, name", [
    ("hgx-h100", "hgx-hopper/throughput"),
    ("hgx-b200", "hgx-blackwell/throughput"),
    ("vm-h100-x1", "hgx-hopper/throughput"),
    ("vm-h200-x2", "hgx-hopper/throughput"),
    ("h100-nvl-pair", "h100-pcie/throughput"),
    ("l40s-x4", "l40s/throughput"),
    ("rtx-pro-6000-x8", "rtx-pro-6000-blackwell/throughput"),
    ("lxc-l40s", "l40s/throughput"),
    ("a100", "base/throughput"),
    ("mixed", "base/throughput"),
    ("no-gpu", "base/throughput"),
])
def test_each_shape_gets_its_profile_with_the_facts_only_checks(shape, name):
    profile, auto = choose(pf.shape(shape))
    assert profile["name"] == name and auto is None
    assert profile["host"] == "node-a" and profile["time"] == "2026-03-01T12:30:05Z"
    assert {c["check"] for c in profile["checks"]} <= {"gpu_count", "nvlink_links", "memory_bandwidth"}
    assert [c for c in profile["checks"] if c["status"] == "outside"] == []
    json.dumps(profile)  # a record


def test_the_checks_of_an_hgx_board():
    profile, _auto = choose(pf.hgx_h100())
    assert [c["check"] for c in profile["checks"]] == ["gpu_count"] + ["nvlink_links"] * 8 + ["memory_bandwidth"] * 8
    assert {c["status"] for c in profile["checks"]} == {"ok"}


def test_a_node_outside_its_expectations_is_chosen_and_its_checks_say_so():
    facts = pf.build_facts([pf.gpu(b, pf.H100_SXM, links=18, active=17) for b in pf.HGX_BDFS[:2]], nvswitches=4)
    profile, _auto = choose(facts)
    outside = [(c["check"], c["message"]) for c in profile["checks"] if c["status"] == "outside"]
    assert outside == [("gpu_count", "2 GPU(s); hgx-hopper expects 8 or 4 on a bare_metal node"),
                       ("nvlink_links", "17 of 18 NVLinks active (H100 SXM 80GB)"),
                       ("nvlink_links", "17 of 18 NVLinks active (H100 SXM 80GB)")]


def test_a_pin_returns_the_facts_choice_beside_it():
    profile, auto = choose(pf.hgx_h200(), pin="base", intent="latency")
    assert profile["name"] == "base/latency" and profile["pinned"] is True
    assert profile["auto"]["platform"] == "hgx-hopper"
    assert auto["name"] == "hgx-hopper/latency" and auto["pinned"] is False
    text = action._settings_text(auto)  # pylint: disable=protected-access
    assert text.splitlines()[0] == "# hgx-hopper/latency (HGX H100/H200, SXM GPUs on NVLink 4 through NVSwitch)"
    assert text.splitlines()[1:] == [
        "host_cmdline_cstate_cap: true  # intent latency",
        "host_cpu_power_max_idle_latency_us: 0  # intent latency",
        "serving_benchmark_concurrency: [1, 2]  # intent latency",
        'serving_gate_figures: ["decode_tokens_per_s", "ttft_ms.p50"]  # intent latency',
        'verify_p2p_min_speedup: {"nvlink": 4, "pcie": 1.2}  # platform hgx-hopper']


def test_the_inventory_s_profiles_are_used():
    extra = {"platforms": {"a100-sxm": {"models": [{"model": "A100 SXM 40GB", "device_ids": ["10de:20b0"],
                                                    "memory_bandwidth_gbps": 1555, "nvlink_links": 12}],
                                        "expectations": {"gpu_count": {"bare_metal": [8]}}}}}
    profile, _auto = choose(pf.unknown_gpu(), profiles_extra=extra)
    assert profile["name"] == "a100-sxm/throughput"
    assert [(c["check"], c["status"]) for c in profile["checks"]] == [
        ("gpu_count", "outside"), ("nvlink_links", "ok"), ("nvlink_links", "ok"), ("memory_bandwidth", "ok"),
        ("memory_bandwidth", "ok")]


def test_the_record_is_plain_text():
    facts = pf.l40s_x4()
    facts["gpus"][0]["name"] = pf.env("NVIDIA L40S\x1b\u202e\x00", "nvml:nvmlDeviceGetName")
    profile, _auto = choose(facts)
    assert profile["node"]["gpus"][0]["name"] == "NVIDIA L40S"
    assert profile["platform"] == "l40s"  # by device id: the name pattern is anchored


# ------------------------------------------------------------------------------ guard rails

def test_a_profile_breaking_its_own_guard_rail_via_profiles_extra_is_refused():
    extra = {"platforms": {"rtx-pro-6000-blackwell": {"settings": {"host_cmdline_present": ["iommu=pt"]}}}}
    with pytest.raises(AnsibleActionFail) as exc:
        choose(pf.rtx_pro_6000_x8(), profiles_extra=extra)
    assert str(exc.value).startswith("profile_select: profile rtx-pro-6000-blackwell/")
    assert ("breaks its own guard rails: guard rail no_identity_iommu: host_cmdline_present holds 'iommu=pt' (forcing "
            "identity (passthrough) IOMMU domains on NVIDIA Blackwell GPUs") in str(exc.value)


def test_a_platform_breaking_its_own_rail_is_refused_on_any_host():
    extra = {"platforms": {"hgx-blackwell": {"settings": {"host_cmdline_present": ["iommu=pt"]}}}}
    with pytest.raises(AnsibleActionFail, match="hgx-blackwell.*no_identity_iommu"):
        choose(pf.hgx_h100(), profiles_extra=extra)


def test_an_intent_breaking_a_rail_is_refused():
    extra = {"intents": {"isolated": {"settings": {"host_cmdline_extra": ["isolcpus=managed_irq,domain,1-63"]}}}}
    with pytest.raises(AnsibleActionFail, match=r"profile_select: profile l40s/isolated breaks its own guard rails: guard rail "
                                                r"housekeeping_cpus: isolcpus=managed_irq,domain,1-63 leave 1 of the 64 online"):
        choose(pf.lxc_l40s(), profiles_extra=extra, intent="isolated")
    profile, _auto = choose(pf.lxc_l40s(), profiles_extra=extra, intent="isolated", waive=["housekeeping_cpus"])
    assert profile["waived"] == ["housekeeping_cpus"] and profile["violations"][0]["waived"] is True


def test_a_waived_rail_lets_the_profile_through_and_is_kept():
    extra = {"platforms": {"hgx-blackwell": {"settings": {"host_cmdline_extra": ["iommu=pt"]}}}}
    profile, _auto = choose(pf.hgx_b200(), profiles_extra=extra, waive=["no_identity_iommu"])
    assert profile["name"] == "hgx-blackwell/throughput" and profile["waived"] == ["no_identity_iommu"]
    assert profile["violations"] == [{"rail": "no_identity_iommu", "problem": "host_cmdline_extra holds 'iommu=pt'",
                                      "why": profile["violations"][0]["why"], "waived": True}]
    assert profile_report.record(profile)["waived"] == ["no_identity_iommu"]


def test_a_rail_of_another_platform_may_be_waived():
    profile, _auto = choose(pf.l40s_x4(), waive=["no_identity_iommu"])
    assert profile["waived"] == [] and profile["violations"] == []


def test_waive_of_an_unknown_rail_is_refused():
    with pytest.raises(AnsibleActionFail) as exc:
        choose(pf.l40s_x4(), waive=["housekeeping", "no_identity_iommu"])
    assert str(exc.value) == (
        "profile_select: gpufleet_profile_waive names no guard rail: housekeeping (known: housekeeping_cpus, "
        "no_acs_change_in_a_vm, no_identity_iommu, no_pcie_writes_in_a_container)")


def test_waive_of_a_rail_the_inventory_added_is_known():
    extra = {"platforms": {"l40s": {"guard_rails": [{"name": "no_mrrs", "why": "riser", "require": {"host_pcie_mrrs_enabled": False}}]}}}
    profile, _auto = choose(pf.l40s_x4(), profiles_extra=extra, waive=["no_mrrs"])
    assert [r["name"] for r in profile["guard_rails"]][-1] == "no_mrrs"


# ------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("extra, message", [
    ({"host": ""}, "host must be the inventory name, got ''"),
    ({"host": None}, "host must be the inventory name, got None"),
    ({"facts": ["gpus"]}, "facts must be the facts of gpufleet.tuning.node_facts (a mapping), got list"),
    ({"facts": None}, "facts must be the facts of gpufleet.tuning.node_facts (a mapping), got "),
    ({"pin": 3}, "pin (gpufleet_profile) must be a profile name, got 3"),
    ({"pin": "hopper"}, "gpufleet_profile 'hopper' is not a platform profile (known: base, h100-pcie, hgx-blackwell, hgx-hopper, "
                        "l40s, rtx-pro-6000-blackwell)"),
    ({"intent": "fastest"}, "gpufleet_profile_intent 'fastest' is not an intent (known: latency, throughput)"),
    ({"waive": "housekeeping_cpus"}, "waive (gpufleet_profile_waive) must be a list of guard rail names, got 'housekeeping_cpus'"),
    ({"waive": [1]}, "waive (gpufleet_profile_waive) must be a list of guard rail names, got [1]"),
    ({"profiles_dir": "roles/profile/files"}, "profiles_dir must be an absolute path, got 'roles/profile/files'"),
    ({"profiles_dir": "/nonexistent/profiles"}, "cannot read the profile file /nonexistent/profiles/base.yml: "),
    ({"profiles_extra": ["l40s"]}, "gpufleet_profiles_extra must be a mapping (base, platforms, intents), got list"),
    ({"profiles_extra": {"platforms": {"l40s": {"settings": {"host_cmdline_absent": []}}}}},
     "gpufleet_profiles_extra.platforms.l40s: 'host_cmdline_absent' is not a variable a profile can set"),
    ({"profiles_extra": {"platforms": {"l40s": {"models": [{"model": "L40S", "device_ids": ["26b9"]}]}}}},
     "gpufleet_profiles_extra.platforms.l40s: models[0] (L40S): device id '26b9' is not like 10de:2330"),
])
def test_bad_input_is_named(tmp_path, extra, message):
    folder = tmp_path / "node-a"
    with pytest.raises(AnsibleActionFail) as exc:
        run_action(args(pf.l40s_x4(), path=str(folder), **extra))
    assert str(exc.value).startswith("profile_select: " + message)
    assert not folder.exists()


@pytest.mark.parametrize("intent", [["latency"], {"name": "latency"}])
def test_an_intent_that_is_not_a_name_is_named(intent):
    with pytest.raises(AnsibleActionFail, match="intent"):
        choose(pf.l40s_x4(), intent=intent)


# ------------------------------------------------------------------------------ the record

def test_run_writes_profile_json(tmp_path):
    folder = tmp_path / "node-a"
    result = run_action(args(pf.rtx_pro_6000_x8(), path=str(folder), mode="0640"))
    assert result["changed"] is False and result["path"] == str(folder)
    assert result["profile"]["name"] == "rtx-pro-6000-blackwell/throughput" and "diff" not in result
    written = json.loads((folder / "profile.json").read_text())
    assert written["name"] == "rtx-pro-6000-blackwell/throughput" and written["host"] == "node-a"
    assert written["settings"]["host_pcie_acs_enabled"] is True
    assert oct(os.stat(str(folder / "profile.json")).st_mode & 0o777) == "0o640"
    assert [f["name"] for f in result["files"]] == ["profile.json"] and result["files"][0]["changed"] is True


def test_the_record_as_the_action_writes_it(tmp_path):
    folder = tmp_path / "node-a"
    profile, _auto = choose(pf.vm_h200_x2())
    text = json.dumps(profile, indent=4, sort_keys=True) + "\n"
    first = artifact_files.write(str(folder), {action.RECORD: text}, 0o644, 0o755, False)
    assert first["changed"] is True and first["created"] is True
    again = artifact_files.write(str(folder), {action.RECORD: text}, 0o644, 0o755, False)
    assert again["changed"] is False
    assert json.loads((folder / "profile.json").read_text()) == profile


def test_run_in_check_mode_writes_nothing_and_without_path_writes_nowhere(tmp_path):
    folder = tmp_path / "node-a"
    result = run_action(args(pf.l40s_x4(), path=str(folder)), check_mode=True)
    assert result["profile"]["name"] == "l40s/throughput" and not folder.exists()
    result = run_action(args(pf.l40s_x4()))
    assert result["files"] == [] and result["path"] is None


def test_run_refuses_a_link_where_profile_json_goes(tmp_path):
    folder = tmp_path / "node-a"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(str(victim), str(folder / "profile.json"))
    with pytest.raises(AnsibleActionFail, match="profile.json.*symbolic link"):
        run_action(args(pf.l40s_x4(), path=str(folder)))
    assert victim.read_text() == "keep"


def test_run_with_diff_shows_the_pin_against_the_facts():
    result = run_action(args(pf.hgx_b200(), pin="hgx-hopper"), diff=True)
    diff = result["diff"]
    assert diff["before_header"] == "profile hgx-blackwell/throughput (chosen from the facts)"
    assert diff["after_header"] == "profile hgx-hopper/throughput (gpufleet_profile)"
    assert "host_cmdline_present: []  # platform hgx-blackwell" in diff["before"].splitlines()
    assert "host_cmdline_present" not in diff["after"]
    assert "diff" not in run_action(args(pf.hgx_b200(), pin="hgx-blackwell"), diff=True)
    assert "diff" not in run_action(args(pf.hgx_b200(), pin="hgx-hopper"), diff=False)


def test_run_refuses_an_unknown_argument():
    with pytest.raises(AnsibleActionFail, match="Invalid options for gpufleet.tuning.profile_select: colour"):
        run_action(args(pf.l40s_x4(), colour="blue"))
