/* The CUDA grouped GEMM (one CUTLASS launch per call where a kernel fits, else the per-expert
 * cuBLASLt loop) against the CPU backend, through the public API.
 *
 * Operands hold small integers (and FP8 decode scales are powers of two), so every product and
 * every FP32 partial sum is exact whatever the summation order or tile shape: the CUDA result
 * must equal the CPU's bit for bit, for both paths of the CUDA backend (CUTLASS, and the loop
 * forced with GLN_CUDA_GROUPED_LOOP=1).  Cases: bf16 fprop (TN, with and without a bias per
 * expert), dgrad (NN), wgrad into fp32
 * (NT); per-tensor FP8 E4M3 × E4M3 fprop / dgrad / wgrad and the HYBRID dgrad and wgrad (E5M2
 * gradient × E4M3 weight or input; the wgrad's experts whose row count is not a multiple of 16
 * on the unaligned kernel, the others on CUTLASS); MXFP8 and FP8 block scaling with power-of-two
 * scales (1x128 activations and gradients, 128x128 weights) fprop / dgrad / wgrad, which the
 * CUDA backend dequantizes to bf16 on the device and runs on the bf16 kernels (quantized by the
 * CPU backend from small integers times powers of two, so exact too); with and without
 * accumulation; host and device splits; splits with empty
 * experts, one expert holding every row, 1 / 5 / 17 / 129-row experts, 24 experts with
 * K and N not multiples of the tile, and 32 mostly 128-row experts (the small-expert regime);
 * every CUTLASS call also runs with each tile regime forced (small / medium / large); the other
 * output dtypes (fp16 from E4M3 fprop / dgrad with an fp16 bias, bf16 wgrads from bf16 and E4M3
 * operands).  Outputs are NaN-poisoned (or hold old values when
 * accumulating, or past the split rows) and followed by guard bytes; an empty expert's wgrad
 * must be exactly 0 (or untouched when accumulating).  A CUDA-graph case captures a grouped
 * GEMM with device splits on a caller's stream and replays it with other splits, in bf16 and on
 * MXFP8 / power-of-two block operands.  The promoted FP8 dgrad and wgrad of every tile regime
 * also run on full-range random FP8 data against the cuBLASLt loop (TransformerEngine's GEMM
 * with the split accumulator): bitwise equal, which fixes the promotion interval.
 *
 * Skips (exit 77) without a CUDA device. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"
#include "numerics/numerics.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>
/* The CUTLASS dispatch (internal, cuda_grouped_gemm.c): did a kernel take the call? */
gln_status_t gln_cuda_grouped_gemm_cutlass(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled);
#endif

static gln_context_t *g_cu, *g_cpu;

#define MAXE 32

/* ---- device buffers (guarded twins, device_twin.h) ---------------------------------------- */

/* ---- operands ------------------------------------------------------------------------------ */

typedef enum kind { KIND_BF16, KIND_E4M3, KIND_HYBRID, KIND_MXFP8, KIND_BLOCK } kind_t;
static const char *kind_name(kind_t k) {
    static const char *names[] = {"bf16", "e4m3", "hybrid", "mxfp8", "fp8-block (pow2)"};
    return names[k];
}

/* A matrix on both sides: host bytes (for the CPU context) and a device copy. */
typedef struct operand {
    gln_dtype_t dtype;
    int64_t rows, cols;
    void *h, *h_col;       /* data and, for FP8, the transposed copy [cols, rows] */
    gln_twin_t d, d_col;
} operand_t;

static uint8_t fp8_code(gln_dtype_t dt, float v) {
    return dt == GLN_DTYPE_FP8_E4M3 ? gln_f32_to_e4m3_bits(v) : gln_f32_to_e5m2_bits(v);
}

/* An FP8 operand's transposed copy [cols, rows] of its host bytes (host side only). */
static void host_transpose(operand_t *o) {
    for (int64_t r = 0; r < o->rows; r++)
        for (int64_t c = 0; c < o->cols; c++)
            ((uint8_t *)o->h_col)[c * o->rows + r] = ((uint8_t *)o->h)[r * o->cols + c];
}

/* rows x cols integers in [-4, 4] (with transpose for FP8), or bf16 / fp32 of `fill` (NaN
 * poison when fill is NAN). */
static operand_t operand_new(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int random, float fill) {
    operand_t o = {dt, rows, cols, NULL, NULL, {0}, {0}};
    const size_t n = (size_t)rows * (size_t)cols, es = gln_dtype_size(dt);
    o.h = calloc(n + 1, es);
    for (size_t i = 0; i < n; i++) {
        const float v = random ? (float)gln_rng_int(rng, -4, 4) : fill;
        if (gln_dtype_is_fp8(dt)) ((uint8_t *)o.h)[i] = fp8_code(dt, v);
        else gln_store(o.h, dt, i, v);
    }
    o.d = gln_twin_upload(g_cu, o.h, n * es);
    if (gln_dtype_is_fp8(dt)) {
        o.h_col = calloc(n + 1, 1);
        host_transpose(&o);
        o.d_col = gln_twin_upload(g_cu, o.h_col, n);
    }
    return o;
}

static void operand_free(operand_t *o) {
    gln_twin_free(g_cu, &o->d), gln_twin_free(g_cu, &o->d_col);
    free(o->h), free(o->h_col);
}

/* The tensor view of an operand on the host or the device; FP8 with its decode scale(s) and,
 * for a single tensor (not the packed tensor of a group), its transposed copy. */
static gln_tensor_t view(const operand_t *o, int dev, const float *scale_h, const float *scale_d) {
    gln_tensor_t t = gln_tensor_make(o->dtype, o->rows, o->cols, dev ? o->d.d : o->h);
    if (gln_dtype_is_fp8(o->dtype)) {
        t.scaling = GLN_SCALING_TENSOR;
        t.scale_inv = (void *)(dev ? scale_d : scale_h);
    }
    return t;
}
static gln_tensor_t view_with_col(const operand_t *o, int dev, const float *scale_h, const float *scale_d) {
    gln_tensor_t t = view(o, dev, scale_h, scale_d);
    if (gln_dtype_is_fp8(o->dtype)) {
        t.col_data = dev ? o->d_col.d : o->h_col;
        t.col_scale_inv = t.scale_inv;
    }
    return t;
}

/* An FP8 operand as the columnwise copy of a grouped tensor holds it: each member's rows
 * transposed in place, [cols, m_i] at element row_start·cols (the rows past the members: 0). */
static void grouped_transpose(operand_t *o, int num, const int64_t *splits) {
    const size_t n = (size_t)o->rows * (size_t)o->cols;
    memset(o->h_col, 0, n);
    int64_t r0 = 0;
    for (int i = 0; i < num; i++) {
        const int64_t m = splits[i];
        uint8_t *dst = (uint8_t *)o->h_col + r0 * o->cols;
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < o->cols; c++) dst[c * m + r] = ((uint8_t *)o->h)[(r0 + r) * o->cols + c];
        r0 += m;
    }
    gln_twin_set(g_cu, &o->d_col, o->h_col);
}

