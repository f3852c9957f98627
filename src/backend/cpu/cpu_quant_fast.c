/* Fast CPU quantizers for per-tensor FP8 and MXFP8, bitwise identical to the host references
 * (src/quant/quant_tensor.c, quant_mxfp8.c), which remain the definition and what the CUDA
 * kernels follow.  Same arithmetic, element by element: value widened exactly to FP32, one
 * FP32 multiply by the encode scale, RNE saturating FP8 encode (the branch-free form of
 * cpu_fp8.h), scales from the same numerics functions.  What differs is only the loop shape:
 *   - dtype and FP8 format switches hoisted out of the element loops (they vectorize);
 *   - amax as a plain float max with a NaN flag; a NaN anywhere falls back to the reference's
 *     loop (which ignores NaN, TE's rule, or with cfg->amax_nan_propagate keeps the first NaN),
 *     so every amax is exactly the reference's;
 *   - the transposed FP8 copy written through 64-row tiles instead of one byte per row stride;
 *   - MXFP8 columnwise blocks reduced row by row across all columns at once;
 *   - rows (tiles, 32-row blocks) split over the BLAS thread count (cpu_threads.h).
 * Threads start only for tensors of GLN_CPU_QUANT_MIN elements or more per thread.
 * Block scaling (BLOCK_1D / BLOCK_2D) runs the reference as it is. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_convert.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_quant_fast.h"
#include "backend/cpu/cpu_simd.h"
#include "backend/cpu/cpu_threads.h"
#include "numerics/numerics.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

/* Elements handled per step of the per-tensor passes (a stack buffer of FP32). */
#define SPAN 256
/* Rows per tile of the transposed per-tensor copy (64 bytes: one cache line per column). */
#define TILE_ROWS 64
/* Elements per thread below which a quantization runs on one thread (~50 µs of work). */
#define GLN_CPU_QUANT_MIN 65536

/* q[i] = encode(x[i] * mult) */
GLN_CPU_HOT
static void encode_span(const float *x, size_t n, float mult, gln_dtype_t fp8, uint8_t *q) {
    if (fp8 == GLN_DTYPE_FP8_E5M2) {
        for (size_t i = 0; i < n; i++) q[i] = gln_cpu_fp8_encode_scaled(x[i], mult, 1);
    } else {
        for (size_t i = 0; i < n; i++) q[i] = gln_cpu_fp8_encode_scaled(x[i], mult, 0);
    }
}

/* q[i] = encode(x[i] * mult[i]) */
GLN_CPU_HOT
static void encode_span_vec(const float *x, const float *mult, size_t n, gln_dtype_t fp8, uint8_t *q) {
    if (fp8 == GLN_DTYPE_FP8_E5M2) {
        for (size_t i = 0; i < n; i++) q[i] = gln_cpu_fp8_encode_scaled(x[i], mult[i], 1);
    } else {
        for (size_t i = 0; i < n; i++) q[i] = gln_cpu_fp8_encode_scaled(x[i], mult[i], 0);
    }
}

/* |x| as bits; a NaN has bits above 0x7F800000. */
static inline uint32_t abs_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b & 0x7FFFFFFFu;
}

static inline float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* max |x[i]| (valid when *nan stays 0); *nan |= whether some x[i] is NaN.  On the bits: for
 * non-negative floats the integer order is the numeric order, and a NaN's |bits| exceed
 * every other value's, so the largest |bits| also says whether there is one. */
GLN_CPU_HOT
static float amax_span(const float *x, size_t n, int *nan) {
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t b = (int32_t)abs_bits(x[i]);
        m = b > m ? b : m;
    }
    *nan |= m > 0x7F800000;
    return from_bits((uint32_t)m);
}

/* The reference's amax over the same values, in the same order (NaN ignored, as TE's fmaxf,
 * or the first NaN kept with nan_propagate). */
static float amax_span_ref(const float *x, size_t n, int nan_propagate) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = gln_f32_max_amax(m, gln_f32_abs(x[i]), nan_propagate);
    return m;
}

