/* The sharded group's quantized shard (quantized_shard = 1) on 1 to 4 ranks, per-tensor current
 * scaling (plain and power-of-two scales), 128x128 blocks (power-of-two and FP32 scales) and
 * MXFP8 (E8M0 codes, both rounding rules).
 *
 * Shapes: K_out = 200 (not a multiple of 128: a partial tile row; nor of 32: a partial 32-row
 * group at each expert's end under MXFP8), K_in = 160 (a partial tile column; MXFP8 needs a
 * multiple of 128 and takes 256), 5 experts, so shards split experts on 2, 3 and 4 ranks
 * (per-tensor: anywhere; 128x128: between the two tile rows of an expert on 2 and 4 ranks;
 * MXFP8: between 32-row groups inside an expert on 2, 3 and 4 ranks).
 *
 *   bytes     materialize_forward equals gln_quantize (rowwise) of each gathered bf16 weight, bit
 *             for bit (data and scales, the whole grid with its padding); materialize_backward
 *             hands a columnwise copy equal to gln_quantize (columnwise) — per-tensor and
 *             128x128 with the same rowwise copy (the transposition claim checked against the CPU
 *             quantizer, not assumed), MXFP8 alone (its stored columnwise shard, gathered; no
 *             rowwise copy).  Also through prefetch in both directions.
 *   refresh   after a master change + sync_working, after a hand-written working shard +
 *             gln_sharded_weights_requantize, and through the internal entry with this rank's
 *             amaxes handed in, the next materializations hold the new values; without a
 *             refresh they keep the old ones (the shard is stored); requantize refuses while a
 *             prefetch is outstanding (INVALID_STATE on every rank) and is a no-op success on a
 *             group without quantized_shard.
 *   layer     a layer over the quantized shard gives y, dx and main_grad bitwise equal to the
 *             same layer over a plain (fp8_gather 0) group, over three steps with both refresh
 *             kinds between them, also with prefetch; and it never quantizes a weight (the
 *             backend's quantize slots are counted: 0 weight-shaped calls, while the plain
 *             group's layer makes some). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

#include "backend/backend.h"
#include "backend/context.h"
#include "weights/sharded.h"

enum { NE = 5, KO = 200 };
/* K_in of the mode under test (set by group_create): 160, or 256 for MXFP8 */
static int64_t KI = 160;
#define EXPERT ((int64_t)KO * KI)
#define TOTAL ((int64_t)NE * EXPERT)

typedef struct mode {
    const char *name;
    gln_scaling_mode_t scaling;
    int pow2; /* MXFP8: the E8M0 rounding rule (1: floor, 0: up) */
} mode_t_;

static const mode_t_ modes[] = {
    {"tensor", GLN_SCALING_TENSOR, 0},
    {"tensor/pow2", GLN_SCALING_TENSOR, 1},
    {"block2d/pow2", GLN_SCALING_BLOCK_2D, 1},
    {"block2d/fp32", GLN_SCALING_BLOCK_2D, 0},
    {"mxfp8", GLN_SCALING_MXFP8_1D, 0},
    {"mxfp8/floor", GLN_SCALING_MXFP8_1D, 1},
};
#define NMODES (sizeof modes / sizeof modes[0])

static int is_mx(const mode_t_ *m) { return m->scaling == GLN_SCALING_MXFP8_1D; }

static gln_quant_config_t weight_quant(const mode_t_ *m) {
    gln_quant_config_t q = GLN_QUANT_CONFIG_INIT;
    q.mode = m->scaling;
    q.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    if (is_mx(m))
        q.e8m0_rounding = m->pow2 ? GLN_E8M0_ROUND_FLOOR : GLN_E8M0_ROUND_UP;
    else
        q.power_2_scale = m->pow2;
    return q;
}

typedef struct group {
    gln_context_t *ctx;
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    const gln_dist_weights_t *p;
} group_t;

static int group_create(group_t *g, const mode_t_ *m, int qshard) {
    memset(g, 0, sizeof *g);
    KI = is_mx(m) ? 256 : 160;
    CHECK_OK(gln_context_create(NULL, &g->ctx));
    CHECK_OK(gln_test_mpi_comm(g->ctx, &g->comm));
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE;
    sc.out_features = KO;
    sc.in_features = KI;
    sc.working_dtype = GLN_DTYPE_BF16;
    sc.fp8_gather = qshard;
    sc.quantized_shard = qshard;
    sc.fp8_quant = weight_quant(m);
    CHECK_OK(gln_sharded_weights_create(g->ctx, g->comm, &sc, &g->sw));
    g->p = g->sw ? gln_sharded_weights_protocol(g->sw) : NULL;
    return g->sw != NULL;
}

