"""playbooks/rollout.yml and playbooks/revert.yml end to end on hosts reached with the local
connection, each with its own LXC config files and its own state file in the test's folder.

The tuning is narrowed so that the only thing that changes is what each host owns in the
test's folder (the memlock limit in its LXC configs): one sysctl at its current value without
persistence, no PCIe, no CPU power request, nvidia_peermem only with RDMA devices. Faults are
real: a container config that is a directory makes the lxc_memlock loop fail after its first
container was changed, and a host reached over SSH at a closed port is unreachable. The
molecule scenario `fleet` runs the same playbooks over SSH against podman hosts.
"""

import glob
import json
import os
import sys


from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLLOUT = open(os.path.join(REPO, "playbooks", "rollout.yml")).read()
REVERT = open(os.path.join(REPO, "playbooks", "revert.yml")).read()
CONFIG = "lxc.uts.name = {name}\nlxc.rootfs.path = dir:/nonexistent/{name}/rootfs\n"
HOSTS = ["h1", "h2", "h3", "h4", "h5"]


def _fleet(tmp_path, broken=(), unreachable=()):
    with open("/proc/sys/kernel/shmmni") as handle:
        shmmni = handle.read().strip()
    common = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "audit_artifacts_dir": str(tmp_path / "artifacts"),
        "verify_artifacts_dir": str(tmp_path / "artifacts"),
        "revert_artifacts_dir": str(tmp_path / "artifacts"),
        "rollout_artifacts_dir": str(tmp_path / "artifacts"),
        "audit_fleet_summary": False,
        "verify_p2p_enabled": False,
        "host_sysctl_name": "gpufleet-unit-test-rollout",
        "host_sysctl_settings": {"kernel.shmmni": int(shmmni)},
        "host_sysctl_persist": False,
        "host_pcie_mrrs_enabled": False,
        "host_cpu_power_max_idle_latency_us": None,
        "host_cpu_power_governor": None,
        "host_cpu_power_energy_performance_preference": None,
        "host_cpu_power_persist": False,
        "host_peermem_require": False,
        "host_lxc_memlock_select": ["none"],
        "host_lxc_memlock_from_inventory": False,
        "host_lxc_memlock_backup": False,
    }
    hosts = {}
    for name in HOSTS:
        folder = tmp_path / "nodes" / name
        configs = []
        for guest in ("a", "b"):
            path = folder / "lxc" / guest / "config"
            path.parent.mkdir(parents=True, exist_ok=True)
            if name in broken and guest == "b":
                path.mkdir()
            else:
                path.write_text(CONFIG.format(name=name + guest))
            configs.append({"path": str(path)})
        host = dict(common, host_lxc_containers=configs, gpufleet_state_path=str(folder / "state.json"))
        if name in unreachable:
            host.update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1,
                        ansible_ssh_common_args="-o ConnectTimeout=3 -o StrictHostKeyChecking=no")
        hosts[name] = host
    return {"all": {"children": {"gpu_hosts": {"hosts": hosts}}}}


def _configs(tmp_path):
    return {path: open(path).read() for path in sorted(glob.glob(str(tmp_path / "nodes" / "*" / "lxc" / "*" / "config")))
            if os.path.isfile(path)}


def _report(tmp_path):
    found = glob.glob(str(tmp_path / "artifacts" / "rollout-*.json"))
    assert len(found) == 1, found
    return json.load(open(found[0]))


def _run(tmp_path, inventory, playbook, *args):
    return run_playbook(tmp_path, inventory, playbook, ["--tags", "runtime", "-e", "rollout_artifacts_dir=%s"
                                                        % (tmp_path / "artifacts")] + list(args))


def test_a_failing_second_batch_is_reverted_and_stops_the_rollout(tmp_path):
    inventory = _fleet(tmp_path, broken=["h3"])
    before = _configs(tmp_path)
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_serial=2")
    assert rc != 0, out
    report = _report(tmp_path)
    assert report["batches"] == [["h1"], ["h2", "h3"], ["h4", "h5"]], out
    assert report["stopped_after_batch"] == 2, out
    hosts = report["hosts"]
    assert [hosts[h]["status"] for h in HOSTS] == ["tuned", "tuned", "failed", "untouched", "untouched"], out
    assert hosts["h3"]["reverted"] is True and hosts["h3"]["failure"]["stage"] == "tune"
    assert "is a directory" in hosts["h3"]["failure"]["message"]
    after = _configs(tmp_path)
    for name in ("h1", "h2"):
        assert "lxc.prlimit.memlock = unlimited" in after[str(tmp_path / "nodes" / name / "lxc" / "a" / "config")]
    for name in ("h3", "h4", "h5"):
        path = str(tmp_path / "nodes" / name / "lxc" / "a" / "config")
        assert after[path] == before[path], name
        assert not os.path.exists(str(tmp_path / "nodes" / name / "state.json")) or name == "h3"
    md = glob.glob(str(tmp_path / "artifacts" / "rollout-*.md"))[0]
    text = open(md).read()
    assert "h3" in text and "h4" in text and "batch 2" in text
    assert glob.glob(str(tmp_path / "artifacts" / "rollout-*.xml"))


