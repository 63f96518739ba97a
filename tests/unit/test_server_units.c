/* test_server_units.c — server pieces that need no socket: chat templates,
 * request-body validation (field names in errors, invalid UTF-8 located),
 * the stop-sequence hold-back of gen.c driven through a real scheduler on
 * stories260K, the metrics text format, batching invariance at the
 * scheduler level (16 concurrent greedy jobs = each alone), and the
 * sampler's filters against a fully sorted reference (the engine thread
 * samples every stream of a batch: its filters sort only what they need). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode/sampler.h"
#include "engine/sched.h"
#include "server/chat_template.h"
#include "server/gen.h"
#include "server/jsonv.h"
#include "server/metrics.h"
#include "zerolayer.h"

#define MODEL ZL_ROOT "/models/stories260K.gguf"

Test(chat_template, detect_families) {
    int known;
    cr_expect_eq(zl_tpl_detect("{% for m in messages %}<|im_start|>{{m.role}}", &known), ZL_TPL_CHATML);
    cr_expect_eq(zl_tpl_detect("<|start_header_id|>", &known), ZL_TPL_LLAMA3);
    cr_expect_eq(zl_tpl_detect("[INST] <<SYS>>", &known), ZL_TPL_LLAMA2);
    cr_expect_eq(zl_tpl_detect("[INST] {{ m }} [/INST]", &known), ZL_TPL_MISTRAL);
    cr_expect_eq(zl_tpl_detect("<|user|> ... <|end|> <|assistant|>", &known), ZL_TPL_PHI3);
    cr_expect_eq(zl_tpl_detect("<start_of_turn>", &known), ZL_TPL_GEMMA);
    cr_expect_eq(zl_tpl_detect("<|user|>\n{{ eos_token }}", &known), ZL_TPL_ZEPHYR);
    cr_expect_eq(zl_tpl_detect(NULL, &known), ZL_TPL_PLAIN);
    cr_expect_eq(known, 1);
    cr_expect_eq(zl_tpl_detect("{{ something else }}", &known), ZL_TPL_PLAIN);
    cr_expect_eq(known, 0);
    cr_expect_eq(zl_tpl_from_name("qwen"), ZL_TPL_CHATML);
    cr_expect_eq(zl_tpl_from_name("nope"), -1);
}

Test(chat_template, renders) {
    zl_chat_msg m[] = {{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}};
    struct { zl_tpl t; const char *want; } cases[] = {
        {ZL_TPL_CHATML, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1"
                        "<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n"},
        {ZL_TPL_LLAMA3, "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user"
                        "<|end_header_id|>\n\nU1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|><|start_header_id|>assistant"
                        "<|end_header_id|>\n\n"},
        {ZL_TPL_LLAMA2, "[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]"},
        {ZL_TPL_MISTRAL, "[INST] S\n\nU1 [/INST]A1</s>[INST] U2 [/INST]"},
        {ZL_TPL_GEMMA, "<start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
                       "<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n"},
        {ZL_TPL_PHI3, "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n"
                      "<|assistant|>\n"},
        {ZL_TPL_ZEPHYR, "<|system|>\nS</s>\n<|user|>\nU1</s>\n<|assistant|>\nA1</s>\n<|user|>\nU2</s>\n<|assistant|>\n"},
        {ZL_TPL_PLAIN, "S\n\nUser: U1\nAssistant: A1\nUser: U2\nAssistant:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *s = zl_tpl_render(cases[i].t, m, 4);
        cr_expect_str_eq(s, cases[i].want, "%s", zl_tpl_name(cases[i].t));
        free(s);
    }
    /* a trailing assistant message is continued, not closed */
    zl_chat_msg pre[] = {{"user", "Hi"}, {"assistant", "Once"}};
    char *s = zl_tpl_render(ZL_TPL_CHATML, pre, 2);
    cr_expect_str_eq(s, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce");
    free(s);
}

