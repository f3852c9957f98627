/* The sharded weight group on one rank (self communicator): load / gather round trips,
 * materialization contents and memory accounting, grad buffers, finalize overwrite vs
 * accumulate, async finalize + wait, requires_grad, invalid arguments, reused gather buffers
 * and prefetch, the FP8 all-gather.
 *
 * Data are small integers (and hand-picked bf16 rounding cases), so every check is exact. */
#include <stdio.h>
#include <string.h>

#include "harness.h"

enum { NE = 3, KO = 5, KI = 7, TOTAL = NE * KO * KI };

typedef struct fixture {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    const gln_dist_weights_t *p;
} fixture_t;

static gln_sharded_weights_config_t config(gln_dtype_t wdt, int async) {
    gln_sharded_weights_config_t cfg = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    cfg.num_experts = NE;
    cfg.out_features = KO;
    cfg.in_features = KI;
    cfg.working_dtype = wdt;
    cfg.async_finalize = async;
    return cfg;
}

static int setup_cfg(fixture_t *f, const gln_sharded_weights_config_t *cfg) {
    memset(f, 0, sizeof *f);
    CHECK_OK(gln_context_create(NULL, &f->ctx));
    CHECK_OK(gln_comm_create_self(NULL, &f->comm));
    CHECK_OK(gln_sharded_weights_create(f->ctx, f->comm, cfg, &f->sw));
    f->p = gln_sharded_weights_protocol(f->sw);
    return f->sw != NULL && f->p != NULL;
}

static int setup(fixture_t *f, gln_dtype_t wdt, int async) {
    gln_sharded_weights_config_t cfg = config(wdt, async);
    return setup_cfg(f, &cfg);
}

static void teardown(fixture_t *f) {
    CHECK_OK(gln_sharded_weights_destroy(f->sw));
    CHECK_OK(gln_comm_destroy(f->comm));
    CHECK_OK(gln_context_destroy(f->ctx));
}

/* Small integers in [-8, 8]: exact in bf16 and in every FP32 sum here. */
static void fill_ints(float *x, size_t n, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)gln_rng_int(&r, -8, 8);
}

static void test_layout_and_round_trip(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_FP32, 0)) return;
    float *master = NULL, *mg = NULL;
    int64_t len = -1, off = -1;
    CHECK_OK(gln_sharded_weights_shard(f.sw, &master, &mg, &len, &off));
    CHECK(len == TOTAL && off == 0 && master && mg);
    for (int64_t i = 0; i < len; i++) CHECK_MSG(mg[i] == 0.0f, "main_grad[%lld] not zeroed", (long long)i);
    CHECK(f.p->num_experts == NE && f.p->out_features == KO && f.p->in_features == KI);
    CHECK(f.p->requires_grad(f.p->impl) == 1);

    float *full = gln_test_alloc(TOTAL * sizeof(float)), *back = gln_test_alloc(TOTAL * sizeof(float));
    fill_ints(full, TOTAL, 1);
    CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
    CHECK(gln_check_bitwise("master", master, full, TOTAL * sizeof(float)));
    gln_poison(back, GLN_DTYPE_FP32, TOTAL);
    CHECK_OK(gln_sharded_weights_gather_master(f.sw, back));
    CHECK(gln_check_bitwise("gather_master", back, full, TOTAL * sizeof(float)));
    CHECK(gln_guard_ok(back));
    gln_test_free(full);
    gln_test_free(back);
    teardown(&f);
}

/* materialize returns N [K_out, K_in] tensors holding exactly the loaded weights. */
static void check_materialized(fixture_t *f, const float *full, gln_dtype_t wdt, int backward) {
    gln_tensor_t w[NE];
    memset(w, 0, sizeof w);
    if (backward)
        CHECK_OK(f->p->materialize_backward(f->p->impl, w));
    else
        CHECK_OK(f->p->materialize_forward(f->p->impl, w));
    for (int e = 0; e < NE; e++) {
        CHECK(w[e].dtype == wdt && w[e].rows == KO && w[e].cols == KI);
        CHECK(w[e].scaling == GLN_SCALING_NONE && w[e].data != NULL);
        CHECK(w[e].col_data == NULL && w[e].scale_inv == NULL);
        if (!w[e].data) continue;
        for (int j = 0; j < KO * KI; j++) {
            double got = gln_load(w[e].data, wdt, (size_t)j);
            CHECK_MSG(got == full[e * KO * KI + j], "expert %d elem %d: %g != %g", e, j, got,
                      (double)full[e * KO * KI + j]);
        }
    }
    size_t live = 1, peak = 0, one = (size_t)TOTAL * gln_dtype_size(wdt);
    CHECK_OK(gln_sharded_weights_materialized_bytes(f->sw, &live, &peak));
    CHECK(live == one && peak >= one);
    CHECK_OK(f->p->release(f->p->impl, w));
    CHECK_OK(gln_sharded_weights_materialized_bytes(f->sw, &live, &peak));
    CHECK(live == 0);
}

