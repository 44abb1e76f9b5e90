"""memlock_info against a fake /proc of a container: PID 1, a serving unit, whose job it is."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import memlock_info as mi
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import proc_cgroups
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils.hw.test_rlimit import LIMITS_8M

UNLIMITED = LIMITS_8M.replace("Max locked memory         8388608              8388608",
                              "Max locked memory         unlimited            unlimited")
SOFT_64K = LIMITS_8M.replace("Max locked memory         8388608              8388608",
                             "Max locked memory         65536                unlimited")


def proc(pid, ppid, cgroup, limits, comm):
    return {"proc/%d/stat" % pid: "%d (%s) S %d %d 0\n" % (pid, comm, ppid, pid),
            "proc/%d/cgroup" % pid: cgroup, "proc/%d/limits" % pid: limits, "proc/%d/comm" % pid: comm + "\n"}


def container(tmp_path, pid1_limits, vllm_limits):
    files = {"run/systemd/system": None}
    files.update(proc(1, 0, "0::/init.scope\n", pid1_limits, "systemd"))
    files.update(proc(40, 1, "0::/system.slice/systemd-journald.service\n", pid1_limits, "systemd-journal"))
    # vllm.service: the main process and a worker it forked (hybrid v1 lines as in podman here)
    files.update(proc(321, 1, "1:name=systemd:/system.slice/vllm.service\n0::/system.slice/vllm.service\n",
                      vllm_limits, "python3"))
    files.update(proc(322, 321, "1:name=systemd:/system.slice/vllm.service\n0::/system.slice/vllm.service\n",
                      vllm_limits, "python3"))
    write_tree(tmp_path, files)
    return mi.Paths(str(tmp_path))


def test_all_unlimited(tmp_path):
    paths = container(tmp_path, UNLIMITED, UNLIMITED)
    result = mi.run({"units": ["vllm"]}, paths=paths)
    assert result["ok"] is True and result["host_limit_ok"] is True and result["findings"] == []
    assert result["units"]["vllm.service"]["pid"] == 321
    assert result["pid1"] == {"pid": 1, "source": "PID 1", "found": True, "comm": "systemd", "soft": "unlimited",
                              "hard": "unlimited", "covers_want": True, "hard_covers_want": True}
    assert result["systemd"] is True and result["changed"] is False
    assert result["msg"] == ("memlock limits cover the wanted unlimited: PID 1 (PID 1, systemd) soft unlimited, "
                             "hard unlimited; vllm.service (PID 321, python3) soft unlimited, hard unlimited")


def test_host_did_not_raise_the_limit(tmp_path):
    paths = container(tmp_path, LIMITS_8M, LIMITS_8M)
    result = mi.run({"units": ["vllm.service"]}, paths=paths)
    assert result["host_limit_ok"] is False and result["ok"] is False
    assert result["findings"][0] == (
        "the host did not raise this container's memlock limit: PID 1 (systemd) has a hard limit of 8388608, "
        "below the wanted unlimited, and nothing inside a container can raise it. On the host, set the "
        "container's lxc.prlimit.memlock (gpufleet.tuning.lxc_memlock, run by the gpufleet.tuning.host role) "
        "or start it with --ulimit memlock=-1:-1 (podman/docker), then restart the container")
    assert result["findings"][1] == ("vllm.service (PID 321, python3) runs with a memlock limit of 8388608 "
                                     "(soft) / 8388608 (hard), capped by the host's limit")
    assert result["units"]["vllm.service"]["restart_would_raise"] is False
    assert result["restart_required"] is False


def test_unit_needs_a_restart(tmp_path):
    paths = container(tmp_path, UNLIMITED, SOFT_64K)
    result = mi.run({"units": ["vllm.service"]}, paths=paths)
    assert result["host_limit_ok"] is True and result["ok"] is False
    assert result["findings"] == ["vllm.service (PID 321, python3) runs with a memlock limit of 65536 (soft) / "
                                  "unlimited (hard), below the unlimited it can have: restart it so it starts "
                                  "with its LimitMEMLOCK"]
    assert result["units"]["vllm.service"]["restart_would_raise"] is True
    assert result["restart_required"] is True


def test_restart_pays_off_below_a_raised_but_finite_ceiling(tmp_path):
    # the host gave 16 MiB; the service still runs with systemd's old default of 8 MiB
    ceiling_16m = LIMITS_8M.replace("Max locked memory         8388608              8388608",
                                    "Max locked memory         16777216             16777216")
    paths = container(tmp_path, ceiling_16m, LIMITS_8M)
    result = mi.run({"units": ["vllm.service"]}, paths=paths)
    assert result["host_limit_ok"] is False
    assert result["units"]["vllm.service"]["restart_would_raise"] is True
    assert result["findings"][1] == ("vllm.service (PID 321, python3) runs with a memlock limit of 8388608 (soft) "
                                     "/ 8388608 (hard), below the 16777216 it can have: restart it so it starts "
                                     "with its LimitMEMLOCK")


def test_numeric_want_and_missing_unit(tmp_path):
    paths = container(tmp_path, LIMITS_8M, LIMITS_8M)
    result = mi.run({"want": 8388608, "units": ["absent.service"], "pids": [1, 40, 999]}, paths=paths)
    assert result["host_limit_ok"] is True and result["want"] == "8388608"
    assert result["findings"] == ["absent.service has no running process to check (is it started?)",
                                  "PID 999 does not exist"]
    assert result["units"]["absent.service"]["found"] is False


def test_no_pid1_read(tmp_path):
    paths = container(tmp_path, LIMITS_8M, UNLIMITED)
    result = mi.run({"pids": [], "units": ["vllm"]}, paths=paths)
    assert result["pid1"] is None and result["host_limit_ok"] is None and result["ok"] is True


@pytest.mark.parametrize("params, message", [
    ({"want": "64G"}, "want: '64G' is not a limit"),
    ({"want": True}, "want: True is not a limit"),
    ({"pids": [0]}, "pids: 0 is not a process ID"),
    ({"units": ["../etc/passwd"]}, "is not a systemd unit name"),
    ({"units": ["a b"]}, "is not a systemd unit name"),
])
def test_bad_input(tmp_path, params, message):
    with pytest.raises(ModuleFailure, match=message.replace("(", r"\(")):
        mi.run(params, paths=mi.Paths(str(tmp_path)))


def test_unit_match_is_a_whole_path_component(tmp_path):
    write_tree(tmp_path, proc(7, 1, "0::/system.slice/vllm.service-helper.scope\n", LIMITS_8M, "x"))
    assert mi.unit_processes("vllm.service", str(tmp_path / "proc")) == {}
    assert proc_cgroups.members(lambda p: True, str(tmp_path / "nowhere")) == {}


def test_reads_this_machine():
    result = mi.run({})
    assert result["pid1"]["found"] is True and result["pid1"]["hard"]


def test_read_only_so_changes_is_always_empty(tmp_path):
    paths = container(tmp_path, LIMITS_8M, SOFT_64K)
    for check_mode in (False, True):
        result = mi.run({"units": ["vllm"]}, check_mode=check_mode, paths=paths)
        assert result["ok"] is False and result["changed"] is False and result["changes"] == []


def test_paths_under_a_root():
    assert (mi.Paths().proc, mi.Paths().run) == ("/proc", "/run")
    assert (mi.Paths("/t").proc, mi.Paths("/t").run) == ("/t/proc", "/t/run")


def test_a_garbled_limits_file_fails_naming_it(tmp_path):
    paths = container(tmp_path, "nonsense\n", UNLIMITED)
    with pytest.raises(ModuleFailure) as exc:
        mi.run({}, paths=paths)
    assert exc.value.message.startswith("cannot read the limits: %s/proc/1/limits: " % tmp_path)
