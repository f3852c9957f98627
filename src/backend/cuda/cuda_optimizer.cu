/* The CUDA optimizer step (backend.h, optimizer_step) on the context's stream: one pass over the
 * FP32 masters that updates master / exp_avg / exp_avg_sq, writes the working copy and reduces
 * the per-segment amax of the working values it wrote.
 *
 * Bitwise equal to the CPU twin (cpu_optimizer.c): both apply numerics/optimizer_rule.h, whose
 * operations are the IEEE-rounded intrinsics here (never contracted into an FMA) with one NaN
 * rule, and the roundings to bf16 / fp16 of numerics.h.  The amax is a max of |x| compared as
 * FP32 bits, which is exact and order independent (NaN ignored, as the CPU's fmaxf rule).
 *
 * Each block walks chunks of OPT_CHUNK contiguous elements (block-stride over the chunks); each
 * thread takes groups of 4 consecutive elements (float4 loads of master / grad / moments, one
 * 8-byte store of 4 bf16 or fp16 when the buffers are aligned for it).  Segments are contiguous
 * and usually much longer than a chunk: thread 0 looks up the segments of the chunk's first and
 * last elements; when they are the same, the block reduces its max in registers and shared memory
 * and issues one atomicMax on the segment's bits; a chunk that crosses a boundary (at most one per
 * boundary) looks up each element's segment and issues an atomicMax per nonzero element. */
#include <cublasLt.h> /* outside extern "C": cuda_backend.h includes it */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "backend/context.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_optimizer.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "numerics/optimizer_rule.h"
}

#include "backend/cuda/cuda_device.h"

#define OPT_THREADS 256
#define OPT_GROUPS 4                          /* groups of 4 elements per thread and chunk */
#define OPT_CHUNK (OPT_THREADS * 4 * OPT_GROUPS) /* 4096 elements */
/* Segments whose bounds travel in the kernel's parameters (no copy, capturable in a graph);
 * more host-resident bounds are copied to device scratch first. */
#define OPT_INLINE_SEGS 256
#define OPT_NO_WORKING (-1)

typedef struct opt_segs {
    int32_t nseg;
    const int64_t *ptr;                   /* device bounds, or NULL: inline */
    int64_t inline_b[OPT_INLINE_SEGS + 1];
} opt_segs_t;

__device__ __forceinline__ int64_t opt_bound(const opt_segs_t &s, int32_t k) {
    return s.ptr ? s.ptr[k] : s.inline_b[k];
}

/* The segment s with bounds[s] <= i < bounds[s + 1], or -1 when i is outside every segment. */
__device__ int32_t opt_seg_of(const opt_segs_t &s, int64_t i) {
    if (i < opt_bound(s, 0) || i >= opt_bound(s, s.nseg)) return -1;
    int32_t lo = 0, hi = s.nseg; /* bounds[lo] <= i < bounds[hi] */
    while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (opt_bound(s, mid) <= i) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Chunk modes for the amax: nothing to count, one segment, per element. */
enum { OPT_AMAX_NONE = 0, OPT_AMAX_ONE = 1, OPT_AMAX_EACH = 2 };

__device__ void opt_chunk_mode(const opt_segs_t &s, int64_t c0, int64_t c1, int *mode, int32_t *seg) {
    const int32_t a = opt_seg_of(s, c0), b = opt_seg_of(s, c1 - 1);
    *seg = a;
    if (a >= 0 && a == b) *mode = OPT_AMAX_ONE;
    else if (a < 0 && b < 0 && (c1 <= opt_bound(s, 0) || c0 >= opt_bound(s, s.nseg))) *mode = OPT_AMAX_NONE;
    else *mode = OPT_AMAX_EACH;
}

/* Rounds w to the working dtype; returns the stored value as FP32 and its 16-bit code in *code. */
template <int WDT>
__device__ __forceinline__ float opt_round(float w, uint16_t *code) {
    if (WDT == GLN_DTYPE_BF16) {
        *code = gln_f32_to_bf16_bits(w);
        return gln_bf16_bits_to_f32(*code);
    }
    if (WDT == GLN_DTYPE_FP16) {
        *code = gln_f32_to_fp16_bits(w);
        return gln_fp16_bits_to_f32(*code);
    }
    return w;
}

/* |x| as FP32 bits for the max, 0 for NaN (ignored). */
__device__ __forceinline__ unsigned int opt_abs_bits(float x) {
    const unsigned int b = gln_f32_bits(x) & 0x7FFFFFFFu;
    return b > 0x7F800000u ? 0u : b;
}

__device__ __forceinline__ unsigned int opt_block_max(unsigned int best) {
    __shared__ unsigned int s_warp[OPT_THREADS / 32];
    for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(0xFFFFFFFFu, best, off));
    if (threadIdx.x % 32 == 0) s_warp[threadIdx.x / 32] = best;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < OPT_THREADS / 32; w++) best = max(best, s_warp[w]);
    return best; /* thread 0's is the block's */
}

