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


def test_stale_dockerenv_on_a_vm_is_not_a_container(tmp_path):
    # The H200 machines: identity uid map, PID 1 environ unreadable, a leftover /.dockerenv.
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "root/.dockerenv": ""})
    found = container.detect(proc, root)
    assert found["detected"] is False
    assert found["ignored"] == ["/.dockerenv exists"]


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
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY, "root/run/.containerenv": ""})
    found = container.detect(proc, root)
    assert found["detected"] is True and found["kind"] == "podman"


def test_systemd_marker_and_cgroup(tmp_path):
    proc, root = _tree(tmp_path, {"proc/self/uid_map": IDENTITY,
                                  "proc/1/cgroup": "0::/lxc.payload.101/init.scope\n",
                                  "root/run/systemd/container": "lxc\n"})
    found = container.detect(proc, root)
    assert found["kind"] == "lxc"
    assert len(found["evidence"]) == 2


def test_uid_map_unreadable_is_unknown(tmp_path):
    assert container.uid_map_is_identity(str(tmp_path)) is None
