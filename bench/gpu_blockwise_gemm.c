/* GPU benchmark of the FP8 block-scaled grouped GEMMs (the DeepSeek recipe: 1×128 activation and
 * gradient scales, 128×128 weight scales, E4M3) on the CUDA backend, through the public API only:
 * fprop (TN, bf16 out), dgrad (NN through the weights' transposed copies, bf16 out) and wgrad
 * into FP32 main_grad (NT through the columnwise copies, accumulating), on the MoE shapes of
 * docs/performance.md with splits in device memory (the layer's grouped path): uniform (every
 * count a multiple of 16) and, by default, router-like too (bench_util.h: the Zipf shares a
 * router gives, almost no count a multiple of 16, the last quarter of the experts empty), so the
 * unaligned members' handling is measured as well as the aligned reference.
 *
 * The operands are random finite E4M3 codes with random FP32 decode scales in [0.5, 2) (or powers
 * of two with --pow2, which also sets args.block_scales_pow2); no quantization is timed.  Per
 * stage: ms, TFLOP/s (2·M·N·K) and the share of the FP8 ceiling (1560 TFLOP/s).  Each sample
 * runs a stage `inner` times between two synchronisations; the figure is the median of `repeat`
 * samples after `warmup`.
 *
 * Comparisons: GLN_CUDA_BLOCKWISE=0 turns the CUTLASS block-scaled kernels off (FP32 scales: the
 * per-expert loop, which reads the splits back — give it --host-splits; pow2 scales: the
 * dequantize-to-bf16 emulation).
 *
 * usage: gpu_blockwise_gemm [--repeat N] [--warmup N] [--inner N] [--shape NAME] [--pow2] [--host-splits]
 *                           [--splits uniform|zipf|empty|router|random|all]   (default uniform and router)
 *                           (exit 77 without a GPU) */
#include "bench_util.h"

#include <math.h>

typedef struct shape {
    const char *name;
    int32_t experts;
    int64_t tokens, k, n; /* tokens per expert, hidden (K_in), expert FFN (K_out) */
} shape_t;

static const shape_t shapes[] = {
    {"mixtral-fc1", 8, 4096, 4096, 14336},
    {"deepseek", 32, 512, 7168, 2048},
    {"qwen3", 128, 128, 2048, 768},
    {"deepgemm", 8, 4096, 7168, 4096},
};

/* Random decode scales: FP32 in [0.5, 2), or powers of two 2^-2 .. 2^2. */
static void *device_scales(gln_context_t *ctx, size_t count, int pow2, uint64_t seed) {
    float *h = malloc((count ? count : 1) * sizeof(float));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < count; i++) {
        const uint64_t r = xorshift(&s);
        h[i] = pow2 ? ldexpf(1.0f, (int)(r % 5) - 2) : 0.5f + 1.5f * (float)((r >> 11) & 0xFFFFF) / 1048576.0f;
    }
    void *d = NULL;
    TRY(gln_malloc(ctx, (count ? count : 1) * sizeof(float), &d));
    TRY(gln_memcpy(ctx, d, h, count * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
    free(h);
    return d;
}

/* A grouped E4M3 BLOCK_1D tensor [rows, cols] with both copies and their scales. */
static gln_tensor_t grouped_block(gln_context_t *ctx, int32_t num, const int64_t *splits, int64_t rows, int64_t cols,
                                  int pow2, uint64_t seed) {
    int64_t *ro = malloc(sizeof(int64_t) * (size_t)(num + 1)), *co = malloc(sizeof(int64_t) * (size_t)(num + 1));
    TRY(gln_grouped_scale_offsets(GLN_SCALING_BLOCK_1D, num, splits, cols, ro, co));
    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols,
                                     device_random(ctx, GLN_DTYPE_FP8_E4M3, (size_t)(rows * cols), seed));
    t.scaling = GLN_SCALING_BLOCK_1D;
    t.col_data = device_random(ctx, GLN_DTYPE_FP8_E4M3, (size_t)(rows * cols), seed + 1);
    t.scale_inv = device_scales(ctx, (size_t)ro[num], pow2, seed + 2);
    t.col_scale_inv = device_scales(ctx, (size_t)co[num], pow2, seed + 3);
    free(ro), free(co);
    return t;
}

