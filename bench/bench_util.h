/* Shared by the GPU benchmarks: fail-fast calls, the host clock, medians, random device data. */
#ifndef GLN_BENCH_UTIL_H
#define GLN_BENCH_UTIL_H

#define _POSIX_C_SOURCE 200809L
#include <grouplin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY(expr)                                                                               \
    do {                                                                                        \
        gln_status_t st_ = (expr);                                                              \
        if (st_ != GLN_STATUS_SUCCESS) {                                                        \
            fprintf(stderr, "%s: %s (%s)\n", #expr, gln_status_string(st_), gln_last_error());  \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* A device buffer of `count` elements of dtype: bf16 uniform in [-1, 1), FP8 random finite codes
 * (|x| <= 1.75 in E4M3, no NaN / Inf), fp32 zeros. */
static inline void *device_random(gln_context_t *ctx, gln_dtype_t dt, size_t count, uint64_t seed) {
    const size_t es = dt == GLN_DTYPE_FP32 ? 4 : dt == GLN_DTYPE_BF16 ? 2 : 1;
    unsigned char *host = calloc(count ? count : 1, es);
    if (!host) exit(1);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < count && dt != GLN_DTYPE_FP32; i++) {
        const uint64_t r = xorshift(&s);
        if (dt == GLN_DTYPE_BF16)
            ((uint16_t *)host)[i] = gln_fp32_to_bf16((float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0));
        else
            host[i] = (unsigned char)((r >> 20) & 0xBF); /* sign + codes below 0x40: small finite values */
    }
    void *dev = NULL;
    TRY(gln_malloc(ctx, count * es, &dev));
    TRY(gln_memcpy(ctx, dev, host, count * es, GLN_COPY_HOST_TO_BACKEND));
    free(host);
    return dev;
}

/* As device_random, but only the first min(count, 4M) elements are drawn on the host; the rest
 * repeat them through device-to-device copies (doubling), so the gigabyte operands of the large
 * shapes cost milliseconds instead of seconds to set up (a GEMM's time does not depend on the
 * values). */
static inline void *device_random_fast(gln_context_t *ctx, gln_dtype_t dt, size_t count, uint64_t seed) {
    const size_t chunk = (size_t)1 << 22;
    if (count <= chunk) return device_random(ctx, dt, count, seed);
    const size_t es = dt == GLN_DTYPE_FP32 ? 4 : dt == GLN_DTYPE_BF16 ? 2 : 1;
    void *head = device_random(ctx, dt, chunk, seed), *dev = NULL;
    TRY(gln_malloc(ctx, count * es, &dev));
    TRY(gln_memcpy(ctx, dev, head, chunk * es, GLN_COPY_BACKEND_TO_BACKEND));
    TRY(gln_free(ctx, head));
    for (size_t have = chunk; have < count;) {
        const size_t n = have < count - have ? have : count - have;
        TRY(gln_memcpy(ctx, (char *)dev + have * es, dev, n * es, GLN_COPY_BACKEND_TO_BACKEND));
        have += n;
    }
    return dev;
}

/* Split sets of the benchmarks (rows per expert; the total is always experts · tokens):
 *   uniform  `tokens` each (a multiple of 16 in every shape: the aligned reference of a cell);
 *   zipf     expert i gets a share ∝ 1/(i+1), the last quarter of the experts nothing, each count
 *            rounded down to a multiple of 16 (a caller padding its routing to 16);
 *   empty    every fourth expert (3, 7, ...) nothing, the others an equal share in multiples of 16
 *            (the remainder spread 16 rows at a time; fewer than 16 rows an expert: all to expert 0);
 *   router   the zipf shares as a router gives them: no rounding, so almost no count is a multiple
 *            of 16, the last quarter empty (the remainder spread one row at a time);
 *   random   every expert a random share (weights uniform in [0.25, 1.75), fixed seed), no
 *            alignment at all, no empty expert.
 * What is left after the rule goes to expert 0. */
typedef enum bench_splits {
    SPLITS_UNIFORM,
    SPLITS_ZIPF,
    SPLITS_EMPTY,
    SPLITS_ROUTER,
    SPLITS_RANDOM,
    SPLITS_COUNT_
} bench_splits_t;
static const char *const bench_splits_names[] = {"uniform", "zipf", "empty", "router", "random"};

/* Zipf shares of `rows` over the first `live` of E experts, each floored to a multiple of `q`. */
static inline void bench_zipf(int64_t *splits, int32_t E, int32_t live, int64_t rows, int64_t q) {
    double h = 0;
    for (int32_t i = 0; i < live; i++) h += 1.0 / (i + 1);
    for (int32_t i = 0; i < E; i++) splits[i] = i < live ? (int64_t)((double)rows / h / (i + 1)) / q * q : 0;
}

static inline void bench_make_splits(bench_splits_t kind, int64_t *splits, int32_t E, int64_t tokens) {
    const int64_t rows = (int64_t)E * tokens;
    const int32_t live = E > 4 ? E - E / 4 : E;
    int64_t used = 0;
    if (kind == SPLITS_ZIPF || kind == SPLITS_ROUTER) {
        bench_zipf(splits, E, live, rows, kind == SPLITS_ZIPF ? 16 : 1);
        if (kind == SPLITS_ROUTER) {
            for (int32_t i = 0; i < E; i++) used += splits[i];
            for (int32_t i = 1; used < rows; i = i % live + 1) splits[i % live]++, used++;
        }
    } else if (kind == SPLITS_EMPTY) {
        const int32_t on = E >= 4 ? E - E / 4 : E;
        for (int32_t i = 0; i < E; i++) splits[i] = (E >= 4 && i % 4 == 3) ? 0 : rows / on / 16 * 16;
        for (int64_t left = rows - on * (rows / on / 16 * 16), i = 0; left >= 16 && rows / on >= 16; i = (i + 1) % E)
            if (splits[i]) splits[i] += 16, left -= 16; /* the remainder 16 rows at a time */
    } else if (kind == SPLITS_RANDOM) {
        uint64_t st = 0x9E3779B97F4A7C15ull;
        double wsum = 0, w[4096];
        for (int32_t i = 0; i < E && i < 4096; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            w[i] = 0.25 + 1.5 * (double)(st >> 11) / 9007199254740992.0;
            wsum += w[i];
        }
        for (int32_t i = 0; i < E; i++) splits[i] = i < 4096 ? (int64_t)((double)rows * w[i] / wsum) : 0;
    } else {
        for (int32_t i = 0; i < E; i++) splits[i] = tokens;
    }
    used = 0;
    for (int32_t i = 0; i < E; i++) used += splits[i];
    splits[0] += rows - used;
}

static inline int bench_splits_parse(const char *s, int on[SPLITS_COUNT_]) {
    int any = 0;
    for (int k = 0; k < SPLITS_COUNT_; k++) on[k] = !strcmp(s, "all") || !strcmp(s, bench_splits_names[k]), any |= on[k];
    return any;
}

/* Peer timings written by peer_torch.py --out FILE: lines "shape splits recipe stage seconds"
 * (recipe bf16 or fp8; stage fprop, dgrad, wgrad, wgrad8, all3, layer).  0 when absent. */
static inline double bench_peer_seconds(const char *file, const char *shape, const char *splits, const char *recipe,
                                        const char *stage) {
    if (!file) return 0;
    FILE *f = fopen(file, "r");
    if (!f) return 0;
    char a[64], b[64], c[64], d[64];
    double t, found = 0;
    while (fscanf(f, "%63s %63s %63s %63s %lf", a, b, c, d, &t) == 5)
        if (!strcmp(a, shape) && !strcmp(b, splits) && !strcmp(c, recipe) && !strcmp(d, stage)) found = t;
    fclose(f);
    return found;
}

/* Roofline of one stage: the larger of the FLOP time at `peak` and the byte time at the
 * measured copy bandwidth (PERFORMANCE.md: 4.25 TB/s read + written on the H200). */
#define BENCH_BW 4.25e12
static inline double bench_floor_s(double flops, double peak, double bytes) {
    const double a = flops / peak, b = bytes / BENCH_BW;
    return a > b ? a : b;
}

/* A context on the CUDA backend, or exit 77 (skipped) without a device. */
static inline gln_context_t *bench_cuda_context(void) {
    if (!gln_backend_available(GLN_BACKEND_CUDA)) {
        printf("skipped: no CUDA device\n");
        exit(77);
    }
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    gln_context_t *ctx = NULL;
    TRY(gln_context_create(&o, &ctx));
    return ctx;
}

/* Does the environment force the per-expert GEMM loop (GLN_CUDA_GROUPED_LOOP set, not "0")? */
static inline int bench_loop_forced(void) {
    const char *e = getenv("GLN_CUDA_GROUPED_LOOP");
    return e && *e && strcmp(e, "0") != 0;
}

#endif