static void group_destroy(group_t *g) {
    CHECK_OK(gln_sharded_weights_destroy(g->sw));
    CHECK_OK(gln_comm_destroy(g->comm));
    CHECK_OK(gln_context_destroy(g->ctx));
}

/* Random weights, the same on every rank, with amaxes spread over the experts and rows. */
static void fill_weights(float *full, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (int64_t i = 0; i < TOTAL; i++)
        full[i] = (float)(gln_rng_normal(&r) * ldexp(1.0, (int)(i / 997 % 7) - 3));
    full[TOTAL - 11] = 37.0f; /* the last expert's amax in the last rank's shard */
}

/* The expected copies of expert e: gln_quantize of its bf16 weight, rowwise or columnwise. */
static void quantize_expert(gln_context_t *ctx, const mode_t_ *m, const float *full, int e, int columnwise,
                            uint8_t *data, void *scales) {
    uint16_t *bf = malloc((size_t)EXPERT * 2);
    for (int64_t i = 0; i < EXPERT; i++) bf[i] = gln_fp32_to_bf16(full[(int64_t)e * EXPERT + i]);
    gln_quant_config_t q = weight_quant(m);
    q.rowwise = !columnwise;
    q.columnwise = columnwise;
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, KO, KI, bf);
    gln_tensor_t out = gln_tensor_make(GLN_DTYPE_FP8_E4M3, KO, KI, columnwise ? NULL : data);
    float amax = 0.0f, scale = 0.0f;
    out.scaling = m->scaling;
    out.col_data = columnwise ? data : NULL;
    out.scale_inv = columnwise ? NULL : scales;
    out.col_scale_inv = columnwise ? scales : NULL;
    out.amax = &amax;
    out.scale = &scale;
    CHECK_OK(gln_quantize(ctx, &q, &in, &out));
    free(bf);
}

/* Every expert of a materialization against gln_quantize of `full`. */
static void check_copies(group_t *g, const mode_t_ *m, const float *full, const gln_tensor_t *w, int backward,
                         const char *what) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(m->scaling, GLN_DTYPE_FP8_E4M3, KO, KI, &lay));
    uint8_t *ref = gln_test_alloc((size_t)EXPERT);
    void *rs = gln_test_alloc(lay.scale_bytes), *cs = gln_test_alloc(lay.col_scale_bytes);
    char msg[160];
    /* MXFP8's backward hands the columnwise copy alone (the dgrad reads nothing else) */
    const int col_only = backward && is_mx(m);
    for (int e = 0; e < NE; e++) {
        CHECK_MSG(w[e].dtype == GLN_DTYPE_FP8_E4M3 && w[e].scaling == m->scaling && w[e].rows == KO &&
                      w[e].cols == KI && (col_only ? !w[e].data && !w[e].scale_inv : w[e].data && w[e].scale_inv),
                  "%s %s expert %d: not an E4M3 [%d, %lld] weight in mode %d with %s", m->name, what, e, KO,
                  (long long)KI, (int)m->scaling, col_only ? "no rowwise copy" : "a rowwise copy");
        if (!col_only) {
            quantize_expert(g->ctx, m, full, e, 0, ref, rs);
            snprintf(msg, sizeof msg, "%s %s expert %d: rowwise data", m->name, what, e);
            CHECK(gln_check_bitwise(msg, w[e].data, ref, (size_t)EXPERT));
            snprintf(msg, sizeof msg, "%s %s expert %d: rowwise scales", m->name, what, e);
            CHECK(gln_check_bitwise(msg, w[e].scale_inv, rs, lay.scale_bytes));
        }
        if (!backward) {
            CHECK_MSG(!w[e].col_data && !w[e].col_scale_inv, "%s %s expert %d: forward has a columnwise copy",
                      m->name, what, e);
            continue;
        }
        CHECK_MSG(w[e].col_data && w[e].col_scale_inv, "%s %s expert %d: no columnwise copy", m->name, what, e);
        if (!w[e].col_data || !w[e].col_scale_inv) continue;
        quantize_expert(g->ctx, m, full, e, 1, ref, cs);
        snprintf(msg, sizeof msg, "%s %s expert %d: columnwise data", m->name, what, e);
        CHECK(gln_check_bitwise(msg, w[e].col_data, ref, (size_t)EXPERT));
        snprintf(msg, sizeof msg, "%s %s expert %d: columnwise scales", m->name, what, e);
        CHECK(gln_check_bitwise(msg, w[e].col_scale_inv, cs, lay.col_scale_bytes));
    }
    CHECK(gln_guard_ok(ref) && gln_guard_ok(rs) && gln_guard_ok(cs));
    gln_test_free(ref);
    gln_test_free(rs);
    gln_test_free(cs);
}

