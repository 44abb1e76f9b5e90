# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host role's cpu_power task on every shape of CI machine, in privileged podman containers.

Each platform of the scenario is a privileged systemd container, so the module detects a
container (PID 1 has container=podman) and must read without refusing, write nothing that
needs no change, and leave the boot unit alone unless host_cpu_power_allow_in_container:

- gpufleet-gpuhost: this machine's real /sys/devices/system/cpu, whichever shape it has. With
  no idle states the task is skipped; with haltpoll's (POLL 0 us, "haltpoll idle" 1 us) it is
  ok and unchanged. Nothing may be written here: it is this machine's own kernel. A CI machine
  with a state above the bound makes converge fail with the refusal (the scenario cannot test
  that shape on the real tree without disabling the machine's own idle states).
- gpufleet-cpuidle-haltpoll: a fake tree of haltpoll's states (prepare_cpu_power.yml): ok,
  unchanged, not a byte written (checked against the checksums prepare recorded); a check-mode
  call with a bound that would disable a state is refused, naming it.
- gpufleet-cpuidle-deep: a fake intel_idle/intel_pstate tree with C6 at 170 us, converged with
  host_cpu_power_allow_in_container (a host the detection gets wrong): C6 disabled on every
  online CPU, governor and EPP set, the boot unit installed; idempotent; and the unit, run by
  the container's systemd, puts back a state and a governor changed by hand.

The expected values are written out here, not read from the role: a wrong default in the role
must fail these tests. The verifier's ``host`` is gpufleet-gpuhost (molecule.yml); the other
two are reached with testinfra.get_host, and their saved results read by name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import testinfra

BOUND = 10
CPU = "/sys/devices/system/cpu"
UNIT = "gpufleet-cpu-power.service"
UNIT_PATH = "/etc/systemd/system/" + UNIT
WANTS_LINK = "/etc/systemd/system/multi-user.target.wants/" + UNIT
SCRIPT = "/usr/local/sbin/gpufleet-cpu-power"
SUMS = "/root/gpufleet-fake-cpu.sha256"
PODMAN_EVIDENCE = "PID 1 environment has container=podman"
REAL, HALTPOLL, DEEP = "gpufleet-gpuhost", "gpufleet-cpuidle-haltpoll", "gpufleet-cpuidle-deep"
RUNS = ("converge-1", "converge-2", "check")


def load(name, run):
    """The cpu_power result saved for platform ``name`` by save_results.yml."""
    path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "results", name, run + ".json")
    assert os.path.exists(path), "%s is missing: did the %s step run?" % (path, run)
    with open(path) as handle:
        return json.load(handle)["__host_cpu_power"]


@pytest.fixture(scope="module")
def platform():
    return dict((name, testinfra.get_host("podman://" + name)) for name in (REAL, HALTPOLL, DEEP))


def cpu_list(text):
    cpus = []
    for part in (text or "").strip().split(","):
        if part:
            first, _sep, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def live_states(host):
    """{(cpu, index): {"name", "latency", "disable"}} of every CPU that shows idle states."""
    run = host.run("grep -H . %s/cpu[0-9]*/cpuidle/state[0-9]*/name %s/cpu[0-9]*/cpuidle/state[0-9]*/latency "
                   "%s/cpu[0-9]*/cpuidle/state[0-9]*/disable" % (CPU, CPU, CPU))
    found = {}
    for line in run.stdout.splitlines():
        match = re.match(r"^%s/cpu(\d+)/cpuidle/state(\d+)/(\w+):(.*)$" % re.escape(CPU), line)
        assert match, "unexpected line %r" % line
        cpu, index, attr, value = int(match.group(1)), int(match.group(2)), match.group(3), match.group(4)
        found.setdefault((cpu, index), {})[attr] = value if attr == "name" else int(value)
    return found


def assert_in_container(result):
    assert result["container"]["detected"] is True, result["container"]
    assert PODMAN_EVIDENCE in result["container"]["evidence"], result["container"]


def assert_no_unit(host):
    for path in (UNIT_PATH, WANTS_LINK, SCRIPT):
        assert not host.file(path).exists, "%s was written inside the container" % path


def assert_later_runs_unchanged(name):
    for run in RUNS[1:]:
        result = load(name, run)
        assert not result.get("failed"), "%s: %s" % (run, result.get("msg"))
        assert result["changed"] is False, "%s: %s" % (run, result.get("diff"))


