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
 * read from zero-padded copies, all on CUTLASS); MXFP8 and FP8 block scaling with power-of-two
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
 * must be exactly 0 (or untouched when accumulating).  The operands are those of
 * tests/harness/grouped_operands.h; CUDA graphs and launch chains: test_cuda_grouped_gemm_graph.c.
 * The promoted FP8 dgrad and wgrad of every tile regime
 * also run on full-range random FP8 data against the cuBLASLt loop (TransformerEngine's GEMM
 * with the split accumulator): bitwise equal, which fixes the promotion interval.
 *
 * Skips (exit 77) without a CUDA device. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "grouped_operands.h"
#include "harness.h"
#include "numerics/numerics.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>
/* The CUTLASS dispatch (internal, cuda_grouped_gemm.c): did a kernel take the call? */
gln_status_t gln_cuda_grouped_gemm_cutlass(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled);
#endif

static gln_context_t *g_cu, *g_cpu;

/* ---- one case ------------------------------------------------------------------------------ */

typedef struct gcase {
    gln_gop_kind_t kind;
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
    gln_twin_t dd[GLN_GOP_MAXE];
    void *init[GLN_GOP_MAXE], *want[GLN_GOP_MAXE];
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
    int len = snprintf(buf, n, "%s %s E%d kin %lld kout %lld%s acc=%d bias=%d%s%s splits {", gln_gop_kind_name(c->kind),
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

/* ---- the operands and outputs of a case ----------------------------------------------------- */

/* The operands of a case on both sides, and what to free. */
typedef struct operands {
    gln_grouped_tensor_t hb, cb;          /* B: x (TN) or dy (NN, NT) */
    gln_grouped_tensor_t ha, ca;          /* NT: A = x */
    gln_tensor_t hw[GLN_GOP_MAXE], cw[GLN_GOP_MAXE];      /* TN / NN: the weights */
    gln_gop_operand_t plain[GLN_GOP_MAXE + 2];            /* plain / per-tensor FP8 operands */
    gln_gop_qoperand_t quant[GLN_GOP_MAXE + 2];           /* MXFP8 / block operands */
    int n_plain, n_quant;
    float bsh[GLN_GOP_MAXE], wsh[GLN_GOP_MAXE], sah[GLN_GOP_MAXE];
    gln_twin_t scales_d[GLN_GOP_MAXE + 2];
    int n_scales;
} operands_t;

static gln_gop_operand_t *add_plain(operands_t *o, gln_gop_operand_t v) { return (o->plain[o->n_plain] = v, &o->plain[o->n_plain++]); }
static gln_gop_qoperand_t *add_quant(operands_t *o, gln_gop_qoperand_t v) { return (o->quant[o->n_quant] = v, &o->quant[o->n_quant++]); }
static gln_twin_t *add_scales(operands_t *o, gln_rng_t *rng, int n, float *h) {
    gln_gop_scales_new(g_cu, rng, n, h, &o->scales_d[o->n_scales]);
    return &o->scales_d[o->n_scales++];
}

static void operands_free(operands_t *o) {
    for (int i = 0; i < o->n_plain; i++) gln_gop_operand_free(g_cu, &o->plain[i]);
    for (int i = 0; i < o->n_quant; i++) gln_gop_qoperand_free(g_cu, &o->quant[i]);
    for (int i = 0; i < o->n_scales; i++) gln_twin_free(g_cu, &o->scales_d[i]);
}

/* bf16 / per-tensor FP8 operands: random small integers, power-of-two decode scales. */
static void operands_plain(gln_rng_t *rng, const gcase_t *c, const int64_t *sp_d, int64_t rows, operands_t *o) {
    const int fp8 = c->kind != GLN_GOP_KIND_BF16;
    const gln_dtype_t xt = fp8 ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_BF16;
    const gln_dtype_t gt = c->kind == GLN_GOP_KIND_BF16 ? GLN_DTYPE_BF16
                           : c->kind == GLN_GOP_KIND_HYBRID ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    if (c->layout == GLN_LAYOUT_NT) {
        /* FP8 through the members' transposed copies with a decode scale per member */
        gln_gop_operand_t *x = add_plain(o, gln_gop_operand_new(g_cu, rng, xt, rows, c->kin, 1, 0));
        gln_gop_operand_t *dy = add_plain(o, gln_gop_operand_new(g_cu, rng, gt, rows, c->kout, 1, 0));
        const float *sxd = NULL, *sdyd = NULL;
        if (fp8) {
            sxd = add_scales(o, rng, c->num, o->sah)->d;
            sdyd = add_scales(o, rng, c->num, o->bsh)->d;
            gln_gop_grouped_transpose(g_cu, x, c->num, c->splits);
            gln_gop_grouped_transpose(g_cu, dy, c->num, c->splits);
        }
        o->ha = (gln_grouped_tensor_t){c->num, c->splits, 0, gln_gop_view_with_col(x, 0, o->sah, NULL)};
        o->hb = (gln_grouped_tensor_t){c->num, c->splits, 0, gln_gop_view_with_col(dy, 0, o->bsh, NULL)};
        o->ca = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, gln_gop_view_with_col(x, 1, NULL, sxd)};
        o->cb = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, gln_gop_view_with_col(dy, 1, NULL, sdyd)};
        return;
    }
    const int tn = c->layout == GLN_LAYOUT_TN;
    gln_gop_operand_t *b = add_plain(o, gln_gop_operand_new(g_cu, rng, tn ? xt : gt, rows, tn ? c->kin : c->kout, 1, 0));
    const float *bsd = fp8 ? add_scales(o, rng, c->num, o->bsh)->d : NULL;
    for (int i = 0; i < c->num; i++) {
        gln_gop_operand_t *w = add_plain(o, gln_gop_operand_new(g_cu, rng, fp8 ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_BF16, c->kout, c->kin, 1, 0));
        const float *wsd = fp8 ? add_scales(o, rng, 1, &o->wsh[i])->d : NULL;
        o->hw[i] = gln_gop_view_with_col(w, 0, &o->wsh[i], NULL);
        o->cw[i] = gln_gop_view_with_col(w, 1, NULL, wsd);
    }
    o->hb = (gln_grouped_tensor_t){c->num, c->splits, 0, gln_gop_view(b, 0, o->bsh, NULL)};
    o->cb = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, gln_gop_view(b, 1, NULL, bsd)};
}

