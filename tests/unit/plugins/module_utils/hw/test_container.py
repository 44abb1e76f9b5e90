from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container

from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree

IDENTITY = "         0          0 4294967295\n"


def _tree(tmp_path, files):
    write_tree(tmp_path, files)
    return str(tmp_path / "proc"), str(tmp_path / "root")


def test_bare_host(tmp_path):
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/1/cgroup": "0::/init.scope\n",
                                  "root/run": None})
    found = container.detect(proc, root)
    assert found == {"detected": False, "kind": None, "evidence": [], "ignored": []}


def test_stale_markers_on_a_vm_are_not_a_container(tmp_path):
    # What the H200 machines showed: identity uid map, PID 1 (process_api) environ unreadable,
    # cgroup 0::/process_api/core, a leftover /.dockerenv and /run/systemd/container = docker.
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/1/cgroup": "0::/process_api/core\n",
                                  "root/.dockerenv": "", "root/run/systemd/container": "docker\n"})
    found = container.detect(proc, root)
    assert found["detected"] is False
    assert found["kind"] is None
    assert found["ignored"] == ["/run/systemd/container says docker", "/.dockerenv exists"]


def test_unprivileged_lxc(tmp_path):
    proc, root = _tree(tmp_path, {
        "proc/self/uid_map": "         0     100000      65536\n",
        "proc/1/environ": "PATH=/sbin\0container=lxc\0",
        "root/run": None,
    })
    found = container.detect(proc, root)
    assert found["detected"] is True
    assert found["kind"] == "lxc"
    assert any("partial uid range" in e for e in found["evidence"])


def test_privileged_podman(tmp_path):
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/1/environ": "container=podman\0",
                                  "root/run/.containerenv": ""})
    found = container.detect(proc, root)
    assert found["detected"] is True and found["kind"] == "podman"
    assert found["evidence"] == ["PID 1 environment has container=podman", "/run/.containerenv exists"]


def test_marker_alone_is_ignored(tmp_path):
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "root/run/.containerenv": ""})
    found = container.detect(proc, root)
    assert found["detected"] is False and found["ignored"] == ["/run/.containerenv exists"]


def test_read_only_proc_sys_is_evidence(tmp_path, monkeypatch):
    import os
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/sys": None, "root/.dockerenv": ""})
    real = os.statvfs

    class RO:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda p: RO() if p.endswith("/proc/sys") else real(p))
    found = container.detect(proc, root)
    assert found["detected"] is True
    assert found["evidence"] == ["/proc/sys is mounted read-only", "/.dockerenv exists"]
    assert found["kind"] == "docker"


def test_cgroup_payload_and_systemd_marker(tmp_path):
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY,
                                  "proc/1/cgroup": "0::/lxc.payload.101/init.scope\n",
                                  "root/run/systemd/container": "lxc\n"})
    found = container.detect(proc, root)
    assert found["kind"] == "lxc"
    assert found["evidence"] == ["PID 1 cgroup path names a lxc payload", "/run/systemd/container says lxc"]


def test_uid_map_unreadable_is_unknown(tmp_path):
    assert container.uid_map_is_identity(str(tmp_path)) is None


# --- the machines this collection meets, as each shows itself -----------------------------------

def test_h200_vm_with_every_stale_marker_and_a_readable_environ(tmp_path):
    # The H200 VMs: full root, identity uid_map, /proc/sys read-write, PID 1 a VM agent (not
    # systemd) whose environment carries no container= variable, and an image that left
    # /.dockerenv, /run/.containerenv and /run/systemd/container behind. Ansible's facts call
    # it a docker guest from /.dockerenv alone; here it must stay a host.
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/1/cgroup": "0::/process_api/core\n",
                                  "proc/1/environ": "PATH=/usr/bin\0HOME=/root\0", "proc/sys": None,
                                  "root/.dockerenv": "", "root/run/.containerenv": "",
                                  "root/run/systemd/container": "docker\n"})
    found = container.detect(proc, root)
    assert found == {"detected": False, "kind": None, "evidence": [],
                     "ignored": ["/run/systemd/container says docker", "/run/.containerenv exists",
                                 "/.dockerenv exists"]}
    assert container.guarded(found, False) is False


