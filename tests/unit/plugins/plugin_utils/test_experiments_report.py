"""experiments_report: a host's serving experiments (experiments.json) as
experiments.md - the headline, every candidate in the order tried, the guard figures, the output
differences and both launch commands - with every value from the node shown as text, and the
record cleaned before it is written."""

import copy
import json
import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.experiments import FilterModule
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.experiments_report import (
    STATUSES, experiments_report)
from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import test_markup_in_records as markup

markdown_it = pytest.importorskip("markdown_it")


def _table(text, heading):
    """The rows of the table under ``## heading``, as lists of raw cells."""
    part = text.split("## %s\n" % heading, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in part.splitlines() if line.startswith("|")]
    return [re.split(r"(?<!\\)\|", row)[1:-1] for row in rows[2:]]


def _fences(text):
    """The bodies of the fenced blocks of ``text``."""
    return [m.group(2) for m in re.finditer(r"^(`{3,})sh\n(.*?)\n\1$", text, re.S | re.M)]


@pytest.fixture
def record():
    return fake.experiments_of("node-1")


def test_the_headline_says_what_changed_and_what_it_cost(record):
    text = experiments_report(record, "node-1")
    assert text.startswith("# Serving experiments: node-1\n")
    assert "Unit `sglang.service` (sglang) on the host itself. Figure `decode_tokens_per_s` at concurrency 1" in text
    assert "**decode_tokens_per_s: 812.3 -> 861** (+6.0 % against the baseline, baseline noise ±1.2 %)." in text
    assert ("7 candidates: 6 tried, 1 kept, 2 rolled back, 1 rejected on accuracy, 1 failed to start, 1 failed, "
            "1 skipped (not tried); 11 restarts (at most 12), 719.5 s total downtime.") in text
    before, after = " ".join(fake.SGLANG_ARGV), " ".join(fake.SGLANG_ARGV + ["--enable-fused-moe-sum-all-reduce"])
    assert "Launch command: `%s` -> `%s`." % (before, after) in text
    assert "Drop-in left: `/etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf`." in text


def test_every_candidate_in_the_order_tried(record):
    rows = _table(experiments_report(record), "Candidates, in the order tried")
    assert [cells[1].strip() for cells in rows] == [c["name"] for c in record["candidates"]]
    by_name = dict((cells[1].strip(), [c.strip() for c in cells]) for cells in rows)
    assert by_name["fused_moe_sum_all_reduce"][2:] == [
        "`--enable-fused-moe-sum-all-reduce`", "low", "kept", "812.3 -> 861", "+6.0 %", "±1.2 %",
        "passed: exact (8 prompts)", "41.2 s / -", "decode_tokens_per_s +6.0 % beyond the noise (±1.2 %)"]
    assert by_name["cuda_graph_max_bs"][2:5] == ["`--cuda-graph-max-bs 160`", "low", "rolled back"]
    assert by_name["schedule_policy_lpm"][4:9] == ["failed", "not measured", "-", "-", "not checked"]
    assert by_name["torch_compile"][4] == "failed to start" and by_name["torch_compile"][9] == "300.0 s / 42.6 s"
    assert by_name["kv_cache_fp8"][4] == "rejected on accuracy"
    assert by_name["kv_cache_fp8"][8] == "FAILED: divergence 12.5 % of 0 % allowed (3 of 8 prompts differ)"
    assert by_name["dp_attention"][3:5] == ["high", "skipped"] and by_name["dp_attention"][9] == "- / -"
    assert by_name["dp_attention"][10] == "high risk: serving_experiments_allow_risky is off"


def test_guards_differences_commands_and_noise(record):
    text = experiments_report(record)
    guards = _table(text, "Guard figures")
    regressed = [[c.strip() for c in row] for row in guards if "regressed" in row[-1]]
    assert regressed == [["6", "continuous_decode_steps", "ttft_ms.p90", "40.5", "44.1", "+9.0 %", "±2.0 %",
                          "worse", "**regressed**"]]
    assert '  - prompt 3, token 17: baseline `" the"`, candidate `" a"`' in text
    before, after = _fences(text)
    assert before.splitlines()[:4] == ["/usr/bin/python3 \\", "  -m sglang.launch_server \\",
                                       "  --model-path meta-llama/Llama-3.1-8B-Instruct \\", "  --tp 4 \\"]
    assert after.splitlines()[-1] == "  --enable-fused-moe-sum-all-reduce"
    assert "## Noise" in text and "no measurable change" in text.split("## Noise", 1)[1]


