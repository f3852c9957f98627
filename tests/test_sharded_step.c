/* gln_sharded_weights_optimizer_step on one rank (self communicator): bit for bit the same
 * master, moments and working shard as gln_optimizer_step on the shard followed by
 * gln_sharded_weights_sync_working, for bf16 and fp32 working copies, Adam and SGD, several
 * steps, the 128x128 FP8 layout (padded experts: the padding stays zero); an async finalize
 * still in flight is completed first; a prefetch outstanding, a group without gradients and bad
 * arguments are refused before anything is written.  With a quantized shard (per-tensor current
 * scaling, 128x128 blocks, MXFP8) the FP8 bytes and scales both materializations hand out are
 * those of the unfused twin's, whose sync_working requantizes from amaxes it computes itself: the
 * fused pass's per-expert amaxes are the right ones (MXFP8: its 32-row padded layout, 40 x 128
 * experts, keeps its padding zero and both stored copies current).  (2-4 ranks:
 * tests/mpi/test_sharded_step.c.) */
#include <string.h>

#include "harness.h"

enum { NE = 3 };
/* The experts' shape: 5 x 7, or 40 x 128 for MXFP8 (K_in % 128 == 0; 40 rows: a partial 32-row
 * group, padded to 64 rows in the flat layout) — set by run_equivalence. */
static int KO = 5, KI = 7;
#define TOTAL (NE * KO * KI)

typedef struct group {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    float *master, *main_grad, *m, *v;
    int64_t len;
} group_t;

enum { QS_NONE, QS_TENSOR, QS_BLOCK2D, QS_MXFP8 }; /* the quantized shard's mode, or none */
static gln_sharded_weights_config_t config(gln_dtype_t wdt, int async, int block2d) {
    gln_sharded_weights_config_t cfg = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    cfg.num_experts = NE;
    cfg.out_features = KO;
    cfg.in_features = KI;
    cfg.working_dtype = wdt;
    cfg.async_finalize = async;
    if (block2d) {
        cfg.fp8_gather = 1;
        cfg.fp8_quant.mode = GLN_SCALING_BLOCK_2D;
    }
    return cfg;
}

static gln_sharded_weights_config_t qshard_config(gln_dtype_t wdt, int qshard) {
    gln_sharded_weights_config_t cfg = config(wdt, 0, qshard == QS_BLOCK2D);
    cfg.fp8_gather = 1;
    cfg.quantized_shard = 1;
    if (qshard == QS_MXFP8) cfg.fp8_quant.mode = GLN_SCALING_MXFP8_1D;
    return cfg;
}

static int group_new(group_t *g, const gln_sharded_weights_config_t *cfg, const float *full) {
    memset(g, 0, sizeof *g);
    CHECK_OK(gln_context_create(NULL, &g->ctx));
    CHECK_OK(gln_comm_create_self(NULL, &g->comm));
    CHECK_OK(gln_sharded_weights_create(g->ctx, g->comm, cfg, &g->sw));
    if (!g->sw) return 0;
    CHECK_OK(gln_sharded_weights_load_full(g->sw, full));
    CHECK_OK(gln_sharded_weights_shard(g->sw, &g->master, &g->main_grad, &g->len, NULL));
    g->m = gln_test_alloc((size_t)g->len * 4); /* zeroed: moments start at zero */
    g->v = gln_test_alloc((size_t)g->len * 4);
    return 1;
}

static void group_free(group_t *g) {
    if (g->m) CHECK(gln_guard_ok(g->m) && gln_guard_ok(g->v));
    gln_test_free(g->m);
    gln_test_free(g->v);
    CHECK_OK(gln_sharded_weights_destroy(g->sw));
    CHECK_OK(gln_comm_destroy(g->comm));
    CHECK_OK(gln_context_destroy(g->ctx));
}

static void random_full(float *full, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (int i = 0; i < TOTAL; i++) full[i] = (float)gln_rng_normal(&r);
}

/* main_grad of both groups: the same values at the real elements (stride apart per expert),
 * padding left zero. */
static void write_grads(group_t *a, group_t *b, int64_t stride, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (int e = 0; e < NE; e++)
        for (int j = 0; j < KO * KI; j++) {
            const float x = (float)(gln_rng_normal(&r) * 1e-2);
            a->main_grad[e * stride + j] = x;
            b->main_grad[e * stride + j] = x;
        }
}

