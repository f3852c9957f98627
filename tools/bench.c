/* `grouplin bench`: grouped linear forward + backward (fprop, dgrad, wgrad) on the CPU backend
 * for a few MoE shapes and recipes, against OpenBLAS sgemm doing the same FLOPs in the same
 * run (gln_gemm on FP32 operands: the three GEMMs of every expert).  Median of several timed
 * runs after warm-up; the ratio layer / sgemm is what the CPU target (>= 0.85) is about. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "options.h"
#include "report.h"
#include "task.h"

typedef struct bench_shape {
    const char *name;
    int32_t experts;
    int64_t rows_per_expert, in, out;
} bench_shape_t;

static const bench_shape_t full_shapes[] = {
    {"E8 M256 K512 N1024", 8, 256, 512, 1024},
    {"E4 M1024 K1024 N1024", 4, 1024, 1024, 1024},
    {"E32 M64 K256 N512", 32, 64, 256, 512},
};
static const bench_shape_t quick_shapes[] = {
    {"E4 M64 K128 N128", 4, 64, 128, 128},
};

typedef struct bench_opts {
    const tool_recipe_t *recipes[TOOL_MAX_RECIPES];
    int nrec;
    int64_t repeat, warmup;
    int quick;
    int path; /* 0 split, 1 grouped (gln_path_t) */
    bench_shape_t custom; /* --shape: time only this one (experts == 0: the default set) */
    char custom_name[64];
} bench_opts_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int64_t n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Buffers of one shape: x, dy, y, dx in `dt`, filled with N(0,1). */
typedef struct bench_bufs {
    void *x, *dy, *y, *dx;
} bench_bufs_t;

static void *rand_buf(gln_dtype_t dt, int64_t n, tool_rng_t *r) {
    float *f = tool_alloc((size_t)n, sizeof *f, "a benchmark operand");
    void *out = f ? tool_alloc((size_t)n, gln_dtype_size(dt), "a benchmark operand") : NULL;
    if (!f || !out) {
        free(f);
        free(out);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) f[i] = (float)tool_rng_normal(r);
    if (dt == GLN_DTYPE_FP32) {
        free(out);
        return f;
    }
    for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = gln_fp32_to_bf16(f[i]);
    free(f);
    return out;
}

static int bufs_alloc(bench_bufs_t *b, gln_dtype_t dt, const bench_shape_t *s) {
    const int64_t M = s->experts * s->rows_per_expert;
    tool_rng_t r = tool_rng_seed(99, (uint64_t)dt);
    b->x = rand_buf(dt, M * s->in, &r);
    b->dy = rand_buf(dt, M * s->out, &r);
    b->y = rand_buf(dt, M * s->out, &r);
    b->dx = rand_buf(dt, M * s->in, &r);
    return b->x && b->dy && b->y && b->dx;
}

static void bufs_free(bench_bufs_t *b) {
    free(b->x);
    free(b->dy);
    free(b->y);
    free(b->dx);
}

/* One layer step: forward (saved) + backward (dgrad + wgrad). */
static gln_status_t layer_step(gln_grouped_linear_t *layer, const bench_shape_t *s, gln_dtype_t dt,
                               const int64_t *splits, bench_bufs_t *b) {
    const int64_t M = s->experts * s->rows_per_expert;
    gln_tensor_t x = gln_tensor_make(dt, M, s->in, b->x), y = gln_tensor_make(dt, M, s->out, b->y);
    gln_tensor_t dy = gln_tensor_make(dt, M, s->out, b->dy), dx = gln_tensor_make(dt, M, s->in, b->dx);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &x;
    fa.m_splits = splits;
    fa.y = &y;
    gln_grouped_linear_saved_t *saved = NULL;
    gln_status_t st = gln_grouped_linear_forward(layer, &fa, &saved);
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_backward(saved, &dy, &dx);
    gln_status_t rel = saved ? gln_grouped_linear_saved_release(saved) : GLN_STATUS_SUCCESS;
    return st != GLN_STATUS_SUCCESS ? st : rel;
}

/* Median seconds of the layer's forward + backward for one recipe. */
static gln_status_t time_layer(gln_context_t *ctx, const bench_shape_t *s, const tool_recipe_t *rec,
                               const bench_opts_t *o, double *secs) {
    const gln_dtype_t dt = rec->act_dtype;
    int64_t *splits = tool_alloc((size_t)s->experts, sizeof *splits, "the token splits");
    double *t = tool_alloc((size_t)o->repeat, sizeof *t, "the timings");
    bench_bufs_t b = {0};
    gln_grouped_linear_t *layer = NULL;
    gln_status_t st = GLN_STATUS_OUT_OF_MEMORY;
    if (!splits || !t || !bufs_alloc(&b, dt, s)) goto done;
    for (int32_t e = 0; e < s->experts; e++) splits[e] = s->rows_per_expert;
    gln_grouped_linear_config_t cfg = GLN_GROUPED_LINEAR_CONFIG_INIT;
    cfg.num_experts = s->experts;
    cfg.in_features = s->in;
    cfg.out_features = s->out;
    cfg.bias = 0;
    cfg.param_dtype = dt;
    cfg.activation_dtype = dt;
    cfg.recipe = rec->recipe;
    cfg.path = o->path ? GLN_PATH_GROUPED : GLN_PATH_SPLIT;
    if ((st = gln_grouped_linear_create(ctx, &cfg, &layer)) != GLN_STATUS_SUCCESS) goto done;
    for (int64_t i = 0; i < o->warmup + o->repeat && st == GLN_STATUS_SUCCESS; i++) {
        gln_grouped_linear_zero_grad(layer);
        double t0 = now_s();
        st = layer_step(layer, s, dt, splits, &b);
        if (i >= o->warmup) t[i - o->warmup] = now_s() - t0;
    }
    if (st == GLN_STATUS_SUCCESS) *secs = median(t, o->repeat);
done:
    gln_grouped_linear_destroy(layer);
    bufs_free(&b);
    free(splits);
    free(t);
    return st;
}

