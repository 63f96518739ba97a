/* session.c — see session.h.  One mutex guards the session list; sequences
 * are handed to the engine thread (acquire) and back (release) under it, and
 * zeroed/freed only while no job holds them.  A linked list scanned linearly:
 * tens to hundreds of sessions, touched once per request.  Runtime layer:
 * reaches the engine only through zerolayer.h; it knows no jobs (leases). */
#include "session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../base/assert.h"
#include "../base/clock.h"
#include "../base/err.h"

#define TOMBSTONE_MS (10 * 60 * 1000.0)
#define ZL_SPARE_PIECE ((size_t)512 << 10) /* bytes the sweeper maps between two looks at the engine */

typedef struct sess {
    char id[80], tenant[ZL_SESS_TENANT_MAX];
    zl_sess_status state;   /* OK while live, else why it is gone */
    double created_unix;
    double last_used;       /* monotonic ms */
    double gone_at;         /* monotonic ms, tombstones */
    zl_seq *seq;            /* NULL while a job holds it, or before the first request */
    int seq_out;            /* leases that took the session (their jobs hold its sequence) */
    int busy, committed;
    double prefill_at;      /* monotonic ms of uncommitted typing-ahead input, 0: none */
    char *history;
    uint8_t *coded;         /* the state coded while idle (zl_sessions_codec), seq NULL then */
    size_t coded_bytes;
    int coded_tokens;
    int coding;             /* the sweeper is coding, sealing or spilling seq without the lock: wait (wait_coding) */
    int rebuilding;         /* its request decodes its code or spill without the lock (zl_sessions_rebuild): wait */
    int rebuilt;            /* last describes a rebuild made before the lease took the sequence */
    int spilled;            /* the state is with the spill hooks (zl_sessions_spill), seq and coded NULL */
    int spilled_tokens;
    size_t stored_bytes, stored_exact; /* of the code or the spill, for zl_session_restore */
    double store_ms;
    zl_session_restore last; /* how the current (or last) request got its state */
    uint64_t version;       /* bumped whenever the state a store would hold changes */
    uint64_t saved_version; /* the version last written to the state store */
    int turns, saved_turns; /* completed requests, and their count at the last write */
    double persist_retry;   /* monotonic ms before which a failed write is not retried */
    struct sess *next;
} sess;

struct zl_sessions {
    zl_sessions_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv, home_cv;
    pthread_t sweeper;
    int stop;
    sess *head;
    zl_pcache *pcache;
    uint64_t expired_total, evicted_total;
    /* A spare sequence with its KV pages already mapped: a request that
     * needs a fresh sequence (prefix-cache hit, first turn of a session)
     * takes it instead of allocating one, so copying a cached prefix into it
     * does not page-fault every row (~30 ms for 1,500 positions of a 1.1B
     * model on a busy 2-core machine).  It is due when a job ended and there
     * is none, mapped for the longest prompt seen (at most the prefix
     * cache's size: it is only made when the cache is on).  The sweeper
     * makes it only while the engine is quiet: no job of this store holds a
     * sequence and spare_idle_ms passed since the last one ended; it maps
     * in pieces (ZL_SPARE_PIECE) and stops between two of them as soon as a
     * job starts.  Mapping it at once when a job ends (as this store once
     * did) competed with the next request, which is most often the same
     * client's next turn: tens of MB zeroed on one of the cores the forward
     * pass uses.  A fresh acquire takes the spare when it is ready, else the
     * part made so far (the rest faults on first use, as it would in a new
     * sequence); it waits at most for the piece being mapped. */
    zl_seq *spare;      /* ready: all its pieces mapped */
    zl_seq *part;       /* being made: pieces [0, part_done) of part_pieces mapped */
    zl_llm *part_llm;   /* what part is made for */
    int part_ctx, part_kv_type, part_rows, part_done, part_pieces;
    zl_llm *spare_llm;  /* what the spare is made for: the last fresh acquire's */
    int spare_ctx, spare_kv_type, spare_rows;
    int spare_due;      /* a job ended since the spare was taken: make one */
    int mapping;        /* the sweeper is creating part or mapping a piece of it, without mu */
    int in_flight;      /* jobs between acquire and release */
    int releasing;      /* hook_release calls still running (zl_sessions_free waits for them) */
    double last_end;    /* monotonic ms of the last release */
    uint64_t spare_bytes_mapped, spares_made, spares_taken, spares_taken_part;
    pthread_cond_t spare_cv;
    uint64_t coded_total, decoded_total, encoded_bytes, decoded_bytes;
    double encode_ms, decode_ms;
    uint64_t spilled_total, unspilled_total, spill_failed_total, encoded_exact_bytes;
    double spill_ms, unspill_ms;
    int spill_due; /* the idle KV went over budget: the sweeper spills (spill_over_budget) */
    uint64_t persisted_total, persist_failed_total;
    double persist_seal_ms, persist_put_ms;
};

struct zl_sess_lease {
    zl_sessions *s;
    char tenant[ZL_SESS_TENANT_MAX], id[80];
    int has_id, prefill;
    int took; /* acquire counted itself in the session's seq_out; release (or a failed acquire) uncounts */
};

/* The session state machine, after SQLite's assert_pager_state.  States of a
 * live session (state OK), each named by its fields, and the one function
 * for every transition:
 *
 *   idle    seq (or coded, or neither before the first request)
 *   busy    a request runs on it           zl_sessions_begin -> zl_sessions_end
 *   out     its sequence is a job's        zl_sess_lease_acquire -> _release
 *   coding  the sweeper reads its seq      code_one (idle, not busy, not out)
 *   rebuilding  its request decodes it     zl_sessions_rebuild (busy, not out, no seq)
 *
 * and the tombstone (EXPIRED, EVICTED, DELETED), entered once from a live
 * state by sess_kill and left only by the sweep that frees it.  sess_ok
 * checks, under mu, what holds between two calls:
 *   S1  state is OK or a tombstone kind;
 *   S2  a tombstone holds no coded state and no history, and a sequence only
 *       while the sweeper codes it (it destroys it then);
 *   S3  sequence ownership: a sequence has one owner at a time; the store
 *       holds at most one of seq and coded; a lease takes the session's
 *       sequence (out: seq_out counts the leases that took it) and its
 *       release puts the job's sequence back only where the session holds
 *       none (two leases may overlap: typing-ahead during a request);
 *   S4  coding reads a sequence the store holds: seq set, nothing out;
 *       rebuilding makes one the store does not hold yet: busy, no seq,
 *       nothing out, not coding;
 *   S5  committed tokens are tokens the held sequence has. */
