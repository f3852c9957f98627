/* CPU GEMMs: one per-problem kernel (gln_cpu_gemm_run) used by both gln_cpu_gemm and
 * gln_cpu_grouped_gemm, so the split path (N gln_gemm calls) and the grouped path (one
 * gln_grouped_gemm) are bitwise identical by construction.
 *
 * Row-major onto column-major sgemm: a row-major [R, C] matrix read column-major is its
 * transpose.  So D[m, n] row-major is computed as the column-major Dᵀ[n, m], sgemm (M, N, K) =
 * (n, m, k), with the operands read column-major:
 *   TN: A [n,k], B [m,k]:  Dᵀ = A·Bᵀ    sgemm("T", "N")
 *   NN: A [k,n], B [m,k]:  Dᵀ = Aᵀ·Bᵀ   sgemm("N", "N")
 *   NT: A [k,n], B [k,m]:  Dᵀ = Aᵀ·B    sgemm("N", "T")   (k = the token rows here)
 * An operand whose FP32 values are stored transposed flips its flag instead of being copied. */
#include <limits.h>
#include <string.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_convert.h"
#include "backend/cpu/cpu_gemm_internal.h"
#include "common/context.h"
#include "common/error.h"

/* The Fortran BLAS entry point (OpenBLAS implements it in C, without hidden length arguments). */
extern void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
                   const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
                   const float *beta, float *c, const int *ldc);

/* sgemm transpose flags for operands stored in their logical orientation. */
static void gemm_flags(gln_gemm_layout_t layout, char *fa, char *fb) {
    switch (layout) {
    case GLN_LAYOUT_TN: *fa = 'T', *fb = 'N'; break;
    case GLN_LAYOUT_NN: *fa = 'N', *fb = 'N'; break;
    default: *fa = 'N', *fb = 'T'; break; /* NT */
    }
}

static char flip(char f) { return f == 'N' ? 'T' : 'N'; }

/* C[m, n] (row-major, ld n) = alpha · (B·A over reduction indices [k0, k0+kw)) + beta · C. */
static void sgemm_block(gln_gemm_layout_t layout, const gln_cpu_operand_t *A,
                        const gln_cpu_operand_t *B, gln_cpu_gemm_dims_t d, int64_t k0, int64_t kw,
                        float alpha, float beta, float *C) {
    char fa, fb;
    gemm_flags(layout, &fa, &fb);
    if (A->transposed) fa = flip(fa);
    if (B->transposed) fb = flip(fb);
    /* op(A) is M×K: with 'N' the K index is the column (stride ld), with 'T' the row. */
    const float *pa = A->values + (fa == 'N' ? k0 * A->ld : k0);
    /* op(B) is K×N: with 'N' the K index is the row, with 'T' the column. */
    const float *pb = B->values + (fb == 'N' ? k0 : k0 * B->ld);
    const int M = (int)d.n, N = (int)d.m, K = (int)kw;
    const int lda = A->ld > 0 ? (int)A->ld : 1, ldb = B->ld > 0 ? (int)B->ld : 1;
    const int ldc = M > 0 ? M : 1;
    sgemm_(&fa, &fb, &M, &N, &K, &alpha, pa, &lda, pb, &ldb, &beta, C, &ldc);
}

static void grow(size_t *size, size_t need) {
    if (need > *size) *size = need;
}

void gln_cpu_gemm_ws_need(gln_gemm_layout_t layout, const gln_tensor_t *A, const gln_tensor_t *B,
                          const gln_tensor_t *D, const gln_tensor_t *bias, gln_cpu_gemm_ws_t *ws) {
    const gln_cpu_gemm_dims_t d = gln_cpu_gemm_dims(layout, A, B);
    const size_t mn = (size_t)d.m * (size_t)d.n;
    if (mn == 0) return; /* nothing is computed */
    size_t a_n = 0, b_n = 0, acc_n = 0, partial_n = 0, sa_n = 0, sb_n = 0;
    if (d.k > 0) {
        const gln_cpu_gemm_kind_t kind = gln_cpu_gemm_kind(layout, A, B);
        a_n = gln_cpu_operand_floats(A, kind);
        b_n = gln_cpu_operand_floats(B, kind);
        if (kind == GLN_CPU_GEMM_BLOCK) partial_n = mn, sa_n = (size_t)d.n, sb_n = (size_t)d.m;
    }
    if (D->dtype != GLN_DTYPE_FP32) acc_n = mn;
    grow(&ws->a_n, a_n);
    grow(&ws->b_n, b_n);
    grow(&ws->acc_n, acc_n);
    grow(&ws->partial_n, partial_n);
    grow(&ws->bias_n, bias ? (size_t)d.n : 0);
    grow(&ws->scale_a_n, sa_n);
    grow(&ws->scale_b_n, sb_n);
}

/* 16 floats = 64 bytes: every sub-buffer starts on a cache line. */
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

gln_status_t gln_cpu_gemm_ws_alloc(gln_context_t *ctx, gln_cpu_gemm_ws_t *ws, void **block) {
    size_t sizes[7] = {ws->a_n, ws->b_n, ws->acc_n, ws->partial_n, ws->bias_n, ws->scale_a_n,
                       ws->scale_b_n};
    float **ptrs[7] = {&ws->a, &ws->b, &ws->acc, &ws->partial, &ws->bias, &ws->scale_a, &ws->scale_b};
    size_t total = 0;
    for (int i = 0; i < 7; i++) total += round16(sizes[i]);
    *block = NULL;
    GLN_TRY(gln_ctx_alloc(ctx, total * sizeof(float), block));
    float *base = *block;
    for (int i = 0; i < 7; i++) {
        *ptrs[i] = sizes[i] ? base : NULL;
        base += round16(sizes[i]);
    }
    return GLN_STATUS_SUCCESS;
}

