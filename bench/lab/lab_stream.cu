/* Kernel lab: what the H200 gives a quantizer's data movement, without its numerics.
 *
 * Standalone (it does not link the library): nvcc -O3 -std=c++17
 * -gencode=arch=compute_90a,code=sm_90a -Isrc bench/lab/lab_stream.cu -o lab_stream
 *
 * On a bf16 tensor [rows, cols] it times, in useful bytes per second (every input byte read once,
 * every output byte written once), next to a device copy of the same tensor in the same run:
 *   - read:  a read-only pass (what an amax pass can reach);
 *   - cast:  bf16 -> E4M3 rowwise with one scale (3 bytes per element);
 *   - cast+T: the rowwise and the transposed E4M3 copies (4 bytes per element) — the shape of
 *     every one-pass quantizer's traffic;
 * each cast through a bulk-copy (TMA) pipeline: 2-D tensor-map boxes into a ring of S shared
 * stages per block, one thread issuing the loads S - 1 tiles ahead, every thread converting from
 * shared memory; tiles of 128 rows x TC columns.  The cast multiplies by one scale and converts
 * with cvt.rn.satfinite: the cheapest encode a quantizer can have, so the figures are the
 * data-movement ceiling that the library's kernels (which add amaxes and scale grids) approach.
 * Every output is checked against the host's conversion before it is timed. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_tma.cuh"
#include "lab_check.h"

#define TR 128 /* tile rows */
#define BOX_C 64 /* tensor-map box columns (128 bytes of bf16) */
#define THREADS 256

__global__ void read_kernel(const uint4 *x, size_t n16, unsigned *sink) {
    uint32_t acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = __ldg(x + i), b = __ldg(x + i + stride), c = __ldg(x + i + 2 * stride), d = __ldg(x + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n16; i += stride) {
        uint4 a = __ldg(x + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x12345678u) *sink = acc; /* keeps the loads */
}

__device__ __forceinline__ uint32_t cvt4(float a, float b, float c, float d) {
    uint16_t lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
    return (uint32_t)lo | ((uint32_t)hi << 16);
}

/* 8 bf16 (one 16-byte word) times s -> 8 E4M3 codes. */
__device__ __forceinline__ uint2 cvt8(uint4 w, float s) {
    const uint32_t v[4] = {w.x, w.y, w.z, w.w};
    float f[8];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        f[2 * k] = __uint_as_float(v[k] << 16) * s;
        f[2 * k + 1] = __uint_as_float(v[k] & 0xFFFF0000u) * s;
    }
    return make_uint2(cvt4(f[0], f[1], f[2], f[3]), cvt4(f[4], f[5], f[6], f[7]));
}