#if ZL_ASSERTS
static int sess_ok(const sess *x) {
    int live = x->state == ZL_SESS_OK;
    ZL_ASSERT(live || x->state == ZL_SESS_EXPIRED || x->state == ZL_SESS_EVICTED || x->state == ZL_SESS_DELETED);
    ZL_ASSERT(live || (!x->coded && !x->history && (!x->seq || x->coding)));
    ZL_ASSERT(!(x->seq && x->coded) && x->seq_out >= 0);
    ZL_ASSERT(!x->coding || (x->seq && !x->seq_out));
    ZL_ASSERT(!x->rebuilding || ((!live || x->busy) && !x->seq && !x->seq_out && !x->coding));
    ZL_ASSERT(x->committed >= 0 && (!live || !x->seq || x->coding || x->committed <= zl_seq_n_past(x->seq)));
    return 1;
}
#else
#define sess_ok(x) 1 /* ZL_ASSERT does not evaluate it */
#endif

const char *zl_sess_status_name(zl_sess_status st) {
    static const char *const n[] = {"ok", "unknown", "forbidden", "expired", "evicted", "deleted", "busy", "limit"};
    return st <= ZL_SESS_LIMIT ? n[st] : "?";
}

static void seq_destroy(zl_seq *q) {
    if (!q) return;
    zl_seq_truncate(q, 0); /* zeroes every cached row before the memory goes back */
    zl_seq_free(q);
}

/* Zero and free a session unlinked from the list, with all it holds. */
static void sess_destroy(sess *x) {
    seq_destroy(x->seq);
    free(x->coded);
    free(x->history);
    free(x);
}

/* Under mu: turn a live session into a tombstone. */
static void sess_kill(zl_sessions *s, sess *x, zl_sess_status why) {
    if (x->state != ZL_SESS_OK) return;
    ZL_ASSERT(why == ZL_SESS_EXPIRED || why == ZL_SESS_EVICTED || why == ZL_SESS_DELETED); /* live -> tombstone */
    x->state = why;
    x->gone_at = zl_now_ms();
    if (!x->coding) { /* else the sweeper, still reading it, destroys it */
        seq_destroy(x->seq);
        x->seq = NULL;
    }
    free(x->coded);
    x->coded = NULL;
    if (x->spilled) s->o.spill.drop(s->o.spill.ud, x->id, x->tenant);
    x->spilled = 0;
    free(x->history);
    x->history = NULL;
    if (why == ZL_SESS_EXPIRED) s->expired_total++;
    if (why == ZL_SESS_EVICTED) s->evicted_total++;
    ZL_ASSERT(sess_ok(x));
}

static sess *find(zl_sessions *s, const char *id) {
    for (sess *x = s->head; x; x = x->next)
        if (!strcmp(x->id, id)) return x;
    return NULL;
}

static void fill_info(const zl_sessions *s, const sess *x, zl_session_info *info) {
    if (!info) return;
    memset(info, 0, sizeof *info);
    snprintf(info->id, sizeof info->id, "%s", x->id);
    double now = zl_now_ms(), wall = zl_wall_s();
    info->created_unix = x->created_unix;
    info->last_used_unix = wall - (now - x->last_used) / 1e3;
    info->expires_unix = info->last_used_unix + s->o.ttl_s;
    info->n_tokens = x->seq ? zl_seq_n_past(x->seq) : x->coded ? x->coded_tokens : x->spilled ? x->spilled_tokens : 0;
    info->committed = x->committed;
    info->kv_bytes = x->seq ? zl_seq_kv_bytes_used(x->seq) : x->coded_bytes;
    info->busy = x->busy;
}

/* Under mu: a request just ended, but the engine thread gives the sequence
 * back only when it reaps the job (next step); wait for that so info and
 * flush see (and zero) the real state. */
static void wait_home(zl_sessions *s, sess *x) {
    struct timespec ts = zl_deadline_ms(2000);
    while (x->state == ZL_SESS_OK && x->seq_out && !x->busy)
        if (pthread_cond_timedwait(&s->home_cv, &s->mu, &ts)) break;
}

/* Under mu: until the sweeper has finished coding x (or its request
 * rebuilding it). */
static void wait_coding(zl_sessions *s, sess *x) {
    while (x->coding || x->rebuilding) pthread_cond_wait(&s->home_cv, &s->mu);
}

/* Under mu: a live session of this tenant, or why not. */
static zl_sess_status lookup(zl_sessions *s, const char *id, const char *tenant, sess **out) {
    sess *x = find(s, id);
    *out = x;
    if (!x) return ZL_SESS_UNKNOWN;
    ZL_ASSERT(sess_ok(x));
    if (tenant && strcmp(x->tenant, tenant)) return ZL_SESS_TENANT;
    return x->state;
}

/* K+V bytes of q's tokens in its cache's own type. */
static size_t exact_bytes(const zl_seq *q) {
    zl_kv_stats ks;
    zl_seq_kv_stats(q, &ks);
    return (size_t)ks.bytes_per_token * (size_t)zl_seq_n_past(q);
}

/* Under mu: the idle KV bytes, and the least recently used idle session
 * holding some (spill: one that can be spilled now), or NULL. */
static size_t idle_bytes(const zl_sessions *s, int spill, sess **lru) {
    size_t total = 0;
    *lru = NULL;
    for (sess *x = s->head; x; x = x->next) {
        if (x->state != ZL_SESS_OK || (!x->seq && !x->coded)) continue;
        total += x->seq ? zl_seq_kv_bytes_used(x->seq) : x->coded_bytes;
        int held = x->coded || zl_seq_n_past(x->seq) > 0;
        if (spill) held = held && !x->seq_out && !x->coding && !x->prefill_at;
        if (!x->busy && held && (!*lru || x->last_used < (*lru)->last_used)) *lru = x;
    }
    return total;
}

/* Under mu: evict least-recently-used idle sessions while the idle KV is
 * over budget; with spill hooks leave that to the sweeper (spill_over_budget:
 * sealing a session is too slow for the engine thread that calls this). */
static void enforce_budget(zl_sessions *s) {
    for (;;) {
        sess *lru;
        size_t total = idle_bytes(s, 0, &lru);
        if (total <= s->o.kv_budget || !lru) return;
        if (s->o.spill.put) {
            s->spill_due = 1;
            pthread_cond_signal(&s->cv);
            return;
        }
        sess_kill(s, lru, ZL_SESS_EVICTED);
    }
}

/* Under mu: is the state store behind this session? */
static int persist_pending(const zl_sessions *s, const sess *x) {
    return s->o.persist.put && x->version != x->saved_version;
}

/* Under mu: will the sweeper write x while it stays idle?  Coding waits
 * for that write (the seal callback reads a sequence, not a code); a
 * session that only shutdown or its next turns will write is coded
 * meanwhile (zl_sessions_copy_state reads codes too). */
