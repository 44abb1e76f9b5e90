"""The health_textfile engine on a fake root: the file it writes (read back with the format's own
parser), idempotence down to the inode, heartbeat-only rewrites, value records, check mode, diff,
state absent, the inputs and the paths it refuses (writing nothing), and an atomic write that
fails leaving the old file and no temporary file."""

import hashlib
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import health_textfile as ht
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import prometheus_text as pt
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import read, snapshot, write_tree

TEXTFILE_DIR = "var/lib/prometheus/node-exporter"
PROM = TEXTFILE_DIR + "/gpufleet.prom"
HEARTBEAT = "gpufleet_audit_last_run_timestamp_seconds"


def metrics(healthy=1, critical=0, warning=2, stamp=1767225600):
    return [
        {"name": "gpufleet_node_healthy", "help": "1 when the last audit found nothing critical.",
         "samples": [{"value": healthy}]},
        {"name": "gpufleet_audit_findings", "help": "Findings of the last audit, by severity.",
         "samples": [{"labels": {"severity": "warning"}, "value": warning},
                     {"labels": {"severity": "critical"}, "value": critical}]},
        {"name": HEARTBEAT, "help": "When the last audit ran.", "samples": [{"value": stamp}]},
    ]


EXPECTED = (
    "# Managed by gpufleet.tuning (health_textfile): this node's health for node_exporter's textfile collector.\n"
    "# Rewritten by every run; edits here are lost.\n"
    "# HELP gpufleet_node_healthy 1 when the last audit found nothing critical.\n"
    "# TYPE gpufleet_node_healthy gauge\n"
    "gpufleet_node_healthy 1\n"
    "# HELP gpufleet_audit_findings Findings of the last audit, by severity.\n"
    "# TYPE gpufleet_audit_findings gauge\n"
    'gpufleet_audit_findings{severity="critical"} 0\n'
    'gpufleet_audit_findings{severity="warning"} 2\n'
    "# HELP gpufleet_audit_last_run_timestamp_seconds When the last audit ran.\n"
    "# TYPE gpufleet_audit_last_run_timestamp_seconds gauge\n"
    "gpufleet_audit_last_run_timestamp_seconds 1767225600\n")


@pytest.fixture(autouse=True)
def records_agree(monkeypatch):
    """Every run in this file: ``changes`` records of area health_textfile agree with
    ``changed``, and a failure claims none."""
    contract.checking_records(monkeypatch, ht)


@pytest.fixture
def root(tmp_path):
    write_tree(tmp_path, {TEXTFILE_DIR: None})
    return tmp_path


def run(root, check_mode=False, **kw):
    params = dict(metrics=metrics(), heartbeat=[HEARTBEAT])
    params.update(kw)
    return ht.run(params, check_mode=check_mode, paths=ht.Paths(str(root)))


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------ present

def test_writes_the_file_in_the_exposition_format(root):
    result = run(root)
    path = str(root / PROM)
    assert read(path) == EXPECTED
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert result["changed"] is True and result["path"] == path and result["samples"] == 4
    assert result["heartbeat_only"] is False and result["state"] == "present"
    assert result["msg"] == "wrote %s (4 samples)" % path
    assert result["changes"][0] == {"area": "health_textfile", "kind": "file", "target": path, "before": None,
                                    "after": {"sha256": digest(EXPECTED), "size": len(EXPECTED), "mode": "0644"}}
    # every sample is new (the heartbeat aside, which gets no value record)
    assert result["changes"][1:] == [
        {"area": "health_textfile", "kind": "value", "target": 'gpufleet_audit_findings{severity="critical"}',
         "before": None, "after": "0"},
        {"area": "health_textfile", "kind": "value", "target": 'gpufleet_audit_findings{severity="warning"}',
         "before": None, "after": "2"},
        {"area": "health_textfile", "kind": "value", "target": "gpufleet_node_healthy", "before": None, "after": "1"},
    ]
    assert pt.parse(read(path))[0] == ("gpufleet_node_healthy", {}, "1")
    assert os.listdir(str(root / TEXTFILE_DIR)) == ["gpufleet.prom"]


