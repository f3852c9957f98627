/* A grouped linear layer on the sharded weight group vs a plain layer holding the same full
 * weights, on 2, 3 and 4 ranks, for every recipe × path, also with prefetch (the next
 * materialization gathered early), asynchronous finalize, and the FP8 all-gather (each rank
 * quantizes its shard with the global per-expert scale; the layer uses the gathered FP8 as is).
 *
 * Each rank runs its own token block (splits and data differ per rank, one expert is empty on
 * odd ranks, rank 2 has no tokens at all).  On each rank the sharded layer must produce y and dx BITWISE equal to the plain
 * layer's (same weights after the gather, same quantization, same GEMMs).  The sharded group's
 * main_grad, gathered, must equal the sum over ranks of the plain layers' FP32 wgrads (summed
 * here with MPI): bitwise when the data are exact by construction, within a named tolerance
 * when only the order of the cross-rank sum differs.  The materialized-memory counters must show
 * no gathered weights alive after forward or backward and a peak of exactly one gathered group.
 *
 * Exact by construction: weights, x and dy are small integers (|v| <= 3, later ±0.5), so every
 * product and every sum here is exact in FP32, and FP8 quantization with power-of-two scales
 * (MXFP8, power-of-two block and current scaling) maps them to FP8 values exactly (each has at
 * most 3 significant bits: within E4M3's 4 and E5M2's 3).  Per-tensor scales that are not powers
 * of two make each rank's wgrad a rounded FP32 value, so the two cross-rank sums may differ by
 * their rounding order only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

/* Two FP32 sums of the same R terms in different orders each lie within ·u·Σ|terms| of
 * the exact sum (u = 2^-24, standard recursive-summation bound), so they differ by at most
 * twice that; one more u·|ref| covers the final FP32 add of two such sums (second step). */
#define SUM_ORDER_UNIT 0x1p-24

enum { NE = 3, KO = 17 };
/* K_in: 33 (N·K_out·K_in = 1683: odd, so shards are padded on 2 and 4 ranks), 128 for the MXFP8
 * all-gather (which needs K_in % 128 == 0); set per variant */
static int64_t KI = 33;

typedef struct variant {
    const char *name;
    gln_recipe_t recipe;
    gln_dtype_t wdt;  /* working dtype of the group = the plain layer's param dtype */
    gln_dtype_t act;  /* activation dtype */
    int pow2;         /* FP8_CURRENT: power-of-two scales */
    int exact;        /* main_grad compared bitwise */
    int async;        /* the group finalizes asynchronously */
    int prefetch;     /* prefetch(forward) before forward, prefetch(backward) before backward */
    int fp8g;         /* FP8 all-gather (fp8_current, mxfp8) */
    int ki;           /* K_in for this variant (0: 33) */
} variant_t;

static const variant_t variants[] = {
    {"none/fp32", GLN_RECIPE_NONE, GLN_DTYPE_FP32, GLN_DTYPE_FP32, 0, 1, 0, 0, 0, 0},
    {"none/bf16", GLN_RECIPE_NONE, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 1, 0, 0, 0},
    {"fp8_delayed", GLN_RECIPE_FP8_DELAYED, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 0, 0, 0, 0, 0},
    {"fp8_current/pow2", GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 1, 1, 1, 0, 0, 0},
    {"fp8_current", GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 0, 0, 0, 0, 0},
    {"mxfp8", GLN_RECIPE_MXFP8, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 0, 0, 0, 0},
    {"fp8_block/pow2", GLN_RECIPE_FP8_BLOCK, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 1, 0, 0, 0},
    {"none/bf16+prefetch", GLN_RECIPE_NONE, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 1, 1, 0, 0},
    {"mxfp8+prefetch", GLN_RECIPE_MXFP8, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 0, 1, 0, 0},
    {"fp8_current/pow2+fp8gather", GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 1, 1, 0, 0, 1, 0},
    {"fp8_current/pow2+fp8gather+prefetch", GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 1, 1, 1, 1, 1, 0},
    {"fp8_current+fp8gather+prefetch", GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 0, 1, 1, 1, 0},
    {"mxfp8+fp8gather+prefetch", GLN_RECIPE_MXFP8, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 1, 1, 1, 128},
    {"fp8_block/pow2+fp8gather", GLN_RECIPE_FP8_BLOCK, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 0, 0, 1, 0},
    {"fp8_block/pow2+fp8gather+prefetch", GLN_RECIPE_FP8_BLOCK, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, 1, 1, 1, 0},
};
#define NVARIANTS (sizeof variants / sizeof variants[0])
#define TOTAL ((int64_t)NE * KO * KI)