/* Tiles of TR x TC, row-major over the tile grid; block b takes tiles b, b + grid, ... */
template <int TC, int S, bool TRANS, int LINES>
__global__ void __launch_bounds__(THREADS) cast_tma_kernel(const __grid_constant__ CUtensorMap map, int64_t rows,
                                                           int64_t cols, float s, uint8_t *q, uint8_t *qt) {
    extern __shared__ __align__(1024) uint8_t smem[];
    constexpr int NB = TC / BOX_C;                      /* boxes per tile */
    constexpr int STAGE = TR * TC * 2;                  /* bytes of a stage */
    constexpr int P = LINES ? TC + 4 : TC + 16;         /* pitch of the transpose tile (see below) */
    uint8_t *tt = smem + S * STAGE;                     /* [TR][P] E4M3 codes for the transpose */
    uint64_t *full = (uint64_t *)(tt + (TRANS ? TR * (TC + 16) : 0));
    const int tid = threadIdx.x;
    const int64_t ctiles = cols / TC, ntiles = (rows / TR) * ctiles;
    if (tid == 0) {
        for (int k = 0; k < S; k++) gln_mbar_init(&full[k], 1);
        gln_mbar_init_fence();
    }
    __syncthreads();
    auto issue = [&](int64_t it) { /* local tile index it of this block */
        const int64_t t = blockIdx.x + it * gridDim.x;
        if (t >= ntiles) return;
        const int st = (int)(it % S);
        const int32_t r0 = (int32_t)((t / ctiles) * TR), c0 = (int32_t)((t % ctiles) * TC);
        gln_mbar_expect_tx(&full[st], STAGE);
#pragma unroll
        for (int b = 0; b < NB; b++) gln_tma_load_2d(smem + st * STAGE + b * TR * BOX_C * 2, &map, &full[st], r0, c0 + b * BOX_C);
    };
    if (tid == 0)
        for (int k = 0; k < S - 1; k++) issue(k);
    for (int64_t it = 0;; it++) {
        const int64_t t = blockIdx.x + it * gridDim.x;
        if (t >= ntiles) break;
        if (tid == 0) issue(it + S - 1); /* its stage was released by the last __syncthreads */
        const int st = (int)(it % S);
        gln_mbar_wait(&full[st], (uint32_t)((it / S) & 1));
        const int64_t r0 = (t / ctiles) * TR, c0 = (t % ctiles) * TC;
        const uint8_t *tile = smem + st * STAGE;
        /* 16-byte words: box b, row r, word k (8 per 128-byte box row) */
#pragma unroll
        for (int p = 0; p < TR * TC / 8 / THREADS; p++) {
            const int w = tid + p * THREADS;
            const int k = w % 8, r = (w / 8) % TR, b = w / (8 * TR);
            const uint4 v = *(const uint4 *)(tile + (b * TR + r) * 128 + k * 16);
            const uint2 o = cvt8(v, s);
            const int c = b * BOX_C + k * 8;
            *(uint2 *)(q + (size_t)(r0 + r) * (size_t)cols + (size_t)(c0 + c)) = o;
            if (TRANS) *(uint32_t *)(tt + r * P + c) = o.x, *(uint32_t *)(tt + r * P + c + 4) = o.y;
        }
        if (TRANS) {
            __syncthreads();
            /* transposed: output row c0 + c, bytes r0 .. r0 + 127; a thread writes 16 of them */
#pragma unroll
            for (int p = 0; p < TR * TC / 16 / THREADS; p++) {
                const int w = tid + p * THREADS;
                /* LINES = 0: a warp takes 32 columns of one 16-row strip (16-byte pieces of 32
                 * output rows).  LINES = 1: 8 threads take the 8 strips of one column, so a warp
                 * writes 4 whole 128-byte output lines; a pitch of an odd number of words puts the
                 * 8 strips' bytes in 8 different banks. */
                const int c = LINES ? w / (TR / 16) : w % TC, j = LINES ? w % (TR / 16) : w / TC;
                uint32_t o[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const uint8_t *col = tt + (j * 16 + 4 * e) * P + c;
                    o[e] = (uint32_t)col[0] | ((uint32_t)col[P] << 8) | ((uint32_t)col[2 * P] << 16) | ((uint32_t)col[3 * P] << 24);
                }
                *(uint4 *)(qt + (size_t)(c0 + c) * (size_t)rows + (size_t)(r0 + j * 16)) = make_uint4(o[0], o[1], o[2], o[3]);
            }
        }
        __syncthreads(); /* stage st and the transpose tile are free */
    }
}

static uint8_t host_e4m3(float v) {
    __nv_fp8_e4m3 c(v); /* RNE, saturating to ±448 (__NV_SATFINITE) */
    return *(uint8_t *)&c;
}

typedef void (*kern_t)(CUtensorMap, int64_t, int64_t, float, uint8_t *, uint8_t *);

struct variant {
    const char *name;
    kern_t k;
    int tc, stages, trans;
};

