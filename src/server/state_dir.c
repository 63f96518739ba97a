/* state_dir.c — sessions that survive a restart (--state-dir DIR): at
 * shutdown every live session is sealed (an exact snapshot under the server
 * key, src/state/snapshot.h) into DIR/<id>.zls; at start every unexpired file
 * is restored into a session with the same id, tenant and creation time, so
 * tokens signed with the same --session-secret-file keep working.  The same
 * files hold the sessions spilled past --session-kv-mb while the server runs
 * (the session store's spill hooks, zl_state_dir_spill): sealed with the
 * learned codec when --codec is loaded, else exact; brought back by the
 * session's next turn, which removes the file.  A file is
 * written to a temporary name, fsync'd, renamed over the old one and the
 * directory fsync'd: a crash or kill -9 at any point leaves the previous file
 * whole; a failed write (a full disk) is one error line and the old file
 * stays.  File: "ZLSESS1\n", u32 id length, id, u32 tenant length, tenant,
 * f64 created, f64 last used (unix s), u64 blob length, the sealed blob.
 * ZL_STATE_WRITE_PAUSE_MS (tests only) pauses halfway through each write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../base/err.h"
#include "../state/coded.h"
#include "../state/snapshot.h"
#include "http.h"

static const char k_magic[8] = "ZLSESS1\n";

static int id_ok(const char *id, size_t n) {
    if (!n || n >= 80) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9') ||
              id[i] == '_'))
            return 0;
    return 1;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write buf as DIR/name atomically; 0 or -1 with the reason printed. */
