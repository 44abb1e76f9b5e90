"""report/collect and report/page with each host's normal.json and profile.json: "is this node
normal?" per host and for the fleet. The records are written by the action node_normal's judge()
one host after the other, as a run does, so each normal.json's peers are only the hosts judged
before it; the page works the peers out again over the whole fleet (the slow host judged first
recorded itself normal, having no peers, and the page names it with its figure and the peers'
median). A host outside its profile's expectations is not normal with the check's message, a
host without normal.json is not judged, and every string of the records is escaped."""

import datetime
import json

import pytest

from ansible_collections.gpufleet.tuning.plugins.action import node_normal as node_normal_action
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import node_normal
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect, page
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils.report.test_page import Doc

NOW = datetime.datetime(2026, 12, 7, 6, 30, tzinfo=datetime.timezone.utc)
HOPPER = "hgx-hopper/throughput"
L40S = "l40s/latency"
PAYLOAD = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
ESCAPED = "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"


def profile(name, platform, counts, gpus, p2p_floors=None):
    """A profile as profile_select.select gives it (the parts node_normal reads), with its node."""
    expectations = {"gpu_count": {"bare_metal": counts}}
    if p2p_floors:
        expectations["p2p_floors"] = p2p_floors
    return {"name": name, "platform": platform, "intent": name.split("/")[1], "pinned": False,
            "reasons": ["%d x %s, by device id 0x2330" % (gpus, platform)], "description": "%s nodes" % platform,
            "expectations": expectations, "node": {"kind": "bare_metal", "gpu_count": gpus}}


def benchmark(decode, ttft):
    """benchmark.json as benchmark_compare writes it: one stream's figures after the tuning."""
    return {"levels": [{"concurrency": 1, "figures": {"decode_tokens_per_s": {"after": decode},
                                                      "ttft_ms.p50": {"after": ttft}}}]}


# host, folder, profile, benchmark; judged in this order (the slow host first: no peers yet).
HOSTS = [
    ("gpu-a4", profile(HOPPER, "hgx-hopper", [8, 4], 8), benchmark(225.5, 40.0)),
    ("gpu-a1", profile(HOPPER, "hgx-hopper", [8, 4], 8), benchmark(676.6, 40.1)),
    ("gpu-a2", profile(HOPPER, "hgx-hopper", [8, 4], 8), benchmark(680.0, 39.8)),
    ("gpu-a3", profile(HOPPER, "hgx-hopper", [8, 4], 8), benchmark(673.2, 40.3)),
    ("gpu-b1", profile(L40S, "l40s", [1, 2, 4, 8, 10], 3, "none"), benchmark(101.0, 30.0)),
    ("gpu-b2", profile(L40S, "l40s", [1, 2, 4, 8, 10], 4, "none"), benchmark(102.0, 30.5)),
]
SLOW_LINE = ("decode_tokens_per_s: 225.5 tok/s against the median 674.9 tok/s of 4 hgx-hopper/throughput hosts, "
             "33.3 MADs worse (MAD 3.4; counted as 2 % of the median)")
OUTSIDE_LINE = "gpu_count: 3 GPU(s); l40s expects 1, 2, 4, 8 or 10 on a bare_metal node"


def write(root, folder, files):
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (path / name).write_text(data if isinstance(data, str) else json.dumps(data, indent=4, sort_keys=True))


