#!/usr/bin/env python
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's runtime pass costs against the playbook an operator writes by hand
for the same settings, on the same target(s), in one run (issues 21 and 35: the measurement).

Why: `scripts/tune` runs an audit (node facts, what the parts the run does not apply would
change, rules and reports), tunes with one task per part (each module records the node's
before-state itself), and verifies (what it recorded is read back, drift listed); a
hand-written playbook just sets the values. This prints how much more wall time and controller
CPU that costs, on a first pass (changes) and on a second pass (nothing to change), and what a
no-change pass of a large fleet would take from one controller (--model-nodes).

    .venv-test/bin/python benchmarks/runtime_pass.py                       # this machine, 3 rounds
    .venv-test/bin/python benchmarks/runtime_pass.py --rounds 5 --json /tmp/runtime-pass.json
    .venv-test/bin/python benchmarks/runtime_pass.py --hosts 4             # 4 podman containers
    .venv-test/bin/python benchmarks/runtime_pass.py --hosts 1 16          # 1 and 16 hosts, interleaved
    .venv-test/bin/python benchmarks/runtime_pass.py --collection tune host --profile-tasks 10

Runs as root (it writes /proc/sys and /etc on the target). Standard library only; Ansible is
the one in .venv (scripts/tune's), else .venv-test, else beside this Python or on PATH, run as
scripts/tune runs it: from the checkout, ANSIBLE_CONFIG=ansible.cfg, the collection from
.collections/ (ANSIBLE_COLLECTIONS_PATH); ansible.posix, community.general and
containers.podman from that venv.

What is compared (--collection, one or both):
- tune (default): `ansible-playbook playbooks/tune.yml --tags runtime -e verify_p2p_enabled=false`,
  the command scripts/tune runs, with the verify role's read-back and recorded drift but without
  the GPU peer-to-peer measurement (the naive playbook measures nothing; the targets have no
  GPU). The audit (tags audit, always) and the serving role (every task skipped by its `when`
  without gpufleet_benchmark) stay: they are part of what an operator runs.
- host: benchmarks/runtime_pass/host_role.yml, the host role alone with --tags runtime: no audit,
  so no before-state planned from it (the after-record is still written).
- naive: benchmarks/runtime_pass/naive.yml, one ansible.posix.sysctl task per key (file
  /etc/sysctl.d/90-inference.conf, set and reloaded), community.general.modprobe for
  nvidia_peermem, ansible.builtin.lineinfile for lxc.prlimit.memlock in each LXC serving
  container's config, ansible.builtin.command (setpci) for the GPUs' MaxReadReq.
The settings are the host role's defaults (roles/host/defaults/main/): host_sysctl_settings
merged with host_sysctl_extra, host_lxc_memlock_limit, host_pcie_size 4096. The naive playbook
is given the values the collection's pass leaves on the target (read back after a warm-up
pass), so buffer keys the collection only raises get the same value in both.

