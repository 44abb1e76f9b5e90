"""The serving_unit module's main() on a unit tree built in tmp_path: the command as systemd runs
it, the collection's drop-in reported apart with the vendor's command, clear failures."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_unit as su
from ansible_collections.gpufleet.tuning.plugins.modules import serving_unit
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit import kernel_fakes as kf
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module, snapshot, write_tree

ETC = "etc/systemd/system/"
LIB = "usr/lib/systemd/system/"
VENDOR = ("[Unit]\nDescription=vLLM\n\n[Service]\nUser=llm\nEnvironmentFile=-/etc/default/vllm\n"
          "Environment=PORT=8000\nExecStart=/usr/bin/numactl --cpunodebind=0 -- /opt/vllm/bin/vllm serve \\\n"
          "    \"/models/Qwen3 8B\" --port ${PORT} --max_num_seqs 64 $EXTRA\n")
MINE = ("[Service]\nExecStart=\nExecStart=/usr/bin/numactl --cpunodebind=0 -- /opt/vllm/bin/vllm serve "
        "\"/models/Qwen3 8B\" --port ${PORT} --max_num_seqs 128 --enable-prefix-caching\n")


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = tmp_path / "root"
    write_tree(root, {LIB + "vllm.service": VENDOR, "etc/default/vllm": "EXTRA='--kv-cache-dtype fp8'\n"})
    paths = su.Paths(str(root))
    monkeypatch.setattr(su, "Paths", lambda: paths)
    return root


@pytest.fixture
def warned(monkeypatch):
    return kf.capture_warnings(monkeypatch, serving_unit)


def test_the_module_is_its_engines_shell(monkeypatch):
    contract.assert_module_is_its_engines_shell(serving_unit, su, monkeypatch)


def test_reads_the_vendor_unit(node, capsys):
    before = snapshot(node)
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys, check_mode=True)
    assert not failed and result["changed"] is False and result["changes"] == []
    argv = ["/usr/bin/numactl", "--cpunodebind=0", "--", "/opt/vllm/bin/vllm", "serve", "/models/Qwen3 8B",
            "--port", "8000", "--max_num_seqs", "64", "--kv-cache-dtype", "fp8"]
    assert result["argv"] == argv and result["vendor_argv"] == argv
    assert result["argv_raw"] == argv[:7] + ["${PORT}", "--max_num_seqs", "64", "$EXTRA"]
    assert (result["unit"], result["kind"], result["args_start"], result["program"], result["prefix"]) == (
        "vllm.service", "vllm", 5, "/opt/vllm/bin/vllm", "")
    assert result["flags"] == {"--port": "8000", "--max-num-seqs": "64", "--kv-cache-dtype": "fp8"}
    assert result["command"] == ('/usr/bin/numactl --cpunodebind=0 -- /opt/vllm/bin/vllm serve "/models/Qwen3 8B" '
                                 '--port 8000 --max_num_seqs 64 --kv-cache-dtype fp8')
    assert result["environment"] == {"PORT": "8000", "EXTRA": "--kv-cache-dtype fp8"}
    assert result["environment_files"] == [{"path": "/etc/default/vllm", "optional": True, "found": True}]
    assert result["fragment_path"] == "/usr/lib/systemd/system/vllm.service" and result["dropins"] == []
    assert len(result["fragment_sha256"]) == 64 and result["collection_dropin"] is None
    assert result["collection_dropin_sha256"] is None
    assert (result["user"], result["type"], result["working_directory"]) == ("llm", "simple", None)
    assert snapshot(node) == before


def test_the_collection_dropin_is_reported_with_the_vendor_command(node, capsys):
    write_tree(node, {ETC + "vllm.service.d/90-gpufleet-launch.conf": MINE,
                      ETC + "vllm.service.d/10-site.conf": "[Service]\nEnvironment=PORT=9000\n"})
    failed, result = run_module(serving_unit, {"name": "vllm.service"}, capsys)
    assert not failed
    mine = "/etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf"
    assert result["dropins"] == ["/etc/systemd/system/vllm.service.d/10-site.conf", mine]
    assert result["collection_dropin"] == mine and len(result["collection_dropin_sha256"]) == 64
    assert result["argv"][5:] == ["/models/Qwen3 8B", "--port", "9000", "--max_num_seqs", "128",
                                  "--enable-prefix-caching"]
    assert result["vendor_argv"][5:] == ["/models/Qwen3 8B", "--port", "9000", "--max_num_seqs", "64",
                                         "--kv-cache-dtype", "fp8"]
    assert result["flags"] == {"--port": "9000", "--max-num-seqs": "128", "--enable-prefix-caching": True}


def test_another_dropin_name(node, capsys):
    write_tree(node, {ETC + "vllm.service.d/50-mine.conf": MINE})
    failed, result = run_module(serving_unit, {"name": "vllm", "dropin_name": "50-mine.conf"}, capsys)
    assert not failed and result["collection_dropin"] == "/etc/systemd/system/vllm.service.d/50-mine.conf"
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert not failed and result["collection_dropin"] is None and result["vendor_argv"] == result["argv"]


def test_unset_variables_are_warned(node, capsys, warned):
    os.remove(str(node / "etc/default/vllm"))
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert not failed and result["argv"][-2:] == ["--max_num_seqs", "64"]
    assert result["environment_files"] == [{"path": "/etc/default/vllm", "optional": True, "found": False}]
    assert any("uses $EXTRA, which Environment= and EnvironmentFile= do not set" in w for w in warned)


def test_a_dropin_that_leaves_the_vendor_command_empty(node, capsys, warned):
    write_tree(node, {LIB + "vllm.service": "[Service]\nType=simple\n",
                      ETC + "vllm.service.d/90-gpufleet-launch.conf": MINE})
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert not failed and result["vendor_argv"] is None and result["argv"][3] == "/opt/vllm/bin/vllm"
    assert any("without /etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf the unit runs no single command"
               in w for w in warned)


@pytest.mark.parametrize("name", ["vllm service", "vllm;rm", "../vllm", "", "vllm.socket", "x@.service", "é.service"])
def test_a_bad_name_fails_naming_it(node, capsys, name):
    failed, result = run_module(serving_unit, {"name": name}, capsys)
    assert failed and ("name=%r" % name) in result["msg"]


def test_a_bad_dropin_name_fails_naming_it(node, capsys):
    failed, result = run_module(serving_unit, {"name": "vllm", "dropin_name": "../x.conf"}, capsys)
    assert failed and "dropin_name='../x.conf' is not a drop-in file name" in result["msg"]


def test_missing_unit_lists_where_it_looked(node, capsys):
    failed, result = run_module(serving_unit, {"name": "sglang"}, capsys)
    assert failed and result["msg"].startswith("sglang.service is not installed: no unit file in "
                                               "/etc/systemd/system.control, /run/systemd/system.control, ")
    assert "/usr/lib/systemd/system, /lib/systemd/system, /run/systemd/generator.late" in result["msg"]


def test_masked_unit_fails(node, capsys):
    os.makedirs(str(node / ETC))
    os.symlink("/dev/null", str(node / ETC / "vllm.service"))
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert failed and "vllm.service is masked (/etc/systemd/system/vllm.service links to /dev/null)" in result["msg"]


def test_no_execstart_or_several_fail(node, capsys):
    write_tree(node, {ETC + "vllm.service": "[Service]\nExecStart=/bin/a\nExecStart=\n"})
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert failed and result["msg"].startswith("vllm.service sets no ExecStart= (read /etc/systemd/system/vllm.service)")
    write_tree(node, {ETC + "vllm.service": "[Service]\nType=oneshot\nExecStart=/bin/a\nExecStart=/bin/b\n"})
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert failed and result["msg"] == (
        "vllm.service runs 2 commands (ExecStart= at /etc/systemd/system/vllm.service:3, "
        "/etc/systemd/system/vllm.service:4): a Type=oneshot service with several commands is not a server")


def test_a_required_environment_file_that_is_missing_fails(node, capsys):
    write_tree(node, {ETC + "vllm.service.d/1.conf": "[Service]\nEnvironmentFile=/etc/vllm/secret.env\n"})
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert failed and "EnvironmentFile=/etc/vllm/secret.env does not exist: systemd would not start" in result["msg"]


def test_at_prefix_and_generic_command(node, capsys):
    text = "[Service]\nExecStart=@/opt/venv/bin/python vllm-server -m sglang.launch_server --port 1\n"
    write_tree(node, {ETC + "vllm.service": text})
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert not failed and (result["prefix"], result["kind"], result["args_start"]) == ("@", "sglang", 4)
    assert result["command"] == "@/opt/venv/bin/python vllm-server -m sglang.launch_server --port 1"
    write_tree(node, {ETC + "vllm.service": "[Service]\nExecStart=/bin/sh -c 'exec vllm serve m'\n"})
    failed, result = run_module(serving_unit, {"name": "vllm"}, capsys)
    assert not failed and (result["kind"], result["args_start"], result["flags"]) == ("generic", 1, {})
