/* gln_activation_forward_quantize on the CUDA backend: the fused activation-on-load quantizers
 * (cuda_act.cuh, run by the general kernels of cuda_quant_tensor.cu, cuda_quant_mxfp8.cu and
 * cuda_block_act.cu) against the unfused composition on the same device, BIT FOR BIT, and against
 * the CPU within the activation's tolerance.
 *
 *   - SwiGLU and GELU; per-tensor current scaling (rowwise + columnwise), per-tensor delayed
 *     scaling (given scales, amax accumulated onto a prior value), MXFP8 (both copies), block 1D,
 *     block 2D (both copies); E4M3 and E5M2; host and device splits; members of 0 / 1 / 5 / 17 /
 *     129 / 300 rows and trailing packed rows; H = 8 (8-element chunks), 64, 1024 (fused) and 33
 *     (the composition fallback), plus fallbacks for an fp32 input, an fp16 hp_dtype and
 *     per-tensor amax_nan_propagate, and inputs holding NaN / Inf:
 *       fused == gln_activation_forward (bf16, CUDA) + gln_grouped_quantize (CUDA), every byte of
 *       data, col_data, scale_inv, col_scale_inv, amax and scale, over the whole (poisoned)
 *       allocations, and the guard bytes after each allocation untouched;
 *   - the fused output dequantized (per member, both copies) against the CPU's
 *     gln_activation_forward_quantize dequantized: the device expf / tanhf differ from the host's
 *     by a few ulp, which can move a bf16 activation by one ulp and so an FP8 code by one step
 *     (and a block's scale with its amax): within TOL_STEPS FP8 steps of the value, plus an
 *     absolute term for codes near zero.
 *   - which kernel quantized (block modes, gln_cuda_block_quant_last_kernel): the fused
 *     gln_block_quant_act_kernel exactly where the fused path applies, another block kernel (the
 *     composition's quantize) for the fallbacks.
 * Outputs are poisoned (0xA5 data, 0xFF scales: NaN floats) before every run.
 *
 * Skips (exit 77) without a CUDA device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include "backend/cuda/cuda_block.h"
#endif

static gln_context_t *g_cu, *g_cpu;

#define NM 6
static const int64_t SPL[NM] = {0, 1, 5, 17, 129, 300};
#define SUM 452
#define ROWS (SUM + 3) /* trailing packed rows: never read, never written */
#define GUARD 64
#define DATA_POISON 0xA5u
#define SCALE_POISON 0xFFu
/* CPU comparison: two FP8 steps of the value (one for the quantization's rounding of a value
 * that moved by one bf16 ulp, one for a scale that moved with its block's amax) ... */
#define TOL_STEPS 2.0
/* ... plus, for values near zero, this fraction of the member's largest |value| (E4M3 / E5M2
 * keep about 2^-9 / 2^-16 of a block's max as their smallest step; blocks smaller than the member
 * have finer steps) and GELU's FP32 cancellation of 1 + tanh(u) (0.5·|a| times a few ulp of 1). */
#define TOL_ZERO 0x1p-8

/* ---- quantized grouped outputs on one context ---------------------------------------------- */

enum { B_DATA, B_COL, B_S, B_CS, B_AMAX, B_SCALE, NBUF };
static const char *BUF_NAME[NBUF] = {"data", "col_data", "scale_inv", "col_scale_inv", "amax", "scale"};

typedef struct qout {
    gln_context_t *ctx;
    gln_grouped_tensor_t g;
    void *b[NBUF];
    size_t bytes[NBUF]; /* payload; GUARD poisoned bytes follow each */
} qout_t;

static size_t scale_es(gln_scaling_mode_t m) { return m == GLN_SCALING_MXFP8_1D ? 1 : sizeof(float); }

