"""The report role and playbooks/report.yml: the page made once per play on the controller, from
an existing artifacts folder, with --tags report alone, in check mode too (a record of a check
run is still a record), and a second run reports no change."""

import os
import shutil
import subprocess
import sys

from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

INVENTORY = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                     "hosts": {"node-a": None, "node-b": None}}}

PLAYBOOK = """
- name: Some play on the hosts
  hosts: all
  gather_facts: false
  tasks:
    - name: The fleet page
      ansible.builtin.import_role:
        name: gpufleet.tuning.report
      vars:
        report_artifacts_dir: %s
      tags: [report, always]
"""


def test_the_role_makes_the_page_once_and_then_changes_nothing(tmp_path):
    root = tmp_path / "artifacts"
    fake.write_fleet(str(root), 16)
    for args in (["--tags", "runtime"], ["--check"]):
        rc, out = run_playbook(tmp_path, INVENTORY, PLAYBOOK % root, args)
        assert rc == 0, out
        assert out.count("Fleet page: %s/index.html (16 hosts" % root) == 1, out
        assert "changed=0" in out
    assert (root / "index.html").read_text().startswith("<!DOCTYPE html>")


def test_playbooks_report_yml_runs_alone_over_an_artifacts_folder(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(os.path.join(REPO, "playbooks"), str(checkout / "playbooks"))
    fake.write_fleet(str(checkout / "artifacts"), 2)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_LOCALHOST_WARNING="false")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           str(checkout / "playbooks" / "report.yml")], cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout
    assert (checkout / "artifacts" / "index.html").is_file(), "the default folder: artifacts/ beside playbooks/"
