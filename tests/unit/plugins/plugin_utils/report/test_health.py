"""report/collect and report/page with each host's health.json: read like the other records
(optional, every key with a default, a damaged one left out with a note), and shown first - the
fleet's health at the top of the page (hosts healthy, degraded, quarantined; the quarantined ones
named with their actions), each host's health line first in its section, a quarantined host in
the rollout; severity H with its own colour in the findings grid; every string escaped, and a
status outside the known ones never a class."""

import datetime
import json

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import health_verdict
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect, page
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_report import rollout_result
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils.report.test_page import Doc
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils.test_rollout_report_health import (
    health, quarantined_before, tuned)

FACTS = {"health": {"gpus_pci": 2},
         "gpus": [{"index": 0, "bdf": "0000:41:00.0", "name": "NVIDIA H100 80GB HBM3"},
                  {"index": 1, "bdf": "0000:42:00.0", "name": "NVIDIA H100 80GB HBM3"}]}
NOW = datetime.datetime(2026, 12, 7, 5, 50, tzinfo=datetime.timezone.utc)


def rule(rule_id, action, message, gpu=0):
    """A health rule (severity H) that holds on FACTS and names GPU ``gpu``."""
    return {"id": rule_id, "severity": "H", "action": action, "title": rule_id.replace("_", " "),
            "facts": {"count": "health.gpus_pci"}, "values": {"index": "`%d`" % gpu}, "when": "count >= `0`",
            "message": message, "fix": {"class": "manual", "steps": "see the runbook"}, "rationale": "a test"}


def verdict(host, rules, policy="quarantine"):
    """health.json as the action health_judge writes it (plugin_utils/health_verdict.py)."""
    return health_verdict.health_verdict(FACTS, rules, host=host, now=NOW, policy=policy)


QUARANTINED = [rule("gpu_remap_failure", "rma", "a row remapping failed"),
               rule("xid_events", "reset_gpu", "XID 79: the GPU fell off the bus", gpu=1)]
DEGRADED = [rule("gpu_sram_corrected", "monitor", "12 corrected SRAM errors", gpu=1)]


def audit_with_h(host):
    """An audit.json with a health finding beside a P0 one, as the audit writes them now."""
    return {"host": host, "time": "2026-12-07T05:49:00Z", "worst": "H",
            "findings": [{"rule": "gpu_remap_failure", "severity": "H", "title": "GPU row remapping failed",
                          "item": "GPU 0", "message": "a row remapping failed", "action": "rma", "blocking": True},
                         {"rule": "cpu_governor", "severity": "P0", "title": "CPU governor", "message": "powersave"}],
            "unknown": []}


def write(root, name, files):
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, data in files.items():
        (folder / file_name).write_text(data if isinstance(data, str) else json.dumps(data))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("health") / "artifacts"
    write(root, "node-q", {"health.json": verdict("node-q", QUARANTINED), "audit.json": audit_with_h("node-q")})
    write(root, "node-d", {"health.json": verdict("node-d", DEGRADED), "audit.json": {"host": "node-d", "findings": []}})
    write(root, "node-h", {"health.json": verdict("node-h", []), "audit.json": {"host": "node-h", "findings": []}})
    write(root, "node-x", {"health.json": '{"status": "quarant', "audit.json": {"host": "node-x", "findings": []}})
    write(root, "node-y", {"health.json": {"host": "node-y", "findings": []}})
    write(root, "node-z", {"audit.json": {"host": "node-z", "findings": []}})
    rollout = rollout_result({"run_id": "20261207T050000Z-h", "started": "2026-12-07T05:00:00Z",
                              "batches": [["node-h"], ["node-d", "node-q"]],
                              "hosts": {"node-h": tuned(1), "node-d": tuned(2, health("degraded")),
                                        "node-q": quarantined_before(2)}})
    (root / "rollout-20261207T050000Z-h.json").write_text(json.dumps(rollout))
    model = collect.collect(str(root))
    text = page.render(model)
    return root, model, text, Doc(text)


def host(model, name):
    return next(h for h in model["hosts"] if h["name"] == name)


# ------------------------------------------------------------------------------ collect

