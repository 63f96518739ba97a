/* cmd_chat.c — `zerolayer chat`: a conversation in the terminal.
 *
 * Each line read from stdin is a user turn; the whole conversation is
 * rendered with the model's own chat template (the server's renderer,
 * zl_chat_fmt) and only the tokens past the longest prefix already in the
 * sequence's KV cache are evaluated, so a turn costs its own tokens, not the
 * history's.  The answer streams to stdout until the model ends its turn;
 * prompts and statistics go to stderr (the prompt only on a terminal), so
 * `printf 'q1\nq2\n' | zerolayer chat` is scriptable.  Commands: /reset
 * (forget the conversation), /system TEXT (set the system prompt and start
 * over), /save FILE (the conversation as OpenAI-style JSON messages), /exit
 * (or end of input, Ctrl-D).  Ctrl-C stops the answer being generated (the
 * part already shown stays in the history), not the program. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../server/chat_template.h"
#include "cli.h"
#include "zerolayer.h"

static const char *k_usage =
    "usage: zerolayer chat [-m MODEL] [-s SYSTEM] [-n N] [--temp T] [--seed S] [--top-k K] [--top-p P]\n"
    "                      [--min-p P] [-t THREADS] [-c CTX] [--chat-template NAME | --chat-template-file F]\n"
    "  Chat with a model in the terminal: one line of stdin per user turn.  /reset forgets the conversation,\n"
    "  /system TEXT sets the system prompt (and starts over), /save FILE writes the conversation as JSON,\n"
    "  /exit or Ctrl-D quits; Ctrl-C stops an answer.  Answers stream to stdout, statistics go to stderr.\n"
    "  -m MODEL        GGUF model (default: the embedded models/stories260K.gguf)\n"
    "  -s SYSTEM       system prompt\n"
    "  -n N            most tokens per answer (default 1024)\n"
    "  --temp T        temperature (default 0.8; 0 = greedy)   --seed S (default 0)\n"
    "  --top-k K       (default 40)   --top-p P (default 0.95)   --min-p P (default 0.05)\n"
    "  -t THREADS      worker threads (default: all CPUs)\n"
    "  -c CTX          context length (default: the model's, capped at 4096)\n"
    "  --chat-template NAME    chatml|qwen|llama2|llama3|mistral|phi3|gemma|zephyr|plain (instead of the model's)\n"
    "  --chat-template-file F  Jinja chat template to render with (instead of the model's)\n";

typedef struct {
    zl_chat_msg *m;
    char **own; /* owned copies of role/content, two per message */
    int n, cap;
} conv;

static int conv_add(conv *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        zl_chat_msg *m = realloc(c->m, (size_t)cap * sizeof *m);
        if (!m) return -1;
        c->m = m;
        char **o = realloc(c->own, (size_t)cap * 2 * sizeof *o);
        if (!o) return -1;
        c->own = o;
        c->cap = cap;
    }
    char *r = strdup(role), *t = malloc(len + 1);
    if (!r || !t) { free(r); free(t); return -1; }
    memcpy(t, content, len);
    t[len] = 0;
    c->own[2 * c->n] = r;
    c->own[2 * c->n + 1] = t;
    c->m[c->n++] = (zl_chat_msg){r, t};
    return 0;
}

static void conv_clear(conv *c, int keep) {
    for (int i = keep; i < c->n; i++) { free(c->own[2 * i]); free(c->own[2 * i + 1]); }
    c->n = keep;
}

static volatile sig_atomic_t g_interrupt;
static void on_sigint(int sig) { (void)sig; g_interrupt = 1; }

/* The conversation as [{"role": ..., "content": ...}, ...]. */
static int conv_save(const conv *c, const char *path) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < c->n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s}", "role", c->m[i].role, "content", c->m[i].content));
    int rc = arr ? json_dump_file(arr, path, JSON_INDENT(1) | JSON_ENSURE_ASCII) : -1;
    json_decref(arr);
    return rc;
}

/* One answer: render, evaluate what the cache lacks, stream until the end of
 * the turn.  The reply's text is appended to *reply (malloc'd).  0 or 1. */
