/* The device half of the group plan: member row offsets of a grouped tensor computed on the
 * device from device-resident splits, so that no grouped kernel needs the splits on the host.
 *
 * Splits read by the device cannot be checked at the public boundary.  The plan kernel checks
 * them instead: a negative split counts as 0 and a running sum past the packed rows is clamped to
 * the rows, so every later kernel stays in bounds; the first such error is recorded in the
 * context's async error word (gln_context_async_error reports it after a synchronize). */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"
}

/* Member row offsets, and for the block-scaled modes the members' scale offsets, of one grouped
 * tensor: rows[0..num] = clamped prefix sums of the splits; srow / scol = prefix sums of
 * gln_member_scale_elems of the rowwise / columnwise copies, the layout of
 * gln_grouped_scale_offsets.
 *
 * The clamping is a prefix sum: with m_i' = max(m_i, 0) and P_i = m_0' + .. + m_i', the clamped
 * running sum is rows[i + 1] = min(P_i, rows) (once the sum reaches the rows every later member
 * is clamped to 0).  P is summed saturating at rows + 1, which is associative for non-negative
 * terms and keeps "P_i > rows" exact without int64 overflow.  The first bad member is the
 * smallest index that is negative or where P first passes the rows (a negative member adds
 * nothing, so no member is both).
 *
 * One block of GLN_PLAN_THREADS threads, GLN_PLAN_PER consecutive members per thread, so one pass
 * covers GLN_PLAN_PASS members (every member count up to 1024 in one pass): all splits of a pass
 * are loaded at once, each thread sums its members serially, the thread totals go through one
 * warp-shuffle scan and one exchange of warp totals in shared memory (two __syncthreads per
 * scan), and the scale sizes of the clamped members are scanned the same way.  The first error
 * of a pass is found with a shared atomicMin and recorded by the thread owning that member. */
#define GLN_PLAN_THREADS 256
#define GLN_PLAN_PER 4
#define GLN_PLAN_PASS (GLN_PLAN_THREADS * GLN_PLAN_PER)
#define GLN_PLAN_WARPS (GLN_PLAN_THREADS / 32)

/* a + b for non-negative a, b <= cap, saturating at cap.  The row sums use cap = rows + 1 (a, b
 * <= cap <= INT64_MAX / 2: no overflow); the scale sums use INT64_MAX, never reached (they are
 * sums of scale grids of at most the packed rows, far below it). */
__device__ __forceinline__ int64_t plan_sat_add(int64_t a, int64_t b, int64_t cap) {
    const int64_t s = a + b;
    return s < cap ? s : cap;
}

/* Exclusive scan over the block of NV values per thread (the thread totals `v`, added with
 * plan_sat_add at caps cap[k]); tot[k] = the block's total.  Every thread of the block calls it.
 * `warp_tot` is shared [NV][GLN_PLAN_WARPS]. */