static void qout_make(gln_context_t *ctx, const gln_quant_config_t *c, int64_t h, const int64_t *splits,
                      int on_backend, qout_t *q) {
    memset(q, 0, sizeof *q);
    q->ctx = ctx;
    int64_t re = NM, ce = NM;
    if (c->mode != GLN_SCALING_TENSOR) CHECK_OK(gln_grouped_scale_bound(c->mode, NM, ROWS, h, &re, &ce));
    const size_t n = (size_t)(ROWS * h), es = scale_es(c->mode);
    q->bytes[B_DATA] = c->rowwise ? n : 0;
    q->bytes[B_COL] = c->columnwise ? n : 0;
    q->bytes[B_S] = c->rowwise ? (size_t)re * es : 0;
    q->bytes[B_CS] = c->columnwise ? (size_t)ce * es : 0;
    q->bytes[B_AMAX] = q->bytes[B_SCALE] = c->mode == GLN_SCALING_TENSOR ? NM * sizeof(float) : 0;
    for (int k = 0; k < NBUF; k++) {
        if (!q->bytes[k]) continue;
        const size_t all = q->bytes[k] + GUARD;
        uint8_t *h8 = malloc(all);
        memset(h8, k <= B_COL ? DATA_POISON : SCALE_POISON, all);
        if (c->delayed && (k == B_AMAX || k == B_SCALE)) /* the given scales; a prior amax */
            for (int i = 0; i < NM; i++) ((float *)h8)[i] = k == B_SCALE ? 0.5f * (float)(i + 1) : 0.25f;
        CHECK_OK(gln_malloc(ctx, all, &q->b[k]));
        if (q->b[k]) CHECK_OK(gln_memcpy(ctx, q->b[k], h8, all, GLN_COPY_HOST_TO_BACKEND));
        free(h8);
    }
    q->g.num = NM;
    q->g.splits = splits;
    q->g.splits_on_backend = on_backend;
    gln_tensor_t *p = &q->g.packed;
    *p = gln_tensor_make(c->fp8_dtype, ROWS, h, q->b[B_DATA]);
    p->scaling = c->mode;
    p->col_data = q->b[B_COL], p->scale_inv = q->b[B_S], p->col_scale_inv = q->b[B_CS];
    p->amax = q->b[B_AMAX], p->scale = q->b[B_SCALE];
}

/* Host copies of every allocation, guards included (NULL where absent). */
static void qout_fetch(const qout_t *q, uint8_t *host[NBUF]) {
    for (int k = 0; k < NBUF; k++) {
        host[k] = NULL;
        if (!q->bytes[k] || !q->b[k]) continue;
        host[k] = malloc(q->bytes[k] + GUARD);
        CHECK_OK(gln_memcpy(q->ctx, host[k], q->b[k], q->bytes[k] + GUARD, GLN_COPY_BACKEND_TO_HOST));
    }
}

static void qout_free(qout_t *q) {
    for (int k = 0; k < NBUF; k++)
        if (q->b[k]) CHECK_OK(gln_free(q->ctx, q->b[k]));
    memset(q, 0, sizeof *q);
}

static void host_free(uint8_t *host[NBUF]) {
    for (int k = 0; k < NBUF; k++) free(host[k]);
}

/* ---- the input ------------------------------------------------------------------------------ */

/* [ROWS, w] of dtype dt: N(0, 1) times a per-row power of two (different scales per member and
 * block), some rows zero; with specials, scattered NaN and ±Inf. */
static void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t w, int specials) {
    const size_t n = (size_t)(ROWS * w);
    void *h = calloc(n, gln_dtype_size(dt));
    for (int64_t r = 0; r < ROWS; r++) {
        const int kind = (int)gln_rng_int(rng, 0, 11);
        const double mag = kind == 0 ? 0.0 : ldexp(1.0, (int)gln_rng_int(rng, -6, 4));
        for (int64_t c = 0; c < w; c++) gln_store(h, dt, (size_t)(r * w + c), mag * gln_rng_normal(rng));
    }
    if (specials)
        for (size_t k = 0; k < n / 97 + 3; k++) {
            const size_t i = (size_t)gln_rng_int(rng, 0, (int64_t)n - 1);
            const int s = (int)gln_rng_int(rng, 0, 2);
            gln_store(h, dt, i, s == 0 ? NAN : s == 1 ? INFINITY : -INFINITY);
        }
    return h;
}

/* ---- one case -------------------------------------------------------------------------------- */

typedef struct act_case {
    gln_activation_t act;
    int64_t h;
    gln_scaling_mode_t mode;
    int delayed, nanp;
    gln_dtype_t fp8, idt, hp;
    int on_backend, specials;
} act_case_t;

