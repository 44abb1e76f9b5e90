# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record the sysctls of the machine running the tests, and put them back afterwards.

Why: the host scenario runs a *privileged* container, where /proc/sys is the test machine's
own kernel for everything outside its IPC and UTS namespaces (it shares the host network
namespace). The role's writes (vm.swappiness, kernel.numa_balancing, net.core.rmem_max, ...),
the container's systemd at boot (seen: fs.file-max to its maximum, net.unix.max_dgram_qlen to
512, and systemd-sysctl's fs.protected_* from /usr/lib/sysctl.d) and the verifier's
`sysctl --system` all land on the CI VM. This script snapshots every writable key before the container
starts and restores whatever differs afterwards, so later features need not list the keys
they touch.

    python3 sysctl_guard.py snapshot FILE   record every readable, writable key (JSON)
    python3 sysctl_guard.py diff FILE       print keys that differ now; exit 1 if any
    python3 sysctl_guard.py restore FILE    write back the keys that differ; exit 1 if a
                                            key could not be put back

Runs on the controller with the standard library only.
"""

from __future__ import annotations

import json
import os
import stat
import sys

PROC_SYS = "/proc/sys"

# Keys that change on their own or must not be written back: the last PID handed out, a
# rate the kernel lowers itself under perf load, taint bits (write-only-add), binfmt_misc
# registrations (writing "status" is an action), and the RNG knobs.
VOLATILE_PREFIXES = (
    "kernel.ns_last_pid",
    "kernel.perf_event_max_sample_rate",
    "kernel.tainted",
    "kernel.random.",
    "fs.binfmt_misc.",
)


# Per-interface keys (net.ipv4.conf.eth0.*, net.ipv6.neigh.veth1.*) follow interfaces that
# other software creates and tunes while the tests run; only their "all" and "default"
# entries are kept.
PER_INTERFACE = ("net.ipv4.conf.", "net.ipv6.conf.", "net.ipv4.neigh.", "net.ipv6.neigh.")


def key_of(path, root=PROC_SYS):
    return os.path.relpath(path, root).replace("/", ".")


def is_guarded(key):
    if key.startswith(VOLATILE_PREFIXES):
        return False
    for prefix in PER_INTERFACE:
        if key.startswith(prefix):
            return key[len(prefix):].split(".", 1)[0] in ("all", "default")
    return True


def read_all(root=PROC_SYS):
    """Every regular file under root that is readable and writable by its owner, as key: text.

    Interface names can hold dots, so keys are only labels here: the path is kept too.
    """
    values = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            key = key_of(path, root)
            if not is_guarded(key):
                continue
            try:
                mode = os.stat(path).st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode) or not mode & stat.S_IWUSR or not mode & stat.S_IRUSR:
                continue
            try:
                with open(path, "r") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                continue  # write-only in practice (EINVAL/EPERM/EIO on read)
            values[key] = {"path": path, "value": " ".join(text.split())}
    return values


def differences(before, now):
    """Keys present in both whose value changed (keys that appeared or vanished, such as a
    removed interface's, are not differences)."""
    return sorted(k for k in before if k in now and before[k]["value"] != now[k]["value"])


def load(path):
    with open(path, "r") as handle:
        return json.load(handle)


def snapshot(path, root=PROC_SYS):
    values = read_all(root)
    tmp = path + ".tmp"
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory)
    with open(tmp, "w") as handle:
        json.dump(values, handle, indent=1, sort_keys=True)
    os.rename(tmp, path)
    print("recorded %d sysctls in %s" % (len(values), path))
    return 0


def diff(path, root=PROC_SYS):
    before = load(path)
    now = read_all(root)
    changed = differences(before, now)
    for key in changed:
        print("%s: %s -> %s" % (key, before[key]["value"], now[key]["value"]))
    if not changed:
        print("no sysctl differs from %s" % path)
        return 0
    return 1


def restore(path, root=PROC_SYS):
    before = load(path)
    now = read_all(root)
    changed = differences(before, now)
    failed = []
    for key in changed:
        entry = before[key]
        try:
            with open(entry["path"], "w") as handle:
                handle.write(entry["value"])
        except OSError as exc:
            failed.append("%s: cannot write %r: %s" % (key, entry["value"], exc))
            continue
        with open(entry["path"], "r") as handle:
            got = " ".join(handle.read().split())
        if got != entry["value"]:
            failed.append("%s: wrote %r, the kernel reports %r" % (key, entry["value"], got))
        else:
            print("restored %s: %s -> %s" % (key, now[key]["value"], entry["value"]))
    if not changed:
        print("nothing to restore: no sysctl differs from %s" % path)
    for line in failed:
        print("FAILED " + line)
    return 1 if failed else 0


def main(argv):
    commands = {"snapshot": snapshot, "diff": diff, "restore": restore}
    if len(argv) != 3 or argv[1] not in commands:
        sys.stderr.write(__doc__)
        return 2
    return commands[argv[1]](argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
