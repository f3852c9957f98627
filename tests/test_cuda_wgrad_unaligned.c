/* The per-tensor FP8 wgrad with row counts as a router gives them (not multiples of 16), on the
 * tensor cores: dW_i = alpha_i · dy_iᵀ · x_i from the members' transposed copies, whose K stride
 * (rows_i bytes) TMA cannot read in place, so the CUDA backend pads those experts' copies with
 * zeros to a multiple of 16 (cuda_wgrad_pad.cu) and runs one CUTLASS launch for every expert.
 *
 * Two properties, for E4M3 × E4M3 into FP32 main_grad (overwrite and accumulate) and E5M2 ×
 * E4M3 (HYBRID) into bf16, every tile regime, and for FP8 block scaling (1×128 scales along the
 * tokens, CUTLASS's block-scaled wgrad), host and device splits:
 *   1. Small-integer data, power-of-two decode scales: every sum is exact, so the result equals
 *      the CPU backend's bit for bit (device twins: NaN-poisoned outputs, guard bytes); per-tensor
 *      FP8 only (block scaling scales its blocks up to the FP8 range, past what the tensor cores'
 *      FP8 accumulator sums exactly).
 *   2. Full-range random FP8 codes (block: random bf16 quantized with FP32 scales) and arbitrary
 *      FP32 scales: the result equals, bit for bit,
 *      the same GEMM on the "aligned twin" — each member's rows padded by the test itself with
 *      zero rows to a multiple of 16, so no expert needs the padding path.  Zero padding past
 *      the last K element changes no FP32 sum and no K tile, so the kernel must give the same bytes.
 * Each call must be taken by the CUTLASS dispatch (the internal entry point reports it).
 * Splits: 1, 5, 17, 129, 1000 rows with empty experts; one expert holding every row; 32 random
 * counts in [0, 300].
 *
 * Skips (exit 77) without a CUDA device or without the CUTLASS kernels. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"
#include "numerics/numerics.h"

#if defined(GLN_TEST_HAVE_CUDA) && defined(GLN_TEST_HAVE_CUTLASS)
/* The CUTLASS dispatch (internal, cuda_grouped_gemm.c): did a kernel take the call? */
gln_status_t gln_cuda_grouped_gemm_cutlass(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled);

static gln_context_t *g_cu, *g_cpu;

#define MAXE 32
#define KOUT 64 /* dW rows (dy's columns) */
#define KIN 48  /* dW columns (x's columns) */

typedef struct wcase {
    const char *name;
    int num;
    const int64_t *splits;
    gln_dtype_t dy_dtype; /* E4M3, or E5M2 (HYBRID) */
    gln_dtype_t out;      /* FP32 (main_grad) or bf16 */
    int accumulate;
} wcase_t;

/* One operand side of a call: packed FP8 rows [rows, cols], its grouped transposed copy and the
 * per-member decode scales, as twins (host bytes for the CPU, device bytes for the GPU). */
typedef struct side {
    gln_twin_t data, col, scale;
} side_t;

static uint8_t random_code(gln_rng_t *rng, gln_dtype_t dt, int exact) {
    if (exact) {
        const float v = (float)gln_rng_int(rng, -4, 4);
        return dt == GLN_DTYPE_FP8_E4M3 ? gln_f32_to_e4m3_bits(v) : gln_f32_to_e5m2_bits(v);
    }
    for (;;) { /* any finite code */
        const uint8_t b = (uint8_t)gln_rng_int(rng, 0, 255);
        const float v = dt == GLN_DTYPE_FP8_E4M3 ? gln_e4m3_bits_to_f32(b) : gln_e5m2_bits_to_f32(b);
        if (isfinite(v)) return b;
    }
}

/* The grouped transposed copy of rows_of ([rows, cols], members packed by `splits`): member i's
 * rows as [cols, m_i] at element r0·cols, where r0 is its first row. */
