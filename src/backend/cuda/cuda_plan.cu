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
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_plan.cuh"

/* The plan of one grouped tensor on the stream (gln_plan_compute), launched with PDL. */
__global__ void __launch_bounds__(GLN_PLAN_THREADS) gln_group_plan_kernel(gln_cuda_plan_job_t job) {
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    gln_plan_compute(job);
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
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
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
        GLN_TRY(gln_cuda_check(gln_cuda_launch(gln_group_plan_store_kernel, dim3(1), dim3(GLN_PLAN_CHUNK), 0, stream,
                                               c, p->rows, p->srow, p->scol),
                               call, "gln_group_plan_store_kernel"));
        GLN_TRY(gln_cuda_check_launch(call, "gln_group_plan_store_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}

/* The plan's allocation; device splits: *job describes its computation (else job->splits NULL). */
static gln_status_t plan_alloc(gln_context_t *ctx, const gln_grouped_tensor_t *g, gln_scaling_mode_t mode,
                               gln_cuda_plan_t *p, gln_cuda_plan_job_t *job, const char *call) {
    memset(p, 0, sizeof *p);
    memset(job, 0, sizeof *job);
    p->num = g->num;
    const size_t n1 = (size_t)g->num + 1;
    GLN_TRY(gln_cuda_scratch_alloc(ctx, 3 * n1 * sizeof(int64_t), (void **)&p->rows, call));
    p->srow = p->rows + n1;
    p->scol = p->rows + 2 * n1;
    if (g->splits_on_backend)
        *job = (gln_cuda_plan_job_t){(const int64_t *)g->splits, g->num, g->packed.rows, g->packed.cols, (int)mode,
                                     p->rows, p->srow, p->scol, gln_cuda_state(ctx)->async_dev};
    return GLN_STATUS_SUCCESS;
}

extern "C" gln_status_t gln_cuda_plan_make(gln_context_t *ctx, const gln_grouped_tensor_t *g,
                                           gln_scaling_mode_t mode, gln_cuda_plan_t *p, const char *call) {
    gln_cuda_plan_job_t job;
    GLN_TRY(plan_alloc(ctx, g, mode, p, &job, call));
    gln_status_t st;
    if (job.splits) {
        st = gln_cuda_check(gln_cuda_launch(gln_group_plan_kernel, dim3(1), dim3(GLN_PLAN_THREADS), 0,
                                            gln_cuda_state(ctx)->stream, job),
                            call, "gln_group_plan_kernel");
        if (st == GLN_STATUS_SUCCESS) st = gln_cuda_check_launch(call, "gln_group_plan_kernel");
    } else {
        st = plan_from_host(ctx, g, mode, p, call);
    }
    if (st != GLN_STATUS_SUCCESS) gln_cuda_plan_free(ctx, p);
    return st;
}

/* Device splits: the plan's buffers now, its computation left to the consumer's setup kernel
 * (one launch fewer); host splits: the plan at once, as gln_cuda_plan_make. */
extern "C" gln_status_t gln_cuda_plan_defer(gln_context_t *ctx, const gln_grouped_tensor_t *g,
                                            gln_scaling_mode_t mode, gln_cuda_plan_t *p, const char *call) {
    if (!g->splits_on_backend) return gln_cuda_plan_make(ctx, g, mode, p, call);
    gln_cuda_plan_job_t job;
    GLN_TRY(plan_alloc(ctx, g, mode, p, &job, call));
    p->pending = job;
    return GLN_STATUS_SUCCESS;
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
 * so the launch captures in a graph: gln_dbias_outputs_t), GLN_DBIAS_CHUNK members per launch. */

__global__ void gln_grouped_dbias_kernel(const void *x, int x_dtype, int64_t cols, const int64_t *offsets,
                                         int32_t first, gln_dbias_outputs_t out, int accumulate) {
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
        gln_grouped_dbias_kernel<<<dim3(col_blocks, (unsigned int)n), GLN_CUDA_THREADS, 0, st>>>(
            p->data, (int)p->dtype, p->cols, offsets, first, gln_dbias_outputs(dbias, first, n), accumulate);
        status = gln_cuda_check_launch(fn, "gln_grouped_dbias_kernel");
    }
    gln_cuda_scratch_free(ctx, offsets);
    return status;
}
