"""Kernel command-line arguments: splitting, identity, planning edits, and what is pending."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import kernel_args as ka


def args(*texts):
    return [ka.parse_wanted(t, "present") for t in texts]


def test_split_keeps_quoted_values_and_init_arguments():
    line = ' BOOT_IMAGE=/vmlinuz  foo="a b"\t"bar=c d" quiet -- --init-opt x=1 '
    assert ka.split(line) == ['BOOT_IMAGE=/vmlinuz', 'foo="a b"', '"bar=c d"', 'quiet', '--', '--init-opt', 'x=1']
    assert ka.kernel_part(ka.split(line)) == ['BOOT_IMAGE=/vmlinuz', 'foo="a b"', '"bar=c d"', 'quiet']
    assert ka.split("") == [] and ka.split(None) == []


@pytest.mark.parametrize("raw, key, value", [
    ("quiet", "quiet", None),
    ("quiet=", "quiet", ""),
    ("iommu=pt", "iommu", "pt"),
    ('foo="a b"', "foo", "a b"),
    ('"foo=a b"', "foo", "a b"),
    ("intel-idle.max_cstate=1", "intel_idle.max_cstate", "1"),
    ("root=ZFS=rpool/ROOT/pve-1", "root", "ZFS=rpool/ROOT/pve-1"),
])
def test_arg_identity_like_the_kernel(raw, key, value):
    arg = ka.Arg(raw)
    assert (arg.key, arg.value) == (key, value)


@pytest.mark.parametrize("text, fragment", [
    ("", "non-empty"),
    ("a b", "one argument per entry"),
    ('foo="a', "unbalanced double quote"),
    ("foo\nbar", "control characters"),
    ("--", "separates init"),
    ("foo='ab'", "single quotes"),
    ("foo=$x", "'$'"),
    ("=x", "parameter name"),
    ('foo=a"b"c', "double quote may only enclose"),
    ('foo="a" b', "one argument per entry"),
    ('"foo"=a', "parameter name"),
    ('""', "parameter name"),
    ("x=1;reboot", "holds ';': GRUB script metacharacters"),
    ("x=1&reboot", "holds '&': GRUB script metacharacters"),
    ("x=1|y", "holds '|'"),
    ("x=1>y", "holds '>'"),
    ("x=1<y", "holds '<'"),
    ("x={y}", "holds '{'"),
    ("}", "holds '}'"),
    ("#x", "'#' starts a comment"),
    ("x=`y`", "holds '`'"),
    ("x=\\y", "backslashes"),
    ("x=(y)", "parentheses"),
    ("x=*", "glob characters"),
    ("x=a?", "glob characters"),
    ("x=[a]", "glob characters"),
    ('x="a;b"', "holds ';'"),
    ('x="$y z"', "holds '$'"),
    ("x=a\tb", "'\\t' (U+0009): control characters"),
    ("x=a\rb", "(U+000D)"),
    ("x=a\x00b", "(U+0000)"),
    ("x=a\x7fb", "(U+007F)"),
    ("x=a\xa0b", "(U+00A0): only printable ASCII"),
    ("x=\u00e0", "(U+00E0): only printable ASCII"),
    ("x=\u2003", "(U+2003)"),
    ("x=\u200b", "(U+200B)"),
])
def test_parse_wanted_rejects_with_the_reason(text, fragment):
    with pytest.raises(ka.ArgError) as exc:
        ka.parse_wanted(text, "present")
    assert fragment in str(exc.value)
    assert repr(text) in str(exc.value) or text == "--"


def test_parse_wanted_lists_conflicts_and_duplicates():
    present, absent = ka.parse_wanted_lists(["iommu=pt", "iommu=pt", "quiet"], ["splash", "splash"])
    assert [a.raw for a in present] == ["iommu=pt", "quiet"]
    assert [a.raw for a in absent] == ["splash"]
    with pytest.raises(ka.ArgError, match="twice with different values"):
        ka.parse_wanted_lists(["iommu=pt", "iommu=soft"], [])
    with pytest.raises(ka.ArgError, match="both present"):
        ka.parse_wanted_lists(["iommu=pt"], ["iommu"])
    with pytest.raises(ka.ArgError, match="both present"):
        ka.parse_wanted_lists(["iommu=pt"], ["iommu=pt"])
    # removing another value of a key we set is what present does anyway: allowed
    present, absent = ka.parse_wanted_lists(["iommu=pt"], ["iommu=soft"])
    assert [a.raw for a in absent] == ["iommu=soft"]
    with pytest.raises(ka.ArgError, match="reads console= as a list"):
        ka.parse_wanted_lists(["console=ttyS0"], [])
    # every error at once, so one run shows them all
    with pytest.raises(ka.ArgError) as exc:
        ka.parse_wanted_lists(["a b", "hugepages=4"], ["x y"])
    assert str(exc.value).count(";") == 2


def test_plan_replaces_in_place_and_collapses_duplicates():
    seg = ka.split("quiet iommu=soft splash iommu=soft iommu=pt")
    new = ka.plan([seg], args("iommu=pt"), [], primary=0)
    # the first occurrence of the key is where the wanted value goes; the exact match is kept
    assert new == [["quiet", "splash", "iommu=pt"]]
    new = ka.plan([ka.split("quiet iommu=soft splash")], args("iommu=pt"), [], primary=0)
    assert new == [["quiet", "iommu=pt", "splash"]]
    new = ka.plan([ka.split("iommu=pt quiet iommu=pt")], args("iommu=pt"), [], primary=0)
    assert new == [["iommu=pt", "quiet"]]


def test_plan_bare_key_and_value_are_different_arguments():
    new = ka.plan([["quiet=1"]], args("quiet"), [], primary=0)
    assert new == [["quiet"]]
    new = ka.plan([["nosmt"]], args("nosmt=force"), [], primary=0)
    assert new == [["nosmt=force"]]


def test_plan_dash_and_underscore_are_one_key():
    new = ka.plan([["intel-idle.max_cstate=2"]], args("intel_idle.max_cstate=1"), [], primary=0)
    assert new == [["intel_idle.max_cstate=1"]]
    # the same argument spelt with a dash is already present: left as written
    new = ka.plan([["intel-idle.max_cstate=1"]], args("intel_idle.max_cstate=1"), [], primary=0)
    assert new == [["intel-idle.max_cstate=1"]]


def test_plan_removal_by_key_or_exact_value():
    seg = ka.split("quiet splash=1 splash vt.handoff=7 splash=2")
    gone = ka.parse_wanted_lists([], ["splash"])[1]
    assert ka.plan([seg], [], gone, primary=0) == [["quiet", "vt.handoff=7"]]
    gone = ka.parse_wanted_lists([], ["splash=2"])[1]
    assert ka.plan([seg], [], gone, primary=0) == [["quiet", "splash=1", "splash", "vt.handoff=7"]]


def test_plan_init_arguments_after_double_dash_are_untouched():
    seg = ka.split("quiet iommu=soft -- iommu=soft quiet single")
    gone = ka.parse_wanted_lists([], ["quiet"])[1]
    new = ka.plan([seg], args("iommu=pt", "amd_pstate=active"), gone, primary=0)
    assert new == [["iommu=pt", "amd_pstate=active", "--", "iommu=soft", "quiet", "single"]]
    # an exact match after -- does not count: it is init's, not the kernel's
    new = ka.plan([ka.split("quiet -- iommu=pt")], args("iommu=pt"), [], primary=0)
    assert new == [["quiet", "iommu=pt", "--", "iommu=pt"]]


def test_plan_refuses_to_add_after_an_earlier_double_dash():
    with pytest.raises(ka.ArgError, match="holds '--'"):
        ka.plan([["ro", "--", "x"], ["quiet"]], args("iommu=pt"), [], primary=1)


def test_plan_across_segments_and_read_only():
    linux, default = ["iommu=soft", "ro"], ["quiet"]
    new = ka.plan([linux, default, []], args("iommu=pt"), [], primary=1, read_only=[2])
    # the other value goes from GRUB_CMDLINE_LINUX; the new one lands in the primary segment
    assert new == [["ro"], ["quiet", "iommu=pt"], []]
    # present only in a read-only layer: satisfied there, nothing added
    new = ka.plan([["ro"], ["quiet"], ["iommu=pt"]], args("iommu=pt"), [], primary=1, read_only=[2])
    assert new == [["ro"], ["quiet"], ["iommu=pt"]]
    # a conflicting value in a read-only layer stays (the caller reports it)
    gone = ka.parse_wanted_lists([], ["quiet"])[1]
    new = ka.plan([["ro"], ["quiet"], ["iommu=soft", "quiet"]], args("iommu=pt"), gone, primary=1, read_only=[2])
    assert new == [["ro"], ["iommu=pt"], ["iommu=soft", "quiet"]]


def test_plan_no_change_returns_equal_lists():
    seg = ka.split('quiet iommu=pt foo="a b"')
    gone = ka.parse_wanted_lists([], ["splash"])[1]
    assert ka.plan([seg], args("iommu=pt", 'foo="a b"'), gone, primary=0) == [seg]


def test_unsatisfied_and_describe():
    running = ka.split("BOOT_IMAGE=/vmlinuz ro quiet amd_pstate=passive -- iommu=pt")
    present, absent = ka.parse_wanted_lists(["iommu=pt", "amd_pstate=active", "ro"], ["quiet", "splash"])
    problems = ka.unsatisfied(running, present, absent)
    assert [ka.describe(p, "running") for p in problems] == [
        "iommu=pt (running: not set)",
        "amd_pstate=active (running: amd_pstate=passive)",
        "remove quiet (running: quiet)",
    ]
    assert ka.unsatisfied(ka.split('"foo=a b"'), args('foo="a b"'), []) == []
    # a second, different value of the key is not satisfied
    assert ka.unsatisfied(ka.split("iommu=pt iommu=soft"), args("iommu=pt"), [])


@pytest.mark.parametrize("raw, harmful", [
    ("iommu=pt", True),
    ("iommu=soft,pt", True),
    ("iommu=nopt", False),
    ("iommu=off", False),
    ("iommu", False),
    ("iommu.passthrough=1", True),
    ("iommu.passthrough=y", True),
    ("iommu.passthrough=on", True),
    ("iommu.passthrough=0", False),
    ("iommu.passthrough=off", False),
    ("intel_iommu=on", False),
    ("amd_iommu=on", False),
])
def test_forces_identity_iommu(raw, harmful):
    assert ka.forces_identity_iommu(ka.Arg(raw)) is harmful


@pytest.mark.parametrize("text", [
    "quiet", "quiet=", "iommu=pt", 'foo="a b"', '"foo=a b"', '"quiet"', 'foo=""', "root=ZFS=rpool/ROOT/pve-1",
    "console=ttyS0,115200n8", "video=HDMI-A-1:1920x1080@60", "dyndbg=+p", "acpi_osi=!", 'acpi_osi="!Windows 2015"',
    "isolcpus=1-3,5", "amdgpu.ppfeaturemask=0xffffffff", "x=a%b^c~d", "x=" + "a" * 3000,
])
def test_parse_wanted_accepts(text):
    assert ka.parse_wanted(text, "present").raw == text


def test_every_refused_character_is_named_for_present_and_absent():
    for code in list(range(0, 128)) + [0xA0, 0xE0, 0x2028, 0xFEFF]:
        char = chr(code)
        text = "x=a%sb" % char
        if char in ka.VALUE_CHARS or char == " ":
            continue
        for what in ("present", "absent"):
            with pytest.raises(ka.ArgError) as exc:
                ka.parse_wanted_lists([text], []) if what == "present" else ka.parse_wanted_lists([], [text])
            assert ("%s entry %r is not valid" % (what, text)) in str(exc.value), (code, str(exc.value))


def test_split_uses_the_kernels_isspace_on_bytes():
    # lib/ctype.c: \t \n \v \f \r, space and 0xA0 are spaces; U+00A0 is C2 A0 in UTF-8 and U+00E0
    # (a grave) is C3 A0, so the kernel cuts both, leaving the first byte (a surrogate here)
    assert ka.split("a\xa0b") == ["a\udcc2", "b"]
    assert ka.split("caf\u00e0 x") == ["caf\udcc3", "x"]
    assert ka.split('x="a\xa0b" y') == ['x="a\xa0b"', "y"]  # inside quotes it does not split
    assert ka.split("a\x0bb\x0cc\rd") == ["a", "b", "c", "d"]
    assert ka.split("a\x1cb") == ["a\x1cb"]  # not a space to the kernel


@pytest.mark.parametrize("token, grub, fragment", [
    ("quiet", True, None),
    ('foo="a b"', True, None),
    ('foo="a;b"', True, None),  # quoted: GRUB reads ';' literally there
    ("a#b", True, None),
    ("x;y", True, "command separator"),
    ("x&", True, "command separator"),
    ("}", True, "command separator"),
    ("#x", True, "comment"),
    ("x=$y", True, "expands"),
    ('x="$y"', True, "inside double quotes"),
    ("x=a\\", True, "escapes"),
    ("x='a", True, "quotes"),
    ('foo="a', True, "unbalanced double quote"),
    ('foo="a', False, "unbalanced double quote"),
    ("x;y", False, None),  # /etc/kernel/cmdline is not GRUB script
    ("x=a\xa0b", False, "U+00A0"),
    ("x=a\udcc2", True, "byte 0xC2"),
])
def test_hazard(token, grub, fragment):
    why = ka.hazard(token, grub=grub)
    assert (why is None) if fragment is None else (fragment in why), why


def test_by_key_groups_the_arguments_of_each_key_in_kernel_order():
    tokens = ka.split('quiet iommu=soft intel-idle.max_cstate=1 foo="a b" iommu=pt -- iommu=init')
    assert ka.by_key(tokens, ["iommu", "intel_idle.max_cstate", "foo", "splash"]) == {
        "iommu": "iommu=soft iommu=pt", "intel_idle.max_cstate": "intel-idle.max_cstate=1", "foo": 'foo="a b"'}
    # what it joins, split reads back
    assert ka.split(ka.by_key(tokens, ["foo"])["foo"]) == ['foo="a b"']
    assert ka.by_key(tokens, ["quiet"]) == {"quiet": "quiet"} and ka.by_key(tokens, []) == {}