static void test_materialize(void) {
    static const gln_dtype_t wdts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        fixture_t f;
        if (!setup(&f, wdts[d], 0)) return;
        float full[TOTAL];
        fill_ints(full, TOTAL, 2 + (uint64_t)d);
        CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
        check_materialized(&f, full, wdts[d], 0);
        check_materialized(&f, full, wdts[d], 1);
        size_t live, peak;
        CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, &peak));
        CHECK(peak == (size_t)TOTAL * gln_dtype_size(wdts[d]));

        /* Two live materializations count twice; release order does not matter. */
        gln_tensor_t a[NE], b[NE];
        CHECK_OK(f.p->materialize_forward(f.p->impl, a));
        CHECK_OK(f.p->materialize_backward(f.p->impl, b));
        CHECK(a[0].data != b[0].data);
        CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, &peak));
        CHECK(live == 2 * (size_t)TOTAL * gln_dtype_size(wdts[d]) && peak == live);
        gln_tensor_t a_copy[NE];
        memcpy(a_copy, a, sizeof a);
        CHECK_OK(f.p->release(f.p->impl, a));
        CHECK_OK(f.p->release(f.p->impl, b));
        CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, NULL));
        CHECK(live == 0);
        /* Releasing again (a stale copy of the descriptors) is refused. */
        CHECK_STATUS(f.p->release(f.p->impl, a_copy), GLN_STATUS_INVALID_ARGUMENT, "live");
        teardown(&f);
    }
}

/* The working copy is the master rounded to nearest even (bf16), refreshed by sync_working. */
static void test_sync_working_bf16_rounding(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_BF16, 0)) return;
    float full[TOTAL] = {0};
    CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
    float *master;
    CHECK_OK(gln_sharded_weights_shard(f.sw, &master, NULL, NULL, NULL));
    /* bf16 keeps 8 significant bits: ulp(1) = 2^-7.  Ties go to the even mantissa. */
    const float in[4] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(2.0f + 0x1p-7f + 0x1p-20f), 3.0f};
    const float want[4] = {1.0f, 1.0f + 0x1p-6f, -(2.0f + 0x1p-6f), 3.0f};
    memcpy(master, in, sizeof in);
    CHECK_OK(gln_sharded_weights_sync_working(f.sw));
    gln_tensor_t w[NE];
    CHECK_OK(f.p->materialize_forward(f.p->impl, w));
    for (int i = 0; i < 4; i++)
        CHECK_MSG(gln_load(w[0].data, GLN_DTYPE_BF16, (size_t)i) == want[i], "elem %d: %g != %g",
                  i, gln_load(w[0].data, GLN_DTYPE_BF16, (size_t)i), (double)want[i]);
    CHECK_OK(f.p->release(f.p->impl, w));
    teardown(&f);
}

/* ---- an optimizer that writes the working shard itself (gln_sharded_weights_working_shard) ---- */

/* One "optimizer step" on the master shard: every real element moves off the bf16 grid (normal
 * noise), and the first elements are exact bf16 rounding ties (to even: down, then up); the
 * padding (past K_out·K_in in each expert's stride of `stride` elements) stays zero. */
static void step_master(float *master, int64_t stride, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (int e = 0; e < NE; e++)
        for (int j = 0; j < KO * KI; j++) master[(int64_t)e * stride + j] += (float)(0.37 * gln_rng_normal(&r));
    master[0] = 1.0f + 0x1p-8f;      /* tie: rounds down to 1 */
    master[1] = 1.0f + 3 * 0x1p-8f;  /* tie: rounds up to 1 + 2^-6 */
    master[2] = -(2.0f + 0x1p-8f);   /* below the tie: rounds to -2 */
}

/* What the optimizer does instead of sync_working: working[i] = RNE(master[i]) for every i of
 * the shard, padding included (through the public scalar conversion). */
static void write_working_by_hand(gln_sharded_weights_t *sw) {
    float *master = NULL;
    void *working = NULL;
    gln_dtype_t dt = GLN_DTYPE_COUNT_;
    int64_t len = -1, len2 = -2;
    CHECK_OK(gln_sharded_weights_shard(sw, &master, NULL, &len, NULL));
    CHECK_OK(gln_sharded_weights_working_shard(sw, &working, &dt, &len2));
    CHECK(len == len2 && working != NULL && master != NULL);
    if (!working || !master || len != len2) return;
    for (int64_t i = 0; i < len; i++) {
        if (dt == GLN_DTYPE_BF16)
            ((uint16_t *)working)[i] = gln_fp32_to_bf16(master[i]);
        else if (working != (void *)master) /* FP32: may alias the master */
            ((float *)working)[i] = master[i];
    }
}

