/* The CUDA kernels of the training tool's own ops (train_ops.h; the CPU loops in train_ops.c are
 * the reference).  Every kernel runs on the context's stream; none waits for the host.
 *
 * Where the CPU loop's result is reproduced bit for bit, the kernel does the same FP32 operations
 * in the same order with the explicitly rounded intrinsics (__fadd_rn, __fmul_rn, ...), which
 * nvcc never contracts into an FMA.  Sums whose CPU order is one long chain (the bias gradient,
 * the loss sum) are split into fixed chunks summed in a fixed order instead: deterministic run to
 * run, within rounding of the CPU's chain. */
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "cli.h"
#include "train_ops_cuda.h"
}

#define THREADS 256

static cudaStream_t stream_of(gln_context_t *ctx) { return (cudaStream_t)gln_context_stream(ctx); }

static gln_status_t check(cudaError_t err, const char *what) {
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err == cudaSuccess) return GLN_STATUS_SUCCESS;
    return tool_fail(GLN_STATUS_BACKEND_ERROR, "grouplin train: %s failed: %s", what, cudaGetErrorString(err));
}

static unsigned blocks_for(int64_t n, int per) {
    int64_t b = (n + per - 1) / per;
    if (b < 1) b = 1;
    if (b > 65535 * 16) b = 65535 * 16;
    return (unsigned)b;
}

extern "C" gln_status_t topc_zero(gln_context_t *ctx, void *p, size_t bytes) {
    if (!bytes) return GLN_STATUS_SUCCESS;
    return check(cudaMemsetAsync(p, 0, bytes, stream_of(ctx)), "cudaMemsetAsync");
}

/* ---- the step clock ------------------------------------------------------------------------- */

__global__ void clock_kernel(top_clock_t *c, int reset) {
    if (reset) {
        c->step = -1;
        c->bc1 = c->bc2 = 0.0f;
        return;
    }
    c->step++;
    c->bc1 = (float)(1.0 - pow((double)TOP_ADAM_BETA1, (double)(c->step + 1)));
    c->bc2 = (float)(1.0 - pow((double)TOP_ADAM_BETA2, (double)(c->step + 1)));
}

extern "C" gln_status_t topc_clock(gln_context_t *ctx, top_clock_t *clock, int reset) {
    clock_kernel<<<1, 1, 0, stream_of(ctx)>>>(clock, reset);
    return check(cudaSuccess, "clock_kernel");
}

/* ---- embedding ------------------------------------------------------------------------------ */

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* One block per token row (grid-stride), threads over the columns (float4 when VEC: H a multiple
 * of 4 and 16-byte aligned bases): the C table rows come from L2 (C·256·H floats), x is written
 * once, coalesced.  The sum is the CPU's: from 0, in table order. */
template <int VEC>
__global__ void embed_kernel(const float *emb, const uint8_t *bytes, int64_t T, int64_t C, int64_t H, float *x) {
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const uint8_t *bt = bytes + t * C;
        if (VEC) {
            float4 *xt = (float4 *)(x + t * H);
            for (int64_t h = threadIdx.x; h < H / 4; h += blockDim.x) {
                float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                for (int64_t c = 0; c < C; c++) {
                    const float4 e = ((const float4 *)(emb + (c * 256 + bt[c]) * H))[h];
                    acc.x = __fadd_rn(acc.x, e.x);
                    acc.y = __fadd_rn(acc.y, e.y);
                    acc.z = __fadd_rn(acc.z, e.z);
                    acc.w = __fadd_rn(acc.w, e.w);
                }
                xt[h] = acc;
            }
        } else {
            for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
                float acc = 0.0f;
                for (int64_t c = 0; c < C; c++) acc = __fadd_rn(acc, emb[(c * 256 + bt[c]) * H + h]);
                x[t * H + h] = acc;
            }
        }
    }
}