/* An E4M3 BLOCK_2D weight [rows, cols] with both copies and their scales. */
static gln_tensor_t weight_block(gln_context_t *ctx, int64_t rows, int64_t cols, int pow2, uint64_t seed) {
    gln_quant_layout_t lay;
    TRY(gln_quant_layout(GLN_SCALING_BLOCK_2D, GLN_DTYPE_FP8_E4M3, rows, cols, &lay));
    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols,
                                     device_random(ctx, GLN_DTYPE_FP8_E4M3, lay.data_bytes, seed));
    t.scaling = GLN_SCALING_BLOCK_2D;
    t.col_data = device_random(ctx, GLN_DTYPE_FP8_E4M3, lay.col_data_bytes, seed + 1);
    t.scale_inv = device_scales(ctx, lay.scale_bytes / 4, pow2, seed + 2);
    t.col_scale_inv = device_scales(ctx, lay.col_scale_bytes / 4, pow2, seed + 3);
    return t;
}

static void tensor_free(gln_context_t *ctx, gln_tensor_t *t) {
    void *p[4] = {t->data, t->col_data, t->scale_inv, t->col_scale_inv};
    for (int i = 0; i < 4; i++)
        if (p[i]) gln_free(ctx, p[i]);
}

typedef struct opts {
    int repeat, warmup, inner, pow2, host_splits;
    int splits_on[SPLITS_COUNT_]; /* the split sets timed */
} opts_t;

/* Median ms of one call of `a`. */
static double time_stage(gln_context_t *ctx, const gln_grouped_gemm_args_t *a, const opts_t *o) {
    for (int i = 0; i < o->warmup; i++) TRY(gln_grouped_gemm(ctx, a));
    TRY(gln_synchronize(ctx));
    double *ms = malloc(sizeof(double) * (size_t)o->repeat);
    for (int r = 0; r < o->repeat; r++) {
        const double t0 = now_s();
        for (int i = 0; i < o->inner; i++) TRY(gln_grouped_gemm(ctx, a));
        TRY(gln_synchronize(ctx));
        ms[r] = (now_s() - t0) * 1e3 / o->inner;
    }
    qsort(ms, (size_t)o->repeat, sizeof(double), cmp_double);
    const double med = ms[o->repeat / 2];
    free(ms);
    return med;
}

/* The three stages of one shape in one split set (the weights and outputs shared by the sets). */
static void run_splits(gln_context_t *ctx, const shape_t *s, bench_splits_t kind, gln_tensor_t *w, gln_tensor_t *dw,
                       gln_tensor_t y, gln_tensor_t dx, const opts_t *o) {
    const int32_t E = s->experts;
    const int64_t M = (int64_t)E * s->tokens, K = s->k, N = s->n;
    int64_t *splits = malloc(sizeof(int64_t) * (size_t)E);
    bench_make_splits(kind, splits, E, s->tokens);
    void *splits_dev = NULL;
    TRY(gln_malloc(ctx, sizeof(int64_t) * (size_t)E, &splits_dev));
    TRY(gln_memcpy(ctx, splits_dev, splits, sizeof(int64_t) * (size_t)E, GLN_COPY_HOST_TO_BACKEND));
    const int64_t *sp = o->host_splits ? splits : splits_dev;
    const int on_dev = !o->host_splits;
    gln_tensor_t xq = grouped_block(ctx, E, splits, M, K, o->pow2, 11);
    gln_tensor_t dyq = grouped_block(ctx, E, splits, M, N, o->pow2, 21);
    gln_grouped_tensor_t gx = {E, sp, on_dev, xq}, gdy = {E, sp, on_dev, dyq};
    gln_grouped_tensor_t gy = {E, sp, on_dev, y}, gdx = {E, sp, on_dev, dx};
    gln_grouped_gemm_args_t st[3];
    for (int i = 0; i < 3; i++) st[i] = (gln_grouped_gemm_args_t)GLN_GROUPED_GEMM_ARGS_INIT, st[i].block_scales_pow2 = o->pow2;
    st[0].layout = GLN_LAYOUT_TN, st[0].a_list = w, st[0].b = &gx, st[0].d_grouped = &gy;
    st[1].layout = GLN_LAYOUT_NN, st[1].a_list = w, st[1].b = &gdy, st[1].d_grouped = &gdx;
    st[2].layout = GLN_LAYOUT_NT, st[2].a_grouped = &gx, st[2].b = &gdy, st[2].d_list = dw, st[2].accumulate = 1;
    static const char *names[3] = {"fprop", "dgrad", "wgrad"};
    const double flops = 2.0 * (double)M * (double)N * (double)K;
    for (int i = 0; i < 3; i++) {
        const double ms = time_stage(ctx, &st[i], o);
        const double tf = flops / (ms * 1e-3) / 1e12;
        printf("%-11s %-7s %-6s %-5s | %9.3f %8.1f %5.0f\n", s->name, bench_splits_names[kind], o->pow2 ? "pow2" : "fp32",
               names[i], ms, tf, 100.0 * tf / 1560.0);
        fflush(stdout);
    }
    tensor_free(ctx, &xq), tensor_free(ctx, &dyq);
    gln_free(ctx, splits_dev);
    free(splits);
}

