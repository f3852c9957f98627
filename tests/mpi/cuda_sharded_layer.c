/* The CUDA backend's sharded group and layer at world size 2-4 over MPI on device memory (every
 * rank its own CUDA context on device 0; the staged path where MPI is not CUDA-aware), against
 * the CPU backend's sharded group and layer under the same ranks.  Built with CUDA and MPI, run
 * by scripts/gpu_mpi_check.sh (ctest label mpi_gpu); exits 77 on every rank without a GPU.
 *
 *   layer          every recipe x both paths, with prefetch, async finalize and the FP8 all-gather:
 *                  y and dx of two steps (overwrite, then accumulate) and the gathered main_grad
 *                  equal the CPU's: bit for bit where the data make every sum exact (small
 *                  integers, power-of-two scales), else within a named bound.  Rank-dependent
 *                  token splits (an empty expert on odd ranks, no tokens on rank 2); K_in·K_out·N
 *                  = 2^13, so shards are uneven on 3 ranks, and the 128x128 gather's two tiles
 *                  leave a rank with an empty shard on 3 and 4 ranks.
 *   fp8 gather     the gathered FP8 weights (data and scales) equal gln_quantize of each full
 *                  bf16 expert on the CPU, per-tensor, MXFP8 and 128x128; with the quantized
 *                  shard (quantized_shard) also the backward's columnwise copies (the CUDA
 *                  transpose; MXFP8: the stored columnwise shard the CUDA quantizer wrote with
 *                  the rowwise one, gathered alone) equal the CPU's columnwise gln_quantize.  The
 *                  layer variants include the quantized shard (per-tensor, MXFP8 and 128x128,
 *                  prefetch, async).
 *   refusals       delay_wgrad_compute is refused with a sharded group; one rank's bad argument
 *                  (an x with the wrong row count, a NULL buffer) fails the call on every rank;
 *                  a collective inside a graph capture of the context's stream is refused on every
 *                  rank, and the communicator works afterwards. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

#if defined(GLN_TEST_HAVE_CUDA)
#include <cuda_runtime.h>

enum { NE = 2, KO = 32, KI = 128 };
#define TOTAL ((int64_t)NE * KO * KI)

typedef struct variant {
    const char *name;
    gln_recipe_t recipe;
    int pow2, prefetch, async, fp8g, exact;
    int qshard; /* quantized_shard (with fp8g) */
} variant_t;

static const variant_t kVariants[] = {
    {"none/bf16", GLN_RECIPE_NONE, 0, 0, 0, 0, 1, 0},
    {"none/bf16 prefetch async", GLN_RECIPE_NONE, 0, 1, 1, 0, 1, 0},
    {"fp8_delayed", GLN_RECIPE_FP8_DELAYED, 0, 0, 0, 0, 0, 0},
    {"fp8_current/pow2 fp8gather prefetch async", GLN_RECIPE_FP8_CURRENT, 1, 1, 1, 1, 1, 0},
    {"fp8_current fp8gather", GLN_RECIPE_FP8_CURRENT, 0, 0, 0, 1, 0, 0},
    {"mxfp8", GLN_RECIPE_MXFP8, 0, 0, 0, 0, 1, 0},
    {"mxfp8 fp8gather prefetch async", GLN_RECIPE_MXFP8, 0, 1, 1, 1, 1, 0},
    {"fp8_block", GLN_RECIPE_FP8_BLOCK, 1, 0, 1, 0, 1, 0},
    {"fp8_block fp8gather prefetch", GLN_RECIPE_FP8_BLOCK, 1, 1, 0, 1, 1, 0},
    {"fp8_current/pow2 qshard prefetch async", GLN_RECIPE_FP8_CURRENT, 1, 1, 1, 1, 1, 1},
    {"fp8_current qshard", GLN_RECIPE_FP8_CURRENT, 0, 0, 0, 1, 0, 1},
    {"fp8_block qshard prefetch", GLN_RECIPE_FP8_BLOCK, 1, 1, 0, 1, 1, 1},
    {"fp8_block/fp32 qshard", GLN_RECIPE_FP8_BLOCK, 0, 0, 1, 1, 0, 1},
    {"mxfp8 qshard", GLN_RECIPE_MXFP8, 0, 0, 0, 1, 1, 1},
    {"mxfp8 qshard prefetch async", GLN_RECIPE_MXFP8, 0, 1, 1, 1, 1, 1},
};
#define NVARIANTS (sizeof kVariants / sizeof kVariants[0])

