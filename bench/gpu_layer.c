/* GPU grouped linear layer benchmark: one training step of the layer — forward, then backward
 * with dgrad, wgrad fused into the FP32 main_grad and dbias — on the CUDA backend through the
 * public API, quantization included, for four MoE shapes (Mixtral FC1, DeepSeek-like, Qwen3-like,
 * DeepGEMM's), each with the split sets of bench_util.h — uniform; Zipf-skewed and partly empty
 * in multiples of 16; Zipf as a router gives it (unrounded, empty experts); random unaligned
 * counts — and every recipe.
 *
 * The weights are one packed bf16 buffer the benchmark owns (single_grouped_weight; random
 * values set up on the device, shared by the recipes of a shape), main_grad one packed FP32
 * buffer, fused; the grouped path reads the splits from device memory (or from the host with
 * --split-path, which runs the per-expert calls).  Weights are quantized on every step
 * (microbatch flag unset, as TE without is_first_microbatch).  FLOPs = 6 · rows · K · N.
 * A step is timed between two device synchronisations; the figure is the median of `repeat`
 * steps after `warmup`.
 *
 * Columns: ms, TFLOP/s, %roof — the step's floor over its time: the larger of the FLOPs at
 * 800 TFLOP/s (bf16, and MXFP8, emulated on bf16 tensor cores) or 1560 (the FP8 recipes) and the
 * bf16 layer's minimum bytes at 4.25 TB/s (x, W, y, dy, dx once per GEMM, main_grad read and
 * written; Qwen3-like: 0.63 ms) — and, with --peer FILE, x torch: the torch step's time over
 * ours (peer_torch.py --out FILE: autograd over _grouped_mm plus the main_grad add for bf16, the
 * rowwise _scaled_grouped_mm step for the FP8 recipes); xunif: the cell's time over the same
 * shape, recipe and rows in uniform splits (the performance promise: any split a router gives
 * within 1.15× of it; uniform is always timed).
 *
 * GLN_CUDA_GROUPED_LOOP=1 makes the grouped GEMMs per-expert cuBLASLt loops; GLN_CUTLASS_TILES
 * forces a tile regime.  The default table (five split sets) runs in about two minutes on an
 * H200; --quick: uniform splits, 3 steps after 1.
 *
 * Clocks: the H200 holds 1980 MHz only for the first fraction of a second of load; sustained
 * steps of these shapes reach its 700 W power limit and run at ~1.3–1.6 GHz (nvidia-smi during
 * 60-step runs, bench/RESULTS.md 2026-12-04, runs at ee03b23).  A figure therefore depends on how
 * long the device has been busy: --quick (4 steps) and the first recipes of a table read high,
 * later recipes of the full table lower.  For sustained throughput, give a long --warmup (e.g.
 * --warmup 40 --repeat 20); compare recipes at the same duty cycle.
 *
 * --forward-only times the training forward alone (a saved context is made and released
 * unused); FLOPs are then 2 · rows · K · N and the floor the forward's.
 *
 * --cached-weights: gradient accumulation over microbatches, as Megatron runs it with TE's
 * is_first_microbatch — the first (warm-up) step is GLN_MICROBATCH_FIRST (weights quantized into
 * the cache, main_grad overwritten), every timed step GLN_MICROBATCH_NEXT (cached quantized
 * weights, main_grad accumulated).  The step then carries no weight quantization: the figure is
 * what the FP8 GEMMs gain once the weight cast is amortized over the microbatches.
 *
 * usage: gpu_layer [--repeat N] [--warmup N] [--shape NAME] [--recipe NAME]
 *                  [--splits uniform|zipf|empty|router|random|all]
 *                  [--bias] [--split-path] [--forward-only] [--cached-weights] [--peer FILE]
 *                  [--quick]   (exit 77 without a GPU) */
#include "bench_util.h"

typedef struct shape {
    const char *name;
    int32_t experts;
    int64_t tokens, k, n;
} shape_t;

static const shape_t shapes[] = {
    {"mixtral-fc1", 8, 4096, 4096, 14336},
    {"deepseek", 32, 512, 7168, 2048},
    {"qwen3", 128, 128, 2048, 768},
    {"deepgemm", 8, 4096, 7168, 4096},
};

static const struct {
    const char *name;
    gln_recipe_t recipe;
    double peak; /* tensor-core FLOP/s of the recipe's GEMMs on the H200 */
} recipes[] = {{"bf16", GLN_RECIPE_NONE, 800e12},
               {"fp8-current", GLN_RECIPE_FP8_CURRENT, 1560e12},
               {"fp8-delayed", GLN_RECIPE_FP8_DELAYED, 1560e12},
               {"mxfp8", GLN_RECIPE_MXFP8, 800e12},
               {"fp8-block", GLN_RECIPE_FP8_BLOCK, 1560e12}};
