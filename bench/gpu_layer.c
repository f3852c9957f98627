/* GPU grouped linear layer benchmark: one training step of the layer — forward, then backward
 * with dgrad, wgrad fused into the FP32 main_grad and dbias — on the CUDA backend through the
 * public API, quantization included, for the MoE shapes of PERFORMANCE.md and every recipe.
 *
 * The layer owns bf16 weights (and biases with --bias), its main_grad is FP32 and fused; the
 * grouped path reads the splits from device memory (or from the host with --split-path, which
 * runs the per-expert calls).  Weights are quantized on every step (microbatch flag unset, as
 * TE without is_first_microbatch).  FLOPs = 6 · rows · K · N (fprop + dgrad + wgrad).  A step is
 * timed between two device synchronisations; the figure is the median of `repeat` steps after
 * `warmup`.  GLN_CUDA_GROUPED_LOOP=1 in the environment makes the grouped GEMMs per-expert
 * cuBLASLt loops (the state before the CUTLASS kernels).
 *
 * --forward-only times the training forward alone (a saved context is made and released
 * unused); FLOPs are then 2 · rows · K · N.
 *
 * usage: gpu_layer [--repeat N] [--warmup N] [--shape NAME] [--recipe NAME] [--bias] [--split-path]
 *                  [--forward-only]   (exit 77 without a GPU) */
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
};

static const struct {
    const char *name;
    gln_recipe_t recipe;
} recipes[] = {{"bf16", GLN_RECIPE_NONE},
               {"fp8-current", GLN_RECIPE_FP8_CURRENT},
               {"fp8-delayed", GLN_RECIPE_FP8_DELAYED},
               {"mxfp8", GLN_RECIPE_MXFP8},
               {"fp8-block", GLN_RECIPE_FP8_BLOCK}};
#define NRECIPES (sizeof recipes / sizeof recipes[0])

/* Median seconds of one forward + backward step. */
static double time_step(gln_context_t *ctx, const shape_t *s, gln_recipe_t recipe, int bias, int split_path,
                        int forward_only, int warmup, int repeat) {
    gln_grouped_linear_config_t cfg = GLN_GROUPED_LINEAR_CONFIG_INIT;
    cfg.num_experts = s->experts;
    cfg.in_features = s->k;
    cfg.out_features = s->n;
    cfg.bias = bias;
    cfg.recipe = recipe;
    cfg.path = split_path ? GLN_PATH_SPLIT : GLN_PATH_GROUPED;
    cfg.fuse_wgrad_accumulation = 1;
    gln_grouped_linear_t *layer = NULL;
    TRY(gln_grouped_linear_create(ctx, &cfg, &layer));
    const int64_t rows = s->experts * s->tokens;
    int64_t *splits = malloc((size_t)s->experts * sizeof *splits);
    if (!splits) exit(1);
    for (int32_t i = 0; i < s->experts; i++) splits[i] = s->tokens;
    void *splits_dev = NULL;
    TRY(gln_malloc(ctx, (size_t)s->experts * sizeof *splits, &splits_dev));
    TRY(gln_memcpy(ctx, splits_dev, splits, (size_t)s->experts * sizeof *splits, GLN_COPY_HOST_TO_BACKEND));
    void *xd = device_random(ctx, GLN_DTYPE_BF16, (size_t)(rows * s->k), 7), *dyd = device_random(ctx, GLN_DTYPE_BF16, (size_t)(rows * s->n), 8);
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, rows, s->k, xd);
    gln_tensor_t dy = gln_tensor_make(GLN_DTYPE_BF16, rows, s->n, dyd);
    double *t = malloc((size_t)repeat * sizeof *t);
    if (!t) exit(1);
    for (int r = -warmup; r < repeat; r++) {
        gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
        gln_tensor_t y = gln_tensor_make(GLN_DTYPE_BF16, rows, s->n, NULL);
        gln_tensor_t dx = gln_tensor_make(GLN_DTYPE_BF16, rows, s->k, NULL);
        fa.x = &x;
        fa.m_splits = split_path ? splits : (const int64_t *)splits_dev;
        fa.splits_on_backend = !split_path;
        fa.y = &y;
        gln_grouped_linear_saved_t *saved = NULL;
        TRY(gln_synchronize(ctx));
        const double t0 = now_s();
        TRY(gln_grouped_linear_forward(layer, &fa, &saved));
        if (!forward_only) TRY(gln_grouped_linear_backward(saved, &dy, &dx));
        TRY(gln_synchronize(ctx));
        if (r >= 0) t[r] = now_s() - t0;
        TRY(gln_grouped_linear_saved_release(saved));
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    const double m = t[repeat / 2];
    free(t);
    TRY(gln_free(ctx, xd));
    TRY(gln_free(ctx, dyd));
    TRY(gln_free(ctx, splits_dev));
    free(splits);
    TRY(gln_grouped_linear_destroy(layer));
    return m;
}

int main(int argc, char **argv) {
    int repeat = 10, warmup = 2, bias = 0, split_path = 0, forward_only = 0;
    const char *only_shape = NULL, *only_recipe = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) only_shape = argv[++i];
        else if (!strcmp(argv[i], "--recipe") && i + 1 < argc) only_recipe = argv[++i];
        else if (!strcmp(argv[i], "--bias")) bias = 1;
        else if (!strcmp(argv[i], "--split-path")) split_path = 1;
        else if (!strcmp(argv[i], "--forward-only")) forward_only = 1;
        else {
            fprintf(stderr, "usage: %s [--repeat N] [--warmup N] [--shape NAME] [--recipe NAME] [--bias] [--split-path] "
                            "[--forward-only]\n", argv[0]);
            return 2;
        }
    }
    if (repeat < 1 || warmup < 0) return 2;
    gln_context_t *ctx = bench_cuda_context();
    printf("# layer %s (fused FP32 main_grad, quantization included), %s path, %s, bias=%d\n",
           forward_only ? "training forward" : "forward + backward", split_path ? "split" : "grouped (device splits)",
           bench_loop_forced() ? "GEMM loop forced" : "default GEMM dispatch", bias);
    printf("%-12s %-12s | %9s %9s\n", "shape", "recipe", "ms", "TFLOP/s");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        if (only_shape && strcmp(only_shape, s->name)) continue;
        for (size_t r = 0; r < NRECIPES; r++) {
            if (only_recipe && strcmp(only_recipe, recipes[r].name)) continue;
            const double ms = time_step(ctx, s, recipes[r].recipe, bias, split_path, forward_only, warmup, repeat);
            const double flops = (forward_only ? 2.0 : 6.0) * (double)s->experts * (double)s->tokens * (double)s->k * (double)s->n;
            printf("%-12s %-12s | %9.3f %9.1f\n", s->name, recipes[r].name, ms * 1e3, flops / ms * 1e-12);
            fflush(stdout);
        }
    }
    gln_context_destroy(ctx);
    return 0;
}