static void check_same(const group_t *a, const group_t *b, const char *what) {
    CHECK(gln_check_optimizer_state(what, a->master, a->m, a->v, b->master, b->m, b->v, a->len));
    void *wa = NULL, *wb = NULL;
    gln_dtype_t dt = GLN_DTYPE_COUNT_;
    CHECK_OK(gln_sharded_weights_working_shard(a->sw, &wa, &dt, NULL));
    CHECK_OK(gln_sharded_weights_working_shard(b->sw, &wb, NULL, NULL));
    char name[96];
    snprintf(name, sizeof name, "%s: working shard", what);
    if (wa && wb) CHECK(gln_check_bitwise(name, wa, wb, (size_t)a->len * gln_dtype_size(dt)));
}

static gln_optimizer_config_t kind_config(int k) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    c.lr = 0.02f;
    if (k == 1) c.weight_decay = 0.1f;
    if (k == 2) {
        c.kind = GLN_OPTIMIZER_SGD;
        c.momentum = 0.9f;
        c.weight_decay = 0.01f;
    }
    return c;
}

/* Both groups' materializations of one direction: the FP8 bytes and decode scales of every copy
 * they hand out equal (forward rowwise; backward rowwise + columnwise, MXFP8 columnwise alone). */
static void check_same_fp8(const group_t *a, const group_t *b, int backward, const char *what) {
    const gln_dist_weights_t *pa = gln_sharded_weights_protocol(a->sw), *pb = gln_sharded_weights_protocol(b->sw);
    gln_tensor_t wa[NE], wb[NE];
    CHECK_OK(backward ? pa->materialize_backward(pa->impl, wa) : pa->materialize_forward(pa->impl, wa));
    CHECK_OK(backward ? pb->materialize_backward(pb->impl, wb) : pb->materialize_forward(pb->impl, wb));
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(wa[0].scaling, wa[0].dtype, KO, KI, &lay));
    const int mx = wa[0].scaling == GLN_SCALING_MXFP8_1D;
    const char *dir = backward ? "backward" : "forward";
    char name[128];
    for (int e = 0; e < NE; e++) {
        CHECK(gln_dtype_is_fp8(wa[e].dtype) && wa[e].scaling == wb[e].scaling);
        /* which copies: rowwise unless an MXFP8 backward, columnwise in a backward */
        const int row = !(backward && mx), col = backward;
        CHECK_MSG(!wa[e].data == !row && !wb[e].data == !row && !wa[e].col_data == !col && !wb[e].col_data == !col,
                  "%s: %s expert %d: copies row %d col %d expected", what, dir, e, row, col);
        if (row && wa[e].data && wb[e].data) {
            snprintf(name, sizeof name, "%s: %s expert %d bytes", what, dir, e);
            CHECK(gln_check_bitwise(name, wa[e].data, wb[e].data, (size_t)KO * KI));
            snprintf(name, sizeof name, "%s: %s expert %d scales", what, dir, e);
            CHECK(gln_check_bitwise(name, wa[e].scale_inv, wb[e].scale_inv, lay.scale_bytes));
        }
        if (col && wa[e].col_data && wb[e].col_data) {
            snprintf(name, sizeof name, "%s: %s expert %d columnwise bytes", what, dir, e);
            CHECK(gln_check_bitwise(name, wa[e].col_data, wb[e].col_data, (size_t)KO * KI));
            snprintf(name, sizeof name, "%s: %s expert %d columnwise scales", what, dir, e);
            CHECK(gln_check_bitwise(name, wa[e].col_scale_inv, wb[e].col_scale_inv, lay.col_scale_bytes));
        }
    }
    CHECK_OK(pa->release(pa->impl, wa));
    CHECK_OK(pb->release(pb->impl, wb));
}

