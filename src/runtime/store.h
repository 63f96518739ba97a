/* store.h — where sealed session state goes between processes: a key-value
 * store with put / get / del and a time to live, behind one interface, so
 * that a directory (serve --state-dir, store_dir.c) and Redis (serve
 * --state-store redis://..., server/store_redis.c) are the same mechanism
 * to the code that decides what to write and when (server/state_store.c,
 * the sessions' sweeper).
 *
 * Values are opaque bytes (the server puts sealed snapshots: nothing here
 * can read them).  Keys are printable ASCII without spaces or '/'.  A store
 * is used from several threads: each backend serialises its own calls.
 *
 * zl_store_put / _get / _del are the only entry points the callers use:
 * they count calls, bytes and errors (zl_store_stats) and own the one rule
 * for an outage: a failing store is reported once when it goes down and
 * once when it answers again, and is never retried more often than every
 * ZL_STORE_RETRY_MS while down (calls fail at once meanwhile), so a dead
 * store costs a request nothing but a miss. */
#ifndef ZL_STORE_H
#define ZL_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

#define ZL_STORE_RETRY_MS 1000.0

typedef struct zl_store zl_store;

typedef struct zl_store_ops {
    /* 0 or an error (ZL_EIO: the store did not answer) */
    int (*put)(zl_store *st, const char *key, const uint8_t *v, size_t n, double ttl_s, zl_err *err);
    /* 0 with *v malloc'd (or *v NULL: no such key), or an error */
    int (*get)(zl_store *st, const char *key, uint8_t **v, size_t *n, zl_err *err);
    int (*del)(zl_store *st, const char *key, zl_err *err);
    /* The keys with this prefix (*keys malloc'd, each malloc'd), or NULL when
     * the store is shared and must not be enumerated (Redis). */
    int (*list)(zl_store *st, const char *prefix, char ***keys, int *n, zl_err *err);
    void (*close)(zl_store *st);
} zl_store_ops;

typedef struct zl_store_stats {
    uint64_t puts, gets, hits, dels, errors;
    uint64_t put_bytes, get_bytes;
    double put_ms, get_ms;
    int up; /* 1 while the last call succeeded */
} zl_store_stats;

/* Every backend embeds this first. */
struct zl_store {
    const zl_store_ops *ops;
    char desc[160]; /* for messages: "dir /var/lib/x", "redis://127.0.0.1:6379/0" */
    pthread_mutex_t mu; /* stats and the outage state */
    zl_store_stats stats;
    double down_since, retry_at; /* monotonic ms; 0: up */
};

/* Backends call this once on their zl_store before returning it. */
void zl_store_init(zl_store *st, const zl_store_ops *ops, const char *desc);

int zl_store_put(zl_store *st, const char *key, const uint8_t *v, size_t n, double ttl_s, zl_err *err);
int zl_store_get(zl_store *st, const char *key, uint8_t **v, size_t *n, zl_err *err);
int zl_store_del(zl_store *st, const char *key, zl_err *err);
/* ZL_EUNSUP when the store cannot be listed. */
int zl_store_list(zl_store *st, const char *prefix, char ***keys, int *n, zl_err *err);
void zl_store_keys_free(char **keys, int n);
void zl_store_stats_get(zl_store *st, zl_store_stats *out);
/* Shared by several processes (it cannot be listed: Redis), or one's own (a directory)? */
int zl_store_shared(const zl_store *st);
void zl_store_close(zl_store *st);

/* A directory (created 0700 if missing): one file per key, written to a
 * temporary name, fsync'd, renamed, the directory fsync'd, so a crash at
 * any point leaves the previous value whole.  A file keeps no TTL (the
 * values carry their own age: state_store.c drops expired ones). */
int zl_store_dir_open(zl_store **out, const char *dir, zl_err *err);
/* The file a key is kept in (tests, messages): DIR/<key>.zls. */
#define ZL_STORE_DIR_EXT ".zls"

#endif
