/* The MoE building blocks on the device (see cuda_moe.h for the contract and the numerics
 * against the CPU reference, src/backend/cpu/cpu_moe.c).
 *
 * Layout of the work:
 *   router forward / backward   one thread per token, the CPU's loops over E in the same order
 *                               (E is the expert count: small), probabilities recomputed from
 *                               the logits where the CPU keeps a row of them (the same
 *                               operations give the same value)
 *   permutation plan            a warp per chunk of 256 (token, slot) pairs: per-chunk expert
 *                               counts (warp match), an exclusive scan over (expert, chunk)
 *                               (cub), then each warp ranks its pairs in order: a stable
 *                               counting sort without atomics, over the whole device
 *   permute / unpermute (+bw)   one block per output row, threads over the features, 8 per
 *                               thread and 16-byte access where the rows allow (vec_ok)
 *   activations                 grid-stride over 8-element vectors where the rows allow, else
 *                               over elements; the same per-element math either way
 * Products and sums that the CPU rounds separately use gln_dev_mul / gln_dev_add, which nvcc
 * never contracts into an FMA and which keep NaN payloads like the host's SSE arithmetic. */
#include <cub/device/device_scan.cuh>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_moe.h"
#include "common/error.h"
#include "numerics/numerics.h"
}

#include "backend/cuda/cuda_act.cuh"
#include "backend/cuda/cuda_device.h"

/* Record the first out-of-range index a kernel met (entry i, value v) in the async error word. */
__device__ void moe_bad_index(gln_cuda_async_error_t *err, int64_t i, long long v) {
    if (atomicCAS(&err->kind, GLN_CUDA_ASYNC_NONE, GLN_CUDA_ASYNC_MOE_INDEX) == GLN_CUDA_ASYNC_NONE) {
        err->member = i > 0x7FFFFFFF ? 0x7FFFFFFF : (int)i;
        err->value = v;
        __threadfence_system(); /* the error word is mapped host memory */
    }
}

/* experts[i] clamped into [0, E), recording a bad one. */
__device__ __forceinline__ int32_t moe_expert_at(const int32_t *experts, int64_t i, int32_t E,
                                                 gln_cuda_async_error_t *err) {
    const int32_t e = experts[i];
    if (e >= 0 && e < E) return e;
    moe_bad_index(err, i, e);
    return e < 0 ? 0 : E - 1;
}

/* row_of[i] when in [0, rows), else -1 (recorded): the caller skips that row. */
__device__ __forceinline__ int64_t moe_row_at(const int64_t *row_of, int64_t i, int64_t rows,
                                              gln_cuda_async_error_t *err) {
    const int64_t r = row_of[i];
    if (r >= 0 && r < rows) return r;
    moe_bad_index(err, i, (long long)r);
    return -1;
}

static gln_status_t launched(const char *call, const char *kernel) { return gln_cuda_check_launch(call, kernel); }

/* ---- router ------------------------------------------------------------------------------ */

/* Max and sum of exp(l - max) of one token's logits, in the CPU's order. */
__device__ void softmax_stats(const float *l, int32_t n, float *mx_out, float *sum_out) {
    float mx = l[0];
    for (int32_t e = 1; e < n; e++)
        if (l[e] > mx) mx = l[e];
    float sum = 0.0f;
    for (int32_t e = 0; e < n; e++) sum = gln_dev_add(sum, expf(l[e] - mx));
    *mx_out = mx;
    *sum_out = sum;
}

__device__ __forceinline__ float prob_of(const float *l, int32_t e, float mx, float sum) {
    return __fdiv_rn(expf(l[e] - mx), sum);
}

__global__ void moe_router_fwd_kernel(int64_t tokens, int32_t n, int32_t k, const float *logits,
                                      int32_t *experts, float *gates) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tokens) return;
    const float *l = logits + t * n;
    int32_t *ex = experts + t * k;
    float *g = gates + t * k;
    float mx, sum;
    softmax_stats(l, n, &mx, &sum);
    /* k passes, each taking the largest probability not yet taken; strict '>' keeps the lower
     * index on ties, NaN wins only when nothing else is left (the CPU's select_top_k). */
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        float pb = 0.0f;
        for (int32_t e = 0; e < n; e++) {
            int taken = 0;
            for (int32_t i = 0; i < j; i++) taken |= ex[i] == e;
            if (taken) continue;
            const float p = prob_of(l, e, mx, sum);
            if (best < 0 || p > pb || (gln_f32_isnan(pb) && !gln_f32_isnan(p))) {
                best = e;
                pb = p;
            }
        }
        ex[j] = best;
        g[j] = pb;
    }
    float s = 0.0f;
    for (int32_t j = 0; j < k; j++) s = gln_dev_add(s, g[j]);
    for (int32_t j = 0; j < k; j++) g[j] = __fdiv_rn(g[j], s);
}

