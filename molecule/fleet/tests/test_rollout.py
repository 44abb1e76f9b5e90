# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/rollout.yml, playbooks/revert.yml and --tags verify across the simulated fleet.

The tests run in file order and share the fleet; each leaves it reverted for the next. Hosts'
states are read with scripts/harness/fleet snapshot (sysctls, idle states, cpufreq, every file
under /etc, /usr/local, /boot and /var/lib/gpufleet-tuning with size, mode, owner and mtime, and
/etc/pve's files with their content). Faults are real: something on the canary resets a setting
right after the tuning made it (as a package's own sysctl file would), so its verification finds
the drift and the rollout reverts what it had changed; a Proxmox lock line in a guest's config
(``lock: backup``, as vzdump leaves it) with host_lxc_memlock_on_locked=fail makes the tuning
refuse its host before it writes anything; a host whose sshd is stopped is unreachable.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import subprocess

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY",
                         os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
SCENARIO = os.path.join(PROJECT, "molecule", "fleet")
HOSTS = ["fleet-h%d" % n for n in range(1, 7)]
GUESTS = ["fleet-g101", "fleet-g102"]
LOCKED = ("fleet-h2", "/etc/pve/lxc/101.conf")
# Where the record lives, and the files of it: left out of "back as before" comparisons (the
# record stays, emptied, after a revert).
RECORD_DIR = "/var/lib/gpufleet-tuning"
# The guests' hosts, their stand-in model server, the memlock limit they start with (create.yml)
# and the one the rollout gives them (vars/rollout.yml): 8 MiB, or this machine's hard limit
# where that is lower (a guest cannot start with more than the podman that starts it has).
# Fixed rather than the hard limit itself, so that machines whose runner has an unlimited hard
# limit run the same case as the others; "unlimited" is the modules' unit tests' case.
GUEST_HOSTS = {"fleet-g101": "fleet-h2", "fleet-g102": "fleet-h4"}
SERVING = "fleet-serving.service"
STOCK_MEMLOCK = "65536"
_HARD = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
CEILING = str(8 << 20 if _HARD == resource.RLIM_INFINITY else min(_HARD, 8 << 20))
RUN_DIR = os.path.join(PROJECT, ".cache", "fleet", "run")


@pytest.fixture(scope="module")
def inventory(pytestconfig):
    return pytestconfig.option.ansible_inventory


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    return tmp_path_factory.mktemp("fleet-artifacts")


def playbook(inventory, artifacts, name, *args):
    """ansible-playbook playbooks/NAME with the fleet's rollout variables; (rc, output)."""
    argv = ["ansible-playbook", "-i", inventory, os.path.join(PROJECT, "playbooks", name),
            "-e", "@" + os.path.join(SCENARIO, "vars", "rollout.yml"),
            "-e", "gpufleet_artifacts=%s" % artifacts] + list(args)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(PROJECT, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", GPUFLEET_FLEET_MEMLOCK=CEILING)
    cfg = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "ansible.cfg")
    if os.path.isfile(cfg):
        env["ANSIBLE_CONFIG"] = cfg
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          cwd=PROJECT, env=env, check=False, timeout=1200)
    # The whole output beside the reports, for a failing run; the end of it in pytest's report.
    logs = sorted(glob.glob(os.path.join(str(artifacts), "run-*.log")))
    with open(os.path.join(str(artifacts), "run-%02d-%s.log" % (len(logs) + 1, name)), "w") as handle:
        handle.write(proc.stdout)
    print(proc.stdout[-6000:])
    return proc.returncode, proc.stdout


def snapshot(name):
    proc = subprocess.run([os.path.join(PROJECT, "scripts", "harness", "fleet"), "snapshot", name],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True)
    return json.loads(proc.stdout)


def fleet_state():
    return dict((name, snapshot(name)) for name in HOSTS + GUESTS)


def without_times(state):
    """The state without mtimes and the record's own folder: what a revert must put back."""
    out = json.loads(json.dumps(state))
    files = out.get("node_state", {}).get("files", {})
    for path in list(files):
        if path.startswith(RECORD_DIR):
            del files[path]
        elif isinstance(files[path], list):
            files[path] = files[path][:4]
    return out


def differences(a, b, where=""):
    """The paths where two snapshots differ, with both values: what an assertion shows."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += differences(a.get(key, "<absent>"), b.get(key, "<absent>"), "%s/%s" % (where, key))
        return out
    return [] if a == b else ["%s: %r -> %r" % (where, a, b)]


def assert_same(before, after, name):
    found = differences(before, after)
    assert not found, "%s differs: %s" % (name, "; ".join(found[:20]))


def podman(*args):
    return subprocess.run(["podman"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=True).stdout


def memlock(name, pid="1"):
    """(soft, hard) locked-memory limit of a process of the container, as /proc shows it."""
    if pid != "1":
        pid = podman("exec", name, "systemctl", "show", "-p", "MainPID", "--value", pid).strip()
    for line in podman("exec", name, "cat", "/proc/%s/limits" % pid).splitlines():
        if line.startswith("Max locked memory"):
            return tuple(line.split()[3:5])
    raise AssertionError("no memlock line for %s pid %s" % (name, pid))


def pct_log(host):
    """The reboots the host's pct asked the harness for (scripts/harness/fleet pct-serve)."""
    path = os.path.join(RUN_DIR, "pct-%s.jsonl" % host)
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def checks(report, name):
    return dict((c["name"], c) for c in report["hosts"][name]["checks"])


def latest_report(artifacts, run_id):
    with open(os.path.join(str(artifacts), "rollout-%s.json" % run_id)) as handle:
        return json.load(handle)


def statuses(report, names):
    return [report["hosts"][name]["status"] for name in names]


def recap_changed(output, name):
    for line in output.splitlines():
        if line.startswith(name + " ") and "changed=" in line:
            return int(line.split("changed=")[1].split()[0])
    raise AssertionError("no recap line for %s" % name)


@pytest.fixture(scope="module")
def before():
    return fleet_state()


def lock(on):
    """Add (or drop) ``lock: backup`` in the guest's config, as vzdump does while it backs the
    guest up; written in place with python (sed -i would chmod its copy, which /etc/pve refuses)."""
    host, path = LOCKED
    script = ("import sys\n"
              "path, on = sys.argv[1], sys.argv[2] == 'on'\n"
              "lines = [l for l in open(path).read().splitlines(True) if l != 'lock: backup\\n']\n"
              "if on:\n"
              "    lines.insert([l.startswith('hostname:') for l in lines].index(True) + 1, 'lock: backup\\n')\n"
              "open(path, 'w').write(''.join(lines))\n")
    podman("exec", host, "python3", "-c", script, path, "on" if on else "off")


# Waits until the record on the node says this rollout applied its changes (the end of the tuning
# call), then sets net.ipv4.tcp_rmem back to the value it had before, once: a setting lost right
# after the tuning, which the verification that follows must find. Polled every 10 ms and
# written straight to /proc/sys: the verification's read-back is a fraction of a second after
# the tuning call, and the fault must land in between on a fast machine too.
RESET_AFTER_TUNING = (
    "import time\n"
    "mark = '\"last_run\": \"%(run)s\"'\n"
    "while True:\n"
    "    try:\n"
    "        if mark in open('/var/lib/gpufleet-tuning/state.json').read():\n"
    "            break\n"
    "    except OSError:\n"
    "        pass\n"
    "    time.sleep(0.01)\n"
    "with open('/proc/sys/net/ipv4/tcp_rmem', 'w') as handle:\n"
    "    handle.write('%(value)s')\n")


def test_a_failing_canary_is_reverted_and_no_other_host_is_touched(inventory, artifacts, before):
    stock = before["fleet-h2"]["node_state"]["sysctl"]["net/ipv4/tcp_rmem"]
    podman("exec", "fleet-h2", "systemd-run", "--unit", "gpufleet-test-fault", "--collect", "python3", "-c",
           RESET_AFTER_TUNING % {"run": "canary", "value": " ".join(str(stock).split())})
    try:
        rc, out = playbook(inventory, artifacts, "rollout.yml", "--tags", "runtime", "-e", "gpufleet_run_id=canary",
                           "-e", '{"gpufleet_canary_hosts": ["fleet-h2"]}')
    finally:
        subprocess.run(["podman", "exec", "fleet-h2", "systemctl", "stop", "gpufleet-test-fault"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    assert rc != 0
    report = latest_report(artifacts, "canary")
    assert report["stopped_after_batch"] == 1
    assert report["batches"][0] == ["fleet-h2"]
    h2 = report["hosts"]["fleet-h2"]
    assert h2["status"] == "failed" and h2["reverted"] is True and h2["failure"]["stage"] == "verify", h2
    assert "net.ipv4.tcp_rmem" in h2["failure"]["message"], h2["failure"]
    # What the tuning had changed went back: its sysctls (net.ipv4.tcp_rmem among them) and files.
    restored = dict((r["target"], r) for r in h2["revert"]["restored"])
    assert {"net.core.somaxconn", "net.ipv4.tcp_wmem"} <= set(restored), h2["revert"]
    assert statuses(report, [h for h in HOSTS if h != "fleet-h2"]) == ["untouched"] * 5
    after = fleet_state()
    for name in HOSTS + GUESTS:
        if name != "fleet-h2":
            assert_same(before[name], after[name], name)  # byte for byte, mtimes included
    assert_same(without_times(before["fleet-h2"]), without_times(after["fleet-h2"]), "fleet-h2")


def test_a_failure_in_the_second_batch_keeps_the_first_and_leaves_the_rest(inventory, artifacts, before):
    lock(True)
    try:
        rc, out = playbook(inventory, artifacts, "rollout.yml", "--tags", "runtime", "-e", "gpufleet_run_id=batch2",
                           "-e", "host_lxc_memlock_on_locked=fail")
        assert rc != 0
    finally:
        lock(False)
    report = latest_report(artifacts, "batch2")
    assert report["batches"] == [["fleet-h1"], ["fleet-h2", "fleet-h3"], ["fleet-h4", "fleet-h5"], ["fleet-h6"]]
    assert report["stopped_after_batch"] == 2
    assert statuses(report, HOSTS) == ["tuned", "failed", "tuned", "untouched", "untouched", "untouched"]
    assert report["hosts"]["fleet-h1"]["verified"] is True and report["hosts"]["fleet-h2"]["reverted"] is True
    # The LXC part refuses the locked guest before it writes its config, and stops h2 naming the
    # part; the parts before it had applied and recorded their changes, and the rollout's rescue
    # put them back (the node is as it was, below).
    h2 = report["hosts"]["fleet-h2"]
    assert h2["failure"]["stage"] == "tune" and "lock" in h2["failure"]["message"], h2["failure"]
    assert h2["failure"]["task"] == "Locked-memory limit of this host's LXC containers", h2["failure"]
    assert h2["changes"] and not [c for c in h2["changes"] if c["area"] == "lxc_memlock"], h2
    restored = set(r["target"] for r in h2["revert"]["restored"])
    changed_sysctls = set(c["target"] for c in h2["changes"] if c["area"] == "sysctl" and c["kind"] == "value")
    assert changed_sysctls and changed_sysctls <= restored, (changed_sysctls, h2["revert"])
    after = fleet_state()
    for name in ("fleet-h4", "fleet-h5", "fleet-h6", "fleet-g102"):
        assert_same(before[name], after[name], name)
    assert_same(without_times(before["fleet-h2"]), without_times(after["fleet-h2"]), "fleet-h2")
    assert after["fleet-h1"]["node_state"]["sysctl"] != before["fleet-h1"]["node_state"]["sysctl"]  # still tuned
    with open(os.path.join(str(artifacts), "rollout-batch2.md")) as handle:
        page = handle.read()
    assert "fleet-h2" in page and "fleet-h6" in page and "batch 2" in page.lower()
    rc, out = playbook(inventory, artifacts, "revert.yml")
    assert rc == 0
    back = fleet_state()
    for name in HOSTS + GUESTS:
        assert_same(without_times(before[name]), without_times(back[name]), name)


def test_a_host_unreachable_mid_rollout_counts_against_its_batch(inventory, artifacts, before):
    # sshd stopped and its sessions killed: refused at once, even over a live ControlMaster.
    podman("exec", "fleet-h5", "sh", "-c", "systemctl stop ssh; systemctl kill ssh")
    try:
        rc, out = playbook(inventory, artifacts, "rollout.yml", "--tags", "runtime", "-e", "gpufleet_run_id=lost",
                           "-e", "gpufleet_lxc_restart_ok=false")
    finally:
        podman("exec", "fleet-h5", "systemctl", "start", "ssh")
    assert rc != 0
    report = latest_report(artifacts, "lost")
    assert report["stopped_after_batch"] == 3
    assert statuses(report, HOSTS) == ["tuned", "tuned", "tuned", "tuned", "unreachable", "untouched"]
    assert report["hosts"]["fleet-h5"]["failure"]["stage"] == "reachable"
    # Restarts not allowed here: the guests (their hosts were tuned) are tuned, their restart for
    # the higher ceiling is reported pending, and no guest was restarted.
    for guest in GUESTS:
        restart = checks(report, guest)["lxc_restart"]
        assert restart["status"] == "skipped" and "restart pending" in restart["message"], restart
        assert memlock(guest) == (STOCK_MEMLOCK, STOCK_MEMLOCK)
    assert pct_log("fleet-h2") == [] and pct_log("fleet-h4") == []
    rc, out = playbook(inventory, artifacts, "revert.yml")
    assert rc == 0


def test_full_rollout_revert_and_idempotent_rollout_again(inventory, artifacts, before):
    rc, out = playbook(inventory, artifacts, "rollout.yml", "--tags", "runtime", "-e", "gpufleet_run_id=full")
    assert rc == 0
    report = latest_report(artifacts, "full")
    assert report["stopped_after_batch"] is None
    assert statuses(report, HOSTS + GUESTS) == ["tuned"] * 8
    # Each guest was drained, restarted once by its host's pct with the new ceiling, and serves
    # again with it.
    assert CEILING != STOCK_MEMLOCK, "this machine's memlock hard limit is the guests' stock one"
    for guest, host in sorted(GUEST_HOSTS.items()):
        reboots = pct_log(host)
        assert [(r["guest"], r["rc"], r["memlock"]) for r in reboots] == [(guest, 0, CEILING)], reboots
        assert SERVING not in reboots[0]["active_services"], "not drained: %s" % reboots[0]
        assert "ssh.service" in reboots[0]["active_services"], reboots[0]
        assert memlock(guest) == (CEILING, CEILING)
        assert podman("exec", guest, "systemctl", "is-active", SERVING).strip() == "active"
        assert memlock(guest, SERVING) == (CEILING, CEILING)
        found = checks(report, guest)
        assert [found[name]["status"] for name in ("lxc_drain", "lxc_restart", "serving")] == ["passed"] * 3, found
        assert SERVING + " stopped (was active)" in found["lxc_drain"]["message"]
        assert [c for c in report["hosts"][guest]["changes"] if c["kind"] == "service"] == [{
            "area": "lxc_memlock", "kind": "service", "target": "container %s on %s" % (guest[-3:], host),
            "before": "running (memlock %s)" % STOCK_MEMLOCK, "after": "restarted (memlock %s)" % CEILING}]
    rc, out = playbook(inventory, artifacts, "revert.yml")
    assert rc == 0
    back = fleet_state()
    for name in HOSTS + GUESTS:
        assert_same(without_times(before[name]), without_times(back[name]), name)
    rc, out = playbook(inventory, artifacts, "revert.yml")
    assert rc == 0 and all(recap_changed(out, name) == 0 for name in HOSTS + GUESTS)
    rc, out = playbook(inventory, artifacts, "rollout.yml", "--tags", "runtime", "-e", "gpufleet_run_id=again")
    assert rc == 0 and statuses(latest_report(artifacts, "again"), HOSTS) == ["tuned"] * 6
    rc, out = playbook(inventory, artifacts, "rollout.yml", "--tags", "runtime", "-e", "gpufleet_run_id=idem")
    assert rc == 0
    assert statuses(latest_report(artifacts, "idem"), HOSTS + GUESTS) == ["unchanged"] * 8
    assert all(recap_changed(out, name) == 0 for name in HOSTS + GUESTS)
    # The guests already run with the ceiling: no further restart.
    assert len(pct_log("fleet-h2")) == 1 and len(pct_log("fleet-h4")) == 1


def test_drift_names_the_host_and_the_setting(inventory, artifacts, before):
    podman("exec", "fleet-h3", "sysctl", "-w", "net.ipv4.tcp_rmem=4096 87380 6291456")
    rc, out = playbook(inventory, artifacts, "tune.yml", "--tags", "verify")
    assert rc != 0
    with open(os.path.join(str(artifacts), "fleet-drift.json")) as handle:
        drift = json.load(handle)
    assert [name for name in sorted(drift) if drift[name]] == ["fleet-h3"]
    assert [d["target"] for d in drift["fleet-h3"]] == ["net.ipv4.tcp_rmem"]
    assert "fleet-h3" in out and "net.ipv4.tcp_rmem no longer holds" in out
    rc, out = playbook(inventory, artifacts, "revert.yml")
    assert rc == 0


# The health gate (docs/health.md): fleet-h5's GPU reports a remapped-row failure through NVML
# (the fake libnvidia-ml the harness mounts, molecule/fleet/files/fake_nvml.c), fleet-h6's kernel
# log holds an XID 79 ("fallen off the bus"). Both are quarantined before anything is tuned or
# benchmarked, with their actions; the others are tuned; nobody's tuning is reverted.
SICK_GPU = "0000:41:00.0"
XID_79 = ("3,900,4123456789,-;NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.\n"
          " SUBSYSTEM=pci\n DEVICE=+pci:0000:41:00.0\n")


def harness(*args):
    return subprocess.run([os.path.join(PROJECT, "scripts", "harness", "fleet")] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=True).stdout


def test_sick_hosts_are_quarantined_with_their_action_and_the_others_tuned(inventory, artifacts, tmp_path):
    kmsg = tmp_path / "kmsg-h6"
    kmsg.write_text("6,0,0,-;Linux version 6.1.0 (fleet-h6)\n" + XID_79)
    try:
        harness("gpu-plant", "fleet-h5", SICK_GPU, "name=NVIDIA_H100_80GB_HBM3", "remap_failure=1",
                "remapped_uncorrectable=3")
        harness("kmsg", "fleet-h6", str(kmsg))
        # after planting: the fake library's config (/etc/gpufleet) is the harness's, not a change
        sick_before = dict((name, snapshot(name)) for name in ("fleet-h5", "fleet-h6"))
        rc, out = playbook(inventory, artifacts, "rollout.yml", "--tags", "runtime", "-e", "gpufleet_run_id=sick")
        assert rc == 0, "a quarantined host (not the canary) does not stop the rollout"
        report = latest_report(artifacts, "sick")
        assert report["stopped_after_batch"] is None
        assert statuses(report, HOSTS) == ["tuned", "tuned", "tuned", "tuned", "quarantined", "quarantined"]
        assert statuses(report, GUESTS) == ["tuned", "tuned"]
        h5, h6 = report["hosts"]["fleet-h5"], report["hosts"]["fleet-h6"]
        assert h5["health"]["actions"] == ["rma"] and h6["health"]["actions"] == ["reboot"]
        assert [f["rule"] for f in h5["health"]["findings"]] == ["gpu_remap_failure"]
        assert "GPU 0 (%s)" % SICK_GPU in h5["health"]["findings"][0]["item"]
        assert [f["rule"] for f in h6["health"]["findings"]] == ["xid_events"]
        assert "GPU has fallen off the bus." in h6["health"]["findings"][0]["message"]
        for name in ("fleet-h5", "fleet-h6"):
            assert report["hosts"][name]["changes"] == [] and report["hosts"][name]["reverted"] is False
            assert checks(report, name)["health"]["status"] == "failed"
        # the verdict files and the reports say why
        for name, rule in (("fleet-h5", "gpu_remap_failure"), ("fleet-h6", "xid_events")):
            with open(os.path.join(str(artifacts), name, "health.json")) as handle:
                verdict = json.load(handle)
            assert verdict["status"] == "quarantined" and verdict["findings"][0]["rule"] == rule
        with open(os.path.join(str(artifacts), "fleet-h1", "health.json")) as handle:
            assert json.load(handle)["status"] == "healthy"
        with open(os.path.join(str(artifacts), "rollout-sick.xml")) as handle:
            junit = handle.read()
        assert junit.count('type="health"') == 2 and "rma" in junit and "reboot" in junit
        with open(os.path.join(str(artifacts), "rollout-sick.md")) as handle:
            markdown = handle.read()
        assert markdown.index("## Health") < markdown.index("fleet-h1")
        with open(os.path.join(str(artifacts), "index.html")) as handle:
            page = handle.read()
        assert "quarantined" in page and "a row remapping failed" in page and "fallen off the bus" in page
        # nothing was changed on the sick hosts, nothing reverted anywhere
        for name in ("fleet-h5", "fleet-h6"):
            assert_same(without_times(sick_before[name]), without_times(snapshot(name)), name)
        assert not [name for name in HOSTS if checks(report, name).get("revert")]
    finally:
        harness("gpu-clear", "fleet-h5")
        harness("kmsg", "fleet-h6", "--reset")
        rc, out = playbook(inventory, artifacts, "revert.yml")
        assert rc == 0