def adhoc_cpu_power(name, args):
    """One check-mode cpu_power call on platform ``name`` through the scenario's inventory;
    returns the module's result (the json callback's record of it)."""
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_NOCOLOR="1")
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], ".collections"))
    proc = subprocess.run([ansible, name, "-i", os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "inventory"),
                           "-m", "gpufleet.tuning.cpu_power", "-a", json.dumps(args), "--check"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=False, timeout=300)
    try:
        report = json.loads(proc.stdout)
        return report["plays"][0]["tasks"][0]["hosts"][name]
    except (ValueError, LookupError) as exc:
        raise AssertionError("no result for %s (%s): rc %d\n%s\n%s"
                             % (name, exc, proc.returncode, proc.stdout, proc.stderr))


# --- gpufleet-gpuhost: this machine's own tree --------------------------------------------------

def test_real_tree_read_and_reported_nothing_written(platform):
    host = platform[REAL]
    first = load(REAL, "converge-1")
    assert not first.get("failed"), first.get("msg")
    assert_in_container(first)
    assert first["changed"] is False, first.get("diff")
    assert first["persisted"] is False
    states = live_states(host)
    driver = host.file(CPU + "/cpuidle/current_driver").content_string.strip() \
        if host.file(CPU + "/cpuidle/current_driver").exists else None
    assert first["idle_driver"] == driver
    if not states:
        # the CI machines without cpuidle: every part not applicable, the task skipped
        assert first["skipped"] is True, first
        assert "no CPU idle states in sysfs" in first["not_applicable"]["idle_states"]
        assert "boot unit" not in first["skipped_keys"]  # nothing was to be written
        return
    above = ["cpu%d/state%d (%s, %dus)" % (c, i, s["name"], s["latency"])
             for (c, i), s in sorted(states.items()) if s["latency"] > BOUND]
    assert above == [], ("this CI machine has idle states above %dus; converge must have refused "
                         "(it did not): %s" % (BOUND, above))
    # the CI machines with haltpoll: ok, unchanged, and the boot unit left alone
    assert [row["action"] for row in first["states"]] == ["keep"] * len(first["states"])
    assert first["skipped_keys"]["boot unit"].startswith("inside a container (" + PODMAN_EVIDENCE)
    disabled_now = sorted((c, i) for (c, i), s in states.items() if s["disable"])
    disabled_before = sorted((c, int(row["state"][5:])) for row in first["states"]
                             for c in cpu_list("" if row["disabled_before"] == "none" else row["disabled_before"]))
    assert disabled_now == disabled_before, "the real idle states changed"


def test_real_tree_got_no_boot_unit(platform):
    assert_no_unit(platform[REAL])


def test_real_tree_later_runs_changed_nothing():
    assert_later_runs_unchanged(REAL)


# --- gpufleet-cpuidle-haltpoll: the CI machines' states, within the bound ------------------------

def test_haltpoll_ok_unchanged_and_reported(platform):
    host = platform[HALTPOLL]
    first = load(HALTPOLL, "converge-1")
    assert not first.get("failed"), first.get("msg")
    assert_in_container(first)
    online = host.file(CPU + "/online").content_string.strip()
    assert first["changed"] is False, first.get("diff")
    assert (first["idle_driver"], first["idle_governor"], first["online_cpus"]) == ("haltpoll", "haltpoll", online)
    assert [(r["name"], r["latency_us"], r["action"], r["cpus"], r["disabled_after"]) for r in first["states"]] == [
        ("POLL", 0, "keep", online, "none"), ("haltpoll idle", 1, "keep", online, "none")]
    assert first["persisted"] is False
    unit = first["skipped_keys"]["boot unit"]
    assert unit.startswith("inside a container (" + PODMAN_EVIDENCE) and "would write %s" % SCRIPT in unit, unit
    assert "no cpufreq policies" in first["not_applicable"]["governor"]
    assert "skipped" not in first  # idle states applied (nothing to change), not skipped


def test_haltpoll_tree_not_a_byte_written(platform):
    host = platform[HALTPOLL]
    check = host.run("sha256sum --check --quiet %s" % SUMS)
    assert check.rc == 0, "the fake tree changed: %s%s" % (check.stdout, check.stderr)
    assert_no_unit(host)


def test_haltpoll_later_runs_changed_nothing():
    assert_later_runs_unchanged(HALTPOLL)


def test_haltpoll_refuses_a_needed_write_naming_it(platform):
    """A bound that would disable "haltpoll idle": refused inside the container, in check mode
    too, with the state and CPUs named, and nothing written."""
    host = platform[HALTPOLL]
    online = host.file(CPU + "/online").content_string.strip()
    result = adhoc_cpu_power(HALTPOLL, {"max_idle_latency_us": 0})
    assert result.get("failed") is True, result
    assert result["msg"].startswith("refusing to disable state1 (haltpoll idle, 1us) on CPUs %s from inside a "
                                    "container (%s" % (online, PODMAN_EVIDENCE)), result["msg"]
    assert "allow_in_container=true" in result["msg"]
    assert host.run("sha256sum --check --quiet %s" % SUMS).rc == 0


