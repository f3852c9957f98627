/* Quantization: layouts and scale placement, the per-tensor / MXFP8 / block quantizers on edge
 * shapes, the delayed-scaling state machine, grouped == per-member quantization, dequantize
 * round trips and the MXFP8 swizzle formula (invalid input: test_quant_errors.c).
 *
 * Expected values are hand-derived from TransformerEngine's quantization rules (docs/numerics.md) or built
 * from the format definitions; the bit-exact sweep over all values lives in the numpy oracle
 * (tests/oracle/test_quant_oracle.py). */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "harness.h"
#include "quant_host.h"

/* E4M3 has 3 mantissa bits: RNE relative error <= 2^-4 in the normal range; below it the
 * absolute error is at most half the subnormal step (2^-9 / 2) times the decode scale. */
#define E4M3_RTOL                0.0625
#define E4M3_SUBNORMAL_HALF_STEP (1.0 / 1024.0)

/* ---- layouts ------------------------------------------------------------------------------ */

static void check_layout(gln_scaling_mode_t mode, int64_t R, int64_t C, int64_t sr, int64_t sc, int64_t csr,
                         int64_t csc, size_t esize) {
    gln_quant_layout_t l;
    CHECK_OK(gln_quant_layout(mode, GLN_DTYPE_FP8_E4M3, R, C, &l));
    CHECK_MSG(l.scale_rows == sr && l.scale_cols == sc, "mode %d %lldx%lld: row grid %lldx%lld", mode,
              (long long)R, (long long)C, (long long)l.scale_rows, (long long)l.scale_cols);
    CHECK_MSG(l.col_scale_rows == csr && l.col_scale_cols == csc, "mode %d %lldx%lld: col grid %lldx%lld",
              mode, (long long)R, (long long)C, (long long)l.col_scale_rows, (long long)l.col_scale_cols);
    CHECK(l.data_bytes == (size_t)(R * C) && l.col_data_bytes == (size_t)(R * C));
    CHECK(l.scale_bytes == (size_t)(sr * sc) * esize && l.col_scale_bytes == (size_t)(csr * csc) * esize);
}

static void test_layouts(void) {
    check_layout(GLN_SCALING_TENSOR, 5, 7, 1, 1, 1, 1, 4);
    check_layout(GLN_SCALING_TENSOR, 0, 7, 1, 1, 1, 1, 4);
    /* MXFP8: [pad128(R), pad4(ceil(C/32))], [pad4(ceil(R/32)), pad128(C)] */
    check_layout(GLN_SCALING_MXFP8_1D, 65, 80, 128, 4, 4, 128, 1);
    check_layout(GLN_SCALING_MXFP8_1D, 129, 300, 256, 12, 8, 384, 1);
    check_layout(GLN_SCALING_MXFP8_1D, 0, 32, 0, 4, 0, 128, 1);
    /* BLOCK_1D: [ceil(C/128), pad4(R)], [ceil(R/128), pad4(C)] */
    check_layout(GLN_SCALING_BLOCK_1D, 5, 300, 3, 8, 1, 300, 4);
    check_layout(GLN_SCALING_BLOCK_1D, 257, 129, 2, 260, 3, 132, 4);
    /* BLOCK_2D: [ceil(R/128), pad4(ceil(C/128))], [ceil(C/128), pad4(ceil(R/128))] */
    check_layout(GLN_SCALING_BLOCK_2D, 257, 129, 3, 4, 2, 4, 4);
    check_layout(GLN_SCALING_BLOCK_2D, 1, 1000, 1, 8, 8, 4, 4);
    gln_quant_layout_t l;
    CHECK_OK(gln_quant_layout(GLN_SCALING_NONE, GLN_DTYPE_BF16, 3, 5, &l));
    CHECK(l.data_bytes == 30 && l.col_data_bytes == 0 && l.scale_bytes == 0 && l.col_scale_bytes == 0);
    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP16, 4, 6, &l);
    CHECK(t.dtype == GLN_DTYPE_FP16 && t.rows == 4 && t.cols == 6 && t.data == (void *)&l);
    CHECK(t.scaling == GLN_SCALING_NONE && !t.scale_inv && !t.col_data && !t.col_scale_inv && !t.amax &&
          !t.scale);
}

/* Grouped scale offsets = prefix sums of the per-member layouts; the bound covers any splits. */
static void test_grouped_offsets_and_bound(void) {
    static const gln_scaling_mode_t modes[5] = {GLN_SCALING_NONE, GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D,
                                                GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_2D};
    const int64_t splits[6] = {0, 5, 130, 0, 1, 600};
    const int64_t cols = 96;
    for (int m = 0; m < 5; m++) {
        int64_t ro[7], co[7];
        CHECK_OK(gln_grouped_scale_offsets(modes[m], 6, splits, cols, ro, co));
        int64_t er = 0, ec = 0;
        for (int i = 0; i < 6; i++) {
            CHECK_MSG(ro[i] == er && co[i] == ec, "mode %d member %d offsets %lld %lld", m, i,
                      (long long)ro[i], (long long)co[i]);
            gln_quant_layout_t l;
            gln_dtype_t dt = modes[m] == GLN_SCALING_NONE ? GLN_DTYPE_BF16 : GLN_DTYPE_FP8_E4M3;
            CHECK_OK(gln_quant_layout(modes[m], dt, splits[i], cols, &l));
            er += l.scale_rows * l.scale_cols;
            ec += l.col_scale_rows * l.col_scale_cols;
        }
        CHECK(ro[6] == er && co[6] == ec);
    }
    CHECK_STATUS(gln_grouped_scale_offsets(GLN_SCALING_TENSOR, 6, splits, cols, NULL, NULL),
                 GLN_STATUS_INVALID_ARGUMENT, "row_offsets and col_offsets must not both be NULL");
    /* the bound is >= the real total for random splits summing to <= rows */
    gln_rng_t rng = gln_rng_seed(21);
    for (int trial = 0; trial < 400; trial++) {
        int32_t num = (int32_t)gln_rng_int(&rng, 1, 9);
        int64_t rows = gln_rng_int(&rng, 0, 1200), c = gln_rng_int(&rng, 1, 700);
        int64_t s[9], left = rows;
        for (int i = 0; i < num; i++) {
            s[i] = gln_rng_int(&rng, 0, left);
            if (trial % 3 == 0) s[i] = left < 1 ? 0 : 1; /* many tiny members: worst padding */
            left -= s[i];
        }
        for (int m = 0; m < 5; m++) {
            int64_t ro[10], co[10], br, bc;
            CHECK_OK(gln_grouped_scale_offsets(modes[m], num, s, c, ro, co));
            CHECK_OK(gln_grouped_scale_bound(modes[m], num, rows, c, &br, &bc));
            CHECK_MSG(br >= ro[num] && bc >= co[num], "bound mode %d: %lld < %lld or %lld < %lld", m,
                      (long long)br, (long long)ro[num], (long long)bc, (long long)co[num]);
        }
    }
}