def judge_in_turn(root, hosts):
    """Each host judged by the action's judge() with the hosts judged before it as its fleet, its
    normal.json and profile.json written in its folder; the records by host."""
    fleet, records = {}, {}
    for name, prof, bench in hosts:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        record = node_normal_action.judge({"host": name, "path": str(folder), "profile": prof, "benchmark": bench},
                                          fleet=fleet, now=NOW)
        fleet[name] = {"profile": record["profile"]["name"], "figures": record["figures"]}
        records[name] = record
        write(root, name, {"normal.json": record, "profile.json": dict(prof, host=name, time="2026-12-07T06:00:00Z")})
    return records


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("normal") / "artifacts"
    records = judge_in_turn(root, HOSTS)
    evil = profile(PAYLOAD, PAYLOAD, [8], 8)
    evil["reasons"] = [PAYLOAD]
    record = node_normal_action.judge({"host": PAYLOAD, "path": str(root / "evil"), "profile": evil,
                                       "benchmark": benchmark(50.0, 10.0)}, fleet={}, now=NOW)
    record["checks"].append({"check": PAYLOAD, "item": PAYLOAD, "status": "outside", "message": PAYLOAD,
                             "value": PAYLOAD, "expected": [PAYLOAD]})
    write(root, "evil", {"normal.json": record})
    # gpu-c1: a profile, no normal.json (not judged yet); gpu-d1: an audit only.
    write(root, "gpu-c1", {"profile.json": dict(HOSTS[0][1], host="gpu-c1"),
                           "audit.json": {"host": "gpu-c1", "findings": []}})
    write(root, "gpu-d1", {"audit.json": {"host": "gpu-d1", "findings": []}})
    model = collect.collect(str(root))
    text = page.render(model)
    return root, records, model, text, Doc(text)


def host(model, name):
    return next(h for h in model["hosts"] if h["name"] == name)


def group(model, name):
    return next(g for g in model["normal"]["profiles"] if g["profile"] == name)


# ------------------------------------------------------------------------------ the records

def test_the_records_are_what_each_host_saw_when_judged(fleet):
    records = fleet[1]
    slow = records["gpu-a4"]
    assert slow["normal"] is True and slow["peers"]["compared"] == [], "judged first: no peers, its GPU count is ok"
    assert slow["peers"]["reason"].startswith("fewer than 3 hosts of hgx-hopper/throughput")
    assert records["gpu-a3"]["normal"] is True and len(records["gpu-a3"]["peers"]["hosts"]) == 4
    assert records["gpu-b1"]["normal"] is False and records["gpu-b1"]["lines"] == [OUTSIDE_LINE]


# ------------------------------------------------------------------------------ collect

def test_normal_and_profile_json_are_read_and_linked(fleet):
    _root, _records, model, _text, _doc = fleet
    assert "normal.json" in collect.HOST_FILES and "profile.json" in collect.HOST_FILES
    assert host(model, "gpu-a1")["files"] == ["normal.json", "profile.json"]
    assert host(model, "gpu-c1")["files"] == ["profile.json", "audit.json"]
    assert host(model, PAYLOAD)["folder"] == "evil", "the host's name is its normal.json's"
    assert "2026-12-07T06:30:00Z" in host(model, "gpu-a1")["times"]
    assert not [n for n in model["notes"] if "normal.json" in n or "profile.json" in n]


def test_the_peers_are_worked_out_again_over_the_whole_fleet(fleet):
    model = fleet[2]
    slow = host(model, "gpu-a4")["normal"]
    assert (slow["status"], slow["normal"], slow["recorded_normal"], slow["peers_from"]) == (
        "not_normal", False, True, "fleet")
    assert slow["lines"] == [SLOW_LINE]
    assert slow["peers"] == ["gpu-a1", "gpu-a2", "gpu-a3"] and slow["recorded_peers"] == 0
    assert slow["compared"] == 2 and slow["reason"] is None
    [outlier] = slow["outliers"]
    assert (outlier["figure"], outlier["value"], outlier["unit"], outlier["median"], outlier["hosts"],
            outlier["direction"], outlier["message"]) == (
        "decode_tokens_per_s", 225.5, "tok/s", 674.9, 4, "worse", SLOW_LINE)
    assert outlier["mads_away"] == 33.29
    assert [c["check"] for c in slow["checks"]] == ["p2p_floor"] and slow["checks"][0]["status"] == "unknown"
    assert slow["outside"] == 0
    assert (slow["profile"], slow["platform"], slow["reasons"]) == (HOPPER, "hgx-hopper", ["8 x hgx-hopper, by device id 0x2330"])
    assert slow["settings"] == {"mads": 3.0, "min_peers": 3, "min_spread_pct": 2.0}
    for name in ("gpu-a1", "gpu-a2", "gpu-a3"):
        normal = host(model, name)["normal"]
        assert (normal["status"], normal["lines"], normal["outliers"], normal["compared"]) == ("normal", [], [], 2), name
        assert all(f["median"] == 674.9 for f in normal["figures"] if f["figure"] == "decode_tokens_per_s")


