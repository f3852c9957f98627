/* Kernel lab, FP8 block scaling (`grouped_tiles --recipe block`): the block-scaled grouped GEMM's
 * candidates side by side on one shape — the library's kernels (its heuristic; cooperative 128×128
 * 1×1 and 2×1 forced through GLN_CUTLASS_BLOCKWISE=coop / cluster; the dequantize-to-bf16
 * emulation through GLN_CUDA_BLOCKWISE=0) and the lab-only instantiations of lab_blockwise_*.cu — each first
 * checked bit for bit against the CPU backend, then timed; a variant that fails its check is not
 * timed.
 *
 * The check (tests/test_cuda_grouped_blockwise.c's reference, made exact): bf16 operands of small
 * integers (|v| <= 2) times a power of two 2^f, f in -2..2, constant over each quantization block
 * that a GEMM's 128-wide K block reads (x / dy rowwise: per row and 128 columns; W: per 128×128
 * block; wgrad's columnwise operands: per column), quantized by the CPU backend with power-of-two
 * scales (every E4M3 value then exact), uploaded; the CPU backend's gln_grouped_gemm
 * (block_scales_pow2) is the reference.  Inside a K block every product is v·v'·2^c, so the
 * tensor cores' partial sums (<= 2^9 · 2^c) are exact whatever their accumulation width, and so
 * is the FP32 sum over blocks: the output must equal the CPU's bytes.  Checked on the shape when
 * 2·M·N·K <= 6e10 (Qwen3-like), else on a twin with tokens, K and N capped (256, 1024, 1024).
 * The timing: the full shape, device random bf16 quantized on the GPU (power-of-two scales),
 * device splits, median of `repeat` runs of `inner` calls; wgrad accumulates into FP32 main_grad.
 *
 * What CUTLASS 4.2's Hopper blockwise mainloop accepts (probed by instantiating the kernel types
 * with nvcc 13, sm_90a; sm90_mma_array_tma_gmma_ss_warpspecialized_fp8_blockwise_scaling.hpp):
 *   rejected  tile K 64: static_assert(TileK % ScaleGranularityK == 0) (line 132, 64 % 128);
 *             tile K 256: "ScalePromotionInterval must be greater than or equal to the number of
 *             stages of the MMA atom" (the partial sums are promoted every 128 / 32 = 4 MMAs of
 *             K 32, a 256-deep k-tile issues 8 before the consumer can promote);
 *             SfN = 128 with tile N 64: "FP8 scaling granularity must evenly divide tile shape
 *             along N" (so no 128×64 / 64×64 fprop tiles);
 *             SfN = 128 with tile N 256 (two weight scales per tile): the types pass, the kernel
 *             body does not — fp8_accumulation.hpp:120 "Accumulator and scaleB must have same
 *             shape" (the promotion multiplies by one B scale per tile along N);
 *   accepted  (types instantiated) SfN 128: cooperative 128×128 with clusters 2×1, 1×2, 2×2;
 *             cooperative 256×128; pingpong 64×128 1×2 and pingpong 128×128; SfN 1 (wgrad):
 *             cooperative 128×128 2×1 / 1×2 and 128×256 (whole kernel built: it spills).
 * Built here: the clusters 2×1 / 1×2 of both stages, pingpong 64×128 1×2, the wgrad's 128×256;
 * not built (compile time, and the register budget: each consumer thread holds the accumulator
 * and its per-block copy, 2 × 64 floats at 128×128 cooperative, 2 × 128 at 256×128 or pingpong
 * 128×128, where the wgrad's 128×256 already spills): 256×128, pingpong 128×128, 2×2 clusters.
 * The stage count stays the builder's (smem carveout; a 128×128×128 E4M3 stage is 32 KB of
 * operands plus its scales).
 *
 * The tile scheduler's raster order (GLN_CUTLASS_RASTER) is read once a process: sweep it by
 * running the lab once per value. */
#include "../bench_util.h"

#include <math.h>

#include "backend/cuda/cuda_grouped_blockwise.h"

#include "lab_block.h"