Test(jsonv, errors_name_the_field) {
    zl_verr e = {{0}, {0}};
    cr_expect_null(zl_json_parse_body("{\"a\":", 5, &e));
    cr_expect(strstr(e.msg, "invalid JSON") != NULL);
    cr_expect_null(zl_json_parse_body("[1]", 3, &e));
    cr_expect(strstr(e.msg, "JSON object") != NULL);
    const char bad[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\"}]}";
    cr_expect_null(zl_json_parse_body(bad, sizeof bad - 1, &e));
    cr_expect_str_eq(e.param, "messages[0].content");
    json_t *j = zl_json_parse_body("{\"n\":\"x\",\"t\":3,\"s\":1}", 21, &e);
    cr_assert_not_null(j);
    long long v;
    double d;
    const char *str;
    cr_expect_eq(zl_jv_int(j, "n", "", 0, 0, 10, &v, &e), -1);
    cr_expect_str_eq(e.param, "n");
    cr_expect_eq(zl_jv_num(j, "t", "", 0, 2, &d, &e), -1);
    cr_expect(strstr(e.msg, "out of range") != NULL);
    cr_expect_eq(zl_jv_str(j, "missing", "messages[1]", 1, &str, &e), -1);
    cr_expect_str_eq(e.param, "messages[1].missing");
    cr_expect_eq(zl_jv_str(j, "s", "", 0, &str, &e), -1);
    json_decref(j);
    json_t *l = zl_json_lossy_string("a\xc3", 2);
    cr_expect_str_eq(json_string_value(l), "a\xEF\xBF\xBD");
    json_decref(l);
}

static zl_llm *g_llm;
static zl_sched *g_sched;

static void setup(void) {
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&g_llm, MODEL, &lo, NULL), 0);
    zl_sched_opts so = {.n_parallel = 16, .max_queue = 64, .n_ctx = 256, .step_tokens = 64};
    cr_assert_eq(zl_sched_new(&g_sched, g_llm, &so, NULL), 0);
}
static void teardown(void) {
    zl_sched_free(g_sched);
    zl_llm_close(g_llm);
}

static char *run_text(const char *prompt, int max_tokens, const char **stops, int n_stops, int *end, int *n_tok) {
    int32_t *ids = NULL;
    size_t n = 0;
    cr_assert_eq(zl_llm_tokenize(g_llm, prompt, strlen(prompt), 1, 0, &ids, &n, NULL), 0);
    zl_gen_params p = {.sampling = {.temp = 0, .top_p = 1, .repeat_penalty = 1}, .max_tokens = max_tokens,
                       .n_logprobs = -1, .stops = stops, .n_stops = n_stops};
    int busy, ni = (int)n;
    zl_gen *g = zl_gen_start(g_sched, &ids, &ni, 1, &p, zl_now_ms(), &busy);
    cr_assert_not_null(g);
    while (!zl_gen_poll(g, 50)) {}
    char *out = strndup(g->ch[0].text.p ? g->ch[0].text.p : "", g->ch[0].text.n);
    if (end) *end = g->ch[0].end;
    if (n_tok) *n_tok = g->ch[0].n_tokens;
    zl_gen_free(g);
    free(ids);
    return out;
}

Test(gen, stop_sequences_are_held_back_and_cut, .init = setup, .fini = teardown) {
    int end;
    char *full = run_text("Once upon a time", 40, NULL, 0, &end, NULL);
    cr_expect_eq(end, ZL_GEN_LENGTH);
    const char *at = strstr(full, " little");
    cr_assert_not_null(at, "%s", full);
    const char *stops[] = {"zzz", " little"};
    int n_tok;
    char *cut = run_text("Once upon a time", 40, stops, 2, &end, &n_tok);
    cr_expect_eq(end, ZL_GEN_STOP);
    cr_expect_eq(strlen(cut), (size_t)(at - full));
    cr_expect_eq(strncmp(cut, full, strlen(cut)), 0);
    cr_expect(n_tok < 40);
    /* a stop that spans several tokens */
    char span[16];
    snprintf(span, sizeof span, "%.7s", at + 3);
    const char *s2[] = {span};
    char *cut2 = run_text("Once upon a time", 40, s2, 1, &end, NULL);
    cr_expect_eq(end, ZL_GEN_STOP);
    cr_expect_eq(strlen(cut2), (size_t)(at + 3 - full));
    free(full);
    free(cut);
    free(cut2);
}

