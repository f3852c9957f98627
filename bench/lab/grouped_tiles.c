/* Kernel lab: tile configurations of one grouped GEMM side by side on one shape — the per-expert
 * cuBLASLt loop, the library's three CUTLASS regimes (small / medium / large, forced through
 * GLN_CUTLASS_TILES) and the lab-only candidates of lab_*.cu — each first checked bit for bit
 * against the CPU backend, then timed; a variant that fails its check is not timed.  This is the
 * evidence for the regime heuristic of src/backend/cuda/cuda_grouped_gemm.c: a candidate that
 * wins here on the shapes of its regime is promoted into src/ (and the heuristic's note cites
 * the table).
 *
 * The check: operands of small integers (|v| <= 2, FP8 decode scales 1), so every product and
 * FP32 sum is exact whatever the tile shape or summation order and the output must equal the
 * CPU's bytes; on the shape itself when 2·M·N·K <= 6e10 (Qwen3-like), else on the same experts
 * and splits pattern with tokens, K and N capped (256, 1024, 1024).  The timing: the full shape,
 * device splits, the stage run `inner` times between two synchronisations, median of `repeat`.
 * wgrad: into FP32 (main_grad), accumulating in the timing; checked twice, first from zeros
 * without accumulation (beta = 0: the epilogue never reads main_grad), then accumulating the same
 * product onto that result (beta = 1, main_grad read through the epilogue's C loads) against the
 * CPU's own accumulation — still exact, so any wrong, stale or misplaced C read shows ("MISM acc").
 *
 * Build: cmake -DGLN_BUILD_LAB=ON (needs CUTLASS); run on the GPU machine, e.g.
 *   bench/lab/grouped_tiles --shape qwen3 --stage wgrad
 * --recipe block: FP8 block scaling's kernels, checked and timed by lab_block.c (see there).
 * --recipe hybrid: as e4m3 with the gradient dy in E5M2 (FP8 HYBRID: dgrad and wgrad take
 * E5M2 × E4M3 operands).
 * --agree 1: also run every variant once on the full shape's random data (no accumulation) and
 * count the output elements whose bytes differ from the first variant's, the cuBLASLt loop's
 * (FP32 accumulation with cuBLASLt's own promotion, TransformerEngine's split accumulator): which
 * promotion interval, if any, reproduces cuBLASLt bit for bit.  With --recipe block: against the
 * library's block-scaled kernel (the variants' sums against CUTLASS's).
 * usage: grouped_tiles [--shape NAME] [--stage fprop|dgrad|wgrad] [--recipe bf16|e4m3|hybrid|block]
 *                      [--splits uniform|zipf|empty|router|random] [--repeat N] [--inner N] [--agree 0|1]
 *                      (exit 77 without a GPU) */
#include "../bench_util.h"

#include "backend/cuda/cutlass/grouped_variants.h"

#include "lab_block.h"