/* ---- per-tensor FP8 ----------------------------------------------------------------------- */

static void test_current_scaling(void) {
    gln_context_t *ctx = ctx_cpu();
    float x[6] = {1.0f, -3.0f, 0.5f, 2.0f, 0.0f, -0.25f}; /* amax 3 */
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 2, 3, x);
    qbuf_t q;
    qbuf_init(&q, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 2, 3);
    gln_quant_config_t c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 1);
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    const float s = (float)(448.0 / 3.0); /* RN division = RN of the exact quotient */
    CHECK(q.scale == s && q.amax == 3.0f);
    CHECK(((float *)q.t.scale_inv)[0] == 1.0f / s && ((float *)q.t.col_scale_inv)[0] == 1.0f / s);
    const uint8_t *d = q.t.data, *dt = q.t.col_data;
    CHECK(d[1] == 0xFE); /* -3 · 448/3 = -448 exactly → -max */
    CHECK(d[4] == 0x00); /* zero */
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++) CHECK(dt[k * 2 + r] == d[r * 3 + k]); /* transposed copy */
    /* power of two: 149.33 → 128; amax 0 → scale 1; epsilon floor */
    c.power_2_scale = 1;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(q.scale == 128.0f && ((float *)q.t.scale_inv)[0] == 1.0f / 128.0f);
    CHECK(d[0] == 0x70); /* 1 · 128 = 2^7: biased exponent 14, mantissa 0 */
    float z[6] = {0};
    gln_tensor_t zin = gln_tensor_make(GLN_DTYPE_FP32, 2, 3, z);
    c.power_2_scale = 0;
    CHECK_OK(gln_quantize(ctx, &c, &zin, &q.t));
    CHECK(q.scale == 1.0f && q.amax == 0.0f && ((float *)q.t.scale_inv)[0] == 1.0f);
    c.amax_epsilon = 2.0f;
    CHECK_OK(gln_quantize(ctx, &c, &zin, &q.t));
    CHECK(q.scale == 224.0f && q.amax == 0.0f); /* the written amax is the data's, not the floor */
    /* Inf in the input: amax Inf → scale 1; NaN is ignored by the amax (TE's fmaxf) but still
     * encodes as FP8 NaN */
    c.amax_epsilon = 0.0f;
    x[2] = INFINITY;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(isinf(q.amax) && q.scale == 1.0f && d[2] == 0x7E);
    x[2] = NAN;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(q.amax == 3.0f && q.scale == s && d[2] == 0x7F);
    /* tiny amax: 448 / 1e-45 overflows → FLT_MAX */
    float tiny[1] = {1e-45f};
    gln_tensor_t tin = gln_tensor_make(GLN_DTYPE_FP32, 1, 1, tiny);
    qbuf_t q1;
    qbuf_init(&q1, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 1);
    c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0);
    CHECK_OK(gln_quantize(ctx, &c, &tin, &q1.t));
    CHECK(q1.scale == FLT_MAX && ((float *)q1.t.scale_inv)[0] == 1.0f / FLT_MAX);
    qbuf_free(&q);
    qbuf_free(&q1);
    gln_context_destroy(ctx);
}

static void test_delayed_quantize(void) {
    gln_context_t *ctx = ctx_cpu();
    float x[4] = {1.0f, -5.0f, 2.0f, 0.5f};
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 2, 2, x);
    qbuf_t q;
    qbuf_init(&q, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E5M2, 2, 2);
    gln_quant_config_t c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E5M2, 1, 1);
    c.delayed = 1;
    q.scale = 3.0f;
    q.amax = 0.0f;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(q.scale == 3.0f && q.amax == 5.0f); /* scale read, amax of the unscaled input */
    CHECK(((float *)q.t.scale_inv)[0] == 1.0f / 3.0f && ((float *)q.t.col_scale_inv)[0] == 1.0f / 3.0f);
    const uint8_t *d = q.t.data;
    CHECK(d[1] == (0x80 | 0x4C)); /* -5·3 = -15 = -1.875·2^3: a tie between 1.75·2^3 (odd) and 2^4 → -16 */
    x[1] = -1.0f;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(q.amax == 5.0f); /* max-accumulated over casts */
    x[0] = 9.0f;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(q.amax == 9.0f);
    x[0] = NAN;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(q.amax == 9.0f); /* NaN is ignored by the amax (TE's fmaxf) */
    qbuf_free(&q);
    gln_context_destroy(ctx);
}

/* The delayed-scaling state machine (amax history roll, scale from the history's max) traced by
 * hand over five steps. */