extern "C" gln_status_t topc_embed(gln_context_t *ctx, const float *emb, const uint8_t *bytes, int64_t T,
                                   int64_t C, int64_t H, float *x) {
    if (T * H <= 0) return GLN_STATUS_SUCCESS;
    const int vec = (H & 3) == 0 && aligned16(emb) && aligned16(x);
    const int64_t cols = vec ? H / 4 : H;
    const unsigned threads = cols >= 256 ? 256 : cols > 64 ? 128 : 64;
    const unsigned blocks = (unsigned)(T < 65535 * 8 ? T : 65535 * 8);
    if (vec) embed_kernel<1><<<blocks, threads, 0, stream_of(ctx)>>>(emb, bytes, T, C, H, x);
    else embed_kernel<0><<<blocks, threads, 0, stream_of(ctx)>>>(emb, bytes, T, C, H, x);
    return check(cudaSuccess, "embed_kernel");
}

/* ---- embedding backward: a stable grouping of the (token, position) pairs, then segmented sums

   gemb[k, :] for key k = c·256 + v is the sum, in increasing t, of dx[t, :] over the tokens t with
   bytes[t·C + c] == v.  The T·C pairs are grouped by key ONCE per call, keeping token order
   inside each key, into list[] (the token indices, key after key), then each key's rows summed
   (the CPU loop's sum order, so the result is bitwise the CPU's):

     ebw_count    block (chunk, c): per-byte counts of the EBW_CHUNK tokens of chunk at position c
                  (shared-memory atomics: counts do not depend on the order), stored key-major:
                  off[k·nchunks + chunk].
     ebw_scan     one block: off[] := its exclusive prefix sum, over N = C·256·nchunks + 1 entries
                  (the last counts as 0, so it receives T·C).  Key k then owns list positions
                  [off[k·nchunks], off[(k+1)·nchunks]), and chunk j of key k starts at
                  off[k·nchunks + j], after every earlier chunk of the same key.
     ebw_scatter  block (chunk, c): the chunk's tokens 256 at a time, in token order; each token's
                  rank among the earlier tokens of the chunk with the same byte is the sum of
                  (a) the running count of the earlier rounds, (b) the counts of the earlier warps
                  of this round, (c) the earlier lanes of its own warp (__match_any_sync).  So
                  list[] holds each key's tokens in increasing t: a stable grouping.
     ebw_sum      block (key, column chunk), one thread per column (a float4 of 4 columns with
                  VEC): the key's token indices are staged through shared memory EBW_TILE at a
                  time; each thread fetches its column of the rows EBW_UNROLL at a time with
                  cp.async, two batches in flight, and adds them in token order -- so a long
                  list keeps many loads in flight instead of waiting on each -- with
                  __fadd_rn from 0.0f (from gemb's value when accumulating): the CPU loop's
                  operations in the CPU loop's order, bitwise.  A key without tokens writes 0 (keeps
                  its value when accumulating).

   Scratch (off[] and list[], 4·(N + T·C) bytes) is stream-ordered (cudaMallocAsync /
   cudaFreeAsync, like topc_dlogits' partial sums), so a captured step records it as graph memory
   nodes: no host synchronization and no cudaMalloc inside the call.  Traffic: bytes read twice
   (2·T·C), list written and read once (8·T·C), off[] a few times (~16·C·256·T/EBW_CHUNK), dx read
   once per position (4·T·C·H, from L2 or HBM), gemb written once (4·C·256·H); 4 kernels. */

#define EBW_CHUNK 1024 /* tokens per counting / scatter block */
#define EBW_TILE 1024  /* token indices staged in shared memory per step of ebw_sum */
#define EBW_UNROLL 16  /* rows per cp.async batch of ebw_sum (two batches in flight) */
#define EBW_SUM_THREADS 64 /* columns (or float4 columns) per ebw_sum block */
#define EBW_SCAN_THREADS 1024

__global__ void ebw_count_kernel(const uint8_t *bytes, int64_t T, int64_t C, int nchunks, int *off) {
    __shared__ int hist[256];
    const int64_t c = blockIdx.y, t0 = (int64_t)blockIdx.x * EBW_CHUNK;
    hist[threadIdx.x] = 0;
    __syncthreads();
    for (int64_t t = t0 + threadIdx.x; t < t0 + EBW_CHUNK && t < T; t += 256) atomicAdd(&hist[bytes[t * C + c]], 1);
    __syncthreads();
    off[(c * 256 + threadIdx.x) * nchunks + blockIdx.x] = hist[threadIdx.x];
}

