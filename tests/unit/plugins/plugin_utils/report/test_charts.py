"""report/charts: the page's SVG, well formed, escaped, the same bytes for the same numbers,
and showing what the page promises (short cells marked, the noise band, the stop line)."""

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import charts

NS = "{http://www.w3.org/2000/svg}"


def parse(svg):
    # The page is HTML, where an <svg> needs no namespace; parsing it as XML checks it is well formed.
    return ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def matrix(n, value=393.0):
    return [[None if i == j else value + i + j for j in range(n)] for i in range(n)]


def test_a_heatmap_has_a_cell_per_pair_and_marks_the_short_ones():
    floors = [[None if i == j else 337.5 for j in range(4)] for i in range(4)]
    values = matrix(4)
    values[0][1] = 212.4
    svg = charts.heatmap("one way, peer access", [0, 1, 2, 3], values, floors, short={(0, 1)})
    root = parse(svg)
    cells = root.findall(".//%sg/%srect" % (NS, NS))
    assert len(cells) == 16
    assert len([c for c in cells if c.get("class") == "diag"]) == 4
    short = [c for c in cells if c.get("class") == "short"]
    assert len(short) == 1 and "212.4" in short[0].find(NS + "title").text and "floor 337.5" in short[0].find(NS + "title").text
    assert "floor 337.5 GB/s" in root.find(NS + "text").text, "the floor most pairs share is in the title"
    assert "212.4!" in svg
    assert root.get("viewBox").startswith("0 0 ")


def test_cells_are_coloured_against_their_floor():
    below = charts.cell_colour(200.0, 337.5, 400, False)
    above = charts.cell_colour(390.0, 337.5, 400, False)
    assert int(below[1:3], 16) > int(below[3:5], 16), "below the floor is red"
    assert int(above[3:5], 16) > int(above[1:3], 16), "above it green"
    assert charts.cell_colour(None, 337.5, 400, False) is None
    assert charts.cell_colour(20.0, None, 40.0, True) != charts.cell_colour(20.0, None, 40.0, False)


def test_no_peer_access_says_so_in_its_cell():
    access = [[None, False], [False, None]]
    svg = charts.heatmap("one way, peer access", [0, 1], [[None, None], [None, None]], access=access)
    assert svg.count("no P2P") == 2 and "no peer access" in svg
    parse(svg)


def test_text_from_the_artifacts_is_escaped():
    svg = charts.heatmap('<script>alert("x")</script>', ["<b>0</b>", "1"], matrix(2))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "&lt;b&gt;0&lt;/b&gt;" in svg
    parse(svg)


def figure(before, after, noise=2.0, verdict="no measurable change", ranges=True):
    return {"before": before, "after": after, "delta_pct": None if before is None or after is None else
            round(100.0 * (after - before) / before, 2), "noise_pct": noise, "verdict": verdict,
            "before_range": (before * 0.99, before * 1.01) if ranges and before else None,
            "after_range": (after * 0.99, after * 1.01) if ranges and after else None}


def test_bars_show_both_runs_the_noise_band_and_the_change():
    groups = [("c=1", figure(160.0, 135.0, 1.2, "worse")), ("c=4", figure(158.0, 159.0))]
    svg = charts.bars("Decode tokens/s", "tokens/s", groups)
    root = parse(svg)
    rects = root.findall(".//%srect" % NS)
    assert len([r for r in rects if r.get("class") == "band"]) == 2
    assert len([r for r in rects if r.get("class") == "bar before"]) == 2
    assert len([r for r in rects if r.get("class") == "bar after"]) == 2
    assert len(root.findall(".//%spath[@class='whisker']" % NS)) == 4
    deltas = [t for t in root.findall(".//%stext" % NS) if (t.get("class") or "").startswith("d ")]
    assert [t.get("class") for t in deltas] == ["d v-worse", "d v-same"]
    assert deltas[0].text == "-15.6%" and deltas[1].text.startswith("\u2248")


def test_bars_of_a_run_alone_or_nothing_still_draw():
    parse(charts.bars("TTFT", "ms", [("p50", figure(24.0, None, None, "not compared", ranges=False))]))
    parse(charts.bars("TTFT", "ms", []))


@pytest.mark.parametrize("high, ticks", [(0, [0, 1]), (7.3, [0, 2, 4, 6, 8]), (186.0, [0, 50, 100, 150, 200]),
                                         (0.9, [0, 0.25, 0.5, 0.75, 1.0])])
def test_ticks_are_round(high, ticks):
    assert charts.nice_ticks(high) == ticks


def test_efficiency_against_the_ceiling_or_why_not():
    svg = charts.efficiency({"ceiling": 306.2, "decode": 160.9, "percent": 52.5},
                            {"ceiling": 306.2, "decode": 135.5, "percent": 44.2, "formula": "1 GPU x ..."})
    assert "before 52.5 %, after 44.2 %" in svg and "of 306.2 tokens/s" in svg
    parse(svg)
    none = charts.efficiency(None, {"ceiling": None, "decode": 100.0, "reason": "not computed: active_params_billion not given"})
    assert "active_params_billion not given" in none


def test_the_timeline_has_a_square_per_host_and_the_stop():
    rollout = {"run_id": "r1", "verdict": "Stopped after batch 1 of 2", "batches": [
        {"batch": 1, "canary": True, "hosts": ["a"], "ran": True, "outcome": "failed: a (verify)", "stopped_here": True},
        {"batch": 2, "canary": False, "hosts": ["b", "c"], "ran": False, "outcome": "not run", "stopped_here": False}],
        "hosts": {"a": {"status": "failed", "reverted": True}, "b": {"status": "untouched"}, "c": {"status": "untouched"}}}
    svg = charts.timeline(rollout)
    root = parse(svg)
    squares = [r for r in root.findall(".//%srect" % NS) if (r.get("class") or "").startswith("sq ")]
    assert [r.get("class") for r in squares] == ["sq st-failed", "sq st-untouched", "sq st-untouched"]
    assert root.findall(".//%sline[@class='stop']" % NS) and root.findall(".//%spath[@class='rev']" % NS)
    assert [r.get("class") for r in root.findall(".//%srect" % NS) if (r.get("class") or "").startswith("box")] == [
        "box bad", "box notrun"]


def test_the_same_numbers_give_the_same_bytes():
    assert charts.heatmap("x", [0, 1, 2], matrix(3)) == charts.heatmap("x", [0, 1, 2], matrix(3))
