/* Empty and degenerate tensors (issue 15 items 4 and 5).
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

GLN_TEST_MAIN(GLN_CASE(setup), GLN_CASE(test_quantize_degenerate), GLN_CASE(test_grouped_quantize_degenerate),
              GLN_CASE(test_grouped_dbias_degenerate))
