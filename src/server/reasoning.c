/* reasoning.c — the streaming <think> splitter and the reasoning budgets
 * (reasoning.h).  Owns tag recognition only. */
#include "reasoning.h"

#include <stdlib.h>
#include <string.h>

#define TH_OPEN "<think>"
#define TH_CLOSE "</think>"

struct zl_think {
    int inside, seen_answer;
    int strip_nl; /* drop the newlines right after </think> */
    char *pend;
    size_t n;
};

zl_think *zl_think_new(int starts_inside) {
    zl_think *t = calloc(1, sizeof *t);
    if (t) t->inside = starts_inside != 0;
    return t;
}

void zl_think_free(zl_think *t) {
    if (!t) return;
    free(t->pend);
    free(t);
}

int zl_think_inside(const zl_think *t) { return t->inside; }

static int put(char **o, size_t *len, const char *s, size_t n) {
    if (!n) return 0;
    char *x = realloc(*o, *len + n + 1);
    if (!x) return -1;
    memcpy(x + *len, s, n);
    *len += n;
    x[*len] = 0;
    *o = x;
    return 0;
}

static size_t partial_suffix(const char *s, size_t n, const char *w) {
    size_t wl = strlen(w);
    for (size_t k = wl - 1 < n ? wl - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, w, k)) return k;
    return 0;
}

static int run(zl_think *t, char **reason, size_t *rlen, char **content, size_t *clen, int final) {
    while (t->n) {
        if (t->strip_nl) { /* the answer after the block: drop the blank lines between */
            size_t k = 0;
            while (k < t->n && t->pend[k] == '\n') k++;
            memmove(t->pend, t->pend + k, t->n - k);
            t->n -= k;
            if (!t->n) return 0;
            t->strip_nl = 0;
        }
        /* an opening tag counts only before the answer starts */
        const char *tag = t->inside ? TH_CLOSE : TH_OPEN;
        int can_open = !t->inside && !t->seen_answer;
        char *hit = t->inside || can_open ? memmem(t->pend, t->n, tag, strlen(tag)) : NULL;
        if (can_open && hit) { /* only spaces may precede the opening tag */
            for (char *c = t->pend; c < hit; c++)
                if (*c != ' ' && *c != '\n') hit = NULL;
        }
        size_t upto = hit ? (size_t)(hit - t->pend) : t->n;
        size_t hold = 0;
        if (!hit && !final && (t->inside || can_open)) hold = partial_suffix(t->pend, t->n, tag);
        if (!hit && can_open && !final) {
            /* before the answer: hold leading spaces and a possible partial tag */
            size_t k = 0;
            while (k < t->n && (t->pend[k] == ' ' || t->pend[k] == '\n')) k++;
            if (k == t->n || (t->n - k < strlen(TH_OPEN) && !memcmp(t->pend + k, TH_OPEN, t->n - k))) return 0;
        }
        size_t emit = upto - (hit ? 0 : hold);
        int rc = t->inside ? put(reason, rlen, t->pend, emit) : put(content, clen, t->pend, emit);
        if (rc) return -1;
        if (!t->inside && emit) {
            for (size_t k = 0; k < emit; k++)
                if (t->pend[k] != ' ' && t->pend[k] != '\n') t->seen_answer = 1;
        }
        size_t drop = emit + (hit ? strlen(tag) : 0);
        memmove(t->pend, t->pend + drop, t->n - drop);
        t->n -= drop;
        if (!hit) return 0;
        t->inside = !t->inside;
        if (!t->inside) {
            t->strip_nl = 1;
            t->seen_answer = 1;
        }
    }
    return 0;
}

int zl_think_feed(zl_think *t, const char *s, size_t n, char **reason, size_t *rlen, char **content, size_t *clen) {
    char *x = realloc(t->pend, t->n + n + 1);
    if (!x) return -1;
    t->pend = x;
    memcpy(t->pend + t->n, s, n);
    t->n += n;
    return run(t, reason, rlen, content, clen, 0);
}

int zl_think_finish(zl_think *t, char **reason, size_t *rlen, char **content, size_t *clen) {
    return run(t, reason, rlen, content, clen, 1);
}

int zl_think_prompt_opens(const char *prompt, size_t n) {
    while (n && (prompt[n - 1] == '\n' || prompt[n - 1] == ' ')) n--;
    size_t ol = strlen(TH_OPEN);
    return n >= ol && !memcmp(prompt + n - ol, TH_OPEN, ol);
}

int zl_think_effort_budget(const char *e) {
    if (!e) return -1;
    if (!strcmp(e, "low")) return 512;
    if (!strcmp(e, "medium")) return 2048;
    if (!strcmp(e, "high")) return 8192;
    return -1;
}

const char *zl_think_close_text(void) { return "\n" TH_CLOSE "\n\n"; }