def test_an_expectation_outside_makes_a_host_not_normal_without_peers(fleet):
    model = fleet[2]
    b1, b2 = host(model, "gpu-b1")["normal"], host(model, "gpu-b2")["normal"]
    assert (b1["status"], b1["lines"], b1["outside"], b1["compared"]) == ("not_normal", [OUTSIDE_LINE], 1, 0)
    assert b1["checks"][0]["message"] == "3 GPU(s); l40s expects 1, 2, 4, 8 or 10 on a bare_metal node"
    assert b1["reason"].startswith("fewer than 3 hosts of l40s/latency with these figures")
    assert (b2["status"], b2["lines"], b2["compared"]) == ("normal", [], 0), "its GPU count is a check that passed"


def test_a_host_without_normal_json_is_not_judged(fleet):
    model = fleet[2]
    c1, d1 = host(model, "gpu-c1")["normal"], host(model, "gpu-d1")["normal"]
    assert (c1["status"], c1["record"], c1["why"], c1["profile"]) == ("not_judged", False, "no normal.json", HOPPER)
    assert (d1["status"], d1["why"], d1["profile"]) == ("not_judged", "no normal.json", None)
    assert "gpu-c1" not in host(model, "gpu-a4")["normal"]["peers"], "a host without normal.json is no peer"


def test_the_fleet_summary_per_profile(fleet):
    model = fleet[2]
    summary = model["normal"]
    assert summary["counts"] == {"not_normal": 3, "normal": 4, "not_judged": 2, "total": 9}
    assert summary["records"] == 7
    assert [g["profile"] for g in summary["profiles"]] == [PAYLOAD, HOPPER, L40S, None]
    hopper = group(model, HOPPER)
    assert hopper["hosts"] == ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4", "gpu-c1"]
    assert hopper["counts"] == {"not_normal": 1, "normal": 3, "not_judged": 1}
    assert [(e["name"], e["lines"], e["id"]) for e in hopper["not_normal"]] == [
        ("gpu-a4", [SLOW_LINE], host(model, "gpu-a4")["id"])]
    assert [(e["name"], e["why"]) for e in hopper["not_judged"]] == [("gpu-c1", "no normal.json")]
    l40s = group(model, L40S)
    assert l40s["counts"] == {"not_normal": 1, "normal": 1, "not_judged": 0}
    assert [(e["name"], e["lines"]) for e in l40s["not_normal"]] == [("gpu-b1", [OUTSIDE_LINE])]
    assert [e["name"] for e in group(model, None)["not_judged"]] == ["gpu-d1"]


def test_a_host_not_normal_needs_a_look(fleet):
    model = fleet[2]
    assert host(model, "gpu-a4")["attention"] == ["not normal"] and collect.needs_a_look(host(model, "gpu-a4"))
    assert host(model, "gpu-a1")["attention"] == [] and not collect.needs_a_look(host(model, "gpu-a1"))


