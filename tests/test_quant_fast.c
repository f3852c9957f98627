/* The CPU backend's fast quantizers and GEMM dequantization against the plain references of
 * src/quant, bit for bit.  The references are the definition (the oracle test checks them through
 * the public API only as long as the backend uses them, so this test keeps both honest): every
 * scaling mode, both FP8 formats, both E8M0 rules, current / delayed / power-of-two scaling, all
 * copy combinations, three input dtypes, odd shapes, and data with NaN, ±Inf, zeros, subnormals. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_quant_fast.h"
#include "harness.h"
#include "quant/quant.h"

typedef struct qbufs {
    gln_tensor_t t;
    gln_quant_layout_t lay;
    float scale, amax;
} qbufs_t;

static void qbufs_alloc(qbufs_t *q, const gln_quant_config_t *cfg, int64_t R, int64_t C) {
    memset(q, 0, sizeof *q);
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, R, C, &q->lay));
    q->t.dtype = cfg->fp8_dtype;
    q->t.rows = R;
    q->t.cols = C;
    q->t.scaling = cfg->mode;
    /* Poisoned, so elements a quantizer fails to write differ between the two runs only if the
     * poison differs — both start from the same bytes, and padding must match too. */
    q->t.data = gln_test_alloc(q->lay.data_bytes);
    q->t.col_data = gln_test_alloc(q->lay.col_data_bytes);
    q->t.scale_inv = gln_test_alloc(q->lay.scale_bytes);
    q->t.col_scale_inv = gln_test_alloc(q->lay.col_scale_bytes);
    memset(q->t.data, 0x5A, q->lay.data_bytes);
    memset(q->t.col_data, 0x5A, q->lay.col_data_bytes);
    memset(q->t.scale_inv, 0x5A, q->lay.scale_bytes);
    memset(q->t.col_scale_inv, 0x5A, q->lay.col_scale_bytes);
    q->scale = 0.75f; /* the delayed-scaling encode scale (current scaling overwrites it) */
    q->amax = 0.5f;   /* delayed scaling max-accumulates into it */
    q->t.scale = &q->scale;
    q->t.amax = &q->amax;
}

static void qbufs_free(qbufs_t *q) {
    CHECK(gln_guard_ok(q->t.data) && gln_guard_ok(q->t.col_data) && gln_guard_ok(q->t.scale_inv) &&
          gln_guard_ok(q->t.col_scale_inv));
    gln_test_free(q->t.data);
    gln_test_free(q->t.col_data);
    gln_test_free(q->t.scale_inv);
    gln_test_free(q->t.col_scale_inv);
}

/* Random data with a sprinkling of special values. */
static void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t R, int64_t C, int specials) {
    size_t n = (size_t)(R * C);
    void *p = gln_test_alloc(n * gln_dtype_size(dt) + 1);
    for (size_t i = 0; i < n; i++) {
        double v = gln_rng_normal(rng) * ldexp(1.0, (int)gln_rng_int(rng, -12, 6));
        if (specials) {
            switch (gln_rng_int(rng, 0, 60)) {
            case 0: v = NAN; break;
            case 1: v = INFINITY; break;
            case 2: v = -INFINITY; break;
            case 3: v = 0.0; break;
            case 4: v = ldexp(1.0, -140); break; /* an fp32 subnormal */
            default: break;
            }
        }
        gln_store(p, dt, i, v);
    }
    return p;
}

static void compare(const char *what, const qbufs_t *a, const qbufs_t *b, const gln_quant_config_t *cfg) {
    if (cfg->rowwise) {
        gln_check_bitwise(what, a->t.data, b->t.data, a->lay.data_bytes);
        gln_check_bitwise(what, a->t.scale_inv, b->t.scale_inv, a->lay.scale_bytes);
    }
    if (cfg->columnwise) {
        gln_check_bitwise(what, a->t.col_data, b->t.col_data, a->lay.col_data_bytes);
        gln_check_bitwise(what, a->t.col_scale_inv, b->t.col_scale_inv, a->lay.col_scale_bytes);
    }
    gln_check_bitwise(what, &a->scale, &b->scale, sizeof a->scale);
    gln_check_bitwise(what, &a->amax, &b->amax, sizeof a->amax);
}