def test_a_second_run_changes_nothing_and_does_not_touch_the_file(root):
    run(root)
    path = str(root / PROM)
    os.utime(path, (1000000000, 1000000000))
    before = os.stat(path)
    again = run(root)
    after = os.stat(path)
    assert again["changed"] is False and again["changes"] == [] and again["diff"] == []
    assert again["heartbeat_only"] is False and again["samples"] == 4
    assert again["msg"] == "%s is up to date (4 samples)" % path
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (before.st_ino, before.st_mtime_ns, before.st_ctime_ns)


def test_a_heartbeat_only_change_rewrites_the_file_and_reports_no_change(root):
    run(root)
    path = str(root / PROM)
    inode = os.stat(path).st_ino
    result = run(root, metrics=metrics(stamp=1767229200.5))
    assert result["changed"] is False and result["changes"] == [] and result["diff"] == []
    assert result["heartbeat_only"] is True
    assert "only the heartbeat values changed" in result["msg"]
    assert read(path) == EXPECTED.replace("1767225600\n", "1.7672292005e+09\n")
    assert os.stat(path).st_ino != inode  # rewritten (atomically: a new inode renamed over it)
    assert os.listdir(str(root / TEXTFILE_DIR)) == ["gpufleet.prom"]


def test_without_heartbeat_the_timestamp_is_a_change_like_any_other(root):
    run(root, heartbeat=[])
    result = run(root, heartbeat=[], metrics=metrics(stamp=1767229200))
    assert result["changed"] is True and result["heartbeat_only"] is False
    assert result["changes"][1:] == [{"area": "health_textfile", "kind": "value", "target": HEARTBEAT,
                                      "before": "1767225600", "after": "1767229200"}]


def test_a_real_value_change_with_the_heartbeat_is_a_change_with_records_and_a_diff(root):
    run(root)
    old = read(root / PROM)
    result = run(root, metrics=metrics(healthy=0, critical=1, stamp=1767229200))
    new = read(root / PROM)
    assert result["changed"] is True and result["heartbeat_only"] is False
    assert result["changes"] == [
        {"area": "health_textfile", "kind": "file", "target": str(root / PROM),
         "before": {"sha256": digest(old), "size": len(old), "mode": "0644"},
         "after": {"sha256": digest(new), "size": len(new), "mode": "0644"}},
        {"area": "health_textfile", "kind": "value", "target": 'gpufleet_audit_findings{severity="critical"}',
         "before": "0", "after": "1"},
        {"area": "health_textfile", "kind": "value", "target": "gpufleet_node_healthy", "before": "1", "after": "0"},
    ]
    assert result["diff"] == [{"before_header": str(root / PROM), "after_header": str(root / PROM),
                               "before": old, "after": new}]
    assert "gpufleet_node_healthy 0\n" in new and "gpufleet_audit_last_run_timestamp_seconds 1767229200\n" in new


def test_samples_added_and_removed_are_value_records(root):
    run(root)
    changed = metrics()
    changed[1]["samples"] = [{"labels": {"severity": "warning"}, "value": 2}, {"labels": {"severity": "info"}, "value": 3}]
    result = run(root, metrics=changed)
    assert [(c["target"], c["before"], c["after"]) for c in result["changes"][1:]] == [
        ('gpufleet_audit_findings{severity="critical"}', "0", None),
        ('gpufleet_audit_findings{severity="info"}', None, "3")]


def test_a_heartbeat_name_without_a_metric_this_run_is_allowed(root):
    run(root, heartbeat=[HEARTBEAT, "gpufleet_last_tuning_timestamp_seconds"])
    again = run(root, heartbeat=[HEARTBEAT, "gpufleet_last_tuning_timestamp_seconds"], metrics=metrics(stamp=5))
    assert again["changed"] is False and again["heartbeat_only"] is True