/* ---- X-Zerolayer-Stream-Buffer: the bound on held-back tokens ----
 * A scheduler in lockstep with the test's poll loop: after each forward
 * (before its token is sampled) the engine waits until the poller has read
 * every token pushed so far, so a poll sees the state after every token
 * however loaded the machine is (bounded at 2 s a step). */
static zl_sched *g_slow;
static pthread_mutex_t g_watch_mu = PTHREAD_MUTEX_INITIALIZER;
static zl_job *g_watch; /* the job polled, under g_watch_mu */
static atomic_int g_seen;

static void lockstep(void *ud, int n_seqs, int n_tokens, double ms) {
    (void)ud, (void)n_seqs, (void)n_tokens, (void)ms;
    pthread_mutex_lock(&g_watch_mu);
    for (int w = 0; g_watch && w < 2000; w++) {
        zl_job_tok t[4];
        zl_finish fin = ZL_FINISH_NONE;
        if (zl_job_read(g_slow, g_watch, atomic_load(&g_seen), t, 4, &fin) == 0) break;
        pthread_mutex_unlock(&g_watch_mu);
        usleep(1000);
        pthread_mutex_lock(&g_watch_mu);
    }
    pthread_mutex_unlock(&g_watch_mu);
}

static void setup_slow(void) {
    setup();
    zl_sched_opts so = {.n_parallel = 2, .max_queue = 8, .n_ctx = 256, .step_tokens = 64, .on_step = lockstep};
    cr_assert_eq(zl_sched_new(&g_slow, g_llm, &so, NULL), 0);
}
static void teardown_slow(void) {
    zl_sched_free(g_slow);
    teardown();
}

typedef struct {
    char *text;     /* final released text */
    int end, n_tokens;
    int max_held;   /* most tokens seen not yet fully released at a poll (with off[]) */
    size_t max_len; /* most released bytes seen at a poll */
    int32_t ids[64];
    int n_ids;
} sb_run;

/* Greedy "Once upon a time" for 40 tokens with the given stops and bound;
 * off (if given): byte offset in the unstopped text after each token count. */
static void sb_generate(const char **stops, int n_stops, int bound, const size_t *off, sb_run *r) {
    const char *prompt = "Once upon a time";
    int32_t *ids = NULL;
    size_t n = 0;
    cr_assert_eq(zl_llm_tokenize(g_llm, prompt, strlen(prompt), 1, 0, &ids, &n, NULL), 0);
    zl_gen_params p = {.sampling = {.temp = 0, .top_p = 1, .repeat_penalty = 1}, .max_tokens = 40, .n_logprobs = -1,
                       .stops = stops, .n_stops = n_stops, .stream_buffer = bound};
    int busy, ni = (int)n;
    atomic_store(&g_seen, 0);
    zl_gen *g = zl_gen_start(g_slow, &ids, &ni, 1, &p, zl_now_ms(), &busy);
    cr_assert_not_null(g);
    pthread_mutex_lock(&g_watch_mu);
    g_watch = g->ch[0].job;
    pthread_mutex_unlock(&g_watch_mu);
    memset(r, 0, sizeof *r);
    for (int done = 0; !done;) {
        done = zl_gen_poll(g, 100);
        zl_gen_choice *c = &g->ch[0];
        if (c->text.n > r->max_len) r->max_len = c->text.n;
        if (off && !done) {
            int released = 0; /* tokens whose text is entirely released */
            while (released < c->n_read && off[released + 1] <= c->text.n) released++;
            if (c->n_read - released > r->max_held) r->max_held = c->n_read - released;
        }
        atomic_store(&g_seen, c->n_read);
    }
    pthread_mutex_lock(&g_watch_mu);
    g_watch = NULL;
    pthread_mutex_unlock(&g_watch_mu);
    zl_gen_choice *c = &g->ch[0];
    /* the polls above sample what is held only between steps; the gen's own
     * peak sees every token, however late the polls come on a loaded machine */
    if (off && c->held_peak > r->max_held) r->max_held = c->held_peak;
    r->text = strndup(c->text.p ? c->text.p : "", c->text.n);
    r->end = c->end;
    r->n_tokens = c->n_tokens;
    r->n_ids = c->n_toks < 64 ? c->n_toks : 64;
    for (int i = 0; i < r->n_ids; i++) r->ids[i] = c->toks[i].id;
    zl_gen_free(g);
    free(ids);
}