/* lab_blockwise_*.cu */
gln_status_t gln_cutlass_run_lab_bw_tn_c2x1(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_tn_c1x2(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_tn_pp1x2(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_tn_pp(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_wgrad_c2x1(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_wgrad_c1x2(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_wgrad_n256(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
/* lab_blockwise_overlap_*.cu */
gln_status_t gln_cutlass_run_lab_bw_tn_ov(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_tn_ov2x1(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);
gln_status_t gln_cutlass_run_lab_bw_wgrad_ov(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);

typedef gln_status_t (*bw_fn)(gln_context_t *, const gln_cutlass_blockwise_t *, const char *);

enum { FPROP, DGRAD, WGRAD };

/* A variant: library kernels under an environment, or a lab kernel for the TN or NT stages. */
typedef struct bvariant {
    const char *name;
    const char *blockwise, *schedule; /* GLN_CUDA_BLOCKWISE, GLN_CUTLASS_BLOCKWISE values or NULL */
    bw_fn fn;
    int wgrad; /* the lab kernel's stage: 0 TN (fprop, dgrad), 1 NT */
} bvariant_t;

static const bvariant_t bvariants[] = {
    {"emulated (dequant + bf16)", "0", NULL, NULL, 0},
    {"library (tile by shape)", NULL, NULL, NULL, 0},
    {"library coop 128x128", NULL, "coop", NULL, 0},
    {"library coop 128x128 2x1", NULL, "cluster", NULL, 0},
    {"lab pingpong 64x128", NULL, NULL, gln_cutlass_run_lab_bw_tn_pp, 0},
    {"lab coop 128x128 2x1", NULL, NULL, gln_cutlass_run_lab_bw_tn_c2x1, 0},
    {"lab coop 128x128 1x2", NULL, NULL, gln_cutlass_run_lab_bw_tn_c1x2, 0},
    {"lab pingpong 64x128 1x2", NULL, NULL, gln_cutlass_run_lab_bw_tn_pp1x2, 0},
    {"lab coop 128x128 2x1", NULL, NULL, gln_cutlass_run_lab_bw_wgrad_c2x1, 1},
    {"lab coop 128x128 1x2", NULL, NULL, gln_cutlass_run_lab_bw_wgrad_c1x2, 1},
    {"lab coop 128x256", NULL, NULL, gln_cutlass_run_lab_bw_wgrad_n256, 1},
    {"lab overlap 128x128", NULL, NULL, gln_cutlass_run_lab_bw_tn_ov, 0},
    {"lab overlap 128x128 2x1", NULL, NULL, gln_cutlass_run_lab_bw_tn_ov2x1, 0},
    {"lab overlap 128x128", NULL, NULL, gln_cutlass_run_lab_bw_wgrad_ov, 1},
};
#define NBVARIANTS (int)(sizeof bvariants / sizeof bvariants[0])

static const bvariant_t *g_bactive;
static int g_blab_ran;

static gln_status_t block_hook(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw, const char *call) {
    if (!g_bactive || !g_bactive->fn || g_bactive->wgrad != bw->g.split_is_k) return GLN_STATUS_NOT_SUPPORTED;
    g_blab_ran = 1;
    return g_bactive->fn(ctx, bw, call);
}

static void set_env(const char *name, const char *value) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

/* ---- block-scaled operands ----------------------------------------------------------------- */

/* One quantized operand: device view (and, for the check, its host twin). */
typedef struct bop {
    gln_tensor_t h, d;
    void *hb[4], *db[4]; /* data, col_data, scale_inv, col_scale_inv */
    size_t bytes[4];
} bop_t;

static void bop_alloc(gln_context_t *cu, bop_t *q, gln_scaling_mode_t mode, int64_t rows, int64_t cols, int host) {
    for (int k = 0; k < 4; k++) {
        TRY(gln_malloc(cu, q->bytes[k] ? q->bytes[k] : 16, &q->db[k]));
        q->hb[k] = host ? calloc(q->bytes[k] + 16, 1) : NULL;
    }
    q->d = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols, q->db[0]);
    q->d.scaling = mode;
    q->d.col_data = q->db[1], q->d.scale_inv = q->db[2], q->d.col_scale_inv = q->db[3];
    q->h = q->d;
    q->h.data = q->hb[0], q->h.col_data = q->hb[1], q->h.scale_inv = q->hb[2], q->h.col_scale_inv = q->hb[3];
}

static void bop_upload(gln_context_t *cu, bop_t *q) {
    for (int k = 0; k < 4; k++)
        if (q->bytes[k]) TRY(gln_memcpy(cu, q->db[k], q->hb[k], q->bytes[k], GLN_COPY_HOST_TO_BACKEND));
}

static void bop_free(gln_context_t *cu, bop_t *q) {
    for (int k = 0; k < 4; k++) {
        if (q->db[k]) TRY(gln_free(cu, q->db[k]));
        free(q->hb[k]);
    }
}

static int small_int(uint64_t seed, size_t i) {
    uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
    return (int)(xorshift(&s) % 5) - 2;
}

/* The power-of-two exponent (-2..2) of element (r, c): constant over the blocks the GEMM reads
 * together (see the top). pattern 0: x / dy rowwise; 1: wgrad's columnwise operands; 2: W of
 * expert e. */
static int exponent(int pattern, int64_t r, int64_t c, int32_t e) {
    if (pattern == 0) return (int)((r + 3 * (c / 128)) % 5) - 2;
    if (pattern == 1) return (int)((3 * c) % 5) - 2;
    return (int)((e + r / 128 + 2 * (c / 128)) % 5) - 2;
}

/* check: host bf16 values as above (else NULL: device random bf16 is quantized on the GPU). */
static void *check_values(int64_t rows, int64_t cols, int pattern, int32_t e, uint64_t seed) {
    uint16_t *h = malloc((size_t)(rows * cols) * 2 + 2);
    if (!h) exit(1);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const size_t i = (size_t)(r * cols + c);
            const float v = (float)small_int(seed, i) * ldexpf(1.0f, exponent(pattern, r, c, e));
            h[i] = gln_fp32_to_bf16(v);
        }
    return h;
}

static gln_quant_config_t qconfig(gln_scaling_mode_t mode) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = mode;
    cfg.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    cfg.rowwise = cfg.columnwise = 1;
    cfg.power_2_scale = 1;
    return cfg;
}

/* A grouped operand [rows, cols] of E members, 1×128 blocks rowwise and columnwise. */
static void make_grouped(gln_context_t *cu, gln_context_t *cpu, bop_t *q, int32_t E, const int64_t *splits,
                         int64_t rows, int64_t cols, int pattern, int check, uint64_t seed) {
    memset(q, 0, sizeof *q);
    int64_t *ro = malloc((size_t)(E + 1) * sizeof(int64_t)), *co = malloc((size_t)(E + 1) * sizeof(int64_t));
    TRY(gln_grouped_scale_offsets(GLN_SCALING_BLOCK_1D, E, splits, cols, ro, co));
    q->bytes[0] = q->bytes[1] = (size_t)(rows * cols);
    q->bytes[2] = (size_t)ro[E] * 4, q->bytes[3] = (size_t)co[E] * 4;
    free(ro), free(co);
    bop_alloc(cu, q, GLN_SCALING_BLOCK_1D, rows, cols, check);
    const gln_quant_config_t cfg = qconfig(GLN_SCALING_BLOCK_1D);
    if (check) {
        void *v = check_values(rows, cols, pattern, 0, seed);
        const gln_grouped_tensor_t in = {E, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v)};
        gln_grouped_tensor_t out = {E, splits, 0, q->h};
        TRY(gln_grouped_quantize(cpu, &cfg, &in, &out));
        free(v);
        bop_upload(cu, q);
    } else {
        void *v = device_random_fast(cu, GLN_DTYPE_BF16, (size_t)(rows * cols), seed);
        const gln_grouped_tensor_t in = {E, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v)};
        gln_grouped_tensor_t out = {E, splits, 0, q->d};
        TRY(gln_grouped_quantize(cu, &cfg, &in, &out));
        TRY(gln_synchronize(cu));
        TRY(gln_free(cu, v));
    }
}

/* Expert e's weight [rows, cols], 128×128 blocks, rowwise and the transposed copy. */
static void make_weight(gln_context_t *cu, gln_context_t *cpu, bop_t *q, int64_t rows, int64_t cols, int32_t e,
                        int check) {
    memset(q, 0, sizeof *q);
    gln_quant_layout_t lay;
    TRY(gln_quant_layout(GLN_SCALING_BLOCK_2D, GLN_DTYPE_FP8_E4M3, rows, cols, &lay));
    q->bytes[0] = lay.data_bytes, q->bytes[1] = lay.col_data_bytes;
    q->bytes[2] = lay.scale_bytes, q->bytes[3] = lay.col_scale_bytes;
    bop_alloc(cu, q, GLN_SCALING_BLOCK_2D, rows, cols, check);
    const gln_quant_config_t cfg = qconfig(GLN_SCALING_BLOCK_2D);
    if (check) {
        void *v = check_values(rows, cols, 2, e, 100 + (uint64_t)e);
        const gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v);
        TRY(gln_quantize(cpu, &cfg, &in, &q->h));
        free(v);
        bop_upload(cu, q);
    } else {
        void *v = device_random_fast(cu, GLN_DTYPE_BF16, (size_t)(rows * cols), 100 + (uint64_t)e);
        const gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v);
        TRY(gln_quantize(cu, &cfg, &in, &q->d));
        TRY(gln_synchronize(cu));
        TRY(gln_free(cu, v));
    }
}

/* One stage's problem on the device (and its host twin for the check). */
typedef struct bproblem {
    int32_t E;
    int64_t M, K, N;
    int stage, check;
    int64_t *splits;
    void *splits_dev;
    bop_t x, dy, *w;            /* fprop: x, w; dgrad: dy, w; wgrad: x, dy */
    gln_tensor_t *w_h, *w_d;    /* the weights' views (lists) */
    void *out_d, *out_h;        /* fprop / dgrad: bf16 [M, N or K]; wgrad: fp32 [E][N, K] */
    size_t out_bytes;
    gln_tensor_t *dw_h, *dw_d;  /* wgrad outputs */
} bproblem_t;

static void bproblem_init(gln_context_t *cu, gln_context_t *cpu, bproblem_t *p, const lab_shape_t *s,
                          int64_t tokens, int64_t K, int64_t N, int stage, bench_splits_t sk, int check) {
    memset(p, 0, sizeof *p);
    p->E = s->experts, p->M = s->experts * tokens, p->K = K, p->N = N, p->stage = stage, p->check = check;
    p->splits = malloc((size_t)p->E * sizeof(int64_t));
    bench_make_splits(sk, p->splits, p->E, tokens);
    TRY(gln_malloc(cu, (size_t)p->E * sizeof(int64_t), &p->splits_dev));
    TRY(gln_memcpy(cu, p->splits_dev, p->splits, (size_t)p->E * sizeof(int64_t), GLN_COPY_HOST_TO_BACKEND));
    if (stage != DGRAD) make_grouped(cu, cpu, &p->x, p->E, p->splits, p->M, K, stage == WGRAD, check, 1);
    if (stage != FPROP) make_grouped(cu, cpu, &p->dy, p->E, p->splits, p->M, N, stage == WGRAD, check, 2);
    if (stage != WGRAD) {
        p->w = calloc((size_t)p->E, sizeof(bop_t));
        p->w_h = calloc((size_t)p->E, sizeof(gln_tensor_t)), p->w_d = calloc((size_t)p->E, sizeof(gln_tensor_t));
        for (int32_t e = 0; e < p->E; e++) {
            make_weight(cu, cpu, &p->w[e], N, K, e, check);
            p->w_h[e] = p->w[e].h, p->w_d[e] = p->w[e].d;
        }
    }
    p->out_bytes = stage == FPROP ? (size_t)(p->M * N) * 2 : stage == DGRAD ? (size_t)(p->M * K) * 2
                                                                            : (size_t)(N * K) * 4 * (size_t)p->E;
    TRY(gln_malloc(cu, p->out_bytes, &p->out_d));
    if (check) p->out_h = calloc(p->out_bytes + 1, 1);
    if (stage == WGRAD) {
        p->dw_h = calloc((size_t)p->E, sizeof(gln_tensor_t)), p->dw_d = calloc((size_t)p->E, sizeof(gln_tensor_t));
        for (int32_t e = 0; e < p->E; e++) {
            const size_t off = (size_t)e * (size_t)(N * K);
            p->dw_d[e] = gln_tensor_make(GLN_DTYPE_FP32, N, K, (float *)p->out_d + off);
            if (check) p->dw_h[e] = gln_tensor_make(GLN_DTYPE_FP32, N, K, (float *)p->out_h + off);
        }
    }
}

static void bproblem_free(gln_context_t *cu, bproblem_t *p) {
    if (p->stage != DGRAD) bop_free(cu, &p->x);
    if (p->stage != FPROP) bop_free(cu, &p->dy);
    for (int32_t e = 0; p->w && e < p->E; e++) bop_free(cu, &p->w[e]);
    TRY(gln_free(cu, p->out_d));
    TRY(gln_free(cu, p->splits_dev));
    free(p->w), free(p->w_h), free(p->w_d), free(p->dw_h), free(p->dw_d), free(p->out_h), free(p->splits);
}

/* The stage on the device (side 0) or on the CPU context (side 1, host twins). */
static gln_status_t brun(gln_context_t *ctx, const bproblem_t *p, int side, int accumulate) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    const int64_t *sp = side ? p->splits : (const int64_t *)p->splits_dev;
    gln_grouped_tensor_t x = {p->E, sp, !side, side ? p->x.h : p->x.d};
    gln_grouped_tensor_t dy = {p->E, sp, !side, side ? p->dy.h : p->dy.d};
    gln_grouped_tensor_t d = {p->E, sp, !side,
                              gln_tensor_make(GLN_DTYPE_BF16, p->M, p->stage == FPROP ? p->N : p->K,
                                              side ? p->out_h : p->out_d)};
    a.block_scales_pow2 = 1;
    a.layout = p->stage == FPROP ? GLN_LAYOUT_TN : p->stage == DGRAD ? GLN_LAYOUT_NN : GLN_LAYOUT_NT;
    if (p->stage == WGRAD) a.a_grouped = &x, a.b = &dy, a.d_list = side ? p->dw_h : p->dw_d, a.accumulate = accumulate;
    else a.a_list = side ? p->w_h : p->w_d, a.b = p->stage == FPROP ? &x : &dy, a.d_grouped = &d;
    return gln_grouped_gemm(ctx, &a);
}

