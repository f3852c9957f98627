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
