#!/usr/bin/env python3
"""fuzz_corpus.py SEED N [--invalid] — random tokenizer test strings.

Writes N strings in the corpus layout (each followed by
"\\n__ggml_vocab_test__\\n") to standard output.  Each string is a random
concatenation of pieces: special-token spellings of several families (whole
and cut short), whitespace runs of ASCII and Unicode spaces, words and
contractions, numbers, emoji sequences, and random code points from ranges
across the scripts, marks, symbols, private use, noncharacters and the
planes beyond the BMP.  With --invalid about one piece in five is a
malformed UTF-8 sequence (lone continuation bytes, cut-off sequences,
overlong forms, encoded surrogates, bytes that never occur in UTF-8).  Code
points above U+10FFFF are never produced: llama.cpp aborts on them.
"""
import random
import sys

SEP = "\n__ggml_vocab_test__\n"
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>",
            "<pad>", "<unk>", "<mask>", "<s>", "</s>", "<table>", "</td>", "<h1>", "[multimodal]", "<unused12>",
            "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<repo_name>", "<jupyter_code>", "<start_of_image>",
            "<|im_start", "im_end|>", "<|", "|>", "<0x41>", "[PAD151700]", "<|vision_pad|>", "<|user|>", "<|end|>",
            "<\uff5cfim\u2581begin\uff5c>", "<fim_prefix>", "<|eot_id|>"]
SPACES = [" ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\u00a0", "\u3000", "\u2028", "\u0085", "\u2009",
          "\u200b", "\ufeff", "\u1680", "\u180e", "\u202f", "\u205f"]
RANGES = [(0x21, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff), (0x530, 0x58f),
          (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f), (0x980, 0x9ff), (0xe00, 0xe7f), (0x10a0, 0x10ff),
          (0x1100, 0x11ff), (0x1e00, 0x1eff), (0x2000, 0x206f), (0x2070, 0x209f), (0x20a0, 0x20cf),
          (0x2100, 0x214f), (0x2150, 0x218f), (0x2190, 0x23ff), (0x2460, 0x24ff), (0x2500, 0x27bf),
          (0x3000, 0x303f), (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xe000, 0xf8ff),
          (0xf900, 0xfaff), (0xfb00, 0xfb4f), (0xfe00, 0xfe0f), (0xfe30, 0xfe4f), (0xff00, 0xffef),
          (0xfff0, 0xffff), (0x10000, 0x1007f), (0x10300, 0x1034f), (0x1d400, 0x1d7ff), (0x1f000, 0x1f0ff),
          (0x1f300, 0x1faff), (0x1f1e6, 0x1f1ff), (0x20000, 0x2a6df), (0xe0000, 0xe007f), (0xe0100, 0xe01ef),
          (0xf0000, 0xf00ff), (0x10fff0, 0x10ffff), (0x1, 0x1f), (0x7f, 0x9f), (0x30, 0x39), (0x660, 0x669),
          (0xff10, 0xff19), (0x2cf0, 0x2cff), (0x1c80, 0x1cbf), (0x31350, 0x313af), (0x1fb00, 0x1fbff)]
WORDS = ["the", "The", "THE", "'s", "'S", "'ll", "'LL", "'re", "'ve", "'m", "'d", "'t", "don't", "hello", "world",
         "def", "return", "int", "0", "123", "4567", "3.14", "foo_bar", "fooBar", "http://x.y/z", "e\u0301",
         "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f44d\U0001f3fd", "\u2764\ufe0f", "...", "!!", "??",
         "--", "==", "->", "::", "//", "/*", "*/", "\u2581", "\u0120", "\u010a", "abc" * 10, "x" * 50]
INVALID = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xf5",
           b"\xff", b"\xfe\xff", b"\xe0\x80\xaf", b"\xc1\xbf"]


def piece(r):
    k = r.random()
    if k < 0.15:
        return r.choice(SPECIALS)
    if k < 0.40:
        return r.choice(SPACES) * r.choice([1, 1, 1, 2, 3, 5, 8])
    if k < 0.65:
        return r.choice(WORDS)
    a, b = r.choice(RANGES)
    return "".join(chr(c if not 0xD800 <= c <= 0xDFFF else 0x41)
                   for c in (r.randint(a, b) for _ in range(r.choice([1, 1, 2, 3, 6]))))


def main():
    r = random.Random(int(sys.argv[1]))
    n = int(sys.argv[2])
    invalid = "--invalid" in sys.argv[3:]
    out = sys.stdout.buffer
    made = 0
    while made < n:
        parts = []
        for _ in range(r.randint(1, 25)):
            if invalid and r.random() < 0.2:
                parts.append(r.choice(INVALID))
            else:
                parts.append(piece(r).encode("utf-8"))
        s = b"".join(parts)
        if SEP.encode() in s:
            continue
        out.write(s + SEP.encode())
        made += 1


if __name__ == "__main__":
    main()