static size_t elem_size(gln_dtype_t dtype) { return dtype == GLN_DTYPE_FP32 ? 4 : 2; }

static const void *hp_at(const gln_tensor_t *in, int64_t i) {
    return (const char *)in->data + (size_t)i * elem_size(in->dtype);
}

/* ---- per-tensor scaling ------------------------------------------------------------------ */

/* Partial amaxes of each thread's range of spans, combined in range order. */
typedef struct amax_job {
    const gln_tensor_t *in;
    int64_t n;
    float part[GLN_CPU_MAX_THREADS];
    int nan[GLN_CPU_MAX_THREADS];
} amax_job_t;

static void amax_range(void *arg, int thread, int64_t s0, int64_t s1) {
    amax_job_t *j = arg;
    float amax = 0.0f, buf[SPAN];
    int nan = 0;
    for (int64_t s = s0; s < s1; s++) {
        const int64_t i0 = s * SPAN, w = j->n - i0 < SPAN ? j->n - i0 : SPAN;
        gln_cpu_widen(hp_at(j->in, i0), j->in->dtype, (size_t)w, buf);
        const float m = amax_span(buf, (size_t)w, &nan);
        amax = m > amax ? m : amax;
    }
    j->part[thread] = amax;
    j->nan[thread] = nan;
}

static float tensor_amax(const gln_tensor_t *in, int nan_propagate) {
    amax_job_t j = {.in = in, .n = in->rows * in->cols};
    const int nt = gln_cpu_threads((size_t)j.n, GLN_CPU_QUANT_MIN);
    for (int t = 0; t < nt; t++) j.part[t] = 0.0f, j.nan[t] = 0;
    gln_cpu_parallel_for(nt, (j.n + SPAN - 1) / SPAN, amax_range, &j);
    float amax = 0.0f;
    int nan = 0;
    for (int t = 0; t < nt; t++) {
        amax = j.part[t] > amax ? j.part[t] : amax;
        nan |= j.nan[t];
    }
    /* Without NaN the max is the same in any order; with one, the reference picks which. */
    return nan ? gln_amax_ref(in, nan_propagate) : amax;
}

/* Rows [r0, r0 + h) of the tensor: rowwise copy written directly, transposed copy through a
 * tile of SPAN columns at a time. */
static void tensor_encode_tile(const gln_tensor_t *in, int64_t r0, int64_t h, float scale,
                               gln_dtype_t fp8, uint8_t *q, uint8_t *qt) {
    const int64_t R = in->rows, C = in->cols;
    float buf[SPAN];
    uint8_t tile[TILE_ROWS][SPAN];
    for (int64_t c0 = 0; c0 < C; c0 += SPAN) {
        const int64_t w = C - c0 < SPAN ? C - c0 : SPAN;
        for (int64_t i = 0; i < h; i++) {
            const int64_t r = r0 + i;
            gln_cpu_widen(hp_at(in, r * C + c0), in->dtype, (size_t)w, buf);
            uint8_t *dst = qt ? tile[i] : q + r * C + c0;
            encode_span(buf, (size_t)w, scale, fp8, dst);
            if (q && qt) memcpy(q + r * C + c0, dst, (size_t)w);
        }
        if (!qt) continue;
        for (int64_t c = 0; c < w; c++) {
            uint8_t *col = qt + (c0 + c) * R + r0;
            for (int64_t i = 0; i < h; i++) col[i] = tile[i][c];
        }
    }
}

typedef struct encode_job {
    const gln_tensor_t *in;
    float scale;
    gln_dtype_t fp8;
    uint8_t *q, *qt;
} encode_job_t;

static void encode_range(void *arg, int thread, int64_t t0, int64_t t1) {
    const encode_job_t *j = arg;
    (void)thread;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t r0 = t * TILE_ROWS, h = j->in->rows - r0 < TILE_ROWS ? j->in->rows - r0 : TILE_ROWS;
        tensor_encode_tile(j->in, r0, h, j->scale, j->fp8, j->q, j->qt);
    }
}