/* Powers of two 2^-3 .. 2^3 on the host and the device. */
static void scales_new(gln_rng_t *rng, int n, float *h, gln_twin_t *d) {
    for (int i = 0; i < n; i++) h[i] = ldexpf(1.0f, (int)gln_rng_int(rng, -3, 3));
    *d = gln_twin_upload(g_cu, h, (size_t)n * sizeof(float));
}

/* ---- one case ------------------------------------------------------------------------------ */

typedef struct gcase {
    kind_t kind;
    gln_gemm_layout_t layout;
    int num;
    const int64_t *splits;
    int64_t kin, kout;
    int dev_splits, accumulate;
    int expect_cutlass;     /* 1: a CUTLASS kernel must take this call (when CUTLASS is built) */
    int bias;               /* TN: a bf16 bias per expert */
    int no_pow2_hint;       /* block: leave args.block_scales_pow2 = 0 (the CUDA loop) */
    int out_alt;            /* another output dtype: 1 fp16 for TN / NN (and the bias), bf16 for NT;
                             * 2 fp32 for TN / NN (and the bias) */
} gcase_t;

static void set_loop(int on) {
    if (on) setenv("GLN_CUDA_GROUPED_LOOP", "1", 1);
    else unsetenv("GLN_CUDA_GROUPED_LOOP");
}

/* The GPU's output after `args` on the CUDA context: with the default dispatch, then through the
 * CUTLASS entry point directly (checking it takes the call) with each tile regime forced, then
 * with the loop forced; each must equal the CPU's bytes.  `reset` restores the device outputs
 * before each run. */
typedef void (*reset_fn)(void *state);
typedef void (*check_fn)(void *state, const char *what);

static void run_every_way(const gcase_t *c, gln_grouped_gemm_args_t *da, reset_fn reset, check_fn check,
                           void *state, const char *what) {
    char w[512];
    reset(state);
    CHECK_OK(gln_grouped_gemm(g_cu, da));
    snprintf(w, sizeof w, "%s [default dispatch]", what);
    check(state, w);
#if defined(GLN_TEST_HAVE_CUDA)
    /* every tile regime of the CUTLASS kernels (small: the pingpong instantiations of many small
     * experts; the 4-expert shapes pick medium by default, the 24- and 32-expert ones small) */
    static const char *tiles[] = {"small", "medium", "large"};
    for (int t = 0; t < 3; t++) {
        int handled = -1;
        setenv("GLN_CUTLASS_TILES", tiles[t], 1);
        reset(state);
        CHECK_OK(gln_cuda_grouped_gemm_cutlass(g_cu, da, &handled));
        unsetenv("GLN_CUTLASS_TILES");
#if defined(GLN_TEST_HAVE_CUTLASS)
        CHECK_MSG(handled == c->expect_cutlass, "%s: CUTLASS took the call: %d, expected %d", what, handled,
                  c->expect_cutlass);
#else
        CHECK_MSG(handled == 0, "%s: built without CUTLASS but a CUTLASS kernel ran", what);
#endif
        if (handled == 1) {
            snprintf(w, sizeof w, "%s [CUTLASS, %s tiles]", what, tiles[t]);
            check(state, w);
        }
    }
#endif
    set_loop(1);
    reset(state);
    CHECK_OK(gln_grouped_gemm(g_cu, da));
    set_loop(0);
    snprintf(w, sizeof w, "%s [loop]", what);
    check(state, w);
}

/* TN / NN state: one grouped output (poisoned rows of the experts, old rows past them). */
typedef struct tnnn_state {
    gln_twin_t dd;
    void *init, *want;
} tnnn_state_t;
static void tnnn_reset(void *s) { gln_twin_set(g_cu, &((tnnn_state_t *)s)->dd, ((tnnn_state_t *)s)->init); }
static void tnnn_check(void *s, const char *what) {
    gln_twin_expect(g_cu, &((tnnn_state_t *)s)->dd, ((tnnn_state_t *)s)->want, what);
}

/* NT state: per-expert fp32 outputs. */
typedef struct nt_state {
    int num;
    gln_twin_t dd[MAXE];
    void *init[MAXE], *want[MAXE];
} nt_state_t;
static void nt_reset(void *s) {
    nt_state_t *t = s;
    for (int i = 0; i < t->num; i++) gln_twin_set(g_cu, &t->dd[i], t->init[i]);
}
static void nt_check(void *s, const char *what) {
    nt_state_t *t = s;
    for (int i = 0; i < t->num; i++) {
        char w[600];
        snprintf(w, sizeof w, "%s expert %d", what, i);
        gln_twin_expect(g_cu, &t->dd[i], t->want[i], w);
    }
}

static void describe(const gcase_t *c, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s %s E%d kin %lld kout %lld%s acc=%d bias=%d%s%s splits {", kind_name(c->kind),
                       c->layout == GLN_LAYOUT_TN ? "TN" : c->layout == GLN_LAYOUT_NN ? "NN" : "NT", c->num,
                       (long long)c->kin, (long long)c->kout, c->dev_splits ? " device splits" : "", c->accumulate,
                       c->bias, c->no_pow2_hint ? " no pow2 hint" : "",
                       !c->out_alt                 ? ""
                       : c->layout == GLN_LAYOUT_NT ? " out bf16"
                       : c->out_alt == 2            ? " out fp32"
                                                    : " out fp16");
    for (int i = 0; i < c->num && len > 0 && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, "%s%lld", i ? "," : "", (long long)c->splits[i]);
    if (len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, "}");
}

/* ---- MXFP8 and block-scaled operands, quantized by the CPU backend --------------------------
 * bf16 small integers times 2^-1 .. 2^1 (the exponent changing across rows and columns, so the
 * blocks get different power-of-two scales) quantized with gln_quantize / gln_grouped_quantize on
 * the CPU context and uploaded: the layouts are the library's own, every FP8 value and scale is
 * exact, and every product and FP32 sum of the GEMM stays exact. */

static int is_quant_kind(kind_t k) { return k == KIND_MXFP8 || k == KIND_BLOCK; }

/* The four buffers of a quantized tensor on both sides. */
typedef struct qoperand {
    gln_tensor_t h, d;
    void *hb[4];  /* data, col_data, scale_inv, col_scale_inv */
    gln_twin_t db[4];
} qoperand_t;

static void *values_new(gln_rng_t *rng, int64_t rows, int64_t cols) {
    void *h = calloc((size_t)rows * (size_t)cols + 1, 2);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const int e = (int)((r / 3 + c / 40) % 3) - 1;
            gln_store(h, GLN_DTYPE_BF16, (size_t)(r * cols + c), ldexp((double)gln_rng_int(rng, -4, 4), e));
        }
    return h;
}

static gln_quant_config_t quant_config(gln_scaling_mode_t mode) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = mode;
    cfg.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    cfg.rowwise = cfg.columnwise = 1;
    cfg.power_2_scale = 1;
    return cfg;
}

static qoperand_t qoperand_new(gln_scaling_mode_t mode, int64_t rows, int64_t cols, const size_t bytes[4]) {
    qoperand_t q;
    memset(&q, 0, sizeof q);
    for (int k = 0; k < 4; k++) q.hb[k] = calloc(bytes[k] + 1, 1), q.db[k].bytes = bytes[k];
    q.h = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols, q.hb[0]);
    q.h.scaling = mode;
    q.h.col_data = q.hb[1], q.h.scale_inv = q.hb[2], q.h.col_scale_inv = q.hb[3];
    return q;
}

