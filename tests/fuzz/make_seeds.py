#!/usr/bin/env python3
"""make_seeds.py — writes the seed corpora of tests/fuzz/corpus/ (run from
anywhere: python3 tests/fuzz/make_seeds.py).  Deterministic; every seed is
small.  gguf: a minimal valid GGUF v3 (architecture, counts, a token array, one
F32 tensor), the same with a huge block_count and with a tensor table past the
end, and the header + metadata of the bundled stories260K-F16 model (first 12
KiB).  tokenizer: text with the flags byte first.  anthropic: request bodies
with the form byte first (1 = count_tokens)."""
import json
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "corpus")


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_str(k, v):
    return gstr(k) + struct.pack("<I", 8) + gstr(v)


def kv_u32(k, v):
    return gstr(k) + struct.pack("<II", 4, v)


def kv_strarr(k, vs):
    return gstr(k) + struct.pack("<IIQ", 9, 8, len(vs)) + b"".join(gstr(v) for v in vs)


def gguf(block_count=1, tensor_offset=0, n_tensors=1):
    kvs = [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", block_count),
           kv_u32("llama.context_length", 64), kv_strarr("tokenizer.ggml.tokens", ["<s>", "</s>", "a", "b"])]
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs)) + b"".join(kvs)
    tinfo = gstr("token_embd.weight") + struct.pack("<I", 2) + struct.pack("<qq", 2, 2) + struct.pack("<IQ", 0, tensor_offset)
    body = head + tinfo
    body += b"\0" * ((32 - len(body) % 32) % 32)
    return body + struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)


def write(kind, name, data):
    os.makedirs(os.path.join(OUT, kind), exist_ok=True)
    with open(os.path.join(OUT, kind, name), "wb") as f:
        f.write(data)


write("gguf", "minimal.gguf", gguf())
write("gguf", "block_count_huge.gguf", gguf(block_count=67108865))
write("gguf", "tensor_past_end.gguf", gguf(tensor_offset=1 << 40))
write("gguf", "tensors_count_huge.gguf", gguf(n_tensors=1 << 31))
with open(os.path.join(ROOT, "..", "fixtures", "models", "stories260K-F16.gguf"), "rb") as f:
    write("gguf", "stories260K-F16.head.gguf", f.read(12288))

for i, (flags, text) in enumerate([
        (0, b"Once upon a time, there was a little girl named Lily."),
        (3, b"<s>Hello</s> world <unk>"),
        (2, "caf\u00e9 na\u00efve \u4e2d\u6587 \U0001f600 \u0301\u0301".encode()),
        (0, b"\xff\xfe\xc0\x80 \xed\xa0\x80 \xf4\x90\x80\x80 broken"),
        (5, b"   \t\n\n  spaces   and\r\nnewlines  "),
        (8, struct.pack("<8i", 1, 2, 3, 100, 200, 300, 511, -1)),
        (0, b"a" * 600)]):
    write("tokenizer", "seed%d" % i, bytes([flags]) + text)