/* Both directions, gathered directly and through prefetch, against `full`. */
static void check_all(group_t *g, const mode_t_ *m, const float *full, const char *what) {
    for (int pass = 0; pass < 2; pass++)
        for (int dir = 0; dir < 2; dir++) {
            gln_tensor_t w[NE];
            memset(w, 0, sizeof w);
            if (pass) CHECK_OK(g->p->prefetch(g->p->impl, dir));
            CHECK_OK(dir ? g->p->materialize_backward(g->p->impl, w) : g->p->materialize_forward(g->p->impl, w));
            char msg[96];
            snprintf(msg, sizeof msg, "%s, %s%s", what, dir ? "backward" : "forward", pass ? " (prefetched)" : "");
            check_copies(g, m, full, w, dir, msg);
            CHECK_OK(g->p->release(g->p->impl, w));
        }
    size_t live = 1;
    CHECK_OK(gln_sharded_weights_materialized_bytes(g->sw, &live, NULL));
    CHECK_MSG(live == 0, "%s %s: %zu bytes still materialized", m->name, what, live);
}

/* The group's flat layout (experts padded to 128-row multiples under the 128x128 FP8 gather, to
 * 32-row multiples under the MXFP8 quantized shard): the element of `full` behind flat index
 * `flat`, or -1 for padding. */
static int64_t real_index(const group_t *g, int64_t flat) {
    int64_t stride = gln_sharded_fp8_2d(g->sw) ? (KO + 127) / 128 * 128 * KI
                     : gln_sharded_mx_qshard(g->sw) ? (KO + 31) / 32 * 32 * KI
                                                    : EXPERT;
    CHECK_MSG(stride == g->sw->expert_stride, "expert stride %lld, expected %lld", (long long)g->sw->expert_stride,
              (long long)stride);
    int64_t e = flat / stride, within = flat % stride;
    return e < NE && within < EXPERT ? e * EXPERT + within : -1;
}

/* full = new values; this rank's master shard follows them (the caller then refreshes). */
static void set_master(group_t *g, float *full, uint64_t seed) {
    fill_weights(full, seed);
    float *master = NULL;
    int64_t len = 0, off = 0;
    CHECK_OK(gln_sharded_weights_shard(g->sw, &master, NULL, &len, &off));
    for (int64_t i = 0; i < len; i++) {
        int64_t k = real_index(g, off + i);
        master[i] = k < 0 ? 0.0f : full[k];
    }
}

/* working[i] = bf16(master[i]) by hand, as an optimizer that writes the working shard does. */
static void write_working(group_t *g) {
    float *master = NULL;
    int64_t len = 0;
    void *working = NULL;
    CHECK_OK(gln_sharded_weights_shard(g->sw, &master, NULL, &len, NULL));
    CHECK_OK(gln_sharded_weights_working_shard(g->sw, &working, NULL, NULL));
    for (int64_t i = 0; i < len; i++) ((uint16_t *)working)[i] = gln_fp32_to_bf16(master[i]);
}

/* This rank's per-expert amaxes of its working shard (0 for experts outside it). */
static void local_amaxes(group_t *g, float *amax) {
    void *working = NULL;
    int64_t len = 0, off = 0;
    CHECK_OK(gln_sharded_weights_shard(g->sw, NULL, NULL, &len, &off));
    CHECK_OK(gln_sharded_weights_working_shard(g->sw, &working, NULL, NULL));
    for (int e = 0; e < NE; e++) amax[e] = 0.0f;
    for (int64_t i = 0; i < len; i++) {
        int64_t k = real_index(g, off + i);
        if (k < 0) continue;
        float v = fabsf(gln_bf16_to_fp32(((uint16_t *)working)[i]));
        amax[k / EXPERT] = fmaxf(amax[k / EXPERT], v);
    }
}

