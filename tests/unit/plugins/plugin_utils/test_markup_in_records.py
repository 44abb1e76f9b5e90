"""Markup in any text of the records never renders as markup: not on the fleet page, not in the
Markdown reports, not in the JUnit file.

Every string of a fleet's records is replaced, by a generic walk (a field added later is covered
without touching this test), with payloads: a script, an attribute break-out with an event
handler, a javascript: URL, a meta refresh, Markdown links and images, backticks, a newline and
a tag, emphasis. The same records with plain words in the same places give the page or report
"of the same shape"; the payload's rendering must hold exactly the same elements and attributes
(no tag, link or image of its own), every link must be one of the collection's own relative
paths or a fragment, and no attribute may carry a javascript: URL.

Strings are replaced consistently (the same string gets the same replacement everywhere), so
a host's name in its audit.json, its rollout entry and its batch stays one host; a timestamp
keeps its text before the payload (the page picks the latest rollout by it); a second
variant keeps the enumeration words (statuses, severities, fix classes) so that the sections
they gate are rendered with payloads in everything else.
"""

import json
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from urllib.parse import unquote

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import audit_fleet as audit_fleet_mod
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_report import audit_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.benchmark import benchmark_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect, page
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_report import (
    CHECK_STATUSES, HOST_STATUSES, rollout_junit, rollout_markdown)
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.records import KINDS as CHANGE_KINDS
from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases

markdown_it = pytest.importorskip("markdown_it")

PAYLOADS = (
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "javascript:alert(1)",
    "<meta http-equiv=\"refresh\" content=\"0;url=https://evil\">",
    "[x](javascript:alert(1))",
    "![i](http://evil/x.png)",
    "`code` ``` x",
    "line\n<b>bold</b>",
    "*em* _em_ __strong__ ~~del~~",
    "' onmouseover='alert(1)",
    "<https://evil/autolink>",
    "&lt;i&gt;entity&lt;/i&gt;",
    "# heading",
    "- item",
    "| cell | break |",
    "\\<b>escaped\\</b>",
)
# Words whose value picks a section (kept in the second variant, so that section is rendered).
ENUMS = frozenset(("P0", "P1", "P2", "manual", "runtime", "reboot_required", "optimal", "not_applicable", "unknown",
                   "gone", "audit.json") + HOST_STATUSES + CHECK_STATUSES + tuple(CHANGE_KINDS))
TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T")


class Replacer:
    """Each distinct non-empty string gets one number; ``make(number)`` is its replacement."""

    def __init__(self, make, keep=frozenset()):
        self.make, self.keep, self.seen = make, keep, {}

    def text(self, value):
        if not value or value in self.keep:
            return value
        if value not in self.seen:
            self.seen[value] = len(self.seen)
        if TIMESTAMP.match(value):  # records are ordered by their times: the order is kept
            return "%s %s" % (value, self.make(self.seen[value]))
        return self.make(self.seen[value])

    def __call__(self, node, data_keys=()):
        """``node`` with every string value replaced; the keys of the dicts at ``data_keys``
        (paths of keys from here, ``()`` for this one) are names, and replaced too."""
        if isinstance(node, dict):
            rename = () in data_keys
            return dict((self.text(k) if rename and isinstance(k, str) else k,
                         self(v, [p[1:] for p in data_keys if p and p[0] == k])) for k, v in node.items())
        if isinstance(node, list):
            return [self(item, [p[1:] for p in data_keys if p and p[0] == "*"]) for item in node]
        if isinstance(node, str):
            return self.text(node)
        return node


def payload(number):
    """One payload first (a URL attribute sees its start), then every payload."""
    return "%s %d %s" % (PAYLOADS[number % len(PAYLOADS)], number, " ".join(PAYLOADS))


def benign(number):
    return "word %d" % number


# ------------------------------------------------------------------------------ HTML reading

# Attributes a browser follows or loads (a title or data-* attribute holds text: a payload's
# "javascript:" there is only shown).
URL_ATTRIBUTES = frozenset(("href", "src", "action", "formaction", "xlink:href", "background", "poster", "cite",
                            "content", "srcset", "ping"))