static void describe(const act_case_t *k, char *out, size_t n) {
    snprintf(out, n, "%s H %lld mode %d%s%s %s in %s hp %s %s splits%s", k->act == GLN_ACT_SWIGLU ? "swiglu" : "gelu",
             (long long)k->h, (int)k->mode, k->delayed ? " delayed" : "", k->nanp ? " nan-propagate" : "",
             gln_dtype_name(k->fp8), gln_dtype_name(k->idt), gln_dtype_name(k->hp), k->on_backend ? "device" : "host",
             k->specials ? " NaN/Inf" : "");
}

/* Every byte of the fused run equals the composition's (the guards too: both untouched). */
static void compare_bytes(const char *what, const qout_t *fused, uint8_t *const got[NBUF], uint8_t *const want[NBUF]) {
    for (int k = 0; k < NBUF; k++) {
        if (!got[k] || !want[k]) continue;
        const size_t all = fused->bytes[k] + GUARD;
        size_t first = all, count = 0;
        for (size_t i = 0; i < all; i++)
            if (got[k][i] != want[k][i]) {
                if (first == all) first = i;
                count++;
            }
        CHECK_MSG(count == 0, "%s: %s: %zu of %zu bytes differ from the composition; first at byte %zu: fused 0x%02x, "
                  "unfused 0x%02x", what, BUF_NAME[k], count, all, first, first < all ? got[k][first] : 0,
                  first < all ? want[k][first] : 0);
        const uint8_t poison = k <= B_COL ? DATA_POISON : SCALE_POISON;
        size_t hit = 0;
        for (size_t i = fused->bytes[k]; i < all; i++) hit += got[k][i] != poison;
        CHECK_MSG(hit == 0, "%s: %s: %zu guard bytes after the buffer overwritten", what, BUF_NAME[k], hit);
    }
}

/* Member i of a quantized grouped output held in host memory (scales at the host offsets). */
static gln_tensor_t member(const gln_quant_config_t *c, int64_t h, uint8_t *const hb[NBUF], int i, int64_t row0,
                           const int64_t *ro, const int64_t *co) {
    const size_t es = scale_es(c->mode);
    const int64_t so = c->mode == GLN_SCALING_TENSOR ? i : ro[i], sc = c->mode == GLN_SCALING_TENSOR ? i : co[i];
    gln_tensor_t t = gln_tensor_make(c->fp8_dtype, SPL[i], h, hb[B_DATA] ? hb[B_DATA] + row0 * h : NULL);
    t.scaling = c->mode;
    t.col_data = hb[B_COL] ? hb[B_COL] + row0 * h : NULL;
    t.scale_inv = hb[B_S] ? hb[B_S] + (size_t)so * es : NULL;
    t.col_scale_inv = hb[B_CS] ? hb[B_CS] + (size_t)sc * es : NULL;
    return t;
}

