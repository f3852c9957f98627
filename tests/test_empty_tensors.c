/* Empty and degenerate tensors.
 *
 * Every op on empty tensors: each public entry point — quantize / dequantize / grouped
 * quantize / swizzle, GEMMs and grouped GEMMs, dbias, amax, cast, the MoE ops and the layer's
 * forward / backward / backward_dw on every recipe and path — runs on [0, C], [R, 0] and
 * [0, 0] operands with NULL data, so that the suite under clang's UBSan with
 * -fno-sanitize-recover=all (pointer-overflow, nonnull-attribute, nullability) catches any
 * NULL + 0 pointer arithmetic or memcpy / memset on NULL with 0 bytes.
 *
 * Degenerate shapes: quantize, dequantize, grouped quantize and grouped dbias of an [R, 0] tensor
 * used to loop over its R rows (R = 2^62 never returned).  An empty tensor now returns at once
 * whatever its other dimension: R = GLN_MAX_DIM (2^56, the largest a dimension may be; 2^62 is
 * refused by the size limits) must finish in well under a second, and only the per-tensor scale
 * (amax 0, scale 1) is written.  Data pointers of empty tensors are NULL throughout: nothing may
 * be read or written through them. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define P56 ((int64_t)1 << 56)
#define P62 ((int64_t)1 << 62)
/* What "at once" means here: the old loops over 2^56 rows take years; a second is generous even
 * under sanitizers on a loaded machine. */
#define QUICK_SECONDS 1.0

static gln_context_t *ctx;
static void setup(void) { ctx = gln_test_cpu_context(); }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK_QUICK(t0, what)                                                                   \
    CHECK_MSG(now() - (t0) < QUICK_SECONDS, "%s took %.3f s", (what), now() - (t0))

static const gln_scaling_mode_t k_modes[4] = {GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D,
                                              GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_2D};

/* The quantized output of an empty [rows, cols] tensor: no data, no scale grid but TENSOR's one
 * scale (the per-tensor fields point at these floats). */
typedef struct empty_out {
    float scale_inv, col_scale_inv, scale, amax;
    gln_tensor_t t;
} empty_out_t;

static void empty_out_init(empty_out_t *o, gln_scaling_mode_t mode, int64_t rows, int64_t cols) {
    o->scale_inv = o->col_scale_inv = -1.0f;
    o->scale = 2.0f; /* delayed scaling reads it */
    o->amax = -1.0f;
    gln_tensor_t t = {GLN_DTYPE_FP8_E4M3, rows, cols, NULL, mode, NULL, NULL, NULL, NULL, NULL};
    if (mode == GLN_SCALING_TENSOR) {
        t.scale_inv = &o->scale_inv;
        t.col_scale_inv = &o->col_scale_inv;
        t.scale = &o->scale;
        t.amax = &o->amax;
    }
    o->t = t;
}

/* quantize / dequantize of [R, 0] and [0, C] at the dimension limit, every mode and copy */
static void test_quantize_degenerate(void) {
    const int64_t shapes[2][2] = {{P56, 0}, {0, P56}};
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < 4; m++)
            for (int delayed = 0; delayed <= (k_modes[m] == GLN_SCALING_TENSOR); delayed++) {
                gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                cfg.mode = k_modes[m];
                cfg.rowwise = cfg.columnwise = 1;
                cfg.delayed = delayed;
                gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, shapes[s][0], shapes[s][1], NULL);
                empty_out_t o;
                empty_out_init(&o, cfg.mode, in.rows, in.cols);
                double t0 = now();
                CHECK_OK(gln_quantize(ctx, &cfg, &in, &o.t));
                CHECK_QUICK(t0, "quantize of an empty tensor");
                if (cfg.mode == GLN_SCALING_TENSOR) {
                    /* current: amax 0 gives scale 1; delayed: the given scale 2, amax max(-1, 0) */
                    const float want = delayed ? 0.5f : 1.0f;
                    CHECK_MSG(o.scale_inv == want && o.col_scale_inv == want,
                              "shape %d delayed %d: scale_inv %g / %g", s, delayed, (double)o.scale_inv,
                              (double)o.col_scale_inv);
                    CHECK(o.amax == 0.0f);
                }
                gln_tensor_t deq = gln_tensor_make(GLN_DTYPE_FP32, in.rows, in.cols, NULL);
                t0 = now();
                CHECK_OK(gln_dequantize(ctx, &o.t, 0, &deq));
                CHECK_OK(gln_dequantize(ctx, &o.t, 1, &deq));
                CHECK_QUICK(t0, "dequantize of an empty tensor");
            }
    /* past the dimension limit the call is refused instead (test_size_limits has the rest) */
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, P62, 0, NULL);
    empty_out_t o;
    empty_out_init(&o, GLN_SCALING_TENSOR, P62, 0);
    CHECK_STATUS(gln_quantize(ctx, &cfg, &in, &o.t), GLN_STATUS_INVALID_ARGUMENT,
                 "in->rows 4611686018427387904 exceeds GLN_MAX_DIM");
}

