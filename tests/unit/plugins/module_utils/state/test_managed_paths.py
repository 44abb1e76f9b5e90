"""Every path the tuning modules record is one a revert accepts, and nothing else is.

Two halves. The real engines, run through their recorder on fake trees with the options that move
their files (a profile's name and priority, a driver options file name, a grub.d override, Proxmox
and plain LXC configs under a configured lxcpath, persistence on and off, a masked sysctl.d file),
record only items the state layer accepts on load (nothing refused), and a revert of that record
puts every file back. Then tables: the allow-list of state/managed_paths.py and state/checks.py
path by path and value by value, and its names against the modules' own constants.
"""

import base64
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power as cp
from ansible_collections.gpufleet.tuning.plugins.module_utils import kernel_cmdline as bc
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock as lm
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options as do
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_peermem as pm
from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_acs as pa
from ansible_collections.gpufleet.tuning.plugins.module_utils import pcie_maxreadreq as mrrs
from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_launch as sl
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile as sp
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import cpu_power_boot
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import checks
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import managed_paths as mp
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store
from ansible_collections.gpufleet.tuning.tests.unit import acs_fake as af
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import lxc_fixtures as fx
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import test_cpu_power as cpu_test
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import test_kernel_cmdline as cmdline_test
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import test_pcie_maxreadreq as mrrs_test
from ansible_collections.gpufleet.tuning.tests.unit.plugins.modules import test_pcie_acs as acs_test


# --------------------------------------------------------------------------- the real engines

def _files(tree):
    """The files, links and modes of a snapshot that a revert is answerable for: not the record
    itself, not the fake kernel's files (/proc, /sys: values, read back with their newline folded),
    not directories and not the fake tools and their logs."""
    skip = ("proc/", "sys/", "var/lib/gpufleet-tuning/state.json", "fakebin", "bin/", "calls.log", ".count-")
    kept = {}
    for key, value in tree.items():
        path = key[:-len(" (mode)")] if key.endswith(" (mode)") else key
        if not path.startswith(skip) and not str(tree.get(path)).startswith("<dir"):
            kept[key] = value
    return kept


def _record_then_revert(root, engines, tools=None):
    """Run each of ``engines`` (``engine(check) -> result``, one run each) through the recorder
    (state_path under ``root``); check that the record holds no item it refuses on load, revert it,
    and check that the revert refused nothing and put every file back. Returns the node paths of
    the files recorded."""
    untouched = _files(snapshot(root))
    paths = state_items.Paths(str(root))
    state_path = str(root / "var/lib/gpufleet-tuning/state.json")
    for run, engine in enumerate(engines):
        recorder.run(engine, False, {"state_path": state_path, "run_id": "r%d" % run}, paths)
    loaded = store.load(state_path, str(root))
    assert loaded["refused"] == {}
    recorded = sorted(mp.node_path(e["target"], str(root)) for e in loaded["items"].values() if e["how"] == "file")
    reverted = tuning_revert.run({"path": state_path}, paths=paths, tools=tools)
    assert reverted["refused"] == [] and reverted["not_restorable"] == []
    assert _files(snapshot(root)) == untouched
    return recorded


def test_sysctl_profile_files_under_any_name_and_priority_and_a_masked_file(tmp_path):
    write_tree(tmp_path, {"proc/sys/vm/swappiness": "60\n", "proc/self/uid_map": "0 0 4294967295\n",
                          "etc/sysctl.d/90-gpufleet-gpu_serving-2.conf": None})
    os.rmdir(str(tmp_path / "etc/sysctl.d/90-gpufleet-gpu_serving-2.conf"))
    os.symlink("/dev/null", str(tmp_path / "etc/sysctl.d/90-gpufleet-gpu_serving-2.conf"))  # masked by hand
    # the masked file is taken over (adopt), then left for another priority, then the values change
    steps = [dict(priority=90, adopt=True), dict(priority=5), dict(priority=5, settings={"vm.swappiness": 20})]

    def engine(step):
        params = dict({"name": "gpu_serving-2", "settings": {"vm.swappiness": 10}}, **step)
        return lambda check: sp.run(params, check, sp.Paths(str(tmp_path)))

    recorded = _record_then_revert(tmp_path, [engine(step) for step in steps])
    assert recorded == ["/etc/sysctl.d/05-gpufleet-gpu_serving-2.conf", "/etc/sysctl.d/90-gpufleet-gpu_serving-2.conf",
                        "/var/lib/gpufleet-tuning/sysctl/gpu_serving-2.json"]
    assert os.readlink(str(tmp_path / "etc/sysctl.d/90-gpufleet-gpu_serving-2.conf")) == "/dev/null"