static void rank_splits(int rank, int64_t *m, int64_t *rows) {
    int none = rank == 2;
    m[0] = none ? 0 : 17 + 5 * rank;
    m[1] = none || rank % 2 ? 0 : 40;
    *rows = m[0] + m[1];
}

static void fill_ints(void *h, gln_dtype_t dt, size_t n, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t i = 0; i < n; i++) gln_store(h, dt, i, (double)gln_rng_int(&r, -3, 3));
}

static gln_quant_config_t weight_quant(const variant_t *v) {
    gln_quant_config_t q = GLN_QUANT_CONFIG_INIT;
    q.mode = v->recipe == GLN_RECIPE_MXFP8       ? GLN_SCALING_MXFP8_1D
             : v->recipe == GLN_RECIPE_FP8_BLOCK ? GLN_SCALING_BLOCK_2D
                                                 : GLN_SCALING_TENSOR;
    q.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    q.power_2_scale = v->pow2; /* FP8 block: the layer's block_fp32_scales = !pow2 (side_new) */
    return q;
}

/* One backend's side: context, MPI communicator on it, group, sharded layer, data buffers. */
typedef struct side {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    const gln_dist_weights_t *p;
    gln_grouped_linear_t *L;
    void *x, *dy, *y, *dx; /* backend memory */
} side_t;

static void *to_backend(gln_context_t *ctx, const void *h, size_t bytes) {
    void *d = NULL;
    CHECK_OK(gln_malloc(ctx, bytes ? bytes : 16, &d));
    if (d && bytes) CHECK_OK(gln_memcpy(ctx, d, h, bytes, GLN_COPY_HOST_TO_BACKEND));
    return d;
}

static void *to_host(gln_context_t *ctx, const void *d, size_t bytes) {
    void *h = calloc(1, bytes ? bytes : 1);
    if (d && bytes) CHECK_OK(gln_memcpy(ctx, h, d, bytes, GLN_COPY_BACKEND_TO_HOST));
    return h;
}

/* 0xFF bytes: bf16 NaNs, so an unwritten output cannot pass. */
static void poison(gln_context_t *ctx, void *d, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    memset(h, 0xFF, bytes);
    if (bytes) CHECK_OK(gln_memcpy(ctx, d, h, bytes, GLN_COPY_HOST_TO_BACKEND));
    free(h);
}

static gln_context_t *context(gln_backend_kind_t kind) {
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = kind;
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(&o, &ctx));
    return ctx;
}

