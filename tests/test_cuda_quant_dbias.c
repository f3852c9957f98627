/* The fused grouped quantize + dbias of the CUDA backend (gln_op_grouped_quantize_dbias:
 * cuda_grouped.c, cuda_quant_members.cu) against the CPU backend's (gln_grouped_quantize + the
 * tiled reference of quant/dbias_tiled.h), bit for bit: every dbias element and every byte of the
 * quantized outputs (data, scales, amax / scale arrays), with poisoned outputs and guard bytes.
 *
 * Configurations: the sums alone (cfg NULL), TENSOR current (rowwise + columnwise, rowwise only),
 * TENSOR delayed, MXFP8, BLOCK_1D (quantize, then the sums); fp32 / bf16 / fp16 dy; dbias in fp32
 * (overwrite) and bf16 (accumulate); host and device splits; members of 0 / 1 / 3 / 64 / 65 / 127 /
 * 128 / 129 / 130 / 257 rows, one member of 1 row, empty members only, 16-row multiples; 1 / 31 /
 * 33 / 64 / 257 columns (64: the 16-byte vector path); inputs with NaN (payloads, both signs) and
 * Inf of both signs in one column (Inf - Inf), which take the kernel's exact-NaN path.  The
 * TENSOR and MXFP8 sums must come from the general kernels (gln_cuda_quant_last_kernel).
 *
 * Skips (exit 77) without a CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include "backend/cuda/cuda_backend.h" /* gln_cuda_quant_last_kernel */
#include "backend/ops.h"
#include "tensor/tensor.h"

static gln_context_t *g_cu, *g_cpu;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const gln_dtype_t k_hp[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

/* [rows, cols] of N(0, 1)·2^k values; with specials, NaN with payloads (both signs) and ±Inf in
 * column 0 of some rows. */
static void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int specials) {
    void *h = malloc((size_t)(rows * cols) * gln_dtype_size(dt) + 1);
    for (int64_t r = 0; r < rows; r++) {
        const double s = ldexp(1.0, (int)gln_rng_int(rng, -6, 6));
        for (int64_t j = 0; j < cols; j++) gln_store(h, dt, (size_t)(r * cols + j), gln_rng_normal(rng) * s);
    }
    if (specials && rows * cols > 0) {
        for (int k = 0; k < 6; k++) {
            const size_t i = (size_t)gln_rng_int(rng, 0, rows * cols - 1);
            if (dt == GLN_DTYPE_FP32) {
                const uint32_t nan = (k & 1 ? 0xFFC00000u : 0x7FC00000u) | (uint32_t)(k + 1);
                memcpy((char *)h + 4 * i, &nan, 4);
            } else {
                const uint16_t nan = dt == GLN_DTYPE_BF16 ? (uint16_t)((k & 1 ? 0xFFC0u : 0x7FC0u) | (k + 1))
                                                          : (uint16_t)((k & 1 ? 0xFE00u : 0x7E00u) | (k + 1));
                memcpy((char *)h + 2 * i, &nan, 2);
            }
        }
        /* +Inf and -Inf in column 0 of rows 0 and 1 (the same tile): Inf - Inf */
        gln_store(h, dt, 0, INFINITY);
        if (rows > 1) gln_store(h, dt, (size_t)cols, -INFINITY);
    }
    return h;
}

typedef struct dcase {
    const gln_quant_config_t *cfg; /* NULL: the sums alone */
    gln_dtype_t dt, db_dt;
    int32_t num;
    const int64_t *splits;
    int64_t rows, cols;
    int accumulate, dev_splits, specials;
} dcase_t;

static void dcase_name(const dcase_t *c, char *out, size_t n) {
    snprintf(out, n, "%s %s%s, %s dy, %d members, [%lld, %lld], dbias %s %s, %s splits%s",
             c->cfg ? gln_scaling_name(c->cfg->mode) : "sums alone",
             c->cfg && c->cfg->mode == GLN_SCALING_TENSOR ? (c->cfg->delayed ? "delayed" : "current") : "",
             c->cfg && !c->cfg->columnwise ? " rowwise" : "", gln_dtype_name(c->dt), (int)c->num, (long long)c->rows,
             (long long)c->cols, gln_dtype_name(c->db_dt), c->accumulate ? "accumulated" : "overwritten",
             c->dev_splits ? "device" : "host", c->specials ? ", NaN / Inf" : "");
}

