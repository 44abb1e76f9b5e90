"""gpufleet.tuning.role_arguments: several roles' variables checked against their argument specs
in one task, as Ansible's own role validation checks them (same spec, same validator), with
each error naming its role and nothing run after a failure; bad arguments named."""

import os

import pytest
import yaml
from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.tuning.plugins.action import role_arguments
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
INVENTORY = {"all": {"hosts": {"node-a": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}}}}

# Imported (never run) at the end of each play: their defaults are the play's, as in playbooks/tune.yml.
ROLE_IMPORTS = """
    - name: Audit, without Ansible's own validation
      ansible.builtin.import_role:
        name: gpufleet.tuning.audit
        rolespec_validate: false
      when: false
    - name: Tune, without Ansible's own validation
      ansible.builtin.import_role:
        name: gpufleet.tuning.host
        rolespec_validate: false
      when: false
"""

PLAY = """
- hosts: node-a
  gather_facts: false
  tasks:
    - name: Check
      gpufleet.tuning.role_arguments:
        roles: %s
    - name: After
      ansible.builtin.debug:
        msg: AFTER THE CHECK
""" + ROLE_IMPORTS


def spec_file(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)["argument_specs"]


@pytest.mark.parametrize("role", ["host", "audit", "verify", "container", "serving", "report"])
def test_the_spec_is_the_role_s_own_without_what_is_for_people(role):
    for entry, data in spec_file(role).items():
        spec = role_arguments.load_spec("gpufleet.tuning." + role, entry)
        assert sorted(spec) == sorted(data.get("options") or {}), (role, entry)
        for name, option in (data.get("options") or {}).items():
            assert "description" not in spec[name]
            for key in ("type", "elements", "choices", "default", "required"):
                assert spec[name].get(key) == option.get(key), (role, name, key)


def test_the_check_is_ansible_s_validator():
    spec = role_arguments.load_spec("host")
    assert role_arguments.check(spec, {"host_pcie_size": 4096}) == []
    [message] = role_arguments.check(spec, {"host_pcie_size": 1000})
    assert "host_pcie_size" in message and "1000" in message
    assert role_arguments.check(spec, {"host_sysctl_settings": ["vm.swappiness"]}), "a list is not a profile"


@pytest.mark.parametrize("name, words", [
    ("gpufleet.tuning.nope", "'gpufleet.tuning.nope' is not a role of gpufleet.tuning"),
    ("community.general.x", "'community.general.x' is not a role of gpufleet.tuning"),
    ("../host", "'../host' is not a role"),
    ("", "each role must be a role name"),
])
def test_a_name_that_is_not_one_of_its_roles_is_refused(name, words):
    with pytest.raises(AnsibleActionFail) as raised:
        role_arguments.load_spec(name)
    assert words in str(raised.value)
    if name.startswith("gpufleet"):
        assert "host" in str(raised.value), "the error lists the roles there are"


def test_an_entry_point_the_role_lacks_is_named():
    with pytest.raises(AnsibleActionFail) as raised:
        role_arguments.load_spec("audit", "nope")
    assert "no entry point 'nope'" in str(raised.value) and "main" in str(raised.value)


def test_good_variables_pass_and_the_play_goes_on(tmp_path):
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY % "[gpufleet.tuning.audit, gpufleet.tuning.host]",
                           ["-e", "host_pcie_size=2048"])
    assert rc == 0, out
    assert "AFTER THE CHECK" in out


def test_a_bad_value_fails_naming_the_role_and_the_variable_and_nothing_runs_after(tmp_path):
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY % "[gpufleet.tuning.audit, gpufleet.tuning.host]",
                           ["-e", "host_pcie_size=1000", "-e", '{"audit_rules_disabled": {"a": 1}}'])
    assert rc != 0, out
    assert "Validation of arguments failed:" in out
    assert "gpufleet.tuning.host: value of host_pcie_size must be one of" in out and "got: 1000" in out
    assert "gpufleet.tuning.audit:" in out and "audit_rules_disabled" in out, "every role's errors, each named"
    assert "AFTER THE CHECK" not in out


def test_bad_arguments_are_named(tmp_path):
    rc, out = run_playbook(tmp_path, INVENTORY, PLAY % "gpufleet.tuning.host")
    assert rc != 0 and "roles must be a list of role names" in out, out


# The same check made by gpufleet.tuning.host_tuning's role_arguments option (playbooks/tune.yml):
# before the module is packed or sent, so a bad value leaves the node unread and unchanged.
TUNING_PLAY = """
- hosts: node-a
  gather_facts: false
  tasks:
    - name: Tune with the roles' variables checked first
      gpufleet.tuning.host_tuning:
        parts: {}
        role_arguments: %s
      check_mode: true
      register: tuned
      ignore_errors: true
    - name: Show
      ansible.builtin.debug:
        msg: "TUNED failed={{ tuned.failed | default(false) }} errors={{ tuned.argument_errors | default([]) | length }} ran={{ tuned.plan is defined }}"
""" + ROLE_IMPORTS


def test_the_tuning_call_checks_the_roles_variables_before_it_sends_the_module(tmp_path):
    roles = "[gpufleet.tuning.audit, gpufleet.tuning.host]"
    rc, out = run_playbook(tmp_path, INVENTORY, TUNING_PLAY % roles, ["-vvv", "-e", "host_pcie_size=1000"])
    assert rc == 0, out
    assert "Validation of arguments failed:" in out
    assert "gpufleet.tuning.host: value of host_pcie_size must be one of" in out and "got: 1000" in out
    assert "TUNED failed=True errors=1 ran=False" in out, out
    assert "AnsiballZ" not in out and "EXEC" not in out, "the module was not sent"
    rc, out = run_playbook(tmp_path, INVENTORY, TUNING_PLAY % roles, ["-e", "host_pcie_size=2048"])
    assert rc == 0 and "TUNED failed=False errors=0 ran=True" in out, out


@pytest.mark.parametrize("value, words", [
    ("gpufleet.tuning.host", "role_arguments must be a list of role names"),
    ("[gpufleet.tuning.nope]", "'gpufleet.tuning.nope' is not a role of gpufleet.tuning"),
])
def test_the_tuning_call_names_a_bad_role_list(tmp_path, value, words):
    rc, out = run_playbook(tmp_path, INVENTORY, TUNING_PLAY % value)
    assert rc == 0 and words in out and "TUNED failed=True" in out, out