Test(gen, stream_buffer_bounds_held_tokens_and_never_sends_a_stop, .init = setup_slow, .fini = teardown_slow,
     .timeout = 120) {
    sb_run full;
    sb_generate(NULL, 0, 0, NULL, &full);
    cr_assert_eq(full.end, ZL_GEN_LENGTH);
    cr_assert_eq(full.n_ids, 40);
    /* off[i]: bytes of the text after i tokens */
    size_t off[41] = {0};
    zl_stream *st;
    cr_assert_eq(zl_stream_new(&st, g_llm, 0, NULL), 0);
    for (int i = 0; i < 40; i++) {
        size_t len;
        zl_stream_feed(st, full.ids[i], &len);
        off[i + 1] = off[i] + len;
    }
    zl_stream_free(st);
    cr_assert_eq(off[40], strlen(full.text));
    /* a 3-token span whose text first occurs where those tokens are */
    int a = -1;
    char stop[128];
    for (int k = 10; k + 3 <= 36 && a < 0; k++) {
        size_t l = off[k + 3] - off[k];
        if (off[k + 1] == off[k] || off[k + 2] == off[k + 1] || off[k + 3] == off[k + 2] || l >= sizeof stop) continue;
        memcpy(stop, full.text + off[k], l);
        stop[l] = 0;
        if (strstr(full.text, stop) == full.text + off[k]) a = k;
    }
    cr_assert_geq(a, 0, "no usable 3-token span in: %s", full.text);

    /* 1. a stop that never completes (the span + a byte the model never
     * emits) holds the span back; unbounded, more than 2 tokens are held at
     * some point, with a bound of 2 never more than 2, and all text arrives */
    char never[136];
    snprintf(never, sizeof never, "%s\x01", stop);
    const char *s_never[] = {never};
    sb_run unb, b2;
    sb_generate(s_never, 1, 0, off, &unb);
    cr_expect_eq(unb.end, ZL_GEN_LENGTH);
    cr_expect_str_eq(unb.text, full.text);
    cr_expect_gt(unb.max_held, 2, "the stop prefix should hold > 2 tokens without a bound (held %d)", unb.max_held);
    sb_generate(s_never, 1, 2, off, &b2);
    cr_expect_eq(b2.end, ZL_GEN_LENGTH);
    cr_expect_str_eq(b2.text, full.text);
    cr_expect_leq(b2.max_held, 2, "stream_buffer 2 held %d tokens", b2.max_held);

    /* 2. the stop itself, within the bound: no byte of it is ever released */
    const char *s_stop[] = {stop};
    for (int bound = 0; bound <= 3; bound += 3) {
        sb_run m;
        sb_generate(s_stop, 1, bound, off, &m);
        cr_expect_eq(m.end, ZL_GEN_STOP, "bound %d", bound);
        cr_expect_eq(strlen(m.text), off[a], "bound %d: %s", bound, m.text);
        cr_expect_eq(strncmp(m.text, full.text, off[a]), 0);
        cr_expect_leq(m.max_len, off[a], "bound %d: part of the stop was released", bound);
        cr_expect_leq(m.max_held, bound ? bound : 40);
        free(m.text);
    }

    /* 3. a bound smaller than the stop: part of it is released (the bound
     * wins), but the stop still ends the generation and never appears whole */
    sb_run m1;
    sb_generate(s_stop, 1, 1, off, &m1);
    cr_expect_eq(m1.end, ZL_GEN_STOP);
    cr_expect_null(strstr(m1.text, stop), "the whole stop was sent: %s", m1.text);
    cr_expect_lt(strlen(m1.text), off[a + 3]);
    cr_expect_eq(strncmp(m1.text, full.text, strlen(m1.text)), 0);
    cr_expect_leq(m1.n_tokens, a + 3);
    cr_expect_leq(m1.max_held, 1);
    free(m1.text);
    free(unb.text);
    free(b2.text);
    free(full.text);
}