static void run_case(const dcase_t *c, gln_rng_t *rng) {
    char what[400];
    dcase_name(c, what, sizeof what);
    const size_t nd = (size_t)(c->rows * c->cols), es = gln_dtype_size(c->dt);
    void *h = make_input(rng, c->dt, c->rows, c->cols, c->specials);
    gln_twin_t x = gln_twin_input(g_cu, h, nd * es, 0);
    gln_twin_t sp = gln_twin_input(g_cu, c->splits, (size_t)c->num * sizeof(int64_t), 0);
    /* dbias: one twin per member (accumulate: random initial values) */
    const size_t dbb = (size_t)c->cols * gln_dtype_size(c->db_dt);
    gln_twin_t *db = calloc((size_t)c->num, sizeof *db);
    gln_tensor_t *dbh = calloc((size_t)c->num, sizeof *dbh), *dbd = calloc((size_t)c->num, sizeof *dbd);
    void *init = malloc(dbb + 1);
    for (int32_t i = 0; i < c->num; i++) {
        if (c->accumulate) {
            for (int64_t j = 0; j < c->cols; j++) gln_store(init, c->db_dt, (size_t)j, gln_rng_normal(rng));
            db[i] = gln_twin_input(g_cu, init, dbb, 0);
        } else {
            db[i] = gln_twin_new(g_cu, dbb, 0xFFu, 0);
        }
        dbh[i] = gln_tensor_make(c->db_dt, 1, c->cols, db[i].h);
        dbd[i] = gln_tensor_make(c->db_dt, 1, c->cols, db[i].d);
    }
    /* the quantized outputs */
    gln_twin_t q = {0}, qt = {0}, s = {0}, cs = {0}, amax = {0}, scale = {0};
    size_t ses = 1;
    gln_grouped_tensor_t in_h = {c->num, c->splits, 0, gln_tensor_make(c->dt, c->rows, c->cols, x.h)};
    gln_grouped_tensor_t in_d = {c->num, c->dev_splits ? (const int64_t *)sp.d : c->splits, c->dev_splits,
                                 gln_tensor_make(c->dt, c->rows, c->cols, x.d)};
    gln_grouped_tensor_t out_h = in_h, out_d = in_d;
    if (c->cfg) {
        const gln_quant_config_t *cfg = c->cfg;
        int64_t sr = 0, sc = 0;
        CHECK_OK(gln_grouped_scale_bound(cfg->mode, c->num, c->rows, c->cols, &sr, &sc));
        ses = cfg->mode == GLN_SCALING_MXFP8_1D ? 1 : 4;
        if (cfg->rowwise) q = gln_twin_new(g_cu, nd, 0xA5u, 0), s = gln_twin_new(g_cu, (size_t)sr * ses, 0xFFu, 0);
        if (cfg->columnwise) qt = gln_twin_new(g_cu, nd, 0xA5u, 0), cs = gln_twin_new(g_cu, (size_t)sc * ses, 0xFFu, 0);
        if (cfg->mode == GLN_SCALING_TENSOR) {
            float *a0 = malloc((size_t)c->num * sizeof(float)), *s0 = malloc((size_t)c->num * sizeof(float));
            for (int32_t i = 0; i < c->num; i++) a0[i] = (float)(i % 3) * 0.5f, s0[i] = (float)ldexp(1.0, i % 5);
            amax = gln_twin_input(g_cu, a0, (size_t)c->num * sizeof(float), 0);
            scale = gln_twin_input(g_cu, s0, (size_t)c->num * sizeof(float), 0);
            free(a0), free(s0);
        }
        const gln_tensor_t th = {cfg->fp8_dtype, c->rows, c->cols, q.h, cfg->mode, s.h, qt.h, cs.h, amax.h, scale.h};
        const gln_tensor_t td = {cfg->fp8_dtype, c->rows, c->cols, q.d, cfg->mode, s.d, qt.d, cs.d, amax.d, scale.d};
        out_h.packed = th, out_d.packed = td;
    }
    CHECK_OK(gln_op_grouped_quantize_dbias(g_cpu, c->cfg, &in_h, c->cfg ? &out_h : NULL, dbh, c->accumulate));
    CHECK_OK(gln_op_grouped_quantize_dbias(g_cu, c->cfg, &in_d, c->cfg ? &out_d : NULL, dbd, c->accumulate));
    if (c->cols > 0) { /* the sums come from the general kernels (the TMA kernels take no dbias) */
        const char *want = c->cfg && c->cfg->mode == GLN_SCALING_MXFP8_1D ? "mxq_general_kernel" : "tq_general_kernel";
        const char *ran = gln_cuda_quant_last_kernel();
        CHECK_MSG(ran && strcmp(ran, want) == 0, "%s: ran on %s, want %s", what, ran ? ran : "(none)", want);
    }
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_context_async_error(g_cu));
    for (int32_t i = 0; i < c->num; i++) {
        char name[64];
        snprintf(name, sizeof name, "dbias[%d]", (int)i);
        gln_twin_check(g_cu, &db[i], c->db_dt == GLN_DTYPE_FP32 ? 4 : 1, what, name, NULL, NULL);
    }
    gln_twin_check(g_cu, &q, 1, what, "data", NULL, NULL);
    gln_twin_check(g_cu, &qt, 1, what, "col_data", NULL, NULL);
    gln_twin_check(g_cu, &s, ses, what, "scale_inv", NULL, NULL);
    gln_twin_check(g_cu, &cs, ses, what, "col_scale_inv", NULL, NULL);
    gln_twin_check(g_cu, &amax, 4, what, "amax", NULL, NULL);
    gln_twin_check(g_cu, &scale, 4, what, "scale", NULL, NULL);
    gln_twin_t *all[] = {&q, &qt, &s, &cs, &amax, &scale, &sp, &x};
    for (size_t k = 0; k < COUNT(all); k++) gln_twin_free(g_cu, all[k]);
    for (int32_t i = 0; i < c->num; i++) gln_twin_free(g_cu, &db[i]);
    free(db), free(dbh), free(dbd), free(init), free(h);
}

