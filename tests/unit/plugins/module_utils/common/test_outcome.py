"""outcome.finish: one exit path, and no traceback whatever an engine lets escape."""

import errno
import json

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


class FakeModule:
    def __init__(self):
        self.warnings = []
        self.exit = None

    def warn(self, text):
        self.warnings.append(text)

    def fail_json(self, **kwargs):
        self.exit = dict(kwargs, failed=True)
        json.dumps(self.exit)  # what AnsibleModule does; must not raise
        raise SystemExit(1)

    def exit_json(self, **kwargs):
        self.exit = kwargs
        json.dumps(self.exit)
        raise SystemExit(0)


def finish(run):
    module = FakeModule()
    with pytest.raises(SystemExit):
        outcome.finish(module, run)
    return module


def test_failure_drops_change_keys_and_keeps_what_was_learnt():
    def run():
        raise outcome.ModuleFailure("bad", {"changed": True, "diff": [], "changes": [{"kind": "value"}], "found": 3,
                                            "warnings": ["w"]})
    module = finish(run)
    assert module.exit == {"msg": "bad", "found": 3, "failed": True}
    assert module.warnings == ["w"]


def test_an_escaped_oserror_names_the_path():
    def run():
        raise OSError(errno.EROFS, "Read-only file system", "/etc/default/grub")
    module = finish(run)
    assert module.exit["failed"] and "/etc/default/grub: Read-only file system (EROFS)" in module.exit["msg"]


def test_undecodable_config_bytes_do_not_break_the_result():
    text = b"description: caf\xe9\n".decode("utf-8", "surrogateescape")
    module = finish(lambda: {"changed": False, "diff": [{"before": text}], "warnings": [text]})
    assert module.exit["diff"][0]["before"] == "description: caf\ufffd\n"
    assert module.warnings == ["description: caf\ufffd\n"]
