/* The tiled dbias order (quant/dbias_tiled.h) on the CPU: the reference's sums against exact
 * (double) column sums within the FP32 summation bound, empty members (0 written, or left alone
 * when accumulating), rows past the members never read (NaN there), and the CPU backend's fused
 * slot (gln_op_grouped_quantize_dbias) = gln_grouped_quantize + the reference, bit for bit.
 * Awkward shapes: members of 0 / 1 / 3 / 64 / 65 / 127 / 128 / 129 / 130 / 257 rows, 1 / 31 / 33 /
 * 257 columns.  The CUDA kernels against this reference: test_cuda_quant_dbias. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "harness.h"
#include "quant/dbias_tiled.h"

static const gln_dtype_t HP[3] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

static void *random_rows(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int64_t valid) {
    void *x = gln_test_alloc((size_t)(rows * cols) * gln_dtype_size(dt));
    for (int64_t i = 0; i < valid * cols; i++) gln_store(x, dt, (size_t)i, gln_rng_normal(rng) * 4.0);
    gln_poison((char *)x + (size_t)(valid * cols) * gln_dtype_size(dt), dt, (size_t)((rows - valid) * cols));
    return x;
}

static void ref_case(gln_dtype_t in_dt, gln_dtype_t out_dt, const int64_t *splits, int32_t num, int64_t cols,
                     int accumulate) {
    gln_rng_t rng = gln_rng_seed(11 + (uint64_t)cols * 7 + (uint64_t)in_dt);
    int64_t sum = 0;
    for (int32_t i = 0; i < num; i++) sum += splits[i];
    const int64_t rows = sum + 3; /* rows past the members: NaN, never read */
    void *x = random_rows(&rng, in_dt, rows, cols, sum);
    gln_grouped_tensor_t dy = {num, splits, 0, gln_tensor_make(in_dt, rows, cols, x)};
    gln_tensor_t *db = calloc((size_t)num, sizeof *db);
    void **old = calloc((size_t)num, sizeof *old);
    const size_t bytes = (size_t)cols * gln_dtype_size(out_dt);
    for (int32_t i = 0; i < num; i++) {
        void *b = gln_test_alloc(bytes);
        if (accumulate) {
            for (int64_t j = 0; j < cols; j++) gln_store(b, out_dt, (size_t)j, gln_rng_normal(&rng));
        } else {
            gln_poison(b, out_dt, (size_t)cols);
        }
        old[i] = malloc(bytes);
        memcpy(old[i], b, bytes);
        db[i] = gln_tensor_make(out_dt, 1, cols, b);
    }
    CHECK_OK(gln_grouped_dbias_tiled_ref(&dy, db, accumulate));
    int64_t row0 = 0;
    for (int32_t i = 0; i < num; i++) {
        if (splits[i] == 0 && accumulate) {
            CHECK_MSG(memcmp(db[i].data, old[i], bytes) == 0, "empty member %d changed while accumulating", (int)i);
        } else {
            for (int64_t j = 0; j < cols; j++) {
                double exact = 0.0, mag = 0.0;
                for (int64_t r = row0; r < row0 + splits[i]; r++) {
                    const double v = gln_load(x, in_dt, (size_t)(r * cols + j));
                    exact += v, mag += fabs(v);
                }
                if (accumulate) {
                    const double o = gln_load(old[i], out_dt, (size_t)j);
                    exact += o, mag += fabs(o);
                }
                const double got = gln_load(db[i].data, out_dt, (size_t)j), want = gln_round_to(exact, out_dt);
                /* FP32 sum of n terms: (n - 1)·u·Σ|v|, then one rounding to the output dtype */
                const double n = (double)splits[i] + (accumulate ? 1.0 : 0.0);
                const double u_out = out_dt == GLN_DTYPE_FP32 ? 0x1p-24 : out_dt == GLN_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
                const double tol = (n + 1.0) * 0x1p-24 * mag * (1.0 + u_out) + u_out * fabs(exact) + 1e-30;
                CHECK_MSG(fabs(got - want) <= tol + u_out * fabs(want),
                          "member %d col %lld (%s -> %s, acc %d, m %lld): got %.9g, exact %.9g", (int)i, (long long)j,
                          gln_dtype_name(in_dt), gln_dtype_name(out_dt), accumulate, (long long)splits[i], got, exact);
                if (splits[i] == 0) CHECK_MSG(got == 0.0, "empty member %d col %lld: %g, not 0", (int)i, (long long)j, got);
            }
        }
        CHECK(gln_guard_ok(db[i].data));
        row0 += splits[i];
    }
    for (int32_t i = 0; i < num; i++) gln_test_free(db[i].data), free(old[i]);
    free(db), free(old);
    gln_test_free(x);
}

static const int64_t k_sp_awkward[] = {0, 1, 3, 64, 65, 127, 128, 129, 130, 257};
static const int64_t k_sp_one[] = {1};
static const int64_t k_sp_empty[] = {0, 0};

static void test_reference_sums(void) {
    static const int64_t cols[] = {1, 31, 33, 257};
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
        for (int d = 0; d < 3; d++)
            for (int acc = 0; acc < 2; acc++) {
                const gln_dtype_t out = acc ? HP[(d + 1) % 3] : GLN_DTYPE_FP32;
                ref_case(HP[d], out, k_sp_awkward, 10, cols[c], acc);
                ref_case(HP[d], out, k_sp_one, 1, cols[c], acc);
                ref_case(HP[d], out, k_sp_empty, 2, cols[c], acc);
            }
}