static void test_delayed_update_max(void) {
    float h[3][2] = {{0}}, scale[2] = {1.0f, 1.0f};
    const float fmax[2] = {448.0f, 57344.0f};
    h[0][0] = 2.0f;
    CHECK_OK(gln_delayed_scaling_update(2, 3, &h[0][0], scale, fmax, 0, GLN_AMAX_ALGO_MAX));
    CHECK(scale[0] == 224.0f && scale[1] == 1.0f);          /* slot 1: amax 0 keeps the scale */
    CHECK(h[0][0] == 0 && h[1][0] == 0 && h[2][0] == 2.0f); /* newest rolled to the end */
    h[0][0] = 4.0f;
    h[0][1] = NAN;
    CHECK_OK(gln_delayed_scaling_update(2, 3, &h[0][0], scale, fmax, 0, GLN_AMAX_ALGO_MAX));
    CHECK(scale[0] == 112.0f && scale[1] == 1.0f); /* NaN ignored: window max 0 keeps the scale */
    CHECK(h[0][0] == 0 && h[1][0] == 2.0f && h[2][0] == 4.0f && isnan(h[2][1]));
    h[0][0] = 1.0f;
    h[0][1] = 1e-45f;
    CHECK_OK(gln_delayed_scaling_update(2, 3, &h[0][0], scale, fmax, 0, GLN_AMAX_ALGO_MAX));
    CHECK(scale[0] == 112.0f);  /* window max 4 */
    CHECK(scale[1] == FLT_MAX); /* NaN in the window ignored; 57344 / 1e-45 overflows */
    CHECK(h[0][0] == 0 && h[1][0] == 4.0f && h[2][0] == 1.0f);
    /* No new amax: TE's bulk update neither rolls nor rescales. */
    CHECK_OK(gln_delayed_scaling_update(2, 3, &h[0][0], scale, fmax, 0, GLN_AMAX_ALGO_MAX));
    CHECK(scale[0] == 112.0f && scale[1] == FLT_MAX);
    CHECK(h[0][0] == 0 && h[1][0] == 4.0f && h[2][0] == 1.0f);
    CHECK(h[0][1] == 0 && isnan(h[1][1]) && h[2][1] == 1e-45f);
    /* always_roll (TE's non-bulk kernel) empties the window in two steps. */
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    o.always_roll = 1;
    CHECK_OK(gln_delayed_scaling_update_ex(2, 3, &h[0][0], scale, fmax, 0, GLN_AMAX_ALGO_MAX, &o));
    CHECK(scale[0] == 112.0f && scale[1] == FLT_MAX);
    CHECK(h[1][0] == 1.0f && h[2][0] == 0.0f && h[1][1] == 1e-45f && h[0][1] == 0.0f);
    CHECK_OK(gln_delayed_scaling_update_ex(2, 3, &h[0][0], scale, fmax, 0, GLN_AMAX_ALGO_MAX, &o));
    CHECK(scale[0] == 448.0f);  /* window max now 1 */
    CHECK(scale[1] == FLT_MAX);
    for (int i = 0; i < 3; i++) CHECK(h[i][0] == 0.0f && h[i][1] == 0.0f);
}

/* Regression (TE parity): newest amax 0 (no tokens) under "max" leaves history [0, 2] and scale 1
 * alone; always_roll consumes the 2; amax_nan_propagate lets a NaN in the window keep the scale. */
static void test_delayed_update_zero_newest(void) {
    const float fmax[1] = {448.0f};
    float h[2] = {0.0f, 2.0f}, scale[1] = {1.0f};
    CHECK_OK(gln_delayed_scaling_update(1, 2, h, scale, fmax, 0, GLN_AMAX_ALGO_MAX));
    CHECK(scale[0] == 1.0f && h[0] == 0.0f && h[1] == 2.0f);
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    CHECK_OK(gln_delayed_scaling_update_ex(1, 2, h, scale, fmax, 0, GLN_AMAX_ALGO_MAX, NULL));
    CHECK(scale[0] == 1.0f && h[0] == 0.0f && h[1] == 2.0f);
    o.always_roll = 1;
    CHECK_OK(gln_delayed_scaling_update_ex(1, 2, h, scale, fmax, 0, GLN_AMAX_ALGO_MAX, &o));
    CHECK(scale[0] == 224.0f && h[0] == 0.0f && h[1] == 0.0f);
    /* NaN newest under "max": ignored by default (amax 4), propagated with the option (kept) */
    float hn[2] = {NAN, 4.0f}, sn[1] = {1.0f};
    CHECK_OK(gln_delayed_scaling_update(1, 2, hn, sn, fmax, 0, GLN_AMAX_ALGO_MAX));
    CHECK(sn[0] == 112.0f && hn[0] == 0.0f && isnan(hn[1]));
    float hp[2] = {NAN, 4.0f}, sp[1] = {1.0f};
    gln_delayed_update_options_t op = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    op.amax_nan_propagate = 1;
    CHECK_OK(gln_delayed_scaling_update_ex(1, 2, hp, sp, fmax, 0, GLN_AMAX_ALGO_MAX, &op));
    CHECK(sp[0] == 1.0f && hp[0] == 0.0f && isnan(hp[1]));
    /* NaN newest under most_recent: rolled, scale kept */
    float hm[2] = {NAN, 4.0f}, sm[1] = {1.0f};
    CHECK_OK(gln_delayed_scaling_update(1, 2, hm, sm, fmax, 0, GLN_AMAX_ALGO_MOST_RECENT));
    CHECK(sm[0] == 1.0f && hm[0] == 0.0f && isnan(hm[1]));
    op.size = 1; /* not a known version */
    CHECK_STATUS(gln_delayed_scaling_update_ex(1, 2, h, scale, fmax, 0, GLN_AMAX_ALGO_MAX, &op),
                 GLN_STATUS_INVALID_ARGUMENT, "opts->size");
}

/* Regressions (TE parity): NaN elements are ignored by every amax (TE's fmaxf) and still encode
 * as FP8 NaN (0x7F). */