static int write_file(const char *dir, const char *name, const uint8_t *buf, size_t n) {
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "zerolayer: --state-dir: cannot create %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    const char *pause = getenv("ZL_STATE_WRITE_PAUSE_MS");
    size_t half = pause ? n / 2 : n;
    int bad = write_all(fd, buf, half);
    if (!bad && pause) {
        struct timespec ts = {atol(pause) / 1000, (atol(pause) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        bad = write_all(fd, buf + half, n - half);
    }
    int e = errno;
    if (!bad && fsync(fd)) bad = 1, e = errno;
    if (close(fd) && !bad) bad = 1, e = errno;
    if (!bad && rename(tmp, path)) bad = 1, e = errno;
    if (bad) {
        fprintf(stderr, "zerolayer: --state-dir: writing %s failed: %s (the previous file, if any, is kept)\n", path,
                strerror(e));
        unlink(tmp);
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static void put(uint8_t **p, const void *v, size_t n) { memcpy(*p, v, n); *p += n; }

/* Seal seq (rows exact, or coded by c) as session ref into DIR/<id>.zls; 0 when written. */
static int seal_one(const zl_srv *srv, const zl_session_ref *ref, const zl_seq *seq, const char *hist,
                    const zl_codec *c, size_t *written) {
    uint8_t td[32], *blob = NULL;
    size_t len = 0;
    zl_err err = {0};
    SHA256((const unsigned char *)ref->tenant, strlen(ref->tenant), td);
    zl_snap_export_opts eo = {{zl_state_key(srv), NULL}, zl_state_fingerprint(srv), c, td, hist,
                              hist ? strlen(hist) : 0, 0};
    if (zl_snap_export(seq, &eo, &blob, &len, &err) != ZL_SNAP_OK) {
        fprintf(stderr, "zerolayer: --state-dir: session %s: %s\n", ref->id, err.msg);
        return -1;
    }
    uint32_t il = (uint32_t)strlen(ref->id), tl = (uint32_t)strlen(ref->tenant);
    uint64_t bl = len;
    size_t n = 8 + 4 + il + 4 + tl + 16 + 8 + len;
    uint8_t *buf = malloc(n), *p = buf;
    int rc = -1;
    if (buf) {
        put(&p, k_magic, 8);
        put(&p, &il, 4), put(&p, ref->id, il);
        put(&p, &tl, 4), put(&p, ref->tenant, tl);
        put(&p, &ref->created_unix, 8), put(&p, &ref->last_used_unix, 8);
        put(&p, &bl, 8), put(&p, blob, len);
        char name[128];
        snprintf(name, sizeof name, "%s.zls", ref->id);
        rc = write_file(srv->o.state_dir, name, buf, n);
        if (!rc && written) *written = n;
        free(buf);
    }
    free(blob);
    return rc;
}

static zl_seq *new_seq(const zl_srv *srv) {
    zl_seq_opts so = {zl_sched_n_ctx(srv->sched), ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *q = NULL;
    return zl_seq_new(&q, srv->llm, &so, NULL) ? NULL : q;
}

static void seq_zero_free(zl_seq *q) {
    if (!q) return;
    zl_seq_truncate(q, 0);
    zl_seq_free(q);
}

/* Seal one live session at shutdown; 0 when written. */
static int save_one(zl_srv *srv, const zl_session_ref *ref) {
    zl_seq *copy = new_seq(srv);
    if (!copy) return -1;
    char *hist = NULL;
    int rc = -1;
    if (zl_sessions_copy_state(srv->sessions, ref->id, ref->tenant, copy, &hist) == ZL_SESS_OK)
        rc = seal_one(srv, ref, copy, hist, NULL, NULL);
    free(hist);
    seq_zero_free(copy);
    return rc;
}

void zl_state_dir_save(zl_srv *srv) {
    if (!srv->o.state_dir || !srv->sessions) return;
    zl_session_ref *refs;
    int n = zl_sessions_list(srv->sessions, &refs), saved = 0;
    for (int i = 0; i < n; i++) saved += save_one(srv, &refs[i]) == 0;
    /* files of sessions that ended since they were written */
    DIR *d = opendir(srv->o.state_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".zls") || e->d_name[0] == '.') continue;
        int live = 0;
        for (int i = 0; i < n && !live; i++) live = strlen(refs[i].id) == l - 4 && !strncmp(refs[i].id, e->d_name, l - 4);
        if (!live) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", srv->o.state_dir, e->d_name);
            unlink(path);
        }
    }
    if (d) closedir(d);
    fprintf(stderr, "zerolayer: --state-dir: saved %d of %d sessions to %s\n", saved, n < 0 ? 0 : n, srv->o.state_dir);
    free(refs);
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    uint8_t *b = NULL;
    if (!fstat(fileno(f), &st) && st.st_size > 0 && st.st_size < ((off_t)1 << 34) && (b = malloc((size_t)st.st_size)) &&
        fread(b, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) *n = (size_t)st.st_size;
    return b;
}

/* A session file's fields; the blob points into the file's bytes. */
typedef struct {
    uint8_t *bytes;
    char id[80], tenant[ZL_SESS_TENANT_MAX];
    double created, last;
    const uint8_t *blob;
    size_t blob_len;
} sess_file;

/* Read and check a session file's framing; 0, or -1 with *why set. */
static int read_sess_file(const char *path, sess_file *f, char *why, size_t cap) {
    size_t n = 0;
    memset(f, 0, sizeof *f);
    uint8_t *b = read_file(path, &n);
    if (!b) return snprintf(why, cap, "cannot read it"), -1;
    const uint8_t *p = b, *end = b + n;
    uint32_t il = 0, tl = 0;
    uint64_t bl = 0;
    int ok = n >= 12 && !memcmp(p, k_magic, 8);
    if (ok) { memcpy(&il, p + 8, 4); p += 12; }
    ok = ok && il < sizeof f->id && (size_t)(end - p) >= il + 4 && id_ok((const char *)p, il);
    if (ok) { memcpy(f->id, p, il); f->id[il] = 0; p += il; memcpy(&tl, p, 4); p += 4; }
    ok = ok && tl < sizeof f->tenant && (size_t)(end - p) >= tl + 24;
    if (ok) {
        memcpy(f->tenant, p, tl); f->tenant[tl] = 0; p += tl;
        memcpy(&f->created, p, 8); memcpy(&f->last, p + 8, 8); memcpy(&bl, p + 16, 8); p += 24;
        ok = bl == (uint64_t)(end - p);
    }
    if (!ok) { free(b); return snprintf(why, cap, "not a session file (or truncated)"), -1; }
    f->bytes = b;
    f->blob = p;
    f->blob_len = (size_t)bl;
    return 0;
}

/* Unseal f's blob into q (a fresh sequence); ZL_SNAP_OK or why not. */
static zl_snap_result unseal(const zl_srv *srv, const sess_file *f, zl_seq *q, zl_snap_info *info, zl_err *err) {
    uint8_t td[32];
    SHA256((const unsigned char *)f->tenant, strlen(f->tenant), td);
    zl_snap_import_opts io = {{zl_state_key(srv), NULL}, zl_state_fingerprint(srv), zl_state_codec(srv), td};
    return zl_snap_import(q, f->blob, f->blob_len, &io, info, err);
}

/* Restore one file; 0, or -1 with *why set. */
static int load_one(zl_srv *srv, const char *path, int *tokens, char *why, size_t cap) {
    sess_file f;
    if (read_sess_file(path, &f, why, cap)) return -1;
    const char *id = f.id, *tenant = f.tenant;
    double created = f.created;
    if (zl_wall_s() - f.last > zl_sessions_get_opts(srv->sessions)->ttl_s) { free(f.bytes); return snprintf(why, cap, "expired"), -1; }
    zl_seq *q = new_seq(srv);
    zl_err err = {0};
    if (!q) { free(f.bytes); return snprintf(why, cap, "out of memory"), -1; }
    zl_snap_info info;
    zl_snap_result res = unseal(srv, &f, q, &info, &err);
    if (res) { free(f.bytes); zl_seq_free(q); return snprintf(why, cap, "%s", err.msg), -1; }
    zl_session_info in;
    zl_sess_status st = zl_sessions_create_with(srv->sessions, id, tenant, created, q, info.history,
                                                info.history_len, &in);
    free(info.history);
    free(f.bytes);
    if (st != ZL_SESS_OK) {
        zl_seq_truncate(q, 0);
        zl_seq_free(q);
        return snprintf(why, cap, "session store: %s", zl_sess_status_name(st)), -1;
    }
    *tokens = info.n_tokens;
    return 0;
}

int zl_state_dir_load(zl_srv *srv, zl_err *err) {
    const char *dir = srv->o.state_dir;
    if (!dir) return 0;
    if (!zl_state_key(srv))
        return zl_errf(err, ZL_EINVAL, "--state-dir needs --state-key-file (session files are sealed with the server key)");
    if (mkdir(dir, 0700) && errno != EEXIST) return zl_errf(err, ZL_EIO, "--state-dir: cannot create %s: %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    if (!d) return zl_errf(err, ZL_EIO, "--state-dir: cannot open %s: %s", dir, strerror(errno));
    struct dirent *e;
    int restored = 0, skipped = 0;
    long tokens = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        char path[4096], why[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' && l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) {
            unlink(path); /* a write that never finished: the previous file is still there */
            continue;
        }
        if (l < 5 || strcmp(e->d_name + l - 4, ".zls") || e->d_name[0] == '.') continue;
        int t = 0;
        if (load_one(srv, path, &t, why, sizeof why)) {
            fprintf(stderr, "zerolayer: --state-dir: %s not restored: %s\n", path, why);
            skipped++;
        } else {
            restored++;
            tokens += t;
        }
    }
    closedir(d);
    fprintf(stderr, "zerolayer: --state-dir: restored %d sessions (%ld tokens) from %s, %d not\n", restored, tokens,
            dir, skipped);
    return 0;
}

/* ---------------- spilling (the session store's hooks) ---------------- */

static void file_of(const zl_srv *srv, const char *id, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s.zls", srv->o.state_dir, id);
}

static int spill_put(void *ud, const char *id, const char *tenant, double created, double last, const zl_seq *seq,
                     const uint8_t *code, size_t code_bytes, const char *hist, size_t *stored) {
    const zl_srv *srv = ud;
    zl_session_ref ref = {{0}, {0}, created, last};
    snprintf(ref.id, sizeof ref.id, "%s", id);
    snprintf(ref.tenant, sizeof ref.tenant, "%s", tenant);
    zl_seq *tmp = NULL;
    if (!seq) { /* held coded in memory: its rows are rebuilt to be sealed (coding them again loses nothing more) */
        const zl_codec *c = zl_state_codec(srv);
        if (!c || !(tmp = new_seq(srv)) || zl_coded_unpack(c, tmp, code, code_bytes, NULL)) {
            seq_zero_free(tmp);
            return -1;
        }
        seq = tmp;
    }
    int rc = seal_one(srv, &ref, seq, hist, zl_state_codec(srv), stored);
    seq_zero_free(tmp);
    return rc;
}

static int spill_get(void *ud, const char *id, const char *tenant, zl_seq *seq) {
    const zl_srv *srv = ud;
    char path[4096], why[256];
    file_of(srv, id, path, sizeof path);
    sess_file f;
    if (read_sess_file(path, &f, why, sizeof why)) {
        fprintf(stderr, "zerolayer: --state-dir: spilled session %s: %s\n", id, why);
        return -1;
    }
    zl_snap_info info = {0};
    zl_err err = {0};
    int rc = strcmp(f.id, id) || strcmp(f.tenant, tenant) ? -1 : unseal(srv, &f, seq, &info, &err) ? -1 : 0;
    if (rc) fprintf(stderr, "zerolayer: --state-dir: spilled session %s not brought back: %s\n", id,
                    err.msg[0] ? err.msg : "another session's file");
    free(info.history); /* the store kept the conversation in memory */
    free(f.bytes);
    return rc;
}

static void spill_drop(void *ud, const char *id) {
    char path[4096];
    file_of(ud, id, path, sizeof path);
    unlink(path);
}

void zl_state_dir_spill(zl_srv *srv, zl_sessions_spill *out) {
    memset(out, 0, sizeof *out);
    if (srv->o.state_dir) *out = (zl_sessions_spill){spill_put, spill_get, spill_drop, srv};
}
