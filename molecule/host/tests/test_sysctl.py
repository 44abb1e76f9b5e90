# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's sysctl profile in a privileged container playing the GPU host.

The profile's values are written out here, not read from the role: a wrong default in the
role must fail these tests. What the run must leave is derived, not assumed: the buffer keys
are raise-only (each field the larger of the kernel's value and the profile's), so the
expected values come from the starting values prepare_sysctl.yml set and read back
(results/<instance>/prepare-sysctl.json) and the profile below. The container shares this
machine's kernel for every key outside its network namespace, so the values read inside are
the CI VM's own, whichever kernel it runs.
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
    "net.ipv4.tcp_rmem": "4096 131072 134217728",
    "net.ipv4.tcp_wmem": "4096 65536 134217728",
}
# The profile's keys on the module's default raise_only list (the role keeps that default).
RAISE_ONLY = frozenset(["net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"])
# The one key a kernel may refuse outright (no PMU); the role's default on_unwritable=skip
# leaves it out of the file and says why.
MAY_BE_REFUSED = "kernel.nmi_watchdog"


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
    """What the profile must leave on this kernel: its value, or for a raise-only key the
    larger of the starting value and its value, field by field."""
    found = dict(PROFILE)
    for key in RAISE_ONLY:
        found[key] = raised(prepared[key], PROFILE[key])[0]
    return found


@pytest.fixture(scope="module")
def first(results):
    result = results("converge-1")["__host_sysctl_profile"]
    assert not result.get("failed"), result.get("msg")
    return result


@pytest.fixture(scope="module")
def applied(first, expected):
    """The expected values less a key this kernel refused (reported in skipped_keys)."""
    assert set(first["skipped_keys"]) <= set([MAY_BE_REFUSED]), first["skipped_keys"]
    return dict((k, v) for k, v in expected.items() if k not in first["skipped_keys"])


def test_prepare_exercises_raise_only_both_ways(prepared):
    """The scenario proves something only if some field starts above the profile (must be
    kept) and some below it (must be raised)."""
    kept = [key for key in RAISE_ONLY if raised(prepared[key], PROFILE[key])[1]]
    lifted = [key for key in RAISE_ONLY if raised(prepared[key], PROFILE[key])[0] != prepared[key]]
    assert kept and lifted, (kept, lifted)


def test_profile_is_live(read_sysctl, applied):
    assert dict((key, read_sysctl(key)) for key in applied) == applied


def test_first_converge_wrote_what_differed_and_read_the_starting_values(first, applied, prepared):
    assert dict((key, first["before"][key]) for key in prepared) == prepared
    # Every prepared key whose starting value differs from what the profile leaves was
    # written, and no other; nmi_watchdog too only where the kernel allows it and it was
    # not 0 already.
    must_write = sorted(key for key in prepared if prepared[key] != applied[key])
    assert sorted(set(first["changed_keys"]) - set([MAY_BE_REFUSED])) == must_write
    assert dict((key, first["after"][key]) for key in applied) == applied


def test_fields_the_kernel_had_higher_were_kept_and_reported(first, prepared):
    kept = {}
    for key in sorted(RAISE_ONLY):
        value, fields = raised(prepared[key], PROFILE[key])
        if fields:
            kept[key] = {"wanted": PROFILE[key], "effective": value, "fields": fields}
    assert first["kept_higher"] == kept


def test_persisted_file_holds_the_effective_values(host, sysctl_conf, applied, first):
    """The file holds what is live, so the next boot does not lower a kept field either."""
    conf = host.file(CONF)
    assert conf.is_file and conf.user == "root" and conf.group == "root" and conf.mode == 0o644
    assert first["path"] == CONF
    assert sysctl_conf(CONF) == applied


def test_sysctl_system_applies_the_persisted_file(sysctl_system_reload, applied, prepared):
    """Persistence, not only the runtime write: keys moved away come back from the file."""
    reload = sysctl_system_reload(applied)
    assert set(prepared) <= set(reload["nudged"])
    assert "Applying %s" % CONF in reload["output"]
    assert reload["after"] == applied


def test_later_runs_changed_nothing(results):
    for run in ("converge-2", "check"):
        result = results(run)["__host_sysctl_profile"]
        assert result["changed"] is False, "%s: changed_keys %s, diff %s" % (run, result["changed_keys"], result.get("diff"))
        assert result["changed_keys"] == []


def test_the_container_shares_this_machines_kernel(read_sysctl):
    """The scenario plays a host only if its writes reach the kernel: the host-wide keys read
    inside equal this machine's own."""
    for key in ("vm.swappiness", "kernel.numa_balancing", "net.core.rmem_max"):
        with open("/proc/sys/" + key.replace(".", "/")) as handle:
            assert read_sysctl(key) == " ".join(handle.read().split()), key
