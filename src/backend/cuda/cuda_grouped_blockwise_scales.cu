/* The device helpers of the block-scaled grouped GEMMs (cuda_grouped_blockwise.h):
 *
 * 1. Scale repacks into the layouts CUTLASS's Hopper blockwise mainloop derives from the problem
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
    float *d[BW_CHUNK];          /* NT: the outputs */
} bw_chunk_t;

static void fill_bw_chunk(bw_chunk_t *c, const gln_cutlass_grouped_t *g, int32_t first, int32_t count) {
    memset(c, 0, sizeof *c);
    c->first = first;
    c->count = count;
    for (int32_t j = 0; j < count; j++) {
        if (g->b_scale_list) c->w_sf[j] = g->b_scale_list[first + j];
        if (g->d_list) c->d[j] = (float *)g->d_list[first + j];
    }
}

/* ---- 1. repacks --------------------------------------------------------------------------- */

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

/* ---- 2. the wgrad of unaligned experts ----------------------------------------------------- */

#define WG_TILE 64
#define WG_K 32 /* divides GLN_BLOCKWISE_K: a step never straddles two scale blocks */

/* A [WG_TILE rows, WG_K] slice of a K-major E4M3 copy (rows r0.., K k0..) as FP32, s[k][row]. */
__device__ __forceinline__ void bw_load_slice(float (*s)[WG_TILE + 1], const uint8_t *p, int64_t ld, int64_t rows,
                                              int64_t r0, int64_t K, int64_t k0) {
    for (int e = threadIdx.x; e < WG_TILE * WG_K; e += blockDim.x) {
        const int rr = e / WG_K, kk = e % WG_K;
        const int64_t r = r0 + rr, k = k0 + kk;
        s[kk][rr] = (r < rows && k < K) ? gln_dev_from_fp8(p[r * ld + k], GLN_DTYPE_FP8_E4M3) : 0.0f;
    }
}

__global__ void __launch_bounds__(256) gln_blockwise_wgrad_unaligned_kernel(gln_cutlass_blockwise_t bw, bw_chunk_t c) {
    __shared__ float As[WG_K][WG_TILE + 1];
    __shared__ float Bs[WG_K][WG_TILE + 1];
    const gln_cutlass_grouped_t &g = bw.g;
    const int64_t M = g.m, N = g.n, lda = gln_round_up(M, 4), ldb = gln_round_up(N, 4);
    const int64_t tiles_m = (M + WG_TILE - 1) / WG_TILE, tiles_n = (N + WG_TILE - 1) / WG_TILE;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int32_t j = 0; j < c.count; j++) {
        const int32_t i = c.first + j;
        const int64_t r0 = g.offsets[i], K = g.offsets[i + 1] - r0;
        if (K == 0 || K % g.k_align == 0) continue; /* empty (zeroed elsewhere) or CUTLASS's */
        const uint8_t *A = (const uint8_t *)g.a + r0 * g.a_row_bytes;
        const uint8_t *B = (const uint8_t *)g.b + r0 * g.b_row_bytes;
        const float *sa = bw.a_sf + bw.a_sf_start[i], *sb = bw.b_sf + bw.b_sf_start[i];
        for (int64_t t = blockIdx.x; t < tiles_m * tiles_n; t += gridDim.x) {
            const int64_t m0 = (t / tiles_n) * WG_TILE, n0 = (t % tiles_n) * WG_TILE;
            float acc[4][4] = {{0}}, blk[4][4] = {{0}};
            for (int64_t k0 = 0; k0 < K; k0 += WG_K) {
                bw_load_slice(As, A, K, M, m0, K, k0);
                bw_load_slice(Bs, B, K, N, n0, K, k0);
                __syncthreads();
                for (int kk = 0; kk < WG_K; kk++) {
                    float a[4], b[4];
                    for (int u = 0; u < 4; u++) a[u] = As[kk][ty * 4 + u], b[u] = Bs[kk][tx * 4 + u];
                    for (int u = 0; u < 4; u++)
                        for (int v = 0; v < 4; v++) blk[u][v] = fmaf(a[u], b[v], blk[u][v]);
                }
                __syncthreads();
                if ((k0 + WG_K) % GLN_BLOCKWISE_K && k0 + WG_K < K) continue;
                const int64_t kb = k0 / GLN_BLOCKWISE_K; /* the block just finished: promote it */
                for (int u = 0; u < 4; u++) {
                    const int64_t m = m0 + ty * 4 + u;
                    const float s_a = m < M ? sa[kb * lda + m] : 0.0f;
                    for (int v = 0; v < 4; v++) {
                        const int64_t n = n0 + tx * 4 + v;
                        const float s_b = n < N ? sb[kb * ldb + n] : 0.0f;
                        acc[u][v] = fmaf(blk[u][v], s_a * s_b, acc[u][v]);
                        blk[u][v] = 0.0f;
                    }
                }
            }
            for (int u = 0; u < 4; u++) {
                const int64_t m = m0 + ty * 4 + u;
                if (m >= M) continue;
                for (int v = 0; v < 4; v++) {
                    const int64_t n = n0 + tx * 4 + v;
                    if (n >= N) continue;
                    float *d = &c.d[j][m * N + n];
                    *d = g.accumulate ? *d + acc[u][v] : acc[u][v];
                }
            }
        }
    }
}

extern "C" gln_status_t gln_cuda_blockwise_wgrad_unaligned(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw,
                                                           const char *call) {
    const gln_cutlass_grouped_t *g = &bw->g;
    /* Enough blocks to fill the GPU when one expert is unaligned; each walks every expert. */
    const int64_t tiles = gln_ceil_div(g->m, WG_TILE) * gln_ceil_div(g->n, WG_TILE);
    const unsigned int blocks = (unsigned int)(tiles < 264 ? tiles : 264);
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    for (int32_t first = 0; first < g->num; first += BW_CHUNK) {
        bw_chunk_t c;
        fill_bw_chunk(&c, g, first, g->num - first < BW_CHUNK ? g->num - first : BW_CHUNK);
        gln_blockwise_wgrad_unaligned_kernel<<<blocks, 256, 0, stream>>>(*bw, c);
        GLN_TRY(gln_cuda_check_launch(call, "gln_blockwise_wgrad_unaligned_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}