/* After the host buffers are filled: the device copies and view. */
static void qoperand_upload(qoperand_t *q) {
    for (int k = 0; k < 4; k++) q->db[k] = gln_twin_upload(g_cu, q->hb[k], q->db[k].bytes);
    q->d = q->h;
    q->d.data = q->db[0].d, q->d.col_data = q->db[1].d, q->d.scale_inv = q->db[2].d, q->d.col_scale_inv = q->db[3].d;
}

static void qoperand_free(qoperand_t *q) {
    for (int k = 0; k < 4; k++) gln_twin_free(g_cu, &q->db[k]), free(q->hb[k]);
}

/* One [rows, cols] tensor (a weight). */
static qoperand_t qtensor_new(gln_rng_t *rng, gln_scaling_mode_t mode, int64_t rows, int64_t cols) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(mode, GLN_DTYPE_FP8_E4M3, rows, cols, &lay));
    const size_t bytes[4] = {lay.data_bytes, lay.col_data_bytes, lay.scale_bytes, lay.col_scale_bytes};
    qoperand_t q = qoperand_new(mode, rows, cols, bytes);
    void *v = values_new(rng, rows, cols);
    const gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v);
    const gln_quant_config_t cfg = quant_config(mode);
    CHECK_OK(gln_quantize(g_cpu, &cfg, &in, &q.h));
    free(v);
    qoperand_upload(&q);
    return q;
}

/* A grouped tensor of `rows` packed rows (those past the splits' sum stay 0). */
static qoperand_t qgrouped_new(gln_rng_t *rng, gln_scaling_mode_t mode, int num, const int64_t *splits,
                               int64_t rows, int64_t cols) {
    int64_t ro[MAXE + 1], co[MAXE + 1];
    CHECK_OK(gln_grouped_scale_offsets(mode, num, splits, cols, ro, co));
    const size_t es = mode == GLN_SCALING_MXFP8_1D ? 1 : 4, n = (size_t)rows * (size_t)cols;
    const size_t bytes[4] = {n, n, (size_t)ro[num] * es, (size_t)co[num] * es};
    qoperand_t q = qoperand_new(mode, rows, cols, bytes);
    void *v = values_new(rng, rows, cols);
    const gln_grouped_tensor_t in = {num, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v)};
    gln_grouped_tensor_t out = {num, splits, 0, q.h};
    const gln_quant_config_t cfg = quant_config(mode);
    CHECK_OK(gln_grouped_quantize(g_cpu, &cfg, &in, &out));
    free(v);
    qoperand_upload(&q);
    return q;
}

/* ---- the operands and outputs of a case ----------------------------------------------------- */

/* The operands of a case on both sides, and what to free. */
typedef struct operands {
    gln_grouped_tensor_t hb, cb;          /* B: x (TN) or dy (NN, NT) */
    gln_grouped_tensor_t ha, ca;          /* NT: A = x */
    gln_tensor_t hw[MAXE], cw[MAXE];      /* TN / NN: the weights */
    operand_t plain[MAXE + 2];            /* plain / per-tensor FP8 operands */
    qoperand_t quant[MAXE + 2];           /* MXFP8 / block operands */
    int n_plain, n_quant;
    float bsh[MAXE], wsh[MAXE], sah[MAXE];
    gln_twin_t scales_d[MAXE + 2];
    int n_scales;
} operands_t;

static operand_t *add_plain(operands_t *o, operand_t v) { return (o->plain[o->n_plain] = v, &o->plain[o->n_plain++]); }
static qoperand_t *add_quant(operands_t *o, qoperand_t v) { return (o->quant[o->n_quant] = v, &o->quant[o->n_quant++]); }
static gln_twin_t *add_scales(operands_t *o, gln_rng_t *rng, int n, float *h) {
    scales_new(rng, n, h, &o->scales_d[o->n_scales]);
    return &o->scales_d[o->n_scales++];
}

static void operands_free(operands_t *o) {
    for (int i = 0; i < o->n_plain; i++) operand_free(&o->plain[i]);
    for (int i = 0; i < o->n_quant; i++) qoperand_free(&o->quant[i]);
    for (int i = 0; i < o->n_scales; i++) gln_twin_free(g_cu, &o->scales_d[i]);
}

/* bf16 / per-tensor FP8 operands: random small integers, power-of-two decode scales. */
static void operands_plain(gln_rng_t *rng, const gcase_t *c, const int64_t *sp_d, int64_t rows, operands_t *o) {
    const int fp8 = c->kind != KIND_BF16;
    const gln_dtype_t xt = fp8 ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_BF16;
    const gln_dtype_t gt = c->kind == KIND_BF16 ? GLN_DTYPE_BF16
                           : c->kind == KIND_HYBRID ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    if (c->layout == GLN_LAYOUT_NT) {
        /* FP8 through the members' transposed copies with a decode scale per member */
        operand_t *x = add_plain(o, operand_new(rng, xt, rows, c->kin, 1, 0));
        operand_t *dy = add_plain(o, operand_new(rng, gt, rows, c->kout, 1, 0));
        const float *sxd = NULL, *sdyd = NULL;
        if (fp8) {
            sxd = add_scales(o, rng, c->num, o->sah)->d;
            sdyd = add_scales(o, rng, c->num, o->bsh)->d;
            grouped_transpose(x, c->num, c->splits);
            grouped_transpose(dy, c->num, c->splits);
        }
        o->ha = (gln_grouped_tensor_t){c->num, c->splits, 0, view_with_col(x, 0, o->sah, NULL)};
        o->hb = (gln_grouped_tensor_t){c->num, c->splits, 0, view_with_col(dy, 0, o->bsh, NULL)};
        o->ca = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, view_with_col(x, 1, NULL, sxd)};
        o->cb = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, view_with_col(dy, 1, NULL, sdyd)};
        return;
    }
    const int tn = c->layout == GLN_LAYOUT_TN;
    operand_t *b = add_plain(o, operand_new(rng, tn ? xt : gt, rows, tn ? c->kin : c->kout, 1, 0));
    const float *bsd = fp8 ? add_scales(o, rng, c->num, o->bsh)->d : NULL;
    for (int i = 0; i < c->num; i++) {
        operand_t *w = add_plain(o, operand_new(rng, fp8 ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_BF16, c->kout, c->kin, 1, 0));
        const float *wsd = fp8 ? add_scales(o, rng, 1, &o->wsh[i])->d : NULL;
        o->hw[i] = view_with_col(w, 0, &o->wsh[i], NULL);
        o->cw[i] = view_with_col(w, 1, NULL, wsd);
    }
    o->hb = (gln_grouped_tensor_t){c->num, c->splits, 0, view(b, 0, o->bsh, NULL)};
    o->cb = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, view(b, 1, NULL, bsd)};
}

