"""plugins/plugin_utils/rules_cache.py: the audit's rules loaded once and kept on the controller;
the kept copy is what load_rules gives, used only while the rules file, the extra and disabled
rules and the code are unchanged and the copy is this user's own; a bad rule fails as before."""

import os
import pickle

import pytest

from ansible_collections.gpufleet.tuning.plugins.filter import audit_rules
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import controller_cache, rules_cache

RULE = {"id": "swappy", "severity": "P2", "title": "Swappiness high", "rationale": "Pages out the model.",
        "fix": {"class": "runtime", "module": "gpufleet.tuning.sysctl_profile", "tag": "runtime"},
        "facts": {"swappiness": "sysctl.\"vm.swappiness\""}, "when": "to_number(swappiness) > `10`",
        "message": "vm.swappiness is {swappiness}"}
FACTS = {"sysctl": {"vm.swappiness": {"value": "60", "source": "/proc/sys/vm/swappiness"}}}


@pytest.fixture
def rules_file(local_tmp):
    path = local_tmp / "rules.yml"
    path.write_text("# the rules, parsed by the caller\n")
    return str(path)


def read(path):
    """The rules file's stat key now, as the caller parsed it."""
    return controller_cache.stat_key(path)


def load(path, rules, extra=None, disabled=None):
    return rules_cache.load(path, read(path), rules, extra, disabled)


def entry(path, extra=None, disabled=None):
    return rules_cache._entry(rules_cache.key(path, read(path), extra, disabled))  # pylint: disable=protected-access


def judged(loaded):
    return audit_rules.evaluate_loaded(FACTS, loaded)


def test_the_kept_rules_judge_as_freshly_loaded_ones(rules_file):
    fresh = audit_rules.audit_rules(FACTS, [RULE])
    first = load(rules_file, [RULE])
    assert os.path.isfile(entry(rules_file)) and oct(os.stat(entry(rules_file)).st_mode & 0o777) == "0o600"
    again = load(rules_file, [RULE])
    assert judged(first) == judged(again) == fresh
    assert [f["message"] for f in fresh["findings"]] == ["vm.swappiness is 60"]


def test_the_copy_is_what_is_read_while_nothing_changed(rules_file):
    load(rules_file, [RULE])
    # Proved by giving the copy other rules under the same key: they are the ones used.
    other = audit_rules.load_rules([dict(RULE, severity="P0")])
    with open(entry(rules_file), "wb") as handle:
        pickle.dump((rules_cache.key(rules_file, read(rules_file), None, None), other), handle)
    assert judged(load(rules_file, [RULE]))["findings"][0]["severity"] == "P0"


def test_a_changed_rules_file_or_other_extra_rules_load_again(rules_file):
    load(rules_file, [RULE])
    with open(rules_file, "a") as handle:
        handle.write("# edited\n")
    assert judged(load(rules_file, [dict(RULE, severity="P1")]))["findings"][0]["severity"] == "P1"
    extra = [{"id": "swappy", "severity": "P0"}]
    assert judged(load(rules_file, [RULE], extra))["findings"][0]["severity"] == "P0"
    assert judged(load(rules_file, [RULE], None, ["swappy"]))["findings"] == []
    assert entry(rules_file, extra) != entry(rules_file) != entry(rules_file, None, ["swappy"])


def test_a_copy_others_could_write_or_a_damaged_one_is_not_used(rules_file):
    load(rules_file, [RULE])
    other = audit_rules.load_rules([dict(RULE, severity="P0")])
    with open(entry(rules_file), "wb") as handle:
        pickle.dump((rules_cache.key(rules_file, read(rules_file), None, None), other), handle)
    os.chmod(entry(rules_file), 0o666)
    assert judged(load(rules_file, [RULE]))["findings"][0]["severity"] == "P2"
    with open(entry(rules_file), "wb") as handle:
        handle.write(b"not a pickle")
    os.chmod(entry(rules_file), 0o600)
    assert judged(load(rules_file, [RULE]))["findings"][0]["severity"] == "P2"


def test_a_bad_rule_fails_as_load_rules_does_and_nothing_is_kept(rules_file):
    bad = dict(RULE, severity="P7")
    with pytest.raises(audit_rules.AnsibleFilterError, match="severity must be one of"):
        load(rules_file, [bad])
    assert not os.path.exists(entry(rules_file))


def test_a_missing_rules_file_is_loaded_and_not_kept(rules_file, tmp_path):
    missing = str(tmp_path / "gone.yml")
    assert read(missing) is None and rules_cache.key(missing, None, None, None) is None
    assert judged(load(missing, [RULE]))["findings"]
    folder = os.path.dirname(entry(rules_file))
    assert not os.path.isdir(folder) or not [name for name in os.listdir(folder) if name.startswith("rules-")]


def test_rules_parsed_before_an_edit_are_not_kept_under_the_edited_file(rules_file):
    parsed = read(rules_file)
    with open(rules_file, "a") as handle:
        handle.write("# edited after the caller parsed it\n")
    # Kept under the stat the content was parsed with, which the edited file no longer has.
    assert judged(rules_cache.load(rules_file, parsed, [dict(RULE, severity="P0")]))["findings"][0]["severity"] == "P0"
    assert not os.path.exists(entry(rules_file))
    assert judged(load(rules_file, [RULE]))["findings"][0]["severity"] == "P2"