size_t lab_count_differing(const void *want, const void *got, size_t n, int f32, double *worst) {
    const unsigned char *w = want, *g = got;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        float a, b;
        if (f32) memcpy(&a, w + 4 * i, 4), memcpy(&b, g + 4 * i, 4);
        else {
            uint16_t ha, hb;
            memcpy(&ha, w + 2 * i, 2), memcpy(&hb, g + 2 * i, 2);
            a = gln_bf16_to_fp32(ha), b = gln_bf16_to_fp32(hb);
        }
        if (memcmp(&a, &b, 4) == 0) continue;
        differ++;
        const double r = fabs((double)a - (double)b) / fmax(fabs((double)a), 1e-30);
        if (r > *worst) *worst = r;
    }
    return differ;
}

int lab_block_main(const lab_shape_t *s, const char *stage_s, bench_splits_t sk, int repeat, int inner, int agree) {
    const int stage = !strcmp(stage_s, "fprop") ? FPROP : !strcmp(stage_s, "dgrad") ? DGRAD : WGRAD;
    gln_context_t *cu = bench_cuda_context(), *cpu = NULL;
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CPU;
    TRY(gln_context_create(&o, &cpu));
    gln_cutlass_lab_blockwise = block_hook;

    const int full = 2.0 * s->experts * s->tokens * s->k * s->n <= 6e10;
    const int64_t ct = full || s->tokens < 256 ? s->tokens : 256, ck = full || s->k < 1024 ? s->k : 1024,
                  cn = full || s->n < 1024 ? s->n : 1024;
    bproblem_t c, t;
    bproblem_init(cu, cpu, &c, s, ct, ck, cn, stage, sk, 1);
    TRY(brun(cpu, &c, 1, 0));
    unsigned char *got = malloc(c.out_bytes), *zeros = calloc(c.out_bytes, 1);
    bproblem_init(cu, cpu, &t, s, s->tokens, s->k, s->n, stage, sk, 0);
    /* --agree: each variant once more on the full shape's random data (no accumulation, the
     * output set to NaN bytes first), against the library kernel's bytes */
    unsigned char *t_lib = agree ? malloc(t.out_bytes) : NULL, *t_got = agree ? malloc(t.out_bytes) : NULL,
                  *nan_bytes = agree ? malloc(t.out_bytes) : NULL;
    if (agree && (!t_lib || !t_got || !nan_bytes)) return 1;
    if (agree) memset(nan_bytes, 0xFF, t.out_bytes);
    int have_lib = 0;
    const double flops = 2.0 * (double)t.M * (double)s->k * (double)s->n;
    const char *raster = getenv("GLN_CUTLASS_RASTER");
    printf("# lab: %s %s block (E4M3 1x128 x %s, pow2 scales), %s splits, raster %s; check on %s "
           "(E%d x %lld, K%lld N%lld), bitwise vs the CPU backend\n",
           s->name, stage_s, stage == WGRAD ? "1x128 along tokens -> fp32 main_grad" : "128x128 -> bf16",
           bench_splits_names[sk], raster ? raster : "by shape", full ? "the shape" : "a reduced twin",
           (int)c.E, (long long)ct, (long long)c.K, (long long)c.N);
    printf("%-28s | %-8s | %8s %8s%s\n", "variant", "check", "ms", "TFLOP/s",
           agree ? "  | elements differing from the library kernel's, max |rel diff|" : "");
    for (int v = 0; v < NBVARIANTS; v++) {
        const bvariant_t *var = &bvariants[v];
        if (var->fn && var->wgrad != (stage == WGRAD)) continue; /* a lab kernel for the other layout */
        if (var->schedule && stage == WGRAD) continue;          /* forced schedules: fprop / dgrad only */
        g_bactive = var;
        set_env("GLN_CUDA_BLOCKWISE", var->blockwise);
        set_env("GLN_CUTLASS_BLOCKWISE", var->schedule);
        g_blab_ran = 0;
        TRY(gln_memcpy(cu, c.out_d, zeros, c.out_bytes, GLN_COPY_HOST_TO_BACKEND));
        const gln_status_t st = brun(cu, &c, 0, 0);
        if (st != GLN_STATUS_SUCCESS) {
            printf("%-28s | %-8s | %s\n", var->name, "error", gln_last_error());
            continue;
        }
        if (var->fn && !g_blab_ran) {
            printf("%-28s | %-8s |\n", var->name, "n/a");
            continue;
        }
        TRY(gln_memcpy(cu, got, c.out_d, c.out_bytes, GLN_COPY_BACKEND_TO_HOST));
        if (memcmp(got, c.out_h, c.out_bytes) != 0) {
            printf("%-28s | %-8s | (not timed)\n", var->name, "MISMATCH");
            continue;
        }
        double *ts = malloc((size_t)repeat * sizeof *ts);
        for (int r = -2; r < repeat; r++) {
            TRY(gln_synchronize(cu));
            const double t0 = now_s();
            for (int j = 0; j < inner; j++) TRY(brun(cu, &t, 0, 1));
            TRY(gln_synchronize(cu));
            if (r >= 0) ts[r] = (now_s() - t0) / inner;
        }
        qsort(ts, (size_t)repeat, sizeof *ts, cmp_double);
        printf("%-28s | %-8s | %8.3f %8.1f", var->name, "ok", ts[repeat / 2] * 1e3, flops / ts[repeat / 2] * 1e-12);
        if (agree) {
            const int lib = !have_lib && !var->fn && !var->blockwise && !var->schedule;
            TRY(gln_memcpy(cu, t.out_d, nan_bytes, t.out_bytes, GLN_COPY_HOST_TO_BACKEND));
            TRY(brun(cu, &t, 0, 0));
            TRY(gln_memcpy(cu, lib ? t_lib : t_got, t.out_d, t.out_bytes, GLN_COPY_BACKEND_TO_HOST));
            if (lib) {
                have_lib = 1;
                printf("  | (the reference)");
            } else if (have_lib) {
                double worst = 0;
                const size_t n = t.out_bytes / (stage == WGRAD ? 4 : 2);
                printf("  | %zu of %zu, %.3g", lab_count_differing(t_lib, t_got, n, stage == WGRAD, &worst), n, worst);
            }
        }
        printf("\n");
        fflush(stdout);
        free(ts);
    }
    g_bactive = NULL;
    set_env("GLN_CUDA_BLOCKWISE", NULL);
    set_env("GLN_CUTLASS_BLOCKWISE", NULL);
    gln_cutlass_lab_blockwise = NULL;
    free(got), free(zeros), free(t_lib), free(t_got), free(nan_bytes);
    bproblem_free(cu, &c);
    bproblem_free(cu, &t);
    gln_context_destroy(cu);
    gln_context_destroy(cpu);
    return 0;
}