static int side_new(side_t *s, gln_backend_kind_t kind, const variant_t *v, gln_path_t path, const float *full) {
    memset(s, 0, sizeof *s);
    s->ctx = context(kind);
    if (!s->ctx) return 0;
    CHECK_OK(gln_comm_create_mpi(s->ctx, NULL, &s->comm));
    if (!s->comm) return 0;
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE, sc.out_features = KO, sc.in_features = KI;
    sc.async_finalize = v->async;
    sc.fp8_gather = v->fp8g;
    sc.quantized_shard = v->qshard;
    sc.fp8_quant = weight_quant(v);
    CHECK_OK(gln_sharded_weights_create(s->ctx, s->comm, &sc, &s->sw));
    if (!s->sw) return 0;
    CHECK_OK(gln_sharded_weights_load_full(s->sw, full));
    s->p = gln_sharded_weights_protocol(s->sw);
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = NE, c.in_features = KI, c.out_features = KO, c.bias = 0;
    c.recipe = v->recipe;
    c.power_2_scales = v->pow2;
    c.block_fp32_scales = v->recipe == GLN_RECIPE_FP8_BLOCK && !v->pow2;
    c.path = path;
    c.params.distributed = s->p;
    CHECK_OK(gln_grouped_linear_create(s->ctx, &c, &s->L));
    int64_t m[NE], rows;
    rank_splits(gln_mpi_rank(), m, &rows);
    void *xh = malloc((size_t)rows * KI * 2 + 2), *dyh = malloc((size_t)rows * KO * 2 + 2);
    fill_ints(xh, GLN_DTYPE_BF16, (size_t)rows * KI, 100 + (uint64_t)gln_mpi_rank());
    fill_ints(dyh, GLN_DTYPE_BF16, (size_t)rows * KO, 200 + (uint64_t)gln_mpi_rank());
    s->x = to_backend(s->ctx, xh, (size_t)rows * KI * 2);
    s->dy = to_backend(s->ctx, dyh, (size_t)rows * KO * 2);
    CHECK_OK(gln_malloc(s->ctx, (size_t)rows * KO * 2 + 16, &s->y));
    CHECK_OK(gln_malloc(s->ctx, (size_t)rows * KI * 2 + 16, &s->dx));
    free(xh), free(dyh);
    return s->L != NULL;
}

static void side_free(side_t *s) {
    if (s->ctx) {
        CHECK_OK(gln_grouped_linear_destroy(s->L));
        CHECK_OK(gln_sharded_weights_destroy(s->sw));
        CHECK_OK(gln_comm_destroy(s->comm));
        CHECK_OK(gln_free(s->ctx, s->x));
        CHECK_OK(gln_free(s->ctx, s->dy));
        CHECK_OK(gln_free(s->ctx, s->y));
        CHECK_OK(gln_free(s->ctx, s->dx));
        CHECK_OK(gln_context_async_error(s->ctx));
        CHECK_OK(gln_context_destroy(s->ctx));
    }
    memset(s, 0, sizeof *s);
}

/* Forward + backward on this rank's tokens; x_rows: the rows x claims (the splits' sum unless a
 * test lies on one rank). */
static gln_status_t step(side_t *s, const variant_t *v, gln_microbatch_t mb, int64_t x_rows) {
    int64_t m[NE], rows;
    rank_splits(gln_mpi_rank(), m, &rows);
    poison(s->ctx, s->y, (size_t)rows * KO * 2);
    poison(s->ctx, s->dx, (size_t)rows * KI * 2);
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, x_rows, KI, s->x), y = gln_tensor_make(GLN_DTYPE_BF16, rows, KO, s->y);
    gln_tensor_t dy = gln_tensor_make(GLN_DTYPE_BF16, rows, KO, s->dy), dx = gln_tensor_make(GLN_DTYPE_BF16, rows, KI, s->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &x, a.m_splits = m, a.y = &y, a.microbatch = mb, a.input_requires_grad = 1;
    gln_grouped_linear_saved_t *saved = NULL;
    gln_status_t st = v->prefetch ? s->p->prefetch(s->p->impl, 0) : GLN_STATUS_SUCCESS;
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_forward(s->L, &a, &saved);
    if (st == GLN_STATUS_SUCCESS && v->prefetch) st = s->p->prefetch(s->p->impl, 1);
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_backward(saved, &dy, &dx);
    if (saved) {
        gln_status_t rs = gln_grouped_linear_saved_release(saved);
        if (st == GLN_STATUS_SUCCESS) st = rs;
    }
    return st;
}

/* got vs want: bitwise, or within rel·|want| + abs elementwise. */
static void compare(const char *what, gln_dtype_t dt, const void *got, const void *want, size_t n, int exact,
                    double rel, double abs) {
    if (exact) {
        CHECK(gln_check_bitwise(what, got, want, n * gln_dtype_size(dt)));
        return;
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double g = gln_load(got, dt, i), w = gln_load(want, dt, i);
        if (!(fabs(g - w) <= rel * fabs(w) + abs) && bad++ < 3)
            gln_test_fail_at(__FILE__, __LINE__, "%s [%zu]: %.9g vs %.9g", what, i, g, w);
    }
    CHECK_MSG(bad == 0, "%s: %d of %zu elements outside |d| <= %g|ref| + %g", what, bad, n, rel, abs);
}

