/* CUDA GEMMs through cuBLASLt: high-precision operands (fp32 / bf16 / fp16, FP32 compute —
 * CUBLAS_COMPUTE_32F, never TF32, so the CPU comparison is meaningful) and per-tensor FP8
 * (E4M3×E4M3, E4M3×E5M2, E5M2×E4M3) with the decode scales passed as device scale pointers.
 * MXFP8 and block-scaled operands go through bf16 GEMMs (see "MXFP8 and block-scaled operands"
 * below); per-tensor FP8 with a reduction dimension cuBLASLt refuses is zero-padded.
 *
 * Row-major onto column-major: a row-major [R, C] matrix is the column-major [C, R] one.  D[m, n]
 * row-major is computed as the column-major Dᵀ [n, m] = op(A) · op(B), cuBLAS sizes (M, N, K) =
 * (n, m, k):
 *   TN: A [n,k], B [m,k]:  Dᵀ = Aᵀ(col-major [k,n]) · B(col-major [k,m])   transa=T, transb=N
 *   NN: A [k,n], B [m,k]:  Dᵀ = A(col-major [n,k])  · B(col-major [k,m])   transa=N, transb=N
 *   NT: A [k,n], B [k,m]:  Dᵀ = A(col-major [n,k])  · Bᵀ(col-major [m,k])  transa=N, transb=T
 * FP8 GEMMs are TN-only on sm_90, so quantized operands read the transposed copies instead (the
 * columnwise copy of a per-tensor tensor is stored [cols, rows]): NN uses A's col_data, NT uses
 * A's and B's col_data, and every FP8 call is transa=T, transb=N.
 *
 * Output: without a bias, cuBLASLt writes D in its own dtype with beta = accumulate (one rounding
 * of product + old D).  With a bias (or an input/output type pair cuBLASLt lacks, e.g. fp32
 * inputs into bf16 D), an FP32 accumulator is prefilled with old D + bias like the CPU backend,
 * the product is added with beta = 1 and the result is rounded once (cuda_gemm_kernels.cu). */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_grouped_blockwise.h"
#include "common/checked.h"
#include "common/error.h"
#include "tensor/tensor.h"

/* One GEMM as cuBLASLt sees it. */
typedef struct gemm_plan {
    int64_t M, N, K;               /* column-major Dᵀ [M, N] = op(a) [M, K] · op(b) [K, N] */
    cublasOperation_t opa, opb;
    const void *a, *b;
    cudaDataType_t ta, tb;
    int64_t lda, ldb;
    const float *sa, *sb;          /* FP8: decode scales (device); NULL for high precision */
} gemm_plan_t;

static int64_t max1(int64_t x) { return x > 0 ? x : 1; }

static cudaDataType_t cuda_type(gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_BF16: return CUDA_R_16BF;
    case GLN_DTYPE_FP16: return CUDA_R_16F;
    case GLN_DTYPE_FP8_E4M3: return CUDA_R_8F_E4M3;
    case GLN_DTYPE_FP8_E5M2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_32F;
    }
}

/* D [m, n] and the reduction k of a layout (same convention as the CPU backend). */
static void gemm_dims(gln_gemm_layout_t layout, const gln_tensor_t *A, const gln_tensor_t *B, int64_t *m,
                      int64_t *n, int64_t *k) {
    switch (layout) {
    case GLN_LAYOUT_TN: *m = B->rows, *n = A->rows, *k = A->cols; break;
    case GLN_LAYOUT_NN: *m = B->rows, *n = A->cols, *k = B->cols; break;
    default: *m = B->cols, *n = A->cols, *k = A->rows; break; /* NT */
    }
}

/* Can cuBLASLt write D of this dtype directly from inputs of type `in` (FP32 compute)? */
static int native_output(gln_dtype_t in, gln_dtype_t d) {
    if (gln_dtype_is_fp8(in)) return gln_dtype_is_high_precision(d);
    if (in == GLN_DTYPE_FP32) return d == GLN_DTYPE_FP32;
    return d == in || d == GLN_DTYPE_FP32;
}

