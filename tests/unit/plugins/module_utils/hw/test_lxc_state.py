"""Running-container detection from a fake /proc and /sys/fs/cgroup, and the tool fallback."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import lxc_state
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree


def proc_entry(pid, ppid, cgroup, comm="sh"):
    return {
        "proc/%d/stat" % pid: "%d (%s) S %d %d 0 0 -1 4194560 0 0 0 0\n" % (pid, comm, ppid, pid),
        "proc/%d/cgroup" % pid: cgroup,
    }


def host_tree():
    files = {}
    files.update(proc_entry(1, 0, "0::/init.scope\n", "systemd"))
    # Proxmox, cgroup v2: monitor outside, payload under lxc/<vmid>/ns
    files.update(proc_entry(500, 1, "0::/lxc.monitor/101\n", "lxc-start"))
    files.update(proc_entry(501, 500, "0::/lxc/101/ns/init.scope\n", "systemd"))
    files.update(proc_entry(502, 501, "0::/lxc/101/ns/system.slice/vllm.service\n", "python3 (vllm)"))
    # a container whose vmid starts with the same digits
    files.update(proc_entry(600, 1, "0::/lxc/1010/ns/init.scope\n"))
    # container 102 runs a nested container named 101: not the host's 101
    files.update(proc_entry(700, 1, "0::/lxc/102/ns/init.scope\n"))
    files.update(proc_entry(701, 700, "0::/lxc/102/ns/lxc.payload.101\n"))
    # plain LXC 5 on a hybrid v1/v2 host, as seen here: every hierarchy names the payload
    files.update(proc_entry(800, 1, "0::/lxc.monitor.web\n", "lxc-start"))
    files.update(proc_entry(801, 800, "9:name=systemd:/lxc.payload.web\n4:memory:/lxc.payload.web\n"
                                      "0::/lxc.payload.web\n"))
    files["proc/self/uid_map"] = "0 0 4294967295\n"
    return files


@pytest.mark.parametrize("path, name", [
    ("/lxc/101/ns/init.scope", "101"),
    ("/lxc.payload.web", "web"),
    ("/lxc.payload.web/system.slice", "web"),
    ("/lxc.monitor/101", None),
    ("/lxc.monitor.web", None),
    ("/lxc/102/ns/lxc.payload.101", "102"),
    ("/system.slice/ssh.service", None),
    ("/lxc", None),
    ("/lxc.payload.", None),
])
def test_container_of_cgroup_path(path, name):
    assert lxc_state.container_of_cgroup_path(path) == name


def test_payload_processes_and_init(tmp_path):
    write_tree(tmp_path, host_tree())
    proc = str(tmp_path / "proc")
    members = lxc_state.payload_processes("101", proc)
    assert members == {501: 500, 502: 501}
    assert lxc_state.init_pid(members) == 501
    assert lxc_state.payload_processes("web", proc) == {801: 800}
    assert lxc_state.payload_processes("10", proc) == {}
    assert lxc_state.init_pid({}) is None


def test_payloads_of_every_container_in_one_pass(tmp_path):
    write_tree(tmp_path, host_tree())
    proc, cg = str(tmp_path / "proc"), str(tmp_path / "cg")
    found = lxc_state.payloads(proc)
    # the same members payload_processes finds for each name, the nested 101 counted as 102's
    assert found == {"101": {501: 500, 502: 501}, "1010": {600: 1}, "102": {700: 1, 701: 700},
                     "web": {801: 800}}
    for name in found:
        assert found[name] == lxc_state.payload_processes(name, proc)
    assert lxc_state.payloads(str(tmp_path / "no-proc")) == {}
    # container_state given them reads nothing more, and answers as without them
    for name in ("101", "web", "103"):
        assert (lxc_state.container_state(name, proc, cg, known_payloads=found)
                == lxc_state.container_state(name, proc, cg))


def test_state_running_from_proc(tmp_path):
    write_tree(tmp_path, host_tree())
    state = lxc_state.container_state("101", str(tmp_path / "proc"), str(tmp_path / "cg"))
    assert state == {"running": True, "init_pid": 501,
                     "evidence": "2 process(es) in the payload cgroup of 101 (init PID 501)"}


def test_state_running_from_cgroup_dirs(tmp_path):
    # processes hidden from this /proc view, but the cgroup tree shows them
    write_tree(tmp_path, {"proc/1/cgroup": "0::/init.scope\n",
                          "cg/lxc/105/cgroup.procs": "",
                          "cg/lxc/105/ns/init.scope/cgroup.procs": "4242\n",
                          "cg/memory/lxc.payload.db/cgroup.procs": "77\n",
                          "cg/lxc.payload.idle/cgroup.procs": ""})
    proc, cg = str(tmp_path / "proc"), str(tmp_path / "cg")
    state = lxc_state.container_state("105", proc, cg)
    assert state["running"] is True and state["init_pid"] is None
    assert state["evidence"] == "cgroup %s/lxc/105 has processes" % cg
    assert lxc_state.container_state("db", proc, cg)["running"] is True  # a v1 hierarchy
    assert lxc_state.container_state("idle", proc, cg)["running"] is False  # empty cgroup left behind


class FakeTools:
    def __init__(self, have, output, rc=0):
        self.have = have
        self.output = output
        self.rc = rc
        self.calls = []

    def which(self, name):
        return "/usr/sbin/%s" % name if name in self.have else None

    def run(self, argv):
        self.calls.append(argv)
        return commands.CommandResult(argv, self.rc, self.output, "")


def test_state_stopped_asks_pct_only_when_kernel_shows_nothing(tmp_path):
    write_tree(tmp_path, host_tree())
    proc, cg = str(tmp_path / "proc"), str(tmp_path / "cg")
    tools = FakeTools({"pct", "lxc-info"}, "status: stopped\n")
    state = lxc_state.container_state("103", proc, cg, tools=tools, proxmox=True)
    assert state == {"running": False, "init_pid": None, "evidence": "/usr/sbin/pct status 103 says stopped"}
    assert tools.calls == [["/usr/sbin/pct", "status", "103"]]
    tools = FakeTools({"pct"}, "status: running\n")
    lxc_state.container_state("101", proc, cg, tools=tools, proxmox=True)
    assert tools.calls == []  # the kernel already answered


def test_state_lxc_info_with_custom_cgroup_layout(tmp_path):
    write_tree(tmp_path, host_tree())
    tools = FakeTools({"lxc-info"}, "Name:           odd\nState:          RUNNING\nPID:            9001\n")
    state = lxc_state.container_state("odd", str(tmp_path / "proc"), str(tmp_path / "cg"), tools=tools,
                                      lxcpath="/srv/lxc")
    assert state == {"running": True, "init_pid": 9001,
                     "evidence": "/usr/sbin/lxc-info -P /srv/lxc -n odd says RUNNING"}


def test_state_tool_failure_and_no_tools(tmp_path):
    write_tree(tmp_path, host_tree())
    proc, cg = str(tmp_path / "proc"), str(tmp_path / "cg")
    tools = FakeTools({"lxc-info"}, "odd doesn't exist\n", rc=1)
    state = lxc_state.container_state("odd", proc, cg, tools=tools)
    assert state["running"] is False
    assert "lxc.payload.odd" in state["evidence"] and "gave no state (exit status 1)" in state["evidence"]
    assert lxc_state.container_state("odd", proc, cg, tools=FakeTools(set(), ""))["running"] is False
    assert lxc_state.container_state(None, proc, cg)["running"] is None
