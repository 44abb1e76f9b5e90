"""report/page: the fleet page from the fixed fleet, read back with an HTML parser: every host,
finding and chart is there, each findings cell links to its heading in that host's
system-improve.md, nothing is fetched, text is escaped, and the bytes depend on the records only."""

import os
from html.parser import HTMLParser
from urllib.parse import unquote

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import anchors, collect, page
from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake


class Doc(HTMLParser):
    """Every start tag with its attributes, and the text, of a page."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.text = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def all(self, tag, **attrs):
        return [a for t, a in self.tags if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fleet") / "artifacts")
    kinds = fake.write_fleet(root, 16)
    model = collect.collect(root)
    text = page.render(model)
    return root, kinds, model, text, Doc(text)


def test_every_host_has_its_section_and_its_grid_row(rendered):
    _root, kinds, model, _text, doc = rendered
    sections = [a["data-host"] for a in doc.all("details") if "host" in (a.get("class") or "")]
    assert sorted(sections) == sorted(kinds)
    rows = [a["data-host"] for a in doc.all("tr") if "data-host" in a and a.get("data-host") in kinds]
    for name in kinds:
        assert name in rows, name


def test_every_finding_cell_links_to_its_heading_in_the_host_s_report(rendered):
    root, _kinds, model, _text, doc = rendered
    cells = [a for t, a in doc.tags if t == "a" and "system-improve.md#" in (a.get("href") or "")]
    expected = sum(len(set(f["rule"] for f in h["audit"]["findings"])) + len(set(u["rule"] for u in h["audit"]["unknown"]))
                   for h in model["hosts"] if h["audit"])
    assert len(cells) == expected
    headings = {}
    for cell in cells:
        href = cell["href"]
        folder, rest = href.split("/", 1)
        name, anchor = rest.split("#", 1)
        assert name == "system-improve.md"
        path = os.path.join(root, unquote(folder), name)
        if path not in headings:
            with open(path) as handle:
                headings[path] = set(a for _l, _r, a in anchors.headings(handle.read()))
        assert unquote(anchor) in headings[path], href


def test_the_quoted_name_s_links_are_quoted_twice_over(rendered):
    text = rendered[3]
    assert 'href="gpu%2520node%252016/system-improve.md#' in text


def test_every_chart_is_there(rendered):
    _root, _kinds, model, text, _doc = rendered
    measured = [h for h in model["hosts"] if h["p2p"]["status"] == "measured"]
    heatmaps = sum(sum(1 for key, _f, _k, _t in collect.MATRICES
                       if not (key.endswith("staged") and all(v is None for row in h["p2p"]["matrices"][key] for v in row)))
                   for h in measured)
    assert text.count('<svg class="hm"') == heatmaps
    benchmarked = [h for h in model["hosts"] if h["benchmark"]]
    assert text.count('<svg class="bars"') == 3 * len(benchmarked)
    assert text.count('<svg class="eff"') == len(benchmarked)
    assert text.count('<svg class="tl"') == 1


def test_nothing_is_fetched_and_nothing_runs(rendered):
    text, doc = rendered[3], rendered[4]
    assert not doc.all("script") and not doc.all("link") and not doc.all("img") and not doc.all("iframe")
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text
    assert any(a.get("http-equiv") == "Content-Security-Policy" and "default-src 'none'" in a["content"]
               for a in doc.all("meta"))
    for _tag, attrs in doc.tags:
        assert not any(key.startswith("on") for key in attrs), attrs
        assert "src" not in attrs


def test_the_rollout_drift_and_notes_are_shown(rendered):
    _root, _kinds, _model, text, doc = rendered
    assert "Stopped after batch 1 of 5: gpu-node-01 failed verify; gpu-node-01 reverted; 15 hosts not touched" in text
    assert doc.all("table", id="rollout-failures") and doc.all("p", id="rollout-untouched")
    assert "15 hosts not touched (batches 2, 3, 4, 5)" in text
    assert doc.all("table", id="drift-recorded") and doc.all("table", id="drift-since")
    assert "vm.swappiness" in text and "cpufreq governor" in text
    assert doc.all("div", id="notes") and "gpu-node-10/verify.json: not JSON" in text


def test_the_same_records_give_the_same_bytes(rendered):
    root, _kinds, model, text, _doc = rendered
    assert page.render(collect.collect(root)) == text


def test_text_from_the_records_is_escaped():
    host = collect.host_model('<img src=x onerror="alert(1)">', {
        "folder": "x", "files": ["audit.json"],
        "audit": {"findings": [{"rule": "r<1>", "severity": "P0", "title": "<b>t</b>", "message": "a & \"b\""}],
                  "time": "<t>"}})
    host["id"] = "host-1"
    model = collect.fleet_model({})
    model.update(hosts=[host], columns=collect.finding_columns([host]))
    text = page.render(model, title="<Fleet>")
    doc = Doc(text)
    assert not doc.all("img") and "onerror=\"" not in text
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text and "&lt;Fleet&gt;" in text


def test_an_empty_folder_renders_a_page_that_says_so(tmp_path):
    text = page.render(collect.collect(str(tmp_path)))
    assert "No host record in the artifacts folder." in text and "No rollout-&lt;run id&gt;.json" in text
    Doc(text)


def test_a_finding_s_severity_is_escaped_in_its_column_s_title():
    """Security finding: the grid's column title placed the severity from audit.json as it was."""
    severity = '"><script>alert(1)</script><meta http-equiv="refresh" content="0;url=https://evil"><a href="javascript:x">'
    host = collect.host_model("h", {"folder": "h", "files": [], "audit": {
        "findings": [{"rule": "r", "severity": severity, "title": "t", "message": "m"}], "worst": severity}})
    host["id"] = "host-1"
    model = collect.fleet_model({})
    model.update(hosts=[host], columns=collect.finding_columns([host]))
    doc = Doc(page.render(model))
    assert not doc.all("script") and [a.get("http-equiv") for a in doc.all("meta")].count("refresh") == 0
    assert not [a for a in doc.all("a") if (a.get("href") or "").startswith("javascript:")]
    assert [a["title"] for a in doc.all("th") if a.get("data-rule") == "r"] == ["t (r), %s on 1 host" % severity]
    assert all(a["class"] in ("badge b-unk", "badge s-P0", "badge s-P1", "badge s-P2", "badge s-unk")
               for a in doc.all("span") if "badge" in (a.get("class") or "") and "b-" in a["class"])


