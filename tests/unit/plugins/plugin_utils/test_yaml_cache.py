"""plugins/plugin_utils/yaml_cache.py: a YAML file's data kept as JSON on the controller and used
only while the file is unchanged and the copy is this user's own; data JSON cannot hold the
same is never kept; a broken file fails as PyYAML fails."""

import datetime
import os

import pytest
import yaml

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import controller_cache, yaml_cache


def kept(path):
    return yaml_cache._entry(str(path))  # pylint: disable=protected-access


def test_parsed_once_then_read_from_the_copy(local_tmp):
    source = local_tmp / "rules.yml"
    source.write_text("rules:\n  - id: a\n    severity: P0\n")
    assert yaml_cache.load(str(source)) == {"rules": [{"id": "a", "severity": "P0"}]}
    entry = kept(source)
    assert os.path.isfile(entry) and oct(os.stat(entry).st_mode & 0o777) == "0o600"
    assert oct(os.stat(controller_cache.folder()).st_mode & 0o777) == "0o700"
    # The copy is what is read while the file is unchanged (proved by editing the copy).
    text = open(entry).read().replace('"P0"', '"P9"')
    open(entry, "w").write(text)
    assert yaml_cache.load(str(source))["rules"][0]["severity"] == "P9"


def test_a_changed_file_is_parsed_again(local_tmp):
    source = local_tmp / "rules.yml"
    source.write_text("a: 1\n")
    assert yaml_cache.load(str(source)) == {"a": 1}
    source.write_text("a: 22\n")
    assert yaml_cache.load(str(source)) == {"a": 22}


def test_a_copy_others_could_write_is_not_used(local_tmp):
    source = local_tmp / "rules.yml"
    source.write_text("a: 1\n")
    yaml_cache.load(str(source))
    entry = kept(source)
    open(entry, "w").write(open(entry).read().replace('"a": 1', '"a": 5'))
    os.chmod(entry, 0o666)
    assert yaml_cache.load(str(source)) == {"a": 1}


def test_data_json_cannot_hold_is_not_kept(local_tmp):
    source = local_tmp / "dates.yml"
    source.write_text("when: 2026-01-01\n1: one\n")
    assert yaml_cache.load(str(source)) == {"when": datetime.date(2026, 1, 1), 1: "one"}
    assert not os.path.exists(kept(source))


def test_a_broken_file_fails_as_pyyaml_does(local_tmp):
    source = local_tmp / "broken.yml"
    source.write_text("a: [1\n")
    with pytest.raises(yaml.YAMLError):
        yaml_cache.load(str(source))
    with pytest.raises(OSError):
        yaml_cache.load(str(local_tmp / "missing.yml"))


def test_entries_not_written_for_30_days_are_removed_when_another_is_written(local_tmp):
    old = local_tmp / "old.yml"
    old.write_text("a: 1\n")
    yaml_cache.load(str(old))
    stale = kept(old)
    month = 31 * 24 * 3600
    os.utime(stale, (os.stat(stale).st_atime - month, os.stat(stale).st_mtime - month))
    fresh = local_tmp / "new.yml"
    fresh.write_text("b: 2\n")
    yaml_cache.load(str(fresh))
    assert not os.path.exists(stale) and os.path.exists(kept(fresh))
