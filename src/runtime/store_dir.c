/* store_dir.c — the directory backend of store.h (serve --state-dir): one
 * file DIR/<key>.zls per key.  A put writes a temporary file .<key>.tmp,
 * fsyncs it, renames it over the old one and fsyncs the directory: a crash
 * or kill -9 at any point leaves the previous value whole; a failed write
 * (a full disk) is an error and the old file stays.  Opening removes the
 * temporary files of writes that never finished.  A directory belongs to
 * one process: list() is what restores its sessions at start.
 * ZL_STATE_WRITE_PAUSE_MS (tests only) pauses halfway through each write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

typedef struct dir_store {
    zl_store base;
    char dir[4096];
    pthread_mutex_t mu; /* one write at a time: the temporary name is per key */
} dir_store;

static int key_ok(const char *k) {
    if (!*k || strlen(k) > 240 || *k == '.') return 0;
    for (const char *p = k; *p; p++)
        if (*p <= ' ' || *p > '~' || *p == '/') return 0;
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

static int dir_put_locked(dir_store *d, const char *key, const uint8_t *v, size_t n, zl_err *err) {
    char tmp[4400], path[4400];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", d->dir, key);
    snprintf(path, sizeof path, "%s/%s" ZL_STORE_DIR_EXT, d->dir, key);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return zl_errf(err, ZL_EIO, "cannot create %s: %s", tmp, strerror(errno));
    const char *pause = getenv("ZL_STATE_WRITE_PAUSE_MS");
    size_t half = pause ? n / 2 : n;
    int bad = write_all(fd, v, half);
    if (!bad && pause) {
        struct timespec ts = {atol(pause) / 1000, (atol(pause) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        bad = write_all(fd, v + half, n - half);
    }
    int e = errno;
    if (!bad && fsync(fd)) bad = 1, e = errno;
    if (close(fd) && !bad) bad = 1, e = errno;
    if (!bad && rename(tmp, path)) bad = 1, e = errno;
    if (bad) {
        unlink(tmp);
        return zl_errf(err, ZL_EIO, "writing %s failed: %s (the previous file, if any, is kept)", path, strerror(e));
    }
    int dfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static int dir_put(zl_store *st, const char *key, const uint8_t *v, size_t n, double ttl_s, zl_err *err) {
    dir_store *d = (dir_store *)st;
    (void)ttl_s; /* the values carry their own age */
    if (!key_ok(key)) return zl_errf(err, ZL_EINVAL, "state store key '%s' is not a file name", key);
    pthread_mutex_lock(&d->mu);
    int rc = dir_put_locked(d, key, v, n, err);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int dir_get(zl_store *st, const char *key, uint8_t **v, size_t *n, zl_err *err) {
    dir_store *d = (dir_store *)st;
    if (!key_ok(key)) return zl_errf(err, ZL_EINVAL, "state store key '%s' is not a file name", key);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s" ZL_STORE_DIR_EXT, d->dir, key);
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 0 : zl_errf(err, ZL_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    uint8_t *b = NULL;
    int rc = 0;
    if (fstat(fileno(f), &sb) || sb.st_size < 0 || sb.st_size >= ((off_t)1 << 34))
        rc = zl_errf(err, ZL_EIO, "cannot size %s", path);
    else if (!(b = malloc((size_t)sb.st_size + 1)))
        rc = zl_errf(err, ZL_ENOMEM, "out of memory reading %s", path);
    else if (fread(b, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        rc = zl_errf(err, ZL_EIO, "cannot read %s", path);
    fclose(f);
    if (rc) { free(b); return rc; }
    *v = b;
    *n = (size_t)sb.st_size;
    return 0;
}

static int dir_del(zl_store *st, const char *key, zl_err *err) {
    dir_store *d = (dir_store *)st;
    if (!key_ok(key)) return zl_errf(err, ZL_EINVAL, "state store key '%s' is not a file name", key);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s" ZL_STORE_DIR_EXT, d->dir, key);
    if (unlink(path) && errno != ENOENT) return zl_errf(err, ZL_EIO, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

static int dir_list(zl_store *st, const char *prefix, char ***keys, int *n, zl_err *err) {
    dir_store *d = (dir_store *)st;
    DIR *dd = opendir(d->dir);
    if (!dd) return zl_errf(err, ZL_EIO, "cannot open %s: %s", d->dir, strerror(errno));
    char **k = NULL;
    int cnt = 0, cap = 0, rc = 0;
    size_t pl = strlen(prefix), el = strlen(ZL_STORE_DIR_EXT);
    struct dirent *e;
    while ((e = readdir(dd))) {
        size_t l = strlen(e->d_name);
        if (l <= el || e->d_name[0] == '.' || strcmp(e->d_name + l - el, ZL_STORE_DIR_EXT) || strncmp(e->d_name, prefix, pl))
            continue;
        if (cnt == cap) {
            char **g = realloc(k, sizeof *k * (size_t)(cap = cap ? cap * 2 : 16));
            if (!g) { rc = zl_errf(err, ZL_ENOMEM, "out of memory"); break; }
            k = g;
        }
        if (!(k[cnt] = strndup(e->d_name, l - el))) { rc = zl_errf(err, ZL_ENOMEM, "out of memory"); break; }
        cnt++;
    }
    closedir(dd);
    if (rc) { zl_store_keys_free(k, cnt); return rc; }
    *keys = k;
    *n = cnt;
    return 0;
}

static void dir_close(zl_store *st) {
    dir_store *d = (dir_store *)st;
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static const zl_store_ops k_dir_ops = {dir_put, dir_get, dir_del, dir_list, dir_close};

int zl_store_dir_open(zl_store **out, const char *dir, zl_err *err) {
    *out = NULL;
    if (strlen(dir) >= 4000) return zl_errf(err, ZL_EINVAL, "--state-dir: path too long");
    if (mkdir(dir, 0700) && errno != EEXIST) return zl_errf(err, ZL_EIO, "--state-dir: cannot create %s: %s", dir, strerror(errno));
    DIR *dd = opendir(dir);
    if (!dd) return zl_errf(err, ZL_EIO, "--state-dir: cannot open %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(dd))) { /* writes that never finished: the previous file is still there */
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' && l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(dd);
    dir_store *d = calloc(1, sizeof *d);
    if (!d) return zl_errf(err, ZL_ENOMEM, "out of memory");
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    pthread_mutex_init(&d->mu, NULL);
    char desc[160];
    snprintf(desc, sizeof desc, "dir %s", dir);
    zl_store_init(&d->base, &k_dir_ops, desc);
    *out = &d->base;
    return 0;
}
