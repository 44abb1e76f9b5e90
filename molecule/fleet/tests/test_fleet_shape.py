# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated fleet has the shape the rollout and revert tests build on (molecule.yml).

``host`` is testinfra's ansible backend on molecule's inventory (``--hosts=all``): for these
hosts it runs plain ssh to ``ansible_host`` as ``ansible_user`` with the inventory's key and
ssh arguments, the way Ansible reaches them. Tests taking ``host`` run once per host and skip
the hosts of the other group; the others look at the whole fleet at once.

What is expected comes from the inventory and is written out here, not read from the harness:
which hosts are Proxmox-shaped follows from the guests' ``gpufleet_lxc_host``.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import testinfra

GPU_HOSTS = ["fleet-h%d" % n for n in range(1, 7)]
GUESTS = {"fleet-g101": ("fleet-h2", 101), "fleet-g102": ("fleet-h4", 102)}
GUESTS_IP = {"fleet-g101": "10.89.77.101", "fleet-g102": "10.89.77.102"}
SUBNET = "10.89.77."
CONTROLLER = "10.89.77.1"
PROJECT_DIR = os.environ.get(
    "MOLECULE_PROJECT_DIRECTORY",
    os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

# Reads errno names on the host for the operations given: {"op": "ok" | "EPERM" | ...}.
PROBE = r'''
import errno, json, os, sys
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
'''


def run_python(host, body):
    """Runs PROBE + body with python3 on the host; body prints JSON; returns it parsed."""
    cmd = host.run("python3 -c %s", PROBE + body)
    assert cmd.rc == 0, "probe failed on %s: %s" % (host.backend.get_hostname(), cmd.stderr)
    return json.loads(cmd.stdout)


@pytest.fixture(scope="module")
def inventory(pytestconfig):
    return pytestconfig.option.ansible_inventory


@pytest.fixture(scope="module")
def fleet(inventory):
    """{name: testinfra host} for every host of the inventory, ssh through the inventory."""
    hosts = testinfra.get_hosts(["ansible://all"], ansible_inventory=inventory)
    return dict((h.backend.get_hostname(), h) for h in hosts)


@pytest.fixture(scope="module")
def hostvars(host):
    return host.ansible.get_variables()


def fstype_at(host, mount_point):
    """The filesystem type mounted at mount_point on the host (the last mount wins), or None."""
    found = None
    for line in host.file("/proc/self/mountinfo").content_string.splitlines():
        fields = line.split()
        if fields[4] == mount_point:
            found = fields[fields.index("-") + 1]
    return found


def only(hostvars, group):
    if group not in hostvars["group_names"]:
        pytest.skip("%s is not in %s" % (hostvars["inventory_hostname"], group))


# --------------------------------------------------------------------------- the whole fleet

def test_inventory_groups(fleet):
    """Six GPU hosts, two guests, each guest pointing at a GPU host with its vmid."""
    assert sorted(fleet) == sorted(GPU_HOSTS + list(GUESTS))
    groups = dict((name, h.ansible.get_variables()["group_names"]) for name, h in fleet.items())
    assert sorted(n for n, g in groups.items() if "gpu_hosts" in g) == GPU_HOSTS
    assert sorted(n for n, g in groups.items() if "gpu_containers" in g) == sorted(GUESTS)
    for guest, (lxc_host, vmid) in GUESTS.items():
        variables = fleet[guest].ansible.get_variables()
        assert variables["gpufleet_lxc_host"] == lxc_host
        assert int(variables["gpufleet_lxc_vmid"]) == vmid


def test_each_host_is_its_own_sandbox(fleet):
    """Own user namespace (a distinct id range, never this machine's ids), own network
    namespace, own address: state can be compared host by host."""
    seen = {}
    here_net = os.readlink("/proc/self/ns/net")
    here_user = os.readlink("/proc/self/ns/user")
    for name, h in fleet.items():
        uid_map = h.file("/proc/self/uid_map").content_string.split()
        assert len(uid_map) == 3 and uid_map[0] == "0" and uid_map[1] != "0", (name, uid_map)
        namespaces = h.check_output("readlink /proc/self/ns/user /proc/self/ns/net").split()
        assert here_user not in namespaces and here_net not in namespaces, (name, namespaces)
        seen[name] = (int(uid_map[1]), namespaces[0], namespaces[1])
    for index in range(3):
        values = [v[index] for v in seen.values()]
        assert len(set(values)) == len(values), "shared between hosts: %s" % seen
    ranges = sorted((v[0], v[0] + 65536) for v in seen.values())
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), "overlapping id ranges: %s" % ranges


