"""The health_textfile module's main() on a temp directory: it is its engine's shell (no state
record: the file is a report), writes, keeps and removes the file, reports check mode, diff and
heartbeat-only runs, and fails with fail_json claiming no change and writing nothing."""

import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import health_textfile as ht
from ansible_collections.gpufleet.tuning.plugins.modules import health_textfile
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, run_module, snapshot, write_tree

STAMP = "gpufleet_audit_last_run_timestamp_seconds"


def args(folder, healthy=1, stamp="1767225600", **kw):
    params = {"directory": str(folder), "heartbeat": [STAMP], "metrics": [
        {"name": "gpufleet_node_healthy", "help": "1 when healthy.", "samples": [{"value": healthy}]},
        {"name": "gpufleet_audit_findings", "samples": [{"labels": {"severity": "critical"}, "value": 0},
                                                        {"labels": {"severity": "warning"}, "value": "2"}]},
        {"name": STAMP, "samples": [{"value": stamp}]}]}
    params.update(kw)
    return params


@pytest.fixture
def folder(tmp_path):
    write_tree(tmp_path, {"textfiles": None})
    return tmp_path / "textfiles"


def test_the_module_is_its_engines_shell_and_records_nothing(monkeypatch):
    contract.assert_module_is_its_engines_shell(health_textfile, ht, monkeypatch)
    assert "state_path" not in ht.ARGUMENT_SPEC
    assert "gpufleet.tuning.state_record" not in health_textfile.DOCUMENTATION


def test_writes_then_changes_nothing_then_refreshes_the_heartbeat_then_removes(folder, capsys):
    path = str(folder / "gpufleet.prom")
    failed, result = run_module(health_textfile, args(folder), capsys)
    assert not failed and result["changed"] is True and result["path"] == path and result["samples"] == 4
    assert [(c["kind"], c["target"]) for c in contract.assert_records(result, "health_textfile")] == [
        ("file", path), ("value", 'gpufleet_audit_findings{severity="critical"}'),
        ("value", 'gpufleet_audit_findings{severity="warning"}'), ("value", "gpufleet_node_healthy")]
    assert read(path).endswith('# TYPE gpufleet_audit_findings gauge\ngpufleet_audit_findings{severity="critical"} 0\n'
                               'gpufleet_audit_findings{severity="warning"} 2\n'
                               "# TYPE %s gauge\n%s 1767225600\n" % (STAMP, STAMP))
    inode = os.stat(path).st_ino

    failed, result = run_module(health_textfile, args(folder), capsys)
    assert not failed and result["changed"] is False and result["changes"] == [] and result["heartbeat_only"] is False
    assert os.stat(path).st_ino == inode

    failed, result = run_module(health_textfile, args(folder, stamp="1767229200"), capsys)
    assert not failed and result["changed"] is False and result["changes"] == [] and result["heartbeat_only"] is True
    assert read(path).endswith("%s 1767229200\n" % STAMP)

    failed, result = run_module(health_textfile, args(folder, healthy=0), capsys)
    assert not failed and result["changed"] is True
    assert result["changes"][1:] == [{"area": "health_textfile", "kind": "value", "target": "gpufleet_node_healthy",
                                      "before": "1", "after": "0"}]

    failed, result = run_module(health_textfile, {"directory": str(folder), "state": "absent"}, capsys)
    assert not failed and result["changed"] is True and not os.path.exists(path)
    failed, result = run_module(health_textfile, {"directory": str(folder), "state": "absent"}, capsys)
    assert not failed and result["changed"] is False


def test_check_mode_and_diff(folder, capsys):
    before = snapshot(folder)
    failed, result = run_module(health_textfile, args(folder), capsys, check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert result["diff"][0]["before_header"] == "%s (absent)" % (folder / "gpufleet.prom")
    assert result["diff"][0]["after"].startswith("# Managed by gpufleet.tuning (health_textfile)")
    assert result["msg"].startswith("would write")
    assert snapshot(folder) == before


def test_mode_from_an_unquoted_yaml_octal(folder, capsys):
    failed, result = run_module(health_textfile, args(folder, mode=0o640), capsys)
    assert not failed and os.stat(result["path"]).st_mode & 0o777 == 0o640


@pytest.mark.parametrize("extra, words", [
    ({"directory": "relative/dir"}, "directory='relative/dir' must be an absolute path"),
    ({"file_name": "gpufleet.txt"}, "file_name='gpufleet.txt' must end in .prom"),
    ({"metrics": [{"name": "bad name", "samples": [{"value": 1}]}]}, "metric name 'bad name' is not valid"),
    ({"metrics": [{"name": "m", "samples": [{"labels": {"a-b": "x"}, "value": 1}]}]}, "label name 'a-b' is not valid"),
    ({"metrics": [{"name": "m", "samples": [{"value": "up"}]}]}, "value 'up' is not a number"),
    ({"metrics": [{"name": "m", "samples": [{"value": 1}, {"value": 2}]}]}, "samples[1] repeats the labels of samples[0]"),
    # what AnsibleModule's own suboption checks refuse before the engine runs
    ({"metrics": [{"name": "m", "type": "histogram", "samples": []}]}, "histogram"),
    ({"metrics": [{"name": "m", "samples": [{"vaule": 1}]}]}, "missing required arguments: value"),
    ({"metrics": [{"samples": [{"value": 1}]}]}, "name"),
    ({"state": "gone"}, "gone"),
])
def test_bad_input_fails_claiming_no_change_and_writing_nothing(folder, capsys, extra, words):
    params = args(folder, heartbeat=[])
    params.update(extra)
    before = snapshot(folder)
    failed, result = run_module(health_textfile, params, capsys)
    assert failed and words in result["msg"], result["msg"]
    assert not result.get("changes") and not result.get("changed")
    assert snapshot(folder) == before


def test_a_missing_directory_fails_naming_it(tmp_path, capsys):
    missing = tmp_path / "node-exporter"
    failed, result = run_module(health_textfile, args(missing), capsys)
    assert failed and result["msg"].startswith("directory=%r: %s does not exist" % (str(missing), missing))
    assert not missing.exists() and not result.get("changes")


def test_a_symlinked_file_is_refused(folder, capsys):
    write_tree(folder.parent, {"real.prom": "# gpufleet.tuning\n"})
    os.symlink(str(folder.parent / "real.prom"), str(folder / "gpufleet.prom"))
    before = snapshot(folder.parent)
    failed, result = run_module(health_textfile, args(folder), capsys)
    assert failed and "it is a symlink" in result["msg"]
    assert snapshot(folder.parent) == before
