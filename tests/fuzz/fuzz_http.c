/* fuzz_http.c — libFuzzer target: whole HTTP requests against the server's
 * own entry point.  zl_server_run (the same function `zerolayer serve`
 * calls) runs in a thread of this process on 127.0.0.1 with stories260K,
 * a 64-token context and a 64 KiB --max-body; each input goes through a
 * local TCP socket (libmicrohttpd serves sockets only: it has no in-memory
 * connection) and the write side is shut, so every request is complete or
 * cut.  Input: byte 0 & 1 == 0: the rest is sent as it is (request line,
 * headers, body, chunked encoding...).  byte 0 & 1 == 1: byte 1 picks a
 * method and route from the table below, the rest is a JSON body sent with
 * a correct Content-Length (the handlers, not only the parser).
 * Checked: the server answers every input with a status line (or closes a
 * connection it cannot parse) before this process has spent 10 s of CPU
 * time on it (wall time would flag a campaign starved by other work; an
 * input that takes 300 s of wall time is flagged too), never with a 500, and
 * is alive after it.  ZL_FUZZ_HTTP_STATS=1 prints the answers by status class at
 * exit; ZL_FUZZ_HTTP_DUMP5XX=DIR keeps each request answered 5xx there. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "server/server.h"
#include "zerolayer.h"

#ifndef ZL_ROOT
#define ZL_ROOT "."
#endif

static int port;
static unsigned long by_class[7]; /* answers by status class (0: closed without one, 6: other) */

static void print_classes(void) {
    fprintf(stderr, "fuzz_http: answers: none %lu, 1xx %lu, 2xx %lu, 3xx %lu, 4xx %lu, 5xx %lu\n", by_class[0],
            by_class[1], by_class[2], by_class[3], by_class[4], by_class[5]);
}
static zl_llm *llm;
static zl_server_opts opts;

static void *serve(void *arg) {
    (void)arg;
    zl_err err = {0};
    if (zl_server_run(llm, &opts, &err)) {
        fprintf(stderr, "fuzz_http: %s\n", err.msg);
        abort();
    }
    return NULL;
}

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) abort();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    struct timeval tv = {1, 0}; /* a wait is cut in 1 s slices: see exchange */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* No answer yet: has the server had its chance (10 s of this process's CPU,
 * where the server runs, or 300 s of wall time)? */
static int gave_up(double cpu0, double wall0) { return cpu_s() - cpu0 > 10 || zl_now_s() - wall0 > 300; }

/* Send, shut the write side, read to the end; the bytes read (<0: timed out). */
static long exchange(const void *req, size_t n, char *head, size_t cap) {
    const double cpu0 = cpu_s(), wall0 = zl_now_s();
    int fd = dial();
    if (fd < 0) return -2;
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, (const char *)req + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) && !gave_up(cpu0, wall0)) continue;
        if (w <= 0) break; /* the server may answer (413) and close before reading it all */
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    long got = 0;
    char buf[16384];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!gave_up(cpu0, wall0)) continue;
                got = -1; /* no answer */
            }
            break; /* a reset is an answer too */
        }
        if ((size_t)got < cap) memcpy(head + got, buf, (size_t)r < cap - (size_t)got ? (size_t)r : cap - (size_t)got);
        got += r;
    }
    close(fd);
    return got;
}