def test_snapshot_helper(fleet):
    """scripts/harness/fleet snapshot reads a host's state from the controller."""
    out = subprocess.run([os.path.join(PROJECT_DIR, "scripts", "harness", "fleet"), "snapshot", "fleet-h4"],
                         check=True, capture_output=True, text=True).stdout
    state = json.loads(out)
    assert state["host"] == "fleet-h4"
    runtime = state["node_state"]["runtime"]
    assert runtime["/sys/devices/system/cpu/cpu0/cpuidle/state3/disable"] == "0"
    assert runtime["/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"] == "powersave"
    conf = state["pve"]["/etc/pve/nodes/fleet-h4/lxc/102.conf"]
    assert "hostname: fleet-g102" in conf and "\n[pre-tuning]\n" in conf


# --------------------------------------------------------------------------- every host

def test_reached_over_ssh_as_root(host, hostvars):
    """The verifier's own connection is ssh from this machine's bridge address to the
    inventory's ansible_host, logged in as root, on the host named in the inventory."""
    assert hostvars["ansible_host"].startswith(SUBNET)
    assert hostvars["ansible_user"] == "root"
    connection = host.check_output("echo $SSH_CONNECTION").split()
    assert (connection[0], connection[2], connection[3]) == (CONTROLLER, hostvars["ansible_host"], "22")
    assert host.check_output("id -u") == "0"
    assert host.check_output("hostname") == hostvars["inventory_hostname"]
    assert host.check_output("systemctl is-system-running") == "running"
    assert host.service("ssh").is_running


def test_host_wide_sysctl_refused(host):
    """vm.swappiness is this machine's, not the host's: writing even its own value back is
    refused (EACCES), and the value stays."""
    result = run_python(host, r'''
path = "/proc/sys/vm/swappiness"
before = open(path).read()
def write():
    with open(path, "w") as handle:
        handle.write(before)
print(json.dumps({"write": attempt(write), "same": open(path).read() == before}))
''')
    assert result == {"write": "EACCES", "same": True}


def test_namespaced_sysctl_writable(host):
    """net.core.somaxconn belongs to the host's own network namespace: writable (the same
    value written back)."""
    result = run_python(host, r'''
path = "/proc/sys/net/core/somaxconn"
before = open(path).read()
def write():
    with open(path, "w") as handle:
        handle.write(before)
print(json.dumps({"write": attempt(write), "same": open(path).read() == before}))
''')
    assert result == {"write": "ok", "same": True}


def test_tcp_buffers_start_at_the_kernels_stock_values(host, hostvars):
    """A GPU host's net.ipv4.tcp_rmem and tcp_wmem are the kernel's stock values (--sysctl in
    molecule.yml), not copies of this machine's own: the rollout tests need them to differ from
    what the tuning sets (vars/rollout.yml), on a machine whose own are tuned too."""
    only(hostvars, "gpu_hosts")
    values = [" ".join(host.file("/proc/sys/net/ipv4/%s" % key).content_string.split())
              for key in ("tcp_rmem", "tcp_wmem")]
    assert values == ["4096 131072 6291456", "4096 16384 4194304"]


def test_pve_only_where_a_guest_lives(host, hostvars, fleet):
    """/etc/pve exists on the hosts the guests name, and nowhere else."""
    name = hostvars["inventory_hostname"]
    pve_hosts = set(fleet[g].ansible.get_variables()["gpufleet_lxc_host"] for g in GUESTS)
    assert pve_hosts == set(v[0] for v in GUESTS.values())
    assert host.file("/etc/pve").exists == (name in pve_hosts)


# --------------------------------------------------------------------------- GPU hosts

def test_fake_cpu_tree(host, hostvars):
    """A tmpfs with the deep shape: POLL/C1/C1E/C6, cpufreq at powersave, C6 writable."""
    only(hostvars, "gpu_hosts")
    assert fstype_at(host, "/sys/devices/system/cpu") == "tmpfs"
    base = "/sys/devices/system/cpu"
    names = [host.file("%s/cpu0/cpuidle/state%d/name" % (base, i)).content_string.strip() for i in range(4)]
    assert names == ["POLL", "C1", "C1E", "C6"]
    assert host.file(base + "/cpu0/cpuidle/state3/latency").content_string.strip() == "170"
    for policy in ("policy0", "policy1"):
        folder = "%s/cpufreq/%s/" % (base, policy)
        assert host.file(folder + "scaling_governor").content_string.strip() == "powersave"
        assert host.file(folder + "scaling_available_governors").content_string.split() == ["performance", "powersave"]
        assert host.file(folder + "energy_performance_preference").content_string.strip() == "balance_performance"
        assert "balance_performance" in host.file(folder + "energy_performance_available_preferences").content_string.split()
    result = run_python(host, r'''
path = "/sys/devices/system/cpu/cpu0/cpuidle/state3/disable"
seen = []
def toggle():
    for value in ("1", "0"):
        with open(path, "w") as handle:
            handle.write(value + "\n")
        seen.append(open(path).read().strip())
print(json.dumps({"write": attempt(toggle), "seen": seen}))
''')
    assert result == {"write": "ok", "seen": ["1", "0"]}