Test(sched, sixteen_concurrent_greedy_equal_alone, .init = setup, .fini = teardown) {
    const char *prompts[16] = {"Once upon a time", "The little dog", "Lily wanted", "One day, Tom", "The sun was",
                               "A big red ball", "Mom said", "The bird flew", "Sam and Sue", "In the park",
                               "The cat was sad", "Ben had a toy", "It was a cold day", "The fish", "Anna liked to",
                               "The tree"};
    int32_t alone[16][40], together[16][40];
    zl_sampling greedy = {.temp = 0, .top_p = 1, .repeat_penalty = 1};
    zl_job *jobs[16];
    int32_t *ids[16];
    int n[16];
    for (int i = 0; i < 16; i++) {
        size_t nn;
        cr_assert_eq(zl_llm_tokenize(g_llm, prompts[i], strlen(prompts[i]), 1, 0, &ids[i], &nn, NULL), 0);
        n[i] = (int)nn;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 16; i++) {
            jobs[i] = zl_job_new(ids[i], n[i], &greedy, 40, -1);
            cr_assert_eq(zl_sched_submit(g_sched, jobs[i]), 0);
            if (pass == 0) { /* alone: wait for each before the next */
                zl_finish f = ZL_FINISH_NONE;
                zl_job_tok t[40];
                int got = 0;
                while (!f) {
                    got += zl_job_read(g_sched, jobs[i], got, t + got, 40 - got, &f);
                    if (!f) zl_sched_wait(g_sched, 20);
                }
                cr_assert_eq(got, 40);
                for (int k = 0; k < 40; k++) alone[i][k] = t[k].id;
                zl_job_release(jobs[i]);
            }
        }
        if (pass == 1) {
            for (int i = 0; i < 16; i++) {
                zl_finish f = ZL_FINISH_NONE;
                zl_job_tok t[40];
                int got = 0;
                while (!f) {
                    got += zl_job_read(g_sched, jobs[i], got, t + got, 40 - got, &f);
                    if (!f) zl_sched_wait(g_sched, 20);
                }
                cr_assert_eq(got, 40);
                for (int k = 0; k < 40; k++) together[i][k] = t[k].id;
                zl_job_release(jobs[i]);
            }
        }
    }
    for (int i = 0; i < 16; i++) {
        cr_expect_arr_eq(alone[i], together[i], sizeof alone[i], "prompt %d differs when batched", i);
        free(ids[i]);
    }
}

Test(sched, queue_bound_and_cancel, .init = setup, .fini = teardown) {
    zl_sampling greedy = {.temp = 0, .top_p = 1, .repeat_penalty = 1};
    int32_t p[] = {1, 2, 3};
    zl_job *j = zl_job_new(p, 3, &greedy, 0, -1);
    cr_assert_eq(zl_sched_submit(g_sched, j), 0);
    zl_job_cancel(j);
    zl_finish f = ZL_FINISH_NONE;
    zl_job_tok t[256];
    int got = 0;
    for (int i = 0; i < 500 && !f; i++) {
        got += zl_job_read(g_sched, j, got, t, 256, &f);
        if (!f) zl_sched_wait(g_sched, 20);
        got = 0;
    }
    cr_expect_eq(f, ZL_FINISH_CANCEL);
    zl_job_release(j);
    zl_sched_stats st;
    for (int i = 0; i < 100; i++) {
        zl_sched_get_stats(g_sched, &st);
        if (!st.running && !st.kv_used) break; /* kv_used is refreshed at the end of the engine's next step */
        zl_sched_wait(g_sched, 10);
    }
    cr_expect_eq(st.running, 0);
    cr_expect_eq(st.kv_used, 0);
}

