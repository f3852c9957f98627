/* The per-tensor FP8 wgrad of experts whose row count is not a multiple of 16, on the tensor cores.
 *
 * The grouped FP8 wgrad reads each expert's transposed (columnwise) copies dy_iᵀ [m, rows_i] and
 * x_iᵀ [n, rows_i], K-major along the rows: their row stride is rows_i bytes, and TMA (so the
 * CUTLASS kernel) needs a multiple of 16.  Router splits are rarely that.  This kernel copies the
 * copies of each such expert into scratch with every row padded by zeros to pad_i =
 * round_up(rows_i, 16) bytes; the CUTLASS setup kernel (cutlass/grouped_sm90.cuh) then points the
 * expert's problem at the padded copies with K = pad_i.  A zero added to the FP32 sum leaves it
 * unchanged, and the padding lies past the last K element, so every 128-wide K tile of the real
 * rows is the same tile as before: the result is bit for bit what the kernel computes on an
 * aligned expert holding the same values (tests/test_cuda_wgrad_unaligned.c).
 *
 * Placement: expert i's padded copies start at row p_i = offsets[i] + 16·i of a scratch operand of
 * (packed rows + 16·num) rows — computed from the expert's own offset, so neither this kernel nor
 * the setup kernel needs a prefix sum, and p_i + pad_i <= p_{i+1}.  Aligned and empty experts are
 * skipped here (the setup kernel reads them in place), so when a router happens to give aligned
 * counts only the launch and a walk over the offsets are paid.  Cost where experts are unaligned:
 * one read and one write of their FP8 copies (1 byte an element), against the CUDA-core kernel
 * this replaced, which ran the whole GEMM of such experts 15× slower than the tensor cores.  The
 * per-tensor FP8 wgrad (cuda_grouped_gemm.c) and the block-scaled one (cuda_grouped_blockwise.c)
 * both use it: padding K to a multiple of 16 keeps every 128-token scale block where it was. */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/checked.h"
#include "common/error.h"
}

#define WGRAD_K_ALIGN 16 /* bytes: TMA's row-stride granule */
#define PAD_THREADS 256
#define PAD_WARPS (PAD_THREADS / 32)
#define PAD_BLOCKS 1056 /* 8 a multiprocessor on an H200: every warp walks a share of the rows */

/* One warp a row of a transposed copy: row c of operand (a: dy, cols m; b: x, cols n) of expert
 * i, for v = i·(m + n) + c.  16 output bytes a lane, stored at once (p_i·cols and pad_i are
 * multiples of 16, the scratch 256-byte aligned); the source bytes are read one at a time, as
 * rows_i may be odd. */
__global__ void __launch_bounds__(PAD_THREADS) wgrad_pad_kernel(const int64_t *offsets, int32_t num, int64_t align,
                                                               const uint8_t *a, int64_t m, uint8_t *a_pad,
                                                               const uint8_t *b, int64_t n, uint8_t *b_pad) {
    const int lane = threadIdx.x & 31;
    const int64_t per = m + n, rows_total = (int64_t)num * per;
    const int64_t warps = (int64_t)gridDim.x * PAD_WARPS;
    for (int64_t v = (int64_t)blockIdx.x * PAD_WARPS + threadIdx.x / 32; v < rows_total; v += warps) {
        const int32_t i = (int32_t)(v / per);
        const int64_t c = v % per, r0 = offsets[i], rows = offsets[i + 1] - r0;
        if (rows <= 0 || rows % align == 0) continue; /* read in place by the GEMM */
        const int64_t pad = (rows + align - 1) / align * align, p0 = r0 + align * (int64_t)i;
        const int is_a = c < m;
        const int64_t cols = is_a ? m : n, row = is_a ? c : c - m;
        const uint8_t *src = (is_a ? a : b) + r0 * cols + row * rows;
        uint8_t *dst = (is_a ? a_pad : b_pad) + p0 * cols + row * pad;
        for (int64_t j = (int64_t)lane * 16; j < pad; j += 32 * 16) {
            uint32_t w[4] = {0, 0, 0, 0};
            for (int e = 0; e < 16; e++)
                if (j + e < rows) w[e / 4] |= (uint32_t)src[j + e] << (8 * (e % 4));
            *(uint4 *)(dst + j) = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}

static gln_status_t pad_launch(gln_context_t *ctx, const gln_cutlass_grouped_t *g, void *a_pad, void *b_pad,
                               const char *call) {
    const int64_t work = (int64_t)g->num * (g->m + g->n);
    const int64_t need = (work + PAD_WARPS - 1) / PAD_WARPS;
    const unsigned int blocks = (unsigned int)(need < PAD_BLOCKS ? (need > 0 ? need : 1) : PAD_BLOCKS);
    wgrad_pad_kernel<<<blocks, PAD_THREADS, 0, gln_cuda_state(ctx)->stream>>>(
        g->offsets, g->num, g->k_align, (const uint8_t *)g->a, g->m, (uint8_t *)a_pad, (const uint8_t *)g->b, g->n,
        (uint8_t *)b_pad);
    return gln_cuda_check_launch(call, "wgrad_pad_kernel");
}

extern "C" int32_t gln_cuda_wgrad_k_align(const gln_grouped_tensor_t *dy) {
    if (dy->splits_on_backend) return WGRAD_K_ALIGN;
    for (int32_t i = 0; i < dy->num; i++)
        if (dy->splits[i] % WGRAD_K_ALIGN != 0) return WGRAD_K_ALIGN;
    return 1;
}

extern "C" gln_status_t gln_cuda_wgrad_pad(gln_context_t *ctx, gln_cutlass_grouped_t *g, const char *call) {
    g->a_pad = g->b_pad = NULL;
    if (g->k_align <= 1) return GLN_STATUS_SUCCESS; /* the host saw every split aligned */
    int64_t rows;
    size_t a_bytes = 0, b_bytes = 0;
    if (gln_mul_overflow_i64((int64_t)g->k_align, (int64_t)g->num, &rows) ||
        gln_add_overflow_i64(rows, g->split_rows, &rows))
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: %lld rows padded for %d experts overflow int64", call,
                        (long long)g->split_rows, (int)g->num);
    GLN_TRY(gln_shape_bytes(call, "the padded wgrad gradient", rows, g->m, 1, &a_bytes));
    GLN_TRY(gln_shape_bytes(call, "the padded wgrad input", rows, g->n, 1, &b_bytes));
    void *a_pad = NULL, *b_pad = NULL;
    gln_status_t st = gln_cuda_scratch_alloc(ctx, a_bytes, &a_pad, call);
    if (st == GLN_STATUS_SUCCESS) st = gln_cuda_scratch_alloc(ctx, b_bytes, &b_pad, call);
    if (st == GLN_STATUS_SUCCESS) st = pad_launch(ctx, g, a_pad, b_pad, call);
    if (st != GLN_STATUS_SUCCESS) {
        gln_cuda_scratch_free(ctx, a_pad);
        gln_cuda_scratch_free(ctx, b_pad);
        return st;
    }
    g->a_pad = a_pad, g->b_pad = b_pad;
    return GLN_STATUS_SUCCESS;
}

extern "C" void gln_cuda_wgrad_pad_release(gln_context_t *ctx, gln_cutlass_grouped_t *g) {
    gln_cuda_scratch_free(ctx, (void *)g->a_pad);
    gln_cuda_scratch_free(ctx, (void *)g->b_pad);
    g->a_pad = g->b_pad = NULL;
}