def test_h200_vm_whose_pid1_environ_cannot_be_read(tmp_path):
    # Unreadable (a directory stands in for EACCES here, since the tests may run as root)
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/1/environ": None,
                                  "proc/1/cgroup": "0::/process_api/core\n", "root/.dockerenv": ""})
    assert container.detect(proc, root)["detected"] is False


def test_privileged_podman_on_cgroup_v1_with_the_host_cgroup_namespace(tmp_path):
    # The molecule host scenario on the CI VM: podman --privileged with runc and cgroupfs,
    # identity uid_map, /proc/sys writable; PID 1 (systemd) has container=podman.
    cid = "4f1c2d3e4b5a" * 5
    proc, root = _tree(tmp_path, {
        "proc/self/uid_map": IDENTITY,
        "proc/1/environ": "container=podman\0TERM=xterm\0",
        "proc/1/cgroup": "12:name=systemd:/libpod_parent/libpod-%s\n0::/libpod_parent/libpod-%s\n" % (cid, cid),
        "root/run/.containerenv": "engine=\"podman-4.3.1\"\nprivileged=1\n",
    })
    found = container.detect(proc, root)
    assert found["detected"] is True and found["kind"] == "podman"
    assert found["evidence"] == ["PID 1 environment has container=podman", "PID 1 cgroup path names a podman payload",
                                 "/run/.containerenv exists"]
    assert container.guarded(found, False) is True
    assert container.guarded(found, True) is False


def test_privileged_podman_with_a_private_cgroup_namespace(tmp_path):
    # cgroup v2 default: PID 1 sees "0::/" and the environment alone tells
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/1/environ": "container=podman\0",
                                  "proc/1/cgroup": "0::/\n", "root/run": None})
    found = container.detect(proc, root)
    assert found["detected"] is True and found["evidence"] == ["PID 1 environment has container=podman"]


def test_unprivileged_docker(tmp_path, monkeypatch):
    import os
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "proc/sys": None,
                                  "proc/1/cgroup": "0::/docker/%s\n" % ("ab12" * 16), "root/.dockerenv": ""})
    real = os.statvfs

    class RO:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda p: RO() if p.endswith("/proc/sys") else real(p))
    found = container.detect(proc, root)
    assert found["kind"] == "docker"
    assert found["evidence"] == ["PID 1 cgroup path names a docker payload", "/proc/sys is mounted read-only",
                                 "/.dockerenv exists"]


def test_refusal_and_persistence_texts_name_the_evidence():
    found = {"detected": True, "kind": "podman", "evidence": ["PID 1 environment has container=podman"],
             "ignored": []}
    message = container.refusal(["disable state3 (C6, 170us) on CPUs 0-3", "set scaling_governor performance on "
                                 "policy0 (CPUs 0)"], found, "CPU idle states and cpufreq")
    assert message == (
        "refusing to disable state3 (C6, 170us) on CPUs 0-3; set scaling_governor performance on policy0 (CPUs 0) "
        "from inside a container (PID 1 environment has container=podman): CPU idle states and cpufreq belong to "
        "the host, so run this on the host (gpufleet.tuning.host role); nothing was changed. Set "
        "allow_in_container=true only where the detection is wrong and this is the host")
    note = container.persistence_left_alone(found, "a udev rule", "write /etc/udev/rules.d/x.rules")
    assert note.startswith("inside a container (PID 1 environment has container=podman): a udev rule written here "
                           "acts when the container starts, not when the host boots")
    assert "(the plan would write /etc/udev/rules.d/x.rules)" in note


def test_this_machine_is_judged_without_error():
    """Whatever runs the tests (the CI VM, a container, a laptop): detect() answers, and a
    marker file alone never makes it a container."""
    found = container.detect()
    assert set(found) == {"detected", "kind", "evidence", "ignored"}
    if not found["detected"]:
        assert found["kind"] is None and found["evidence"] == []