def test_the_settings_a_host_was_judged_with_hold_for_its_peers(fleet):
    records = fleet[1]
    hosts = dict((name, {"normal": record}) for name, record in records.items())
    lenient = json.loads(json.dumps(records["gpu-a4"]))
    lenient["settings"] = {"mads": 40, "min_peers": 3, "min_spread_pct": 2}
    hosts["gpu-a4"] = {"normal": lenient}
    peers = collect.normal_fleet(hosts)
    normal = collect.normal_model("gpu-a4", lenient, None, peers)
    assert normal["status"] == "normal" and normal["settings"]["mads"] == 40.0
    strict = dict(lenient, settings={"mads": "x", "min_peers": 1, "min_spread_pct": -1})
    assert collect.normal_settings(strict) == {"mads": node_normal.DEFAULT_MADS, "min_peers": node_normal.DEFAULT_MIN_PEERS,
                                               "min_spread_pct": node_normal.DEFAULT_MIN_SPREAD_PCT}
    assert collect.normal_model("gpu-a4", strict, None, peers)["lines"] == [SLOW_LINE]
    few = dict(lenient, settings={"min_peers": 5})
    normal = collect.normal_model("gpu-a4", few, None, peers)
    assert normal["compared"] == 0 and normal["reason"].startswith("fewer than 5 hosts")
    assert normal["status"] == "normal", "the GPU count held; no peer verdict with 4 hosts of 5 needed"


def test_a_host_model_without_the_fleet_keeps_the_recorded_peers(fleet):
    records = fleet[1]
    alone = collect.host_model("gpu-a4", {"normal": records["gpu-a4"]})
    assert alone["normal"]["peers_from"] == "normal.json" and alone["normal"]["status"] == "normal"
    later = collect.host_model("gpu-a3", {"normal": records["gpu-a3"]})["normal"]
    assert later["compared"] == 2 and later["peers"] == ["gpu-a1", "gpu-a2", "gpu-a4"]


def test_a_profile_changed_since_the_judgement_is_said(fleet):
    records = fleet[1]
    changed = dict(HOSTS[0][1], name="hgx-hopper/latency", pinned=True, reasons=["pinned by the inventory"])
    host_model = collect.host_model("gpu-a4", {"normal": records["gpu-a4"], "profile": changed}, peers_fleet={})
    normal = host_model["normal"]
    assert (normal["profile"], normal["profile_now"], normal["pinned"]) == (HOPPER, "hgx-hopper/latency", True)
    assert normal["reasons"] == ["8 x hgx-hopper, by device id 0x2330"], "the reasons of the profile it was judged under"
    host_model["id"] = "host-1"
    model = collect.fleet_model({})
    model.update(hosts=[host_model])
    text = page.render(model)
    assert "Its profile.json now says hgx-hopper/latency (its normal.json was judged under the one above); pinned by " \
        "the inventory; chosen for: 8 x hgx-hopper, by device id 0x2330." in text


def test_odd_shapes_in_a_normal_record_do_not_break_the_model():
    record = {"host": "h", "profile": "x", "checks": ["junk", {"check": 3}, {"check": "c", "status": "outside"}],
              "figures": [{"figure": "f", "value": "1"}, {"figure": "g", "value": float("nan"), "better": "higher"},
                          {"figure": "k", "value": True, "better": "lower"}, 7], "settings": [], "normal": "yes"}
    normal = collect.normal_model("h", record, {"name": 5}, {})
    assert normal["status"] == "not_normal" and normal["lines"] == ["c: "] and normal["profile"] is None
    assert normal["figures"] == [] and normal["recorded_normal"] is None and normal["reason"] == "no profile recorded for this host"
    assert collect.normal_fleet({"h": {"normal": record}}) == {"h": {"profile": None, "figures": []}}
    assert collect.normal_model("h", None, None, None)["why"] == "no normal.json"