/* Rank-dependent token splits; expert 1 is empty on odd ranks; rank 2 has no tokens. */
static void rank_splits(int rank, int64_t *m, int64_t *rows) {
    int none = rank == 2;
    m[0] = none ? 0 : 2 + rank;
    m[1] = none || rank % 2 ? 0 : 3;
    m[2] = none ? 0 : 5 + 2 * rank;
    *rows = m[0] + m[1] + m[2];
}

/* The layer recipe's weight quantization (recipe.c): what the FP8 all-gather must use. */
static gln_quant_config_t weight_quant(const variant_t *v) {
    gln_quant_config_t q = GLN_QUANT_CONFIG_INIT;
    q.mode = v->recipe == GLN_RECIPE_MXFP8       ? GLN_SCALING_MXFP8_1D
             : v->recipe == GLN_RECIPE_FP8_BLOCK ? GLN_SCALING_BLOCK_2D
                                                 : GLN_SCALING_TENSOR;
    q.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    q.power_2_scale = v->pow2;
    if (v->recipe == GLN_RECIPE_FP8_BLOCK) q.power_2_scale = 1; /* block_fp32_scales = 0 */
    return q;
}

static void fill_small_ints(void *buf, gln_dtype_t dt, size_t n, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t i = 0; i < n; i++) gln_store(buf, dt, i, (double)gln_rng_int(&r, -3, 3));
}

typedef struct world {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    const gln_dist_weights_t *p;
    gln_grouped_linear_t *sharded, *plain;
    float *full;              /* [N·K_out·K_in] FP32, same on every rank */
    void *wplain;             /* the plain layer's weights, param dtype */
    float *mg_plain;          /* the plain layer's FP32 main_grads [N·K_out·K_in] */
} world_t;

static void base_config(const variant_t *v, gln_path_t path, gln_grouped_linear_config_t *c) {
    gln_grouped_linear_config_t def = GLN_GROUPED_LINEAR_CONFIG_INIT;
    *c = def;
    c->num_experts = NE;
    c->in_features = KI;
    c->out_features = KO;
    c->bias = 0;
    c->param_dtype = v->wdt;
    c->activation_dtype = v->act;
    c->recipe = v->recipe;
    c->path = path;
    c->power_2_scales = v->pow2;
    c->block_fp32_scales = 0;
}

