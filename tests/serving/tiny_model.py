"""A tiny random-weight Llama model (GGUF) and its tokenizer, written on the spot.

Tests need a real OpenAI-compatible server without downloading a model: this writes a
2-layer Llama (hidden 64, 4 heads, feed-forward 256, float32, about 0.8 MB) with a GPT-2
style byte-level BPE vocabulary of about 500 tokens, plus the same vocabulary as a Hugging
Face ``tokenizer.json`` so a client (AIPerf, transformers) counts tokens as the server does.

The weights are random but shaped so tests can rely on two things (the server ignores
``ignore_eos``, and random text re-tokenizes into other tokens, 63-66 for 64):

- the model never picks the end-of-sequence token, so every request runs to ``max_tokens``
  and ends with ``finish_reason: length``;
- it only emits tokens that are a space plus one word, number or punctuation run. Such tokens
  re-tokenize to themselves, alone and side by side, so a client that re-tokenizes the streamed
  text counts exactly the tokens the server streamed.

Both come from one constant feature: dimension 0 of every embedding is 1 and no layer writes
to it, so after the final norm it is a large positive value; the output rows give it weight
+BIAS for the allowed tokens and -BIAS for all others (EOS, bytes, word prefixes).

Usage: ``python tiny_model.py FOLDER [HIDDEN LAYERS FEED_FORWARD]`` or ``write_model(folder)``
(after ``resize()`` for another size). Needs numpy and gguf
(both in the serving venv). Deterministic: the same files every time.
"""

import json
import os
import sys

import numpy as np
import gguf

from byte_level import bytes_to_unicode, encode_text  # tests/serving, beside this file

ALIAS = "tiny"
GGUF_NAME = "tiny.gguf"
EOS_TEXT = "<|endoftext|>"
CONTEXT = 4096
HIDDEN = 64
LAYERS = 2
HEADS = 4
FEED_FORWARD = 256
SEED = 20261130
BIAS = 10.0

# What the model may say: each entry becomes the token " " + entry.
WORDS = (
    "the of and to in is it that was for on are as with his they at be this have from "
    "or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her "
    "would make like him into time has look two more write go see number no way could "
    "people my than first water been call who oil its now find long down day did get "
    "come made may part tiny model token server fleet tuning"
).split() + [str(n) for n in range(10)] + ["42", "100", "2026"] + [".", ",", "!", "?", ";", ":", "...", "-"]

# A Hugging Face / Jinja chat template both llama-cpp-python and transformers can render.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def build_vocab():
    """Return (tokens, merges, eos_id, allowed_ids).

    Tokens: the 256 byte tokens in byte order, then every prefix of each " word" built one
    character at a time (merge "Ġwor d" makes "Ġword"), then EOS. Each merge joins a prefix
    starting with 'Ġ' and one character, so BPE on " word" can only rebuild " word".
    """
    table = bytes_to_unicode()
    tokens = [table[b] for b in range(256)]
    index = {tok: i for i, tok in enumerate(tokens)}
    merges = []
    allowed = []
    for word in WORDS:
        text = encode_text(" " + word)
        for end in range(2, len(text) + 1):
            left, right, whole = text[:end - 1], text[end - 1], text[:end]
            if whole not in index:
                index[whole] = len(tokens)
                tokens.append(whole)
                merges.append(left + " " + right)
        allowed.append(index[text])
    eos_id = len(tokens)
    tokens.append(EOS_TEXT)
    return tokens, merges, eos_id, sorted(set(allowed))