static int answer(zl_llm *llm, zl_seq *seq, const zl_chat_fmt *fmt, const conv *c, long n_max, char **reply,
                  size_t *reply_len) {
    zl_err err = {0};
    char *text = zl_chat_fmt_render(fmt, c->m, c->n, &err);
    if (!text) return cli_fail("chat template: %s", err.msg);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = zl_llm_tokenize(llm, text, strlen(text), 1, zl_chat_fmt_parse_special(fmt), &ids, &n_ids, &err);
    free(text);
    if (rc) return cli_fail("tokenizing the conversation: %s", err.msg);
    int n_have = 0;
    const int32_t *have = zl_seq_tokens(seq, &n_have);
    int common = 0;
    while (common < n_have && (size_t)common < n_ids && have[common] == ids[common]) common++;
    if ((size_t)common == n_ids && common > 0) common--; /* re-evaluate one token to have its logits */
    if ((int)n_ids >= zl_seq_n_ctx(seq)) {
        free(ids);
        return cli_fail("the conversation has %zu tokens; the context holds %d (use -c, or /reset)", n_ids,
                        zl_seq_n_ctx(seq));
    }
    zl_seq_truncate(seq, common);
    double t0 = zl_now_s();
    rc = zl_seq_eval(seq, ids + common, (int)n_ids - common, 0, NULL, &err);
    double t_prefill = zl_now_s() - t0;
    free(ids);
    if (rc) return cli_fail("%s", err.msg);
    zl_stream *st;
    if (zl_stream_new(&st, llm, 1, &err)) return cli_fail("%s", err.msg);
    double t1 = zl_now_s();
    int produced = 0, done = 0;
    *reply_len = 0;
    g_interrupt = 0;
    while (!rc && !done && !g_interrupt && produced < n_max && zl_seq_room(seq) > 0) {
        int32_t toks[17];
        int got = zl_seq_step(seq, toks, n_max - produced < 17 ? (int)(n_max - produced) : 17, &err);
        if (got < 0) { rc = 1; break; }
        for (int i = 0; i < got && !done; i++) {
            if (zl_llm_is_eog(llm, toks[i])) { done = 1; break; }
            size_t len;
            const char *txt = zl_stream_feed(st, toks[i], &len);
            produced++;
            if (!len) continue;
            char *r = realloc(*reply, *reply_len + len + 1);
            if (!r) { rc = 1; break; }
            *reply = r;
            memcpy(r + *reply_len, txt, len);
            *reply_len += len;
            r[*reply_len] = 0;
            fwrite(txt, 1, len, stdout);
            fflush(stdout);
        }
    }
    size_t len;
    const char *txt = zl_stream_flush(st, &len);
    if (len) {
        char *r = realloc(*reply, *reply_len + len + 1);
        if (r) {
            *reply = r;
            memcpy(r + *reply_len, txt, len);
            *reply_len += len;
            r[*reply_len] = 0;
            fwrite(txt, 1, len, stdout);
        }
    }
    fputc('\n', stdout);
    fflush(stdout);
    zl_stream_free(st);
    double t_gen = zl_now_s() - t1;
    if (rc) return cli_fail("%s", err.msg[0] ? err.msg : "out of memory");
    fprintf(stderr, "zerolayer: %d new prompt tokens (%d cached) in %.0f ms; %d tokens in %.0f ms (%.1f tok/s)%s\n",
            (int)n_ids - common, common, t_prefill * 1e3, produced, t_gen * 1e3,
            produced / (t_gen > 0 ? t_gen : 1e-9), done ? "" : g_interrupt ? " [stopped]" : " [cut at -n]");
    return 0;
}

int cmd_chat(int argc, char **argv) {
    const char *model = NULL, *system = NULL, *tpl_name = NULL, *tpl_file = NULL;
    long n_max = 1024, threads = 0, ctx = 0, top_k = 40;
    double temp = 0.8, top_p = 0.95, min_p = 0.05;
    unsigned long long seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) { fputs(k_usage, stdout); return 0; }
