/* session.h — sessions that keep a sequence's KV between requests, and the
 * leases through which every request's sequence comes from a session or the
 * tenant's prefix cache and goes back there.
 *
 * A session belongs to one tenant.  While idle it holds its sequence; a
 * request on it borrows the sequence (acquire: the longest common token
 * prefix with the new prompt is kept, the rest truncated and zeroed) and
 * gives it back when the job ends (release).  Requests without a session
 * get a fresh sequence seeded from the tenant's prefix cache and leave a
 * snapshot there when they end.
 *
 * Ids and tenants are opaque strings chosen by the caller (the server signs
 * tokens; nothing here knows HTTP, JSON or cryptography).  Every lookup
 * compares the tenant.  Idle sessions expire after ttl; when the sessions'
 * KV bytes exceed the budget, or a tenant opens more sessions than allowed,
 * the least recently used idle sessions are evicted (or spilled:
 * zl_sessions_spill).  Expired, evicted,
 * flushed and deleted sessions have their KV zeroed before it is freed, and
 * leave a tombstone so their next use can say why they are gone.  A
 * background thread applies expiry, drops typing-ahead input that was
 * not followed by a request within prefill_idle, and maps a spare sequence
 * for the next fresh request, only while no job of the store holds a
 * sequence (never during a session's next turn). */
#ifndef ZL_SESSION_H
#define ZL_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "prefix_cache.h"
#include "zerolayer.h"

/* Tenant strings are shorter than this; longer ones are refused, never cut
 * (two tenants sharing the first bytes must not become one). */
#define ZL_SESS_TENANT_MAX 128

typedef struct zl_sessions zl_sessions;

/* Coding idle sessions (serve --compress-idle): a session idle for idle_s
 * has its sequence replaced by encode's bytes (sweeper thread, without the
 * store's lock: the session is marked coding and every user of its sequence
 * waits); the next request (engine thread) or snapshot rebuilds a sequence
 * with decode.  The store knows nothing of the coding itself. */
typedef struct zl_sessions_codec {
    int (*encode)(void *ud, const zl_seq *seq, uint8_t **out, size_t *bytes); /* 0 or an error */
    int (*decode)(void *ud, zl_seq *seq, const uint8_t *in, size_t bytes);    /* into a fresh sequence */
    void *ud;
    double idle_s; /* 0: off */
} zl_sessions_codec;

/* The live sessions now (id, tenant, created, last used): zl_sessions_list. */
typedef struct zl_session_ref {
    char id[80], tenant[ZL_SESS_TENANT_MAX];
    double created_unix, last_used_unix;
    int unsaved; /* changed since its last write to the state store (always 1 without one) */
} zl_session_ref;

/* Writing sessions to a state store (serve --state-store / --state-dir,
 * server/state_store.c): the sweeper decides when, the server how.  A
 * session whose state changed since its last write is due once it has been
 * idle for idle_s seconds, or at once after every_turns completed requests
 * since its last write.  For a due session the sweeper calls seal (without
 * the store's lock; users of the session wait meanwhile, as while coding)
 * and then put with nothing held, so a slow store delays no request.  A
 * failed put is retried no sooner than ZL_SESS_PERSIST_RETRY_MS later. */
#define ZL_SESS_PERSIST_RETRY_MS 1000.0
typedef struct zl_sessions_persist {
    int (*seal)(void *ud, const zl_session_ref *ref, const zl_seq *seq, const char *history, uint8_t **out,
                size_t *n); /* 0 or an error; *out malloc'd */
    int (*put)(void *ud, const zl_session_ref *ref, const uint8_t *v, size_t n); /* 0 or an error */
    void *ud;
    double idle_s;   /* 0: never on idle */
    int every_turns; /* 0: never by turns */
} zl_sessions_persist;

/* Spilling idle sessions past the KV budget (serve --state-dir or
 * --state-store): instead of evicting the least recently used idle session,
 * the sweeper hands its state to put (without the store's lock: the session
 * is marked coding and every user of its sequence waits) and keeps only its
 * record; the next request (engine thread) or snapshot gets the state back
 * with get.  The stored copy stays after that: a spilled session is also a
 * written one (zl_sessions_persist), and the copy is its last write.  drop
 * forgets it only when a spilled session is killed or flushed.  A failed put
 * evicts the session as before.  The hooks are the state store's; this store
 * knows nothing of files. */
typedef struct zl_sessions_spill {
    /* seq, or the idle code (zl_sessions_codec) when the session is held coded; 0 when stored */
    int (*put)(void *ud, const char *id, const char *tenant, double created_unix, double last_used_unix,
               const zl_seq *seq, const uint8_t *code, size_t code_bytes, const char *history, size_t *stored);
    int (*get)(void *ud, const char *id, const char *tenant, zl_seq *seq); /* into a fresh sequence */
    void (*drop)(void *ud, const char *id, const char *tenant);
    void *ud;
} zl_sessions_spill;

