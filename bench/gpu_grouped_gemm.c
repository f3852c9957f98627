/* GPU grouped GEMM benchmark: the three GEMMs of a grouped linear layer (fprop TN, dgrad NN,
 * wgrad NT) on the CUDA backend, bf16 operands, FP32 accumulation, for the MoE shapes of
 * PERFORMANCE.md.  Public API only.  Times are medians of timed runs after warm-up, with a
 * device synchronisation around each run (these shapes run for milliseconds, so the host
 * clock is adequate).  Peers (torch loop / torch._grouped_mm) are measured by peer_torch.py in
 * the same session; bench/RESULTS.md records both.
 *
 * usage: gpu_grouped_gemm [--repeat N] [--warmup N] [--shape NAME]   (exit 77 without a GPU) */
#define _POSIX_C_SOURCE 200809L
#include <grouplin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    const char *name;
    int32_t experts;
    int64_t tokens, k, n; /* tokens per expert, hidden (K_in), expert FFN (K_out) */
} shape_t;

static const shape_t shapes[] = {
    {"mixtral-fc1", 8, 4096, 4096, 14336},
    {"mixtral-fc2", 8, 4096, 14336, 4096},
    {"deepseek", 32, 512, 7168, 2048},
    {"qwen3", 128, 128, 2048, 768},
};