def test_a_heartbeat_metric_that_comes_or_goes_changes_the_file_but_has_no_value_record(root):
    run(root)
    fewer = metrics()[:2]
    result = run(root, metrics=fewer)
    assert result["changed"] is True and result["heartbeat_only"] is False
    assert [c["kind"] for c in result["changes"]] == ["file"]


def test_another_help_text_is_a_file_change_without_value_records(root):
    run(root)
    changed = metrics()
    changed[0]["help"] = "Another text."
    result = run(root, metrics=changed)
    assert result["changed"] is True and [c["kind"] for c in result["changes"]] == ["file"]


def test_another_mode_is_a_change_of_the_file(root):
    run(root)
    result = run(root, mode="0640")
    assert result["changed"] is True and result["heartbeat_only"] is False
    assert result["changes"][0]["before"]["mode"] == "0644" and result["changes"][0]["after"]["mode"] == "0640"
    assert oct(os.stat(str(root / PROM)).st_mode & 0o777) == "0o640"
    assert result["diff"] == [{"before_header": "%s owner and mode (before)" % (root / PROM),
                               "after_header": "%s owner and mode (after)" % (root / PROM),
                               "before": "mode = 0644\n", "after": "mode = 0640\n"}]


def test_a_heartbeat_change_with_another_mode_is_a_change(root):
    run(root)
    result = run(root, mode="0600", metrics=metrics(stamp=1))
    assert result["changed"] is True and result["heartbeat_only"] is False
    assert [c["kind"] for c in result["changes"]] == ["file"]
    assert "mode=0600 lets only the file's owner read" in result["warnings"][0]


@pytest.mark.parametrize("mode, bits", [("0644", 0o644), ("644", 0o644), ("0o640", 0o640), (0o600, 0o600), (420, 0o644)])
def test_mode_as_text_or_as_the_int_yaml_makes(root, mode, bits):
    run(root, mode=mode)
    assert os.stat(str(root / PROM)).st_mode & 0o777 == bits


def test_another_file_name_and_directory(root):
    write_tree(root, {"srv/textfiles": None})
    result = run(root, directory="/srv/textfiles/", file_name="gpu-health.prom")
    assert result["path"] == str(root / "srv/textfiles/gpu-health.prom") and read(result["path"]) == EXPECTED


def test_values_from_templates_arrive_as_text_and_are_written_as_numbers(root):
    result = run(root, metrics=[{"name": "m", "samples": [{"labels": {"gpu": 0}, "value": "3"},
                                                          {"labels": {"gpu": 1}, "value": "0.50"}]}], heartbeat=[])
    assert read(result["path"]).endswith('m{gpu="0"} 3\nm{gpu="1"} 0.5\n')


# ------------------------------------------------------------------------------ check mode

def test_check_mode_writes_nothing_and_reports_what_a_real_run_does(root):
    before = snapshot(root)
    checked = run(root, check_mode=True)
    assert snapshot(root) == before
    assert checked["changed"] is True and checked["msg"] == "would write %s (4 samples)" % (root / PROM)
    assert checked["diff"][0]["before_header"] == "%s (absent)" % (root / PROM) and checked["diff"][0]["after"] == EXPECTED
    real = run(root)
    for key in ("changes", "changed", "diff", "path", "samples", "heartbeat_only"):
        assert checked[key] == real[key], key


def test_check_mode_of_a_heartbeat_only_change_writes_nothing(root):
    run(root)
    before = snapshot(root)
    checked = run(root, check_mode=True, metrics=metrics(stamp=2))
    assert checked["changed"] is False and checked["heartbeat_only"] is True and checked["changes"] == []
    assert "would refresh them" in checked["msg"]
    assert snapshot(root) == before