/* experts[i] clamped into [0, E) without recording (the first pass over a token recorded it). */
__device__ __forceinline__ int32_t moe_expert_clamped(const int32_t *experts, int64_t i, int32_t E) {
    const int32_t e = experts[i];
    return e < 0 ? 0 : e >= E ? E - 1 : e;
}

/* The CPU's router_backward_row without its [E] scratch rows:
 *   dp_e = Σ_{j: e_j = e} (dg_j - Σ_i dg_i·g_i) / S   (0 for unselected e)
 *   dz_e = p_e·(dp_e - Σ_e' p_e'·dp_e')
 * Adding the unselected experts' p_e·0 terms changes no sum, so skipping them is exact. */
__device__ __forceinline__ float dp_of(int32_t e, int32_t k, const int32_t *sel, int32_t n, const float *dg,
                                       float dot, float S) {
    float dp = 0.0f;
    for (int32_t j = 0; j < k; j++)
        if (moe_expert_clamped(sel, j, n) == e) dp = gln_dev_add(dp, __fdiv_rn(dg[j] - dot, S));
    return dp;
}

__global__ void moe_router_bwd_kernel(int64_t tokens, int32_t n, int32_t k, const float *logits,
                                      const int32_t *experts, const float *dgates, float *dlogits,
                                      gln_cuda_async_error_t *err) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tokens) return;
    const float *l = logits + t * n;
    const float *dg = dgates + t * k;
    const int32_t *sel = experts + t * k;
    float *dz = dlogits + t * n;
    float mx, sum;
    softmax_stats(l, n, &mx, &sum);
    float S = 0.0f;
    for (int32_t j = 0; j < k; j++) S = gln_dev_add(S, prob_of(l, moe_expert_at(sel, j, n, err), mx, sum));
    float dot = 0.0f;
    for (int32_t j = 0; j < k; j++) {
        const float g = __fdiv_rn(prob_of(l, moe_expert_clamped(sel, j, n), mx, sum), S);
        dot = gln_dev_add(dot, gln_dev_mul(dg[j], g));
    }
    float pdp = 0.0f;
    for (int32_t e = 0; e < n; e++) {
        const float dp = dp_of(e, k, sel, n, dg, dot, S);
        pdp = gln_dev_add(pdp, gln_dev_mul(prob_of(l, e, mx, sum), dp));
    }
    for (int32_t e = 0; e < n; e++) {
        const float dp = dp_of(e, k, sel, n, dg, dot, S);
        dz[e] = gln_dev_mul(prob_of(l, e, mx, sum), dp - pdp);
    }
}

extern "C" gln_status_t gln_cuda_moe_router_forward(gln_context_t *ctx, int64_t tokens, int32_t num_experts,
                                                    int32_t k, const float *logits, int32_t *experts,
                                                    float *gates) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const unsigned blocks = (unsigned)((tokens + 127) / 128);
    moe_router_fwd_kernel<<<blocks, 128, 0, s->stream>>>(tokens, num_experts, k, logits, experts, gates);
    return launched("gln_moe_router_forward", "moe_router_fwd_kernel");
}

extern "C" gln_status_t gln_cuda_moe_router_backward(gln_context_t *ctx, int64_t tokens, int32_t num_experts,
                                                     int32_t k, const float *logits, const int32_t *experts,
                                                     const float *dgates, float *dlogits) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const unsigned blocks = (unsigned)((tokens + 127) / 128);
    moe_router_bwd_kernel<<<blocks, 128, 0, s->stream>>>(tokens, num_experts, k, logits, experts, dgates,
                                                        dlogits, s->async_dev);
    return launched("gln_moe_router_backward", "moe_router_bwd_kernel");
}

/* ---- permutation plan -------------------------------------------------------------------- */

/* A stable counting sort of the (token, slot) pairs by expert, over many warps, no atomics:
 *   1. count   warp s counts its chunk of MOE_PLAN_CHUNK pairs into cnt[e·nseg + s]
 *   2. scan    exclusive scan of cnt in that (expert, chunk) order (cub): off[e·nseg + s] is the
 *              rank of chunk s's first pair of expert e in the expert-sorted order
 *   3. splits  m_splits[e] = the expert's pairs rounded up to align (padding rows end a block),
 *              then their exclusive scan (cub): first[e], the expert's first row
 *   4. rank    warp s again: a pair's row = first[e] + (off[e·nseg + s] − off[e·nseg]) + its rank
 *              among the chunk's pairs of e (warp ranks in pair order), counted in cnt's slots.
 * The rows are the CPU's, bit for bit: an expert's pairs in pair order. */
#define MOE_PLAN_CHUNK 256

/* rank = 0: count into cnt (zeroed); rank = 1: warp s sets cnt[e·nseg + s] to its first row for
 * each e, then advances it while writing each pair's row. */