/* Group a steps itself; group b runs the public step on its shard, then sync_working. */
static void run_equivalence(gln_dtype_t wdt, int block2d, int k, int qshard) {
    const int mx = qshard == QS_MXFP8;
    KO = mx ? 40 : 5;
    KI = mx ? 128 : 7;
    float *full = gln_test_alloc((size_t)TOTAL * 4), *back = gln_test_alloc((size_t)TOTAL * 4);
    random_full(full, 40 + (uint64_t)k);
    gln_sharded_weights_config_t cfg = qshard ? qshard_config(wdt, qshard) : config(wdt, 0, block2d);
    block2d = block2d || qshard == QS_BLOCK2D;
    group_t a, b;
    const int ok_a = group_new(&a, &cfg, full), ok_b = group_new(&b, &cfg, full);
    if (!ok_a || !ok_b) return;
    /* padded experts: whole 128-row tiles, or whole 32-row groups (MXFP8 quantized shard) */
    const int64_t stride = block2d ? 128 * KI : mx ? (KO + 31) / 32 * 32 * KI : KO * KI;
    CHECK_MSG(a.len >= NE * stride && (!mx || a.len % (32 * KI) == 0), "shard of %lld elements for %d experts %lld apart",
              (long long)a.len, NE, (long long)stride);
    const gln_optimizer_config_t c = kind_config(k);
    char what[96];
    for (int64_t step = 1; step <= 3; step++) {
        write_grads(&a, &b, stride, 7 * (uint64_t)step + (uint64_t)k);
        CHECK_OK(gln_sharded_weights_optimizer_step(a.sw, &c, step, a.m, a.v));
        CHECK_OK(gln_optimizer_step(b.ctx, &c, step, b.master, b.main_grad, b.m, b.v, b.len, NULL, GLN_DTYPE_BF16));
        CHECK_OK(gln_sharded_weights_sync_working(b.sw));
        snprintf(what, sizeof what, "%s%s config %d step %lld", gln_dtype_name(wdt),
                 block2d ? " 128x128" : mx ? " mxfp8" : "", k, (long long)step);
        check_same(&a, &b, what);
        if (qshard) {
            check_same_fp8(&a, &b, 0, what);
            check_same_fp8(&a, &b, 1, what);
        }
    }
    /* the padding of the shard (after each expert's rows, and at the end) is still zero */
    for (int64_t i = 0; i < a.len; i++) {
        const int pad = i >= NE * stride || i % stride >= KO * KI;
        if (pad) CHECK_MSG(a.master[i] == 0.0f && a.m[i] == 0.0f, "%s: padding element %lld changed", what,
                           (long long)i);
    }
    /* the gathered masters are the stepped ones */
    CHECK_OK(gln_sharded_weights_gather_master(a.sw, back));
    for (int e = 0; e < NE; e++)
        CHECK(gln_check_bitwise("gathered master", back + e * KO * KI, a.master + e * stride, (size_t)KO * KI * 4));
    CHECK(gln_guard_ok(full) && gln_guard_ok(back));
    gln_test_free(full);
    gln_test_free(back);
    group_free(&a);
    group_free(&b);
    KO = 5;
    KI = 7;
}

static void test_equivalence(void) {
    for (int k = 0; k < 3; k++) {
        run_equivalence(GLN_DTYPE_BF16, 0, k, 0);
        run_equivalence(GLN_DTYPE_FP32, 0, k, 0);
        run_equivalence(GLN_DTYPE_BF16, 1, k, 0);
        run_equivalence(GLN_DTYPE_BF16, 0, k, QS_TENSOR);
        run_equivalence(GLN_DTYPE_FP32, 0, k, QS_TENSOR);
        run_equivalence(GLN_DTYPE_BF16, 0, k, QS_BLOCK2D);
        run_equivalence(GLN_DTYPE_BF16, 0, k, QS_MXFP8);
        run_equivalence(GLN_DTYPE_FP32, 0, k, QS_MXFP8);
    }
}

