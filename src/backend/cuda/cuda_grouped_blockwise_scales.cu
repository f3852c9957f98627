/* The device helpers of the block-scaled grouped GEMMs (cuda_grouped_blockwise.h): scale
 * repacks into the layouts CUTLASS's Hopper blockwise mainloop derives from the problem
 *    shapes: the 1×128 scales of experts whose row count is not a multiple of 4 (our grid pads each
 *    K block's column to round_up(m_i, 4)), and every expert's 128×128 weight scales (ours K-major,
 *    CUTLASS's N-major).  Plain copies: the values are bitwise the quantizer's.  Experts are read
 *    from the group plan on the device (no host sync); with host splits the same kernels run.
 *
 * 2. The block-scaled wgrad of experts whose row count is not a multiple of 16: their transposed
 *    copies [cols, m_i] have an m_i-byte row stride that TMA cannot read, so the CUTLASS kernel
 *    leaves them out (g.k_align) and this kernel computes them on the CUDA cores: a fixed grid
 *    whose blocks walk the experts (skipping the aligned ones), FP32 partial sums of the exact
 *    E4M3 products over each 128-token block, scaled by the two copies' decode scales of that
 *    block and added up in block order — the CPU backend's math (a different summation order
 *    inside a block than the tensor cores, within the tests' tolerance).  Its twin is the CPU
 *    backend's block GEMM, which the tests compare it against through gln_grouped_gemm. */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_grouped_blockwise.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"
}

#include "backend/cuda/cuda_device.h"

#define BW_CHUNK 64 /* experts per launch: their host-list pointers travel in the parameters */

typedef struct bw_chunk {
    int32_t first, count;
    const float *w_sf[BW_CHUNK]; /* TN / NN: the weights' 128×128 scales */
} bw_chunk_t;

static void fill_bw_chunk(bw_chunk_t *c, const gln_cutlass_grouped_t *g, int32_t first, int32_t count) {
    memset(c, 0, sizeof *c);
    c->first = first;
    c->count = count;
    for (int32_t j = 0; j < count; j++) {
        if (g->b_scale_list) c->w_sf[j] = g->b_scale_list[first + j];
    }
}

/* Block (kb, j): expert first + j's K block kb, [kb · round_up(m, 4) + r] -> [r0 · nkb + kb · m + r]. */
__global__ void gln_blockwise_repack_sfa_kernel(gln_cutlass_blockwise_t bw, int32_t first, int64_t nkb, float *sfa) {
    const int32_t i = first + (int32_t)blockIdx.y;
    const int64_t kb = blockIdx.x;
    const int64_t r0 = bw.g.offsets[i], m = bw.g.offsets[i + 1] - r0;
    if (m % 4 == 0) return; /* read in place by the GEMM */
    const float *src = bw.a_sf + bw.a_sf_start[i] + kb * gln_round_up(m, 4);
    float *dst = sfa + r0 * nkb + kb * m;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) dst[r] = src[r];
}

/* Block j: expert first + j's weight scales, [nb · round_up(nkb, 4) + kb] -> [kb · nnb + nb]. */
__global__ void gln_blockwise_repack_sfb_kernel(bw_chunk_t c, int64_t nkb, int64_t nnb, float *sfb) {
    const int32_t j = (int32_t)blockIdx.x;
    const float *src = c.w_sf[j];
    float *dst = sfb + (int64_t)(c.first + j) * nkb * nnb;
    const int64_t ld = gln_round_up(nkb, 4);
    for (int64_t e = threadIdx.x; e < nkb * nnb; e += blockDim.x) dst[e] = src[(e % nnb) * ld + e / nnb];
}

extern "C" gln_status_t gln_cuda_blockwise_repack(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw,
                                                  int32_t first, int32_t count, float *sfa, float *sfb,
                                                  const char *call) {
    if (count <= 0) return GLN_STATUS_SUCCESS;
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    const int64_t nkb = gln_ceil_div(bw->g.k, GLN_BLOCKWISE_K), nnb = gln_ceil_div(bw->g.n, GLN_BLOCKWISE_K);
    for (int32_t f = first; f < first + count; f += BW_CHUNK) {
        const int32_t n = first + count - f < BW_CHUNK ? first + count - f : BW_CHUNK;
        bw_chunk_t c;
        fill_bw_chunk(&c, &bw->g, f, n);
        gln_blockwise_repack_sfa_kernel<<<dim3((unsigned int)nkb, (unsigned int)n), 128, 0, stream>>>(*bw, f, nkb, sfa);
        GLN_TRY(gln_cuda_check_launch(call, "gln_blockwise_repack_sfa_kernel"));
        gln_blockwise_repack_sfb_kernel<<<(unsigned int)n, 256, 0, stream>>>(c, nkb, nnb, sfb);
        GLN_TRY(gln_cuda_check_launch(call, "gln_blockwise_repack_sfb_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}