/* Dequantized fused (device) output against the CPU's, both copies of every member. */
static void compare_cpu(const char *what, const act_case_t *k, const gln_quant_config_t *c, const void *hin,
                        uint8_t *const got[NBUF]) {
    const int64_t h = k->h, w = k->act == GLN_ACT_SWIGLU ? 2 * h : h;
    qout_t cq;
    qout_make(g_cpu, c, h, SPL, 0, &cq);
    gln_grouped_tensor_t gin = {NM, SPL, 0, gln_tensor_make(k->idt, ROWS, w, (void *)hin)};
    CHECK_OK(gln_activation_forward_quantize(g_cpu, k->act, k->hp, c, &gin, &cq.g));
    uint8_t *want[NBUF];
    qout_fetch(&cq, want);
    int64_t ro[NM + 1], co[NM + 1];
    CHECK_OK(gln_grouped_scale_offsets(c->mode, NM, SPL, h, ro, co));
    const double step = k->fp8 == GLN_DTYPE_FP8_E5M2 ? 0.25 : 0.125; /* relative FP8 step */
    float *dg = malloc((size_t)(SPL[NM - 1] * h) * sizeof(float) + 4);
    float *dw = malloc((size_t)(SPL[NM - 1] * h) * sizeof(float) + 4);
    int64_t row0 = 0;
    for (int i = 0; i < NM; i++) {
        for (int col = 0; col < 2; col++) {
            if (!(col ? c->columnwise : c->rowwise) || SPL[i] == 0) continue;
            gln_tensor_t tg = member(c, h, got, i, row0, ro, co), tw = member(c, h, want, i, row0, ro, co);
            gln_tensor_t og = gln_tensor_make(GLN_DTYPE_FP32, SPL[i], h, dg), ow = gln_tensor_make(GLN_DTYPE_FP32, SPL[i], h, dw);
            CHECK_OK(gln_dequantize(g_cpu, &tg, col, &og));
            CHECK_OK(gln_dequantize(g_cpu, &tw, col, &ow));
            double big = 0.0;
            for (int64_t e = 0; e < SPL[i] * h; e++)
                if (isfinite(dw[e]) && fabs(dw[e]) > big) big = fabs(dw[e]);
            size_t bad = 0, first = 0;
            for (int64_t e = 0; e < SPL[i] * h; e++) {
                const int64_t r = row0 + e / h;
                const double a = gln_load(hin, k->idt, (size_t)(r * w + e % h));
                const double math = k->act == GLN_ACT_GELU && isfinite(a) ? 0.5 * fabs(a) * 0x1p-20 : 0.0;
                const double x = dg[e], y = dw[e];
                const int ok = (isnan(x) && isnan(y)) || (isinf(x) && x == y) ||
                               fabs(x - y) <= TOL_STEPS * step * fabs(y) + TOL_ZERO * big + 2.0 * math;
                if (!ok && bad++ == 0) first = (size_t)e;
            }
            CHECK_MSG(bad == 0, "%s: member %d %s copy: %zu of %lld dequantized values outside tolerance of the CPU; "
                      "first row %lld col %lld: cuda %.9g cpu %.9g", what, i, col ? "columnwise" : "rowwise", bad,
                      (long long)(SPL[i] * h), (long long)(first / (size_t)h), (long long)(first % (size_t)h),
                      (double)dg[first], (double)dw[first]);
        }
        row0 += SPL[i];
    }
    free(dg);
    free(dw);
    host_free(want);
    qout_free(&cq);
}

static void run_case(const act_case_t *k, uint64_t seed) {
    char what[256];
    describe(k, what, sizeof what);
    const int64_t h = k->h, w = k->act == GLN_ACT_SWIGLU ? 2 * h : h;
    gln_rng_t rng = gln_rng_seed(seed);
    void *hin = make_input(&rng, k->idt, w, k->specials);
    const size_t in_bytes = (size_t)(ROWS * w) * gln_dtype_size(k->idt);
    void *din = NULL, *da = NULL;
    int64_t *dspl = NULL;
    CHECK_OK(gln_malloc(g_cu, in_bytes, &din));
    CHECK_OK(gln_malloc(g_cu, (size_t)(ROWS * h) * gln_dtype_size(k->hp), &da));
    CHECK_OK(gln_malloc(g_cu, sizeof SPL, (void **)&dspl));
    if (!din || !da || !dspl) return;
    CHECK_OK(gln_memcpy(g_cu, din, hin, in_bytes, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_memcpy(g_cu, dspl, SPL, sizeof SPL, GLN_COPY_HOST_TO_BACKEND));
    const int64_t *splits = k->on_backend ? dspl : SPL;

    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.mode = k->mode, c.fp8_dtype = k->fp8, c.rowwise = 1, c.columnwise = 1, c.delayed = k->delayed;
    c.amax_nan_propagate = k->nanp;
    /* the fused call */
    qout_t fused, unfused;
    qout_make(g_cu, &c, h, splits, k->on_backend, &fused);
    gln_grouped_tensor_t gin = {NM, splits, k->on_backend, gln_tensor_make(k->idt, ROWS, w, din)};
#ifdef GLN_TEST_HAVE_CUDA
    (void)gln_cuda_block_quant_last_kernel();
#endif
    CHECK_OK(gln_activation_forward_quantize(g_cu, k->act, k->hp, &c, &gin, &fused.g));
#ifdef GLN_TEST_HAVE_CUDA
    if (k->mode == GLN_SCALING_BLOCK_1D || k->mode == GLN_SCALING_BLOCK_2D) {
        /* fused: bf16 input and hp_dtype, H % 8 == 0 (the device input is 256-byte aligned) */
        const int fused_path = k->idt == GLN_DTYPE_BF16 && k->hp == GLN_DTYPE_BF16 && h % 8 == 0;
        const char *got = gln_cuda_block_quant_last_kernel();
        const int is_act = got && strcmp(got, "gln_block_quant_act_kernel") == 0;
        CHECK_MSG(got && is_act == fused_path, "%s: ran %s, want %s", what, got ? got : "no block kernel",
                  fused_path ? "gln_block_quant_act_kernel" : "the composition's block kernel");
    }
#endif
    /* the composition: the activation written in hp, then the grouped quantize */
    qout_make(g_cu, &c, h, splits, k->on_backend, &unfused);
    gln_tensor_t tin = gln_tensor_make(k->idt, ROWS, w, din), ta = gln_tensor_make(k->hp, ROWS, h, da);
    CHECK_OK(gln_activation_forward(g_cu, k->act, &tin, &ta));
    gln_grouped_tensor_t ga = {NM, splits, k->on_backend, ta};
    CHECK_OK(gln_grouped_quantize(g_cu, &c, &ga, &unfused.g));
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_context_async_error(g_cu));

    uint8_t *got[NBUF], *want[NBUF];
    qout_fetch(&fused, got);
    qout_fetch(&unfused, want);
    compare_bytes(what, &fused, got, want);
    compare_cpu(what, k, &c, hin, got);
    host_free(got);
    host_free(want);
    qout_free(&fused);
    qout_free(&unfused);
    CHECK_OK(gln_free(g_cu, din));
    CHECK_OK(gln_free(g_cu, da));
    CHECK_OK(gln_free(g_cu, dspl));
    free(hin);
}