/* One block of EBW_SCAN_THREADS: thread i scans the contiguous slice [i·per, (i+1)·per) after
 * the block's exclusive scan of the slice totals.  Entry n - 1 is read as 0. */
__global__ void ebw_scan_kernel(int *off, int64_t n) {
    __shared__ int warp_total[EBW_SCAN_THREADS / 32];
    const int64_t per = (n + EBW_SCAN_THREADS - 1) / EBW_SCAN_THREADS;
    const int64_t a = (int64_t)threadIdx.x * per, b = a + per < n ? a + per : n;
    int sum = 0;
    for (int64_t i = a; i < b; i++) sum += i < n - 1 ? off[i] : 0;
    /* inclusive scan of sum over the block: within each warp, then over the warp totals */
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    int incl = sum;
    for (int d = 1; d < 32; d <<= 1) {
        const int up = __shfl_up_sync(0xFFFFFFFFu, incl, d);
        if (lane >= d) incl += up;
    }
    if (lane == 31) warp_total[wid] = incl;
    __syncthreads();
    if (wid == 0) {
        int w = warp_total[lane]; /* EBW_SCAN_THREADS / 32 == 32 warps */
        for (int d = 1; d < 32; d <<= 1) {
            const int up = __shfl_up_sync(0xFFFFFFFFu, w, d);
            if (lane >= d) w += up;
        }
        warp_total[lane] = w; /* inclusive over warps */
    }
    __syncthreads();
    int run = incl - sum + (wid > 0 ? warp_total[wid - 1] : 0); /* exclusive start of this slice */
    for (int64_t i = a; i < b; i++) {
        const int v = i < n - 1 ? off[i] : 0;
        off[i] = run;
        run += v;
    }
}

__global__ void ebw_scatter_kernel(const uint8_t *bytes, int64_t T, int64_t C, int nchunks, const int *off,
                                   int *list) {
    __shared__ int run[256];            /* per byte: list position of the chunk's next token */
    __shared__ int warp_count[8][256];  /* per warp of the current round, per byte: its tokens */
    const int64_t c = blockIdx.y, t0 = (int64_t)blockIdx.x * EBW_CHUNK;
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    run[threadIdx.x] = off[(c * 256 + threadIdx.x) * nchunks + blockIdx.x];
    for (int w = 0; w < 8; w++) warp_count[w][threadIdx.x] = 0;
    __syncthreads();
    for (int64_t r = t0; r < t0 + EBW_CHUNK && r < T; r += 256) {
        const int64_t t = r + threadIdx.x;
        const int valid = t < T;
        const int b = valid ? bytes[t * C + c] : -1; /* past T: a group of its own, never written */
        const unsigned same = __match_any_sync(0xFFFFFFFFu, b);
        if (valid && lane == __ffs(same) - 1) warp_count[wid][b] = __popc(same);
        __syncthreads();
        if (valid) {
            int pos = run[b] + __popc(same & ((1u << lane) - 1u));
            for (int w = 0; w < wid; w++) pos += warp_count[w][b];
            list[pos] = (int)t;
        }
        __syncthreads();
        int round = 0;
        for (int w = 0; w < 8; w++) {
            round += warp_count[w][threadIdx.x];
            warp_count[w][threadIdx.x] = 0;
        }
        run[threadIdx.x] += round;
        __syncthreads();
    }
}

__device__ __forceinline__ void ebw_add(float &acc, float v) { acc = __fadd_rn(acc, v); }
__device__ __forceinline__ void ebw_add(float4 &acc, float4 v) {
    acc.x = __fadd_rn(acc.x, v.x);
    acc.y = __fadd_rn(acc.y, v.y);
    acc.z = __fadd_rn(acc.z, v.z);
    acc.w = __fadd_rn(acc.w, v.w);
}

/* T4 = float4 with cols = H / 4 (H a multiple of 4, dx and gemb 16-byte aligned), or float with
 * cols = H; row t of dx is ((const T4 *)(dx + t·H))[0, cols).  blockDim.x == EBW_SUM_THREADS.
 *
 * The rows are fetched with cp.async into this thread's own slots of stage[] (no registers held,
 * so EBW_UNROLL loads per batch are really in flight -- register-held unrolled loads are
 * interleaved with the adds by ptxas, ~4 in flight), two batches deep: batch b + 1 is issued
 * before batch b is waited for and added.  Each thread reads back only the slots it filled
 * itself, after __pipeline_wait_prior, so no barrier is needed around stage[]; the adds of batch
 * b - 1 (which consumed the slots that batch b + 1 overwrites) precede the issue in program
 * order and needed their shared loads complete. */
