/* The CPU backend's transpose_batched slot (blocked, split over threads) equals the reference
 * gln_transpose_batched_ref bit for bit: 1- and 4-byte elements, partial blocks, single rows and
 * columns, padded leading dimensions and batch strides, one thread and several.  The destination
 * is poisoned first and its padding must stay poisoned. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "backend/backend.h"
#include "backend/context.h"

typedef struct shape {
    size_t es;
    int64_t batch, rows, cols, src_pad, dst_pad, src_gap, dst_gap; /* ld = dim + pad; stride gaps */
} shape_t;

static void run_shape(gln_context_t *ctx, const shape_t *s) {
    gln_transpose_t t = {s->es, s->batch, s->rows, s->cols, NULL, s->cols + s->src_pad, 0, NULL, s->rows + s->dst_pad, 0};
    t.src_stride = t.rows * t.src_ld + s->src_gap;
    t.dst_stride = t.cols * t.dst_ld + s->dst_gap;
    const size_t src_bytes = (size_t)(t.batch * t.src_stride) * s->es, dst_bytes = (size_t)(t.batch * t.dst_stride) * s->es;
    uint8_t *src = malloc(src_bytes), *want = malloc(dst_bytes), *got = malloc(dst_bytes);
    if (!src || !want || !got) {
        CHECK_MSG(0, "out of host memory");
    } else {
        gln_rng_t r = gln_rng_seed((uint64_t)(s->rows * 131 + s->cols));
        for (size_t i = 0; i < src_bytes; i++) src[i] = (uint8_t)gln_rng_int(&r, 0, 255);
        memset(want, 0xA5, dst_bytes);
        memset(got, 0xA5, dst_bytes);
        t.src = src;
        t.dst = want;
        gln_transpose_batched_ref(&t);
        t.dst = got;
        CHECK_OK(ctx->ops->transpose_batched(ctx, &t));
        char what[160];
        snprintf(what, sizeof what, "transpose es %zu batch %lld [%lld, %lld] pads %lld/%lld gaps %lld/%lld", s->es,
                 (long long)s->batch, (long long)s->rows, (long long)s->cols, (long long)s->src_pad,
                 (long long)s->dst_pad, (long long)s->src_gap, (long long)s->dst_gap);
        CHECK(gln_check_bitwise(what, got, want, dst_bytes));
        if (t.rows > 1 && t.cols > 2) { /* one element by hand */
            const int64_t b = t.batch - 1, rr = t.rows - 1, cc = 2;
            CHECK(memcmp(got + (size_t)(b * t.dst_stride + cc * t.dst_ld + rr) * s->es,
                         src + (size_t)(b * t.src_stride + rr * t.src_ld + cc) * s->es, s->es) == 0);
        }
        if (s->dst_pad) CHECK(got[(size_t)t.rows * s->es] == 0xA5);
    }
    free(src);
    free(want);
    free(got);
}

static void test_blocked_equals_reference(void) {
    static const shape_t shapes[] = {
        {1, 5, 200, 160, 0, 0, 0, 0},        /* FP8 experts, partial blocks both ways */
        {1, 3, 200, 160, 0, 0, 56 * 160, 0}, /* padded experts (the 128x128 layout) */
        {1, 1, 1, 1000, 0, 0, 0, 0},
        {1, 2, 1000, 1, 0, 0, 0, 0},
        {1, 1, 64, 64, 0, 0, 0, 0},
        {4, 5, 2, 2, 2, 2, 0, 0},            /* tile grids: pitch pad4 on both sides */
        {4, 7, 3, 5, 3, 1, 0, 4},
        {4, 2, 65, 129, 7, 3, 5, 9},
        {1, 3, 1024, 768, 0, 0, 0, 0},       /* enough elements for several threads */
        {4, 2, 700, 300, 1, 2, 3, 4},
    };
    for (int threads = 1; threads <= 4; threads += 3) {
        gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
        o.num_threads = threads;
        gln_context_t *ctx = NULL;
        CHECK_OK(gln_context_create(&o, &ctx));
        if (!ctx) return;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(ctx, &shapes[i]);
        CHECK_OK(gln_context_destroy(ctx));
    }
}

GLN_TEST_MAIN(GLN_CASE(test_blocked_equals_reference))