/* The order itself, on values where it shows (2^24 among ones, where + 1 rounds away, and its
 * negation in the next tile): the reference equals the definition of the header written out
 * here independently, and differs from the row-order chain (so the check has teeth). */
static void test_order_defined(void) {
    const int64_t m = 200, cols = 1;
    float *x = gln_test_alloc((size_t)m * sizeof(float));
    for (int64_t r = 0; r < m; r++) x[r] = 1.0f;
    x[0] = 16777216.0f, x[130] = -16777216.0f;
    int64_t split = m;
    gln_grouped_tensor_t dy = {1, &split, 0, gln_tensor_make(GLN_DTYPE_FP32, m, cols, x)};
    float out = NAN;
    gln_tensor_t db = gln_tensor_make(GLN_DTYPE_FP32, 1, 1, &out);
    CHECK_OK(gln_grouped_dbias_tiled_ref(&dy, &db, 0));
    /* the definition written out: tiles of 128, a_q = v(q) + v(q + 64), trees of 8, chains */
    float p[2];
    for (int t = 0; t < 2; t++) {
        float d[8];
        for (int w = 0; w < 8; w++) {
            float a[8];
            for (int q = 0; q < 8; q++) {
                const int64_t r = 128 * t + 8 * w + q;
                a[q] = (r < m ? x[r] : 0.0f) + (r + 64 < m ? x[r + 64] : 0.0f);
            }
            d[w] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        }
        p[t] = d[0];
        for (int w = 1; w < 8; w++) p[t] += d[w];
    }
    const float want = (0.0f + p[0]) + p[1];
    CHECK_MSG(memcmp(&out, &want, 4) == 0, "tiled order: got %.9g, the definition gives %.9g", out, want);
    float chain = 0.0f;
    for (int64_t r = 0; r < m; r++) chain += x[r];
    CHECK_MSG(chain != want, "the input does not tell the orders apart (%.9g)", chain);
    gln_test_free(x);
}

/* The CPU backend's fused slot: the same quantized bytes as gln_grouped_quantize, and the
 * reference's sums; cfg NULL: the sums alone. */
static void test_cpu_fused_slot(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    const int64_t cols = 33, rows = 0 + 1 + 3 + 64 + 65 + 127 + 128 + 129 + 130 + 257;
    gln_rng_t rng = gln_rng_seed(5);
    void *x = random_rows(&rng, GLN_DTYPE_BF16, rows, cols, rows);
    gln_grouped_tensor_t in = {10, k_sp_awkward, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, x)};
    static const gln_scaling_mode_t modes[] = {GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D, GLN_SCALING_BLOCK_1D};
    for (size_t mi = 0; mi < 3; mi++) {
        gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
        cfg.mode = modes[mi], cfg.rowwise = 1, cfg.columnwise = 1;
        int64_t sr = 0, sc = 0;
        CHECK_OK(gln_grouped_scale_bound(cfg.mode, 10, rows, cols, &sr, &sc));
        const size_t ses = cfg.mode == GLN_SCALING_MXFP8_1D ? 1 : 4, nd = (size_t)(rows * cols);
        void *b[2][4];
        for (int k = 0; k < 2; k++) {
            b[k][0] = gln_test_alloc(nd), b[k][1] = gln_test_alloc(nd);
            b[k][2] = gln_test_alloc((size_t)sr * ses), b[k][3] = gln_test_alloc((size_t)sc * ses);
        }
        float db1[10][33], db2[10][33];
        gln_tensor_t t1[10], t2[10];
        for (int i = 0; i < 10; i++) {
            t1[i] = gln_tensor_make(GLN_DTYPE_FP32, 1, cols, db1[i]);
            t2[i] = gln_tensor_make(GLN_DTYPE_FP32, 1, cols, db2[i]);
        }
        gln_tensor_t o1 = {cfg.fp8_dtype, rows, cols, b[0][0], cfg.mode, b[0][2], b[0][1], b[0][3], NULL, NULL};
        gln_tensor_t o2 = {cfg.fp8_dtype, rows, cols, b[1][0], cfg.mode, b[1][2], b[1][1], b[1][3], NULL, NULL};
        gln_grouped_tensor_t g1 = {10, k_sp_awkward, 0, o1}, g2 = {10, k_sp_awkward, 0, o2};
        CHECK_OK(gln_op_grouped_quantize_dbias(ctx, &cfg, &in, &g1, t1, 0));
        CHECK_OK(gln_grouped_quantize(ctx, &cfg, &in, &g2));
        CHECK_OK(gln_grouped_dbias_tiled_ref(&in, t2, 0));
        CHECK(gln_check_bitwise("fused: data", b[0][0], b[1][0], nd));
        CHECK(gln_check_bitwise("fused: col_data", b[0][1], b[1][1], nd));
        CHECK(gln_check_bitwise("fused: scale_inv", b[0][2], b[1][2], (size_t)sr * ses));
        CHECK(gln_check_bitwise("fused: col_scale_inv", b[0][3], b[1][3], (size_t)sc * ses));
        CHECK(gln_check_bitwise("fused: dbias", db1, db2, sizeof db1));
        CHECK_OK(gln_op_grouped_quantize_dbias(ctx, NULL, &in, NULL, t1, 1)); /* the sums alone, accumulated */
        CHECK_OK(gln_grouped_dbias_tiled_ref(&in, t2, 1));
        CHECK(gln_check_bitwise("sums alone: dbias", db1, db2, sizeof db1));
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 4; j++) gln_test_free(b[k][j]);
    }
    gln_test_free(x);
}

GLN_TEST_MAIN(GLN_CASE(test_reference_sums), GLN_CASE(test_order_defined), GLN_CASE(test_cpu_fused_slot))
