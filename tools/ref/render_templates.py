#!/usr/bin/env python3
"""Render chat templates with python3-jinja2 into byte-exact fixtures.

The reference for src/template: every (template, conversation) pair of
tests/fixtures/templates/cases.txt is rendered the way HF transformers renders
chat templates (ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with the loopcontrols extension, a raise_exception global,
strftime_now, and a tojson filter that is json.dumps(ensure_ascii=False)) and
written to expected/TEMPLATE@CONVERSATION.out (bytes) or .err (first line
"raise", "syntax" or "runtime", then the message).

Templates: tpl/*.jinja; a case "NAME#L" renders line L (1-based) of
tpl/NAME.jinja alone (one-line error cases share a file).  The real ones are extracted from the cached GGUF
files (tokenizer.chat_template, read by the small GGUF reader below) when the
models are present; the rest are committed.  Conversations: conv/*.json, each
an object of template variables (messages, tools, add_generation_prompt);
tpl/NAME.vars.json adds bos_token / eos_token for a template.

Usage: python3 tools/ref/render_templates.py [--models DIR] [--out DIR]
"""
import argparse
import datetime
import json
import os
import struct
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

REAL = [  # fixture name, GGUF file in the model cache
    ("smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    ("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
]

# special-token text of the hand-written family templates (their models' vocabularies)
FAMILY_VARS = {
    "chatml": {"bos_token": "", "eos_token": "<|im_end|>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "zephyr": {"bos_token": "<s>", "eos_token": "</s>"},
}

CHAT_CONVS = None  # all of conv/
TRICKY = {  # template -> conversations
    "t_whitespace": ["multi", "user_only"],
    "t_loops": ["multi", "tool_calls"],
    "t_macros": ["multi", "unicode"],
    "t_namespace": ["multi", "tool_calls"],
    "t_filters": ["multi", "unicode"],
    "t_exprs": ["multi"],
    "t_errors_raise": ["empty_content", "multi", "user_only", "sys_user"],
    "t_error_type": ["multi"],
    "t_error_undef": ["multi"],
    "t_error_undef_attr": ["multi"],
    "t_error_filter": ["multi"],
    "t_error_syntax_unclosed": ["multi"],
    "t_error_syntax_expr": ["multi"],
    "t_error_syntax_mismatch": ["multi"],
    "t_strftime": ["user_only"],
    "t_idioms": ["reasoning_tools", "tool_calls", "multi", "user_only"],
    "t_snippets": ["user_only"],
    "t_whitespace2": ["multi", "sys_user"],
}


def gguf_meta(path, keys):
    """The values of the given metadata keys of a GGUF file (strings, ints, string arrays)."""
    out = {}
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))

        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        (version,) = rd("I")
        n_tensors, n_kv = rd("QQ")
        scal = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def rstr():
            (n,) = rd("Q")
            return f.read(n).decode("utf-8", "surrogateescape")

        def rval(t, keep):
            if t == 8:
                return rstr()
            if t == 9:
                et, n = rd("IQ")
                if et == 8:
                    vals = [rstr() for _ in range(n)]
                    return vals if keep else None
                f.seek(struct.calcsize("<" + scal[et]) * n, 1)
                return None
            return rd(scal[t])[0]

        for _ in range(n_kv):
            k = rstr()
            (t,) = rd("I")
            v = rval(t, k in keys)
            if k in keys:
                out[k] = v
    return out


def extract_real(models, tpl_dir):
    for name, fname in REAL:
        path = os.path.join(models, fname)
        if not os.path.exists(path):
            print(f"skip {name}: {path} not cached", file=sys.stderr)
            continue
        m = gguf_meta(path, {"tokenizer.chat_template", "tokenizer.ggml.tokens", "tokenizer.ggml.bos_token_id",
                             "tokenizer.ggml.eos_token_id"})
        with open(os.path.join(tpl_dir, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(m["tokenizer.chat_template"])
        toks = m["tokenizer.ggml.tokens"]
        vars_ = {"bos_token": toks[m["tokenizer.ggml.bos_token_id"]] if "tokenizer.ggml.bos_token_id" in m else "",
                 "eos_token": toks[m["tokenizer.ggml.eos_token_id"]] if "tokenizer.ggml.eos_token_id" in m else ""}
        with open(os.path.join(tpl_dir, name + ".vars.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(vars_, ensure_ascii=False) + "\n")


class Raised(jinja2.exceptions.TemplateError):
    pass


def make_env():
    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, src, variables):
    try:
        tpl = env.from_string(src)
    except jinja2.exceptions.TemplateSyntaxError as e:
        return None, f"syntax\nline {e.lineno}: {e.message}"
    try:
        return tpl.render(**variables), None
    except Raised as e:
        return None, f"raise\n{e.message}"
    except Exception as e:  # what the template raised: UndefinedError, TypeError, ...
        return None, f"runtime\n{e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/zerolayer/models"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "templates"))
    a = ap.parse_args()
    tpl_dir, conv_dir, exp_dir = (os.path.join(a.out, d) for d in ("tpl", "conv", "expected"))
    os.makedirs(exp_dir, exist_ok=True)
    extract_real(a.models, tpl_dir)
    for name, v in FAMILY_VARS.items():
        with open(os.path.join(tpl_dir, name + ".vars.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(v, ensure_ascii=False) + "\n")
    convs = sorted(f[:-5] for f in os.listdir(conv_dir) if f.endswith(".json"))
    chat = sorted(f[:-6] for f in os.listdir(tpl_dir) if f.endswith(".jinja") and not f.startswith("t_"))
    cases = [(t, c) for t in chat for c in convs] + [(t, c) for t, cs in TRICKY.items() for c in cs]
    with open(os.path.join(tpl_dir, "t_errlines.jinja"), encoding="utf-8") as f:
        cases += [(f"t_errlines#{i + 1}", "user_only") for i in range(len(f.read().split("\n")))]
    for f in os.listdir(exp_dir):
        os.remove(os.path.join(exp_dir, f))
    env = make_env()
    n_out = n_err = 0
    for t, c in cases:
        name, _, line = t.partition("#")
        with open(os.path.join(tpl_dir, name + ".jinja"), encoding="utf-8", newline="") as f:
            src = f.read()
        if line:
            src = src.split("\n")[int(line) - 1]
        with open(os.path.join(conv_dir, c + ".json"), encoding="utf-8") as f:
            variables = json.load(f)
        vp = os.path.join(tpl_dir, name + ".vars.json")
        if os.path.exists(vp):
            with open(vp, encoding="utf-8") as f:
                variables.update(json.load(f))
        else:
            variables.update({"bos_token": "<s>", "eos_token": "</s>"})
        out, err = render(env, src, variables)
        base = os.path.join(exp_dir, f"{t}@{c}")
        if err is None:
            with open(base + ".out", "wb") as f:
                f.write(out.encode("utf-8"))
            n_out += 1
        else:
            with open(base + ".err", "wb") as f:
                f.write(err.encode("utf-8"))
            n_err += 1
    with open(os.path.join(a.out, "cases.txt"), "w") as f:
        for t, c in cases:
            f.write(f"{t} {c}\n")
    print(f"jinja2 {jinja2.__version__}: {len(cases)} cases, {n_out} renders, {n_err} errors")


if __name__ == "__main__":
    main()
