/* cmd_serve.c — `zerolayer serve`: parse flags, load the model, run the
 * HTTP server (src/server) until SIGINT/SIGTERM. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/server.h"
#include "cli.h"
#include "zerolayer.h"
#ifdef ZL_TEST_HOOKS
#include "../engine/sched_test.h"
#endif


static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.gguf files of dir (malloc'd paths, name order) into *out; -1 with a message when dir cannot be read. */
static int models_in_dir(const char *dir, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return cli_fail("--models-dir: cannot read %s", dir);
    char **v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= 5 || strcmp(e->d_name + l - 5, ".gguf") || e->d_name[0] == '.') continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        size_t pl = strlen(dir) + l + 2;
        if (!(v[*n] = malloc(pl))) break;
        snprintf(v[*n], pl, "%s/%s", dir, e->d_name);
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    *out = v;
    return 0;
}

static void serve_usage(FILE *f) {
    fputs("usage: zerolayer serve [-m MODEL] [options]\n"
          "  OpenAI- and Anthropic-compatible HTTP server with continuous batching.\n"
          "  -m, --model PATH        GGUF model (default: the bundled stories260K).  Repeat it to serve several:\n"
          "                          the request's \"model\" picks one by id (the file name without .gguf, or\n"
          "                          the --alias after it); the first is loaded at start, the others on first use\n"
          "  --alias NAME            id of the -m before it (for the first, as --model-id)\n"
          "  --models-dir DIR        serve every *.gguf of DIR too (in name order, after the -m models)\n"
          "  --models-mb N           the loaded models' files total at most N MiB (LRU idle ones unloaded)\n"
          "  --models-idle S         unload a model (not the first) nobody used for S seconds\n"
          "  --models-max N          models loaded at once, counting the first (default: all); the least\n"
          "                          recently used idle one is unloaded to load another\n"
          "  --host ADDR             address to bind (default 127.0.0.1)\n"
          "  --port N                port (default 8080; 0 picks a free one, printed at start)\n"
          "  --parallel N            sequences generated at once (default 8)\n"
          "  --ctx N                 context per sequence (default: the model's, at most 4096)\n"
          "  --queue N               requests that may wait for a slot (default 64; then 429/529)\n"
          "  --step-tokens N         tokens per batched forward: decode + prompt chunks (default 256)\n"
          "  --api-key KEY           require this key (Bearer or x-api-key); repeatable\n"
          "  --cors ORIGIN           let web pages from ORIGIN (or *) call the API: preflights and\n"
          "                          Access-Control-Allow-Origin; repeatable (default: no CORS)\n"
          "  --no-webui              no chat page at / (it answers 404; the API is unchanged)\n"
          "  --max-body BYTES        request body limit (default 8388608; larger -> 413)\n"
          "  --chat-template NAME    chatml|qwen|llama2|llama3|mistral|phi3|gemma|zephyr|plain (instead of the model's)\n"
          "  --chat-template-file F  Jinja chat template to render with (instead of the model's)\n"
          "  --model-id NAME         model name reported by /v1/models (default: file name)\n"
          "  --pooling mean|cls|last /v1/embeddings pooling (default: the model's <arch>.pooling_type, else mean)\n"
          "  -t, --threads N         compute threads (default: all CPUs)\n"
          "  --prefetch-layers N     weight read-ahead depth in layers on a background thread (default 2;\n"
          "                          0 = off, for weights that stay in memory)\n"
          "  --session-ttl S         idle seconds before a session expires (default 120)\n"
          "  --prefill-idle S        typing-ahead input kept this long without a request (default 3)\n"
          "  --sessions-per-tenant N live sessions per tenant; the LRU idle one is evicted beyond (default 16)\n"
          "  --session-kv-mb N       KV memory all idle sessions may hold; LRU eviction beyond (default 1024),\n"
          "                          with --state-dir the LRU ones are spilled there instead\n"
          "  --prefix-cache-mb N     tenant-isolated prefix cache size (default 256; 0 = off)\n"
          "  --session-secret-file F HMAC key for session tokens (default: random per start)\n"
          "  --state-key-file F      seal session snapshots (POST /v1/sessions/{id}/snapshot) with the SHA-256 of F\n"
          "                          (at least 32 random bytes); without it a snapshot needs a passphrase\n"
          "  --codec FILE.zlc        learned state codec for snapshots (zerolayer codec train); repeat it for several\n"
          "                          models: each file goes to the -m whose fingerprint it names (none: an error)\n"
          "  --compress-idle S       with --codec: sessions idle for S seconds (default 30) are held coded, rebuilt\n"
          "                          by their next request; --session-kv-mb counts the code bytes\n"
          "  --state-dir DIR         keep sessions there (sealed with --state-key-file): written when idle and at\n"
          "                          shutdown, the unexpired ones restored at start (same --session-secret-file:\n"
          "                          same tokens); sessions past --session-kv-mb spill to the store (--codec:\n"
          "                          coded) instead of being evicted, back on their next turn\n"
          "  --state-store redis://HOST:PORT[/DB]  keep sessions in Redis instead, shared by replicas with the same\n"
          "                          --state-key-file and --session-secret-file: a replica that gets a request\n"
          "                          for a session it does not hold loads it; Redis down = sessions stay local\n"
          "  --store-idle S          write a changed session to the store once idle S seconds (default 5; 0: only\n"
          "                          at shutdown and by --store-every)\n"
          "  --store-every N         also write a session after every N turns (default 0: off)\n"
          "  --preheat               read the model file into the page cache before listening (readiness)\n"
          "  --batch-retention S     seconds an ended message batch is kept (default 3600)\n"
          "  --batches-per-tenant N  message batches one tenant holds (default 64; 429 when all run)\n"
          "  --max-conns N           connections at once, all clients (default 1024)\n"
          "  --conns-per-ip N        connections at once from one address (default 64)\n"
          "  --idle-timeout S        close a connection that sends nothing for S seconds, e.g. partial\n"
          "                          headers (default 30; requests being answered are never cut)\n"
          "  --drain-timeout S       on SIGTERM/SIGINT, answer new requests 503 and let those being answered\n"
          "                          finish for up to S seconds (default 30; 0: stop at once; a second signal\n"
          "                          stops at once)\n"
          "  --compute PRESET        default controls: exact (full KV, ring off), balanced (full KV + lookup\n"
          "                          ring 5), aggressive (anchor KV at 25% of the context + lookup ring)\n"
          "  --spec lookup|draft|off default verification ring (lossless speculative decoding; default off);\n"
          "                          draft: on, drafted by --draft-model / --draft-layers\n"
          "  --ring N                initial drafted tokens per verify step, 1..16 (default 5; adaptive)\n"
          "  --draft-model FILE      draft model for the ring (its vocabulary must equal the model's); every\n"
          "                          request with the ring on drafts with it instead of n-gram lookup\n"
          "  --draft-layers N        draft with the model's own first N layers (self-speculation)\n"
          "  --ring-cost C1,C2,..|measure  verify-cost curve: time of a forward over 1, 2, .. tokens relative\n"
          "                          to one (C1 = 1); 'measure' times it at start.  Default: each sequence\n"
          "                          fits a straight line to its own step times\n"
          "  --kv-policy P           default KV policy: full (default) | window | anchor\n"
          "  --kv-budget B           tokens kept under a bounded policy: a count, or a fraction of --ctx (0.25)\n"
          "                          (requests override all of these: X-Zerolayer-* headers, body \"zerolayer\")\n"
          "  --kv-layer-max N        most tokens one layer keeps under a bounded policy (default: --ctx; the\n"
          "                          model's training context when its file claims more)\n",
          f);
}

