/* test_server_store.c — the state store interface (runtime/store.h): the
 * directory backend (put/get/del/list, atomic replace, refused keys, the
 * temporary files of unfinished writes removed at open), the outage rule of
 * store.c on a backend that fails (one try per ZL_STORE_RETRY_MS, counted,
 * up again after a success), and the Redis backend's URL parsing and a dead
 * Redis (an error within its timeout, never a hang). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/store.h"
#include "server/store_redis.h"

static char g_dir[256];

static void mkdir_tmp(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/zl_store_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void rm_tmp(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_assert_eq(system(cmd), 0);
}

Test(store_dir, put_get_del_list, .init = mkdir_tmp, .fini = rm_tmp) {
    char sub[300];
    snprintf(sub, sizeof sub, "%s/state", g_dir);
    zl_store *st = NULL;
    zl_err err = {0};
    cr_assert_eq(zl_store_dir_open(&st, sub, &err), 0, "%s", err.msg);
    uint8_t *v = NULL;
    size_t n = 99;
    cr_assert_eq(zl_store_get(st, "zerolayer:session:user:ab:zs_1", &v, &n, &err), 0);
    cr_expect_null(v, "a missing key is a miss, not an error");
    cr_assert_eq(zl_store_put(st, "zerolayer:session:user:ab:zs_1", (const uint8_t *)"hello", 5, 60, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(zl_store_put(st, "zerolayer:session:user:ab:zs_1", (const uint8_t *)"world!", 6, 60, &err), 0);
    cr_assert_eq(zl_store_put(st, "other", (const uint8_t *)"x", 1, 60, &err), 0);
    cr_assert_eq(zl_store_get(st, "zerolayer:session:user:ab:zs_1", &v, &n, &err), 0);
    cr_assert_eq(n, 6);
    cr_expect_eq(memcmp(v, "world!", 6), 0, "a put replaces the value whole");
    free(v);
    char **keys;
    int nk;
    cr_assert_eq(zl_store_list(st, "zerolayer:", &keys, &nk, &err), 0);
    cr_assert_eq(nk, 1);
    cr_expect_str_eq(keys[0], "zerolayer:session:user:ab:zs_1");
    zl_store_keys_free(keys, nk);
    cr_expect_neq(zl_store_put(st, "../escape", (const uint8_t *)"x", 1, 60, &err), 0, "a key with '/' is refused");
    cr_expect_neq(zl_store_put(st, ".hidden", (const uint8_t *)"x", 1, 60, &err), 0);
    cr_expect_neq(zl_store_put(st, "a b", (const uint8_t *)"x", 1, 60, &err), 0);
    cr_assert_eq(zl_store_del(st, "zerolayer:session:user:ab:zs_1", &err), 0);
    cr_assert_eq(zl_store_del(st, "zerolayer:session:user:ab:zs_1", &err), 0, "deleting a missing key is fine");
    cr_assert_eq(zl_store_get(st, "zerolayer:session:user:ab:zs_1", &v, &n, &err), 0);
    cr_expect_null(v);
    zl_store_stats ss;
    zl_store_stats_get(st, &ss);
    cr_expect_eq(ss.puts, 3 + 3);
    cr_expect_eq(ss.put_bytes, 12);
    cr_expect_eq(ss.hits, 1);
    cr_expect_eq(ss.up, 1);
    zl_store_close(st);
    /* a write that never finished: its temporary file goes at the next open, the value stays */
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s/.other.tmp", sub);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs("partial", f);
    fclose(f);
    cr_assert_eq(zl_store_dir_open(&st, sub, &err), 0);
    cr_expect_neq(access(tmp, F_OK), 0, "the temporary file is removed");
    cr_assert_eq(zl_store_get(st, "other", &v, &n, &err), 0);
    cr_expect(v && n == 1 && v[0] == 'x');
    free(v);
    zl_store_close(st);
}

/* A backend that fails every call with ZL_EIO until told otherwise. */
typedef struct flaky {
    zl_store base;
    int calls, fail;
} flaky;

