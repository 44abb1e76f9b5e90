"""The host role's summary (roles/host/tasks/summary.yml), run with ansible-playbook on two local
hosts in check mode: one task for the batch, every host's lines under its name, while no host
may restart its containers; one task per host, each with its own lines, as soon as one may
(each host then queues its own restarts). Nothing is written: check mode, one sysctl at its
current value, no PCIe, CPU power or LXC containers."""

import os
import re
import sys

from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

SUMMARY = "TASK [gpufleet.tuning.host : Summarize what this run changed on the host]"
PLAYBOOK = """
- name: The host role alone
  hosts: all
  gather_facts: false
  roles:
    - role: gpufleet.tuning.host
"""


def host_vars(tmp_path, **extra):
    with open("/proc/sys/kernel/shmmni") as handle:
        shmmni = handle.read().strip()
    found = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "host_sysctl_name": "gpufleet-unit-test-summary",
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
        "host_state_path": str(tmp_path / "state.json"),
    }
    found.update(extra)
    return found


def summary_block(out):
    return out.split(SUMMARY)[1].split("TASK [")[0].split("PLAY RECAP")[0]


def test_one_summary_for_the_batch_when_no_host_may_restart(tmp_path):
    inventory = {"all": {"hosts": {"node1": host_vars(tmp_path), "node2": host_vars(tmp_path)}}}
    rc, out = run_playbook(tmp_path, inventory, PLAYBOOK, ["--tags", "sysctl", "--check"])
    assert rc == 0, out
    block = summary_block(out)
    assert len(re.findall(r"^ok: \[", block, re.M)) == 1, "one task result for the batch: %s" % block
    assert '"node1": [' in block and '"node2": [' in block, block
    assert block.count("nothing to change") == 2, "check mode's wording, once per host: %s" % block
    assert not os.path.exists(str(tmp_path / "state.json")), "check mode"


def test_one_summary_per_host_when_a_host_may_restart(tmp_path):
    inventory = {"all": {"hosts": {"node1": host_vars(tmp_path), "node2": host_vars(tmp_path, host_lxc_restart_ok=True)}}}
    rc, out = run_playbook(tmp_path, inventory, PLAYBOOK, ["--tags", "sysctl", "--check"])
    assert rc == 0, out
    block = summary_block(out)
    assert sorted(re.findall(r"^ok: \[(node\d)\]", block, re.M)) == ["node1", "node2"], block
    assert '"node1": [' not in block and '"node2": [' not in block, "each host's own lines, not the batch's: %s" % block
    assert block.count("nothing to change") == 2, block
    assert "RUNNING HANDLER" not in out, "no container to restart"
