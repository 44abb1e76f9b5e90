# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container role's sysctls in an unprivileged container playing the serving LXC guest.

The profile's values are written out here, not read from the role: a wrong default in the
role must fail these tests. What the run must leave is derived, not assumed: the buffer keys
are raise-only (each field the larger of the kernel's value and the profile's), so the
expected values come from the starting values prepare_sysctl.yml set and read back
(results/<instance>/prepare-sysctl.json) and the profile below. The container sets and
persists the keys of its own network namespace; the host-wide keys it only reads, never
persists, and reports as the host's job.
"""

from __future__ import annotations

import errno

import pytest

CONF = "/etc/sysctl.d/90-gpufleet-serving.conf"
NAMESPACED = {
    "net.core.somaxconn": "4096",
    "net.ipv4.tcp_rmem": "4096 131072 134217728",
    "net.ipv4.tcp_wmem": "4096 65536 134217728",
}
# All three are on the module's default raise_only list (the role keeps that default).
RAISE_ONLY = frozenset(NAMESPACED)
HOST_WIDE = [
    "kernel.numa_balancing",
    "kernel.sched_autogroup_enabled",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "vm.swappiness",
]
HOSTS_JOB = "host-wide key: the host sets it (gpufleet.tuning.host role)"


def raised(start, wanted):
    """(value, kept field positions from 1): field by field the larger of the two."""
    pairs = list(zip((int(x) for x in start.split()), (int(x) for x in wanted.split())))
    assert len(pairs) == len(start.split()) == len(wanted.split()), (start, wanted)
    value = " ".join(str(max(a, b)) for a, b in pairs)
    return value, [i for i, (a, b) in enumerate(pairs, 1) if a > b]


@pytest.fixture(scope="module")
def prepared(results):
    """The starting values prepare_sysctl.yml set and read back."""
    return results("prepare-sysctl")


@pytest.fixture(scope="module")
def expected(prepared):
    found = dict(NAMESPACED)
    for key in RAISE_ONLY:
        found[key] = raised(prepared[key], NAMESPACED[key])[0]
    return found


@pytest.fixture(scope="module")
def first(results):
    result = results("converge-1")["__container_sysctl"]
    assert not result.get("failed"), result.get("msg")
    return result


def test_prepare_exercises_raise_only_both_ways(prepared):
    kept = [key for key in RAISE_ONLY if raised(prepared[key], NAMESPACED[key])[1]]
    lifted = [key for key in RAISE_ONLY if raised(prepared[key], NAMESPACED[key])[0] != prepared[key]]
    assert kept and lifted, (kept, lifted)


def test_namespaced_keys_are_set(read_sysctl, expected):
    assert dict((key, read_sysctl(key)) for key in NAMESPACED) == expected


def test_first_converge_wrote_them_at_runtime(first, prepared, expected):
    """prepare_sysctl.yml moved every namespaced key away: each one that differs was written."""
    assert dict((key, first["before"][key]) for key in prepared) == prepared
    assert sorted(first["changed_keys"]) == sorted(k for k in NAMESPACED if prepared[k] != expected[k])
    assert dict((key, first["after"][key]) for key in NAMESPACED) == expected


def test_fields_the_kernel_had_higher_were_kept_and_reported(first, prepared):
    kept = {}
    for key in sorted(RAISE_ONLY):
        value, fields = raised(prepared[key], NAMESPACED[key])
        if fields:
            kept[key] = {"wanted": NAMESPACED[key], "effective": value, "fields": fields}
    assert kept and first["kept_higher"] == kept


def test_persisted_file_holds_exactly_the_namespaced_keys(host, sysctl_conf, expected):
    conf = host.file(CONF)
    assert conf.is_file and conf.user == "root" and conf.group == "root" and conf.mode == 0o644
    assert sysctl_conf(CONF) == expected


def test_host_wide_keys_are_persisted_nowhere_in_the_container(host, sysctl_conf):
    files = host.check_output("ls /etc/sysctl.d/*.conf /etc/sysctl.conf 2>/dev/null || true").split()
    assert CONF in files
    for path in files:
        persisted = sorted(set(sysctl_conf(path)) & set(HOST_WIDE))
        assert persisted == [], "%s persists host-wide keys %s" % (path, persisted)


def test_host_wide_keys_are_reported_as_the_hosts_job(results):
    for run in ("converge-1", "converge-2", "check"):
        result = results(run)["__container_sysctl"]
        skipped = result["skipped_keys"]
        assert sorted(skipped) == sorted(HOST_WIDE), "%s: skipped_keys %s" % (run, skipped)
        for key in HOST_WIDE:
            assert skipped[key].startswith(HOSTS_JOB), "%s: %s: %r" % (run, key, skipped[key])
            assert key not in result["changed_keys"]


def test_container_cannot_write_host_wide_keys(host, read_sysctl):
    """The harness is faithful: root in this container is refused the host's kernel, even
    for the value the key already holds (as in an unprivileged LXC guest)."""
    for key in HOST_WIDE:
        path = "/proc/sys/" + key.replace(".", "/")
        probe = host.run(
            "python3 -c 'import os, sys\n"
            "try:\n"
            "    fd = os.open(sys.argv[1], os.O_WRONLY)\n"
            "    os.write(fd, sys.argv[2].encode())\n"
            "except OSError as exc:\n"
            "    print(exc.errno)\n"
            "else:\n"
            "    print(0)' %s %s", path, read_sysctl(key))
        assert probe.rc == 0, probe.stderr
        assert int(probe.stdout) in (errno.EACCES, errno.EPERM), \
            "%s: writing its own value back gave errno %s" % (key, probe.stdout.strip())


def test_sysctl_system_applies_the_persisted_file(sysctl_system_reload, expected):
    """Persistence, not only the runtime write: keys moved away come back from the file."""
    reload = sysctl_system_reload(expected)
    assert sorted(reload["nudged"]) == sorted(NAMESPACED)
    assert "Applying %s" % CONF in reload["output"]
    assert reload["after"] == expected


def test_later_runs_changed_nothing(results):
    for run in ("converge-2", "check"):
        result = results(run)["__container_sysctl"]
        assert result["changed"] is False, "%s: changed_keys %s, diff %s" % (run, result["changed_keys"], result.get("diff"))
        assert result["changed_keys"] == []
