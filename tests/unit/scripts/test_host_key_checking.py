"""Fleet connections check the hosts' SSH keys (issue 15).

They log in as root. ansible.cfg used to set host_key_checking = false, and scripts/tune (like
every ansible run from the checkout) reads that file for every inventory, so anyone on the
network path could pose as a GPU host. The check stays on everywhere but for the test
harness's throwaway VM, which turns it off in its own scenario.
"""

import configparser
import glob
import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CFG = os.path.join(REPO, "ansible.cfg")
FALSE = ("0", "false", "no", "n", "f", "off")
# ssh options that skip the check or forget what it learnt.
LAX_SSH = re.compile(r"StrictHostKeyChecking\s*=?\s*(no|off|false|accept-new)|UserKnownHostsFile\s*=?\s*/dev/null",
                     re.IGNORECASE)


def test_ansible_cfg_does_not_disable_host_key_checking():
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";",))
    with open(CFG) as handle:
        parser.read_file(handle)
    for section in ("defaults", "ssh_connection", "paramiko_connection"):
        if parser.has_option(section, "host_key_checking"):
            assert parser.get(section, "host_key_checking").strip().lower() not in FALSE, section
    for section in parser.sections():
        for key, value in parser.items(section):
            assert not LAX_SSH.search(value), "%s.%s = %s" % (section, key, value)


def test_ansible_reads_host_key_checking_on_from_the_checkout(monkeypatch):
    # What ansible itself makes of the file, with nothing in the environment to override it.
    for var in ("ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_SSH_HOST_KEY_CHECKING"):
        monkeypatch.delenv(var, raising=False)
    from ansible.config.manager import ConfigManager

    manager = ConfigManager(conf_file=CFG)
    assert manager.get_config_value("HOST_KEY_CHECKING") is True


def _walk(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield "%s/%s" % (path, key), key, value
            yield from _walk(value, "%s/%s" % (path, key))


def test_the_inventories_keep_the_check():
    files = sorted(glob.glob(os.path.join(REPO, "inventory", "*.yml")))
    assert files
    for name in files:
        with open(name) as handle:
            data = yaml.safe_load(handle)
        for where, key, value in _walk(data):
            if key in ("ansible_host_key_checking", "ansible_ssh_host_key_checking"):
                assert str(value).lower() not in FALSE, "%s: %s" % (name, where)
            if key in ("ansible_ssh_common_args", "ansible_ssh_extra_args", "ansible_ssh_args"):
                assert not LAX_SSH.search(str(value)), "%s: %s" % (name, where)


def test_the_example_fleet_fails_on_an_unknown_key():
    with open(os.path.join(REPO, "inventory", "example-fleet.yml")) as handle:
        data = yaml.safe_load(handle)
    assert "StrictHostKeyChecking=yes" in data["all"]["vars"]["ansible_ssh_common_args"]


def test_no_script_turns_the_check_off_but_the_vm_and_fleet_harnesses():
    offenders = []
    for path in sorted(glob.glob(os.path.join(REPO, "scripts", "**", "*"), recursive=True)):
        # The VM and fleet harnesses, for their throwaway guests on this machine, are the only
        # places that may; prose (their README explains why) is not code.
        if (os.path.isdir(path) or path.endswith(os.path.join("harness", "vm"))
                or path.endswith(os.path.join("harness", "fleet")) or path.endswith(".md")):
            continue
        with open(path, errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                code = line.split("#", 1)[0]
                if LAX_SSH.search(code) or re.search(r"(export\s+|^\s*)ANSIBLE_(SSH_)?HOST_KEY_CHECKING=", code):
                    offenders.append("%s:%d: %s" % (os.path.relpath(path, REPO), number, line.strip()))
    assert offenders == []


def test_only_the_vm_and_fleet_scenarios_turn_it_off_and_for_their_own_guests():
    with open(os.path.join(REPO, "molecule", "host-vm", "molecule.yml")) as handle:
        scenario = yaml.safe_load(handle)
    provisioner = scenario["provisioner"]
    assert provisioner["config_options"]["defaults"]["host_key_checking"] is False
    assert provisioner["inventory"]["host_vars"]["host-vm"]["ansible_host_key_checking"] is False
    with open(os.path.join(REPO, "molecule", "fleet", "molecule.yml")) as handle:
        fleet = yaml.safe_load(handle)["provisioner"]
    assert fleet["connection_options"]["ansible_host_key_checking"] is False
    assert all(h.startswith("10.89.77.") for h in (v["ansible_host"] for v in fleet["inventory"]["host_vars"].values()))
    for other in ("host", "container"):
        with open(os.path.join(REPO, "molecule", other, "molecule.yml")) as handle:
            text = handle.read()
        assert "host_key_checking" not in text and not LAX_SSH.search(text), other