__global__ void moe_plan_pass_kernel(int64_t pairs, int32_t E, int64_t nseg, int rank, const int32_t *experts,
                                     const int64_t *off, const int64_t *first, int64_t *cnt, int64_t *row_of,
                                     gln_cuda_async_error_t *err) {
    const int lane = threadIdx.x % 32;
    const int64_t s = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (s >= nseg) return; /* whole warps; no block barrier below */
    if (rank)
        for (int32_t e = lane; e < E; e += 32) {
            const int64_t at = (int64_t)e * nseg;
            cnt[at + s] = first[e] + off[at + s] - off[at];
        }
    __syncwarp();
    const unsigned lt = (1u << lane) - 1u;
    const int64_t end = (s + 1) * MOE_PLAN_CHUNK < pairs ? (s + 1) * MOE_PLAN_CHUNK : pairs;
    for (int64_t base = s * MOE_PLAN_CHUNK; base < end; base += 32) {
        const int64_t i = base + lane;
        const unsigned active = __ballot_sync(0xFFFFFFFFu, i < end);
        if (i < end) {
            /* the count pass records a bad expert, the rank pass clamps it the same way */
            const int32_t e = rank ? moe_expert_clamped(experts, i, E) : moe_expert_at(experts, i, E, err);
            const unsigned peers = __match_any_sync(active, e);
            int64_t *mine = cnt + (int64_t)e * nseg + s;
            if (rank) row_of[i] = *mine + __popc(peers & lt);
            __syncwarp(active);
            if (lane == __ffs(peers) - 1) *mine += __popc(peers);
        }
        __syncwarp();
    }
}

/* m_splits[e]: expert e's pairs (off[(e+1)·nseg] − off[e·nseg], the last up to pairs), padded */
__global__ void moe_plan_splits_kernel(int64_t pairs, int32_t E, int64_t nseg, int64_t align, const int64_t *off,
                                       int64_t *m_splits) {
    const int32_t e = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (e >= E) return;
    const int64_t end = e + 1 < E ? off[(int64_t)(e + 1) * nseg] : pairs;
    const int64_t total = end - off[(int64_t)e * nseg];
    m_splits[e] = (total + align - 1) / align * align;
}

extern "C" gln_status_t gln_cuda_moe_permute_plan(gln_context_t *ctx, int64_t tokens, int32_t num_experts,
                                                  int32_t k, int64_t align, const int32_t *experts,
                                                  int64_t *m_splits, int64_t *row_of) {
    static const char *fn = "gln_moe_permute_plan";
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int64_t pairs = tokens * k;
    const int64_t nseg = pairs > 0 ? (pairs + MOE_PLAN_CHUNK - 1) / MOE_PLAN_CHUNK : 1;
    const int64_t ncnt = nseg * num_experts;
    if (ncnt > INT32_MAX)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: %lld pairs x %d experts exceed the 2^31 counters "
                        "of the device plan", fn, (long long)pairs, (int)num_experts);
    size_t scan_bytes = 0, split_bytes = 0;
    GLN_TRY(gln_cuda_check(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, (const int64_t *)NULL, (int64_t *)NULL,
                                                         (int)ncnt, s->stream), fn, "cub::DeviceScan (size)"));
    GLN_TRY(gln_cuda_check(cub::DeviceScan::ExclusiveSum(NULL, split_bytes, (const int64_t *)NULL, (int64_t *)NULL,
                                                         (int)num_experts, s->stream), fn, "cub::DeviceScan (size)"));
    const size_t temp_bytes = scan_bytes > split_bytes ? scan_bytes : split_bytes;
    const size_t words = 2 * (size_t)ncnt + (size_t)num_experts;
    const size_t temp_at = (words * sizeof(int64_t) + 255) / 256 * 256;
    char *buf = NULL;
    GLN_TRY(gln_cuda_scratch_alloc(ctx, temp_at + temp_bytes, (void **)&buf, fn));
    int64_t *cnt = (int64_t *)buf, *off = cnt + ncnt, *first = off + ncnt;
    const unsigned blocks = (unsigned)((nseg + GLN_CUDA_THREADS / 32 - 1) / (GLN_CUDA_THREADS / 32));
    gln_status_t st = gln_cuda_check(cudaMemsetAsync(cnt, 0, (size_t)ncnt * sizeof(int64_t), s->stream), fn,
                                     "cudaMemsetAsync (plan counters)");
    if (st == GLN_STATUS_SUCCESS) {
        moe_plan_pass_kernel<<<blocks, GLN_CUDA_THREADS, 0, s->stream>>>(pairs, num_experts, nseg, 0, experts, NULL,
                                                                         NULL, cnt, NULL, s->async_dev);
        st = launched(fn, "moe_plan_pass_kernel (count)");
    }
    if (st == GLN_STATUS_SUCCESS)
        st = gln_cuda_check(cub::DeviceScan::ExclusiveSum(buf + temp_at, scan_bytes, cnt, off, (int)ncnt, s->stream),
                            fn, "cub::DeviceScan::ExclusiveSum (plan counts)");
    if (st == GLN_STATUS_SUCCESS) {
        moe_plan_splits_kernel<<<(unsigned)((num_experts + 255) / 256), 256, 0, s->stream>>>(
            pairs, num_experts, nseg, align, off, m_splits);
        st = launched(fn, "moe_plan_splits_kernel");
    }
    if (st == GLN_STATUS_SUCCESS)
        st = gln_cuda_check(cub::DeviceScan::ExclusiveSum(buf + temp_at, split_bytes, m_splits, first,
                                                          (int)num_experts, s->stream),
                            fn, "cub::DeviceScan::ExclusiveSum (expert rows)");
    if (st == GLN_STATUS_SUCCESS) {
        moe_plan_pass_kernel<<<blocks, GLN_CUDA_THREADS, 0, s->stream>>>(pairs, num_experts, nseg, 1, experts, off,
                                                                         first, cnt, row_of, s->async_dev);
        st = launched(fn, "moe_plan_pass_kernel (rank)");
    }
    gln_cuda_scratch_free(ctx, buf);
    return st;
}

