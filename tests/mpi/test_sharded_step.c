/* gln_sharded_weights_optimizer_step on 2-4 ranks: on every rank bit for bit the same shard as
 * gln_optimizer_step on the shard followed by sync_working, and the gathered masters equal one
 * gln_optimizer_step over the whole unsharded weights (the step is element-wise, so sharding
 * must not change a bit).  Shapes with padded shards and a rank owning only padding, the
 * 128x128 layout (padded experts), the MXFP8 quantized shard (experts padded to 32-row groups;
 * both its materializations equal the unfused twin's), bf16 and fp32 working copies, Adam and
 * SGD with momentum. */
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

typedef struct shape {
    int32_t n;
    int64_t ko, ki;
    int block2d; /* 1: the 128x128 layout, 2: the MXFP8 quantized shard's (32-row groups) */
} shape_t;

static const shape_t shapes[] = {{3, 5, 7, 0}, {1, 1, 3, 0}, {2, 4, 8, 0}, {3, 5, 7, 1}, {3, 40, 128, 2}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

typedef struct group {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    float *master, *main_grad, *m, *v;
    int64_t len, off;
} group_t;

static int group_new(group_t *g, shape_t s, gln_dtype_t wdt, const float *full) {
    memset(g, 0, sizeof *g);
    gln_sharded_weights_config_t cfg = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    cfg.num_experts = s.n;
    cfg.out_features = s.ko;
    cfg.in_features = s.ki;
    cfg.working_dtype = wdt;
    if (s.block2d) {
        cfg.fp8_gather = 1;
        cfg.fp8_quant.mode = s.block2d == 2 ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_2D;
        cfg.quantized_shard = s.block2d == 2;
    }
    CHECK_OK(gln_context_create(NULL, &g->ctx));
    CHECK_OK(gln_test_mpi_comm(g->ctx, &g->comm));
    CHECK_OK(gln_sharded_weights_create(g->ctx, g->comm, &cfg, &g->sw));
    if (!g->sw) return 0;
    CHECK_OK(gln_sharded_weights_load_full(g->sw, full));
    CHECK_OK(gln_sharded_weights_shard(g->sw, &g->master, &g->main_grad, &g->len, &g->off));
    g->m = gln_test_alloc((size_t)g->len * 4);
    g->v = gln_test_alloc((size_t)g->len * 4);
    return 1;
}

static void group_free(group_t *g) {
    gln_test_free(g->m);
    gln_test_free(g->v);
    CHECK_OK(gln_sharded_weights_destroy(g->sw));
    CHECK_OK(gln_comm_destroy(g->comm));
    CHECK_OK(gln_context_destroy(g->ctx));
}

static float *randoms(int64_t n, uint64_t seed, double scale) {
    float *x = gln_test_alloc((size_t)n * 4);
    gln_rng_t r = gln_rng_seed(seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(gln_rng_normal(&r) * scale);
    return x;
}

/* main_grad[i] = the full gradient's element at this rank's flat index (experts stride apart),
 * 0 on padding. */
static void write_grads(group_t *g, shape_t s, const float *grad_full) {
    const int64_t pad = s.block2d == 2 ? 32 : 128;
    const int64_t elems = s.ko * s.ki, stride = s.block2d ? (s.ko + pad - 1) / pad * pad * s.ki : elems;
    for (int64_t i = 0; i < g->len; i++) {
        const int64_t gi = g->off + i, e = gi / stride, j = gi % stride;
        g->main_grad[i] = e < s.n && j < elems ? grad_full[e * elems + j] : 0.0f;
    }
}

static gln_optimizer_config_t kind_config(int k) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    c.lr = 0.02f;
    c.weight_decay = 0.05f;
    if (k == 1) {
        c.kind = GLN_OPTIMIZER_SGD;
        c.momentum = 0.9f;
    }
    return c;
}

/* The MXFP8 quantized shard: both groups' forward (rowwise) and backward (columnwise) copies
 * equal, bytes and E8M0 grids. */
static void check_same_mx(group_t *a, group_t *b, shape_t s, const char *what) {
    const gln_dist_weights_t *pa = gln_sharded_weights_protocol(a->sw), *pb = gln_sharded_weights_protocol(b->sw);
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, s.ko, s.ki, &lay));
    gln_tensor_t *wa = calloc((size_t)s.n, sizeof *wa), *wb = calloc((size_t)s.n, sizeof *wb);
    for (int dir = 0; dir < 2; dir++) {
        CHECK_OK(dir ? pa->materialize_backward(pa->impl, wa) : pa->materialize_forward(pa->impl, wa));
        CHECK_OK(dir ? pb->materialize_backward(pb->impl, wb) : pb->materialize_forward(pb->impl, wb));
        for (int32_t e = 0; e < s.n; e++) {
            const void *da = dir ? wa[e].col_data : wa[e].data, *db = dir ? wb[e].col_data : wb[e].data;
            const void *sa = dir ? wa[e].col_scale_inv : wa[e].scale_inv, *sb = dir ? wb[e].col_scale_inv : wb[e].scale_inv;
            CHECK_MSG(da && db && sa && sb, "%s: %s expert %d: a copy is missing", what, dir ? "backward" : "forward", (int)e);
            if (!da || !db || !sa || !sb) continue;
            CHECK_MSG(gln_check_bitwise(what, da, db, (size_t)(s.ko * s.ki)), "%s: %s expert %d bytes", what,
                      dir ? "backward" : "forward", (int)e);
            CHECK_MSG(gln_check_bitwise(what, sa, sb, dir ? lay.col_scale_bytes : lay.scale_bytes),
                      "%s: %s expert %d codes", what, dir ? "backward" : "forward", (int)e);
        }
        CHECK_OK(pa->release(pa->impl, wa));
        CHECK_OK(pb->release(pb->impl, wb));
    }
    free(wa);
    free(wb);
}