class Tags(HTMLParser):
    """Every start tag of an HTML text with its attributes."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    handle_startendtag = handle_starttag

    def shape(self):
        """The multiset of (tag, its attribute names)."""
        return Counter((tag, tuple(sorted(name for name, _value in attrs))) for tag, attrs in self.tags)

    def values(self, name):
        return [value for _tag, attrs in self.tags for key, value in attrs if key == name]


def assert_same_elements(payload_html, benign_html, what):
    got, want = Tags(payload_html), Tags(benign_html)
    extra = got.shape() - want.shape()
    missing = want.shape() - got.shape()
    assert not extra and not missing, "%s: the payloads changed the elements: extra %s, missing %s" % (
        what, dict(extra), dict(missing))
    for _tag, attrs in got.tags:
        for key, value in attrs:
            assert not key.startswith("on"), (what, key, value)
            if key in URL_ATTRIBUTES:
                assert not re.match(r"\s*(javascript|data|vbscript):", value or "", re.I), (what, key, value)
    return got


# ------------------------------------------------------------------------------ the page

def crafted_fleet(root, replacer):
    """The fixed fleet, each JSON record's strings replaced, each host's system-improve.md
    rendered again from its crafted audit.json (the page reads its headings)."""
    fake.write_fleet(root, 16)
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith(".json"):
                continue
            path = os.path.join(folder, name)
            with open(path) as handle:
                try:
                    data = json.load(handle)
                except ValueError:
                    continue  # the damaged verify.json stays damaged
            keys = [()] if name == "fleet-drift.json" else [("hosts",)] if name.startswith("rollout-") else []
            data = replacer(data, keys)
            with open(path, "w") as handle:
                json.dump(data, handle, indent=1)
            if name == "audit.json":
                with open(os.path.join(folder, "system-improve.md"), "w") as handle:
                    handle.write(audit_report(data))
    return root


@pytest.fixture(scope="module", params=["every string", "enumerations kept"])
def pages(request, tmp_path_factory):
    keep = ENUMS if request.param == "enumerations kept" else frozenset()
    out = {}
    for kind, make in (("payload", payload), ("benign", benign)):
        root = str(tmp_path_factory.mktemp(kind) / "artifacts")
        crafted_fleet(root, Replacer(make, keep))
        out[kind] = (root, page.render(collect.collect(root), "Fleet " + make(7)))
    return out


def test_no_record_text_renders_as_markup_on_the_page(pages):
    root, text = pages["payload"]
    doc = assert_same_elements(text, pages["benign"][1], "page")
    metas = [attrs for tag, attrs in doc.tags if tag == "meta"]
    assert [dict(a).get("http-equiv") for a in metas].count("refresh") == 0
    assert len(metas) == 4  # charset, viewport, the CSP, generator: the page's own
    assert not doc.values("src")
    folders = set(os.listdir(root))
    for href in doc.values("href"):
        if href.startswith("#"):
            assert re.match(r"#[A-Za-z0-9_-]+\Z", href), href
            continue
        path, _hash, fragment = href.partition("#")
        assert ":" not in path.split("/")[0], href
        parts = path.split("/")
        if len(parts) == 1:
            assert re.match(r"rollout-[A-Za-z0-9._-]+\.md\Z", parts[0]), href
        else:
            folder, name = parts
            assert unquote(folder) in folders and name in collect.LINKED_FILES, href
        assert re.match(r"[A-Za-z0-9%_.-]*\Z", fragment), href
    for value in doc.values("id"):
        assert re.match(r"[A-Za-z0-9_-]+\Z", value), value


def test_the_page_shows_the_payloads_as_text(pages):
    text = pages["payload"][1]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "javascript:alert(1)" in text  # as text, never as a link (above)
    assert "\u202e" not in text


# ------------------------------------------------------------------------------ Markdown

def md_html(text):
    """The Markdown as a CommonMark viewer with GFM tables and strikethrough renders it, raw HTML
    passed through and every link destination accepted (a viewer's own URL filter is no part of
    what this tests)."""
    md = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    md.validateLink = lambda url: True
    return md.render(text)


def assert_markdown_inert(render, data, keep, keys=(), what="report"):
    got = render(Replacer(payload, keep)(data, keys))
    want = render(Replacer(benign, keep)(data, keys))
    doc = assert_same_elements(md_html(got), md_html(want), what)
    assert not doc.values("src")
    for href in doc.values("href"):
        assert href == "#manual-steps" or re.match(r"[A-Za-z0-9%_.~-]+/system-improve\.md\Z", href), (what, href)
    assert got.count("\n") == want.count("\n"), "%s: a value added a line" % what


@pytest.mark.parametrize("keep", [frozenset(), ENUMS], ids=["every string", "enumerations kept"])
@pytest.mark.parametrize("name", audit_cases.NODES)
def test_system_improve_md_holds_no_markup_from_the_audit(name, keep):
    audit = audit_cases.audit(name)
    audit["since"] = {"none": False, "previous_time": "t", "still": [],
                      "fixed": [dict(rule="r", item="i", severity="P0", title="t", now="optimal")],
                      "new": [dict(rule="r2", item="i2", severity="P1", title="t2")]}
    assert_markdown_inert(audit_report, audit, keep, what="system-improve.md")


@pytest.mark.parametrize("keep", [frozenset(), ENUMS], ids=["every string", "enumerations kept"])
def test_fleet_audit_md_holds_no_markup_and_links_its_own_files(keep):
    audits = [audit_cases.audit(name) for name in audit_cases.NODES]
    for number, audit in enumerate(audits):
        audit["host"] = "%s/../x%d" % (PAYLOADS[number], number)

    def render(data):
        return audit_report(audit_fleet_mod.audit_fleet(data), "fleet")
    assert_markdown_inert(render, audits, keep, what="fleet-audit.md")


def rollout_input():
    names = fake.host_names(6)
    records = fake.rollouts(names, ["p2p 0->1: below the floor"])
    return records[-1], records[0]


@pytest.mark.parametrize("which", [0, 1], ids=["stopped", "completed"])
def test_the_rollout_markdown_holds_no_markup(which):
    record = dict(rollout_input()[which])
    record["run_id"] = "__run_id__"
    for host in record["hosts"].values():
        for check in host.get("checks") or []:
            check["message"] = check["message"] or "checked"
        if host.get("status") == "failed":
            host["drift"] = [{"area": "sysctl", "kind": "sysctl", "target": "vm.swappiness", "recorded": "10",
                              "current": "60", "recorded_by": "run"}]
            host["revert"]["failed"] = [{"target": "vm.dirty_ratio", "message": "read-only"}]
            host["revert"]["pending_reboot"] = ["kernel cmdline"]
    keep = ENUMS | {"__run_id__"}
    assert_markdown_inert(rollout_markdown, record, keep, keys=[("hosts",)], what="rollout markdown")


def test_the_benchmark_markdown_holds_no_markup():
    files = fake.benchmark_files("gpu-node-01")
    comparison = json.loads(files["benchmark.json"])
    comparison["gate"]["reasons"] = ["slower"]
    comparison["efficiency"]["before"] = {"reason": "no ceiling"}

    def render(data):
        return benchmark_report(data, data.get("host"))
    assert_markdown_inert(render, comparison, frozenset(), what="benchmark.md")


# ------------------------------------------------------------------------------ JUnit

def test_the_junit_file_stays_well_formed_with_any_text():
    record = rollout_input()[0]
    keep = ENUMS | {record["run_id"]}
    nasty = Replacer(lambda n: payload(n) + "\x00\x07\x1b[31m\ud800\ufffe\U0001f600]]>&amp;", keep)
    got = ET.fromstring(rollout_junit(nasty(record, [("hosts",)])))
    want = ET.fromstring(rollout_junit(Replacer(benign, keep)(record, [("hosts",)])))
    assert Counter(e.tag for e in got.iter()) == Counter(e.tag for e in want.iter())
    text = " ".join((e.text or "") + " ".join(e.attrib.values()) for e in got.iter())
    assert "<script>alert(1)</script>" in text  # escaped by the writer, read back as text