#define NRECIPES (sizeof recipes / sizeof recipes[0])

/* The buffers of one shape, shared by its recipes. */
typedef struct buffers {
    void *w, *b, *mg, *x, *dy, *splits_dev;
    int64_t *splits;
} buffers_t;

typedef struct opts {
    int bias, split_path, forward_only, cached_weights, warmup, repeat;
} opts_t;

/* The bf16 layer's minimum bytes (see the top of the file); live: experts with rows. */
static double layer_bytes(const shape_t *s, int live, int forward_only) {
    const double M = (double)s->experts * (double)s->tokens, K = (double)s->k, N = (double)s->n;
    const double w = live * N * K * 2, act = M * K * 2 + M * N * 2;
    return forward_only ? w + act : 2 * (w + act) + act + live * N * K * 8;
}

/* Median seconds of one step for each split set in `on` (t[k] for set k). */
static void time_steps(gln_context_t *ctx, const shape_t *s, buffers_t *bf, gln_recipe_t recipe, const opts_t *o,
                       const int on[SPLITS_COUNT_], double t_out[SPLITS_COUNT_]) {
    gln_grouped_linear_config_t cfg = GLN_GROUPED_LINEAR_CONFIG_INIT;
    cfg.num_experts = s->experts;
    cfg.in_features = s->k;
    cfg.out_features = s->n;
    cfg.bias = o->bias;
    cfg.recipe = recipe;
    cfg.path = o->split_path ? GLN_PATH_SPLIT : GLN_PATH_GROUPED;
    cfg.fuse_wgrad_accumulation = 1;
    cfg.single_grouped_weight = 1;
    cfg.params.weight_packed = bf->w;
    cfg.params.main_grad_packed = bf->mg;
    if (o->bias) cfg.single_grouped_bias = 1, cfg.params.bias_packed = bf->b;
    gln_grouped_linear_t *layer = NULL;
    TRY(gln_grouped_linear_create(ctx, &cfg, &layer));
    const int64_t rows = s->experts * s->tokens;
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, rows, s->k, bf->x);
    gln_tensor_t dy = gln_tensor_make(GLN_DTYPE_BF16, rows, s->n, bf->dy);
    double *t = malloc((size_t)o->repeat * sizeof *t);
    if (!t) exit(1);
    for (int sp = 0; sp < SPLITS_COUNT_; sp++) {
        if (!on[sp]) continue;
        bench_make_splits((bench_splits_t)sp, bf->splits, s->experts, s->tokens);
        TRY(gln_memcpy(ctx, bf->splits_dev, bf->splits, (size_t)s->experts * sizeof(int64_t),
                       GLN_COPY_HOST_TO_BACKEND));
        for (int r = -o->warmup; r < o->repeat; r++) {
            gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
            gln_tensor_t y = gln_tensor_make(GLN_DTYPE_BF16, rows, s->n, NULL);
            gln_tensor_t dx = gln_tensor_make(GLN_DTYPE_BF16, rows, s->k, NULL);
            fa.x = &x;
            fa.m_splits = o->split_path ? bf->splits : (const int64_t *)bf->splits_dev;
            fa.splits_on_backend = !o->split_path;
            fa.y = &y;
            if (o->cached_weights) fa.microbatch = r == -o->warmup ? GLN_MICROBATCH_FIRST : GLN_MICROBATCH_NEXT;
            gln_grouped_linear_saved_t *saved = NULL;
            TRY(gln_synchronize(ctx));
            const double t0 = now_s();
            TRY(gln_grouped_linear_forward(layer, &fa, &saved));
            if (!o->forward_only) TRY(gln_grouped_linear_backward(saved, &dy, &dx));
            TRY(gln_synchronize(ctx));
            if (r >= 0) t[r] = now_s() - t0;
            TRY(gln_grouped_linear_saved_release(saved));
        }
        qsort(t, (size_t)o->repeat, sizeof *t, cmp_double);
        t_out[sp] = t[o->repeat / 2];
    }
    free(t);
    TRY(gln_grouped_linear_destroy(layer));
}