static int world_create(world_t *w, const variant_t *v, gln_path_t path, int requires_grad) {
    memset(w, 0, sizeof *w);
    CHECK_OK(gln_context_create(NULL, &w->ctx));
    CHECK_OK(gln_test_mpi_comm(w->ctx, &w->comm));
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE;
    sc.out_features = KO;
    sc.in_features = KI;
    sc.working_dtype = v->wdt;
    sc.async_finalize = v->async;
    sc.requires_grad = requires_grad;
    sc.fp8_gather = v->fp8g;
    sc.fp8_quant = weight_quant(v);
    CHECK_OK(gln_sharded_weights_create(w->ctx, w->comm, &sc, &w->sw));
    if (!w->sw) return 0;
    w->p = gln_sharded_weights_protocol(w->sw);

    w->full = gln_test_alloc((size_t)TOTAL * sizeof(float));
    fill_small_ints(w->full, GLN_DTYPE_FP32, (size_t)TOTAL, 7); /* same seed: same on all ranks */
    CHECK_OK(gln_sharded_weights_load_full(w->sw, w->full));
    size_t es = gln_dtype_size(v->wdt);
    w->wplain = gln_test_alloc((size_t)TOTAL * es);
    for (int64_t i = 0; i < TOTAL; i++) gln_store(w->wplain, v->wdt, (size_t)i, w->full[i]);
    w->mg_plain = gln_test_alloc((size_t)TOTAL * sizeof(float));

    gln_grouped_linear_config_t c;
    base_config(v, path, &c);
    c.params.distributed = w->p;
    CHECK_OK(gln_grouped_linear_create(w->ctx, &c, &w->sharded));

    void *wp[NE];
    float *mp[NE];
    for (int e = 0; e < NE; e++) {
        wp[e] = (char *)w->wplain + (size_t)e * KO * KI * es;
        mp[e] = w->mg_plain + (size_t)e * KO * KI;
    }
    base_config(v, path, &c);
    c.params.weights = wp;
    c.params.main_grads = mp;
    c.fuse_wgrad_accumulation = 1;
    c.weights_require_grad = requires_grad;
    CHECK_OK(gln_grouped_linear_create(w->ctx, &c, &w->plain));
    return w->sharded && w->plain;
}

static void world_destroy(world_t *w) {
    CHECK_OK(gln_grouped_linear_destroy(w->sharded));
    CHECK_OK(gln_grouped_linear_destroy(w->plain));
    CHECK_OK(gln_sharded_weights_destroy(w->sw));
    CHECK_OK(gln_comm_destroy(w->comm));
    CHECK_OK(gln_context_destroy(w->ctx));
    gln_test_free(w->full);
    gln_test_free(w->wplain);
    gln_test_free(w->mg_plain);
}

