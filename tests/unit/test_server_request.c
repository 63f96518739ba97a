/* test_server_request.c — the generation pipeline without a socket: both
 * adapters' bodies into a zl_request (errors name the field, #21's content
 * rules), and zl_pipeline_prepare on stories260K (template, tokens against
 * an independent zl_llm_tokenize of the rendered text, the one prompt-limit
 * check, vocabulary checks, stops, the max_tokens cap, the choice bound). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "server/anthropic.h"
#include "server/openai.h"

#define MODEL ZL_ROOT "/models/stories260K.gguf"

static zl_srv g_srv;

static void setup(void) {
    memset(&g_srv, 0, sizeof g_srv);
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&g_srv.llm, MODEL, &lo, NULL), 0);
    zl_sched_opts so = {.n_parallel = 1, .max_queue = 1, .n_ctx = 256, .step_tokens = 64};
    cr_assert_eq(zl_sched_new(&g_srv.sched, g_srv.llm, &so, NULL), 0);
    cr_assert_eq(zl_chat_fmt_setup(&g_srv.tpl, g_srv.llm, NULL, NULL, NULL), 0);
}

static void teardown(void) {
    zl_chat_fmt_free(&g_srv.tpl);
    zl_sched_free(g_srv.sched);
    zl_llm_close(g_srv.llm);
}

/* Parse body with an adapter (kind CHAT / COMPLETION: OpenAI; MESSAGES: Anthropic). */
static int parse(zl_req_kind kind, const char *body, zl_request *q, zl_verr *e, json_t **bj) {
    *bj = json_loads(body, 0, NULL);
    cr_assert_not_null(*bj, "bad test body %s", body);
    memset(e, 0, sizeof *e);
    return kind == ZL_REQ_MESSAGES ? zl_ant_parse(*bj, 0, q, e) : zl_oai_parse(*bj, kind, q, e);
}

static void parsed(zl_req_kind kind, const char *body, zl_request *q, json_t **b) {
    zl_verr e;
    cr_assert_eq(parse(kind, body, q, &e, b), 0, "%s: %s", body, e.msg);
}

static void release(zl_request *q, json_t *b) {
    zl_request_free(q);
    json_decref(b);
}

static void expect_error(zl_req_kind kind, const char *body, const char *param, const char *in_msg) {
    zl_request q;
    zl_verr e;
    json_t *b;
    cr_expect_eq(parse(kind, body, &q, &e, &b), -1, "accepted: %s", body);
    cr_expect_str_eq(e.param, param, "%s: %s", body, e.msg);
    if (in_msg) cr_expect_not_null(strstr(e.msg, in_msg), "%s: '%s' not in '%s'", body, in_msg, e.msg);
    release(&q, b);
}

/* The one context rule: generations need one position after the prompt,
 * embeddings none. */
Test(pipeline, one_context_rule) {
    cr_expect(zl_prompt_fits(256, 255, 1));
    cr_expect(!zl_prompt_fits(256, 256, 1));
    cr_expect(zl_prompt_fits(256, 256, 0));
    cr_expect(!zl_prompt_fits(256, 257, 0));
}

Test(adapters, content_rules_of_both_apis) {
    /* chat: null content only for an assistant turn; Anthropic: [] only as the final assistant turn */
    expect_error(ZL_REQ_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "messages[0].content",
                 "must not be null for role 'user'");
    expect_error(ZL_REQ_CHAT, "{\"messages\":[{\"role\":\"system\"}]}", "messages[0].content", "field required");
    expect_error(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":[]}]}",
                 "messages[0].content", "must not be empty");
    expect_error(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":null}]}",
                 "messages[0].content", "field required");
    expect_error(ZL_REQ_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
                 "messages[0].content[0]", "only \"text\"");
    expect_error(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}",
                 "messages[0]", "messages[0].role: 'robot'");
    expect_error(ZL_REQ_CHAT, "{\"messages\":[]}", "messages", "non-empty");
    expect_error(ZL_REQ_MESSAGES, "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "model", NULL);
    expect_error(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "max_tokens",
                 NULL);
    /* accepted: an assistant turn without content, a final empty assistant turn */
    zl_request q;
    json_t *b;
    parsed(ZL_REQ_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
                                     "\"content\":null},{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":"
                                     "\"x\"},{\"type\":\"text\",\"text\":\"y\"}]}]}", &q, &b);
    cr_assert_eq(q.n_msgs, 3);
    cr_expect_str_eq(q.msgs[1].text.p, "");
    cr_expect_str_eq(q.msgs[2].role, "system");
    cr_expect_str_eq(q.msgs[2].text.p, "xy");
    release(&q, b);
    parsed(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"max_tokens\":2,\"system\":\"S\",\"messages\":[{\"role\":"
                                         "\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":[]}]}", &q, &b);
    cr_assert_eq(q.n_msgs, 3);
    cr_expect_str_eq(q.msgs[0].role, "system");
    cr_expect_str_eq(q.msgs[0].text.p, "S");
    cr_expect_str_eq(q.msgs[2].role, "assistant");
    release(&q, b);
}

