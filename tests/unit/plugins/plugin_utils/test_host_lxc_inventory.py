"""gpufleet.tuning.lxc_memlock_inventory: the inventory's containers of a host for the LXC part,
as the host role's Jinja loop found them (by vmid, else by name; the container's own limit, else
the role's), checked on plain mappings and through a real play's hostvars."""

import json

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.host_lxc import lxc_memlock_inventory
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

HOSTVARS = {
    "ct-a": {"gpufleet_lxc_host": "pve1", "gpufleet_lxc_vmid": "101"},
    "ct-b": {"gpufleet_lxc_host": "pve1", "gpufleet_lxc_name": "serve", "gpufleet_lxc_memlock_limit": 68719476736},
    "ct-c": {"gpufleet_lxc_host": "pve2", "gpufleet_lxc_vmid": 102},
    "ct-d": {"gpufleet_lxc_host": "pve1"},
    "ct-e": {"gpufleet_lxc_vmid": 103},
    "ct-f": {"gpufleet_lxc_host": "pve1", "gpufleet_lxc_vmid": 104, "gpufleet_lxc_name": "both"},
}


def test_the_host_s_containers_by_vmid_else_by_name_with_their_limit():
    found = lxc_memlock_inventory(sorted(HOSTVARS), HOSTVARS, "pve1", "unlimited")
    assert found == [
        {"guest": "ct-a", "vmid": 101, "limit": "unlimited"},
        {"guest": "ct-b", "name": "serve", "limit": 68719476736},
        {"guest": "ct-f", "vmid": 104, "limit": "unlimited"},
    ]
    assert lxc_memlock_inventory(["ct-c"], HOSTVARS, "pve2", 1) == [{"guest": "ct-c", "vmid": 102, "limit": 1}]
    assert lxc_memlock_inventory([], HOSTVARS, "pve1", 1) == []
    assert lxc_memlock_inventory(None, HOSTVARS, "pve1", 1) == []
    assert lxc_memlock_inventory(sorted(HOSTVARS), HOSTVARS, "other", 1) == []


def test_a_vmid_that_is_not_a_number_is_zero_as_jinja_s_int_made_it():
    assert lxc_memlock_inventory(["x"], {"x": {"gpufleet_lxc_host": "h", "gpufleet_lxc_vmid": "abc"}}, "h", 1) == [
        {"guest": "x", "vmid": 0, "limit": 1}]


PLAY = """
- hosts: pve1
  gather_facts: false
  vars:
    limit: unlimited
  tasks:
    - name: Record
      ansible.builtin.copy:
        content: "{{ groups.get('gpu_containers', []) | gpufleet.tuning.lxc_memlock_inventory(hostvars, inventory_hostname, limit) | to_json }}"
        dest: "{{ found_file }}"
        mode: "0644"
"""


def test_through_a_play_s_hostvars_templated(tmp_path):
    inventory = {"all": {"children": {
        "gpu_hosts": {"hosts": {"pve1": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}}},
        "gpu_containers": {"hosts": {
            "ct-a": {"gpufleet_lxc_host": "pve1", "gpufleet_lxc_vmid": "{{ 100 + 1 }}"},
            "ct-b": {"gpufleet_lxc_host": "{{ 'pve' ~ 1 }}", "gpufleet_lxc_name": "serve",
                     "gpufleet_lxc_memlock_limit": "{{ 64 * 1024 }}"},
            "ct-c": {"gpufleet_lxc_host": "pve2", "gpufleet_lxc_vmid": 102},
        }},
    }}}
    found_file = tmp_path / "found.json"
    rc, out = run_playbook(tmp_path, inventory, PLAY, ["-e", "found_file=%s" % found_file])
    assert rc == 0, out
    found = json.loads(found_file.read_text())
    assert found == [{"guest": "ct-a", "vmid": 101, "limit": "unlimited"},
                     {"guest": "ct-b", "name": "serve", "limit": 65536}], out