template <int NV>
__device__ __forceinline__ void plan_block_scan(const int64_t v[NV], const int64_t cap[NV], int64_t excl[NV],
                                                int64_t tot[NV], int64_t (*warp_tot)[GLN_PLAN_WARPS]) {
    const unsigned int all = 0xFFFFFFFFu;
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    int64_t incl[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        incl[k] = v[k];
        for (int off = 1; off < 32; off <<= 1) {
            const int64_t y = __shfl_up_sync(all, incl[k], off);
            if (lane >= off) incl[k] = plan_sat_add(y, incl[k], cap[k]);
        }
        if (lane == 31) warp_tot[k][warp] = incl[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int64_t before = 0, all_w = 0;
        for (int w = 0; w < GLN_PLAN_WARPS; w++) { /* same address in every lane: a broadcast */
            const int64_t t = warp_tot[k][w];
            if (w < warp) before = plan_sat_add(before, t, cap[k]);
            all_w = plan_sat_add(all_w, t, cap[k]);
        }
        /* exclusive within the warp: inclusive minus this thread's own term, done as the
         * inclusive of the lane before (lane 0: nothing before it in the warp) */
        const int64_t prev = __shfl_up_sync(all, incl[k], 1);
        excl[k] = lane > 0 ? plan_sat_add(before, prev, cap[k]) : before;
        tot[k] = all_w;
    }
    __syncthreads(); /* warp_tot is reused by the next scan */
}

__global__ void __launch_bounds__(GLN_PLAN_THREADS)
gln_group_plan_kernel(const int64_t *splits, int32_t num, int64_t rows, int64_t cols, int mode, int64_t *offsets,
                      int64_t *srow, int64_t *scol, gln_cuda_async_error_t *err) {
    __shared__ int64_t warp_tot[2][GLN_PLAN_WARPS];
    __shared__ int32_t first_bad[2]; /* by pass parity: the next pass resets the other one */
    const int tid = (int)threadIdx.x;
    const int64_t cap_p = rows + 1; /* P saturates here: "> rows" stays exact */
    const int64_t no_cap[2] = {INT64_MAX, INT64_MAX};
    int64_t carry_p = 0, carry_sr = 0, carry_sc = 0; /* the same in every thread */
    if (tid == 0) {
        offsets[0] = srow[0] = scol[0] = 0;
        first_bad[0] = first_bad[1] = INT32_MAX;
    }
    /* first_bad is initialized before any thread's atomicMin: the scans below synchronize first */
    int pass = 0;
    for (int64_t first = 0; first < num; first += GLN_PLAN_PASS, pass++) {
        const int64_t i0 = first + (int64_t)tid * GLN_PLAN_PER; /* this thread's first member */
        int64_t raw[GLN_PLAN_PER], loc[GLN_PLAN_PER];
#pragma unroll
        for (int k = 0; k < GLN_PLAN_PER; k++) raw[k] = i0 + k < num ? splits[i0 + k] : 0; /* all loads in flight */
        int64_t run = 0;
#pragma unroll
        for (int k = 0; k < GLN_PLAN_PER; k++) {
            const int64_t mk = raw[k] < 0 ? 0 : (raw[k] > cap_p ? cap_p : raw[k]);
            loc[k] = run = plan_sat_add(run, mk, cap_p); /* inclusive within the thread */
        }
        int64_t excl_p, tot_p;
        {
            const int64_t cap1[1] = {cap_p};
            int64_t e[1], t[1];
            plan_block_scan<1>(&run, cap1, e, t, warp_tot);
            excl_p = plan_sat_add(carry_p, e[0], cap_p);
            tot_p = t[0];
        }
        if (tid == 0) first_bad[(pass + 1) & 1] = INT32_MAX; /* read last in the previous pass, before the scan */
        /* the clamped offsets, the first bad member of this thread, the scale sizes */
        int64_t o[GLN_PLAN_PER], sr[GLN_PLAN_PER], sc[GLN_PLAN_PER], sum_sr = 0, sum_sc = 0;
        int64_t o_prev = excl_p < rows ? excl_p : rows;
        int32_t bad = INT32_MAX;
        int bad_kind = GLN_CUDA_ASYNC_NONE;
        long long bad_value = 0;
#pragma unroll
        for (int k = 0; k < GLN_PLAN_PER; k++) {
            const int64_t i = i0 + k;
            const int64_t p = plan_sat_add(excl_p, loc[k], cap_p);
            o[k] = p < rows ? p : rows;
            if (i < num && bad == INT32_MAX) {
                if (raw[k] < 0) {
                    bad = (int32_t)i, bad_kind = GLN_CUDA_ASYNC_NEGATIVE_SPLIT, bad_value = (long long)raw[k];
                } else if (p > rows) { /* the first past the rows: every earlier sum was within them */
                    bad = (int32_t)i, bad_kind = GLN_CUDA_ASYNC_SPLITS_PAST_ROWS, bad_value = (long long)(o_prev + raw[k]);
                }
            }
            const int64_t m = o[k] - o_prev; /* the clamped split */
            sr[k] = i < num ? gln_member_scale_elems((gln_scaling_mode_t)mode, m, cols, 0) : 0;
            sc[k] = i < num ? gln_member_scale_elems((gln_scaling_mode_t)mode, m, cols, 1) : 0;
            sum_sr += sr[k];
            sum_sc += sc[k];
            o_prev = o[k];
        }
        if (bad != INT32_MAX) atomicMin(&first_bad[pass & 1], bad);
        const int64_t v2[2] = {sum_sr, sum_sc};
        int64_t e2[2], t2[2];
        plan_block_scan<2>(v2, no_cap, e2, t2, warp_tot); /* its first __syncthreads orders the atomicMin */
        if (bad != INT32_MAX && bad == first_bad[pass & 1]) {
            if (atomicCAS(&err->kind, GLN_CUDA_ASYNC_NONE, bad_kind) == GLN_CUDA_ASYNC_NONE) {
                err->member = bad;
                err->value = bad_value;
            }
            __threadfence_system(); /* the error word is mapped host memory */
        }
        int64_t a = carry_sr + e2[0], b = carry_sc + e2[1];
#pragma unroll
        for (int k = 0; k < GLN_PLAN_PER; k++) {
            const int64_t i = i0 + k;
            if (i >= num) break;
            offsets[i + 1] = o[k];
            srow[i + 1] = a += sr[k];
            scol[i + 1] = b += sc[k];
        }
        carry_p = plan_sat_add(carry_p, tot_p, cap_p);
        carry_sr += t2[0];
        carry_sc += t2[1];
    }
}

/* Host splits (checked at the boundary): the prefix sums are computed on the host and travel to
 * the device by value, in the parameters of small kernels (GLN_PLAN_CHUNK members each), never
 * through a copy from host memory: a copy from a pageable buffer captured in a CUDA graph would
 * read that buffer again at every replay, after it was freed. */
#define GLN_PLAN_CHUNK 160 /* 3 x 160 int64 + 8 bytes: within the classic 4 KB of kernel parameters */
typedef struct plan_chunk {
    int32_t first, count;
    int64_t rows[GLN_PLAN_CHUNK], srow[GLN_PLAN_CHUNK], scol[GLN_PLAN_CHUNK]; /* entries first + 1 .. */
} plan_chunk_t;

__global__ void gln_group_plan_store_kernel(plan_chunk_t c, int64_t *rows, int64_t *srow, int64_t *scol) {
    const int j = (int)threadIdx.x;
    if (c.first == 0 && j == 0) rows[0] = srow[0] = scol[0] = 0;
    if (j >= c.count) return;
    rows[c.first + j + 1] = c.rows[j];
    srow[c.first + j + 1] = c.srow[j];
    scol[c.first + j + 1] = c.scol[j];
}

static gln_status_t plan_from_host(gln_context_t *ctx, const gln_grouped_tensor_t *g, gln_scaling_mode_t mode,
                                   gln_cuda_plan_t *p, const char *call) {
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    int64_t r = 0, sr = 0, sc = 0;
    for (int32_t first = 0; first < g->num; first += GLN_PLAN_CHUNK) {
        plan_chunk_t c;
        memset(&c, 0, sizeof c);
        c.first = first;
        c.count = g->num - first < GLN_PLAN_CHUNK ? g->num - first : GLN_PLAN_CHUNK;
        for (int32_t j = 0; j < c.count; j++) {
            const int64_t m = g->splits[first + j];
            c.rows[j] = r += m;
            c.srow[j] = sr += gln_member_scale_elems(mode, m, g->packed.cols, 0);
            c.scol[j] = sc += gln_member_scale_elems(mode, m, g->packed.cols, 1);
        }
        gln_group_plan_store_kernel<<<1, GLN_PLAN_CHUNK, 0, stream>>>(c, p->rows, p->srow, p->scol);
        GLN_TRY(gln_cuda_check_launch(call, "gln_group_plan_store_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}

extern "C" gln_status_t gln_cuda_plan_make(gln_context_t *ctx, const gln_grouped_tensor_t *g,
                                           gln_scaling_mode_t mode, gln_cuda_plan_t *p, const char *call) {
    memset(p, 0, sizeof *p);
    p->num = g->num;
    const size_t n1 = (size_t)g->num + 1;
    gln_status_t st = gln_cuda_scratch_alloc(ctx, 3 * n1 * sizeof(int64_t), (void **)&p->rows, call);
    if (st != GLN_STATUS_SUCCESS) return st;
    p->srow = p->rows + n1;
    p->scol = p->rows + 2 * n1;
    if (g->splits_on_backend) {
        gln_cuda_state_t *s = gln_cuda_state(ctx);
        gln_group_plan_kernel<<<1, GLN_PLAN_THREADS, 0, s->stream>>>((const int64_t *)g->splits, g->num, g->packed.rows,
                                                       g->packed.cols, (int)mode, p->rows, p->srow, p->scol,
                                                       s->async_dev);
        st = gln_cuda_check_launch(call, "gln_group_plan_kernel");
    } else {
        st = plan_from_host(ctx, g, mode, p, call);
    }
    if (st != GLN_STATUS_SUCCESS) gln_cuda_plan_free(ctx, p);
    return st;
}

extern "C" void gln_cuda_plan_free(gln_context_t *ctx, gln_cuda_plan_t *p) {
    gln_cuda_scratch_free(ctx, p->rows);
    memset(p, 0, sizeof *p);
}

extern "C" gln_status_t gln_cuda_group_offsets(gln_context_t *ctx, const gln_grouped_tensor_t *g,
                                              int64_t **offsets, const char *call) {
    gln_cuda_plan_t p;
    *offsets = NULL;
    gln_status_t st = gln_cuda_plan_make(ctx, g, GLN_SCALING_NONE, &p, call);
    if (st == GLN_STATUS_SUCCESS) *offsets = p.rows; /* freed by gln_cuda_scratch_free: the one allocation */
    return st;
}

/* ---- grouped dbias from the plan ------------------------------------------------------------
 * db_i[j] = Σ_{r in member i} dy[r, j] in row order (+ db_i[j] when accumulating), one rounding:
 * one thread per (member, column), the CPU's loop order, so bitwise equal to the CPU backend.
 * The members' output pointers travel by value in the kernel parameters (no host-to-device copy,
 * so the launch captures in a graph), GLN_DBIAS_CHUNK members per launch. */
#include "backend/cuda/cuda_device.h"

#define GLN_DBIAS_CHUNK 128

typedef struct dbias_outputs {
    void *data[GLN_DBIAS_CHUNK];
    int dtype[GLN_DBIAS_CHUNK];
} dbias_outputs_t;

__global__ void gln_grouped_dbias_kernel(const void *x, int x_dtype, int64_t cols, const int64_t *offsets,
                                         int32_t first, dbias_outputs_t out, int accumulate) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int32_t i = (int32_t)blockIdx.y;
    if (j >= cols) return;
    const int64_t r0 = offsets[first + i], r1 = offsets[first + i + 1];
    if (r0 == r1 && accumulate) return; /* empty member: nothing to add */
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; r++)
        acc = gln_dev_add(acc, gln_dev_load(x, x_dtype, (size_t)r * (size_t)cols + (size_t)j));
    if (accumulate) acc = gln_dev_add(acc, gln_dev_load(out.data[i], out.dtype[i], (size_t)j));
    gln_dev_store(out.data[i], out.dtype[i], (size_t)j, acc);
}

extern "C" gln_status_t gln_cuda_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy,
                                               gln_tensor_t *dbias, int accumulate) {
    static const char *fn = "gln_grouped_dbias (cuda)";
    const gln_tensor_t *p = &dy->packed;
    if (p->cols == 0) return GLN_STATUS_SUCCESS;
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    int64_t *offsets = NULL;
    gln_status_t status = gln_cuda_group_offsets(ctx, dy, &offsets, fn);
    const unsigned int col_blocks = (unsigned int)((p->cols + GLN_CUDA_THREADS - 1) / GLN_CUDA_THREADS);
    for (int32_t first = 0; status == GLN_STATUS_SUCCESS && first < dy->num; first += GLN_DBIAS_CHUNK) {
        const int32_t n = dy->num - first < GLN_DBIAS_CHUNK ? dy->num - first : GLN_DBIAS_CHUNK;
        dbias_outputs_t out;
        memset(&out, 0, sizeof out);
        for (int32_t i = 0; i < n; i++) out.data[i] = dbias[first + i].data, out.dtype[i] = (int)dbias[first + i].dtype;
        gln_grouped_dbias_kernel<<<dim3(col_blocks, (unsigned int)n), GLN_CUDA_THREADS, 0, st>>>(
            p->data, (int)p->dtype, p->cols, offsets, first, out, accumulate);
        status = gln_cuda_check_launch(fn, "gln_grouped_dbias_kernel");
    }
    gln_cuda_scratch_free(ctx, offsets);
    return status;
}
