"""The verify role's read-back, run with ansible-playbook: the host role's part tasks again.

Everything runs with --tags verify, so the host role's own part tasks are skipped and the
read-back (the same part tasks through the host role's plan entry point, in check mode, for the
runtime parts) is the only thing that touches this machine: nothing is written. The tuning is
narrowed to what reads the same everywhere: one sysctl at its current value under a profile
name no host has, no PCIe, no CPU power request, nvidia_peermem only with RDMA devices and not
required, and one LXC container: a config file in the test's folder, which lacks the memlock
limit, so its read-back must report drift from its change records.
"""

import json
import os
import sys

import pytest
import yaml

from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODULES = yaml.safe_load(open(os.path.join(REPO, "roles", "verify", "vars", "main.yml")))["__verify_readback_parts"]
SUMMARY = "TASK [gpufleet.tuning.host : Summarize what this run changed on the host]"

HOST_AND_VERIFY = """
- name: Tune and verify, as playbooks/tune.yml
  hosts: all
  gather_facts: false
  roles:
    - role: gpufleet.tuning.host
    - role: gpufleet.tuning.verify
"""

VERIFY_ONLY = """
- name: Verify only
  hosts: all
  gather_facts: false
  roles:
    - role: gpufleet.tuning.verify
"""

CONFIG = "lxc.uts.name = web\nlxc.rootfs.path = dir:/nonexistent/web/rootfs\n"


def run(tmp_path, playbook, *args):
    """ansible-playbook PLAYBOOK --tags verify ARGS against one local host; (rc, output)."""
    with open("/proc/sys/kernel/shmmni") as handle:
        shmmni = handle.read().strip()
    host_vars = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "verify_artifacts_dir": str(tmp_path / "artifacts"),
        "verify_p2p_enabled": False,
        "host_sysctl_name": "gpufleet-unit-test-readback",
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
        "host_lxc_containers": [{"path": str(tmp_path / "lxc" / "web" / "config")}],
        # A restart would be queued by the host role's apply only: the read-back must never.
        "host_lxc_restart_ok": True,
    }
    (tmp_path / "lxc" / "web").mkdir(parents=True, exist_ok=True)
    (tmp_path / "lxc" / "web" / "config").write_text(CONFIG)
    inventory = {"all": {"hosts": {"node1": host_vars}}}
    return run_playbook(tmp_path, inventory, playbook, ["--tags", "verify"] + list(args))


def report(tmp_path):
    path = tmp_path / "artifacts" / "node1" / "verify.json"
    assert path.is_file(), "no verify.json"
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def tune_play(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readback-tune")
    rc, out = run(tmp, HOST_AND_VERIFY)
    return tmp, rc, out


@pytest.fixture(scope="module")
def verify_only(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readback-verify-only")
    rc, out = run(tmp, VERIFY_ONLY)
    return tmp, rc, out


@pytest.mark.parametrize("which", ["tune_play", "verify_only"])
def test_tags_verify_alone_reads_back_every_module(request, which):
    tmp, rc, out = request.getfixturevalue(which)
    result = report(tmp)
    # to_nice_json sorts the keys
    assert sorted(result["readback"]) == sorted(MODULES), out
    assert sorted(result["drift"]) == sorted(MODULES)
    # The host role's own variables, passed by its own task.
    sysctl = result["readback"]["sysctl_profile"]
    assert not sysctl.get("skipped") and not sysctl.get("failed"), out
    assert sysctl["path"].endswith("-gpufleet-unit-test-readback.conf"), sysctl["path"]
    assert result["readback"]["pcie_maxreadreq"]["skipped"] is True  # host_pcie_mrrs_enabled false
    # The container list comes from the host role's variables too, with no apply in this run.
    assert result["applied_in_run"] == []
    items = result["readback"]["lxc_memlock"]["results"]
    assert [item["path"] for item in items] == [str(tmp / "lxc" / "web" / "config")]


@pytest.mark.parametrize("which", ["tune_play", "verify_only"])
def test_the_drift_is_the_read_backs_change_records(request, which):
    tmp, rc, out = request.getfixturevalue(which)
    result = report(tmp)
    items = result["readback"]["lxc_memlock"]["results"]
    assert result["drift"]["lxc_memlock"] == [rec for item in items for rec in item.get("changes") or []]
    assert any(line.startswith("drift: lxc_memlock") for line in result["failures"]), result["failures"]
    assert rc != 0 and "verification failed" in out
    # Check mode: the container's config is as it was.
    assert (tmp / "lxc" / "web" / "config").read_text() == CONFIG
    assert sorted(os.listdir(str(tmp / "lxc" / "web"))) == ["config"]


def test_the_summary_prints_once_and_no_handler_runs(tune_play):
    tmp, rc, out = tune_play
    assert out.count(SUMMARY) == 1, out
    assert "RUNNING HANDLER" not in out
    assert "Queue the restart" not in out


def test_the_read_back_validates_the_host_variables_without_the_host_role(tmp_path):
    rc, out = run(tmp_path, VERIFY_ONLY, "-e", "host_pcie_size=3000")
    assert rc != 0
    assert "Validating arguments against arg spec 'plan'" in out and "host_pcie_size" in out, out
    assert not (tmp_path / "artifacts" / "node1" / "verify.json").exists()


@pytest.mark.parametrize("playbook, variable, fragment", [
    (HOST_AND_VERIFY, "host_pcie_mrrs_size=128", "host_pcie_mrrs_size is now host_pcie_size"),
    (VERIFY_ONLY, "verify_sysctl_settings={}", "no longer reads these: verify_sysctl_settings"),
])
def test_a_former_variable_name_fails_with_the_new_one(tmp_path, playbook, variable, fragment):
    rc, out = run(tmp_path, playbook, "-e", variable)
    assert rc != 0 and fragment in " ".join(out.split()), out