def test_nvidia_peermem_load_and_options_files_and_the_module(tmp_path, monkeypatch):
    root = tmp_path / "root"
    kf.gpu_node(root, ib_core=True, peer_symbol=True, rdma=("mlx5_0",))
    kf.FakeBin(tmp_path, monkeypatch, root)
    params = dict(state="present", persist=True, params={"peerdirect_support": 1}, require=True, only_with_rdma=False)
    engines = [lambda check: pm.run(params, check, pm.Paths(str(root)), kf.PathCommands())]
    recorded = _record_then_revert(root, engines, tools=kf.PathCommands())
    assert recorded == ["/etc/modprobe.d/gpufleet-nvidia-peermem.conf", "/etc/modules-load.d/gpufleet-nvidia-peermem.conf"]
    assert "nvidia_peermem" not in (root / "proc/modules").read_text()


@pytest.mark.parametrize("filename", [do.DEFAULT_FILENAME, "nvidia-tuning.conf"])
def test_nvidia_driver_options_file_of_any_name(tmp_path, monkeypatch, filename):
    root = tmp_path / "root"
    kf.gpu_node(root)
    write_tree(root, {"proc/stat": "cpu  1 2 3\nbtime 1700000000\nprocesses 42\n"})
    kf.FakeBin(tmp_path, monkeypatch, root, names=("update-initramfs",))
    params = dict(options={"NVreg_EnableMSI": True}, state="present", filename=filename, initramfs="auto",
                  allow_risky=False)
    engines = [lambda check: do.run(params, check, do.Paths(str(root)), kf.PathCommands())]
    assert _record_then_revert(root, engines, tools=kf.PathCommands()) == ["/etc/modprobe.d/" + filename]


