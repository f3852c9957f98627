/* Comparing the CUDA backend with the CPU backend (cuda_compare.h). */
#include "cuda_compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "numerics/numerics.h"


float gln_cmp_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
uint32_t gln_cmp_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Host tensor [rows, cols] of dtype with N(0, sigma²) values; with `specials`, row 0 gets a
 * zero block (first 32 columns), and scattered NaN, ±Inf, huge (overflow fp8 / fp16) and tiny
 * values. */
void *gln_cmp_make_hp(gln_rng_t *rng, gln_dtype_t dtype, int64_t rows, int64_t cols, double sigma, int specials) {
    const size_t n = (size_t)rows * (size_t)cols;
    void *h = calloc(n ? n : 1, gln_dtype_size(dtype));
    for (size_t i = 0; i < n; i++) gln_store(h, dtype, i, sigma * gln_rng_normal(rng));
    if (!specials || n == 0) return h;
    for (int64_t c = 0; c < cols && c < 32; c++) gln_store(h, dtype, (size_t)c, c % 2 ? -0.0 : 0.0);
    /* specials == 2 adds a negative NaN, whose sign an FP8 NaN must keep.  (Not used where a NaN
     * element meets a NaN scale — MXFP8 NaN blocks — since which NaN the host's x86 multiply
     * returns there depends on the host compiler's operand order.) */
    const double vals[] = {NAN, INFINITY, -INFINITY, 1e6, -3e38, 1e-30, 70000.0, -NAN};
    const size_t nvals = sizeof vals / sizeof vals[0] - (specials == 2 ? 0 : 1);
    for (size_t v = 0; v < nvals; v++) {
        size_t i = (size_t)gln_rng_int(rng, 0, (int64_t)n - 1);
        if (i < 32) continue; /* keep the zero block */
        gln_store(h, dtype, i, vals[v]);
    }
    return h;
}

const int64_t gln_cmp_rows[GLN_CMP_NROWS] = {1, 5, 17, 129};
const int64_t gln_cmp_cols[GLN_CMP_NCOLS] = {48, 4096};
const gln_dtype_t gln_cmp_hp[GLN_CMP_NHP] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

/* Logical FP32 values of an operand (high precision, or the dequantized rowwise copy). */
float *gln_cmp_operand_values(const gln_tensor_t *t) {
    const size_t n = (size_t)t->rows * (size_t)t->cols;
    float *v = calloc(n ? n : 1, sizeof(float));
    if (gln_dtype_is_fp8(t->dtype)) {
        const float s = *(const float *)t->scale_inv;
        for (size_t i = 0; i < n; i++) v[i] = gln_fp8_to_fp32(((const uint8_t *)t->data)[i], t->dtype) * s;
    } else {
        for (size_t i = 0; i < n; i++) v[i] = (float)gln_load(t->data, t->dtype, i);
    }
    return v;
}

/* Spacing of dtype values near |x| (one ulp). */
double gln_cmp_ulp(double x, gln_dtype_t dtype) {
    const int mbits = dtype == GLN_DTYPE_FP32 ? 23 : dtype == GLN_DTYPE_BF16 ? 7 : 10;
    const int emin = dtype == GLN_DTYPE_FP32 ? -126 : dtype == GLN_DTYPE_BF16 ? -126 : -14;
    int e = x != 0.0 ? (int)floor(log2(fabs(x))) : emin;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mbits);
}

/* CUDA D (downloaded) against CPU D: |cuda - cpu| <= GEMM_OUT_ULPS·ulp(cpu) + 2·(k + 2)·u·S,
 * S = Σ|a·b| + |bias| + |old D|, computed here in double from the operands' values. */
void gln_cmp_gemm(const char *what, gln_gemm_layout_t layout, const float *a, const float *b, int64_t m,
                         int64_t n, int64_t k, int64_t a_cols, int64_t b_cols, const float *bias,
                         const float *d_old, const void *got, const void *ref, gln_dtype_t dtype,
                         double acc_rel) {
    int bad = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t t = 0; t < k; t++) {
                const double bv = layout == GLN_LAYOUT_NT ? b[t * b_cols + i] : b[i * b_cols + t];
                const double av = layout == GLN_LAYOUT_TN ? a[j * a_cols + t] : a[t * a_cols + j];
                s += fabs(av * bv);
            }
            if (bias) s += fabs(bias[j]);
            if (d_old) s += fabs(d_old[i * n + j]);
            const size_t idx = (size_t)(i * n + j);
            const double g = gln_load(got, dtype, idx), r = gln_load(ref, dtype, idx);
            const double tol = GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(r, dtype) +
                               (2.0 * ((double)k + GLN_CMP_GEMM_SUM_TERMS_EXTRA) * GLN_CMP_U32 + acc_rel) * s;
            if (!(fabs(g - r) <= tol) && !(isnan(g) && isnan(r))) {
                if (bad++ < 5)
                    CHECK_MSG(0, "%s: D[%lld,%lld] cuda %.9g cpu %.9g (tol %.3g)", what, (long long)i, (long long)j, g,
                              r, tol);
            }
        }
    if (bad > 5) CHECK_MSG(0, "%s: %d elements out of tolerance", what, bad);
}

const char *gln_cmp_layout_name(gln_gemm_layout_t l) {
    return l == GLN_LAYOUT_TN ? "TN" : l == GLN_LAYOUT_NN ? "NN" : "NT";
}
