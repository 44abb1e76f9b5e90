# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a random-weight float16 Llama model (GGUF) of realistic size, for serving benchmarks.

Standard library only (no numpy, no gguf package): it runs on a GPU node that has nothing but
Python 3. Tensors are written in chunks (--chunk-mib, 16 MiB by default), so memory stays small
whatever the model size. The same arguments and seed give the same file, byte for byte.

    python3 tests/gpu/make_random_llama.py --out /tmp/model/random-llama.gguf
        [--layers 18 --hidden 2048 --heads 16 --kv-heads 8 --ff 8192 --vocab 32000]
        [--ctx 4096 --seed 20261201 --tokenizer-dir DIR]

The default, 18 layers x 2048 hidden (16 heads of 128, 8 KV heads), feed-forward 8192 and a
32,000-token vocabulary, has 1,263,609,856 parameters (2,527,371,264 bytes of weights); a decoded
token reads 2,396,303,360 bytes of them (see "Bytes per token" below). The script prints both.

Architecture: llama.cpp's "llama" (token_embd, blk.N.attn_norm / attn_q / attn_k / attn_v /
attn_output / ffn_norm / ffn_gate / ffn_up / ffn_down, output_norm, output). Matrices are float16,
the 1-D norm weights float32 (as llama.cpp's own converter writes them).

Weights: random float16 with a random sign and a magnitude spread over the octaves
2^-11 .. 2^-5, about 0.022 RMS (like N(0, 0.02)), made by mapping the high byte of random bytes
through a table: activations stay finite and of order one through any number of layers.

Tokenizer: GPT-2 style byte-level BPE ("gpt2", pre-tokenizer "gpt-2"): the 256 byte tokens (any
text tokenizes), then " word" tokens built one letter at a time (merge "Ġwor d" makes "Ġword")
up to --vocab, then <|endoftext|> (BOS and EOS; no BOS is added to prompts). As in
tests/serving/tiny_model.py, one constant feature steers the output: dimension 0 of every
embedding is 1, the layers neither read it (norm weight 0) nor write it (row 0 of attn_output and
ffn_down is 0), and the output rows weigh it +BIAS for the " word" tokens and -BIAS for the byte
tokens and EOS. So the model only says " word" tokens: it never ends a request by itself (every
request runs to max_tokens with or without ignore_eos), each streamed token is printable text,
and the text re-tokenizes to exactly the tokens that were streamed. --tokenizer-dir also writes
the vocabulary as a Hugging Face tokenizer (tokenizer.json, tokenizer_config.json) for clients
that count tokens themselves (AIPerf).

Bytes per token: decoding one token multiplies the hidden state by every matrix once (all of
attn_q/k/v/output and ffn_gate/up/down in every layer, and the whole output matrix for the
logits), reads every norm weight, and reads one row of token_embd (a row lookup, not a matmul).
So bytes read per token = total weight bytes - bytes of token_embd + one row of it
(hidden x 2 bytes). Not counted: the KV cache (layers x 2 x kv_heads x head_dim x 2 bytes per
cached position, 72 KiB with the default), activations and the logits.
"""

import argparse
import json
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "serving"))
from byte_level import bytes_to_unicode  # noqa: E402  # pylint: disable=wrong-import-position

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32
# GGUF metadata value types
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
# ggml tensor types
GGML_F32, GGML_F16 = 0, 1
# llama_ftype: LLAMA_FTYPE_MOSTLY_F16
FILE_TYPE_F16 = 1
# token types
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3

EOS_TEXT = "<|endoftext|>"
# Weight of the constant feature in the output rows (+ allowed, - banned). After the final norm
# the feature is 1/rms(residual), about 1/6 with the default config, so logits get about
# +-BIAS/6: far beyond the random part (about 1 RMS). Seen with the default model on llama.cpp's
# CPU backend: banned tokens at log-probability -93 or lower, allowed ones -6 to -16.
BIAS = 256.0
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _exponent_table():
    """Map a random high byte of a float16 to one with a bounded exponent.

    Bit 7 (sign) and bits 1..0 (top of the mantissa) are kept; bits 6..2 pick one of 32 slots,
    each slot an exponent: 2^-5 x4, 2^-6 x10, 2^-7 x8, 2^-8 x5, 2^-9 x3, 2^-10, 2^-11 (about
    the octave frequencies of N(0, 0.02)). RMS of the values: 0.0225.
    """
    slots = [10] * 4 + [9] * 10 + [8] * 8 + [7] * 5 + [6] * 3 + [5] + [4]
    assert len(slots) == 32
    table = bytearray(256)
    for high in range(256):
        sign = high & 0x80
        exponent = slots[(high >> 2) & 0x1F]  # biased exponent field; value 2^(e-15)
        table[high] = sign | (exponent << 2) | (high & 0x03)
    return bytes(table)


HIGH_BYTE = _exponent_table()


class RandomHalf:
    """Deterministic stream of random float16 values (little-endian bytes)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def take(self, n_values):
        n_bytes = 2 * n_values
        if hasattr(self.rng, "randbytes"):
            raw = bytearray(self.rng.randbytes(n_bytes))
        else:  # Python < 3.9: what randbytes does
            raw = bytearray(self.rng.getrandbits(n_bytes * 8).to_bytes(n_bytes, "little"))
        raw[1::2] = raw[1::2].translate(HIGH_BYTE)
        return raw


def half_bits(value):
    """float -> float16 bytes."""
    return struct.pack("<e", value)


# ---------------------------------------------------------------------------------------------
# Vocabulary


def build_vocab(n_vocab, seed):
    """Return (tokens, merges, eos_id, allowed_ids).

    256 byte tokens, then " word" tokens (each with the merge that builds it from its prefix one
    letter shorter, so BPE on " word" can only rebuild " word"), then EOS. Words: every one- and
    two-letter word, then random lowercase words of 3..8 letters (with their missing prefixes)
    until the vocabulary is full.
    """
    if n_vocab < 256 + 26 + 1:
        raise SystemExit("--vocab must be at least %d (256 bytes, 26 one-letter words, EOS), got %d"
                         % (256 + 26 + 1, n_vocab))
    table = bytes_to_unicode()
    space = table[ord(" ")]
    tokens = [table[b] for b in range(256)]
    index = {tok: i for i, tok in enumerate(tokens)}
    merges = []
    allowed = []
    room = n_vocab - 1  # the last id is EOS

    def add_word(word):
        """Add " word" and its missing prefixes; False when they do not all fit."""
        text = space + word
        missing = [end for end in range(2, len(text) + 1) if text[:end] not in index]
        if len(tokens) + len(missing) > room:
            return False
        for end in missing:
            whole = text[:end]
            index[whole] = len(tokens)
            tokens.append(whole)
            merges.append(text[:end - 1] + " " + text[end - 1])
            allowed.append(index[whole])
        return True

    rng = random.Random(seed ^ 0x5EED)
    for a in LETTERS:
        add_word(a)
    for a in LETTERS:
        for b in LETTERS:
            add_word(a + b)
    while len(tokens) < room:
        word = "".join(rng.choice(LETTERS) for _letter in range(rng.randint(3, 8)))
        if not add_word(word):
            # the vocabulary is nearly full: fill the rest with one more letter on known words
            for tok in list(tokens[256:]):
                if len(tokens) >= room:
                    break
                for c in LETTERS:
                    if len(tokens) >= room:
                        break
                    add_word(tok[1:] + c)
    eos_id = len(tokens)
    tokens.append(EOS_TEXT)
    assert len(tokens) == n_vocab and len(set(tokens)) == n_vocab
    return tokens, merges, eos_id, allowed


# ---------------------------------------------------------------------------------------------
# GGUF writing


def gguf_string(text):
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def kv_entry(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == T_STRING:
        return out + gguf_string(value)
    if vtype == T_UINT32:
        return out + struct.pack("<I", value)
    if vtype == T_INT32:
        return out + struct.pack("<i", value)
    if vtype == T_FLOAT32:
        return out + struct.pack("<f", value)
    if vtype == T_BOOL:
        return out + struct.pack("<?", value)
    raise ValueError(vtype)


def kv_array(key, elem_type, values):
    out = gguf_string(key) + struct.pack("<IIQ", T_ARRAY, elem_type, len(values))
    if elem_type == T_STRING:
        return out + b"".join(gguf_string(v) for v in values)
    if elem_type == T_INT32:
        return out + struct.pack("<%di" % len(values), *values)
    raise ValueError(elem_type)


def padding(offset):
    return (-offset) % ALIGNMENT


def tensor_plan(cfg):
    """List of (name, ne (ggml order: row length first), ggml type). Shapes as llama.cpp's llama."""
    h, ff, vocab = cfg.hidden, cfg.ff, cfg.vocab
    head_dim = h // cfg.heads
    q_dim, kv_dim = cfg.heads * head_dim, cfg.kv_heads * head_dim
    plan = [("token_embd.weight", (h, vocab), GGML_F16)]
    for i in range(cfg.layers):
        plan += [
            ("blk.%d.attn_norm.weight" % i, (h,), GGML_F32),
            ("blk.%d.attn_q.weight" % i, (h, q_dim), GGML_F16),
            ("blk.%d.attn_k.weight" % i, (h, kv_dim), GGML_F16),
            ("blk.%d.attn_v.weight" % i, (h, kv_dim), GGML_F16),
            ("blk.%d.attn_output.weight" % i, (q_dim, h), GGML_F16),
            ("blk.%d.ffn_norm.weight" % i, (h,), GGML_F32),
            ("blk.%d.ffn_gate.weight" % i, (h, ff), GGML_F16),
            ("blk.%d.ffn_up.weight" % i, (h, ff), GGML_F16),
            ("blk.%d.ffn_down.weight" % i, (ff, h), GGML_F16),
        ]
    plan += [("output_norm.weight", (h,), GGML_F32), ("output.weight", (h, vocab), GGML_F16)]
    return plan


def n_elements(ne):
    n = 1
    for d in ne:
        n *= d
    return n


def type_size(ggml_type):
    return 4 if ggml_type == GGML_F32 else 2


def metadata(cfg, tokens, merges, eos_id):
    head_dim = cfg.hidden // cfg.heads
    name = "gpufleet random llama %dL-%d f16" % (cfg.layers, cfg.hidden)
    kvs = [
        kv_entry("general.architecture", T_STRING, "llama"),
        kv_entry("general.name", T_STRING, name),
        kv_entry("general.file_type", T_UINT32, FILE_TYPE_F16),
        kv_entry("llama.vocab_size", T_UINT32, cfg.vocab),
        kv_entry("llama.context_length", T_UINT32, cfg.ctx),
        kv_entry("llama.embedding_length", T_UINT32, cfg.hidden),
        kv_entry("llama.block_count", T_UINT32, cfg.layers),
        kv_entry("llama.feed_forward_length", T_UINT32, cfg.ff),
        kv_entry("llama.attention.head_count", T_UINT32, cfg.heads),
        kv_entry("llama.attention.head_count_kv", T_UINT32, cfg.kv_heads),
        kv_entry("llama.rope.dimension_count", T_UINT32, head_dim),
        kv_entry("llama.rope.freq_base", T_FLOAT32, 10000.0),
        kv_entry("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5),
        kv_entry("tokenizer.ggml.model", T_STRING, "gpt2"),
        kv_entry("tokenizer.ggml.pre", T_STRING, "gpt-2"),
        kv_array("tokenizer.ggml.tokens", T_STRING, tokens),
        kv_array("tokenizer.ggml.token_type", T_INT32,
                 [TOKEN_CONTROL if i == eos_id else TOKEN_NORMAL for i in range(len(tokens))]),
        kv_array("tokenizer.ggml.merges", T_STRING, merges),
        kv_entry("tokenizer.ggml.bos_token_id", T_UINT32, eos_id),
        kv_entry("tokenizer.ggml.eos_token_id", T_UINT32, eos_id),
        kv_entry("tokenizer.ggml.add_bos_token", T_BOOL, False),
        kv_entry("tokenizer.chat_template", T_STRING, CHAT_TEMPLATE),
    ]
    return kvs


class Writer:
    def __init__(self, handle, chunk_values):
        self.handle = handle
        self.chunk = chunk_values
        self.written = 0

    def write(self, data):
        self.handle.write(data)
        self.written += len(data)

    def random_matrix(self, rand, rows, row_len, fix_row=None):
        """rows x row_len random float16, in chunks of whole rows; fix_row(row, data) edits one."""
        rows_per_chunk = max(1, self.chunk // row_len)
        row = 0
        while row < rows:
            n = min(rows_per_chunk, rows - row)
            data = rand.take(n * row_len)
            if fix_row is not None:
                fix_row(row, n, data)
            self.write(data)
            row += n


def write_model(cfg, out):
    t0 = time.time()
    tokens, merges, eos_id, allowed = build_vocab(cfg.vocab, cfg.seed)
    allowed_set = set(allowed)
    plan = tensor_plan(cfg)
    kvs = metadata(cfg, tokens, merges, eos_id)

    infos = []
    offset = 0
    for name, ne, gtype in plan:
        size = n_elements(ne) * type_size(gtype)
        infos.append(gguf_string(name) + struct.pack("<I", len(ne))
                     + struct.pack("<%dQ" % len(ne), *ne) + struct.pack("<IQ", gtype, offset))
        offset += size + padding(size)

    h = cfg.hidden
    one_f16 = half_bits(1.0)
    plus_bias, minus_bias = half_bits(BIAS), half_bits(-BIAS)
    norm_ones = struct.pack("<%df" % h, *([1.0] * h))
    # the layers neither read the constant feature (norm weight 0 on dimension 0) ...
    layer_norm = struct.pack("<%df" % h, *([0.0] + [1.0] * (h - 1)))

    def set_embedding_feature(first, n, data):
        for r in range(n):
            data[2 * r * h:2 * r * h + 2] = one_f16

    def set_output_feature(first, n, data):
        for r in range(n):
            data[2 * r * h:2 * r * h + 2] = plus_bias if first + r in allowed_set else minus_bias

    def zero_first_row(first, n, data):
        # ... nor write it: output row 0 of attn_output / ffn_down is zero
        if first == 0:
            row_len = len(data) // (2 * n)
            data[0:2 * row_len] = bytes(2 * row_len)

    os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
    tmp = out + ".part"
    rand = RandomHalf(cfg.seed)
    with open(tmp, "wb") as handle:
        w = Writer(handle, cfg.chunk_mib * (1 << 20) // 2)
        w.write(GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(plan), len(kvs)))
        for kv in kvs:
            w.write(kv)
        for info in infos:
            w.write(info)
        w.write(bytes(padding(w.written)))
        data_start = w.written
        for name, ne, gtype in plan:
            start = w.written
            row_len, rows = ne[0], n_elements(ne) // ne[0]
            if gtype == GGML_F32:
                w.write(norm_ones if name == "output_norm.weight" else layer_norm)
            elif name == "token_embd.weight":
                w.random_matrix(rand, rows, row_len, set_embedding_feature)
            elif name == "output.weight":
                w.random_matrix(rand, rows, row_len, set_output_feature)
            elif name.endswith(("attn_output.weight", "ffn_down.weight")):
                w.random_matrix(rand, rows, row_len, zero_first_row)
            else:
                w.random_matrix(rand, rows, row_len)
            size = w.written - start
            assert size == n_elements(ne) * type_size(gtype), name
            w.write(bytes(padding(size)))
            if cfg.verbose:
                print("  %-28s %-16s %12d bytes" % (name, "x".join(map(str, ne)), size), flush=True)
        data_bytes = w.written - data_start
    os.replace(tmp, out)

    n_params = sum(n_elements(ne) for _name, ne, _type in plan)
    weight_bytes = sum(n_elements(ne) * type_size(gtype) for _name, ne, gtype in plan)
    embd_bytes = cfg.vocab * h * 2
    per_token = weight_bytes - embd_bytes + h * 2
    head_dim = h // cfg.heads
    kv_per_pos = cfg.layers * 2 * cfg.kv_heads * head_dim * 2
    summary = {
        "path": os.path.abspath(out),
        "file_bytes": os.path.getsize(out),
        "config": {"layers": cfg.layers, "hidden": h, "heads": cfg.heads, "kv_heads": cfg.kv_heads,
                   "head_dim": head_dim, "ff": cfg.ff, "vocab": cfg.vocab, "ctx": cfg.ctx,
                   "seed": cfg.seed},
        "parameters": n_params,
        "weight_bytes": weight_bytes,
        "tensor_data_bytes_with_padding": data_bytes,
        "token_embd_bytes": embd_bytes,
        "weight_bytes_per_decoded_token": per_token,
        "per_token_formula": "weight_bytes - token_embd_bytes + hidden*2 (one embedding row)",
        "kv_cache_bytes_per_cached_position": kv_per_pos,
        "allowed_output_tokens": len(allowed),
        "eos_id": eos_id,
        "seconds": round(time.time() - t0, 1),
    }
    for bw in (4.8e12,):
        summary["ceiling_tok_s_at_%.1f_TB_s" % (bw / 1e12)] = round(bw / per_token, 1)
    return summary, tokens, merges, eos_id


def write_tokenizer(folder, tokens, merges, eos_id, ctx):
    """The same vocabulary as a Hugging Face fast tokenizer (GPT-2 style byte-level BPE)."""
    os.makedirs(folder, exist_ok=True)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": eos_id, "content": EOS_TEXT, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, trim_offsets=False), "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": merges},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOS_TEXT, "eos_token": EOS_TEXT,
              "unk_token": EOS_TEXT, "add_bos_token": False, "add_prefix_space": False,
              "clean_up_tokenization_spaces": False, "model_max_length": ctx,
              "chat_template": CHAT_TEMPLATE}
    for name, content in (("tokenizer.json", tok), ("tokenizer_config.json", config)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
            json.dump(content, handle, ensure_ascii=False)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--out", required=True, help="GGUF file to write")
    p.add_argument("--layers", type=int, default=18)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--ff", type=int, default=8192)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--ctx", type=int, default=4096, help="llama.context_length (training context)")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--chunk-mib", type=int, default=16, help="random data generated per write")
    p.add_argument("--tokenizer-dir", help="also write tokenizer.json / tokenizer_config.json here")
    p.add_argument("--json", help="also write the summary as JSON to this file")
    p.add_argument("--verbose", action="store_true", help="list every tensor")
    cfg = p.parse_args(argv)
    for key in ("layers", "hidden", "heads", "kv_heads", "ff", "vocab", "ctx", "chunk_mib"):
        if getattr(cfg, key) <= 0:
            p.error("--%s must be positive, got %d" % (key.replace("_", "-"), getattr(cfg, key)))
    if cfg.hidden % cfg.heads:
        p.error("--hidden (%d) must be a multiple of --heads (%d)" % (cfg.hidden, cfg.heads))
    if cfg.heads % cfg.kv_heads:
        p.error("--heads (%d) must be a multiple of --kv-heads (%d)" % (cfg.heads, cfg.kv_heads))
    if (cfg.hidden // cfg.heads) % 2:
        p.error("head size (%d) must be even for RoPE" % (cfg.hidden // cfg.heads))
    return cfg


def main(argv):
    cfg = parse_args(argv)
    summary, tokens, merges, eos_id = write_model(cfg, cfg.out)
    if cfg.tokenizer_dir:
        write_tokenizer(cfg.tokenizer_dir, tokens, merges, eos_id, cfg.ctx)
        summary["tokenizer_dir"] = os.path.abspath(cfg.tokenizer_dir)
    text = json.dumps(summary, indent=1)
    print(text)
    if cfg.json:
        with open(cfg.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    print("parameters: {:,}".format(summary["parameters"]))
    print("weight bytes: {:,}; read per decoded token: {:,} (= {:,} - token_embd {:,} + one row {:,})".format(
        summary["weight_bytes"], summary["weight_bytes_per_decoded_token"], summary["weight_bytes"],
        summary["token_embd_bytes"], cfg.hidden * 2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