typedef struct mode_row {
    gln_scaling_mode_t mode;
    int delayed;
} mode_row_t;

static const mode_row_t MODES[] = {{GLN_SCALING_TENSOR, 0}, {GLN_SCALING_TENSOR, 1}, {GLN_SCALING_MXFP8_1D, 0},
                                   {GLN_SCALING_BLOCK_1D, 0}, {GLN_SCALING_BLOCK_2D, 0}};

/* Every mode x FP8 format x split residence, for each activation and H. */
static void sweep(gln_activation_t act, int64_t h, uint64_t seed) {
    for (size_t m = 0; m < sizeof MODES / sizeof MODES[0]; m++)
        for (int f = 0; f < 2; f++)
            for (int ob = 0; ob < 2; ob++) {
                const act_case_t k = {act, h, MODES[m].mode, MODES[m].delayed, 0,
                                      f ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3, GLN_DTYPE_BF16, GLN_DTYPE_BF16,
                                      ob, 0};
                run_case(&k, seed + (uint64_t)(m * 4 + (size_t)f * 2 + (size_t)ob));
            }
}

static void test_swiglu(void) {
    sweep(GLN_ACT_SWIGLU, 8, 100);
    sweep(GLN_ACT_SWIGLU, 64, 200);
    sweep(GLN_ACT_SWIGLU, 1024, 300);
    sweep(GLN_ACT_SWIGLU, 33, 400); /* H % 8 != 0: the composition */
}

static void test_gelu(void) {
    sweep(GLN_ACT_GELU, 8, 500);
    sweep(GLN_ACT_GELU, 64, 600);
    sweep(GLN_ACT_GELU, 1024, 700);
    sweep(GLN_ACT_GELU, 33, 800);
}

/* NaN / Inf inputs through every mode (the NaN codes and the amax rules), and the calls the
 * fused path leaves to the composition: an fp32 input, an fp16 hp_dtype, per-tensor NaN
 * propagation (fused for the other modes). */
static void test_specials_and_fallbacks(void) {
    uint64_t seed = 900;
    for (int act = 0; act < 2; act++)
        for (size_t m = 0; m < sizeof MODES / sizeof MODES[0]; m++) {
            act_case_t k = {(gln_activation_t)act, 64, MODES[m].mode, MODES[m].delayed, 0, GLN_DTYPE_FP8_E4M3,
                            GLN_DTYPE_BF16, GLN_DTYPE_BF16, 1, 1};
            run_case(&k, seed++);
            k.nanp = 1;
            run_case(&k, seed++);
            k.specials = 0, k.nanp = 0, k.idt = GLN_DTYPE_FP32;
            run_case(&k, seed++);
            k.idt = GLN_DTYPE_BF16, k.hp = GLN_DTYPE_FP16;
            run_case(&k, seed++);
        }
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cu,
    GLN_CASE(test_swiglu), GLN_CASE(test_gelu), GLN_CASE(test_specials_and_fallbacks))
