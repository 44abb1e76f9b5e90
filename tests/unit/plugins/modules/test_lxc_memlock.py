"""The module's main(): argument spec, exit/fail JSON, check mode and --diff, the tool fallback."""

import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock as lm
from ansible_collections.gpufleet.tuning.plugins.modules import lxc_memlock
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, write_tree
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import lxc_fixtures as fx


def _fake(tmp_path, monkeypatch):
    write_tree(tmp_path, {"etc/pve/lxc/101.conf": fx.PVE_PLAIN, "proc/1/cgroup": "0::/init.scope\n",
                          "sys/fs/cgroup": None})
    paths = lm.Paths(str(tmp_path))
    monkeypatch.setattr(lm, "Paths", lambda: paths)
    # no pct/lxc-info of the machine running the tests
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "etc/pve/lxc/101.conf"


def _fake_tool(tmp_path, name, output):
    path = tmp_path / "bin" / name
    write_tree(tmp_path, {"bin/%s" % name: "#!/bin/sh\necho \"$0 $*\" >> %s/calls\nprintf '%s\\n'\n" % (tmp_path, output)})
    os.chmod(str(path), stat.S_IRWXU)


def test_exit_json_and_idempotence(tmp_path, monkeypatch, capsys):
    conf = _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys)
    assert not failed and result["changed"] is True
    assert conf.read_bytes() == fx.AFTER_PVE_PLAIN
    assert result["limit_after"] == "unlimited" and result["backup_file"].endswith(".gpufleet.bak")
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys)
    assert not failed and result["changed"] is False


def test_check_and_diff(tmp_path, monkeypatch, capsys):
    conf = _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_memlock, {"vmid": 101, "limit": 68719476736}, capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["after"] == "lxc.prlimit.memlock = 68719476736\n"
    assert result["diff"][1]["after"].endswith("lxc.prlimit.memlock: 68719476736\n")
    assert conf.read_bytes() == fx.PVE_PLAIN
    assert sorted(os.listdir(str(conf.parent))) == ["101.conf"]


def test_pct_asked_when_the_kernel_shows_nothing(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    _fake_tool(tmp_path, "pct", "status: running")
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys, check_mode=True)
    assert not failed and result["running"] is True and result["restart_required"] is True
    assert result["running_evidence"] == "%s/bin/pct status 101 says running" % tmp_path
    assert (tmp_path / "calls").read_text() == "%s/bin/pct status 101\n" % tmp_path


def test_fail_json_names_the_path(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_memlock, {"vmid": 404}, capsys)
    assert failed and "404.conf does not exist" in result["msg"]
    assert "changed" not in result or result["changed"] is False


def test_bad_limit_message(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_memlock, {"vmid": 101, "limit": "64G"}, capsys)
    assert failed and "write 68719476736 for 64G" in result["msg"] and "SOFT:HARD" in result["msg"]


def test_argspec_exactly_one_target(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_memlock, {"vmid": 101, "name": "x"}, capsys)
    assert failed and "mutually exclusive" in result["msg"]
    failed, result = run_module(lxc_memlock, {"limit": "unlimited"}, capsys)
    assert failed and "name the container(s): one of vmid, name or path, or select" in result["msg"]


def test_locked_container_is_pending_and_the_task_succeeds(tmp_path, monkeypatch, capsys):
    conf = _fake(tmp_path, monkeypatch)
    warned = []
    monkeypatch.setattr(AnsibleModule, "warn", lambda _self, warning, **_kw: warned.append(warning))
    data = fx.PVE_PLAIN.replace(b"hostname:", b"lock: backup\nhostname:")
    conf.write_bytes(data)
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys)
    assert not failed and result["changed"] is False and result["pending"] is True
    assert "lock: backup" in result["pending_reason"]
    assert any("locked by Proxmox (lock: backup)" in w for w in warned)
    assert conf.read_bytes() == data
    failed, result = run_module(lxc_memlock, {"vmid": 101, "on_locked": "fail"}, capsys)
    assert failed and "locked by Proxmox (lock: backup)" in result["msg"]
    assert "changed" not in result and "diff" not in result
    failed, result = run_module(lxc_memlock, {"vmid": 101, "on_locked": "later"}, capsys)
    assert failed and "on_locked" in result["msg"] and "fail, pending" in result["msg"]