static void layer_case(const variant_t *v, gln_path_t path) {
    float *full = malloc((size_t)TOTAL * sizeof(float));
    fill_ints(full, GLN_DTYPE_FP32, (size_t)TOTAL, 7); /* same on every rank */
    side_t cu, cpu;
    int ok = side_new(&cu, GLN_BACKEND_CUDA, v, path, full);
    ok = side_new(&cpu, GLN_BACKEND_CPU, v, path, full) && ok;
    int64_t m[NE], rows;
    rank_splits(gln_mpi_rank(), m, &rows);
    char what[192];
    for (int k = 0; ok && k < 2; k++) {
        gln_microbatch_t mb = k ? GLN_MICROBATCH_NEXT : GLN_MICROBATCH_FIRST;
        CHECK_OK(step(&cu, v, mb, rows));
        CHECK_OK(step(&cpu, v, mb, rows));
        void *yc = to_host(cu.ctx, cu.y, (size_t)rows * KO * 2), *dxc = to_host(cu.ctx, cu.dx, (size_t)rows * KI * 2);
        /* bf16 outputs: one rounding of sums whose order differs, at most a unit of bf16's 8 bits */
        snprintf(what, sizeof what, "%s path %d step %d rank %d: y cuda vs cpu", v->name, (int)path, k, gln_mpi_rank());
        compare(what, GLN_DTYPE_BF16, yc, cpu.y, (size_t)(rows * KO), v->exact, 0x1p-7, 1e-30);
        snprintf(what, sizeof what, "%s path %d step %d rank %d: dx cuda vs cpu", v->name, (int)path, k, gln_mpi_rank());
        compare(what, GLN_DTYPE_BF16, dxc, cpu.dx, (size_t)(rows * KI), v->exact, 0x1p-7, 1e-30);
        free(yc), free(dxc);
        size_t live = 1;
        CHECK_OK(gln_sharded_weights_materialized_bytes(cu.sw, &live, NULL));
        CHECK_MSG(live == 0, "%s: %zu gathered bytes alive after a step", v->name, live);
    }
    if (ok) {
        CHECK_OK(gln_sharded_weights_wait(cu.sw));
        CHECK_OK(gln_sharded_weights_wait(cpu.sw));
        float *gc = malloc((size_t)TOTAL * sizeof(float)), *gp = malloc((size_t)TOTAL * sizeof(float));
        CHECK_OK(gln_sharded_weights_gather_main_grad(cu.sw, gc));
        CHECK_OK(gln_sharded_weights_gather_main_grad(cpu.sw, gp));
        snprintf(what, sizeof what, "%s path %d: main_grad (reduce-scattered, accumulated) cuda vs cpu", v->name,
                 (int)path);
        compare(what, GLN_DTYPE_FP32, gc, gp, (size_t)TOTAL, v->exact, 0x1p-16, 0x1p-10);
        free(gc), free(gp);
    }
    side_free(&cu);
    side_free(&cpu);
    free(full);
}

static void test_layer_split(void) {
    for (size_t i = 0; i < NVARIANTS; i++) layer_case(&kVariants[i], GLN_PATH_SPLIT);
}

static void test_layer_grouped(void) {
    for (size_t i = 0; i < NVARIANTS; i++) layer_case(&kVariants[i], GLN_PATH_GROUPED);
}

/* The gathered FP8 experts equal the CPU's gln_quantize of each full bf16 expert, data and
 * scales, on random weights whose amaxes sit in different ranks' shards. */
/* The backward copies of a quantized shard: the columnwise copy equals the CPU's gln_quantize
 * (columnwise) of each full bf16 expert, data and scales (the CUDA transpose of the gathered
 * rowwise bytes and tile grids). */