Test(adapters, fields_into_one_request) {
    zl_request q;
    json_t *b;
    parsed(ZL_REQ_COMPLETION, "{\"prompt\":[\"a\",[1,2]],\"stop\":[\"\",\"x\"],\"n\":2,\"seed\":7,"
                                          "\"logprobs\":3,\"user\":\"u\",\"stream\":true,\"timings_per_token\":true}", &q, &b);
    cr_expect_eq(q.n_prompts, 2);
    cr_expect_str_eq(q.prompts[0].text, "a");
    cr_expect_str_eq(q.prompts[0].param, "prompt[0]");
    cr_expect_not_null(q.prompts[1].ids);
    cr_expect_eq(q.n_stops, 1); /* an empty OpenAI stop is no stop */
    cr_expect_str_eq(q.stops[0], "x");
    cr_expect_eq(q.n, 2);
    cr_expect_eq(q.sampling.seed, 7);
    cr_expect_eq(q.n_logprobs, 3);
    cr_expect_eq(q.max_tokens, 16); /* OpenAI's completions default */
    cr_expect_str_eq(q.user, "u");
    cr_expect_eq(q.stream, 1);
    cr_expect_eq(q.timings_per_token, 1);
    release(&q, b);
    parsed(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"max_tokens\":9,\"stop_sequences\":[\"END\"],"
                                        "\"metadata\":{\"user_id\":\"v\"},\"temperature\":0.5,\"messages\":[{\"role\":"
                                        "\"user\",\"content\":\"a\"}]}", &q, &b);
    cr_expect_eq(q.max_tokens, 9);
    cr_expect_str_eq(q.stops[0], "END");
    cr_expect_str_eq(q.user, "v");
    cr_expect_float_eq(q.sampling.temp, 0.5f, 1e-6);
    cr_expect_str_eq(q.model, "m");
    release(&q, b);
    expect_error(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"max_tokens\":2,\"stop_sequences\":[\"\"],\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"x\"}]}", "stop_sequences[0]", "must not be empty");
    expect_error(ZL_REQ_CHAT, "{\"stop\":[1],\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "stop[0]", NULL);
    expect_error(ZL_REQ_CHAT, "{\"logit_bias\":{\"abc\":1},\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 "logit_bias", "not a token id");
    expect_error(ZL_REQ_CHAT, "{\"timings_per_token\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 "timings_per_token", "expected a boolean");
    expect_error(ZL_REQ_CHAT, "{\"user\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "user", NULL);
    expect_error(ZL_REQ_COMPLETION, "{\"prompt\":[]}", "prompt", NULL);
    expect_error(ZL_REQ_COMPLETION, "{\"prompt\":[1.5]}", "prompt", "prompt[0]");
    expect_error(ZL_REQ_CHAT, "{\"top_logprobs\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 "top_logprobs", NULL);
}

/* ---------------- the pipeline's preparation ---------------- */

/* The prepared request borrows the caller's stop strings from the body:
 * it lives until done(). */
static json_t *g_body;

static int prep(zl_req_kind kind, const char *body, const zl_req_ctl *ctl, zl_prepared *p, zl_verr *e) {
    zl_request q;
    int rc = parse(kind, body, &q, e, &g_body);
    cr_assert_eq(rc, 0, "%s: %s", body, e->msg);
    rc = zl_pipeline_prepare(&g_srv, ctl, &q, NULL, 0, p, e);
    zl_request_free(&q);
    return rc;
}

static void done(zl_prepared *p) {
    zl_prepared_free(p);
    json_decref(g_body);
    g_body = NULL;
}

Test(pipeline, chat_tokens_are_the_rendered_template_tokenized, .init = setup, .fini = teardown) {
    zl_prepared p;
    zl_verr e;
    cr_assert_eq(prep(ZL_REQ_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"system\":\"Be brief.\",\"stop_sequences\":"
                                       "[\"The end\"],\"messages\":[{\"role\":\"user\",\"content\":\"Once upon\"}]}",
                      NULL, &p, &e),
                 0, "%s", e.msg);
    zl_chat_msg m[] = {{"system", "Be brief."}, {"user", "Once upon"}};
    zl_err err = {0};
    char *text = zl_chat_fmt_render(&g_srv.tpl, m, 2, &err);
    cr_assert_not_null(text, "%s", err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    cr_assert_eq(zl_llm_tokenize(g_srv.llm, text, strlen(text), 1, zl_chat_fmt_parse_special(&g_srv.tpl), &ids, &n,
                                 NULL),
                 0);
    cr_assert_eq(p.n_sets, 1);
    cr_assert_eq(p.n, 1);
    cr_assert_eq(p.n_ids[0], (int)n);
    cr_expect_eq(memcmp(p.ids[0], ids, n * sizeof *ids), 0);
    /* the caller's stops, then the template's */
    cr_expect_eq(p.n_user_stops, 1);
    cr_expect_str_eq(p.stops[0], "The end");
    const char *extra = zl_chat_fmt_extra_stop(&g_srv.tpl);
    cr_expect_eq(p.gp.n_stops, extra ? 2 : 1);
    if (extra) cr_expect_str_eq(p.stops[1], extra);
    cr_expect_eq(p.gp.max_tokens, 5);
    cr_expect_eq(p.gp.has_ctl, 0); /* no controls: the scheduler's defaults */
    cr_expect_eq(p.gp.strip_leading_space, 1);
    free(ids);
    free(text);
    done(&p);
}

Test(pipeline, limits_and_vocabulary, .init = setup, .fini = teardown) {
    zl_prepared p;
    zl_verr e;
    int nv = zl_llm_n_vocab(g_srv.llm);
    /* one prompt-limit check, the same message for both APIs */
    char *body = malloc(20000), *long_text = malloc(8000);
    long_text[0] = 0;
    for (int i = 0; i < 200; i++) strcat(long_text, "Once upon a time ");
    snprintf(body, 20000, "{\"model\":\"m\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
             long_text);
    cr_expect_eq(prep(ZL_REQ_MESSAGES, body, NULL, &p, &e), -1);
    cr_expect_str_eq(e.param, "messages");
    cr_expect_not_null(strstr(e.msg, "prompt is too long: "), "%s", e.msg);
    cr_expect_not_null(strstr(e.msg, "the context holds 256"), "%s", e.msg);
    done(&p);
    snprintf(body, 20000, "{\"prompt\":\"%s\",\"max_tokens\":4}", long_text);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, body, NULL, &p, &e), -1);
    cr_expect_str_eq(e.param, "prompt");
    cr_expect_not_null(strstr(e.msg, "prompt is too long: "), "%s", e.msg);
    done(&p);
    /* ... unless a bounded KV policy lets the prompt exceed the context */
    zl_req_ctl bounded = {.bounded = 1};
    bounded.ctl.kv_policy = ZL_KV_POLICY_WINDOW;
    bounded.ctl.kv_budget = 128;
    cr_expect_eq(prep(ZL_REQ_COMPLETION, body, &bounded, &p, &e), 0, "%s", e.msg);
    cr_expect_gt(p.n_ids[0], 256);
    cr_expect_eq(p.gp.has_ctl, 1);
    done(&p);
    free(body);
    free(long_text);
    /* token ids and logit_bias ids against the vocabulary */
    char b2[256];
    snprintf(b2, sizeof b2, "{\"prompt\":[1,2,%d]}", nv);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, b2, NULL, &p, &e), -1);
    cr_expect_str_eq(e.param, "prompt");
    cr_expect_not_null(strstr(e.msg, "prompt[2]: expected a token id in [0, "), "%s", e.msg);
    done(&p);
    snprintf(b2, sizeof b2, "{\"prompt\":[[1],[2,%d]]}", nv);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, b2, NULL, &p, &e), -1);
    cr_expect_str_eq(e.param, "prompt[1]");
    done(&p);
    snprintf(b2, sizeof b2, "{\"prompt\":\"x\",\"logit_bias\":{\"%d\":1}}", nv);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, b2, NULL, &p, &e), -1);
    cr_expect_str_eq(e.param, "logit_bias");
    done(&p);
    snprintf(b2, sizeof b2, "{\"prompt\":[1,2],\"logit_bias\":{\"%d\":-100}}", nv - 1);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, b2, NULL, &p, &e), 0, "%s", e.msg);
    cr_expect_eq(p.gp.sampling.n_logit_bias, 1);
    cr_expect_eq(p.gp.n_stops, 0); /* completions: no template stop */
    cr_expect_eq(p.gp.strip_leading_space, 0);
    done(&p);
    /* max_tokens capped at the context, at most 64 choices */
    cr_expect_eq(prep(ZL_REQ_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":100000}", NULL, &p, &e), 0, "%s", e.msg);
    cr_expect_eq(p.gp.max_tokens, 256);
    done(&p);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":100000}", &bounded, &p, &e), 0, "%s", e.msg);
    cr_expect_eq(p.gp.max_tokens, 100000);
    done(&p);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"n\":16}", NULL, &p, &e), -1);
    cr_expect_str_eq(e.param, "n");
    done(&p);
    cr_expect_eq(prep(ZL_REQ_COMPLETION, "{\"prompt\":[\"a\",\"b\"],\"n\":3}", NULL, &p, &e), 0, "%s", e.msg);
    cr_expect_eq(p.n, 6);
    cr_expect_eq(p.n_sets, 2);
    done(&p);
}