Left out of both, with the reason printed: sysctl keys the target's kernel refuses (probed by
writing each key's current value back to /proc/sys; kernel.nmi_watchdog without a PMU, the
host-wide keys in an unprivileged container); nvidia_peermem where the target has no kernel
modules (/lib/modules/<release>), no modprobe, no nvidia_peermem module or no RDMA device (the
role's host_peermem_state auto loads it only there); the PCIe register where there is no
NVIDIA GPU, no setpci, or the target is a container; the CPU idle states and governor (no naive
counterpart: where the target has cpuidle states or cpufreq policies, the collection is run
with host_cpu_power_* set to null, so it leaves them alone). The naive playbook's
/etc/security/limits.d task is not a host role setting (the container role sets memlock inside
the serving container), so it is left out unless --naive-limits-d.

LXC: so that both runs have a serving container to raise, a plain LXC config with a GPU passed
through (/var/lib/lxc/gpufleet-bench-ct/config, a /dev/nvidia0 mount entry) is written on each
target before the benchmark and removed at exit (--no-lxc-fixture: none). A target that
already has LXC configs (a Proxmox or LXC host) is refused: its containers are not ours to edit.

Before every first pass, each target is put back to its state before the benchmark: every
sysctl of the profile, and every file under the directories the runs write
(/etc/sysctl.d, /var/lib/gpufleet-tuning, /etc/modules-load.d, /etc/modprobe.d,
/etc/security/limits.d, /etc/udev/rules.d, /usr/local/libexec/gpufleet, /usr/local/sbin,
/etc/systemd/system, /var/lib/lxc), byte for byte with mode and owner, files created removed;
nvidia_peermem unloaded if a run loaded it; the GPUs' PCIe Device Control put back. The state is
read again and compared after each restore (a difference stops the benchmark). At exit (also on
an error or a signal) the targets are restored, the fixture removed, and the restore checked:
this machine's whole /proc/sys against a snapshot taken at the start
(molecule/resources/sysctl_guard.py), and each target's profile keys and files.

Rounds (--rounds, default 3): each round runs each playbook's first pass, then at once its
second (no-change) pass; the order of the playbooks is reversed every other round. The medians
are printed. Before the rounds one untimed warm-up of each playbook (and a restore after it)
checks that it runs and fixes the naive values. With several counts (--hosts 1 4 16) the
largest count's containers are made once, a count's runs use the first N of them, and every
round runs every count (in ascending order, descending every other round) and at each count
every playbook: this machine's speed drifts by up to 1.7x over minutes, and so it falls on all
counts alike. Then each count's table, and the curve: each playbook's medians at each count,
against the naive playbook and against the smallest count (the warm-ups run at the largest).

ssh: every run gets a master-connection folder of its own (ANSIBLE_SSH_CONTROL_PATH_DIR), so
no run reuses a connection an earlier run left open (ControlPersist keeps one a minute): each
pays its hosts' ssh logins, as a pass started minutes after the last one does. --warm-ssh lets
runs reuse them (ansible.cfg's ControlPersist, as back-to-back runs within a minute would).

Per run: wall time; controller CPU time, user + system of the ansible-playbook process and
everything it waited for (os.wait4 on it: its workers, and with the local connection the module
processes too; with the podman connection the `podman exec` clients, not the module's Python in
the container); tasks per host from the PLAY RECAP: ok + failed + skipped + rescued +
unreachable. Each task result counts once in exactly one of those (ansible-core's strategy:
changed and ignored are counted in ok as well, so they are not added; a loop counts once; an
include_tasks/include_role counts one ok per included file). Ratios are collection / naive of
the medians.

Targets: --target localhost (this machine, connection local, inventory/localhost.yml), or
--hosts N: N systemd containers gpufleet-bench-1..N of the podman harness
(scripts/harness/podman setup, its env), reached the way Ansible reaches a fleet: ssh as root
with the fleet harness's key, each on its own sshd port of 127.0.0.1, each host key checked
(benchmarks/runtime_pass/ssh_hosts.py says why they are shaped so: privileged and in this
machine's network namespace, like the molecule host scenario's GPU host, so every sysctl of the
profile is writable; systemd-sysctl masked in them, and this machine's /proc/sys snapshotted at
the start and put back). systemd's name=systemd cgroup (cgroup v1) is handed to the container
as molecule/resources/playbooks/create.yml does, and the benchmark starts once
`systemctl is-system-running --wait` says running. They are removed at exit (--keep: left).
Other containers, networks and volumes of the store are never touched. The harness lock
(.cache/podman/lock, as scripts/lib/podman_scenario.sh takes it) is held for the whole run in
both modes: a molecule stage compares this machine's sysctls around its scenario and tears the
store down at its end.

SSH pipelining: on for both, from ansible.cfg (pipelining = True), the file both runs use.

Fleet model (--model-nodes, default 1000, --model-forks, default 50, --model-cores, default this
machine's): from the no-change pass at the smallest and the largest host count, the controller
CPU one more host costs (the slope of the CPU between the two counts) and the wall time of one
host's pass; a pass of N hosts with F forks then takes at least ceil(N / F) times the one-host
wall time (the hosts of a task run F at a time, each as long as it takes alone) and at least
N times the per-host CPU over the controller's cores (when the controller is the limit), and the
model prints the larger of the two. It assumes targets on their own CPUs and a network like
this machine's loopback; a slower network lengthens the one-host time it scales.

Output: a plain-text table, and with --json PATH every run, the settings and exclusions, the
medians and ratios, and the restore check. --profile-tasks N adds one more collection first and
no-change pass (first --collection) with ansible.posix.profile_tasks and prints the N slowest
tasks of the no-change pass, and the CPU each task's workers used on the controller
(benchmarks/runtime_pass/worker_cpu/sitecustomize.py, loaded through PYTHONPATH in that run
only); not part of the medians.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import errno
import fcntl
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(REPO, "benchmarks", "runtime_pass")
sys.path.insert(0, HERE)
import ssh_hosts  # noqa: E402  (benchmarks/runtime_pass/ssh_hosts.py, beside the playbooks)

# The temporary folder the hosts' ssh files are written to (set by main()).
SSH_TMP = [None]
NAIVE_PLAYBOOK = os.path.join(HERE, "naive.yml")
HOST_ROLE_PLAYBOOK = os.path.join(HERE, "host_role.yml")
TUNE_PLAYBOOK = os.path.join(REPO, "playbooks", "tune.yml")
LOCAL_INVENTORY = os.path.join(REPO, "inventory", "localhost.yml")
HOST_DEFAULTS = os.path.join(REPO, "roles", "host", "defaults", "main")
HOST_VARS = os.path.join(REPO, "roles", "host", "vars", "main.yml")
SYSCTL_GUARD = os.path.join(REPO, "molecule", "resources", "sysctl_guard.py")
HARNESS = os.path.join(REPO, "scripts", "harness", "podman")
HARNESS_LOCK = os.path.join(REPO, ".cache", "podman", "lock")
WORKER_CPU = os.path.join(HERE, "worker_cpu")

CONTAINER_PREFIX = "gpufleet-bench-"
CONTAINER_LABEL = "gpufleet.benchmark=runtime_pass"
DEFAULT_IMAGE = "localhost/gpufleet-debian12-systemd"
MAX_HOSTS = 64
MAX_ROUNDS = 50

FIXTURE_DIR = "/var/lib/lxc/gpufleet-bench-ct"
FIXTURE_CONFIG = FIXTURE_DIR + "/config"
FIXTURE_TEXT = (
    "# gpufleet.tuning benchmarks/runtime_pass.py: a serving container with a GPU passed through\n"
    "lxc.uts.name = gpufleet-bench-ct\n"
    "lxc.rootfs.path = dir:/var/lib/lxc/gpufleet-bench-ct/rootfs\n"
    "lxc.mount.entry = /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
)

# What the runs may write, snapshotted and put back (recursively).
WATCHED = [
    "/etc/sysctl.d",
    "/var/lib/gpufleet-tuning",
    "/etc/modules-load.d",
    "/etc/modprobe.d",
    "/etc/security/limits.d",
    "/etc/udev/rules.d",
    "/usr/local/libexec/gpufleet",
    "/usr/local/sbin",
    "/etc/systemd/system",
    "/var/lib/lxc",
]

PASSES = ("first", "no-change")


# Runs on each target (this machine's Python, or python3 in a container through podman exec):
# probe, snapshot, restore, write files. JSON in on stdin, JSON out on stdout.
TARGET_HELPER = r'''
import base64, errno, hashlib, json, os, shutil, stat, subprocess, sys

MAX_DATA = 1 << 20
PEERMEM = "nvidia_peermem"


def sysctl_path(key):
    return "/proc/sys/" + key.replace(".", "/")


def norm(text):
    return " ".join(text.split())


def read_sysctl(key):
    try:
        with open(sysctl_path(key)) as handle:
            return norm(handle.read())
    except OSError:
        return None


def probe_sysctl(key):
    path = sysctl_path(key)
    try:
        with open(path) as handle:
            raw = handle.read()
    except OSError as exc:
        return {"value": None, "writable": False, "reason": "cannot read %s: %s" % (path, exc.strerror)}
    try:
        with open(path, "w") as handle:
            handle.write(raw)
    except OSError as exc:
        return {"value": norm(raw), "writable": False,
                "reason": "writing its current value back to %s: %s (%s)"
                          % (path, exc.strerror, errno.errorcode.get(exc.errno, exc.errno))}
    return {"value": norm(raw), "writable": True, "reason": ""}


def entry(path):
    st = os.lstat(path)
    out = {"mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISLNK(st.st_mode):
        out["type"] = "link"
        out["target"] = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        out["type"] = "dir"
    elif stat.S_ISREG(st.st_mode):
        out["type"] = "file"
        with open(path, "rb") as handle:
            data = handle.read()
        out["sha256"] = hashlib.sha256(data).hexdigest()
        if len(data) <= MAX_DATA:
            out["data"] = base64.b64encode(data).decode("ascii")
    else:
        out["type"] = "other"
        out["rdev"] = st.st_rdev
    return out


def snap_tree(root):
    if not os.path.lexists(root):
        return None
    out = {"": entry(root)}
    if out[""]["type"] == "dir":
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                out[os.path.relpath(path, root)] = entry(path)
    return out


def same(a, b):
    if a is None or b is None:
        return a is b
    keys = ("type", "mode", "uid", "gid", "sha256", "target", "rdev")
    if a.get("type") == "link":
        keys = ("type", "uid", "gid", "target")
    return all(a.get(k) == b.get(k) for k in keys)


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def restore_tree(root, snap, actions, errors):
    if snap is None:
        if os.path.lexists(root):
            remove(root)
            actions.append("removed %s" % root)
        return
    now = snap_tree(root) or {}
    for rel in sorted(now):
        if rel == "" or (rel in snap and snap[rel]["type"] == now[rel]["type"]):
            continue
        path = os.path.join(root, rel)
        if os.path.lexists(path):
            remove(path)
            actions.append("removed %s" % path)
    for rel in sorted(snap, key=lambda r: (r.count("/"), r)):
        want = snap[rel]
        path = os.path.join(root, rel) if rel else root
        have = entry(path) if os.path.lexists(path) else None
        if same(have, want):
            continue
        kind = want["type"]
        try:
            if kind == "dir":
                if not os.path.isdir(path):
                    os.makedirs(path)
            elif kind == "file":
                if "data" not in want:
                    errors.append("cannot restore %s: larger than %d bytes, content not kept" % (path, MAX_DATA))
                    continue
                tmp = path + ".gpufleet-bench-restore"
                with open(tmp, "wb") as handle:
                    handle.write(base64.b64decode(want["data"]))
                os.replace(tmp, path)
            elif kind == "link":
                if os.path.lexists(path):
                    os.unlink(path)
                os.symlink(want["target"], path)
            else:
                errors.append("cannot restore %s (a %s)" % (path, kind))
                continue
            if kind != "link":
                os.chmod(path, want["mode"])
            os.lchown(path, want["uid"], want["gid"])
            actions.append("restored %s" % path)
        except OSError as exc:
            errors.append("cannot restore %s: %s" % (path, exc))


def loaded_modules():
    try:
        with open("/proc/modules") as handle:
            return sorted(line.split()[0] for line in handle if line.strip())
    except OSError:
        return None


def pcie_cap(config):
    if len(config) < 64 or not config[6] & 0x10:
        return None
    ptr, seen = config[0x34] & 0xFC, set()
    while ptr and ptr not in seen and ptr + 1 < len(config):
        seen.add(ptr)
        if config[ptr] == 0x10:
            return ptr
        ptr = config[ptr + 1] & 0xFC
    return None


def devctl(bdf):
    path = "/sys/bus/pci/devices/%s/config" % bdf
    with open(path, "rb") as handle:
        config = handle.read(256)
    cap = pcie_cap(config)
    if cap is None:
        return None
    return {"offset": cap + 8, "value": int.from_bytes(config[cap + 8:cap + 10], "little")}


def gpus(vendor, classes):
    found = []
    root = "/sys/bus/pci/devices"
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return found
    for name in names:
        try:
            with open(os.path.join(root, name, "vendor")) as handle:
                ven = handle.read().strip().lower()
            with open(os.path.join(root, name, "class")) as handle:
                cls = handle.read().strip().lower()[:6]
        except OSError:
            continue
        if ven == vendor.lower() and cls in [c.lower() for c in classes]:
            found.append(name)
    return found


def in_container():
    if os.path.exists("/run/.containerenv") or os.path.exists("/.dockerenv"):
        return True
    try:
        with open("/proc/1/environ", "rb") as handle:
            return any(v.startswith(b"container=") for v in handle.read().split(b"\0"))
    except OSError:
        return False


def lxc_configs():
    found = []
    roots = ["/var/lib/lxc"]
    try:
        with open("/etc/lxc/lxc.conf") as handle:
            for line in handle:
                key, _, value = line.partition("=")
                if key.strip() == "lxc.lxcpath" and value.strip():
                    roots.append(value.strip())
    except OSError:
        pass
    try:
        found += sorted(os.path.join("/etc/pve/lxc", n) for n in os.listdir("/etc/pve/lxc") if n.endswith(".conf"))
    except OSError:
        pass
    for root in roots:
        try:
            names = sorted(os.listdir(root))
        except OSError:
            continue
        for name in names:
            if os.path.isfile(os.path.join(root, name, "config")):
                found.append(os.path.join(root, name, "config"))
    return found


def probe(req):
    out = {"sysctl": {key: probe_sysctl(key) for key in req["keys"]}}
    release = os.uname().release
    modprobe = shutil.which("modprobe")
    peermem_file = None
    if modprobe and os.path.isdir("/lib/modules/" + release):
        run = subprocess.run(["modinfo", "-n", PEERMEM], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True)
        peermem_file = run.stdout.strip() or None if run.returncode == 0 else None
    try:
        rdma = sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        rdma = []
    out["modules"] = {"release": release, "modules_dir": os.path.isdir("/lib/modules/" + release),
                      "modprobe": modprobe, "peermem_file": peermem_file, "rdma_devices": rdma,
                      "loaded": loaded_modules() is not None}
    out["container"] = in_container()
    out["pcie"] = {"devices": gpus(req["pcie_vendor"], req["pcie_classes"]), "setpci": shutil.which("setpci")}
    cpu = "/sys/devices/system/cpu"
    states = []
    for name in (os.listdir(cpu) if os.path.isdir(cpu) else []):
        idle = os.path.join(cpu, name, "cpuidle")
        if name[:3] == "cpu" and name[3:].isdigit() and os.path.isdir(idle):
            if any(s.startswith("state") for s in os.listdir(idle)):
                states.append(name)
    try:
        policies = [n for n in os.listdir(cpu + "/cpufreq") if n.startswith("policy")]
    except OSError:
        policies = []
    out["cpu_power"] = {"cpuidle_cpus": len(states), "cpufreq_policies": len(policies)}
    out["lxc_configs"] = lxc_configs()
    return out


def snapshot(req):
    out = {"sysctl": {key: read_sysctl(key) for key in req["keys"]},
           "trees": {root: snap_tree(root) for root in req["trees"]}}
    mods = loaded_modules()
    out["peermem_loaded"] = None if mods is None else PEERMEM in mods
    out["pcie"] = {}
    for bdf in req.get("pcie_devices", []):
        out["pcie"][bdf] = devctl(bdf)
    return out


def restore(req):
    snap, actions, errors = req["snapshot"], [], []
    for root, tree in sorted(snap["trees"].items()):
        try:
            restore_tree(root, tree, actions, errors)
        except OSError as exc:
            errors.append("%s: %s" % (root, exc))
    for key, value in sorted(snap["sysctl"].items()):
        if value is None or read_sysctl(key) == value:
            continue
        try:
            with open(sysctl_path(key), "w") as handle:
                handle.write(value)
            actions.append("sysctl %s = %s" % (key, value))
        except OSError as exc:
            errors.append("sysctl %s: cannot write %r: %s" % (key, value, exc))
    mods = loaded_modules()
    if snap.get("peermem_loaded") is False and mods is not None and PEERMEM in mods:
        run = subprocess.run(["modprobe", "-r", PEERMEM], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True)
        (actions if run.returncode == 0 else errors).append("modprobe -r %s: rc %d %s" % (PEERMEM, run.returncode, run.stdout.strip()))
    for bdf, want in sorted(snap.get("pcie", {}).items()):
        if not want:
            continue
        have = devctl(bdf)
        if have and have["value"] != want["value"]:
            try:
                fd = os.open("/sys/bus/pci/devices/%s/config" % bdf, os.O_WRONLY)
                try:
                    os.pwrite(fd, want["value"].to_bytes(2, "little"), want["offset"])
                finally:
                    os.close(fd)
                actions.append("PCIe %s Device Control 0x%04x -> 0x%04x" % (bdf, have["value"], want["value"]))
            except OSError as exc:
                errors.append("PCIe %s: %s" % (bdf, exc))
    if any(a.startswith(("removed /etc/systemd/system", "restored /etc/systemd/system")) for a in actions) \
            and shutil.which("systemctl"):
        subprocess.run(["systemctl", "daemon-reload"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"actions": actions, "errors": errors}


def read_sysctls(req):
    return {key: read_sysctl(key) for key in req["keys"]}


def write_sysctls(req):
    for key, value in sorted(req["values"].items()):
        with open(sysctl_path(key), "w") as handle:
            handle.write(value)
    return {key: read_sysctl(key) for key in req["values"]}


def write_files(req):
    for item in req["files"]:
        directory = os.path.dirname(item["path"])
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        with open(item["path"], "w") as handle:
            handle.write(item["content"])
        os.chmod(item["path"], int(item["mode"], 8))
    return {}


COMMANDS = {"probe": probe, "snapshot": snapshot, "restore": restore, "read_sysctls": read_sysctls,
            "write_files": write_files, "write_sysctls": write_sysctls}
json.dump(COMMANDS[sys.argv[1]](json.load(sys.stdin)), sys.stdout)
'''


class BenchError(Exception):
    """A failure that stops the benchmark (printed without a traceback)."""


def log(message):
    print(message, flush=True)


# -- the target(s) ----------------------------------------------------------------------------

class Target:
    """One host of the inventory and how to run the helper on it."""

    def __init__(self, name, helper_argv, container=False):
        self.name = name
        self.helper_argv = helper_argv
        self.container = container
        self.probe = None
        self.base = None        # before the benchmark (and before the LXC fixture)
        self.pristine = None    # with the fixture: the state every first pass starts from

    def call(self, command, payload, timeout=300):
        run = subprocess.run(self.helper_argv + ["-c", TARGET_HELPER, command], input=json.dumps(payload), check=False,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                             timeout=timeout)
        if run.returncode != 0:
            raise BenchError("%s: the helper's %s failed (rc %d): %s"
                             % (self.name, command, run.returncode, run.stderr.strip()[-2000:]))
        return json.loads(run.stdout)


def for_all(targets, function):
    """function(target) on every target at once; the results in order; the first error raised."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        return list(pool.map(function, targets))


def same_entry(a, b):
    if a is None or b is None:
        return a is b
    keys = ("type", "uid", "gid", "target") if a.get("type") == "link" else (
        "type", "mode", "uid", "gid", "sha256", "target", "rdev")
    return all(a.get(k) == b.get(k) for k in keys)


def state_differences(want, have):
    """What differs between two snapshots, as lines."""
    lines = []
    for key, value in sorted(want["sysctl"].items()):
        if have["sysctl"].get(key) != value:
            lines.append("sysctl %s: %s, was %s" % (key, have["sysctl"].get(key), value))
    for root in sorted(want["trees"]):
        old, new = want["trees"][root], have["trees"].get(root)
        if old is None or new is None:
            if (old is None) != (new is None):
                lines.append("%s: %s, was %s" % (
                    root, "absent" if new is None else "present", "absent" if old is None else "present"))
            continue
        for rel in sorted(set(old) | set(new)):
            path = os.path.join(root, rel) if rel else root
            if rel not in new:
                lines.append("%s: missing" % path)
            elif rel not in old:
                lines.append("%s: new" % path)
            elif not same_entry(old[rel], new[rel]):
                lines.append("%s: changed" % path)
    if want.get("peermem_loaded") != have.get("peermem_loaded"):
        lines.append("nvidia_peermem loaded: %s, was %s" % (have.get("peermem_loaded"), want.get("peermem_loaded")))
    for bdf, value in sorted(want.get("pcie", {}).items()):
        if have.get("pcie", {}).get(bdf) != value:
            lines.append("PCIe %s Device Control: %s, was %s" % (bdf, have.get("pcie", {}).get(bdf), value))
    return lines


# -- Ansible ----------------------------------------------------------------------------------

def find_tools():
    """ansible-playbook and a Python with PyYAML next to it (the venv's)."""
    candidates = [os.path.join(REPO, ".venv", "bin"), os.path.join(REPO, ".venv-test", "bin"),
                  os.path.dirname(sys.executable)]
    for directory in candidates:
        playbook = os.path.join(directory, "ansible-playbook")
        python = os.path.join(directory, "python")
        if os.access(playbook, os.X_OK) and os.access(python, os.X_OK):
            return playbook, python
    playbook = shutil.which("ansible-playbook")
    if playbook:
        return playbook, sys.executable
    raise BenchError("no ansible-playbook: run scripts/tune once (it makes .venv) or scripts/test (.venv-test)")


def load_defaults(python):
    """The host role's defaults, merged in file order as Ansible does; host_sysctl_settings as the
    base profile gives it (a node with no GPU gets the base profile: roles/host/vars/main.yml's
    __host_sysctl_settings_base, which the default combines with the profile's keys)."""
    code = ("import json, os, sys, yaml\n"
            "merged = {}\n"
            "for name in sorted(os.listdir(sys.argv[1])):\n"
            "    if name.endswith(('.yml', '.yaml')):\n"
            "        with open(os.path.join(sys.argv[1], name)) as handle:\n"
            "            merged.update(yaml.safe_load(handle) or {})\n"
            "if isinstance(merged.get('host_sysctl_settings'), str):\n"
            "    merged['host_sysctl_settings'] = yaml.safe_load(open(sys.argv[3]))['__host_sysctl_settings_base']\n"
            "naive = yaml.safe_load(open(sys.argv[2]))\n"
            "keys = [t['ansible.posix.sysctl']['name'] for t in naive[0]['tasks'] if 'ansible.posix.sysctl' in t]\n"
            "print(json.dumps({'defaults': merged, 'naive_keys': keys}, default=str))\n")
    run = subprocess.run([python, "-c", code, HOST_DEFAULTS, NAIVE_PLAYBOOK, HOST_VARS], check=False, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    if run.returncode != 0:
        raise BenchError("cannot read the host role's defaults with %s: %s" % (python, run.stderr.strip()[-1000:]))
    return json.loads(run.stdout)


RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+"
                   r"skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)")
RECAP_FIELDS = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")


def parse_recap(text):
    hosts = {}
    in_recap = False
    for line in text.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            match = RECAP.match(line.strip())
            if match:
                hosts[match.group(1)] = dict(zip(RECAP_FIELDS, (int(g) for g in match.groups()[1:])))
    for counts in hosts.values():
        counts["tasks"] = counts["ok"] + counts["failed"] + counts["skipped"] + counts["rescued"] + counts["unreachable"]
    return hosts


class Runner:
    """Runs ansible-playbook as scripts/tune does and measures it."""

    def __init__(self, playbook_bin, env, logdir, timeout, control_root=None):
        self.playbook_bin = playbook_bin
        self.env = env
        self.logdir = logdir
        self.timeout = timeout
        self.control_root = control_root
        self.current = None
        self.count = 0

    def run(self, label, argv, extra_env=None):
        self.count += 1
        logfile = os.path.join(self.logdir, "%03d-%s.log" % (self.count, re.sub(r"[^A-Za-z0-9_.-]+", "-", label)))
        env = dict(self.env, **(extra_env or {}))
        if self.control_root:
            # A folder of its own for ssh's master connections: none left by an earlier run
            # (ControlPersist keeps them a minute) is reused, so every run pays its hosts' ssh
            # logins as a pass run minutes after the last one does (--warm-ssh: reused).
            env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = os.path.join(self.control_root, "%03d" % self.count)
        with open(logfile, "w") as out:
            out.write("# %s\n" % " ".join(argv))
            out.flush()
            start = time.monotonic()
            # Its own process group: a timeout or a signal to this script ends the workers too.
            proc = subprocess.Popen([self.playbook_bin] + argv, cwd=REPO, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            self.current = proc
            expired = []
            timer = threading.Timer(self.timeout, lambda: (expired.append(True), self.signal_group(proc, signal.SIGKILL)))
            timer.daemon = True
            timer.start()
            try:
                status, usage = os.wait4(proc.pid, 0)[1:]
            finally:
                timer.cancel()
            wall = time.monotonic() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            self.current = None
            if expired:
                self.signal_group(proc, signal.SIGKILL)
                raise BenchError("%s: ansible-playbook ran past %d s and was killed; log: %s" % (label, self.timeout, logfile))
        with open(logfile) as handle:
            text = handle.read()
        recap = parse_recap(text)
        return {"label": label, "rc": proc.returncode, "wall_s": round(wall, 3),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "user_s": round(usage.ru_utime, 3),
                "sys_s": round(usage.ru_stime, 3), "recap": recap, "log": logfile, "text": text}

    @staticmethod
    def signal_group(proc, signum):
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self):
        proc = self.current
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            for _attempt in range(100):
                if os.waitpid(proc.pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.1)
            else:
                os.killpg(proc.pid, signal.SIGKILL)
                os.waitpid(proc.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.current = None


def check_run(result, hosts):
    """A run must reach every host and fail nowhere."""
    problems = []
    if result["rc"] != 0:
        problems.append("rc %d" % result["rc"])
    for host in hosts:
        counts = result["recap"].get(host)
        if counts is None:
            problems.append("%s missing from the PLAY RECAP" % host)
        elif counts["failed"] or counts["unreachable"]:
            problems.append("%s: failed=%d unreachable=%d" % (host, counts["failed"], counts["unreachable"]))
    if problems:
        tail = "\n".join(result["text"].splitlines()[-40:])
        raise BenchError("%s: %s\n--- last lines of %s ---\n%s" % (result["label"], "; ".join(problems), result["log"], tail))


# -- podman -----------------------------------------------------------------------------------

def podman(args, check=True, timeout=300):
    run = subprocess.run(["podman"] + args, check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         timeout=timeout)
    if check and run.returncode != 0:
        raise BenchError("podman %s: rc %d: %s" % (" ".join(args[:3]), run.returncode, run.stderr.strip()[-1500:]))
    return run


def harness_env():
    setup = subprocess.run([HARNESS, "setup"], cwd=REPO, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
    if setup.returncode != 0:
        raise BenchError("scripts/harness/podman setup failed:\n%s" % setup.stdout[-3000:])
    env_text = subprocess.run([HARNESS, "env"], cwd=REPO, stdout=subprocess.PIPE, universal_newlines=True,
                              check=True).stdout
    env = {}
    for line in env_text.splitlines():
        match = re.match(r"^export ([A-Z_]+)=(.*)$", line)
        if match:
            env[match.group(1)] = subprocess.run(["bash", "-c", "printf %s " + match.group(2)], stdout=subprocess.PIPE,
                                                 universal_newlines=True, check=True).stdout
    return env


def create_container(index, image, created):
    name = "%s%d" % (CONTAINER_PREFIX, index)
    exists = podman(["container", "inspect", "--format", '{{ index .Config.Labels "gpufleet.benchmark" }}', name],
                    check=False)
    if exists.returncode == 0:
        if exists.stdout.strip() != "runtime_pass":
            raise BenchError("a container %s exists and is not this benchmark's (no label %s): left alone; "
                             "remove or rename it first" % (name, CONTAINER_LABEL))
        log("removing %s, left by an earlier run" % name)
        remove_container(name)
    podman(ssh_hosts.create_args(name, index, image, SSH_TMP[0]))
    created.append(name)
    if os.path.exists("/sys/fs/cgroup/systemd/cgroup.procs"):
        # systemd's name=systemd cgroup (cgroup v1), made before the start as
        # molecule/resources/playbooks/create.yml does (podman 4.3 with runc makes none).
        info = json.loads(podman(["container", "inspect", name]).stdout)[0]
        parent = info.get("HostConfig", {}).get("CgroupParent") or "/libpod_parent"
        os.makedirs("/sys/fs/cgroup/systemd%s/libpod-%s" % (parent, info["Id"]), exist_ok=True)
    podman(["start", name])
    return name


def wait_systemd(name):
    # systemctl fails at once ("Failed to connect to bus") until systemd has made its socket.
    deadline = time.monotonic() + 60
    while podman(["exec", name, "test", "-S", "/run/systemd/private"], check=False).returncode != 0:
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    run = podman(["exec", name, "timeout", "120", "systemctl", "is-system-running", "--wait"], check=False, timeout=180)
    state = run.stdout.strip()
    if state != "running":
        failed = podman(["exec", name, "systemctl", "--failed", "--no-legend", "--no-pager"], check=False)
        status = podman(["container", "inspect", "--format", "{{.State.Status}} {{.State.Error}}", name], check=False)
        raise BenchError("%s: systemd reports %r (rc %d, %s); container state: %s; failed units: %s"
                         % (name, state, run.returncode, run.stderr.strip()[-500:], status.stdout.strip(),
                            (failed.stdout + failed.stderr).strip()[-1000:]))


def remove_container(name):
    for attempt in range(6):
        run = podman(["rm", "--force", "--time", "5", name], check=False)
        if run.returncode == 0 or "no such container" in run.stderr.lower():
            return None
        time.sleep(3)
    return "podman rm %s: %s" % (name, run.stderr.strip())


# -- the benchmark ----------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--target", help="localhost (the default): this machine, connection local")
    where.add_argument("--hosts", type=int, nargs="+", metavar="N",
                       help="N podman containers gpufleet-bench-1..N instead; several counts (--hosts 1 4 16): "
                            "the largest made once, each count a slice of it, the counts interleaved round by round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the four runs (default 3)")
    parser.add_argument("--json", metavar="PATH", help="write every run and the summary here")
    parser.add_argument("--keep", action="store_true", help="leave the containers (still restored)")
    parser.add_argument("--collection", nargs="+", choices=["tune", "host"], default=["tune"],
                        help="tune: playbooks/tune.yml --tags runtime, P2P off (default); "
                             "host: the host role alone (benchmarks/runtime_pass/host_role.yml)")
    parser.add_argument("--forks", type=int, help="ansible-playbook --forks (default: ansible.cfg's)")
    parser.add_argument("--warm-ssh", action="store_true",
                        help="let a run reuse the ssh master connections an earlier run left (ControlPersist); "
                             "by default every run starts without any, as a pass run minutes after the last does")
    parser.add_argument("--no-lxc-fixture", action="store_true", help="no LXC serving container config on the targets")
    parser.add_argument("--model-nodes", type=int, default=1000, help="fleet size the model prints (default 1000)")
    parser.add_argument("--model-forks", type=int, default=50, help="forks of the modelled controller (default 50)")
    parser.add_argument("--model-cores", type=int, default=os.cpu_count() or 1,
                        help="CPU cores of the modelled controller (default: this machine's)")
    parser.add_argument("--no-naive-limits-d", action="store_true",
                        help="leave out the naive playbook's /etc/security/limits.d task (the host role sets "
                             "memlock in the LXC config, the container role inside the container)")
    parser.add_argument("--profile-tasks", type=int, default=0, metavar="N",
                        help="after the rounds, print the N slowest tasks of a collection no-change pass")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="the containers' image (--hosts)")
    parser.add_argument("--run-timeout", type=int, default=1800, help="seconds one ansible-playbook may run")
    parser.add_argument("--log-dir", help="keep the ansible-playbook logs here (default: a temporary folder, "
                                          "kept only when something fails)")
    args = parser.parse_args(argv)
    if args.target is not None and args.target != "localhost":
        parser.error("--target: only localhost is supported (got %r); use --hosts N for podman containers" % args.target)
    if args.hosts is not None:
        bad = [n for n in args.hosts if not 1 <= n <= MAX_HOSTS]
        if bad:
            parser.error("--hosts: numbers of containers from 1 to %d (got %s)" % (MAX_HOSTS, " ".join(map(str, bad))))
        args.hosts = sorted(set(args.hosts))
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error("--rounds: from 1 to %d (got %d)" % (MAX_ROUNDS, args.rounds))
    if args.forks is not None and args.forks < 1:
        parser.error("--forks: at least 1 (got %d)" % args.forks)
    if args.profile_tasks < 0:
        parser.error("--profile-tasks: 0 (off) or more (got %d)" % args.profile_tasks)
    if args.run_timeout < 10:
        parser.error("--run-timeout: at least 10 seconds (got %d)" % args.run_timeout)
    if args.json:
        directory = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            parser.error("--json: %s is not a writable folder" % directory)
        if os.path.isdir(args.json):
            parser.error("--json: %s is a folder; give a file path" % args.json)
    if args.log_dir and os.path.exists(args.log_dir) and not os.path.isdir(args.log_dir):
        parser.error("--log-dir: %s exists and is not a folder" % args.log_dir)
    args.collection = list(dict.fromkeys(args.collection))
    return args


def take_lock():
    os.makedirs(os.path.dirname(HARNESS_LOCK), exist_ok=True)
    handle = open(HARNESS_LOCK, "a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        log("waiting for another user of the podman harness to finish (%s)" % HARNESS_LOCK)
        fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def decide(targets, settings, defaults, args):
    """What both runs leave out, and why; the naive playbook's tags to skip."""
    excluded_keys = {}
    for target in targets:
        for key, info in target.probe["sysctl"].items():
            if not info["writable"]:
                excluded_keys.setdefault(key, "%s: %s" % (target.name, info["reason"]))
    parts = {}
    probe = targets[0].probe
    mods = probe["modules"]
    if defaults.get("host_peermem_state", "auto") == "absent":
        parts["peermem"] = "host_peermem_state is absent"
    elif not mods["modules_dir"]:
        parts["peermem"] = "no kernel module support on %s (no /lib/modules/%s)" % (targets[0].name, mods["release"])
    elif not mods["modprobe"]:
        parts["peermem"] = "no modprobe on %s" % targets[0].name
    elif not mods["peermem_file"]:
        parts["peermem"] = "no nvidia_peermem module for kernel %s" % mods["release"]
    elif defaults.get("host_peermem_state", "auto") == "auto" and not mods["rdma_devices"]:
        parts["peermem"] = "no RDMA device (/sys/class/infiniband): host_peermem_state auto loads it only there"
    pcie = probe["pcie"]
    if not defaults.get("host_pcie_mrrs_enabled", True):
        parts["pcie"] = "host_pcie_mrrs_enabled is false"
    elif not pcie["devices"]:
        parts["pcie"] = "no NVIDIA GPU (vendor %s, classes %s) on %s" % (
            defaults.get("host_pcie_vendor"), ", ".join(defaults.get("host_pcie_classes", [])), targets[0].name)
    elif probe["container"]:
        parts["pcie"] = "%s is a container: config space is its host's" % targets[0].name
    elif not pcie["setpci"]:
        parts["pcie"] = "no setpci on %s" % targets[0].name
    if args.no_lxc_fixture:
        parts["lxc"] = "--no-lxc-fixture: no LXC serving container config on the target"
    if args.no_naive_limits_d:
        parts["limits_d"] = "--no-naive-limits-d: the naive playbook's /etc/security/limits.d task left out"
    cpu_power_off = any(t.probe["cpu_power"]["cpuidle_cpus"] or t.probe["cpu_power"]["cpufreq_policies"]
                        for t in targets)
    return excluded_keys, parts, cpu_power_off


def summarize(runs, variants):
    summary = {}
    for variant in variants + ["naive"]:
        for which in PASSES:
            chosen = [r for r in runs if r["playbook"] == variant and r["pass"] == which]
            if not chosen:
                continue
            # The targets' recap lines only (the fleet page's play runs on localhost).
            recaps = [r["recap"][n] for r in chosen for n in r.get("names") or r["recap"]]
            tasks = sorted({c["tasks"] for c in recaps})
            changed = sorted({c["changed"] for c in recaps})
            summary["%s/%s" % (variant, which)] = {
                "runs": len(chosen),
                "wall_s_median": round(statistics.median(r["wall_s"] for r in chosen), 3),
                "wall_s_min": min(r["wall_s"] for r in chosen),
                "wall_s_max": max(r["wall_s"] for r in chosen),
                "cpu_s_median": round(statistics.median(r["cpu_s"] for r in chosen), 3),
                "tasks_per_host": tasks,
                "changed_per_host": changed,
            }
    ratios = {}
    for variant in variants:
        for which in PASSES:
            mine, naive = summary.get("%s/%s" % (variant, which)), summary.get("naive/%s" % which)
            if mine and naive:
                ratios["%s/%s" % (variant, which)] = {
                    "wall": round(mine["wall_s_median"] / naive["wall_s_median"], 2) if naive["wall_s_median"] else None,
                    "cpu": round(mine["cpu_s_median"] / naive["cpu_s_median"], 2) if naive["cpu_s_median"] else None,
                    "tasks": round(statistics.median(mine["tasks_per_host"]) / statistics.median(naive["tasks_per_host"]), 2),
                }
    return summary, ratios


def span(values):
    return str(values[0]) if len(values) == 1 else "%s-%s" % (values[0], values[-1])


def print_table(summary, ratios, variants, header):
    log("")
    for line in header:
        log(line)
    rows = [("run", "n", "wall s median (min-max)", "cpu s median", "tasks/host", "changed/host")]
    for variant in variants + ["naive"]:
        for which in PASSES:
            item = summary.get("%s/%s" % (variant, which))
            if item:
                rows.append(("%s %s" % (variant, which), str(item["runs"]),
                             "%.2f (%.2f-%.2f)" % (item["wall_s_median"], item["wall_s_min"], item["wall_s_max"]),
                             "%.2f" % item["cpu_s_median"], span(item["tasks_per_host"]), span(item["changed_per_host"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        log("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)))
        if index == 0:
            log("  ".join("-" * w for w in widths))
    log("")
    for variant in variants:
        parts = []
        for which in PASSES:
            ratio = ratios.get("%s/%s" % (variant, which))
            if ratio:
                parts.append("%s: wall %sx, cpu %sx, tasks %sx" % (which, ratio["wall"], ratio["cpu"], ratio["tasks"]))
        log("ratio %s/naive  %s" % (variant, "; ".join(parts)))


def curve(by_hosts, variants):
    """Rows of the fleet-size curve: at each count, each playbook's median wall time, the
    collection's against the naive playbook's, and each count against the smallest."""
    counts = sorted(int(count) for count in by_hosts)
    base = by_hosts[str(counts[0])]["summary"]
    rows = []
    for count in counts:
        summary, ratios = by_hosts[str(count)]["summary"], by_hosts[str(count)]["ratios"]
        for variant in variants:
            for which in PASSES:
                mine, naive = summary.get("%s/%s" % (variant, which)), summary.get("naive/%s" % which)
                first = base.get("%s/%s" % (variant, which))
                if not (mine and naive and first):
                    continue
                rows.append({"hosts": count, "playbook": variant, "pass": which,
                             "wall_s": mine["wall_s_median"], "naive_wall_s": naive["wall_s_median"],
                             "cpu_s": mine["cpu_s_median"], "naive_cpu_s": naive["cpu_s_median"],
                             "over_naive": ratios["%s/%s" % (variant, which)]["wall"],
                             "over_smallest": round(mine["wall_s_median"] / first["wall_s_median"], 2),
                             "naive_over_smallest": round(
                                 naive["wall_s_median"] / base["naive/%s" % which]["wall_s_median"], 2)})
    return rows


def print_curve(rows, rounds):
    smallest = min(row["hosts"] for row in rows)
    log("")
    log("by fleet size (counts interleaved in every round): medians of %d round(s), wall seconds" % rounds)
    header = ("hosts", "playbook", "pass", "wall s", "naive s", "/naive", "/%d host" % smallest,
              "naive /%d host" % smallest, "cpu s", "naive cpu s")
    log("%5s  %-8s  %-9s  %7s  %7s  %7s  %8s  %13s  %6s  %11s" % header)
    for row in rows:
        log("%5d  %-8s  %-9s  %7.2f  %7.2f  %6.2fx  %7.2fx  %12.2fx  %6.2f  %11.2f" % (
            row["hosts"], row["playbook"], row["pass"], row["wall_s"], row["naive_wall_s"], row["over_naive"],
            row["over_smallest"], row["naive_over_smallest"], row["cpu_s"], row["naive_cpu_s"]))


def fleet_model(by_hosts, playbooks, nodes, forks, cores):
    """A no-change pass of ``nodes`` hosts from one controller with ``forks`` and ``cores``, per
    playbook, from the measured medians at the smallest and largest count (module docstring)."""
    counts = sorted(int(count) for count in by_hosts)
    small, large = counts[0], counts[-1]
    out = {"nodes": nodes, "forks": forks, "cores": cores, "from_hosts": [small, large], "playbooks": {}}
    for playbook in playbooks:
        low = by_hosts[str(small)]["summary"].get("%s/no-change" % playbook)
        high = by_hosts[str(large)]["summary"].get("%s/no-change" % playbook)
        if not (low and high):
            continue
        cpu_per_host = max((high["cpu_s_median"] - low["cpu_s_median"]) / float(large - small), 0.0)
        one_host_wall = low["wall_s_median"]
        by_wall = math.ceil(nodes / float(forks)) * one_host_wall
        by_cpu = nodes * cpu_per_host / float(cores)
        # Tasks per host at the largest count, of the hosts the run_once tasks did not count on.
        tasks = min(high["tasks_per_host"])
        out["playbooks"][playbook] = {
            "cpu_s_per_host": round(cpu_per_host, 3), "one_host_wall_s": one_host_wall,
            "tasks_per_host": tasks, "cpu_s_per_host_task": round(cpu_per_host / tasks, 4),
            "wall_bound_s": round(by_wall, 1), "cpu_bound_s": round(by_cpu, 1),
            "pass_s": round(max(by_wall, by_cpu), 1)}
    return out


def print_model(model):
    log("")
    log("model: a no-change pass of %d hosts, forks %d, %d controller core(s), from the medians at %d and %d host(s)"
        % (model["nodes"], model["forks"], model["cores"], model["from_hosts"][0], model["from_hosts"][1]))
    header = ("playbook", "cpu s / host", "cpu s / host+task", "1-host s", "wall bound s", "cpu bound s", "pass min")
    log("%-8s  %13s  %18s  %10s  %13s  %12s  %9s" % header)
    for name, row in model["playbooks"].items():
        log("%-8s  %13.3f  %18.4f  %10.2f  %13.1f  %12.1f  %9.1f" % (
            name, row["cpu_s_per_host"], row["cpu_s_per_host_task"], row["one_host_wall_s"], row["wall_bound_s"],
            row["cpu_bound_s"], row["pass_s"] / 60.0))


def worker_cpu(folder):
    """The workers' CPU by task from the files worker_cpu/sitecustomize.py wrote, most first."""
    found = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        with open(os.path.join(folder, name)) as handle:
            for line in handle:
                seconds, task = line.rstrip("\n").split("\t", 1)
                entry = found.setdefault(task, {"task": task, "workers": 0, "cpu_s": 0.0})
                entry["workers"] += 1
                entry["cpu_s"] += float(seconds)
    for entry in found.values():
        entry["cpu_s"] = round(entry["cpu_s"], 4)
    return sorted(found.values(), key=lambda item: -item["cpu_s"])


PROFILE_LINE = re.compile(r"^(.*?) -+ (\d+\.\d+)s\s*$")


def profile_top(text, count):
    """The task lines of ansible.posix.profile_tasks' closing summary, slowest first."""
    lines = text.splitlines()
    start = None
    for index, line in enumerate(lines):
        if line.startswith("=====") and index + 1 < len(lines):
            start = index + 1
    tasks = []
    for line in lines[start or 0:]:
        match = PROFILE_LINE.match(line.strip())
        if match and start is not None:
            tasks.append((float(match.group(2)), match.group(1).strip()))
    tasks.sort(reverse=True)
    return tasks[:count]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        raise BenchError("run as root: the runs write /proc/sys and /etc on the target, and the restore puts them back")
    playbook_bin, venv_python = find_tools()
    loaded = load_defaults(venv_python)
    defaults = loaded["defaults"]
    settings = dict(defaults.get("host_sysctl_settings") or {})
    settings.update(defaults.get("host_sysctl_extra") or {})
    settings = {key: " ".join(str(value).split()) for key, value in settings.items()}
    missing = sorted(set(settings) - set(loaded["naive_keys"]))
    if missing:
        raise BenchError("benchmarks/runtime_pass/naive.yml has no task for the profile's keys %s: add one per key"
                         % ", ".join(missing))
    variants = args.collection

    tmp = tempfile.mkdtemp(prefix="gpufleet-runtime-pass-")
    logdir = os.path.abspath(args.log_dir) if args.log_dir else os.path.join(tmp, "logs")
    os.makedirs(logdir, exist_ok=True)
    env = dict(os.environ)
    for name in ("ANSIBLE_FORCE_COLOR", "ANSIBLE_STDOUT_CALLBACK"):
        env.pop(name, None)
    env.update({"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
                "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, ".collections"),
                "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "false",
                "PATH": os.path.dirname(playbook_bin) + os.pathsep + env.get("PATH", "")})
    runner = Runner(playbook_bin, env, logdir, args.run_timeout,
                    control_root=None if args.warm_ssh else os.path.join(tmp, "cp"))
    report = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv, "ansible_playbook": playbook_bin,
              "collection_variants": variants, "rounds": args.rounds, "runs": [], "warmup": []}
    targets, created, failed, lock = [], [], False, None

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)

    try:
        lock = take_lock()
        guard_before = os.path.join(tmp, "sysctl-before.json")
        subprocess.run([sys.executable, SYSCTL_GUARD, "snapshot", guard_before], check=True, stdout=subprocess.DEVNULL)

        # Targets.
        if args.hosts:
            SSH_TMP[0] = tmp
            ssh_hosts.keygen()
            log("podman harness: scripts/harness/podman setup")
            podman_env = harness_env()
            os.environ.update(podman_env)
            env.update(podman_env)
            report["podman_env"] = podman_env
            if podman(["image", "exists", args.image], check=False).returncode != 0:
                raise BenchError("no image %s in the harness store" % args.image)
            start = time.monotonic()
            for index in range(1, max(args.hosts) + 1):
                create_container(index, args.image, created)
            for_all(created, wait_systemd)
            log("%d container(s) started and running systemd in %.1f s: %s"
                % (len(created), time.monotonic() - start, ", ".join(created)))
            for index in range(1, len(created) + 1):
                ssh_hosts.wait_ssh(index)
            targets = [Target(name, ["podman", "exec", "-i", name, "python3"], container=True) for name in created]
            known = ssh_hosts.known_hosts(podman, created, tmp)
            counts = args.hosts
            inventories = {count: ssh_hosts.inventory(created[:count], known, os.path.join(tmp, "inventory-%d.yml" % count))
                           for count in counts}
            where = ("%s of %d GPU-host-shaped container(s) %s%s (privileged, this machine's network namespace, ssh as "
                     "root to 127.0.0.1:%d%s, host keys checked)" % (
                         "the first %s" % "/".join(map(str, counts)) if len(counts) > 1 else "all",
                         len(created), CONTAINER_PREFIX, "1" if len(created) == 1 else "1..%d" % len(created),
                         ssh_hosts.port(1), "" if len(created) == 1 else "..%d" % ssh_hosts.port(len(created))))
        else:
            targets = [Target("localhost", [sys.executable])]
            counts = [1]
            inventories = {1: LOCAL_INVENTORY}
            where = "localhost (connection local, inventory/localhost.yml)"
        names_of = {count: [t.name for t in targets[:count]] for count in counts}
        largest = max(counts)
        report["target"] = where
        report["host_counts"] = counts

        # Probe: refused keys, module support, GPUs, LXC configs, CPU power.
        request = {"keys": sorted(settings), "pcie_vendor": defaults.get("host_pcie_vendor", "0x10de"),
                   "pcie_classes": defaults.get("host_pcie_classes", ["0x0300", "0x0302"])}
        for target, result in zip(targets, for_all(targets, lambda t: t.call("probe", request))):
            target.probe = result
        real_lxc = sorted({c for t in targets for c in t.probe["lxc_configs"] if not c.startswith(FIXTURE_DIR + "/")})
        if real_lxc:
            raise BenchError("LXC container configs found (%s): the runs would edit real containers; "
                             "run this on a machine without them" % ", ".join(real_lxc[:5]))
        excluded_keys, skipped_parts, cpu_power_off = decide(targets, settings, defaults, args)
        kept = {key: value for key, value in sorted(settings.items()) if key not in excluded_keys}
        if not kept:
            raise BenchError("the target refuses every sysctl of the profile: nothing to compare")
        pcie_devices = [] if "pcie" in skipped_parts else targets[0].probe["pcie"]["devices"]
        report["settings"] = {"sysctl_profile": settings, "sysctl_compared": kept}
        report["excluded"] = {"sysctl": excluded_keys, "parts": skipped_parts,
                              "cpu_power": "left alone (host_cpu_power_* null)" if cpu_power_off else "as the defaults"}

        # Snapshots: base (before anything), the fixture, pristine (what every first pass starts from).
        snap_request = {"keys": sorted(settings), "trees": WATCHED, "pcie_devices": pcie_devices}
        for target, result in zip(targets, for_all(targets, lambda t: t.call("snapshot", snap_request))):
            target.base = result
        if not args.no_lxc_fixture:
            fixture = {"files": [{"path": FIXTURE_CONFIG, "content": FIXTURE_TEXT, "mode": "0644"}]}
            for_all(targets, lambda t: t.call("write_files", fixture))
        for target, result in zip(targets, for_all(targets, lambda t: t.call("snapshot", snap_request))):
            target.pristine = result

        artifacts = os.path.join(tmp, "artifacts")
        collection_vars = {"host_sysctl_settings": kept, "host_sysctl_extra": {},
                           "audit_artifacts_dir": artifacts, "verify_artifacts_dir": artifacts,
                           "serving_artifacts_dir": artifacts, "verify_p2p_enabled": False}
        if cpu_power_off:
            collection_vars.update({"host_cpu_power_max_idle_latency_us": None, "host_cpu_power_governor": None,
                                    "host_cpu_power_energy_performance_preference": None,
                                    "host_cpu_power_persist": False})
        collection_vars_file = os.path.join(tmp, "collection-vars.json")
        with open(collection_vars_file, "w") as handle:
            json.dump(collection_vars, handle, indent=1)
        forks = ["--forks", str(args.forks)] if args.forks else []

        def command(variant, count):
            inventory = inventories[count]
            return {
                "tune": ["-i", inventory, os.path.relpath(TUNE_PLAYBOOK, REPO), "--tags", "runtime",
                         "-e", "@" + collection_vars_file] + forks,
                "host": ["-i", inventory, os.path.relpath(HOST_ROLE_PLAYBOOK, REPO), "--tags", "runtime",
                         "-e", "@" + collection_vars_file] + forks,
            }[variant]
        skip_tags = sorted(set(skipped_parts) | set(excluded_keys) | (set(loaded["naive_keys"]) - set(kept)))

        log("target: %s" % where)
        log("ansible-playbook: %s" % playbook_bin)
        log("SSH pipelining: on for both (ansible.cfg)")
        if args.hosts:
            log("ssh master connections: %s" % (
                "reused from run to run (--warm-ssh)" if args.warm_ssh
                else "none carried over: every run logs in to its hosts afresh"))
        report["settings"]["warm_ssh"] = bool(args.warm_ssh)
        log("sysctls compared: %s" % ", ".join("%s=%s" % kv for kv in kept.items()))
        for key, reason in sorted(excluded_keys.items()):
            log("left out of both runs: sysctl %s (%s)" % (key, reason))
        for part, reason in sorted(skipped_parts.items()):
            log("naive part skipped: %s (%s)" % (part, reason))
        if cpu_power_off:
            log("left out of both runs: CPU idle states and governor (the naive playbook has no counterpart; "
                "the collection runs with host_cpu_power_* null)")
        log("LXC: %s" % ("no serving container config" if args.no_lxc_fixture else
                         "fixture %s on each target (a GPU passed through)" % FIXTURE_CONFIG))

        def restore_all(snapshot_name):
            def one(target):
                want = getattr(target, snapshot_name)
                done = target.call("restore", {"snapshot": want})
                if done["errors"]:
                    raise BenchError("%s: restore failed: %s" % (target.name, "; ".join(done["errors"])))
                have = target.call("snapshot", snap_request)
                left = state_differences(want, have)
                if left:
                    raise BenchError("%s: still differs after the restore: %s" % (target.name, "; ".join(left[:20])))
                return done["actions"]
            return for_all(targets, one)

        def naive_argv(count):
            argv = ["-i", inventories[count], os.path.relpath(NAIVE_PLAYBOOK, REPO), "-e", "@" + naive_vars_file] + forks
            return argv + (["--skip-tags", ",".join(skip_tags)] if skip_tags else [])

        def run_pair(variant, round_label, record, count):
            restore_all("pristine")
            if variant != "naive" and os.path.isdir(artifacts):
                shutil.rmtree(artifacts)
            results = []
            names = names_of[count]
            for which in PASSES:
                if variant == "naive":
                    argv = naive_argv(count)
                else:
                    argv = command(variant, count)
                result = runner.run("%s-%dh-%s-%s" % (round_label, count, variant, which), argv)
                check_run(result, names)
                result.update({"playbook": variant, "pass": which, "round": round_label, "hosts": count, "names": names})
                recaps = [result["recap"][n] for n in names]
                result["tasks"] = span(sorted({c["tasks"] for c in recaps}))
                log("[%s] %3d host(s) %-6s %-9s wall %7.2f s  cpu %7.2f s  tasks/host %s  changed/host %s"
                    % (round_label, count, variant, which, result["wall_s"], result["cpu_s"], result["tasks"],
                       span(sorted({c["changed"] for c in recaps}))))
                if which == "no-change" and any(c["changed"] for c in recaps):
                    log("  note: the no-change pass of %s reported changes (log %s)" % (variant, result["log"]))
                text = result.pop("text")
                record.append(result)
                results.append((result, text))
            return results

        # Warm-up: each collection variant, then the naive values from what the first one left.
        naive_vars = {"naive_lxc_configs": [] if args.no_lxc_fixture else [FIXTURE_CONFIG],
                      "naive_lxc_memlock": str(defaults.get("host_lxc_memlock_limit", "unlimited")),
                      "naive_pcie_devices": pcie_devices}
        naive_vars_file = os.path.join(tmp, "naive-vars.json")
        for position, variant in enumerate(variants):
            restore_all("pristine")
            result = runner.run("warmup-%s-first" % variant, command(variant, largest))
            check_run(result, names_of[largest])
            result.pop("text")
            result.update({"playbook": variant, "pass": "first", "round": "warmup"})
            report["warmup"].append(result)
            log("[warmup] %s first pass: wall %.2f s, cpu %.2f s" % (variant, result["wall_s"], result["cpu_s"]))
            after = for_all(targets, lambda t: t.call("snapshot", snap_request))
            for target, have in zip(targets, after):
                written = [line for line in state_differences(target.pristine, have) if not line.startswith("sysctl ")]
                log("  %s: the %s pass changed %s" % (target.name, variant, "; ".join(written) or "no file"))
            if position == 0:
                values = {}
                for target, have in zip(targets, after):
                    for key in kept:
                        values.setdefault(key, set()).add(have["sysctl"][key])
                uneven = {k: sorted(v) for k, v in values.items() if len(v) != 1}
                if uneven:
                    raise BenchError("the collection left different values on the targets: %s" % uneven)
                naive_vars["naive_sysctl"] = {key: next(iter(v)) for key, v in sorted(values.items())}
                unchanged = [k for k in kept if naive_vars["naive_sysctl"][k] != kept[k]]
                for key in unchanged:
                    log("  %s: the collection left %s (profile %s: raised only, the kernel's is kept)"
                        % (key, naive_vars["naive_sysctl"][key], kept[key]))
        with open(naive_vars_file, "w") as handle:
            json.dump(naive_vars, handle, indent=1)
        report["settings"]["naive_vars"] = naive_vars
        report["settings"]["naive_skip_tags"] = skip_tags
        report["settings"]["pipelining"] = "on for both (ansible.cfg)"
        restore_all("pristine")
        result = runner.run("warmup-naive-first", naive_argv(largest))
        check_run(result, names_of[largest])
        result.pop("text")
        result.update({"playbook": "naive", "pass": "first", "round": "warmup"})
        report["warmup"].append(result)
        log("[warmup] naive first pass: wall %.2f s, cpu %.2f s" % (result["wall_s"], result["cpu_s"]))
        after = for_all(targets, lambda t: t.call("snapshot", snap_request))
        for target, have in zip(targets, after):
            left = state_differences(target.pristine, have)
            log("  %s: the naive pass changed %s" % (target.name, "; ".join(left) or "nothing"))
            mismatched = [k for k in kept if have["sysctl"][k] != naive_vars["naive_sysctl"][k]]
            if mismatched:
                raise BenchError("%s: the naive pass left %s different from the collection's" % (target.name, mismatched))

        # Rounds: within a round every count, and at each count every playbook, the order of both
        # reversed every other round, so that a drift of this machine's speed over the minutes of
        # the benchmark falls on every count and playbook alike.
        order = variants + ["naive"]
        for number in range(1, args.rounds + 1):
            label = "round %d/%d" % (number, args.rounds)
            for count in (counts if number % 2 else list(reversed(counts))):
                for variant in (order if number % 2 else list(reversed(order))):
                    run_pair(variant, label, report["runs"], count)

        report["by_hosts"] = {}
        for count in counts:
            summary, ratios = summarize([r for r in report["runs"] if r["hosts"] == count], variants)
            report["by_hosts"][str(count)] = {"summary": summary, "ratios": ratios}
            header = ["target: %s%s; %d round(s); medians" % (
                where, "" if len(counts) == 1 else "; %d host(s)" % count, args.rounds)]
            for variant in variants:
                header.append("%s: ansible-playbook %s" % (variant, " ".join(
                    a for a in command(variant, count)
                    if not a.startswith("@") and a != "-e" and a != inventories[count] and a != "-i")))
            header.append("naive: ansible-playbook %s%s" % (
                os.path.relpath(NAIVE_PLAYBOOK, REPO), " --skip-tags " + ",".join(skip_tags) if skip_tags else ""))
            header.append("cpu: user+sys of ansible-playbook and what it waited for; tasks/host: "
                          "ok+failed+skipped+rescued+unreachable of the PLAY RECAP")
            print_table(summary, ratios, variants, header)
        report["summary"], report["ratios"] = (report["by_hosts"][str(largest)]["summary"],
                                               report["by_hosts"][str(largest)]["ratios"])
        if len(counts) > 1:
            report["curve"] = curve(report["by_hosts"], variants)
            print_curve(report["curve"], args.rounds)
            report["model"] = fleet_model(report["by_hosts"], variants + ["naive"], args.model_nodes,
                                          args.model_forks, args.model_cores)
            print_model(report["model"])

        if args.profile_tasks:
            variant = variants[0]
            profile_env = {"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
                           "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all", "PROFILE_TASKS_SORT_ORDER": "descending"}
            restore_all("pristine")
            if os.path.isdir(artifacts):
                shutil.rmtree(artifacts)
            profiled = []
            for which in PASSES:
                # Each worker's own CPU, by task (benchmarks/runtime_pass/worker_cpu/sitecustomize.py).
                cpu_dir = os.path.join(tmp, "worker-cpu-" + which)
                os.makedirs(cpu_dir, exist_ok=True)
                env_cpu = dict(profile_env, GPUFLEET_WORKER_CPU_DIR=cpu_dir, PYTHONPATH=os.pathsep.join(
                    p for p in (WORKER_CPU, os.environ.get("PYTHONPATH")) if p))
                result = runner.run("profile-%s-%s" % (variant, which), command(variant, largest), extra_env=env_cpu)
                check_run(result, names_of[largest])
                result["worker_cpu"] = worker_cpu(cpu_dir)
                profiled.append(result)
            top = profile_top(profiled[1]["text"], args.profile_tasks)
            report["profile"] = {"variant": variant, "first_wall_s": profiled[0]["wall_s"],
                                 "no_change_wall_s": profiled[1]["wall_s"],
                                 "no_change_top": [{"task": name, "s": s} for s, name in top]}
            total = sum(item[0] for item in profile_top(profiled[1]["text"], 100000))
            log("")
            log("%d slowest tasks of a %s no-change pass (ansible.posix.profile_tasks; pass %.2f s wall, "
                "tasks sum %.2f s):" % (len(top), variant, profiled[1]["wall_s"], total))
            for seconds, name in top:
                log("  %7.2f s  %s" % (seconds, name))
            tasks = profiled[1]["worker_cpu"]
            report["profile"]["no_change_worker_cpu"] = tasks
            log("")
            log("controller CPU of the workers by task, same no-change pass (%d host(s); workers %.2f s of the "
                "pass's %.2f s controller CPU, the rest is ansible-playbook's own process and the ssh clients):"
                % (largest, sum(t["cpu_s"] for t in tasks), profiled[1]["cpu_s"]))
            for item in tasks[:args.profile_tasks]:
                log("  %7.3f s  %3d worker(s)  %6.1f ms each  %s" % (
                    item["cpu_s"], item["workers"], 1000 * item["cpu_s"] / item["workers"], item["task"]))
            for result in profiled:
                result.pop("text")
            report["profile"]["logs"] = [r["log"] for r in profiled]
    except BaseException as exc:
        failed = True
        report["error"] = str(exc) if not isinstance(exc, SystemExit) else "signal/exit %s" % exc.code
        raise
    finally:
        runner.kill()
        report["restore"] = finish(targets, created, args, tmp, report)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(report, handle, indent=1, default=str)
            log("JSON: %s" % args.json)
        if lock is not None:
            lock.close()
        keep_logs = failed or report["restore"]["problems"]
        if keep_logs:
            log("logs kept in %s" % logdir)
        if args.log_dir or not keep_logs:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if report["restore"]["problems"] else 0


def finish(targets, created, args, tmp, report):
    """Put every target back as it was, remove the containers, and check."""
    problems, actions = [], {}
    for target in targets:
        for name in ("pristine", "base"):
            want = getattr(target, name)
            if want is None:
                continue
            try:
                done = target.call("restore", {"snapshot": want})
                actions.setdefault(target.name, []).extend(done["actions"])
                problems.extend("%s: %s" % (target.name, e) for e in done["errors"])
            except (BenchError, OSError, subprocess.SubprocessError, ValueError) as exc:
                problems.append("%s: restore to %s failed: %s" % (target.name, name, exc))
        if target.base is not None and (not target.container or args.keep):
            try:
                have = target.call("snapshot", {"keys": sorted(target.base["sysctl"]), "trees": WATCHED,
                                                "pcie_devices": sorted(target.base.get("pcie", {}))})
                problems.extend("%s: %s" % (target.name, line) for line in state_differences(target.base, have))
            except (BenchError, OSError, subprocess.SubprocessError, ValueError) as exc:
                problems.append("%s: cannot read it back: %s" % (target.name, exc))
    if created and not args.keep:
        for name in created:
            error = remove_container(name)
            if error:
                problems.append(error)
        log("removed container(s): %s" % ", ".join(created))
    elif created:
        log("kept container(s) (--keep): %s" % ", ".join(created))
    guard = {}
    guard_before = os.path.join(tmp, "sysctl-before.json")
    if os.path.exists(guard_before) and created:
        # The containers share this machine's kernel: their systemd sets fs.file-max and
        # net.unix.max_dgram_qlen at boot (PID 1 does, whatever its units), and a privileged
        # container's writes are this machine's. Put back what differs from the start.
        run = subprocess.run([sys.executable, SYSCTL_GUARD, "restore", guard_before], check=False,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        guard["restored"] = run.stdout.strip()
        if run.returncode != 0:
            problems.append("this machine's sysctls could not all be put back: %s" % run.stdout.strip()[-1000:])
    if os.path.exists(guard_before):
        run = subprocess.run([sys.executable, SYSCTL_GUARD, "diff", guard_before], check=False, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
        guard.update(rc=run.returncode, output=run.stdout.strip())
        if run.returncode != 0:
            problems.extend("this machine's sysctl differs from the start: %s" % line
                            for line in run.stdout.strip().splitlines())
    restored = {"actions": actions, "problems": problems, "this_machine_sysctl_guard": guard}
    log("")
    if problems:
        log("RESTORE CHECK: %d difference(s):" % len(problems))
        for line in problems:
            log("  " + line)
    else:
        checked = [t.name for t in targets if t.base is not None and (not t.container or args.keep)]
        said = []
        if guard:
            said.append("this machine's /proc/sys as at the start (sysctl_guard diff)")
        if checked:
            said.append("%s: profile sysctls and watched files as at the start" % ", ".join(checked))
        log("restore check: %s" % ("; ".join(said) if said else "nothing was changed (stopped before the first snapshot)"))
    return restored


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print("ERROR: %s" % exc, file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