/* ---- permute / unpermute ----------------------------------------------------------------- */

/* Copy one row's h elements between buffers: raw bits when the dtypes agree (NaN payloads kept,
 * as the CPU's memcpy), else widened exactly and rounded once. */
__device__ __forceinline__ void copy_elems(const void *src, int sdt, int64_t sr, void *dst, int ddt, int64_t dr,
                                           int64_t h) {
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
        if (sdt == ddt && sdt == GLN_DTYPE_FP32)
            ((uint32_t *)dst)[dr * h + c] = ((const uint32_t *)src)[sr * h + c];
        else if (sdt == ddt)
            ((uint16_t *)dst)[dr * h + c] = ((const uint16_t *)src)[sr * h + c];
        else
            gln_dev_store(dst, ddt, (size_t)(dr * h + c), gln_dev_load(src, sdt, (size_t)(sr * h + c)));
    }
}

/* prows: rows of the permuted tensor (>= pairs with an aligned plan's padding rows). */
__global__ void moe_permute_kernel(int64_t pairs, int64_t prows, int32_t k, const int64_t *row_of, const void *x,
                                   int xdt, void *xp, int pdt, int64_t h, gln_cuda_async_error_t *err) {
    for (int64_t i = blockIdx.x; i < pairs; i += gridDim.x) {
        const int64_t r = moe_row_at(row_of, i, prows, err);
        if (r >= 0) copy_elems(x, xdt, i / k, xp, pdt, r, h);
    }
}

/* out[t] = Σ_j w_j · in[row_of[t·k+j]] (w_j = gates[t·k+j], or 1 without gates): FP32 in slot
 * order from 0, one rounding, as the CPU's axpy_row / store_row.  A bad row adds nothing. */
__global__ void moe_gather_sum_kernel(int64_t tokens, int64_t prows, int32_t k, const int64_t *row_of,
                                      const float *gates, const void *in, int idt, void *out, int odt, int64_t h,
                                      gln_cuda_async_error_t *err) {
    for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
        for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
            float acc = 0.0f;
            for (int32_t j = 0; j < k; j++) {
                const int64_t r = moe_row_at(row_of, t * k + j, prows, err);
                if (r < 0) continue;
                const float w = gates ? gates[t * k + j] : 1.0f;
                acc = gln_dev_add(acc, gln_dev_mul(w, gln_dev_load(in, idt, (size_t)(r * h + c))));
            }
            gln_dev_store(out, odt, (size_t)(t * h + c), acc);
        }
    }
}

static unsigned row_blocks(int64_t rows) {
    return (unsigned)(rows < 65535 * 4 ? (rows > 0 ? rows : 1) : 65535 * 4);
}

static unsigned row_threads(int64_t h) { return h >= 256 ? 256 : h > 64 ? 128 : 64; }

/* ---- 16-byte vectors --------------------------------------------------------------------------
 * The row kernels below move 8 elements per thread and access: one 16-byte load of a bf16 / fp16
 * vector, two of an FP32 one.  They need every row to start on 16 bytes: 8 | the row length and
 * 16-byte aligned bases (vec_ok); other shapes take the scalar kernels, one element at a time.
 * Both paths do the same per-element operations, so they give the same bits. */
#define MOE_VEC 8

static int vec_ok(int64_t len, const void *a, const void *b, const void *c) {
    const uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return len % MOE_VEC == 0 && (bits & 15u) == 0;
}

