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
import tempfile

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
FLEET_SCRIPT = os.path.join(PROJECT_DIR, "scripts", "harness", "fleet")
# Where the GPU hosts' loader finds the stand-in NVML (molecule.yml, files/fake_nvml.c).
NVML_LIB = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_GPU_IS_LOST = 15
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
NVML_VALUE_TYPE_UNSIGNED_INT = 1

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


def harness(*args):
    """scripts/harness/fleet ARGS on this machine; its stdout."""
    proc = subprocess.run([FLEET_SCRIPT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, "fleet %s: %s" % (" ".join(args), proc.stderr)
    return proc.stdout


def run_module(inventory, name, module, args):
    """One module on one host with the ansible CLI, as the rollout tests run their playbooks
    (tests/test_rollout.py: the checkout as the collection, molecule's ansible.cfg): the
    module's result."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(PROJECT_DIR, ".collections"), ANSIBLE_NOCOLOR="1")
    cfg = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "ansible.cfg")
    if os.path.isfile(cfg):
        env["ANSIBLE_CONFIG"] = cfg
    with tempfile.TemporaryDirectory() as tree:
        proc = subprocess.run(["ansible", "-i", inventory, name, "-m", module, "-a", json.dumps(args), "--tree", tree],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              cwd=PROJECT_DIR, env=env, check=False, timeout=300)
        assert proc.returncode == 0, proc.stdout[-4000:]
        with open(os.path.join(tree, name)) as handle:
            return json.load(handle)


def node_gpus(inventory, name):
    """The collection's own view of a host's GPUs: node_facts' ``gpus`` section."""
    return run_module(inventory, name, "gpufleet.tuning.node_facts", {"sections": ["gpus"]})["facts"]["gpus"]


# Reads /dev/kmsg as a log reader does (non-blocking, until EOF or EAGAIN) and lists its records
# as (priority, sequence, message), continuation lines (" KEY=value") left out.
READ_KMSG = r'''
fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
data = b""
while True:
    try:
        chunk = os.read(fd, 8192)
    except BlockingIOError:
        break
    if not chunk:
        break
    data += chunk
os.close(fd)
records = []
for line in data.decode("utf-8", "replace").splitlines():
    if line and not line.startswith(" "):
        head, message = line.split(";", 1)
        prio, seq = head.split(",")[:2]
        records.append([int(prio), int(seq), message])
print(json.dumps({"records": records, "write": attempt(lambda: open("/dev/kmsg", "a").close())}))
'''


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


def test_gpu_plumbing_at_rest(host, hostvars):
    """A GPU host has no GPU yet: an empty tmpfs at /sys/bus/pci/devices (none of this
    machine's PCI functions), the stand-in NVML where the loader finds libnvidia-ml.so.1,
    answering "driver not loaded" (no /etc/gpufleet/fake-nvml.conf), and the boot-time kernel
    log at /dev/kmsg; /etc/gpufleet and /dev/kmsg are read-only. A guest has none of it."""
    if "gpu_hosts" not in hostvars["group_names"]:
        assert fstype_at(host, "/sys/bus/pci/devices") != "tmpfs"
        assert not host.file("/etc/gpufleet").exists
        assert not host.file(NVML_LIB).exists
        return
    assert fstype_at(host, "/sys/bus/pci/devices") == "tmpfs"
    result = run_python(host, r'''
import ctypes
lib = ctypes.CDLL("libnvidia-ml.so.1")
maps = open("/proc/self/maps").read()
print(json.dumps({"pci": os.listdir("/sys/bus/pci/devices"), "etc": os.listdir("/etc/gpufleet"),
                  "loaded": "%s" in maps, "init": lib.nvmlInit_v2(),
                  "etc_write": attempt(lambda: open("/etc/gpufleet/probe", "a").close())}))
''' % NVML_LIB)
    assert result == {"pci": [], "etc": [], "loaded": True, "init": NVML_ERROR_DRIVER_NOT_LOADED,
                      "etc_write": "EROFS"}
    kmsg = run_python(host, READ_KMSG)
    assert kmsg["write"] == "EROFS"
    records = kmsg["records"]
    assert [r[1] for r in records] == list(range(len(records))) and len(records) >= 3, records
    assert records[0][2].startswith("Linux version "), records
    assert any(r[2].startswith("pci 0000:00:00.0: ") for r in records), records
    assert not [r for r in records if "NVRM" in r[2] or "Xid" in r[2]], records


def test_planted_gpu_reaches_node_facts(inventory, fleet):
    """scripts/harness/fleet gpu-plant gives fleet-h5 GPUs: node_facts finds them in sysfs,
    loads the stand-in NVML and reads what its config says (a remapped-row failure, the
    configured name; a GPU that fell off the bus answers NVML_ERROR_GPU_IS_LOST); NVML's own
    answers (the recovery action field) are those of the config. gpu-clear takes them away,
    and the other hosts never see them."""
    good, lost = "0000:41:00.0", "0000:c1:00.0"
    try:
        harness("gpu-plant", "fleet-h5", good, "name=NVIDIA_H100_80GB_HBM3_planted", "remap_failure=1",
                "recovery_action=1")
        harness("gpu-plant", "fleet-h5", lost, "lost=1")
        assert "gpu:    fleet-h5 %s name=NVIDIA_H100_80GB_HBM3_planted" % good in harness("status")
        gpus = node_gpus(inventory, "fleet-h5")
        assert [g["bdf"]["value"] for g in gpus] == [good, lost]
        gpu = gpus[0]
        assert gpu["name"]["value"] == "NVIDIA H100 80GB HBM3 planted"
        assert gpu["remapped_rows_failure"]["value"] is True
        assert gpu["remapped_rows_pending"]["value"] is False
        assert gpu["device_id"]["value"] == "10de:2330" and gpu["numa_node"]["value"] == -1
        pcie = gpu["pcie"]
        assert (pcie["link_speed_gts"]["value"], pcie["link_width"]["value"], pcie["degraded"]["value"]) == (32.0, 16, False)
        assert gpu["ecc_mode"]["value"] is True and gpu["persistence_mode"]["value"] is True
        assert "NVML_ERROR_GPU_IS_LOST" in gpus[1]["name"].get("unknown", ""), gpus[1]["name"]
        probe = run_python(fleet["fleet-h5"], r'''
import ctypes
class Value(ctypes.Union):
    _fields_ = [("dVal", ctypes.c_double), ("siVal", ctypes.c_int), ("uiVal", ctypes.c_uint),
                ("ulVal", ctypes.c_ulong), ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong),
                ("usVal", ctypes.c_ushort)]
class FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", Value)]
lib = ctypes.CDLL("libnvidia-ml.so.1")
out = {"init": lib.nvmlInit_v2()}
count = ctypes.c_uint(0)
out["count"] = [lib.nvmlDeviceGetCount_v2(ctypes.byref(count)), count.value]
dev = ctypes.c_void_p()
out["handle"] = lib.nvmlDeviceGetHandleByPciBusId_v2(b"00000000:41:00.0", ctypes.byref(dev))
values = (FieldValue * 2)()
values[0].fieldId, values[1].fieldId = %d, 1
out["fields"] = lib.nvmlDeviceGetFieldValues(dev, ctypes.c_int(2), values)
out["recovery"] = [values[0].nvmlReturn, values[0].valueType, values[0].value.uiVal]
out["other_field"] = values[1].nvmlReturn
out["lost"] = lib.nvmlDeviceGetHandleByPciBusId_v2(b"0000:C1:00.0", ctypes.byref(dev))
lib.nvmlShutdown()
print(json.dumps(out))
''' % NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)
        assert probe == {"init": 0, "count": [0, 2], "handle": 0, "fields": 0,
                         "recovery": [0, NVML_VALUE_TYPE_UNSIGNED_INT, 1], "other_field": NVML_ERROR_NOT_SUPPORTED,
                         "lost": NVML_ERROR_GPU_IS_LOST}
        assert node_gpus(inventory, "fleet-h6") == []
    finally:
        harness("gpu-clear", "fleet-h5")
    assert node_gpus(inventory, "fleet-h5") == []
    assert not fleet["fleet-h5"].file("/etc/gpufleet/fake-nvml.conf").exists
    assert fleet["fleet-h5"].check_output("ls -A /sys/bus/pci/devices") == ""


def test_kmsg_replaced_in_place(fleet, tmp_path):
    """fleet-h6's /dev/kmsg reads the boot-time records; scripts/harness/fleet kmsg replaces
    them in place (the host sees an XID 79 at once, through the same bind mount) and --reset
    puts the boot-time ones back."""
    h6 = fleet["fleet-h6"]
    boot = run_python(h6, READ_KMSG)["records"]
    assert boot and boot[0][:2] == [5, 0] and boot[0][2].startswith("Linux version "), boot
    xid = tmp_path / "kmsg-xid79"
    xid.write_text("4,0,0,-;Linux version 6.1.0-28-amd64\n"
                   "4,1,912345678,-;NVRM: Xid (PCI:0000:41:00): 79, pid=0, name=python3, GPU has fallen off the bus.\n"
                   " SUBSYSTEM=pci\n DEVICE=+pci:0000:41:00.0\n")
    try:
        harness("kmsg", "fleet-h6", str(xid))
        records = run_python(h6, READ_KMSG)["records"]
        assert [r[1] for r in records] == [0, 1]
        assert "GPU has fallen off the bus" in records[1][2], records
    finally:
        harness("kmsg", "fleet-h6", "--reset")
    assert run_python(h6, READ_KMSG)["records"] == boot


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
