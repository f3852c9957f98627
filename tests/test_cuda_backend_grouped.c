/* The CUDA backend's grouped GEMM and grouped dbias against the CPU backend's, through the public
 * API: empty experts, host and device splits, bias and accumulation; the grouped GEMM within the
 * GEMM tolerances of tests/harness/cuda_compare.h, dbias bit for bit (same FP32 operations in the
 * same order).  The CUTLASS kernels' own cases are test_cuda_grouped_gemm.c's.
 *
 * Skips (exit 77) when CUDA is not compiled in or no device is present.  Device outputs are
 * poisoned before each run and followed by guard bytes that must survive (device_twin.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_compare.h"
#include "device_twin.h"
#include "harness.h"
#include "numerics/numerics.h"
#include "tensor/tensor.h"

static gln_context_t *g_cu, *g_cpu;

/* ---- grouped GEMM and dbias ---------------------------------------------------------------- */

#define NEXP 4

/* Splits sets: mixed with empty experts, one expert taking every token. */
static const int64_t k_splits[][NEXP] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {0, 0, 0, 0}};

static gln_twin_t splits_on_device(const int64_t *splits) { return gln_twin_upload(g_cu, splits, NEXP * sizeof(int64_t)); }

static void grouped_case(gln_rng_t *rng, gln_gemm_layout_t layout, const int64_t *splits, int dev_splits,
                         int use_bias, int accumulate) {
    const int64_t kin = 64, kout = 48, extra = 3; /* extra packed rows beyond the splits sum */
    const gln_dtype_t dt = GLN_DTYPE_BF16;
    int64_t total = 0;
    for (int i = 0; i < NEXP; i++) total += splits[i];
    const int64_t rows = total + extra;
    char what[160];
    snprintf(what, sizeof what, "grouped %s splits {%lld,%lld,%lld,%lld}%s bias=%d acc=%d", gln_cmp_layout_name(layout),
             (long long)splits[0], (long long)splits[1], (long long)splits[2], (long long)splits[3],
             dev_splits ? " (device splits)" : "", use_bias, accumulate);
    gln_twin_t dsplits = splits_on_device(splits);
    gln_grouped_gemm_args_t ha = GLN_GROUPED_GEMM_ARGS_INIT, da = GLN_GROUPED_GEMM_ARGS_INIT;
    ha.layout = da.layout = layout;
    ha.accumulate = da.accumulate = accumulate;

    if (layout == GLN_LAYOUT_NT) {
        /* wgrad: A = x [rows, kin], B = dy [rows, kout], D_i = [kout, kin] */
        void *xh = gln_cmp_make_hp(rng, dt, rows, kin, 1.0, 0), *dyh = gln_cmp_make_hp(rng, dt, rows, kout, 1.0, 0);
        gln_grouped_tensor_t gx = {NEXP, splits, 0, gln_tensor_make(dt, rows, kin, xh)};
        gln_grouped_tensor_t gdy = {NEXP, splits, 0, gln_tensor_make(dt, rows, kout, dyh)};
        const size_t dn = (size_t)kout * (size_t)kin;
        gln_tensor_t dh[NEXP], dd[NEXP];
        void *d0[NEXP];
        gln_twin_t ddb[NEXP];
        for (int i = 0; i < NEXP; i++) {
            d0[i] = gln_cmp_make_hp(rng, GLN_DTYPE_FP32, kout, kin, 1.0, 0);
            void *ref = malloc(dn * 4);
            memcpy(ref, d0[i], dn * 4);
            if (!accumulate) gln_poison(ref, GLN_DTYPE_FP32, dn);
            dh[i] = gln_tensor_make(GLN_DTYPE_FP32, kout, kin, ref);
            ddb[i] = gln_twin_upload(g_cu, accumulate ? d0[i] : NULL, dn * 4);
            dd[i] = gln_tensor_make(GLN_DTYPE_FP32, kout, kin, ddb[i].d);
        }
        ha.a_grouped = &gx, ha.b = &gdy, ha.d_list = dh;
        CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
        gln_twin_t xd = gln_twin_upload(g_cu, xh, (size_t)rows * kin * 2), dyd = gln_twin_upload(g_cu, dyh, (size_t)rows * kout * 2);
        gln_grouped_tensor_t cx = {NEXP, dev_splits ? dsplits.d : splits, dev_splits, gln_tensor_make(dt, rows, kin, xd.d)};
        gln_grouped_tensor_t cdy = {NEXP, dev_splits ? dsplits.d : splits, dev_splits,
                                    gln_tensor_make(dt, rows, kout, dyd.d)};
        da.a_grouped = &cx, da.b = &cdy, da.d_list = dd;
        CHECK_OK(gln_grouped_gemm(g_cu, &da));
        int64_t row0 = 0;
        for (int i = 0; i < NEXP; i++) {
            void *got = gln_twin_fetch(g_cu, &ddb[i], what);
            float *a = calloc((size_t)(splits[i] * kin) + 1, 4), *b = calloc((size_t)(splits[i] * kout) + 1, 4);
            for (int64_t e = 0; e < splits[i] * kin; e++) a[e] = (float)gln_load(xh, dt, (size_t)(row0 * kin + e));
            for (int64_t e = 0; e < splits[i] * kout; e++) b[e] = (float)gln_load(dyh, dt, (size_t)(row0 * kout + e));
            gln_cmp_gemm(what, layout, a, b, kout, kin, splits[i], kin, kout, NULL, accumulate ? d0[i] : NULL, got,
                         dh[i].data, GLN_DTYPE_FP32, 0.0);
            /* an empty expert's wgrad is exactly 0 (or exactly the old value when accumulating) */
            if (splits[i] == 0) gln_check_bitwise(what, got, accumulate ? d0[i] : dh[i].data, dn * 4);
            row0 += splits[i];
            free(a), free(b), free(got);
            free(dh[i].data), free(d0[i]);
            gln_twin_free(g_cu, &ddb[i]);
        }
        gln_twin_free(g_cu, &xd), gln_twin_free(g_cu, &dyd);
        free(xh), free(dyh);
    } else {
        /* fprop (TN: W_i [kout, kin], x [rows, kin] -> y [rows, kout]) or dgrad (NN: W_i, dy
         * [rows, kout] -> dx [rows, kin]) */
        const int tn = layout == GLN_LAYOUT_TN;
        const int64_t bk = tn ? kin : kout, dcols = tn ? kout : kin;
        void *bh = gln_cmp_make_hp(rng, dt, rows, bk, 1.0, 0);
        void *d0 = gln_cmp_make_hp(rng, dt, rows, dcols, 1.0, 0);
        const size_t dbytes = (size_t)rows * (size_t)dcols * 2;
        void *dref = malloc(dbytes);
        memcpy(dref, d0, dbytes);
        if (!accumulate) gln_poison(dref, dt, (size_t)(total * dcols)); /* trailing rows: untouched */
        void *wh[NEXP], *biash[NEXP];
        gln_tensor_t wl[NEXP], wd[NEXP], bl[NEXP], bd[NEXP];
        gln_twin_t wdb[NEXP], bdb[NEXP];
        for (int i = 0; i < NEXP; i++) {
            wh[i] = gln_cmp_make_hp(rng, dt, kout, kin, 1.0, 0);
            biash[i] = gln_cmp_make_hp(rng, dt, 1, kout, 1.0, 0);
            wl[i] = gln_tensor_make(dt, kout, kin, wh[i]);
            bl[i] = gln_tensor_make(dt, 1, kout, biash[i]);
            wdb[i] = gln_twin_upload(g_cu, wh[i], (size_t)(kout * kin) * 2);
            bdb[i] = gln_twin_upload(g_cu, biash[i], (size_t)kout * 2);
            wd[i] = gln_tensor_make(dt, kout, kin, wdb[i].d);
            bd[i] = gln_tensor_make(dt, 1, kout, bdb[i].d);
        }
        gln_grouped_tensor_t gb = {NEXP, splits, 0, gln_tensor_make(dt, rows, bk, bh)};
        gln_grouped_tensor_t gd = {NEXP, splits, 0, gln_tensor_make(dt, rows, dcols, dref)};
        ha.a_list = wl, ha.b = &gb, ha.d_grouped = &gd, ha.bias_list = use_bias ? bl : NULL;
        CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
        gln_twin_t bdv = gln_twin_upload(g_cu, bh, (size_t)rows * (size_t)bk * 2);
        /* device D: old values when accumulating, else poison in the split rows and the old
         * values in the trailing rows (which must survive) */
        void *dinit = malloc(dbytes);
        memcpy(dinit, d0, dbytes);
        if (!accumulate) gln_poison(dinit, dt, (size_t)(total * dcols));
        gln_twin_t ddv = gln_twin_upload(g_cu, dinit, dbytes);
        const int64_t *sp = dev_splits ? (const int64_t *)dsplits.d : splits;
        gln_grouped_tensor_t cb = {NEXP, sp, dev_splits, gln_tensor_make(dt, rows, bk, bdv.d)};
        gln_grouped_tensor_t cd = {NEXP, sp, dev_splits, gln_tensor_make(dt, rows, dcols, ddv.d)};
        da.a_list = wd, da.b = &cb, da.d_grouped = &cd, da.bias_list = use_bias ? bd : NULL;
        CHECK_OK(gln_grouped_gemm(g_cu, &da));
        void *got = gln_twin_fetch(g_cu, &ddv, what);
        int64_t row0 = 0;
        for (int i = 0; i < NEXP; i++) {
            const int64_t mi = splits[i];
            float *a = gln_cmp_operand_values(&wl[i]);
            float *b = calloc((size_t)(mi * bk) + 1, 4), *old = calloc((size_t)(mi * dcols) + 1, 4), *bv = NULL;
            for (int64_t e = 0; e < mi * bk; e++) b[e] = (float)gln_load(bh, dt, (size_t)(row0 * bk + e));
            for (int64_t e = 0; e < mi * dcols; e++) old[e] = (float)gln_load(d0, dt, (size_t)(row0 * dcols + e));
            if (use_bias) bv = gln_cmp_operand_values(&bl[i]);
            const size_t off = (size_t)(row0 * dcols) * 2;
            gln_cmp_gemm(what, layout, a, b, mi, dcols, tn ? kin : kout, kin, bk, bv,
                         accumulate ? old : NULL, (char *)got + off, (char *)dref + off, dt, 0.0);
            row0 += mi;
            free(a), free(b), free(old), free(bv);
        }
        /* trailing rows beyond the splits are neither read nor written */
        gln_check_bitwise("grouped trailing rows", (char *)got + (size_t)(total * dcols) * 2,
                          (char *)d0 + (size_t)(total * dcols) * 2, (size_t)(extra * dcols) * 2);
        free(got), free(dinit);
        for (int i = 0; i < NEXP; i++) {
            free(wh[i]), free(biash[i]);
            gln_twin_free(g_cu, &wdb[i]), gln_twin_free(g_cu, &bdb[i]);
        }
        gln_twin_free(g_cu, &bdv), gln_twin_free(g_cu, &ddv);
        free(bh), free(d0), free(dref);
    }
    gln_twin_free(g_cu, &dsplits);
}