/* A finalize still in flight is completed before the step reads main_grad. */
static void test_pending_finalize(void) {
    float full[NE * 5 * 7]; /* the 5 x 7 shape */
    random_full(full, 3);
    gln_sharded_weights_config_t cfg = config(GLN_DTYPE_BF16, 1, 0);
    group_t a, b;
    const int ok_a = group_new(&a, &cfg, full), ok_b = group_new(&b, &cfg, full);
    if (!ok_a || !ok_b) return;
    group_t *gs[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        const gln_dist_weights_t *p = gln_sharded_weights_protocol(gs[i]->sw);
        gln_rng_t r = gln_rng_seed(11);
        for (int e = 0; e < NE; e++) {
            float *buf = NULL;
            CHECK_OK(p->grad_buffer(p->impl, e, &buf));
            for (int j = 0; buf && j < KO * KI; j++) buf[j] = (float)(gln_rng_normal(&r) * 1e-2);
        }
        int pending = 0;
        CHECK_OK(p->finalize_grads(p->impl, 0, &pending));
        CHECK(pending == 1);
    }
    const gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    CHECK_OK(gln_sharded_weights_optimizer_step(a.sw, &c, 1, a.m, a.v));
    CHECK_OK(gln_sharded_weights_wait(b.sw));
    CHECK_OK(gln_optimizer_step(b.ctx, &c, 1, b.master, b.main_grad, b.m, b.v, b.len, NULL, GLN_DTYPE_BF16));
    CHECK_OK(gln_sharded_weights_sync_working(b.sw));
    check_same(&a, &b, "pending finalize");
    CHECK(gln_check_bitwise("main_grad", a.main_grad, b.main_grad, (size_t)a.len * 4));
    CHECK_OK(gln_sharded_weights_wait(a.sw)); /* nothing left pending: a no-op */
    group_free(&a);
    group_free(&b);
}

static void test_refusals(void) {
    float full[NE * 5 * 7]; /* the 5 x 7 shape */
    random_full(full, 5);
    gln_sharded_weights_config_t cfg = config(GLN_DTYPE_BF16, 0, 0);
    group_t a;
    if (!group_new(&a, &cfg, full)) return;
    const gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    gln_optimizer_config_t bad = c;
    bad.beta2 = 1.0f;
    CHECK_STATUS(gln_sharded_weights_optimizer_step(NULL, &c, 1, a.m, a.v), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_sharded_weights_optimizer_step: sw must not be NULL");
    CHECK_STATUS(gln_sharded_weights_optimizer_step(a.sw, NULL, 1, a.m, a.v), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_sharded_weights_optimizer_step: cfg must not be NULL");
    CHECK_STATUS(gln_sharded_weights_optimizer_step(a.sw, &bad, 1, a.m, a.v), GLN_STATUS_INVALID_ARGUMENT,
                 "cfg->beta2 1 must be in [0, 1)");
    CHECK_STATUS(gln_sharded_weights_optimizer_step(a.sw, &c, 0, a.m, a.v), GLN_STATUS_INVALID_ARGUMENT,
                 "step 0 must be >= 1");
    CHECK_STATUS(gln_sharded_weights_optimizer_step(a.sw, &c, 1, NULL, a.v), GLN_STATUS_INVALID_ARGUMENT,
                 "exp_avg and exp_avg_sq must not be NULL for Adam");
    CHECK_OK(gln_sharded_weights_prefetch(a.sw, 0));
    CHECK_STATUS(gln_sharded_weights_optimizer_step(a.sw, &c, 1, a.m, a.v), GLN_STATUS_INVALID_STATE,
                 "a prefetched gather still reads the working shard");
    gln_tensor_t w[NE];
    CHECK_OK(gln_sharded_weights_protocol(a.sw)->materialize_forward(a.sw, w));
    CHECK_OK(gln_sharded_weights_protocol(a.sw)->release(a.sw, w));
    /* nothing was written by the refused calls */
    for (int i = 0; i < TOTAL; i++) CHECK(a.master[i] == full[i] && a.m[i] == 0.0f);
    /* SGD without momentum needs no moments */
    gln_optimizer_config_t s = c;
    s.kind = GLN_OPTIMIZER_SGD;
    CHECK_OK(gln_sharded_weights_optimizer_step(a.sw, &s, 1, NULL, NULL));
    group_free(&a);

    cfg.requires_grad = 0;
    group_t f;
    if (!group_new(&f, &cfg, full)) return;
    CHECK_STATUS(gln_sharded_weights_optimizer_step(f.sw, &c, 1, f.m, f.v), GLN_STATUS_INVALID_STATE,
                 "requires_grad = 0");
    group_free(&f);
}

GLN_TEST_MAIN(GLN_CASE(test_equivalence), GLN_CASE(test_pending_finalize), GLN_CASE(test_refusals))
