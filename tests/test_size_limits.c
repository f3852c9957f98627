/* Size limits: every entry point bounds each dimension by GLN_MAX_DIM and each
 * element count by GLN_MAX_ELEMS, with checked arithmetic, so no size wraps before it is checked.
 * One case per reproducer of the audit: each of these used to allocate a wrapped (tiny or zero)
 * buffer and write past it, or to report a negative size as success.  Every rejected call must
 * fail with INVALID_ARGUMENT and a message naming the argument, before touching any buffer (the
 * data pointers below point at a few bytes: a call that went ahead would be caught by ASan). */
#include <stdint.h>
#include <string.h>

#include "harness.h"

static const gln_status_t INV = GLN_STATUS_INVALID_ARGUMENT;
#define P62 ((int64_t)1 << 62)
#define P56 ((int64_t)1 << 56)

static gln_context_t *ctx;
static float scratch[64]; /* stands in for data that must never be read */

static void setup(void) { ctx = gln_test_cpu_context(); }

/* ---- layer create: owned-parameter sizing ------------------------------------------------- */

static void expect_create(const gln_grouped_linear_config_t *c, const char *needle) {
    gln_grouped_linear_t *L = (gln_grouped_linear_t *)(uintptr_t)1;
    CHECK_STATUS(gln_grouped_linear_create(ctx, c, &L), INV, needle);
    CHECK(L == NULL);
    if (L && L != (gln_grouped_linear_t *)(uintptr_t)1) gln_grouped_linear_destroy(L);
}

static void test_create_sizes(void) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.param_dtype = GLN_DTYPE_FP16;
    /* 6 · 2^62 · 2 bytes wrapped to a 1-byte allocation that the initializer wrote past */
    c.num_experts = 1, c.in_features = 6, c.out_features = P62;
    expect_create(&c, "cfg->out_features 4611686018427387904 exceeds GLN_MAX_DIM");
    c.in_features = P62, c.out_features = 6;
    expect_create(&c, "cfg->in_features 4611686018427387904 exceeds GLN_MAX_DIM");
    /* 2^32 · 2^32 wrapped to 0 bytes: create used to succeed with no storage */
    c.in_features = (int64_t)1 << 32, c.out_features = (int64_t)1 << 32;
    expect_create(&c, "cfg->out_features x cfg->in_features");
    /* each expert fits, the packed [N, K_out, K_in] buffer does not */
    c.num_experts = 1024, c.in_features = (int64_t)1 << 24, c.out_features = (int64_t)1 << 24;
    expect_create(&c, "cfg->num_experts x out_features x in_features");
    /* delayed scaling: 3 slots per expert and the amax history are sized from N too */
    c = (gln_grouped_linear_config_t)GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.recipe = GLN_RECIPE_FP8_DELAYED;
    c.num_experts = INT32_MAX / 2, c.in_features = 1, c.out_features = 1;
    expect_create(&c, "cfg->num_experts 1073741823 exceeds 715827882");
    c.num_experts = 1 << 26, c.amax_history_len = INT32_MAX;
    expect_create(&c, "cfg->amax_history_len x 3 num_experts");
    /* the largest sizes still pass validation (and then simply need memory) */
    c = (gln_grouped_linear_config_t)GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = 1, c.in_features = 16, c.out_features = 8;
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    gln_grouped_linear_destroy(L);
}

/* ---- layer forward: rows · cols and the split sum ---------------------------------------- */

static void expect_forward(gln_grouped_linear_t *L, const gln_tensor_t *x, const int64_t *splits,
                           const char *needle) {
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    gln_tensor_t y = gln_tensor_make(GLN_DTYPE_BF16, x->rows, 1, NULL); /* library-allocated */
    a.x = x, a.m_splits = splits, a.y = &y;
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_STATUS(gln_grouped_linear_forward(L, &a, &saved), INV, needle);
    CHECK(saved == NULL);
    CHECK(y.data == NULL);
}

static void test_forward_sizes(void) {
    enum { E = 128 };
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = E, c.in_features = 1, c.out_features = 1, c.bias = 0;
    c.path = GLN_PATH_GROUPED;
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    int64_t splits[E];
    for (int i = 0; i < E; i++) splits[i] = 0;

    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, P62, 1, scratch);
    expect_forward(L, &x, splits, "args->x->rows 4611686018427387904 exceeds GLN_MAX_DIM");
    /* 128 splits of 2^56 rows each: their int64 sum wrapped to -2^63, which is <= rows, so the
     * grouped path accepted them and read 2^63 rows of a tiny buffer */
    x.rows = P56;
    for (int i = 0; i < E; i++) splits[i] = P56;
    expect_forward(L, &x, splits, "args->m_splits sum 144115188075855872 (through [1]) exceeds x->rows");
    gln_grouped_linear_destroy(L);

    /* rows · cols past the element limit although each dimension is allowed */
    c.num_experts = 1, c.in_features = 1 << 10;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    x = gln_tensor_make(GLN_DTYPE_BF16, P56, 1 << 10, scratch);
    splits[0] = P56;
    expect_forward(L, &x, splits, "args->x [72057594037927936, 1024] exceeds 2^56 elements");
    gln_grouped_linear_destroy(L);
}