static void test_nan_ignored_by_amax(void) {
    gln_context_t *ctx = ctx_cpu();
    float x[32] = {NAN, 1.0f, 2.0f};
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 1, 32, x);
    qbuf_t q;
    qbuf_init(&q, GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, 1, 32);
    gln_quant_config_t c = qcfg(GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, 1, 0);
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    const uint8_t *s = q.t.scale_inv, *d = q.t.data;
    CHECK(s[0] == 120); /* amax 2: 2/448 ∈ (2^-8, 2^-7] → 127 - 7 */
    CHECK(d[0] == 0x7F && d[1] == 0x70 && d[2] == 0x78 && d[3] == 0x00);
    qbuf_free(&q);
    gln_tensor_t in3 = gln_tensor_make(GLN_DTYPE_FP32, 1, 3, x);
    qbuf_init(&q, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 3);
    c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0);
    CHECK_OK(gln_quantize(ctx, &c, &in3, &q.t));
    d = q.t.data;
    CHECK(q.scale == 224.0f && q.amax == 2.0f);
    CHECK(d[0] == 0x7F && d[1] == 0x76 && d[2] == 0x7E);
    qbuf_free(&q);
    gln_context_destroy(ctx);
}

/* cfg.amax_nan_propagate = 1: the NaN reaches every recipe's amax (hand-derived expectations:
 * scale 1 encodes 1 and 2 as E4M3 0x38 and 0x40; NaN·anything is FP8 NaN 0x7F). */
static void test_nan_propagate_option(void) {
    gln_context_t *ctx = ctx_cpu();
    float x[32] = {NAN, 1.0f, 2.0f};
    qbuf_t q;
    /* MXFP8: code 255 (NaN scale), so every element of the block encodes as NaN */
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 1, 32, x);
    qbuf_init(&q, GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, 1, 32);
    gln_quant_config_t c = qcfg(GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, 1, 1);
    c.amax_nan_propagate = 1;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    const uint8_t *s = q.t.scale_inv, *d = q.t.data, *cs = q.t.col_scale_inv;
    CHECK(s[0] == 255 && d[0] == 0x7F && d[1] == 0x7F && d[2] == 0x7F && d[3] == 0x7F);
    /* 1-row column blocks: NaN → 255; 1/448 ∈ (2^-9, 2^-8] → 119; 2/448 → 120; 0 → 0 */
    CHECK(cs[0] == 255 && cs[1] == 119 && cs[2] == 120 && cs[3] == 0);
    qbuf_free(&q);
    /* current scaling: amax NaN, scale 1 */
    gln_tensor_t in3 = gln_tensor_make(GLN_DTYPE_FP32, 1, 3, x);
    qbuf_init(&q, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 3);
    c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0);
    c.amax_nan_propagate = 1;
    CHECK_OK(gln_quantize(ctx, &c, &in3, &q.t));
    d = q.t.data;
    CHECK(q.scale == 1.0f && isnan(q.amax) && ((float *)q.t.scale_inv)[0] == 1.0f);
    CHECK(d[0] == 0x7F && d[1] == 0x38 && d[2] == 0x40);
    qbuf_free(&q);
    /* delayed: the NaN is max-accumulated into amax; the given scale still encodes */
    qbuf_init(&q, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 3);
    c.delayed = 1;
    q.scale = 2.0f, q.amax = 1.5f;
    CHECK_OK(gln_quantize(ctx, &c, &in3, &q.t));
    d = q.t.data;
    CHECK(isnan(q.amax) && q.scale == 2.0f && d[0] == 0x7F && d[1] == 0x40 && d[2] == 0x48);
    c.amax_nan_propagate = 0; /* a NaN already accumulated stays ignored-against: max(NaN, 2) = 2 */
    q.amax = NAN;
    CHECK_OK(gln_quantize(ctx, &c, &in3, &q.t));
    CHECK(q.amax == 2.0f);
    qbuf_free(&q);
    /* block 1x128 and 128x128: scale 1 */
    for (int m = 0; m < 2; m++) {
        const gln_scaling_mode_t mode = m ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D;
        qbuf_init(&q, mode, GLN_DTYPE_FP8_E4M3, 1, 3);
        c = qcfg(mode, GLN_DTYPE_FP8_E4M3, 1, 0);
        c.power_2_scale = 1;
        c.amax_nan_propagate = 1;
        CHECK_OK(gln_quantize(ctx, &c, &in3, &q.t));
        d = q.t.data;
        CHECK_MSG(((float *)q.t.scale_inv)[0] == 1.0f && d[0] == 0x7F && d[1] == 0x38 && d[2] == 0x40,
                  "block mode %d: scale_inv %g data %02x %02x %02x", (int)mode,
                  (double)((float *)q.t.scale_inv)[0], d[0], d[1], d[2]);
        qbuf_free(&q);
    }
    /* gln_amax_ex: the first NaN by index wins, sign cleared; gln_amax ignores both */
    float y[4] = {1.0f, 0.0f, 3.0f, 0.0f};
    const uint32_t n1 = 0xFFC00002u, n2 = 0x7FC00001u;
    memcpy(&y[1], &n1, 4), memcpy(&y[3], &n2, 4);
    gln_tensor_t ty = gln_tensor_make(GLN_DTYPE_FP32, 2, 2, y);
    float a = 0.0f;
    uint32_t ab;
    CHECK_OK(gln_amax_ex(ctx, &ty, 1, &a));
    memcpy(&ab, &a, 4);
    CHECK_MSG(ab == 0x7FC00002u, "gln_amax_ex propagate: %08x", ab);
    CHECK_OK(gln_amax_ex(ctx, &ty, 0, &a));
    CHECK(a == 3.0f);
    CHECK_OK(gln_amax(ctx, &ty, &a));
    CHECK(a == 3.0f);
    CHECK_STATUS(gln_amax_ex(ctx, &ty, 2, &a), GLN_STATUS_INVALID_ARGUMENT, "gln_amax_ex: nan_propagate 2");
    /* the grouped path carries the option too: member 1 has the NaN, member 0 not */
    float g[6] = {4.0f, 1.0f, 0.5f, NAN, 2.0f, 1.0f};
    int64_t splits[2] = {1, 1};
    gln_grouped_tensor_t gin = {2, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, 2, 3, g)};
    uint8_t gd[6];
    float gs_inv[2], gsc[2], gam[2];
    gln_tensor_t gq = {GLN_DTYPE_FP8_E4M3, 2, 3, gd, GLN_SCALING_TENSOR, gs_inv, NULL, NULL, gam, gsc};
    gln_grouped_tensor_t gout = {2, splits, 0, gq};
    c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0);
    c.amax_nan_propagate = 1;
    CHECK_OK(gln_grouped_quantize(ctx, &c, &gin, &gout));
    CHECK(gsc[0] == 112.0f && gam[0] == 4.0f && isnan(gam[1]) && gsc[1] == 1.0f && gd[3] == 0x7F &&
          gd[4] == 0x40);
    gln_context_destroy(ctx);
}