def test_a_damaged_normal_or_profile_json_is_left_out_with_a_note(tmp_path):
    write(tmp_path, "node-a", {"normal.json": '{"host": "node-a", "checks": [', "audit.json": {"host": "node-a"}})
    write(tmp_path, "node-b", {"normal.json": {"host": "node-b"}, "profile.json": {"host": "node-b", "name": 3}})
    model = collect.collect(str(tmp_path))
    assert [h["name"] for h in model["hosts"]] == ["node-a", "node-b"], "a folder with a normal.json is a host"
    assert all(h["normal"]["status"] == "not_judged" and not h["normal"]["record"] for h in model["hosts"])
    notes = [n for n in model["notes"] if "normal.json" in n or "profile.json" in n]
    assert notes[0].startswith("node-a/normal.json: not JSON")
    assert notes[1:] == ["node-b/normal.json: not a node_normal verdict (no checks or figures list)",
                         "node-b/profile.json: not a profile record (no name)"]
    text = page.render(model)
    assert '<p class="box muted" id="normal-none">No normal.json in the artifacts folder' in text


# ------------------------------------------------------------------------------ the page

def test_the_section_comes_right_after_the_health(fleet):
    _root, _records, _model, text, doc = fleet
    assert text.index('<section id="health">') < text.index('<section id="normal"><h2>Is this node normal?</h2>') \
        < text.index('<section id="summary">')
    assert "#normal" in [a.get("href") for a in doc.all("a")][:4]
    tiles = [a["data-tile"] for a in doc.all("div") if a.get("data-tile", "").startswith("normal ")]
    assert tiles == ["normal not normal", "normal normal", "normal not judged"]
    assert '<div class="tile" data-tile="normal not normal"><b>3</b><span class="badge b-bad">not normal</span>' in text
    assert '<div class="tile" data-tile="normal normal"><b>4</b><span class="badge b-ok">normal</span>' in text
    assert '<div class="tile" data-tile="normal not judged"><b>2</b><span class="badge">not judged</span>' in text


def _box(text, profile_name):
    section = text.split('<section id="normal">', 1)[1].split("</section>", 1)[0]
    return section.split('data-profile="%s"' % profile_name, 1)[1].split('<div class="box normal-profile"', 1)[0]


def test_each_profile_names_its_hosts_not_normal_with_their_lines(fleet):
    _root, _records, model, text, _doc = fleet
    hopper = _box(text, HOPPER)
    assert hopper.startswith('><b>Profile hgx-hopper/throughput</b> <span class="muted">5 hosts: 3 normal, '
                             '1 not normal, 1 not judged</span>')
    assert '<li data-host="gpu-a4"><a href="#%s">gpu-a4</a> <span class="badge b-bad">not normal</span><ul><li>%s</li>' \
        '</ul></li>' % (host(model, "gpu-a4")["id"], SLOW_LINE) in hopper
    assert "225.5 tok/s against the median 674.9 tok/s" in hopper
    for name in ("gpu-a1", "gpu-a2", "gpu-a3"):
        assert 'data-host="%s"' % name not in hopper and ">%s<" % name not in hopper, name
    assert 'Not judged: <a href="#%s">gpu-c1</a> (no normal.json).' % host(model, "gpu-c1")["id"] in hopper
    l40s = _box(text, L40S)
    assert "<li>%s</li>" % OUTSIDE_LINE in l40s and ">gpu-b1</a>" in l40s and "gpu-b2" not in l40s
    section = text.split('<section id="normal">', 1)[1].split("</section>", 1)[0]
    assert section.count("against the median") == 1, "only the slow host is an outlier"
    assert "<b>Profile no profile recorded</b>" in section and ">gpu-d1</a> (no normal.json)" in section


def _section(text, model, name):
    return text.split('id="%s" data-host=' % host(model, name)["id"], 1)[1].split('<details class="host"', 1)[0]