static void grouped_transpose(const uint8_t *rows_of, int num, const int64_t *splits, int64_t cols, uint8_t *col) {
    int64_t r0 = 0;
    for (int i = 0; i < num; i++) {
        const int64_t m = splits[i];
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < cols; c++) col[(r0 * cols) + c * m + r] = rows_of[(r0 + r) * cols + c];
        r0 += m;
    }
}

static side_t side_new(const uint8_t *rows_of, int64_t rows, int64_t cols, int num, const int64_t *splits,
                       const float *scales) {
    side_t s;
    const size_t n = (size_t)rows * (size_t)cols;
    uint8_t *col = calloc(n + 1, 1);
    grouped_transpose(rows_of, num, splits, cols, col);
    s.data = gln_twin_input(g_cu, rows_of, n, 0);
    s.col = gln_twin_input(g_cu, col, n, 0);
    s.scale = gln_twin_input(g_cu, scales, (size_t)num * sizeof(float), 0);
    free(col);
    return s;
}

static void side_free(side_t *s) {
    gln_twin_free(g_cu, &s->data), gln_twin_free(g_cu, &s->col), gln_twin_free(g_cu, &s->scale);
}

static gln_tensor_t side_view(const side_t *s, gln_dtype_t dt, int64_t rows, int64_t cols, int dev) {
    gln_tensor_t t = gln_tensor_make(dt, rows, cols, dev ? s->data.d : s->data.h);
    t.scaling = GLN_SCALING_TENSOR;
    t.col_data = dev ? s->col.d : s->col.h;
    t.scale_inv = t.col_scale_inv = dev ? s->scale.d : s->scale.h;
    return t;
}

/* The operands of one call: dy and x packed by `splits` (rows past their sum: zero). */
typedef struct call {
    int num;
    const int64_t *splits;
    int64_t rows;
    side_t dy, x;
    gln_twin_t dsplits;
} call_t;

static call_t call_new(const wcase_t *c, const int64_t *splits, const uint8_t *dy_rows, const uint8_t *x_rows,
                       int64_t rows, const float *dy_scales, const float *x_scales) {
    call_t k;
    k.num = c->num, k.splits = splits, k.rows = rows;
    k.dy = side_new(dy_rows, rows, KOUT, c->num, splits, dy_scales);
    k.x = side_new(x_rows, rows, KIN, c->num, splits, x_scales);
    k.dsplits = gln_twin_input(g_cu, splits, (size_t)c->num * sizeof(int64_t), 0);
    return k;
}

static void call_free(call_t *k) {
    side_free(&k->dy), side_free(&k->x), gln_twin_free(g_cu, &k->dsplits);
}

/* Run the wgrad of `k` into outs (dev: the device copies, through the CUTLASS dispatch, which
 * must take it; else the host copies on the CPU backend). */
static void call_run(const wcase_t *c, const call_t *k, gln_twin_t *outs, int dev, int dev_splits,
                     const char *what) {
    const int64_t *sp = dev && dev_splits ? (const int64_t *)k->dsplits.d : k->splits;
    gln_grouped_tensor_t gdy = {c->num, sp, dev && dev_splits, side_view(&k->dy, c->dy_dtype, k->rows, KOUT, dev)};
    gln_grouped_tensor_t gx = {c->num, sp, dev && dev_splits, side_view(&k->x, GLN_DTYPE_FP8_E4M3, k->rows, KIN, dev)};
    gln_tensor_t d[MAXE];
    for (int i = 0; i < c->num; i++) d[i] = gln_tensor_make(c->out, KOUT, KIN, dev ? outs[i].d : outs[i].h);
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = GLN_LAYOUT_NT, a.a_grouped = &gx, a.b = &gdy, a.d_list = d, a.accumulate = c->accumulate;
    if (!dev) {
        CHECK_OK(gln_grouped_gemm(g_cpu, &a));
        return;
    }
    int handled = 0;
    CHECK_OK(gln_cuda_grouped_gemm_cutlass(g_cu, &a, &handled));
    CHECK_MSG(handled == 1, "%s: the CUTLASS dispatch did not take the wgrad", what);
}

