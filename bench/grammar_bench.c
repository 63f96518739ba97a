/* grammar_bench.c — the cost of the grammar constraint on a real vocabulary.
 *
 * Loads a GGUF file's vocabulary (no weights), builds the grammar
 * vocabulary trie, compiles a JSON Schema, then runs random walks: at each
 * step the allowed-token mask is computed (or served from the cache), a token
 * is drawn from it (a closing or structural token is preferred with
 * probability 1/2 so documents finish) and accepted.  Reports the trie build
 * time, the cost per token (mean mask + accept), the walks/hits split and
 * the mean cost of a mask computed by a trie walk; every finished document
 * is printed on stdout when --print is given (one per line).
 *
 *   build/bin/grammar_bench MODEL.gguf [SCHEMA.json] [--docs N] [--print]
 *
 * Timing is wall clock on the calling thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "tokenizer/vocab.h"

static const char *piece(void *ud, int32_t id, size_t *len) {
    const char *s = zl_token_piece(ud, id, 0, len);
    if (!s) *len = 0;
    return s ? s : "";
}

static const char DEFAULT_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
    "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":12},"
    "\"maxItems\":4},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\",\"tags\",\"ok\"]}";

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: grammar_bench MODEL.gguf [SCHEMA.json] [--docs N] [--print]\n");
        return 2;
    }
    const char *schema_path = NULL;
    int docs = 20, print = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--docs") && i + 1 < argc) docs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--print")) print = 1;
        else schema_path = argv[i];
    }
    zl_err err = {0};
    zl_gguf *gf = NULL;
    zl_vocab *v = NULL;
    if (zl_gguf_open(&gf, argv[1], NULL, &err) || zl_vocab_load(&v, gf, &err)) {
        fprintf(stderr, "zerolayer: %s\n", err.msg);
        return 1;
    }
    zl_gguf_close(gf);
    char *schema = NULL;
    size_t slen = 0;
    if (schema_path) {
        FILE *f = fopen(schema_path, "rb");
        if (!f) {
            fprintf(stderr, "zerolayer: cannot open %s\n", schema_path);
            return 1;
        }
        schema = malloc(1 << 20);
        slen = fread(schema, 1, (1 << 20) - 1, f);
        fclose(f);
    } else {
        schema = strdup(DEFAULT_SCHEMA);
        slen = strlen(schema);
    }
    char *gtext = NULL;
    zl_grammar *g = NULL;
    if (zl_json_schema_to_grammar(schema, slen, &gtext, &err) || zl_grammar_parse(&g, gtext, strlen(gtext), NULL, &err)) {
        fprintf(stderr, "zerolayer: %s\n", err.msg);
        return 1;
    }
    int32_t nt = zl_vocab_n_tokens(v);
    int32_t *eog = malloc((size_t)nt * sizeof *eog);
    int n_eog = 0;
    for (int32_t id = 0; id < nt; id++)
        if (zl_token_is_eog(v, id)) eog[n_eog++] = id;
    double t0 = zl_now_ms();
    zl_gvocab *gv = NULL;
    if (zl_gvocab_new(&gv, nt, piece, v, eog, n_eog, &err)) {
        fprintf(stderr, "zerolayer: %s\n", err.msg);
        return 1;
    }
    double t_build = zl_now_ms() - t0;
    long steps = 0, walks = 0, hits = 0, finished = 0;
    double t_all = 0, t_walk = 0;
    int32_t *allowed = malloc((size_t)nt * sizeof *allowed);
    char *doc = malloc(1 << 16);
    for (int d = 0; d < docs; d++) {
        zl_gconstraint *c = NULL;
        if (zl_gconstraint_new(&c, g, gv, NULL, &err)) return 1;
        size_t dl = 0;
        for (int s = 0; s < 400; s++) {
            long w0 = 0, w1 = 0;
            zl_gconstraint_stats(c, &w0, NULL);
            double a = zl_now_ms();
            int32_t na = 0;
            const uint64_t *m = zl_gconstraint_mask(c, &na);
            double b = zl_now_ms();
            zl_gconstraint_stats(c, &w1, NULL);
            if (!m || !na) break;
            int k = 0, kend = 0;
            for (int32_t id = 0; id < nt; id++)
                if ((m[id >> 6] >> (id & 63)) & 1) allowed[k++] = id;
            /* prefer tokens that end something, so documents finish */
            int32_t pick = allowed[next() % (uint64_t)k];
            if (next() & 1) {
                for (int i = 0; i < k; i++) {
                    size_t len;
                    const char *p = zl_token_piece(v, allowed[i], 0, &len);
                    if (zl_token_is_eog(v, allowed[i]) || (p && len == 1 && strchr("\"]},", p[0]))) allowed[kend++] = allowed[i];
                }
                if (kend) pick = allowed[next() % (uint64_t)kend];
            }
            double e0 = zl_now_ms();
            int rc = zl_gconstraint_accept(c, pick);
            double e1 = zl_now_ms();
            if (rc) {
                fprintf(stderr, "zerolayer: an allowed token was rejected\n");
                return 1;
            }
            steps++;
            t_all += (b - a) + (e1 - e0);
            if (w1 > w0) t_walk += b - a;
            if (zl_token_is_eog(v, pick)) {
                finished++;
                if (print) printf("%.*s\n", (int)dl, doc);
                break;
            }
            size_t len;
            const char *p = zl_token_piece(v, pick, 0, &len);
            if (dl + len < (1 << 16)) {
                memcpy(doc + dl, p, len);
                dl += len;
            }
        }
        long wk, ht;
        zl_gconstraint_stats(c, &wk, &ht);
        walks += wk;
        hits += ht;
        zl_gconstraint_free(c);
    }
    fprintf(stderr,
            "grammar_bench: vocab %d tokens, trie built in %.1f ms; %d docs (%ld finished), %ld tokens: %.3f ms/token "
            "(mask + accept); %ld masks by trie walk (%.2f ms each), %ld from the cache\n",
            nt, t_build, docs, finished, steps, steps ? t_all / steps : 0, walks, walks ? t_walk / walks : 0, hits);
    free(doc);
    free(allowed);
    free(eog);
    zl_gconstraint_free(NULL);
    zl_gvocab_free(gv);
    zl_grammar_free(g);
    free(gtext);
    free(schema);
    zl_vocab_free(v);
    return 0;
}