static void check_columnwise(side_t *cu, const variant_t *v, gln_scaling_mode_t mode, const float *full) {
    gln_quant_config_t q = weight_quant(v);
    q.rowwise = 0;
    q.columnwise = 1;
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(mode, GLN_DTYPE_FP8_E4M3, KO, KI, &lay));
    gln_tensor_t g[NE];
    CHECK_OK(cu->p->materialize_backward(cu->p->impl, g));
    void *bf = malloc((size_t)KO * KI * 2);
    uint8_t *ref = malloc((size_t)KO * KI), *cs = malloc(lay.col_scale_bytes);
    for (int e = 0; e < NE; e++) {
        for (int64_t i = 0; i < (int64_t)KO * KI; i++) gln_store(bf, GLN_DTYPE_BF16, (size_t)i, full[(int64_t)e * KO * KI + i]);
        gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, KO, KI, bf), out = gln_tensor_make(GLN_DTYPE_FP8_E4M3, KO, KI, NULL);
        float scale = 0.0f, amax = 0.0f;
        out.scaling = mode;
        out.col_data = ref;
        out.col_scale_inv = cs;
        if (mode == GLN_SCALING_TENSOR) out.scale = &scale, out.amax = &amax;
        CHECK_OK(gln_quantize(gln_test_cpu_context(), &q, &in, &out));
        CHECK(g[e].col_data && g[e].col_scale_inv);
        if (!g[e].col_data || !g[e].col_scale_inv) continue;
        uint8_t *gd = to_host(cu->ctx, g[e].col_data, (size_t)KO * KI), *gs = to_host(cu->ctx, g[e].col_scale_inv, lay.col_scale_bytes);
        char what[96];
        snprintf(what, sizeof what, "qshard mode %d expert %d: columnwise data", (int)mode, e);
        CHECK(gln_check_bitwise(what, gd, ref, (size_t)KO * KI));
        snprintf(what, sizeof what, "qshard mode %d expert %d: columnwise scales", (int)mode, e);
        CHECK(gln_check_bitwise(what, gs, cs, lay.col_scale_bytes));
        free(gd), free(gs);
    }
    CHECK_OK(cu->p->release(cu->p->impl, g));
    free(bf), free(ref), free(cs);
}

static void gather_case(gln_scaling_mode_t mode, int pow2, int qshard) {
    variant_t v = {"gather", mode == GLN_SCALING_MXFP8_1D ? GLN_RECIPE_MXFP8
                             : mode == GLN_SCALING_BLOCK_2D ? GLN_RECIPE_FP8_BLOCK : GLN_RECIPE_FP8_CURRENT,
                   pow2, 0, 0, 1, 1, qshard};
    float *full = malloc((size_t)TOTAL * sizeof(float));
    gln_rng_t r = gln_rng_seed(99);
    for (int64_t i = 0; i < TOTAL; i++) full[i] = (float)(gln_rng_normal(&r) * ldexp(1.0, (int)(i / 32 % 9) - 4));
    full[TOTAL - 5] = 40.0f; /* expert 1's amax in the last rank's shard */
    side_t cu;
    if (side_new(&cu, GLN_BACKEND_CUDA, &v, GLN_PATH_GROUPED, full)) {
        gln_quant_config_t q = weight_quant(&v);
        q.power_2_scale = pow2;
        gln_quant_layout_t lay;
        CHECK_OK(gln_quant_layout(mode, GLN_DTYPE_FP8_E4M3, KO, KI, &lay));
        gln_tensor_t g[NE];
        CHECK_OK(cu.p->materialize_forward(cu.p->impl, g));
        void *bf = malloc((size_t)KO * KI * 2);
        uint8_t *ref = malloc((size_t)KO * KI), *rs = malloc(lay.scale_bytes);
        for (int e = 0; e < NE; e++) {
            for (int64_t i = 0; i < (int64_t)KO * KI; i++) gln_store(bf, GLN_DTYPE_BF16, (size_t)i, full[(int64_t)e * KO * KI + i]);
            gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, KO, KI, bf), out = gln_tensor_make(GLN_DTYPE_FP8_E4M3, KO, KI, ref);
            float scale = 0.0f, amax = 0.0f;
            out.scaling = mode;
            out.scale_inv = rs;
            if (mode == GLN_SCALING_TENSOR) out.scale = &scale, out.amax = &amax;
            CHECK_OK(gln_quantize(gln_test_cpu_context(), &q, &in, &out));
            CHECK(g[e].scaling == mode && g[e].dtype == GLN_DTYPE_FP8_E4M3);
            uint8_t *gd = to_host(cu.ctx, g[e].data, (size_t)KO * KI), *gs = to_host(cu.ctx, g[e].scale_inv, lay.scale_bytes);
            char what[96];
            snprintf(what, sizeof what, "mode %d pow2 %d expert %d: gathered FP8 data", (int)mode, pow2, e);
            CHECK(gln_check_bitwise(what, gd, ref, (size_t)KO * KI));
            snprintf(what, sizeof what, "mode %d pow2 %d expert %d: gathered scales", (int)mode, pow2, e);
            CHECK(gln_check_bitwise(what, gs, rs, lay.scale_bytes));
            free(gd), free(gs);
        }
        CHECK_OK(cu.p->release(cu.p->impl, g));
        free(bf), free(ref), free(rs);
        if (qshard) check_columnwise(&cu, &v, mode, full);
    }
    side_free(&cu);
    free(full);
}