/* grouped quantize of [2^56, 0] split into members, host and "backend" (host on the CPU) splits */
static void test_grouped_quantize_degenerate(void) {
    int64_t splits[3] = {P56 / 2, 0, P56 / 2};
    for (int m = 0; m < 4; m++)
        for (int on_backend = 0; on_backend <= 1; on_backend++) {
            gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
            cfg.mode = k_modes[m];
            cfg.rowwise = cfg.columnwise = 1;
            float scale_inv[3] = {-1, -1, -1}, col_scale_inv[3] = {-1, -1, -1}, amax[3] = {-1, -1, -1};
            gln_grouped_tensor_t in = {3, splits, on_backend, gln_tensor_make(GLN_DTYPE_FP16, P56, 0, NULL)};
            gln_grouped_tensor_t out = {3, splits, on_backend,
                                        {GLN_DTYPE_FP8_E4M3, P56, 0, NULL, cfg.mode, NULL, NULL, NULL, NULL, NULL}};
            if (cfg.mode == GLN_SCALING_TENSOR) {
                out.packed.scale_inv = scale_inv;
                out.packed.col_scale_inv = col_scale_inv;
                out.packed.amax = amax;
            }
            double t0 = now();
            CHECK_OK(gln_grouped_quantize(ctx, &cfg, &in, &out));
            CHECK_QUICK(t0, "grouped quantize of an [R, 0] tensor");
            if (cfg.mode == GLN_SCALING_TENSOR)
                for (int i = 0; i < 3; i++)
                    CHECK(scale_inv[i] == 1.0f && col_scale_inv[i] == 1.0f && amax[i] == 0.0f);
        }
}

/* grouped dbias of [2^56, 0]: every dbias is [1, 0]; of [0, C]: zeros (or unchanged) */
static void test_grouped_dbias_degenerate(void) {
    int64_t splits[2] = {P56 - 5, 5};
    gln_grouped_tensor_t dy = {2, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, P56, 0, NULL)};
    gln_tensor_t db[2] = {gln_tensor_make(GLN_DTYPE_FP32, 1, 0, NULL), gln_tensor_make(GLN_DTYPE_FP32, 1, 0, NULL)};
    for (int acc = 0; acc <= 1; acc++) {
        double t0 = now();
        CHECK_OK(gln_grouped_dbias(ctx, &dy, db, acc));
        CHECK_QUICK(t0, "grouped dbias of an [R, 0] tensor");
    }
    int64_t zero[2] = {0, 0};
    float b0[4] = {7, 7, 7, 7}, b1[4] = {7, 7, 7, 7};
    gln_grouped_tensor_t dy0 = {2, zero, 0, gln_tensor_make(GLN_DTYPE_BF16, 0, 4, NULL)};
    gln_tensor_t db0[2] = {gln_tensor_make(GLN_DTYPE_FP32, 1, 4, b0), gln_tensor_make(GLN_DTYPE_FP32, 1, 4, b1)};
    CHECK_OK(gln_grouped_dbias(ctx, &dy0, db0, 1));
    CHECK(b0[0] == 7.0f && b1[3] == 7.0f); /* empty members leave an accumulated dbias as is */
    CHECK_OK(gln_grouped_dbias(ctx, &dy0, db0, 0));
    for (int j = 0; j < 4; j++) CHECK(b0[j] == 0.0f && b1[j] == 0.0f);
}

/* ---- every op on empty operands (NULL data) -------------------------------------------------- */

static const int64_t k_empty[3][2] = {{0, 5}, {5, 0}, {0, 0}};