def test_nothing_kept_leaves_the_command_as_it_was():
    text = experiments_report(fake.experiments_of("node-2", keep=False))
    assert "7 candidates: 6 tried, 0 kept, 3 rolled back" in text
    assert "Launch command unchanged: `%s`." % " ".join(fake.SGLANG_ARGV) in text
    assert "No drop-in left" in text
    before, after = _fences(text)
    assert before == after


def test_a_record_without_candidates_or_figures_still_renders():
    text = experiments_report({"candidates": []})
    assert "No candidate applied to this server." in text and "no baseline was measured" in text
    assert "0 candidates: 0 tried, 0 kept" in text and text.count("Not recorded.") == 2
    odd = experiments_report({"candidates": ["junk", {"name": 3, "status": "exploded", "value": True, "flag": "--x",
                                                      "comparison": {"figure": {"before": "fast", "after": None}},
                                                      "accuracy": {"passed": True, "exact": False,
                                                                   "divergence_pct": 0.0001, "max_divergence_pct": 0.5},
                                                      "downtime_s": "long"}],
                              "restarts": "many", "baseline": {"figure": 1.0}, "before": {"command": "a 'b c"}})
    assert "1 of another status" in odd
    row = [c.strip() for c in _table(odd, "Candidates, in the order tried")[0]]
    assert row[1:6] == ["3", "`--x`", "?", "exploded", "fast -> -"]
    assert row[8] == "passed: divergence 0.0001 % of 0.5 % allowed"


def test_markup_in_any_value_renders_as_text(record):
    record = copy.deepcopy(record)
    bad = record["candidates"][0]
    bad["name"] = "<script>alert(1)</script>"
    bad["reason"] = "a | b | c"
    bad["flag"] = "--x`y"
    bad["value"] = "| `` ``` [l](javascript:x)"
    record["unit"] = "u` <img src=x onerror=alert(1)>"
    record["before"]["argv"] = record["before"]["argv"] + ["```", "~~~", "`````", "\n# heading"]
    record["candidates"][4]["accuracy"]["first_differences"][0]["candidate"] = "```\n<b>x</b>"
    text = experiments_report(record, "<h>")
    html = markup.md_html(text)
    assert "<script>" not in html and "<img" not in html and "<b>" not in html and "<a " not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "# Serving experiments: &lt;h&gt;" in text
    rows = _table(text, "Candidates, in the order tried")
    assert len(rows) == 7 and all(len(cells) == 11 for cells in rows), "a | in a value made a new cell"
    assert "a \\| b \\| c" in rows[0][10]
    before = _fences(text)[0]
    assert before.splitlines()[-4:] == ["  '```' \\", "  '~~~' \\", "  '`````' \\", "  ' # heading'"]
    assert text.count("``````sh\n") == 1, "the fence is longer than any run of backticks in the command"
    assert html.count("<pre>") == 2 and "<h1>" in html and html.count("<h1>") == 1


@pytest.mark.parametrize("keep", [frozenset(), frozenset(STATUSES + ("low", "medium", "high", "finish_reason"))],
                         ids=["every string", "enumerations kept"])
def test_payloads_in_every_string_render_as_text(record, keep):
    """The payloads of test_markup_in_records in every string of the record: the same elements as
    plain words in the same places."""
    got = experiments_report(markup.Replacer(markup.payload, keep)(record))
    want = experiments_report(markup.Replacer(markup.benign, keep)(record))
    doc = markup.assert_same_elements(markup.md_html(got), markup.md_html(want), "experiments.md")
    assert not doc.values("src") and not doc.values("href")


def test_a_bad_record_is_refused():
    for bad in (None, [], "", "not json", {}, {"candidates": "x"}, {"candidates": None}, "[1]"):
        with pytest.raises(AnsibleFilterError, match="experiments record"):
            experiments_report(bad)
    assert experiments_report(json.dumps({"candidates": []}), "h").startswith("# Serving experiments: h")


def test_the_filter_is_registered():
    filters = FilterModule().filters()
    assert filters["experiments_report"] is experiments_report


def test_baseline_and_final_may_name_the_figure_and_give_its_value(record):
    """experiment_summary writes {figure: <its name>, value: <number>}: the number is read from either."""
    record = copy.deepcopy(record)
    record["baseline"] = {"figure": "decode_tokens_per_s", "value": 812.3, "noise_pct": 1.2}
    record["final"] = {"figure": "decode_tokens_per_s", "value": 861.0, "delta_pct": 6.0}
    assert "**decode_tokens_per_s: 812.3 -> 861** (+6.0 % against the baseline" in experiments_report(record)
