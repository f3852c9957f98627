/* GPU grouped GEMM benchmark: the three GEMMs of a grouped linear layer — fprop (TN), dgrad (NN),
 * wgrad into an FP32 main_grad (NT) — on the CUDA backend, through the public API only, for the
 * MoE shapes of PERFORMANCE.md.
 *
 * Recipes: bf16 operands, and per-tensor FP8 (E4M3 activations and weights, E4M3 or — HYBRID —
 * E5M2 gradients) for fprop and dgrad; the FP8 operand bytes are random finite codes with decode
 * scale 1 (the time of a GEMM does not depend on its values), so no quantization is timed here.
 * Splits: uniform, or Zipf-skewed (expert i gets a share ∝ 1/(i+1), some experts empty), held on
 * the host or on the device (--device-splits: the graph-safe path the layer's grouped mode uses).
 *
 * Each sample runs a stage `inner` times back to back between two device synchronisations and
 * divides (so launch overhead counts, as it does in a training step); the figure is the median
 * of `repeat` samples after `warmup`.  GLN_CUDA_GROUPED_LOOP=1 in the environment times the
 * per-expert cuBLASLt loop instead of the CUTLASS kernels.  Peers: peer_torch.py, same session.
 *
 * usage: gpu_grouped_gemm [--repeat N] [--warmup N] [--inner N] [--shape NAME] [--recipe bf16|e4m3|hybrid]
 *                         [--zipf] [--device-splits]      (exit 77 without a GPU) */
#include "bench_util.h"

typedef struct shape {
    const char *name;
    int32_t experts;
    int64_t tokens, k, n; /* tokens per expert (on average), hidden (K_in), expert FFN (K_out) */
} shape_t;

static const shape_t shapes[] = {
    {"mixtral-fc1", 8, 4096, 4096, 14336}, {"mixtral-fc2", 8, 4096, 14336, 4096},
    {"deepseek", 32, 512, 7168, 2048},     {"deepgemm", 8, 4096, 7168, 4096},
    {"qwen3", 128, 128, 2048, 768},
};

typedef enum recipe { R_BF16, R_E4M3, R_HYBRID } recipe_t;
static const char *recipe_names[] = {"bf16", "e4m3", "hybrid"};

typedef struct problem {
    shape_t s;
    recipe_t recipe;
    int64_t rows;             /* experts · tokens */
    int64_t *splits;          /* host */
    void *splits_dev;
    int device_splits;
    gln_tensor_t *w, *dw;     /* [E] weights [n, k] (FP8: with the transposed copy), wgrads fp32 */
    gln_grouped_tensor_t x, y, dy, dx;       /* operands of fprop / dgrad (FP8 recipes: FP8 x, dy) */
    gln_grouped_tensor_t xb, dyb;            /* bf16 x, dy for the wgrad */
    void *bufs[12];
} problem_t;

/* Zipf-like splits: expert i gets a share ∝ 1/(i+1) of the rows, rounded down to a multiple of 8
 * (so rows stay 16-byte aligned for the FP8 strides), the remainder to expert 0; the last
 * quarter of the experts gets nothing. */
static void zipf_splits(int64_t *splits, int32_t E, int64_t rows) {
    const int32_t live = E > 4 ? E - E / 4 : E;
    double h = 0;
    for (int32_t i = 0; i < live; i++) h += 1.0 / (i + 1);
    int64_t used = 0;
    for (int32_t i = 0; i < E; i++) {
        splits[i] = i < live ? (int64_t)((double)rows / h / (i + 1)) / 8 * 8 : 0;
        used += splits[i];
    }
    splits[0] += rows - used;
}

static gln_grouped_tensor_t grouped(const problem_t *p, void *data, int64_t cols, gln_dtype_t dt, void *scales) {
    gln_grouped_tensor_t g = {p->s.experts, p->device_splits ? p->splits_dev : p->splits, p->device_splits,
                              gln_tensor_make(dt, p->rows, cols, data)};
    if (scales) g.packed.scaling = GLN_SCALING_TENSOR, g.packed.scale_inv = scales;
    return g;
}