def random_weights(n_vocab, allowed):
    """Tensor name -> float32 array (numpy shape: output rows first, as GGUF expects)."""
    rng = np.random.default_rng(SEED)

    def linear(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    embed = (0.5 * rng.standard_normal((n_vocab, HIDDEN))).astype(np.float32)
    embed[:, 0] = 1.0
    output = np.zeros((n_vocab, HIDDEN), dtype=np.float32)
    output[:, 0] = -BIAS
    output[allowed, 1:] = (0.15 * rng.standard_normal((len(allowed), HIDDEN - 1))).astype(np.float32)
    output[allowed, 0] = BIAS
    ones = np.ones(HIDDEN, dtype=np.float32)
    weights = {"token_embd.weight": embed, "output_norm.weight": ones, "output.weight": output}
    for layer in range(LAYERS):
        attn_out = linear(HIDDEN, HIDDEN)
        ffn_down = linear(HIDDEN, FEED_FORWARD)
        attn_out[0, :] = 0.0  # keep the constant feature constant
        ffn_down[0, :] = 0.0
        weights.update({
            f"blk.{layer}.attn_norm.weight": ones,
            f"blk.{layer}.attn_q.weight": linear(HIDDEN, HIDDEN),
            f"blk.{layer}.attn_k.weight": linear(HIDDEN, HIDDEN),
            f"blk.{layer}.attn_v.weight": linear(HIDDEN, HIDDEN),
            f"blk.{layer}.attn_output.weight": attn_out,
            f"blk.{layer}.ffn_norm.weight": ones,
            f"blk.{layer}.ffn_gate.weight": linear(FEED_FORWARD, HIDDEN),
            f"blk.{layer}.ffn_up.weight": linear(FEED_FORWARD, HIDDEN),
            f"blk.{layer}.ffn_down.weight": ffn_down,
        })
    return weights


def write_gguf(path, tokens, merges, eos_id, allowed):
    """Write the model with its tokenizer metadata as one GGUF file."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("gpufleet tiny test model")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_vocab_size(len(tokens))
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i == eos_id else gguf.TokenType.NORMAL for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(eos_id)
    writer.add_eos_token_id(eos_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, array in random_weights(len(tokens), allowed).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def tokenizer_json(tokens, merges, eos_id):
    """The same vocabulary as a Hugging Face fast tokenizer (GPT-2 style byte-level BPE)."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{
            "id": eos_id, "content": EOS_TEXT, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True,
        }],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {tok: i for i, tok in enumerate(tokens)},
            "merges": merges,
        },
    }


def tokenizer_config():
    """What transformers' AutoTokenizer needs to load the folder without a model config."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOS_TEXT,
        "eos_token": EOS_TEXT,
        "unk_token": EOS_TEXT,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": CONTEXT,
        "chat_template": CHAT_TEMPLATE,
    }


def write_model(folder):
    """Write tiny.gguf, tokenizer.json and tokenizer_config.json into folder; return the GGUF path."""
    os.makedirs(folder, exist_ok=True)
    tokens, merges, eos_id, allowed = build_vocab()
    path = os.path.join(folder, GGUF_NAME)
    write_gguf(path, tokens, merges, eos_id, allowed)
    for name, content in (("tokenizer.json", tokenizer_json(tokens, merges, eos_id)),
                          ("tokenizer_config.json", tokenizer_config())):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
            json.dump(content, handle, ensure_ascii=False, indent=1)
    return path


def resize(hidden, layers, feed_forward):
    """Change the model's size for the next write_model (a benchmark wants a server slow enough
    that a client's own per-token cost is small beside the model's time per token)."""
    global HIDDEN, LAYERS, FEED_FORWARD  # pylint: disable=global-statement
    if hidden % HEADS or hidden < 2 * HEADS or layers < 1 or feed_forward < 1:
        raise ValueError("hidden must be a multiple of %d (at least %d), layers and feed_forward at least 1"
                         % (HEADS, 2 * HEADS))
    HIDDEN, LAYERS, FEED_FORWARD = hidden, layers, feed_forward


def main(argv):
    """CLI: python tiny_model.py FOLDER [HIDDEN LAYERS FEED_FORWARD]."""
    if len(argv) not in (1, 4):
        sys.stderr.write("usage: tiny_model.py FOLDER [HIDDEN LAYERS FEED_FORWARD]\n")
        return 2
    if len(argv) == 4:
        resize(*(int(value) for value in argv[1:]))
    print(write_model(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
