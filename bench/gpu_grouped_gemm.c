/* GPU grouped GEMM benchmark: the GEMMs of a grouped linear layer — fprop (TN), dgrad (NN),
 * wgrad into an FP32 main_grad (NT, bf16 operands; and, for the FP8 recipes, the FP8 wgrad from
 * the transposed copies) — on the CUDA backend, through the public API only, for the MoE shapes
 * of docs/performance.md (Mixtral FC1, DeepSeek-like, Qwen3-like, DeepGEMM's), each with uniform,
 * Zipf-skewed, partly empty, router-like (unaligned Zipf) and random splits (bench_util.h).
 *
 * Recipes: bf16 operands, and per-tensor FP8 (E4M3 activations and weights, E4M3 or — HYBRID —
 * E5M2 gradients); the FP8 operand bytes are random finite codes with decode scale 1 (the time of
 * a GEMM does not depend on its values), so no quantization is timed here.  Splits live on the
 * device by default (the graph-safe path the layer's grouped mode uses; --host-splits for host
 * ones, where the dispatcher may keep the per-expert loop for large experts).
 *
 * Per stage: ms, TFLOP/s (2·M·N·K; "all3" = fprop + dgrad + the recipe's wgrad, 6·M·N·K), the
 * share of the roofline reached (%roof: the larger of FLOPs at bf16 800 / FP8 1560 TFLOP/s and
 * the minimum bytes at 4.25 TB/s, over the time; the bytes count only the experts that have
 * rows, and main_grad read + written), and with --peer FILE the ratio to torch in the same
 * run (x torch: torch's time / ours; peer_torch.py --out FILE writes it: _grouped_mm for bf16,
 * _scaled_grouped_mm rowwise for FP8).
 *
 * Each sample runs a stage `inner` times back to back between two device synchronisations and
 * divides (launch overhead counts, as it does in a training step); the figure is the median of
 * `repeat` samples after `warmup`.  GLN_CUDA_GROUPED_LOOP=1 times the per-expert cuBLASLt loop;
 * GLN_CUTLASS_TILES=small|medium|large forces a tile regime.  The default table (4 shapes × 5
 * split sets × bf16 and e4m3) takes about 5/3 of the time of the former 3-set table (well under 4
 * minutes on an H200); --quick: uniform splits only, fewer samples.
 *
 * usage: gpu_grouped_gemm [--repeat N] [--warmup N] [--inner N] [--shape NAME] [--recipe bf16|e4m3|hybrid|all]
 *                         [--splits uniform|zipf|empty|router|random|all] [--host-splits] [--peer FILE] [--quick]
 *                         (exit 77 without a GPU) */
#include "bench_util.h"

typedef struct shape {
    const char *name;
    int32_t experts;
    int64_t tokens, k, n; /* tokens per expert (on average), hidden (K_in), expert FFN (K_out) */
    int in_table;         /* part of the default table */
} shape_t;

static const shape_t shapes[] = {
    {"mixtral-fc1", 8, 4096, 4096, 14336, 1}, {"deepseek", 32, 512, 7168, 2048, 1},
    {"qwen3", 128, 128, 2048, 768, 1},        {"deepgemm", 8, 4096, 7168, 4096, 1},
    {"mixtral-fc2", 8, 4096, 14336, 4096, 0},
};

typedef enum recipe { R_BF16, R_E4M3, R_HYBRID, R_COUNT_ } recipe_t;
static const char *recipe_names[] = {"bf16", "e4m3", "hybrid"};

enum { ST_FPROP, ST_DGRAD, ST_WGRAD, ST_WGRAD8, ST_ALL3, ST_COUNT_ };
static const char *stage_names[] = {"fprop", "dgrad", "wgrad", "wgrad8", "all3"};