static gln_status_t gemm_plan(gln_gemm_layout_t layout, const gln_tensor_t *A, const gln_tensor_t *B,
                              gemm_plan_t *p, const char *fn) {
    int64_t m, n, k;
    gemm_dims(layout, A, B, &m, &n, &k);
    memset(p, 0, sizeof *p);
    p->M = n, p->N = m, p->K = k;
    p->ta = cuda_type(A->dtype), p->tb = cuda_type(B->dtype);
    const int qa = gln_dtype_is_fp8(A->dtype), qb = gln_dtype_is_fp8(B->dtype);
    if (!qa && !qb) {
        if (A->dtype != B->dtype)
            return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: the cuda backend needs A (%s) and B (%s) of one dtype",
                            fn, gln_dtype_name(A->dtype), gln_dtype_name(B->dtype));
        p->a = A->data, p->b = B->data;
        switch (layout) {
        case GLN_LAYOUT_TN: p->opa = CUBLAS_OP_T, p->opb = CUBLAS_OP_N, p->lda = k, p->ldb = k; break;
        case GLN_LAYOUT_NN: p->opa = CUBLAS_OP_N, p->opb = CUBLAS_OP_N, p->lda = n, p->ldb = k; break;
        default: p->opa = CUBLAS_OP_N, p->opb = CUBLAS_OP_T, p->lda = n, p->ldb = m; break;
        }
        return GLN_STATUS_SUCCESS;
    }
    if (!(qa && qb) || A->scaling != GLN_SCALING_TENSOR || B->scaling != GLN_SCALING_TENSOR)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                        "%s: the cuda backend multiplies only per-tensor FP8 operands (A: %s, B: %s)", fn,
                        gln_scaling_name(A->scaling), gln_scaling_name(B->scaling));
    if (A->dtype == GLN_DTYPE_FP8_E5M2 && B->dtype == GLN_DTYPE_FP8_E5M2)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: E5M2 x E5M2 GEMMs are not supported by cuBLASLt on sm_90",
                        fn);
    const int a_col = layout != GLN_LAYOUT_TN, b_col = layout == GLN_LAYOUT_NT;
    p->opa = CUBLAS_OP_T, p->opb = CUBLAS_OP_N, p->lda = k, p->ldb = k;
    p->a = a_col ? A->col_data : A->data;
    p->b = b_col ? B->col_data : B->data;
    p->sa = a_col ? A->col_scale_inv : A->scale_inv;
    p->sb = b_col ? B->col_scale_inv : B->scale_inv;
    return GLN_STATUS_SUCCESS;
}

