"""The engine contract and the change-record contract, checked the same way for every module.

- every engine result carries ``changes`` records of its area that agree with ``changed``, and
  a failure (ModuleFailure) claims none: ``assert_records`` and ``checking_records`` (wrap an
  engine's run() for a whole test file);
- every module is its engine's shell: main() passes the engine's ARGUMENT_SPEC to
  AnsibleModule, DOCUMENTATION lists exactly those options with the same type, elements,
  default, choices, aliases and required, and RETURN documents ``changes`` with the text all
  modules share (ansible-doc has no RETURN doc fragments, so each module writes it out).
"""

import functools
import importlib
import os

import pytest
import yaml

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.plugins import modules as modules_package
from ansible_collections.gpufleet.tuning.plugins.doc_fragments import state_record
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder


def assert_records(result, area):
    """``changes`` is a list of records of ``area``, a value record changes its value, and
    ``changed`` is true exactly when the list is not empty. Returns the records."""
    changes = result["changes"]
    assert isinstance(changes, list), changes
    assert all(records.is_record(item) and item["area"] == area for item in changes), changes
    assert all(item["before"] != item["after"] for item in changes if item["kind"] == "value"), changes
    assert result["changed"] is bool(changes), (result["changed"], changes)
    return changes


def assert_no_change_claimed(partial):
    """A failure's partial result carries no change records: what it applied was restored."""
    assert not partial.get("changes"), partial.get("changes")


def checking_records(monkeypatch, engine, area=None):
    """Wrap ``engine.run`` so every call in a test keeps the record contract."""
    real = engine.run
    area = area or engine.AREA

    @functools.wraps(real)
    def run(*args, **kwargs):
        try:
            result = real(*args, **kwargs)
        except ModuleFailure as exc:
            assert_no_change_claimed(exc.partial)
            raise
        assert_records(result, area)
        return result
    monkeypatch.setattr(engine, "run", run)


def shared_changes_doc():
    """The ``changes`` documentation every module writes out (without its sample); fails naming
    the modules whose copy differs from the others'."""
    folder = list(modules_package.__path__)[0]
    docs = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and not name.startswith("_"):
            module = importlib.import_module("%s.%s" % (modules_package.__name__, name[:-3]))
            doc = (yaml.safe_load(module.RETURN) or {}).get("changes")
            if doc is not None:
                docs[name[:-3]] = {key: value for key, value in doc.items() if key != "sample"}
    texts = list(docs.values())
    assert texts and all(text == texts[0] for text in texts), sorted(
        name for name, text in docs.items() if text != texts[0])
    return texts[0]


def shared_return_doc(key):
    """The RETURN entry ``key`` of the modules that document it, the same in each; fails naming
    the modules whose copy differs."""
    folder = list(modules_package.__path__)[0]
    docs = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and not name.startswith("_"):
            module = importlib.import_module("%s.%s" % (modules_package.__name__, name[:-3]))
            doc = (yaml.safe_load(module.RETURN) or {}).get(key)
            if doc is not None:
                docs[name[:-3]] = doc
    texts = list(docs.values())
    assert texts and all(text == texts[0] for text in texts), sorted(name for name, text in docs.items() if text != texts[0])
    return texts[0]


def assert_module_is_its_engines_shell(module, engine, monkeypatch):
    """main() hands the engine's ARGUMENT_SPEC to AnsibleModule, DOCUMENTATION matches it
    option by option, and RETURN documents ``changes`` with the shared text."""
    seen = {}

    class Stop(Exception):
        pass

    def fake_module(argument_spec, **kwargs):
        seen.update(spec=argument_spec, kwargs=kwargs)
        raise Stop()
    monkeypatch.setattr(module, "AnsibleModule", fake_module)
    with pytest.raises(Stop):
        module.main()
    documentation = yaml.safe_load(module.DOCUMENTATION)
    doc = dict(documentation["options"])
    expected = engine.ARGUMENT_SPEC
    if "gpufleet.tuning.state_record" in (documentation.get("extends_documentation_fragment") or []):
        # A tuning module records its own before-state: the engine's options and the record's.
        expected = recorder.spec(engine.ARGUMENT_SPEC)
        assert module.ARGUMENT_SPEC == expected
        assert seen["spec"] is module.ARGUMENT_SPEC
        doc.update(yaml.safe_load(state_record.ModuleDocFragment.DOCUMENTATION)["options"])
        # Written out in each module, as changes is: the same text everywhere.
        assert yaml.safe_load(module.RETURN)["state_record"] == shared_return_doc("state_record")
    else:
        assert seen["spec"] is engine.ARGUMENT_SPEC
    assert seen["kwargs"].get("supports_check_mode") is True

    assert sorted(doc) == sorted(expected)
    for name, spec in expected.items():
        assert doc[name].get("type", "str") == spec.get("type", "str"), name
        for key in ("elements", "default", "choices", "aliases"):
            assert doc[name].get(key) == spec.get(key), (name, key)
        assert bool(doc[name].get("required")) == bool(spec.get("required")), name

    changes = dict(yaml.safe_load(module.RETURN)["changes"])
    sample = changes.pop("sample", None) or []
    if hasattr(engine, "AREA"):  # read-only modules (no AREA) show the shape of another's records
        assert all(item["area"] == engine.AREA for item in sample), engine.AREA
    assert changes == shared_changes_doc()
    with open(module.__file__) as handle:
        assert "RETURN doc fragments are not supported by ansible-doc" in handle.read()