template <typename T4>
__global__ void __launch_bounds__(EBW_SUM_THREADS)
ebw_sum_kernel(const float *dx, const int *off, const int *list, int nchunks, int64_t H, int64_t cols,
               int accumulate, float *gemb) {
    __shared__ int tile[EBW_TILE];
    __shared__ T4 stage[2][EBW_UNROLL][EBW_SUM_THREADS];
    const int64_t key = blockIdx.x;
    const int start = off[key * nchunks], end = off[(key + 1) * nchunks];
    const int64_t col = (int64_t)blockIdx.y * EBW_SUM_THREADS + threadIdx.x;
    const int live = col < cols;
    T4 acc = T4(); /* value-initialized: +0.0f in every lane, the CPU loop's memset */
    if (accumulate && live) acc = ((const T4 *)(gemb + key * H))[col]; /* the sums continue */
    for (int base = start; base < end; base += EBW_TILE) {
        const int n = end - base < EBW_TILE ? end - base : EBW_TILE;
        for (int i = threadIdx.x; i < n; i += EBW_SUM_THREADS) tile[i] = list[base + i];
        __syncthreads();
        if (live) {
            const int batches = (n + EBW_UNROLL - 1) / EBW_UNROLL;
            /* issue batch 0: rows [0, min(EBW_UNROLL, n)) of the tile */
            for (int u = 0; u < EBW_UNROLL && u < n; u++)
                __pipeline_memcpy_async(&stage[0][u][threadIdx.x], (const T4 *)(dx + (int64_t)tile[u] * H) + col,
                                        sizeof(T4));
            __pipeline_commit();
            for (int b = 0; b < batches; b++) {
                const int next = (b + 1) * EBW_UNROLL;
                for (int u = 0; u < EBW_UNROLL && next + u < n; u++)
                    __pipeline_memcpy_async(&stage[(b + 1) & 1][u][threadIdx.x],
                                            (const T4 *)(dx + (int64_t)tile[next + u] * H) + col, sizeof(T4));
                __pipeline_commit();        /* possibly an empty group: keeps the count below exact */
                __pipeline_wait_prior(1);   /* every group but the newest is complete: batch b */
                const int rows = n - b * EBW_UNROLL < EBW_UNROLL ? n - b * EBW_UNROLL : EBW_UNROLL;
                for (int u = 0; u < rows; u++) ebw_add(acc, stage[b & 1][u][threadIdx.x]); /* token order */
            }
        }
        __syncthreads(); /* tile[] is reloaded next */
    }
    if (live) ((T4 *)(gemb + key * H))[col] = acc;
}