static void test_fp8_gather_bytes(void) {
    gather_case(GLN_SCALING_TENSOR, 0, 0);
    gather_case(GLN_SCALING_TENSOR, 1, 0);
    gather_case(GLN_SCALING_MXFP8_1D, 0, 0);
    gather_case(GLN_SCALING_BLOCK_2D, 1, 0);
    gather_case(GLN_SCALING_BLOCK_2D, 0, 0);
    /* the quantized shard: forward and backward copies */
    gather_case(GLN_SCALING_TENSOR, 0, 1);
    gather_case(GLN_SCALING_TENSOR, 1, 1);
    gather_case(GLN_SCALING_BLOCK_2D, 1, 1);
    gather_case(GLN_SCALING_BLOCK_2D, 0, 1);
    gather_case(GLN_SCALING_MXFP8_1D, 0, 1);
}

/* ---- refusals ------------------------------------------------------------------------------- */

static void test_delayed_wgrad_refused(void) {
    float *full = calloc((size_t)TOTAL, sizeof(float));
    side_t cu;
    if (side_new(&cu, GLN_BACKEND_CUDA, &kVariants[0], GLN_PATH_GROUPED, full)) {
        gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
        c.num_experts = NE, c.in_features = KI, c.out_features = KO, c.bias = 0;
        c.params.distributed = cu.p;
        c.delay_wgrad_compute = 1;
        gln_grouped_linear_t *L = NULL;
        CHECK_STATUS(gln_grouped_linear_create(cu.ctx, &c, &L), GLN_STATUS_NOT_SUPPORTED, "delay_wgrad_compute");
        CHECK(L == NULL);
    }
    side_free(&cu);
    free(full);
}

static void expect_together(const char *what, gln_status_t st, int bad, const char *needle) {
    int me = gln_mpi_rank();
    CHECK_MSG(st != GLN_STATUS_SUCCESS, "%s: rank %d succeeded", what, me);
    const char *msg = gln_last_error();
    char r[32];
    snprintf(r, sizeof r, "rank %d failed", bad);
    const char *want = me == bad ? needle : r;
    CHECK_MSG(strstr(msg, want) != NULL, "%s: rank %d's message '%s' lacks '%s'", what, me, msg, want);
}

/* One rank's x has a row too many; one rank passes a NULL buffer to a collective: every rank
 * fails, then a correct step and collective run on every rank. */