/* The quant config's known versions: the first one (no amax_nan_propagate: the field keeps its
 * default even when the caller's struct has bytes there) and the current one. */
static void test_quant_config_versions(void) {
    gln_context_t *ctx = ctx_cpu();
    float x[3] = {NAN, 1.0f, 2.0f};
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 1, 3, x);
    qbuf_t q;
    qbuf_init(&q, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 3);
    gln_quant_config_t c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0);
    c.amax_nan_propagate = 1;
    c.size = offsetof(gln_quant_config_t, amax_nan_propagate);
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(q.scale == 224.0f && q.amax == 2.0f); /* version 1: NaN ignored */
    c.size = offsetof(gln_quant_config_t, amax_nan_propagate) + 3;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &q.t), GLN_STATUS_INVALID_ARGUMENT, "not a known version");
    c.size = sizeof c + 4;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &q.t), GLN_STATUS_INVALID_ARGUMENT, "not a known version");
    c.size = sizeof c;
    c.amax_nan_propagate = 2;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &q.t), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_quantize: cfg->amax_nan_propagate 2 must be 0");
    qbuf_free(&q);
    gln_context_destroy(ctx);
}

static void test_delayed_update_most_recent_margin(void) {
    float h[2] = {0}, scale[1] = {1.0f};
    const float fmax[1] = {448.0f};
    h[0] = 8.0f;
    CHECK_OK(gln_delayed_scaling_update(1, 2, h, scale, fmax, 1, GLN_AMAX_ALGO_MOST_RECENT));
    CHECK(scale[0] == 28.0f && h[0] == 0.0f && h[1] == 8.0f); /* 448·2^-1 / 8 */
    CHECK_OK(gln_delayed_scaling_update(1, 2, h, scale, fmax, 1, GLN_AMAX_ALGO_MOST_RECENT));
    CHECK(scale[0] == 28.0f && h[0] == 0.0f && h[1] == 8.0f); /* newest 0: untouched */
    h[0] = INFINITY;
    CHECK_OK(gln_delayed_scaling_update(1, 2, h, scale, fmax, 1, GLN_AMAX_ALGO_MOST_RECENT));
    CHECK(scale[0] == 28.0f); /* Inf: keep */
    h[0] = 7.0f;
    CHECK_OK(gln_delayed_scaling_update(1, 2, h, scale, fmax, 2, GLN_AMAX_ALGO_MOST_RECENT));
    CHECK(scale[0] == 16.0f); /* 448·2^-2 / 7 */
    /* history length 1: the entry is consumed and zeroed */
    float h1[1] = {2.0f}, s1[1] = {1.0f};
    CHECK_OK(gln_delayed_scaling_update(1, 1, h1, s1, fmax, 0, GLN_AMAX_ALGO_MAX));
    CHECK(s1[0] == 224.0f && h1[0] == 0.0f);
}

/* ---- MXFP8 and block scaling on edge shapes ----------------------------------------------- */

/* Partial edge blocks take the amax of their valid elements only. */
static void test_mxfp8_edges(void) {
    gln_context_t *ctx = ctx_cpu();
    const int64_t R = 33, C = 35; /* partial blocks along both dims */
    float *x = gln_test_alloc((size_t)(R * C) * sizeof(float));
    for (int64_t i = 0; i < R * C; i++) x[i] = 1.0f;
    x[0 * C + 34] = 1000.0f; /* row 0, last (3-wide) rowwise block; column 34's first colwise block */
    x[32 * C + 0] = 0.001f;  /* row 32 (1-high colwise block) */
    x[32 * C + 1] = 0.0f;
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, R, C, x);
    qbuf_t q;
    qbuf_init(&q, GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, R, C);
    gln_quant_config_t c = qcfg(GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, 1, 1);
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    const uint8_t *s = q.t.scale_inv, *cs = q.t.col_scale_inv;
    const int64_t sc = q.l.scale_cols, csc = q.l.col_scale_cols;
    /* amax 1: v = 1/448 ∈ (2^-9, 2^-8] → code 127-8 = 119; amax 1000: v ≈ 2.23 → 2^2 → 129 */
    CHECK(s[0 * sc + 0] == 119 && s[0 * sc + 1] == 129 && s[1 * sc + 1] == 119);
    CHECK(s[0 * sc + 2] == 0 && s[0 * sc + 3] == 0 && s[40 * sc + 0] == 0); /* padding zeroed */
    CHECK(cs[0 * csc + 34] == 129 && cs[0 * csc + 0] == 119);
    CHECK(cs[1 * csc + 0] == 109);                        /* 0.001/448 ∈ (2^-19, 2^-18] → 127 - 18 */
    CHECK(cs[1 * csc + 1] == 0);                          /* all-zero block → code 0 */
    CHECK(cs[1 * csc + 35] == 0 && cs[2 * csc + 0] == 0); /* padding zeroed */
    /* data: 1000 · 2^-2 = 250 → nearest E4M3 (step 16 in [128, 256)) is 256 = 0x78 */
    const uint8_t *d = q.t.data, *cd = q.t.col_data;
    CHECK(d[34] == 0x78 && cd[34] == 0x78);
    CHECK(d[33] == 0x28); /* 1 · 2^-2 in the same block: e = -2 + 7 = 5, m = 0 */
    CHECK(d[0] == 0x78);  /* 1 · 2^8 */
    CHECK(cd[32 * C + 1] == 0x00);
    /* OCP floor rule: amax 1 → floor(0) - 8 + 127 = 119; 1000 → 9 - 8 + 127 = 128 (1000/2 saturates) */
    c.e8m0_rounding = GLN_E8M0_ROUND_FLOOR;
    CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
    CHECK(s[0] == 119 && s[1] == 128 && d[34] == 0x7E);
    qbuf_free(&q);
    gln_test_free(x);
    gln_context_destroy(ctx);
}