typedef struct zl_sessions_opts {
    double ttl_s;          /* idle time before expiry (default 120) */
    double prefill_idle_s; /* typing-ahead input kept this long without a request (default 3) */
    int max_per_tenant;    /* live sessions per tenant (default 16) */
    size_t kv_budget;      /* bytes of KV all idle sessions may hold (default 1 GiB) */
    size_t pcache_bytes;   /* prefix cache bound (0: off) */
    int pcache_block;      /* tokens per prefix-cache block (default 16) */
    zl_sessions_codec codec; /* idle sessions coded (zero: never) */
    zl_sessions_spill spill; /* sessions over kv_budget spilled (zero: evicted) */
    zl_sessions_persist persist; /* sessions written to a store (zero: never) */
    double spare_idle_ms;  /* quiet time (no job holding a sequence) before the spare sequence is
                              mapped (default 100; < 0: none) */
} zl_sessions_opts;

typedef enum {
    ZL_SESS_OK = 0,
    ZL_SESS_UNKNOWN,  /* no such id (or its tombstone aged out) */
    ZL_SESS_TENANT,   /* exists but belongs to another tenant */
    ZL_SESS_EXPIRED,  /* idle longer than ttl */
    ZL_SESS_EVICTED,  /* dropped for memory or the per-tenant bound */
    ZL_SESS_DELETED,
    ZL_SESS_BUSY,     /* a request is running on it */
    ZL_SESS_LIMIT,    /* tenant at its bound and none of its sessions idle */
} zl_sess_status;
const char *zl_sess_status_name(zl_sess_status s);

typedef struct zl_session_info {
    char id[80];
    double created_unix, last_used_unix, expires_unix;
    int n_tokens;  /* tokens cached */
    int committed; /* tokens of completed requests (the rest is typing-ahead input) */
    size_t kv_bytes;
    int busy;
} zl_session_info;

typedef struct zl_sessions_stats {
    int active;
    uint64_t expired_total, evicted_total;
    size_t kv_bytes;
    zl_pcache_stats pcache;
    /* the spare sequence (session.c): ready now, bytes of KV pages mapped for spares so far,
     * spares completed, and fresh acquires that took one (whole or the part made so far) */
    int coded;                                /* sessions held coded now (their bytes are in kv_bytes) */
    uint64_t coded_total, decoded_total;      /* sessions coded / rebuilt so far */
    uint64_t encoded_bytes, decoded_bytes;    /* code bytes produced / read so far */
    uint64_t encoded_exact_bytes;             /* the K+V bytes those codes stand for (the ratio's denominator) */
    double encode_ms, decode_ms;              /* time spent coding and rebuilding so far */
    int spilled;                              /* sessions whose state is spilled now (not in kv_bytes) */
    uint64_t spilled_total, unspilled_total;  /* sessions spilled / brought back so far */
    uint64_t spill_failed_total;              /* spills that failed (those sessions were evicted) */
    double spill_ms, unspill_ms;              /* time spent spilling and bringing back */
    int spare_ready;
    uint64_t spare_bytes_mapped, spares_made, spares_taken, spares_taken_part;
    uint64_t persisted_total, persist_failed_total; /* writes to the state store (zl_sessions_persist) */
    double persist_seal_ms, persist_put_ms;
} zl_sessions_stats;

int zl_sessions_new(zl_sessions **out, const zl_sessions_opts *o, zl_err *err);
/* Stop the sweeper and zero everything.  Call after the scheduler stopped,
 * or at least after every job hooked to this store has ended: a release
 * still running on the engine thread is waited for. */
void zl_sessions_free(zl_sessions *s);
const zl_sessions_opts *zl_sessions_get_opts(const zl_sessions *s);

zl_sess_status zl_sessions_create(zl_sessions *s, const char *id, const char *tenant, double created_unix,
                                  zl_session_info *info);
zl_sess_status zl_sessions_info(zl_sessions *s, const char *id, const char *tenant, zl_session_info *info);
zl_sess_status zl_sessions_delete(zl_sessions *s, const char *id, const char *tenant);
/* Snapshots: copy an idle session's cached state into dst (a fresh sequence
 * of the same model and context; zl_seq_copy_prefix) and its stored
 * conversation into *history (malloc'd or NULL), under the store's lock:
 * BUSY while a request runs on it. */
zl_sess_status zl_sessions_copy_state(zl_sessions *s, const char *id, const char *tenant, zl_seq *dst,
                                      char **history);
/* The live sessions now: *out is malloc'd, returns the count (-1: out of
 * memory). */
