/* replay.c — runs a libFuzzer target without libFuzzer (any compiler): every
 * file named on the command line (or found in a named directory) is fed to
 * LLVMFuzzerTestOneInput as it is, then MUTATIONS deterministic variants of
 * each (byte flips, overwrites with boundary values, truncations, splices of
 * two seeds), so `ctest` exercises every fuzz target on every build and the
 * ASan build catches what the variants reach.  Exit 0 when every input
 * returned; a crash or sanitizer report fails the test.  To diagnose one:
 * REPLAY_SAVE=FILE writes each input to FILE before it runs (after a crash
 * FILE holds the culprit); REPLAY_SLOW_MS=N names on stderr every input
 * that took longer than N ms. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

typedef struct { uint8_t *p; size_t n; } blob;

static blob *seeds;
static size_t n_seeds, cap_seeds;

static void add_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    if (!p || (n > 0 && fread(p, 1, (size_t)n, f) != (size_t)n)) { fprintf(stderr, "replay: cannot read %s\n", path); exit(2); }
    fclose(f);
    if (n_seeds == cap_seeds) {
        cap_seeds = cap_seeds ? 2 * cap_seeds : 64;
        seeds = realloc(seeds, cap_seeds * sizeof *seeds);
        if (!seeds) exit(2);
    }
    seeds[n_seeds++] = (blob){p, (size_t)n};
}

static void add_path(const char *path) {
    struct stat st;
    if (stat(path, &st)) { fprintf(stderr, "replay: no such file or directory: %s\n", path); exit(2); }
    if (!S_ISDIR(st.st_mode)) { add_file(path); return; }
    /* in name order, so a seed's number and its variants are the same on every file system */
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    for (int k = 0; k < n; k++) {
        if (names[k]->d_name[0] != '.') {
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", path, names[k]->d_name);
            add_path(full);
        }
        free(names[k]);
    }
    free(names);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *save_path;
static double slow_ms = -1;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void run(const uint8_t *p, size_t n, size_t seed, long variant) {
    if (save_path) {
        FILE *f = fopen(save_path, "wb");
        if (!f || fwrite(p, 1, n, f) != n || fclose(f)) { fprintf(stderr, "replay: cannot write %s\n", save_path); exit(2); }
    }
    /* a private copy of exactly n bytes, so ASan sees reads past the end */
    uint8_t *c = malloc(n ? n : 1);
    if (!c) exit(2);
    memcpy(c, p, n);
    double t0 = slow_ms >= 0 ? now_ms() : 0;
    LLVMFuzzerTestOneInput(c, n);
    if (slow_ms >= 0 && now_ms() - t0 > slow_ms)
        fprintf(stderr, "replay: seed %zu variant %ld took %.0f ms\n", seed, variant, now_ms() - t0);
    free(c);
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    long mutations = getenv("MUTATIONS") ? atol(getenv("MUTATIONS")) : 2000;
    save_path = getenv("REPLAY_SAVE");
    if (getenv("REPLAY_SLOW_MS")) slow_ms = atof(getenv("REPLAY_SLOW_MS"));
    for (int i = 1; i < argc; i++) add_path(argv[i]);
    if (!n_seeds) { fprintf(stderr, "replay: no inputs\n"); return 2; }
    static const uint8_t boundary[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, '"', '\\', '{', '[', '%', 0xc0, 0xf4};
    size_t runs = 0;
    for (size_t s = 0; s < n_seeds; s++) {
        run(seeds[s].p, seeds[s].n, s, -1);
        runs++;
        for (long m = 0; m < mutations; m++) {
            blob b = seeds[s];
            size_t cap = b.n + 64;
            uint8_t *v = malloc(cap);
            if (!v) return 2;
            memcpy(v, b.p, b.n);
            size_t n = b.n;
            int k = 1 + (int)(next() % 4);
            for (int j = 0; j < k && n; j++) {
                size_t at = (size_t)(next() % n);
                switch (next() % 5) {
                case 0: v[at] ^= (uint8_t)(1u << (next() % 8)); break;
                case 1: v[at] = boundary[next() % sizeof boundary]; break;
                case 2: n = at; break; /* truncate */
                case 3: { /* 4/8-byte boundary integer (counts, lengths, offsets) */
                    uint64_t x = (next() & 1) ? ~0ull : (next() & 1) ? 0x80000000ull : 0x7fffffffffffffffull;
                    size_t w = (next() & 1) ? 8 : 4;
                    if (at + w <= n) memcpy(v + at, &x, w);
                    break;
                }
                default: { /* splice: a piece of another seed */
                    blob o = seeds[next() % n_seeds];
                    if (!o.n) break;
                    size_t from = (size_t)(next() % o.n), len = (size_t)(next() % 32);
                    if (from + len > o.n) len = o.n - from;
                    if (at + len > cap) len = cap - at;
                    memcpy(v + at, o.p + from, len);
                    if (at + len > n) n = at + len;
                }
                }
            }
            run(v, n, s, m);
            free(v);
            runs++;
        }
    }
    printf("replay: %zu inputs (%zu seeds, %ld variants each) ran clean\n", runs, n_seeds, mutations);
    for (size_t s = 0; s < n_seeds; s++) free(seeds[s].p);
    free(seeds);
    return 0;
}
