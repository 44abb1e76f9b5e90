import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction


def test_rollback_runs_newest_first():
    log = []
    tx = Transaction()
    tx.step("a", lambda: log.append("do a"), lambda: log.append("undo a"))
    tx.step("b", lambda: log.append("do b"), lambda: log.append("undo b"))
    err = tx.abort("c failed")
    assert log == ["do a", "do b", "undo b", "undo a"]
    assert err.rollback_errors == []
    assert "restored" in err.full_message()


def test_failed_action_is_not_undone():
    log = []
    tx = Transaction()
    tx.step("a", lambda: log.append("do a"), lambda: log.append("undo a"))

    def fail():
        raise OSError(22, "Invalid argument")

    with pytest.raises(OSError):
        tx.step("b", fail, lambda: log.append("undo b"))
    tx.rollback()
    assert log == ["do a", "undo a"]


def test_undo_failure_reported_and_rest_still_undone():
    log = []
    tx = Transaction()
    tx.record("a", lambda: log.append("undo a"))

    def bad_undo():
        raise OSError(5, "Input/output error")

    tx.record("b", bad_undo)
    err = tx.abort("boom")
    assert log == ["undo a"]
    assert len(err.rollback_errors) == 1 and "undo of b" in err.rollback_errors[0]
    assert "ALSO failed" in err.full_message()
