/* Determinism across CPU thread counts and contexts: the same GEMMs (awkward shapes, every
 * layout, bias + accumulate, bf16 output) on contexts of 1, 2 and 3 threads give bitwise equal
 * results, and creating another context with a different thread count does not change an
 * existing context's results (the count is per context, OpenBLAS stays at 1 thread). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static gln_context_t *ctx_threads(int n) {
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.num_threads = n;
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(&o, &ctx));
    return ctx;
}

/* Runs the GEMM set on ctx; outputs concatenated into out (float bits / bf16 bits). */
static size_t run_set(gln_context_t *ctx, unsigned char *out) {
    static const int64_t shapes[][3] = {{300, 517, 259}, {1, 777, 1000}, {513, 3, 129}, {257, 260, 600}};
    const gln_gemm_layout_t layouts[3] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    size_t off = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int l = 0; l < 3; l++) {
            const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            int64_t ar, ac, br, bc;
            if (layouts[l] == GLN_LAYOUT_TN) ar = n, ac = k, br = m, bc = k;
            else if (layouts[l] == GLN_LAYOUT_NN) ar = k, ac = n, br = m, bc = k;
            else ar = k, ac = n, br = k, bc = m;
            float *a = malloc(sizeof(float) * (size_t)(ar * ac)), *b = malloc(sizeof(float) * (size_t)(br * bc));
            float *bias = malloc(sizeof(float) * (size_t)n);
            gln_rng_t rng = gln_rng_seed((uint64_t)(s * 3 + (size_t)l + 1));
            for (int64_t i = 0; i < ar * ac; i++) a[i] = (float)gln_rng_uniform(&rng, -1, 1);
            for (int64_t i = 0; i < br * bc; i++) b[i] = (float)gln_rng_uniform(&rng, -1, 1);
            for (int64_t i = 0; i < n; i++) bias[i] = (float)gln_rng_uniform(&rng, -1, 1);
            gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP32, ar, ac, a), B = gln_tensor_make(GLN_DTYPE_FP32, br, bc, b);
            gln_tensor_t bt = gln_tensor_make(GLN_DTYPE_FP32, 1, n, bias);
            const int64_t dm = m;
            /* fp32 D, accumulating twice; then bf16 D with bias (not for NT: no bias). */
            float *d = (float *)(out + off);
            for (int64_t i = 0; i < dm * n; i++) d[i] = 0.5f;
            gln_tensor_t D = gln_tensor_make(GLN_DTYPE_FP32, dm, n, d);
            CHECK_OK(gln_gemm(ctx, layouts[l], &A, &B, &D, NULL, 1));
            CHECK_OK(gln_gemm(ctx, layouts[l], &A, &B, &D, NULL, 1));
            off += sizeof(float) * (size_t)(dm * n);
            gln_tensor_t D16 = gln_tensor_make(GLN_DTYPE_BF16, dm, n, out + off);
            CHECK_OK(gln_gemm(ctx, layouts[l], &A, &B, &D16, layouts[l] == GLN_LAYOUT_NT ? NULL : &bt, 0));
            off += 2 * (size_t)(dm * n);
            off = (off + 15) & ~(size_t)15; /* the next fp32 D starts aligned */
            free(a), free(b), free(bias);
        }
    return off;
}

#define OUT_BYTES ((size_t)64 << 20)

static void test_threads_bitwise(void) {
    unsigned char *ref = calloc(1, OUT_BYTES), *got = calloc(1, OUT_BYTES), *again = calloc(1, OUT_BYTES);
    gln_context_t *c1 = ctx_threads(1);
    const size_t bytes = run_set(c1, ref);
    for (int t = 2; t <= 3; t++) {
        gln_context_t *ct = ctx_threads(t);
        CHECK(run_set(ct, got) == bytes);
        CHECK(gln_check_bitwise("threads vs 1", ref, got, bytes));
        /* The 1-thread context, after another context with another count was created. */
        run_set(c1, again);
        CHECK(gln_check_bitwise("1-thread context after a second context", ref, again, bytes));
        gln_context_destroy(ct);
    }
    gln_context_t *c0 = ctx_threads(0); /* library default */
    run_set(c0, got);
    CHECK(gln_check_bitwise("default vs 1", ref, got, bytes));
    gln_context_destroy(c0);
    gln_context_destroy(c1);
    free(ref), free(got), free(again);
}

GLN_TEST_MAIN(GLN_CASE(test_threads_bitwise))