def test_each_host_s_verdict_follows_its_health_line(fleet):
    _root, _records, model, text, _doc = fleet
    slow_id = host(model, "gpu-a4")["id"]
    slow = _section(text, model, "gpu-a4")
    summary, body = slow.split("</summary>", 1)
    assert summary.startswith('"gpu-a4" open><summary>gpu-a4 <span class="badge b-bad">not normal</span>')
    assert body.startswith('<div class="in"><p class="health-host muted">Health: not judged (no health.json).</p>'
                           '<div class="normal-host" id="%s-normal">Profile hgx-hopper/throughput: <span class="badge '
                           'b-bad">not normal</span> 1 problem; 2 figures against the 3 other hosts of its profile '
                           '(outlier: more than 3 MADs from their median); judged at 2026-12-07T06:30:00Z, when its '
                           'normal.json said normal (with 0 other hosts of its profile).<ul><li>%s</li></ul>'
                           % (slow_id, SLOW_LINE))
    assert "Could not be judged: p2p_floor: no P2P figures recorded (verify.json)." in body
    assert "Chosen for: 8 x hgx-hopper, by device id 0x2330." in body
    assert '<tr class="short-row"><td>decode_tokens_per_s</td><td class="n">225.5 tok/s</td><td class="n">674.9 tok/s' \
        '</td><td class="n">3.40</td><td class="n">4</td><td class="n">33.3</td><td>outlier, worse</td></tr>' in body
    normal = _section(text, model, "gpu-a1").split("</summary>", 1)[1]
    assert '<div class="normal-host" id="%s-normal">Profile hgx-hopper/throughput: <span class="badge b-ok">normal' \
        '</span> 2 figures against the 3 other hosts of its profile' % host(model, "gpu-a1")["id"] in normal
    assert "against the median" not in normal and "when its normal.json said" not in normal
    assert "<td>within</td>" in normal
    outside = _section(text, model, "gpu-b1").split("</summary>", 1)[1]
    assert '<span class="badge b-bad">not normal</span> 1 problem; no peer verdict: fewer than 3 hosts of ' \
        'l40s/latency' in outside and "<li>%s</li>" % OUTSIDE_LINE in outside
    assert '<div class="normal-host muted" id="%s-normal">Profile hgx-hopper/throughput: <span class="badge">not judged' \
        '</span> (no normal.json).</div>' % host(model, "gpu-c1")["id"] in _section(text, model, "gpu-c1")
    assert '<div class="normal-host muted" id="%s-normal">Profile none recorded: <span class="badge">not judged' \
        '</span> (no normal.json).</div>' % host(model, "gpu-d1")["id"] in _section(text, model, "gpu-d1")
    assert 'href="gpu-a4/normal.json"' in slow and 'href="gpu-a4/profile.json"' in slow


def test_the_same_records_give_the_same_bytes(fleet):
    root, _records, _model, text, _doc = fleet
    assert page.render(collect.collect(str(root))) == text


# ------------------------------------------------------------------------------ escaping

def test_strings_of_the_records_are_escaped(fleet):
    _root, _records, model, text, doc = fleet
    assert not doc.all("script") and not doc.all("img")
    for _tag, attrs in doc.tags:
        assert not any(key.startswith("on") for key in attrs), attrs
    evil = host(model, PAYLOAD)
    assert evil["normal"]["status"] == "not_normal"
    line = "%s %s: %s" % (ESCAPED, ESCAPED, ESCAPED)
    box = _box(text, ESCAPED)
    assert box.startswith("><b>Profile %s</b>" % ESCAPED)
    assert '<li data-host="%s"><a href="#%s">%s</a>' % (ESCAPED, evil["id"], ESCAPED) in box
    assert "<li>%s</li>" % line in box
    section = _section(text, model, PAYLOAD)
    assert '<div class="normal-host" id="%s-normal">Profile %s: <span class="badge b-bad">not normal</span>' % (
        evil["id"], ESCAPED) in section
    assert "Chosen for: %s." % ESCAPED in section
    badges = set(a["class"] for a in doc.all("span") if "badge" in (a.get("class") or ""))
    assert not [b for b in badges if "script" in b or "<" in b]
