/* server.c — the server's lifecycle: zl_server_run sets the server state
 * up (chat template, models, sessions, the scheduler, the state store),
 * starts the listener (http.c), waits for SIGINT/SIGTERM, drains the
 * requests being answered and tears everything down in the order the
 * threads need.  It owns no request handling and no transport.
 *
 * Signals: SIGINT and SIGTERM are blocked before any thread starts
 * (zl_server_block_signals, which `serve` calls before it opens the model),
 * so every thread inherits the mask and only the sigwait here sees them; the
 * first starts the drain (new requests get 503), a second one ends it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/clock.h"
#include "../base/err.h"
#include "http.h"
#include "metrics.h"

/* After the first SIGINT/SIGTERM: wait until no request is being answered,
 * the drain timeout passes or a second signal comes. */
static void drain(zl_srv *srv, const sigset_t *sigs) {
    int limit = srv->o.drain_timeout_s ? srv->o.drain_timeout_s : 30;
    if (limit < 0) return;
    atomic_store(&srv->draining, 1);
    fprintf(stderr, "zerolayer: draining: %d requests being answered (up to %d s; a second signal stops now)\n",
            atomic_load(&srv->in_flight), limit);
    double end = zl_now_ms() + limit * 1e3;
    while (atomic_load(&srv->in_flight) > 0 && zl_now_ms() < end) {
        struct timespec tick = {0, 50 * 1000000};
        if (sigtimedwait(sigs, NULL, &tick) > 0) return;
    }
}

void zl_srv_on_step(void *ud, int n_seqs, int n_tokens, double ms) {
    (void)ud;
    (void)n_tokens;
    (void)ms;
    zl_metrics_batch(n_seqs);
}

void zl_srv_teardown(zl_srv *srv) {
    zl_sched_free(srv->sched);
    zl_sessions_free(srv->sessions); /* joins the sweeper, which uses the state */
    zl_state_free(srv);
    zl_chat_fmt_free(&srv->tpl);
    free(srv);
}

static sigset_t stop_signals(void) {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    return sigs;
}

void zl_server_block_signals(void) {
    sigset_t sigs = stop_signals();
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
}

int zl_server_run(zl_llm *llm, const zl_server_opts *o, zl_err *err) {
    zl_srv *srv = calloc(1, sizeof *srv);
    if (!srv) return zl_errf(err, ZL_ENOMEM, "out of memory");
    srv->llm = llm;
    srv->o = *o;
    srv->started = (long long)time(NULL);
    if (!srv->o.host) srv->o.host = "127.0.0.1";
    if (!srv->o.max_body) srv->o.max_body = 8u << 20;
    const char *base = strrchr(o->model_path, '/');
    base = base ? base + 1 : o->model_path;
    snprintf(srv->model_id, sizeof srv->model_id, "%s", o->model_id ? o->model_id : base);
    int trc = zl_chat_fmt_setup(&srv->tpl, llm, o->chat_template, o->chat_template_file, err);
    if (trc) { free(srv); return trc; }
    if ((trc = zl_models_setup(srv, err))) { zl_chat_fmt_free(&srv->tpl); free(srv); return trc; }
    /* every thread started from here on inherits the blocked signals; only
     * the sigwait below sees SIGINT/SIGTERM (the CLI blocks them before it
     * opens the model, whose threads start earlier) */
    sigset_t sigs = stop_signals();
    zl_server_block_signals();
    signal(SIGPIPE, SIG_IGN);
    int rc = zl_sessions_setup(srv, err);
    if (rc) { zl_chat_fmt_free(&srv->tpl); free(srv); return rc; }
    zl_sched_opts so = o->sched;
    so.on_step = zl_srv_on_step;
    so.on_step_ud = srv;
    rc = zl_sched_new(&srv->sched, llm, &so, err);
    if (!rc && (rc = zl_state_store_load_all(srv, err))) zl_sched_free(srv->sched);
    if (rc) { zl_sessions_free(srv->sessions); zl_state_free(srv); zl_chat_fmt_free(&srv->tpl); free(srv); return rc; }

    int port = 0;
    if ((rc = zl_http_start(srv, &port, err))) {
        zl_srv_teardown(srv);
        return rc;
    }
    fprintf(stderr, "zerolayer: %s\n", zl_llm_desc(llm));
    fprintf(stderr, "zerolayer: chat template %s; %d slots x %d context; %d threads\n", srv->tpl.name,
            so.n_parallel, zl_sched_n_ctx(srv->sched), zl_llm_n_threads(llm));
    fprintf(stderr, "zerolayer: listening on http://%s:%d\n", srv->o.host, port);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    drain(srv, &sigs);
    fprintf(stderr, "zerolayer: shutting down\n");
    zl_http_quiesce(srv);
    zl_sched_stop(srv->sched); /* cancels running jobs, so their streams end */
    zl_http_stop(srv);             /* no request thread runs after this ... */
    zl_batches_free(srv->batches); /* ... so none can be reading the batches it frees */
    zl_state_store_save_all(srv);  /* every session sealed once no request can touch it */
    zl_models_free(srv);
    zl_srv_teardown(srv);
    return 0;
}
