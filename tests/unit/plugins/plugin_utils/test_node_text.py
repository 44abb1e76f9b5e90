"""node_text: text from a node made plain and bounded before it reaches an artifact: controls
dropped (blanks as one space), line separators and bidi overrides dropped, the length bounded;
clean_tree does it to every string of JSON-like data and nothing else."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import node_text


def test_a_plain_name_is_left_as_it_is():
    for text in ("gpu-node-01.example.net", "NVIDIA H200", "570.124.06", "Llama-3.1-8B (ünïcode) 名前"):
        assert node_text.clean(text) == text


def test_tabs_and_line_breaks_become_one_space():
    assert node_text.clean("4096\t131072\t6291456") == "4096 131072 6291456"
    assert node_text.clean("a\r\n\tb\x0bc\x0cd") == "a b c d"
    assert node_text.clean("a \t b") == "a   b"  # spaces the node wrote are kept


@pytest.mark.parametrize("char", [chr(c) for c in list(range(0, 9)) + list(range(0x0e, 0x20)) + list(range(0x7f, 0xa0))])
def test_c0_c1_controls_and_del_are_dropped(char):
    assert node_text.clean("a%sb" % char) == "ab"


def test_an_ansi_escape_loses_its_escape():
    assert node_text.clean("\x1b[31mred\x1b[0m") == "[31mred[0m"


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                                  "\u2066", "\u2067", "\u2068", "\u2069"])
def test_line_separators_and_bidi_overrides_are_dropped(char):
    assert node_text.clean("gpu%s-node" % char) == "gpu-node"


def test_a_lone_surrogate_is_dropped():
    assert node_text.clean("a\udcffb") == "ab"


def test_the_length_is_bounded_with_an_ellipsis():
    assert len(node_text.clean("x" * 10000)) == node_text.LIMIT
    assert node_text.clean("x" * 10000).endswith("\u2026")
    assert node_text.clean("x" * node_text.LIMIT) == "x" * node_text.LIMIT
    assert node_text.clean("abcdef", limit=4) == "abc\u2026"
    # Bounded after the controls are gone: they do not count.
    assert node_text.clean("\x00" * 300 + "ok") == "ok"


def test_anything_else_becomes_its_text():
    assert node_text.clean(None) == ""
    assert node_text.clean(42) == "42"
    assert node_text.clean(["a\tb"]) == "['a\\tb']"


def test_the_same_text_cleans_the_same_way_twice():
    once = node_text.clean("a\t\x00b\u202e" + "y" * 300)
    assert node_text.clean(once) == once


def test_clean_tree_cleans_keys_and_values_and_leaves_the_rest():
    data = {"host\t1": {"sysctls": {"net.ipv4.tcp_rmem": "4096\t131072\t6291456"}, "gpus": ["H200\u202e", 2, None],
                        "ok": True, "ratio": 0.5, "pair": ("a\nb", 1)}}
    cleaned = node_text.clean_tree(data)
    assert cleaned == {"host 1": {"sysctls": {"net.ipv4.tcp_rmem": "4096 131072 6291456"}, "gpus": ["H200", 2, None],
                                  "ok": True, "ratio": 0.5, "pair": ("a b", 1)}}
    assert data["host\t1"]["gpus"][0] == "H200\u202e", "the input is not changed"


def test_clean_tree_bounds_with_its_own_limit():
    assert node_text.clean_tree({"m": "y" * 10000})["m"] == "y" * (node_text.TEXT_LIMIT - 1) + "\u2026"
    assert node_text.clean_tree(["y" * 10], limit=5) == ["yyyy\u2026"]