/* elements i .. i+7 of a fp32 / bf16 / fp16 buffer (i a multiple of 8) as FP32 (exact) */
__device__ __forceinline__ void load8(const void *p, int dt, size_t i, float v[MOE_VEC]) {
    if (dt == GLN_DTYPE_FP32) {
        const float4 a = ((const float4 *)p)[i / 4], b = ((const float4 *)p)[i / 4 + 1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        return;
    }
    const uint4 u = ((const uint4 *)p)[i / 8];
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    for (int k = 0; k < 4; k++) {
        const uint16_t lo = (uint16_t)(w[k] & 0xFFFFu), hi = (uint16_t)(w[k] >> 16);
        v[2 * k] = dt == GLN_DTYPE_BF16 ? gln_bf16_bits_to_f32(lo) : gln_fp16_bits_to_f32(lo);
        v[2 * k + 1] = dt == GLN_DTYPE_BF16 ? gln_bf16_bits_to_f32(hi) : gln_fp16_bits_to_f32(hi);
    }
}

__device__ __forceinline__ uint16_t half_bits(float v, int dt) {
    return dt == GLN_DTYPE_BF16 ? gln_f32_to_bf16_bits(v) : gln_f32_to_fp16_bits(v);
}

/* store v rounded (RNE) as elements i .. i+7 */
__device__ __forceinline__ void store8(void *p, int dt, size_t i, const float v[MOE_VEC]) {
    if (dt == GLN_DTYPE_FP32) {
        ((float4 *)p)[i / 4] = make_float4(v[0], v[1], v[2], v[3]);
        ((float4 *)p)[i / 4 + 1] = make_float4(v[4], v[5], v[6], v[7]);
        return;
    }
    uint32_t w[4];
    for (int k = 0; k < 4; k++) w[k] = (uint32_t)half_bits(v[2 * k], dt) | (uint32_t)half_bits(v[2 * k + 1], dt) << 16;
    ((uint4 *)p)[i / 8] = make_uint4(w[0], w[1], w[2], w[3]);
}

/* Threads for a row of n vectors: whole warps, at most 256. */
static unsigned vec_threads(int64_t n) {
    const int64_t t = (n + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > 256 ? 256 : t);
}

/* 8 elements i .. i+7 from src (element si) to dst (element di), raw bits when the dtypes agree
 * (NaN payloads kept), else widened exactly and rounded once: copy_elems, 8 at a time. */
__device__ __forceinline__ void copy8(const void *src, int sdt, size_t si, void *dst, int ddt, size_t di) {
    if (sdt == ddt && sdt == GLN_DTYPE_FP32) {
        ((uint4 *)dst)[di / 4] = ((const uint4 *)src)[si / 4];
        ((uint4 *)dst)[di / 4 + 1] = ((const uint4 *)src)[si / 4 + 1];
    } else if (sdt == ddt) {
        ((uint4 *)dst)[di / 8] = ((const uint4 *)src)[si / 8];
    } else {
        float v[MOE_VEC];
        load8(src, sdt, si, v);
        store8(dst, ddt, di, v);
    }
}

/* moe_permute_kernel, 8 elements per thread and access */
__global__ void moe_permute_vec_kernel(int64_t pairs, int64_t prows, int32_t k, const int64_t *row_of,
                                       const void *x, int xdt, void *xp, int pdt, int64_t h,
                                       gln_cuda_async_error_t *err) {
    for (int64_t i = blockIdx.x; i < pairs; i += gridDim.x) {
        const int64_t r = moe_row_at(row_of, i, prows, err);
        if (r < 0) continue;
        const int64_t t = i / k;
        for (int64_t c = (int64_t)threadIdx.x * MOE_VEC; c < h; c += (int64_t)blockDim.x * MOE_VEC)
            copy8(x, xdt, (size_t)(t * h + c), xp, pdt, (size_t)(r * h + c));
    }
}

/* moe_gather_sum_kernel, 8 elements per thread and access: the same operations per element */
__global__ void moe_gather_sum_vec_kernel(int64_t tokens, int64_t prows, int32_t k, const int64_t *row_of,
                                          const float *gates, const void *in, int idt, void *out, int odt,
                                          int64_t h, gln_cuda_async_error_t *err) {
    for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
        for (int64_t c = (int64_t)threadIdx.x * MOE_VEC; c < h; c += (int64_t)blockDim.x * MOE_VEC) {
            float acc[MOE_VEC];
            for (int q = 0; q < MOE_VEC; q++) acc[q] = 0.0f;
            for (int32_t j = 0; j < k; j++) {
                const int64_t r = moe_row_at(row_of, t * k + j, prows, err);
                if (r < 0) continue;
                const float w = gates ? gates[t * k + j] : 1.0f;
                float v[MOE_VEC];
                load8(in, idt, (size_t)(r * h + c), v);
                for (int q = 0; q < MOE_VEC; q++) acc[q] = gln_dev_add(acc[q], gln_dev_mul(w, v[q]));
            }
            store8(out, odt, (size_t)(t * h + c), acc);
        }
    }
}