def test_check_mode_of_a_value_change_writes_nothing(root):
    run(root)
    before = snapshot(root)
    checked = run(root, check_mode=True, metrics=metrics(healthy=0))
    assert checked["changed"] is True and len(checked["changes"]) == 2
    assert snapshot(root) == before


# ------------------------------------------------------------------------------ absent

def test_absent_removes_the_file_then_changes_nothing(root):
    run(root)
    old = read(root / PROM)
    checked = run(root, check_mode=True, state="absent", metrics=[])
    assert checked["changed"] is True and (root / PROM).exists()
    removed = run(root, state="absent", metrics=[], heartbeat=[])
    assert removed["changed"] is True and not (root / PROM).exists()
    assert removed["msg"] == "removed %s" % (root / PROM) and removed["samples"] == 0
    assert removed["changes"][0] == {"area": "health_textfile", "kind": "file", "target": str(root / PROM),
                                     "before": {"sha256": digest(old), "size": len(old), "mode": "0644"}, "after": None}
    assert [(c["target"], c["after"]) for c in removed["changes"][1:]] == [
        ('gpufleet_audit_findings{severity="critical"}', None), ('gpufleet_audit_findings{severity="warning"}', None),
        (HEARTBEAT, None), ("gpufleet_node_healthy", None)]  # no heartbeat given: its sample is a record too
    assert removed["diff"][0]["after_header"] == "%s (absent)" % (root / PROM)
    again = run(root, state="absent", metrics=[])
    assert again["changed"] is False and again["changes"] == [] and again["msg"] == "%s is absent" % (root / PROM)
    assert os.path.isdir(str(root / TEXTFILE_DIR))


def test_absent_leaves_heartbeat_metrics_out_of_the_records(root):
    run(root)
    removed = run(root, state="absent", metrics=[], heartbeat=[HEARTBEAT])
    assert HEARTBEAT not in [c["target"] for c in removed["changes"]]


def test_absent_without_the_directory_changes_nothing(tmp_path):
    result = ht.run({"state": "absent"}, paths=ht.Paths(str(tmp_path)))
    assert result["changed"] is False and "directory does not exist" in result["msg"]
    assert os.listdir(str(tmp_path)) == []


def test_absent_with_metrics_is_refused(root):
    with pytest.raises(ModuleFailure) as exc:
        run(root, state="absent")
    assert "state=absent removes the file: leave metrics out" in exc.value.message


# ------------------------------------------------------------------------------ refused paths

def test_a_missing_directory_is_an_error_naming_it_and_nothing_is_created(tmp_path):
    before = snapshot(tmp_path)
    with pytest.raises(ModuleFailure) as exc:
        ht.run({"metrics": metrics()}, paths=ht.Paths(str(tmp_path)))
    message = exc.value.message
    assert message.startswith("directory='/var/lib/prometheus/node-exporter': %s does not exist"
                              % (tmp_path / TEXTFILE_DIR)), message
    assert "--collector.textfile.directory" in message and "Nothing was created" in message
    assert snapshot(tmp_path) == before


def test_a_symlinked_directory_is_refused(root):
    write_tree(root, {"elsewhere": None})
    os.symlink(str(root / "elsewhere"), str(root / "srv-link"))
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root, directory="/srv-link")
    assert exc.value.message.startswith("directory='/srv-link': %s is a symlink; refusing to write through it"
                                        % (root / "srv-link"))
    assert snapshot(root) == before


def test_a_directory_that_is_a_file_is_refused(root):
    write_tree(root, {"srv/file": "x"})
    with pytest.raises(ModuleFailure) as exc:
        run(root, directory="/srv/file")
    assert exc.value.message == ("directory='/srv/file': %s is not a directory (it is a regular file), nothing was "
                                 "changed" % (root / "srv/file"))