/* Both materializations of two groups: the same tensors, the same bytes (data and scales). */
static void check_same_materializations(fixture_t *a, fixture_t *b, const char *what) {
    for (int dir = 0; dir < 2; dir++) {
        gln_tensor_t wa[NE], wb[NE];
        memset(wa, 0, sizeof wa);
        memset(wb, 0, sizeof wb);
        if (dir) {
            CHECK_OK(a->p->materialize_backward(a->p->impl, wa));
            CHECK_OK(b->p->materialize_backward(b->p->impl, wb));
        } else {
            CHECK_OK(a->p->materialize_forward(a->p->impl, wa));
            CHECK_OK(b->p->materialize_forward(b->p->impl, wb));
        }
        for (int e = 0; e < NE; e++) {
            CHECK(wa[e].dtype == wb[e].dtype && wa[e].scaling == wb[e].scaling);
            CHECK(wa[e].data && wb[e].data);
            if (!wa[e].data || !wb[e].data) continue;
            gln_quant_layout_t lay;
            size_t bytes = (size_t)KO * KI * gln_dtype_size(wa[e].dtype), sbytes = 0;
            if (wa[e].scaling == GLN_SCALING_TENSOR) sbytes = sizeof(float);
            if (wa[e].scaling == GLN_SCALING_BLOCK_2D &&
                gln_quant_layout(GLN_SCALING_BLOCK_2D, wa[e].dtype, KO, KI, &lay) == GLN_STATUS_SUCCESS)
                sbytes = lay.scale_bytes;
            char msg[96];
            snprintf(msg, sizeof msg, "%s: %s expert %d", what, dir ? "backward" : "forward", e);
            CHECK(gln_check_bitwise(msg, wa[e].data, wb[e].data, bytes));
            if (sbytes) CHECK(gln_check_bitwise(msg, wa[e].scale_inv, wb[e].scale_inv, sbytes));
        }
        CHECK_OK(a->p->release(a->p->impl, wa));
        CHECK_OK(b->p->release(b->p->impl, wb));
    }
}

/* Forward + backward of a layer over the group: y, dx and the main_grad shard. */
static void run_layer(fixture_t *f, gln_recipe_t recipe, gln_dtype_t act, void *y, void *dx, float *mg) {
    const int64_t m[NE] = {3, 0, 4}, rows = 7;
    gln_grouped_linear_config_t lc = GLN_GROUPED_LINEAR_CONFIG_INIT;
    lc.num_experts = NE, lc.out_features = KO, lc.in_features = KI, lc.bias = 0;
    lc.param_dtype = act, lc.activation_dtype = act, lc.recipe = recipe;
    lc.params.distributed = f->p;
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(f->ctx, &lc, &L));
    if (!L) return;
    float x32[7 * KI], dy32[7 * KO], x[7 * KI], dy[7 * KO]; /* x, dy: act dtype, float-aligned */
    fill_ints(x32, (size_t)(rows * KI), 31);
    fill_ints(dy32, (size_t)(rows * KO), 32);
    for (int64_t i = 0; i < rows * KI; i++) gln_store(x, act, (size_t)i, x32[i]);
    for (int64_t i = 0; i < rows * KO; i++) gln_store(dy, act, (size_t)i, dy32[i]);
    gln_poison(y, act, (size_t)(rows * KO));
    gln_poison(dx, act, (size_t)(rows * KI));
    gln_tensor_t xt = gln_tensor_make(act, rows, KI, x), yt = gln_tensor_make(act, rows, KO, y);
    gln_tensor_t dyt = gln_tensor_make(act, rows, KO, dy), dxt = gln_tensor_make(act, rows, KI, dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt, a.m_splits = m, a.y = &yt, a.input_requires_grad = 1;
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(L, &a, &saved));
    CHECK(saved != NULL);
    if (saved) {
        CHECK_OK(gln_grouped_linear_backward(saved, &dyt, &dxt));
        CHECK_OK(gln_grouped_linear_saved_release(saved));
    }
    gln_poison(mg, GLN_DTYPE_FP32, TOTAL);
    CHECK_OK(gln_sharded_weights_gather_main_grad(f->sw, mg));
    CHECK_OK(gln_grouped_linear_destroy(L));
}

/* Writing the working shard by hand equals sync_working: the materializations (also the FP8
 * all-gather, which quantizes the working shard, and the padded 128x128 layout) and a layer's
 * forward / backward give the same bytes as a group refreshed by sync_working. */