/* One group of cnt <= 4 elements at g0: load, step, store; returns the 4 working values. */
template <int WDT, bool VEC>
__device__ __forceinline__ void opt_group(const gln_optimizer_params_t &p, float *master, const float *grad,
                                          float *m, float *v, void *working, int64_t g0, int cnt, float out[4]) {
    float w[4] = {0.0f, 0.0f, 0.0f, 0.0f}, g[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float mm[4] = {0.0f, 0.0f, 0.0f, 0.0f}, vv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool full = VEC && cnt == 4;
    if (full) {
        *(float4 *)w = *(const float4 *)(master + g0);
        *(float4 *)g = *(const float4 *)(grad + g0);
        if (m) *(float4 *)mm = *(const float4 *)(m + g0);
        if (v) *(float4 *)vv = *(const float4 *)(v + g0);
    } else { /* unrolled with predicates: the arrays stay in registers */
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if (e >= cnt) break;
            w[e] = master[g0 + e];
            g[e] = grad[g0 + e];
            if (m) mm[e] = m[g0 + e];
            if (v) vv[e] = v[g0 + e];
        }
    }
    uint16_t code[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < 4; e++) {
        gln_optimizer_element(&p, &w[e], g[e], &mm[e], &vv[e]);
        out[e] = opt_round<WDT>(w[e], &code[e]);
    }
    if (full) {
        *(float4 *)(master + g0) = *(const float4 *)w;
        if (m) *(float4 *)(m + g0) = *(const float4 *)mm;
        if (v) *(float4 *)(v + g0) = *(const float4 *)vv;
        if (WDT == GLN_DTYPE_FP32) *(float4 *)((float *)working + g0) = *(const float4 *)w;
        if (WDT == GLN_DTYPE_BF16 || WDT == GLN_DTYPE_FP16) {
            uint2 u;
            u.x = (unsigned int)code[0] | ((unsigned int)code[1] << 16);
            u.y = (unsigned int)code[2] | ((unsigned int)code[3] << 16);
            *(uint2 *)((uint16_t *)working + g0) = u;
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; e++) {
        if (e >= cnt) break;
        master[g0 + e] = w[e];
        if (m) m[g0 + e] = mm[e];
        if (v) v[g0 + e] = vv[e];
        if (WDT == GLN_DTYPE_FP32) ((float *)working)[g0 + e] = w[e];
        if (WDT == GLN_DTYPE_BF16 || WDT == GLN_DTYPE_FP16) ((uint16_t *)working)[g0 + e] = code[e];
    }
}

/* The amax of a group's working values: into the thread's running max (one segment for the
 * chunk), or per element into its segment's word. */
__device__ __forceinline__ void opt_count(const opt_segs_t &segs, int mode, int64_t g0, int cnt, const float out[4],
                                          unsigned int *best, unsigned int *amax_bits) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
        if (e >= cnt) break;
        const unsigned int b = opt_abs_bits(out[e]);
        if (mode == OPT_AMAX_ONE) {
            *best = max(*best, b);
        } else if (b) {
            const int32_t s = opt_seg_of(segs, g0 + e);
            if (s >= 0) atomicMax(&amax_bits[s], b);
        }
    }
}

template <int WDT, bool VEC, bool AMAX>
__global__ void __launch_bounds__(OPT_THREADS)
    gln_optimizer_step_kernel(const __grid_constant__ gln_optimizer_params_t params, float *master, const float *grad,
                              float *m, float *v, int64_t n, void *working, unsigned int *amax_bits,
                              const __grid_constant__ opt_segs_t segs) {
    __shared__ int s_mode;
    __shared__ int32_t s_seg;
    const gln_optimizer_params_t p = gln_optimizer_params_live(&params);
    const int64_t chunks = (n + OPT_CHUNK - 1) / OPT_CHUNK;
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        const int64_t c0 = c * OPT_CHUNK, c1 = c0 + OPT_CHUNK < n ? c0 + OPT_CHUNK : n;
        int mode = OPT_AMAX_NONE;
        int32_t seg = -1;
        if (AMAX) {
            if (threadIdx.x == 0) opt_chunk_mode(segs, c0, c1, &s_mode, &s_seg);
            __syncthreads();
            mode = s_mode;
            seg = s_seg;
        }
        unsigned int best = 0;
#pragma unroll
        for (int k = 0; k < OPT_GROUPS; k++) {
            const int64_t g0 = c0 + 4 * ((int64_t)k * OPT_THREADS + threadIdx.x);
            if (g0 >= c1) break;
            const int cnt = c1 - g0 < 4 ? (int)(c1 - g0) : 4;
            float out[4];
            opt_group<WDT, VEC>(p, master, grad, m, v, working, g0, cnt, out);
            if (AMAX && mode != OPT_AMAX_NONE) opt_count(segs, mode, g0, cnt, out, &best, amax_bits);
        }
        if (AMAX) {
            if (mode == OPT_AMAX_ONE) { /* uniform over the block: every thread reduces */
                best = opt_block_max(best);
                if (threadIdx.x == 0 && best) atomicMax(&amax_bits[seg], best);
            }
            __syncthreads(); /* s_mode and the reduction's shared words are reused by the next chunk */
        }
    }
}