static void test_block_edges_and_value_for_inf(void) {
    gln_context_t *ctx = ctx_cpu();
    const int64_t R = 130, C = 129;
    gln_rng_t rng = gln_rng_seed(31);
    float *x = random_f32(&rng, R * C, 1.0);
    x[129 * C + 128] = 100.0f; /* alone in the 2x1 corner tile (2D) and its 1x1 rowwise block */
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, R, C, x);
    for (int two_d = 0; two_d < 2; two_d++) {
        gln_scaling_mode_t mode = two_d ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D;
        qbuf_t q;
        qbuf_init(&q, mode, GLN_DTYPE_FP8_E4M3, R, C);
        gln_quant_config_t c = qcfg(mode, GLN_DTYPE_FP8_E4M3, 1, 1);
        c.power_2_scale = 1;
        CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
        const float *s = q.t.scale_inv, *cs = q.t.col_scale_inv;
        /* block containing only x[129][128] (plus x[128][128] for the 2D tile / colwise block) */
        float a = fabsf(x[128 * C + 128]) > 100.0f ? fabsf(x[128 * C + 128]) : 100.0f;
        if (!two_d) {
            /* rowwise block (129, 128..128): 448/100 = 4.48 → 4 */
            CHECK(s[1 * q.l.scale_cols + 129] == 1.0f / 4.0f);
            CHECK(cs[1 * q.l.col_scale_cols + 128] ==
                  1.0f / gln_scale_from_amax(a, 448.0f, 1, 0.0f, FLT_MAX));
            CHECK(s[0 * q.l.scale_cols + 130] == 0.0f && cs[1 * q.l.col_scale_cols + 129] == 0.0f); /* pad */
        } else {
            float e = 1.0f / gln_scale_from_amax(a, 448.0f, 1, 0.0f, FLT_MAX);
            /* one scale per tile, the same in both copies */
            CHECK(s[1 * q.l.scale_cols + 1] == e && cs[1 * q.l.col_scale_cols + 1] == e);
            CHECK(s[0 * q.l.scale_cols + 2] == 0.0f && cs[0 * q.l.col_scale_cols + 2] == 0.0f);
        }
        const uint8_t *d = q.t.data, *cd = q.t.col_data;
        if (two_d) /* 2D: the same codes in both copies, the columnwise one transposed */
            for (int64_t r = 0; r < R; r += 7)
                for (int64_t k = 0; k < C; k += 5) CHECK(cd[k * R + r] == d[r * C + k]);
        qbuf_free(&q);
    }
    /* value_for_inf is the input dtype's max: bf16 0x1.FEp127, fp16 65504, fp32 FLT_MAX */
    static const gln_dtype_t dts[3] = {GLN_DTYPE_BF16, GLN_DTYPE_FP16, GLN_DTYPE_FP32};
    static const float tinies[3] = {1e-40f, 6e-8f, 1e-45f};
    for (int i = 0; i < 3; i++) {
        uint32_t buf[1];
        gln_tensor_t t = gln_tensor_make(dts[i], 1, 1, buf);
        gln_store(buf, dts[i], 0, tinies[i]);
        qbuf_t q;
        qbuf_init(&q, GLN_SCALING_BLOCK_1D, GLN_DTYPE_FP8_E4M3, 1, 1);
        gln_quant_config_t c = qcfg(GLN_SCALING_BLOCK_1D, GLN_DTYPE_FP8_E4M3, 1, 0);
        CHECK_OK(gln_quantize(ctx, &c, &t, &q.t));
        float got = ((float *)q.t.scale_inv)[0];
        double amax = gln_load(buf, dts[i], 0);
        double want_scale = 448.0 / amax; /* finite for fp16 (6e-8 is its subnormal): no overflow */
        if (dts[i] == GLN_DTYPE_BF16) CHECK(got == 1.0f / 0x1.FEp127f);
        if (dts[i] == GLN_DTYPE_FP32) CHECK(got == 1.0f / FLT_MAX);
        if (dts[i] == GLN_DTYPE_FP16) CHECK(got == 1.0f / (float)want_scale);
        qbuf_free(&q);
    }
    gln_test_free(x);
    gln_context_destroy(ctx);
}

/* ---- grouped == per member ---------------------------------------------------------------- */

