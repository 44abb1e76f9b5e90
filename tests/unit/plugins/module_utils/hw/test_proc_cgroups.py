"""Processes by cgroup from a fake /proc: v1, v2 and hybrid lines, parents, the top of a set."""

import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import proc_cgroups
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree

HYBRID = ("12:memory:/lxc/101\n"
          "1:name=systemd:/lxc/101/ns/init.scope\n"
          "0::/lxc/101/ns/init.scope\n")


def process(pid, ppid, cgroup, comm="proc"):
    return {"proc/%d/stat" % pid: "%d (%s) S %d %d 0 0\n" % (pid, comm, ppid, pid),
            "proc/%d/cgroup" % pid: cgroup}


def proc(tmp_path, *processes):
    files = {"proc/self/stat": "1 (x) S 0\n", "proc/sys": None, "proc/cpuinfo": "processor: 0\n"}
    for entry in processes:
        files.update(entry)
    write_tree(tmp_path, files)
    return str(tmp_path / "proc")


def test_cgroup_paths_of_every_hierarchy_line(tmp_path):
    root = proc(tmp_path, process(7, 1, HYBRID + "\n"))
    assert proc_cgroups.cgroup_paths(7, root) == ["/lxc/101", "/lxc/101/ns/init.scope", "/lxc/101/ns/init.scope"]
    # a gone process, and a line that is not hierarchy:controllers:path
    assert proc_cgroups.cgroup_paths(8, root) == []
    write_tree(tmp_path, {"proc/9/cgroup": "garbage\n0::/system.slice/a:b.service\n"})
    assert proc_cgroups.cgroup_paths(9, root) == ["/system.slice/a:b.service"]


def test_parent_pid_reads_past_a_command_name_with_spaces_and_parentheses(tmp_path):
    root = proc(tmp_path, process(10, 4, "0::/\n", comm="odd) S 99 (name"))
    assert proc_cgroups.parent_pid(10, root) == 4
    write_tree(tmp_path, {"proc/11/stat": "11 (no-closing S 1", "proc/12/stat": "12 (short) S\n",
                          "proc/13/stat": "13 (x) S notanumber 13\n"})
    assert proc_cgroups.parent_pid(11, root) is None
    assert proc_cgroups.parent_pid(12, root) is None
    assert proc_cgroups.parent_pid(13, root) is None
    assert proc_cgroups.parent_pid(404, root) is None


def test_members_and_their_parents(tmp_path):
    root = proc(tmp_path,
                process(1, 0, "0::/init.scope\n", "systemd"),
                process(500, 1, "0::/lxc.monitor/101\n", "lxc-start"),
                process(501, 500, HYBRID, "systemd"),
                process(620, 501, "0::/lxc/101/system.slice/vllm.service\n", "python3"),
                process(700, 1, "0::/lxc/1010/ns/init.scope\n", "other"))
    in_101 = proc_cgroups.members(lambda path: path == "/lxc/101" or path.startswith("/lxc/101/"), root)
    assert in_101 == {501: 500, 620: 501}
    assert proc_cgroups.top(in_101) == 501  # the container's init: its parent is the monitor
    assert proc_cgroups.members(lambda path: False, root) == {}


def test_members_of_a_proc_that_is_not_there(tmp_path):
    assert proc_cgroups.members(lambda path: True, str(tmp_path / "nowhere")) == {}


def test_a_process_that_vanished_between_listing_and_reading_is_left_out(tmp_path):
    root = proc(tmp_path, process(30, 1, "0::/system.slice/a.service\n"))
    os.makedirs(os.path.join(root, "31"))  # listed, but its files are gone
    assert proc_cgroups.members(lambda path: "a.service" in path or path == "/", root) == {30: 1}


def test_top_of_a_set():
    assert proc_cgroups.top({}) is None
    assert proc_cgroups.top({321: 1, 322: 321, 323: 322}) == 321
    # two members whose parents are outside (a service that double-forked): the lowest PID
    assert proc_cgroups.top({900: 1, 450: 2, 451: 450}) == 450
    # an unknown parent (stat unreadable) counts as outside
    assert proc_cgroups.top({40: None, 41: 40}) == 40
    # every parent inside: no top
    assert proc_cgroups.top({5: 6, 6: 5}) is None