static void test_working_shard_by_hand(void) {
    static const struct {
        gln_dtype_t wdt;
        int fp8_gather;
        gln_scaling_mode_t mode;
        gln_recipe_t recipe; /* GLN_RECIPE_FP8_BLOCK: materializations only, no layer */
    } cases[] = {
        {GLN_DTYPE_BF16, 0, GLN_SCALING_TENSOR, GLN_RECIPE_NONE},
        {GLN_DTYPE_BF16, 0, GLN_SCALING_TENSOR, GLN_RECIPE_FP8_CURRENT},
        {GLN_DTYPE_BF16, 1, GLN_SCALING_TENSOR, GLN_RECIPE_FP8_CURRENT},
        {GLN_DTYPE_BF16, 1, GLN_SCALING_BLOCK_2D, GLN_RECIPE_FP8_BLOCK},
        {GLN_DTYPE_FP32, 0, GLN_SCALING_TENSOR, GLN_RECIPE_NONE},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gln_sharded_weights_config_t cfg = config(cases[c].wdt, 0);
        cfg.fp8_gather = cases[c].fp8_gather;
        cfg.fp8_quant.mode = cases[c].mode;
        fixture_t a, b;
        if (!setup_cfg(&a, &cfg)) return;
        if (!setup_cfg(&b, &cfg)) {
            teardown(&a);
            return;
        }
        float full[TOTAL];
        fill_ints(full, TOTAL, 40 + c);
        CHECK_OK(gln_sharded_weights_load_full(a.sw, full));
        CHECK_OK(gln_sharded_weights_load_full(b.sw, full));
        float *ma = NULL, *mb = NULL;
        int64_t len = 0;
        CHECK_OK(gln_sharded_weights_shard(a.sw, &ma, NULL, &len, NULL));
        CHECK_OK(gln_sharded_weights_shard(b.sw, &mb, NULL, NULL, NULL));
        if (!ma || !mb) break;
        CHECK(cases[c].mode != GLN_SCALING_BLOCK_2D || len > TOTAL); /* the padded case has padding */
        step_master(ma, len / NE, 50 + c);
        step_master(mb, len / NE, 50 + c);
        int moved = 0;
        for (int64_t i = 0; i < len; i++) moved += gln_bf16_to_fp32(gln_fp32_to_bf16(ma[i])) != ma[i];
        CHECK_MSG(moved > TOTAL / 2, "case %zu: the step left the master on the bf16 grid", c);

        CHECK_OK(gln_sharded_weights_sync_working(a.sw));
        write_working_by_hand(b.sw);
        char what[64];
        snprintf(what, sizeof what, "case %zu", c);
        check_same_materializations(&a, &b, what);
        /* the new weights are what the group gathers: the backward gather is the rounded master */
        gln_tensor_t w[NE];
        CHECK_OK(b.p->materialize_backward(b.p->impl, w));
        for (int e = 0; e < NE; e++)
            for (int j = 0; j < KO * KI; j++) {
                float want = ma[(int64_t)e * (len / NE) + j];
                if (cases[c].wdt == GLN_DTYPE_BF16) want = gln_bf16_to_fp32(gln_fp32_to_bf16(want));
                CHECK_MSG(gln_load(w[e].data, cases[c].wdt, (size_t)j) == want, "case %zu expert %d elem %d", c, e, j);
            }
        CHECK_OK(b.p->release(b.p->impl, w));
        if (cases[c].recipe != GLN_RECIPE_FP8_BLOCK) {
            const gln_dtype_t act = cases[c].wdt;
            float ya[7 * KO], yb[7 * KO], dxa[7 * KI], dxb[7 * KI]; /* act dtype */
            float mga[TOTAL], mgb[TOTAL];
            run_layer(&a, cases[c].recipe, act, ya, dxa, mga);
            run_layer(&b, cases[c].recipe, act, yb, dxb, mgb);
            const size_t es = gln_dtype_size(act);
            snprintf(what, sizeof what, "case %zu: layer y", c);
            CHECK(gln_check_bitwise(what, ya, yb, 7 * KO * es));
            snprintf(what, sizeof what, "case %zu: layer dx", c);
            CHECK(gln_check_bitwise(what, dxa, dxb, 7 * KI * es));
            snprintf(what, sizeof what, "case %zu: main_grad", c);
            CHECK(gln_check_bitwise(what, mga, mgb, sizeof mga));
            int nan = 0;
            for (int i = 0; i < 7 * KO; i++) nan += gln_load(ya, act, (size_t)i) != gln_load(ya, act, (size_t)i);
            CHECK_MSG(nan == 0, "case %zu: %d unwritten (NaN) outputs", c, nan);
        }
        teardown(&a);
        teardown(&b);
    }
}

/* The call's arguments and state: the shard's buffer, dtype and length; NULL outputs; refused
 * while a prefetched gather still reads the shard. */
static void test_working_shard_arguments(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_BF16, 0)) return;
    void *w1 = NULL, *w2 = (void *)&f;
    gln_dtype_t dt = GLN_DTYPE_COUNT_;
    int64_t len = -1, shard_len = -2;
    CHECK_OK(gln_sharded_weights_shard(f.sw, NULL, NULL, &shard_len, NULL));
    CHECK_OK(gln_sharded_weights_working_shard(f.sw, &w1, &dt, &len));
    CHECK(w1 != NULL && dt == GLN_DTYPE_BF16 && len == shard_len);
    CHECK_OK(gln_sharded_weights_working_shard(f.sw, &w2, NULL, NULL)); /* dtype, len optional */
    CHECK(w2 == w1);
    CHECK_STATUS(gln_sharded_weights_working_shard(NULL, &w2, &dt, &len), GLN_STATUS_INVALID_ARGUMENT, "sw");
    CHECK(w2 == NULL);
    CHECK_STATUS(gln_sharded_weights_working_shard(f.sw, NULL, &dt, &len), GLN_STATUS_INVALID_ARGUMENT,
                 "working");
    CHECK_OK(f.p->prefetch(f.p->impl, 0));
    w2 = (void *)&f;
    CHECK_STATUS(gln_sharded_weights_working_shard(f.sw, &w2, NULL, NULL), GLN_STATUS_INVALID_STATE, "prefetch");
    CHECK(w2 == NULL);
    gln_tensor_t w[NE];
    CHECK_OK(f.p->materialize_forward(f.p->impl, w)); /* consumes the prefetch */
    CHECK_OK(gln_sharded_weights_working_shard(f.sw, &w2, NULL, NULL));
    CHECK(w2 == w1);
    CHECK_OK(f.p->release(f.p->impl, w));
    teardown(&f);
}

/* Write small-integer "wgrads" into every grad buffer. */
static void write_grads(fixture_t *f, float *g, uint64_t seed) {
    fill_ints(g, TOTAL, seed);
    for (int e = 0; e < NE; e++) {
        float *buf = NULL;
        CHECK_OK(f->p->grad_buffer(f->p->impl, e, &buf));
        if (buf) memcpy(buf, g + e * KO * KI, KO * KI * sizeof(float));
    }
}

