/* cmd_run.c — `zerolayer run`: stream a continuation of a prompt to stdout.
 * Only generated text goes to stdout (without the SentencePiece dummy-prefix
 * space); load info and timings go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/clock.h"
#include "../server/chat_template.h"
#include "cli.h"
#include "zerolayer.h"

static const char *k_usage =
    "usage: zerolayer run [-m MODEL] [-p PROMPT] [-n N] [--temp T] [--seed S] [--top-k K] [--top-p P]\n"
    "                     [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--presence-penalty P]\n"
    "                     [--frequency-penalty P] [-t THREADS] [-c CTX] [--ignore-eos] [--kv-type f16|f32|q8_0]\n"
    "                     [--no-mmap] [--mlock] [--preheat] [--prefetch-layers N] [--exact]\n"
    "                     [--spec lookup|draft|off] [--ring N] [--draft-model FILE | --draft-layers N]\n"
    "                     [--ring-cost C1,C2,..|measure]\n"
    "                     [--kv-policy full|window|anchor] [--kv-budget N|F] [--kv-layer-max N]\n"
    "                     [--chat [--system TEXT]] [--grammar FILE | --json-schema FILE]\n"
    "  Generate a continuation of PROMPT (default: empty, i.e. BOS only) and stream it to stdout.\n"
    "  --chat          PROMPT is a user message: render it with the model's chat template (after --system TEXT\n"
    "                  when given) and answer it, stopping at the end of the model's turn\n"
    "  -m MODEL        GGUF model (default: the embedded models/stories260K.gguf)\n"
    "  -n N            tokens to generate (default 256; -1 = until end of text or context)\n"
    "  --temp T        temperature (default 0.8; 0 = greedy)\n"
    "  --seed S        sampling seed (default 0): same seed, same text\n"
    "  --top-k K       (default 40, 0 = off)   --top-p P (default 0.95)   --min-p P (default 0.05)\n"
    "  --repeat-penalty R (default 1 = off) over the last --repeat-last-n tokens (default 64)\n"
    "  -t THREADS      worker threads (default: all CPUs)\n"
    "  -c CTX          context length (default: the model's, capped at 4096)\n"
    "  --ignore-eos    keep generating past end-of-text tokens\n"
    "  --grammar FILE  constrain the output to a grammar (GBNF-style: src/grammar/grammar.h); the ring is off\n"
    "  --json-schema FILE  constrain the output to JSON valid under a JSON Schema (the subset of\n"
    "                  src/grammar/grammar.h; another keyword is an error naming it)\n"
    "  --no-mmap       read the weights into memory instead of mapping the file\n"
    "  --mlock         lock the mapped weights in RAM\n"
    "  --preheat       read the whole file into the page cache first (progress bar on a TTY)\n"
    "  --prefetch-layers N  read ahead N layers of weights while computing (default 2, 0 = off)\n"
    "  --exact         reference arithmetic (f32 activations, f64 sums); slow\n"
    "  --spec MODE     verification ring: lookup (n-gram drafts from the context, default), draft (a draft\n"
    "                  model), off.  Lossless: greedy output is identical, sampling keeps its distribution\n"
    "  --ring N        drafted tokens of the first verify step (default 5); then the ring drafts the\n"
    "                  length (1..16) with the most expected tokens per unit of step time, from its\n"
    "                  acceptance so far and the step times it measures\n"
    "  --draft-model FILE  draft model for --spec draft (its vocabulary must equal the target's)\n"
    "  --draft-layers N    draft with the target's own first N layers (self-speculation)\n"
    "  --ring-cost C1,C2,..|measure  verify-cost curve (forward over 1, 2, .. tokens / over one; 'measure'\n"
    "                  times it first) used instead of the straight line the ring fits to its step times\n"
    "                  (exact where the kernels make the curve lumpy; a draft model's cost is not in it)\n"
    "  --kv-policy P   full (default) | window (4 sinks + recent) | anchor (sinks + <|anchor_start|>...\n"
    "                  <|anchor_end|> spans in the prompt + heavy hitters + recent); bounded policies\n"
    "                  evict instead of stopping, so generation can run past the context length\n"
    "  --kv-budget B   tokens kept under a bounded policy: a count, or a fraction of the context (0.25)\n"
    "  --kv-layer-max N  most tokens one layer keeps under a bounded policy (default: the context); set\n"
    "                  it to the context the model was trained on when its file claims more\n";

int cmd_run(int argc, char **argv) {
    const char *model = NULL, *prompt = "";
    long n_gen = 256, threads = 0, ctx = 0, top_k = 40, last_n = 64;
    double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0, pres = 0, freq = 0;
    unsigned long long seed = 0;
    int ignore_eos = 0, exact = 0, no_mmap = 0, mlock = 0, preheat = 0;
    long prefetch = 2, ring = 5, draft_layers = 0, layer_max = 0;
    const char *draft_model = NULL;
    zl_spec_mode spec = ZL_SPEC_LOOKUP;
    const char *ring_cost = NULL;
    float cost[CLI_RING_COST_MAX];
    int n_cost = 0;
    const char *kv_policy = "full", *kv_budget = NULL, *system = NULL;
    int chat = 0, spec_given = 0;
    const char *grammar_file = NULL, *schema_file = NULL;
    zl_kv_type kvt = ZL_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) { fputs(k_usage, stdout); return 0; }
#define VAL (i++, v)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!(prompt = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { if (cli_int(a, VAL, -1, 1 << 30, &n_gen)) return 1; }
        else if (!strcmp(a, "--temp")) { if (cli_float(a, VAL, 0, 100, &temp)) return 1; }
        else if (!strcmp(a, "--seed")) { if (cli_u64(a, VAL, &seed)) return 1; }
        else if (!strcmp(a, "--top-k")) { if (cli_int(a, VAL, 0, 1 << 30, &top_k)) return 1; }
        else if (!strcmp(a, "--top-p")) { if (cli_float(a, VAL, 0, 1, &top_p)) return 1; }
        else if (!strcmp(a, "--min-p")) { if (cli_float(a, VAL, 0, 1, &min_p)) return 1; }
        else if (!strcmp(a, "--repeat-penalty")) { if (cli_float(a, VAL, 0.01, 100, &rep)) return 1; }
        else if (!strcmp(a, "--repeat-last-n")) { if (cli_int(a, VAL, -1, 1 << 30, &last_n)) return 1; }
        else if (!strcmp(a, "--presence-penalty")) { if (cli_float(a, VAL, -100, 100, &pres)) return 1; }
        else if (!strcmp(a, "--frequency-penalty")) { if (cli_float(a, VAL, -100, 100, &freq)) return 1; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (cli_int(a, VAL, 1, 1024, &threads)) return 1; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (cli_int(a, VAL, 1, 1 << 24, &ctx)) return 1; }
        else if (!strcmp(a, "--kv-type")) {
            const char *t = VAL;
            if (t && !strcmp(t, "f16")) kvt = ZL_KV_F16;
            else if (t && !strcmp(t, "f32")) kvt = ZL_KV_F32;
            else if (t && !strcmp(t, "q8_0")) kvt = ZL_KV_Q8_0;
            else return cli_fail("--kv-type must be f16, f32 or q8_0");
        }
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1;
        else if (!strcmp(a, "--grammar")) { if (!(grammar_file = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--json-schema")) { if (!(schema_file = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--system")) { if (!(system = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--exact")) exact = 1;
        else if (!strcmp(a, "--no-mmap")) no_mmap = 1;
        else if (!strcmp(a, "--mlock")) mlock = 1;
        else if (!strcmp(a, "--preheat")) preheat = 1;
        else if (!strcmp(a, "--spec")) {
            const char *m = VAL;
            spec_given = 1;
            if (m && !strcmp(m, "lookup")) spec = ZL_SPEC_LOOKUP;
            else if (m && !strcmp(m, "draft")) spec = ZL_SPEC_DRAFT;
            else if (m && !strcmp(m, "off")) spec = ZL_SPEC_OFF;
            else return cli_fail("--spec must be lookup, draft or off");
        }
        else if (!strcmp(a, "--kv-policy")) { if (!(kv_policy = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--kv-budget")) { if (!(kv_budget = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--kv-layer-max")) { if (cli_int(a, VAL, 1, 1 << 24, &layer_max)) return 1; }
        else if (!strcmp(a, "--ring")) { if (cli_int(a, VAL, 1, 16, &ring)) return 1; }
        else if (!strcmp(a, "--ring-cost")) {
            if (!(ring_cost = VAL) || cli_ring_cost(ring_cost, cost, &n_cost)) return ring_cost ? 1 : cli_fail("%s needs a value", a);
        }
        else if (!strcmp(a, "--draft-model")) { if (!(draft_model = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--draft-layers")) { if (cli_int(a, VAL, 1, 1 << 20, &draft_layers)) return 1; }
        else if (!strcmp(a, "--prefetch-layers")) { if (cli_int(a, VAL, 0, 1024, &prefetch)) return 1; }
        else return cli_fail("run: unknown option '%s' (see zerolayer run --help)", a);
#undef VAL
    }
    if (!model) model = cli_default_model();
    char *grammar = NULL;
    if (grammar_file && schema_file) return cli_fail("--grammar and --json-schema exclude each other");
    if (grammar_file || schema_file) {
        if (spec_given && spec != ZL_SPEC_OFF) return cli_fail("--grammar/--json-schema need the ring off (--spec off)");
        spec = ZL_SPEC_OFF;
        size_t gl = 0;
        const char *path = grammar_file ? grammar_file : schema_file;
        char *text = cli_read_file(path, &gl);
        if (!text) return cli_fail("cannot read %s", path);
        if (schema_file) {
            zl_err e = {0};
            int grc = zl_json_schema_grammar(text, &grammar, &e);
            free(text);
            if (grc) return cli_fail("%s: %s", path, e.msg);
        } else {
            grammar = text;
        }
    }
    if (spec == ZL_SPEC_DRAFT && !draft_model == !draft_layers)
        return cli_fail("--spec draft needs exactly one of --draft-model FILE or --draft-layers N");
    if (spec != ZL_SPEC_DRAFT && (draft_model || draft_layers))
        return cli_fail("--draft-model/--draft-layers need --spec draft");
    zl_err err = {0};
    zl_llm_opts lo = {(int)threads, no_mmap, mlock, 0, prefetch ? (int)prefetch : -1, (int)layer_max, NULL};
    double t0 = zl_now_s();
    zl_llm *llm;
    if (zl_llm_open(&llm, model, &lo, &err)) return cli_fail("%s", err.msg);
    if (preheat) zl_llm_preheat(llm, cli_progress, "preheat");
    double t_load = zl_now_s() - t0;
    fprintf(stderr, "zerolayer: %s (%d threads, isa %s, loaded in %.0f ms)\n", zl_llm_desc(llm),
            zl_llm_n_threads(llm), zl_llm_isa(llm), t_load * 1e3);
    zl_kv_policy_kind pk;
    if (cli_kv_policy(kv_policy, &pk)) { zl_llm_close(llm); return 1; }
    if (system && !chat) { zl_llm_close(llm); return cli_fail("--system needs --chat"); }
    char *rendered = NULL;
    int special = 0;
    if (chat) { /* the prompt as one user turn of the model's own template */
        zl_chat_fmt fmt;
        memset(&fmt, 0, sizeof fmt);
        zl_chat_msg msgs[2];
        int nm = 0;
        if (system) msgs[nm++] = (zl_chat_msg){"system", system};
        msgs[nm++] = (zl_chat_msg){"user", prompt};
        if (!zl_chat_fmt_setup(&fmt, llm, NULL, NULL, &err)) {
            rendered = zl_chat_fmt_render(&fmt, msgs, nm, &err);
            special = zl_chat_fmt_parse_special(&fmt);
            zl_chat_fmt_free(&fmt);
        }
        if (!rendered) { zl_llm_close(llm); return cli_fail("chat template: %s", err.msg); }
        prompt = rendered;
    }
    int32_t *ids = NULL;
    uint8_t *anchor = NULL;
    size_t n_ids = 0;
    if (zl_llm_tokenize_anchored(llm, prompt, strlen(prompt), 1, special, &ids, &anchor, &n_ids, &err)) {
        free(rendered);
        zl_llm_close(llm);
        return cli_fail("tokenizing the prompt: %s", err.msg);
    }
    if (n_ids == 0) { /* a model that adds no BOS and an empty prompt: start from BOS anyway */
        free(ids);
        free(anchor);
        ids = malloc(sizeof *ids);
        anchor = calloc(1, 1);
        ids[0] = zl_llm_bos(llm);
        n_ids = 1;
        if (ids[0] < 0) { free(ids); zl_llm_close(llm); return cli_fail("empty prompt and the model has no BOS token"); }
    }
    int n_ctx = ctx ? (int)ctx : zl_llm_n_ctx_train(llm);
    if (!ctx && n_ctx > 4096) n_ctx = 4096;
    long budget = 0;
    if (kv_budget && cli_budget("--kv-budget", kv_budget, n_ctx, &budget)) { free(ids); free(anchor); zl_llm_close(llm); return 1; }
    if ((long)n_ids >= n_ctx && pk == ZL_KV_POLICY_FULL) {
        free(ids);
        free(anchor);
        zl_llm_close(llm);
        return cli_fail("prompt has %zu tokens; the context holds %d (use -c, or a bounded --kv-policy)", n_ids, n_ctx);
    }
    zl_seq_opts so = {n_ctx, kvt, zl_sampling_defaults()};
    so.sampling.temp = (float)temp;
    so.sampling.top_k = (int)top_k;
    so.sampling.top_p = (float)top_p;
    so.sampling.min_p = (float)min_p;
    so.sampling.repeat_penalty = (float)rep;
    so.sampling.repeat_last_n = (int)last_n;
    so.sampling.presence_penalty = (float)pres;
    so.sampling.frequency_penalty = (float)freq;
    so.sampling.seed = seed;
    zl_seq *seq;
    zl_stream *st;
    if (zl_seq_new(&seq, llm, &so, &err)) { free(ids); zl_llm_close(llm); return cli_fail("%s", err.msg); }
    zl_seq_set_exact(seq, exact);
    if (zl_seq_set_kv_policy(seq, pk, (int)budget, &err)) {
        zl_seq_free(seq); free(ids); free(anchor); zl_llm_close(llm);
        return cli_fail("%s", err.msg);
    }
    zl_llm *draft = NULL;
    if (spec == ZL_SPEC_DRAFT) {
        int drc = draft_model ? zl_llm_open(&draft, draft_model, &lo, &err)
                              : zl_llm_open_truncated(&draft, llm, (int)draft_layers, &err);
        if (drc) { zl_seq_free(seq); free(ids); zl_llm_close(llm); return cli_fail("draft model: %s", err.msg); }
    }
    zl_spec_opts spo = {spec, (int)ring, 16, draft};
    if (zl_seq_set_spec(seq, &spo, &err)) {
        zl_seq_free(seq); zl_llm_close(draft); free(ids); zl_llm_close(llm);
        return cli_fail("%s", err.msg);
    }
    if (grammar && zl_seq_set_grammar(seq, grammar, &err)) {
        free(grammar); zl_seq_free(seq); free(ids); zl_llm_close(llm);
        return cli_fail("%s", err.msg);
    }
    free(grammar);
    grammar = NULL;
    if (ring_cost && spec != ZL_SPEC_OFF) {
        if (!n_cost) { /* measure: forwards over 1..17 tokens at depth 128 (or half the context) */
            int depth = zl_seq_n_ctx(seq) / 2 < 128 ? zl_seq_n_ctx(seq) / 2 : 128;
            if (zl_llm_verify_cost(llm, depth > 0 ? depth : 1, CLI_RING_COST_MAX, 3, cost, &err)) {
                zl_seq_free(seq); zl_llm_close(draft); free(ids); zl_llm_close(llm);
                return cli_fail("--ring-cost measure: %s", err.msg);
            }
            n_cost = CLI_RING_COST_MAX;
        }
        zl_seq_set_ring_cost(seq, cost, n_cost);
    }
    /* strip the dummy-prefix space only when the prompt is empty: otherwise the
     * continuation's leading space is real text */
    if (zl_stream_new(&st, llm, prompt[0] == 0 || chat, &err)) {
        zl_seq_free(seq); free(ids); zl_llm_close(llm);
        return cli_fail("%s", err.msg);
    }
    double t1 = zl_now_s();
    int rc = zl_seq_eval_anchored(seq, ids, anchor, (int)n_ids, 0, NULL, &err);
    double t_prefill = zl_now_s() - t1, t2 = zl_now_s();
    int produced = 0, done = 0;
    while (!rc && !done && (n_gen < 0 || produced < n_gen) && zl_seq_room(seq) > 0) {
        int32_t toks[17];
        int max_out = n_gen < 0 || n_gen - produced > 17 ? 17 : (int)(n_gen - produced);
        int got = zl_seq_step(seq, toks, max_out, &err);
        if (got < 0) { rc = 1; break; }
        for (int i = 0; i < got; i++) {
            if (!ignore_eos && zl_llm_is_eog(llm, toks[i])) { done = 1; break; }
            size_t len;
            const char *txt = zl_stream_feed(st, toks[i], &len);
            if (len) { fwrite(txt, 1, len, stdout); fflush(stdout); }
            produced++;
        }
    }
    size_t len;
    const char *txt = zl_stream_flush(st, &len);
    if (len) fwrite(txt, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    double t_gen = zl_now_s() - t2;
    if (rc) fprintf(stderr, "zerolayer: %s\n", err.msg);
    fprintf(stderr, "zerolayer: prompt %zu tokens in %.1f ms (%.1f tok/s); generated %d tokens in %.1f ms (%.1f tok/s)\n",
            n_ids, t_prefill * 1e3, n_ids / (t_prefill > 0 ? t_prefill : 1e-9), produced, t_gen * 1e3,
            produced / (t_gen > 0 ? t_gen : 1e-9));
    zl_spec_stats ss;
    zl_seq_spec_stats(seq, &ss);
    char resumed[80] = "";
    if (ss.resumed)
        snprintf(resumed, sizeof resumed, ", %llu verify passes resumed after the draft's layers",
                 (unsigned long long)ss.resumed);
    if (ss.verify_steps)
        fprintf(stderr, "zerolayer: ring: %llu steps, %llu verify steps, drafted %llu, accepted %llu (%.0f%%), %.2f tokens/step%s\n",
                (unsigned long long)ss.steps, (unsigned long long)ss.verify_steps, (unsigned long long)ss.drafted,
                (unsigned long long)ss.accepted, ss.drafted ? 100.0 * ss.accepted / ss.drafted : 0.0,
                ss.steps ? (double)produced / ss.steps : 0.0, resumed);
    if (grammar_file || schema_file) {
        long walks = 0, hits = 0;
        double gms = 0;
        zl_seq_grammar_stats(seq, &walks, &hits, &gms);
        fprintf(stderr, "zerolayer: grammar: %.3f ms per token in the constraint (%.1f ms in all), %ld masks by trie walk, %ld from the cache\n",
                produced ? gms / produced : 0.0, gms, walks, hits);
    }
    zl_kv_stats ks;
    zl_seq_kv_stats(seq, &ks);
    if (pk != ZL_KV_POLICY_FULL)
        fprintf(stderr, "zerolayer: kv: %d cached of budget %d, %llu evicted, %d anchors, %llu KV bytes read per token\n",
                ks.cached, ks.budget, (unsigned long long)ks.evicted, ks.anchors,
                (unsigned long long)(ks.bytes_per_token * (uint64_t)ks.cached));
    zl_stream_free(st);
    zl_seq_free(seq);
    zl_llm_close(draft);
    free(anchor);
    free(ids);
    free(rendered);
    zl_llm_close(llm);
    return rc ? 1 : 0;
}
