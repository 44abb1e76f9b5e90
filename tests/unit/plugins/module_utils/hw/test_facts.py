"""hw/facts: the envelope of one node fact."""

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts


def test_read_parse_and_unknowns(tmp_path):
    (tmp_path / "latency").write_text("133\n")
    (tmp_path / "bad").write_text("abc\n")
    assert facts.read(str(tmp_path / "latency"), int) == {"value": 133, "source": str(tmp_path / "latency")}
    assert facts.read(str(tmp_path / "latency")) == {"value": "133", "source": str(tmp_path / "latency")}
    bad = facts.read(str(tmp_path / "bad"), int)
    assert bad["value"] is None and "cannot parse 'abc'" in bad["unknown"] and facts.is_fact(bad)
    missing = facts.read(str(tmp_path / "none"))
    assert missing["value"] is None and "does not exist" in missing["unknown"]
    (tmp_path / "dir").mkdir()
    assert "directory" in facts.read(str(tmp_path / "dir"))["unknown"]


def test_value_and_shape():
    assert facts.value(facts.fact(0, "x")) == 0
    assert facts.value(facts.unknown("x", "no"), "?") == "?"
    assert facts.value("plain", 1) == 1
    assert facts.is_fact(facts.fact(1, "s")) and not facts.is_fact({"value": 1})