static void test_quant_ops_empty(void) {
    for (int s = 0; s < 3; s++)
        for (int m = 0; m < 4; m++)
            for (int v = 0; v < 3; v++) {
                gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                cfg.mode = k_modes[m];
                cfg.rowwise = v != 2;
                cfg.columnwise = v != 1;
                const int64_t R = k_empty[s][0], C = k_empty[s][1];
                gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, R, C, NULL);
                empty_out_t o;
                empty_out_init(&o, cfg.mode, R, C);
                CHECK_OK(gln_quantize(ctx, &cfg, &in, &o.t));
                gln_tensor_t deq = gln_tensor_make(GLN_DTYPE_BF16, R, C, NULL);
                if (cfg.rowwise) CHECK_OK(gln_dequantize(ctx, &o.t, 0, &deq));
                if (cfg.columnwise) CHECK_OK(gln_dequantize(ctx, &o.t, 1, &deq));
                /* grouped: two empty members */
                int64_t splits[2] = {0, R};
                float si[2], csi[2];
                gln_grouped_tensor_t gi = {2, splits, 0, in};
                gln_grouped_tensor_t go = {2, splits, 0, o.t};
                if (cfg.mode == GLN_SCALING_TENSOR) {
                    go.packed.scale_inv = si, go.packed.col_scale_inv = csi;
                    go.packed.scale = NULL, go.packed.amax = NULL;
                }
                CHECK_OK(gln_grouped_quantize(ctx, &cfg, &gi, &go));
            }
    for (int s = 0; s < 3; s++)
        for (int col = 0; col <= 1; col++)
            CHECK_OK(gln_mxfp8_swizzle_scales(ctx, k_empty[s][0], k_empty[s][1], col, NULL, NULL));
    float amax = -1;
    gln_tensor_t e = gln_tensor_make(GLN_DTYPE_BF16, 0, 7, NULL), e2 = gln_tensor_make(GLN_DTYPE_FP32, 0, 7, NULL);
    CHECK_OK(gln_amax(ctx, &e, &amax));
    CHECK(amax == 0.0f);
    CHECK_OK(gln_cast(ctx, &e, &e2));
}

/* D [m, n] = op(A, B) over k for every layout; dims from {0, 3}; high precision and per-tensor
 * FP8 operands; D fp32 / bf16, with and without bias and accumulation. */
static void gemm_case(gln_gemm_layout_t layout, int64_t m, int64_t n, int64_t k, int fp8, gln_dtype_t dt,
                      int bias, int acc) {
    /* TN: A [n,k], B [m,k]; NN: A [k,n], B [m,k]; NT: A [k,n], B [k,m] */
    const int64_t ar = layout == GLN_LAYOUT_TN ? n : k, ac = layout == GLN_LAYOUT_TN ? k : n;
    const int64_t br = layout == GLN_LAYOUT_NT ? k : m, bc = layout == GLN_LAYOUT_NT ? m : k;
    static float abuf[9], bbuf[9], dbuf[9], biasbuf[3];
    static uint8_t qa[9], qb[9];
    static float one = 1.0f;
    for (int i = 0; i < 9; i++) abuf[i] = bbuf[i] = 0.5f, dbuf[i] = 1.0f, qa[i] = qb[i] = 0x38;
    gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP32, ar, ac, ar && ac ? abuf : NULL);
    gln_tensor_t B = gln_tensor_make(GLN_DTYPE_FP32, br, bc, br && bc ? bbuf : NULL);
    if (fp8) {
        gln_tensor_t qA = {GLN_DTYPE_FP8_E4M3, ar, ac, NULL, GLN_SCALING_TENSOR, &one, NULL, &one, NULL, NULL};
        gln_tensor_t qB = {GLN_DTYPE_FP8_E4M3, br, bc, NULL, GLN_SCALING_TENSOR, &one, NULL, &one, NULL, NULL};
        if (ar && ac) qA.data = qA.col_data = qa;
        if (br && bc) qB.data = qB.col_data = qb;
        A = qA, B = qB;
    }
    gln_tensor_t D = gln_tensor_make(dt, m, n, m && n ? dbuf : NULL);
    gln_tensor_t bv = gln_tensor_make(GLN_DTYPE_FP32, 1, n, n ? biasbuf : NULL);
    CHECK_OK(gln_gemm(ctx, layout, &A, &B, &D, bias ? &bv : NULL, acc));
}