int main(int argc, char **argv) {
    opts_t o = {0, 0, 0, 0, 1, 5};
    int quick = 0, on[SPLITS_COUNT_] = {1, 1, 1, 1, 1};
    const char *only_shape = NULL, *only_recipe = NULL, *peer = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) o.repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) o.warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) only_shape = argv[++i];
        else if (!strcmp(argv[i], "--recipe") && i + 1 < argc) only_recipe = argv[++i];
        else if (!strcmp(argv[i], "--peer") && i + 1 < argc) peer = argv[++i];
        else if (!strcmp(argv[i], "--splits") && i + 1 < argc) {
            if (!bench_splits_parse(argv[++i], on)) return 2;
        } else if (!strcmp(argv[i], "--bias")) o.bias = 1;
        else if (!strcmp(argv[i], "--split-path")) o.split_path = 1;
        else if (!strcmp(argv[i], "--forward-only")) o.forward_only = 1;
        else if (!strcmp(argv[i], "--cached-weights")) o.cached_weights = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            fprintf(stderr, "usage: %s [--repeat N] [--warmup N] [--shape NAME] [--recipe NAME] "
                            "[--splits uniform|zipf|empty|router|random|all] [--bias] [--split-path] [--forward-only] [--cached-weights] "
                            "[--peer FILE] "
                            "[--quick]\n", argv[0]);
            return 2;
        }
    }
    if (quick) o.repeat = 3, o.warmup = 1, on[1] = on[2] = on[3] = on[4] = 0;
    on[SPLITS_UNIFORM] = 1; /* every cell's reference: the same rows in uniform aligned splits */
    if (o.repeat < 1 || o.warmup < 0) return 2;
    if (o.cached_weights && o.warmup < 1) o.warmup = 1; /* the FIRST microbatch fills the cache */
    gln_context_t *ctx = bench_cuda_context();
    printf("# layer %s (fused FP32 main_grad, quantization included%s), %s path, %s, bias=%d; %%roof: floor / time\n",
           o.forward_only ? "training forward" : "forward + backward",
           o.cached_weights ? "; weights cached: microbatch NEXT" : "",
           o.split_path ? "split" : "grouped (device splits)",
           bench_loop_forced() ? "GEMM loop forced" : "default GEMM dispatch", o.bias);
    printf("%-11s %-7s %-12s | %9s %8s %5s %6s %6s\n", "shape", "splits", "recipe", "ms", "TFLOP/s", "%roof", "xunif",
           "xtorch");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        if (only_shape && strcmp(only_shape, s->name)) continue;
        const int64_t rows = s->experts * s->tokens;
        const size_t wn = (size_t)s->experts * (size_t)s->n * (size_t)s->k;
        buffers_t bf;
        memset(&bf, 0, sizeof bf);
        bf.w = device_random_fast(ctx, GLN_DTYPE_BF16, wn, 11);
        bf.mg = device_random_fast(ctx, GLN_DTYPE_FP32, wn, 0);
        bf.b = device_random_fast(ctx, GLN_DTYPE_BF16, (size_t)s->experts * (size_t)s->n, 12);
        bf.x = device_random_fast(ctx, GLN_DTYPE_BF16, (size_t)(rows * s->k), 7);
        bf.dy = device_random_fast(ctx, GLN_DTYPE_BF16, (size_t)(rows * s->n), 8);
        bf.splits = malloc((size_t)s->experts * sizeof *bf.splits);
        if (!bf.splits) exit(1);
        TRY(gln_malloc(ctx, (size_t)s->experts * sizeof(int64_t), &bf.splits_dev));
        for (size_t r = 0; r < NRECIPES; r++) {
            if (only_recipe && strcmp(only_recipe, recipes[r].name)) continue;
            double t[SPLITS_COUNT_] = {0};
            time_steps(ctx, s, &bf, recipes[r].recipe, &o, on, t);
            for (int sp = 0; sp < SPLITS_COUNT_; sp++) {
                if (!on[sp]) continue;
                bench_make_splits((bench_splits_t)sp, bf.splits, s->experts, s->tokens);
                int live = 0;
                for (int32_t e = 0; e < s->experts; e++) live += bf.splits[e] > 0;
                const double flops = (o.forward_only ? 2.0 : 6.0) * (double)rows * (double)s->k * (double)s->n;
                const double roof = bench_floor_s(flops, recipes[r].peak, layer_bytes(s, live, o.forward_only));
                const double tp = bench_peer_seconds(peer, s->name, bench_splits_names[sp],
                                                     r == 0 ? "bf16" : "fp8", o.forward_only ? "forward" : "layer");
                char xt[16] = "-";
                if (tp > 0 && (r == 0 || r == 1)) snprintf(xt, sizeof xt, "%.2f", tp / t[sp]);
                /* xunif: this cell's time over the same shape, recipe and rows in uniform splits */
                printf("%-11s %-7s %-12s | %9.3f %8.1f %5.0f %6.2f %6s\n", s->name, bench_splits_names[sp],
                       recipes[r].name, t[sp] * 1e3, flops / t[sp] * 1e-12, 100.0 * roof / t[sp],
                       t[sp] / t[SPLITS_UNIFORM], xt);
                fflush(stdout);
            }
        }
        TRY(gln_free(ctx, bf.w));
        TRY(gln_free(ctx, bf.mg));
        TRY(gln_free(ctx, bf.b));
        TRY(gln_free(ctx, bf.x));
        TRY(gln_free(ctx, bf.dy));
        TRY(gln_free(ctx, bf.splits_dev));
        free(bf.splits);
    }
    gln_context_destroy(ctx);
    return 0;
}