/* One forward + backward of `layer` on this rank's data; y and dx poisoned before. */
static void run_layer(gln_grouped_linear_t *layer, const variant_t *v, gln_microbatch_t mb,
                      uint64_t seed, void *y, void *dx, const gln_dist_weights_t *pf) {
    int rank = gln_mpi_rank();
    int64_t m[NE], rows;
    rank_splits(rank, m, &rows);
    size_t es = gln_dtype_size(v->act);
    void *x = gln_test_alloc((size_t)rows * KI * es), *dy = gln_test_alloc((size_t)rows * KO * es);
    fill_small_ints(x, v->act, (size_t)(rows * KI), seed * 1000 + (uint64_t)rank);
    fill_small_ints(dy, v->act, (size_t)(rows * KO), seed * 1000 + 500 + (uint64_t)rank);
    gln_poison(y, v->act, (size_t)(rows * KO));
    gln_poison(dx, v->act, (size_t)(rows * KI));

    gln_tensor_t xt = gln_tensor_make(v->act, rows, KI, x), yt = gln_tensor_make(v->act, rows, KO, y);
    gln_tensor_t dyt = gln_tensor_make(v->act, rows, KO, dy), dxt = gln_tensor_make(v->act, rows, KI, dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt;
    a.m_splits = m;
    a.y = &yt;
    a.microbatch = mb;
    a.input_requires_grad = 1;
    gln_grouped_linear_saved_t *saved = NULL;
    if (pf) CHECK_OK(pf->prefetch(pf->impl, 0));
    CHECK_OK(gln_grouped_linear_forward(layer, &a, &saved));
    if (saved) {
        if (pf) CHECK_OK(pf->prefetch(pf->impl, 1));
        CHECK_OK(gln_grouped_linear_backward(saved, &dyt, &dxt));
        CHECK_OK(gln_grouped_linear_saved_release(saved));
    }
    gln_test_free(x);
    gln_test_free(dy);
}

/* Forward + backward of both layers; y and dx must match bitwise on this rank. */
static void step_both(world_t *w, const variant_t *v, gln_microbatch_t mb_sharded, uint64_t seed) {
    int64_t m[NE], rows;
    rank_splits(gln_mpi_rank(), m, &rows);
    size_t es = gln_dtype_size(v->act);
    void *ys = gln_test_alloc((size_t)rows * KO * es), *yp = gln_test_alloc((size_t)rows * KO * es);
    void *dxs = gln_test_alloc((size_t)rows * KI * es), *dxp = gln_test_alloc((size_t)rows * KI * es);
    run_layer(w->sharded, v, mb_sharded, seed, ys, dxs, v->prefetch ? w->p : NULL);
    CHECK_OK(w->p->wait(w->p->impl)); /* async finalize: complete before main_grad is read */
    size_t live = 1, peak = 0;
    CHECK_OK(gln_sharded_weights_materialized_bytes(w->sw, &live, &peak));
    CHECK_MSG(live == 0, "%s: %zu materialized bytes alive after forward + backward", v->name, live);
    int64_t shard_len = 0;
    CHECK_OK(gln_sharded_weights_shard(w->sw, NULL, NULL, &shard_len, NULL));
    size_t one_group = (size_t)shard_len * (size_t)gln_mpi_size() * gln_dtype_size(v->wdt);
    CHECK_MSG(peak == one_group, "%s: peak materialized %zu bytes, expected one group %zu", v->name,
              peak, one_group);
    run_layer(w->plain, v, GLN_MICROBATCH_FIRST, seed, yp, dxp, NULL);
    int nan = 0;
    for (int64_t i = 0; i < rows * KO; i++) nan += isnan(gln_load(yp, v->act, (size_t)i));
    CHECK_MSG(nan == 0, "%s: plain y has %d unwritten (NaN) elements", v->name, nan);
    char what[128];
    snprintf(what, sizeof what, "%s step %llu: y sharded vs plain", v->name, (unsigned long long)seed);
    CHECK(gln_check_bitwise(what, ys, yp, (size_t)rows * KO * es));
    snprintf(what, sizeof what, "%s step %llu: dx sharded vs plain", v->name, (unsigned long long)seed);
    CHECK(gln_check_bitwise(what, dxs, dxp, (size_t)rows * KI * es));
    CHECK(gln_guard_ok(ys) && gln_guard_ok(dxs));
    gln_test_free(ys);
    gln_test_free(yp);
    gln_test_free(dxs);
    gln_test_free(dxp);
}

/* ref = Σ over ranks of this rank's g (FP32 sum by MPI); abs += Σ over ranks of |g|. */
static void rank_sum(const float *g, float *ref, double *abs_acc) {
    float *a = malloc((size_t)TOTAL * sizeof(float)), *as = malloc((size_t)TOTAL * sizeof(float));
    MPI_Allreduce(g, ref, (int)TOTAL, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int64_t i = 0; i < TOTAL; i++) a[i] = fabsf(g[i]);
    MPI_Allreduce(a, as, (int)TOTAL, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int64_t i = 0; i < TOTAL; i++) abs_acc[i] += as[i];
    free(a);
    free(as);
}

static void check_main_grad(world_t *w, const variant_t *v, const float *ref, const double *abs_sum,
                            const char *what) {
    float *got = gln_test_alloc((size_t)TOTAL * sizeof(float));
    gln_poison(got, GLN_DTYPE_FP32, (size_t)TOTAL);
    CHECK_OK(gln_sharded_weights_gather_main_grad(w->sw, got));
    int nonzero = 0;
    for (int64_t i = 0; i < TOTAL; i++) nonzero += ref[i] != 0.0f;
    CHECK_MSG(nonzero > TOTAL / 4, "%s %s: reference wgrads are mostly zero (%d nonzero)", v->name,
              what, nonzero);
    if (v->exact) {
        CHECK(gln_check_bitwise(what, got, ref, (size_t)TOTAL * sizeof(float)));
    } else {
        int R = gln_mpi_size(), bad = 0;
        for (int64_t i = 0; i < TOTAL; i++) {
            double tol = 2.0 * (R - 1) * SUM_ORDER_UNIT * abs_sum[i] + SUM_ORDER_UNIT * fabs(ref[i]);
            if (!(fabs((double)got[i] - ref[i]) <= tol)) {
                if (bad++ < 3)
                    gln_test_fail_at(__FILE__, __LINE__, "%s %s [%lld]: %.9g vs %.9g (tol %.3g)",
                                     v->name, what, (long long)i, got[i], ref[i], tol);
            }
        }
        CHECK_MSG(bad == 0, "%s %s: %d elements outside the summation-order bound", v->name, what, bad);
    }
    gln_test_free(got);
}

/* Step 1: both layers FIRST (overwrite).  Optimizer step on shards and plain weights alike
 * (-0.5: still exact).  Step 2: sharded NEXT (finalize accumulates into main_grad), plain FIRST
 * after weights_updated (fresh quantization, overwrite), so the reference is Σ step1 + Σ step2. */
static void run_variant(const variant_t *v, gln_path_t path) {
    KI = v->ki ? v->ki : 33;
    world_t w;
    if (!world_create(&w, v, path, 1)) {
        gln_test_fail_at(__FILE__, __LINE__, "%s path %d: setup failed", v->name, (int)path);
        return;
    }
    float *ref1 = calloc((size_t)TOTAL, sizeof(float)), *ref2 = calloc((size_t)TOTAL, sizeof(float));
    double *abs_sum = calloc((size_t)TOTAL, sizeof(double));
    step_both(&w, v, GLN_MICROBATCH_FIRST, 1);
    rank_sum(w.mg_plain, ref1, abs_sum);
    check_main_grad(&w, v, ref1, abs_sum, "main_grad step 1");

    float *master;
    int64_t len, off;
    CHECK_OK(gln_sharded_weights_shard(w.sw, &master, NULL, &len, &off));
    /* the flat layout: experts padded to 128-row multiples under the 128x128 FP8 all-gather */
    int64_t stride = (int64_t)KO * KI;
    if (v->fp8g && v->recipe == GLN_RECIPE_FP8_BLOCK) stride = (KO + 127) / 128 * 128 * KI;
    for (int64_t i = 0; i < len; i++) {
        int64_t flat = off + i, e = flat / stride, within = flat % stride;
        if (e < NE && within < (int64_t)KO * KI) master[i] -= 0.5f;
    }
    CHECK_OK(gln_sharded_weights_sync_working(w.sw));
    for (int64_t i = 0; i < TOTAL; i++)
        gln_store(w.wplain, v->wdt, (size_t)i, gln_load(w.wplain, v->wdt, (size_t)i) - 0.5);
    CHECK_OK(gln_grouped_linear_weights_updated(w.plain));
    CHECK_OK(gln_grouped_linear_weights_updated(w.sharded));

    step_both(&w, v, GLN_MICROBATCH_NEXT, 2);
    rank_sum(w.mg_plain, ref2, abs_sum);
    for (int64_t i = 0; i < TOTAL; i++) ref2[i] += ref1[i]; /* the group adds in this order too */
    check_main_grad(&w, v, ref2, abs_sum, "main_grad step 2 (accumulated)");
    free(ref1);
    free(ref2);
    free(abs_sum);
    world_destroy(&w);
    KI = 33;
}

static void test_split_path(void) {
    for (size_t i = 0; i < NVARIANTS; i++) run_variant(&variants[i], GLN_PATH_SPLIT);
}

static void test_grouped_path(void) {
    for (size_t i = 0; i < NVARIANTS; i++) run_variant(&variants[i], GLN_PATH_GROUPED);
}

/* requires_grad is read from the group: with 0 there is no wgrad and no finalize (main_grad
 * stays zero) while dx is still computed and equals the plain layer's. */
static void test_requires_grad_from_group(void) {
    const variant_t *v = &variants[0];
    world_t w;
    if (!world_create(&w, v, GLN_PATH_SPLIT, 0)) return;
    step_both(&w, v, GLN_MICROBATCH_FIRST, 3);
    float *got = gln_test_alloc((size_t)TOTAL * sizeof(float)), *zero = gln_test_alloc((size_t)TOTAL * sizeof(float));
    CHECK_OK(gln_sharded_weights_gather_main_grad(w.sw, got));
    CHECK(gln_check_bitwise("main_grad without requires_grad", got, zero, (size_t)TOTAL * sizeof(float)));
    gln_test_free(got);
    gln_test_free(zero);
    world_destroy(&w);
}

/* Independent anchor for the exact fp32 case: y = x·Wᵀ computed here in float64 (small
 * integers: exact), so both layers are also right, not only equal. */
static void test_fp32_forward_anchor(void) {
    const variant_t *v = &variants[0];
    world_t w;
    if (!world_create(&w, v, GLN_PATH_GROUPED, 1)) return;
    int rank = gln_mpi_rank();
    int64_t m[NE], rows;
    rank_splits(rank, m, &rows);
    float *y = gln_test_alloc((size_t)(rows * KO) * sizeof(float));
    float *dx = gln_test_alloc((size_t)(rows * KI) * sizeof(float));
    float *x = gln_test_alloc((size_t)(rows * KI) * sizeof(float));
    run_layer(w.sharded, v, GLN_MICROBATCH_FIRST, 4, y, dx, NULL);
    CHECK_OK(w.p->wait(w.p->impl));
    fill_small_ints(x, GLN_DTYPE_FP32, (size_t)(rows * KI), 4 * 1000 + (uint64_t)rank); /* as run_layer */
    int bad = 0;
    int64_t row = 0;
    for (int e = 0; e < NE; e++)
        for (int64_t r = 0; r < m[e]; r++, row++)
            for (int o = 0; o < KO; o++) {
                double acc = 0.0;
                for (int k = 0; k < KI; k++)
                    acc += (double)x[row * KI + k] * w.full[((int64_t)e * KO + o) * KI + k];
                bad += y[row * KO + o] != acc;
            }
    CHECK_MSG(bad == 0, "sharded fp32 forward vs float64 reference: %d wrong", bad);
    gln_test_free(y);
    gln_test_free(dx);
    gln_test_free(x);
    world_destroy(&w);
}

/* The FP8 all-gather returns exactly gln_quantize of each full bf16 expert weight (data and
 * decode scale), on random weights whose amaxes sit in different ranks' shards. */
static void test_fp8_gather_bytes(void) {
    for (int pow2 = 0; pow2 <= 1; pow2++) {
        variant_t v = {"fp8gather", GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, GLN_DTYPE_BF16, pow2, 0, 0, 0, 1, 0};
        world_t w;
        if (!world_create(&w, &v, GLN_PATH_GROUPED, 1)) return;
        gln_rng_t r = gln_rng_seed(99); /* same on every rank */
        for (int64_t i = 0; i < TOTAL; i++) w.full[i] = (float)(gln_rng_normal(&r) * (1 + i % 7));
        w.full[TOTAL - 5] = 40.0f; /* expert 2's amax in the last rank's shard */
        CHECK_OK(gln_sharded_weights_load_full(w.sw, w.full));
        gln_tensor_t g[NE];
        CHECK_OK(w.p->materialize_forward(w.p->impl, g));
        size_t live = 0;
        CHECK_OK(gln_sharded_weights_materialized_bytes(w.sw, &live, NULL));
        size_t shard = (size_t)((TOTAL + gln_mpi_size() - 1) / gln_mpi_size());
        CHECK_MSG(live == ((shard * (size_t)gln_mpi_size() + 15) & ~(size_t)15) + NE * sizeof(float),
                  "FP8 gather: %zu live bytes, expected FP8 bytes + N scales", live);
        gln_quant_config_t q = weight_quant(&v);
        void *bf = gln_test_alloc((size_t)KO * KI * 2);
        uint8_t *ref = gln_test_alloc((size_t)KO * KI);
        for (int e = 0; e < NE; e++) {
            for (int64_t i = 0; i < (int64_t)KO * KI; i++)
                gln_store(bf, GLN_DTYPE_BF16, (size_t)i, w.full[(int64_t)e * KO * KI + i]);
            gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, KO, KI, bf);
            gln_tensor_t out = gln_tensor_make(GLN_DTYPE_FP8_E4M3, KO, KI, ref);
            float sinv = -1.0f, scale = 0.0f, amax = 0.0f;
            out.scaling = GLN_SCALING_TENSOR;
            out.scale_inv = &sinv;
            out.scale = &scale;
            out.amax = &amax;
            CHECK_OK(gln_quantize(w.ctx, &q, &in, &out));
            CHECK_MSG(g[e].scaling == GLN_SCALING_TENSOR && g[e].dtype == GLN_DTYPE_FP8_E4M3,
                      "expert %d: gathered weight is not per-tensor E4M3", e);
            char what[96];
            snprintf(what, sizeof what, "pow2 %d expert %d: gathered FP8 vs gln_quantize", pow2, e);
            CHECK(gln_check_bitwise(what, g[e].data, ref, (size_t)KO * KI));
            CHECK_MSG(memcmp(g[e].scale_inv, &sinv, sizeof sinv) == 0,
                      "pow2 %d expert %d: scale_inv %.9g vs %.9g", pow2, e, *(float *)g[e].scale_inv, sinv);
        }
        CHECK_OK(w.p->release(w.p->impl, g));
        gln_test_free(bf);
        gln_test_free(ref);
        world_destroy(&w);
    }
}