/* MXFP8 (every operand MXFP8_1D) or block (activations and gradients 1x128, weights 128x128). */
static void operands_quant(gln_rng_t *rng, const gcase_t *c, const int64_t *sp_d, int64_t rows, operands_t *o) {
    const int mx = c->kind == KIND_MXFP8;
    const gln_scaling_mode_t act = mx ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_1D;
    const gln_scaling_mode_t wmode = mx ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_2D;
    if (c->layout == GLN_LAYOUT_NT) {
        qoperand_t *x = add_quant(o, qgrouped_new(rng, act, c->num, c->splits, rows, c->kin));
        o->ha = (gln_grouped_tensor_t){c->num, c->splits, 0, x->h};
        o->ca = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, x->d};
    } else {
        for (int i = 0; i < c->num; i++) {
            qoperand_t *w = add_quant(o, qtensor_new(rng, wmode, c->kout, c->kin));
            o->hw[i] = w->h, o->cw[i] = w->d;
        }
    }
    const int64_t bcols = c->layout == GLN_LAYOUT_TN ? c->kin : c->kout;
    qoperand_t *b = add_quant(o, qgrouped_new(rng, act, c->num, c->splits, rows, bcols));
    o->hb = (gln_grouped_tensor_t){c->num, c->splits, 0, b->h};
    o->cb = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, b->d};
}

/* wgrad: dW_i [kout, kin] = dy_i [m_i, kout]ᵀ · x_i [m_i, kin] into fp32 (or, out_alt, bf16) outputs. */
static void run_nt(gln_rng_t *rng, const gcase_t *c, operands_t *o, gln_grouped_gemm_args_t *ha,
                   gln_grouped_gemm_args_t *da, const char *what) {
    nt_state_t st;
    st.num = c->num;
    gln_tensor_t hd[MAXE], cd[MAXE];
    const gln_dtype_t dt = c->out_alt ? GLN_DTYPE_BF16 : GLN_DTYPE_FP32;
    const size_t dn = (size_t)c->kout * (size_t)c->kin, es = gln_dtype_size(dt);
    for (int i = 0; i < c->num; i++) {
        operand_t old = operand_new(rng, dt, c->kout, c->kin, c->accumulate, NAN);
        st.init[i] = old.h;
        st.want[i] = malloc(dn * es);
        memcpy(st.want[i], old.h, dn * es);
        st.dd[i] = old.d;
        hd[i] = gln_tensor_make(dt, c->kout, c->kin, st.want[i]);
        cd[i] = gln_tensor_make(dt, c->kout, c->kin, st.dd[i].d);
    }
    ha->a_grouped = &o->ha, ha->b = &o->hb, ha->d_list = hd;
    da->a_grouped = &o->ca, da->b = &o->cb, da->d_list = cd;
    CHECK_OK(gln_grouped_gemm(g_cpu, ha));
    for (int i = 0; i < c->num; i++) /* an empty expert: 0, or the old values */
        if (c->splits[i] == 0 && !c->accumulate)
            for (size_t e = 0; e < dn; e++) CHECK(gln_load(st.want[i], dt, e) == 0.0f);
    run_every_way(c, da, nt_reset, nt_check, &st, what);
    for (int i = 0; i < c->num; i++) {
        free(st.init[i]), free(st.want[i]);
        gln_twin_free(g_cu, &st.dd[i]);
    }
}

/* fprop TN: y [rows, kout] = x [rows, kin] · W_iᵀ (+ bias_i); dgrad NN: dx [rows, kin] = dy · W_i. */
static void run_tn_nn(gln_rng_t *rng, const gcase_t *c, operands_t *o, int64_t total, int64_t rows,
                      gln_grouped_gemm_args_t *ha, gln_grouped_gemm_args_t *da, const char *what) {
    const int64_t extra = rows - total, dcols = c->layout == GLN_LAYOUT_TN ? c->kout : c->kin;
    const gln_dtype_t dt = c->out_alt == 2 ? GLN_DTYPE_FP32 : c->out_alt ? GLN_DTYPE_FP16 : GLN_DTYPE_BF16;
    const size_t es = gln_dtype_size(dt); /* D and the bias */
    operand_t bias[MAXE];
    gln_tensor_t hbias[MAXE], cbias[MAXE];
    for (int i = 0; i < c->num; i++) {
        bias[i] = operand_new(rng, dt, 1, c->kout, 1, 0);
        hbias[i] = view(&bias[i], 0, NULL, NULL);
        cbias[i] = view(&bias[i], 1, NULL, NULL);
    }
    /* D: old values (small integers) everywhere; the experts' rows poisoned unless accumulating */
    operand_t d = operand_new(rng, dt, rows, dcols, 1, 0);
    tnnn_state_t st = {d.d, malloc(d.d.bytes), malloc(d.d.bytes)};
    memcpy(st.init, d.h, d.d.bytes);
    if (!c->accumulate) gln_poison(st.init, dt, (size_t)(total * dcols));
    memcpy(st.want, st.init, d.d.bytes);
    gln_grouped_tensor_t hd = {c->num, c->splits, 0, gln_tensor_make(dt, rows, dcols, st.want)};
    gln_grouped_tensor_t cd = {c->num, o->cb.splits, c->dev_splits, gln_tensor_make(dt, rows, dcols, d.d.d)};
    ha->a_list = o->hw, ha->b = &o->hb, ha->d_grouped = &hd;
    da->a_list = o->cw, da->b = &o->cb, da->d_grouped = &cd;
    if (c->bias) ha->bias_list = hbias, da->bias_list = cbias;
    CHECK_OK(gln_grouped_gemm(g_cpu, ha));
    /* the rows past the experts' keep their old values on the CPU too */
    gln_check_bitwise("CPU trailing rows", (char *)st.want + (size_t)(total * dcols) * es,
                      (char *)d.h + (size_t)(total * dcols) * es, (size_t)(extra * dcols) * es);
    run_every_way(c, da, tnnn_reset, tnnn_check, &st, what);
    free(st.init), free(st.want);
    operand_free(&d);
    for (int i = 0; i < c->num; i++) operand_free(&bias[i]);
}

static void run_case(gln_rng_t *rng, const gcase_t *c) {
    char what[400];
    describe(c, what, sizeof what);
    int64_t total = 0;
    for (int i = 0; i < c->num; i++) total += c->splits[i];
    const int64_t rows = total + 3; /* packed rows past the experts' */
    gln_twin_t dsplits = gln_twin_upload(g_cu, c->splits, (size_t)c->num * sizeof(int64_t));
    const int64_t *sp_d = c->dev_splits ? (const int64_t *)dsplits.d : c->splits;
    operands_t *o = calloc(1, sizeof *o);
    if (is_quant_kind(c->kind)) operands_quant(rng, c, sp_d, rows, o);
    else operands_plain(rng, c, sp_d, rows, o);
    gln_grouped_gemm_args_t ha = GLN_GROUPED_GEMM_ARGS_INIT, da = GLN_GROUPED_GEMM_ARGS_INIT;
    ha.layout = da.layout = c->layout;
    ha.accumulate = da.accumulate = c->accumulate;
    /* the data hold power-of-two block scales; the hint lets the CUDA backend use them */
    ha.block_scales_pow2 = da.block_scales_pow2 = !c->no_pow2_hint;
    if (c->layout == GLN_LAYOUT_NT) run_nt(rng, c, o, &ha, &da, what);
    else run_tn_nn(rng, c, o, total, rows, &ha, &da, what);
    operands_free(o);
    free(o);
    gln_twin_free(g_cu, &dsplits);
}

