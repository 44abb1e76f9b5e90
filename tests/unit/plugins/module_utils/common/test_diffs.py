"""diffs: the --diff entries, and a file diff that shows only what changed."""

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs


def test_values_diff_renders_sorted_lines_and_drops_unknowns():
    entry = diffs.values_diff({"b": "1", "a": None}, {"b": "2", "a": "3"}, "sysctl")
    assert entry == {"before_header": "sysctl (before)", "after_header": "sysctl (after)",
                     "before": "b = 1\n", "after": "a = 3\nb = 2\n"}


def test_file_diff_marks_absent_sides():
    entry = diffs.file_diff("/etc/x", None, "new\n")
    assert entry["before_header"] == "/etc/x (absent)" and entry["before"] == ""
    assert diffs.file_diff("/etc/x", "old\n", None)["after_header"] == "/etc/x (absent)"


def test_changed_lines_diff_shows_only_the_changed_lines_with_numbers():
    before = "arch: amd64\nlxc.environment: HF_TOKEN=secret\nlxc.prlimit.memlock: 8388608\nswap: 0\n"
    after = "arch: amd64\nlxc.environment: HF_TOKEN=secret\nlxc.prlimit.memlock: unlimited\nswap: 0\n"
    entry = diffs.changed_lines_diff("/etc/pve/lxc/101.conf", before, after)
    assert entry["before"] == "3: lxc.prlimit.memlock: 8388608\n"
    assert entry["after"] == "3: lxc.prlimit.memlock: unlimited\n"
    assert "secret" not in str(entry)
    assert entry["before_header"] == "/etc/pve/lxc/101.conf (changed lines only)"


def test_changed_lines_diff_of_added_and_removed_lines():
    entry = diffs.changed_lines_diff("/c", "a\nb\n", "a\nb\nc")
    assert entry["before"] == "" and entry["after"] == "3: c\n"
    entry = diffs.changed_lines_diff("/c", "a\nb\nc\n", "a\nc\n")
    assert entry["before"] == "2: b\n" and entry["after"] == ""
    assert diffs.changed_lines_diff("/c", None, "x\n")["before_header"] == "/c (absent) (changed lines only)"