int main(int argc, char **argv) {
    int64_t rows = 16384, cols = 8192;
    int iters = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) sscanf(argv[++i], "%ldx%ld", &rows, &cols);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    }
    if (rows % TR || cols % 128) {
        fprintf(stderr, "lab_stream: --shape needs rows %% %d == 0 and cols %% 128 == 0\n", TR);
        return 2;
    }
    const size_t n = (size_t)rows * (size_t)cols;
    uint16_t *hx = (uint16_t *)malloc(n * 2);
    uint8_t *hq = (uint8_t *)malloc(n), *hqt = (uint8_t *)malloc(n);
    uint64_t st = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) { /* finite bf16 in about ±2^8 */
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        hx[i] = (uint16_t)(((st >> 20) & 0x3FFF) | 0x3000 | ((st >> 40) & 1 ? 0x8000 : 0));
        if ((hx[i] & 0x7F80) > 0x4380) hx[i] = (uint16_t)((hx[i] & 0x807F) | 0x4300);
    }
    const float s = 1.5f;
    void *dx, *dy;
    uint8_t *dq, *dqt;
    unsigned *sink;
    CK(cudaMalloc(&dx, n * 2));
    CK(cudaMalloc(&dy, n * 2));
    CK(cudaMalloc((void **)&dq, n));
    CK(cudaMalloc((void **)&dqt, n));
    CK(cudaMalloc((void **)&sink, 4));
    CK(cudaMemcpy(dx, hx, n * 2, cudaMemcpyHostToDevice));
    CUtensorMap map;
    if (gln_tma_encode_2d(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, dx, rows, cols, cols * 2, TR, BOX_C,
                          CU_TENSOR_MAP_SWIZZLE_NONE)) {
        fprintf(stderr, "lab_stream: tensor map refused\n");
        return 1;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms;
    /* the device copy */
    CK(cudaMemcpy(dy, dx, n * 2, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < iters; i++) CK(cudaMemcpyAsync(dy, dx, n * 2, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double copy = 4.0 * n * iters / (ms * 1e-3) / 1e9;
    printf("lab_stream %ldx%ld bf16, %s, %d SMs\n", rows, cols, prop.name, prop.multiProcessorCount);
    printf("%-28s %9.1f GB/s\n", "device copy", copy);
    read_kernel<<<prop.multiProcessorCount * 8, 256>>>((const uint4 *)dx, n / 8, sink);
    CK(cudaEventRecord(e0));
    for (int i = 0; i < iters; i++) read_kernel<<<prop.multiProcessorCount * 8, 256>>>((const uint4 *)dx, n / 8, sink);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double rd = 2.0 * n * iters / (ms * 1e-3) / 1e9;
    printf("%-28s %9.1f GB/s  %5.1f %% of copy\n", "read only", rd, 100 * rd / copy);

    const variant vs[] = {
        {"cast R, 128x64, 4 stages", cast_tma_kernel<64, 4, false, 0>, 64, 4, 0},
        {"cast R, 128x128, 3 stages", cast_tma_kernel<128, 3, false, 0>, 128, 3, 0},
        {"cast R+T, 128x64, 3 st, strips", cast_tma_kernel<64, 3, true, 0>, 64, 3, 1},
        {"cast R+T, 128x128, 2 st, strips", cast_tma_kernel<128, 2, true, 0>, 128, 2, 1},
        {"cast R+T, 128x64, 3 st, lines", cast_tma_kernel<64, 3, true, 1>, 64, 3, 1},
        {"cast R+T, 128x64, 4 st, lines", cast_tma_kernel<64, 4, true, 1>, 64, 4, 1},
        {"cast R+T, 128x128, 2 st, lines", cast_tma_kernel<128, 2, true, 1>, 128, 2, 1},
        {"cast R+T, 128x128, 3 st, lines", cast_tma_kernel<128, 3, true, 1>, 128, 3, 1},
    };
    int bad = 0;
    for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
        const variant &V = vs[v];
        const size_t smem = (size_t)V.stages * TR * V.tc * 2 + (V.trans ? TR * (V.tc + 16) : 0) + 8 * V.stages;
        CK(cudaFuncSetAttribute(V.k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, V.k, THREADS, smem));
        const int grid = per_sm * prop.multiProcessorCount;
        CK(cudaMemset(dq, 0xEE, n));
        CK(cudaMemset(dqt, 0xEE, n));
        V.k<<<grid, THREADS, smem>>>(map, rows, cols, s, dq, dqt);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hq, dq, n, cudaMemcpyDeviceToHost));
        if (V.trans) CK(cudaMemcpy(hqt, dqt, n, cudaMemcpyDeviceToHost));
        size_t wrong = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                uint32_t b = (uint32_t)hx[(size_t)r * cols + c] << 16;
                float f;
                memcpy(&f, &b, 4);
                const uint8_t want = host_e4m3(f * s);
                wrong += hq[(size_t)r * cols + c] != want;
                if (V.trans) wrong += hqt[(size_t)c * rows + r] != want;
            }
        if (wrong) {
            printf("%-28s WRONG: %zu bytes differ from the host conversion\n", V.name, wrong);
            bad = 1;
            continue;
        }
        CK(cudaEventRecord(e0));
        for (int i = 0; i < iters; i++) V.k<<<grid, THREADS, smem>>>(map, rows, cols, s, dq, dqt);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double gbs = (V.trans ? 4.0 : 3.0) * n * iters / (ms * 1e-3) / 1e9;
        printf("%-28s %9.1f GB/s  %5.1f %% of copy  (%d blocks/SM, %zu B smem, %.1f us)\n", V.name, gbs, 100 * gbs / copy,
               per_sm, smem, 1e3 * ms / iters);
    }
    cudaFree(dx), cudaFree(dy), cudaFree(dq), cudaFree(dqt), cudaFree(sink);
    free(hx), free(hq), free(hqt);
    return bad;
}