def test_health_json_is_read_first_and_linked_first(fleet):
    _root, model, _text, _doc = fleet
    assert collect.HOST_FILES[0] == "health.json" and collect.LINKED_FILES[0] == "health.json"
    quarantined = host(model, "node-q")
    assert quarantined["files"][:2] == ["health.json", "audit.json"]
    health = quarantined["health"]
    assert (health["status"], health["phase"], health["policy"], health["blocking"], health["quarantine"]) == (
        "quarantined", "before", "quarantine", True, True)
    assert health["actions"] == ["rma", "reset_gpu"] and health["time"] == "2026-12-07T05:50:00Z"
    assert [(f["rule"], f["action"], f["blocking"], f["severity"]) for f in health["findings"]] == [
        ("gpu_remap_failure", "rma", True, "H"), ("xid_events", "reset_gpu", True, "H")]
    assert health["counts"] == {"findings": 2, "blocking": 2, "unknown": 0}
    assert [(g["index"], g["status"], g["actions"]) for g in health["gpus"]] == [
        (0, "quarantined", ["rma"]), (1, "quarantined", ["reset_gpu"])]
    assert host(model, "node-d")["health"]["status"] == "degraded"
    assert host(model, "node-h")["health"]["status"] == "healthy"
    assert quarantined["times"][0] == "2026-12-07T05:50:00Z"


def test_a_damaged_health_json_is_left_out_with_a_note(fleet):
    _root, model, _text, _doc = fleet
    assert host(model, "node-x")["health"] is None and host(model, "node-x")["audit"]
    assert host(model, "node-y")["health"] is None, "a folder with only a health.json is a host of the page"
    notes = [n for n in model["notes"] if "health.json" in n]
    assert [n.split(":")[0] for n in notes] == ["node-x/health.json", "node-y/health.json"]
    assert "not JSON" in notes[0] and notes[1] == "node-y/health.json: not a health verdict (no status)"


def test_the_fleet_health_summary(fleet):
    summary = fleet[1]["health"]
    assert summary["counts"] == {"healthy": 1, "degraded": 1, "quarantined": 1, "other": 0, "not_judged": 3,
                                 "total": 6}
    assert summary["judged"] == 3
    assert [(e["name"], e["actions"], e["id"]) for e in summary["quarantined"]] == [
        ("node-q", ["rma", "reset_gpu"], host(fleet[1], "node-q")["id"])]
    assert [e["name"] for e in summary["degraded"]] == ["node-d"] and summary["other"] == []


def test_a_quarantined_host_needs_a_look_and_a_degraded_one_is_noted(fleet):
    model = fleet[1]
    assert host(model, "node-q")["attention"][0] == "quarantined" and collect.needs_a_look(host(model, "node-q"))
    assert host(model, "node-d")["attention"] == ["health degraded"] and not collect.needs_a_look(host(model, "node-d"))
    assert "H findings" not in host(model, "node-q")["attention"], "its health.json says it"


def test_the_rollout_keeps_a_quarantined_host_and_its_health(fleet):
    rollout = fleet[1]["rollout"]
    assert rollout["status"] == "completed" and rollout["counts"]["quarantined"] == 1
    sick = rollout["hosts"]["node-q"]
    assert sick["status"] == "quarantined" and sick["health"]["actions"] == ["rma", "reset_gpu"]
    assert sick["health"]["findings"][0]["message"] == "a row remapping failed: the GPU needs an RMA"
    assert collect.rollout_model({"hosts": {"a": {"status": "quarantined", "health": "odd"}}})["hosts"]["a"]["health"] is None


def test_odd_shapes_in_a_health_record_do_not_break_the_model():
    assert collect.health_model(None) is None and collect.health_model({"status": 3}) is None
    health = collect.health_model({"status": "quarantined", "actions": "rma", "findings": ["junk", {"rule": 5}],
                                   "counts": {"findings": "two", "unknown": True}, "gpus": {"0": {}},
                                   "unknown": [{"reasons": "x"}], "blocking": "yes", "phase": ["x"]})
    assert health["actions"] == [] and health["gpus"] == [] and health["blocking"] is False
    assert health["findings"] == [{"rule": "5", "severity": None, "title": "5", "item": None, "message": "",
                                   "action": None, "blocking": False}]
    assert health["counts"] == {"findings": 1, "blocking": 0, "unknown": 1} and health["phase"] is None
    assert health["unknown"][0]["reasons"] == []