#define VAL (i++, v)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "-s") || !strcmp(a, "--system")) { if (!(system = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { if (cli_int(a, VAL, 1, 1 << 30, &n_max)) return 1; }
        else if (!strcmp(a, "--temp")) { if (cli_float(a, VAL, 0, 100, &temp)) return 1; }
        else if (!strcmp(a, "--seed")) { if (cli_u64(a, VAL, &seed)) return 1; }
        else if (!strcmp(a, "--top-k")) { if (cli_int(a, VAL, 0, 1 << 30, &top_k)) return 1; }
        else if (!strcmp(a, "--top-p")) { if (cli_float(a, VAL, 0, 1, &top_p)) return 1; }
        else if (!strcmp(a, "--min-p")) { if (cli_float(a, VAL, 0, 1, &min_p)) return 1; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (cli_int(a, VAL, 1, 1024, &threads)) return 1; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (cli_int(a, VAL, 16, 1 << 24, &ctx)) return 1; }
        else if (!strcmp(a, "--chat-template")) { if (!(tpl_name = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--chat-template-file")) { if (!(tpl_file = VAL)) return cli_fail("%s needs a value", a); }
        else return cli_fail("chat: unknown option '%s' (see zerolayer chat --help)", a);
#undef VAL
    }
    if (tpl_name && tpl_file) return cli_fail("--chat-template and --chat-template-file exclude each other");
    if (!model) model = cli_default_model();
    zl_err err = {0};
    zl_llm_opts lo = {(int)threads, 0, 0, 0, 2, 0, NULL};
    zl_llm *llm;
    if (zl_llm_open(&llm, model, &lo, &err)) return cli_fail("%s", err.msg);
    zl_chat_fmt fmt;
    memset(&fmt, 0, sizeof fmt);
    if (zl_chat_fmt_setup(&fmt, llm, tpl_name, tpl_file, &err)) {
        zl_llm_close(llm);
        return cli_fail("%s", err.msg);
    }
    fprintf(stderr, "zerolayer: %s, chat template %s (/reset, /exit)\n", zl_llm_desc(llm), fmt.name);
    int n_ctx = ctx ? (int)ctx : zl_llm_n_ctx_train(llm);
    if (!ctx && n_ctx > 4096) n_ctx = 4096;
    zl_seq_opts so = {n_ctx, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = (float)temp;
    so.sampling.top_k = (int)top_k;
    so.sampling.top_p = (float)top_p;
    so.sampling.min_p = (float)min_p;
    so.sampling.seed = seed;
    zl_seq *seq;
    if (zl_seq_new(&seq, llm, &so, &err)) {
        zl_chat_fmt_free(&fmt);
        zl_llm_close(llm);
        return cli_fail("%s", err.msg);
    }
    conv c = {0};
    int base = 0, rc = 0, tty = isatty(0);
    if (system && conv_add(&c, "system", system, strlen(system))) rc = cli_fail("out of memory");
    base = c.n;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    char *line = NULL;
    size_t cap = 0;
    while (!rc) {
        if (tty) { fputs("> ", stderr); fflush(stderr); }
        g_interrupt = 0;
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0 && errno == EINTR) { clearerr(stdin); if (tty) fputc('\n', stderr); continue; }
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) { conv_clear(&c, base); zl_seq_truncate(seq, 0); continue; }
        if (!strncmp(line, "/system ", 8) || !strcmp(line, "/system")) {
            const char *t = line[7] ? line + 8 : "";
            conv_clear(&c, 0);
            base = 0;
            if (*t && conv_add(&c, "system", t, strlen(t))) { rc = cli_fail("out of memory"); break; }
            base = c.n;
            zl_seq_truncate(seq, 0);
            fprintf(stderr, "zerolayer: system prompt %s; conversation reset\n", *t ? "set" : "cleared");
            continue;
        }
        if (!strncmp(line, "/save ", 6)) {
            if (conv_save(&c, line + 6)) fprintf(stderr, "zerolayer: cannot write %s\n", line + 6);
            else fprintf(stderr, "zerolayer: saved %d messages to %s\n", c.n, line + 6);
            continue;
        }
        if (line[0] == '/') { fprintf(stderr, "zerolayer: unknown command %s (/reset, /system TEXT, /save FILE, /exit)\n", line); continue; }
        if (n == 0) continue;
        if (conv_add(&c, "user", line, (size_t)n)) { rc = cli_fail("out of memory"); break; }
        char *reply = NULL;
        size_t rlen = 0;
        if (answer(llm, seq, &fmt, &c, n_max, &reply, &rlen)) {
            free(reply);
            conv_clear(&c, c.n - 1); /* the turn failed: forget it and go on */
            if (!tty) rc = 1;
            continue;
        }
        if (conv_add(&c, "assistant", reply ? reply : "", rlen)) rc = cli_fail("out of memory");
        free(reply);
    }
    free(line);
    conv_clear(&c, 0);
    free(c.m);
    free(c.own);
    zl_seq_free(seq);
    zl_chat_fmt_free(&fmt);
    zl_llm_close(llm);
    return rc;
}