/* The block-scaled all-gathers return exactly gln_quantize of each full bf16 expert weight: the
 * FP8 data and the whole scale grid (padding included); a prefetched gather gives the same
 * bytes.  MXFP8: K_in a multiple of 128, shards of whole 128-element rows.  128x128 (power-of-two
 * and FP32 scales): experts padded to 128-row multiples, shards of whole 128-row tiles; K_in = 160
 * leaves a partial tile column, K_out = 17 a partial tile row. */
static void block_gather_bytes(gln_scaling_mode_t mode, int pow2) {
    enum { MN = 3, MO = 17 };
    const int64_t MI = mode == GLN_SCALING_MXFP8_1D ? 256 : 33;
    const int64_t total = (int64_t)MN * MO * MI;
    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    CHECK_OK(gln_test_mpi_comm(ctx, &comm));
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = MN, sc.out_features = MO, sc.in_features = MI;
    sc.fp8_gather = 1;
    sc.fp8_quant.mode = mode;
    sc.fp8_quant.power_2_scale = pow2;
    gln_sharded_weights_t *sw = NULL;
    CHECK_OK(gln_sharded_weights_create(ctx, comm, &sc, &sw));
    if (!sw) return;
    int64_t len = 0;
    CHECK_OK(gln_sharded_weights_shard(sw, NULL, NULL, &len, NULL));
    int64_t unit = mode == GLN_SCALING_MXFP8_1D ? 128 : 128 * MI;
    CHECK_MSG(len % unit == 0, "mode %d shard length %lld is not a multiple of %lld", (int)mode,
              (long long)len, (long long)unit);
    float *full = gln_test_alloc((size_t)total * sizeof(float));
    gln_rng_t r = gln_rng_seed(123);
    for (int64_t i = 0; i < total; i++) full[i] = (float)(gln_rng_normal(&r) * ldexp(1.0, (int)(i / 32 % 9) - 4));
    CHECK_OK(gln_sharded_weights_load_full(sw, full));
    const gln_dist_weights_t *p = gln_sharded_weights_protocol(sw);
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(mode, GLN_DTYPE_FP8_E4M3, MO, MI, &lay));
    void *bf = gln_test_alloc((size_t)MO * MI * 2);
    uint8_t *ref = gln_test_alloc((size_t)MO * MI), *rs = gln_test_alloc(lay.scale_bytes);
    for (int pass = 0; pass < 2; pass++) {
        gln_tensor_t g[MN];
        if (pass) CHECK_OK(p->prefetch(p->impl, 0));
        CHECK_OK(p->materialize_forward(p->impl, g));
        for (int e = 0; e < MN; e++) {
            for (int64_t i = 0; i < (int64_t)MO * MI; i++)
                gln_store(bf, GLN_DTYPE_BF16, (size_t)i, full[(int64_t)e * MO * MI + i]);
            gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, MO, MI, bf);
            gln_tensor_t out = gln_tensor_make(GLN_DTYPE_FP8_E4M3, MO, MI, ref);
            out.scaling = mode;
            out.scale_inv = rs;
            CHECK_OK(gln_quantize(ctx, &sc.fp8_quant, &in, &out));
            CHECK(g[e].scaling == mode && g[e].dtype == GLN_DTYPE_FP8_E4M3);
            char what[96];
            snprintf(what, sizeof what, "mode %d pow2 %d gather pass %d expert %d: data", (int)mode, pow2, pass, e);
            CHECK(gln_check_bitwise(what, g[e].data, ref, (size_t)MO * MI));
            snprintf(what, sizeof what, "mode %d pow2 %d gather pass %d expert %d: scale grid", (int)mode, pow2,
                     pass, e);
            CHECK(gln_check_bitwise(what, g[e].scale_inv, rs, lay.scale_bytes));
        }
        CHECK_OK(p->release(p->impl, g));
    }
    gln_test_free(bf);
    gln_test_free(ref);
    gln_test_free(rs);
    gln_test_free(full);
    CHECK_OK(gln_sharded_weights_destroy(sw));
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

