# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fill a platform's fake /sys/devices/system/cpu (molecule host scenario, cpu_power).

Run inside a container whose /sys/devices/system/cpu is an empty tmpfs (molecule.yml gives
those platforms ``--tmpfs=/sys/devices/system/cpu:...,notmpcopyup``), by prepare_cpu_power.yml:

    python3 fake_cpu_sysfs.py SHAPE [ROOT]

SHAPE is one of SHAPES below. The CPUs online are this machine's own (the ``cpuN`` lines of
/proc/stat, which the tmpfs does not hide), so glibc, nproc and Python count what the
kernel runs; one more CPU is added offline, with what the kernel keeps of it (an inactive
cpufreq policy with an empty affected_cpus, its cpuidle directory unless the driver is
haltpoll, which unregisters an offline CPU's cpuidle device).

Refuses to touch anything that is not a tmpfs, so it can never write into a real sysfs. Writes
ROOT's file checksums to /root/gpufleet-fake-cpu.sha256 afterwards, so the verifier can prove
with ``sha256sum -c`` that a run wrote nothing. Prints a JSON summary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys

ROOT = "/sys/devices/system/cpu"
SUMS = "/root/gpufleet-fake-cpu.sha256"

# (name, desc, exit latency us, target residency us) per state, as the drivers register them.
SHAPES = {
    # The CI machines that have cpuidle (test-machines.md): haltpoll, POLL 0 us and
    # "haltpoll idle" 1 us, both within the role's 10 us bound; no cpufreq.
    "haltpoll": {
        "driver": "haltpoll",
        "governor": "haltpoll",
        "states": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("haltpoll idle", "haltpoll idle", 1, 1)],
        "cpufreq": None,
    },
    # A server with intel_idle (Ice Lake-SP latencies, C6 170 us above the bound) and
    # intel_pstate in active mode (governor and EPP per CPU).
    "deep": {
        "driver": "intel_idle",
        "governor": "menu",
        "states": [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "MWAIT 0x00", 1, 1),
                   ("C1E", "MWAIT 0x01", 2, 4), ("C6", "MWAIT 0x20", 170, 600)],
        "cpufreq": {
            "driver": "intel_pstate",
            "governor": "powersave",
            "governors": "performance powersave",
            "epp": "balance_performance",
            "epps": "default performance balance_performance balance_power power ",
        },
    },
}


def _cpu_list(cpus):
    runs = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in runs)


def _fstype(mount_point):
    """The filesystem type mounted exactly at ``mount_point``, None when nothing is."""
    found = None
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            if fields[4] == mount_point:
                found = fields[fields.index("-") + 1]  # the last mount there wins
    return found


def _online_cpus():
    with open("/proc/stat") as handle:
        return sorted(int(m.group(1)) for m in (re.match(r"^cpu(\d+)\s", line) for line in handle) if m)


def build(shape, root):
    spec = SHAPES[shape]
    online = _online_cpus()
    offline = [max(online) + 1]
    every = online + offline
    files = {
        "online": _cpu_list(online),
        "offline": _cpu_list(offline),
        "possible": _cpu_list(every),
        "present": _cpu_list(every),
        "kernel_max": "8191",
        "cpuidle/current_driver": spec["driver"],
        "cpuidle/current_governor_ro": spec["governor"],
    }
    links = {}
    for cpu in every:
        files["cpu%d/topology/core_id" % cpu] = str(cpu)
        if cpu:
            files["cpu%d/online" % cpu] = "0" if cpu in offline else "1"
        if cpu in online or spec["driver"] != "haltpoll":
            for index, (name, desc, latency, residency) in enumerate(spec["states"]):
                base = "cpu%d/cpuidle/state%d/" % (cpu, index)
                files.update({base + "name": name, base + "desc": desc, base + "latency": str(latency),
                              base + "residency": str(residency), base + "disable": "0",
                              base + "usage": "0", base + "time": "0"})
        freq = spec["cpufreq"]
        if freq:
            base = "cpufreq/policy%d/" % cpu
            links["cpu%d/cpufreq" % cpu] = "../cpufreq/policy%d" % cpu
            files[base + "related_cpus"] = str(cpu)
            # Linux 5.19+ answers EBUSY for every file of an inactive policy; a tmpfs cannot,
            # so the offline CPU's policy has the older kernels' shape: no affected CPU.
            files[base + "affected_cpus"] = "" if cpu in offline else str(cpu)
            files[base + "scaling_governor"] = freq["governor"]
            if cpu in online:
                files.update({base + "scaling_driver": freq["driver"],
                              base + "scaling_available_governors": freq["governors"],
                              base + "energy_performance_preference": freq["epp"],
                              base + "energy_performance_available_preferences": freq["epps"]})
    for entry in os.listdir(root):
        path = os.path.join(root, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    for rel, content in sorted(files.items()):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(content + "\n")
    for rel, target in links.items():
        os.symlink(target, os.path.join(root, rel))
    sums = []
    for rel in sorted(files):
        with open(os.path.join(root, rel), "rb") as handle:
            sums.append("%s  %s\n" % (hashlib.sha256(handle.read()).hexdigest(), os.path.join(root, rel)))
    with open(SUMS, "w") as handle:
        handle.writelines(sums)
    return {"shape": shape, "root": root, "online": _cpu_list(online), "offline": _cpu_list(offline),
            "files": len(files), "sums": SUMS}


def main(argv):
    if len(argv) not in (2, 3) or argv[1] not in SHAPES:
        sys.stderr.write("usage: %s {%s} [ROOT]\n" % (argv[0], "|".join(sorted(SHAPES))))
        return 2
    root = argv[2] if len(argv) == 3 else ROOT
    fstype = _fstype(root)
    if fstype != "tmpfs":
        sys.stderr.write("%s is %s, not a tmpfs: refusing to write a fake CPU tree there (give the "
                         "platform --tmpfs=%s:rw,...,notmpcopyup in molecule.yml)\n"
                         % (root, fstype or "no mount point", root))
        return 1
    print(json.dumps(build(argv[1], root)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