def test_nul_in_path_is_a_clean_failure(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_memlock, {"path": str(tmp_path / "etc/pve/lxc/101.conf\0")}, capsys)
    assert failed and "NUL byte" in result["msg"] and "101.conf\\x00" in result["msg"]


def test_fifo_at_the_config_path_is_a_clean_failure(tmp_path, monkeypatch, capsys):
    conf = _fake(tmp_path, monkeypatch)
    conf.unlink()
    os.mkfifo(str(conf))
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys)
    assert failed and "%s: is a FIFO (named pipe)" % conf in result["msg"]


def test_latin1_config_gives_json_safe_diff_and_exact_bytes(tmp_path, monkeypatch, capsys):
    _fake(tmp_path, monkeypatch)
    data = b"lxc.uts.name = serving\n# Gr\xfc\xdfe aus M\xfcnchen\nlxc.net.0.type = empty\n"
    write_tree(tmp_path, {"var/lib/lxc/latin/config": data})
    failed, result = run_module(lxc_memlock, {"name": "latin"}, capsys, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][1]["after"] == "4: lxc.prlimit.memlock = unlimited\n"
    assert (tmp_path / "var/lib/lxc/latin/config").read_bytes() == data + b"lxc.prlimit.memlock = unlimited\n"


def assert_documented(module, spec):
    """The module's DOCUMENTATION options are its engine's ARGUMENT_SPEC: names, types,
    defaults, choices, aliases, element types and required."""
    import yaml
    doc = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert sorted(doc) == sorted(spec)
    for name, option in spec.items():
        for key in ("type", "default", "choices", "aliases", "elements"):
            assert doc[name].get(key) == option.get(key), (name, key)
        assert bool(doc[name].get("required")) == bool(option.get("required")), name


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(lxc_memlock, lm, monkeypatch)


def test_changes_is_documented_with_the_same_text_in_every_module_of_this_change():
    """ansible-doc has no RETURN doc fragments: each module carries the same ``changes`` text."""
    import yaml
    from ansible_collections.gpufleet.tuning.plugins.modules import lxc_containers, memlock_info, p2p_bandwidth
    texts = [yaml.safe_load(m.RETURN)["changes"] for m in (lxc_memlock, lxc_containers, memlock_info, p2p_bandwidth)]
    assert all(text == texts[0] for text in texts)
    assert sorted(texts[0]["contains"]) == ["after", "area", "before", "kind", "target"]


def test_changes_in_exit_json_agree_with_changed(tmp_path, monkeypatch, capsys):
    conf = _fake(tmp_path, monkeypatch)
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys, check_mode=True)
    assert not failed and result["changed"] is True
    assert [r["kind"] for r in result["changes"]] == ["value", "file", "file"]
    assert conf.read_bytes() == fx.PVE_PLAIN
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys)
    assert not failed and result["changed"] is True
    assert result["changes"][0]["target"] == "%s lxc.prlimit.memlock" % conf
    assert result["changes"][2]["target"] == result["backup_file"]
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys)
    assert not failed and result["changed"] is False and result["changes"] == []


def test_a_failure_or_a_pending_container_reports_no_changes(tmp_path, monkeypatch, capsys):
    conf = _fake(tmp_path, monkeypatch)
    conf.write_bytes(fx.PVE_PLAIN.replace(b"hostname:", b"lock: backup\nhostname:"))
    failed, result = run_module(lxc_memlock, {"vmid": 101}, capsys)
    assert not failed and result["pending"] is True and result["changed"] is False and result["changes"] == []
    failed, result = run_module(lxc_memlock, {"vmid": 101, "on_locked": "fail"}, capsys)
    assert failed and "changes" not in result
    failed, result = run_module(lxc_memlock, {"vmid": 404}, capsys)
    assert failed and "changes" not in result
