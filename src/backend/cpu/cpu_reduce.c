/* CPU reductions and casts: per-expert bias gradients, amax, dtype conversion.
 * Arguments were validated by the public wrappers (src/backend/gemm_api.c). */
#include <math.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_convert.h"
#include "backend/context.h"
#include "common/error.h"

/* Chunk for conversions through an FP32 stack buffer (no heap allocation for casts). */
#define GLN_CPU_CAST_CHUNK 1024

/* acc[j] = Σ_r x[r, j] over `rows` rows, in row order, in FP32. */
static void column_sums(const void *x, gln_dtype_t dtype, int64_t rows, int64_t cols, float *acc) {
    for (int64_t j = 0; j < cols; j++) acc[j] = 0.0f;
    for (int64_t r = 0; r < rows; r++) {
        size_t base = (size_t)r * (size_t)cols;
        if (dtype == GLN_DTYPE_FP32) {
            const float *row = (const float *)x + base;
            for (int64_t j = 0; j < cols; j++) acc[j] += row[j];
        } else {
            for (int64_t j = 0; j < cols; j++) acc[j] += gln_cpu_load(x, dtype, base + (size_t)j);
        }
    }
}

gln_status_t gln_cpu_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy,
                                   gln_tensor_t *dbias, int accumulate) {
    const gln_tensor_t *p = &dy->packed;
    const int64_t cols = p->cols;
    const size_t esize = gln_dtype_size(p->dtype);
    float *acc = NULL;
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (cols == 0) return GLN_STATUS_SUCCESS; /* [R, 0]: every dbias is empty, no R-row loop */
    GLN_CHECK(st, fail, gln_ctx_alloc(ctx, (size_t)cols * sizeof(float), (void **)&acc));

    int64_t row0 = 0;
    for (int32_t i = 0; i < dy->num; i++) {
        const int64_t m = dy->splits[i];
        gln_tensor_t *db = &dbias[i];
        if (m == 0 && accumulate) continue; /* empty expert: nothing to add */
        /* an empty member has no rows to address (p->data may be NULL when every member is) */
        const void *x = m ? (const char *)p->data + (size_t)row0 * (size_t)cols * esize : NULL;
        column_sums(x, p->dtype, m, cols, acc);
        if (accumulate) {
            for (int64_t j = 0; j < cols; j++) acc[j] += gln_cpu_load(db->data, db->dtype, (size_t)j);
        }
        gln_cpu_narrow(acc, db->dtype, (size_t)cols, db->data);
        row0 += m;
    }
fail:
    gln_ctx_free(ctx, acc);
    return st;
}

gln_status_t gln_cpu_amax(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax) {
    (void)ctx;
    const size_t n = (size_t)x->rows * (size_t)x->cols;
    float best = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float v = fabsf(gln_cpu_load(x->data, x->dtype, i));
        if (nan_propagate && isnan(v)) {
            best = v; /* the first NaN wins: nothing can replace it */
            break;
        }
        if (v > best) best = v; /* a NaN compares false: ignored, as TE's fmaxf amax does */
    }
    *amax = best;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out) {
    (void)ctx;
    const size_t n = (size_t)in->rows * (size_t)in->cols;
    const size_t isz = gln_dtype_size(in->dtype), osz = gln_dtype_size(out->dtype);
    float buf[GLN_CPU_CAST_CHUNK];
    /* Widening to FP32 is exact, so each element is rounded once, to the output dtype. */
    for (size_t i = 0; i < n; i += GLN_CPU_CAST_CHUNK) {
        size_t len = n - i < GLN_CPU_CAST_CHUNK ? n - i : GLN_CPU_CAST_CHUNK;
        gln_cpu_widen((const char *)in->data + i * isz, in->dtype, len, buf);
        gln_cpu_narrow(buf, out->dtype, len, (char *)out->data + i * osz);
    }
    return GLN_STATUS_SUCCESS;
}
