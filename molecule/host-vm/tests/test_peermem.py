"""host-vm: gpufleet.tuning.nvidia_peermem on a real kernel with a real modprobe and no NVIDIA driver.

The converge needs nothing beyond the host role with its defaults: host_peermem_state=auto and
the guest has no RDMA device, so converge reports needed=false and changes nothing; idempotence
and the check-mode pass see no change either. The direct module calls below run after the
scenario's reboot and leave nothing behind: every one of them must change nothing.

What the guest shows (scripts/harness/vm, Debian bookworm kernel): /proc/modules exists, no
nvidia or ib_core is loaded, /sys/class/infiniband has no device, the distribution's
modules.symbols does not list ib_register_peer_memory_client, and the real modprobe says
"Module nvidia_peermem not found in directory /lib/modules/<release>". kmod's own modprobe
(with -n, a dry run) is the independent oracle for the last fact.
"""

import pytest

MODULE = "gpufleet.tuning.nvidia_peermem"
LOAD_FILE = "/etc/modules-load.d/gpufleet-nvidia-peermem.conf"
OPTIONS_FILE = "/etc/modprobe.d/gpufleet-nvidia-peermem.conf"
SYMBOL = "ib_register_peer_memory_client"


@pytest.fixture(scope="module")
def release(host):
    return host.check_output("uname -r").strip()


def _loaded_modules(host):
    return sorted(line.split()[0] for line in host.file("/proc/modules").content_string.splitlines())


def _assert_nothing_persisted(host):
    assert not host.file(LOAD_FILE).exists, "%s was written" % LOAD_FILE
    assert not host.file(OPTIONS_FILE).exists, "%s was written" % OPTIONS_FILE


def test_converge_reports_not_needed_without_rdma_devices(results):
    for run in ("converge-1", "converge-2", "check"):
        result = results(run)["__host_nvidia_peermem"]
        assert not result.get("failed"), "%s: %s" % (run, result.get("msg"))
        assert result["changed"] is False, run
        assert result["needed"] is False and result["loaded"] is False, run
        assert "no RDMA device under /sys/class/infiniband" in result["reason"], run
        assert result["rdma_devices"] == [] and result["persisted"] is False, run
        assert result["plan"] == [], run


def test_nothing_persisted_or_loaded_after_the_reboot(host, rebooted):
    _assert_nothing_persisted(host)
    assert "nvidia_peermem" not in _loaded_modules(host)


def test_the_real_modprobe_cannot_find_it(host, release):
    """The fact the module predicts without calling modprobe: no .ko in the module tree."""
    probe = host.run("modprobe -n nvidia_peermem")
    assert probe.rc != 0
    assert "Module nvidia_peermem not found in directory /lib/modules/%s" % release in probe.stderr


def test_require_true_fails_saying_the_driver_is_not_installed(host, release, run_module):
    modules_before = _loaded_modules(host)
    result = run_module(MODULE, {"state": "present", "require": True})
    assert result.get("failed") is True
    msg = result["msg"]
    assert "the NVIDIA driver is not installed" in msg
    assert "no nvidia.ko exists for kernel %s" % release in msg
    assert "nvidia_peermem.ko is not installed for kernel %s" % release in msg
    assert "nothing was changed" in msg
    assert result["driver_loaded"] is False and result["driver_version"] is None
    assert result["ko_path"] is None and result["kernel_release"] == release
    _assert_nothing_persisted(host)
    assert _loaded_modules(host) == modules_before


def test_require_false_reports_needed_false(host, release):
    modules_before = _loaded_modules(host)
    for check in (True, False):
        result = host.ansible(MODULE, "state=present require=false", check=check)
        assert result["changed"] is False and result["needed"] is False, check
        assert "the NVIDIA driver is not installed" in result["reason"], check
        assert result["persisted"] is False and result["plan"] == [], check
    _assert_nothing_persisted(host)
    assert _loaded_modules(host) == modules_before


def test_facts_read_from_the_real_kernel_match_the_guest(host, release):
    result = host.ansible(MODULE, "state=present require=false", check=True)
    in_kallsyms = host.run("grep -c ' %s$' /proc/kallsyms" % SYMBOL).stdout.strip()
    in_index = host.run("grep -c 'symbol:%s ' /lib/modules/%s/modules.symbols" % (SYMBOL, release)).stdout.strip()
    assert in_kallsyms == "0" and in_index == "0"
    assert result["peer_symbol"] == {"name": SYMBOL, "loaded": False, "module": None, "installed_in": []}
    assert result["ib_core_loaded"] == ("ib_core" in _loaded_modules(host))
    assert result["rdma_devices"] == []
    assert result["container"]["detected"] is False


def test_absent_on_a_node_without_it_changes_nothing(host):
    result = host.ansible(MODULE, "state=absent", check=False)
    assert result["changed"] is False and result["loaded"] is False and result["plan"] == []
    _assert_nothing_persisted(host)