/* moe_unpermute_bwd_kernel, 8 elements per thread and access: dyp bitwise as the scalar path;
 * dgates sums the 8 products of a vector in order, then the same fixed warp / block tree
 * (deterministic; a different order than the scalar path, within the same tolerance). */
__global__ void moe_unpermute_bwd_vec_kernel(int64_t tokens, int64_t prows, int32_t k, const int64_t *row_of,
                                             const float *gates, const void *yp, int ydt, const void *dy,
                                             int dydt, void *dyp, int pdt, float *dgates, int64_t h,
                                             gln_cuda_async_error_t *err) {
    __shared__ float part[GLN_CUDA_THREADS / 32];
    const int64_t pairs = tokens * k;
    for (int64_t i = blockIdx.x; i < pairs; i += gridDim.x) {
        const int64_t t = i / k;
        const int64_t r = moe_row_at(row_of, i, prows, err);
        const float g = gates[i];
        float dot = 0.0f;
        if (r >= 0)
            for (int64_t c = (int64_t)threadIdx.x * MOE_VEC; c < h; c += (int64_t)blockDim.x * MOE_VEC) {
                float d[MOE_VEC], y[MOE_VEC], o[MOE_VEC];
                load8(dy, dydt, (size_t)(t * h + c), d);
                load8(yp, ydt, (size_t)(r * h + c), y);
                for (int q = 0; q < MOE_VEC; q++) {
                    dot = fmaf(d[q], y[q], dot);
                    o[q] = gln_dev_mul(g, d[q]);
                }
                store8(dyp, pdt, (size_t)(r * h + c), o);
            }
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xFFFFFFFFu, dot, off);
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = dot;
        __syncthreads();
        if (threadIdx.x == 0) {
            float sum = 0.0f;
            for (int wi = 0; wi < (int)(blockDim.x / 32); wi++) sum += part[wi];
            dgates[i] = sum;
        }
        __syncthreads();
    }
}

/* out[t] = Σ_j w_j · in[row_of[t·k+j]] on the stream: vectors where the rows allow. */
static gln_status_t gather_sum(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                               const int64_t *row_of, const float *gates, const gln_tensor_t *in,
                               gln_tensor_t *out) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    if (vec_ok(in->cols, in->data, out->data, NULL)) {
        moe_gather_sum_vec_kernel<<<row_blocks(tokens), vec_threads(in->cols / MOE_VEC), 0, s->stream>>>(
            tokens, in->rows, k, row_of, gates, in->data, (int)in->dtype, out->data, (int)out->dtype, in->cols,
            s->async_dev);
        return launched(call, "moe_gather_sum_vec_kernel");
    }
    moe_gather_sum_kernel<<<row_blocks(tokens), row_threads(in->cols), 0, s->stream>>>(
        tokens, in->rows, k, row_of, gates, in->data, (int)in->dtype, out->data, (int)out->dtype, in->cols,
        s->async_dev);
    return launched(call, "moe_gather_sum_kernel");
}

extern "C" gln_status_t gln_cuda_moe_permute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                             const gln_tensor_t *x, gln_tensor_t *xp) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int64_t pairs = tokens * k;
    if (vec_ok(x->cols, x->data, xp->data, NULL)) {
        moe_permute_vec_kernel<<<row_blocks(pairs), vec_threads(x->cols / MOE_VEC), 0, s->stream>>>(
            pairs, xp->rows, k, row_of, x->data, (int)x->dtype, xp->data, (int)xp->dtype, x->cols, s->async_dev);
        return launched("gln_moe_permute", "moe_permute_vec_kernel");
    }
    moe_permute_kernel<<<row_blocks(pairs), row_threads(x->cols), 0, s->stream>>>(
        pairs, xp->rows, k, row_of, x->data, (int)x->dtype, xp->data, (int)xp->dtype, x->cols, s->async_dev);
    return launched("gln_moe_permute", "moe_permute_kernel");
}

extern "C" gln_status_t gln_cuda_moe_permute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                                      const int64_t *row_of, const gln_tensor_t *dxp,
                                                      gln_tensor_t *dx) {
    return gather_sum(ctx, "gln_moe_permute_backward", tokens, k, row_of, NULL, dxp, dx);
}

extern "C" gln_status_t gln_cuda_moe_unpermute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                               const float *gates, const gln_tensor_t *yp, gln_tensor_t *y) {
    return gather_sum(ctx, "gln_moe_unpermute", tokens, k, row_of, gates, yp, y);
}

/* One block per pair (t, j) with row r: dyp[r] = g·dy[t] (the CPU's operations, bitwise) and
 * dgates[t·k+j] = <dy[t], yp[r]> (per-thread strided partial sums, then a fixed-order tree:
 * deterministic, within a dot-product tolerance of the CPU's sequential sum). */