/* Largest power of two (<= 256) dividing the address: what cuBLASLt may assume. */
static uint32_t ptr_alignment(const void *ptr) {
    uintptr_t a = (uintptr_t)ptr;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

/* out = alpha·op(a)·op(b) + beta·out (column-major [M, N], dtype d_type), one cublasLtMatmul. */
static gln_status_t lt_matmul(gln_context_t *ctx, const gemm_plan_t *p, void *out, cudaDataType_t d_type,
                              float beta, const char *fn) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    gln_status_t st = GLN_STATUS_SUCCESS;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    const float alpha = 1.0f;
    const int32_t opa = p->opa, opb = p->opb;
    const int ta = p->opa == CUBLAS_OP_T, tb = p->opb == CUBLAS_OP_T;

    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), fn,
                                         "cublasLtMatmulDescCreate"));
    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa),
                                         fn, "cublasLtMatmulDescSetAttribute(TRANSA)"));
    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb),
                                         fn, "cublasLtMatmulDescSetAttribute(TRANSB)"));
    if (p->sa) {
        /* Each scale in its own allocation (see gln_cuda_state_t), copied in stream order. */
        GLN_CHECK(st, fail, gln_cuda_check(cudaMemcpyAsync(s->scale_a, p->sa, sizeof(float), cudaMemcpyDeviceToDevice,
                                                           s->stream), fn, "cudaMemcpyAsync(scale_inv A)"));
        GLN_CHECK(st, fail, gln_cuda_check(cudaMemcpyAsync(s->scale_b, p->sb, sizeof(float), cudaMemcpyDeviceToDevice,
                                                           s->stream), fn, "cudaMemcpyAsync(scale_inv B)"));
        const void *pa = s->scale_a, *pb = s->scale_b;
        GLN_CHECK(st, fail, gln_cublas_check(
                      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa), fn,
                      "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)"));
        GLN_CHECK(st, fail, gln_cublas_check(
                      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb), fn,
                      "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)"));
    }
    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatrixLayoutCreate(&la, p->ta, (uint64_t)(ta ? p->K : p->M),
                                                                    (uint64_t)(ta ? p->M : p->K), max1(p->lda)),
                                         fn, "cublasLtMatrixLayoutCreate(A)"));
    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatrixLayoutCreate(&lb, p->tb, (uint64_t)(tb ? p->N : p->K),
                                                                    (uint64_t)(tb ? p->K : p->N), max1(p->ldb)),
                                         fn, "cublasLtMatrixLayoutCreate(B)"));
    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatrixLayoutCreate(&ld, d_type, (uint64_t)p->M, (uint64_t)p->N, p->M), fn,
                                         "cublasLtMatrixLayoutCreate(D)"));

    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatmulPreferenceCreate(&pref), fn, "cublasLtMatmulPreferenceCreate"));
    const size_t ws = GLN_CUDA_WORKSPACE_BYTES;
    GLN_CHECK(st, fail, gln_cublas_check(
                  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), fn,
                  "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)"));
    /* Member views of grouped tensors start anywhere: tell the heuristic the real alignment. */
    const uint32_t al_a = ptr_alignment(p->a), al_b = ptr_alignment(p->b), al_d = ptr_alignment(out);
    const cublasLtMatmulPreferenceAttributes_t al_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t al_val[4] = {al_a, al_b, al_d, al_d};
    for (int i = 0; i < 4; i++)
        GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatmulPreferenceSetAttribute(pref, al_attr[i], &al_val[i], sizeof(uint32_t)),
                                             fn, "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)"));

    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    memset(&res, 0, sizeof res);
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(s->lt, op, la, lb, ld, ld, pref, 1, &res, &found);
    GLN_CHECK_COND(st, fail, hs == CUBLAS_STATUS_SUCCESS && found > 0, GLN_STATUS_NOT_SUPPORTED,
                             "%s: cuBLASLt has no algorithm for this GEMM (M=%lld N=%lld K=%lld, op %c%c, types %d x %d -> %d,"
                             " alignments %u/%u/%u bytes): %s",
                             fn, (long long)p->M, (long long)p->N, (long long)p->K, ta ? 'T' : 'N', tb ? 'T' : 'N',
                             (int)p->ta, (int)p->tb, (int)d_type, al_a, al_b, al_d,
                             hs == CUBLAS_STATUS_SUCCESS ? "no heuristic result" : cublasLtGetStatusName(hs));
    GLN_CHECK(st, fail, gln_cublas_check(cublasLtMatmul(s->lt, op, &alpha, p->a, la, p->b, lb, &beta, out, ld, out, ld,
                                                        &res.algo, s->workspace, ws, s->stream),
                                         fn, "cublasLtMatmul"));
fail:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return st;
}

/* The FP32 accumulator of a GEMM whose D cannot be written by cuBLASLt directly: D itself when
 * fp32, else scratch; prefilled with (accumulate ? old D : 0) + bias like the CPU backend. */
static gln_status_t acc_begin(gln_context_t *ctx, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate,
                              int64_t m, int64_t n, float **acc, const char *fn) {
    *acc = NULL;
    if (D->dtype == GLN_DTYPE_FP32) {
        *acc = D->data;
    } else {
        size_t bytes;
        GLN_TRY(gln_shape_bytes(fn, "the FP32 accumulator", m, n, sizeof(float), &bytes));
        GLN_TRY(gln_cuda_scratch_alloc(ctx, bytes, (void **)acc, fn));
    }
    if (*acc == D->data && accumulate && !bias) return GLN_STATUS_SUCCESS;
    return gln_cuda_gemm_prefill(ctx, *acc, D, bias, accumulate, m, n, fn);
}

