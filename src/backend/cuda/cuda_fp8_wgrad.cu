/* The per-tensor FP8 wgrad of experts whose row count is not a multiple of 16.
 *
 * The grouped FP8 wgrad reads each expert's transposed (columnwise) copies [cols, m_i], whose
 * row stride is m_i bytes: TMA needs it to be a multiple of 16, so the CUTLASS kernel leaves such
 * experts out (gln_cutlass_grouped_t.k_align) and this kernel computes them.  With device splits
 * the host cannot know which experts those are, so the kernel runs on a fixed grid and every
 * block walks the experts on the device, skipping the aligned ones.  When every expert is
 * aligned (a caller padding to gln_recipe_alignment) it must cost next to nothing — small experts
 * are launch-bound: one launch for up to WG_CHUNK experts, whose blocks first test all the
 * chunk's row counts in parallel (one load per thread) and return together when none is
 * unaligned; with host splits the dispatcher does not launch it at all then
 * (cuda_grouped_gemm.c, k_align).
 *
 * dW_i [M, N] = alpha_i · Σ_r A_i[m, r] · B_i[n, r] (+ dW_i when accumulating, in FP32, rounded once
 * when dW_i is bf16), A_i the gradient's
 * copy [M, m_i], B_i the input's [N, m_i], alpha_i the product of the two decode scales — the
 * rule of the CUTLASS epilogue and of the CPU backend — with FP32 accumulation of the exact
 * products (plain FMAs: a different summation order than the tensor cores, within the GEMM
 * tolerances of the tests).  64×64 output tiles, 32 rows of K per step through shared memory. */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
}

#include "backend/cuda/cuda_device.h"

#define WG_TILE 64
#define WG_K 32
/* experts per launch: their output pointers travel in the parameters (4 KB at 256, within the
 * 32 KB CUDA 12.1+ allows), so one launch covers every usual expert count */
#define WG_CHUNK 256

typedef struct wgrad_chunk {
    int32_t first, count;
    void *d[WG_CHUNK]; /* g.d_dtype: fp32 (main_grad) or bf16 */
    const float *b_scale[WG_CHUNK];
} wgrad_chunk_t;

/* Load a [WG_TILE rows, WG_K] slice of a K-major FP8 copy (row r0.., K k0..) decoded to FP32,
 * stored k-major in smem: s[k][row]. */
__device__ __forceinline__ void load_slice(float (*s)[WG_TILE + 1], const uint8_t *p, int64_t ld, int64_t rows,
                                           int64_t r0, int64_t K, int64_t k0, int fp8) {
    for (int e = threadIdx.x; e < WG_TILE * WG_K; e += blockDim.x) {
        const int rr = e / WG_K, kk = e % WG_K;
        const int64_t r = r0 + rr, k = k0 + kk;
        s[kk][rr] = (r < rows && k < K) ? gln_dev_from_fp8(p[r * ld + k], fp8) : 0.0f;
    }
}

__global__ void __launch_bounds__(256) gln_fp8_wgrad_unaligned_kernel(gln_cutlass_grouped_t g, wgrad_chunk_t c,
                                                                       int a_fp8, int b_fp8) {
    __shared__ float As[WG_K][WG_TILE + 1];
    __shared__ float Bs[WG_K][WG_TILE + 1];
    const int64_t M = g.m, N = g.n;
    const int64_t tiles_m = (M + WG_TILE - 1) / WG_TILE, tiles_n = (N + WG_TILE - 1) / WG_TILE;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    /* the common case first: no expert of the chunk is unaligned, every block returns at once */
    int mine = 0;
    for (int32_t j = threadIdx.x; j < c.count; j += blockDim.x) {
        const int64_t rows = g.offsets[c.first + j + 1] - g.offsets[c.first + j];
        mine |= rows != 0 && rows % g.k_align != 0;
    }
    if (!__syncthreads_or(mine)) return;
    for (int32_t j = 0; j < c.count; j++) {
        const int32_t i = c.first + j;
        const int64_t r0 = g.offsets[i], K = g.offsets[i + 1] - r0;
        if (K == 0 || K % g.k_align == 0) continue; /* empty (zeroed elsewhere) or CUTLASS's */
        const uint8_t *A = (const uint8_t *)g.a + r0 * g.a_row_bytes;
        const uint8_t *B = (const uint8_t *)g.b + r0 * g.b_row_bytes;
        const float alpha = g.a_scale[i] * *c.b_scale[j];
        for (int64_t t = blockIdx.x; t < tiles_m * tiles_n; t += gridDim.x) {
            const int64_t m0 = (t / tiles_n) * WG_TILE, n0 = (t % tiles_n) * WG_TILE;
            float acc[4][4] = {{0}};
            for (int64_t k0 = 0; k0 < K; k0 += WG_K) {
                load_slice(As, A, K, M, m0, K, k0, a_fp8);
                load_slice(Bs, B, K, N, n0, K, k0, b_fp8);
                __syncthreads();
                for (int kk = 0; kk < WG_K; kk++) {
                    float a[4], b[4];
                    for (int u = 0; u < 4; u++) a[u] = As[kk][ty * 4 + u], b[u] = Bs[kk][tx * 4 + u];
                    for (int u = 0; u < 4; u++)
                        for (int v = 0; v < 4; v++) acc[u][v] = fmaf(a[u], b[v], acc[u][v]);
                }
                __syncthreads();
            }
            for (int u = 0; u < 4; u++) {
                const int64_t m = m0 + ty * 4 + u;
                if (m >= M) continue;
                for (int v = 0; v < 4; v++) {
                    const int64_t n = n0 + tx * 4 + v;
                    if (n >= N) continue;
                    const size_t e = (size_t)(m * N + n);
                    const float r = alpha * acc[u][v];
                    /* one rounding of the FP32 sum into a bf16 output, as CUTLASS's epilogue */
                    gln_dev_store(c.d[j], g.d_dtype, e, g.accumulate ? gln_dev_load(c.d[j], g.d_dtype, e) + r : r);
                }
            }
        }
    }
}

extern "C" gln_status_t gln_cuda_fp8_wgrad_unaligned(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                     const float *const *b_scales, const char *call) {
    const int a_fp8 = g->kernel == GLN_CUTLASS_E5M2_E4M3_WGRAD ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    const int b_fp8 = GLN_DTYPE_FP8_E4M3;
    /* Enough blocks to fill the GPU when one expert is unaligned; each walks every expert. */
    const int64_t tiles = ((g->m + WG_TILE - 1) / WG_TILE) * ((g->n + WG_TILE - 1) / WG_TILE);
    const unsigned int blocks = (unsigned int)(tiles < 264 ? tiles : 264);
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    for (int32_t first = 0; first < g->num; first += WG_CHUNK) {
        wgrad_chunk_t c;
        memset(&c, 0, sizeof c);
        c.first = first;
        c.count = g->num - first < WG_CHUNK ? g->num - first : WG_CHUNK;
        for (int32_t j = 0; j < c.count; j++) {
            c.d[j] = g->d_list[first + j];
            c.b_scale[j] = b_scales[first + j];
        }
        gln_fp8_wgrad_unaligned_kernel<<<blocks, 256, 0, stream>>>(*g, c, a_fp8, b_fp8);
        GLN_TRY(gln_cuda_check_launch(call, "gln_fp8_wgrad_unaligned_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}
