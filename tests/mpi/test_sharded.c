/* The sharded weight group over MPI (2 and 4 ranks): shard layout with padding, load and
 * gather round trips, materialization, finalize (sum over ranks, overwrite / accumulate,
 * async + wait), the optimizer-step refresh, and create-time disagreement between ranks, which
 * must fail on EVERY rank instead of hanging.
 *
 * Weights and gradients are small integers, so sums over ranks are exact in FP32 and every
 * comparison is bitwise against references built from the known per-rank inputs. */
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

typedef struct shape {
    int32_t n;
    int64_t ko, ki;
} shape_t;

/* 105 elements (not a multiple of 2 or 4: padded shards); 3 elements (fewer than 4 ranks: a
 * rank may own nothing but padding); 64 (divisible: no padding). */
static const shape_t shapes[] = {{3, 5, 7}, {1, 1, 3}, {2, 4, 8}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

typedef struct fixture {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    const gln_dist_weights_t *p;
    int64_t total;
} fixture_t;

static gln_sharded_weights_config_t config(shape_t s, gln_dtype_t wdt, int async) {
    gln_sharded_weights_config_t cfg = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    cfg.num_experts = s.n;
    cfg.out_features = s.ko;
    cfg.in_features = s.ki;
    cfg.working_dtype = wdt;
    cfg.async_finalize = async;
    return cfg;
}

static int setup(fixture_t *f, shape_t s, gln_dtype_t wdt, int async) {
    memset(f, 0, sizeof *f);
    f->total = (int64_t)s.n * s.ko * s.ki;
    CHECK_OK(gln_context_create(NULL, &f->ctx));
    CHECK_OK(gln_comm_create_mpi(NULL, NULL, &f->comm));
    gln_sharded_weights_config_t cfg = config(s, wdt, async);
    CHECK_OK(gln_sharded_weights_create(f->ctx, f->comm, &cfg, &f->sw));
    f->p = gln_sharded_weights_protocol(f->sw);
    return f->sw != NULL;
}

static void teardown(fixture_t *f) {
    CHECK_OK(gln_sharded_weights_destroy(f->sw));
    CHECK_OK(gln_comm_destroy(f->comm));
    CHECK_OK(gln_context_destroy(f->ctx));
}

/* Small integers in [-8, 8] from a seed: the same on every rank for the same seed. */
static float *ints(int64_t n, uint64_t seed) {
    float *x = gln_test_alloc((size_t)n * sizeof(float));
    gln_rng_t r = gln_rng_seed(seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)gln_rng_int(&r, -8, 8);
    return x;
}

static void test_layout(void) {
    int R = gln_mpi_size(), me = gln_mpi_rank();
    for (size_t k = 0; k < NSHAPES; k++) {
        fixture_t f;
        if (!setup(&f, shapes[k], GLN_DTYPE_FP32, 0)) continue;
        float *master, *mg;
        int64_t len, off;
        CHECK_OK(gln_sharded_weights_shard(f.sw, &master, &mg, &len, &off));
        CHECK_MSG(len == (f.total + R - 1) / R, "shard_len %lld for total %lld on %d ranks",
                  (long long)len, (long long)f.total, R);
        CHECK(off == me * len);
        float *full = ints(f.total, 100 + k);
        CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
        for (int64_t i = 0; i < len; i++) {
            float want = off + i < f.total ? full[off + i] : 0.0f; /* padding is zero */
            CHECK_MSG(master[i] == want, "master[%lld] = %g, want %g", (long long)i, master[i], want);
            CHECK_MSG(mg[i] == 0.0f, "main_grad[%lld] not zeroed", (long long)i);
        }
        float *back = gln_test_alloc((size_t)f.total * sizeof(float));
        gln_poison(back, GLN_DTYPE_FP32, (size_t)f.total);
        CHECK_OK(gln_sharded_weights_gather_master(f.sw, back));
        CHECK(gln_check_bitwise("gather_master", back, full, (size_t)f.total * sizeof(float)));
        CHECK(gln_guard_ok(back));
        gln_test_free(back);
        gln_test_free(full);
        teardown(&f);
    }
}

static void test_materialize(void) {
    static const gln_dtype_t wdts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16};
    int R = gln_mpi_size();
    for (size_t k = 0; k < NSHAPES; k++)
        for (int d = 0; d < 2; d++) {
            shape_t s = shapes[k];
            fixture_t f;
            if (!setup(&f, s, wdts[d], 0)) continue;
            float *full = ints(f.total, 200 + k);
            CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
            gln_tensor_t *w = calloc((size_t)s.n, sizeof *w);
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 0) CHECK_OK(f.p->materialize_forward(f.p->impl, w));
                else CHECK_OK(f.p->materialize_backward(f.p->impl, w));
                int bad = 0;
                for (int32_t e = 0; e < s.n; e++) {
                    CHECK(w[e].dtype == wdts[d] && w[e].rows == s.ko && w[e].cols == s.ki);
                    for (int64_t j = 0; w[e].data && j < s.ko * s.ki; j++)
                        bad += gln_load(w[e].data, wdts[d], (size_t)j) != full[e * s.ko * s.ki + j];
                }
                CHECK_MSG(bad == 0, "materialized weights: %d wrong elements", bad);
                size_t live, peak, padded = (size_t)((f.total + R - 1) / R) * (size_t)R;
                CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, &peak));
                CHECK(live == padded * gln_dtype_size(wdts[d]) && peak == live);
                CHECK_OK(f.p->release(f.p->impl, w));
                CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, NULL));
                CHECK(live == 0);
            }
            free(w);
            gln_test_free(full);
            teardown(&f);
        }
}

