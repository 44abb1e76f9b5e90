# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an audit must leave as it found it, printed as JSON (molecule's audit playbook runs it
on the instance before and after the audit; the verifiers compare the two).

- the runtime state the tuning modules write: the host role's sysctls, every CPU idle state's
  disable flag, cpufreq governors and EPP, the first 64 bytes of every PCI function's config
  space (MRRS lives there), the loaded modules;
- every file under the folders the modules persist to: path, size, mode, owner and mtime.

Reads only; a file that cannot be read is recorded with the error, not skipped.
"""

import glob
import json
import os

# net/core/somaxconn: per network namespace with a fixed default (4096), so a namespaced host's
# tuning shows whatever this machine's own values are; a new namespace copies tcp_rmem and
# tcp_wmem from this machine's, which may already be tuned.
SYSCTLS = ("kernel/numa_balancing", "kernel/nmi_watchdog", "kernel/sched_autogroup_enabled", "vm/swappiness",
           "net/core/rmem_max", "net/core/wmem_max", "net/core/somaxconn", "net/ipv4/tcp_rmem", "net/ipv4/tcp_wmem")
RUNTIME_GLOBS = ("/sys/devices/system/cpu/cpu*/cpuidle/state*/disable",
                 "/sys/devices/system/cpu/cpufreq/policy*/scaling_governor",
                 "/sys/devices/system/cpu/cpufreq/policy*/energy_performance_preference")
FOLDERS = ("/etc", "/usr/local", "/boot", "/var/lib/gpufleet-tuning")


def read(path, size=4096, binary=False):
    try:
        with open(path, "rb") as handle:
            data = handle.read(size)
    except OSError as exc:
        return "error: %s" % exc.strerror
    return data.hex() if binary else data.decode("utf-8", "replace").strip()


def files():
    found = {}
    for top in FOLDERS:
        for folder, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names) + sorted(d for d in dirs if os.path.islink(os.path.join(folder, d))):
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError as exc:
                    found[path] = "error: %s" % exc.strerror
                    continue
                found[path] = [st.st_size, oct(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns]
    return found


def main():
    state = {"sysctl": dict((key, read("/proc/sys/" + key)) for key in SYSCTLS if os.path.exists("/proc/sys/" + key))}
    state["runtime"] = dict((path, read(path)) for pattern in RUNTIME_GLOBS for path in sorted(glob.glob(pattern)))
    state["pci_config"] = dict((path, read(path, 64, binary=True))
                               for path in sorted(glob.glob("/sys/bus/pci/devices/*/config")))
    modules = read("/proc/modules", 1 << 20)
    state["modules"] = sorted(line.split()[0] for line in modules.splitlines() if line.strip()) \
        if not modules.startswith("error:") else modules
    state["files"] = files()
    print(json.dumps(state, sort_keys=True))


if __name__ == "__main__":
    main()