/* MXFP8 (every operand MXFP8_1D) or block (activations and gradients 1x128, weights 128x128). */
static void operands_quant(gln_rng_t *rng, const gcase_t *c, const int64_t *sp_d, int64_t rows, operands_t *o) {
    const int mx = c->kind == GLN_GOP_KIND_MXFP8;
    const gln_scaling_mode_t act = mx ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_1D;
    const gln_scaling_mode_t wmode = mx ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_2D;
    if (c->layout == GLN_LAYOUT_NT) {
        gln_gop_qoperand_t *x = add_quant(o, gln_gop_qgrouped_new(g_cpu, g_cu, rng, act, c->num, c->splits, rows, c->kin));
        o->ha = (gln_grouped_tensor_t){c->num, c->splits, 0, x->h};
        o->ca = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, x->d};
    } else {
        for (int i = 0; i < c->num; i++) {
            gln_gop_qoperand_t *w = add_quant(o, gln_gop_qtensor_new(g_cpu, g_cu, rng, wmode, c->kout, c->kin));
            o->hw[i] = w->h, o->cw[i] = w->d;
        }
    }
    const int64_t bcols = c->layout == GLN_LAYOUT_TN ? c->kin : c->kout;
    gln_gop_qoperand_t *b = add_quant(o, gln_gop_qgrouped_new(g_cpu, g_cu, rng, act, c->num, c->splits, rows, bcols));
    o->hb = (gln_grouped_tensor_t){c->num, c->splits, 0, b->h};
    o->cb = (gln_grouped_tensor_t){c->num, sp_d, c->dev_splits, b->d};
}

