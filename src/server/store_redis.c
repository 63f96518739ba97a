/* store_redis.c — the Redis backend of runtime/store.h (serve --state-store
 * redis://HOST:PORT[/DB]) over Debian's libhiredis.  One connection, one
 * call at a time under a mutex (hiredis contexts are not thread-safe; the
 * calls are rare: a write per idle session, a read per session miss).
 * Connect and command timeouts are short (ZL_REDIS_TIMEOUT_MS) so a dead
 * Redis costs a caller at most that once; store.c then keeps callers off it
 * until its retry time.  A failed call drops the connection; the next call
 * reconnects.  Values are SET with PX (the session TTL); list() is absent:
 * a shared store is never enumerated.  Built only where hiredis was found
 * (ZL_HAVE_HIREDIS); elsewhere opening one is a clear error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/store.h"
#include "store_redis.h"

int zl_redis_url_parse(const char *url, char *host, size_t cap, int *port, int *db, zl_err *err) {
    const char *p = url;
    if (strncmp(p, "redis://", 8))
        return zl_errf(err, ZL_EINVAL, "--state-store: '%s' is not redis://HOST:PORT[/DB]", url);
    p += 8;
    const char *colon = strchr(p, ':'), *slash = strchr(p, '/');
    const char *hend = colon && (!slash || colon < slash) ? colon : slash ? slash : p + strlen(p);
    if (hend == p || (size_t)(hend - p) >= cap)
        return zl_errf(err, ZL_EINVAL, "--state-store: '%s' names no host (redis://HOST:PORT[/DB])", url);
    memcpy(host, p, (size_t)(hend - p));
    host[hend - p] = 0;
    *port = 6379;
    *db = 0;
    p = hend;
    if (*p == ':') {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (end == p + 1 || v < 1 || v > 65535 || (*end && *end != '/'))
            return zl_errf(err, ZL_EINVAL, "--state-store: '%s': the port must be 1..65535", url);
        *port = (int)v;
        p = end;
    }
    if (*p == '/') {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (end == p + 1 || *end || v < 0 || v > 1000000)
            return zl_errf(err, ZL_EINVAL, "--state-store: '%s': the database must be a number >= 0", url);
        *db = (int)v;
    } else if (*p) {
        return zl_errf(err, ZL_EINVAL, "--state-store: '%s' is not redis://HOST:PORT[/DB]", url);
    }
    return 0;
}

#ifdef ZL_HAVE_HIREDIS
#include <hiredis.h>
#include <sys/time.h>

typedef struct redis_store {
    zl_store base;
    char host[256];
    int port, db;
    redisContext *c;
    pthread_mutex_t mu;
} redis_store;

static void drop_conn(redis_store *r) {
    if (r->c) redisFree(r->c);
    r->c = NULL;
}

/* Under mu: a live connection, or ZL_EIO. */
static int conn(redis_store *r, zl_err *err) {
    if (r->c) return 0;
    struct timeval tv = {0, ZL_REDIS_TIMEOUT_MS * 1000};
    r->c = redisConnectWithTimeout(r->host, r->port, tv);
    if (!r->c || r->c->err) {
        int rc = zl_errf(err, ZL_EIO, "cannot connect: %s", r->c ? r->c->errstr : "out of memory");
        drop_conn(r);
        return rc;
    }
    redisSetTimeout(r->c, tv);
    if (r->db) {
        redisReply *y = redisCommand(r->c, "SELECT %d", r->db);
        int bad = !y || y->type == REDIS_REPLY_ERROR;
        int rc = bad ? zl_errf(err, ZL_EIO, "SELECT %d: %s", r->db, y ? y->str : r->c->errstr) : 0;
        if (y) freeReplyObject(y);
        if (bad) drop_conn(r);
        return rc;
    }
    return 0;
}

/* Under mu: run a command built by the caller's format; NULL (and the
 * connection dropped) on failure. */