def test_h_findings_rank_first_in_the_grid(fleet):
    columns = fleet[1]["columns"]
    assert columns[0]["rule"] == "gpu_remap_failure" and columns[0]["severity"] == "H"
    assert collect.SEVERITIES[0] == "H"
    assert host(fleet[1], "node-q")["audit"]["counts"]["H"] == 1 and host(fleet[1], "node-q")["audit"]["worst"] == "H"


# ------------------------------------------------------------------------------ the page

def test_the_health_comes_first_on_the_page(fleet):
    _root, _model, text, doc = fleet
    assert text.index('<section id="health">') < text.index('<section id="summary">') < text.index('id="findings"')
    assert [a.get("href") for a in doc.all("a")][:2] == ["#health", "#findings"], "the nav names it first"
    tiles = dict((a["data-tile"], a) for a in doc.all("div") if a.get("data-tile", "").startswith("health "))
    assert list(tiles) == ["health quarantined", "health degraded", "health healthy", "health not judged"]
    assert '<div class="tile" data-tile="health quarantined"><b>1</b><span class="badge hs-quarantined">quarantined' in text
    assert '<div class="tile" data-tile="health degraded"><b>1</b><span class="badge hs-degraded">degraded' in text
    assert '<div class="tile" data-tile="health healthy"><b>1</b><span class="badge hs-healthy">healthy' in text
    assert '<div class="tile" data-tile="health not judged"><b>3</b>not judged' in text
    box = text.split('id="health-quarantined"', 1)[1].split("</div>", 1)[0]
    node_q = host(fleet[1], "node-q")
    assert '<a href="#%s">node-q</a> <span class="badge hs-quarantined">quarantined</span> rma, reset_gpu; judged ' \
        "before the tuning" % node_q["id"] in box
    assert "node-d" in text.split('id="health-degraded"', 1)[1].split("</div>", 1)[0]


def _section(text, model, name):
    return text.split('id="%s" data-host=' % host(model, name)["id"], 1)[1].split('<details class="host"', 1)[0]


def test_each_host_s_health_line_is_first_in_its_section(fleet):
    _root, model, text, _doc = fleet
    section = _section(text, model, "node-q")
    summary, body = section.split("</summary>", 1)
    assert summary.startswith('"node-q" open><summary>node-q <span class="badge hs-quarantined">quarantined</span>'
                              '<span class="badge b-H">H</span>')
    assert body.startswith('<div class="in"><div class="health-host" id="%s-health">Health <span class="badge '
                           'hs-quarantined">quarantined</span> actions: rma, reset_gpu; judged before the tuning at '
                           '2026-12-07T05:50:00Z, policy quarantine; quarantined: not tuned, not benchmarked, never '
                           'reverted.<ul><li>a row remapping failed (gpu_remap_failure; rma, blocking)</li>'
                           % host(model, "node-q")["id"])
    assert "GPU 0 0000:41:00.0: quarantined (rma); GPU 1 0000:42:00.0: quarantined (reset_gpu)." in body
    assert _section(text, model, "node-d").split("</summary>", 1)[1].startswith(
        '<div class="in"><div class="health-host" id="%s-health">Health <span class="badge hs-degraded">degraded</span> '
        "actions: monitor; judged before the tuning" % host(model, "node-d")["id"])
    assert '<span class="badge hs-healthy">healthy</span>' in _section(text, model, "node-h")
    assert _section(text, model, "node-z").split("</summary>", 1)[1].startswith(
        '<div class="in"><p class="health-host muted">Health: not judged (no health.json).</p>')