static int persist_awaited(const zl_sessions *s, const sess *x) {
    const zl_sessions_persist *p = &s->o.persist;
    return persist_pending(s, x) &&
           (p->idle_s > 0 || (p->every_turns > 0 && x->turns - x->saved_turns >= p->every_turns));
}

/* Under mu: is x due for a write now? */
static int persist_due(const zl_sessions *s, const sess *x, double now) {
    const zl_sessions_persist *p = &s->o.persist;
    if (!persist_pending(s, x) || x->state != ZL_SESS_OK || x->busy || x->seq_out || x->coding || !x->seq ||
        x->prefill_at || now < x->persist_retry)
        return 0;
    return (p->idle_s > 0 && now - x->last_used >= p->idle_s * 1e3) ||
           (p->every_turns > 0 && x->turns - x->saved_turns >= p->every_turns);
}

/* Under mu (dropped while sealing and writing): write the sessions that are
 * due, oldest first, at most a few a sweep so expiry is never held up long. */
static void persist_some(zl_sessions *s) {
    const zl_sessions_persist *p = &s->o.persist;
    if (!p->put) return;
    for (int k = 0; k < 4; k++) {
        double now = zl_now_ms(), wall = zl_wall_s();
        sess *x = NULL;
        for (sess *y = s->head; y; y = y->next)
            if (persist_due(s, y, now) && (!x || y->last_used < x->last_used)) x = y;
        if (!x) return;
        zl_session_ref ref;
        snprintf(ref.id, sizeof ref.id, "%s", x->id);
        snprintf(ref.tenant, sizeof ref.tenant, "%s", x->tenant);
        ref.created_unix = x->created_unix;
        ref.last_used_unix = wall - (now - x->last_used) / 1e3;
        uint64_t version = x->version;
        int turns = x->turns;
        char *hist = x->history ? strdup(x->history) : NULL;
        int oom = x->history && !hist;
        x->coding = 1;
        zl_seq *q = x->seq;
        pthread_mutex_unlock(&s->mu);
        uint8_t *blob = NULL;
        size_t n = 0;
        double t0 = zl_now_ms();
        int rc = oom ? ZL_ENOMEM : p->seal(p->ud, &ref, q, hist, &blob, &n);
        double t1 = zl_now_ms();
        free(hist);
        pthread_mutex_lock(&s->mu);
        x->coding = 0;
        if (x->state != ZL_SESS_OK) { /* killed meanwhile: its sequence was left to us */
            seq_destroy(q);
            x->seq = NULL;
            rc = ZL_EINVAL;
        }
        pthread_cond_broadcast(&s->home_cv);
        if (!rc) {
            pthread_mutex_unlock(&s->mu);
            rc = p->put(p->ud, &ref, blob, n);
            pthread_mutex_lock(&s->mu);
        }
        free(blob);
        s->persist_seal_ms += t1 - t0;
        s->persist_put_ms += zl_now_ms() - t1;
        if (rc) {
            s->persist_failed_total++;
            /* x may have gone meanwhile (a tombstone stays in the list for minutes, so the pointer is good) */
            x->persist_retry = zl_now_ms() + ZL_SESS_PERSIST_RETRY_MS;
            continue;
        }
        s->persisted_total++;
        if (x->saved_version < version) x->saved_version = version;
        if (x->saved_turns < turns) x->saved_turns = turns;
    }
}

/* Under mu (dropped while each put runs): spill least-recently-used idle
 * sessions while the idle KV is over budget; a failed put evicts. */
static void spill_over_budget(zl_sessions *s) {
    const zl_sessions_spill *sp = &s->o.spill;
    if (!sp->put || !s->spill_due) return;
    s->spill_due = 0;
    for (;;) {
        sess *x;
        if (idle_bytes(s, 1, &x) <= s->o.kv_budget || !x) return;
        x->coding = 1;
        zl_seq *q = x->seq;
        uint8_t *code = x->coded; /* ours while put reads it: a kill meanwhile must not free it */
        size_t bytes = x->coded_bytes;
        int n = q ? zl_seq_n_past(q) : x->coded_tokens;
        size_t exact = q ? exact_bytes(q) : x->stored_exact, stored = 0;
        char id[sizeof x->id], tenant[sizeof x->tenant], *hist = x->history ? strdup(x->history) : NULL;
        memcpy(id, x->id, sizeof id);
        memcpy(tenant, x->tenant, sizeof tenant);
        double created = x->created_unix, last = zl_wall_s() - (zl_now_ms() - x->last_used) / 1e3;
        uint64_t version = x->version;
        int turns = x->turns;
        x->coded = NULL;
        pthread_mutex_unlock(&s->mu);
        double t0 = zl_now_ms();
        int rc = sp->put(sp->ud, id, tenant, created, last, q, code, bytes, hist, &stored);
        double ms = zl_now_ms() - t0;
        free(hist);
        pthread_mutex_lock(&s->mu);
        x->coding = 0;
        if (!rc && x->state == ZL_SESS_OK) { /* the store has it as it is: a written session too */
            if (x->saved_version < version) x->saved_version = version;
            if (x->saved_turns < turns) x->saved_turns = turns;
        }
        if (x->state != ZL_SESS_OK) { /* killed meanwhile: its sequence was left to us */
            if (!rc) sp->drop(sp->ud, id, tenant);
            seq_destroy(q);
            x->seq = NULL;
            free(code);
        } else if (x->busy) { /* a request is about to use it: keep it here (the store's copy stays current) */
            x->coded = code;
        } else if (rc) {
            x->coded = code;
            s->spill_failed_total++;
            sess_kill(s, x, ZL_SESS_EVICTED);
        } else {
            x->seq = NULL;
            seq_destroy(q);
            free(code);
            x->coded_bytes = 0;
            x->spilled = 1;
            x->spilled_tokens = n;
            x->stored_bytes = stored;
            x->stored_exact = exact;
            x->store_ms = ms;
            s->spilled_total++;
            s->spill_ms += ms;
        }
        pthread_cond_broadcast(&s->home_cv);
    }
}

/* Under mu (dropped while coding): code the session idle longest past
 * codec.idle_s, if any.  One a sweep, so expiry is never held up long. */