static redisReply *checked(redis_store *r, redisReply *y, const char *what, zl_err *err) {
    if (!y) {
        zl_errf(err, ZL_EIO, "%s: %s", what, r->c->errstr[0] ? r->c->errstr : "no answer");
        drop_conn(r);
        return NULL;
    }
    if (y->type == REDIS_REPLY_ERROR) {
        zl_errf(err, ZL_EIO, "%s: %s", what, y->str);
        freeReplyObject(y);
        return NULL;
    }
    return y;
}

static int r_put(zl_store *st, const char *key, const uint8_t *v, size_t n, double ttl_s, zl_err *err) {
    redis_store *r = (redis_store *)st;
    long long ms = ttl_s > 0 ? (long long)(ttl_s * 1e3) : 0;
    pthread_mutex_lock(&r->mu);
    int rc = conn(r, err);
    redisReply *y = NULL;
    if (!rc) {
        y = ms ? redisCommand(r->c, "SET %s %b PX %lld", key, (const char *)v, n, ms)
               : redisCommand(r->c, "SET %s %b", key, (const char *)v, n);
        y = checked(r, y, "SET", err);
        if (!y) rc = ZL_EIO;
    }
    if (y) freeReplyObject(y);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int r_get(zl_store *st, const char *key, uint8_t **v, size_t *n, zl_err *err) {
    redis_store *r = (redis_store *)st;
    pthread_mutex_lock(&r->mu);
    int rc = conn(r, err);
    redisReply *y = NULL;
    if (!rc && !(y = checked(r, redisCommand(r->c, "GET %s", key), "GET", err))) rc = ZL_EIO;
    if (y && y->type == REDIS_REPLY_STRING) {
        if (!(*v = malloc(y->len + 1))) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
        else memcpy(*v, y->str, y->len), *n = y->len;
    } else if (y && y->type != REDIS_REPLY_NIL) {
        rc = zl_errf(err, ZL_EIO, "GET: unexpected reply type %d", y->type);
    }
    if (y) freeReplyObject(y);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int r_del(zl_store *st, const char *key, zl_err *err) {
    redis_store *r = (redis_store *)st;
    pthread_mutex_lock(&r->mu);
    int rc = conn(r, err);
    redisReply *y = NULL;
    if (!rc && !(y = checked(r, redisCommand(r->c, "DEL %s", key), "DEL", err))) rc = ZL_EIO;
    if (y) freeReplyObject(y);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void r_close(zl_store *st) {
    redis_store *r = (redis_store *)st;
    drop_conn(r);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static const zl_store_ops k_redis_ops = {r_put, r_get, r_del, NULL, r_close};

int zl_store_redis_open(zl_store **out, const char *url, zl_err *err) {
    *out = NULL;
    redis_store *r = calloc(1, sizeof *r);
    if (!r) return zl_errf(err, ZL_ENOMEM, "out of memory");
    int rc = zl_redis_url_parse(url, r->host, sizeof r->host, &r->port, &r->db, err);
    if (rc) { free(r); return rc; }
    pthread_mutex_init(&r->mu, NULL);
    char desc[160];
    snprintf(desc, sizeof desc, "redis://%s:%d/%d", r->host, r->port, r->db);
    zl_store_init(&r->base, &k_redis_ops, desc);
    *out = &r->base;
    return 0;
}

int zl_store_redis_available(void) { return 1; }
#else
int zl_store_redis_open(zl_store **out, const char *url, zl_err *err) {
    *out = NULL;
    char host[256];
    int port, db;
    int rc = zl_redis_url_parse(url, host, sizeof host, &port, &db, err);
    if (rc) return rc;
    return zl_errf(err, ZL_EUNSUP, "--state-store %s: this zerolayer was built without Redis support (libhiredis-dev "
                                   "was not found at build time; `make deps` installs it, then rebuild)", url);
}

int zl_store_redis_available(void) { return 0; }
#endif
