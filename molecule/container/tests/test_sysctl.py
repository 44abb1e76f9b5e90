# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container role's sysctls in an unprivileged container playing the serving LXC guest.

The expected values are written out here, not read from the role: a wrong default in the
role must fail these tests. The container sets and persists the keys of its own network
namespace; the host-wide keys it only reads, never persists, and reports as the host's job.
"""

from __future__ import annotations

import errno

import pytest

CONF = "/etc/sysctl.d/90-gpufleet-serving.conf"
NAMESPACED = {
    "net.core.somaxconn": "4096",
    "net.ipv4.tcp_rmem": "4096 87380 134217728",
    "net.ipv4.tcp_wmem": "4096 65536 134217728",
}
HOST_WIDE = [
    "kernel.numa_balancing",
    "kernel.sched_autogroup_enabled",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "vm.swappiness",
]
HOSTS_JOB = "host-wide key: the host sets it (gpufleet.tuning.host role)"


@pytest.fixture(scope="module")
def first(results):
    result = results("converge-1")["__container_sysctl"]
    assert not result.get("failed"), result.get("msg")
    return result


def test_namespaced_keys_are_set(read_sysctl):
    assert dict((key, read_sysctl(key)) for key in NAMESPACED) == NAMESPACED


def test_first_converge_wrote_them_at_runtime(first):
    """prepare_sysctl.yml moved every namespaced key away: all three were really written."""
    assert sorted(first["changed_keys"]) == sorted(NAMESPACED)
    assert dict((key, first["after"][key]) for key in NAMESPACED) == NAMESPACED


def test_persisted_file_holds_exactly_the_namespaced_keys(host, sysctl_conf):
    conf = host.file(CONF)
    assert conf.is_file and conf.user == "root" and conf.group == "root" and conf.mode == 0o644
    assert sysctl_conf(CONF) == NAMESPACED


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


def test_sysctl_system_applies_the_persisted_file(sysctl_system_reload):
    """Persistence, not only the runtime write: keys moved away come back from the file."""
    reload = sysctl_system_reload(NAMESPACED)
    assert sorted(reload["nudged"]) == sorted(NAMESPACED)
    assert "Applying %s" % CONF in reload["output"]
    assert reload["after"] == NAMESPACED


def test_later_runs_changed_nothing(results):
    for run in ("converge-2", "check"):
        result = results(run)["__container_sysctl"]
        assert result["changed"] is False, "%s: changed_keys %s, diff %s" % (run, result["changed_keys"], result.get("diff"))
        assert result["changed_keys"] == []