static void check_main_grad(fixture_t *f, const float *want, const char *what) {
    float got[TOTAL];
    gln_poison(got, GLN_DTYPE_FP32, TOTAL);
    CHECK_OK(gln_sharded_weights_gather_main_grad(f->sw, got));
    CHECK(gln_check_bitwise(what, got, want, sizeof got));
}

static void test_grad_buffers(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_BF16, 0)) return;
    float *b[NE];
    for (int e = 0; e < NE; e++) CHECK_OK(f.p->grad_buffer(f.p->impl, e, &b[e]));
    for (int e = 0; e < NE; e++) {
        CHECK(b[e] == b[0] + e * KO * KI); /* one allocation, expert-major */
        for (int j = 0; j < KO * KI; j++) CHECK_MSG(b[e][j] == 0.0f, "grad buffer not zeroed");
    }
    float *again = NULL;
    CHECK_OK(f.p->grad_buffer(f.p->impl, 1, &again));
    CHECK(again == b[1]); /* allocated once, kept */
    teardown(&f);
}

static void test_finalize_overwrite_accumulate(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_FP32, 0)) return;
    float g1[TOTAL], g2[TOTAL], sum[TOTAL];
    int pending = -1;
    write_grads(&f, g1, 10);
    CHECK_OK(f.p->finalize_grads(f.p->impl, 0, &pending));
    CHECK(pending == 0);
    check_main_grad(&f, g1, "overwrite");
    write_grads(&f, g2, 11);
    CHECK_OK(f.p->finalize_grads(f.p->impl, 1, &pending));
    for (int i = 0; i < TOTAL; i++) sum[i] = g1[i] + g2[i];
    check_main_grad(&f, sum, "accumulate");
    CHECK_OK(f.p->finalize_grads(f.p->impl, 0, NULL)); /* NULL pending: fine when not async */
    check_main_grad(&f, g2, "overwrite again");
    CHECK_OK(f.p->wait(f.p->impl)); /* nothing pending: no-op */
    teardown(&f);
}

/* A finalize with no grad_buffer() call still reduces (zeros): ranks must all enter it. */
static void test_finalize_without_buffers(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_FP32, 0)) return;
    float *mg;
    CHECK_OK(gln_sharded_weights_shard(f.sw, NULL, &mg, NULL, NULL));
    for (int i = 0; i < TOTAL; i++) mg[i] = 5.0f;
    int pending = -1;
    CHECK_OK(f.p->finalize_grads(f.p->impl, 0, &pending));
    float zeros[TOTAL] = {0};
    check_main_grad(&f, zeros, "overwrite with zeros");
    teardown(&f);
}

static void test_async_finalize(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_BF16, 1)) return;
    float g1[TOTAL], g2[TOTAL], sum[TOTAL], out[TOTAL];
    int pending = 0;
    write_grads(&f, g1, 20);
    CHECK_OK(f.p->finalize_grads(f.p->impl, 0, &pending));
    CHECK(pending == 1);
    /* While in flight: the buffer is being read and main_grad is not final. */
    float *buf = NULL;
    CHECK_STATUS(f.p->grad_buffer(f.p->impl, 0, &buf), GLN_STATUS_INVALID_STATE, "wait");
    CHECK_STATUS(f.p->finalize_grads(f.p->impl, 0, &pending), GLN_STATUS_INVALID_STATE, "wait");
    CHECK_STATUS(gln_sharded_weights_gather_main_grad(f.sw, out), GLN_STATUS_INVALID_STATE, "wait");
    CHECK_OK(f.p->wait(f.p->impl));
    check_main_grad(&f, g1, "async overwrite");
    write_grads(&f, g2, 21);
    CHECK_OK(f.p->finalize_grads(f.p->impl, 1, &pending));
    CHECK(pending == 1);
    CHECK_OK(gln_sharded_weights_wait(f.sw)); /* the public form of the protocol's wait() */
    CHECK_OK(gln_sharded_weights_wait(f.sw)); /* nothing pending: no-op */
    CHECK_STATUS(gln_sharded_weights_wait(NULL), GLN_STATUS_INVALID_ARGUMENT, "sw");
    for (int i = 0; i < TOTAL; i++) sum[i] = g1[i] + g2[i];
    check_main_grad(&f, sum, "async accumulate");
    CHECK_STATUS(f.p->finalize_grads(f.p->impl, 0, NULL), GLN_STATUS_INVALID_ARGUMENT, "pending");
    /* Destroy with a finalize in flight completes it (no leaked request). */
    write_grads(&f, g2, 22);
    CHECK_OK(f.p->finalize_grads(f.p->impl, 1, &pending));
    teardown(&f);
}