/* Output twins: old values (small integers) when accumulating, else NaN poison on both sides. */
static void outs_new(gln_rng_t *rng, const wcase_t *c, gln_twin_t *outs) {
    const size_t n = (size_t)KOUT * KIN, es = gln_dtype_size(c->out);
    void *h = malloc(n * es);
    for (size_t e = 0; e < n; e++) gln_store(h, c->out, e, c->accumulate ? (float)gln_rng_int(rng, -8, 8) : NAN);
    for (int i = 0; i < c->num; i++) outs[i] = gln_twin_input(g_cu, h, n * es, 0);
    free(h);
}

static void outs_free(const wcase_t *c, gln_twin_t *outs) {
    for (int i = 0; i < c->num; i++) gln_twin_free(g_cu, &outs[i]);
}

/* The device bytes of a's outputs equal b's. */
static void outs_same(const wcase_t *c, gln_twin_t *a, gln_twin_t *b, const char *what) {
    const size_t bytes = (size_t)KOUT * KIN * gln_dtype_size(c->out);
    void *ha = malloc(bytes), *hb = malloc(bytes);
    for (int i = 0; i < c->num; i++) {
        CHECK_OK(gln_memcpy(g_cu, ha, a[i].d, bytes, GLN_COPY_BACKEND_TO_HOST));
        CHECK_OK(gln_memcpy(g_cu, hb, b[i].d, bytes, GLN_COPY_BACKEND_TO_HOST));
        char w[400];
        snprintf(w, sizeof w, "%s: expert %d (%lld rows) against its aligned twin", what, i, (long long)c->splits[i]);
        gln_check_bitwise(w, ha, hb, bytes);
    }
    free(ha), free(hb);
}

/* The device bytes of outs equal their host copies (the CPU backend's result), guard included. */
static void outs_match_cpu(const wcase_t *c, gln_twin_t *outs, const char *what) {
    const size_t es = gln_dtype_size(c->out), bytes = (size_t)KOUT * KIN * es;
    void *h = malloc(bytes);
    for (int i = 0; i < c->num; i++) {
        if (es != 2) { /* the twin's own check (4-byte elements, guard) */
            gln_twin_check(g_cu, &outs[i], es, what, "dW", NULL, NULL);
            continue;
        }
        CHECK_OK(gln_memcpy(g_cu, h, outs[i].d, bytes, GLN_COPY_BACKEND_TO_HOST));
        char w[400];
        snprintf(w, sizeof w, "%s: expert %d (bf16) against the CPU", what, i);
        gln_check_bitwise(w, h, outs[i].h, bytes);
    }
    free(h);
}

static int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }

/* One case, data kind and splits placement, in the tile regime of the environment. */
static void run_one(gln_rng_t *rng, const wcase_t *c, int exact, int dev_splits, const char *tiles) {
    char what[300];
    snprintf(what, sizeof what, "%s, %s data, %s splits, %s tiles", c->name, exact ? "exact" : "random",
             dev_splits ? "device" : "host", tiles ? tiles : "default");
    int64_t total = 0, padded_total = 0, psplits[MAXE];
    for (int i = 0; i < c->num; i++) total += c->splits[i], psplits[i] = round16(c->splits[i]), padded_total += psplits[i];
    const int64_t rows = total + 3, prows = padded_total + 3; /* packed rows past the members: 0 */
    uint8_t *dy = calloc((size_t)(rows * KOUT), 1), *x = calloc((size_t)(rows * KIN), 1);
    uint8_t *pdy = calloc((size_t)(prows * KOUT), 1), *px = calloc((size_t)(prows * KIN), 1);
    for (int64_t e = 0; e < total * KOUT; e++) dy[e] = random_code(rng, c->dy_dtype, exact);
    for (int64_t e = 0; e < total * KIN; e++) x[e] = random_code(rng, GLN_DTYPE_FP8_E4M3, exact);
    /* the aligned twin: member i's rows, then zero rows up to psplits[i] */
    for (int i = 0, r = 0, p = 0; i < c->num; r += (int)c->splits[i], p += (int)psplits[i], i++) {
        memcpy(pdy + (int64_t)p * KOUT, dy + (int64_t)r * KOUT, (size_t)(c->splits[i] * KOUT));
        memcpy(px + (int64_t)p * KIN, x + (int64_t)r * KIN, (size_t)(c->splits[i] * KIN));
    }
    float sdy[MAXE], sx[MAXE];
    for (int i = 0; i < c->num; i++) {
        sdy[i] = exact ? ldexpf(1.0f, (int)gln_rng_int(rng, -3, 3)) : (float)gln_rng_uniform(rng, 0.01, 3.0);
        sx[i] = exact ? ldexpf(1.0f, (int)gln_rng_int(rng, -3, 3)) : (float)gln_rng_uniform(rng, 0.01, 3.0);
    }
    call_t k = call_new(c, c->splits, dy, x, rows, sdy, sx);
    call_t kp = call_new(c, psplits, pdy, px, prows, sdy, sx);
    gln_twin_t outs[MAXE], pouts[MAXE];
    gln_rng_t r2 = *rng; /* the same old values for both */
    outs_new(rng, c, outs);
    outs_new(&r2, c, pouts);
    call_run(c, &k, outs, 1, dev_splits, what);
    call_run(c, &kp, pouts, 1, dev_splits, what);
    outs_same(c, outs, pouts, what);
    if (exact) { /* exact sums: the CPU backend's bytes */
        call_run(c, &k, outs, 0, 0, what);
        outs_match_cpu(c, outs, what);
    }
    outs_free(c, outs), outs_free(c, pouts);
    call_free(&k), call_free(&kp);
    free(dy), free(x), free(pdy), free(px);
}

/* ---- FP8 block scaling (1×128 along the tokens): the same padding, the scales left in place --- */

/* A grouped BLOCK_1D E4M3 tensor of bf16 `values` ([rows, cols], members by `splits`), quantized on
 * the CPU (both copies), as device twins. */
typedef struct bside {
    gln_twin_t t[4]; /* data, col_data, scale_inv, col_scale_inv */
    gln_tensor_t h, d;
} bside_t;

static bside_t bside_new(const void *values, int num, const int64_t *splits, int64_t rows, int64_t cols, int pow2) {
    bside_t b;
    int64_t ro[MAXE + 1], co[MAXE + 1];
    CHECK_OK(gln_grouped_scale_offsets(GLN_SCALING_BLOCK_1D, num, splits, cols, ro, co));
    const size_t n = (size_t)rows * (size_t)cols, bytes[4] = {n, n, (size_t)ro[num] * 4, (size_t)co[num] * 4};
    for (int k = 0; k < 4; k++) b.t[k] = gln_twin_new(g_cu, bytes[k] + 4, 0, 0);
    b.h = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols, b.t[0].h);
    b.h.scaling = GLN_SCALING_BLOCK_1D;
    b.h.col_data = b.t[1].h, b.h.scale_inv = b.t[2].h, b.h.col_scale_inv = b.t[3].h;
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = GLN_SCALING_BLOCK_1D, cfg.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    cfg.rowwise = cfg.columnwise = 1, cfg.power_2_scale = pow2;
    const gln_grouped_tensor_t in = {num, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, (void *)values)};
    gln_grouped_tensor_t out = {num, splits, 0, b.h};
    CHECK_OK(gln_grouped_quantize(g_cpu, &cfg, &in, &out));
    for (int k = 0; k < 4; k++) gln_twin_set(g_cu, &b.t[k], b.t[k].h);
    b.d = b.h;
    b.d.data = b.t[0].d, b.d.col_data = b.t[1].d, b.d.scale_inv = b.t[2].d, b.d.col_scale_inv = b.t[3].d;
    return b;
}