@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_symlinked_file_is_refused_and_left(root, state):
    write_tree(root, {"target.prom": "# gpufleet.tuning\nm 1\n"})
    os.symlink(str(root / "target.prom"), str(root / PROM))
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root, state=state, metrics=metrics() if state == "present" else [])
    verb = "write" if state == "present" else "remove"
    assert exc.value.message.startswith("refusing to %s %s: it is a symlink (to %s)" % (verb, root / PROM, root / "target.prom"))
    assert snapshot(root) == before


def test_a_dangling_symlink_is_refused_too(root):
    os.symlink("/nowhere.prom", str(root / PROM))
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root)
    assert "it is a symlink (to /nowhere.prom)" in exc.value.message
    assert snapshot(root) == before


@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_file_without_the_marker_is_refused_and_left(root, state):
    foreign = "# HELP node_mine mine\nnode_mine 1\n"
    write_tree(root, {PROM: foreign})
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root, state=state, metrics=metrics() if state == "present" else [])
    verb = "overwrite" if state == "present" else "remove"
    assert exc.value.message.startswith("refusing to %s %s: it was not written by gpufleet.tuning" % (verb, root / PROM))
    assert "choose another file_name" in exc.value.message
    assert snapshot(root) == before


def test_a_directory_where_the_file_belongs_is_refused(root):
    write_tree(root, {PROM: None})
    with pytest.raises(ModuleFailure) as exc:
        run(root)
    assert exc.value.message.startswith("cannot read %s, nothing was changed" % (root / PROM))


def test_a_file_of_ours_that_does_not_parse_is_replaced_with_a_warning(root):
    write_tree(root, {PROM: "# gpufleet.tuning\nbroken{ 1\n"})
    result = run(root)
    assert result["changed"] is True and read(root / PROM) == EXPECTED
    assert "does not read as the Prometheus text format" in result["warnings"][0]
    assert [c["before"] for c in result["changes"][1:]] == [None, None, None]


# ------------------------------------------------------------------------------ bad inputs

@pytest.mark.parametrize("params, words", [
    (dict(directory="var/lib/node-exporter"), "directory='var/lib/node-exporter' must be an absolute path"),
    (dict(directory=""), "directory='' must be an absolute path"),
    (dict(directory="/a\0b"), "must be an absolute path"),
    (dict(file_name="gpufleet.txt"), "file_name='gpufleet.txt' must end in .prom"),
    (dict(file_name=".prom"), "file_name='.prom' must end in .prom"),
    (dict(file_name=".hidden.prom"), "file_name='.hidden.prom' must be a plain file name"),
    (dict(file_name="../x.prom"), "file_name='../x.prom' must be a plain file name"),
    (dict(file_name="a/b.prom"), "file_name='a/b.prom' must be a plain file name"),
    (dict(file_name="a\nb.prom"), "must be a plain file name"),
    (dict(file_name="x" * 300 + ".prom"), "at most 255 bytes"),
    (dict(state="gone"), "state='gone' is not one of present, absent"),
    (dict(mode="rw-r--r--"), "mode='rw-r--r--' is not a file mode"),
    (dict(mode="01777"), "mode='01777' is not a file mode"),
    (dict(mode=0o4755), "mode=2541 is not a file mode"),
    (dict(mode=True), "mode=True is not a file mode"),
    (dict(metrics=[]), "metrics is empty: give at least one metric, or state=absent"),
    (dict(metrics=[{"name": "gpufleet-healthy", "samples": [{"value": 1}]}]),
     "metrics[0]: metric name 'gpufleet-healthy' is not valid ([a-zA-Z_:][a-zA-Z0-9_:]*); nothing was written"),
    (dict(metrics=[{"name": "m", "samples": [{"labels": {"gpu-id": "0"}, "value": 1}]}]),
     "metrics[0] (m): samples[0]: label name 'gpu-id' is not valid"),
    (dict(metrics=[{"name": "m", "samples": [{"labels": {"__name__": "x"}, "value": 1}]}]),
     "label name '__name__' is not valid"),
    (dict(metrics=[{"name": "m", "samples": [{"value": True}]}]),
     "metrics[0] (m): samples[0]: value True is not a number (write 1 or 0 for a flag)"),
    (dict(metrics=[{"name": "m", "samples": [{"value": "healthy"}]}]), "samples[0]: value 'healthy' is not a number"),
    (dict(metrics=[{"name": "m", "samples": [{"value": None}]}]), "samples[0]: value None is not a number"),
    (dict(metrics=[{"name": "m", "samples": [{"value": [1]}]}]), "samples[0]: value [1] (list) is not a number"),
    (dict(metrics=[{"name": "m", "samples": [{"value": 1}, {"value": 2}]}]), "samples[1] repeats the labels of samples[0]: m"),
    (dict(metrics=[{"name": "m", "type": "summary", "samples": []}]), "type 'summary' is not one of gauge, counter, untyped"),
    (dict(metrics=[{"name": "m", "samples": []}, {"name": "m", "samples": []}]), "metric m is given twice"),
    (dict(heartbeat=["not a name"]), "heartbeat[0]: metric name 'not a name' is not valid"),
    (dict(heartbeat="gpufleet_node_healthy"), "heartbeat='gpufleet_node_healthy' is not a list"),
])
def test_bad_input_fails_naming_the_value_and_writes_nothing(root, params, words):
    run(root)  # a file already there must stay exactly as it is
    before = snapshot(root)
    with pytest.raises(ModuleFailure) as exc:
        run(root, **params)
    assert words in exc.value.message, exc.value.message
    assert snapshot(root) == before