static void test_requires_grad_off(void) {
    fixture_t f;
    gln_sharded_weights_config_t cfg = config(GLN_DTYPE_FP32, 0);
    cfg.requires_grad = 0;
    if (!setup_cfg(&f, &cfg)) return;
    CHECK(f.p->requires_grad(f.p->impl) == 0);
    float *buf = NULL;
    int pending = 0;
    CHECK_STATUS(f.p->grad_buffer(f.p->impl, 0, &buf), GLN_STATUS_INVALID_STATE, "requires_grad");
    CHECK_STATUS(f.p->finalize_grads(f.p->impl, 0, &pending), GLN_STATUS_INVALID_STATE,
                 "requires_grad");
    /* Forward still works. */
    gln_tensor_t w[NE];
    CHECK_OK(f.p->materialize_forward(f.p->impl, w));
    CHECK_OK(f.p->release(f.p->impl, w));
    teardown(&f);
}

/* A materialization never released is freed by destroy (run under ASan to see no leak). */
static void test_destroy_with_live_materialization(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_BF16, 0)) return;
    gln_tensor_t w[NE];
    CHECK_OK(f.p->materialize_forward(f.p->impl, w));
    teardown(&f);
}

static void test_invalid_arguments(void) {
    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    gln_sharded_weights_t *sw = (gln_sharded_weights_t *)&sw;
    gln_sharded_weights_config_t cfg = config(GLN_DTYPE_BF16, 0);
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &cfg, NULL), GLN_STATUS_INVALID_ARGUMENT, "sw");
    CHECK_STATUS(gln_sharded_weights_create(ctx, NULL, &cfg, &sw), GLN_STATUS_INVALID_ARGUMENT, "comm");
    CHECK(sw == NULL);
    CHECK_STATUS(gln_sharded_weights_create(NULL, comm, &cfg, &sw), GLN_STATUS_INVALID_ARGUMENT, "ctx");
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, NULL, &sw), GLN_STATUS_INVALID_ARGUMENT, "cfg");
    gln_sharded_weights_config_t bad = cfg;
    bad.size = 3;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &bad, &sw), GLN_STATUS_INVALID_ARGUMENT, "size");
    bad = cfg;
    bad.num_experts = 0;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &bad, &sw), GLN_STATUS_INVALID_ARGUMENT,
                 "num_experts 0");
    bad = cfg;
    bad.out_features = -2;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &bad, &sw), GLN_STATUS_INVALID_ARGUMENT,
                 "out_features -2");
    bad = cfg;
    bad.in_features = 0;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &bad, &sw), GLN_STATUS_INVALID_ARGUMENT,
                 "in_features 0");
    bad = cfg;
    bad.working_dtype = GLN_DTYPE_FP16;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &bad, &sw), GLN_STATUS_INVALID_ARGUMENT,
                 "working_dtype");
    bad = cfg;
    bad.num_experts = 1 << 30;
    bad.out_features = bad.in_features = (int64_t)1 << 31;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &bad, &sw), GLN_STATUS_INVALID_ARGUMENT,
                 "too large");
    CHECK(sw == NULL);

    CHECK_OK(gln_sharded_weights_create(ctx, comm, &cfg, &sw));
    const gln_dist_weights_t *p = gln_sharded_weights_protocol(sw);
    float *buf = NULL;
    gln_tensor_t w[NE];
    CHECK_STATUS(p->grad_buffer(p->impl, -1, &buf), GLN_STATUS_INVALID_ARGUMENT, "expert -1");
    CHECK_STATUS(p->grad_buffer(p->impl, NE, &buf), GLN_STATUS_INVALID_ARGUMENT, "[0, 3)");
    CHECK_STATUS(p->grad_buffer(p->impl, 0, NULL), GLN_STATUS_INVALID_ARGUMENT, "buffer");
    CHECK_STATUS(p->grad_buffer(NULL, 0, &buf), GLN_STATUS_INVALID_ARGUMENT, "impl");
    CHECK_STATUS(p->materialize_forward(p->impl, NULL), GLN_STATUS_INVALID_ARGUMENT, "weights");
    CHECK_STATUS(p->materialize_backward(NULL, w), GLN_STATUS_INVALID_ARGUMENT, "impl");
    CHECK_STATUS(p->release(p->impl, NULL), GLN_STATUS_INVALID_ARGUMENT, "weights");
    w[0].data = buf;
    CHECK_STATUS(p->release(p->impl, w), GLN_STATUS_INVALID_ARGUMENT, "not a live");
    CHECK_STATUS(p->wait(NULL), GLN_STATUS_INVALID_ARGUMENT, "impl");
    CHECK_STATUS(gln_sharded_weights_load_full(sw, NULL), GLN_STATUS_INVALID_ARGUMENT, "full");
    CHECK_STATUS(gln_sharded_weights_load_full(NULL, (float *)w), GLN_STATUS_INVALID_ARGUMENT, "sw");
    CHECK_STATUS(gln_sharded_weights_gather_master(sw, NULL), GLN_STATUS_INVALID_ARGUMENT, "full");
    CHECK_STATUS(gln_sharded_weights_gather_main_grad(sw, NULL), GLN_STATUS_INVALID_ARGUMENT, "full");
    CHECK_STATUS(gln_sharded_weights_sync_working(NULL), GLN_STATUS_INVALID_ARGUMENT, "sw");
    CHECK_STATUS(gln_sharded_weights_shard(NULL, NULL, NULL, NULL, NULL), GLN_STATUS_INVALID_ARGUMENT,
                 "sw");
    CHECK_STATUS(gln_sharded_weights_materialized_bytes(NULL, NULL, NULL),
                 GLN_STATUS_INVALID_ARGUMENT, "sw");
    CHECK(gln_sharded_weights_protocol(NULL) == NULL);
    CHECK_OK(gln_sharded_weights_destroy(sw));
    CHECK_OK(gln_sharded_weights_destroy(NULL));
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