int cmd_serve(int argc, char **argv) {
    zl_server_opts o = {0};
    o.host = "127.0.0.1";
    o.port = 8080;
    o.sched.n_parallel = 8;
    o.sched.max_queue = 64;
    o.sched.step_tokens = 256;
    int drain_s = 30;
    const char *model = NULL, *compute = NULL, *spec = NULL, *kv_policy = NULL, *kv_budget = NULL, *draft_model = NULL,
               *ring_cost = NULL, *models_dir = NULL;
    float cost[CLI_RING_COST_MAX];
    int n_ctx = 0, threads = 0, ring = 0, draft_layers = 0, prefetch = 2, layer_max = 0, preheat = 0;
    /* one block, freed with keys: API keys, then the other -m paths, their aliases, the --cors origins, the --codec
     * files */
    const char **keys = calloc((size_t)argc * 5, sizeof *keys);
    if (!keys) return cli_fail("out of memory");
    const char **more = keys + argc, **aliases = keys + 2 * argc, **cors = keys + 3 * argc, **codecs = keys + 4 * argc;
    int n_more = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (cli_is_help(a)) { serve_usage(stdout); free(keys); return 0; }
        if (!strcmp(a, "--no-webui")) {
            o.no_webui = 1;
            continue;
        }
#define NEXT_INT(flag, lo, hi, dst)                                    \
    if (!strcmp(a, flag)) {                                            \
        if (cli_int(flag, v, lo, hi, &x)) { free(keys); return 1; }    \
        dst = (int)x;                                                  \
        i++;                                                           \
        continue;                                                      \
    }
        NEXT_INT("--port", 0, 65535, o.port)
        NEXT_INT("--parallel", 1, 256, o.sched.n_parallel)
        NEXT_INT("--ctx", 16, 1 << 20, n_ctx)
        NEXT_INT("--queue", 0, 100000, o.sched.max_queue)
        NEXT_INT("--step-tokens", 1, 1 << 16, o.sched.step_tokens)
        NEXT_INT("-t", 1, 1024, threads)
        NEXT_INT("--threads", 1, 1024, threads)
        NEXT_INT("--prefetch-layers", 0, 1024, prefetch)
        NEXT_INT("--ring", 1, 16, ring)
        NEXT_INT("--draft-layers", 1, 100000, draft_layers)
        NEXT_INT("--kv-layer-max", 1, 1 << 24, layer_max)
        NEXT_INT("--batches-per-tenant", 1, 1 << 20, o.batches_per_tenant)
        NEXT_INT("--max-conns", 1, 1 << 20, o.max_conns)
        NEXT_INT("--conns-per-ip", 1, 1 << 20, o.conns_per_ip)
        NEXT_INT("--idle-timeout", 1, 86400, o.idle_timeout_s)
        NEXT_INT("--drain-timeout", 0, 86400, drain_s)
        NEXT_INT("--store-every", 0, 1 << 20, o.store_every)
#undef NEXT_INT
        if (!strcmp(a, "--batch-retention")) {
            if (cli_int(a, v, 1, 1L << 30, &x)) { free(keys); return 1; }
            o.batch_retention_s = (double)x;
            i++;
            continue;
        }
        if (!strcmp(a, "--session-ttl") || !strcmp(a, "--prefill-idle") || !strcmp(a, "--compress-idle")) {
            char *end = NULL;
            double d = v ? strtod(v, &end) : 0;
            if (!v || end == v || *end || d <= 0 || d > 1e7) {
                free(keys);
                return cli_fail("%s: expected a positive number of seconds, got '%s'", a, v ? v : "");
            }
            if (!strcmp(a, "--session-ttl")) o.session_ttl_s = d;
            else if (!strcmp(a, "--compress-idle")) o.compress_idle_s = d;
            else o.prefill_idle_s = d;
            i++;
            continue;
        }
        if (!strcmp(a, "--sessions-per-tenant") || !strcmp(a, "--session-kv-mb") || !strcmp(a, "--prefix-cache-mb")) {
            if (cli_int(a, v, !strcmp(a, "--prefix-cache-mb") ? 0 : 1, 1L << 22, &x)) { free(keys); return 1; }
            if (!strcmp(a, "--sessions-per-tenant")) o.sessions_per_tenant = (int)x;
            else if (!strcmp(a, "--session-kv-mb")) o.session_kv_budget = (size_t)x << 20;
            else o.prefix_cache_bytes = x ? (long long)x << 20 : -1;
            i++;
            continue;
        }
        if (!strcmp(a, "--store-idle")) {
            double d;
            if (cli_float(a, v, 0, 1e7, &d)) { free(keys); return 1; }
            o.store_idle_s = d > 0 ? d : -1; /* 0 on the command line: never on idle */
            i++;
            continue;
        }
        if (!strcmp(a, "--preheat")) {
            preheat = 1;
            continue;
        }
        if (!strcmp(a, "--models-mb")) {
            if (cli_int(a, v, 1, 1L << 30, &x)) { free(keys); return 1; }
            o.models_budget = (uint64_t)x << 20;
            i++;
            continue;
        }
        if (!strcmp(a, "--models-idle")) {
            double d;
            if (cli_float(a, v, 0.001, 1e9, &d)) { free(keys); return 1; }
            o.models_idle_s = d;
            i++;
            continue;
        }
        if (!strcmp(a, "--models-max")) {
            if (cli_int(a, v, 1, 1 << 16, &x)) { free(keys); return 1; }
            o.models_max = (int)x;
            i++;
            continue;
        }
        if (!strcmp(a, "--max-body")) {
            if (cli_int(a, v, 64, 1L << 34, &x)) { free(keys); return 1; }
            o.max_body = (size_t)x;
            i++;
            continue;
        }
        if (!strcmp(a, "--ring-cost")) {
            if (cli_ring_cost(v, cost, &o.sched.n_ring_cost)) { free(keys); return 1; }
            ring_cost = v;
            i++;
            continue;
        }
        if (!strcmp(a, "--compute") || !strcmp(a, "--spec") || !strcmp(a, "--kv-policy") || !strcmp(a, "--kv-budget")) {
            if (!v) { free(keys); return cli_fail("%s needs a value", a); }
            if (!strcmp(a, "--compute")) compute = v;
            else if (!strcmp(a, "--spec")) spec = v;
            else if (!strcmp(a, "--kv-policy")) kv_policy = v;
            else kv_budget = v;
            i++;
            continue;
        }
        if (!v && (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--host") || !strcmp(a, "--api-key") || !strcmp(a, "--cors") ||
                   !strcmp(a, "--chat-template") || !strcmp(a, "--chat-template-file") || !strcmp(a, "--model-id") || !strcmp(a, "--session-secret-file") || !strcmp(a, "--state-key-file") || !strcmp(a, "--codec") || !strcmp(a, "--state-dir") || !strcmp(a, "--state-store") || !strcmp(a, "--pooling") || !strcmp(a, "--alias") || !strcmp(a, "--models-dir") ||
                   !strcmp(a, "--draft-model"))) {
            free(keys);
            return cli_fail("%s needs a value", a);
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!model) model = argv[++i];
            else more[n_more++] = argv[++i];
        } else if (!strcmp(a, "--alias")) {
            if (!model) { free(keys); return cli_fail("--alias names the -m before it: give -m MODEL first"); }
            if (n_more) aliases[n_more - 1] = argv[++i];
            else o.model_id = argv[++i];
        }
        else if (!strcmp(a, "--host")) o.host = argv[++i];
        else if (!strcmp(a, "--api-key")) keys[o.n_api_keys++] = argv[++i];
        else if (!strcmp(a, "--cors")) cors[o.n_cors_origins++] = argv[++i];
        else if (!strcmp(a, "--chat-template")) o.chat_template = argv[++i];
        else if (!strcmp(a, "--chat-template-file")) o.chat_template_file = argv[++i];
        else if (!strcmp(a, "--model-id")) o.model_id = argv[++i];
        else if (!strcmp(a, "--pooling")) o.pooling = argv[++i];
        else if (!strcmp(a, "--models-dir")) models_dir = argv[++i];
        else if (!strcmp(a, "--session-secret-file")) o.session_secret_file = argv[++i];
        else if (!strcmp(a, "--state-key-file")) o.state_key_file = argv[++i];
        else if (!strcmp(a, "--codec")) codecs[o.n_codec_files++] = argv[++i];
        else if (!strcmp(a, "--state-dir")) o.state_dir = argv[++i];
        else if (!strcmp(a, "--state-store")) o.state_store = argv[++i];
        else if (!strcmp(a, "--draft-model")) draft_model = argv[++i];
        else {
            serve_usage(stderr);
            free(keys);
            return cli_fail("serve: unknown option '%s'", a);
        }
    }
    /* default ring / KV controls: the preset, then the explicit flags */
    zl_job_ctl *ctl = &o.sched.ctl;
    if (compute && zl_job_ctl_preset(compute, ctl)) {
        free(keys);
        return cli_fail("--compute must be exact, balanced or aggressive (got '%s')", compute);
    }
    if (spec) {
        if (!strcmp(spec, "lookup")) ctl->spec = ZL_SPEC_LOOKUP;
        else if (!strcmp(spec, "draft")) ctl->spec = ZL_SPEC_DRAFT;
        else if (!strcmp(spec, "off")) ctl->spec = ZL_SPEC_OFF;
        else { free(keys); return cli_fail("--spec must be lookup, draft or off (got '%s')", spec); }
    }
    if (draft_model && draft_layers) { free(keys); return cli_fail("--draft-model and --draft-layers exclude each other"); }
    if (o.pooling && strcmp(o.pooling, "mean") && strcmp(o.pooling, "cls") && strcmp(o.pooling, "last")) {
        free(keys);
        return cli_fail("--pooling must be mean, cls or last (got '%s')", o.pooling);
    }
    if (o.chat_template && o.chat_template_file) {
        free(keys);
        return cli_fail("--chat-template and --chat-template-file exclude each other");
    }
    if (spec && !strcmp(spec, "draft") && !draft_model && !draft_layers) {
        free(keys);
        return cli_fail("--spec draft needs --draft-model FILE or --draft-layers N");
    }
    if (spec && !strcmp(spec, "lookup") && (draft_model || draft_layers)) {
        free(keys);
        return cli_fail("--spec lookup drafts by n-gram lookup: drop --draft-model/--draft-layers, or use --spec draft");
    }
    if (ring) ctl->ring = ring;
    if (kv_policy && cli_kv_policy(kv_policy, &ctl->kv_policy)) { free(keys); return 1; }
    o.api_keys = keys;
    o.drain_timeout_s = drain_s ? drain_s : -1;
    o.cors_origins = cors;
    o.codec_files = codecs;
    char **dir_models = NULL; /* kept until exit: the server holds the paths */
    int n_dir = 0;
    if (models_dir) {
        if (models_in_dir(models_dir, &dir_models, &n_dir)) { free(keys); return 1; }
        if (!n_dir && !model) { free(keys); return cli_fail("--models-dir: no .gguf file in %s", models_dir); }
        const char **all = calloc((size_t)(n_more + n_dir) * 2 + 2, sizeof *all);
        if (!all) { free(keys); return cli_fail("out of memory"); }
        int k = 0, first = 0;
        if (!model) model = dir_models[first++];
        for (int i = 0; i < n_more; i++, k++) { all[k] = more[i]; all[n_more + n_dir + 1 + k] = aliases[i]; }
        for (int i = first; i < n_dir; i++) all[k++] = dir_models[i];
        more = all;
        aliases = all + n_more + n_dir + 1;
        n_more = k;
    }
    o.models = more;
    o.model_aliases = aliases;
    o.n_models = n_more;
    o.model_path = model ? model : cli_default_model();