/* Each rank writes its own wgrads (seed depends on the rank) into the grad buffers. */
static void write_grads(fixture_t *f, shape_t s, uint64_t seed) {
    float *g = ints(f->total, seed * 31 + (uint64_t)gln_mpi_rank());
    for (int32_t e = 0; e < s.n; e++) {
        float *buf = NULL;
        CHECK_OK(f->p->grad_buffer(f->p->impl, e, &buf));
        if (buf) memcpy(buf, g + e * s.ko * s.ki, (size_t)(s.ko * s.ki) * sizeof(float));
    }
    gln_test_free(g);
}

/* acc += Σ over ranks of the grads written with `seed` (regenerated from the per-rank seeds). */
static void add_rank_sum(float *acc, int64_t total, uint64_t seed) {
    for (int r = 0; r < gln_mpi_size(); r++) {
        float *g = ints(total, seed * 31 + (uint64_t)r);
        for (int64_t i = 0; i < total; i++) acc[i] += g[i];
        gln_test_free(g);
    }
}

static void check_main_grad(fixture_t *f, const float *want, const char *what) {
    float *got = gln_test_alloc((size_t)f->total * sizeof(float));
    gln_poison(got, GLN_DTYPE_FP32, (size_t)f->total);
    CHECK_OK(gln_sharded_weights_gather_main_grad(f->sw, got));
    CHECK(gln_check_bitwise(what, got, want, (size_t)f->total * sizeof(float)));
    /* The padding of this rank's main_grad shard stayed zero. */
    float *mg;
    int64_t len, off;
    CHECK_OK(gln_sharded_weights_shard(f->sw, NULL, &mg, &len, &off));
    for (int64_t i = 0; i < len; i++)
        if (off + i >= f->total) CHECK_MSG(mg[i] == 0.0f, "padding main_grad[%lld] = %g", (long long)i, mg[i]);
    gln_test_free(got);
}

static void run_finalize(int async) {
    for (size_t k = 0; k < NSHAPES; k++) {
        shape_t s = shapes[k];
        fixture_t f;
        if (!setup(&f, s, GLN_DTYPE_BF16, async)) continue;
        float *want = gln_test_alloc((size_t)f.total * sizeof(float));
        int pending = -1;
        /* Step 1: overwrite. */
        write_grads(&f, s, 1);
        CHECK_OK(f.p->finalize_grads(f.p->impl, 0, &pending));
        CHECK(pending == async);
        if (async) CHECK_OK(f.p->wait(f.p->impl));
        add_rank_sum(want, f.total, 1);
        check_main_grad(&f, want, "finalize overwrite");
        /* Step 2: accumulate. */
        write_grads(&f, s, 2);
        CHECK_OK(f.p->finalize_grads(f.p->impl, 1, &pending));
        CHECK(pending == async);
        if (async) CHECK_OK(f.p->wait(f.p->impl));
        add_rank_sum(want, f.total, 2);
        check_main_grad(&f, want, "finalize accumulate");
        /* Step 3: overwrite again discards the history. */
        write_grads(&f, s, 3);
        CHECK_OK(f.p->finalize_grads(f.p->impl, 0, &pending));
        if (async) {
            /* A forward of the next step may overlap the reduce-scatter. */
            gln_tensor_t *w = calloc((size_t)s.n, sizeof *w);
            CHECK_OK(f.p->materialize_forward(f.p->impl, w));
            CHECK_OK(f.p->release(f.p->impl, w));
            free(w);
            CHECK_OK(f.p->wait(f.p->impl));
        }
        memset(want, 0, (size_t)f.total * sizeof(float));
        add_rank_sum(want, f.total, 3);
        check_main_grad(&f, want, "finalize overwrite after accumulate");
        gln_test_free(want);
        teardown(&f);
    }
}