/* A CUDA context with a host-memory communicator is refused clearly: the communicator must be
 * bound to the group's context (tests/test_nccl_layer.c runs the group on the GPU). */
static void test_cuda_context_refused(void) {
    if (!gln_backend_available(GLN_BACKEND_CUDA)) return;
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    if (gln_context_create(&o, &ctx) != GLN_STATUS_SUCCESS) return;
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    gln_sharded_weights_config_t cfg = config(GLN_DTYPE_BF16, 0);
    gln_sharded_weights_t *sw = NULL;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &cfg, &sw), GLN_STATUS_INVALID_ARGUMENT, "bound to");
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

/* Gather buffers are reused: a materialize after a release gets the same buffer back; a
 * prefetch is live (counted) until its materialize is released; a second prefetch of the same
 * direction, and sync_working / load_full while one is pending, are refused. */
static void test_buffers_reused_and_prefetch(void) {
    fixture_t f;
    if (!setup(&f, GLN_DTYPE_BF16, 0)) return;
    float full[TOTAL];
    fill_ints(full, TOTAL, 12);
    CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
    const size_t one = (size_t)TOTAL * 2;
    gln_tensor_t a[NE], b[NE];
    CHECK_OK(f.p->materialize_forward(f.p->impl, a));
    void *first = a[0].data;
    CHECK_OK(f.p->release(f.p->impl, a));
    CHECK_OK(f.p->materialize_backward(f.p->impl, a));
    CHECK_MSG(a[0].data == first, "the released gather buffer was not reused");
    CHECK_OK(f.p->release(f.p->impl, a));

    size_t live = 0, peak = 0;
    CHECK_OK(f.p->prefetch(f.p->impl, 1));
    CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, &peak));
    CHECK(live == one);
    CHECK_STATUS(f.p->prefetch(f.p->impl, 1), GLN_STATUS_INVALID_STATE, "prefetched already");
    CHECK_STATUS(gln_sharded_weights_sync_working(f.sw), GLN_STATUS_INVALID_STATE, "prefetch");
    CHECK_STATUS(gln_sharded_weights_load_full(f.sw, full), GLN_STATUS_INVALID_STATE, "prefetch");
    CHECK_STATUS(f.p->prefetch(f.p->impl, 2), GLN_STATUS_INVALID_ARGUMENT, "direction");
    CHECK_OK(f.p->prefetch(f.p->impl, 0));
    CHECK_OK(f.p->materialize_backward(f.p->impl, b));
    CHECK_OK(f.p->materialize_forward(f.p->impl, a));
    CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, &peak));
    CHECK(live == 2 * one && peak == 2 * one);
    for (int64_t i = 0; i < TOTAL; i++) {
        CHECK(gln_load(a[0].data, GLN_DTYPE_BF16, (size_t)i) == full[i]);
        CHECK(gln_load(b[0].data, GLN_DTYPE_BF16, (size_t)i) == full[i]);
    }
    CHECK_OK(f.p->release(f.p->impl, b));
    CHECK_OK(f.p->release(f.p->impl, a));
    CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, NULL));
    CHECK(live == 0);
    CHECK_OK(gln_sharded_weights_sync_working(f.sw));
    CHECK_OK(gln_sharded_weights_prefetch(f.sw, 0)); /* destroyed while prefetched: freed */
    teardown(&f);
}

/* FP8 all-gather on one rank: materialize_forward returns gln_quantize of each bf16 expert
 * weight (data and decode scale); materialize_backward stays bf16.  Version-1 configs are
 * accepted; MXFP8 needs K_in % 128 == 0; 1x128 blocks (no recipe's weight mode) are refused
 * (tests/mpi covers MXFP8 and 128x128). */