def test_bad_input_on_a_fresh_node_creates_nothing(root):
    before = snapshot(root)
    with pytest.raises(ModuleFailure):
        run(root, metrics=[{"name": "m", "samples": [{"value": "x"}]}])
    assert snapshot(root) == before and os.listdir(str(root / TEXTFILE_DIR)) == []


def test_defaults_are_the_spec_defaults():
    params = ht.validate({"metrics": metrics()})
    assert params["directory"] == "/var/lib/prometheus/node-exporter" and params["file_name"] == "gpufleet.prom"
    assert params["mode"] == 0o644 and params["state"] == "present" and params["heartbeat"] == []
    assert ht.ARGUMENT_SPEC["directory"]["default"] == ht.DEFAULT_DIRECTORY


# ------------------------------------------------------------------------------ atomicity

def test_a_failed_rename_leaves_the_old_file_and_no_temporary_file(root, monkeypatch):
    run(root)
    before = snapshot(root)

    def refuse(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "rename", refuse)
    with pytest.raises(ModuleFailure) as exc:
        run(root, metrics=metrics(healthy=0))
    assert exc.value.message.startswith("failed to write %s: %s: No space left on device" % (root / PROM, root / PROM))
    assert "everything applied before it was restored" in exc.value.message
    assert exc.value.partial["changes"] == [] and exc.value.partial["changed"] is False
    assert snapshot(root) == before and read(root / PROM) == EXPECTED
    assert os.listdir(str(root / TEXTFILE_DIR)) == ["gpufleet.prom"]


def test_a_failed_first_write_leaves_no_file(root, monkeypatch):
    def refuse(src, dst):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "rename", refuse)
    with pytest.raises(ModuleFailure):
        run(root)
    assert os.listdir(str(root / TEXTFILE_DIR)) == []


def test_a_write_that_does_not_read_back_is_undone(root, monkeypatch):
    run(root)
    before = snapshot(root)
    real = ht.fileops.read_text
    calls = []

    def stale(path):
        calls.append(path)
        text = real(path)
        return text if len(calls) == 1 else text + "garbage\n"   # the plan's read, then the read-back
    monkeypatch.setattr(ht.fileops, "read_text", stale)
    with pytest.raises(ModuleFailure) as exc:
        run(root, metrics=metrics(healthy=0))
    assert "does not hold the new metrics after the write" in exc.value.message
    assert snapshot(root) == before