static void test_finalize(void) { run_finalize(0); }
static void test_finalize_async(void) { run_finalize(1); }

/* After an optimizer step on the master shards, sync_working makes the next gather see it. */
static void test_optimizer_step(void) {
    shape_t s = shapes[0];
    fixture_t f;
    if (!setup(&f, s, GLN_DTYPE_BF16, 0)) return;
    float *full = ints(f.total, 300);
    CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
    float *master;
    int64_t len, off;
    CHECK_OK(gln_sharded_weights_shard(f.sw, &master, NULL, &len, &off));
    for (int64_t i = 0; i < len && off + i < f.total; i++) master[i] -= 0.5f;
    CHECK_OK(gln_sharded_weights_sync_working(f.sw));
    gln_tensor_t w[3];
    CHECK_OK(f.p->materialize_forward(f.p->impl, w));
    int bad = 0;
    for (int64_t j = 0; j < f.total; j++)
        bad += gln_load(w[0].data, GLN_DTYPE_BF16, (size_t)j) != full[j] - 0.5f;
    CHECK_MSG(bad == 0, "gathered weights after the step: %d wrong", bad);
    CHECK_OK(f.p->release(f.p->impl, w));
    gln_test_free(full);
    teardown(&f);
}

/* Create with a configuration that differs on one rank: every rank must fail (not hang). */
static void expect_create_fails(gln_sharded_weights_config_t cfg, gln_status_t own_status,
                                const char *needle) {
    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    CHECK_OK(gln_comm_create_mpi(NULL, NULL, &comm));
    gln_sharded_weights_t *sw = (gln_sharded_weights_t *)&sw;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &cfg, &sw), own_status, needle);
    CHECK(sw == NULL);
    /* The communicator is still in step: a collective afterwards completes. */
    CHECK_OK(gln_comm_barrier(comm));
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

static void test_disagreement(void) {
    int me = gln_mpi_rank(), last = gln_mpi_size() - 1;
    gln_sharded_weights_config_t base = config(shapes[0], GLN_DTYPE_BF16, 0);
    gln_sharded_weights_config_t c = base;
    if (me == last) c.out_features += 1;
    expect_create_fails(c, GLN_STATUS_COMM_ERROR, "out_features");
    c = base;
    if (me == 0) c.working_dtype = GLN_DTYPE_FP32;
    expect_create_fails(c, GLN_STATUS_COMM_ERROR, "working_dtype");
    c = base;
    if (me == last) c.async_finalize = 1;
    expect_create_fails(c, GLN_STATUS_COMM_ERROR, "async_finalize");
    c = base;
    if (me == 0) c.num_experts = 4;
    expect_create_fails(c, GLN_STATUS_COMM_ERROR, "num_experts");
    c = base;
    if (me == last) c.requires_grad = 0;
    expect_create_fails(c, GLN_STATUS_COMM_ERROR, "requires_grad");
    /* One rank's config is invalid: it reports its own error, the others a COMM_ERROR. */
    c = base;
    if (me == 0) c.in_features = 0;
    expect_create_fails(c, me == 0 ? GLN_STATUS_INVALID_ARGUMENT : GLN_STATUS_COMM_ERROR,
                        me == 0 ? "in_features 0" : "another rank");
}

GLN_MPI_TEST_MAIN(GLN_CASE(test_layout), GLN_CASE(test_materialize), GLN_CASE(test_finalize),
                  GLN_CASE(test_finalize_async), GLN_CASE(test_optimizer_step),
                  GLN_CASE(test_disagreement))