Test(metrics, exposition_format) {
    zl_metrics_request("/v1/messages", 200, 0.3);
    zl_metrics_ttft(0.01);
    zl_metrics_batch(3);
    zl_buf b = {0};
    zl_metrics_render(&b, NULL);
    cr_assert_not_null(b.p);
    cr_expect(strstr(b.p, "# TYPE zerolayer_requests_total counter\n"));
    cr_expect(strstr(b.p, "zerolayer_requests_total{route=\"/v1/messages\",status=\"200\"} 1\n"));
    cr_expect(strstr(b.p, "zerolayer_request_duration_seconds_bucket{le=\"0.5\"} 1\n"));
    cr_expect(strstr(b.p, "zerolayer_request_duration_seconds_bucket{le=\"+Inf\"} 1\n"));
    cr_expect(strstr(b.p, "zerolayer_batch_size_bucket{le=\"4\"} 1\n"));
    cr_expect(strstr(b.p, "# TYPE zerolayer_kv_usage_ratio gauge\n"));
    /* every line is a comment or "name[{labels}] value" */
    for (char *line = strtok(b.p, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *sp = strrchr(line, ' ');
        cr_assert_not_null(sp, "%s", line);
        char *end;
        strtod(sp + 1, &end);
        cr_expect(*end == 0 || !strcmp(sp + 1, "+Inf"), "%s", line);
    }
    zl_buf_free(&b);
}

/* ---- sampler filters = the fully sorted reference ---- */
typedef struct { int id; float l; } ref_cand;
static int ref_cmp(const void *a, const void *b) {
    const ref_cand *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? 1 : -1;
    return x->id - y->id;
}

/* top-k -> top-p -> min-p -> temperature over the vocabulary sorted by
 * (logit desc, id asc), in double */
static void ref_probs(const float *l, int n, const zl_sampler_params *p, double *out) {
    ref_cand *c = malloc((size_t)n * sizeof *c);
    for (int i = 0; i < n; i++) c[i] = (ref_cand){i, l[i]};
    qsort(c, (size_t)n, sizeof *c, ref_cmp);
    int m = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    double mx = c[0].l, z = 0;
    for (int i = 0; i < m; i++) z += exp(c[i].l - mx);
    if (p->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < m; i++) {
            cum += exp(c[i].l - mx) / z;
            if (cum >= p->top_p) { m = i + 1; break; }
        }
    }
    if (p->min_p > 0) {
        int k = 1;
        while (k < m && exp(c[k].l - mx) >= p->min_p) k++;
        m = k;
    }
    double zt = 0;
    for (int i = 0; i < m; i++) zt += exp((c[i].l - mx) / p->temp);
    for (int i = 0; i < n; i++) out[i] = 0;
    for (int i = 0; i < m; i++) out[c[i].id] = exp((c[i].l - mx) / p->temp) / zt;
    free(c);
}

Test(sampler_filters, equal_the_sorted_reference) {
    enum { N = 3000 };
    static float base[N], l[N], pr[N];
    static double want[N];
    uint64_t x = 7;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        base[i] = (float)((x >> 40) % 4000) / 500.0f; /* coarse: many exact ties */
    }
    const int ks[] = {0, 1, 40, 2999};
    const float ps[] = {1.0f, 0.95f, 0.5f, 0.01f}, mps[] = {0.0f, 0.05f, 0.5f};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 3; c++) {
                zl_sampler_params p = {0.7f, ks[a], ps[b], mps[c], 1.0f, 64, 0.0f, 0.0f, 1, NULL, 0};
                zl_sampler *s = zl_sampler_new(&p, N);
                memcpy(l, base, sizeof l);
                zl_sampler_probs(s, l, pr);
                ref_probs(base, N, &p, want);
                int kept = 0, want_kept = 0;
                for (int i = 0; i < N; i++) {
                    kept += pr[i] > 0;
                    want_kept += want[i] > 0;
                    cr_assert_float_eq(pr[i], want[i], 1e-6, "top_k %d top_p %.2f min_p %.2f: token %d %g vs %g",
                                       p.top_k, p.top_p, p.min_p, i, pr[i], want[i]);
                }
                cr_assert_eq(kept, want_kept, "top_k %d top_p %.2f min_p %.2f", p.top_k, p.top_p, p.min_p);
                /* draws come from the kept set */
                for (int d = 0; d < 50; d++) {
                    memcpy(l, base, sizeof l);
                    int t = zl_sampler_sample(s, l);
                    cr_assert(want[t] > 0, "drew filtered token %d", t);
                }
                zl_sampler_free(s);
            }
}