__global__ void moe_unpermute_bwd_kernel(int64_t tokens, int64_t prows, int32_t k, const int64_t *row_of,
                                         const float *gates, const void *yp, int ydt, const void *dy, int dydt,
                                         void *dyp, int pdt, float *dgates, int64_t h,
                                         gln_cuda_async_error_t *err) {
    __shared__ float part[GLN_CUDA_THREADS / 32];
    const int64_t pairs = tokens * k;
    for (int64_t i = blockIdx.x; i < pairs; i += gridDim.x) {
        const int64_t t = i / k;
        const int64_t r = moe_row_at(row_of, i, prows, err);
        const float g = gates[i];
        float dot = 0.0f;
        if (r >= 0)
            for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
                const float d = gln_dev_load(dy, dydt, (size_t)(t * h + c));
                dot = fmaf(d, gln_dev_load(yp, ydt, (size_t)(r * h + c)), dot);
                gln_dev_store(dyp, pdt, (size_t)(r * h + c), gln_dev_mul(g, d));
            }
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xFFFFFFFFu, dot, off);
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = dot;
        __syncthreads();
        if (threadIdx.x == 0) {
            float sum = 0.0f;
            for (int wi = 0; wi < (int)(blockDim.x / 32); wi++) sum += part[wi];
            dgates[i] = sum;
        }
        __syncthreads();
    }
}

extern "C" gln_status_t gln_cuda_moe_unpermute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                                        const int64_t *row_of, const float *gates,
                                                        const gln_tensor_t *yp, const gln_tensor_t *dy,
                                                        gln_tensor_t *dyp, float *dgates) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int64_t pairs = tokens * k;
    if (vec_ok(yp->cols, yp->data, dy->data, dyp->data)) {
        moe_unpermute_bwd_vec_kernel<<<row_blocks(pairs), vec_threads(yp->cols / MOE_VEC), 0, s->stream>>>(
            tokens, yp->rows, k, row_of, gates, yp->data, (int)yp->dtype, dy->data, (int)dy->dtype, dyp->data,
            (int)dyp->dtype, dgates, yp->cols, s->async_dev);
        return launched("gln_moe_unpermute_backward", "moe_unpermute_bwd_vec_kernel");
    }
    moe_unpermute_bwd_kernel<<<row_blocks(pairs), GLN_CUDA_THREADS, 0, s->stream>>>(
        tokens, yp->rows, k, row_of, gates, yp->data, (int)yp->dtype, dy->data, (int)dy->dtype, dyp->data,
        (int)dyp->dtype, dgates, yp->cols, s->async_dev);
    return launched("gln_moe_unpermute_backward", "moe_unpermute_bwd_kernel");
}

/* ---- activations ------------------------------------------------------------------------- */

/* The per-element math is cuda_act.cuh's (gln_act_fwd / gln_act_bwd), shared with the
 * quantizers' activation-on-load, so that gln_activation_forward_quantize gives the bits of this
 * kernel followed by the quantize.  The scalar and the vector kernels call the same functions
 * (same operations, same bits). */
__device__ __forceinline__ float act_fwd(int act, float a, float b) { return gln_act_fwd(act, a, b); }

__device__ __forceinline__ void act_bwd(int act, float a, float b, float d, float *da, float *db) {
    gln_act_bwd(act, a, b, d, da, db);
}

/* Element (r, c) of the [rows, h] output: in is [rows, cols] (cols = 2h for SwiGLU). */
__global__ void moe_act_fwd_kernel(int act, int64_t rows, int64_t cols, int64_t h, const void *in, int idt,
                                   void *out, int odt) {
    const size_t n = (size_t)(rows * h), stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int64_t r = (int64_t)(i / (size_t)h), c = (int64_t)(i % (size_t)h);
        const float a = gln_dev_load(in, idt, (size_t)(r * cols + c));
        const float b = act == GLN_ACT_GELU ? 0.0f : gln_dev_load(in, idt, (size_t)(r * cols + h + c));
        gln_dev_store(out, odt, i, act_fwd(act, a, b));
    }
}

__global__ void moe_act_bwd_kernel(int act, int64_t rows, int64_t cols, int64_t h, const void *in, int idt,
                                   const void *dout, int ddt, void *din, int gdt) {
    const size_t n = (size_t)(rows * h), stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int64_t r = (int64_t)(i / (size_t)h), c = (int64_t)(i % (size_t)h);
        const float a = gln_dev_load(in, idt, (size_t)(r * cols + c));
        const float b = act == GLN_ACT_GELU ? 0.0f : gln_dev_load(in, idt, (size_t)(r * cols + h + c));
        float da, db;
        act_bwd(act, a, b, gln_dev_load(dout, ddt, i), &da, &db);
        gln_dev_store(din, gdt, (size_t)(r * cols + c), da);
        if (act != GLN_ACT_GELU) gln_dev_store(din, gdt, (size_t)(r * cols + h + c), db);
    }
}

