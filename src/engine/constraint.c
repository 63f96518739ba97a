/* constraint.c — a model's grammar vocabulary and the sampler hook of a
 * constrained job (constraint.h).  Owns the binding only: masks and states
 * are the grammar layer's, sampling is the sampler's. */
#include "constraint.h"

#include <pthread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "engine_internal.h"

static pthread_mutex_t gvocab_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct piece_ud {
    const zl_vocab *v;
    int32_t n;
} piece_ud;

static const char *piece(void *ud, int32_t id, size_t *len) {
    piece_ud *p = ud;
    *len = 0;
    if (id >= p->n) return "";
    const char *s = zl_token_piece(p->v, id, 0, len);
    return s ? s : "";
}

int zl_llm_gvocab(zl_llm *llm, const zl_gvocab **out, zl_err *err) {
    pthread_mutex_lock(&gvocab_mu);
    int rc = 0;
    if (!llm->gvocab) {
        int32_t nv = llm->model->hp.n_vocab, nt = zl_vocab_n_tokens(llm->vocab);
        int32_t *eog = malloc((size_t)nv * sizeof *eog);
        int n_eog = 0;
        if (!eog) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
        for (int32_t id = 0; !rc && id < nt && id < nv; id++)
            if (zl_token_is_eog(llm->vocab, id)) eog[n_eog++] = id;
        piece_ud ud = {llm->vocab, nt};
        if (!rc) rc = zl_gvocab_new(&llm->gvocab, nv, piece, &ud, eog, n_eog, err);
        free(eog);
    }
    *out = llm->gvocab;
    pthread_mutex_unlock(&gvocab_mu);
    return rc;
}

typedef struct jcon {
    zl_grammar *g;
    zl_gconstraint *c;
    zl_sampler_constraint sc;
    double ms; /* time inside the constraint's callbacks */
} jcon;

static int jcon_mask(void *ud, float *logits) {
    jcon *j = ud;
    double t = zl_now_ms();
    int n = (int)zl_gconstraint_apply(j->c, logits);
    j->ms += zl_now_ms() - t;
    return n;
}

static int jcon_check(void *ud, int token) {
    jcon *j = ud;
    double t = zl_now_ms();
    int ok = zl_gconstraint_check(j->c, token);
    j->ms += zl_now_ms() - t;
    return ok;
}

static int jcon_accept(void *ud, int token) {
    jcon *j = ud;
    double t = zl_now_ms();
    int rc = zl_gconstraint_accept(j->c, token);
    j->ms += zl_now_ms() - t;
    return rc;
}

static int jcon_error(void *ud, const char **msg) {
    jcon *j = ud;
    return zl_gconstraint_error(j->c, msg);
}

static void jcon_free(void *ud) {
    jcon *j = ud;
    if (!j) return;
    zl_gconstraint_free(j->c);
    zl_grammar_free(j->g);
    free(j);
}

static int jcon_make(zl_llm *llm, zl_grammar *g, const char *lazy_trigger, jcon **out, zl_err *err) {
    *out = NULL;
    const zl_gvocab *gv = NULL;
    int rc = zl_llm_gvocab(llm, &gv, err);
    jcon *jc = rc ? NULL : calloc(1, sizeof *jc);
    if (!rc && !jc) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (rc) {
        zl_grammar_free(g);
        return rc;
    }
    jc->g = g;
    if ((rc = zl_gconstraint_new(&jc->c, g, gv, lazy_trigger, err))) {
        jcon_free(jc);
        return rc;
    }
    int32_t eos = zl_vocab_eot(llm->vocab) >= 0 ? zl_vocab_eot(llm->vocab) : zl_vocab_eos(llm->vocab);
    zl_sampler_constraint sc = {jc, jcon_mask, jcon_check, jcon_accept, eos >= 0 ? eos : 0, jcon_error};
    jc->sc = sc;
    *out = jc;
    return 0;
}

int zl_job_constrain(zl_job *j, zl_llm *llm, zl_grammar *g, const char *lazy_trigger, zl_err *err) {
    jcon *jc = NULL;
    int rc = jcon_make(llm, g, lazy_trigger, &jc, err);
    if (rc) return rc;
    zl_job_set_constraint(j, &jc->sc, jcon_free);
    return 0;
}

void zl_seq_grammar_free(zl_seq *s) {
    if (!s->grammar) return;
    zl_sampler_set_constraint(s->sampler, NULL);
    jcon_free(s->grammar);
    s->grammar = NULL;
}