/* Round the accumulator once into D (when it is not D) and free it; st passes through. */
static gln_status_t acc_end(gln_context_t *ctx, float *acc, gln_tensor_t *D, int64_t m, int64_t n,
                            gln_status_t st, const char *fn) {
    if (acc && acc != D->data) {
        if (st == GLN_STATUS_SUCCESS) st = gln_cuda_narrow(ctx, acc, D, (size_t)m * (size_t)n, fn);
        gln_cuda_scratch_free(ctx, acc);
    }
    return st;
}

/* D [m, n] (+)= the plan's product (+ bias), reduction k.  `in` is the operands' dtype. */
static gln_status_t gemm_finish(gln_context_t *ctx, const gemm_plan_t *p, gln_dtype_t in, gln_tensor_t *D,
                                const gln_tensor_t *bias, int accumulate, int64_t m, int64_t n, int64_t k,
                                const char *fn) {
    /* cuBLASLt's beta·C with a 16-bit C was seen on the H200 to round the product before adding
     * C (several output ulps off a single rounding), so accumulation into bf16 / fp16 takes the
     * FP32 accumulator path too. */
    const int direct = !bias && k > 0 && native_output(in, D->dtype) && (!accumulate || D->dtype == GLN_DTYPE_FP32);
    if (direct) return lt_matmul(ctx, p, D->data, cuda_type(D->dtype), accumulate ? 1.0f : 0.0f, fn);
    float *acc = NULL;
    gln_status_t st = acc_begin(ctx, D, bias, accumulate, m, n, &acc, fn);
    if (st == GLN_STATUS_SUCCESS && k > 0) st = lt_matmul(ctx, p, acc, CUDA_R_32F, 1.0f, fn);
    return acc_end(ctx, acc, D, m, n, st, fn);
}

/* ---- per-tensor FP8 with a reduction dimension cuBLASLt refuses ------------------------------
 * The sm_90 FP8 kernels need the leading dimensions of the TN operands — both equal to the
 * reduction dimension K — to be multiples of 16 and the operands 16-byte aligned (the wgrad of an
 * expert with, say, 17 tokens has K = 17).  Both operands are then copied into scratch with K
 * padded to a multiple of 16 with zeros: zero products add nothing, so the result is the one of
 * the unpadded GEMM (same FP8 tensor-core arithmetic, same tolerance).  Dequantizing to bf16
 * instead would not be: an FP8 value times a non-power-of-two per-tensor scale is not exact in
 * bf16. */
static int fp8_needs_padding(const gemm_plan_t *p) {
    return p->K % 16 != 0 || ptr_alignment(p->a) < 16 || ptr_alignment(p->b) < 16;
}

/* `cols` column-major columns of k bytes (leading dimension ld) into new scratch columns of kp
 * bytes, zero past k. */
static gln_status_t pad_columns(gln_context_t *ctx, const void *src, int64_t k, int64_t ld, int64_t cols,
                                int64_t kp, void **dst, const char *fn) {
    cudaStream_t s = gln_cuda_state(ctx)->stream;
    size_t bytes;
    GLN_TRY(gln_shape_bytes(fn, "the padded FP8 operand", kp, cols, 1, &bytes));
    GLN_TRY(gln_cuda_scratch_alloc(ctx, bytes, dst, fn));
    GLN_TRY(gln_cuda_check(cudaMemsetAsync(*dst, 0, bytes, s), fn, "cudaMemsetAsync(pad)"));
    return gln_cuda_check(cudaMemcpy2DAsync(*dst, (size_t)kp, src, (size_t)ld, (size_t)k, (size_t)cols,
                                            cudaMemcpyDeviceToDevice, s),
                          fn, "cudaMemcpy2DAsync(pad)");
}