/* The vector kernels: thread i owns the vectors i, i + stride, ... of the [rows, h / 8] grid of
 * output vectors; (r, c) advance by the stride's fixed (rows, vectors) split -- no division in
 * the loop. */
struct vec_walk {
    int64_t r, c, dr, dc, hv;
    __device__ vec_walk(int64_t hv_) : hv(hv_) {
        const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, st = (int64_t)gridDim.x * blockDim.x;
        r = i / hv, c = i % hv, dr = st / hv, dc = st % hv;
    }
    __device__ void next() {
        r += dr, c += dc;
        if (c >= hv) c -= hv, r++;
    }
};

__global__ void moe_act_fwd_vec_kernel(int act, int64_t rows, int64_t cols, int64_t h, const void *in, int idt,
                                       void *out, int odt) {
    for (vec_walk w(h / MOE_VEC); w.r < rows; w.next()) {
        const int64_t c = w.c * MOE_VEC;
        float a[MOE_VEC], b[MOE_VEC], o[MOE_VEC];
        load8(in, idt, (size_t)(w.r * cols + c), a);
        if (act != GLN_ACT_GELU) load8(in, idt, (size_t)(w.r * cols + h + c), b);
        else
            for (int q = 0; q < MOE_VEC; q++) b[q] = 0.0f;
        for (int q = 0; q < MOE_VEC; q++) o[q] = act_fwd(act, a[q], b[q]);
        store8(out, odt, (size_t)(w.r * h + c), o);
    }
}

__global__ void moe_act_bwd_vec_kernel(int act, int64_t rows, int64_t cols, int64_t h, const void *in, int idt,
                                       const void *dout, int ddt, void *din, int gdt) {
    for (vec_walk w(h / MOE_VEC); w.r < rows; w.next()) {
        const int64_t c = w.c * MOE_VEC;
        float a[MOE_VEC], b[MOE_VEC], d[MOE_VEC], da[MOE_VEC], db[MOE_VEC];
        load8(in, idt, (size_t)(w.r * cols + c), a);
        if (act != GLN_ACT_GELU) load8(in, idt, (size_t)(w.r * cols + h + c), b);
        else
            for (int q = 0; q < MOE_VEC; q++) b[q] = 0.0f;
        load8(dout, ddt, (size_t)(w.r * h + c), d);
        for (int q = 0; q < MOE_VEC; q++) act_bwd(act, a[q], b[q], d[q], &da[q], &db[q]);
        store8(din, gdt, (size_t)(w.r * cols + c), da);
        if (act != GLN_ACT_GELU) store8(din, gdt, (size_t)(w.r * cols + h + c), db);
    }
}

extern "C" gln_status_t gln_cuda_activation_forward(gln_context_t *ctx, gln_activation_t act,
                                                    const gln_tensor_t *in, gln_tensor_t *out) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int64_t h = out->cols;
    if (vec_ok(h, in->data, out->data, NULL)) {
        moe_act_fwd_vec_kernel<<<gln_dev_blocks((size_t)(in->rows * (h / MOE_VEC)), GLN_CUDA_THREADS),
                                 GLN_CUDA_THREADS, 0, s->stream>>>((int)act, in->rows, in->cols, h, in->data,
                                                                   (int)in->dtype, out->data, (int)out->dtype);
        return launched("gln_activation_forward", "moe_act_fwd_vec_kernel");
    }
    moe_act_fwd_kernel<<<gln_dev_blocks((size_t)(in->rows * h), GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0,
                         s->stream>>>((int)act, in->rows, in->cols, h, in->data, (int)in->dtype, out->data,
                                      (int)out->dtype);
    return launched("gln_activation_forward", "moe_act_fwd_kernel");
}

extern "C" gln_status_t gln_cuda_activation_backward(gln_context_t *ctx, gln_activation_t act,
                                                     const gln_tensor_t *in, const gln_tensor_t *dout,
                                                     gln_tensor_t *din) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int64_t h = dout->cols;
    if (vec_ok(h, in->data, dout->data, din->data)) {
        moe_act_bwd_vec_kernel<<<gln_dev_blocks((size_t)(in->rows * (h / MOE_VEC)), GLN_CUDA_THREADS),
                                 GLN_CUDA_THREADS, 0, s->stream>>>((int)act, in->rows, in->cols, h, in->data,
                                                                   (int)in->dtype, dout->data, (int)dout->dtype,
                                                                   din->data, (int)din->dtype);
        return launched("gln_activation_backward", "moe_act_bwd_vec_kernel");
    }
    moe_act_bwd_kernel<<<gln_dev_blocks((size_t)(in->rows * h), GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0,
                         s->stream>>>((int)act, in->rows, in->cols, h, in->data, (int)in->dtype, dout->data,
                                      (int)dout->dtype, din->data, (int)din->dtype);
    return launched("gln_activation_backward", "moe_act_bwd_kernel");
}
