"""The accuracy guard's judgement (plugin_utils/accuracy.py, filter accuracy_compare): identical
answers pass exactly, one token changed is a small divergence that fails a zero allowance and
passes a larger one, and runs that do not compare are refused with the reason."""

import copy
import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.filter.experiments import FilterModule
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.accuracy import accuracy_compare, common_prefix


def result(answers, source="logprobs", finish="length", **settings):
    """A serving_outputs result: ``answers`` is {prompt: tokens}."""
    outputs = []
    for index, (prompt, tokens) in enumerate(answers.items()):
        outputs.append({"index": index, "prompt": prompt[:80], "prompt_sha256": "sha-%s" % prompt, "text": "".join(tokens),
                        "tokens": list(tokens), "finish_reason": finish, "token_source": source})
    base = {"changed": False, "changes": [], "url": "http://127.0.0.1:8000", "model": "m", "endpoint": "chat",
            "max_tokens": 10, "seed": 0, "token_source": source, "outputs": outputs}
    base.update(settings)
    return base


TEN = [" t%d" % i for i in range(10)]
BASELINE = result({"capital": TEN, "sum": TEN[::-1], "code": TEN[:5] + TEN[:5], "list": TEN})


def changed_last_token():
    candidate = copy.deepcopy(BASELINE)
    candidate["outputs"][3]["tokens"][-1] = " other"
    return candidate


def test_identical_answers_are_exact_and_pass():
    verdict = accuracy_compare(copy.deepcopy(BASELINE), BASELINE)
    assert verdict == {"passed": True, "exact": True, "divergence_pct": 0.0, "max_divergence_pct": 0.0, "prompts": 4,
                       "differing_prompts": 0, "first_differences": [], "token_source": "logprobs",
                       "tokens_compared": 40, "tokens_common": 40,
                       "per_prompt": [{"prompt": i, "common_prefix": 10, "baseline_tokens": 10, "candidate_tokens": 10,
                                       "identical": True} for i in range(4)]}


def test_the_outputs_lists_and_json_text_are_taken_too():
    assert accuracy_compare(BASELINE["outputs"], json.dumps(BASELINE))["exact"] is True


def test_one_token_different_at_the_end_is_a_small_divergence():
    candidate = changed_last_token()
    verdict = accuracy_compare(candidate, BASELINE)
    assert verdict["divergence_pct"] == 2.5  # 1 of 40 tokens
    assert verdict["exact"] is False and verdict["passed"] is False
    assert verdict["differing_prompts"] == 1 and verdict["tokens_common"] == 39
    assert verdict["first_differences"] == [{"prompt": 3, "token": 9, "baseline": " t9", "candidate": " other",
                                             "kind": "token"}]
    assert accuracy_compare(candidate, BASELINE, 2.5)["passed"] is True
    loose = accuracy_compare(candidate, BASELINE, 5)
    assert loose["passed"] is True and loose["exact"] is False and loose["max_divergence_pct"] == 5.0
    assert accuracy_compare(candidate, BASELINE, 2.4)["passed"] is False


def test_tokens_after_the_first_difference_do_not_count_even_when_they_agree():
    candidate = copy.deepcopy(BASELINE)
    candidate["outputs"][0]["tokens"][0] = " x"  # the rest of the answer still equal
    verdict = accuracy_compare(candidate, BASELINE, 20)
    assert verdict["divergence_pct"] == 25.0 and verdict["passed"] is False
    assert verdict["per_prompt"][0] == {"prompt": 0, "common_prefix": 0, "baseline_tokens": 10, "candidate_tokens": 10,
                                        "identical": False}


def test_a_shorter_or_longer_answer_diverges_by_the_missing_tokens():
    candidate = copy.deepcopy(BASELINE)
    candidate["outputs"][1]["tokens"] = candidate["outputs"][1]["tokens"][:7]
    candidate["outputs"][2]["tokens"] += [" more", " and more"]
    verdict = accuracy_compare(candidate, BASELINE)
    # 3 missing of 10 and 2 extra of 12: common 10 + 7 + 10 + 10 = 37 of 42
    assert verdict["divergence_pct"] == pytest.approx(11.9048) and verdict["divergence_pct"] >= 100 * 5 / 42.0
    assert verdict["first_differences"] == [
        {"prompt": 1, "token": 7, "baseline": " t2", "candidate": None, "kind": "ended"},
        {"prompt": 2, "token": 10, "baseline": None, "candidate": " more", "kind": "ended"}]


def test_a_different_finish_reason_alone_is_not_exact():
    candidate = copy.deepcopy(BASELINE)
    candidate["outputs"][2]["finish_reason"] = "stop"
    verdict = accuracy_compare(candidate, BASELINE)
    assert verdict["divergence_pct"] == 0.0 and verdict["exact"] is False and verdict["passed"] is False
    assert verdict["first_differences"] == [{"prompt": 2, "token": 10, "baseline": "length", "candidate": "stop",
                                             "kind": "finish_reason"}]
    assert accuracy_compare(candidate, BASELINE, 0.5)["passed"] is True