void zl_seq_grammar_rebind(zl_seq *s) {
    if (s->grammar) zl_sampler_set_constraint(s->sampler, &s->grammar->sc);
}

int zl_seq_set_grammar(zl_seq *s, const char *text, zl_err *err) {
    zl_seq_grammar_free(s);
    if (!text) return 0;
    if (s->spec_on) return zl_errf(err, ZL_EINVAL, "a grammar needs the verification ring off");
    zl_grammar *g = NULL;
    int rc = zl_grammar_parse(&g, text, strlen(text), NULL, err);
    if (rc) return rc;
    jcon *jc = NULL;
    if ((rc = jcon_make(s->llm, g, NULL, &jc, err))) return rc;
    s->grammar = jc;
    zl_seq_grammar_rebind(s);
    return 0;
}

int zl_seq_grammar_error(const zl_seq *s, zl_err *err) {
    const char *msg = NULL;
    int code = s->grammar ? zl_gconstraint_error(s->grammar->c, &msg) : 0;
    return code ? zl_errf(err, code, "%s", msg) : 0;
}

void zl_seq_grammar_stats(const zl_seq *s, long *walks, long *hits, double *ms) {
    if (walks) *walks = 0;
    if (hits) *hits = 0;
    if (ms) *ms = s->grammar ? s->grammar->ms : 0;
    if (s->grammar) zl_gconstraint_stats(s->grammar->c, walks, hits);
}

int zl_json_schema_grammar(const char *schema, char **grammar, zl_err *err) {
    return zl_json_schema_to_grammar(schema, strlen(schema), grammar, err);
}

/* ---- thinking budget ---- */

typedef struct tbud {
    const zl_vocab *v;
    int budget, used, inside, closed;
    int32_t *force; /* the closing text's tokens */
    size_t n_force, next;
    char win[16];   /* the last bytes generated, to see </think> written by the model */
    size_t wl;
} tbud;

static int tbud_forcing(const tbud *b) { return b->inside && !b->closed && b->used >= b->budget; }

static int tbud_mask(void *ud, float *logits) {
    tbud *b = ud;
    if (!tbud_forcing(b) || b->next >= b->n_force) return 1 << 30; /* everything allowed */
    int32_t t = b->force[b->next];
    int32_t nv = zl_vocab_n_tokens(b->v);
    for (int32_t id = 0; id < nv; id++)
        if (id != t) logits[id] = -INFINITY;
    return 1;
}

static int tbud_check(void *ud, int token) {
    tbud *b = ud;
    return !tbud_forcing(b) || b->next >= b->n_force || token == b->force[b->next];
}

static int tbud_accept(void *ud, int token) {
    tbud *b = ud;
    if (tbud_forcing(b) && b->next < b->n_force) {
        if (++b->next == b->n_force) b->closed = 1;
        return 0;
    }
    size_t len = 0;
    const char *p = zl_token_piece(b->v, token, 1, &len);
    for (size_t i = 0; p && i < len; i++) {
        if (b->wl == sizeof b->win) {
            memmove(b->win, b->win + 1, sizeof b->win - 1);
            b->wl--;
        }
        b->win[b->wl++] = p[i];
        if (b->wl >= 7 && !memcmp(b->win + b->wl - 7, "<think>", 7) && !b->closed) b->inside = 1;
        if (b->wl >= 8 && !memcmp(b->win + b->wl - 8, "</think>", 8)) b->closed = 1;
    }
    if (b->inside && !b->closed) b->used++;
    return 0;
}

static void tbud_free(void *ud) {
    tbud *b = ud;
    if (!b) return;
    free(b->force);
    free(b);
}

int zl_job_think_budget(zl_job *j, zl_llm *llm, int budget, int inside, zl_err *err) {
    tbud *b = calloc(1, sizeof *b);
    if (!b) return zl_errf(err, ZL_ENOMEM, "out of memory");
    b->v = llm->vocab;
    b->budget = budget;
    b->inside = inside != 0;
    static const char close[] = "\n</think>\n\n";
    int rc = zl_tokenize_ex(llm->vocab, close, strlen(close), 0, 1, 1, &b->force, &b->n_force, err);
    if (rc) {
        tbud_free(b);
        return rc;
    }
    zl_sampler_constraint sc = {b, tbud_mask, tbud_check, tbud_accept, 0, NULL};
    zl_job_set_constraint(j, &sc, tbud_free);
    return 0;
}
