/* store.c — the calls every state store goes through (store.h): counting,
 * timing, and the outage rule (report once down, once back; while down,
 * fail at once until ZL_STORE_RETRY_MS passed since the last try).  The
 * backends only move bytes. */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"

void zl_store_init(zl_store *st, const zl_store_ops *ops, const char *desc) {
    st->ops = ops;
    snprintf(st->desc, sizeof st->desc, "%s", desc);
    pthread_mutex_init(&st->mu, NULL);
    memset(&st->stats, 0, sizeof st->stats);
    st->stats.up = 1;
    st->down_since = st->retry_at = 0;
}

/* 0: go ahead; else the store is down and not due for a retry. */
static int gate(zl_store *st, zl_err *err) {
    pthread_mutex_lock(&st->mu);
    int wait = st->down_since > 0 && zl_now_ms() < st->retry_at;
    if (wait) st->stats.errors++;
    pthread_mutex_unlock(&st->mu);
    if (wait) return zl_errf(err, ZL_EIO, "state store %s is down (next try within %.0f ms)", st->desc, ZL_STORE_RETRY_MS);
    return 0;
}

/* Record a call's outcome; rc is the backend's. */
static int outcome(zl_store *st, int rc, const zl_err *err) {
    pthread_mutex_lock(&st->mu);
    double now = zl_now_ms();
    int went_down = 0, came_back = 0;
    if (rc == ZL_EIO) {
        st->stats.errors++;
        if (st->down_since == 0) st->down_since = now, went_down = 1;
        st->retry_at = now + ZL_STORE_RETRY_MS;
        st->stats.up = 0;
    } else if (st->down_since > 0) {
        came_back = 1;
        st->down_since = st->retry_at = 0;
        st->stats.up = 1;
    }
    pthread_mutex_unlock(&st->mu);
    if (went_down)
        fprintf(stderr, "zerolayer: warning: state store %s: %s; sessions stay local to this replica until it answers "
                        "again\n", st->desc, err && err->msg[0] ? err->msg : "no answer");
    if (came_back) fprintf(stderr, "zerolayer: state store %s answers again\n", st->desc);
    return rc;
}

int zl_store_put(zl_store *st, const char *key, const uint8_t *v, size_t n, double ttl_s, zl_err *err) {
    zl_err e = {0};
    if (gate(st, err)) return ZL_EIO;
    double t0 = zl_now_ms();
    int rc = st->ops->put(st, key, v, n, ttl_s, &e);
    pthread_mutex_lock(&st->mu);
    st->stats.puts++;
    if (!rc) st->stats.put_bytes += n;
    st->stats.put_ms += zl_now_ms() - t0;
    if (rc && rc != ZL_EIO) st->stats.errors++;
    pthread_mutex_unlock(&st->mu);
    if (rc && err) *err = e;
    return outcome(st, rc, &e);
}

int zl_store_get(zl_store *st, const char *key, uint8_t **v, size_t *n, zl_err *err) {
    zl_err e = {0};
    *v = NULL;
    *n = 0;
    if (gate(st, err)) return ZL_EIO;
    double t0 = zl_now_ms();
    int rc = st->ops->get(st, key, v, n, &e);
    pthread_mutex_lock(&st->mu);
    st->stats.gets++;
    if (!rc && *v) st->stats.hits++, st->stats.get_bytes += *n;
    st->stats.get_ms += zl_now_ms() - t0;
    if (rc && rc != ZL_EIO) st->stats.errors++;
    pthread_mutex_unlock(&st->mu);
    if (rc && err) *err = e;
    return outcome(st, rc, &e);
}

int zl_store_del(zl_store *st, const char *key, zl_err *err) {
    zl_err e = {0};
    if (gate(st, err)) return ZL_EIO;
    int rc = st->ops->del(st, key, &e);
    pthread_mutex_lock(&st->mu);
    st->stats.dels++;
    if (rc && rc != ZL_EIO) st->stats.errors++;
    pthread_mutex_unlock(&st->mu);
    if (rc && err) *err = e;
    return outcome(st, rc, &e);
}

int zl_store_list(zl_store *st, const char *prefix, char ***keys, int *n, zl_err *err) {
    *keys = NULL;
    *n = 0;
    if (!st->ops->list) return zl_errf(err, ZL_EUNSUP, "state store %s cannot be listed", st->desc);
    return st->ops->list(st, prefix, keys, n, err);
}

void zl_store_keys_free(char **keys, int n) {
    for (int i = 0; keys && i < n; i++) free(keys[i]);
    free(keys);
}

void zl_store_stats_get(zl_store *st, zl_store_stats *out) {
    pthread_mutex_lock(&st->mu);
    *out = st->stats;
    pthread_mutex_unlock(&st->mu);
}

int zl_store_shared(const zl_store *st) { return st->ops->list == NULL; }

void zl_store_close(zl_store *st) {
    if (!st) return;
    pthread_mutex_destroy(&st->mu);
    st->ops->close(st);
}