/* acc = [old D] + [bias] before the products are added.  Returns whether acc holds values
 * (otherwise the first sgemm overwrites it with beta = 0). */
static int output_prefill(float *acc, const gln_tensor_t *D, const float *bias, int accumulate,
                          gln_cpu_gemm_dims_t d) {
    const size_t n = (size_t)d.n;
    if (accumulate && (void *)acc != D->data)
        gln_cpu_widen(D->data, D->dtype, (size_t)d.m * n, acc);
    if (bias) {
        for (int64_t i = 0; i < d.m; i++) {
            float *row = acc + (size_t)i * n;
            if (accumulate) {
                for (size_t j = 0; j < n; j++) row[j] += bias[j];
            } else {
                memcpy(row, bias, n * sizeof(float));
            }
        }
    }
    return accumulate || bias != NULL;
}

/* BLOCK kind: per 128-wide block of the reduction dimension, raw partial product scaled per
 * element by scale_a(column of D) · scale_b(row of D), added to acc in FP32. */
static void gemm_blockwise(gln_gemm_layout_t layout, const gln_cpu_operand_t *A,
                           const gln_cpu_operand_t *B, gln_cpu_gemm_dims_t d, float *acc,
                           const gln_cpu_gemm_ws_t *ws) {
    const size_t n = (size_t)d.n;
    for (int64_t k0 = 0; k0 < d.k; k0 += GLN_CPU_BLOCK_K) {
        const int64_t kw = d.k - k0 < GLN_CPU_BLOCK_K ? d.k - k0 : GLN_CPU_BLOCK_K;
        sgemm_block(layout, A, B, d, k0, kw, 1.0f, 0.0f, ws->partial);
        /* Logical coordinates of the reduction index k0 and the output index in each operand. */
        for (int64_t j = 0; j < d.n; j++)
            ws->scale_a[j] = layout == GLN_LAYOUT_TN ? gln_cpu_block_scale(A->t, A->columnwise, j, k0)
                                                     : gln_cpu_block_scale(A->t, A->columnwise, k0, j);
        for (int64_t i = 0; i < d.m; i++)
            ws->scale_b[i] = layout == GLN_LAYOUT_NT ? gln_cpu_block_scale(B->t, B->columnwise, k0, i)
                                                     : gln_cpu_block_scale(B->t, B->columnwise, i, k0);
        for (int64_t i = 0; i < d.m; i++) {
            const float sb = ws->scale_b[i];
            const float *p = ws->partial + (size_t)i * n;
            float *row = acc + (size_t)i * n;
            for (size_t j = 0; j < n; j++) row[j] += p[j] * (ws->scale_a[j] * sb);
        }
    }
}

gln_status_t gln_cpu_gemm_run(gln_gemm_layout_t layout, const gln_tensor_t *A, const gln_tensor_t *B,
                              gln_tensor_t *D, const gln_tensor_t *bias, int accumulate,
                              const gln_cpu_gemm_ws_t *ws) {
    const gln_cpu_gemm_dims_t d = gln_cpu_gemm_dims(layout, A, B);
    const size_t mn = (size_t)d.m * (size_t)d.n;
    if (mn == 0) return GLN_STATUS_SUCCESS; /* D is empty: nothing to write */
    if (d.m > INT_MAX || d.n > INT_MAX || d.k > INT_MAX)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                        "cpu gemm: dimensions m %lld, n %lld, k %lld exceed the BLAS int range",
                        (long long)d.m, (long long)d.n, (long long)d.k);

    const float *b32 = NULL;
    if (bias) {
        gln_cpu_widen(bias->data, bias->dtype, (size_t)d.n, ws->bias);
        b32 = ws->bias;
    }
    /* fp32 outputs accumulate in place; 16-bit outputs in FP32 scratch, rounded once at the end. */
    float *acc = D->dtype == GLN_DTYPE_FP32 ? (float *)D->data : ws->acc;
    int filled = output_prefill(acc, D, b32, accumulate, d);

    if (d.k > 0) {
        const gln_cpu_gemm_kind_t kind = gln_cpu_gemm_kind(layout, A, B);
        gln_cpu_operand_t oa, ob;
        GLN_TRY(gln_cpu_operand_prepare(A, gln_cpu_layout_a_columnwise(layout), kind, ws->a, &oa));
        GLN_TRY(gln_cpu_operand_prepare(B, gln_cpu_layout_b_columnwise(layout), kind, ws->b, &ob));
        if (kind == GLN_CPU_GEMM_BLOCK) {
            if (!filled) memset(acc, 0, mn * sizeof(float));
            gemm_blockwise(layout, &oa, &ob, d, acc, ws);
        } else {
            /* TENSOR: the decode scales go into alpha (product of two FP32 scales, in FP32). */
            const float alpha = oa.decode_scale * ob.decode_scale;
            sgemm_block(layout, &oa, &ob, d, 0, d.k, alpha, filled ? 1.0f : 0.0f, acc);
        }
    } else if (!filled) {
        memset(acc, 0, mn * sizeof(float)); /* empty reduction: the product is 0 */
    }
    if (acc != D->data) gln_cpu_narrow(acc, D->dtype, mn, D->data);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                          const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                          int accumulate) {
    gln_cpu_gemm_ws_t ws = {0};
    void *block = NULL;
    gln_status_t st = GLN_STATUS_SUCCESS;
    gln_cpu_gemm_ws_need(layout, A, B, D, bias, &ws);
    GLN_CHECK(gln_cpu_gemm_ws_alloc(ctx, &ws, &block));
    GLN_CHECK(gln_cpu_gemm_run(layout, A, B, D, bias, accumulate, &ws));
fail:
    gln_ctx_free(ctx, block);
    return st;
}
