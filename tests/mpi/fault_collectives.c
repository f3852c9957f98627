/* Multi-rank fault tests: every collective entry point fails on every rank, with the same
 * status, when one rank passes a bad argument, and detects calls whose shape differs between
 * ranks (docs/distributed.md).  Run under mpirun with 2 and 3 ranks; a hang is a failure (the
 * ctest TIMEOUT).  After every faulty call the ranks must still be in step: a correct allreduce
 * over the same communicator gives the right sum.
 *
 * Expectations per case: the status on every rank; on the faulty rank its own message, on the
 * others a message naming the faulty rank ("rank R failed"), or, for a mismatch, the field. */
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

enum { NE = 2, KO = 3, KI = 5 };
#define TOTAL ((int64_t)NE * KO * KI)

static int last_rank(void) { return gln_mpi_size() - 1; }

/* Every rank got `want`; ranks other than `bad` (>= 0) name it in their message; `needle`
 * (may be NULL) is in every rank's message. */
static void expect_together(const char *what, gln_status_t got, gln_status_t want, int bad,
                            const char *needle) {
    const char *msg = gln_last_error();
    CHECK_MSG(got == want, "%s: rank %d got %s, expected %s (%s)", what, gln_mpi_rank(),
              gln_status_string(got), gln_status_string(want), msg);
    if (bad >= 0 && gln_mpi_rank() != bad) {
        char name[32];
        snprintf(name, sizeof name, "rank %d failed", bad);
        CHECK_MSG(strstr(msg, name) != NULL, "%s: rank %d message '%s' does not name rank %d",
                  what, gln_mpi_rank(), msg, bad);
    }
    if (needle)
        CHECK_MSG(strstr(msg, needle) != NULL, "%s: rank %d message '%s' does not mention '%s'",
                  what, gln_mpi_rank(), msg, needle);
}

/* The ranks are still in step: a correct allreduce works and sums 1..R. */
static void expect_in_step(gln_comm_t *comm) {
    int64_t v = gln_mpi_rank() + 1, sum = 0;
    CHECK_OK(gln_comm_allreduce(comm, &v, &sum, 1, GLN_DTYPE_INT64, GLN_REDUCE_SUM));
    int64_t r = gln_mpi_size();
    CHECK_MSG(sum == r * (r + 1) / 2, "allreduce after a fault: %lld, expected %lld",
              (long long)sum, (long long)(r * (r + 1) / 2));
}

static gln_comm_t *world_comm(void) {
    gln_comm_t *c = NULL;
    CHECK_OK(gln_comm_create_mpi(NULL, NULL, &c));
    return c;
}

/* ------------------------------------------------------------------------- gln_comm_* */