/* ---- the matrix ---------------------------------------------------------------------------- */

static const int64_t s_mixed[] = {5, 0, 17, 1};
static const int64_t s_one[] = {0, 0, 129, 0};
static const int64_t s_none[] = {0, 0, 0, 0};
static const int64_t s_odd[] = {1, 129, 5, 17};
static const int64_t s_aligned[] = {16, 0, 32, 144}; /* FP8 wgrad: every expert through CUTLASS */
static const int64_t s_part[] = {16, 5, 0, 48};      /* ... and one on the unaligned kernel */
/* Many small experts (the small-expert regime by default): Qwen3-like 128-row experts with
 * empty ones, one 256-row expert (two M tiles, two wgrad K blocks), and 1 / 17 / 129 rows. */
static const int64_t s_small32[] = {128, 128, 0, 128, 1, 128, 256, 128, 17, 128, 128, 0, 129, 128, 128, 128,
                                    128, 0, 128, 128, 128, 64, 128, 128, 128, 128, 0, 128, 32, 128, 128, 128};

static void test_matrix(void) {
    gln_rng_t rng = gln_rng_seed(1601);
    int64_t s24[24];
    for (int i = 0; i < 24; i++) s24[i] = i % 5 == 3 ? 0 : gln_rng_int(&rng, 1, 40);
    const struct {
        int num;
        const int64_t *splits;
        int64_t kin, kout;
    } shapes[] = {{4, s_mixed, 64, 48}, {4, s_one, 64, 48}, {4, s_none, 64, 48}, {4, s_odd, 128, 96},
                  {24, s24, 272, 208}, {4, s_aligned, 64, 48}, {4, s_part, 128, 96}, {32, s_small32, 256, 192}};
    const kind_t kinds[] = {KIND_BF16, KIND_E4M3, KIND_HYBRID, KIND_MXFP8, KIND_BLOCK};
    const gln_gemm_layout_t layouts[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            if (layouts[l] == GLN_LAYOUT_TN && kinds[k] == KIND_HYBRID) continue; /* = e4m3 fprop */
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int v = 0; v < (layouts[l] == GLN_LAYOUT_TN ? 8 : 4); v++) {
                    gcase_t c = {kinds[k], layouts[l], shapes[s].num, shapes[s].splits, shapes[s].kin,
                                 shapes[s].kout, v & 1, (v >> 1) & 1, 1, (v >> 2) & 1, 0, 0};
                    run_case(&rng, &c);
                }
        }
}

/* Arguments no kernel covers still give the right result (through the loop): bf16 rows that are
 * not 16-byte strided (K = 60 in fprop, kout = 44 in wgrad; MXFP8 K = 60, whose bf16 twin would
 * not be either); block scales without args.block_scales_pow2; and the HYBRID fprop, whose
 * activations stay E4M3, takes the E4M3 kernel. */
static void test_fallbacks(void) {
    gln_rng_t rng = gln_rng_seed(1602);
    const gcase_t cases[] = {
        {KIND_BF16, GLN_LAYOUT_TN, 4, s_mixed, 60, 48, 1, 0, 0, 1, 0, 0},
        {KIND_BF16, GLN_LAYOUT_NT, 4, s_mixed, 64, 44, 0, 1, 0, 0, 0, 0},
        {KIND_HYBRID, GLN_LAYOUT_TN, 4, s_odd, 64, 48, 1, 0, 1, 1, 0, 0}, /* x stays E4M3 in HYBRID fprop */
        /* block scales without the caller's power-of-two promise: the per-128-block loop */
        {KIND_BLOCK, GLN_LAYOUT_TN, 4, s_odd, 272, 48, 0, 0, 0, 1, 1, 0},
        {KIND_BLOCK, GLN_LAYOUT_NN, 4, s_mixed, 128, 208, 1, 0, 0, 0, 1, 0},
        {KIND_BLOCK, GLN_LAYOUT_NT, 4, s_odd, 64, 48, 0, 1, 0, 0, 1, 0},
        /* MXFP8 with K not a multiple of 8 (bf16 rows not 16-byte strided): the loop */
        {KIND_MXFP8, GLN_LAYOUT_TN, 4, s_mixed, 60, 48, 1, 0, 0, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&rng, &cases[i]);
}

/* The other output dtypes, each on a CUTLASS kernel: fp16 and fp32 y / dx from E4M3 × E4M3
 * (fp16 / fp32 activations; the fprop's bias of that dtype too), bf16 wgrads (no fused
 * main_grad) from bf16 and E4M3 operands, the E4M3 ones with an expert whose row count is not a
 * multiple of 16 (the unaligned kernel's bf16 store) and with the small-expert shape. */
static void test_out_dtypes(void) {
    gln_rng_t rng = gln_rng_seed(1605);
    const struct {
        kind_t kind;
        gln_gemm_layout_t layout;
        int num;
        const int64_t *splits;
        int64_t kin, kout;
    } cases[] = {
        {KIND_E4M3, GLN_LAYOUT_TN, 4, s_mixed, 64, 48},    {KIND_E4M3, GLN_LAYOUT_NN, 4, s_odd, 128, 96},
        {KIND_E4M3, GLN_LAYOUT_TN, 32, s_small32, 256, 192}, {KIND_E4M3, GLN_LAYOUT_NN, 32, s_small32, 256, 192},
        {KIND_BF16, GLN_LAYOUT_NT, 4, s_mixed, 64, 48},    {KIND_BF16, GLN_LAYOUT_NT, 32, s_small32, 256, 192},
        {KIND_E4M3, GLN_LAYOUT_NT, 4, s_aligned, 64, 48},  {KIND_E4M3, GLN_LAYOUT_NT, 4, s_part, 128, 96},
        {KIND_E4M3, GLN_LAYOUT_NT, 32, s_small32, 256, 192},
        /* HYBRID (E5M2 gradient) wgrad into bf16: TE's default format for current / delayed scaling */
        {KIND_HYBRID, GLN_LAYOUT_NT, 4, s_aligned, 64, 48}, {KIND_HYBRID, GLN_LAYOUT_NT, 4, s_part, 128, 96},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int alt = 1; alt <= (cases[i].layout == GLN_LAYOUT_NT ? 1 : 2); alt++)
            for (int v = 0; v < (cases[i].layout == GLN_LAYOUT_TN ? 8 : 4); v++) {
                gcase_t c = {cases[i].kind, cases[i].layout, cases[i].num, cases[i].splits, cases[i].kin,
                             cases[i].kout, v & 1, (v >> 1) & 1, 1, (v >> 2) & 1, 0, alt};
                run_case(&rng, &c);
            }
}

#ifdef GLN_TEST_HAVE_CUDA
/* Capture a bf16 fprop with device splits on a caller's stream; replay it after writing other
 * splits into the same device buffer: each replay equals the CPU's result for those splits. */
static void test_graph_capture(void) {
    gln_rng_t rng = gln_rng_seed(1603);
    enum { E = 4 };
    const int64_t kin = 64, kout = 48, rows = 160;
    const int64_t sets[3][E] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {40, 40, 40, 40}};
    cudaStream_t user = NULL;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    o.stream = user;
    gln_context_t *cu = NULL;
    CHECK_OK(gln_context_create(&o, &cu));
    if (!cu) return;
    gln_context_t *saved = g_cu;
    g_cu = cu; /* dev_* helpers allocate through the captured context */
    operand_t x = operand_new(&rng, GLN_DTYPE_BF16, rows, kin, 1, 0);
    operand_t w[E];
    gln_tensor_t hw[E], cw[E];
    for (int i = 0; i < E; i++) {
        w[i] = operand_new(&rng, GLN_DTYPE_BF16, kout, kin, 1, 0);
        hw[i] = view(&w[i], 0, NULL, NULL);
        cw[i] = view(&w[i], 1, NULL, NULL);
    }
    operand_t y = operand_new(&rng, GLN_DTYPE_BF16, rows, kout, 0, NAN);
    gln_twin_t ds = gln_twin_upload(g_cu, sets[0], sizeof sets[0]);
    gln_grouped_tensor_t cx = {E, ds.d, 1, view(&x, 1, NULL, NULL)};
    gln_grouped_tensor_t cy = {E, ds.d, 1, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, y.d.d)};
    gln_grouped_gemm_args_t da = GLN_GROUPED_GEMM_ARGS_INIT;
    da.layout = GLN_LAYOUT_TN, da.a_list = cw, da.b = &cx, da.d_grouped = &cy;
    CHECK_OK(gln_synchronize(cu));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CHECK_OK(gln_grouped_gemm(cu, &da));
    CHECK(cudaStreamEndCapture(user, &graph) == cudaSuccess);
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int s = 0; s < 3 && exec; s++) {
        gln_twin_set(g_cu, &ds, sets[s]);
        gln_twin_set(g_cu, &y.d, y.h); /* NaN */
        CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
        CHECK_OK(gln_synchronize(cu));
        void *want = malloc(y.d.bytes);
        memcpy(want, y.h, y.d.bytes);
        gln_grouped_tensor_t hx = {E, sets[s], 0, view(&x, 0, NULL, NULL)};
        gln_grouped_tensor_t hy = {E, sets[s], 0, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, want)};
        gln_grouped_gemm_args_t ha = da;
        ha.a_list = hw, ha.b = &hx, ha.d_grouped = &hy;
        CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
        char what[80];
        snprintf(what, sizeof what, "graph replay %d", s);
        gln_twin_expect(g_cu, &y.d, want, what);
        free(want);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_async_error(cu));
    gln_twin_free(g_cu, &ds);
    operand_free(&x), operand_free(&y);
    for (int i = 0; i < E; i++) operand_free(&w[i]);
    g_cu = saved;
    gln_context_destroy(cu);
    cudaStreamDestroy(user);
}