/* Median seconds of the same FLOPs as FP32 sgemm: per expert, fprop (TN), dgrad (NN), wgrad (NT). */
static gln_status_t time_sgemm(gln_context_t *ctx, const bench_shape_t *s, const bench_opts_t *o,
                               double *secs) {
    const int64_t m = s->rows_per_expert, K = s->in, N = s->out;
    tool_rng_t r = tool_rng_seed(5, 5);
    float *x = rand_buf(GLN_DTYPE_FP32, m * K, &r), *w = rand_buf(GLN_DTYPE_FP32, N * K, &r);
    float *dy = rand_buf(GLN_DTYPE_FP32, m * N, &r), *y = rand_buf(GLN_DTYPE_FP32, m * N, &r);
    float *dx = rand_buf(GLN_DTYPE_FP32, m * K, &r), *dw = rand_buf(GLN_DTYPE_FP32, N * K, &r);
    double *t = tool_alloc((size_t)o->repeat, sizeof *t, "the timings");
    gln_status_t st = GLN_STATUS_OUT_OF_MEMORY;
    if (x && w && dy && y && dx && dw && t) {
        gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_FP32, m, K, x), tw = gln_tensor_make(GLN_DTYPE_FP32, N, K, w);
        gln_tensor_t tdy = gln_tensor_make(GLN_DTYPE_FP32, m, N, dy), ty = gln_tensor_make(GLN_DTYPE_FP32, m, N, y);
        gln_tensor_t tdx = gln_tensor_make(GLN_DTYPE_FP32, m, K, dx), tdw = gln_tensor_make(GLN_DTYPE_FP32, N, K, dw);
        st = GLN_STATUS_SUCCESS;
        for (int64_t i = 0; i < o->warmup + o->repeat && st == GLN_STATUS_SUCCESS; i++) {
            double t0 = now_s();
            for (int32_t e = 0; e < s->experts && st == GLN_STATUS_SUCCESS; e++) {
                st = gln_gemm(ctx, GLN_LAYOUT_TN, &tw, &tx, &ty, NULL, 0);
                if (st == GLN_STATUS_SUCCESS) st = gln_gemm(ctx, GLN_LAYOUT_NN, &tw, &tdy, &tdx, NULL, 0);
                if (st == GLN_STATUS_SUCCESS) st = gln_gemm(ctx, GLN_LAYOUT_NT, &tx, &tdy, &tdw, NULL, 0);
            }
            if (i >= o->warmup) t[i - o->warmup] = now_s() - t0;
        }
        if (st == GLN_STATUS_SUCCESS) *secs = median(t, o->repeat);
    }
    free(x);
    free(w);
    free(dy);
    free(y);
    free(dx);
    free(dw);
    free(t);
    return st;
}

enum { O_RECIPES = 256, O_REPEAT, O_WARMUP, O_QUICK, O_SHAPE, O_PATH };

/* --shape ExMxKxN, e.g. 8x1024x2048x2048. */
static int opt_shape(const char *arg, bench_opts_t *o) {
    long long e, m, k, n;
    char tail;
    if (sscanf(arg, "%lldx%lldx%lldx%lld%c", &e, &m, &k, &n, &tail) != 4 || e < 1 || e > 4096 || m < 1 ||
        k < 1 || n < 1 || m > (1LL << 24) || k > (1LL << 24) || n > (1LL << 24))
        return opt_usage_error("bench", "--shape %s: expected ExMxKxN with positive sizes", arg);
    snprintf(o->custom_name, sizeof o->custom_name, "E%lld M%lld K%lld N%lld", e, m, k, n);
    bench_shape_t s = {o->custom_name, (int32_t)e, m, k, n};
    o->custom = s;
    return CLI_OK;
}