#define TRY(expr)                                                                               \
    do {                                                                                        \
        gln_status_t st_ = (expr);                                                              \
        if (st_ != GLN_STATUS_SUCCESS) {                                                        \
            fprintf(stderr, "%s: %s (%s)\n", #expr, gln_status_string(st_), gln_last_error());  \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A device buffer of `count` bf16 values, uniform in [-1, 1). */
static void *device_random_bf16(gln_context_t *ctx, size_t count, uint64_t seed) {
    uint16_t *host = malloc(count * sizeof *host);
    if (!host) exit(1);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < count; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        host[i] = gln_fp32_to_bf16((float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0));
    }
    void *dev = NULL;
    TRY(gln_malloc(ctx, count * sizeof *host, &dev));
    TRY(gln_memcpy(ctx, dev, host, count * sizeof *host, GLN_COPY_HOST_TO_BACKEND));
    free(host);
    return dev;
}

typedef struct problem {
    shape_t s;
    int64_t *splits;          /* host */
    gln_tensor_t *w, *dw;     /* [E] weights [n, k], wgrads [n, k] fp32 */
    gln_grouped_tensor_t x, y, dy, dx;
    void *bufs[8];
} problem_t;

static gln_grouped_tensor_t grouped(const problem_t *p, void *data, int64_t cols, gln_dtype_t dt) {
    gln_grouped_tensor_t g = {p->s.experts, p->splits, 0,
                              gln_tensor_make(dt, p->s.experts * p->s.tokens, cols, data)};
    return g;
}

static void problem_init(gln_context_t *ctx, problem_t *p, const shape_t *s) {
    memset(p, 0, sizeof *p);
    p->s = *s;
    int32_t E = s->experts;
    int64_t M = E * s->tokens;
    p->splits = malloc((size_t)E * sizeof *p->splits);
    p->w = malloc((size_t)E * sizeof *p->w);
    p->dw = malloc((size_t)E * sizeof *p->dw);
    if (!p->splits || !p->w || !p->dw) exit(1);
    for (int32_t i = 0; i < E; i++) p->splits[i] = s->tokens;
    p->bufs[0] = device_random_bf16(ctx, (size_t)E * s->n * s->k, 1);
    p->bufs[1] = device_random_bf16(ctx, (size_t)M * s->k, 2);
    p->bufs[2] = device_random_bf16(ctx, (size_t)M * s->n, 3);
    TRY(gln_malloc(ctx, (size_t)M * s->n * 2, &p->bufs[3]));
    TRY(gln_malloc(ctx, (size_t)M * s->k * 2, &p->bufs[4]));
    TRY(gln_malloc(ctx, (size_t)E * s->n * s->k * 4, &p->bufs[5]));
    for (int32_t i = 0; i < E; i++) {
        size_t off = (size_t)i * s->n * s->k;
        p->w[i] = gln_tensor_make(GLN_DTYPE_BF16, s->n, s->k, (uint16_t *)p->bufs[0] + off);
        p->dw[i] = gln_tensor_make(GLN_DTYPE_FP32, s->n, s->k, (float *)p->bufs[5] + off);
    }
    p->x = grouped(p, p->bufs[1], s->k, GLN_DTYPE_BF16);
    p->dy = grouped(p, p->bufs[2], s->n, GLN_DTYPE_BF16);
    p->y = grouped(p, p->bufs[3], s->n, GLN_DTYPE_BF16);
    p->dx = grouped(p, p->bufs[4], s->k, GLN_DTYPE_BF16);
}

static void problem_free(gln_context_t *ctx, problem_t *p) {
    for (int i = 0; i < 8; i++) gln_free(ctx, p->bufs[i]);
    free(p->splits), free(p->w), free(p->dw);
}

static void run_gemm(gln_context_t *ctx, problem_t *p, gln_gemm_layout_t layout) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = layout;
    if (layout == GLN_LAYOUT_TN) a.a_list = p->w, a.b = &p->x, a.d_grouped = &p->y;
    if (layout == GLN_LAYOUT_NN) a.a_list = p->w, a.b = &p->dy, a.d_grouped = &p->dx;
    if (layout == GLN_LAYOUT_NT) a.a_grouped = &p->x, a.b = &p->dy, a.d_list = p->dw;
    TRY(gln_grouped_gemm(ctx, &a));
}

/* Median seconds of `layouts` run back to back. */
static double time_layouts(gln_context_t *ctx, problem_t *p, const gln_gemm_layout_t *layouts,
                           int nl, int warmup, int repeat) {
    double *t = malloc((size_t)repeat * sizeof *t);
    if (!t) exit(1);
    for (int r = -warmup; r < repeat; r++) {
        TRY(gln_synchronize(ctx));
        double t0 = now_s();
        for (int l = 0; l < nl; l++) run_gemm(ctx, p, layouts[l]);
        TRY(gln_synchronize(ctx));
        if (r >= 0) t[r] = now_s() - t0;
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    double m = t[repeat / 2];
    free(t);
    return m;
}

int main(int argc, char **argv) {
    int repeat = 20, warmup = 3;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--repeat N] [--warmup N] [--shape NAME]\n", argv[0]);
            return 2;
        }
    }
    if (repeat < 1 || warmup < 0) return 2;
    if (!gln_backend_available(GLN_BACKEND_CUDA)) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    gln_context_t *ctx = NULL;
    TRY(gln_context_create(&o, &ctx));
    printf("%-12s %6s %6s %6s %6s | %9s %9s | %9s %9s\n", "shape", "E", "T", "K", "N", "fprop ms",
           "TFLOP/s", "f+b ms", "TFLOP/s");
    static const gln_gemm_layout_t fwd[] = {GLN_LAYOUT_TN};
    static const gln_gemm_layout_t all[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        if (only && strcmp(only, s->name)) continue;
        problem_t p;
        problem_init(ctx, &p, s);
        double flops = 2.0 * (double)s->experts * (double)s->tokens * (double)s->k * (double)s->n;
        double tf = time_layouts(ctx, &p, fwd, 1, warmup, repeat);
        double tb = time_layouts(ctx, &p, all, 3, warmup, repeat);
        printf("%-12s %6d %6lld %6lld %6lld | %9.3f %9.1f | %9.3f %9.1f\n", s->name, s->experts,
               (long long)s->tokens, (long long)s->k, (long long)s->n, tf * 1e3, flops / tf * 1e-12,
               tb * 1e3, 3 * flops / tb * 1e-12);
        fflush(stdout);
        problem_free(ctx, &p);
    }
    gln_context_destroy(ctx);
    return 0;
}