static int aligned(const void *ptr, size_t bytes) { return ((uintptr_t)ptr % bytes) == 0; }

typedef struct opt_launch {
    gln_optimizer_params_t p;
    float *master;
    const float *grad;
    float *m, *v;
    int64_t n;
    void *working;
    unsigned int *amax_bits;
} opt_launch_t;

template <int WDT, bool VEC>
static void launch_vec(const opt_launch_t &a, const opt_segs_t &segs, unsigned int blocks, cudaStream_t stream) {
    if (segs.nseg > 0)
        gln_optimizer_step_kernel<WDT, VEC, true><<<blocks, OPT_THREADS, 0, stream>>>(
            a.p, a.master, a.grad, a.m, a.v, a.n, a.working, a.amax_bits, segs);
    else
        gln_optimizer_step_kernel<WDT, VEC, false><<<blocks, OPT_THREADS, 0, stream>>>(
            a.p, a.master, a.grad, a.m, a.v, a.n, a.working, a.amax_bits, segs);
}

template <int WDT>
static void launch_dtype(const opt_launch_t &a, const opt_segs_t &segs, unsigned int blocks, cudaStream_t stream) {
    const size_t wal = WDT == GLN_DTYPE_FP32 ? 16 : 8;
    const bool vec = aligned(a.master, 16) && aligned(a.grad, 16) && (!a.m || aligned(a.m, 16)) &&
                     (!a.v || aligned(a.v, 16)) && (!a.working || aligned(a.working, wal));
    if (vec) launch_vec<WDT, true>(a, segs, blocks, stream);
    else launch_vec<WDT, false>(a, segs, blocks, stream);
}

extern "C" gln_status_t gln_cuda_optimizer_step(gln_context_t *ctx, const gln_optimizer_params_t *p, float *master,
                                                const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                                                void *working, gln_dtype_t working_dtype, int32_t nseg,
                                                const int64_t *bounds, int bounds_on_backend, float *amax) {
    static const char *fn = "gln_optimizer_step (cuda)";
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    if (nseg > 0)
        GLN_TRY(gln_cuda_check(cudaMemsetAsync(amax, 0, (size_t)nseg * sizeof(float), stream), fn,
                               "cudaMemsetAsync(amax)"));
    if (n <= 0) return GLN_STATUS_SUCCESS;

    opt_segs_t local; /* the kernel's parameter (2 KiB of inline bounds) */
    local.nseg = nseg > 0 ? nseg : 0;
    local.ptr = NULL;
    int64_t *staged = NULL;
    if (nseg > 0 && bounds_on_backend) {
        local.ptr = bounds;
    } else if (nseg > 0 && nseg <= OPT_INLINE_SEGS) {
        memcpy(local.inline_b, bounds, (size_t)(nseg + 1) * sizeof(int64_t));
    } else if (nseg > 0) { /* a pageable host source: the copy returns once it was staged */
        const size_t bytes = (size_t)(nseg + 1) * sizeof(int64_t);
        GLN_TRY(gln_ctx_alloc(ctx, bytes, (void **)&staged));
        gln_status_t st = gln_cuda_check(cudaMemcpyAsync(staged, bounds, bytes, cudaMemcpyHostToDevice, stream), fn,
                                         "cudaMemcpyAsync(bounds)");
        if (st != GLN_STATUS_SUCCESS) {
            gln_ctx_free(ctx, staged);
            return st;
        }
        local.ptr = staged;
    }

    opt_launch_t a = {*p, master, grad, exp_avg, exp_avg_sq, n, working, (unsigned int *)amax};
    if (a.working == (void *)a.master) a.working = NULL; /* fp32 aliasing the master: nothing to copy */
    const size_t chunks = (size_t)((n + OPT_CHUNK - 1) / OPT_CHUNK);
    const unsigned int blocks = gln_dev_blocks(chunks, 1);
    if (!a.working) launch_dtype<OPT_NO_WORKING>(a, local, blocks, stream);
    else if (working_dtype == GLN_DTYPE_BF16) launch_dtype<GLN_DTYPE_BF16>(a, local, blocks, stream);
    else if (working_dtype == GLN_DTYPE_FP16) launch_dtype<GLN_DTYPE_FP16>(a, local, blocks, stream);
    else launch_dtype<GLN_DTYPE_FP32>(a, local, blocks, stream);
    gln_status_t st = gln_cuda_check_launch(fn, "gln_optimizer_step_kernel");
    gln_ctx_free(ctx, staged); /* stream-ordered: after the kernel's reads */
    return st;
}