static gln_status_t gemm_fp8_padded(gln_context_t *ctx, const gemm_plan_t *p, gln_dtype_t in, gln_tensor_t *D,
                                    const gln_tensor_t *bias, int accumulate, int64_t m, int64_t n, int64_t k,
                                    const char *fn) {
    gln_status_t st = GLN_STATUS_SUCCESS;
    gemm_plan_t q = *p;
    void *a = NULL, *b = NULL;
    const int64_t kp = (p->K + 15) / 16 * 16;
    GLN_CHECK(st, fail, pad_columns(ctx, p->a, p->K, p->lda, p->M, kp, &a, fn));
    GLN_CHECK(st, fail, pad_columns(ctx, p->b, p->K, p->ldb, p->N, kp, &b, fn));
    q.a = a, q.b = b, q.K = kp, q.lda = kp, q.ldb = kp;
    st = gemm_finish(ctx, &q, in, D, bias, accumulate, m, n, k, fn);
fail:
    gln_cuda_scratch_free(ctx, a);
    gln_cuda_scratch_free(ctx, b);
    return st;
}

/* ---- MXFP8 and block-scaled operands ---------------------------------------------------------
 * Hopper has no MXFP8 / block-scaled tensor-core path in cuBLASLt (sm_90 refuses those scale
 * modes), so:
 *   MXFP8: both operands are dequantized to bf16 (fp8 value × power-of-two E8M0 scale) and fed to
 *     the bf16 GEMM (FP32 accumulation).  That is exact — an E4M3 / E5M2 value has at most 4
 *     significant bits and bf16 keeps 8 with FP32's exponent range — unless a block scale pushes
 *     a value below bf16's normal range (2^-126), where bf16 subnormals keep fewer bits (and the
 *     tensor cores may flush them to zero); the CPU reference dequantizes to FP32 and keeps them.
 *   BLOCK_1D / BLOCK_2D: FP32 scales need not be powers of two, so the scales cannot be folded
 *     into the operands exactly.  Like the CPU backend, the raw FP8 values (exact in bf16) are
 *     multiplied per 128-wide block of the reduction dimension into an FP32 partial product, and
 *     each partial is scaled per element by scale_a · scale_b and added to the FP32 accumulator.
 *     (With power-of-two scales this equals the dequantized product up to summation order.) */
static int is_block_mode(gln_scaling_mode_t mode) {
    return mode == GLN_SCALING_BLOCK_1D || mode == GLN_SCALING_BLOCK_2D;
}

/* bf16 scratch twin [rows, cols] of copy `columnwise` of t: dequantized, or the raw FP8 values. */
static gln_status_t operand_bf16(gln_context_t *ctx, const gln_tensor_t *t, int columnwise, int raw,
                                 gln_tensor_t *out, const char *fn) {
    void *buf = NULL;
    size_t bytes;
    GLN_TRY(gln_shape_bytes(fn, "the bf16 operand twin", t->rows, t->cols, 2, &bytes));
    GLN_TRY(gln_cuda_scratch_alloc(ctx, bytes, &buf, fn));
    *out = gln_tensor_make(GLN_DTYPE_BF16, t->rows, t->cols, buf);
    gln_status_t st = raw ? gln_cuda_widen_raw(ctx, t, columnwise, out, fn) : gln_cuda_dequantize(ctx, t, columnwise, out);
    if (st != GLN_STATUS_SUCCESS) {
        gln_cuda_scratch_free(ctx, buf);
        out->data = NULL;
    }
    return st;
}

static gln_status_t gemm_run(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                             const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate,
                             const char *fn);

static gln_status_t gemm_dequant(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                                 const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate,
                                 const char *fn) {
    gln_status_t st = GLN_STATUS_SUCCESS;
    gln_tensor_t a16 = gln_tensor_make(GLN_DTYPE_BF16, 0, 0, NULL), b16 = a16;
    GLN_CHECK(st, fail, operand_bf16(ctx, A, layout != GLN_LAYOUT_TN, 0, &a16, fn));
    GLN_CHECK(st, fail, operand_bf16(ctx, B, layout == GLN_LAYOUT_NT, 0, &b16, fn));
    st = gemm_run(ctx, layout, &a16, &b16, D, bias, accumulate, fn);
fail:
    gln_cuda_scratch_free(ctx, a16.data);
    gln_cuda_scratch_free(ctx, b16.data);
    return st;
}