int zl_sessions_list(zl_sessions *s, zl_session_ref **out);
/* Create a session that holds seq (a restored snapshot: its tokens are all
 * committed) and history (may be NULL).  Takes seq on ZL_SESS_OK. */
zl_sess_status zl_sessions_create_with(zl_sessions *s, const char *id, const char *tenant, double created_unix,
                                       zl_seq *seq, const char *history, size_t len, zl_session_info *info);
/* Let go of an idle session without a tombstone: it is in a state store
 * now, and the next request for it, on this process or another, loads it
 * from there.  Its KV is zeroed. */
zl_sess_status zl_sessions_forget(zl_sessions *s, const char *id, const char *tenant);
/* Drop the cached tokens and zero their KV memory; the session stays. */
zl_sess_status zl_sessions_flush(zl_sessions *s, const char *id, const char *tenant);
/* A request starts on the session: marks it busy (one request at a time). */
zl_sess_status zl_sessions_begin(zl_sessions *s, const char *id, const char *tenant);
/* On the request's thread, after a successful begin: a session held coded
 * or spilled is decoded into a fresh sequence (so, of llm) now, without the
 * lock, instead of by its lease's acquire on the engine thread, where it
 * would pause every running stream.  Its users wait meanwhile; on failure
 * the request prefills its prompt, as after a failed acquire. */
void zl_sessions_rebuild(zl_sessions *s, const char *id, zl_llm *llm, const zl_seq_opts *so);
/* The request ended.  history (may be NULL: unchanged) replaces the stored
 * conversation text. */
void zl_sessions_end(zl_sessions *s, const char *id, const char *history, size_t len);
/* Copy of the stored conversation (malloc'd, NUL-terminated; NULL if none). */
char *zl_sessions_history(zl_sessions *s, const char *id, const char *tenant);
/* How the request now running on a session (between begin and end) got
 * its state: from memory, or rebuilt from the idle code or a spill, with
 * what storing it cost when it went idle and what rebuilding cost now. */
typedef enum { ZL_SESS_FROM_MEMORY = 0, ZL_SESS_FROM_CODE, ZL_SESS_FROM_SPILL } zl_sess_from;
typedef struct zl_session_restore {
    zl_sess_from from;
    int ok;             /* rebuilt (else the request prefilled its prompt) */
    int tokens;         /* tokens stored */
    size_t bytes;       /* bytes stored: the code, or the spilled file */
    size_t exact_bytes; /* those tokens' K+V in the cache's own type */
    double store_ms;    /* coding / spilling it when it went idle */
    double load_ms;     /* rebuilding it for this request */
} zl_session_restore;
zl_sess_status zl_sessions_restore_info(zl_sessions *s, const char *id, zl_session_restore *out);
/* Is the session still usable by the request that began on it?  (A stream
 * checks this between chunks; a busy session past its deadline expires here.) */
zl_sess_status zl_sessions_check(zl_sessions *s, const char *id);

/* A lease: where one request's sequence comes from and goes back to, through
 * the session `id` when non-NULL, else through the tenant's prefix cache.
 * prefill: the request is typing-ahead input (kept uncommitted).  The store
 * knows no jobs: whoever runs the request (the server, over the engine's job
 * hooks) calls acquire once before the first forward and, when it got a
 * sequence, release once at the end; both on the thread that runs forwards.
 * Returns 0, ZL_EINVAL (tenant or id too long: never cut) or ZL_ENOMEM. */
typedef struct zl_sess_lease zl_sess_lease;
int zl_sessions_lease(zl_sessions *s, const char *tenant, const char *id, int prefill, zl_sess_lease **out);
/* Hand over a sequence for prompt: its first *n_reused tokens (< n_prompt)
 * equal the prompt's (a session's or the cache's), the rest is to evaluate.
 * Returns 0, or an error code with a message in err (a session that is gone:
 * "session <status>"); on an error *seq is NULL. */
int zl_sess_lease_acquire(zl_sess_lease *l, zl_llm *llm, const zl_seq_opts *so, const int32_t *prompt,
                          int n_prompt, zl_seq **seq, int *n_reused, char *err, size_t err_cap);
/* Take seq back when the request ended: into its session (committed unless
 * prefill), or into the prefix cache; zeroed and freed when the session went
 * away meanwhile. */
void zl_sess_lease_release(zl_sess_lease *l, zl_seq *seq);
void zl_sess_lease_free(zl_sess_lease *l);

void zl_sessions_stats_get(zl_sessions *s, zl_sessions_stats *st);

/* For tests: the sequence a session holds while idle (NULL if none). */
zl_seq *zl_sessions_peek_seq(zl_sessions *s, const char *id);
/* For tests: run the sweeper once now. */
void zl_sessions_sweep(zl_sessions *s);

#endif