static void code_one(zl_sessions *s) {
    const zl_sessions_codec *c = &s->o.codec;
    if (!c->encode || c->idle_s <= 0) return;
    double now = zl_now_ms();
    sess *x = NULL;
    for (sess *y = s->head; y; y = y->next)
        if (y->state == ZL_SESS_OK && !y->busy && !y->seq_out && !y->coding && y->seq && !y->prefill_at &&
            zl_seq_n_past(y->seq) > 0 && now - y->last_used > c->idle_s * 1e3 && !persist_awaited(s, y) &&
            (!x || y->last_used < x->last_used))
            x = y;
    if (!x) return;
    ZL_ASSERT(sess_ok(x) && !x->coded); /* idle -> coding */
    x->coding = 1;
    zl_seq *q = x->seq;
    pthread_mutex_unlock(&s->mu);
    uint8_t *code = NULL;
    size_t bytes = 0;
    double t0 = zl_now_ms();
    int rc = c->encode(c->ud, q, &code, &bytes);
    double ms = zl_now_ms() - t0;
    pthread_mutex_lock(&s->mu);
    x->coding = 0;
    if (x->state != ZL_SESS_OK) { /* killed meanwhile: its sequence was left to us */
        seq_destroy(q);
        x->seq = NULL;
        free(code);
    } else if (rc || x->busy) { /* a request is about to use it: keep the sequence */
        free(code);
    } else {
        x->coded = code;
        x->coded_bytes = bytes;
        x->coded_tokens = zl_seq_n_past(q);
        x->stored_bytes = bytes;
        x->stored_exact = exact_bytes(q);
        x->store_ms = ms;
        s->encoded_exact_bytes += x->stored_exact;
        x->seq = NULL;
        seq_destroy(q);
        s->coded_total++;
        s->encoded_bytes += bytes;
        s->encode_ms += ms;
    }
    ZL_ASSERT(sess_ok(x)); /* coding -> idle, or the tombstone it became meanwhile */
    pthread_cond_broadcast(&s->home_cv);
}

void zl_sessions_sweep(zl_sessions *s) {
    pthread_mutex_lock(&s->mu);
    double now = zl_now_ms();
    for (sess **pp = &s->head; *pp;) {
        sess *x = *pp;
        if (x->state != ZL_SESS_OK) {
            if (now - x->gone_at > TOMBSTONE_MS) {
                *pp = x->next;
                free(x);
                continue;
            }
        } else if (!x->busy && now - x->last_used > s->o.ttl_s * 1e3) {
            sess_kill(s, x, ZL_SESS_EXPIRED);
        } else if (!x->busy && x->seq && x->prefill_at > 0 && now - x->prefill_at > s->o.prefill_idle_s * 1e3) {
            zl_seq_truncate(x->seq, x->committed); /* typing-ahead input nobody followed up */
            x->prefill_at = 0;
        }
        pp = &x->next;
    }
    persist_some(s);
    code_one(s);
    spill_over_budget(s);
    pthread_mutex_unlock(&s->mu);
}

/* Map (fault in) n bytes at p.  The memory is zero and stays zero: one
 * MADV_POPULATE_WRITE where the kernel has it (Linux 5.14; about twice as
 * fast as touching each page), else a write of zeros. */
static void map_pages(void *p, size_t n) {
    if (!n) return;
#ifdef __linux__
    uintptr_t pg = 4096, a = ((uintptr_t)p + pg - 1) & ~(pg - 1), e = ((uintptr_t)p + n) & ~(pg - 1);
    if (e > a && !madvise((void *)a, e - a, 23 /* MADV_POPULATE_WRITE */)) {
        memset(p, 0, a - (uintptr_t)p); /* the partial pages at both ends */
        memset((void *)e, 0, (uintptr_t)p + n - e);
        return;
    }
#endif
    memset(p, 0, n);
}

/* Under mu: no job holds a sequence and the last one ended spare_idle_ms ago. */
static int engine_quiet(const zl_sessions *s, double now) {
    return !s->in_flight && now - s->last_end >= s->o.spare_idle_ms;
}

/* Under mu: is there spare work the sweeper would do once the engine is quiet? */
static int spare_pending(const zl_sessions *s) {
    return s->part || (s->spare_due && !s->spare && s->spare_llm);
}

/* Under mu: the bytes of piece p of the part (zl_seq_kv_piece), at *at. */
static size_t part_piece(const zl_sessions *s, int p, void **at) {
    return zl_seq_kv_piece(s->part, s->part_rows, ZL_SPARE_PIECE, p, at);
}

/* Under mu, on the sweeper: make the spare while the engine stays quiet.
 * The allocation and each piece's page faults run without the lock. */
static void spare_work(zl_sessions *s) {
    while (!s->stop && !s->mapping && engine_quiet(s, zl_now_ms())) {
        if (!s->part) {
            if (!s->spare_due || s->spare || !s->spare_llm) return;
            s->spare_due = 0;
            s->mapping = 1;
            zl_llm *llm = s->spare_llm;
            zl_seq_opts so = {.n_ctx = s->spare_ctx, .kv_type = (zl_kv_type)s->spare_kv_type,
                              .sampling = zl_sampling_defaults()};
            int rows = s->spare_rows < s->spare_ctx ? s->spare_rows : s->spare_ctx;
            pthread_mutex_unlock(&s->mu);
            zl_seq *q = NULL;
            int rc = zl_seq_new(&q, llm, &so, NULL);
            pthread_mutex_lock(&s->mu);
            s->mapping = 0;
            pthread_cond_broadcast(&s->spare_cv);
            if (rc) return;
            if (s->stop || s->spare || s->spare_llm != llm || s->spare_ctx != so.n_ctx ||
                s->spare_kv_type != (int)so.kv_type) {
                pthread_mutex_unlock(&s->mu);
                zl_seq_free(q); /* never used: nothing to zero */
                pthread_mutex_lock(&s->mu);
                return;
            }
            /* never more than the largest prefix the cache can hold (and copy) */
            zl_kv_stats ks;
            zl_seq_kv_stats(q, &ks);
            size_t per_row = (size_t)ks.bytes_per_token;
            if ((size_t)rows > s->o.pcache_bytes / per_row) rows = (int)(s->o.pcache_bytes / per_row);
            s->part = q;
            s->part_llm = llm;
            s->part_ctx = so.n_ctx;
            s->part_kv_type = (int)so.kv_type;
            s->part_rows = rows;
            s->part_done = 0;
            s->part_pieces = zl_seq_kv_n_pieces(q, rows, ZL_SPARE_PIECE);
            continue;
        }
        zl_seq *q = s->part;
        int fits = s->part_llm == s->spare_llm && s->part_ctx == s->spare_ctx && s->part_kv_type == s->spare_kv_type;
        if (!fits || s->part_done >= s->part_pieces) {
            s->part = NULL;
            if (fits && !s->spare) {
                s->spare = q;
                s->spares_made++;
                pthread_cond_broadcast(&s->spare_cv);
                return;
            }
            pthread_mutex_unlock(&s->mu);
            zl_seq_free(q); /* never used: nothing to zero */
            pthread_mutex_lock(&s->mu);
            continue;
        }
        void *at;
        size_t n = part_piece(s, s->part_done, &at);
        s->mapping = 1;
        pthread_mutex_unlock(&s->mu);
        map_pages(at, n);
        pthread_mutex_lock(&s->mu);
        s->mapping = 0;
        s->part_done++;
        s->spare_bytes_mapped += n;
        pthread_cond_broadcast(&s->spare_cv);
    }
}