def test_severity_h_has_its_own_colour_and_legend(fleet):
    _root, model, text, doc = fleet
    assert "H" in page.SEVERITY_WORDS and list(page.SEVERITY_WORDS)[0] == "H"
    assert ".b-H,.s-H{background:#6a1b9a" in text and ".b-P0,.s-P0{background:#c62828" in text
    assert '<span class="badge s-H">H</span> health' in text
    cells = [a for a in doc.all("td") if a.get("data-rule") == "gpu_remap_failure"]
    assert [c["class"] for c in cells] == ["f s-H"]
    assert [c["class"] for c in doc.all("td") if a_rule(c) == "cpu_governor"] == ["f s-P0"]


def a_rule(attrs):
    return attrs.get("data-rule")


def test_the_rollout_shows_the_quarantined_host(fleet):
    _root, model, text, doc = fleet
    assert doc.all("table", id="rollout-quarantined")
    row = text.split('<table id="rollout-quarantined">', 1)[1].split("</table>", 1)[0]
    assert "<td>before the tuning</td><td>rma, reset_gpu</td>" in row
    assert "<li>GPU 0 (0000:41:00.0): a row remapping failed: the GPU needs an RMA</li>" in row
    assert "<td>nothing changed</td>" in row
    assert 'class="chip st-quarantined"' in text and 'class="sq st-quarantined"' in text
    assert not doc.all("table", id="rollout-failures")
    assert "Rollout: quarantined in batch 2 for its hardware (rma, reset_gpu), not reverted." in _section(text, model, "node-q")


def test_a_page_without_health_says_so(tmp_path):
    (tmp_path / "node-a").mkdir()
    (tmp_path / "node-a" / "audit.json").write_text(json.dumps({"host": "node-a", "findings": []}))
    text = page.render(collect.collect(str(tmp_path)))
    assert '<p class="box muted" id="health-none">No health.json in the artifacts folder' in text
    assert "Health: not judged (no health.json)." in text


# ------------------------------------------------------------------------------ escaping

PAYLOAD = '"><script>alert(1)</script><img src=x onerror=alert(2)><a href="javascript:x">'


def test_health_strings_are_escaped_and_a_status_is_never_a_class():
    record = verdict("h", QUARANTINED)
    record["status"] = PAYLOAD
    record["actions"] = [PAYLOAD]
    record["phase"] = PAYLOAD
    record["policy"] = PAYLOAD
    record["time"] = PAYLOAD
    record["findings"][0].update(item=PAYLOAD, message=PAYLOAD, rule=PAYLOAD, action=PAYLOAD, title=PAYLOAD)
    record["gpus"][0].update(status=PAYLOAD, bdf=PAYLOAD, actions=[PAYLOAD])
    model = collect.fleet_model({PAYLOAD: {"folder": "h", "files": ["health.json"], "health": record}})
    assert model["health"]["counts"]["other"] == 1
    text = page.render(model)
    doc = Doc(text)
    assert not doc.all("script") and not doc.all("img")
    assert not [a for a in doc.all("a") if (a.get("href") or "").startswith("javascript:")]
    badges = [a["class"] for a in doc.all("span") if "badge" in (a.get("class") or "")]
    assert "badge hs-unk" in badges
    assert all(not cls.startswith("badge hs-") or cls in ("badge hs-unk", "badge hs-healthy", "badge hs-degraded",
                                                          "badge hs-quarantined") for cls in badges), badges
    escaped = "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"
    assert '<span class="badge hs-unk">%s' % escaped in text
    assert text.count(escaped) >= 8
    assert 'id="health-other"' in text


def test_health_strings_in_a_rollout_record_are_escaped():
    rollout = rollout_result({"run_id": "r1", "batches": [["h"]], "hosts": {"h": quarantined_before(1)}})
    finding = rollout["hosts"]["h"]["health"]["findings"][0]
    finding.update(item=PAYLOAD, message=PAYLOAD)
    rollout["hosts"]["h"]["health"]["actions"] = [PAYLOAD]
    rollout["hosts"]["h"]["health"]["status"] = PAYLOAD
    model = collect.fleet_model({}, rollouts=[dict(rollout, file="rollout-r1.json")])
    text = page.render(model)
    doc = Doc(text)
    assert not doc.all("script") and not doc.all("img") and doc.all("table", id="rollout-quarantined")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text.split('id="rollout-quarantined"', 1)[1]