static void test_grouped_matches_members(void) {
    gln_context_t *ctx = ctx_cpu();
    const int32_t N = 5;
    const int64_t splits[5] = {3, 0, 130, 0, 33}, C = 70, ROWS = 200; /* 34 trailing rows */
    gln_rng_t rng = gln_rng_seed(41);
    float *x = random_f32(&rng, ROWS * C, 2.0);
    static const gln_scaling_mode_t modes[4] = {GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D,
                                                GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_2D};
    for (int m = 0; m < 5; m++) {
        gln_scaling_mode_t mode = modes[m < 4 ? m : 0];
        int delayed = m == 4;
        int64_t ro[6], co[6];
        CHECK_OK(gln_grouped_scale_offsets(mode, N, splits, C, ro, co));
        size_t ssz = mode == GLN_SCALING_MXFP8_1D ? 1 : 4;
        uint8_t *gd = gln_test_alloc((size_t)(ROWS * C)), *gcd = gln_test_alloc((size_t)(ROWS * C));
        uint8_t *gs = gln_test_alloc((size_t)ro[N] * ssz), *gcs = gln_test_alloc((size_t)co[N] * ssz);
        float gamax[5], gscale[5];
        memset(gd, 0xA5, (size_t)(ROWS * C));
        memset(gcd, 0xA5, (size_t)(ROWS * C));
        memset(gs, 0xA5, (size_t)ro[N] * ssz);
        memset(gcs, 0xA5, (size_t)co[N] * ssz);
        for (int i = 0; i < N; i++) {
            gamax[i] = delayed ? 0.5f : NAN;
            gscale[i] = delayed ? (float)(i + 1) * 3.0f : NAN;
        }
        gln_grouped_tensor_t gin = {N, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, ROWS, C, x)};
        gln_grouped_tensor_t gout = {
            N, splits, 0, {GLN_DTYPE_FP8_E4M3, ROWS, C, gd, mode, gs, gcd, gcs, gamax, gscale}};
        gln_quant_config_t c = qcfg(mode, GLN_DTYPE_FP8_E4M3, 1, 1);
        c.delayed = delayed;
        CHECK_OK(gln_grouped_quantize(ctx, &c, &gin, &gout));
        int64_t row0 = 0;
        for (int i = 0; i < N; i++) {
            qbuf_t q;
            qbuf_init(&q, mode, GLN_DTYPE_FP8_E4M3, splits[i], C);
            q.amax = delayed ? 0.5f : NAN;
            q.scale = delayed ? (float)(i + 1) * 3.0f : NAN;
            gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, splits[i], C, x + row0 * C);
            CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
            char what[64];
            snprintf(what, sizeof what, "mode %d member %d", m, i);
            gln_check_bitwise(what, gd + row0 * C, q.t.data, q.l.data_bytes);
            gln_check_bitwise(what, gcd + row0 * C, q.t.col_data, q.l.col_data_bytes);
            gln_check_bitwise(what, gs + ro[i] * (int64_t)ssz, q.t.scale_inv, q.l.scale_bytes);
            gln_check_bitwise(what, gcs + co[i] * (int64_t)ssz, q.t.col_scale_inv, q.l.col_scale_bytes);
            if (mode == GLN_SCALING_TENSOR) {
                CHECK_MSG(memcmp(&gamax[i], &q.amax, 4) == 0 && memcmp(&gscale[i], &q.scale, 4) == 0,
                          "%s amax/scale", what);
                if (splits[i] == 0 && !delayed)
                    CHECK(gscale[i] == 1.0f && gamax[i] == 0.0f); /* empty member */
            }
            row0 += splits[i];
            qbuf_free(&q);
        }
        for (int64_t k = row0 * C; k < ROWS * C; k++) /* trailing rows untouched */
            if (gd[k] != 0xA5 || gcd[k] != 0xA5) {
                CHECK_MSG(0, "mode %d: trailing byte %lld written", m, (long long)k);
                break;
            }
        CHECK(gln_guard_ok(gd) && gln_guard_ok(gcd) && gln_guard_ok(gs) && gln_guard_ok(gcs));
        gln_test_free(gd);
        gln_test_free(gcd);
        gln_test_free(gs);
        gln_test_free(gcs);
    }
    gln_test_free(x);
    gln_context_destroy(ctx);
}

/* ---- dequantize --------------------------------------------------------------------------- */

static void test_dequantize_round_trip(void) {
    gln_context_t *ctx = ctx_cpu();
    const int64_t R = 45, C = 150;
    gln_rng_t rng = gln_rng_seed(51);
    static const gln_scaling_mode_t modes[4] = {GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D,
                                                GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_2D};
    /* values exactly representable as E4M3 code × 2^k: every power-of-two mode round-trips exactly */
    float *x = gln_test_alloc((size_t)(R * C) * sizeof(float));
    for (int64_t i = 0; i < R * C; i++) {
        uint8_t code = (uint8_t)gln_rng_int(&rng, 0, 0xFD);
        if ((code & 0x7F) == 0x7F) code = 0x00;
        x[i] = ldexpf(gln_fp8_to_fp32(code, GLN_DTYPE_FP8_E4M3), -6);
    }
    double *ref = gln_test_alloc((size_t)(R * C) * sizeof(double));
    for (int64_t i = 0; i < R * C; i++) ref[i] = x[i];
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, R, C, x);
    float *out = gln_test_alloc((size_t)(R * C) * sizeof(float));
    uint16_t *out16 = gln_test_alloc((size_t)(R * C) * sizeof(uint16_t));
    for (int m = 0; m < 4; m++) {
        qbuf_t q;
        qbuf_init(&q, modes[m], GLN_DTYPE_FP8_E4M3, R, C);
        gln_quant_config_t c = qcfg(modes[m], GLN_DTYPE_FP8_E4M3, 1, 1);
        c.power_2_scale = 1;
        CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
        for (int colw = 0; colw < 2; colw++) {
            gln_poison(out, GLN_DTYPE_FP32, (size_t)(R * C));
            gln_tensor_t o = gln_tensor_make(GLN_DTYPE_FP32, R, C, out);
            CHECK_OK(gln_dequantize(ctx, &q.t, colw, &o));
            char what[64];
            snprintf(what, sizeof what, "exact round trip mode %d colw %d", modes[m], colw);
            /* power-of-two scales and E4M3-grid values: exact (atol 0); the TENSOR pow2 scale too */
            CHECK_MSG(gln_check_close(what, out, GLN_DTYPE_FP32, ref, (size_t)(R * C), 0.0, 0.0) <= 1.0, "%s",
                      what);
            gln_poison(out16, GLN_DTYPE_BF16, (size_t)(R * C));
            gln_tensor_t o16 = gln_tensor_make(GLN_DTYPE_BF16, R, C, out16);
            CHECK_OK(gln_dequantize(ctx, &q.t, colw, &o16));
            /* E4M3 values have 4 significant bits: they fit bf16's 8, so bf16 output is exact too */
            CHECK_MSG(gln_check_close(what, out16, GLN_DTYPE_BF16, ref, (size_t)(R * C), 0.0, 0.0) <= 1.0,
                      "%s bf16", what);
        }
        qbuf_free(&q);
    }
    /* random values (non-power-of-two scales): within E4M3 rounding */
    double amax = 0.0;
    for (int64_t i = 0; i < R * C; i++) {
        ref[i] = x[i] = (float)(gln_rng_normal(&rng) * 3.0);
        amax = fmax(amax, fabs(ref[i]));
    }
    /* every decode scale is <= 2·amax/448 (MXFP8 rounds the block scale up by < 2x; the others are
     * block_amax/448 <= amax/448) */
    const double max_decode_scale = 2.0 * amax / 448.0;
    for (int m = 0; m < 4; m++) {
        qbuf_t q;
        qbuf_init(&q, modes[m], GLN_DTYPE_FP8_E4M3, R, C);
        gln_quant_config_t c = qcfg(modes[m], GLN_DTYPE_FP8_E4M3, 1, 1);
        CHECK_OK(gln_quantize(ctx, &c, &in, &q.t));
        for (int colw = 0; colw < 2; colw++) {
            gln_poison(out, GLN_DTYPE_FP32, (size_t)(R * C));
            gln_tensor_t o = gln_tensor_make(GLN_DTYPE_FP32, R, C, out);
            CHECK_OK(gln_dequantize(ctx, &q.t, colw, &o));
            for (int64_t i = 0; i < R * C; i++) {
                double atol = E4M3_SUBNORMAL_HALF_STEP * max_decode_scale;
                double err = fabs(out[i] - ref[i]);
                if (!(err <= E4M3_RTOL * fabs(ref[i]) + atol)) {
                    CHECK_MSG(0, "mode %d colw %d [%lld]: %g vs %g", modes[m], colw, (long long)i, out[i],
                              ref[i]);
                    break;
                }
            }
        }
        qbuf_free(&q);
    }
    CHECK(gln_guard_ok(out) && gln_guard_ok(out16));
    gln_test_free(out);
    gln_test_free(out16);
    gln_test_free(ref);
    gln_test_free(x);
    gln_context_destroy(ctx);
}

