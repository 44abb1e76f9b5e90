"""Byte-level BPE's alphabet (GPT-2's), shared by the test models: tests/serving/tiny_model.py
and tests/gpu/make_random_llama.py write vocabularies in it. Standard library only, so the GPU
node (no numpy, no gguf) can import it."""


def bytes_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters (byte-level BPE's alphabet)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
                 + list(range(ord("\xae"), ord("\xff") + 1)))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def encode_text(text):
    """Text in byte-level BPE's alphabet (a space becomes 'Ġ')."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in text.encode("utf-8"))