static void test_bytes_and_refresh(void) {
    for (size_t mi = 0; mi < NMODES; mi++) {
        const mode_t_ *m = &modes[mi];
        group_t g;
        if (!group_create(&g, m, 1)) continue;
        float *full = gln_test_alloc((size_t)TOTAL * sizeof(float)), *old = gln_test_alloc((size_t)TOTAL * sizeof(float));
        /* a new group: the quantized shard of zero weights */
        check_all(&g, m, full, "new group");
        fill_weights(full, 11);
        CHECK_OK(gln_sharded_weights_load_full(g.sw, full));
        check_all(&g, m, full, "after load_full");

        /* master changed + sync_working */
        memcpy(old, full, (size_t)TOTAL * sizeof(float));
        set_master(&g, full, 12);
        check_all(&g, m, old, "master changed, not yet synced"); /* the working shard still old */
        CHECK_OK(gln_sharded_weights_sync_working(g.sw));
        check_all(&g, m, full, "after sync_working");

        /* the working shard written by hand: stored FP8 stays old until requantize */
        memcpy(old, full, (size_t)TOTAL * sizeof(float));
        set_master(&g, full, 13);
        write_working(&g);
        check_all(&g, m, old, "working written, not requantized");
        CHECK_OK(gln_sharded_weights_requantize(g.sw));
        check_all(&g, m, full, "after requantize");

        /* the internal entry with this rank's amaxes handed in (the fused optimizer's path) */
        set_master(&g, full, 14);
        write_working(&g);
        float amax[NE];
        local_amaxes(&g, amax);
        CHECK_OK(gln_sharded_requantize(g.sw, "test (local amaxes)", amax));
        check_all(&g, m, full, "after requantize with local amaxes");

        /* a prefetch outstanding: refused on every rank, nothing changed */
        gln_tensor_t w[NE];
        CHECK_OK(g.p->prefetch(g.p->impl, 1));
        CHECK_STATUS(gln_sharded_weights_requantize(g.sw), GLN_STATUS_INVALID_STATE, "gln_sharded_weights_requantize");
        CHECK_STATUS(gln_sharded_weights_sync_working(g.sw), GLN_STATUS_INVALID_STATE,
                     "gln_sharded_weights_sync_working");
        CHECK_OK(g.p->materialize_backward(g.p->impl, w));
        check_copies(&g, m, full, w, 1, "prefetch consumed after refused refreshes");
        CHECK_OK(g.p->release(g.p->impl, w));
        CHECK(gln_guard_ok(full) && gln_guard_ok(old));
        gln_test_free(full);
        gln_test_free(old);
        group_destroy(&g);
    }
}

/* Without quantized_shard there is nothing to refresh: success, no collective; NULL refused. */
static void test_requantize_without_quantized_shard(void) {
    group_t g;
    if (!group_create(&g, &modes[0], 0)) return;
    CHECK_OK(gln_sharded_weights_requantize(g.sw));
    CHECK_OK(g.p->prefetch(g.p->impl, 0));
    CHECK_OK(gln_sharded_weights_requantize(g.sw)); /* even with a prefetch outstanding */
    gln_tensor_t w[NE];
    CHECK_OK(g.p->materialize_forward(g.p->impl, w));
    CHECK_OK(g.p->release(g.p->impl, w));
    CHECK_STATUS(gln_sharded_weights_requantize(NULL), GLN_STATUS_INVALID_ARGUMENT, "sw");
    group_destroy(&g);
}

/* ---- the layer ----------------------------------------------------------------------------- */

/* Counting the backend's quantize slots for weight-shaped inputs ([K_out, K_in] tensors, or
 * grouped inputs of K_in columns whose every member has K_out rows; token splits never do). */
static const gln_backend_ops_t *real_ops;
static gln_backend_ops_t counting_ops;
static int weight_quantizations;

static gln_status_t counting_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                      gln_tensor_t *out) {
    if (in->rows == KO && in->cols == KI) weight_quantizations++;
    return real_ops->quantize(ctx, cfg, in, out);
}

static gln_status_t counting_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                              const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    int weights = in->packed.cols == KI && !in->splits_on_backend;
    for (int32_t i = 0; weights && i < in->num; i++) weights = in->splits[i] == KO;
    weight_quantizations += weights;
    return real_ops->grouped_quantize(ctx, cfg, in, out);
}

static void count_quantizations(gln_context_t *ctx) {
    real_ops = ctx->ops;
    counting_ops = *ctx->ops;
    counting_ops.quantize = counting_quantize;
    counting_ops.grouped_quantize = counting_grouped_quantize;
    ctx->ops = &counting_ops;
}