static void test_allgather_null_send(void) {
    gln_comm_t *c = world_comm();
    float send[4] = {1, 2, 3, 4}, recv[4 * 8];
    int bad = last_rank();
    gln_status_t st = gln_comm_allgather(c, gln_mpi_rank() == bad ? NULL : send, recv, 4,
                                         GLN_DTYPE_FP32);
    expect_together("allgather NULL send", st, GLN_STATUS_INVALID_ARGUMENT, bad, NULL);
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_allgather_bad_dtype(void) {
    gln_comm_t *c = world_comm();
    float send[4] = {0}, recv[4 * 8];
    gln_status_t st = gln_comm_allgather(c, send, recv, 4,
                                         gln_mpi_rank() == 0 ? (gln_dtype_t)99 : GLN_DTYPE_FP32);
    expect_together("allgather dtype 99", st, GLN_STATUS_INVALID_ARGUMENT, 0, NULL);
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_allgather_count_mismatch(void) {
    gln_comm_t *c = world_comm();
    float send[4] = {0}, recv[4 * 8];
    gln_status_t st = gln_comm_allgather(c, send, recv, gln_mpi_rank() == 0 ? 0 : 4, GLN_DTYPE_FP32);
    expect_together("allgather count 0 vs 4", st, GLN_STATUS_COMM_ERROR, -1, "disagree on count");
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_allreduce_op_mismatch(void) {
    gln_comm_t *c = world_comm();
    float v[3] = {1, 2, 3};
    gln_reduce_op_t op = gln_mpi_rank() == last_rank() ? GLN_REDUCE_MAX : GLN_REDUCE_SUM;
    gln_status_t st = gln_comm_allreduce(c, v, v, 3, GLN_DTYPE_FP32, op);
    expect_together("allreduce SUM vs MAX", st, GLN_STATUS_COMM_ERROR, -1, "disagree on op");
    CHECK_MSG(v[0] == 1 && v[1] == 2 && v[2] == 3, "a refused allreduce changed its buffer");
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_allreduce_unsupported_dtype(void) {
    gln_comm_t *c = world_comm();
    uint16_t v[2] = {0};
    int bad = last_rank();
    gln_status_t st = gln_comm_allreduce(c, v, v, 2,
                                         gln_mpi_rank() == bad ? GLN_DTYPE_BF16 : GLN_DTYPE_INT32,
                                         GLN_REDUCE_SUM);
    expect_together("allreduce bf16 on one rank", st, GLN_STATUS_NOT_SUPPORTED, bad, NULL);
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_allreduce_bad_op(void) {
    gln_comm_t *c = world_comm();
    int32_t v[2] = {0};
    gln_status_t st = gln_comm_allreduce(c, v, v, 2, GLN_DTYPE_INT32,
                                         gln_mpi_rank() == 0 ? (gln_reduce_op_t)7 : GLN_REDUCE_SUM);
    expect_together("allreduce op 7", st, GLN_STATUS_INVALID_ARGUMENT, 0, NULL);
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_reduce_scatter_null_recv(void) {
    gln_comm_t *c = world_comm();
    float send[2 * 8] = {0}, recv[2];
    int bad = last_rank();
    gln_status_t st = gln_comm_reduce_scatter(c, send, gln_mpi_rank() == bad ? NULL : recv, 2,
                                              GLN_DTYPE_FP32, GLN_REDUCE_SUM);
    expect_together("reduce_scatter NULL recv", st, GLN_STATUS_INVALID_ARGUMENT, bad, NULL);
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_reduce_scatter_dtype_mismatch(void) {
    gln_comm_t *c = world_comm();
    float send[2 * 8] = {0}, recv[2];
    gln_status_t st = gln_comm_reduce_scatter(
        c, send, recv, 2, gln_mpi_rank() == 0 ? GLN_DTYPE_INT32 : GLN_DTYPE_FP32, GLN_REDUCE_SUM);
    expect_together("reduce_scatter int32 vs fp32", st, GLN_STATUS_COMM_ERROR, -1,
                    "disagree on dtype");
    expect_in_step(c);
    gln_comm_destroy(c);
}

static void test_different_calls(void) {
    gln_comm_t *c = world_comm();
    float a[2] = {0}, b[2 * 8];
    gln_status_t st = gln_mpi_rank() == 0
                          ? gln_comm_allreduce(c, a, a, 2, GLN_DTYPE_FP32, GLN_REDUCE_SUM)
                          : gln_comm_allgather(c, a, b, 2, GLN_DTYPE_FP32);
    expect_together("allreduce vs allgather", st, GLN_STATUS_COMM_ERROR, -1, "different calls");
    expect_in_step(c);
    gln_comm_destroy(c);
}

/* ------------------------------------------------------------- the sharded weight group */

typedef struct world {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    gln_grouped_linear_t *layer;
} world_t;

static int world_create(world_t *w, gln_recipe_t recipe) {
    memset(w, 0, sizeof *w);
    CHECK_OK(gln_context_create(NULL, &w->ctx));
    w->comm = world_comm();
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE;
    sc.out_features = KO;
    sc.in_features = KI;
    sc.working_dtype = GLN_DTYPE_BF16;
    CHECK_OK(gln_sharded_weights_create(w->ctx, w->comm, &sc, &w->sw));
    if (!w->sw) return 0;
    float full[TOTAL];
    for (int64_t i = 0; i < TOTAL; i++) full[i] = (float)(i % 5 - 2);
    CHECK_OK(gln_sharded_weights_load_full(w->sw, full));
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = NE;
    c.in_features = KI;
    c.out_features = KO;
    c.bias = 0;
    c.recipe = recipe;
    c.params.distributed = gln_sharded_weights_protocol(w->sw);
    CHECK_OK(gln_grouped_linear_create(w->ctx, &c, &w->layer));
    return w->layer != NULL;
}

static void world_destroy(world_t *w) {
    gln_grouped_linear_destroy(w->layer);
    gln_sharded_weights_destroy(w->sw);
    gln_comm_destroy(w->comm);
    gln_context_destroy(w->ctx);
}

static void test_gather_master_null(void) {
    world_t w;
    if (!world_create(&w, GLN_RECIPE_NONE)) return;
    float full[TOTAL];
    int bad = last_rank();
    gln_status_t st = gln_sharded_weights_gather_master(w.sw, gln_mpi_rank() == bad ? NULL : full);
    expect_together("gather_master NULL full", st, GLN_STATUS_INVALID_ARGUMENT, bad, NULL);
    CHECK_OK(gln_sharded_weights_gather_master(w.sw, full)); /* still usable, in step */
    CHECK(full[7] == (float)(7 % 5 - 2));
    expect_in_step(w.comm);
    world_destroy(&w);
}

static void test_gather_main_grad_null(void) {
    world_t w;
    if (!world_create(&w, GLN_RECIPE_NONE)) return;
    float full[TOTAL];
    gln_status_t st = gln_sharded_weights_gather_main_grad(w.sw, gln_mpi_rank() == 0 ? NULL : full);
    expect_together("gather_main_grad NULL full", st, GLN_STATUS_INVALID_ARGUMENT, 0, NULL);
    CHECK_OK(gln_sharded_weights_gather_main_grad(w.sw, full));
    expect_in_step(w.comm);
    world_destroy(&w);
}

/* Buffers for one forward / backward of this rank's 4 rows. */
typedef struct batch {
    int64_t m[NE];
    uint16_t x[4 * KI], y[4 * KO], dy[4 * KO], dx[4 * KI];
    gln_tensor_t xt, yt, dyt, dxt;
    gln_grouped_linear_forward_args_t a;
} batch_t;

static void batch_init(batch_t *b) {
    memset(b, 0, sizeof *b);
    b->m[0] = 1;
    b->m[1] = 3;
    for (int i = 0; i < 4 * KI; i++) b->x[i] = gln_fp32_to_bf16((float)(i % 3 - 1));
    for (int i = 0; i < 4 * KO; i++) b->dy[i] = gln_fp32_to_bf16((float)(i % 2));
    b->xt = gln_tensor_make(GLN_DTYPE_BF16, 4, KI, b->x);
    b->yt = gln_tensor_make(GLN_DTYPE_BF16, 4, KO, b->y);
    b->dyt = gln_tensor_make(GLN_DTYPE_BF16, 4, KO, b->dy);
    b->dxt = gln_tensor_make(GLN_DTYPE_BF16, 4, KI, b->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &b->xt;
    a.m_splits = b->m;
    a.y = &b->yt;
    b->a = a;
}

static void test_forward_bad_splits(void) {
    world_t w;
    if (!world_create(&w, GLN_RECIPE_NONE)) return;
    batch_t b;
    batch_init(&b);
    int bad = last_rank();
    if (gln_mpi_rank() == bad) b.m[1] = 9; /* splits sum past the 4 rows */
    gln_grouped_linear_saved_t *saved = NULL;
    gln_status_t st = gln_grouped_linear_forward(w.layer, &b.a, &saved);
    expect_together("forward bad splits on one rank", st, GLN_STATUS_INVALID_ARGUMENT, bad, NULL);
    CHECK(saved == NULL);
    size_t live = 1;
    CHECK_OK(gln_sharded_weights_materialized_bytes(w.sw, &live, NULL));
    CHECK_MSG(live == 0, "%zu gathered bytes alive after a refused forward", live);
    b.m[1] = 3; /* the group and layer still work on every rank */
    CHECK_OK(gln_grouped_linear_forward(w.layer, &b.a, &saved));
    CHECK_OK(gln_grouped_linear_backward(saved, &b.dyt, &b.dxt));
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    expect_in_step(w.comm);
    world_destroy(&w);
}

static void test_forward_recipe_mismatch(void) {
    world_t w;
    gln_recipe_t r = gln_mpi_rank() == last_rank() ? GLN_RECIPE_FP8_CURRENT : GLN_RECIPE_NONE;
    if (!world_create(&w, r)) return;
    batch_t b;
    batch_init(&b);
    gln_status_t st = gln_grouped_linear_forward(w.layer, &b.a, NULL);
    expect_together("forward, recipes differ per rank", st, GLN_STATUS_COMM_ERROR, -1,
                    "disagree on recipe");
    expect_in_step(w.comm);
    world_destroy(&w);
}

static void test_backward_bad_dy(void) {
    world_t w;
    if (!world_create(&w, GLN_RECIPE_NONE)) return;
    batch_t b;
    batch_init(&b);
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(w.layer, &b.a, &saved));
    int bad = 0;
    gln_tensor_t dy = b.dyt;
    if (gln_mpi_rank() == bad) dy.cols = KO + 1;
    gln_status_t st = gln_grouped_linear_backward(saved, &dy, &b.dxt);
    expect_together("backward bad dy on one rank", st, GLN_STATUS_INVALID_ARGUMENT, bad, NULL);
    /* The refused call wrote nothing: it can be retried on every rank. */
    CHECK_OK(gln_grouped_linear_backward(saved, &b.dyt, &b.dxt));
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    expect_in_step(w.comm);
    world_destroy(&w);
}

static void test_backward_dgrad_mismatch(void) {
    world_t w;
    if (!world_create(&w, GLN_RECIPE_NONE)) return;
    batch_t b;
    batch_init(&b);
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(w.layer, &b.a, &saved));
    gln_status_t st =
        gln_grouped_linear_backward(saved, &b.dyt, gln_mpi_rank() == last_rank() ? NULL : &b.dxt);
    expect_together("backward dx on some ranks only", st, GLN_STATUS_COMM_ERROR, -1,
                    "disagree on dgrad");
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    expect_in_step(w.comm);
    world_destroy(&w);
}

/* ------------------------------------------------------ sharded group: FP8 gather, prefetch */

/* One rank asks for the FP8 all-gather, the others do not: create fails everywhere. */
static void test_create_fp8_gather_mismatch(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    gln_comm_t *comm = world_comm();
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE;
    sc.out_features = KO;
    sc.in_features = KI;
    sc.fp8_gather = gln_mpi_rank() == last_rank();
    gln_sharded_weights_t *sw = NULL;
    gln_status_t st = gln_sharded_weights_create(ctx, comm, &sc, &sw);
    expect_together("create with fp8_gather on one rank", st, GLN_STATUS_COMM_ERROR, -1,
                    "fp8_gather");
    CHECK(sw == NULL);
    expect_in_step(comm);
    gln_comm_destroy(comm);
    gln_context_destroy(ctx);
}

/* Create with `sc` on every rank (`out_null`: this rank passes no out-pointer); every rank
 * returns (no hang), with `want` on this rank and a failed create everywhere. */
static void create_expect(const char *what, gln_sharded_weights_config_t sc, int out_null,
                          gln_status_t want, const char *needle) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    gln_comm_t *comm = world_comm();
    gln_sharded_weights_t *sw = (gln_sharded_weights_t *)&sw; /* poisoned */
    gln_status_t st = gln_sharded_weights_create(ctx, comm, &sc, out_null ? NULL : &sw);
    expect_together(what, st, want, -1, needle);
    CHECK(out_null || sw == NULL);
    expect_in_step(comm);
    gln_comm_destroy(comm);
    gln_context_destroy(ctx);
}

static gln_sharded_weights_config_t fp8_config(gln_scaling_mode_t mode) {
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE;
    sc.out_features = KO;
    sc.in_features = mode == GLN_SCALING_MXFP8_1D ? 128 : KI;
    sc.fp8_gather = 1;
    sc.fp8_quant.mode = mode;
    return sc;
}

/* One rank passes sw = NULL: it fails with INVALID_ARGUMENT, the others with COMM_ERROR,
 * instead of waiting for it in the creation handshake. */
static void test_create_null_out_on_one_rank(void) {
    int bad = last_rank(), me = gln_mpi_rank();
    create_expect("create with sw = NULL on one rank", fp8_config(GLN_SCALING_TENSOR), me == bad,
                  me == bad ? GLN_STATUS_INVALID_ARGUMENT : GLN_STATUS_COMM_ERROR,
                  me == bad ? "sw must not be NULL" : "another rank");
}

/* Every field of fp8_quant changes the gathered weights: a difference on one rank fails create
 * on every rank, naming the field. */
static void test_create_fp8_quant_mismatch(void) {
    int odd = gln_mpi_rank() == last_rank();
    gln_sharded_weights_config_t sc = fp8_config(GLN_SCALING_TENSOR);
    if (odd) sc.fp8_quant.power_2_scale = 1;
    create_expect("power_2_scale on one rank", sc, 0, GLN_STATUS_COMM_ERROR, "fp8_quant.power_2_scale");
    sc = fp8_config(GLN_SCALING_TENSOR);
    if (odd) sc.fp8_quant.amax_epsilon = 1e-3f;
    create_expect("amax_epsilon on one rank", sc, 0, GLN_STATUS_COMM_ERROR, "fp8_quant.amax_epsilon");
    sc = fp8_config(GLN_SCALING_BLOCK_2D);
    if (gln_mpi_rank() == 0) sc.fp8_quant.amax_epsilon = 0.5f;
    create_expect("128x128 amax_epsilon on rank 0", sc, 0, GLN_STATUS_COMM_ERROR, "fp8_quant.amax_epsilon");
    sc = fp8_config(GLN_SCALING_TENSOR);
    if (odd) sc.fp8_quant.amax_nan_propagate = 1;
    create_expect("amax_nan_propagate on one rank", sc, 0, GLN_STATUS_COMM_ERROR,
                  "fp8_quant.amax_nan_propagate");
    sc = fp8_config(GLN_SCALING_MXFP8_1D);
    if (odd) sc.fp8_quant.e8m0_rounding = GLN_E8M0_ROUND_FLOOR;
    create_expect("e8m0_rounding on one rank", sc, 0, GLN_STATUS_COMM_ERROR, "fp8_quant.e8m0_rounding");
    sc = fp8_config(GLN_SCALING_TENSOR);
    if (odd) sc.fp8_quant.fp8_dtype = GLN_DTYPE_FP8_E5M2;
    create_expect("fp8_dtype on one rank", sc, 0, GLN_STATUS_COMM_ERROR, "fp8_quant.fp8_dtype");
    sc = fp8_config(GLN_SCALING_TENSOR);
    if (odd) sc.fp8_quant.columnwise = 1;
    create_expect("columnwise on one rank", sc, 0, GLN_STATUS_COMM_ERROR, "fp8_quant.columnwise");
    sc = fp8_config(GLN_SCALING_TENSOR);
    if (odd) sc.fp8_quant.mode = GLN_SCALING_BLOCK_2D;
    create_expect("mode on one rank", sc, 0, GLN_STATUS_COMM_ERROR, "fp8_quant.mode");
}

/* A rank-local refusal (an invalid fp8_quant, sizes past the limits) is agreed: that rank
 * reports its own error, the others fail with it. */
static void test_create_refused_on_one_rank(void) {
    int bad = last_rank(), me = gln_mpi_rank();
    gln_sharded_weights_config_t sc = fp8_config(GLN_SCALING_TENSOR);
    if (me == bad) sc.fp8_quant.amax_epsilon = -1.0f;
    create_expect("amax_epsilon -1 on one rank", sc, 0,
                  me == bad ? GLN_STATUS_INVALID_ARGUMENT : GLN_STATUS_COMM_ERROR,
                  me == bad ? "cfg->fp8_quant.amax_epsilon" : "another rank");
    sc = fp8_config(GLN_SCALING_TENSOR);
    if (me == bad) sc.fp8_quant.mode = GLN_SCALING_NONE;
    create_expect("mode NONE on one rank", sc, 0,
                  me == bad ? GLN_STATUS_INVALID_ARGUMENT : GLN_STATUS_COMM_ERROR,
                  me == bad ? "cfg->fp8_quant.mode" : "another rank");
    sc = fp8_config(GLN_SCALING_BLOCK_2D);
    if (me == 0) sc.in_features = (int64_t)1 << 57;
    create_expect("in_features 2^57 on rank 0", sc, 0,
                  me == 0 ? GLN_STATUS_INVALID_ARGUMENT : GLN_STATUS_COMM_ERROR,
                  me == 0 ? "in_features" : "another rank");
}

/* One rank prefetches while the others materialize: the calls differ, every rank fails with
 * COMM_ERROR (no rank is left inside an all-gather), and the group stays usable. */
static void test_prefetch_on_one_rank(void) {
    world_t w;
    if (!world_create(&w, GLN_RECIPE_NONE)) return;
    const gln_dist_weights_t *p = gln_sharded_weights_protocol(w.sw);
    gln_tensor_t g[NE];
    gln_status_t st = gln_mpi_rank() == last_rank() ? p->prefetch(p->impl, 0)
                                                    : p->materialize_forward(p->impl, g);
    expect_together("prefetch on one rank, materialize on the others", st, GLN_STATUS_COMM_ERROR,
                    -1, "different calls");
    expect_in_step(w.comm);
    /* in step again: a prefetch on every rank, then the materialize that consumes it */
    CHECK_OK(p->prefetch(p->impl, 0));
    CHECK_OK(p->materialize_forward(p->impl, g));
    CHECK_OK(p->release(p->impl, g));
    size_t live = 1;
    CHECK_OK(gln_sharded_weights_materialized_bytes(w.sw, &live, NULL));
    CHECK_MSG(live == 0, "%zu bytes live after prefetch + materialize + release", live);
    world_destroy(&w);
}

/* A bad direction on one rank fails the prefetch on every rank with that rank's status. */
static void test_prefetch_bad_direction(void) {
    world_t w;
    if (!world_create(&w, GLN_RECIPE_NONE)) return;
    int bad = last_rank();
    gln_status_t st = gln_sharded_weights_prefetch(w.sw, gln_mpi_rank() == bad ? 7 : 1);
    expect_together("prefetch direction 7 on one rank", st, GLN_STATUS_INVALID_ARGUMENT, bad, NULL);
    expect_in_step(w.comm);
    world_destroy(&w); /* nothing was started, nothing pending */
}

GLN_MPI_TEST_MAIN(GLN_CASE(test_create_fp8_gather_mismatch), GLN_CASE(test_create_null_out_on_one_rank),
                  GLN_CASE(test_create_fp8_quant_mismatch), GLN_CASE(test_create_refused_on_one_rank), GLN_CASE(test_prefetch_on_one_rank),
                  GLN_CASE(test_prefetch_bad_direction), GLN_CASE(test_allgather_null_send), GLN_CASE(test_allgather_bad_dtype),
                  GLN_CASE(test_allgather_count_mismatch), GLN_CASE(test_allreduce_op_mismatch),
                  GLN_CASE(test_allreduce_unsupported_dtype), GLN_CASE(test_allreduce_bad_op),
                  GLN_CASE(test_reduce_scatter_null_recv),
                  GLN_CASE(test_reduce_scatter_dtype_mismatch), GLN_CASE(test_different_calls),
                  GLN_CASE(test_gather_master_null), GLN_CASE(test_gather_main_grad_null),
                  GLN_CASE(test_forward_bad_splits), GLN_CASE(test_forward_recipe_mismatch),
                  GLN_CASE(test_backward_bad_dy), GLN_CASE(test_backward_dgrad_mismatch))