/* Quantize with both implementations; then dequantize each produced copy both ways. */
static void check_one(const gln_quant_config_t *cfg, const gln_tensor_t *in, const char *what) {
    qbufs_t ref, fast;
    qbufs_alloc(&ref, cfg, in->rows, in->cols);
    qbufs_alloc(&fast, cfg, in->rows, in->cols);
    CHECK_OK(gln_quantize_ref(cfg, in, &ref.t));
    CHECK_OK(gln_cpu_quantize_fast(cfg, in, &fast.t));
    compare(what, &ref, &fast, cfg);
    size_t n = (size_t)(in->rows * in->cols);
    float *d_ref = gln_test_alloc(n * sizeof(float) + 4), *d_fast = gln_test_alloc(n * sizeof(float) + 4);
    for (int col = 0; col < 2; col++) {
        if (col ? !cfg->columnwise : !cfg->rowwise) continue;
        CHECK_OK(gln_dequantize_to_f32_ref(&ref.t, col, d_ref));
        CHECK_OK(gln_cpu_dequantize_to_f32(&ref.t, col, d_fast));
        gln_check_bitwise(what, d_ref, d_fast, n * sizeof(float));
    }
    gln_test_free(d_ref);
    gln_test_free(d_fast);
    qbufs_free(&ref);
    qbufs_free(&fast);
}

static void sweep(gln_scaling_mode_t mode) {
    static const int64_t shapes[][2] = {{1, 1}, {1, 70}, {5, 33}, {17, 128}, {129, 48}, {64, 257}, {300, 3}};
    static const gln_dtype_t in_dtypes[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};
    static const gln_dtype_t fp8s[] = {GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2};
    gln_rng_t rng = gln_rng_seed(77 + (uint64_t)mode);
    int cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < 3; d++)
            for (int specials = 0; specials < 2; specials++) {
                int64_t R = shapes[s][0], C = shapes[s][1];
                void *x = make_input(&rng, in_dtypes[d], R, C, specials);
                gln_tensor_t in = gln_tensor_make(in_dtypes[d], R, C, x);
                for (size_t f = 0; f < 2; f++)
                    for (int usage = 1; usage < 4; usage++)
                        for (int variant = 0; variant < 3; variant++) {
                            gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                            cfg.mode = mode;
                            cfg.fp8_dtype = fp8s[f];
                            cfg.rowwise = usage & 1;
                            cfg.columnwise = (usage >> 1) & 1;
                            if (mode == GLN_SCALING_TENSOR) {
                                cfg.delayed = variant == 1;
                                cfg.power_2_scale = variant == 2;
                            } else if (mode == GLN_SCALING_MXFP8_1D) {
                                if (variant == 2) continue;
                                cfg.e8m0_rounding = variant ? GLN_E8M0_ROUND_FLOOR : GLN_E8M0_ROUND_UP;
                            } else {
                                if (variant == 2) continue;
                                cfg.power_2_scale = variant == 0;
                            }
                            /* inputs with NaN: under both amax rules (the fast paths' NaN
                             * fallback must follow cfg.amax_nan_propagate) */
                            for (int nanp = 0; nanp <= specials; nanp++) {
                                cfg.amax_nan_propagate = nanp;
                                char what[140];
                                snprintf(what, sizeof what, "mode %d %lldx%lld %s->%s usage %d variant %d%s%s",
                                         (int)mode, (long long)R, (long long)C,
                                         gln_dtype_name(in_dtypes[d]), gln_dtype_name(fp8s[f]), usage,
                                         variant, specials ? " specials" : "", nanp ? " nan-propagate" : "");
                                check_one(&cfg, &in, what);
                                cases++;
                            }
                        }
                gln_test_free(x);
            }
    CHECK(cases > 100);
}

static void test_tensor_scaling(void) { sweep(GLN_SCALING_TENSOR); }
static void test_mxfp8(void) { sweep(GLN_SCALING_MXFP8_1D); }
static void test_block_1d(void) { sweep(GLN_SCALING_BLOCK_1D); }
static void test_block_2d(void) { sweep(GLN_SCALING_BLOCK_2D); }

/* Large enough that the fast paths split the work across threads. */
static void test_large_threaded(void) {
    gln_rng_t rng = gln_rng_seed(5);
    const int64_t R = 1024, C = 1536;
    void *x = make_input(&rng, GLN_DTYPE_BF16, R, C, 0);
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, R, C, x);
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.rowwise = cfg.columnwise = 1;
    check_one(&cfg, &in, "large per-tensor");
    cfg.mode = GLN_SCALING_MXFP8_1D;
    check_one(&cfg, &in, "large mxfp8");
    gln_test_free(x);
}

GLN_TEST_MAIN(GLN_CASE(test_tensor_scaling), GLN_CASE(test_mxfp8), GLN_CASE(test_block_1d),
              GLN_CASE(test_block_2d), GLN_CASE(test_large_threaded))