extern "C" gln_status_t topc_embed_backward(gln_context_t *ctx, const float *dx, const uint8_t *bytes, int64_t T,
                                            int64_t C, int64_t H, int accumulate, float *gemb) {
    if (C * H <= 0) return GLN_STATUS_SUCCESS;
    cudaStream_t s = stream_of(ctx);
    if (T <= 0 && accumulate) return GLN_STATUS_SUCCESS;
    if (T <= 0) return check(cudaMemsetAsync(gemb, 0, (size_t)(C * 256 * H) * sizeof(float), s), "cudaMemsetAsync");
    const int vec = (H & 3) == 0 && aligned16(dx) && aligned16(gemb);
    const int64_t cols = vec ? H / 4 : H;
    const int64_t col_blocks = (cols + EBW_SUM_THREADS - 1) / EBW_SUM_THREADS;
    /* int32 token indices and list positions; grid.y limits of the two grids */
    if (T * C > TOP_EMBED_BWD_MAX_PAIRS || C > 65535 || col_blocks > 65535)
        return tool_fail(GLN_STATUS_NOT_SUPPORTED,
                         "embedding backward on CUDA: T*C = %lld (at most %lld), C = %lld (at most 65535), "
                         "%lld column blocks (at most 65535)",
                         (long long)(T * C), (long long)TOP_EMBED_BWD_MAX_PAIRS, (long long)C, (long long)col_blocks);
    const int nchunks = (int)((T + EBW_CHUNK - 1) / EBW_CHUNK);
    const int64_t n = C * 256 * nchunks + 1;
    int *off = NULL;
    gln_status_t st = check(cudaMallocAsync((void **)&off, (size_t)(n + T * C) * sizeof(int), s),
                            "cudaMallocAsync(embedding backward grouping)");
    if (st != GLN_STATUS_SUCCESS) return st;
    int *list = off + n;
    const dim3 chunk_grid((unsigned)nchunks, (unsigned)C);
    ebw_count_kernel<<<chunk_grid, 256, 0, s>>>(bytes, T, C, nchunks, off);
    st = check(cudaSuccess, "ebw_count_kernel");
    if (st == GLN_STATUS_SUCCESS) {
        ebw_scan_kernel<<<1, EBW_SCAN_THREADS, 0, s>>>(off, n);
        st = check(cudaSuccess, "ebw_scan_kernel");
    }
    if (st == GLN_STATUS_SUCCESS) {
        ebw_scatter_kernel<<<chunk_grid, 256, 0, s>>>(bytes, T, C, nchunks, off, list);
        st = check(cudaSuccess, "ebw_scatter_kernel");
    }
    if (st == GLN_STATUS_SUCCESS) {
        const dim3 sum_grid((unsigned)(C * 256), (unsigned)col_blocks);
        if (vec)
            ebw_sum_kernel<float4><<<sum_grid, EBW_SUM_THREADS, 0, s>>>(dx, off, list, nchunks, H, cols, accumulate, gemb);
        else
            ebw_sum_kernel<float><<<sum_grid, EBW_SUM_THREADS, 0, s>>>(dx, off, list, nchunks, H, cols, accumulate, gemb);
        st = check(cudaSuccess, "ebw_sum_kernel");
    }
    (void)cudaFreeAsync(off, s);
    return st;
}

/* ---- the head: softmax cross-entropy, dlogits, the bias gradient ------------------------------ */

/* One warp per token, lane l holding columns l, l + 32, ...: the CPU's operations per element;
 * the max is exact in any order, the double sum of the exponentials is a fixed-order tree
 * (deterministic; the CPU sums in column order), expf / log are the device's. */
__global__ void softmax_ce_kernel(float *rows, const float *bias, const uint8_t *next, int64_t T, double *loss) {
    const int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (t >= T) return; /* whole warps: blockDim is a multiple of 32 */
    float *row = rows + t * 256;
    float x[8];
    float mx = 0.0f;
    for (int i = 0; i < 8; i++) {
        x[i] = __fadd_rn(row[lane + 32 * i], bias[lane + 32 * i]);
        mx = i == 0 || x[i] > mx ? x[i] : mx;
    }
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));
    const int nt = next[t];
    const float xn = __shfl_sync(0xFFFFFFFFu, x[nt / 32], nt % 32);
    double sum = 0;
    for (int i = 0; i < 8; i++) {
        x[i] = expf(__fsub_rn(x[i], mx));
        sum += x[i];
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < 8; i++) row[lane + 32 * i] = __fmul_rn(x[i], inv);
    if (lane == 0) loss[t] = log(sum) - ((double)xn - mx);
}

extern "C" gln_status_t topc_softmax_ce(gln_context_t *ctx, float *rows, const float *bias, const uint8_t *next,
                                        int64_t T, double *loss) {
    if (T <= 0) return GLN_STATUS_SUCCESS;
    softmax_ce_kernel<<<blocks_for(T * 32, 256), 256, 0, stream_of(ctx)>>>(rows, bias, next, T, loss);
    return check(cudaSuccess, "softmax_ce_kernel");
}

#define DL_CHUNK 64 /* tokens per partial column sum */

/* rows = scale·(probs − onehot) (bitwise the CPU's), and the partial column sums of chunk
 * blockIdx.x (token order within the chunk). */
