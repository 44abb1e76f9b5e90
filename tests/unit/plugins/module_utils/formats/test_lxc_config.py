"""Config parsing and editing: whole-file bytes in, whole-file bytes out; limit grammar."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import lxc_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw.rlimit import INFINITY
from ansible_collections.gpufleet.tuning.tests.unit.plugins.module_utils import lxc_fixtures as fx

KEY = lxc_config.MEMLOCK_KEY


def edit(data, path, value="unlimited", keep=None):
    return lxc_config.ContainerConfig(data, path).set_key(KEY, value, keep=keep)


# --- whole-file edits -------------------------------------------------------------------------

@pytest.mark.parametrize("before, path, after", [
    (fx.PVE_PLAIN, "/etc/pve/lxc/101.conf", fx.AFTER_PVE_PLAIN),
    (fx.PVE_SNAPSHOTS, "/etc/pve/lxc/102.conf", fx.AFTER_PVE_SNAPSHOTS),
    (fx.PVE_EXISTING_DUPLICATES, "/etc/pve/lxc/103.conf", fx.AFTER_PVE_EXISTING_DUPLICATES),
    (fx.LXC_PLAIN, "/var/lib/lxc/serving/config", fx.AFTER_LXC_PLAIN),
    (fx.LXC_NO_FINAL_NEWLINE, "/srv/lxc/serving/config", fx.AFTER_LXC_NO_FINAL_NEWLINE),
    (fx.LXC_CRLF, "/srv/lxc/serving/config", fx.AFTER_LXC_CRLF),
])
def test_edit_gives_exact_file(before, path, after):
    assert edit(before, path) == after


def test_round_trip_without_change_is_identical():
    for data in (fx.PVE_PLAIN, fx.PVE_SNAPSHOTS, fx.LXC_CRLF, fx.LXC_NO_FINAL_NEWLINE):
        assert lxc_config.join_lines(lxc_config.split_lines(data)) == data


def test_edit_is_idempotent():
    once = edit(fx.PVE_SNAPSHOTS, "/etc/pve/lxc/102.conf")
    assert edit(once, "/etc/pve/lxc/102.conf") == once
    once = edit(fx.LXC_NO_FINAL_NEWLINE, "/srv/lxc/x/config")
    assert edit(once, "/srv/lxc/x/config") == once


def test_snapshot_and_pending_lines_are_never_matched():
    config = lxc_config.ContainerConfig(fx.PVE_SNAPSHOTS, "/etc/pve/lxc/102.conf")
    assert config.entries(KEY) == []  # the two memlock lines live in [before-driver-580] and [pve:pending]
    assert config.live_end == fx.PVE_SNAPSHOTS.split(b"\n").index(b"[before-driver-580]")


def _unlimited(raw):
    return lxc_config.parse_lxc_value(raw) == (INFINITY, INFINITY)


def test_keep_leaves_an_equivalent_spelling_byte_for_byte():
    same = _unlimited
    assert edit(fx.LXC_MINUS_ONE, "/var/lib/lxc/serving/config", keep=same) == fx.LXC_MINUS_ONE
    # without keep the value is rewritten in place, spacing kept
    assert edit(fx.LXC_MINUS_ONE, "/var/lib/lxc/serving/config") == fx.LXC_MINUS_ONE.replace(
        b"lxc.prlimit.memlock=-1\n", b"lxc.prlimit.memlock=unlimited\n")


def test_dropping_a_last_duplicate_keeps_the_missing_final_newline():
    data = b"lxc.uts.name = a\nlxc.prlimit.memlock = 1\nlxc.net.0.type = empty\nlxc.prlimit.memlock = 2"
    assert edit(data, "/x/a/config") == (
        b"lxc.uts.name = a\nlxc.prlimit.memlock = unlimited\nlxc.net.0.type = empty")


def test_duplicates_only_in_live_section_are_dropped():
    data = (b"arch: amd64\nlxc.prlimit.memlock: 1\nhostname: a\nlxc.prlimit.memlock: 2\n"
            b"\n[snap]\narch: amd64\nlxc.prlimit.memlock: 1\nlxc.prlimit.memlock: 2\n")
    assert edit(data, "/etc/pve/lxc/100.conf", value="4096") == (
        b"arch: amd64\nlxc.prlimit.memlock: 4096\nhostname: a\n"
        b"\n[snap]\narch: amd64\nlxc.prlimit.memlock: 1\nlxc.prlimit.memlock: 2\n")


def test_append_goes_after_last_non_blank_line_of_live_section():
    data = b"lxc.uts.name = a\nlxc.rootfs.path = dir:/r\n\n\n"
    assert edit(data, "/x/a/config") == b"lxc.uts.name = a\nlxc.rootfs.path = dir:/r\nlxc.prlimit.memlock = unlimited\n\n\n"


def test_append_in_a_pve_file_that_starts_with_description_only_before_keys():
    data = b"#only%20a%20description\narch: amd64\nhostname: x\n\n[pve:pending]\ncores: 4\n"
    assert edit(data, "/etc/pve/lxc/100.conf") == (
        b"#only%20a%20description\narch: amd64\nhostname: x\nlxc.prlimit.memlock: unlimited\n"
        b"\n[pve:pending]\ncores: 4\n")


def test_commented_key_and_description_mentions_are_not_the_key():
    data = (b"#lxc.prlimit.memlock: 1 is what the vendor suggested\n"
            b"# lxc.prlimit.memlock = 2\n"
            b"arch: amd64\nhostname: x\n")
    assert lxc_config.ContainerConfig(data, "/etc/pve/lxc/100.conf").entries(KEY) == []
    assert edit(data, "/etc/pve/lxc/100.conf") == data + b"lxc.prlimit.memlock: unlimited\n"


def test_similar_longer_key_is_not_the_key():
    data = b"lxc.uts.name = a\nlxc.prlimit.memlockx = 5\n"
    assert edit(data, "/x/a/config") == data + b"lxc.prlimit.memlock = unlimited\n"


@pytest.mark.parametrize("line, value", [
    (b"lxc.prlimit.memlock: 65536", "65536"),
    (b"lxc.prlimit.memlock:65536", "65536"),
    (b"lxc.prlimit.memlock = 65536", "65536"),
    (b"lxc.prlimit.memlock=65536", "65536"),
    (b"\tlxc.prlimit.memlock \t= 1:2 ", "1:2"),
    (b"lxc.prlimit.memlock : unlimited", "unlimited"),
    (b"lxc.prlimit.memlock =", ""),
])
def test_key_recognised_in_every_spelling(line, value):
    config = lxc_config.ContainerConfig(b"arch: amd64\n" + line + b"\n", "/etc/pve/lxc/100.conf")
    assert config.entries(KEY) == [(1, value)]


# --- style ----------------------------------------------------------------------------------

def test_style_from_the_files_own_lines_beats_the_path():
    # a Proxmox-looking path holding plain LXC lines gets '=' lines
    data = b"lxc.uts.name = a\nlxc.rootfs.path = dir:/r\n"
    assert lxc_config.ContainerConfig(data, "/etc/pve/lxc/100.conf").style() == "lxc"
    assert edit(data, "/etc/pve/lxc/100.conf") == data + b"lxc.prlimit.memlock = unlimited\n"
    # a plain path holding Proxmox lines gets ': ' lines
    data = b"arch: amd64\nhostname: a\nlxc.cgroup2.devices.allow = c 195:* rwm\n"
    assert edit(data, "/srv/x/config") == data + b"lxc.prlimit.memlock: unlimited\n"


def test_style_tie_goes_by_path():
    data = b"hostname: a\nlxc.uts.name = a\n"
    assert lxc_config.ContainerConfig(data, "/etc/pve/lxc/100.conf").style() == "proxmox"
    assert lxc_config.ContainerConfig(data, "/var/lib/lxc/a/config").style() == "lxc"


# --- recognising a container config ----------------------------------------------------------

@pytest.mark.parametrize("data, expected", [
    (fx.PVE_PLAIN, True),
    (fx.LXC_PLAIN, True),
    (b"hostname: a\n", True),
    (b"lxc.uts.name=a", True),
    (fx.NOT_A_CONTAINER, False),
    (b"", False),
    (b"# only a comment\n\n", False),
    (b"[snap]\narch: amd64\n", False),  # nothing live
    (b"name: x\nvalue: y\n", False),    # colon keys that are not Proxmox's
    (b"#arch: amd64\n", False),
])
def test_is_container_config(data, expected):
    assert lxc_config.ContainerConfig(data, "/x/config").is_container_config() is expected


def test_nul_bytes_are_refused():
    with pytest.raises(lxc_config.ConfigError, match="NUL"):
        lxc_config.ContainerConfig(b"arch: amd64\n\0\0", "/etc/pve/lxc/100.conf")


def test_value_of_reads_live_section_only():
    data = b"arch: amd64\nlock: backup\n\n[snap]\nlock: snapshot\n"
    assert lxc_config.ContainerConfig(data, "/etc/pve/lxc/1.conf").value_of("lock") == "backup"
    assert lxc_config.ContainerConfig(b"arch: amd64\n\n[s]\nlock: x\n", "/p/1.conf").value_of("lock") is None


# --- limit values: what the module accepts ----------------------------------------------------

@pytest.mark.parametrize("value, pair", [
    ("unlimited", (INFINITY, INFINITY)),
    ("UNLIMITED", (INFINITY, INFINITY)),
    (" unlimited ", (INFINITY, INFINITY)),
    ("65536", (65536, 65536)),
    (65536, (65536, 65536)),
    ("0", (0, 0)),
    ("1024:unlimited", (1024, INFINITY)),
    ("1024:2048", (1024, 2048)),
    ("unlimited:unlimited", (INFINITY, INFINITY)),
    ("18446744073709551615", (INFINITY, INFINITY)),
])
def test_parse_limit_accepts(value, pair):
    assert lxc_config.parse_limit(value) == pair


@pytest.mark.parametrize("value, hint", [
    ("64G", "write 68719476736 for 64G"),
    ("8MiB", "write 8388608 for 8MiB"),
    ("-1", "write 'unlimited'"),
    ("infinity", "write 'unlimited'"),
    ("2048:1024", "soft limit 2048 is above the hard limit 1024"),
    ("unlimited:1024", "soft limit unlimited is above the hard limit 1024"),
    ("1:2:3", "use 'unlimited'"),
    ("", "use 'unlimited'"),
    ("1024:", "use 'unlimited'"),
    ("12 34", "use 'unlimited'"),
    (True, "use 'unlimited'"),
    (1.5, "use 'unlimited'"),
    (-5, "use 'unlimited'"),
    ("18446744073709551616", "larger than the largest limit"),
])
def test_parse_limit_refuses_with_accepted_forms(value, hint):
    with pytest.raises(lxc_config.ConfigError) as exc:
        lxc_config.parse_limit(value)
    assert hint in str(exc.value)
    assert "SOFT:HARD" in str(exc.value) or "above the hard" in str(exc.value)


# --- limit values: what LXC makes of an existing line ----------------------------------------

@pytest.mark.parametrize("raw, pair", [
    ("unlimited", (INFINITY, INFINITY)),
    ("-1", (INFINITY, INFINITY)),            # strtoull wraps -1 to RLIM_INFINITY
    ("18446744073709551615", (INFINITY, INFINITY)),
    ("65536", (65536, 65536)),
    ("+65536", (65536, 65536)),
    ("1024:unlimited", (1024, INFINITY)),
    ("1024 : 2048", (1024, 2048)),           # LXC 5 skips blanks around the colon
    ("-1:-1", (INFINITY, INFINITY)),
    ("", None),                              # an empty value clears the limit
    ("   ", None),
])
def test_parse_lxc_value(raw, pair):
    assert lxc_config.parse_lxc_value(raw) == pair


@pytest.mark.parametrize("raw", ["64G", "unlimitedx", "1:2:3", "2048:1024", "18446744073709551616", "abc", "1 2"])
def test_parse_lxc_value_refuses_what_lxc_refuses(raw):
    with pytest.raises(lxc_config.ConfigError):
        lxc_config.parse_lxc_value(raw)


def test_items_are_the_live_key_lines_as_text():
    data = (b"#desc%3A x\narch: amd64\n  lxc.mount.entry =  /dev/nvidia0 dev/nvidia0 none bind  \n"
            b"hostname: m\xfcnchen\n\n[snap]\ndev0: /dev/nvidia0\n")
    items = lxc_config.ContainerConfig(data).items()
    assert items == [("arch", "amd64"), ("lxc.mount.entry", "/dev/nvidia0 dev/nvidia0 none bind"),
                     ("hostname", "m\udcfcnchen")]


@pytest.mark.parametrize("entries, expected", [
    ([], (None, None, None)),
    ([(0, "65536"), (3, "unlimited")], ((INFINITY, INFINITY), "unlimited", None)),
    ([(0, "65536"), (3, "")], (None, "", None)),
    ([(0, "64G")], (None, "64G", "'64G' is not a limit LXC can read")),
    ([(0, "64G"), (1, "1:2")], ((1, 2), "1:2", None)),
])
def test_effective_limit_last_line_wins(entries, expected):
    assert lxc_config.effective_limit(entries) == expected


@pytest.mark.parametrize("value, tags", [
    ("llm;prod", ["llm", "prod"]),
    ("llm, prod  gpu", ["llm", "prod", "gpu"]),
    ("", []),
    (None, []),
])
def test_split_tags(value, tags):
    assert lxc_config.split_tags(value) == tags


@pytest.mark.parametrize("text, value", [
    ("lxc.lxcpath = /srv/lxc\n", "/srv/lxc"),
    ("# lxc.lxcpath = /commented\n\tlxc.lxcpath=/srv/lxc  \nlxc.lxcpath = /second\n", "/srv/lxc"),
    ("lxc.lxcpathx = /srv\nlxc.bdev.lvm.vg = lxc\n", None),
    ("", None),
    (None, None),
])
def test_lxcpath_setting_first_one_wins(text, value):
    assert lxc_config.lxcpath_setting(text) == value