/* ---- MoE ops: negative widths, element counts past 2^63, scratch of cols · 4 -------------- */

static void test_moe_sizes(void) {
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 3, P62, scratch);
    gln_tensor_t out = in;
    /* GELU on [3, 2^62]: the scratch row of 2^62 · 4 bytes wrapped to 0 */
    CHECK_STATUS(gln_activation_forward(ctx, GLN_ACT_GELU, &in, &out), INV,
                 "gln_activation_forward: in->cols 4611686018427387904 exceeds GLN_MAX_DIM");
    CHECK_STATUS(gln_activation_backward(ctx, GLN_ACT_GELU, &in, &out, &out), INV,
                 "gln_activation_backward: in->cols 4611686018427387904 exceeds GLN_MAX_DIM");
    in.cols = 2 * (P62 / 2);
    CHECK_STATUS(gln_activation_forward(ctx, GLN_ACT_SWIGLU, &in, &out), INV, "in->cols");
    in = gln_tensor_make(GLN_DTYPE_FP32, P56, 2, scratch);
    CHECK_STATUS(gln_activation_forward(ctx, GLN_ACT_GELU, &in, &in), INV,
                 "in [72057594037927936, 2] exceeds 2^56 elements");

    /* permute with width -2^62: memcpy of a negative row length (2^63 bytes as size_t) */
    int64_t row_of[2] = {0, 1};
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_FP32, 1, -P62, scratch);
    gln_tensor_t xp = gln_tensor_make(GLN_DTYPE_FP32, 2, -P62, scratch);
    CHECK_STATUS(gln_moe_permute(ctx, 1, 2, row_of, &x, &xp), INV,
                 "gln_moe_permute: x->cols -4611686018427387904 must be >= 0");
    CHECK_STATUS(gln_moe_permute_backward(ctx, 1, 2, row_of, &xp, &x), INV,
                 "gln_moe_permute_backward: dxp->cols -4611686018427387904 must be >= 0");
    float gates[2] = {0.5f, 0.5f}, dgates[2];
    CHECK_STATUS(gln_moe_unpermute(ctx, 1, 2, row_of, gates, &xp, &x), INV, "yp->cols");
    CHECK_STATUS(gln_moe_unpermute_backward(ctx, 1, 2, row_of, gates, &xp, &x, &xp, dgates), INV,
                 "yp->cols");
    /* wide rows: the cols · 4 scratch and the element count */
    x.cols = P62, xp.cols = P62;
    CHECK_STATUS(gln_moe_permute(ctx, 1, 2, row_of, &x, &xp), INV, "x->cols 4611686018427387904 exceeds");

    /* token counts: T · k rows and T · E logits */
    CHECK_STATUS(gln_moe_permute(ctx, P62, 2, row_of, &x, &xp), INV, "tokens 4611686018427387904 exceeds");
    CHECK_STATUS(gln_moe_permute(ctx, P56, 4, row_of, &x, &xp), INV, "times k 4 exceeds GLN_MAX_DIM");
    int64_t splits[4];
    int32_t ex[2] = {0, 1};
    CHECK_STATUS(gln_moe_permute_plan(ctx, P56, 4, 2, ex, splits, row_of), INV, "times k 2 exceeds");
    CHECK_STATUS(gln_moe_router_forward(ctx, P56, 64, 2, scratch, ex, gates), INV,
                 "logits [tokens, num_experts] (72057594037927936 x 64) exceeds 2^56 elements");
    CHECK_STATUS(gln_moe_router_backward(ctx, P62, 4, 2, scratch, ex, gates, scratch), INV,
                 "tokens 4611686018427387904 exceeds");
}

/* ---- layouts: each dimension bounded, never a negative size reported as success ----------- */