static gln_status_t quantize_tensor_fast(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                         gln_tensor_t *out) {
    const int64_t R = in->rows, C = in->cols;
    const float scale = gln_tensor_scale_step(cfg, tensor_amax(in, cfg->amax_nan_propagate), out);
    const float scale_inv = 1.0f / scale;
    uint8_t *q = cfg->rowwise ? (uint8_t *)out->data : NULL;
    uint8_t *qt = cfg->columnwise ? (uint8_t *)out->col_data : NULL;
    encode_job_t j = {in, scale, cfg->fp8_dtype, q, qt};
    if (!gln_tensor_is_empty(in)) /* [R, 0]: no R / 64 empty tiles */
        gln_cpu_parallel_for(gln_cpu_threads((size_t)(R * C), GLN_CPU_QUANT_MIN),
                             (R + TILE_ROWS - 1) / TILE_ROWS, encode_range, &j);
    if (cfg->rowwise) ((float *)out->scale_inv)[0] = scale_inv;
    if (cfg->columnwise) ((float *)out->col_scale_inv)[0] = scale_inv;
    return GLN_STATUS_SUCCESS;
}

/* ---- MXFP8 ------------------------------------------------------------------------------- */

static uint8_t mx_code(const gln_quant_config_t *cfg, float amax) {
    const int emax = cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2 ? 15 : 8;
    return gln_e8m0_from_amax_impl(amax, gln_fp8_max(cfg->fp8_dtype), emax,
                                   cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR);
}

/* Per-thread FP32 rows: x (the widened input row), mult (encode multiplier per column),
 * colmax (columnwise block amaxes). */
typedef struct mx_rows {
    float *x, *mult, *colmax;
} mx_rows_t;

static mx_rows_t mx_rows_of(float *base, int64_t C, int thread) {
    float *p = base + (size_t)thread * 3 * (size_t)C;
    mx_rows_t w = {p, p + C, p + 2 * C};
    return w;
}

/* Rowwise: 1x32 blocks along row r. */
static void mx_row(const gln_quant_config_t *cfg, const gln_tensor_t *in, int64_t r, mx_rows_t w,
                   uint8_t *s, uint8_t *q) {
    s += gln_scale_index(GLN_SCALING_MXFP8_1D, in->rows, in->cols, 0, r, 0); /* row r's codes */
    const int64_t C = in->cols;
    gln_cpu_widen(hp_at(in, r * C), in->dtype, (size_t)C, w.x);
    for (int64_t c0 = 0; c0 < C; c0 += 32) {
        const int64_t n = C - c0 < 32 ? C - c0 : 32;
        int nan = 0;
        float amax = amax_span(w.x + c0, (size_t)n, &nan);
        if (nan) amax = amax_span_ref(w.x + c0, (size_t)n, cfg->amax_nan_propagate);
        const uint8_t code = mx_code(cfg, amax);
        s[c0 / 32] = code;
        const float mult = gln_e8m0_inverse_bits(code); /* exact 2^(127-code) */
        for (int64_t k = 0; k < n; k++) w.mult[c0 + k] = mult;
    }
    encode_span_vec(w.x, w.mult, (size_t)C, cfg->fp8_dtype, q + r * C);
}