@pytest.mark.parametrize("layout, expected", [
    ("grub", ["/etc/default/grub"]),
    ("grub.d", ["/etc/default/grub.d/50-cloudimg-settings.cfg"]),
    ("systemd-boot", ["/etc/kernel/cmdline"]),
])
def test_kernel_cmdline_files_of_every_boot_loader(tmp_path, layout, expected):
    fake = cmdline_test.Fake(tmp_path).tree({"proc/cmdline": cmdline_test.RUNNING,
                                             "proc/cpuinfo": cmdline_test.CPUINFO_AMD, "sys/bus/pci/devices": None})
    if layout == "systemd-boot":
        cmdline_test.pve(fake)
    else:
        fake.tree({"etc/default/grub": cmdline_test.GRUB}).tool("update-grub")
        if layout == "grub.d":
            fake.tree({"etc/default/grub.d/50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1"\n'})
    params = cmdline_test.params(present=["iommu=pt"])
    engines = [lambda check: bc.run(params, check, fake.paths, fake.tools)]
    assert _record_then_revert(tmp_path, engines, tools=fake.tools) == expected


def test_lxc_memlock_proxmox_and_plain_configs_under_a_configured_lxcpath_and_their_backups(tmp_path):
    lxcpath = tmp_path / "srv/containers"
    write_tree(tmp_path, {
        "etc/pve/lxc/101.conf": fx.PVE_PLAIN,
        "etc/lxc/lxc.conf": "lxc.lxcpath = %s\n" % lxcpath,
        "srv/containers/web-1/config": fx.LXC_PLAIN,
        "proc/1/stat": "1 (systemd) S 0 1 0 0\n", "proc/1/cgroup": "0::/init.scope\n", "sys/fs/cgroup": None,
    })
    targets = [dict(vmid=101), dict(name="web-1"), dict(path=str(lxcpath / "web-1/config"), limit="68719476736")]

    def engine(target):
        params = dict(dict(vmid=None, name=None, path=None, limit="unlimited", backup=True), **target)
        return lambda check: lm.run(params, check, lm.Paths(str(tmp_path)))

    recorded = _record_then_revert(tmp_path, [engine(target) for target in targets])
    configs = [p for p in recorded if not p.endswith(".gpufleet.bak")]
    assert configs == ["/etc/pve/lxc/101.conf", "/srv/containers/web-1/config"]
    assert len(recorded) == 5  # each run's backup too, removed again by the revert
    assert not [n for n in os.listdir(str(lxcpath / "web-1")) if n.endswith(".gpufleet.bak")]


def test_pcie_maxreadreq_udev_rule_and_helper(tmp_path):
    write_tree(tmp_path, {"proc/self/uid_map": mrrs_test.IDENTITY, "proc/sys": None})
    mrrs_test.add_device(tmp_path, mrrs_test.GPU1, mrrs_test.gpu_config(class_code=0x030000, devctl=0x5134),
                         driver="nvidia", numa_node=1)
    paths = mrrs_test.make_paths(tmp_path)
    engines = [lambda check: mrrs.run(mrrs_test.params(persist=True), check, paths)]
    assert _record_then_revert(tmp_path, engines) == ["/etc/udev/rules.d/90-gpufleet-pcie-maxreadreq.rules",
                                                      "/usr/local/libexec/gpufleet/pcie-maxreadreq"]


def test_pcie_acs_udev_rule_helper_and_state_file(tmp_path):
    af.switch_node(tmp_path)
    paths = acs_test.make_paths(tmp_path)
    engines = [lambda check: pa.run({}, check, paths)]
    assert _record_then_revert(tmp_path, engines) == ["/etc/udev/rules.d/90-gpufleet-pcie-acs.rules",
                                                      "/usr/local/libexec/gpufleet/pcie-acs",
                                                      "/var/lib/gpufleet-tuning/pcie-acs/state.json"]


def test_cpu_power_boot_script_unit_and_its_enable_link_then_removed(tmp_path):
    cpu_test.cpu_tree(tmp_path)
    paths = cpu_test.make_paths(tmp_path)
    recorded = _record_then_revert(tmp_path, [lambda check: cp.run(cpu_test.params(persist=True), check, paths),
                                              lambda check: cp.run(cpu_test.params(persist=False), check, paths)])
    assert recorded == ["/etc/systemd/system/gpufleet-cpu-power.service",
                        "/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service",
                        "/usr/local/sbin/gpufleet-cpu-power"]


def test_cpu_power_enable_link_found_before_is_put_back(tmp_path):
    """The unit's enable link made by ``systemctl enable`` (absolute) before the module's first run:
    the module makes it relative, the revert puts the absolute one back."""
    cpu_test.cpu_tree(tmp_path)
    paths = cpu_test.make_paths(tmp_path)
    wants = tmp_path / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True)
    os.symlink("/etc/systemd/system/gpufleet-cpu-power.service", str(wants / "gpufleet-cpu-power.service"))
    _record_then_revert(tmp_path, [lambda check: cp.run(cpu_test.params(), check, paths)])
    assert os.readlink(str(wants / "gpufleet-cpu-power.service")) == "/etc/systemd/system/gpufleet-cpu-power.service"


def test_serving_launch_dropins_of_a_service_and_a_template_instance_under_any_name(tmp_path):
    write_tree(tmp_path, {"usr/lib/systemd/system/vllm.service": "[Service]\nExecStart=/usr/bin/vllm serve m\n"})
    argv = ["/usr/bin/vllm", "serve", "m", "--max-num-seqs", "256"]
    steps = [dict(unit="vllm", argv=argv), dict(unit="vllm", argv=argv + ["--enable-prefix-caching"]),
             dict(unit="serve@gpu0", argv=argv, environment={"A": "b c"}, dropin_name="95-gpufleet-tuned.conf")]

    def engine(params):
        return lambda check: sl.run(params, check, sl.Paths(str(tmp_path)))

    assert _record_then_revert(tmp_path, [engine(step) for step in steps]) == [
        "/etc/systemd/system/serve@gpu0.service.d/95-gpufleet-tuned.conf",
        "/etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf"]


# --------------------------------------------------------------------------- the tables

ACCEPTED = [
    ("sysctl", "/etc/sysctl.d/90-gpufleet-inference.conf"),
    ("sysctl", "/etc/sysctl.d/00-gpufleet-a.conf"),
    ("sysctl", "/var/lib/gpufleet-tuning/sysctl/inference.json"),
    ("peermem", "/etc/modules-load.d/gpufleet-nvidia-peermem.conf"),
    ("peermem", "/etc/modprobe.d/gpufleet-nvidia-peermem.conf"),
    ("nvidia_options", "/etc/modprobe.d/zz-gpufleet-nvidia.conf"),
    ("nvidia_options", "/etc/modprobe.d/nvidia.conf"),  # filename: nvidia.conf with adopt
    ("kernel_cmdline", "/etc/default/grub"),
    ("kernel_cmdline", "/etc/default/grub.d/50-cloudimg-settings.cfg"),
    ("kernel_cmdline", "/etc/kernel/cmdline"),
    ("lxc_memlock", "/etc/pve/lxc/101.conf"),
    ("lxc_memlock", "/etc/pve/nodes/pve1/lxc/101.conf"),
    ("lxc_memlock", "/var/lib/lxc/serving/config"),
    ("lxc_memlock", "/srv/lxc/web-1.example/config"),
    ("lxc_memlock", "/etc/pve/lxc/101.conf.20261201-070102.gpufleet.bak"),
    ("lxc_memlock", "/var/lib/lxc/serving/config.20261201-070102-2.gpufleet.bak"),
    ("pcie", "/etc/udev/rules.d/90-gpufleet-pcie-maxreadreq.rules"),
    ("pcie", "/usr/local/libexec/gpufleet/pcie-maxreadreq"),
    ("pcie", "/etc/udev/rules.d/90-gpufleet-pcie-acs.rules"),
    ("pcie", "/usr/local/libexec/gpufleet/pcie-acs"),
    ("pcie", "/var/lib/gpufleet-tuning/pcie-acs/state.json"),
    ("cpu_power", "/usr/local/sbin/gpufleet-cpu-power"),
    ("cpu_power", "/etc/systemd/system/gpufleet-cpu-power.service"),
    ("cpu_power", "/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service"),
    ("container_memlock", "/etc/security/limits.d/90-gpufleet-memlock.conf"),
    ("container_memlock", "/etc/systemd/system.conf.d/90-gpufleet-memlock.conf"),
    ("container_memlock", "/etc/systemd/system/vllm.service.d/90-gpufleet-memlock.conf"),
    ("container_memlock", "/etc/systemd/system/serve@gpu0.service.d/90-gpufleet-memlock.conf"),
    ("serving_launch", "/etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf"),
    ("serving_launch", "/etc/systemd/system/serve@gpu0.service.d/05-gpufleet-a_b-c.conf"),
]

REFUSED = [
    ("sysctl", "/usr/local/bin/x"),
    ("kernel_cmdline", "/etc/cron.d/evil"),
    ("sysctl", "/etc/victim-link"),
    ("sysctl", "/etc/sysctl.d/99-local.conf"),              # not the collection's name
    ("sysctl", "/etc/sysctl.d/90-gpufleet-../../x.conf"),   # not normalized
    ("sysctl", "/etc/sysctl.d/90-gpufleet-Upper.conf"),     # not a profile name
    ("peermem", "/etc/modprobe.d/zz-gpufleet-nvidia.conf"),  # another area's file
    ("nvidia_options", "/etc/modprobe.d/sub/x.conf"),
    ("nvidia_options", "/etc/ld.so.conf.d/x.conf"),
    ("kernel_cmdline", "/etc/default/grub.d/.hidden.cfg"),
    ("kernel_cmdline", "/etc/default/grubby"),
    ("lxc_memlock", "/etc/pve/lxc/abc.conf"),
    ("lxc_memlock", "/root/.ssh/config"),                    # a dot name is no container name
    ("lxc_memlock", "/etc/cron.d/101.conf"),
    ("lxc_memlock", "config"),
    ("lxc_memlock", "/etc/cron.d/x.gpufleet.bak"),
    ("pcie", "/usr/local/libexec/gpufleet/other"),
    ("cpu_power", "/etc/systemd/system/multi-user.target.wants/evil.service"),
    ("container_memlock", "/etc/systemd/system/x.service.d/../../cron.d/90-gpufleet-memlock.conf"),
    ("serving_launch", "/etc/systemd/system/vllm.service.d/50-local.conf"),
    ("serving_launch", "/etc/systemd/system/vllm.socket.d/90-gpufleet-launch.conf"),
    ("serving_launch", "/usr/lib/systemd/system/vllm.service.d/90-gpufleet-launch.conf"),
    ("serving_launch", "/etc/systemd/system/vllm.service.d/90-gpufleet-memlock.conf/x"),
    ("state", "/var/lib/gpufleet-tuning/state.json"),
    ("gpu", "/etc/default/grub"),
]


@pytest.mark.parametrize("area, path", ACCEPTED)
@pytest.mark.parametrize("root", ["/", "/tmp/fake-root"])
def test_every_file_the_modules_write_is_accepted(area, path, root):
    target = path if root == "/" else root + path
    assert checks.target_refusal("file", target, area, root) is None
    text = "lxc.uts.name = c1\n" if area == "lxc_memlock" else "x\n"  # a container config reads as one
    if area == "serving_launch":  # and a launch drop-in as one
        text = sl.render("vllm.service", ["/usr/bin/vllm", "serve", "m"], {}, "")
    before = _content(text, "0755" if "/libexec/" in path or "/sbin/" in path else "0644")
    if path.endswith(".gpufleet.bak"):
        before = None  # a backup did not exist before the module wrote it
    assert checks.refusal("file:" + target, _file_entry(target, area, before), root) is None


@pytest.mark.parametrize("area, path", REFUSED)
def test_any_other_file_is_refused_naming_why(area, path):
    why = checks.target_refusal("file", path, area)
    assert why and (path in why or repr(path) in why or repr(area) in why)


def test_a_path_outside_the_fake_root_is_refused():
    assert checks.target_refusal("file", "/etc/default/grub", "kernel_cmdline", "/tmp/fake-root")


@pytest.mark.parametrize("area, path, target, allowed", [
    ("sysctl", "/etc/sysctl.d/90-gpufleet-a.conf", "/dev/null", True),
    ("sysctl", "/etc/sysctl.d/90-gpufleet-a.conf", "/srv/config/sysctl.d/90-gpufleet-a.conf", True),
    ("sysctl", "/etc/sysctl.d/90-gpufleet-a.conf", "/etc/shadow", False),
    ("peermem", "/etc/modprobe.d/gpufleet-nvidia-peermem.conf", "../../home/u/gpufleet-nvidia-peermem.conf", True),
    ("nvidia_options", "/etc/modprobe.d/zz-gpufleet-nvidia.conf", "/home/user/evil.conf", False),
    ("pcie", "/usr/local/libexec/gpufleet/pcie-maxreadreq", "/dev/null", True),
    ("pcie", "/usr/local/libexec/gpufleet/pcie-maxreadreq", "/home/user/pcie-maxreadreq", False),
    ("cpu_power", "/usr/local/sbin/gpufleet-cpu-power", "/tmp/gpufleet-cpu-power", False),
    ("cpu_power", "/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service",
     "../gpufleet-cpu-power.service", True),
    ("cpu_power", "/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service",
     "/lib/systemd/system/gpufleet-cpu-power.service", True),
    ("cpu_power", "/etc/systemd/system/multi-user.target.wants/gpufleet-cpu-power.service",
     "/tmp/evil.service", False),
    ("kernel_cmdline", "/etc/default/grub", "/srv/config/grub", False),
    ("lxc_memlock", "/etc/pve/lxc/101.conf", "/dev/null", False),
    ("container_memlock", "/etc/security/limits.d/90-gpufleet-memlock.conf", "/dev/null", False),
    ("sysctl", "/etc/sysctl.d/90-gpufleet-a.conf", "/dev/null\n/etc/shadow", False),
])
def test_a_link_is_put_back_only_where_a_module_records_one(area, path, target, allowed):
    entry = _file_entry(path, area, {"link": target}, link=True)
    why = checks.refusal("file:" + path, entry, "/")
    assert (why is None) is allowed, why


@pytest.mark.parametrize("value, words", [
    (dict(mode="4755"), "setuid"),
    (dict(mode="2755"), "setuid, setgid"),
    (dict(mode="1644"), "sticky"),
    (dict(mode="0666"), "every user"),
    (dict(mode="rwx"), "octal"),
    (dict(uid=1000), "go back root's"),
    (dict(gid=1000), "go back root's"),
    (dict(uid=True), "not a uid"),
    (dict(content_b64="not base64!"), "base64"),
])
def test_a_file_content_goes_back_only_with_a_sane_mode_and_owner(value, words, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getegid", lambda: 0)
    path = "/etc/modprobe.d/zz-gpufleet-nvidia.conf"
    before = dict(_content("options nvidia NVreg_EnableMSI=1\n"), **value)
    for where in ("before", "run_before", "after_content"):
        entry = _file_entry(path, "nvidia_options", None)
        if where == "run_before":
            entry["run_before"] = {"run": "r2", "value": before}
        else:
            entry[where] = before
        why = checks.refusal("file:" + path, entry, "/")
        assert why and why.startswith(where + ":") and words in why, (where, why)


def test_an_lxc_config_keeps_its_owner_and_a_backup_is_only_removed(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getegid", lambda: 0)
    config = "/home/u/.local/share/lxc/c1/config"
    owned = dict(_content("lxc.uts.name = c1\n", "0664"), uid=1000, gid=1000)
    assert checks.refusal("file:" + config, _file_entry(config, "lxc_memlock", owned), "/") is None
    backup = config + ".20261201-070102.gpufleet.bak"
    assert checks.refusal("file:" + backup, _file_entry(backup, "lxc_memlock", None), "/") is None
    why = checks.refusal("file:" + backup, _file_entry(backup, "lxc_memlock", owned), "/")
    assert "only ever removed" in why


def test_a_digest_only_before_is_left_to_not_restorable():
    path = "/etc/default/grub"
    entry = _file_entry(path, "kernel_cmdline", {"sha256": "ab", "size": 2, "mode": "0644"})
    assert checks.refusal("file:" + path, entry, "/") is None and not store.restorable(entry)


CPU = "/sys/devices/system/cpu"


@pytest.mark.parametrize("how, target, area, before, allowed", [
    ("sysctl", "vm.swappiness", "sysctl", "60", True),
    ("sysctl", "net.ipv4.tcp_rmem", "sysctl", "4096 131072 6291456", True),
    ("sysctl", "vm.swappiness", "sysctl", None, True),
    ("sysctl", "../../../etc/passwd", "sysctl", "60", False),
    ("sysctl", "vm.swappiness", "cpu_power", "60", False),
    ("sysctl", "kernel.core_pattern", "sysctl", "|/tmp/x\n", False),
    ("sysctl", "kernel.core_pattern", "sysctl", "x" * 5000, False),
    ("sysfs", CPU + "/cpu12/cpuidle/state3/disable", "cpu_power", "0", True),
    ("sysfs", CPU + "/cpu12/cpuidle/state3/disable", "cpu_power", "2", False),
    ("sysfs", CPU + "/cpufreq/policy0/scaling_governor", "cpu_power", "powersave", True),
    ("sysfs", CPU + "/cpufreq/policy0/energy_performance_preference", "cpu_power", "balance_performance", True),
    ("sysfs", CPU + "/cpufreq/policy0/energy_performance_preference", "cpu_power", "128", True),
    ("sysfs", CPU + "/cpufreq/policy0/scaling_governor", "cpu_power", "power save", False),
    ("sysfs", CPU + "/cpufreq/policy0/scaling_governor", "cpu_power", "a\nb", False),
    ("sysfs", CPU + "/cpufreq/policy0/scaling_governor", "cpu_power", "g" * 65, False),
    ("sysfs", CPU + "/cpufreq/policy0/scaling_max_freq", "cpu_power", "800000", False),
    ("sysfs", CPU + "/cpu0/online", "cpu_power", "0", False),
    ("sysfs", "/sys/bus/pci/devices/0000:01:00.0/remove", "cpu_power", "1", False),
    ("sysfs", "/sys/kernel/mm/transparent_hugepage/enabled", "cpu_power", "never", False),
    ("sysfs", CPU + "/cpu0/cpuidle/state3/../../../../../../kernel/x/disable", "cpu_power", "1", False),
    ("pcie_mrrs", "0000:41:00.0", "pcie", "512", True),
    ("pcie_mrrs", "10000:e1:00.0", "pcie", "4096", True),  # a VMD domain
    ("pcie_mrrs", "0000:41:00.0", "pcie", "8192", False),
    ("pcie_mrrs", "0000:41:00.0", "pcie", None, False),
    ("pcie_mrrs", "0000:41:00.0/../../x", "pcie", "512", False),
    ("pcie_mrrs", "0000:41:00.0", "cpu_power", "512", False),
    ("pcie_acs", "0000:40:01.1", "pcie", "0x001d", True),
    ("pcie_acs", "0000:40:01.1", "pcie", "0x1001d", False),
    ("pcie_acs", "0000:40:01.1", "pcie", "29", False),
    ("kmod", "nvidia_peermem", "peermem", "not loaded", True),
    ("kmod", "nvidia_peermem", "peermem", "loaded", True),
    ("kmod", "nvidia_peermem", "peermem", "unloaded", False),
    ("kmod", "nvidia_peermem", "peermem", None, False),
    ("kmod", "evil_module", "peermem", "loaded", False),
    ("kmod", "nvidia_peermem", "sysctl", "loaded", False),
])
def test_value_items_are_the_ones_the_modules_record(how, target, area, before, allowed):
    entry = {"key": state_items.key_of(how, target), "how": how, "target": target, "area": area,
             "before": before, "after": None}
    why = checks.refusal(entry["key"], entry, "/")
    assert (why is None) is allowed, why


@pytest.mark.parametrize("entry, words", [
    ("not a dict", "not an item"),
    ({"key": "sysctl:vm.swappiness", "how": "shell", "target": "vm.swappiness", "area": "sysctl"}, "kind 'shell'"),
    ({"key": "sysctl:vm.swappiness", "how": "sysctl", "target": "vm.dirty_ratio", "area": "sysctl"}, "key does not"),
    ({"key": "sysctl:vm.swappiness", "how": "sysctl", "target": "vm.swappiness", "area": "sysctl", "before": "1",
      "run_before": "60"}, "run_before is not"),
    ({"key": "sysctl:vm.swappiness", "how": "sysctl", "target": "vm.swappiness", "area": ["sysctl"]}, "area ["),
])
def test_an_entry_of_another_shape_is_refused(entry, words):
    assert words in checks.refusal("sysctl:vm.swappiness", entry, "/")


def test_the_names_are_the_modules_own():
    """The allow-list's literal names and sets are the ones the modules use."""
    assert checks.MRRS_SIZES == tuple(str(size) for size in pci_config.SIZES)
    assert checks.KERNEL_MODULES == (pm.MODULE,)
    assert mp.CPU_POWER_UNIT == cpu_power_boot.UNIT_NAME
    assert checks.AREA_OF == {"sysctl": sp.AREA, "sysfs": cp.AREA, "pcie_mrrs": mrrs.AREA, "pcie_acs": pa.AREA,
                              "kmod": pm.AREA}
    assert set(mp.RULES) == set(tuning_revert.AREAS)
    # the names the modules accept for their files, as the allow-list spells them
    assert sp.NAME_RE.pattern == r"^%s\Z" % mp._PROFILE
    assert lm.NAME_RE.pattern == r"^%s\Z" % mp._LXC_NAME
    assert do.FILENAME_RE.pattern == r"^%s\Z" % mp._MODPROBE_FILE
    assert sl.DROPIN_RE.pattern == r"\A%s\Z" % mp._LAUNCH_DROPIN
    for area, path in [
        (sp.AREA, os.path.join(sp.SYSCTL_D, sp.profile_filename("x", 90))),
        (sp.AREA, os.path.join(sp.STATE_DIR, "x.json")),
        (pm.AREA, os.path.join("/etc/modules-load.d", pm.FILE_NAME)),
        (pm.AREA, os.path.join("/etc/modprobe.d", pm.FILE_NAME)),
        (do.AREA, os.path.join("/etc/modprobe.d", do.DEFAULT_FILENAME)),
        (mrrs.AREA, os.path.join(mrrs.UDEV_RULES_D, mrrs.RULE_FILE)),
        (mrrs.AREA, mrrs.HELPER),
        (pa.AREA, os.path.join(pa.UDEV_RULES_D, pa.RULE_FILE)),
        (pa.AREA, pa.HELPER),
        (pa.AREA, pa.STATE_FILE),
        (cp.AREA, cpu_power_boot.SCRIPT_PATH),
        (cp.AREA, os.path.join(cpu_power_boot.SYSTEMD_DIR, cpu_power_boot.UNIT_NAME)),
        (bc.AREA, "/etc/default/grub"),
        (lm.AREA, os.path.join(lm.Paths().pve_lxc, "101.conf")),
        (lm.AREA, os.path.join(lm.Paths().lxc_path, "serving", "config")),
        (sl.AREA, os.path.join(sl.Paths().systemd, "vllm.service.d", sl.DEFAULT_DROPIN)),
    ]:
        assert checks.target_refusal("file", path, area) is None, (area, path)


# --------------------------------------------------------------------------- helpers

def _content(text, mode="0644"):
    return {"content_b64": base64.b64encode(text.encode()).decode(), "mode": mode, "uid": 0, "gid": 0}


def _file_entry(path, area, before, link=False):
    return {"key": "file:" + path, "how": "file", "target": path, "area": area, "before": before, "after": None,
            "link": link}


@pytest.mark.parametrize("path, text, allowed", [
    ("/etc/selinux/config", "SELINUX=disabled\n", False),
    ("/home/u/.config/git/config", "[core]\n\teditor = vi\n", False),
    ("/var/lib/lxc/c1/config", "# Template\nlxc.uts.name = c1\n\nlxc.prlimit.memlock = unlimited\n", True),
    ("/etc/pve/lxc/101.conf", "arch: amd64\ncores: 8\nlxc.prlimit.memlock: unlimited\n[snap1]\nmemory: 512\n", True),
    ("/etc/pve/lxc/101.conf", "arch: amd64\nrm -rf /: x\n", False),
    ("/var/lib/lxc/c1/config", "lxc.uts.name = c1\n* * * * * root sh /tmp/x\n", False),
])
def test_a_container_config_goes_back_only_as_a_container_config(path, text, allowed, monkeypatch):
    """``<dir>/<name>/config`` also names /etc/selinux/config: what goes back there must read as
    an LXC or Proxmox config, and a record can never have a revert delete one."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getegid", lambda: 0)
    why = checks.refusal("file:" + path, _file_entry(path, "lxc_memlock", _content(text)), "/")
    assert (why is None) is allowed, why
    if not allowed:
        assert "not a container config" in why
    absent = checks.refusal("file:" + path, _file_entry(path, "lxc_memlock", None), "/")
    assert absent and "never creates a container config" in absent
