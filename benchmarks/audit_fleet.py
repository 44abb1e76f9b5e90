# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a fleet audit's wall time grows with the number of hosts: playbooks/audit.yml against
1, 2, 4, 8 and 16 simulated hosts, printed as a table.

    .venv-test/bin/python benchmarks/audit_fleet.py                  # 1 2 4 8 16 hosts
    .venv-test/bin/python benchmarks/audit_fleet.py --hosts 1 4 16 --repeat 3
    .venv-test/bin/python benchmarks/audit_fleet.py --forks 4        # fewer parallel hosts

Each simulated host is an inventory name with the local connection, so every one of them
reads this machine's facts (node_facts), plans the host role in check mode and is judged on
the controller, exactly as a remote host would be, less the ssh round trips. The audit is
read-only, so running it here changes nothing (tests/unit/roles/test_audit_role.py checks
that). What is measured is what grows with the fleet: Ansible's per-host task work (module
runs, templating, the rules and reports on the controller) spread over --forks workers, and
the once-per-play fleet summary.

Printed per fleet size: the wall time (best of --repeat), the time per host, the controller's
CPU time (the ansible-playbook process and its children, user + system), and the growth
against linear: wall(N) / (N x wall(1)); below 1 is sub-linear. With ssh the per-host
connection cost adds to every host but runs in the same parallel workers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inventory(hosts, artifacts):
    names = ["node%02d" % index for index in range(1, hosts + 1)]
    return {"all": {"children": {"gpu_hosts": {
        "hosts": dict((name, {}) for name in names),
        "vars": {"ansible_connection": "local",
                 "ansible_python_interpreter": sys.executable,
                 "audit_artifacts_dir": artifacts}}}}}


def run(hosts, forks, workdir):
    artifacts = os.path.join(workdir, "artifacts-%d" % hosts)
    path = os.path.join(workdir, "inventory-%d.json" % hosts)
    with open(path, "w") as handle:
        json.dump(inventory(hosts, artifacts), handle)
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook):
        playbook = shutil.which("ansible-playbook") or "ansible-playbook"
    command = [playbook, "-i", path,
               "--forks", str(forks), os.path.join(REPO, "playbooks", "audit.yml")]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit("audit of %d hosts failed (rc %d):\n%s" % (hosts, done.returncode, done.stdout.decode()[-4000:]))
    with open(os.path.join(artifacts, "fleet-audit.json")) as handle:
        audited = len(json.load(handle)["hosts"])
    if audited != hosts:
        sys.exit("the fleet summary lists %d hosts, not %d" % (audited, hosts))
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--forks", type=int, default=None, help="parallel hosts (default: the fleet size, at most 16)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per fleet size; the best is kept")
    args = parser.parse_args()
    if any(n < 1 for n in args.hosts) or args.repeat < 1 or (args.forks is not None and args.forks < 1):
        parser.error("--hosts, --forks and --repeat must be positive")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-audit-bench-") as workdir:
        for hosts in sorted(set(args.hosts)):
            forks = args.forks or min(hosts, 16)
            best = min((run(hosts, forks, workdir) for _attempt in range(args.repeat)), key=lambda r: r[0])
            rows.append((hosts, forks) + best)
            print("audited %d host(s) in %.1f s" % (hosts, best[0]), file=sys.stderr)
    base = rows[0][2] / rows[0][0]
    print("fleet audit (playbooks/audit.yml, local connection, %d CPU(s) here)" % os.cpu_count())
    print("%6s %6s %9s %10s %12s %14s" % ("hosts", "forks", "wall s", "s / host", "ctrl CPU s", "vs linear"))
    for hosts, forks, wall, cpu in rows:
        print("%6d %6d %9.1f %10.2f %12.1f %14.2f" % (hosts, forks, wall, wall / hosts, cpu, wall / (hosts * base)))


if __name__ == "__main__":
    main()
