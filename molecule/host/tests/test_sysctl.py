# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's sysctl profile in a privileged container playing the GPU host.

The expected values are written out here, not read from the role: a wrong default in the
role must fail these tests. The container shares this machine's kernel for every key outside
its network namespace, so the values read inside are the CI VM's own.
"""

from __future__ import annotations

import pytest

CONF = "/etc/sysctl.d/90-gpufleet-inference.conf"
PROFILE = {
    "kernel.numa_balancing": "0",
    "kernel.nmi_watchdog": "0",
    "kernel.sched_autogroup_enabled": "0",
    "vm.swappiness": "10",
    "net.core.rmem_max": "134217728",
    "net.core.wmem_max": "134217728",
    "net.ipv4.tcp_rmem": "4096 87380 134217728",
    "net.ipv4.tcp_wmem": "4096 65536 134217728",
}
# prepare_sysctl.yml set these to stock values, so the first converge had to write them.
PREPARED = sorted(set(PROFILE) - set(["kernel.nmi_watchdog"]))
# The one key a kernel may refuse outright (no PMU); the role's default on_unwritable=skip
# leaves it out of the file and says why.
MAY_BE_REFUSED = "kernel.nmi_watchdog"


@pytest.fixture(scope="module")
def first(results):
    result = results("converge-1")["__host_sysctl"]
    assert not result.get("failed"), result.get("msg")
    return result


@pytest.fixture(scope="module")
def applied(first):
    """The profile less a key this kernel refused (reported in skipped_keys)."""
    assert set(first["skipped_keys"]) <= set([MAY_BE_REFUSED]), first["skipped_keys"]
    return dict((k, v) for k, v in PROFILE.items() if k not in first["skipped_keys"])


def test_profile_is_live(read_sysctl, applied):
    assert dict((key, read_sysctl(key)) for key in applied) == applied


def test_first_converge_wrote_the_prepared_keys_at_runtime(first, applied):
    # Every prepared key was written; nmi_watchdog too only where the kernel allows it and
    # it was not 0 already.
    assert sorted(set(first["changed_keys"]) - set([MAY_BE_REFUSED])) == PREPARED
    assert dict((key, first["after"][key]) for key in applied) == applied


def test_persisted_file_holds_the_profile(host, sysctl_conf, applied, first):
    conf = host.file(CONF)
    assert conf.is_file and conf.user == "root" and conf.group == "root" and conf.mode == 0o644
    assert first["path"] == CONF
    assert sysctl_conf(CONF) == applied


def test_sysctl_system_applies_the_persisted_file(sysctl_system_reload, applied):
    """Persistence, not only the runtime write: keys moved away come back from the file."""
    reload = sysctl_system_reload(applied)
    assert set(PREPARED) <= set(reload["nudged"])
    assert "Applying %s" % CONF in reload["output"]
    assert reload["after"] == applied


def test_later_runs_changed_nothing(results):
    for run in ("converge-2", "check"):
        result = results(run)["__host_sysctl"]
        assert result["changed"] is False, "%s: changed_keys %s, diff %s" % (run, result["changed_keys"], result.get("diff"))
        assert result["changed_keys"] == []


def test_the_container_shares_this_machines_kernel(read_sysctl):
    """The scenario plays a host only if its writes reach the kernel: the host-wide keys read
    inside equal this machine's own."""
    for key in ("vm.swappiness", "kernel.numa_balancing", "net.core.rmem_max"):
        with open("/proc/sys/" + key.replace(".", "/")) as handle:
            assert read_sysctl(key) == " ".join(handle.read().split()), key