/* Columnwise: 32x1 blocks of rows [r0, r0 + n), all columns at once. */
GLN_CPU_HOT
static void mx_col_block(const gln_quant_config_t *cfg, const gln_tensor_t *in, int64_t r0, int64_t n,
                         mx_rows_t w, uint8_t *s, uint8_t *q) {
    const int64_t C = in->cols;
    s += gln_scale_index(GLN_SCALING_MXFP8_1D, in->rows, C, 1, r0, 0); /* this block's codes */
    uint32_t any_nan = 0;
    for (int64_t c = 0; c < C; c++) w.colmax[c] = 0.0f;
    for (int64_t r = r0; r < r0 + n; r++) {
        gln_cpu_widen(hp_at(in, r * C), in->dtype, (size_t)C, w.x);
        for (int64_t c = 0; c < C; c++) {
            const uint32_t b = abs_bits(w.x[c]);
            const float a = from_bits(b);
            w.colmax[c] = a > w.colmax[c] ? a : w.colmax[c];
            any_nan |= b > 0x7F800000u;
        }
    }
    if (any_nan) { /* the reference's max, rows in order */
        for (int64_t c = 0; c < C; c++) w.colmax[c] = 0.0f;
        for (int64_t r = r0; r < r0 + n; r++) {
            gln_cpu_widen(hp_at(in, r * C), in->dtype, (size_t)C, w.x);
            for (int64_t c = 0; c < C; c++)
                w.colmax[c] = gln_f32_max_amax(w.colmax[c], gln_f32_abs(w.x[c]), cfg->amax_nan_propagate);
        }
    }
    for (int64_t c = 0; c < C; c++) {
        const uint8_t code = mx_code(cfg, w.colmax[c]);
        s[c] = code;
        w.mult[c] = gln_e8m0_inverse_bits(code);
    }
    for (int64_t r = r0; r < r0 + n; r++) {
        gln_cpu_widen(hp_at(in, r * C), in->dtype, (size_t)C, w.x);
        encode_span_vec(w.x, w.mult, (size_t)C, cfg->fp8_dtype, q + r * C);
    }
}

typedef struct mx_job {
    const gln_quant_config_t *cfg;
    const gln_tensor_t *in;
    float *scratch; /* 3 rows of C floats per thread */
    uint8_t *s, *q;
} mx_job_t;

static void mx_row_range(void *arg, int thread, int64_t r0, int64_t r1) {
    const mx_job_t *j = arg;
    for (int64_t r = r0; r < r1; r++) mx_row(j->cfg, j->in, r, mx_rows_of(j->scratch, j->in->cols, thread), j->s, j->q);
}

static void mx_col_range(void *arg, int thread, int64_t b0, int64_t b1) {
    const mx_job_t *j = arg;
    const int64_t R = j->in->rows;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t r0 = b * 32, n = R - r0 < 32 ? R - r0 : 32;
        mx_col_block(j->cfg, j->in, r0, n, mx_rows_of(j->scratch, j->in->cols, thread), j->s, j->q);
    }
}

static gln_status_t quantize_mxfp8_fast(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                        gln_tensor_t *out) {
    const int64_t R = in->rows, C = in->cols;
    const gln_scaling_mode_t mode = GLN_SCALING_MXFP8_1D;
    const int nt = gln_cpu_threads((size_t)(R * C), GLN_CPU_QUANT_MIN);
    float *base = malloc((size_t)nt * 3 * (size_t)(C > 0 ? C : 1) * sizeof(float));
    if (!base) return gln_quantize_mxfp8_ref(cfg, in, out); /* needs no scratch */
    if (cfg->rowwise) {
        uint8_t *s = (uint8_t *)out->scale_inv;
        memset(s, 0, (size_t)gln_member_scale_elems(mode, R, C, 0));
        mx_job_t j = {cfg, in, base, s, out->data};
        gln_cpu_parallel_for(nt, R, mx_row_range, &j);
    }
    if (cfg->columnwise) {
        uint8_t *s = (uint8_t *)out->col_scale_inv;
        memset(s, 0, (size_t)gln_member_scale_elems(mode, R, C, 1));
        mx_job_t j = {cfg, in, base, s, out->col_data};
        gln_cpu_parallel_for(nt, gln_ceil_div(R, 32), mx_col_range, &j);
    }
    free(base);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_quantize_fast(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out) {
    /* empty: only a per-tensor scale is written (gln_tensor_is_empty) */
    if (cfg->mode != GLN_SCALING_TENSOR && gln_tensor_is_empty(in)) return GLN_STATUS_SUCCESS;
    switch (cfg->mode) {
    case GLN_SCALING_TENSOR: return quantize_tensor_fast(cfg, in, out);
    case GLN_SCALING_MXFP8_1D: return quantize_mxfp8_fast(cfg, in, out);
    default: return gln_quantize_ref(cfg, in, out);
    }
}