def test_an_unreachable_canary_stops_everything_and_the_report_says_so(tmp_path):
    inventory = _fleet(tmp_path, unreachable=["h1"])
    before = _configs(tmp_path)
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_serial=2")
    assert rc != 0
    report = _report(tmp_path)
    assert report["stopped_after_batch"] == 1, out
    assert [report["hosts"][h]["status"] for h in HOSTS] == ["unreachable"] + ["untouched"] * 4
    assert _configs(tmp_path) == before


def test_full_rollout_then_revert_then_idempotent_rollout(tmp_path):
    inventory = _fleet(tmp_path)
    before = _configs(tmp_path)
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_serial=2", "-e", "gpufleet_run_id=first")
    assert rc == 0, out
    assert _report(tmp_path)["stopped_after_batch"] is None
    assert all("memlock = unlimited" in text for text in _configs(tmp_path).values())
    rc, out = run_playbook(tmp_path, inventory, REVERT)
    assert rc == 0, out
    assert _configs(tmp_path) == before
    for name in HOSTS:  # written by gpufleet.tuning.artifact_files, through the folder's descriptor
        assert json.loads((tmp_path / "artifacts" / name / "revert.json").read_text())["host"] == name
    assert os.path.exists(tmp_path / "artifacts" / "fleet-drift.json")
    rc, out = run_playbook(tmp_path, inventory, REVERT)
    assert rc == 0 and "changed=0" in out and "changed=1" not in out, out


# A health finding planted through the inventory (audit_rules_extra): a rule of severity H that
# holds on any node (this machine's GPU count is whatever it is, zero included), as a real
# remapped-row failure would on a sick GPU. The gate and the rollout see only its verdict.
SICK = [{"id": "planted_hardware_fault", "severity": "H", "action": "rma", "title": "Planted fault",
         "facts": {"gpus": "health.gpus_pci"}, "when": "gpus >= `0`",
         "message": "a planted fault ({gpus} GPUs on the bus)",
         "fix": {"class": "manual", "steps": "replace it"}, "rationale": "a test"}]


def _sicken(inventory, *names):
    for name in names:
        inventory["all"]["children"]["gpu_hosts"]["hosts"][name]["audit_rules_extra"] = SICK
    return inventory


def test_a_sick_host_is_quarantined_untuned_while_the_others_are_tuned(tmp_path):
    inventory = _sicken(_fleet(tmp_path), "h3")
    before = _configs(tmp_path)
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_serial=2", "-e", "gpufleet_run_id=sick")
    assert rc == 0, out
    report = _report(tmp_path)
    hosts = report["hosts"]
    assert [hosts[h]["status"] for h in HOSTS] == ["tuned", "tuned", "quarantined", "tuned", "tuned"], out
    assert report["stopped_after_batch"] is None
    sick = hosts["h3"]
    assert sick["reverted"] is False and sick["changes"] == []
    assert sick["health"]["status"] == "quarantined" and sick["health"]["actions"] == ["rma"]
    assert [c["name"] for c in sick["checks"] if c["status"] == "failed"] == ["health"]
    after = _configs(tmp_path)
    path = str(tmp_path / "nodes" / "h3" / "lxc" / "a" / "config")
    assert after[path] == before[path]
    assert not os.path.exists(str(tmp_path / "nodes" / "h3" / "state.json"))
    verdict = json.loads((tmp_path / "artifacts" / "h3" / "health.json").read_text())
    assert verdict["status"] == "quarantined" and verdict["findings"][0]["rule"] == "planted_hardware_fault"
    assert json.loads((tmp_path / "artifacts" / "h1" / "health.json").read_text())["status"] == "healthy"
    xml = open(glob.glob(str(tmp_path / "artifacts" / "rollout-*.xml"))[0]).read()
    assert "planted fault" in xml and "rma" in xml


def test_a_sick_canary_stops_the_rollout(tmp_path):
    inventory = _sicken(_fleet(tmp_path), "h1")
    before = _configs(tmp_path)
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_serial=2")
    assert rc != 0, out
    report = _report(tmp_path)
    assert [report["hosts"][h]["status"] for h in HOSTS] == ["quarantined"] + ["untouched"] * 4, out
    assert "a canary must be healthy" in report["hosts"]["h2"]["reason"]
    assert _configs(tmp_path) == before