#ifdef ZL_TEST_HOOKS
    /* the test build's binary only (tests/CMakeLists.txt): slow every engine
     * step down so tests can hold requests in flight */
    const char *step_ms = getenv("ZL_TEST_STEP_MS");
    long ms;
    if (step_ms) {
        if (cli_int("ZL_TEST_STEP_MS", step_ms, 0, 10000, &ms)) { free(keys); return 1; }
        zl_sched_test_step_ms((int)ms);
    }
#endif
    zl_err err = {0};
    zl_llm *llm = NULL;
    zl_llm_opts lo = {.n_threads = threads, .prefetch_layers = prefetch ? prefetch : -1, .kv_layer_max = layer_max};
    o.llm_opts = lo;
    /* before the model's threads start: only the server's sigwait takes
     * SIGINT/SIGTERM (one during the load stops the server once it is up) */
    zl_server_block_signals();
    if (zl_llm_open(&llm, o.model_path, &lo, &err)) { free(keys); return cli_fail("%s", err.msg); }
    /* readiness: the server listens only once the model is loaded (and, with --preheat, paged in) */
    if (preheat) zl_llm_preheat(llm, cli_progress, "preheat");
    int ctx_train = zl_llm_n_ctx_train(llm);
    o.sched.n_ctx = n_ctx > 0 ? n_ctx : (ctx_train > 0 && ctx_train < 4096 ? ctx_train : 4096);
    if (kv_budget) {
        long b = 0;
        if (cli_budget("--kv-budget", kv_budget, o.sched.n_ctx, &b)) { zl_llm_close(llm); free(keys); return 1; }
        ctl->kv_budget = (int)(b > o.sched.n_ctx ? o.sched.n_ctx : b);
        ctl->kv_frac = 0;
    }
    if (ctl->kv_policy != ZL_KV_POLICY_FULL && zl_job_ctl_budget(ctl, o.sched.n_ctx) < ZL_KV_BUDGET_MIN) {
        zl_llm_close(llm);
        free(keys);
        return cli_fail("--kv-budget: %d tokens of the %d-token context is below the %d a bounded policy needs",
                        zl_job_ctl_budget(ctl, o.sched.n_ctx), o.sched.n_ctx, ZL_KV_BUDGET_MIN);
    }
    zl_llm *draft = NULL;
    if (draft_model || draft_layers) {
        int drc = draft_model ? zl_llm_open(&draft, draft_model, &lo, &err)
                              : zl_llm_open_truncated(&draft, llm, draft_layers, &err), opened = !drc;
        if (!drc) {
            /* the vocabulary check of zl_seq_set_spec, once at start: a clear error now, not per request */
            zl_seq *probe = NULL;
            zl_seq_opts so = {16, ZL_KV_F16, zl_sampling_defaults()};
            zl_spec_opts sp = {ZL_SPEC_DRAFT, 1, 1, draft};
            drc = zl_seq_new(&probe, llm, &so, &err);
            if (!drc) drc = zl_seq_set_spec(probe, &sp, &err);
            zl_seq_free(probe);
        }
        if (drc) {
            zl_llm_close(draft);
            zl_llm_close(llm);
            free(keys);
            if (!draft_model) return cli_fail("--draft-layers: %s", err.msg);
            return opened ? cli_fail("--draft-model %s: %s", draft_model, err.msg) : cli_fail("--draft-model: %s", err.msg);
        }
        o.sched.draft = draft;
        fprintf(stderr, "zerolayer: ring drafts with %s\n", zl_llm_desc(draft));
    }
    if (ring_cost && !strcmp(ring_cost, "measure")) {
        int depth = o.sched.n_ctx / 2 < 128 ? o.sched.n_ctx / 2 : 128;
        if (zl_llm_verify_cost(llm, depth > 0 ? depth : 1, CLI_RING_COST_MAX, 3, cost, &err)) {
            zl_llm_close(draft);
            zl_llm_close(llm);
            free(keys);
            return cli_fail("--ring-cost measure: %s", err.msg);
        }
        o.sched.n_ring_cost = CLI_RING_COST_MAX;
    }
    if (o.sched.n_ring_cost) {
        o.sched.ring_cost = cost;
        fprintf(stderr, "zerolayer: ring verify cost (forward over 1, 2, .. tokens / 1):");
        for (int k = 0; k < o.sched.n_ring_cost; k++) fprintf(stderr, " %.2f", cost[k]);
        fputc('\n', stderr);
    }
    int rc = zl_server_run(llm, &o, &err);
    zl_llm_close(draft); /* before llm: a truncated draft borrows its weights */
    zl_llm_close(llm);
    free(keys);
    if (rc) return cli_fail("%s", err.msg);
    return 0;
}