static gln_status_t scale_ref(const gln_tensor_t *t, int columnwise, int k_is_row, gln_cuda_scale_ref_t *r,
                              const char *fn) {
    gln_quant_layout_t lay;
    GLN_TRY(gln_layout_compute(fn, t->scaling, t->dtype, t->rows, t->cols, &lay));
    r->scales = (const float *)(columnwise ? t->col_scale_inv : t->scale_inv);
    r->mode = (int)t->scaling;
    r->columnwise = columnwise;
    r->k_is_row = k_is_row;
    r->gc = columnwise ? lay.col_scale_cols : lay.scale_cols;
    return GLN_STATUS_SUCCESS;
}

/* Width of a block of the reduction dimension in FP8 block scaling. */
#define GLN_CUDA_BLOCK_K 128

static gln_status_t gemm_blockwise(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                                   const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate,
                                   int64_t m, int64_t n, int64_t k, const char *fn) {
    gln_status_t st = GLN_STATUS_SUCCESS;
    const int a_col = layout != GLN_LAYOUT_TN, b_col = layout == GLN_LAYOUT_NT;
    gln_tensor_t a16 = gln_tensor_make(GLN_DTYPE_BF16, 0, 0, NULL), b16 = a16;
    float *acc = NULL, *partial = NULL;
    gln_cuda_scale_ref_t sa, sb;
    gemm_plan_t p;
    GLN_CHECK(st, fail, scale_ref(A, a_col, layout != GLN_LAYOUT_TN, &sa, fn));
    GLN_CHECK(st, fail, scale_ref(B, b_col, layout == GLN_LAYOUT_NT, &sb, fn));
    GLN_CHECK(st, fail, operand_bf16(ctx, A, a_col, 1, &a16, fn));
    GLN_CHECK(st, fail, operand_bf16(ctx, B, b_col, 1, &b16, fn));
    GLN_CHECK(st, fail, gemm_plan(layout, &a16, &b16, &p, fn));
    GLN_CHECK(st, fail, acc_begin(ctx, D, bias, accumulate, m, n, &acc, fn));
    size_t partial_bytes;
    GLN_CHECK(st, fail, gln_shape_bytes(fn, "the block partial product", m, n, sizeof(float), &partial_bytes));
    GLN_CHECK(st, fail, gln_cuda_scratch_alloc(ctx, partial_bytes, (void **)&partial, fn));
    /* Elements between consecutive reduction indices in each row-major bf16 operand. */
    const int64_t a_step = layout == GLN_LAYOUT_TN ? 1 : n, b_step = layout == GLN_LAYOUT_NT ? m : 1;
    for (int64_t k0 = 0; k0 < k; k0 += GLN_CUDA_BLOCK_K) {
        gemm_plan_t q = p;
        q.K = k - k0 < GLN_CUDA_BLOCK_K ? k - k0 : GLN_CUDA_BLOCK_K;
        q.a = (const uint16_t *)p.a + k0 * a_step;
        q.b = (const uint16_t *)p.b + k0 * b_step;
        GLN_CHECK(st, fail, lt_matmul(ctx, &q, partial, CUDA_R_32F, 0.0f, fn));
        GLN_CHECK(st, fail, gln_cuda_gemm_block_scale(ctx, acc, partial, m, n, k0, &sa, &sb, fn));
    }
fail:
    st = acc_end(ctx, acc, D, m, n, st, fn);
    gln_cuda_scratch_free(ctx, partial);
    gln_cuda_scratch_free(ctx, a16.data);
    gln_cuda_scratch_free(ctx, b16.data);
    return st;
}