static void bside_free(bside_t *b) {
    for (int k = 0; k < 4; k++) gln_twin_free(g_cu, &b->t[k]);
}

/* bf16 values [rows, cols]: members' rows random (small integers times powers of two when
 * exact), every other row 0; `prow` maps member rows to their rows in the padded twin. */
static void block_values(gln_rng_t *rng, int num, const int64_t *splits, const int64_t *psplits, int64_t cols,
                         int exact, uint16_t *v, uint16_t *pv) {
    for (int i = 0, r = 0, p = 0; i < num; r += (int)splits[i], p += (int)psplits[i], i++)
        for (int64_t rr = 0; rr < splits[i]; rr++)
            for (int64_t c = 0; c < cols; c++) {
                const float x = exact ? ldexpf((float)gln_rng_int(rng, -4, 4), (int)gln_rng_int(rng, -2, 2))
                                      : (float)gln_rng_normal(rng);
                const uint16_t b = gln_f32_to_bf16_bits(x);
                v[(r + rr) * cols + c] = b, pv[(p + rr) * cols + c] = b;
            }
}

static void run_block(gln_rng_t *rng, int num, const int64_t *splits, int exact, int dev_splits, const char *name) {
    char what[300];
    snprintf(what, sizeof what, "FP8 block wgrad, %s, %s data, %s splits", name, exact ? "exact" : "random",
             dev_splits ? "device" : "host");
    const wcase_t c = {name, num, splits, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP32, 0};
    int64_t total = 0, ptotal = 0, psplits[MAXE];
    for (int i = 0; i < num; i++) total += splits[i], psplits[i] = round16(splits[i]), ptotal += psplits[i];
    const int64_t rows = total + 3, prows = ptotal + 3;
    uint16_t *vdy = calloc((size_t)(rows * KOUT), 2), *vx = calloc((size_t)(rows * KIN), 2);
    uint16_t *pdy = calloc((size_t)(prows * KOUT), 2), *px = calloc((size_t)(prows * KIN), 2);
    block_values(rng, num, splits, psplits, KOUT, exact, vdy, pdy);
    block_values(rng, num, splits, psplits, KIN, exact, vx, px);
    /* power-of-two scales keep the exact data exact; FP32 scales on the random data */
    bside_t dy = bside_new(vdy, num, splits, rows, KOUT, exact), x = bside_new(vx, num, splits, rows, KIN, exact);
    bside_t dyp = bside_new(pdy, num, psplits, prows, KOUT, exact), xp = bside_new(px, num, psplits, prows, KIN, exact);
    gln_twin_t sp = gln_twin_input(g_cu, splits, (size_t)num * sizeof(int64_t), 0);
    gln_twin_t spp = gln_twin_input(g_cu, psplits, (size_t)num * sizeof(int64_t), 0);
    gln_twin_t outs[MAXE], pouts[MAXE];
    gln_rng_t r2 = *rng;
    outs_new(rng, &c, outs);
    outs_new(&r2, &c, pouts);
    for (int pass = 0; pass < 2; pass++) { /* the unaligned call, then its aligned twin */
        const bside_t *a = pass ? &dyp : &dy, *b = pass ? &xp : &x;
        const int64_t *hs = pass ? psplits : splits;
        const int64_t *ds = dev_splits ? (const int64_t *)(pass ? spp.d : sp.d) : hs;
        gln_grouped_tensor_t gdy = {num, ds, dev_splits, a->d}, gx = {num, ds, dev_splits, b->d};
        gln_tensor_t d[MAXE];
        for (int i = 0; i < num; i++) d[i] = gln_tensor_make(GLN_DTYPE_FP32, KOUT, KIN, (pass ? pouts : outs)[i].d);
        gln_grouped_gemm_args_t args = GLN_GROUPED_GEMM_ARGS_INIT;
        args.layout = GLN_LAYOUT_NT, args.a_grouped = &gx, args.b = &gdy, args.d_list = d;
        int handled = 0;
        CHECK_OK(gln_cuda_grouped_gemm_cutlass(g_cu, &args, &handled));
        CHECK_MSG(handled == 1, "%s: the CUTLASS dispatch did not take the wgrad", what);
    }
    /* No bitwise CPU comparison here: the block quantizer scales every block up to the FP8 range,
     * so a 128-token block's partial sums exceed what the tensor cores' FP8 accumulator holds
     * exactly (about 14 bits between promotions); test_cuda_grouped_blockwise compares these
     * experts with the CPU within that tolerance. */
    outs_same(&c, outs, pouts, what);
    outs_free(&c, outs), outs_free(&c, pouts);
    gln_twin_free(g_cu, &sp), gln_twin_free(g_cu, &spp);
    bside_free(&dy), bside_free(&x), bside_free(&dyp), bside_free(&xp);
    free(vdy), free(vx), free(pdy), free(px);
}