static void rank_splits(int64_t *m, int64_t *rows) {
    int rank = gln_mpi_rank();
    m[0] = 3 + rank;
    m[1] = rank % 2 ? 0 : 17;
    m[2] = 1;
    m[3] = 40 - 3 * rank;
    m[4] = rank == 2 ? 0 : 9;
    *rows = m[0] + m[1] + m[2] + m[3] + m[4];
}

static gln_grouped_linear_t *make_layer(group_t *g, const mode_t_ *m) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = NE;
    c.in_features = KI;
    c.out_features = KO;
    c.bias = 0;
    c.param_dtype = GLN_DTYPE_BF16;
    c.activation_dtype = GLN_DTYPE_BF16;
    c.recipe = m->scaling == GLN_SCALING_BLOCK_2D ? GLN_RECIPE_FP8_BLOCK
               : is_mx(m)                         ? GLN_RECIPE_MXFP8
                                                  : GLN_RECIPE_FP8_CURRENT;
    c.power_2_scales = !is_mx(m) && m->pow2;
    c.block_fp32_scales = !m->pow2;
    c.e8m0_rounding = is_mx(m) && m->pow2 ? GLN_E8M0_ROUND_FLOOR : GLN_E8M0_ROUND_UP;
    c.params.distributed = g->p;
    gln_grouped_linear_t *layer = NULL;
    CHECK_OK(gln_grouped_linear_create(g->ctx, &c, &layer));
    return layer;
}

typedef struct outputs {
    void *y, *dx;
    float *mg;
} outputs_t;

/* One forward + backward (FIRST: main_grad overwritten), y / dx poisoned first; main_grad
 * gathered.  Returns the weight-shaped quantizations the step made. */
static int run_step(group_t *g, gln_grouped_linear_t *layer, int prefetch, uint64_t seed, outputs_t *o) {
    int64_t m[NE], rows;
    rank_splits(m, &rows);
    void *x = gln_test_alloc((size_t)(rows * KI) * 2), *dy = gln_test_alloc((size_t)(rows * KO) * 2);
    gln_rng_t r = gln_rng_seed(seed * 100 + (uint64_t)gln_mpi_rank());
    for (int64_t i = 0; i < rows * KI; i++) gln_store(x, GLN_DTYPE_BF16, (size_t)i, gln_rng_normal(&r));
    for (int64_t i = 0; i < rows * KO; i++) gln_store(dy, GLN_DTYPE_BF16, (size_t)i, gln_rng_normal(&r) * 0.01);
    gln_poison(o->y, GLN_DTYPE_BF16, (size_t)(rows * KO));
    gln_poison(o->dx, GLN_DTYPE_BF16, (size_t)(rows * KI));
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_BF16, rows, KI, x), yt = gln_tensor_make(GLN_DTYPE_BF16, rows, KO, o->y);
    gln_tensor_t dyt = gln_tensor_make(GLN_DTYPE_BF16, rows, KO, dy), dxt = gln_tensor_make(GLN_DTYPE_BF16, rows, KI, o->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt;
    a.m_splits = m;
    a.y = &yt;
    a.microbatch = GLN_MICROBATCH_FIRST;
    a.input_requires_grad = 1;
    gln_grouped_linear_saved_t *saved = NULL;
    weight_quantizations = 0;
    if (prefetch) CHECK_OK(g->p->prefetch(g->p->impl, 0));
    CHECK_OK(gln_grouped_linear_forward(layer, &a, &saved));
    if (saved) {
        if (prefetch) CHECK_OK(g->p->prefetch(g->p->impl, 1));
        CHECK_OK(gln_grouped_linear_backward(saved, &dyt, &dxt));
        CHECK_OK(gln_grouped_linear_saved_release(saved));
    }
    int made = weight_quantizations;
    CHECK_OK(gln_sharded_weights_wait(g->sw));
    CHECK_OK(gln_sharded_weights_gather_main_grad(g->sw, o->mg));
    gln_test_free(x);
    gln_test_free(dy);
    return made;
}