__global__ void dlogits_kernel(float *rows, const uint8_t *next, int64_t T, float scale, float *partial) {
    const int v = threadIdx.x;
    const int64_t t0 = (int64_t)blockIdx.x * DL_CHUNK;
    float acc = 0.0f;
    for (int64_t t = t0; t < t0 + DL_CHUNK && t < T; t++) {
        float x = rows[t * 256 + v];
        if (next[t] == v) x = __fsub_rn(x, 1.0f);
        x = __fmul_rn(x, scale);
        rows[t * 256 + v] = x;
        acc = __fadd_rn(acc, x);
    }
    partial[blockIdx.x * 256 + v] = acc;
}

__global__ void colsum_kernel(const float *partial, int64_t chunks, int accumulate, float *gbias) {
    const int v = threadIdx.x;
    float acc = accumulate ? gbias[v] : 0.0f;
    for (int64_t i = 0; i < chunks; i++) acc = __fadd_rn(acc, partial[i * 256 + v]);
    gbias[v] = acc;
}

extern "C" gln_status_t topc_dlogits(gln_context_t *ctx, float *rows, const uint8_t *next, int64_t T, float scale,
                                     int accumulate, float *gbias) {
    cudaStream_t s = stream_of(ctx);
    const int64_t chunks = T > 0 ? (T + DL_CHUNK - 1) / DL_CHUNK : 1;
    float *partial = NULL;
    gln_status_t st = check(cudaMallocAsync((void **)&partial, (size_t)chunks * 256 * sizeof(float), s),
                            "cudaMallocAsync(dlogits partial sums)");
    if (st != GLN_STATUS_SUCCESS) return st;
    if (T > 0) dlogits_kernel<<<(unsigned)chunks, 256, 0, s>>>(rows, next, T, scale, partial);
    else (void)cudaMemsetAsync(partial, 0, 256 * sizeof(float), s);
    st = check(cudaSuccess, "dlogits_kernel");
    if (st == GLN_STATUS_SUCCESS) {
        colsum_kernel<<<1, 256, 0, s>>>(partial, chunks, accumulate, gbias);
        st = check(cudaSuccess, "colsum_kernel");
    }
    (void)cudaFreeAsync(partial, s);
    return st;
}

/* ---- --exact-data grids ------------------------------------------------------------------------ */

/* exact.h's exact_round: scaling by a power of two is exact (ldexpf), rintf rounds half to even as
 * the host's default mode does, and the clamp compares as the host does (a NaN passes through). */
__global__ void exact_round_kernel(float *v, int64_t n, int frac) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float q = rintf(ldexpf(v[i], frac));
        if (q > 255.0f) q = 255.0f;
        if (q < -255.0f) q = -255.0f;
        v[i] = ldexpf(q, -frac);
    }
}

extern "C" gln_status_t topc_exact_round(gln_context_t *ctx, float *v, int64_t n, int frac) {
    if (n <= 0) return GLN_STATUS_SUCCESS;
    exact_round_kernel<<<blocks_for(n, THREADS), THREADS, 0, stream_of(ctx)>>>(v, n, frac);
    return check(cudaSuccess, "exact_round_kernel");
}

/* One block: each thread sums a contiguous slice in order, thread 0 the slices in order. */
__global__ void loss_sum_kernel(const double *loss, int64_t count, const top_clock_t *clock, int accumulate,
                                double *out) {
    __shared__ double part[THREADS];
    const int64_t per = (count + THREADS - 1) / THREADS;
    const int64_t a = (int64_t)threadIdx.x * per;
    double s = 0;
    for (int64_t t = a; t < a + per && t < count; t++) s += loss[t];
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0;
        for (int i = 0; i < THREADS; i++) total += part[i];
        double *o = out + (clock ? clock->step : 0);
        *o = accumulate ? *o + total : total;
    }
}

extern "C" gln_status_t topc_loss_sum(gln_context_t *ctx, const double *loss, int64_t count,
                                      const top_clock_t *clock, int accumulate, double *out) {
    loss_sum_kernel<<<1, THREADS, 0, stream_of(ctx)>>>(loss, count, clock, accumulate, out);
    return check(cudaSuccess, "loss_sum_kernel");
}

/* ---- windows ---------------------------------------------------------------------------------- */

