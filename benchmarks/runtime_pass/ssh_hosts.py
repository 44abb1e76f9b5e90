# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU-host-shaped containers for benchmarks/runtime_pass.py --hosts N, reached over ssh.

Why this shape: a tuning pass costs what Ansible pays per host and task, and over ssh (the way
Ansible reaches a fleet) that is an ssh session per module run, so the containers are reached
over real ssh, with the fleet scenario's key (scripts/harness/fleet keygen) and each host's key
checked against a known_hosts file written from the container's own host key.

They are shaped like the molecule host scenario's GPU host, not like the fleet scenario's
user-namespaced hosts: privileged, in this machine's network namespace, so every sysctl of the
profile a real GPU host takes is writable (in a user namespace the host-wide keys are all
refused, and the comparison would be of two playbooks that set two keys). Their sysctls are
therefore this machine's: the benchmark snapshots this machine's /proc/sys at the start and
puts it back (molecule/resources/sysctl_guard.py). Files (/etc, /var/lib) are each container's.
Sharing the network namespace, each sshd listens on its own port on 127.0.0.1 (a drop-in in
/etc/ssh/sshd_config.d), from BASE_PORT + N.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLEET_HARNESS = os.path.join(REPO, "scripts", "harness", "fleet")
KEY = os.path.join(REPO, ".cache", "fleet", "ssh", "id_ed25519")
BASE_PORT = 22400
LABEL = "gpufleet.benchmark=runtime_pass"


class HostError(Exception):
    pass


def keygen():
    """The fleet harness's ssh key (made once, kept across runs); its path."""
    run = subprocess.run([FLEET_HARNESS, "keygen"], check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True)
    if run.returncode != 0 or not os.path.exists(KEY + ".pub"):
        raise HostError("scripts/harness/fleet keygen failed: %s" % run.stdout.strip()[-1000:])
    return KEY


def port(index):
    return BASE_PORT + index


def files(tmp, index):
    """The files a container gets: root's authorized_keys and the sshd drop-in with its port."""
    folder = os.path.join(tmp, "ssh-host-%d" % index)
    os.makedirs(folder, exist_ok=True)
    keys = os.path.join(folder, "authorized_keys")
    with open(KEY + ".pub") as source, open(keys, "w") as handle:
        handle.write(source.read())
    os.chmod(keys, 0o600)
    dropin = os.path.join(folder, "port.conf")
    with open(dropin, "w") as handle:
        handle.write("# benchmarks/runtime_pass.py: this host's own port, the network namespace is shared\n"
                     "Port %d\nListenAddress 127.0.0.1\nPermitRootLogin prohibit-password\n" % port(index))
    return keys, dropin


def create_args(name, index, image, tmp):
    """podman create arguments of host INDEX."""
    keys, dropin = files(tmp, index)
    return ["create", "--name", name, "--hostname", name, "--systemd", "always", "--privileged", "--network", "host",
            "--volume", "%s:/root/.ssh/authorized_keys:ro" % keys,
            "--volume", "%s:/etc/ssh/sshd_config.d/gpufleet-bench.conf:ro" % dropin,
            # The container's boot must not apply its distribution's sysctl.d to this machine's
            # kernel (it shares it): systemd-sysctl masked, as the molecule host scenario's
            # sysctls are put back after it.
            "--volume", "/dev/null:/etc/systemd/system/systemd-sysctl.service:ro",
            "--label", LABEL, "--label", "owner=gpufleet-benchmark", image, "/sbin/init"]


def wait_ssh(index, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port(index)), timeout=2) as conn:
                if conn.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise HostError("no ssh on 127.0.0.1:%d %d s after the start" % (port(index), timeout))


def known_hosts(podman, names, tmp):
    """A known_hosts file with each container's own ed25519 host key, so ssh checks them."""
    lines = []
    for index, name in enumerate(names, start=1):
        key = podman(["exec", name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()
        if len(key) < 2:
            raise HostError("%s has no ed25519 host key" % name)
        lines.append("[127.0.0.1]:%d %s %s" % (port(index), key[0], key[1]))
    path = os.path.join(tmp, "known_hosts")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def host_vars(index, known):
    return {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": port(index),
            "ansible_user": "root", "ansible_ssh_private_key_file": KEY,
            "ansible_ssh_common_args": "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % known,
            "ansible_python_interpreter": "/usr/bin/python3"}


def inventory(names, known, path):
    with open(path, "w") as handle:
        json.dump({"all": {"children": {
            "gpu_hosts": {"hosts": dict((name, host_vars(index, known)) for index, name in enumerate(names, start=1))},
            "gpu_containers": {"hosts": {}}}}}, handle, indent=1)
    return path