/* ---- swizzle ------------------------------------------------------------------------------ */

static void test_swizzle_formula(void) {
    gln_context_t *ctx = ctx_cpu();
    const int64_t R = 130, C = 200; /* rowwise grid [256, 8]; columnwise grid [8, 256] */
    gln_quant_layout_t l;
    CHECK_OK(gln_quant_layout(GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, R, C, &l));
    uint8_t *compact = gln_test_alloc(l.scale_bytes), *sw = gln_test_alloc(l.scale_bytes);
    /* real entries (i < 130, j < 7) hold 1 + (i + j) % 250; padding is garbage that must become 0 */
    for (int64_t i = 0; i < l.scale_rows; i++)
        for (int64_t j = 0; j < l.scale_cols; j++)
            compact[i * l.scale_cols + j] = (i < R && j < 7) ? (uint8_t)(1 + (i + j) % 250) : 0xEE;
    memset(sw, 0xA5, l.scale_bytes);
    CHECK_OK(gln_mxfp8_swizzle_scales(ctx, R, C, 0, compact, sw));
    /* T = ceil(200/128) = 2 tiles per tile-row; (i=129, j=5) → ((1·2 + 1)·512) + 1·16 + 0·4 + 1 = 1553 */
    CHECK(sw[1553] == (uint8_t)(1 + (129 + 5) % 250));
    CHECK(sw[0] == 1 && sw[1] == 2 && sw[4] == 1 + 32 % 250 && sw[16] == 2); /* (0,0),(0,1),(32,0),(1,0) */
    CHECK(sw[2 * 16 + 4 * 3 + 2] == (uint8_t)(1 + (98 + 2) % 250)); /* (i=98, j=2): 98%32=2, 98/32=3 */
    size_t nz = 0, pad = 0;
    for (size_t k = 0; k < l.scale_bytes; k++) {
        nz += sw[k] != 0;
        pad += sw[k] == 0xEE;
    }
    CHECK(nz == (size_t)(R * 7) && pad == 0);
    /* columnwise: swizzle of the transposed grid: i = data column, j = row block */
    uint8_t *ccompact = gln_test_alloc(l.col_scale_bytes), *csw = gln_test_alloc(l.col_scale_bytes);
    for (int64_t j = 0; j < l.col_scale_rows; j++)
        for (int64_t i = 0; i < l.col_scale_cols; i++)
            ccompact[j * l.col_scale_cols + i] = (j < 5 && i < C) ? (uint8_t)(1 + (3 * i + j) % 250) : 0xEE;
    CHECK_OK(gln_mxfp8_swizzle_scales(ctx, R, C, 1, ccompact, csw));
    /* T = ceil(130/128) = 2; (i=199, j=4) → ((1·2 + 1)·512) + 7·16 + 2·4 + 0 = 1656 */
    CHECK(csw[1656] == (uint8_t)(1 + (3 * 199 + 4) % 250));
    CHECK(csw[1] == 2 && csw[512] == 5 && csw[513] == 0); /* (0,1); (0,4) in tile 1; (0,5) is padding */
    nz = 0;
    for (size_t k = 0; k < l.col_scale_bytes; k++) nz += csw[k] != 0;
    CHECK(nz == (size_t)(C * 5));
    CHECK(gln_guard_ok(sw) && gln_guard_ok(csw));
    gln_test_free(compact);
    gln_test_free(sw);
    gln_test_free(ccompact);
    gln_test_free(csw);
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_layouts), GLN_CASE(test_grouped_offsets_and_bound),
              GLN_CASE(test_current_scaling), GLN_CASE(test_delayed_quantize),
              GLN_CASE(test_delayed_update_max), GLN_CASE(test_delayed_update_zero_newest),
              GLN_CASE(test_nan_ignored_by_amax), GLN_CASE(test_nan_propagate_option),
              GLN_CASE(test_quant_config_versions),
              GLN_CASE(test_delayed_update_most_recent_margin),
              GLN_CASE(test_mxfp8_edges), GLN_CASE(test_block_edges_and_value_for_inf),
              GLN_CASE(test_grouped_matches_members), GLN_CASE(test_dequantize_round_trip),
              GLN_CASE(test_swizzle_formula))