static void test_block_gather_bytes(void) {
    block_gather_bytes(GLN_SCALING_MXFP8_1D, 0);
    block_gather_bytes(GLN_SCALING_BLOCK_2D, 1);
    block_gather_bytes(GLN_SCALING_BLOCK_2D, 0);
}

/* An asynchronous finalize is completed through the layer: two steps without any wait by the
 * caller (the second backward completes the first finalize), then destroying the layer
 * completes the second one; main_grad equals the synchronous group's bit for bit. */
static void test_async_through_layer(void) {
    float *mg[2];
    for (int async = 0; async <= 1; async++) {
        variant_t v = {"none/bf16", GLN_RECIPE_NONE, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 0, 1, async, 0, 0, 0};
        world_t w;
        if (!world_create(&w, &v, GLN_PATH_GROUPED, 1)) return;
        int64_t m[NE], rows;
        rank_splits(gln_mpi_rank(), m, &rows);
        void *y = gln_test_alloc((size_t)rows * KO * 2), *dx = gln_test_alloc((size_t)rows * KI * 2);
        run_layer(w.sharded, &v, GLN_MICROBATCH_FIRST, 5, y, dx, NULL);
        run_layer(w.sharded, &v, GLN_MICROBATCH_NEXT, 6, y, dx, NULL);
        CHECK_OK(gln_grouped_linear_destroy(w.sharded)); /* completes what is pending */
        w.sharded = NULL;
        mg[async] = gln_test_alloc((size_t)TOTAL * sizeof(float));
        CHECK_OK(gln_sharded_weights_gather_main_grad(w.sw, mg[async]));
        gln_test_free(y);
        gln_test_free(dx);
        world_destroy(&w);
    }
    CHECK(gln_check_bitwise("main_grad async (completed by the layer) vs sync", mg[1], mg[0],
                            (size_t)TOTAL * sizeof(float)));
    gln_test_free(mg[0]);
    gln_test_free(mg[1]);
}

GLN_MPI_TEST_MAIN(GLN_CASE(test_fp8_gather_bytes), GLN_CASE(test_block_gather_bytes), GLN_CASE(test_async_through_layer),
                  GLN_CASE(test_fp32_forward_anchor), GLN_CASE(test_requires_grad_from_group),
                  GLN_CASE(test_split_path), GLN_CASE(test_grouped_path))
