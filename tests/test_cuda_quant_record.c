/* Delayed scaling's grouped quantize with the amax history record (gln_op_grouped_quantize_record):
 * the CUDA backend fuses the record into the kernel that finishes the members' amaxes
 * (cuda_grouped.c, cuda_quant_members.cu); the CPU backend has no slot, so the op quantizes and then
 * records (fp8_state_record).  Both must give the same bytes: history row 0 (every slot, the ones
 * between the strided selection untouched), amax, scale, both copies and their decode scales, and
 * the dbias when asked — with poisoned outputs.
 *
 * Cases: TENSOR delayed rowwise + columnwise and rowwise only; fp32 / bf16 / fp16 input; members of
 * 0 / 1 / 3 / 64 / 65 / 127 / 128 / 129 / 130 / 257 rows, one member, empty members only; 1 / 33 /
 * 64 columns; stride 3 (first 0 and 1) and 2; history nan_propagate 0 / 1 with NaN inputs and a
 * NaN already in the history; with and without a fused dbias; host and device splits.
 *
 * Skips (exit 77) without a CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include "backend/ops.h"
#include "tensor/tensor.h"

static gln_context_t *g_cu, *g_cpu;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const gln_dtype_t k_hp[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

/* [rows, cols] of N(0, 1)·2^k values; with specials a NaN (both signs, payloads) in some rows. */
static void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int specials) {
    void *h = malloc((size_t)(rows * cols) * gln_dtype_size(dt) + 1);
    for (int64_t r = 0; r < rows; r++) {
        const double s = ldexp(1.0, (int)gln_rng_int(rng, -6, 6));
        for (int64_t j = 0; j < cols; j++) gln_store(h, dt, (size_t)(r * cols + j), gln_rng_normal(rng) * s);
    }
    if (specials && rows * cols > 0)
        for (int k = 0; k < 3; k++) {
            const size_t i = (size_t)gln_rng_int(rng, 0, rows * cols - 1);
            gln_store(h, dt, i, k & 1 ? -NAN : NAN);
        }
    return h;
}

typedef struct rcase {
    const gln_quant_config_t *cfg;
    gln_dtype_t dt;
    int32_t num, first, stride;
    const int64_t *splits;
    int64_t rows, cols;
    int dbias, dev_splits, specials, hist_nanp;
} rcase_t;