static const int64_t k_sp_awkward[] = {0, 1, 3, 64, 65, 127, 128, 129, 130, 257};
static const int64_t k_sp_one[] = {1};
static const int64_t k_sp_three[] = {3};
static const int64_t k_sp_empty[] = {0, 0};
static const int64_t k_sp_16[] = {16, 128, 0, 256, 48};

typedef struct splits_set {
    int32_t num;
    const int64_t *splits;
} splits_set_t;

static const splits_set_t k_sets[] = {{10, k_sp_awkward}, {1, k_sp_one}, {1, k_sp_three}, {2, k_sp_empty},
                                      {5, k_sp_16}};

static gln_quant_config_t make_cfg(int k) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.rowwise = 1, cfg.columnwise = k != 1;
    cfg.mode = k <= 2 ? GLN_SCALING_TENSOR : k == 3 ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_1D;
    cfg.delayed = k == 2;
    return cfg;
}

/* Every configuration x dtype x splits set x column count, with a rotating choice of the dbias
 * dtype / accumulation / splits placement / specials (so each appears with each configuration). */
static void test_fused_vs_cpu(void) {
    static const int64_t cols[] = {1, 31, 33, 64, 257};
    gln_rng_t rng = gln_rng_seed(2026);
    int turn = 0;
    for (int k = -1; k <= 4; k++) {
        gln_quant_config_t cfg = make_cfg(k < 0 ? 0 : k);
        for (size_t d = 0; d < COUNT(k_hp); d++)
            for (size_t si = 0; si < COUNT(k_sets); si++)
                for (size_t ci = 0; ci < COUNT(cols); ci++, turn++) {
                    dcase_t c;
                    memset(&c, 0, sizeof c);
                    c.cfg = k < 0 ? NULL : &cfg;
                    c.dt = k_hp[d];
                    c.num = k_sets[si].num, c.splits = k_sets[si].splits;
                    for (int32_t i = 0; i < c.num; i++) c.rows += c.splits[i];
                    c.cols = cols[ci];
                    c.accumulate = turn & 1;
                    c.db_dt = c.accumulate ? GLN_DTYPE_BF16 : GLN_DTYPE_FP32;
                    c.dev_splits = (turn >> 1) & 1;
                    c.specials = turn % 3 == 0;
                    run_case(&c, &rng);
                }
    }
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu, GLN_CASE(test_fused_vs_cpu))