static int handle(int code, const char *arg, void *user) {
    bench_opts_t *o = user;
    static const char *const paths[] = {"split", "grouped"};
    switch (code) {
    case O_RECIPES: return opt_recipes("bench", arg, o->recipes, &o->nrec);
    case O_REPEAT: return opt_i64("bench", "repeat", arg, 1, 10000, &o->repeat);
    case O_WARMUP: return opt_i64("bench", "warmup", arg, 0, 10000, &o->warmup);
    case O_QUICK: o->quick = 1; return CLI_OK;
    case O_SHAPE: return opt_shape(arg, o);
    case O_PATH: return opt_choice("bench", "path", arg, paths, 2, &o->path);
    }
    return opt_usage_error("bench", "internal: unhandled option %d", code);
}

static const char help[] =
    "usage: grouplin bench [options]\n"
    "\n"
    "Grouped linear forward + backward (fprop, dgrad, wgrad; no bias) on the CPU backend for a\n"
    "few MoE shapes (E experts x M rows each, K in, N out), against OpenBLAS sgemm doing the same\n"
    "FLOPs on FP32 operands in the same run.  FLOPs = 6*E*M*K*N; median of the timed runs.\n"
    "\n"
    "options:\n"
    "  --recipes LIST   recipes to time (default bf16,fp8-current,mxfp8; see grouplin train --help)\n"
    "  --repeat N       timed runs per measurement (default 7)\n"
    "  --warmup N       untimed runs first (default 2)\n"
    "  --quick          one small shape (for tests)\n"
    "  --shape ExMxKxN  time only this shape (e.g. 8x1024x2048x2048)\n"
    "  --path P         split (default: one GEMM call per expert) or grouped (one per stage)\n"
    "  -h, --help       this help\n"
    "\n"
    "exit status: 0 ok, 1 library error, 2 usage error\n";

int cmd_bench(int argc, char **argv) {
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},         {"recipes", required_argument, NULL, O_RECIPES},
        {"repeat", required_argument, NULL, O_REPEAT}, {"warmup", required_argument, NULL, O_WARMUP},
        {"quick", no_argument, NULL, O_QUICK},    {"shape", required_argument, NULL, O_SHAPE},
        {"path", required_argument, NULL, O_PATH},
        {NULL, 0, NULL, 0}};
    bench_opts_t o;
    memset(&o, 0, sizeof o);
    o.recipes[0] = tool_recipe_find("bf16");
    o.recipes[1] = tool_recipe_find("fp8-current");
    o.recipes[2] = tool_recipe_find("mxfp8");
    o.nrec = 3;
    o.repeat = 7;
    o.warmup = 2;
    int shown = 0;
    int rc = opt_parse("bench", argc, argv, longopts, help, handle, &o, &shown);
    if (rc != CLI_OK || shown) return rc;

    gln_context_t *ctx = NULL;
    gln_status_t st = gln_context_create(NULL, &ctx);
    const bench_shape_t *shapes = o.custom.experts ? &o.custom : o.quick ? quick_shapes : full_shapes;
    const int nshapes = o.custom.experts || o.quick ? 1 : (int)(sizeof full_shapes / sizeof full_shapes[0]);
    static const char *const head[] = {"shape", "recipe", "ms", "GFLOP/s", "sgemm GFLOP/s", "ratio"};
    report_table_t t;
    report_table_init(&t, 6, head);
    printf("grouplin bench: grouped linear fwd+bwd vs sgemm, cpu backend, median of %lld runs after %lld "
           "warm-up\n\n", (long long)o.repeat, (long long)o.warmup);
    for (int si = 0; si < nshapes && st == GLN_STATUS_SUCCESS; si++) {
        const bench_shape_t *s = &shapes[si];
        const double flops = 6.0 * (double)s->experts * (double)s->rows_per_expert * (double)s->in * (double)s->out;
        double ref = 0;
        st = time_sgemm(ctx, s, &o, &ref);
        for (int r = 0; r < o.nrec && st == GLN_STATUS_SUCCESS; r++) {
            double secs = 0;
            st = time_layer(ctx, s, o.recipes[r], &o, &secs);
            if (st != GLN_STATUS_SUCCESS) break;
            char c[6][REPORT_CELL];
            snprintf(c[0], REPORT_CELL, "%s", s->name);
            snprintf(c[1], REPORT_CELL, "%s", o.recipes[r]->name);
            snprintf(c[2], REPORT_CELL, "%.2f", secs * 1e3);
            snprintf(c[3], REPORT_CELL, "%.1f", flops / secs * 1e-9);
            snprintf(c[4], REPORT_CELL, "%.1f", flops / ref * 1e-9);
            snprintf(c[5], REPORT_CELL, "%.2f", ref / secs);
            const char *cells[6] = {c[0], c[1], c[2], c[3], c[4], c[5]};
            report_table_row(&t, cells);
        }
    }
    if (st == GLN_STATUS_SUCCESS) {
        report_table_print(&t, stdout);
        printf("\nratio = sgemm time / layer time on the same FLOPs (1.00 = as fast as FP32 sgemm)\n");
    } else {
        fprintf(stderr, "grouplin bench: %s: %s\n", gln_status_string(st), tool_last_error());
    }
    report_table_free(&t);
    gln_context_destroy(ctx);
    return st == GLN_STATUS_SUCCESS ? CLI_OK : CLI_FAIL;
}