static void test_layout_sizes(void) {
    gln_quant_layout_t l;
    /* [2^62, 0] has 0 elements, but its padded scale grids overflowed int64 (negative sizes) */
    CHECK_STATUS(gln_quant_layout(GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, P62, 0, &l), INV,
                 "gln_quant_layout: rows 4611686018427387904 exceeds GLN_MAX_DIM");
    CHECK_STATUS(gln_quant_layout(GLN_SCALING_BLOCK_2D, GLN_DTYPE_FP8_E4M3, 0, INT64_MAX, &l), INV,
                 "cols 9223372036854775807 exceeds GLN_MAX_DIM");
    CHECK_STATUS(gln_quant_layout(GLN_SCALING_NONE, GLN_DTYPE_FP32, P56, 2, &l), INV,
                 "exceeds 2^56 elements");
    /* at the limits every size is non-negative and consistent */
    const gln_scaling_mode_t modes[4] = {GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D, GLN_SCALING_BLOCK_1D,
                                         GLN_SCALING_BLOCK_2D};
    const int64_t shapes[4][2] = {{P56, 1}, {1, P56}, {P56, 0}, {0, P56}};
    for (int m = 0; m < 4; m++)
        for (int s = 0; s < 4; s++) {
            CHECK_OK(gln_quant_layout(modes[m], GLN_DTYPE_FP8_E4M3, shapes[s][0], shapes[s][1], &l));
            CHECK(l.scale_rows >= 0 && l.scale_cols >= 0 && l.col_scale_rows >= 0 && l.col_scale_cols >= 0);
            CHECK(l.data_bytes == (size_t)(shapes[s][0] * shapes[s][1]));
            size_t es = modes[m] == GLN_SCALING_MXFP8_1D ? 1 : 4;
            CHECK(l.scale_bytes == (size_t)(l.scale_rows * l.scale_cols) * es);
            CHECK(l.col_scale_bytes == (size_t)(l.col_scale_rows * l.col_scale_cols) * es);
        }
    /* the swizzle reports a layout failure under its own name */
    CHECK_STATUS(gln_mxfp8_swizzle_scales(ctx, P62, 1, 0, NULL, NULL), INV,
                 "gln_mxfp8_swizzle_scales: rows 4611686018427387904 exceeds GLN_MAX_DIM");

    int64_t sp[3] = {1, 2, 3}, ro[4], co[4];
    CHECK_STATUS(gln_grouped_scale_offsets(GLN_SCALING_MXFP8_1D, 3, sp, P62, ro, co), INV,
                 "gln_grouped_scale_offsets: cols 4611686018427387904 exceeds GLN_MAX_DIM");
    int64_t big[3] = {P56, P56, 1};
    CHECK_STATUS(gln_grouped_scale_offsets(GLN_SCALING_BLOCK_1D, 3, big, 1, ro, co), INV, "splits[1]");
    int64_t wide[1] = {P56};
    CHECK_STATUS(gln_grouped_scale_offsets(GLN_SCALING_BLOCK_1D, 1, wide, 2, ro, co), INV,
                 "splits sum x cols");

    int64_t r = -1, c = -1;
    CHECK_STATUS(gln_grouped_scale_bound(GLN_SCALING_MXFP8_1D, 8, 16, P62, &r, &c), INV,
                 "gln_grouped_scale_bound: cols 4611686018427387904 exceeds GLN_MAX_DIM");
    CHECK_STATUS(gln_grouped_scale_bound(GLN_SCALING_MXFP8_1D, 8, P56, 1 << 8, &r, &c), INV,
                 "exceeds 2^56 elements");
    CHECK(r == -1 && c == -1);
    /* the worst padding the limits allow: every bound non-negative and >= a real layout's */
    for (int m = 0; m < 4; m++)
        for (int s = 0; s < 4; s++) {
            CHECK_OK(gln_grouped_scale_bound(modes[m], INT32_MAX, shapes[s][0], shapes[s][1], &r, &c));
            CHECK_OK(gln_quant_layout(modes[m], GLN_DTYPE_FP8_E4M3, shapes[s][0], shapes[s][1], &l));
            CHECK_MSG(r >= l.scale_rows * l.scale_cols && c >= l.col_scale_rows * l.col_scale_cols,
                      "mode %d shape %d: bound %lld / %lld", m, s, (long long)r, (long long)c);
        }
}

/* ---- GEMM / quantize / reductions: element counts past 2^56 -------------------------------- */

static void test_op_sizes(void) {
    gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP32, (int64_t)1 << 40, (int64_t)1 << 40, scratch);
    gln_tensor_t B = gln_tensor_make(GLN_DTYPE_FP32, 1, (int64_t)1 << 40, scratch);
    gln_tensor_t D = gln_tensor_make(GLN_DTYPE_FP32, 1, (int64_t)1 << 40, scratch);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, NULL, 0), INV,
                 "gln_gemm: A [1099511627776, 1099511627776] exceeds 2^56 elements");
    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP32, P62, 0, NULL);
    float amax = 0;
    CHECK_STATUS(gln_amax(ctx, &t, &amax), INV, "gln_amax: x->rows 4611686018427387904 exceeds");
    gln_quant_config_t qc = GLN_QUANT_CONFIG_INIT;
    gln_tensor_t q = {GLN_DTYPE_FP8_E4M3, P62, 0, NULL, GLN_SCALING_TENSOR, scratch, NULL, NULL, NULL, NULL};
    CHECK_STATUS(gln_quantize(ctx, &qc, &t, &q), INV, "gln_quantize: in->rows 4611686018427387904 exceeds");
    int64_t splits[1] = {P62};
    gln_grouped_tensor_t g = {1, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, P62, 0, NULL)};
    gln_tensor_t db = gln_tensor_make(GLN_DTYPE_FP32, 1, 0, NULL);
    CHECK_STATUS(gln_grouped_dbias(ctx, &g, &db, 0), INV,
                 "gln_grouped_dbias: dy->packed->rows 4611686018427387904 exceeds");
}

GLN_TEST_MAIN(GLN_CASE(setup), GLN_CASE(test_create_sizes), GLN_CASE(test_forward_sizes),
              GLN_CASE(test_moe_sizes), GLN_CASE(test_layout_sizes), GLN_CASE(test_op_sizes))