static void test_gemm_empty(void) {
    const int64_t d[2] = {0, 3};
    for (int layout = 0; layout < 3; layout++)
        for (int mi = 0; mi < 2; mi++)
            for (int ni = 0; ni < 2; ni++)
                for (int ki = 0; ki < 2; ki++) {
                    if (d[mi] && d[ni] && d[ki]) continue; /* something must be empty */
                    for (int v = 0; v < 8; v++)
                        gemm_case((gln_gemm_layout_t)layout, d[mi], d[ni], d[ki], v & 1,
                                  v & 2 ? GLN_DTYPE_BF16 : GLN_DTYPE_FP32, (v >> 2) & 1, v == 5);
                }
}

/* Grouped GEMMs whose members are all empty (packed rows 0, NULL data), every layout. */
static void test_grouped_gemm_empty(void) {
    int64_t splits[3] = {0, 0, 0};
    static float w[3][12], out[3][12];
    gln_tensor_t wl[3], dl[3], bl[3];
    for (int i = 0; i < 3; i++) {
        wl[i] = gln_tensor_make(GLN_DTYPE_FP32, 4, 3, w[i]);
        dl[i] = gln_tensor_make(GLN_DTYPE_FP32, 3, 4, out[i]);
        bl[i] = gln_tensor_make(GLN_DTYPE_FP32, 1, 4, w[i]);
    }
    for (int layout = 0; layout < 3; layout++) {
        gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
        a.layout = (gln_gemm_layout_t)layout;
        /* TN: B [Σm, 3] D [Σm, 4] with W [4, 3]; NN: B [Σm, 4] D [Σm, 3] with W [4, 3];
         * NT: A [Σm, 4] (x), B [Σm, 3] (dy), D [3, 4] */
        const int64_t bcols = layout == GLN_LAYOUT_NN ? 4 : 3, dcols = layout == GLN_LAYOUT_NN ? 3 : 4;
        gln_grouped_tensor_t b = {3, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, 0, bcols, NULL)};
        gln_grouped_tensor_t dg = {3, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, 0, dcols, NULL)};
        gln_grouped_tensor_t ag = {3, splits, 1, gln_tensor_make(GLN_DTYPE_BF16, 0, 4, NULL)};
        a.b = &b;
        if (layout == GLN_LAYOUT_NT) {
            a.a_grouped = &ag;
            a.d_list = dl;
        } else {
            a.a_list = wl;
            a.d_grouped = &dg;
            if (layout == GLN_LAYOUT_TN) a.bias_list = bl;
        }
        CHECK_OK(gln_grouped_gemm(ctx, &a));
        if (layout == GLN_LAYOUT_NT) CHECK(out[2][11] == 0.0f); /* empty members: zeroed wgrad */
    }
}

static void test_moe_empty(void) {
    float g[1];
    int32_t ex[1];
    int64_t splits[4] = {9, 9, 9, 9};
    CHECK_OK(gln_moe_router_forward(ctx, 0, 4, 2, NULL, NULL, NULL));
    CHECK_OK(gln_moe_router_backward(ctx, 0, 4, 2, NULL, NULL, NULL, NULL));
    CHECK_OK(gln_moe_permute_plan(ctx, 0, 4, 2, NULL, splits, NULL));
    CHECK(splits[0] == 0 && splits[3] == 0);
    /* no tokens */
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, 0, 8, NULL), xp = gln_tensor_make(GLN_DTYPE_FP32, 0, 8, NULL);
    CHECK_OK(gln_moe_permute(ctx, 0, 2, NULL, &x, &xp));
    CHECK_OK(gln_moe_permute_backward(ctx, 0, 2, NULL, &xp, &x));
    CHECK_OK(gln_moe_unpermute(ctx, 0, 2, NULL, NULL, &xp, &x));
    CHECK_OK(gln_moe_unpermute_backward(ctx, 0, 2, NULL, NULL, &xp, &x, &xp, NULL));
    /* tokens without features: H = 0 */
    int64_t row_of[4] = {0, 2, 1, 3};
    float gates[4] = {0.5f, 0.5f, 0.25f, 0.75f}, dgates[4] = {-1, -1, -1, -1};
    x = gln_tensor_make(GLN_DTYPE_BF16, 2, 0, NULL), xp = gln_tensor_make(GLN_DTYPE_FP32, 4, 0, NULL);
    CHECK_OK(gln_moe_permute(ctx, 2, 2, row_of, &x, &xp));
    CHECK_OK(gln_moe_permute_backward(ctx, 2, 2, row_of, &xp, &x));
    CHECK_OK(gln_moe_unpermute(ctx, 2, 2, row_of, gates, &xp, &x));
    CHECK_OK(gln_moe_unpermute_backward(ctx, 2, 2, row_of, gates, &xp, &x, &xp, dgates));
    CHECK(dgates[0] == 0.0f && dgates[3] == 0.0f); /* <dy, yp> over no features */
    (void)g, (void)ex;
    for (int s = 0; s < 3; s++)
        for (int act = 0; act <= 1; act++) {
            const int64_t R = k_empty[s][0], H = k_empty[s][1] * (act == GLN_ACT_SWIGLU ? 2 : 1);
            const int64_t W = act == GLN_ACT_SWIGLU ? H / 2 : H;
            gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, R, H, NULL);
            gln_tensor_t out = gln_tensor_make(GLN_DTYPE_BF16, R, W, NULL);
            gln_tensor_t din = gln_tensor_make(GLN_DTYPE_FP16, R, H, NULL);
            CHECK_OK(gln_activation_forward(ctx, (gln_activation_t)act, &in, &out));
            CHECK_OK(gln_activation_backward(ctx, (gln_activation_t)act, &in, &out, &din));
        }
}