/* wgrad: dW_i [kout, kin] = dy_i [m_i, kout]ᵀ · x_i [m_i, kin] into fp32 (or, out_alt, bf16) outputs. */
static void run_nt(gln_rng_t *rng, const gcase_t *c, operands_t *o, gln_grouped_gemm_args_t *ha,
                   gln_grouped_gemm_args_t *da, const char *what) {
    nt_state_t st;
    st.num = c->num;
    gln_tensor_t hd[GLN_GOP_MAXE], cd[GLN_GOP_MAXE];
    const gln_dtype_t dt = c->out_alt ? GLN_DTYPE_BF16 : GLN_DTYPE_FP32;
    const size_t dn = (size_t)c->kout * (size_t)c->kin, es = gln_dtype_size(dt);
    for (int i = 0; i < c->num; i++) {
        gln_gop_operand_t old = gln_gop_operand_new(g_cu, rng, dt, c->kout, c->kin, c->accumulate, NAN);
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
    gln_gop_operand_t bias[GLN_GOP_MAXE];
    gln_tensor_t hbias[GLN_GOP_MAXE], cbias[GLN_GOP_MAXE];
    for (int i = 0; i < c->num; i++) {
        bias[i] = gln_gop_operand_new(g_cu, rng, dt, 1, c->kout, 1, 0);
        hbias[i] = gln_gop_view(&bias[i], 0, NULL, NULL);
        cbias[i] = gln_gop_view(&bias[i], 1, NULL, NULL);
    }
    /* D: old values (small integers) everywhere; the experts' rows poisoned unless accumulating */
    gln_gop_operand_t d = gln_gop_operand_new(g_cu, rng, dt, rows, dcols, 1, 0);
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
    gln_gop_operand_free(g_cu, &d);
    for (int i = 0; i < c->num; i++) gln_gop_operand_free(g_cu, &bias[i]);
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
    if (gln_gop_is_quant_kind(c->kind)) operands_quant(rng, c, sp_d, rows, o);
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
static const int64_t s_part[] = {16, 5, 0, 48};      /* ... and one read from zero-padded copies */
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
    const gln_gop_kind_t kinds[] = {GLN_GOP_KIND_BF16, GLN_GOP_KIND_E4M3, GLN_GOP_KIND_HYBRID, GLN_GOP_KIND_MXFP8, GLN_GOP_KIND_BLOCK};
    const gln_gemm_layout_t layouts[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            if (layouts[l] == GLN_LAYOUT_TN && kinds[k] == GLN_GOP_KIND_HYBRID) continue; /* = e4m3 fprop */
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
        {GLN_GOP_KIND_BF16, GLN_LAYOUT_TN, 4, s_mixed, 60, 48, 1, 0, 0, 1, 0, 0},
        {GLN_GOP_KIND_BF16, GLN_LAYOUT_NT, 4, s_mixed, 64, 44, 0, 1, 0, 0, 0, 0},
        {GLN_GOP_KIND_HYBRID, GLN_LAYOUT_TN, 4, s_odd, 64, 48, 1, 0, 1, 1, 0, 0}, /* x stays E4M3 in HYBRID fprop */
        /* block scales without the caller's power-of-two promise: the per-128-block loop */
        {GLN_GOP_KIND_BLOCK, GLN_LAYOUT_TN, 4, s_odd, 272, 48, 0, 0, 0, 1, 1, 0},
        {GLN_GOP_KIND_BLOCK, GLN_LAYOUT_NN, 4, s_mixed, 128, 208, 1, 0, 0, 0, 1, 0},
        {GLN_GOP_KIND_BLOCK, GLN_LAYOUT_NT, 4, s_odd, 64, 48, 0, 1, 0, 0, 1, 0},
        /* MXFP8 with K not a multiple of 8 (bf16 rows not 16-byte strided): the loop */
        {GLN_GOP_KIND_MXFP8, GLN_LAYOUT_TN, 4, s_mixed, 60, 48, 1, 0, 0, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&rng, &cases[i]);
}

/* The other output dtypes, each on a CUTLASS kernel: fp16 and fp32 y / dx from E4M3 × E4M3
 * (fp16 / fp32 activations; the fprop's bias of that dtype too), bf16 wgrads (no fused
 * main_grad) from bf16 and E4M3 operands, the E4M3 ones with an expert whose row count is not a
 * multiple of 16 (the padded copies into a bf16 output) and with the small-expert shape. */
static void test_out_dtypes(void) {
    gln_rng_t rng = gln_rng_seed(1605);
    const struct {
        gln_gop_kind_t kind;
        gln_gemm_layout_t layout;
        int num;
        const int64_t *splits;
        int64_t kin, kout;
    } cases[] = {
        {GLN_GOP_KIND_E4M3, GLN_LAYOUT_TN, 4, s_mixed, 64, 48},    {GLN_GOP_KIND_E4M3, GLN_LAYOUT_NN, 4, s_odd, 128, 96},
        {GLN_GOP_KIND_E4M3, GLN_LAYOUT_TN, 32, s_small32, 256, 192}, {GLN_GOP_KIND_E4M3, GLN_LAYOUT_NN, 32, s_small32, 256, 192},
        {GLN_GOP_KIND_BF16, GLN_LAYOUT_NT, 4, s_mixed, 64, 48},    {GLN_GOP_KIND_BF16, GLN_LAYOUT_NT, 32, s_small32, 256, 192},
        {GLN_GOP_KIND_E4M3, GLN_LAYOUT_NT, 4, s_aligned, 64, 48},  {GLN_GOP_KIND_E4M3, GLN_LAYOUT_NT, 4, s_part, 128, 96},
        {GLN_GOP_KIND_E4M3, GLN_LAYOUT_NT, 32, s_small32, 256, 192},
        /* HYBRID (E5M2 gradient) wgrad into bf16: TE's default format for current / delayed scaling */
        {GLN_GOP_KIND_HYBRID, GLN_LAYOUT_NT, 4, s_aligned, 64, 48}, {GLN_GOP_KIND_HYBRID, GLN_LAYOUT_NT, 4, s_part, 128, 96},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int alt = 1; alt <= (cases[i].layout == GLN_LAYOUT_NT ? 1 : 2); alt++)
            for (int v = 0; v < (cases[i].layout == GLN_LAYOUT_TN ? 8 : 4); v++) {
                gcase_t c = {cases[i].kind, cases[i].layout, cases[i].num, cases[i].splits, cases[i].kin,
                             cases[i].kout, v & 1, (v >> 1) & 1, 1, (v >> 2) & 1, 0, alt};
                run_case(&rng, &c);
            }
}

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
static void fp8_random_fill(gln_rng_t *rng, gln_gop_operand_t *o, int num, const int64_t *splits) {
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
        gln_gop_grouped_transpose(g_cu, o, num, splits);
        return;
    }
    gln_gop_host_transpose(o);
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
    gln_gop_scales_new(g_cu, &rng, E, sh[0], &sd[0]); /* powers of two: exact in any order of the alpha product */
    gln_gop_scales_new(g_cu, &rng, E, sh[1], &sd[1]);
    for (int hybrid = 0; hybrid < 2; hybrid++) {
        const gln_dtype_t gt = hybrid ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
        gln_gop_operand_t x = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_FP8_E4M3, rows, kin, 0, 0);
        gln_gop_operand_t dy = gln_gop_operand_new(g_cu, &rng, gt, rows, kout, 0, 0);
        gln_gop_operand_t w[E];
        gln_tensor_t wv[E];
        fp8_random_fill(&rng, &x, E, splits);
        fp8_random_fill(&rng, &dy, E, splits);
        for (int i = 0; i < E; i++) {
            w[i] = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_FP8_E4M3, kout, kin, 0, 0);
            fp8_random_fill(&rng, &w[i], 0, NULL);
            wv[i] = gln_gop_view_with_col(&w[i], 1, NULL, (const float *)sd[0].d + i);
        }
        gln_grouped_tensor_t gx = {E, dsplits.d, 1, gln_gop_view_with_col(&x, 1, NULL, sd[1].d)};
        gln_grouped_tensor_t gdy = {E, dsplits.d, 1, gln_gop_view_with_col(&dy, 1, NULL, sd[1].d)};
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
        gln_gop_operand_free(g_cu, &x), gln_gop_operand_free(g_cu, &dy);
        for (int i = 0; i < E; i++) gln_gop_operand_free(g_cu, &w[i]);
    }
    gln_twin_free(g_cu, &sd[0]), gln_twin_free(g_cu, &sd[1]), gln_twin_free(g_cu, &dsplits);
}
#endif

static const gln_test_case_t k_cases[] = {
    GLN_CASE(test_matrix),
    GLN_CASE(test_fallbacks),
    GLN_CASE(test_out_dtypes),
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