static void run_shape(gln_context_t *ctx, const shape_t *s, const opts_t *o) {
    const int32_t E = s->experts;
    const int64_t M = (int64_t)E * s->tokens, K = s->k, N = s->n;
    gln_tensor_t *w = calloc((size_t)E, sizeof *w), *dw = calloc((size_t)E, sizeof *dw);
    for (int32_t i = 0; i < E; i++) {
        w[i] = weight_block(ctx, N, K, o->pow2, 100 + 4 * (uint64_t)i);
        dw[i] = gln_tensor_make(GLN_DTYPE_FP32, N, K, device_random(ctx, GLN_DTYPE_FP32, (size_t)(N * K), 1));
    }
    gln_tensor_t y = gln_tensor_make(GLN_DTYPE_BF16, M, N, device_random(ctx, GLN_DTYPE_BF16, (size_t)(M * N), 2));
    gln_tensor_t dx = gln_tensor_make(GLN_DTYPE_BF16, M, K, device_random(ctx, GLN_DTYPE_BF16, (size_t)(M * K), 3));
    for (int k = 0; k < SPLITS_COUNT_; k++)
        if (o->splits_on[k]) run_splits(ctx, s, (bench_splits_t)k, w, dw, y, dx, o);
    for (int32_t i = 0; i < E; i++) tensor_free(ctx, &w[i]), gln_free(ctx, dw[i].data);
    gln_free(ctx, y.data), gln_free(ctx, dx.data);
    free(w), free(dw);
}

int main(int argc, char **argv) {
    opts_t o = {20, 3, 5, 0, 0, {0}};
    o.splits_on[SPLITS_UNIFORM] = o.splits_on[SPLITS_ROUTER] = 1; /* the aligned reference and a router's counts */
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) o.repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) o.warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--inner") && i + 1 < argc) o.inner = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--pow2")) o.pow2 = 1;
        else if (!strcmp(argv[i], "--host-splits")) o.host_splits = 1;
        else if (!strcmp(argv[i], "--splits") && i + 1 < argc) {
            if (!bench_splits_parse(argv[++i], o.splits_on)) return 2;
        } else {
            fprintf(stderr, "usage: %s [--repeat N] [--warmup N] [--inner N] [--shape NAME] [--pow2] [--host-splits]"
                            " [--splits uniform|zipf|empty|router|random|all]\n",
                    argv[0]);
            return 2;
        }
    }
    if (o.repeat < 1) o.repeat = 1;
    if (o.inner < 1) o.inner = 1;
    gln_context_t *ctx = bench_cuda_context();
    printf("%-11s %-7s %-6s %-5s | %9s %8s %5s\n", "shape", "splits", "scales", "stage", "ms", "TFLOP/s", "%fp8");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        if (!only || !strcmp(only, shapes[s].name)) run_shape(ctx, &shapes[s], &o);
    gln_context_destroy(ctx);
    return 0;
}
