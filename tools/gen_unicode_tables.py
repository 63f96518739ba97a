#!/usr/bin/env python3
"""Generate src/tokenizer/ucd_tables.c: the Unicode data the pre-tokenizers need.

The byte-level BPE pre-tokenizers are regular expressions over Unicode general
categories (\\p{L}, \\p{N}, \\p{P}) and White_Space (\\s).  Instead of linking a
regex library we keep one sorted table of code point ranges, each tagged with
its major general category (L, M, N, P, S, Z, C) and a White_Space bit, and the
matchers in pretok.c consult it.

White_Space is derived the way str.isspace() defines whitespace (general
category Zs, or bidirectional class WS, B or S), from the same pinned data,
minus U+001C..U+001F: that rule also accepts those four information
separators, the Unicode property (and llama.cpp's tables) do not.

A few pre-tokenizers (deepseek-llm, deepseek-coder) spell their classes as
explicit code point ranges; those are copied below from the published
tokenizer.json patterns and emitted as range tables too.

The data must be Unicode 15.1: that is the version of llama.cpp's tables,
and tokenization has to agree with llama.cpp on every code point (letters
added later, e.g. CJK Extension H in 15.0, would otherwise split words
differently).  Python's own unicodedata follows the interpreter's release, so
the tables come from the unicodedata2 package pinned to 15.1.0.

Usage: pip install unicodedata2==15.1.0
       python3 tools/gen_unicode_tables.py > src/tokenizer/ucd_tables.c
"""
import sys

try:
    import unicodedata2 as unicodedata
except ImportError:
    sys.exit("gen_unicode_tables.py: needs the unicodedata2 package (pip install unicodedata2==15.1.0)")

UNICODE_VERSION = "15.1.0"
if unicodedata.unidata_version != UNICODE_VERSION:
    sys.exit("gen_unicode_tables.py: unicodedata2 has Unicode %s, the tables must be %s "
             "(pip install unicodedata2==15.1.0)" % (unicodedata.unidata_version, UNICODE_VERSION))

MAX_CP = 0x110000
CATS = {"L": 1, "M": 2, "N": 3, "P": 4, "S": 5, "Z": 6, "C": 7}
WS_BIT = 8


def is_white_space(cp):
    c = chr(cp)
    spacey = unicodedata.category(c) == "Zs" or unicodedata.bidirectional(c) in ("WS", "B", "S")
    return spacey and not (0x1C <= cp <= 0x1F)


def flags_of(cp):
    f = CATS[unicodedata.category(chr(cp))[0]]
    if is_white_space(cp):
        f |= WS_BIT
    return f


# deepseek-llm: "\\s?[<letters>]+" and "\\s?[<punct>]+"; both deepseek
# tokenizers: "[<cjk>]+".  Written as code points, not literal characters:
# several of the originals (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A) have
# singleton canonical decompositions and would silently turn into other code
# points if this file were ever NFC-normalised.
DEEPSEEK_LETTERS = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377),
    (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C),
    (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787),
    (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]
# [!-/:-~ U+FF01-U+FF0F U+FF1A-U+FF5E U+2018-U+201F U+3000-U+3002]
DEEPSEEK_PUNCT = [(0x21, 0x2F), (0x3A, 0x7E), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E),
                  (0x2018, 0x201F), (0x3000, 0x3002)]
# [U+4E00-U+9FA5 U+0800-U+4E00 U+AC00-U+D7FF]
DEEPSEEK_CJK = [(0x4E00, 0x9FA5), (0x0800, 0x4E00), (0xAC00, 0xD7FF)]


def merge_ranges(rs):
    merged = []
    for a, b in sorted(rs):
        assert a <= b, (hex(a), hex(b))
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def main():
    out = sys.stdout.write
    ranges = []
    prev = None
    for cp in range(MAX_CP):
        f = flags_of(cp)
        if f != prev:
            ranges.append((cp, f))
            prev = f

    # llama3's contraction matcher lower-cases the letter after the
    # apostrophe; make sure ASCII folding is all it can ever need.
    for cp in range(0x80, MAX_CP):
        low = chr(cp).lower()
        assert not (len(low) == 1 and low in "stmdrvel"), hex(cp)

    out("/* ucd_tables.c — GENERATED by tools/gen_unicode_tables.py; do not edit.\n")
    out(" *\n")
    out(" * Unicode %s general categories (major class) and White_Space, as\n"
        " * sorted ranges: entry = start << 8 | flags, a range running to the next\n"
        " * entry's start.  Plus the explicit code point classes of the deepseek\n"
        " * pre-tokenizers as inclusive [first, last] pairs. */\n" % unicodedata.unidata_version)
    out('#include "ucd.h"\n\n')
    out("const uint32_t zl_ucd_ranges[] = {\n")
    for i in range(0, len(ranges), 6):
        row = ranges[i:i + 6]
        out("    " + " ".join("0x%08Xu," % ((cp << 8) | f) for cp, f in row) + "\n")
    out("};\n")
    out("const size_t zl_ucd_n_ranges = sizeof zl_ucd_ranges / sizeof zl_ucd_ranges[0];\n\n")
    out("/* The same flags for U+0000..U+007F, looked up directly. */\n")
    out("const uint8_t zl_ucd_ascii[128] = {\n")
    for i in range(0, 128, 16):
        out("    " + " ".join("%d," % flags_of(cp) for cp in range(i, i + 16)) + "\n")
    out("};\n\n")

    for name, spec in (("deepseek_letters", DEEPSEEK_LETTERS),
                       ("deepseek_punct", DEEPSEEK_PUNCT),
                       ("deepseek_cjk", DEEPSEEK_CJK)):
        rs = merge_ranges(spec)
        out("const uint32_t zl_ucd_%s[][2] = {\n" % name)
        for i in range(0, len(rs), 4):
            out("    " + " ".join("{0x%05X, 0x%05X}," % r for r in rs[i:i + 4]) + "\n")
        out("};\n")
        out("const size_t zl_ucd_n_%s = sizeof zl_ucd_%s / sizeof zl_ucd_%s[0];\n\n"
            % (name, name, name))


if __name__ == "__main__":
    main()
