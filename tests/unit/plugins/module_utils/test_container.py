from ansible_collections.gpufleet.tuning.plugins.module_utils import container

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

    class RO(object):
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