# --- gpufleet-cpuidle-deep: C6 above the bound, allow_in_container -------------------------------

def test_deep_first_converge_disabled_c6_and_set_cpufreq(platform):
    host = platform[DEEP]
    first = load(DEEP, "converge-1")
    assert not first.get("failed"), first.get("msg")
    assert_in_container(first)  # detected, and written anyway: allow_in_container
    online = host.file(CPU + "/online").content_string.strip()
    offline = host.file(CPU + "/offline").content_string.strip()
    assert first["changed"] is True
    assert [(r["name"], r["latency_us"], r["action"], r["cpus"], r["disabled_before"], r["disabled_after"])
            for r in first["states"]] == [
        ("POLL", 0, "keep", online, "none", "none"), ("C1", 1, "keep", online, "none", "none"),
        ("C1E", 2, "keep", online, "none", "none"), ("C6", 170, "disable", online, "none", online)]
    assert first["governor_before"] == {"powersave": online} and first["governor_after"] == {"performance": online}
    assert first["epp_before"] == {"balance_performance": online} and first["epp_after"] == {"performance": online}
    assert first["persisted"] is True and "boot unit" not in first["skipped_keys"]
    # the offline CPU and its inactive policy: reported, left alone
    assert "offline CPUs %s" % offline in first["skipped_keys"]
    assert first["skipped_keys"]["cpufreq policy%s" % offline].startswith(
        "inactive (all CPUs of the policy are offline, CPUs %s); left alone" % offline)


def test_deep_live_state(platform):
    host = platform[DEEP]
    online = cpu_list(host.file(CPU + "/online").content_string)
    offline = cpu_list(host.file(CPU + "/offline").content_string)
    states = live_states(host)
    for (cpu, index), state in sorted(states.items()):
        want = 1 if cpu in online and state["latency"] > BOUND else 0
        assert state["disable"] == want, "cpu%d/state%d (%s): disable %d" % (cpu, index, state["name"], state["disable"])
    for cpu in online:
        policy = "%s/cpufreq/policy%d/" % (CPU, cpu)
        assert host.file(policy + "scaling_governor").content_string.strip() == "performance"
        assert host.file(policy + "energy_performance_preference").content_string.strip() == "performance"
    for cpu in offline:
        assert host.file("%s/cpufreq/policy%d/scaling_governor" % (CPU, cpu)).content_string.strip() == "powersave"


def test_deep_boot_unit_installed_and_enabled(platform):
    host = platform[DEEP]
    assert host.file(UNIT_PATH).is_file and host.file(UNIT_PATH).mode == 0o644
    assert host.file(WANTS_LINK).linked_to == UNIT_PATH
    script = host.file(SCRIPT)
    assert script.is_file and script.mode == 0o755
    assert "max_idle_latency_us='%d'" % BOUND in script.content_string
    assert "governor='performance'" in script.content_string and "epp='performance'" in script.content_string
    host.check_output("systemctl daemon-reload")
    assert host.run("systemctl is-enabled %s" % UNIT).stdout.strip() == "enabled"


def test_deep_later_runs_changed_nothing():
    assert_later_runs_unchanged(DEEP)


def test_deep_boot_unit_puts_back_what_was_changed_by_hand(platform):
    """What a boot does to the settings (the container cannot reboot): C6 enabled again on one
    CPU and the governor back at powersave; the unit, started by systemd, restores both."""
    host = platform[DEEP]
    c6 = "%s/cpu0/cpuidle/state3/disable" % CPU
    governor = "%s/cpufreq/policy0/scaling_governor" % CPU
    cursor = host.check_output("journalctl -n 0 --show-cursor").split("cursor: ", 1)[1].strip()
    host.check_output("echo 0 > %s && echo powersave > %s" % (c6, governor))
    host.check_output("systemctl daemon-reload && systemctl restart %s" % UNIT)
    assert host.file(c6).content_string.strip() == "1"
    assert host.file(governor).content_string.strip() == "performance"
    show = host.check_output("systemctl show -p ActiveState -p Result -p ExecMainStatus %s" % UNIT)
    assert sorted(show.splitlines()) == ["ActiveState=active", "ExecMainStatus=0", "Result=success"]
    journal = host.check_output("journalctl -o cat -u %s --after-cursor '%s'" % (UNIT, cursor))
    assert ("gpufleet-cpu-power: disabled 1 and enabled 0 idle state(s), set the governor of 1 and the EPP of 0 "
            "cpufreq polic(ies)") in journal, journal