static void *sweeper_main(void *arg) {
    zl_sessions *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        /* wake every 100 ms for expiry, sooner when spare work becomes allowed */
        double wait_ms = 100;
        if (spare_pending(s) && !s->in_flight) {
            double left = s->last_end + s->o.spare_idle_ms - zl_now_ms();
            if (left < wait_ms) wait_ms = left < 1 ? 1 : left;
        }
        struct timespec ts = zl_deadline_ms((long)wait_ms);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        if (s->stop) break;
        spare_work(s);
        if (s->stop) break;
        pthread_mutex_unlock(&s->mu);
        zl_sessions_sweep(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int zl_sessions_new(zl_sessions **out, const zl_sessions_opts *o, zl_err *err) {
    *out = NULL;
    zl_sessions *s = calloc(1, sizeof *s);
    if (!s) return zl_errf(err, ZL_ENOMEM, "out of memory");
    s->o = *o;
    if (s->o.ttl_s <= 0) s->o.ttl_s = 120;
    if (s->o.prefill_idle_s <= 0) s->o.prefill_idle_s = 3;
    if (s->o.max_per_tenant <= 0) s->o.max_per_tenant = 16;
    if (!s->o.kv_budget) s->o.kv_budget = (size_t)1 << 30;
    if (s->o.spare_idle_ms == 0) s->o.spare_idle_ms = 100;
    if (s->o.spare_idle_ms < 0) s->o.spare_idle_ms = 0;
    int rc = zl_pcache_new(&s->pcache, s->o.pcache_bytes, s->o.pcache_block, err);
    if (rc) { free(s); return rc; }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->home_cv, NULL);
    pthread_cond_init(&s->spare_cv, NULL);
    if (pthread_create(&s->sweeper, NULL, sweeper_main, s)) {
        zl_pcache_free(s->pcache);
        free(s);
        return zl_errf(err, ZL_ENOMEM, "cannot start the session sweeper");
    }
    *out = s;
    return 0;
}

void zl_sessions_free(zl_sessions *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    /* a job's release may still be running on the engine thread after its
     * reader saw it end (the engine publishes the end first) */
    while (s->in_flight > 0 || s->releasing > 0) pthread_cond_wait(&s->home_cv, &s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->sweeper, NULL);
    while (s->head) {
        sess *x = s->head;
        s->head = x->next;
        sess_destroy(x);
    }
    zl_seq_free(s->spare); /* never used: nothing to zero */
    zl_seq_free(s->part);
    zl_pcache_free(s->pcache);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->home_cv);
    pthread_cond_destroy(&s->spare_cv);
    free(s);
}

const zl_sessions_opts *zl_sessions_get_opts(const zl_sessions *s) { return &s->o; }

zl_sess_status zl_sessions_create(zl_sessions *s, const char *id, const char *tenant, double created_unix,
                                  zl_session_info *info) {
    if (strlen(tenant) >= ZL_SESS_TENANT_MAX) return ZL_SESS_TENANT; /* never cut: two tenants would become one */
    sess *x = calloc(1, sizeof *x);
    if (!x) return ZL_SESS_LIMIT;
    snprintf(x->id, sizeof x->id, "%s", id);
    snprintf(x->tenant, sizeof x->tenant, "%s", tenant);
    x->created_unix = created_unix;
    x->last_used = zl_now_ms();
    pthread_mutex_lock(&s->mu);
    sess *same = find(s, id);
    if (same && same->state == ZL_SESS_OK) { /* a restore racing another (load on a miss): one wins */
        pthread_mutex_unlock(&s->mu);
        free(x);
        return ZL_SESS_BUSY;
    }
    int live = 0;
    sess *lru = NULL;
    for (sess *y = s->head; y; y = y->next) {
        if (y->state != ZL_SESS_OK || strcmp(y->tenant, tenant)) continue;
        live++;
        if (!y->busy && (!lru || y->last_used < lru->last_used)) lru = y;
    }
    if (live >= s->o.max_per_tenant) {
        if (!lru) {
            pthread_mutex_unlock(&s->mu);
            free(x);
            return ZL_SESS_LIMIT;
        }
        sess_kill(s, lru, ZL_SESS_EVICTED);
    }
    x->next = s->head;
    s->head = x;
    fill_info(s, x, info);
    pthread_mutex_unlock(&s->mu);
    return ZL_SESS_OK;
}

zl_sess_status zl_sessions_info(zl_sessions *s, const char *id, const char *tenant, zl_session_info *info) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup(s, id, tenant, &x);
    if (st == ZL_SESS_OK) wait_home(s, x);
    if (st == ZL_SESS_OK && x->state != ZL_SESS_OK) st = x->state;
    if (st == ZL_SESS_OK) fill_info(s, x, info);
    pthread_mutex_unlock(&s->mu);
    return st;
}

zl_sess_status zl_sessions_delete(zl_sessions *s, const char *id, const char *tenant) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup(s, id, tenant, &x);
    if (st == ZL_SESS_OK) sess_kill(s, x, ZL_SESS_DELETED); /* a running job's sequence is zeroed when it comes back */
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* The caller's session once its sequence is home and not being coded (under
 * s->mu): BUSY while a request holds it. */
static zl_sess_status lookup_idle(zl_sessions *s, const char *id, const char *tenant, sess **out) {
    sess *x = NULL;
    zl_sess_status st = lookup(s, id, tenant, &x);
    if (st == ZL_SESS_OK) wait_home(s, x);
    if (st == ZL_SESS_OK && x->state != ZL_SESS_OK) st = x->state;
    if (st == ZL_SESS_OK) wait_coding(s, x);
    if (st == ZL_SESS_OK && x->state != ZL_SESS_OK) st = x->state;
    if (st == ZL_SESS_OK && (x->busy || x->seq_out)) st = ZL_SESS_BUSY;
    *out = x;
    return st;
}