/* Programmatic dependent launch across grouped GEMMs (cutlass/grouped_sm90.cuh): each setup kernel
 * and each CUTLASS kernel may be scheduled while the kernel before it still runs, and must wait
 * for its writes.  A chain enqueued with no host synchronization: per step, y = x_s · W_iᵀ (fprop
 * from one of two inputs, alternating, so a read of the previous step's y shows), then
 * dW_i += g_iᵀ · y_i (the wgrad reading y, accumulating into FP32); y starts NaN-poisoned.  After
 * the chain dW equals the CPU's bit for bit (|y| <= 256 is exact in bf16, every sum exact in
 * FP32).  Run with PDL (the default) and under GLN_CUDA_GEMM_PDL=0. */
/* One GEMM of the chain: on the device through the CUTLASS dispatch (which must take it: the PDL
 * launches are the CUTLASS path's), on the CPU through the public call. */
static void chain_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *a, const char *what) {
#if defined(GLN_TEST_HAVE_CUTLASS)
    if (ctx == g_cu) {
        int handled = -1;
        CHECK_OK(gln_cuda_grouped_gemm_cutlass(ctx, a, &handled));
        CHECK_MSG(handled == 1, "PDL chain: no CUTLASS kernel took the %s", what);
        return;
    }
#else
    (void)what;
#endif
    CHECK_OK(gln_grouped_gemm(ctx, a));
}

static void pdl_chain(void) {
    gln_rng_t rng = gln_rng_seed(1607);
    enum { E = 8, STEPS = 6 };
    static const int64_t splits[E] = {300, 0, 17, 512, 129, 256, 1, 333};
    const int64_t kin = 16, kmid = 256, kg = 64;
    int64_t rows = 0;
    for (int i = 0; i < E; i++) rows += splits[i];
    gln_twin_t ds = gln_twin_upload(g_cu, splits, sizeof splits);
    operand_t x[2] = {operand_new(&rng, GLN_DTYPE_BF16, rows, kin, 1, 0),
                      operand_new(&rng, GLN_DTYPE_BF16, rows, kin, 1, 0)};
    operand_t g = operand_new(&rng, GLN_DTYPE_BF16, rows, kg, 1, 0);
    operand_t y = operand_new(&rng, GLN_DTYPE_BF16, rows, kmid, 0, NAN);
    operand_t w[E], dw[E];
    gln_tensor_t hw[E], cw[E], hdw[E], cdw[E];
    for (int i = 0; i < E; i++) {
        w[i] = operand_new(&rng, GLN_DTYPE_BF16, kmid, kin, 1, 0);
        dw[i] = operand_new(&rng, GLN_DTYPE_FP32, kg, kmid, 1, 0);
        hw[i] = view(&w[i], 0, NULL, NULL), cw[i] = view(&w[i], 1, NULL, NULL);
        hdw[i] = view(&dw[i], 0, NULL, NULL), cdw[i] = view(&dw[i], 1, NULL, NULL);
    }
    void *hy = malloc(y.d.bytes);
    memcpy(hy, y.h, y.d.bytes);
    for (int on_device = 0; on_device < 2; on_device++) {
        gln_context_t *ctx = on_device ? g_cu : g_cpu;
        const int64_t *sp = on_device ? (const int64_t *)ds.d : splits;
        gln_grouped_tensor_t gy = {E, sp, on_device, gln_tensor_make(GLN_DTYPE_BF16, rows, kmid, on_device ? y.d.d : hy)};
        gln_grouped_tensor_t gg = {E, sp, on_device, view(&g, on_device, NULL, NULL)};
        for (int s = 0; s < STEPS; s++) {
            gln_grouped_tensor_t gx = {E, sp, on_device, view(&x[s % 2], on_device, NULL, NULL)};
            gln_grouped_gemm_args_t f = GLN_GROUPED_GEMM_ARGS_INIT, wg = GLN_GROUPED_GEMM_ARGS_INIT;
            f.layout = GLN_LAYOUT_TN, f.a_list = on_device ? cw : hw, f.b = &gx, f.d_grouped = &gy;
            wg.layout = GLN_LAYOUT_NT, wg.a_grouped = &gy, wg.b = &gg, wg.d_list = on_device ? cdw : hdw;
            wg.accumulate = 1;
            chain_gemm(ctx, &f, "fprop");
            chain_gemm(ctx, &wg, "wgrad");
        }
    }
    CHECK_OK(gln_synchronize(g_cu));
    for (int i = 0; i < E; i++) {
        char what[80];
        snprintf(what, sizeof what, "PDL chain dW[%d] (GLN_CUDA_GEMM_PDL=%s)", i,
                 getenv("GLN_CUDA_GEMM_PDL") ? getenv("GLN_CUDA_GEMM_PDL") : "unset");
        gln_twin_expect(g_cu, &dw[i].d, dw[i].h, what);
    }
    CHECK_OK(gln_context_async_error(g_cu));
    free(hy);
    gln_twin_free(g_cu, &ds);
    operand_free(&x[0]), operand_free(&x[1]), operand_free(&g), operand_free(&y);
    for (int i = 0; i < E; i++) operand_free(&w[i]), operand_free(&dw[i]);
}