def test_policy_stop_ends_the_rollout_after_the_sick_host_s_batch(tmp_path):
    inventory = _sicken(_fleet(tmp_path), "h3")
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_serial=2", "-e", "gpufleet_health_policy=stop")
    assert rc != 0, out
    hosts = _report(tmp_path)["hosts"]
    assert [hosts[h]["status"] for h in HOSTS] == ["tuned", "tuned", "quarantined", "untouched", "untouched"], out
    assert "gpufleet_health_policy is stop" in hosts["h4"]["reason"]


def test_policy_report_tunes_a_sick_host_and_says_so(tmp_path):
    inventory = _sicken(_fleet(tmp_path), "h2")
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_health_policy=report")
    assert rc == 0, out
    host = _report(tmp_path)["hosts"]["h2"]
    assert host["status"] == "tuned"
    health = [c for c in host["checks"] if c["name"] == "health"][0]
    assert health["status"] == "failed" and "tuned anyway" in health["message"]


TUNE = open(os.path.join(REPO, "playbooks", "tune.yml")).read()


def _with_guest(inventory, host):
    """A serving container of ``host`` (gpufleet_lxc_host) that tune.yml's second play would tune."""
    inventory["all"]["children"]["gpu_containers"] = {"hosts": {"guest-of-" + host: {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gpufleet_lxc_host": host}}}
    return inventory


def test_tune_leaves_a_sick_host_and_its_container_alone_and_tunes_the_others(tmp_path):
    inventory = _with_guest(_sicken(_fleet(tmp_path), "h2"), "h2")
    before = _configs(tmp_path)
    rc, out = run_playbook(tmp_path, inventory, TUNE, ["--tags", "runtime", "-e",
                                                       "report_artifacts_dir=%s" % (tmp_path / "artifacts")])
    assert rc == 0, out
    after = _configs(tmp_path)
    for name in HOSTS:
        path = str(tmp_path / "nodes" / name / "lxc" / "a" / "config")
        if name == "h2":
            assert after[path] == before[path]
        else:
            assert "lxc.prlimit.memlock = unlimited" in after[path], name
    assert "guest-of-h2 left alone: its host h2 is quarantined (rma)" in out
    assert json.loads((tmp_path / "artifacts" / "h2" / "health.json").read_text())["status"] == "quarantined"
    rc, out = run_playbook(tmp_path, inventory, TUNE, ["--tags", "runtime", "-e", "gpufleet_health_policy=stop",
                                                       "-e", "report_artifacts_dir=%s" % (tmp_path / "artifacts")])
    assert rc != 0 and "gpufleet_health_policy is stop" in out, out


def test_a_host_outside_its_profile_s_expectations_fails_the_expectations_gate(tmp_path):
    """gpufleet_gate_expectations: h3's profile (base, amended for it alone) expects 8 GPUs on a
    node of any kind and this machine has none: its expectations check fails, its tuning is
    reverted and the rollout stops after its batch; the others' expectations are met."""
    inventory = _fleet(tmp_path)
    eight = dict((kind, [8]) for kind in ("bare_metal", "proxmox_host", "vm", "lxc_guest", "container"))
    inventory["all"]["children"]["gpu_hosts"]["hosts"]["h3"]["gpufleet_profiles_extra"] = {
        "base": {"expectations": {"gpu_count": eight}}}
    before = _configs(tmp_path)
    rc, out = _run(tmp_path, inventory, ROLLOUT, "-e", "gpufleet_serial=2", "-e", "gpufleet_gate_expectations=true")
    assert rc != 0, out
    report = _report(tmp_path)
    hosts = report["hosts"]
    assert [hosts[h]["status"] for h in HOSTS] == ["tuned", "tuned", "failed", "untouched", "untouched"], out
    assert hosts["h3"]["failure"]["stage"] == "expectations" and hosts["h3"]["reverted"] is True
    assert "0 GPU(s); base expects 8" in hosts["h3"]["failure"]["message"]
    for name in ("h1", "h2"):
        assert [c["status"] for c in hosts[name]["checks"] if c["name"] == "expectations"] == ["passed"], name
    path = str(tmp_path / "nodes" / "h3" / "lxc" / "a" / "config")
    assert _configs(tmp_path)[path] == before[path]
    normal = json.loads((tmp_path / "artifacts" / "h3" / "normal.json").read_text())
    assert normal["normal"] is False and normal["outside"][0]["check"] == "gpu_count"