static void run(shape_t s, gln_dtype_t wdt, int k) {
    const int64_t total = (int64_t)s.n * s.ko * s.ki;
    float *full = randoms(total, 50 + (uint64_t)k, 1.0);
    group_t a, b;
    const int ok_a = group_new(&a, s, wdt, full), ok_b = group_new(&b, s, wdt, full);
    float *w = randoms(total, 50 + (uint64_t)k, 1.0), *m = gln_test_alloc((size_t)total * 4),
          *v = gln_test_alloc((size_t)total * 4);
    const gln_optimizer_config_t c = kind_config(k);
    for (int64_t step = 1; ok_a && ok_b && step <= 3; step++) {
        float *grad = randoms(total, 900 + (uint64_t)step, 1e-2);
        write_grads(&a, s, grad);
        write_grads(&b, s, grad);
        CHECK_OK(gln_sharded_weights_optimizer_step(a.sw, &c, step, a.m, a.v));
        CHECK_OK(gln_optimizer_step(b.ctx, &c, step, b.master, b.main_grad, b.m, b.v, b.len, NULL, GLN_DTYPE_BF16));
        CHECK_OK(gln_sharded_weights_sync_working(b.sw));
        /* the whole weights, unsharded, on this rank */
        CHECK_OK(gln_optimizer_step(a.ctx, &c, step, w, grad, m, v, total, NULL, GLN_DTYPE_BF16));
        char what[96];
        snprintf(what, sizeof what, "shape %d/%lld/%lld%s %s config %d step %lld", (int)s.n, (long long)s.ko,
                 (long long)s.ki, s.block2d == 2 ? " mxfp8 qshard" : s.block2d ? " 128x128" : "", gln_dtype_name(wdt),
                 k, (long long)step);
        if (s.block2d == 2) check_same_mx(&a, &b, s, what);
        CHECK(gln_check_optimizer_state(what, a.master, a.m, a.v, b.master, b.m, b.v, a.len));
        void *wa = NULL, *wb = NULL;
        CHECK_OK(gln_sharded_weights_working_shard(a.sw, &wa, NULL, NULL));
        CHECK_OK(gln_sharded_weights_working_shard(b.sw, &wb, NULL, NULL));
        if (wa && wb)
            CHECK_MSG(gln_check_bitwise(what, wa, wb, (size_t)a.len * gln_dtype_size(wdt)), "%s: working", what);
        float *back = gln_test_alloc((size_t)total * 4);
        CHECK_OK(gln_sharded_weights_gather_master(a.sw, back));
        CHECK_MSG(gln_check_bitwise(what, back, w, (size_t)total * 4), "%s: gathered vs unsharded", what);
        gln_test_free(back);
        gln_test_free(grad);
    }
    if (ok_a) group_free(&a);
    if (ok_b) group_free(&b);
    gln_test_free(full);
    gln_test_free(w);
    gln_test_free(m);
    gln_test_free(v);
}

static void test_step_equivalence(void) {
    for (size_t i = 0; i < NSHAPES; i++)
        for (int k = 0; k < 2; k++) {
            run(shapes[i], GLN_DTYPE_BF16, k);
            if (shapes[i].block2d != 1) run(shapes[i], GLN_DTYPE_FP32, k);
        }
}

GLN_MPI_TEST_MAIN(GLN_CASE(test_step_equivalence))