static void test_pdl_chain(void) {
    pdl_chain();
    CHECK(setenv("GLN_CUDA_GEMM_PDL", "0", 1) == 0);
    pdl_chain();
    CHECK(unsetenv("GLN_CUDA_GEMM_PDL") == 0);
}

/* Zeroed device buffers of a grouped quantized tensor large enough for any splits
 * (gln_grouped_scale_bound), and their view. */
static gln_tensor_t device_bound_new(gln_scaling_mode_t mode, int num, int64_t rows, int64_t cols, gln_twin_t d[4]) {
    int64_t se_r, se_c;
    CHECK_OK(gln_grouped_scale_bound(mode, num, rows, cols, &se_r, &se_c));
    const size_t es = mode == GLN_SCALING_MXFP8_1D ? 1 : 4, n = (size_t)(rows * cols);
    const size_t bytes[4] = {n, n, (size_t)se_r * es, (size_t)se_c * es};
    void *zero = calloc(n + (size_t)(se_r + se_c) * es + 1, 1);
    for (int k = 0; k < 4; k++) d[k] = gln_twin_upload(g_cu, zero, bytes[k]);
    free(zero);
    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols, d[0].d);
    t.scaling = mode, t.col_data = d[1].d, t.scale_inv = d[2].d, t.col_scale_inv = d[3].d;
    return t;
}

/* The emulated path captures too: an MXFP8 or power-of-two block fprop with device splits
 * (the plan, the grouped and the weights' dequantization and the bf16 kernel all in the graph),
 * replayed after writing other splits and the activations quantized for them into the same
 * device buffers (sized by gln_grouped_scale_bound). */
static void capture_quant(kind_t kind) {
    gln_rng_t rng = gln_rng_seed(1604 + (uint64_t)kind);
    enum { E = 4 };
    const int64_t kin = 64, kout = 48, rows = 160;
    const int64_t sets[3][E] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {40, 40, 40, 40}};
    const gln_scaling_mode_t act = kind == KIND_MXFP8 ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_1D;
    const gln_scaling_mode_t wmode = kind == KIND_MXFP8 ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_2D;
    cudaStream_t user = NULL;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_options_t opt = GLN_CONTEXT_OPTIONS_INIT;
    opt.backend = GLN_BACKEND_CUDA;
    opt.stream = user;
    gln_context_t *cu = NULL;
    CHECK_OK(gln_context_create(&opt, &cu));
    if (!cu) return;
    gln_context_t *saved = g_cu;
    g_cu = cu;
    qoperand_t w[E];
    gln_tensor_t hw[E], cw[E];
    for (int i = 0; i < E; i++) {
        w[i] = qtensor_new(&rng, wmode, kout, kin);
        hw[i] = w[i].h, cw[i] = w[i].d;
    }
    gln_twin_t xd[4];
    const gln_tensor_t xt = device_bound_new(act, E, rows, kin, xd);
    operand_t y = operand_new(&rng, GLN_DTYPE_BF16, rows, kout, 0, NAN);
    gln_twin_t ds = gln_twin_upload(g_cu, sets[0], sizeof sets[0]);
    gln_grouped_tensor_t cx = {E, ds.d, 1, xt};
    gln_grouped_tensor_t cy = {E, ds.d, 1, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, y.d.d)};
    gln_grouped_gemm_args_t da = GLN_GROUPED_GEMM_ARGS_INIT;
    da.layout = GLN_LAYOUT_TN, da.a_list = cw, da.b = &cx, da.d_grouped = &cy, da.block_scales_pow2 = 1;
    CHECK_OK(gln_synchronize(cu));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CHECK_OK(gln_grouped_gemm(cu, &da));
    CHECK(cudaStreamEndCapture(user, &graph) == cudaSuccess);
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int s = 0; s < 3 && exec; s++) {
        qoperand_t x = qgrouped_new(&rng, act, E, sets[s], rows, kin);
        for (int k = 0; k < 4; k++)
            if (x.db[k].bytes) CHECK_OK(gln_memcpy(cu, xd[k].d, x.hb[k], x.db[k].bytes, GLN_COPY_HOST_TO_BACKEND));
        gln_twin_set(g_cu, &ds, sets[s]);
        gln_twin_set(g_cu, &y.d, y.h); /* NaN */
        CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
        CHECK_OK(gln_synchronize(cu));
        void *want = malloc(y.d.bytes);
        memcpy(want, y.h, y.d.bytes);
        gln_grouped_tensor_t hx = {E, sets[s], 0, x.h};
        gln_grouped_tensor_t hy = {E, sets[s], 0, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, want)};
        gln_grouped_gemm_args_t ha = da;
        ha.a_list = hw, ha.b = &hx, ha.d_grouped = &hy;
        CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
        char what[80];
        snprintf(what, sizeof what, "%s graph replay %d", kind_name(kind), s);
        gln_twin_expect(g_cu, &y.d, want, what);
        free(want);
        qoperand_free(&x);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_async_error(cu));
    gln_twin_free(g_cu, &ds);
    for (int k = 0; k < 4; k++) gln_twin_free(g_cu, &xd[k]);
    operand_free(&y);
    for (int i = 0; i < E; i++) qoperand_free(&w[i]);
    g_cu = saved;
    gln_context_destroy(cu);
    cudaStreamDestroy(user);
}

static void test_graph_capture_emulated(void) {
    capture_quant(KIND_MXFP8);
    capture_quant(KIND_BLOCK);
}
#endif

#if defined(GLN_TEST_HAVE_CUDA) && defined(GLN_TEST_HAVE_CUTLASS)
/* ---- the promoted FP8 GEMMs against cuBLASLt on random data ---------------------------------
 * TransformerEngine runs its FP8 dgrad and wgrad on cuBLASLt with the split accumulator (the
 * tensor cores' partial sums promoted to FP32); the CUTLASS kernels promote after every 128-wide
 * K tile.  On full-range random FP8 data (sums the tensor cores round differently from FP32) the
 * two must still agree to the bit: every tile regime's kernel (the overlapped promotion of the
 * large experts' wgrad included) against the cuBLASLt loop's bytes.  The shapes give each
 * expert's output at least 256 tiles of 128 × 128, so cuBLASLt has no reason to split K. */