/* lab_tn.cu, lab_nt.cu */
gln_status_t gln_cutlass_run_lab_bf16_tn_coop_128x256(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_tn_pp_64x256(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_tn_c21.cu */
gln_status_t gln_cutlass_run_lab_bf16_tn_coop_128x256_c21(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_nn_coop_128x256_c21(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_pp_64x128(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_coop_128x128(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_epi_*.cu: wgrad with the TMA epilogue spelled out (lab_epi.cuh) */
gln_status_t gln_cutlass_run_lab_bf16_nt_coop_128x256_e64(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_coop_128x256_d3(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_coop_128x256_sep(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_coop_128x256_sep_delay(gln_context_t *, const gln_cutlass_grouped_t *,
                                                                const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_coop_256x128_sep(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_epi_pp_*.cu: the same with the pingpong schedule */
gln_status_t gln_cutlass_run_lab_bf16_nt_pp_128x128_e64(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_pp_128x128_e64_c8(gln_context_t *, const gln_cutlass_grouped_t *,
                                                           const char *);
gln_status_t gln_cutlass_run_lab_bf16_nt_pp_64x256_e64(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_e4m3_wgrad.cu: the FP8 wgrad on large experts */
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_128x192(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_e4m3_wgrad_cluster.cu: the library's tile on clusters */
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_128x128_c21(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_128x128_c12(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_e4m3_wgrad_160.cu: cuBLASLt's tile and cluster for this wgrad */
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_128x160(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_128x160_c21(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_fp8_overlap_dgrad.cu: the 128x128 promoted dgrad, promotion overlapped (grouped_fp8_overlap.cuh) */
gln_status_t gln_cutlass_run_lab_e4m3_dgrad_overlap(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_e5m2_e4m3_dgrad_overlap(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
/* lab_fp8_wgrad_control.cu: the large experts' FP8 wgrad with CUTLASS's promotion (not overlapped) */
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_cutlass_promotion(gln_context_t *, const gln_cutlass_grouped_t *,
                                                              const char *);
gln_status_t gln_cutlass_run_lab_e5m2_e4m3_wgrad_cutlass_promotion(gln_context_t *, const gln_cutlass_grouped_t *,
                                                                   const char *);
/* lab_fp8_dgrad_*.cu: the promoted FP8 dgrad of large experts, E4M3 and E5M2 (HYBRID) gradients */
#define LAB_FP8_DGRAD(tag)                                                                                        \
    gln_status_t gln_cutlass_run_lab_e4m3_dgrad_##tag(gln_context_t *, const gln_cutlass_grouped_t *, const char *); \
    gln_status_t gln_cutlass_run_lab_e5m2_e4m3_dgrad_##tag(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
LAB_FP8_DGRAD(128x128_c21)
LAB_FP8_DGRAD(128x128_c12)
LAB_FP8_DGRAD(128x192_c21)
/* lab_epi_e4m3_*.cu: the same with the TMA epilogue spelled out (lab_epi.cuh) */
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_e64(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_sep(gln_context_t *, const gln_cutlass_grouped_t *, const char *);
gln_status_t gln_cutlass_run_lab_e4m3_wgrad_coop_d3(gln_context_t *, const gln_cutlass_grouped_t *, const char *);

typedef gln_status_t (*lab_fn)(gln_context_t *, const gln_cutlass_grouped_t *, const char *);

/* A variant: an environment (loop / regime) or a lab kernel for one gln_cutlass_kernel_t. */
typedef struct variant {
    const char *name;
    const char *loop, *tiles;   /* environment values, or NULL */
    lab_fn fn;
    gln_cutlass_kernel_t kernel; /* the dispatcher's kernel the lab one stands in for */
    int32_t promotion_k;         /* promoted FP8 only: K elements between FP32 promotions, or 0 */
} variant_t;

static const variant_t variants[] = {
    {"loop (cuBLASLt)", "1", NULL, NULL, 0, 0},
    {"small regime", NULL, "small", NULL, 0, 0},
    {"medium regime", NULL, "medium", NULL, 0, 0},
    {"large regime", NULL, "large", NULL, 0, 0},
    {"lab coop 128x256", NULL, NULL, gln_cutlass_run_lab_bf16_tn_coop_128x256, GLN_CUTLASS_BF16_TN, 0},
    {"lab pingpong 64x256", NULL, NULL, gln_cutlass_run_lab_bf16_tn_pp_64x256, GLN_CUTLASS_BF16_TN, 0},
    {"lab coop 128x256 2x1", NULL, NULL, gln_cutlass_run_lab_bf16_tn_coop_128x256_c21, GLN_CUTLASS_BF16_TN, 0},
    {"lab coop 128x256 2x1", NULL, NULL, gln_cutlass_run_lab_bf16_nn_coop_128x256_c21, GLN_CUTLASS_BF16_NN, 0},
    {"lab pingpong 64x128", NULL, NULL, gln_cutlass_run_lab_bf16_nt_pp_64x128, GLN_CUTLASS_BF16_NT_F32, 0},
    {"lab coop 128x128 old large", NULL, NULL, gln_cutlass_run_lab_bf16_nt_coop_128x128, GLN_CUTLASS_BF16_NT_F32, 0},
    /* coop 128x256 as the small regime, epilogue subtile e<N> (128 x N FP32), C / D stages, "sep":
     * separate C and D buffers (else D is staged in its C slot), "dly": DelayTmaStore.  With the
     * small regime's policy (e32 C4D2) lab_epi.cuh yields its very kernel type (asserted in
     * lab_epi_128x256_d3.cu), so "small regime" is these rows' control. */
    {"lab 128x256 e64 C4D2", NULL, NULL, gln_cutlass_run_lab_bf16_nt_coop_128x256_e64, GLN_CUTLASS_BF16_NT_F32, 0},
    {"lab 128x256 e32 C4D3", NULL, NULL, gln_cutlass_run_lab_bf16_nt_coop_128x256_d3, GLN_CUTLASS_BF16_NT_F32, 0},
    {"lab 128x256 e32 C4D4 sep", NULL, NULL, gln_cutlass_run_lab_bf16_nt_coop_128x256_sep, GLN_CUTLASS_BF16_NT_F32, 0},
    {"lab 128x256 e32 sep dly", NULL, NULL, gln_cutlass_run_lab_bf16_nt_coop_128x256_sep_delay,
     GLN_CUTLASS_BF16_NT_F32, 0},
    {"lab 256x128 e32 C4D4 sep", NULL, NULL, gln_cutlass_run_lab_bf16_nt_coop_256x128_sep, GLN_CUTLASS_BF16_NT_F32, 0},
    /* pingpong, the tile per warpgroup, epilogue subtile e<N> (64 x N FP32), C / D stages, D in its
     * C slot.  Their control is the builder's pingpong 128x128 (e32 C4D2; asserted in
     * lab_epi_pp_128x128_e64.cu), the small regime's kernel before the cooperative 128x256. */
    {"lab pp 128x128 e64 C4D2", NULL, NULL, gln_cutlass_run_lab_bf16_nt_pp_128x128_e64, GLN_CUTLASS_BF16_NT_F32, 0},
    {"lab pp 128x128 e64 C8D2", NULL, NULL, gln_cutlass_run_lab_bf16_nt_pp_128x128_e64_c8, GLN_CUTLASS_BF16_NT_F32, 0},
    {"lab pp 64x256 e64 C4D2", NULL, NULL, gln_cutlass_run_lab_bf16_nt_pp_64x256_e64, GLN_CUTLASS_BF16_NT_F32, 0},
    /* --recipe e4m3: the FP8 wgrad's candidate for large experts; its control is "large regime"
     * (cooperative 128x128; the medium and small regimes run the pingpong 64x128 kernel) */
    {"lab e4m3 coop 128x192", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_128x192, GLN_CUTLASS_E4M3_WGRAD, 0},
    /* cooperative 128x128 with the epilogue spelled out; control "large regime" (e32 C4D2) */
    {"lab e4m3 e64 C2D2", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_e64, GLN_CUTLASS_E4M3_WGRAD, 0},
    {"lab e4m3 e32 C4D2 sep", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_sep, GLN_CUTLASS_E4M3_WGRAD, 0},
    {"lab e4m3 e32 C4D3", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_d3, GLN_CUTLASS_E4M3_WGRAD, 0},
    {"lab e4m3 coop 128x128 2x1", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_128x128_c21, GLN_CUTLASS_E4M3_WGRAD, 0},
    {"lab e4m3 coop 128x128 1x2", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_128x128_c12, GLN_CUTLASS_E4M3_WGRAD, 0},
    {"lab e4m3 coop 128x160", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_128x160, GLN_CUTLASS_E4M3_WGRAD, 0},
    {"lab e4m3 coop 128x160 2x1", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_coop_128x160_c21, GLN_CUTLASS_E4M3_WGRAD, 0},
    /* the large regime's kernel before its promotion was overlapped (grouped_fp8_overlap.cuh) */
    {"lab 128x128 CUTLASS promo", NULL, NULL, gln_cutlass_run_lab_e4m3_wgrad_cutlass_promotion,
     GLN_CUTLASS_E4M3_WGRAD, 0},
    {"lab 128x128 CUTLASS promo", NULL, NULL, gln_cutlass_run_lab_e5m2_e4m3_wgrad_cutlass_promotion,
     GLN_CUTLASS_E5M2_E4M3_WGRAD, 0},
    /* --recipe e4m3|hybrid --stage dgrad: the promoted FP8 dgrad ("medium regime": cooperative
     * 128x128, "large regime": 128x192, promoted from here); fprop (fast accumulation) prints n/a
     * for these */
    {"lab dgrad 128x128 2x1", NULL, NULL, gln_cutlass_run_lab_e4m3_dgrad_128x128_c21, GLN_CUTLASS_E4M3_TN, 0},
    {"lab dgrad 128x128 1x2", NULL, NULL, gln_cutlass_run_lab_e4m3_dgrad_128x128_c12, GLN_CUTLASS_E4M3_TN, 0},
    {"lab dgrad 128x192 2x1", NULL, NULL, gln_cutlass_run_lab_e4m3_dgrad_128x192_c21, GLN_CUTLASS_E4M3_TN, 0},
    {"lab dgrad 128x128 2x1", NULL, NULL, gln_cutlass_run_lab_e5m2_e4m3_dgrad_128x128_c21, GLN_CUTLASS_E5M2_E4M3_TN, 0},
    {"lab dgrad 128x128 1x2", NULL, NULL, gln_cutlass_run_lab_e5m2_e4m3_dgrad_128x128_c12, GLN_CUTLASS_E5M2_E4M3_TN, 0},
    {"lab dgrad 128x192 2x1", NULL, NULL, gln_cutlass_run_lab_e5m2_e4m3_dgrad_128x192_c21, GLN_CUTLASS_E5M2_E4M3_TN, 0},
    /* the same tile as "medium regime" with the promotion overlapped (grouped_fp8_overlap.cuh) */
    {"lab dgrad 128x128 overlap", NULL, NULL, gln_cutlass_run_lab_e4m3_dgrad_overlap, GLN_CUTLASS_E4M3_TN, 0},
    {"lab dgrad 128x128 overlap", NULL, NULL, gln_cutlass_run_lab_e5m2_e4m3_dgrad_overlap, GLN_CUTLASS_E5M2_E4M3_TN, 0},
    /* --recipe e4m3|hybrid --stage dgrad|wgrad: the library's own kernel for the call with FP32
     * promotion every 256 / 512 / 1024 K elements or never instead of every 128-wide tile — what
     * draining the MMA pipe before each promotion costs.  The numerics differ on real data
     * (longer runs in the tensor cores' accumulator; --agree 1 counts the elements that differ
     * from cuBLASLt's), so these rows are a measurement, never a candidate.  The large experts'
     * FP8 wgrad (overlapped promotion) promotes every tile by construction: "error" there. */
    {"library, promote every 256", NULL, NULL, NULL, 0, 256},
    {"library, promote every 512", NULL, NULL, NULL, 0, 512},
    {"library, promote every 1024", NULL, NULL, NULL, 0, 1024},
    {"library, never promote", NULL, NULL, NULL, 0, 1 << 24},
};
#define NVARIANTS (int)(sizeof variants / sizeof variants[0])

static const variant_t *g_active;
static int g_lab_ran;

static gln_status_t lab_hook(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call) {
    if (!g_active || !g_active->fn || g->kernel != g_active->kernel) return GLN_STATUS_NOT_SUPPORTED;
    if (g->kernel == GLN_CUTLASS_BF16_NT_F32 && g->d_dtype != GLN_DTYPE_FP32) return GLN_STATUS_NOT_SUPPORTED;
    if (g->kernel == GLN_CUTLASS_BF16_TN && g->d_dtype != GLN_DTYPE_BF16) return GLN_STATUS_NOT_SUPPORTED;
    if ((g->kernel == GLN_CUTLASS_E4M3_WGRAD || g->kernel == GLN_CUTLASS_E5M2_E4M3_WGRAD) &&
        g->d_dtype != GLN_DTYPE_FP32)
        return GLN_STATUS_NOT_SUPPORTED;
    if ((g->kernel == GLN_CUTLASS_E4M3_TN || g->kernel == GLN_CUTLASS_E5M2_E4M3_TN) &&
        (g->fast_accumulate || g->d_dtype != GLN_DTYPE_BF16 || g->bias_list))
        return GLN_STATUS_NOT_SUPPORTED; /* the dgrad candidates: promoted, bf16 out, no bias */
    g_lab_ran = 1;
    return g_active->fn(ctx, g, call);
}

static void activate(const variant_t *v) {
    g_active = v;
    gln_cutlass_lab_promotion_k = v->promotion_k;
    if (v->loop) setenv("GLN_CUDA_GROUPED_LOOP", v->loop, 1);
    else unsetenv("GLN_CUDA_GROUPED_LOOP");
    if (v->tiles) setenv("GLN_CUTLASS_TILES", v->tiles, 1);
    else unsetenv("GLN_CUTLASS_TILES");
}

typedef lab_shape_t shape_t;

static const shape_t shapes[] = {{"mixtral-fc1", 8, 4096, 4096, 14336}, {"deepseek", 32, 512, 7168, 2048},
                                 {"qwen3", 128, 128, 2048, 768},        {"deepgemm", 8, 4096, 7168, 4096}};

enum { FPROP, DGRAD, WGRAD };

/* One problem on the device (and, for the check, its host twin on the CPU context). */
typedef struct problem {
    int32_t E;
    int64_t tokens, K, N, M;
    int fp8, e5m2_dy, stage; /* e5m2_dy: dy (and its transposed copy) in E5M2, x and W in E4M3 */
    int64_t *splits;
    void *splits_dev;
    void *dev[8];       /* W, Wᵀ, x, x col, dy, dy col, out, scales */
    void *host[8];      /* the check's host copies (same order), or NULL */
    gln_tensor_t *w_d, *w_h, *dw_d, *dw_h;
} problem_t;

static uint8_t e4m3_of(int v) { /* exact E4M3 codes of -2..2 */
    static const uint8_t pos[3] = {0x00, 0x38, 0x40};
    return v < 0 ? (uint8_t)(0x80 | pos[-v]) : pos[v];
}

static uint8_t e5m2_of(int v) { /* exact E5M2 codes of -2..2 */
    static const uint8_t pos[3] = {0x00, 0x3C, 0x40};
    return v < 0 ? (uint8_t)(0x80 | pos[-v]) : pos[v];
}

/* Element i of small integers in -2..2 (deterministic). */
static int small_int(uint64_t seed, size_t i) {
    uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
    return (int)(xorshift(&s) % 5) - 2;
}

/* fp8: 1 E4M3, 2 E5M2 codes; 0 bf16. */
static void *host_fill(size_t count, int fp8, uint64_t seed) {
    void *h = malloc(count * (fp8 ? 1 : 2) + 1);
    if (!h) exit(1);
    for (size_t i = 0; i < count; i++) {
        const int v = small_int(seed, i);
        if (fp8) ((uint8_t *)h)[i] = fp8 == 2 ? e5m2_of(v) : e4m3_of(v);
        else ((uint16_t *)h)[i] = gln_fp32_to_bf16((float)v);
    }
    return h;
}

/* dst: the grouped columnwise copy (each expert's [rows_i, cols] transposed in place). */
static void *host_grouped_t(const uint8_t *src, const int64_t *splits, int32_t E, int64_t M, int64_t cols) {
    uint8_t *dst = calloc((size_t)(M * cols) + 1, 1);
    int64_t r0 = 0;
    for (int32_t i = 0; i < E; i++) {
        for (int64_t r = 0; r < splits[i]; r++)
            for (int64_t c = 0; c < cols; c++) dst[(r0 * cols) + c * splits[i] + r] = src[(r0 + r) * cols + c];
        r0 += splits[i];
    }
    return dst;
}

static void *upload(gln_context_t *ctx, const void *h, size_t bytes) {
    void *d = NULL;
    TRY(gln_malloc(ctx, bytes, &d));
    TRY(gln_memcpy(ctx, d, h, bytes, GLN_COPY_HOST_TO_BACKEND));
    return d;
}

/* check: host small integers uploaded (host copies kept); else device random data. */
static void problem_init(gln_context_t *ctx, problem_t *p, const shape_t *s, int64_t tokens, int64_t K, int64_t N,
                         int fp8, int e5m2_dy, int stage, bench_splits_t sk, int check) {
    memset(p, 0, sizeof *p);
    p->E = s->experts, p->tokens = tokens, p->K = K, p->N = N, p->M = s->experts * tokens, p->fp8 = fp8;
    p->e5m2_dy = fp8 && e5m2_dy;
    p->stage = stage;
    p->splits = malloc((size_t)p->E * sizeof(int64_t));
    bench_make_splits(sk, p->splits, p->E, tokens);
    p->splits_dev = upload(ctx, p->splits, (size_t)p->E * sizeof(int64_t));
    const size_t es = fp8 ? 1 : 2, wn = (size_t)(N * K) * (size_t)p->E;
    const size_t counts[6] = {wn, wn, (size_t)(p->M * K), (size_t)(p->M * K), (size_t)(p->M * N), (size_t)(p->M * N)};
    const gln_dtype_t dt = fp8 ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_BF16;
    for (int b = 0; b < 6; b += 2) {
        if (check) {
            p->host[b] = host_fill(counts[b], !fp8 ? 0 : b == 4 && p->e5m2_dy ? 2 : 1, (uint64_t)b + 1);
            p->dev[b] = upload(ctx, p->host[b], counts[b] * es);
        } else {
            p->dev[b] = device_random_fast(ctx, dt, counts[b], (uint64_t)b + 1);
        }
        if (!fp8) continue;
        if (check) { /* the transposed copies: W per expert [K, N]; x, dy grouped */
            if (b == 0) {
                uint8_t *t = malloc(wn + 1);
                for (int32_t e = 0; e < p->E; e++)
                    for (int64_t r = 0; r < N; r++)
                        for (int64_t c = 0; c < K; c++)
                            t[(size_t)e * N * K + c * N + r] = ((uint8_t *)p->host[0])[(size_t)e * N * K + r * K + c];
                p->host[1] = t;
            } else {
                p->host[b + 1] = host_grouped_t(p->host[b], p->splits, p->E, p->M, b == 2 ? K : N);
            }
            p->dev[b + 1] = upload(ctx, p->host[b + 1], counts[b + 1]);
        } else {
            p->dev[b + 1] = device_random_fast(ctx, dt, counts[b + 1], (uint64_t)b + 2);
        }
    }
    /* the output (zeros: accumulating wgrads start from zero), and FP8 decode scales of 1 */
    const size_t out = stage == FPROP ? (size_t)(p->M * N) * 2 : stage == DGRAD ? (size_t)(p->M * K) * 2 : wn * 4;
    p->dev[6] = device_random_fast(ctx, GLN_DTYPE_FP32, (out + 3) / 4, 0);
    if (check) p->host[6] = calloc(out + 1, 1);
    float *ones = malloc((size_t)(p->E + 1) * sizeof(float));
    for (int32_t i = 0; i <= p->E; i++) ones[i] = 1.0f;
    p->dev[7] = upload(ctx, ones, (size_t)(p->E + 1) * sizeof(float));
    p->host[7] = ones;
    p->w_d = calloc((size_t)p->E, sizeof(gln_tensor_t)), p->w_h = calloc((size_t)p->E, sizeof(gln_tensor_t));
    p->dw_d = calloc((size_t)p->E, sizeof(gln_tensor_t)), p->dw_h = calloc((size_t)p->E, sizeof(gln_tensor_t));
    for (int side = 0; side < 2 && (side == 0 || check); side++) {
        void **buf = side ? p->host : p->dev;
        gln_tensor_t *w = side ? p->w_h : p->w_d, *dw = side ? p->dw_h : p->dw_d;
        for (int32_t e = 0; e < p->E; e++) {
            const size_t off = (size_t)e * (size_t)(N * K);
            w[e] = gln_tensor_make(dt, N, K, (char *)buf[0] + off * es);
            if (fp8) {
                w[e].scaling = GLN_SCALING_TENSOR;
                w[e].scale_inv = buf[7];
                w[e].col_data = (char *)buf[1] + off, w[e].col_scale_inv = buf[7];
            }
            if (stage == WGRAD) dw[e] = gln_tensor_make(GLN_DTYPE_FP32, N, K, (float *)buf[6] + off);
        }
    }
}

static void problem_free(gln_context_t *ctx, problem_t *p) {
    for (int b = 0; b < 8; b++) {
        if (p->dev[b]) TRY(gln_free(ctx, p->dev[b]));
        free(p->host[b]);
    }
    TRY(gln_free(ctx, p->splits_dev));
    free(p->splits), free(p->w_d), free(p->w_h), free(p->dw_d), free(p->dw_h);
}

static gln_grouped_tensor_t grouped(const problem_t *p, int side, int b, int64_t cols) {
    void *const *buf = side ? p->host : p->dev;
    const gln_dtype_t dt = !p->fp8 ? GLN_DTYPE_BF16 : b == 4 && p->e5m2_dy ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    gln_grouped_tensor_t g = {p->E, side ? p->splits : p->splits_dev, !side, gln_tensor_make(dt, p->M, cols, buf[b])};
    if (p->fp8) {
        g.packed.scaling = GLN_SCALING_TENSOR;
        g.packed.scale_inv = buf[7], g.packed.col_data = buf[b + 1], g.packed.col_scale_inv = buf[7];
    }
    return g;
}

/* The stage on side 0 (device) or 1 (host, CPU context). */
static gln_status_t run(gln_context_t *ctx, const problem_t *p, int side, int accumulate) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    gln_grouped_tensor_t x = grouped(p, side, 2, p->K), dy = grouped(p, side, 4, p->N);
    void *out = side ? p->host[6] : p->dev[6];
    gln_grouped_tensor_t d = {p->E, side ? p->splits : p->splits_dev, !side,
                              gln_tensor_make(GLN_DTYPE_BF16, p->M, p->stage == FPROP ? p->N : p->K, out)};
    a.layout = p->stage == FPROP ? GLN_LAYOUT_TN : p->stage == DGRAD ? GLN_LAYOUT_NN : GLN_LAYOUT_NT;
    if (p->stage == WGRAD) a.a_grouped = &x, a.b = &dy, a.d_list = side ? p->dw_h : p->dw_d, a.accumulate = accumulate;
    else a.a_list = side ? p->w_h : p->w_d, a.b = p->stage == FPROP ? &x : &dy, a.d_grouped = &d;
    return gln_grouped_gemm(ctx, &a);
}

int main(int argc, char **argv) {
    const char *shape = "qwen3", *stage_s = "fprop", *recipe = "bf16", *splits_s = "uniform";
    int repeat = 10, inner = 5, agree = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--shape")) shape = argv[i + 1];
        else if (!strcmp(argv[i], "--stage")) stage_s = argv[i + 1];
        else if (!strcmp(argv[i], "--recipe")) recipe = argv[i + 1];
        else if (!strcmp(argv[i], "--splits")) splits_s = argv[i + 1];
        else if (!strcmp(argv[i], "--repeat")) repeat = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--inner")) inner = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--agree")) agree = atoi(argv[i + 1]);
        else return fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
    const shape_t *s = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, shape)) s = &shapes[i];
    const int stage = !strcmp(stage_s, "fprop") ? FPROP : !strcmp(stage_s, "dgrad") ? DGRAD : WGRAD;
    const int hybrid = !strcmp(recipe, "hybrid"), fp8 = hybrid || !strcmp(recipe, "e4m3");
    int son[SPLITS_COUNT_];
    if (!s || repeat < 1 || inner < 1 || !bench_splits_parse(splits_s, son) || !strcmp(splits_s, "all")) return 2;
    bench_splits_t sk = SPLITS_UNIFORM; /* the one set named (router and random: the cliff sets) */
    for (int k = 0; k < SPLITS_COUNT_; k++)
        if (son[k]) {
            sk = (bench_splits_t)k;
            break;
        }
    if (!strcmp(recipe, "block")) return lab_block_main(s, stage_s, sk, repeat, inner, agree);
    if (strcmp(recipe, "bf16") && !fp8) return fprintf(stderr, "unknown recipe %s\n", recipe), 2;
    gln_context_t *cu = bench_cuda_context(), *cpu = NULL;
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CPU;
    TRY(gln_context_create(&o, &cpu));
    gln_cutlass_lab_kernel = lab_hook;

    /* the check problem and its CPU result */
    const int full = 2.0 * s->experts * s->tokens * s->k * s->n <= 6e10;
    problem_t c;
    const int64_t ct = full || s->tokens < 256 ? s->tokens : 256, ck = full || s->k < 1024 ? s->k : 1024,
                  cn = full || s->n < 1024 ? s->n : 1024;
    problem_init(cu, &c, s, ct, ck, cn, fp8, hybrid, stage, sk, 1);
    TRY(run(cpu, &c, 1, 0));
    const size_t out_bytes = stage == FPROP ? (size_t)(c.M * c.N) * 2 : stage == DGRAD ? (size_t)(c.M * c.K) * 2
                                                                                     : (size_t)(c.N * c.K) * c.E * 4;
    unsigned char *got = malloc(out_bytes), *want_acc = NULL;
    if (!got) return 1;
    if (stage == WGRAD) { /* the accumulating check's answer: the CPU adds the product onto its result */
        unsigned char *first = malloc(out_bytes);
        want_acc = malloc(out_bytes);
        if (!first || !want_acc) return 1;
        memcpy(first, c.host[6], out_bytes);
        TRY(run(cpu, &c, 1, 1));
        memcpy(want_acc, c.host[6], out_bytes);
        memcpy(c.host[6], first, out_bytes);
        free(first);
    }
    problem_t t;
    problem_init(cu, &t, s, s->tokens, s->k, s->n, fp8, hybrid, stage, sk, 0);
    const double flops = 2.0 * (double)t.M * (double)s->k * (double)s->n;
    printf("# lab: %s %s %s, %s splits; check on %s (E%d x %lld, K%lld N%lld), bitwise vs the CPU backend\n", shape,
           stage_s, recipe, bench_splits_names[sk], full ? "the shape" : "a reduced twin", (int)c.E,
           (long long)c.tokens, (long long)c.K, (long long)c.N);
    printf("%-26s | %-8s | %8s %8s%s\n", "variant", "check", "ms", "TFLOP/s",
           agree ? "  | elements differing from the loop's, max |rel diff|" : "");
    const size_t t_bytes = stage == FPROP ? (size_t)(t.M * t.N) * 2 : stage == DGRAD ? (size_t)(t.M * t.K) * 2
                                                                                   : (size_t)(t.N * t.K) * t.E * 4;
    unsigned char *t_loop = agree ? malloc(t_bytes) : NULL, *t_got = agree ? malloc(t_bytes) : NULL;
    if (agree && (!t_loop || !t_got)) return 1;
    int have_loop = 0;
    /* the dispatcher's kernel that this stage and recipe's lab candidates stand in for */
    const gln_cutlass_kernel_t lab_kernel = hybrid && stage == WGRAD ? GLN_CUTLASS_E5M2_E4M3_WGRAD
                                            : hybrid                  ? GLN_CUTLASS_E5M2_E4M3_TN
                                            : fp8 ? (stage == WGRAD ? GLN_CUTLASS_E4M3_WGRAD : GLN_CUTLASS_E4M3_TN)
                                            : stage == FPROP ? GLN_CUTLASS_BF16_TN
                                            : stage == WGRAD ? GLN_CUTLASS_BF16_NT_F32
                                                             : GLN_CUTLASS_BF16_NN;
    for (int v = 0; v < NVARIANTS; v++) {
        const variant_t *var = &variants[v];
        if (var->fn && var->kernel != lab_kernel)
            continue; /* a lab kernel for another stage or recipe */
        if (var->promotion_k && (!fp8 || stage == FPROP))
            continue; /* bf16, and the fast-accumulating fprop, do not promote */
        activate(var);
        g_lab_ran = 0;
        void *zeros = calloc(out_bytes, 1);
        TRY(gln_memcpy(cu, c.dev[6], zeros, out_bytes, GLN_COPY_HOST_TO_BACKEND));
        free(zeros);
        const gln_status_t st = run(cu, &c, 0, 0);
        if (st != GLN_STATUS_SUCCESS) { /* e.g. a recipe the loop does not have */
            printf("%-26s | %-8s | %s\n", var->name, "error", gln_last_error());
            continue;
        }
        TRY(gln_memcpy(cu, got, c.dev[6], out_bytes, GLN_COPY_BACKEND_TO_HOST));
        const int ok = memcmp(got, c.host[6], out_bytes) == 0;
        if (var->fn && !g_lab_ran) {
            printf("%-26s | %-8s |\n", var->name, "n/a");
            continue;
        }
        if (!ok) {
            printf("%-26s | %-8s | (not timed)\n", var->name, "MISMATCH");
            continue;
        }
        if (want_acc) { /* the second pass onto the first one's result, reading main_grad */
            const gln_status_t sa = run(cu, &c, 0, 1);
            if (sa != GLN_STATUS_SUCCESS) {
                printf("%-26s | %-8s | %s\n", var->name, "error", gln_last_error());
                continue;
            }
            TRY(gln_memcpy(cu, got, c.dev[6], out_bytes, GLN_COPY_BACKEND_TO_HOST));
            if (memcmp(got, want_acc, out_bytes) != 0) {
                printf("%-26s | %-8s | (not timed)\n", var->name, "MISM acc");
                continue;
            }
        }
        /* the full shape may take another kernel than the check's (its regime): one that
         * refuses the variant's setting (a fixed promotion interval) is reported, not timed */
        const gln_status_t sf = run(cu, &t, 0, 1);
        if (sf != GLN_STATUS_SUCCESS) {
            printf("%-26s | %-8s | full shape: %s\n", var->name, "error", gln_last_error());
            continue;
        }
        double *ts = malloc((size_t)repeat * sizeof *ts);
        for (int r = -2; r < repeat; r++) {
            TRY(gln_synchronize(cu));
            const double t0 = now_s();
            for (int j = 0; j < inner; j++) TRY(run(cu, &t, 0, 1));
            TRY(gln_synchronize(cu));
            if (r >= 0) ts[r] = (now_s() - t0) / inner;
        }
        qsort(ts, (size_t)repeat, sizeof *ts, cmp_double);
        printf("%-26s | %-8s | %8.3f %8.1f", var->name, "ok", ts[repeat / 2] * 1e3, flops / ts[repeat / 2] * 1e-12);
        if (agree) { /* once from zeros on the full shape's random data, against the loop's bytes */
            TRY(run(cu, &t, 0, 0));
            TRY(gln_memcpy(cu, v == 0 ? t_loop : t_got, t.dev[6], t_bytes, GLN_COPY_BACKEND_TO_HOST));
            if (v == 0) {
                have_loop = 1;
                printf("  | (the reference)");
            } else if (have_loop) {
                double worst = 0;
                const size_t n = t_bytes / (stage == WGRAD ? 4 : 2);
                const size_t differ = lab_count_differing(t_loop, t_got, n, stage == WGRAD, &worst);
                printf("  | %zu of %zu, %.3g", differ, n, worst);
            }
        }
        printf("\n");
        fflush(stdout);
        free(ts);
    }
    activate(&(variant_t){"", NULL, NULL, NULL, 0, 0});
    gln_cutlass_lab_kernel = NULL;
    free(got);
    free(want_acc);
    free(t_loop);
    free(t_got);
    problem_free(cu, &c);
    problem_free(cu, &t);
    gln_context_destroy(cu);
    gln_context_destroy(cpu);
    return 0;
}
