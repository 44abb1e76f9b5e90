"""GRUB's shell files: quoting, evaluation across grub.d, bases and layers, byte-exact edits."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import grub_config as gc
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


# --- read as shell: every assignment where the shell would see it, and what is not evaluated --

def test_assignments_found_the_way_the_shell_sees_them():
    text = ('GRUB_TIMEOUT=5; GRUB_CMDLINE_LINUX_DEFAULT="a"\n'
            'X=1 GRUB_CMDLINE_LINUX_DEFAULT=\'b\' GRUB_CMDLINE_LINUX=c # GRUB_CMDLINE_LINUX=comment\n'
            'export GRUB_CMDLINE_LINUX_DEFAULT GRUB_CMDLINE_LINUX\n'
            'Y="GRUB_CMDLINE_LINUX=not an assignment is flagged below"\n')
    found, problems = gc.parse_file("F", text)
    assert [(a.name, a.literal_text(), a.line) for a in found] == [
        (gc.DEFAULT, "a", 1), (gc.DEFAULT, "b", 2), (gc.LINUX, "c", 2)]
    assert problems == ["F line 4: GRUB_CMDLINE_LINUX is used in 'Y=\"GRUB_CMDLINE_LINUX=not an assignment is "
                        "flagged below\"', which this module does not evaluate (unset, +=, read, eval, "
                        "${GRUB_CMDLINE_LINUX:=...}, ...)"]


@pytest.mark.parametrize("text, fragment", [
    ('if [ -e /x ]; then\n  GRUB_CMDLINE_LINUX_DEFAULT="a"\nfi\n', "line 2: GRUB_CMDLINE_LINUX_DEFAULT is set conditionally"),
    ('if true; then GRUB_CMDLINE_LINUX="a"; fi\n', "line 1: GRUB_CMDLINE_LINUX is set conditionally"),
    ('[ -e /x ] || GRUB_CMDLINE_LINUX="a"\n', "set conditionally"),
    ('GRUB_CMDLINE_LINUX="a" &\n', "set conditionally"),
    ('for i in 1; do GRUB_CMDLINE_LINUX="a"; done\n', "set conditionally"),
    ('while false; do\nGRUB_CMDLINE_LINUX="a"\ndone\n', "line 2: GRUB_CMDLINE_LINUX is set conditionally"),
    ('case $x in\n a) GRUB_CMDLINE_LINUX="z" ;;\nesac\n', "line 2: GRUB_CMDLINE_LINUX is set conditionally"),
    ('( GRUB_CMDLINE_LINUX="z" )\n', "set conditionally"),
    ('{ GRUB_CMDLINE_LINUX="z"; }\n', "set conditionally"),
    ('f() {\n GRUB_CMDLINE_LINUX="z"\n}\n', "line 2: GRUB_CMDLINE_LINUX is set conditionally"),
    ('function f { :; }\n', "a shell function"),
    ('GRUB_CMDLINE_LINUX="z" update-grub\n', "environment prefix"),
    ('unset GRUB_CMDLINE_LINUX\n', "'unset GRUB_CMDLINE_LINUX'"),
    ('GRUB_CMDLINE_LINUX+=" z"\n', "+="),
    ('read GRUB_CMDLINE_LINUX < /x\n', "'read GRUB_CMDLINE_LINUX'"),
    ('eval "GRUB_CMDLINE_LINUX=z"\n', "runs or sources other shell code"),
    ('. /etc/default/grub.local\n', "runs or sources other shell code"),
    ('source /x\n', "runs or sources other shell code"),
    ('X=1 eval "$Y"\n', "runs or sources other shell code"),
    ('[ -e /x ] && return\n', "'return' can end the file early"),
    ('readonly GRUB_CMDLINE_LINUX=z\n', "'readonly'"),
    ('X=${GRUB_CMDLINE_LINUX:=z}\n', "${GRUB_CMDLINE_LINUX:=...}"),
    ('cat <<EOF\nGRUB_CMDLINE_LINUX=z\nEOF\n', "here-document"),
    ('if true; then\nX=1\n', "unterminated 'if'"),
    ('fi\n', "'fi' does not close anything"),
])
def test_constructs_not_evaluated_are_problems(text, fragment):
    _found, problems = gc.parse_file("F", text)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("text", [
    'X="$GRUB_CMDLINE_LINUX ${GRUB_CMDLINE_LINUX_DEFAULT} ${GRUB_CMDLINE_LINUX:-none} ${GRUB_CMDLINE_LINUX#x}"\n',
    'if [ -n "$GRUB_CMDLINE_LINUX" ]; then X=1; fi\n',
    'if true; then GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT init=/x"; fi\n',
    'export GRUB_CMDLINE_LINUX_DEFAULT="q"\n',
    'GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n',
    'X="$(echo a=b | cut -d= -f1)"\n',
])
def test_reads_and_conditional_layers_are_not_problems(text):
    assert gc.parse_file("F", text)[1] == []


def test_conditional_layer_is_read_and_noted(tmp_path):
    config = load(tmp_path, {
        "etc/default/grub": DEBIAN,
        "etc/default/grub.d/init-select.cfg":
            'if [ -x /x ]; then GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT init=/x"; fi\n',
    })
    assert config.problems == [] and config.base(gc.DEFAULT).path == config.main_path
    line, notes = config.effective_line()
    assert line == "quiet init=/x" and any("only under a condition" in n for n in notes)


def test_dropins_are_what_grub_mkconfig_sources(tmp_path):
    import os
    write_tree(tmp_path, {
        "etc/default/grub": DEBIAN,
        "etc/default/grub.d/10-a.cfg": "GRUB_TIMEOUT=1\n",
        "etc/default/grub.d/.hidden.cfg": "GRUB_TIMEOUT=2\n",
        "etc/default/grub.d/20-b.cfg.dpkg-old": "GRUB_TIMEOUT=3\n",
        "etc/default/grub.d/30-dir.cfg": None,
        "srv/40-link.cfg": "GRUB_TIMEOUT=4\n",
    })
    base = str(tmp_path / "etc/default/grub.d")
    os.symlink("../../../srv/40-link.cfg", base + "/40-link.cfg")
    os.symlink("../../../srv/missing.cfg", base + "/50-dangling.cfg")
    names = [p.rsplit("/", 1)[1] for p in gc.GrubConfig(str(tmp_path / "etc")).dropin_paths()]
    # [ -e ] is true for a directory: grub-mkconfig would try to source it, so it is listed
    # (and reading it fails, naming it); a dangling link and dot files are left out
    assert names == ["10-a.cfg", "30-dir.cfg", "40-link.cfg"]
    with pytest.raises(OSError) as exc:
        gc.GrubConfig(str(tmp_path / "etc")).load(fileops.read_text)
    assert exc.value.filename == base + "/30-dir.cfg"


def test_unlistable_dropin_dir_is_an_error_not_an_empty_list(tmp_path, monkeypatch):
    import errno
    import os
    write_tree(tmp_path, {"etc/default/grub": DEBIAN, "etc/default/grub.d": None})

    def listdir(path):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(gc.os, "listdir", listdir)
    with pytest.raises(OSError) as exc:
        gc.GrubConfig(str(tmp_path / "etc")).load(fileops.read_text)
    assert exc.value.filename == str(tmp_path / "etc/default/grub.d")

    def gone(_path):
        raise OSError(errno.ENOENT, "gone")

    monkeypatch.setattr(gc.os, "listdir", gone)
    assert gc.GrubConfig(str(tmp_path / "etc")).load(fileops.read_text).order == [str(tmp_path / "etc/default/grub")]
    assert os.path.isdir(str(tmp_path / "etc/default/grub.d"))