# ------------------------------------------------------------------------------ serving experiments

def _section(text, host):
    """The HTML of a host's section, up to the next host's."""
    return text.split('id="%s"' % host["id"], 1)[1].split('<details class="host"', 1)[0]


def test_serving_experiments_are_shown_per_host_and_counted(rendered):
    _root, kinds, model, text, doc = rendered
    with_exp = [h for h in model["hosts"] if h["experiments"]]
    assert len(with_exp) == 2
    assert text.count("<h3>Serving experiments</h3>") == 2
    assert 'data-tile="with serving experiments"><b>2</b>' in text
    assert 'data-tile="experiment changes kept"><b>1</b>' in text
    rows = [a for a in doc.all("tr") if "data-status" in a]
    assert [a["data-status"] for a in rows][:7] == [c["status"] for c in fake.experiments_of("x")["candidates"]]
    assert len(rows) == 14 and [a.get("class") for a in rows].count("kept-row") == 1
    badges = [a["class"] for a in doc.all("span") if a.get("class", "").startswith("badge")]
    for cls in ("badge b-ok", "badge b-warn", "badge b-bad"):
        assert cls in badges
    host = with_exp[0]
    section = _section(text, host)
    assert "812.3 \u2192 861.0 (+6.0 % against the baseline, noise \u00b11.2 %)" in section
    assert "7 candidates: 6 tried, 1 kept, 2 rolled back, 1 rejected on accuracy, 1 failed to start, 1 failed, " \
        "1 skipped; 11 restarts of 12 allowed, 719.5 s down." in section
    assert "Kept <code>--enable-fused-moe-sum-all-reduce</code>. Launch command now <code>" in section
    assert "--port 8000 --enable-fused-moe-sum-all-reduce</code><br>before <code>" in section
    assert "<code>--kv-cache-dtype fp8_e5m2</code>" in section
    assert "failed: divergence 12.5 % of 0 % allowed (3 of 8 prompts differ)" in section
    assert 'href="%s/experiments.md"' % host["folder"] in section
    later = _section(text, with_exp[1])
    assert "Launch command unchanged: <code>" in later
    plain = next(h for h in model["hosts"] if not h["experiments"] and h["benchmark"])
    assert "Serving experiments" not in _section(text, plain)


def test_experiment_text_from_the_record_is_escaped():
    record = fake.experiments_of("h")
    record["unit"] = '<img src=x onerror="alert(1)">'
    record["after"]["command"] = "</code><script>alert(1)</script>"
    record["dropin"] = '"><a href="javascript:x">'
    first = record["candidates"][0]
    first.update(name="<script>alert(2)</script>", flag='--x"><b>', value="<i>", reason="a & <b>b</b>",
                 status='"><script>alert(3)</script>', risk="<u>")
    host = collect.host_model("h", {"folder": "h", "files": ["experiments.json"], "experiments": record})
    host["id"] = "host-1"
    model = collect.fleet_model({})
    model.update(hosts=[host], columns=collect.finding_columns([host]))
    text = page.render(model)
    doc = Doc(text)
    assert not doc.all("script") and not doc.all("img") and not doc.all("i") and not doc.all("u")
    assert not [a for a in doc.all("a") if (a.get("href") or "").startswith("javascript:")]
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in text and "&lt;/code&gt;&lt;script&gt;" in text
    assert "<code>--x&quot;&gt;&lt;b&gt; &lt;i&gt;</code>" in text and "a &amp; &lt;b&gt;b&lt;/b&gt;" in text
    statuses = [a for a in doc.all("tr") if "data-status" in a]
    assert statuses[0]["data-status"] == '"><script>alert(3)</script>'
    assert "badge b-unk" in [a["class"] for a in doc.all("span")], "a status outside the known ones: a plain badge"
    assert '<span class="badge b-unk">&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;</span>' in text


def test_a_damaged_experiments_json_does_not_break_the_page(tmp_path):
    root = tmp_path / "artifacts"
    (root / "node-a").mkdir(parents=True)
    (root / "node-a" / "audit.json").write_text('{"host": "node-a", "findings": []}')
    (root / "node-a" / "experiments.json").write_text('{"host": "node-a", "candidates": [')
    (root / "node-b").mkdir()
    (root / "node-b" / "experiments.json").write_text('{"host": "node-b", "candidates": 3}')
    text = page.render(collect.collect(str(root)))
    doc = Doc(text)
    assert sorted(a["data-host"] for a in doc.all("details") if "host" in (a.get("class") or "")) == ["node-a", "node-b"]
    assert "Serving experiments" not in text.split('id="hosts"', 1)[1].split("<footer>", 1)[0]
    assert "node-a/experiments.json: not JSON" in text
    assert "node-b/experiments.json: not an experiments record (no candidates list)" in text
    assert 'data-tile="with serving experiments"><b>0</b>' in text