bodies = [
    (0, {"model": "x", "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]}),
    (0, {"model": "x", "max_tokens": 8, "system": "Be brief.", "stop_sequences": ["\n", "The"], "temperature": 0.5,
         "top_p": 0.9, "top_k": 40, "stream": True, "metadata": {"user_id": "u1"},
         "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                      {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Tell a story"}]}),
    (1, {"model": "x", "system": [{"type": "text", "text": "S"}], "messages": [{"role": "user", "content": "count"}]}),
    (0, {"model": "x", "max_tokens": 0, "messages": []}),
    (0, {"model": "x", "max_tokens": 4, "messages": [{"role": "tool", "content": None}]}),
    (0, {"model": "x", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
]
for i, (form, b) in enumerate(bodies):
    write("anthropic", "seed%d" % i, bytes([form]) + json.dumps(b).encode())
write("anthropic", "bad_utf8", b"\0" + b'{"model":"x","max_tokens":4,"messages":[{"role":"user","content":"\xc3\x28"}]}')
write("anthropic", "deep", b"\0" + b"[" * 2000 + b"]" * 2000)
write("anthropic", "escapes", b"\1" + b'{"model":"\\u0000x","messages":[{"role":"user","content":"\\ud800\\udc00 \\u0000"}]}')

# detok: a flags byte, then int16 ids of stories260K (byte tokens <0xXX> are id 3 + XX)
def ids(*xs):
    return struct.pack("<%dh" % len(xs), *xs)


cafe = (280, 412, 431, 485, 410, 231, 187, 176, 233, 153, 138, 410, 243, 162, 155, 131, 410, 444)  # "café 中文 😀 x"
for i, (flags, body) in enumerate([
        (0, ids(*cafe)),
        (4, ids(243, 162, 155, 410, 3 + 0xFF, 3 + 0xE4, 444, 3 + 0xC0, 3 + 0x80, 3 + 0xED, 3 + 0xA0, 3 + 0x80)),
        (3, ids(1, 403, 407, 2, 261, 0, 378)),
        (24, ids(*range(200, 260))),
        (6, ids(-1, 280, 600, 412, 32767, -32768, 431, 3 + 0xF0, 3 + 0x9F)),
        (20, ids(3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80, 3 + 0xF0, 3 + 0x9F, 410, 3 + 0x98))]):
    write("detok", "seed%d" % i, bytes([flags]) + body)

# session_token: op byte 0 = a token checked as is, 1 = "id.created" minted then edited (pairs: position, byte)
import hashlib
import hmac

KEY = b"zerolayer fuzz session key 0123\0"  # fuzz_session_token.c's key (32 bytes)
TENANT_A = "key:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def token(sid, created, tenant=TENANT_A):
    mac = hmac.new(KEY, ("%s\n%s\n%s" % (sid, tenant, created)).encode(), hashlib.sha256).hexdigest()
    return "%s.%s.%s" % (sid, created, mac)


good = token("zs_4f9a0c", "1764633600000")
for i, body in enumerate([
        good.encode(),
        good.upper().encode(),
        (good + ".x").encode(),
        ("zs_4f9a0c.01764633600000." + good.split(".")[2]).encode(),
        b"a.b.c", b"..", b"x" * 100 + b".1." + b"0" * 64,
        b"zs_\xff\xfe.123." + b"f" * 64]):
    write("session_token", "check%d" % i, b"\0" + body)
for i, body in enumerate([
        b"zs_4f9a0c.1764633600000\0" + bytes([5, ord("A"), 30, 0, 200, ord("0")]),
        b"zs_4f9a0c\0" + bytes([255, ord(".")]),
        b"s\0" + bytes([1, 0, 2, 0])]):
    write("session_token", "edit%d" % i, b"\1" + body)

# openai: the form byte first (0 = chat, 1 = completions)
oai = [
    (0, {"model": "x", "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]}),
    (0, {"model": "x", "max_tokens": 8, "stream": True, "stop": ["\n", "The"], "temperature": 0.5, "top_p": 0.9,
         "n": 2, "seed": 7, "logit_bias": {"2": -100, "100": 5}, "logprobs": True, "top_logprobs": 2,
         "user": "u1", "stream_options": {"include_usage": True},
         "messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}]},
                      {"role": "assistant", "content": None,
                       "tool_calls": [{"id": "c1", "type": "function",
                                       "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                      {"role": "tool", "tool_call_id": "c1", "content": "42"}]}),
    (0, {"model": "x", "messages": [{"role": "user", "content": "x"}],
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
         "tool_choice": "auto", "response_format": {"type": "json_object"}, "max_completion_tokens": 4}),
    (0, {"model": "x", "messages": [], "max_tokens": -1, "n": 1000, "stop": "x" * 300}),
    (1, {"model": "x", "prompt": "Once upon a time", "max_tokens": 8, "echo": True, "suffix": None}),
    (1, {"model": "x", "prompt": [[1, 403, 407], [600, -1], "text"], "max_tokens": 2, "n": 2}),
    (1, {"model": "x", "prompt": [], "max_tokens": 2}),
]
for i, (form, b) in enumerate(oai):
    write("openai", "seed%d" % i, bytes([form]) + json.dumps(b).encode())
write("openai", "bad_utf8", b"\0" + b'{"model":"x","messages":[{"role":"user","content":"\xed\xa0\x80"}]}')
write("openai", "nul_key", b"\1" + b'{"model":"x","prompt":"a","max_tokens\\u0000":1}')

# http: byte 0 bit 0 = 0: raw request bytes; 1: byte 1 picks a route of fuzz_http.c's table, the rest is the body
raw = [
    b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 74\r\n\r\n"
    b'{"model":"x","max_tokens":4,"messages":[{"role":"user","content":"Hi!!"}]}',
    b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"10\r\n{\"model\":\"x\",\"ma\r\n3a\r\nx_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}\r\n0\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\nExpect: 100-continue\r\n\r\n",
    b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n{\"a\":",
    b"GET /health%00.json HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nabc",
    b"OPTIONS /v1/messages HTTP/1.1\r\nHost: x\r\nOrigin: http://evil\r\nAccess-Control-Request-Method: POST\r\n\r\n",
    b"GET /v1/messages/batches/msgbatch_x/results HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
]
for i, r in enumerate(raw):
    write("http", "raw%d" % i, b"\0" + r)
framed = [
    (0, {"model": "x", "max_tokens": 3, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}),
    (1, {"model": "x", "prompt": [1, 403], "max_tokens": 2}),
    (2, {"model": "x", "max_tokens": 2, "stream": True, "messages": [{"role": "user", "content": "Hello"}]}),
    (4, {"requests": [{"custom_id": "a", "params": {"model": "x", "max_tokens": 1,
                                                    "messages": [{"role": "user", "content": "x"}]}}]}),
    (5, {"content": "Once upon a time", "add_special": True}),
    (6, {"tokens": [1, 403, 600, -1]}),
    (7, {"model": "x", "input": ["a", "b"]}),
    (8, {"user": "u"}),
]
for i, (route, b) in enumerate(framed):
    write("http", "route%d" % i, bytes([1, route]) + json.dumps(b).encode())

# zlc: valid codec files (identity directions, unit variances, bits within the
# ratio's budget) of a small shape and of stories260K's (5 layers, 4 KV heads,
# head_dim 8), and one with a table over budget.
def zlc(n_layers, n_heads, hd, ratio, bits_fn, n_sink=4):
    out = b"ZLCODEC\0" + struct.pack("<II", 1, 12) + bytes(range(32)) + struct.pack("<f", ratio)
    out += struct.pack("<IIII", n_layers, n_heads, hd, n_sink)
    for _ in range(n_layers * n_heads * 2):
        t = [0.0] * hd  # mean
        t += [1.0 if i == j else 0.0 for i in range(hd) for j in range(hd)]  # basis
        t += [1.0] * hd  # var
        t += [4.0 / (1 << b) for _ in range(hd) for b in range(1, 13)]  # steps
        t += [1.0 / (1 << (2 * b)) for _ in range(hd) for b in range(13)]  # mse
        out += struct.pack("<%df" % len(t), *t) + bytes(bits_fn(k) for k in range(hd))
    return out + b"ZLCEND\0\0"


write("zlc", "small.zlc", zlc(1, 1, 4, 0.25, lambda k: 4 if k == 0 else 0))
write("zlc", "stories260K_shape.zlc", zlc(5, 4, 8, 0.0625, lambda k: [3, 2, 2, 1, 0, 0, 0, 0][k]))
write("zlc", "over_budget.zlc", zlc(1, 1, 4, 0.0625, lambda k: 2))

# snapshot: form byte, then a client blob (form 0) or a payload the harness
# seals (form 1; 3: learned codec).  Payloads for stories260K (5 layers, 4 KV
# heads x 8: 640 f16 bytes of rows a position): tokens, history, rows.
def payload(tokens, hist=b"", f16=True, learned=False):
    n = len(tokens)
    p = struct.pack("<IIB3x", n, len(hist), 0 if f16 else 1) + struct.pack("<%di" % n, *tokens) + hist  # zl_kv_type
    if not learned:
        return p + b"\0" * (5 * 2 * n * 32 * (2 if f16 else 4))
    ns = min(n, 4)
    return p + b"\0" * (5 * 2 * ns * 32 * 2) + b"\x55" * ((n - ns) * 160)  # ratio 1/4: 1280 bits a token


write("snapshot", "exact_f16", b"\1" + payload([1, 2, 3], b'[{"role":"user","content":"hi"}]'))
write("snapshot", "exact_f32", b"\1" + payload([1, 400], f16=False))
write("snapshot", "learned", b"\3" + payload([1, 5, 9, 13, 17, 21, 25], learned=True))
write("snapshot", "empty", b"\1" + payload([]))
write("snapshot", "client_blob", b"\0" + b"ZLSNAP1\0" + struct.pack("<I", 1) + b"\0" * 200)

# grammar: form byte (0 GBNF, 1 schema, 2 schema as prefixed rules; +4 lazy on
# "ab:"), the text, a NUL, then drive bytes (< 0x80: the k-th allowed token;
# >= 0x80: token k & 0x7f whatever the mask says)
walk = bytes(range(0, 96, 3)) + bytes([0x80, 0x85, 0xb0, 0x9e, 0x87]) + bytes(range(1, 40, 5))
gbnf = [
    b'root ::= "{" ws pair ("," ws pair)* "}"\npair ::= str ":" ws val\nval ::= str | num | "true" | "false" | "null"\n'
    b'str ::= "\\"" [^"\\\\]* "\\""\nnum ::= "-"? [0-9]+ ("." [0-9]+)?\nws ::= [ \\t\\n]*  # comment',
    b"root ::= (\"a\" | 'b'){2,5} [\\x00-\\x7f] . [^a-c\\u00e9]? x\nx ::= \"\\U0001F600\" | \"\"",
    b'root ::= a+ b{0,} c{3}\na ::= "ab" | "a"\nb ::= ("b" | "e")?\nc ::= [0-9] | "12"',
    b'root ::= "[" (root ("," root)*)? "]" | "tr" "ue"',
    b'r ::= r "a"\nroot ::= r',          # left recursion: refused
    b'root ::= "a" undefined',           # undefined rule: refused
    b'root ::= x\nx ::= "a" x',           # never finishes: refused
    b'root ::= ("" | "a"){0,20} "b"',
]
for i, g in enumerate(gbnf):
    write("grammar", "gbnf%d" % i, b"\0" + g + b"\0" + walk)
schemas = [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "array",
     "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}, "c": {"enum": ["x", 1, None, True]}},
     "required": ["a"]},
    {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "number"}, "kids": {"type": "array",
     "items": {"$ref": "#/$defs/n"}}}, "additionalProperties": False}}, "$ref": "#/$defs/n"},
    {"anyOf": [{"type": "null"}, {"type": ["string", "boolean"]}, {"const": {"k": [1, "é"]}}]},
    {"type": "object", "additionalProperties": {"type": "integer"}, "title": "t", "description": "d"},
    {"oneOf": [{"type": "array"}, {"allOf": [{"type": "string", "minLength": 2}]}]},
    {"type": "string", "pattern": "^a"},  # unsupported keyword: refused
]
for i, s in enumerate(schemas):
    for form in (1, 2):
        write("grammar", "schema%d_%d" % (i, form), bytes([form]) + json.dumps(s).encode() + b"\0" + walk)
write("grammar", "lazy0", b"\4" + b'root ::= "1" "}" | "{\\"" [a-z]+ "\\":" [0-9]+ "}"' + b"\0" +
      bytes([12, 13, 7, 0x80 | 53, 0x80 | 55, 5, 9, 0x80 | 55, 1, 2, 3]))
write("grammar", "lazy1", b"\5" + json.dumps(schemas[0]).encode() + b"\0" + bytes([0x80 | 30, 0x80 | 54, 0x80 | 56, 1, 2]))