def test_proxmox_config_fs(host, hostvars):
    """On a Proxmox-shaped host: /etc/pve is a FUSE mount holding the guest's config;
    a temp file renamed over it works, chmod and chown answer EPERM (as on pmxcfs)."""
    only(hostvars, "gpu_hosts")
    name = hostvars["inventory_hostname"]
    guests = [(g, vmid) for g, (lxc_host, vmid) in GUESTS.items() if lxc_host == name]
    if not guests:
        pytest.skip("%s is not Proxmox-shaped" % name)
    assert fstype_at(host, "/etc/pve") == "fuse"
    (guest, vmid), = guests
    conf = host.file("/etc/pve/lxc/%d.conf" % vmid)
    assert conf.is_file and conf.user == "root" and conf.group == "www-data" and conf.mode == 0o640
    text = conf.content_string
    for line in ("arch: amd64", "hostname: %s" % guest, "unprivileged: 1",
                 "lxc.cgroup2.devices.allow: c 195:* rwm",
                 "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file"):
        assert line in text.splitlines(), "%s lacks %r" % (conf.path, line)
    assert any(l.startswith("net0: ") and "ip=%s/24" % GUESTS_IP[guest] in l for l in text.splitlines())
    result = run_python(host, r'''
path = "/etc/pve/lxc/%d.conf"
folder = os.path.dirname(path)
before = open(path).read()
inode = os.stat(path).st_ino
tmp = os.path.join(folder, ".%%s.tmp.%%d" %% (os.path.basename(path), os.getpid()))
def replace():
    with open(tmp, "w") as handle:
        handle.write(before)
    os.rename(tmp, path)
out = {"rename": attempt(replace)}
out["same"] = open(path).read() == before
out["new_inode"] = os.stat(path).st_ino != inode
out["tmp_left"] = os.path.exists(tmp)
out["chmod"] = attempt(lambda: os.chmod(path, 0o640))
out["chmod_other"] = attempt(lambda: os.chmod(path, 0o600))
out["chown"] = attempt(lambda: os.chown(path, 0, 0))
out["chown_same"] = attempt(lambda: os.chown(path, 0, 33))
scratch = os.path.join(folder, ".scratch.%%d" %% os.getpid())
def create_unlink():
    with open(scratch, "w") as handle:
        handle.write("x")
    os.unlink(scratch)
out["create_unlink"] = attempt(create_unlink)
out["mode"] = oct(os.stat(path).st_mode & 0o7777)
print(json.dumps(out))
''' % vmid)
    assert result == {"rename": "ok", "same": True, "new_inode": True, "tmp_left": False,
                      "chmod": "EPERM", "chmod_other": "EPERM", "chown": "EPERM", "chown_same": "EPERM",
                      "create_unlink": "ok", "mode": "0o640"}


# --------------------------------------------------------------------------- guests

def test_guest_shape(host, hostvars, fleet):
    """A guest: reachable, its inventory vars name its Proxmox host and vmid, and that host's
    config for the vmid describes this guest (hostname, address); no fake CPU tree."""
    only(hostvars, "gpu_containers")
    name = hostvars["inventory_hostname"]
    lxc_host, vmid = GUESTS[name]
    assert hostvars["gpufleet_lxc_host"] == lxc_host and int(hostvars["gpufleet_lxc_vmid"]) == vmid
    assert hostvars["ansible_host"] == GUESTS_IP[name]
    assert fstype_at(host, "/sys/devices/system/cpu") != "tmpfs"
    assert not host.file("/etc/pve").exists
    conf = fleet[lxc_host].file("/etc/pve/lxc/%d.conf" % vmid).content_string.split("\n[", 1)[0]
    assert "hostname: %s" % name in conf.splitlines()
    assert "ip=%s/24," % hostvars["ansible_host"] in conf
    # As its host started it (create.yml): the stock 64 KiB memlock, the model server running.
    limits = [l for l in host.file("/proc/1/limits").content_string.splitlines() if l.startswith("Max locked memory")]
    assert limits and limits[0].split()[3:5] == ["65536", "65536"], limits
    assert host.service("fleet-serving").is_running


def test_pct_goes_through_the_harness(host, hostvars, fleet):
    """A Proxmox host's pct (scripts/harness/fleet-pct) hands its request to the harness and
    exits with the answer: a vmid with no config is refused as pct refuses it, and what is not
    simulated says so; neither restarts anything."""
    only(hostvars, "gpu_hosts")
    if hostvars["inventory_hostname"] not in set(lxc_host for lxc_host, _vmid in GUESTS.values()):
        assert not host.exists("pct")
        return
    # Exit status 255, as pct's errors: testinfra's ssh backend takes 255 for an ssh failure,
    # so the status comes back on stdout.
    missing = host.run("pct reboot 999; echo rc=$?")
    assert missing.stdout.strip() == "rc=255", missing
    assert "nodes/%s/lxc/999.conf' does not exist" % hostvars["inventory_hostname"] in missing.stderr
    other = host.run("pct status 101; echo rc=$?")
    assert other.stdout.strip() == "rc=255" and "not simulated" in other.stderr, other