static void run_case(const rcase_t *c, gln_rng_t *rng) {
    char what[400];
    snprintf(what, sizeof what, "%s, %s x, %d members, [%lld, %lld], history first %d stride %d nan_propagate %d%s%s%s",
             c->cfg->columnwise ? "rowwise + columnwise" : "rowwise", gln_dtype_name(c->dt), (int)c->num,
             (long long)c->rows, (long long)c->cols, (int)c->first, (int)c->stride, c->hist_nanp,
             c->dbias ? ", dbias" : "", c->dev_splits ? ", device splits" : "", c->specials ? ", NaN inputs" : "");
    const gln_quant_config_t *cfg = c->cfg;
    const size_t nd = (size_t)(c->rows * c->cols), es = gln_dtype_size(c->dt);
    void *h = make_input(rng, c->dt, c->rows, c->cols, c->specials);
    gln_twin_t x = gln_twin_input(g_cu, h, nd * es, 0);
    gln_twin_t sp = gln_twin_input(g_cu, c->splits, (size_t)c->num * sizeof(int64_t), 0);
    /* history row 0 of num·stride + first + 1 slots: zeros, values, a NaN */
    const int32_t slots = c->first + c->num * c->stride + 1;
    float *h0 = malloc((size_t)slots * sizeof(float));
    for (int32_t k = 0; k < slots; k++) h0[k] = k % 4 == 0 ? 0.0f : (float)(gln_rng_normal(rng) * 4.0);
    if (slots > 2) h0[c->first + c->stride] = NAN;
    gln_twin_t hist = gln_twin_input(g_cu, h0, (size_t)slots * sizeof(float), 0);
    /* the quantized outputs (amax staged to 0 and scales given, as gln_fp8_state_stage leaves them) */
    int64_t sr = 0, sc = 0;
    CHECK_OK(gln_grouped_scale_bound(cfg->mode, c->num, c->rows, c->cols, &sr, &sc));
    gln_twin_t q = gln_twin_new(g_cu, nd, 0xA5u, 0), s = gln_twin_new(g_cu, (size_t)sr * 4, 0xFFu, 0);
    gln_twin_t qt = {0}, cs = {0};
    if (cfg->columnwise) qt = gln_twin_new(g_cu, nd, 0xA5u, 0), cs = gln_twin_new(g_cu, (size_t)sc * 4, 0xFFu, 0);
    float *a0 = calloc((size_t)c->num + 1, sizeof(float)), *s0 = malloc(((size_t)c->num + 1) * sizeof(float));
    for (int32_t i = 0; i < c->num; i++) s0[i] = (float)ldexp(1.0, i % 5 - 2);
    gln_twin_t amax = gln_twin_input(g_cu, a0, (size_t)c->num * sizeof(float), 0);
    gln_twin_t scale = gln_twin_input(g_cu, s0, (size_t)c->num * sizeof(float), 0);
    /* dbias: fp32, overwritten */
    const size_t dbb = (size_t)c->cols * sizeof(float);
    gln_twin_t *db = calloc((size_t)c->num, sizeof *db);
    gln_tensor_t *dbh = calloc((size_t)c->num, sizeof *dbh), *dbd = calloc((size_t)c->num, sizeof *dbd);
    for (int32_t i = 0; c->dbias && i < c->num; i++) {
        db[i] = gln_twin_new(g_cu, dbb, 0xFFu, 0);
        dbh[i] = gln_tensor_make(GLN_DTYPE_FP32, 1, c->cols, db[i].h);
        dbd[i] = gln_tensor_make(GLN_DTYPE_FP32, 1, c->cols, db[i].d);
    }
    gln_grouped_tensor_t in_h = {c->num, c->splits, 0, gln_tensor_make(c->dt, c->rows, c->cols, x.h)};
    gln_grouped_tensor_t in_d = {c->num, c->dev_splits ? (const int64_t *)sp.d : c->splits, c->dev_splits,
                                 gln_tensor_make(c->dt, c->rows, c->cols, x.d)};
    gln_grouped_tensor_t out_h = in_h, out_d = in_d;
    const gln_tensor_t th = {cfg->fp8_dtype, c->rows, c->cols, q.h, cfg->mode, s.h, qt.h, cs.h, amax.h, scale.h};
    const gln_tensor_t td = {cfg->fp8_dtype, c->rows, c->cols, q.d, cfg->mode, s.d, qt.d, cs.d, amax.d, scale.d};
    out_h.packed = th, out_d.packed = td;
    CHECK_OK(gln_op_grouped_quantize_record(g_cpu, cfg, &in_h, &out_h, c->dbias ? dbh : NULL, 0, (float *)hist.h,
                                            c->first, c->stride, c->hist_nanp));
    CHECK_OK(gln_op_grouped_quantize_record(g_cu, cfg, &in_d, &out_d, c->dbias ? dbd : NULL, 0, (float *)hist.d,
                                            c->first, c->stride, c->hist_nanp));
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_context_async_error(g_cu));
    gln_twin_check(g_cu, &hist, 4, what, "history row 0", NULL, NULL);
    gln_twin_check(g_cu, &amax, 4, what, "amax", NULL, NULL);
    gln_twin_check(g_cu, &scale, 4, what, "scale", NULL, NULL);
    gln_twin_check(g_cu, &q, 1, what, "data", NULL, NULL);
    gln_twin_check(g_cu, &s, 4, what, "scale_inv", NULL, NULL);
    gln_twin_check(g_cu, &qt, 1, what, "col_data", NULL, NULL);
    gln_twin_check(g_cu, &cs, 4, what, "col_scale_inv", NULL, NULL);
    for (int32_t i = 0; c->dbias && i < c->num; i++) gln_twin_check(g_cu, &db[i], 4, what, "dbias", NULL, NULL);
    gln_twin_t *all[] = {&q, &qt, &s, &cs, &amax, &scale, &hist, &sp, &x};
    for (size_t k = 0; k < COUNT(all); k++) gln_twin_free(g_cu, all[k]);
    for (int32_t i = 0; c->dbias && i < c->num; i++) gln_twin_free(g_cu, &db[i]);
    free(db), free(dbh), free(dbd), free(a0), free(s0), free(h0), free(h);
}

static const int64_t k_sp_awkward[] = {0, 1, 3, 64, 65, 127, 128, 129, 130, 257};
static const int64_t k_sp_one[] = {1};
static const int64_t k_sp_empty[] = {0, 0};

typedef struct splits_set {
    int32_t num;
    const int64_t *splits;
} splits_set_t;

static const splits_set_t k_sets[] = {{10, k_sp_awkward}, {1, k_sp_one}, {2, k_sp_empty}};

static void test_record_fused_vs_cpu(void) {
    static const int64_t cols[] = {1, 33, 64};
    static const int32_t firsts[] = {0, 1, 0}, strides[] = {3, 3, 2};
    gln_rng_t rng = gln_rng_seed(909);
    int turn = 0;
    for (int colwise = 1; colwise >= 0; colwise--) {
        gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
        cfg.mode = GLN_SCALING_TENSOR, cfg.delayed = 1, cfg.rowwise = 1, cfg.columnwise = colwise;
        for (size_t d = 0; d < COUNT(k_hp); d++)
            for (size_t si = 0; si < COUNT(k_sets); si++)
                for (size_t ci = 0; ci < COUNT(cols); ci++, turn++) {
                    rcase_t c;
                    memset(&c, 0, sizeof c);
                    c.cfg = &cfg, c.dt = k_hp[d];
                    c.num = k_sets[si].num, c.splits = k_sets[si].splits;
                    for (int32_t i = 0; i < c.num; i++) c.rows += c.splits[i];
                    c.cols = cols[ci];
                    c.first = firsts[turn % 3], c.stride = strides[turn % 3];
                    c.hist_nanp = (turn >> 1) & 1;
                    c.dbias = turn % 4 == 1;
                    c.dev_splits = turn % 5 == 2;
                    c.specials = turn % 3 == 0;
                    run_case(&c, &rng);
                }
    }
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu, GLN_CASE(test_record_fused_vs_cpu))