/* Random FP8 codes, every finite value (no NaN / Inf code), and the transposed copy: as one
 * tensor (num = 0) or as the grouped columnwise copy of num members. */
static void fp8_random_fill(gln_rng_t *rng, operand_t *o, int num, const int64_t *splits) {
    const size_t n = (size_t)o->rows * (size_t)o->cols;
    const int e4m3 = o->dtype == GLN_DTYPE_FP8_E4M3;
    for (size_t i = 0; i < n; i++) {
        uint8_t b;
        do b = (uint8_t)gln_rng_int(rng, 0, 255);
        while (e4m3 ? (b & 0x7F) == 0x7F : (b & 0x7C) == 0x7C);
        ((uint8_t *)o->h)[i] = b;
    }
    gln_twin_set(g_cu, &o->d, o->h);
    if (num) {
        grouped_transpose(o, num, splits);
        return;
    }
    host_transpose(o);
    gln_twin_set(g_cu, &o->d_col, o->h_col);
}

/* The output bytes after `a` through the CUDA dispatch (forced regime `tiles`, or the loop). */
static void promoted_run(gln_grouped_gemm_args_t *a, const char *tiles, const char *what) {
    if (!tiles) {
        set_loop(1);
        CHECK_OK(gln_grouped_gemm(g_cu, a));
        set_loop(0);
        return;
    }
    int handled = -1;
    setenv("GLN_CUTLASS_TILES", tiles, 1);
    CHECK_OK(gln_cuda_grouped_gemm_cutlass(g_cu, a, &handled));
    unsetenv("GLN_CUTLASS_TILES");
    CHECK_MSG(handled == 1, "%s: no CUTLASS kernel took the call (%s tiles)", what, tiles);
}

static void test_promoted_fp8_matches_cublaslt(void) {
    enum { E = 2 };
    const int64_t splits[E] = {2048, 1024}, rows = splits[0] + splits[1], kin = 4096, kout = 1024;
    static const char *tiles[] = {NULL, "small", "medium", "large"}; /* NULL: the cuBLASLt loop */
    gln_rng_t rng = gln_rng_seed(2604);
    gln_twin_t dsplits = gln_twin_upload(g_cu, splits, sizeof splits);
    float sh[2][E];
    gln_twin_t sd[2];
    scales_new(&rng, E, sh[0], &sd[0]); /* powers of two: exact in any order of the alpha product */
    scales_new(&rng, E, sh[1], &sd[1]);
    for (int hybrid = 0; hybrid < 2; hybrid++) {
        const gln_dtype_t gt = hybrid ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
        operand_t x = operand_new(&rng, GLN_DTYPE_FP8_E4M3, rows, kin, 0, 0);
        operand_t dy = operand_new(&rng, gt, rows, kout, 0, 0);
        operand_t w[E];
        gln_tensor_t wv[E];
        fp8_random_fill(&rng, &x, E, splits);
        fp8_random_fill(&rng, &dy, E, splits);
        for (int i = 0; i < E; i++) {
            w[i] = operand_new(&rng, GLN_DTYPE_FP8_E4M3, kout, kin, 0, 0);
            fp8_random_fill(&rng, &w[i], 0, NULL);
            wv[i] = view_with_col(&w[i], 1, NULL, (const float *)sd[0].d + i);
        }
        gln_grouped_tensor_t gx = {E, dsplits.d, 1, view_with_col(&x, 1, NULL, sd[1].d)};
        gln_grouped_tensor_t gdy = {E, dsplits.d, 1, view_with_col(&dy, 1, NULL, sd[1].d)};
        for (int nt = 0; nt < 2; nt++) { /* dgrad NN, then wgrad NT into FP32 */
            gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
            a.layout = nt ? GLN_LAYOUT_NT : GLN_LAYOUT_NN;
            a.b = &gdy;
            const size_t out_bytes = nt ? (size_t)(E * kout * kin) * 4 : (size_t)(rows * kin) * 2;
            void *dout = NULL;
            CHECK_OK(gln_malloc(g_cu, out_bytes, &dout));
            gln_tensor_t dw[E];
            gln_grouped_tensor_t dx = {E, dsplits.d, 1, gln_tensor_make(GLN_DTYPE_BF16, rows, kin, dout)};
            if (nt) {
                for (int i = 0; i < E; i++)
                    dw[i] = gln_tensor_make(GLN_DTYPE_FP32, kout, kin, (float *)dout + (size_t)(i * kout * kin));
                a.a_grouped = &gx, a.d_list = dw;
            } else {
                a.a_list = wv, a.d_grouped = &dx;
            }
            unsigned char *want = malloc(out_bytes), *got = malloc(out_bytes);
            unsigned char *poison = malloc(out_bytes); /* all-ones bytes: NaN in bf16 and FP32 */
            memset(poison, 0xFF, out_bytes);
            for (int t = 0; t < 4 && dout; t++) {
                char what[200];
                snprintf(what, sizeof what, "%s %s on random FP8 data, %s", hybrid ? "HYBRID" : "E4M3",
                         nt ? "wgrad" : "dgrad", tiles[t] ? tiles[t] : "the cuBLASLt loop");
                /* every run starts from NaN, so a kernel that leaves an element unwritten fails */
                CHECK_OK(gln_memcpy(g_cu, dout, poison, out_bytes, GLN_COPY_HOST_TO_BACKEND));
                promoted_run(&a, tiles[t], what);
                CHECK_OK(gln_memcpy(g_cu, t ? got : want, dout, out_bytes, GLN_COPY_BACKEND_TO_HOST));
                if (t) gln_check_bitwise(what, got, want, out_bytes);
            }
            free(want), free(got), free(poison);
            if (dout) CHECK_OK(gln_free(g_cu, dout));
        }
        operand_free(&x), operand_free(&dy);
        for (int i = 0; i < E; i++) operand_free(&w[i]);
    }
    gln_twin_free(g_cu, &sd[0]), gln_twin_free(g_cu, &sd[1]), gln_twin_free(g_cu, &dsplits);
}
#endif

static const gln_test_case_t k_cases[] = {
    GLN_CASE(test_matrix),
    GLN_CASE(test_fallbacks),
    GLN_CASE(test_out_dtypes),
#ifdef GLN_TEST_HAVE_CUDA
    GLN_CASE(test_graph_capture),
    GLN_CASE(test_graph_capture_emulated),
    GLN_CASE(test_pdl_chain),
#endif
#if defined(GLN_TEST_HAVE_CUDA) && defined(GLN_TEST_HAVE_CUTLASS)
    GLN_CASE(test_promoted_fp8_matches_cublaslt),
#endif
};

int main(int argc, char **argv) {
    /* The block-scaled cases here check the dequantize emulation and the loop bit for bit; the
     * block-scaled CUTLASS kernels that take them by default (FP8 tensor-core accumulation, not
     * bitwise) have their own test, test_cuda_grouped_blockwise.c.  The backend reads the switch
     * at every call, so setting it before the contexts exist changes nothing else. */
    setenv("GLN_CUDA_BLOCKWISE", "0", 1);
    return gln_test_cuda_main(argc, argv, &g_cpu, &g_cu, k_cases, sizeof k_cases / sizeof k_cases[0]);
}