static const struct { const char *method, *path; } routes[] = {
    {"POST", "/v1/chat/completions"}, {"POST", "/v1/completions"}, {"POST", "/v1/messages"},
    {"POST", "/v1/messages/count_tokens"}, {"POST", "/v1/messages/batches"}, {"POST", "/tokenize"},
    {"POST", "/detokenize"}, {"POST", "/v1/embeddings"}, {"POST", "/v1/sessions"}, {"GET", "/v1/messages/batches"},
    {"GET", "/health"}, {"GET", "/metrics"}, {"GET", "/v1/models"}, {"GET", "/props"}, {"POST", "/v1/preheat"},
    {"DELETE", "/v1/sessions/zs_0"}, {"GET", "/v1/messages/batches/msgbatch_0/results"},
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    zl_llm_opts lo = {.n_threads = 1};
    zl_err err = {0};
    if (zl_llm_open(&llm, ZL_ROOT "/models/stories260K.gguf", &lo, &err)) abort();
    /* a free port: bound and let go (the server binds it a moment later) */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &al)) abort();
    port = ntohs(a.sin_port);
    close(fd);
    opts.host = "127.0.0.1";
    opts.port = port;
    opts.model_path = ZL_ROOT "/models/stories260K.gguf";
    opts.max_body = 64 << 10;
    opts.sched.n_parallel = 2;
    opts.sched.max_queue = 4;
    opts.sched.n_ctx = 64;
    opts.sched.step_tokens = 64;
    opts.idle_timeout_s = 5;
    opts.conns_per_ip = 256;
    opts.max_conns = 512;
    opts.session_kv_budget = 4 << 20;
    opts.prefix_cache_bytes = 1 << 20;
    if (getenv("ZL_FUZZ_HTTP_STATS")) atexit(print_classes);
    pthread_t t;
    if (pthread_create(&t, NULL, serve, NULL)) abort();
    pthread_detach(t);
    for (int i = 0; i < 600; i++) { /* up to 60 s for the model and the daemon */
        int c = dial();
        if (c >= 0) { close(c); return 0; }
        usleep(100000);
    }
    fprintf(stderr, "fuzz_http: the server did not start on port %d\n", port);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > (256 << 10)) return 0;
    static char head[4096];
    char *req = NULL;
    size_t n;
    if (data[0] & 1) {
        int k = data[1] % (int)(sizeof routes / sizeof *routes);
        size_t blen = size - 2;
        req = malloc(blen + 256);
        if (!req) abort();
        n = (size_t)snprintf(req, 256, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "anthropic-version: 2023-06-01\r\nContent-Length: %zu\r\n\r\n",
                             routes[k].method, routes[k].path, blen);
        memcpy(req + n, data + 2, blen);
        n += blen;
    } else {
        n = size - 1;
        req = malloc(n);
        if (!req) abort();
        memcpy(req, data + 1, n);
    }
    memset(head, 0, sizeof head);
    long got = exchange(req, n, head, sizeof head);
    if (got == -1) {
        fprintf(stderr, "fuzz_http: no answer within 10 s of CPU time (or 300 s)\n");
        abort();
    }
    if (got > 0 && (got < 12 || memcmp(head, "HTTP/1.", 7))) {
        fprintf(stderr, "fuzz_http: not an HTTP response: %.40s\n", head);
        abort();
    }
    if (got > 12 && !memcmp(head + 9, "500", 3)) { /* bad input is a 4xx, never a server error */
        fprintf(stderr, "fuzz_http: 500 for a request: %.300s\n", head);
        abort();
    }
    int cls = got > 12 && head[9] >= '1' && head[9] <= '5' ? head[9] - '0' : got > 0 ? 6 : 0;
    by_class[cls]++;
    const char *dump = getenv("ZL_FUZZ_HTTP_DUMP5XX"); /* a directory: each request answered 5xx goes there */
    if (dump && cls == 5) {
        char path[512];
        snprintf(path, sizeof path, "%s/%lu-%.3s", dump, by_class[5], head + 9);
        FILE *f = fopen(path, "wb");
        if (f) { fwrite(req, 1, n, f); fclose(f); }
    }
    free(req);
    /* alive: a plain request is still answered */
    static const char health[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    static unsigned k;
    if (++k % 64 == 0) {
        got = exchange(health, sizeof health - 1, head, sizeof head);
        if (got < 12 || memcmp(head, "HTTP/1.1 200", 12)) {
            fprintf(stderr, "fuzz_http: /health after the input: %ld bytes, %.40s\n", got, head);
            abort();
        }
    }
    return 0;
}