static const int64_t s_awkward[] = {1, 5, 0, 17, 129, 1000, 0, 3};
static const int64_t s_one[] = {0, 1155, 0};

static void run_cases(const int64_t *splits32) {
    const wcase_t cases[] = {
        {"E4M3 -> fp32 main_grad, awkward", 8, s_awkward, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP32, 0},
        {"E4M3 -> fp32 main_grad accumulating, awkward", 8, s_awkward, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP32, 1},
        {"HYBRID -> bf16, awkward", 8, s_awkward, GLN_DTYPE_FP8_E5M2, GLN_DTYPE_BF16, 0},
        {"E4M3 -> fp32, one expert with every row", 3, s_one, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP32, 0},
        {"E4M3 -> fp32, 32 random counts", 32, splits32, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP32, 1},
        {"E4M3 -> bf16, 32 random counts", 32, splits32, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_BF16, 0},
    };
    static const char *regimes[] = {NULL, "small", "medium", "large"};
    gln_rng_t rng = gln_rng_seed(0x3A11);
    for (size_t r = 0; r < sizeof regimes / sizeof regimes[0]; r++) {
        if (regimes[r]) setenv("GLN_CUTLASS_TILES", regimes[r], 1);
        else unsetenv("GLN_CUTLASS_TILES");
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int exact = 0; exact < 2; exact++)
                for (int dev_splits = 0; dev_splits < 2; dev_splits++)
                    run_one(&rng, &cases[i], exact, dev_splits, regimes[r]);
    }
    unsetenv("GLN_CUTLASS_TILES");
}

static void test_unaligned_wgrad(void) {
    int64_t s32[MAXE];
    gln_rng_t rng = gln_rng_seed(77);
    for (int i = 0; i < MAXE; i++) s32[i] = gln_rng_int(&rng, 0, 300);
    s32[3] = 0, s32[4] = 16; /* an empty expert and an aligned one among them */
    run_cases(s32);
    gln_rng_t rng2 = gln_rng_seed(0xB10C);
    for (int exact = 0; exact < 2; exact++)
        for (int dev_splits = 0; dev_splits < 2; dev_splits++) {
            run_block(&rng2, 8, s_awkward, exact, dev_splits, "awkward");
            run_block(&rng2, 3, s_one, exact, dev_splits, "one expert with every row");
            run_block(&rng2, 32, s32, exact, dev_splits, "32 random counts");
        }
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cu, GLN_CASE(test_unaligned_wgrad))
#else /* the padding exists for the CUTLASS kernels only */
int main(void) { return gln_test_skip_no_cuda(); }
#endif