static int f_put(zl_store *s, const char *k, const uint8_t *v, size_t n, double ttl, zl_err *e) {
    flaky *f = (flaky *)s;
    f->calls++;
    return f->fail ? zl_errf(e, ZL_EIO, "connection refused") : 0;
}
static int f_get(zl_store *s, const char *k, uint8_t **v, size_t *n, zl_err *e) { return f_put(s, k, NULL, 0, 0, e); }
static int f_del(zl_store *s, const char *k, zl_err *e) { return f_put(s, k, NULL, 0, 0, e); }
static void f_close(zl_store *s) { free(s); }
static const zl_store_ops k_flaky = {f_put, f_get, f_del, NULL, f_close};

Test(store, an_outage_is_tried_once_per_retry_interval) {
    flaky *f = calloc(1, sizeof *f);
    zl_store_init(&f->base, &k_flaky, "flaky");
    f->fail = 1;
    zl_err err = {0};
    uint8_t *v;
    size_t n;
    cr_expect_eq(zl_store_put(&f->base, "k", (const uint8_t *)"x", 1, 1, &err), ZL_EIO);
    cr_expect_eq(f->calls, 1);
    cr_expect_eq(zl_store_get(&f->base, "k", &v, &n, &err), ZL_EIO);
    cr_expect_eq(zl_store_del(&f->base, "k", &err), ZL_EIO);
    cr_expect_eq(f->calls, 1, "while down, calls fail at once without reaching the backend");
    zl_store_stats st;
    zl_store_stats_get(&f->base, &st);
    cr_expect_eq(st.up, 0);
    cr_expect_eq(st.errors, 3);
    char **keys;
    int nk;
    cr_expect_eq(zl_store_list(&f->base, "", &keys, &nk, &err), ZL_EUNSUP, "a shared store is not listed");
    usleep((useconds_t)(ZL_STORE_RETRY_MS * 1000) + 50000);
    f->fail = 0;
    cr_expect_eq(zl_store_put(&f->base, "k", (const uint8_t *)"x", 1, 1, &err), 0, "tried again after the interval");
    cr_expect_eq(f->calls, 2);
    zl_store_stats_get(&f->base, &st);
    cr_expect_eq(st.up, 1);
    zl_store_close(&f->base);
}

Test(store_redis, url_parsing) {
    char host[64];
    int port, db;
    zl_err err = {0};
    cr_assert_eq(zl_redis_url_parse("redis://127.0.0.1:6380/3", host, sizeof host, &port, &db, &err), 0);
    cr_expect_str_eq(host, "127.0.0.1");
    cr_expect_eq(port, 6380);
    cr_expect_eq(db, 3);
    cr_assert_eq(zl_redis_url_parse("redis://cache", host, sizeof host, &port, &db, &err), 0);
    cr_expect_str_eq(host, "cache");
    cr_expect_eq(port, 6379);
    cr_expect_eq(db, 0);
    const char *bad[] = {"http://x:1", "redis://", "redis://:6379", "redis://h:0", "redis://h:70000", "redis://h:12x",
                         "redis://h:1/", "redis://h:1/x", "redis://h/-1", NULL};
    for (int i = 0; bad[i]; i++) {
        err.msg[0] = 0;
        cr_expect_eq(zl_redis_url_parse(bad[i], host, sizeof host, &port, &db, &err), ZL_EINVAL, "%s", bad[i]);
        cr_expect(strstr(err.msg, "--state-store"), "%s: the message names the flag: %s", bad[i], err.msg);
    }
}

Test(store_redis, a_dead_redis_is_an_error_within_its_timeout) {
    zl_store *st = NULL;
    zl_err err = {0};
    if (!zl_store_redis_available()) {
        cr_expect_eq(zl_store_redis_open(&st, "redis://127.0.0.1:1", &err), ZL_EUNSUP);
        cr_expect(strstr(err.msg, "without Redis support"), "%s", err.msg);
        return;
    }
    cr_assert_eq(zl_store_redis_open(&st, "redis://127.0.0.1:1/0", &err), 0, "opening connects to nothing");
    cr_expect_eq(zl_store_put(st, "k", (const uint8_t *)"x", 1, 1, &err), ZL_EIO);
    uint8_t *v = NULL;
    size_t n;
    cr_expect_eq(zl_store_get(st, "k", &v, &n, &err), ZL_EIO);
    cr_expect_null(v);
    zl_store_close(st);
}