static void test_fp8_gather(void) {
    for (int pow2 = 0; pow2 <= 1; pow2++) {
        gln_sharded_weights_config_t cfg = config(GLN_DTYPE_BF16, 0);
        cfg.fp8_gather = 1;
        cfg.fp8_quant.power_2_scale = pow2;
        fixture_t f;
        if (!setup_cfg(&f, &cfg)) return;
        float full[TOTAL];
        gln_rng_t r = gln_rng_seed(5);
        for (int i = 0; i < TOTAL; i++) full[i] = (float)(gln_rng_normal(&r) * (1 + i % 3));
        CHECK_OK(gln_sharded_weights_load_full(f.sw, full));
        gln_tensor_t g[NE], h[NE];
        CHECK_OK(f.p->materialize_forward(f.p->impl, g));
        CHECK_OK(f.p->materialize_backward(f.p->impl, h));
        uint16_t bf[KO * KI];
        uint8_t ref[KO * KI];
        for (int e = 0; e < NE; e++) {
            for (int i = 0; i < KO * KI; i++) gln_store(bf, GLN_DTYPE_BF16, (size_t)i, full[e * KO * KI + i]);
            gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, KO, KI, bf);
            gln_tensor_t out = gln_tensor_make(GLN_DTYPE_FP8_E4M3, KO, KI, ref);
            float sinv = 0, scale = 0, amax = 0;
            out.scaling = GLN_SCALING_TENSOR, out.scale_inv = &sinv, out.scale = &scale, out.amax = &amax;
            CHECK_OK(gln_quantize(f.ctx, &cfg.fp8_quant, &in, &out));
            CHECK(g[e].scaling == GLN_SCALING_TENSOR && g[e].dtype == GLN_DTYPE_FP8_E4M3 && !g[e].col_data);
            CHECK(gln_check_bitwise("fp8 gather vs gln_quantize", g[e].data, ref, sizeof ref));
            CHECK(memcmp(g[e].scale_inv, &sinv, 4) == 0);
            CHECK(h[e].scaling == GLN_SCALING_NONE && h[e].dtype == GLN_DTYPE_BF16);
            CHECK(gln_check_bitwise("backward stays bf16", h[e].data, bf, sizeof bf));
        }
        size_t live = 0;
        CHECK_OK(gln_sharded_weights_materialized_bytes(f.sw, &live, NULL));
        CHECK(live == (((size_t)TOTAL + 15) & ~(size_t)15) + NE * sizeof(float) + (size_t)TOTAL * 2);
        CHECK_OK(f.p->release(f.p->impl, g));
        CHECK_OK(f.p->release(f.p->impl, h));
        teardown(&f);
    }
    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    CHECK_OK(gln_comm_create_self(ctx, &comm));
    CHECK(gln_comm_context(comm) == ctx);
    gln_sharded_weights_t *sw = NULL;
    gln_sharded_weights_config_t cfg = config(GLN_DTYPE_BF16, 0);
    cfg.fp8_gather = 1;
    cfg.fp8_quant.mode = GLN_SCALING_MXFP8_1D; /* K_in = 7: blocks would straddle shards */
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &cfg, &sw), GLN_STATUS_NOT_SUPPORTED, "% 128");
    cfg.fp8_quant.mode = GLN_SCALING_BLOCK_1D; /* not a weight mode of any recipe */
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &cfg, &sw), GLN_STATUS_NOT_SUPPORTED, "fp8_gather");
    cfg.fp8_quant.mode = GLN_SCALING_TENSOR;
    cfg.fp8_quant.delayed = 1;
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &cfg, &sw), GLN_STATUS_NOT_SUPPORTED, "delayed");
    /* A layer refuses an FP8 all-gather its recipe would not make (the weights are used as is) */
    cfg = config(GLN_DTYPE_BF16, 0);
    cfg.fp8_gather = 1; /* per-tensor E4M3, current scaling, no power-of-two scales */
    CHECK_OK(gln_sharded_weights_create(ctx, comm, &cfg, &sw));
    gln_grouped_linear_config_t lc = GLN_GROUPED_LINEAR_CONFIG_INIT;
    lc.num_experts = NE, lc.out_features = KO, lc.in_features = KI, lc.bias = 0;
    lc.params.distributed = gln_sharded_weights_protocol(sw);
    gln_grouped_linear_t *L = NULL;
    lc.recipe = GLN_RECIPE_NONE;
    CHECK_STATUS(gln_grouped_linear_create(ctx, &lc, &L), GLN_STATUS_INVALID_ARGUMENT, "fp8_gather");
    lc.recipe = GLN_RECIPE_FP8_CURRENT;
    lc.power_2_scales = 1;
    CHECK_STATUS(gln_grouped_linear_create(ctx, &lc, &L), GLN_STATUS_INVALID_ARGUMENT, "power_2_scale");
    lc.recipe = GLN_RECIPE_FP8_DELAYED;
    CHECK_STATUS(gln_grouped_linear_create(ctx, &lc, &L), GLN_STATUS_INVALID_ARGUMENT, "fp8_delayed");
    CHECK(L == NULL);
    lc.recipe = GLN_RECIPE_FP8_CURRENT;
    lc.power_2_scales = 0;
    CHECK_OK(gln_grouped_linear_create(ctx, &lc, &L));
    CHECK_OK(gln_grouped_linear_destroy(L));
    CHECK_OK(gln_sharded_weights_destroy(sw));
    sw = NULL;

    cfg = config(GLN_DTYPE_BF16, 0);
    cfg.size = GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE; /* version 1: no FP8 gather fields */
    CHECK_OK(gln_sharded_weights_create(ctx, comm, &cfg, &sw));
    CHECK_OK(gln_sharded_weights_destroy(sw));
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

GLN_TEST_MAIN(GLN_CASE(test_layout_and_round_trip), GLN_CASE(test_materialize),
              GLN_CASE(test_sync_working_bf16_rounding), GLN_CASE(test_grad_buffers),
              GLN_CASE(test_finalize_overwrite_accumulate), GLN_CASE(test_finalize_without_buffers),
              GLN_CASE(test_async_finalize), GLN_CASE(test_requires_grad_off),
              GLN_CASE(test_destroy_with_live_materialization), GLN_CASE(test_invalid_arguments),
              GLN_CASE(test_cuda_context_refused), GLN_CASE(test_buffers_reused_and_prefetch),
              GLN_CASE(test_fp8_gather), GLN_CASE(test_working_shard_by_hand),
              GLN_CASE(test_working_shard_arguments))
