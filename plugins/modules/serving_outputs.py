#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_outputs
short_description: Read an OpenAI-compatible server's greedy answers to fixed prompts, token by token
version_added: 0.3.0
description:
  - The reading half of an accuracy check. Sends each prompt once to an OpenAI-compatible
    server (vLLM, SGLang, llama.cpp, llama-cpp-python) and returns its answers with their
    tokens, so that the answers of a server before a configuration change and after it can be
    compared with the P(gpufleet.tuning.accuracy_compare#filter) filter.
  - Greedy and repeatable, every request non-streaming with C(temperature 0), C(top_p 1),
    C(n 1), O(seed) and O(max_tokens) (never C(max_completion_tokens), which llama-cpp-python
    ignores).
  - Per-token output is asked for as each server documents it. For V(chat), C(logprobs true)
    and C(top_logprobs 1), read from C(choices[0].logprobs.content[].token). For
    V(completions), C(logprobs 1), read from C(choices[0].logprobs.tokens) (or
    C(logprobs.content[].token), as llama.cpp's own server answers).
  - A server that sends no per-token output is still read. Every answer is then split into
    characters, RV(token_source) says V(characters) and a warning names the prompts without
    tokens. One source for all prompts, never a mix.
  - Without O(prompts), eight built-in prompts of different kinds are sent. They ask a fact,
    some arithmetic, code, a list, a translation, a JSON extraction, a duration and a question
    about the start of a context of about 1,500 characters.
  - A failed request ends the task with a message naming the prompt's index and the URL, and
    what came back (the server's HTTP error, a body that is not JSON, an answer without a
    choice). The answers read until then are returned.
  - Runs on the node or on the controller (C(delegate_to)). Python standard library only. Only
    sends requests; nothing on the node changes.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Changes nothing on the node, so it asks the prompts in check mode too.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Any host with Python and a route to the server.
options:
  url:
    description: Base URL of the server, C(http://host:port) (a trailing C(/v1) is the same server).
    type: str
    required: true
  model:
    description:
      - Model id to ask. Unset, the first model C(/v1/models) lists.
      - When set and the server lists its models, it must be listed.
    type: str
  endpoint:
    description: V(chat) for C(/v1/chat/completions) (the chat template applied), V(completions) for C(/v1/completions).
    type: str
    choices: [chat, completions]
    default: chat
  prompts:
    description:
      - The prompts, each sent once as the user message (V(chat)) or the prompt (V(completions)).
        From 1 to 1000 non-empty texts.
      - Unset, the built-in eight.
    type: list
    elements: str
  max_tokens:
    description:
      - Tokens each answer may have (C(max_tokens)), from 1 to 65536.
      - The longer the answers, the later a small numeric difference can show, and the longer
        the check takes.
    type: int
    default: 48
  seed:
    description: C(seed) of every request, from 0 to 4294967295. Greedy decoding does not need it; servers that sample anyway then repeat.
    type: int
    default: 0
  extra_body:
    description:
      - Fields added to every request, such as C(chat_template_kwargs) (with C(enable_thinking)
        false for a thinking model) or a server's own fields.
      - The fields the check sets itself are refused. These are C(stream), C(model), C(messages),
        C(prompt), C(max_tokens), C(max_completion_tokens), C(temperature), C(top_p), C(n),
        C(seed), C(logprobs) and C(top_logprobs).
    type: dict
    default: {}
  timeout_s:
    description: Longest wait for one answer, in seconds (greater than 0, at most 86400).
    type: float
    default: 120.0
  api_key:
    description: Sent as C(Authorization Bearer) when set.
    type: str
  validate_certs:
    description: Check the server's TLS certificate (C(https) only).
    type: bool
    default: true
notes:
  - Read the same server twice before trusting a comparison. A server whose greedy answers
    change from run to run (batch-dependent kernels under other load, for example) cannot be
    judged with a zero allowance.
  - Ask both servers with the same options. P(gpufleet.tuning.accuracy_compare#filter) refuses
    results of different prompts, O(endpoint), O(max_tokens) or RV(token_source).
seealso:
  - module: gpufleet.tuning.serving_health
    description: Wait until the server is ready before asking it.
  - plugin: gpufleet.tuning.accuracy_compare
    plugin_type: filter
    description: Compare a candidate's answers with the baseline's.
"""

EXAMPLES = r"""
- name: Answers of the baseline server
  gpufleet.tuning.serving_outputs:
    url: http://127.0.0.1:8000
    max_tokens: 64
  register: baseline_outputs

# ... restart the server with the candidate flag, wait with gpufleet.tuning.serving_health ...

- name: Answers of the candidate
  gpufleet.tuning.serving_outputs:
    url: http://127.0.0.1:8000
    max_tokens: 64
  register: candidate_outputs

- name: Speculative decoding must not change a single token
  ansible.builtin.assert:
    that: (candidate_outputs | gpufleet.tuning.accuracy_compare(baseline_outputs, 0)).passed

- name: A thinking model, without its thinking, through the completions endpoint
  gpufleet.tuning.serving_outputs:
    url: http://127.0.0.1:30000
    endpoint: completions
    prompts:
      - "The three laws of thermodynamics are"
      - "def quicksort(items):"
    extra_body:
      chat_template_kwargs: {enable_thinking: false}
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` is documented with the
# same text in every module of this collection; keep the copies equal.
RETURN = r"""
changes:
  description:
    - What this run changed (in check mode, what it would change) as records for programs to
      read (the closing summary, reports, a fleet revert); C(diff) shows the same for people.
    - One record per value, file, kernel module or service; empty when nothing changed, so
      C(changed) is true exactly when this list is not empty. A module that only reads always
      returns an empty list.
    - A failed run returns no records; what it had applied was restored.
  returned: always
  type: list
  elements: dict
  contains:
    area:
      description: The part of the tuning (C(sysctl), C(pcie), C(cpu_power), C(lxc_memlock),
        C(peermem), C(nvidia_options), C(kernel_cmdline)).
      type: str
    kind:
      description: V(value), V(file), V(module) or V(service).
      type: str
    target:
      description: The key, file path, PCI address, kernel module or unit.
      type: str
    before:
      description:
        - What this run found; null when absent or unknown.
        - A value is its text. A file is C(sha256), C(size) and C(mode), never its content
          (config files can hold secrets). A kernel module is V(loaded) or V(not loaded), a
          service a state word such as V(enabled).
      type: raw
    after:
      description: What this run left (in check mode, would leave), in the form of C(before).
      type: raw
  sample:
    - {"area": "lxc_memlock", "kind": "value", "target": "/etc/pve/lxc/101.conf lxc.prlimit.memlock",
       "before": "65536", "after": "unlimited"}
    - {"area": "lxc_memlock", "kind": "file", "target": "/etc/pve/lxc/101.conf",
       "before": {"sha256": "9f2c...", "size": 612, "mode": "0640"},
       "after": {"sha256": "41ab...", "size": 643, "mode": "0640"}}
url:
  description: The server's base URL as asked.
  returned: always
  type: str
  sample: http://127.0.0.1:8000
endpoint:
  description: V(chat) or V(completions).
  returned: always
  type: str
max_tokens:
  description: The O(max_tokens) every request asked for.
  returned: always
  type: int
seed:
  description: The O(seed) every request carried.
  returned: always
  type: int
model:
  description: The model asked.
  returned: when the model was known
  type: str
  sample: meta-llama/Llama-3.1-8B-Instruct
token_source:
  description:
    - V(logprobs) when every answer came with its tokens, V(characters) when the server sent
      none for some and every answer was split into characters.
  returned: on success
  type: str
  sample: logprobs
outputs:
  description:
    - One entry per prompt, in the order sent. On failure, those read before it.
  returned: when a prompt was sent
  type: list
  elements: dict
  contains:
    index:
      description: The prompt's position, from 0.
      type: int
    prompt:
      description: The prompt's first 80 characters.
      type: str
    prompt_sha256:
      description: SHA-256 of the whole prompt (UTF-8), so two runs of different prompts that start alike are told apart.
      type: str
    text:
      description: The answer (for V(chat), any C(reasoning_content) a reasoning parser split off, then C(content)).
      type: str
    tokens:
      description: The answer's tokens as the server sent them (RV(token_source) V(logprobs)), or its characters.
      type: list
      elements: str
    finish_reason:
      description: The server's C(finish_reason), C(length) when cut at O(max_tokens), C(stop) at an end-of-sequence.
      type: str
    token_source:
      description: V(logprobs) or V(characters), the same for every prompt.
      type: str
  sample:
    - {"index": 0, "prompt": "What is the capital of France? Answer in one sentence.",
       "prompt_sha256": "5c1e...", "text": "The capital of France is Paris.",
       "tokens": ["The", " capital", " of", " France", " is", " Paris", "."],
       "finish_reason": "stop", "token_source": "logprobs"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import outputs


def main():
    module = AnsibleModule(argument_spec=outputs.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: outputs.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()