/* task.c's splitmix64 stream, on the device */
__device__ __forceinline__ uint64_t splitmix_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ void copy_window(const uint8_t *text, int64_t C, int64_t i, uint8_t *bytes,
                                            uint8_t *next) {
    for (int64_t c = 0; c < C; c++) bytes[c] = text[i - C + c];
    *next = text[i];
}

__global__ void train_windows_kernel(const uint8_t *text, int64_t train, int64_t C, uint64_t seed,
                                     const top_clock_t *clock, int64_t first, int64_t count, uint8_t *bytes,
                                     uint8_t *next) {
    const int64_t w = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= count) return;
    const uint64_t stream = (uint64_t)clock->step * 0x100000001ull + (uint64_t)(first + w);
    uint64_t s = (seed ^ 0x7E47ull) * 0x9E3779B97F4A7C15ull ^ (stream + 1) * 0xD1B54A32D192ED03ull;
    splitmix_next(&s); /* tool_rng_seed's first draw */
    const int64_t i = C + (int64_t)(splitmix_next(&s) % (uint64_t)(train - C));
    copy_window(text, C, i, bytes + w * C, next + w);
}

extern "C" gln_status_t topc_train_windows(gln_context_t *ctx, const uint8_t *text, int64_t train, int64_t C,
                                           uint64_t seed, const top_clock_t *clock, int64_t first, int64_t count,
                                           uint8_t *bytes, uint8_t *next) {
    if (count <= 0) return GLN_STATUS_SUCCESS;
    train_windows_kernel<<<blocks_for(count, 128), 128, 0, stream_of(ctx)>>>(text, train, C, seed, clock, first,
                                                                             count, bytes, next);
    return check(cudaSuccess, "train_windows_kernel");
}

__global__ void val_windows_kernel(const uint8_t *text, int64_t size, int64_t train, int64_t C, int64_t first,
                                   int64_t count, uint8_t *bytes, uint8_t *next) {
    const int64_t w = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= count) return;
    const int64_t last = size - train - C - 1;
    const int64_t j = first + w < last ? first + w : last;
    copy_window(text, C, train + C + j, bytes + w * C, next + w);
}

extern "C" gln_status_t topc_val_windows(gln_context_t *ctx, const uint8_t *text, int64_t size, int64_t train,
                                         int64_t C, int64_t first, int64_t count, uint8_t *bytes, uint8_t *next) {
    if (count <= 0) return GLN_STATUS_SUCCESS;
    val_windows_kernel<<<blocks_for(count, 128), 128, 0, stream_of(ctx)>>>(text, size, train, C, first, count,
                                                                           bytes, next);
    return check(cudaSuccess, "val_windows_kernel");
}

/* ---- graphs ----------------------------------------------------------------------------------- */

struct top_graph {
    cudaGraphExec_t exec;
};

extern "C" gln_status_t topc_graph_begin(gln_context_t *ctx) {
    return check(cudaStreamBeginCapture(stream_of(ctx), cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
}

extern "C" gln_status_t topc_graph_end(gln_context_t *ctx, top_graph_t **graph) {
    cudaGraph_t g = NULL;
    *graph = NULL;
    gln_status_t st = check(cudaStreamEndCapture(stream_of(ctx), &g), "cudaStreamEndCapture (a call broke the capture)");
    top_graph_t *out = st == GLN_STATUS_SUCCESS ? (top_graph_t *)calloc(1, sizeof *out) : NULL;
    if (st == GLN_STATUS_SUCCESS && !out) st = tool_oom(sizeof *out, "a captured step");
    if (st == GLN_STATUS_SUCCESS) st = check(cudaGraphInstantiate(&out->exec, g, 0), "cudaGraphInstantiate");
    if (g) (void)cudaGraphDestroy(g);
    if (st != GLN_STATUS_SUCCESS) {
        free(out);
        return st;
    }
    *graph = out;
    return GLN_STATUS_SUCCESS;
}

extern "C" gln_status_t topc_graph_launch(gln_context_t *ctx, top_graph_t *graph) {
    return check(cudaGraphLaunch(graph->exec, stream_of(ctx)), "cudaGraphLaunch");
}

extern "C" void topc_graph_destroy(top_graph_t *graph) {
    if (!graph) return;
    (void)cudaGraphExecDestroy(graph->exec);
    free(graph);
}
