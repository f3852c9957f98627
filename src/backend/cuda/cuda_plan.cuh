/* The group plan's device computation (see gln_cuda_plan_t in cuda_backend.h): a block-level
 * function, so that a grouped kernel's own setup block can compute the plan it reads (a deferred
 * plan: gln_cuda_plan_defer) instead of a separate launch before it.  Included by cuda_plan.cu
 * (gln_group_plan_kernel) and cuda_quant_members.cu (gq_setup_kernel). */
#ifndef GLN_CUDA_PLAN_CUH
#define GLN_CUDA_PLAN_CUH

#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
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

/* The plan of j, by every thread of one block of GLN_PLAN_THREADS threads (it synchronizes the
 * block; the block's later reads of the plan may follow a __syncthreads). */
__device__ __forceinline__ void gln_plan_compute(const gln_cuda_plan_job_t &j) {
    const int64_t *splits = j.splits;
    const int32_t num = j.num;
    const int64_t rows = j.rows, cols = j.cols;
    const int mode = j.mode;
    int64_t *offsets = j.offsets, *srow = j.srow, *scol = j.scol;
    gln_cuda_async_error_t *err = j.err;
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

#endif /* GLN_CUDA_PLAN_CUH */