def test_empty_answers_on_both_sides_do_not_diverge():
    empty = result({"a": [], "b": []})
    verdict = accuracy_compare(copy.deepcopy(empty), empty)
    assert verdict["divergence_pct"] == 0.0 and verdict["exact"] and verdict["passed"]


def test_a_tiny_divergence_is_never_shown_as_none():
    long = result({"p": [" a"] * 100000})
    candidate = copy.deepcopy(long)
    candidate["outputs"][0]["tokens"][-1] = " b"
    verdict = accuracy_compare(candidate, long, 0.001)
    assert verdict["divergence_pct"] == 0.001 and verdict["passed"] is True
    assert accuracy_compare(candidate, long)["divergence_pct"] > 0


def test_differences_show_cleaned_tokens_at_most_five():
    answers = {"p%d" % i: TEN for i in range(7)}
    baseline = result(answers)
    candidate = copy.deepcopy(baseline)
    for item in candidate["outputs"]:
        item["tokens"][2] = "\x1b[31mred\u202e" + "y" * 60
    verdict = accuracy_compare(candidate, baseline)
    assert verdict["differing_prompts"] == 7 and len(verdict["first_differences"]) == 5
    shown = verdict["first_differences"][0]["candidate"]
    assert len(shown) == 40 and "\x1b" not in shown and "\u202e" not in shown and shown.startswith("[31mred")


def test_the_filter_plugin_exposes_it():
    assert FilterModule().filters()["accuracy_compare"] is accuracy_compare


def test_common_prefix():
    assert common_prefix([], []) == 0
    assert common_prefix(["a", "b"], ["a", "c"]) == 1
    assert common_prefix(["a"], ["a", "b"]) == 1


# ------------------------------------------------------------------------------ refused

def refused(candidate, baseline, *args):
    with pytest.raises(AnsibleFilterError) as exc:
        accuracy_compare(candidate, baseline, *args)
    message = str(exc.value)
    assert message.startswith("accuracy_compare: ")
    return message


def test_different_prompt_sets_are_refused():
    fewer = result({"capital": TEN, "sum": TEN[::-1], "code": TEN})
    assert "the candidate answered 3 prompts and the baseline 4: the runs asked different prompts" in refused(fewer, BASELINE)
    other = result({"capital": TEN, "sum": TEN[::-1], "code": TEN[:5] + TEN[:5], "poem": TEN})
    assert "prompt 3 differs between the runs (prompt_sha256: candidate 'sha-poem', baseline 'sha-list')" in \
        refused(other, BASELINE)
    # Lists without digests: the prompt text decides.
    bare = [dict(item, prompt="other") if item["index"] == 1 else dict(item) for item in BASELINE["outputs"]]
    for item in bare:
        del item["prompt_sha256"]
    assert "prompt 1 differs between the runs (prompt: candidate 'other', baseline 'sum')" in \
        refused(bare, BASELINE["outputs"])


@pytest.mark.parametrize("allowance", [-1, 100.5, True, False, "lots", None, float("nan"), float("inf"), [1]])
def test_a_bad_allowance_is_refused(allowance):
    assert "max_divergence_pct=%r is not a percentage from 0 to 100" % (allowance,) in \
        refused(copy.deepcopy(BASELINE), BASELINE, allowance)


def test_allowance_as_text_from_a_template_is_taken():
    assert accuracy_compare(changed_last_token(), BASELINE, "2.5")["passed"] is True


def test_different_token_sources_are_refused():
    chars = result({"capital": list("abc"), "sum": list("abc"), "code": list("abc"), "list": list("abc")},
                   source="characters")
    pairs = zip(chars["outputs"], BASELINE["outputs"])
    chars["outputs"] = [dict(item, prompt_sha256=base["prompt_sha256"]) for item, base in pairs]
    assert "the candidate's outputs are counted in characters and the baseline's in logprobs" in refused(chars, BASELINE)
    mixed = copy.deepcopy(BASELINE)
    mixed["outputs"][0]["token_source"] = "characters"
    assert "the candidate mixes token sources characters, logprobs" in refused(mixed, BASELINE)


@pytest.mark.parametrize("key, value", [("endpoint", "completions"), ("max_tokens", 64)])
def test_different_settings_are_refused(key, value):
    candidate = copy.deepcopy(BASELINE)
    candidate[key] = value
    assert "the runs used different %s" % key in refused(candidate, BASELINE)


@pytest.mark.parametrize("candidate, words", [
    ({"failed": True, "msg": "prompt 0 of 8 failed: boom"}, "the candidate is a failed serving_outputs result: prompt 0"),
    ({"changed": False}, "the candidate is not a serving_outputs result or its outputs list (got NoneType)"),
    ([], "the candidate has no outputs: nothing to compare"),
    ("{not json", "the candidate is not a serving_outputs result (not JSON"),
    ([{"tokens": "abc"}], "the candidate's output 0 has no list of token strings (tokens)"),
    ([{"tokens": ["a", 1]}], "the candidate's output 0 has no list of token strings"),
    (42, "(got int)"),
])
def test_what_is_not_a_result_is_refused(candidate, words):
    assert words in refused(candidate, BASELINE)