static void test_local_bad_arguments(void) {
    float *full = malloc((size_t)TOTAL * sizeof(float));
    fill_ints(full, GLN_DTYPE_FP32, (size_t)TOTAL, 5);
    side_t cu;
    const variant_t *v = &kVariants[3]; /* FP8 all-gather, prefetch, async */
    int R = gln_mpi_size(), me = gln_mpi_rank(), bad = R - 1;
    if (side_new(&cu, GLN_BACKEND_CUDA, v, GLN_PATH_GROUPED, full)) {
        int64_t m[NE], rows;
        rank_splits(me, m, &rows);
        const variant_t plain = {"no prefetch", v->recipe, v->pow2, 0, v->async, v->fp8g, v->exact, v->qshard};
        /* the grouped path takes x with rows past the splits' sum, so the refusal names y's rows */
        expect_together("x rows on one rank", step(&cu, &plain, GLN_MICROBATCH_FIRST, me == bad ? rows + 1 : rows), bad,
                        "rows");
        CHECK_OK(step(&cu, v, GLN_MICROBATCH_FIRST, rows));
        CHECK_OK(gln_sharded_weights_wait(cu.sw));
        float *buf = NULL;
        CHECK_OK(gln_malloc(cu.ctx, 64 * sizeof(float) * (size_t)R, (void **)&buf));
        expect_together("NULL send on one rank",
                        gln_comm_allreduce(cu.comm, me == bad ? NULL : buf, buf, 64, GLN_DTYPE_FP32, GLN_REDUCE_SUM),
                        bad, "send");
        CHECK_OK(gln_comm_allgather(cu.comm, buf + 64 * me, buf, 64, GLN_DTYPE_FP32)); /* in place: own block */
        CHECK_OK(gln_free(cu.ctx, buf));
    }
    side_free(&cu);
    free(full);
}

/* A collective inside a capture of the context's stream on one rank: refused there (it would
 * synchronize the stream), every other rank fails with it; the capture ends cleanly and the
 * communicator works afterwards. */
static void test_capture_refused(void) {
    cudaStream_t user;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_t *cu = gln_test_cuda_context(user);
    gln_comm_t *c = NULL;
    if (cu) CHECK_OK(gln_comm_create_mpi(cu, NULL, &c));
    if (c) {
        int R = gln_comm_size(c), me = gln_comm_rank(c), bad = R - 1;
        float *buf = NULL;
        CHECK_OK(gln_malloc(cu, 256 * sizeof(float), (void **)&buf));
        cudaGraph_t graph = NULL;
        if (me == bad) CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeGlobal) == cudaSuccess);
        gln_status_t st = gln_comm_allreduce(c, buf, buf, 256, GLN_DTYPE_FP32, GLN_REDUCE_MAX);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", gln_last_error());
        if (me == bad) CHECK(cudaStreamEndCapture(user, &graph) == cudaSuccess);
        if (graph) cudaGraphDestroy(graph);
        CHECK_MSG(st == GLN_STATUS_NOT_SUPPORTED, "rank %d: %s (%s)", me, gln_status_string(st), msg);
        CHECK_MSG(strstr(msg, me == bad ? "graph capture" : "failed") != NULL, "rank %d: message '%s'", me, msg);
        CHECK_OK(gln_comm_allreduce(c, buf, buf, 256, GLN_DTYPE_FP32, GLN_REDUCE_MAX));
        CHECK_OK(gln_free(cu, buf));
    }
    CHECK_OK(gln_comm_destroy(c));
    CHECK_OK(gln_context_destroy(cu));
    cudaStreamDestroy(user);
}

GLN_MPI_TEST_MAIN_CUDA(GLN_CASE(test_fp8_gather_bytes), GLN_CASE(test_delayed_wgrad_refused),
                       GLN_CASE(test_local_bad_arguments), GLN_CASE(test_capture_refused), GLN_CASE(test_layer_grouped),
                       GLN_CASE(test_layer_split))
#else
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    printf("skipped: built without the CUDA backend\n");
    return 77;
}
#endif