zl_sess_status zl_sessions_flush(zl_sessions *s, const char *id, const char *tenant) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup_idle(s, id, tenant, &x);
    if (st == ZL_SESS_OK) {
        if (x->seq) zl_seq_truncate(x->seq, 0);
        free(x->coded);
        x->coded = NULL;
        x->coded_bytes = 0;
        if (x->spilled) s->o.spill.drop(s->o.spill.ud, x->id, x->tenant);
        x->spilled = 0;
        x->committed = 0;
        x->prefill_at = 0;
        free(x->history);
        x->history = NULL;
        x->last_used = zl_now_ms();
        x->version++;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

zl_sess_status zl_sessions_forget(zl_sessions *s, const char *id, const char *tenant) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup_idle(s, id, tenant, &x);
    if (st == ZL_SESS_OK) {
        for (sess **pp = &s->head; *pp; pp = &(*pp)->next)
            if (*pp == x) {
                *pp = x->next;
                break;
            }
        sess_destroy(x);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

zl_sess_status zl_sessions_begin(zl_sessions *s, const char *id, const char *tenant) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup(s, id, tenant, &x);
    if (st == ZL_SESS_OK && !x->busy && zl_now_ms() - x->last_used > s->o.ttl_s * 1e3) {
        sess_kill(s, x, ZL_SESS_EXPIRED); /* the sweeper had not got to it yet */
        st = ZL_SESS_EXPIRED;
    }
    if (st == ZL_SESS_OK && x->busy) st = ZL_SESS_BUSY;
    if (st == ZL_SESS_OK) {
        ZL_ASSERT(!x->busy); /* one request at a time: idle -> busy */
        x->busy = 1;
        x->last_used = zl_now_ms();
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

void zl_sessions_rebuild(zl_sessions *s, const char *id, zl_llm *llm, const zl_seq_opts *so) {
    pthread_mutex_lock(&s->mu);
    sess *x = find(s, id);
    if (x && x->state == ZL_SESS_OK) wait_coding(s, x);
    if (!x || x->state != ZL_SESS_OK || !x->busy || x->seq || x->seq_out || (!x->coded && !x->spilled)) {
        pthread_mutex_unlock(&s->mu);
        return; /* nothing to rebuild, or its lease's acquire does it */
    }
    uint8_t *code = x->coded;
    size_t bytes = x->coded_bytes;
    /* x->spilled stays set meanwhile: a kill drops the record */
    x->coded = NULL;
    x->coded_bytes = 0;
    x->rebuilding = 1;
    x->rebuilt = 1;
    x->last = (zl_session_restore){code ? ZL_SESS_FROM_CODE : ZL_SESS_FROM_SPILL, 1,
                                   code ? x->coded_tokens : x->spilled_tokens, x->stored_bytes, x->stored_exact,
                                   x->store_ms, 0};
    char tenant[ZL_SESS_TENANT_MAX];
    snprintf(tenant, sizeof tenant, "%s", x->tenant);
    ZL_ASSERT(sess_ok(x));
    pthread_mutex_unlock(&s->mu);
    zl_err ce = {0};
    zl_seq *q = NULL;
    double t0 = zl_now_ms();
    int rc = zl_seq_new(&q, llm, so, &ce);
    if (!rc) rc = code ? s->o.codec.decode(s->o.codec.ud, q, code, bytes) : s->o.spill.get(s->o.spill.ud, id, tenant, q);
    if (rc) {
        seq_destroy(q); /* the request prefills its prompt */
        q = NULL;
    }
    double ms = zl_now_ms() - t0;
    free(code);
    pthread_mutex_lock(&s->mu);
    x->rebuilding = 0;
    if (code) s->decoded_total++, s->decoded_bytes += bytes, s->decode_ms += ms;
    else s->unspilled_total++, s->unspill_ms += ms;
    x->last.ok = q != NULL;
    x->last.load_ms = ms;
    if (x->state != ZL_SESS_OK) {
        seq_destroy(q); /* killed meanwhile */
    } else {
        x->spilled = 0; /* as an acquire: the stored copy stays, it is the session as last written */
        x->seq = q;
    }
    ZL_ASSERT(sess_ok(x));
    pthread_cond_broadcast(&s->home_cv);
    pthread_mutex_unlock(&s->mu);
}

void zl_sessions_end(zl_sessions *s, const char *id, const char *history, size_t len) {
    pthread_mutex_lock(&s->mu);
    sess *x = find(s, id);
    if (x && x->state == ZL_SESS_OK) {
        x->busy = 0;
        x->last_used = zl_now_ms();
        if (history) {
            char *h = malloc(len + 1);
            if (h) {
                memcpy(h, history, len);
                h[len] = 0;
                free(x->history);
                x->history = h;
                x->version++;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
}

char *zl_sessions_history(zl_sessions *s, const char *id, const char *tenant) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    char *h = NULL;
    if (lookup(s, id, tenant, &x) == ZL_SESS_OK && x->history) h = strdup(x->history);
    pthread_mutex_unlock(&s->mu);
    return h;
}

zl_sess_status zl_sessions_restore_info(zl_sessions *s, const char *id, zl_session_restore *out) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup(s, id, NULL, &x);
    memset(out, 0, sizeof *out);
    if (x) *out = x->last;
    pthread_mutex_unlock(&s->mu);
    return st;
}

zl_sess_status zl_sessions_check(zl_sessions *s, const char *id) {
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup(s, id, NULL, &x);
    if (st == ZL_SESS_OK && zl_now_ms() - x->last_used > s->o.ttl_s * 1e3) {
        sess_kill(s, x, ZL_SESS_EXPIRED);
        st = ZL_SESS_EXPIRED;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* ---------------- leases (engine thread) ---------------- */

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* A fresh sequence for a job: the spare (or the part of it made so far)
 * when it fits, else a new one.  Engine thread. */
static int fresh_seq(zl_sessions *s, zl_llm *llm, const zl_seq_opts *so, int n_prompt, zl_seq **out, zl_err *e) {
    zl_seq *q = NULL, *stale = NULL, *stale_part = NULL;
    if (!s->o.pcache_bytes) return zl_seq_new(out, llm, so, e); /* no cache: nothing to copy into a spare */
    pthread_mutex_lock(&s->mu);
    if (s->mapping) { /* one piece (or the allocation): cheaper to wait than to fault a new sequence */
        struct timespec ts = zl_deadline_ms(200);
        while (s->mapping)
            if (pthread_cond_timedwait(&s->spare_cv, &s->mu, &ts)) break;
    }
    int fits = s->spare_llm == llm && s->spare_ctx == so->n_ctx && s->spare_kv_type == (int)so->kv_type;
    if (!fits) {
        stale = s->spare;
        s->spare = NULL;
        if (!s->mapping) {
            stale_part = s->part;
            s->part = NULL;
        }
        s->spare_llm = llm;
        s->spare_ctx = so->n_ctx;
        s->spare_kv_type = (int)so->kv_type;
        s->spare_rows = 0;
    }
    if (s->spare) {
        q = s->spare;
        s->spare = NULL;
        s->spares_taken++;
    } else if (s->part && !s->mapping && s->part_llm == llm && s->part_ctx == so->n_ctx &&
               s->part_kv_type == (int)so->kv_type) {
        q = s->part;
        s->part = NULL;
        s->spares_taken++;
        s->spares_taken_part++;
    }
    /* the prompt's rows (generated tokens fault one row at a time, unnoticed) */
    int rows = (n_prompt + 63) / 64 * 64;
    if (rows > s->spare_rows) s->spare_rows = rows > so->n_ctx ? so->n_ctx : rows;
    pthread_mutex_unlock(&s->mu);
    zl_seq_free(stale);
    zl_seq_free(stale_part);
    if (q && zl_seq_set_sampling(q, &so->sampling, e)) {
        zl_seq_free(q);
        return e->code;
    }
    if (q) {
        *out = q;
        return 0;
    }
    return zl_seq_new(out, llm, so, e);
}

static int acquire_seq(zl_sess_lease *h, zl_llm *llm, const zl_seq_opts *so, const int32_t *prompt, int n_prompt,
                       zl_seq **seq, int *n_reused, char *err, size_t cap) {
    zl_sessions *s = h->s;
    zl_seq *q = NULL;
    *seq = NULL;
    *n_reused = 0;
    if (h->has_id) {
        pthread_mutex_lock(&s->mu);
        sess *x;
        zl_sess_status st = lookup(s, h->id, h->tenant, &x);
        if (st == ZL_SESS_OK) wait_coding(s, x);
        if (st == ZL_SESS_OK && x->state != ZL_SESS_OK) st = x->state;
        uint8_t *code = NULL;
        size_t bytes = 0;
        int spilled = 0;
        if (st == ZL_SESS_OK) {
            ZL_ASSERT(!x->coding && !h->took); /* a lease takes its session once: -> out */
            q = x->seq;
            x->seq = NULL;
            x->seq_out++;
            h->took = 1;
            code = x->coded;
            bytes = x->coded_bytes;
            x->coded = NULL;
            x->coded_bytes = 0;
            spilled = x->spilled;
            x->spilled = 0; /* ours now */
            if (!x->rebuilt || code || spilled)
                x->last = (zl_session_restore){code ? ZL_SESS_FROM_CODE : spilled ? ZL_SESS_FROM_SPILL : ZL_SESS_FROM_MEMORY,
                                               1, code ? x->coded_tokens : spilled ? x->spilled_tokens : 0,
                                               code || spilled ? x->stored_bytes : 0, code || spilled ? x->stored_exact : 0,
                                               code || spilled ? x->store_ms : 0, 0};
            x->rebuilt = 0; /* a rebuild's record stands for this request only */
            ZL_ASSERT(sess_ok(x));
        }
        pthread_mutex_unlock(&s->mu);
        if (spilled) { /* bring the spilled state back; on failure the request simply prefills its prompt */
            zl_err ce = {0};
            double t0 = zl_now_ms();
            if (zl_seq_new(&q, llm, so, &ce) || s->o.spill.get(s->o.spill.ud, h->id, h->tenant, q)) {
                seq_destroy(q);
                q = NULL;
            }
            /* the stored copy stays: it is the session as last written (zl_sessions_persist) */
            double ms = zl_now_ms() - t0;
            pthread_mutex_lock(&s->mu);
            s->unspilled_total++;
            s->unspill_ms += ms;
            x->last.ok = q != NULL; /* x outlives this: tombstones stay for minutes, and only the sweeper frees them */
            x->last.load_ms = ms;
            pthread_mutex_unlock(&s->mu);
        }
        if (code) { /* rebuild the coded state; on failure the request simply prefills its prompt */
            zl_err ce = {0};
            double t0 = zl_now_ms();
            if (zl_seq_new(&q, llm, so, &ce) || s->o.codec.decode(s->o.codec.ud, q, code, bytes)) {
                seq_destroy(q);
                q = NULL;
            }
            double ms = zl_now_ms() - t0;
            free(code);
            pthread_mutex_lock(&s->mu);
            s->decoded_total++;
            s->decoded_bytes += bytes;
            s->decode_ms += ms;
            x->last.ok = q != NULL;
            x->last.load_ms = ms;
            pthread_mutex_unlock(&s->mu);
        }
        if (st != ZL_SESS_OK) {
            snprintf(err, cap, "session %s", zl_sess_status_name(st));
            return ZL_EINVAL;
        }
    }
    zl_err e = {0};
    /* no session sequence: the tenant's cached one, when the request extends it (no copy) */
    if (!q) zl_pcache_take(s->pcache, h->tenant, prompt, n_prompt, llm, so->n_ctx, so->kv_type, &q);
    if (q) {
        int n_tok = 0;
        const int32_t *have = zl_seq_tokens(q, &n_tok);
        int keep = common_prefix(have, n_tok, prompt, n_prompt);
        if (keep >= n_prompt) keep = n_prompt - 1; /* the last prompt token is evaluated again for its logits */
        zl_seq_truncate(q, keep);
        if (zl_seq_set_sampling(q, &so->sampling, &e)) {
            seq_destroy(q);
            snprintf(err, cap, "%s", e.msg);
            return e.code;
        }
        *seq = q;
        *n_reused = keep;
        if (keep > 0) return 0;
    } else if (fresh_seq(s, llm, so, n_prompt, &q, &e)) {
        snprintf(err, cap, "%s", e.msg);
        return e.code;
    }
    *seq = q;
    *n_reused = zl_pcache_lookup(s->pcache, h->tenant, prompt, n_prompt, q);
    return 0;
}

/* A job holds a sequence from here until its release: the sweeper makes
 * no spare meanwhile (in_flight). */
int zl_sess_lease_acquire(zl_sess_lease *h, zl_llm *llm, const zl_seq_opts *so, const int32_t *prompt,
                          int n_prompt, zl_seq **seq, int *n_reused, char *err, size_t cap) {
    zl_sessions *s = h->s;
    pthread_mutex_lock(&s->mu);
    s->in_flight++;
    pthread_mutex_unlock(&s->mu);
    int rc = acquire_seq(h, llm, so, prompt, n_prompt, seq, n_reused, err, cap);
    if (rc || !*seq) { /* no sequence: the engine calls no release */
        pthread_mutex_lock(&s->mu);
        sess *x = h->took ? find(s, h->id) : NULL;
        if (x) {
            ZL_ASSERT(x->seq_out > 0);
            x->seq_out--; /* the session is not out after all */
        }
        h->took = 0;
        s->in_flight--;
        s->last_end = zl_now_ms();
        pthread_cond_signal(&s->cv);
        pthread_cond_broadcast(&s->home_cv);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

void zl_sess_lease_release(zl_sess_lease *h, zl_seq *q) {
    zl_sessions *s = h->s;
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    s->last_end = zl_now_ms();
    if (!s->spare && !s->part && s->spare_llm) s->spare_due = 1; /* made once the engine is quiet */
    pthread_cond_signal(&s->cv);
    if (!h->has_id) {
        s->releasing++;
        pthread_mutex_unlock(&s->mu);
        zl_pcache_insert(s->pcache, h->tenant, q, 1); /* keeps q or zeroes and frees it */
        pthread_mutex_lock(&s->mu);
        s->releasing--;
        pthread_cond_broadcast(&s->home_cv);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    sess *x;
    zl_sess_status st = lookup(s, h->id, h->tenant, &x);
    if (x && st != ZL_SESS_TENANT && h->took) {
        ZL_ASSERT(x->seq_out > 0 && x->seq != q); /* out -> home: a lease gives back once, its own sequence */
        x->seq_out--;
        h->took = 0;
    }
    pthread_cond_broadcast(&s->home_cv);
    if (st == ZL_SESS_OK && !x->seq) {
        x->seq = q;
        q = NULL;
        x->last_used = zl_now_ms();
        if (h->prefill) {
            x->prefill_at = x->last_used;
            if (x->committed > zl_seq_n_past(x->seq)) x->committed = zl_seq_n_past(x->seq);
        } else {
            x->committed = zl_seq_n_past(x->seq);
            x->prefill_at = 0;
            x->turns++;
            x->version++;
        }
        ZL_ASSERT(sess_ok(x));
        enforce_budget(s);
    }
    pthread_mutex_unlock(&s->mu);
    seq_destroy(q); /* the session went away while the job ran */
}

int zl_sessions_lease(zl_sessions *s, const char *tenant, const char *id, int prefill, zl_sess_lease **out) {
    *out = NULL;
    if (tenant && strlen(tenant) >= ZL_SESS_TENANT_MAX) return ZL_EINVAL; /* never cut */
    zl_sess_lease *h = calloc(1, sizeof *h);
    if (!h) return ZL_ENOMEM;
    h->s = s;
    snprintf(h->tenant, sizeof h->tenant, "%s", tenant ? tenant : "");
    if (id) {
        snprintf(h->id, sizeof h->id, "%s", id);
        h->has_id = 1;
    }
    h->prefill = prefill;
    *out = h;
    return 0;
}

void zl_sess_lease_free(zl_sess_lease *l) { free(l); }

void zl_sessions_stats_get(zl_sessions *s, zl_sessions_stats *st) {
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&s->mu);
    for (sess *x = s->head; x; x = x->next) {
        if (x->state != ZL_SESS_OK) continue;
        st->active++;
        if (x->seq) st->kv_bytes += zl_seq_kv_bytes_used(x->seq);
        if (x->coded) st->kv_bytes += x->coded_bytes, st->coded++;
        st->spilled += x->spilled;
    }
    st->spilled_total = s->spilled_total;
    st->unspilled_total = s->unspilled_total;
    st->spill_failed_total = s->spill_failed_total;
    st->spill_ms = s->spill_ms;
    st->unspill_ms = s->unspill_ms;
    st->coded_total = s->coded_total;
    st->decoded_total = s->decoded_total;
    st->encoded_bytes = s->encoded_bytes;
    st->decoded_bytes = s->decoded_bytes;
    st->encoded_exact_bytes = s->encoded_exact_bytes;
    st->encode_ms = s->encode_ms;
    st->decode_ms = s->decode_ms;
    st->expired_total = s->expired_total;
    st->evicted_total = s->evicted_total;
    st->spare_ready = s->spare != NULL;
    st->spare_bytes_mapped = s->spare_bytes_mapped;
    st->spares_made = s->spares_made;
    st->spares_taken = s->spares_taken;
    st->spares_taken_part = s->spares_taken_part;
    st->persisted_total = s->persisted_total;
    st->persist_failed_total = s->persist_failed_total;
    st->persist_seal_ms = s->persist_seal_ms;
    st->persist_put_ms = s->persist_put_ms;
    pthread_mutex_unlock(&s->mu);
    zl_pcache_stats_get(s->pcache, &st->pcache);
}

zl_seq *zl_sessions_peek_seq(zl_sessions *s, const char *id) {
    pthread_mutex_lock(&s->mu);
    sess *x = find(s, id);
    zl_seq *q = x && x->state == ZL_SESS_OK ? x->seq : NULL;
    pthread_mutex_unlock(&s->mu);
    return q;
}

zl_sess_status zl_sessions_copy_state(zl_sessions *s, const char *id, const char *tenant, zl_seq *dst,
                                      char **history) {
    *history = NULL;
    pthread_mutex_lock(&s->mu);
    sess *x;
    zl_sess_status st = lookup_idle(s, id, tenant, &x);
    if (st == ZL_SESS_OK) {
        int n = x->seq ? zl_seq_n_past(x->seq) : 0;
        if (n && zl_seq_copy_prefix(dst, x->seq, n, NULL)) st = ZL_SESS_LIMIT;
        if (x->coded && s->o.codec.decode(s->o.codec.ud, dst, x->coded, x->coded_bytes)) st = ZL_SESS_LIMIT;
        if (x->spilled && s->o.spill.get(s->o.spill.ud, x->id, x->tenant, dst)) st = ZL_SESS_LIMIT;
        if (st == ZL_SESS_OK && x->history) *history = strdup(x->history);
        x->last_used = zl_now_ms();
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

zl_sess_status zl_sessions_create_with(zl_sessions *s, const char *id, const char *tenant, double created_unix,
                                       zl_seq *seq, const char *history, size_t len, zl_session_info *info) {
    char *h = NULL;
    if (history && !(h = malloc(len + 1))) return ZL_SESS_LIMIT;
    if (h) { memcpy(h, history, len); h[len] = 0; }
    zl_sess_status st = zl_sessions_create(s, id, tenant, created_unix, NULL);
    if (st != ZL_SESS_OK) { free(h); return st; }
    pthread_mutex_lock(&s->mu);
    sess *x;
    st = lookup(s, id, tenant, &x);
    if (st == ZL_SESS_OK) {
        x->seq = seq;
        x->committed = zl_seq_n_past(seq);
        x->history = h;
        h = NULL;
        fill_info(s, x, info);
        enforce_budget(s);
    }
    pthread_mutex_unlock(&s->mu);
    free(h);
    return st;
}

int zl_sessions_list(zl_sessions *s, zl_session_ref **out) {
    *out = NULL;
    pthread_mutex_lock(&s->mu);
    int n = 0, k = 0;
    for (sess *x = s->head; x; x = x->next) n += x->state == ZL_SESS_OK;
    zl_session_ref *r = calloc((size_t)n + 1, sizeof *r);
    double now = zl_now_ms(), wall = zl_wall_s();
    for (sess *x = s->head; r && x; x = x->next) {
        if (x->state != ZL_SESS_OK) continue;
        snprintf(r[k].id, sizeof r[k].id, "%s", x->id);
        snprintf(r[k].tenant, sizeof r[k].tenant, "%s", x->tenant);
        r[k].created_unix = x->created_unix;
        r[k].last_used_unix = wall - (now - x->last_used) / 1e3;
        r[k].unsaved = !s->o.persist.put || persist_pending(s, x);
        k++;
    }
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return r ? k : -1;
}
