/* The CPU backend's transpose_batched slot (blocked, split over threads) equals the reference
 * gln_transpose_batched_ref bit for bit: 1- and 4-byte elements, partial blocks, single rows and
 * columns, padded leading dimensions and batch strides, one thread and several.  The destination
 * is poisoned first and its padding must stay poisoned. */
#include "harness.h"
#include "transpose_case.h"

#include "backend/backend.h"
#include "backend/context.h"

static void run_shape(gln_context_t *ctx, const gln_transpose_shape_t *s) {
    gln_transpose_case_t c;
    if (gln_transpose_case_new(&c, s)) {
        c.t.dst = c.want;
        gln_transpose_batched_ref(&c.t);
        c.t.dst = c.got;
        CHECK_OK(ctx->ops->transpose_batched(ctx, &c.t));
        CHECK(gln_check_bitwise(c.name, c.got, c.want, c.dst_bytes));
        gln_transpose_case_spot_check(&c, c.got);
    }
    gln_transpose_case_free(&c);
}

static void test_blocked_equals_reference(void) {
    static const gln_transpose_shape_t shapes[] = {
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