typedef struct problem {
    shape_t s;
    recipe_t recipe;
    int64_t rows;             /* experts · tokens */
    int64_t *splits;          /* host */
    void *splits_dev;
    int device_splits;
    gln_tensor_t *w, *dw;     /* [E] weights [n, k] (FP8: with the transposed copy), wgrads fp32 */
    gln_grouped_tensor_t x, y, dy, dx;       /* operands of fprop / dgrad (FP8 recipes: FP8 x, dy) */
    gln_grouped_tensor_t xb, dyb;            /* bf16 x, dy for the bf16 wgrad */
    gln_grouped_tensor_t xc, dyc;            /* FP8 x, dy with their transposed copies (FP8 wgrad) */
    void *bufs[12];
} problem_t;

static gln_grouped_tensor_t grouped(const problem_t *p, void *data, int64_t cols, gln_dtype_t dt, void *scales) {
    gln_grouped_tensor_t g = {p->s.experts, p->device_splits ? p->splits_dev : p->splits, p->device_splits,
                              gln_tensor_make(dt, p->rows, cols, data)};
    if (scales) g.packed.scaling = GLN_SCALING_TENSOR, g.packed.scale_inv = scales;
    return g;
}

/* The operands; splits are set (and may be changed) by problem_splits. */
static void problem_init(gln_context_t *ctx, problem_t *p, const shape_t *s, recipe_t recipe, int device_splits) {
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
    TRY(gln_malloc(ctx, (size_t)E * sizeof(int64_t), &p->splits_dev));
    const int fp8 = recipe != R_BF16;
    const gln_dtype_t wt = fp8 ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_BF16;
    const gln_dtype_t gt = recipe == R_HYBRID ? GLN_DTYPE_FP8_E5M2 : wt;
    const size_t wn = (size_t)s->n * (size_t)s->k, ws = fp8 ? 1 : 2;
    p->bufs[0] = device_random_fast(ctx, wt, (size_t)E * wn, 1);
    p->bufs[1] = device_random_fast(ctx, GLN_DTYPE_BF16, (size_t)M * s->k, 2);
    p->bufs[2] = device_random_fast(ctx, GLN_DTYPE_BF16, (size_t)M * s->n, 3);
    TRY(gln_malloc(ctx, (size_t)M * s->n * 2, &p->bufs[3]));
    TRY(gln_malloc(ctx, (size_t)M * s->k * 2, &p->bufs[4]));
    p->bufs[5] = device_random_fast(ctx, GLN_DTYPE_FP32, (size_t)E * wn, 0);
    void *scales = NULL;
    if (fp8) {
        float *ones = malloc((size_t)(E + 1) * sizeof(float));
        for (int32_t i = 0; i <= E; i++) ones[i] = 1.0f;
        TRY(gln_malloc(ctx, (size_t)(E + 1) * sizeof(float), &scales));
        TRY(gln_memcpy(ctx, scales, ones, (size_t)(E + 1) * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
        free(ones);
        p->bufs[6] = scales;
        p->bufs[7] = device_random_fast(ctx, wt, (size_t)E * wn, 4);      /* Wᵀ copies */
        p->bufs[8] = device_random_fast(ctx, wt, (size_t)M * s->k, 5);    /* x */
        p->bufs[9] = device_random_fast(ctx, gt, (size_t)M * s->n, 6);    /* dy */
        p->bufs[10] = device_random_fast(ctx, wt, (size_t)M * s->k, 7);   /* x's transposed copies */
        p->bufs[11] = device_random_fast(ctx, gt, (size_t)M * s->n, 8);   /* dy's */
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
    if (fp8) { /* per-expert decode scales of the columnwise copies: device [E] */
        p->xc = p->x, p->dyc = p->dy;
        p->xc.packed.col_data = p->bufs[10], p->xc.packed.col_scale_inv = scales;
        p->dyc.packed.col_data = p->bufs[11], p->dyc.packed.col_scale_inv = scales;
    }
}

/* Install a split set (host array and its device copy; the grouped tensors point at both). */
static void problem_splits(gln_context_t *ctx, problem_t *p, bench_splits_t kind) {
    bench_make_splits(kind, p->splits, p->s.experts, p->s.tokens);
    TRY(gln_memcpy(ctx, p->splits_dev, p->splits, (size_t)p->s.experts * sizeof(int64_t), GLN_COPY_HOST_TO_BACKEND));
}

static void problem_free(gln_context_t *ctx, problem_t *p) {
    for (int i = 0; i < 12; i++) gln_free(ctx, p->bufs[i]);
    gln_free(ctx, p->splits_dev);
    free(p->splits), free(p->w), free(p->dw);
}

static void run_stage(gln_context_t *ctx, problem_t *p, int stage) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    switch (stage) {
    case ST_FPROP: a.layout = GLN_LAYOUT_TN, a.a_list = p->w, a.b = &p->x, a.d_grouped = &p->y; break;
    case ST_DGRAD: a.layout = GLN_LAYOUT_NN, a.a_list = p->w, a.b = &p->dy, a.d_grouped = &p->dx; break;
    /* wgrad into main_grad, accumulated: bf16 operands, or the FP8 transposed copies */
    case ST_WGRAD: a.layout = GLN_LAYOUT_NT, a.a_grouped = &p->xb, a.b = &p->dyb, a.d_list = p->dw; break;
    case ST_WGRAD8: a.layout = GLN_LAYOUT_NT, a.a_grouped = &p->xc, a.b = &p->dyc, a.d_list = p->dw; break;
    default: /* all three of the recipe */
        run_stage(ctx, p, ST_FPROP);
        run_stage(ctx, p, ST_DGRAD);
        run_stage(ctx, p, p->recipe == R_BF16 ? ST_WGRAD : ST_WGRAD8);
        return;
    }
    a.accumulate = a.layout == GLN_LAYOUT_NT;
    TRY(gln_grouped_gemm(ctx, &a));
}

/* Median seconds of one stage. */
static double time_stage(gln_context_t *ctx, problem_t *p, int stage, int warmup, int repeat, int inner) {
    double *t = malloc((size_t)repeat * sizeof *t);
    if (!t) exit(1);
    for (int r = -warmup; r < repeat; r++) {
        TRY(gln_synchronize(ctx));
        const double t0 = now_s();
        for (int j = 0; j < inner; j++) run_stage(ctx, p, stage);
        TRY(gln_synchronize(ctx));
        if (r >= 0) t[r] = (now_s() - t0) / inner;
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    const double m = t[repeat / 2];
    free(t);
    return m;
}

/* Minimum bytes of a stage: operands read once, outputs written once, main_grad read and written,
 * weights and main_grads only of the experts that have rows. */
static double stage_bytes(const problem_t *p, int stage) {
    const double M = (double)p->rows, K = (double)p->s.k, N = (double)p->s.n;
    int live = 0;
    for (int32_t i = 0; i < p->s.experts; i++) live += p->splits[i] > 0;
    const double fp8 = p->recipe != R_BF16, e = fp8 ? 1 : 2, wbytes = live * N * K * e;
    switch (stage) {
    case ST_FPROP: return M * K * e + wbytes + M * N * 2;
    case ST_DGRAD: return M * N * e + wbytes + M * K * 2;
    case ST_WGRAD: return M * N * 2 + M * K * 2 + live * N * K * 8;
    case ST_WGRAD8: return M * N + M * K + live * N * K * 8;
    default:
        return stage_bytes(p, ST_FPROP) + stage_bytes(p, ST_DGRAD) + stage_bytes(p, fp8 ? ST_WGRAD8 : ST_WGRAD);
    }
}

int main(int argc, char **argv) {
    int repeat = 8, warmup = 2, inner = 3, device_splits = 1, quick = 0;
    const char *only = NULL, *peer = NULL;
    int recipes[R_COUNT_] = {1, 1, 0}, splits_on[SPLITS_COUNT_] = {1, 1, 1, 1, 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--inner") && i + 1 < argc) inner = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--peer") && i + 1 < argc) peer = argv[++i];
        else if (!strcmp(argv[i], "--zipf")) bench_splits_parse("zipf", splits_on); /* old flag */
        else if (!strcmp(argv[i], "--device-splits")) device_splits = 1; /* the default now */
        else if (!strcmp(argv[i], "--host-splits")) device_splits = 0;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--splits") && i + 1 < argc) {
            if (!bench_splits_parse(argv[++i], splits_on)) return 2;
        } else if (!strcmp(argv[i], "--recipe") && i + 1 < argc) {
            const char *r = argv[++i];
            for (int k = 0; k < R_COUNT_; k++) recipes[k] = !strcmp(r, "all") || !strcmp(r, recipe_names[k]);
            if (!recipes[0] && !recipes[1] && !recipes[2]) return 2;
        } else {
            fprintf(stderr,
                    "usage: %s [--repeat N] [--warmup N] [--inner N] [--shape NAME] [--recipe bf16|e4m3|hybrid|all]"
                    " [--splits uniform|zipf|empty|router|random|all] [--host-splits] [--peer FILE] [--quick]\n",
                    argv[0]);
            return 2;
        }
    }
    if (quick) repeat = 3, warmup = 1, inner = 2, bench_splits_parse("uniform", splits_on);
    if (repeat < 1 || warmup < 0 || inner < 1) return 2;
    gln_context_t *ctx = bench_cuda_context();
    printf("# grouped GEMM, %s, %s splits; per stage ms, TFLOP/s, %%roof (bf16 800 / fp8 1560 TFLOP/s or %.2f TB/s),"
           " x torch (--peer)\n",
           bench_loop_forced() ? "per-expert loop (GLN_CUDA_GROUPED_LOOP)" : "default dispatch",
           device_splits ? "device" : "host", BENCH_BW * 1e-12);
    printf("%-11s %-7s %-6s %-6s | %8s %7s %5s %6s\n", "shape", "splits", "recipe", "stage", "ms", "TF/s", "%roof",
           "xtorch");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        if (only ? strcmp(only, s->name) != 0 : !s->in_table) continue;
        for (int r = 0; r < R_COUNT_; r++) {
            if (!recipes[r]) continue;
            problem_t p;
            problem_init(ctx, &p, s, (recipe_t)r, device_splits);
            const double peak = r == R_BF16 ? 800e12 : 1560e12;
            for (int sp = 0; sp < SPLITS_COUNT_; sp++) {
                if (!splits_on[sp]) continue;
                problem_splits(ctx, &p, (bench_splits_t)sp);
                for (int st = 0; st < ST_COUNT_; st++) {
                    if (st == ST_WGRAD8 && r == R_BF16) continue;
                    const double flops = (st == ST_ALL3 ? 6.0 : 2.0) * (double)p.rows * (double)s->k * (double)s->n;
                    const double t = time_stage(ctx, &p, st, warmup, repeat, inner);
                    const double roof = bench_floor_s(flops, peak, stage_bytes(&p, st));
                    const double tp = bench_peer_seconds(peer, s->name, bench_splits_names[sp],
                                                         r == R_BF16 ? "bf16" : "fp8", stage_names[st]);
                    char xt[16] = "-";
                    if (tp > 0) snprintf(xt, sizeof xt, "%.2f", tp / t);
                    printf("%-11s %-7s %-6s %-6s | %8.3f %7.1f %5.0f %6s\n", s->name, bench_splits_names[sp],
                           recipe_names[r], stage_names[st], t * 1e3, flops / t * 1e-12, 100.0 * roof / t, xt);
                    fflush(stdout);
                }
            }
            problem_free(ctx, &p);
        }
    }
    gln_context_destroy(ctx);
    return 0;
}
