# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The accuracy guard of a serving experiment: did the candidate server answer as the baseline?

Both runs are gpufleet.tuning.serving_outputs results (greedy, the same fixed prompts), read
from the baseline server and from the candidate after its restart. Greedy decoding is
deterministic, so a lossless change (speculative decoding, a scheduler setting) must give the
same tokens, and a numerics change (another attention kernel, an FP8 KV cache) may be allowed
a small, set divergence:

- per prompt, the length of the common token prefix: after the first different token the
  model continues from another context, so later tokens that happen to agree again say
  nothing and are not counted;
- ``divergence_pct = 100 * (1 - sum(common prefix) / sum(max(len(baseline), len(candidate))))``
  over all prompts (0 when both are empty): the share of output tokens that are not provably
  the baseline's;
- ``exact``: every prompt the same tokens and the same ``finish_reason``;
- ``passed``: ``divergence_pct <= max_divergence_pct``; with an allowance of 0, ``passed`` is
  ``exact`` (a different finish reason with the same tokens fails there too).

Runs of different prompts, endpoints, lengths or token sources (tokens against characters)
cannot be compared, so they are refused with AnsibleFilterError rather than judged.

The differences shown (``first_differences``) carry token text from the server: cleaned with
node_text.clean and cut to 40 characters before they reach experiments.json and its page.

In plugin_utils so that the filter (plugins/filter/experiments.py) and Python code share it
without importing a filter plugin.
"""

from __future__ import annotations

import json
import math

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import clean

TOKEN_SHOWN = 40
DIFFERENCES_SHOWN = 5
# Settings of a serving_outputs result that must be the same on both sides when both carry them.
SAME_SETTINGS = ("endpoint", "max_tokens")


def _fail(message):
    raise AnsibleFilterError("accuracy_compare: %s" % message)


def _outputs(value, name):
    """(outputs list, settings dict) of a serving_outputs result, its JSON text or its outputs list."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            _fail("the %s is not a serving_outputs result (not JSON: %s)" % (name, exc))
    settings = {}
    if isinstance(value, dict):
        if value.get("failed"):
            _fail("the %s is a failed serving_outputs result: %s" % (name, clean(value.get("msg"), 300)))
        settings = {key: value[key] for key in SAME_SETTINGS + ("token_source",) if value.get(key) is not None}
        value = value.get("outputs")
    if not isinstance(value, list):
        _fail("the %s is not a serving_outputs result or its outputs list (got %s)" % (name, type(value).__name__))
    if not value:
        _fail("the %s has no outputs: nothing to compare" % name)
    for position, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("tokens"), list) \
                or not all(isinstance(token, str) for token in item["tokens"]):
            _fail("the %s's output %d has no list of token strings (tokens)" % (name, position))
    return value, settings


def _token_source(outputs, settings, name):
    sources = set(item.get("token_source") for item in outputs)
    if settings.get("token_source") is not None:
        sources.add(settings["token_source"])
    sources.discard(None)
    if len(sources) > 1:
        _fail("the %s mixes token sources %s" % (name, ", ".join(sorted(sources))))
    return sources.pop() if sources else None


def _allowance(value):
    shown = "max_divergence_pct=%r is not a percentage from 0 to 100" % (value,)
    if isinstance(value, bool):
        _fail(shown)
    try:
        number = float(value)
    except (TypeError, ValueError):
        _fail(shown)
    if not math.isfinite(number) or not 0 <= number <= 100:
        _fail(shown)
    return number


def _same_prompts(candidate, baseline):
    if len(candidate) != len(baseline):
        _fail("the candidate answered %d prompts and the baseline %d: the runs asked different prompts"
              % (len(candidate), len(baseline)))
    for position, (cand, base) in enumerate(zip(candidate, baseline)):
        for key in ("prompt_sha256", "prompt", "index"):
            if key in cand and key in base and cand[key] != base[key]:
                _fail("prompt %d differs between the runs (%s: candidate %r, baseline %r): the runs asked different "
                      "prompts" % (position, key, clean(cand[key], 80), clean(base[key], 80)))


def common_prefix(first, second):
    """How many tokens ``first`` and ``second`` share from their start."""
    count = 0
    for left, right in zip(first, second):
        if left != right:
            break
        count += 1
    return count


def _shown(token):
    return None if token is None else clean(token, TOKEN_SHOWN)


def accuracy_compare(candidate, baseline, max_divergence_pct=0.0):
    """The accuracy object of experiments.json for ``candidate`` against ``baseline`` (each a
    serving_outputs result, its JSON text or its ``outputs`` list)."""
    cand_outputs, cand_settings = _outputs(candidate, "candidate")
    base_outputs, base_settings = _outputs(baseline, "baseline")
    allowance = _allowance(max_divergence_pct)
    for key in SAME_SETTINGS:
        if key in cand_settings and key in base_settings and cand_settings[key] != base_settings[key]:
            _fail("the runs used different %s (candidate %r, baseline %r): ask both with the same options"
                  % (key, cand_settings[key], base_settings[key]))
    _same_prompts(cand_outputs, base_outputs)
    cand_source = _token_source(cand_outputs, cand_settings, "candidate")
    base_source = _token_source(base_outputs, base_settings, "baseline")
    if cand_source != base_source:
        _fail("the candidate's outputs are counted in %s and the baseline's in %s: tokens and characters do not "
              "compare (one server sent per-token output, the other did not)" % (cand_source, base_source))

    common_total = 0
    length_total = 0
    differing = 0
    differences = []
    per_prompt = []
    for position, (cand, base) in enumerate(zip(cand_outputs, base_outputs)):
        cand_tokens, base_tokens = cand["tokens"], base["tokens"]
        common = common_prefix(cand_tokens, base_tokens)
        longest = max(len(cand_tokens), len(base_tokens))
        common_total += common
        length_total += longest
        same_tokens = common == longest
        same_finish = cand.get("finish_reason") == base.get("finish_reason")
        prompt = base.get("index", position)
        per_prompt.append({"prompt": prompt, "common_prefix": common, "baseline_tokens": len(base_tokens),
                           "candidate_tokens": len(cand_tokens), "identical": same_tokens and same_finish})
        if same_tokens and same_finish:
            continue
        differing += 1
        if len(differences) >= DIFFERENCES_SHOWN:
            continue
        if not same_tokens:
            differences.append({
                "prompt": prompt, "token": common,
                "baseline": _shown(base_tokens[common] if common < len(base_tokens) else None),
                "candidate": _shown(cand_tokens[common] if common < len(cand_tokens) else None),
                "kind": "token" if common < min(len(base_tokens), len(cand_tokens)) else "ended"})
        else:
            differences.append({"prompt": prompt, "token": common, "baseline": _shown(base.get("finish_reason")),
                                "candidate": _shown(cand.get("finish_reason")), "kind": "finish_reason"})

    divergence = 0.0 if length_total == 0 else 100.0 * (1.0 - float(common_total) / length_total)
    # Rounded up, so a divergence shown as 0.0 is none and one within the allowance as shown is within it.
    if divergence > 0:
        divergence = max(math.ceil(divergence * 10000.0 - 1e-6) / 10000.0, 0.0001)
    exact = differing == 0
    passed = exact if allowance == 0 else divergence <= allowance
    return {
        "passed": passed,
        "exact": exact,
        "divergence_pct": divergence,
        "max_divergence_pct": allowance,
        "prompts": len(base_outputs),
        "differing_prompts": differing,
        "first_differences": differences,
        "token_source": base_source,
        "tokens_compared": length_total,
        "tokens_common": common_total,
        "per_prompt": per_prompt,
    }
