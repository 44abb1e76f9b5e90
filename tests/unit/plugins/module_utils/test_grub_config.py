"""GRUB's shell files: quoting, evaluation across grub.d, bases and layers, byte-exact edits."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils import grub_config as gc
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree


def load(tmp_path, files):
    write_tree(tmp_path, files)
    return gc.GrubConfig(str(tmp_path / "etc")).load(fileops.read_text)


@pytest.mark.parametrize("word, value, style", [
    ('"quiet splash"', "quiet splash", '"'),
    ("'quiet splash'", "quiet splash", "'"),
    ("quiet", "quiet", ""),
    ('""', "", '"'),
    ('"a \\"b c\\" \\$d \\\\e"', 'a "b c" $d \\e', '"'),
    ("'a \"b\"'", 'a "b"', "'"),
    ('"a"\'b\'c', "abc", '"'),
    ('"multi\nline"', "multi\nline", '"'),
    ('"cont\\\nline"', "contline", '"'),
])
def test_parse_word_literal(word, value, style):
    text = "X=" + word + " # trailing comment\n"
    parts, end, complex_, got_style = gc.parse_word(text, 2)
    assert "".join(part[1] for part in parts) == value
    assert [part[0] for part in parts] == ["lit"] * len(parts)
    assert text[end:] == " # trailing comment\n"
    assert not complex_ and got_style == style


def test_parse_word_variables_and_complex():
    parts, _end, complex_, _style = gc.parse_word('"$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"', 0)
    assert parts == [("var", "GRUB_CMDLINE_LINUX_DEFAULT"), ("lit", " iommu=pt")] and not complex_
    parts, _end, complex_, _style = gc.parse_word('"${GRUB_CMDLINE_LINUX_DEFAULT}"', 0)
    assert parts == [("var", "GRUB_CMDLINE_LINUX_DEFAULT")] and not complex_
    assert gc.parse_word('"$(cat /x) quiet"', 0)[2] is True
    assert gc.parse_word('"`cat /x` quiet"', 0)[2] is True
    assert gc.parse_word('"${X:-quiet}"', 0)[2] is True
    with pytest.raises(gc.GrubError, match="unterminated double quote"):
        gc.parse_word('"quiet', 0)


@pytest.mark.parametrize("value, style, rendered", [
    ("quiet iommu=pt", '"', '"quiet iommu=pt"'),
    ("quiet iommu=pt", "'", "'quiet iommu=pt'"),
    ("quiet", "", "quiet"),
    ("quiet iommu=pt", "", '"quiet iommu=pt"'),
    ('foo="a b"', "'", "'foo=\"a b\"'"),
    ('foo="a b"', '"', '"foo=\\"a b\\""'),
    ("", "", '""'),
])
def test_quote_keeps_style_and_round_trips(value, style, rendered):
    assert gc.quote(value, style) == rendered
    parts = gc.parse_word(rendered, 0)[0]
    assert "".join(part[1] for part in parts) == value


DEBIAN = (
    "# If you change this file, run 'update-grub' afterwards to update\n"
    "GRUB_DEFAULT=0\n"
    "GRUB_TIMEOUT=5\n"
    "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n"
    "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"
    "GRUB_CMDLINE_LINUX=\"\"\n"
    "#GRUB_CMDLINE_LINUX_DEFAULT=\"commented out\"\n"
)


def test_debian_file_bases_and_effective_line(tmp_path):
    config = load(tmp_path, {"etc/default/grub": DEBIAN})
    assert config.base(gc.DEFAULT).literal_text() == "quiet"
    assert config.base(gc.DEFAULT).line == 5
    assert config.base(gc.LINUX).literal_text() == ""
    assert config.effective_line() == ("quiet", [])
    assert config.overrides() == [] and config.layers(gc.DEFAULT) == []


def test_render_changes_only_the_value(tmp_path):
    config = load(tmp_path, {"etc/default/grub": DEBIAN})
    out = config.render({gc.DEFAULT: "quiet iommu=pt"})
    assert out == {config.main_path: DEBIAN.replace('DEFAULT="quiet"', 'DEFAULT="quiet iommu=pt"')}


def test_render_appends_a_missing_assignment(tmp_path):
    text = "GRUB_TIMEOUT=5"  # no trailing newline
    config = load(tmp_path, {"etc/default/grub": text})
    assert config.base(gc.DEFAULT) is None
    out = config.render({gc.DEFAULT: "iommu=pt"})
    assert out[config.main_path] == 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="iommu=pt"\n'


def test_last_assignment_wins_and_export_is_read(tmp_path):
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nexport GRUB_CMDLINE_LINUX_DEFAULT=\'quiet splash\'\n'
    config = load(tmp_path, {"etc/default/grub": text})
    assert config.base(gc.DEFAULT).line == 2 and config.base(gc.DEFAULT).style == "'"
    out = config.render({gc.DEFAULT: "splash"})
    assert out[config.main_path] == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nexport GRUB_CMDLINE_LINUX_DEFAULT=\'splash\'\n'


def test_grub_d_override_becomes_the_base(tmp_path):
    config = load(tmp_path, {
        "etc/default/grub": DEBIAN,
        "etc/default/grub.d/50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"\n',
        "etc/default/grub.d/README": 'GRUB_CMDLINE_LINUX_DEFAULT="not a cfg file: not sourced"\n',
    })
    base = config.base(gc.DEFAULT)
    assert base.path.endswith("grub.d/50-cloudimg-settings.cfg")
    assert config.effective_line()[0] == "console=tty1 console=ttyS0"
    assert [p.rsplit("/", 1)[1] for p in config.overrides()] == ["50-cloudimg-settings.cfg"]


def test_appending_grub_d_is_a_layer(tmp_path):
    config = load(tmp_path, {
        "etc/default/grub": DEBIAN,
        "etc/default/grub.d/10-a.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT nosplash"\n',
        "etc/default/grub.d/20-b.cfg": 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} ro"\n',
    })
    assert config.base(gc.DEFAULT).path == config.main_path
    assert [a.path.rsplit("/", 1)[1] for a in config.layers(gc.DEFAULT)] == ["10-a.cfg"]
    assert [a.path.rsplit("/", 1)[1] for a in config.layers(gc.LINUX)] == ["20-b.cfg"]
    assert config.effective_line() == ("ro quiet nosplash", [])
    edited = config.with_changes(config.render({gc.DEFAULT: "quiet iommu=pt"}))
    assert edited.effective_line()[0] == "ro quiet iommu=pt nosplash"


def test_expansions_are_noted_not_guessed(tmp_path):
    config = load(tmp_path, {
        "etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA"\nGRUB_CMDLINE_LINUX="$(cat /etc/x)"\n',
    })
    assert not config.base(gc.DEFAULT).literal
    line, notes = config.effective_line()
    assert line == "quiet"
    assert any("$EXTRA" in n for n in notes) and any("shell expansions" in n for n in notes)
    assert set(config.read_only()) == {config.base(gc.DEFAULT), config.base(gc.LINUX)}


def test_unparsable_file_names_the_line(tmp_path):
    write_tree(tmp_path, {"etc/default/grub": 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet\n'})
    with pytest.raises(gc.GrubError, match=r"grub line 2: cannot parse GRUB_CMDLINE_LINUX_DEFAULT"):
        gc.GrubConfig(str(tmp_path / "etc")).load(fileops.read_text)


def test_missing_main_file(tmp_path):
    with pytest.raises(gc.GrubError, match="does not exist"):
        gc.GrubConfig(str(tmp_path / "etc")).load(fileops.read_text)
