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
#include "backend/cpu/cpu_threads.h"
#include "backend/context.h"
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

/* Tile [i0, i0+mi) x [j0, j0+nj) of C[m, n] (row-major, ld n) = alpha · (B·A over reduction
 * indices [k0, k0+kw)) + beta · C.  One single-threaded sgemm on the tile. */
static void sgemm_tile(gln_gemm_layout_t layout, const gln_cpu_operand_t *A,
                       const gln_cpu_operand_t *B, gln_cpu_gemm_dims_t d, int64_t k0, int64_t kw,
                       int64_t i0, int64_t mi, int64_t j0, int64_t nj, float alpha, float beta,
                       float *C) {
    char fa, fb;
    gemm_flags(layout, &fa, &fb);
    if (A->transposed) fa = flip(fa);
    if (B->transposed) fb = flip(fb);
    /* op(A) is M×K (M indexes D's columns j): with 'N' the K index is the column (stride ld)
     * and j the row; with 'T' the other way round. */
    const float *pa = A->values + (fa == 'N' ? k0 * A->ld + j0 : k0 + j0 * A->ld);
    /* op(B) is K×N (N indexes D's rows i): with 'N' K is the row and i the column. */
    const float *pb = B->values + (fb == 'N' ? k0 + i0 * B->ld : k0 * B->ld + i0);
    const int M = (int)nj, N = (int)mi, K = (int)kw;
    const int lda = A->ld > 0 ? (int)A->ld : 1, ldb = B->ld > 0 ? (int)B->ld : 1;
    const int ldc = d.n > 0 ? (int)d.n : 1;
    sgemm_(&fa, &fb, &M, &N, &K, &alpha, pa, &lda, pb, &ldb, &beta, C + i0 * d.n + j0, &ldc);
}

/* The fixed tiling of D: GLN_CPU_GEMM_TILE x GLN_CPU_GEMM_TILE tiles, a function of the shape
 * only.  Threads take contiguous runs of tiles; every tile is one sgemm (OpenBLAS at 1 thread)
 * over the whole reduction dimension (never split), so each element of D is computed by the
 * same call on the same operands whatever the thread count: bitwise independent of it. */
#define GLN_CPU_GEMM_TILE 256
/* Multiply-adds a thread should have at least before a GEMM is split. */
#define GLN_CPU_GEMM_MIN ((size_t)1 << 22)

typedef struct tile_job {
    gln_gemm_layout_t layout;
    const gln_cpu_operand_t *a, *b;
    gln_cpu_gemm_dims_t d;
    int64_t tiles_n; /* tiles across D's columns */
    float alpha, beta;
    float *acc;
    const gln_cpu_gemm_ws_t *ws;
    int block;
} tile_job_t;

static void tile_range(void *arg, int thread, int64_t t0, int64_t t1) {
    (void)thread;
    const tile_job_t *j = arg;
    const gln_cpu_gemm_dims_t d = j->d;
    const size_t n = (size_t)d.n;
    float sa[GLN_CPU_GEMM_TILE], sbv[GLN_CPU_GEMM_TILE];
    for (int64_t t = t0; t < t1; t++) {
        const int64_t i0 = t / j->tiles_n * GLN_CPU_GEMM_TILE, j0 = t % j->tiles_n * GLN_CPU_GEMM_TILE;
        const int64_t mi = d.m - i0 < GLN_CPU_GEMM_TILE ? d.m - i0 : GLN_CPU_GEMM_TILE;
        const int64_t nj = d.n - j0 < GLN_CPU_GEMM_TILE ? d.n - j0 : GLN_CPU_GEMM_TILE;
        if (!j->block) {
            sgemm_tile(j->layout, j->a, j->b, d, 0, d.k, i0, mi, j0, nj, j->alpha, j->beta, j->acc);
            continue;
        }
        /* BLOCK: per 128-wide block of the reduction dimension, the raw partial product scaled
         * per element by scale_a(column of D) · scale_b(row of D), added to acc in FP32. */
        const gln_cpu_operand_t *A = j->a, *B = j->b;
        for (int64_t k0 = 0; k0 < d.k; k0 += GLN_CPU_BLOCK_K) {
            const int64_t kw = d.k - k0 < GLN_CPU_BLOCK_K ? d.k - k0 : GLN_CPU_BLOCK_K;
            sgemm_tile(j->layout, A, B, d, k0, kw, i0, mi, j0, nj, 1.0f, 0.0f, j->ws->partial);
            for (int64_t c = 0; c < nj; c++)
                sa[c] = j->layout == GLN_LAYOUT_TN ? gln_cpu_block_scale(A->t, A->columnwise, j0 + c, k0)
                                                   : gln_cpu_block_scale(A->t, A->columnwise, k0, j0 + c);
            for (int64_t r = 0; r < mi; r++)
                sbv[r] = j->layout == GLN_LAYOUT_NT ? gln_cpu_block_scale(B->t, B->columnwise, k0, i0 + r)
                                                    : gln_cpu_block_scale(B->t, B->columnwise, i0 + r, k0);
            for (int64_t r = 0; r < mi; r++) {
                const float sb = sbv[r];
                const float *p = j->ws->partial + (size_t)(i0 + r) * n + (size_t)j0;
                float *row = j->acc + (size_t)(i0 + r) * n + (size_t)j0;
                for (int64_t c = 0; c < nj; c++) row[c] += p[c] * (sa[c] * sb);
            }
        }
    }
}

static void gemm_tiled(gln_gemm_layout_t layout, const gln_cpu_operand_t *A, const gln_cpu_operand_t *B,
                       gln_cpu_gemm_dims_t d, float alpha, float beta, float *acc,
                       const gln_cpu_gemm_ws_t *ws, int block) {
    const int64_t tm = (d.m + GLN_CPU_GEMM_TILE - 1) / GLN_CPU_GEMM_TILE;
    const int64_t tn = (d.n + GLN_CPU_GEMM_TILE - 1) / GLN_CPU_GEMM_TILE;
    tile_job_t j = {layout, A, B, d, tn, alpha, beta, acc, ws, block};
    const int nt = gln_cpu_threads((size_t)d.m * (size_t)d.n * (size_t)d.k, GLN_CPU_GEMM_MIN);
    gln_cpu_parallel_for(nt, tm * tn, tile_range, &j);
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
        if (kind == GLN_CPU_GEMM_KIND_BLOCK) partial_n = mn, sa_n = (size_t)d.n, sb_n = (size_t)d.m;
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
    float *base = *block; /* NULL when every size is 0: then no offset is applied to it */
    for (int i = 0; i < 7; i++) {
        *ptrs[i] = sizes[i] ? base : NULL;
        if (sizes[i]) base += round16(sizes[i]);
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
        if (kind == GLN_CPU_GEMM_KIND_BLOCK) {
            if (!filled) memset(acc, 0, mn * sizeof(float));
            gemm_tiled(layout, &oa, &ob, d, 1.0f, 1.0f, acc, ws, 1);
        } else {
            /* TENSOR: the decode scales go into alpha (product of two FP32 scales, in FP32). */
            const float alpha = oa.decode_scale * ob.decode_scale;
            gemm_tiled(layout, &oa, &ob, d, alpha, filled ? 1.0f : 0.0f, acc, ws, 0);
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
    GLN_CHECK(st, fail, gln_cpu_gemm_ws_alloc(ctx, &ws, &block));
    GLN_CHECK(st, fail, gln_cpu_gemm_run(layout, A, B, D, bias, accumulate, &ws));
fail:
    gln_ctx_free(ctx, block);
    return st;
}
