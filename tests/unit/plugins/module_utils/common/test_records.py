"""records: the structured change records every module returns."""

import hashlib

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records

MARK = "# Managed by Ansible (gpufleet.tuning.test)\n"


def test_value_records_carry_text_and_only_differences():
    got = records.values("sysctl", {"vm.swappiness": "60", "kernel.numa_balancing": 0, "same": "1"},
                         {"vm.swappiness": 10, "kernel.numa_balancing": "0", "same": "1", "new": "x"})
    assert got == [
        {"area": "sysctl", "kind": "value", "target": "new", "before": None, "after": "x"},
        {"area": "sysctl", "kind": "value", "target": "vm.swappiness", "before": "60", "after": "10"},
    ]
    assert all(records.is_record(r) for r in got)


def test_file_records_hold_a_digest_never_the_content():
    secret = "lxc.environment: HF_TOKEN=hf_secret\n"
    rec = records.file_change("lxc_memlock", "/etc/pve/lxc/101.conf", secret, secret + "x\n", 0o600, 0o600)
    assert rec["before"] == {"sha256": hashlib.sha256(secret.encode()).hexdigest(), "size": len(secret),
                             "mode": "0600"}
    assert "hf_secret" not in str(rec)
    assert records.file_change("a", "/f", None, b"")["before"] is None
    assert records.file_change("a", "/f", "x", None)["after"] is None


def test_module_and_service_records():
    assert records.module_change("peermem", "nvidia_peermem", False, True)["after"] == "loaded"
    assert records.service_change("cpu_power", "gpufleet-cpu-power.service", "disabled", "enabled")["kind"] == "service"


def test_unknown_kind_is_a_programming_error():
    with pytest.raises(ValueError):
        records.record("a", "register", "x", 1, 2)


def test_from_managed_files_changes(tmp_path):
    unit = tmp_path / "system" / "x.service"
    (tmp_path / "gone").write_text(MARK)
    wanted = [managed_files.Wanted(str(unit), MARK + "[Unit]\n"),
              managed_files.unit_wants_link(str(tmp_path / "system"), "x.service"),
              managed_files.Wanted(str(tmp_path / "gone"))]
    got = records.from_managed("cpu_power", managed_files.plan(wanted))
    assert [r["target"] for r in got] == [str(unit), str(tmp_path / "system/multi-user.target.wants/x.service"),
                                          str(tmp_path / "gone")]
    assert got[0]["before"] is None and sorted(got[0]["after"]) == ["mode", "sha256", "size"]
    assert got[1]["before"] is None and got[1]["after"] == {"link": "../x.service"}
    assert got[2]["before"]["sha256"] == hashlib.sha256(MARK.encode()).hexdigest() and got[2]["after"] is None
    assert all(records.is_record(r) for r in got)


# --- claimed: which records a module result claims -----------------------------------------------

SWAP = records.value("sysctl", "vm.swappiness", "60", "10")
CONF = records.file_change("lxc_memlock", "/etc/pve/lxc/101.conf", b"a\n", b"a\nb\n", 0o640, 0o640)
WEB = records.file_change("lxc_memlock", "/etc/pve/lxc/104.conf", b"w\n", b"w\nb\n", 0o640, 0o640)


def test_claimed_a_plain_result_claims_its_own_changes():
    assert records.claimed({"changed": True, "changes": [SWAP, CONF]}) == [SWAP, CONF]
    assert records.claimed({"changed": True, "changes": [SWAP], "failed": False}) == [SWAP]
    assert records.claimed({"changed": False, "changes": []}) == []
    # a result without changes, or with null changes, claims nothing
    assert records.claimed({"changed": False}) == []
    assert records.claimed({"changed": False, "changes": None}) == []


def test_claimed_a_failed_result_claims_nothing():
    # a module restores what it applied before it fails
    assert records.claimed({"failed": True, "changes": [SWAP]}) == []
    assert records.claimed({"failed": True, "msg": "boom"}) == []


def test_claimed_a_loop_claims_the_items_that_did_not_fail():
    result = {"changed": True, "changes": [SWAP],  # the top level is not counted twice
              "results": [{"item": "101", "changed": True, "changes": [CONF]},
                          {"item": "150", "failed": True, "changes": [SWAP], "msg": "missing"},
                          {"item": "104", "changed": True, "failed": False, "changes": [WEB]}]}
    assert records.claimed(result) == [CONF, WEB]
    # a loop's failure (one item failed) still claims what the others changed
    assert records.claimed(dict(result, failed=True)) == [CONF, WEB]
    assert records.claimed({"results": []}) == []


def test_claimed_items_whose_changes_are_missing_or_not_records():
    result = {"results": [{"item": "a"},                      # no changes key
                          {"item": "b", "changes": None},    # null
                          {"item": "c", "changes": [CONF, "not a record", None, 3]},
                          "skipped item",                    # not a dict
                          None]}
    assert records.claimed(result) == [CONF]


@pytest.mark.parametrize("value", [None, [], [SWAP], "changes", 3, ("changes", [SWAP])])
def test_claimed_anything_but_a_dict_claims_nothing(value):
    assert records.claimed(value) == []


def test_claimed_results_that_are_not_a_list_are_no_loop():
    # ``results`` of another shape (a module's own field) does not make it a loop
    assert records.claimed({"changes": [SWAP], "results": {"a": 1}}) == [SWAP]
    assert records.claimed({"changes": [SWAP, "x"], "results": None}) == [SWAP]