static void test_grouped_gemm(void) {
    gln_rng_t rng = gln_rng_seed(17);
    const gln_gemm_layout_t layouts[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    for (size_t l = 0; l < GLN_CMP_COUNT(layouts); l++)
        for (size_t s = 0; s < GLN_CMP_COUNT(k_splits); s++)
            for (int v = 0; v < 8; v++)
                grouped_case(&rng, layouts[l], k_splits[s], v & 1, layouts[l] == GLN_LAYOUT_TN && (v & 2), (v >> 2) & 1);
}

static void test_grouped_dbias(void) {
    gln_rng_t rng = gln_rng_seed(18);
    for (size_t d = 0; d < GLN_CMP_COUNT(gln_cmp_hp); d++)
        for (size_t s = 0; s < GLN_CMP_COUNT(k_splits); s++)
            for (size_t c = 0; c < GLN_CMP_COUNT(gln_cmp_cols); c++)
                for (int v = 0; v < 4; v++) {
                    const gln_dtype_t dt = gln_cmp_hp[d], bt = v & 2 ? GLN_DTYPE_FP32 : GLN_DTYPE_BF16;
                    const int accumulate = v & 1, dev_splits = (int)(c + s) % 2;
                    const int64_t cols = gln_cmp_cols[c];
                    int64_t rows = 2;
                    for (int i = 0; i < NEXP; i++) rows += k_splits[s][i];
                    void *xh = gln_cmp_make_hp(&rng, dt, rows, cols, 1.0, 0);
                    gln_grouped_tensor_t gh = {NEXP, k_splits[s], 0, gln_tensor_make(dt, rows, cols, xh)};
                    const size_t bb = (size_t)cols * gln_dtype_size(bt);
                    gln_tensor_t dbh[NEXP], dbd[NEXP];
                    void *old[NEXP];
                    gln_twin_t dbb[NEXP];
                    for (int i = 0; i < NEXP; i++) {
                        old[i] = gln_cmp_make_hp(&rng, bt, 1, cols, 1.0, 0);
                        void *ref = malloc(bb);
                        memcpy(ref, old[i], bb);
                        if (!accumulate) gln_poison(ref, bt, (size_t)cols);
                        dbh[i] = gln_tensor_make(bt, 1, cols, ref);
                        dbb[i] = gln_twin_upload(g_cu, accumulate ? old[i] : NULL, bb);
                        dbd[i] = gln_tensor_make(bt, 1, cols, dbb[i].d);
                    }
                    CHECK_OK(gln_grouped_dbias(g_cpu, &gh, dbh, accumulate));
                    gln_twin_t xd = gln_twin_upload(g_cu, xh, (size_t)rows * (size_t)cols * gln_dtype_size(dt));
                    gln_twin_t sd = splits_on_device(k_splits[s]);
                    gln_grouped_tensor_t gd = {NEXP, dev_splits ? sd.d : k_splits[s], dev_splits,
                                               gln_tensor_make(dt, rows, cols, xd.d)};
                    CHECK_OK(gln_grouped_dbias(g_cu, &gd, dbd, accumulate));
                    for (int i = 0; i < NEXP; i++) {
                        char what[120];
                        snprintf(what, sizeof what, "dbias %s->%s cols %lld member %d acc=%d", gln_dtype_name(dt),
                                 gln_dtype_name(bt), (long long)cols, i, accumulate);
                        gln_twin_expect(g_cu, &dbb[i], dbh[i].data, what);
                        free(dbh[i].data), free(old[i]);
                        gln_twin_free(g_cu, &dbb[i]);
                    }
                    gln_twin_free(g_cu, &xd), gln_twin_free(g_cu, &sd);
                    free(xh);
                }
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cu,
    GLN_CASE(test_grouped_gemm), GLN_CASE(test_grouped_dbias))