/* The layer on a batch of zero rows: every recipe and path, library-allocated y / dx, bias,
 * fused and delayed wgrad; then the queued wgrad and zero_grad. */
static void test_layer_empty(void) {
    for (int recipe = 0; recipe <= GLN_RECIPE_FP8_BLOCK; recipe++)
        for (int path = 0; path <= 1; path++)
            for (int v = 0; v < 3; v++) {
                gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
                c.num_experts = 3, c.in_features = 32, c.out_features = 16;
                c.recipe = (gln_recipe_t)recipe, c.path = (gln_path_t)path;
                c.fuse_wgrad_accumulation = v == 1;
                c.delay_wgrad_compute = v == 2;
                c.save_original_input = v == 2 && recipe != GLN_RECIPE_FP8_DELAYED;
                gln_grouped_linear_t *L = NULL;
                CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
                if (!L) continue;
                int64_t splits[3] = {0, 0, 0};
                gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, 0, 32, NULL);
                gln_tensor_t y = gln_tensor_make(GLN_DTYPE_BF16, 0, 16, NULL);
                gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
                a.x = &x, a.m_splits = splits, a.y = &y;
                a.splits_on_backend = path == GLN_PATH_GROUPED && v == 1;
                a.microbatch = v == 1 ? GLN_MICROBATCH_FIRST : GLN_MICROBATCH_UNSET;
                gln_grouped_linear_saved_t *saved = NULL;
                CHECK_OK(gln_grouped_linear_forward(L, &a, &saved));
                gln_tensor_t dy = gln_tensor_make(GLN_DTYPE_BF16, 0, 16, NULL);
                gln_tensor_t dx = gln_tensor_make(GLN_DTYPE_BF16, 0, 32, NULL);
                if (saved) CHECK_OK(gln_grouped_linear_backward(saved, &dy, &dx));
                if (v == 2) CHECK_OK(gln_grouped_linear_backward_dw(L));
                CHECK_OK(gln_grouped_linear_saved_release(saved));
                gln_tensor_t y2 = gln_tensor_make(GLN_DTYPE_BF16, 0, 16, NULL); /* inference */
                a.y = &y2;
                CHECK_OK(gln_grouped_linear_forward(L, &a, NULL));
                CHECK_OK(gln_grouped_linear_zero_grad(L));
                CHECK_OK(gln_grouped_linear_destroy(L));
            }
}

static void test_memory_empty(void) {
    void *p = (void *)&p;
    CHECK_OK(gln_malloc(ctx, 0, &p));
    CHECK(p == NULL);
    CHECK_OK(gln_memcpy(ctx, NULL, NULL, 0, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_free(ctx, NULL));
}

GLN_TEST_MAIN(GLN_CASE(setup), GLN_CASE(test_quantize_degenerate), GLN_CASE(test_grouped_quantize_degenerate),
              GLN_CASE(test_grouped_dbias_degenerate), GLN_CASE(test_quant_ops_empty), GLN_CASE(test_gemm_empty),
              GLN_CASE(test_grouped_gemm_empty), GLN_CASE(test_moe_empty), GLN_CASE(test_layer_empty),
              GLN_CASE(test_memory_empty))