static void compare(const mode_t_ *m, const outputs_t *q, const outputs_t *p, int64_t rows, const char *what) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s %s: y quantized shard vs plain group", m->name, what);
    CHECK(gln_check_bitwise(msg, q->y, p->y, (size_t)(rows * KO) * 2));
    snprintf(msg, sizeof msg, "%s %s: dx quantized shard vs plain group", m->name, what);
    CHECK(gln_check_bitwise(msg, q->dx, p->dx, (size_t)(rows * KI) * 2));
    snprintf(msg, sizeof msg, "%s %s: main_grad quantized shard vs plain group", m->name, what);
    CHECK(gln_check_bitwise(msg, q->mg, p->mg, (size_t)TOTAL * sizeof(float)));
    int nan = 0;
    for (int64_t i = 0; i < rows * KI; i++) nan += isnan(gln_load(p->dx, GLN_DTYPE_BF16, (size_t)i));
    CHECK_MSG(nan == 0, "%s %s: %d dx elements unwritten", m->name, what, nan);
}

static void layer_variant(const mode_t_ *m, int prefetch) {
    group_t q, p;
    if (!group_create(&q, m, 1) || !group_create(&p, m, 0)) return;
    count_quantizations(q.ctx);
    count_quantizations(p.ctx); /* the same table: both contexts are CPU contexts */
    gln_grouped_linear_t *lq = make_layer(&q, m), *lp = make_layer(&p, m);
    int64_t ms[NE], rows;
    rank_splits(ms, &rows);
    outputs_t oq = {gln_test_alloc((size_t)(rows * KO) * 2), gln_test_alloc((size_t)(rows * KI) * 2),
                    gln_test_alloc((size_t)TOTAL * sizeof(float))};
    outputs_t op = {gln_test_alloc((size_t)(rows * KO) * 2), gln_test_alloc((size_t)(rows * KI) * 2),
                    gln_test_alloc((size_t)TOTAL * sizeof(float))};
    float *full = gln_test_alloc((size_t)TOTAL * sizeof(float));
    fill_weights(full, 21);
    CHECK_OK(gln_sharded_weights_load_full(q.sw, full));
    CHECK_OK(gln_sharded_weights_load_full(p.sw, full));
    for (int step = 0; step < 3 && lq && lp; step++) {
        if (step == 1) { /* master changed + sync_working */
            set_master(&q, full, 22);
            set_master(&p, full, 22);
            CHECK_OK(gln_sharded_weights_sync_working(q.sw));
            CHECK_OK(gln_sharded_weights_sync_working(p.sw));
        } else if (step == 2) { /* working shard written by hand + requantize */
            set_master(&q, full, 23);
            set_master(&p, full, 23);
            write_working(&q);
            write_working(&p);
            CHECK_OK(gln_sharded_weights_requantize(q.sw));
        }
        if (step) {
            CHECK_OK(gln_grouped_linear_weights_updated(lq));
            CHECK_OK(gln_grouped_linear_weights_updated(lp));
        }
        int made_q = run_step(&q, lq, prefetch, 30 + (uint64_t)step, &oq);
        int made_p = run_step(&p, lp, prefetch, 30 + (uint64_t)step, &op);
        CHECK_MSG(made_q == 0, "%s step %d: the layer over the quantized shard quantized %d weight sets", m->name,
                  step, made_q);
        CHECK_MSG(made_p > 0, "%s step %d: the counter saw no weight quantization of the plain group's layer",
                  m->name, step);
        char what[48];
        snprintf(what, sizeof what, "step %d%s", step, prefetch ? " (prefetch)" : "");
        compare(m, &oq, &op, rows, what);
    }
    CHECK(gln_guard_ok(oq.y) && gln_guard_ok(oq.dx) && gln_guard_ok(oq.mg));
    CHECK_OK(gln_grouped_linear_destroy(lq));
    CHECK_OK(gln_grouped_linear_destroy(lp));
    q.ctx->ops = real_ops;
    p.ctx->ops = real_ops;
    gln_test_free(oq.y), gln_test_free(oq.dx), gln_test_free(oq.mg);
    gln_test_free(op.y), gln_test_free(op.dx), gln_test_free(op.mg);
    gln_test_free(full);
    group_destroy(&q);
    group_destroy(&p);
}

static void test_layer_equals_plain_group(void) {
    for (size_t mi = 0; mi < NMODES; mi++) layer_variant(&modes[mi], 0);
    layer_variant(&modes[0], 1);
    layer_variant(&modes[3], 1);
    layer_variant(&modes[4], 1);
}

GLN_MPI_TEST_MAIN(GLN_CASE(test_bytes_and_refresh), GLN_CASE(test_requantize_without_quantized_shard),
                  GLN_CASE(test_layer_equals_plain_group))