/* One GEMM with arguments validated by the dispatcher. */
static gln_status_t gemm_run(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                             const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate,
                             const char *fn) {
    int64_t m, n, k;
    gemm_dims(layout, A, B, &m, &n, &k);
    if (m == 0 || n == 0) return GLN_STATUS_SUCCESS; /* D is empty: nothing to write */
    const int qa = gln_dtype_is_fp8(A->dtype), qb = gln_dtype_is_fp8(B->dtype);
    if (qa && qb && !(A->scaling == GLN_SCALING_TENSOR && B->scaling == GLN_SCALING_TENSOR)) {
        if (is_block_mode(A->scaling) && is_block_mode(B->scaling)) {
            /* CUTLASS's block-scaled kernel (a group of one) where it fits: one launch instead
             * of a bf16 GEMM per 128-block of K */
            int handled = 0;
            GLN_TRY(gln_cuda_gemm_blockwise_single(ctx, layout, A, B, D, bias, accumulate, &handled));
            if (handled) return GLN_STATUS_SUCCESS;
            return gemm_blockwise(ctx, layout, A, B, D, bias, accumulate, m, n, k, fn);
        }
        if (A->scaling != GLN_SCALING_TENSOR && B->scaling != GLN_SCALING_TENSOR)
            return gemm_dequant(ctx, layout, A, B, D, bias, accumulate, fn);
    }
    gemm_plan_t p;
    GLN_TRY(gemm_plan(layout, A, B, &p, fn));
    if (p.sa && k > 0 && fp8_needs_padding(&p)) return gemm_fp8_padded(ctx, &p, A->dtype, D, bias, accumulate, m, n, k, fn);
    return gemm_finish(ctx, &p, A->dtype, D, bias, accumulate, m, n, k, fn);
}

gln_status_t gln_cuda_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                           const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate) {
    return gemm_run(ctx, layout, A, B, D, bias, accumulate, "gln_gemm (cuda)");
}

/* ---- grouped GEMM: one CUTLASS launch where a kernel fits (cuda_grouped_gemm.c), else a loop
 * of per-expert matmuls on the stream ------------------------------------------------------ */

gln_status_t gln_cuda_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args) {
    static const char *fn = "gln_grouped_gemm (cuda)";
    int handled = 0;
    gln_status_t cst = gln_cuda_grouped_gemm_cutlass(ctx, args, &handled);
    if (handled) return cst;
    const gln_grouped_tensor_t *b = args->b;
    const int nt = args->layout == GLN_LAYOUT_NT;
    int64_t *splits = NULL, *a_splits = NULL;
    gln_status_t st = GLN_STATUS_SUCCESS;
    /* Splits on the device are copied to the host (one synchronizing copy each): the
     * non-graph-safe fallback until a device-side grouped kernel exists. */
    GLN_CHECK(st, fail, gln_cuda_host_splits(ctx, fn, "b", b, &splits));
    gln_grouped_tensor_t gb = *b, ga = *b, gd = *b; /* ga, gd: set below per layout */
    gb.splits = splits, gb.splits_on_backend = 0;
    if (nt) {
        GLN_CHECK(st, fail, gln_cuda_host_splits(ctx, fn, "a_grouped", args->a_grouped, &a_splits));
        for (int32_t i = 0; i < b->num; i++)
            GLN_CHECK_COND(st, fail, a_splits[i] == splits[i], GLN_STATUS_INVALID_ARGUMENT,
                                     "%s: a_grouped->splits[%d] = %lld differs from b->splits[%d] = %lld", fn, (int)i,
                                     (long long)a_splits[i], (int)i, (long long)splits[i]);
        ga = *args->a_grouped;
        ga.splits = a_splits, ga.splits_on_backend = 0;
    } else {
        gd = *args->d_grouped;
        gd.splits = splits, gd.splits_on_backend = 0;
    }
    for (int32_t i = 0; i < b->num; i++) {
        gln_tensor_t mb, ma, md;
        GLN_CHECK(st, fail, gln_grouped_member(&gb, i, &mb));
        if (nt) {
            GLN_CHECK(st, fail, gln_grouped_member(&ga, i, &ma));
            GLN_CHECK(st, fail, gemm_run(ctx, args->layout, &ma, &mb, &args->d_list[i], NULL, args->accumulate, fn));
        } else {
            GLN_CHECK(st, fail, gln_grouped_member(&gd, i, &md));
            const gln_tensor_t *bias = args->bias_list ? &args->bias_list[i] : NULL;
            GLN_CHECK(st, fail, gemm_run(ctx, args->layout, &args->a_list[i], &mb, &md, bias, args->accumulate, fn));
        }
    }
fail:
    free(a_splits);
    free(splits);
    return st;
}