static void problem_init(gln_context_t *ctx, problem_t *p, const shape_t *s, recipe_t recipe, int zipf,
                         int device_splits) {
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->recipe = recipe;
    p->device_splits = device_splits;
    const int32_t E = s->experts;
    const int64_t M = E * s->tokens;
    p->rows = M;
    p->splits = malloc((size_t)E * sizeof *p->splits);
    p->w = malloc((size_t)E * sizeof *p->w);
    p->dw = malloc((size_t)E * sizeof *p->dw);
    if (!p->splits || !p->w || !p->dw) exit(1);
    for (int32_t i = 0; i < E; i++) p->splits[i] = s->tokens;
    if (zipf) zipf_splits(p->splits, E, M);
    TRY(gln_malloc(ctx, (size_t)E * sizeof(int64_t), &p->splits_dev));
    TRY(gln_memcpy(ctx, p->splits_dev, p->splits, (size_t)E * sizeof(int64_t), GLN_COPY_HOST_TO_BACKEND));
    const int fp8 = recipe != R_BF16;
    const gln_dtype_t wt = fp8 ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_BF16;
    const gln_dtype_t gt = recipe == R_HYBRID ? GLN_DTYPE_FP8_E5M2 : wt;
    const size_t wn = (size_t)s->n * (size_t)s->k, ws = fp8 ? 1 : 2;
    p->bufs[0] = device_random(ctx, wt, (size_t)E * wn, 1);
    p->bufs[1] = device_random(ctx, GLN_DTYPE_BF16, (size_t)M * s->k, 2);
    p->bufs[2] = device_random(ctx, GLN_DTYPE_BF16, (size_t)M * s->n, 3);
    TRY(gln_malloc(ctx, (size_t)M * s->n * 2, &p->bufs[3]));
    TRY(gln_malloc(ctx, (size_t)M * s->k * 2, &p->bufs[4]));
    p->bufs[5] = device_random(ctx, GLN_DTYPE_FP32, (size_t)E * wn, 0);
    void *scales = NULL;
    if (fp8) {
        float *ones = malloc((size_t)(E + 1) * sizeof(float));
        for (int32_t i = 0; i <= E; i++) ones[i] = 1.0f;
        TRY(gln_malloc(ctx, (size_t)(E + 1) * sizeof(float), &scales));
        TRY(gln_memcpy(ctx, scales, ones, (size_t)(E + 1) * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
        free(ones);
        p->bufs[6] = scales;
        p->bufs[7] = device_random(ctx, wt, (size_t)E * wn, 4);           /* Wᵀ copies */
        p->bufs[8] = device_random(ctx, wt, (size_t)M * s->k, 5);         /* x */
        p->bufs[9] = device_random(ctx, gt, (size_t)M * s->n, 6);         /* dy */
    }
    for (int32_t i = 0; i < E; i++) {
        const size_t off = (size_t)i * wn;
        p->w[i] = gln_tensor_make(wt, s->n, s->k, (char *)p->bufs[0] + off * ws);
        if (fp8) {
            p->w[i].scaling = GLN_SCALING_TENSOR;
            p->w[i].scale_inv = (float *)scales + E;
            p->w[i].col_data = (char *)p->bufs[7] + off;
            p->w[i].col_scale_inv = (float *)scales + E;
        }
        p->dw[i] = gln_tensor_make(GLN_DTYPE_FP32, s->n, s->k, (float *)p->bufs[5] + off);
    }
    p->xb = grouped(p, p->bufs[1], s->k, GLN_DTYPE_BF16, NULL);
    p->dyb = grouped(p, p->bufs[2], s->n, GLN_DTYPE_BF16, NULL);
    p->x = fp8 ? grouped(p, p->bufs[8], s->k, wt, scales) : p->xb;
    p->dy = fp8 ? grouped(p, p->bufs[9], s->n, gt, scales) : p->dyb;
    p->y = grouped(p, p->bufs[3], s->n, GLN_DTYPE_BF16, NULL);
    p->dx = grouped(p, p->bufs[4], s->k, GLN_DTYPE_BF16, NULL);
}

static void problem_free(gln_context_t *ctx, problem_t *p) {
    for (int i = 0; i < 12; i++) gln_free(ctx, p->bufs[i]);
    gln_free(ctx, p->splits_dev);
    free(p->splits), free(p->w), free(p->dw);
}

static void run_gemm(gln_context_t *ctx, problem_t *p, gln_gemm_layout_t layout) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = layout;
    if (layout == GLN_LAYOUT_TN) a.a_list = p->w, a.b = &p->x, a.d_grouped = &p->y;
    if (layout == GLN_LAYOUT_NN) a.a_list = p->w, a.b = &p->dy, a.d_grouped = &p->dx;
    /* wgrad into main_grad: bf16 operands, accumulated */
    if (layout == GLN_LAYOUT_NT) a.a_grouped = &p->xb, a.b = &p->dyb, a.d_list = p->dw, a.accumulate = 1;
    TRY(gln_grouped_gemm(ctx, &a));
}

/* Median seconds of one pass over `layouts`. */
static double time_layouts(gln_context_t *ctx, problem_t *p, const gln_gemm_layout_t *layouts, int nl, int warmup,
                           int repeat, int inner) {
    double *t = malloc((size_t)repeat * sizeof *t);
    if (!t) exit(1);
    for (int r = -warmup; r < repeat; r++) {
        TRY(gln_synchronize(ctx));
        const double t0 = now_s();
        for (int j = 0; j < inner; j++)
            for (int l = 0; l < nl; l++) run_gemm(ctx, p, layouts[l]);
        TRY(gln_synchronize(ctx));
        if (r >= 0) t[r] = (now_s() - t0) / inner;
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    const double m = t[repeat / 2];
    free(t);
    return m;
}

int main(int argc, char **argv) {
    int repeat = 20, warmup = 3, inner = 5, zipf = 0, device_splits = 0;
    const char *only = NULL;
    int recipes[3] = {1, 1, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--inner") && i + 1 < argc) inner = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--zipf")) zipf = 1;
        else if (!strcmp(argv[i], "--device-splits")) device_splits = 1;
        else if (!strcmp(argv[i], "--recipe") && i + 1 < argc) {
            const char *r = argv[++i];
            memset(recipes, 0, sizeof recipes);
            for (int k = 0; k < 3; k++) recipes[k] = !strcmp(r, recipe_names[k]);
            if (!recipes[0] && !recipes[1] && !recipes[2]) return 2;
        } else {
            fprintf(stderr,
                    "usage: %s [--repeat N] [--warmup N] [--inner N] [--shape NAME] [--recipe bf16|e4m3|hybrid]"
                    " [--zipf] [--device-splits]\n",
                    argv[0]);
            return 2;
        }
    }
    if (repeat < 1 || warmup < 0 || inner < 1) return 2;
    gln_context_t *ctx = bench_cuda_context();
    printf("# grouped GEMM, %s, %s splits (%s); ms and TFLOP/s (2·M·N·K per stage; wgrad: bf16 into fp32)\n",
           bench_loop_forced() ? "per-expert loop (GLN_CUDA_GROUPED_LOOP)" : "default dispatch",
           zipf ? "zipf" : "uniform", device_splits ? "device" : "host");
    printf("%-12s %-6s | %8s %7s | %8s %7s | %8s %7s | %8s %7s\n", "shape", "recipe", "fprop", "TF/s", "dgrad",
           "TF/s", "wgrad", "TF/s", "all 3", "TF/s");
    static const gln_gemm_layout_t stage[3][1] = {{GLN_LAYOUT_TN}, {GLN_LAYOUT_NN}, {GLN_LAYOUT_NT}};
    static const gln_gemm_layout_t all[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        if (only && strcmp(only, s->name)) continue;
        for (int r = 0; r < 3; r++) {
            if (!recipes[r]) continue;
            problem_t p;
            problem_init(ctx, &p, s, (recipe_t)r, zipf, device_splits);
            const double flops = 2.0 * (double)p.rows * (double)s->k * (double)s->n;
            double t[4];
            for (int st = 0; st < 3; st++) t[st] = time_layouts(ctx, &p, stage[st], 1, warmup, repeat, inner);
            t[3] = time_layouts(ctx, &p, all, 3, warmup, repeat, inner);
            printf("%-12s %-6s | %8.3f %7.1f | %8.3f %7.1f | %8.3f %7.1f | %8.3f %7.1f\n", s->name, recipe_names[r],
                   t[0] * 1e3, flops / t[0] * 1e-12, t[1] * 1e3, flops / t[1] * 1e-12, t[2] * 1e3,
                   flops / t[2] * 1e-12, t[3] * 1e3, 3 * flops / t[3] * 1e-12);
            fflush(stdout);
            problem_free(ctx, &p);
        }
    }
    gln_context_destroy(ctx);
    return 0;
}
