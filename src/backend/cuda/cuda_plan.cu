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
 * gln_grouped_scale_offsets.  One block, GLN_PLAN_TILE members at a time: the splits are loaded
 * and the scale sizes computed by all threads at once; only the running sums (adds in shared
 * memory) and the checks, whose first error must be the first member's, run on thread 0.  (The
 * one-thread loop it replaces waited for each split's load in turn.) */
#define GLN_PLAN_TILE 256

__global__ void gln_group_plan_kernel(const int64_t *splits, int32_t num, int64_t rows, int64_t cols, int mode,
                                      int64_t *offsets, int64_t *srow, int64_t *scol,
                                      gln_cuda_async_error_t *err) {
    __shared__ int64_t m[GLN_PLAN_TILE], o[GLN_PLAN_TILE], sr[GLN_PLAN_TILE], sc[GLN_PLAN_TILE];
    __shared__ int64_t carry[3]; /* rows, srow, scol before the tile */
    const int j = (int)threadIdx.x;
    if (j == 0) offsets[0] = srow[0] = scol[0] = carry[0] = carry[1] = carry[2] = 0;
    for (int32_t first = 0; first < num; first += GLN_PLAN_TILE) {
        const int n = num - first < GLN_PLAN_TILE ? num - first : GLN_PLAN_TILE;
        if (j < n) m[j] = splits[first + j];
        __syncthreads();
        if (j == 0) { /* the checks and the clamped row sums, in member order */
            int64_t sum = carry[0];
            for (int q = 0; q < n; q++) {
                const int32_t i = first + q;
                int64_t mq = m[q];
                if (mq < 0) {
                    if (atomicCAS(&err->kind, GLN_CUDA_ASYNC_NONE, GLN_CUDA_ASYNC_NEGATIVE_SPLIT) == GLN_CUDA_ASYNC_NONE)
                        err->member = i, err->value = (long long)mq;
                    mq = 0;
                }
                if (mq > rows - sum) {
                    if (atomicCAS(&err->kind, GLN_CUDA_ASYNC_NONE, GLN_CUDA_ASYNC_SPLITS_PAST_ROWS) == GLN_CUDA_ASYNC_NONE)
                        err->member = i, err->value = (long long)(sum + mq);
                    mq = rows - sum;
                }
                m[q] = mq;
                o[q] = sum += mq;
            }
        }
        __syncthreads();
        if (j < n) {
            sr[j] = gln_member_scale_elems((gln_scaling_mode_t)mode, m[j], cols, 0);
            sc[j] = gln_member_scale_elems((gln_scaling_mode_t)mode, m[j], cols, 1);
        }
        __syncthreads();
        if (j == 0) {
            int64_t a = carry[1], b = carry[2];
            for (int q = 0; q < n; q++) sr[q] = a += sr[q], sc[q] = b += sc[q];
            carry[0] = o[n - 1], carry[1] = a, carry[2] = b;
        }
        __syncthreads();
        if (j < n) {
            offsets[first + j + 1] = o[j];
            srow[first + j + 1] = sr[j];
            scol[first + j + 1] = sc[j];
        }
        __syncthreads(); /* before the next tile overwrites the shared arrays */
    }
    if (j == 0) __threadfence_system(); /* the error word is mapped host memory */
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
        gln_group_plan_kernel<<<1, GLN_PLAN_TILE, 0, s->stream>>>((const int64_t *)g->splits, g->num, g->packed.rows,
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
