/* CPU slots of the distributed-weights group: FP32 accumulation into main_grad, the
 * current-scaling scale of a global amax (numerics.h's one definition of the rule) and the
 * batched transpose of the quantized shard's columnwise copies. */
#include "backend/cpu/cpu_dist.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_threads.h"
#include "backend/transpose.h"
#include "common/error.h"
#include "numerics/numerics.h"

gln_status_t gln_cpu_add_f32(gln_context_t *ctx, float *y, const float *x, int64_t n) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_scales_from_amax(gln_context_t *ctx, const float *amax, int32_t n,
                                      float fp8_max, int power_2_scale, float epsilon,
                                      float *scale, float *scale_inv) {
    (void)ctx;
    for (int32_t i = 0; i < n; i++) {
        scale[i] = gln_scale_from_amax_impl(amax[i], fp8_max, power_2_scale, epsilon, GLN_FP32_MAX);
        scale_inv[i] = 1.0f / scale[i];
    }
    return GLN_STATUS_SUCCESS;
}

/* One amax per member, each exactly the amax slot's (the same element order and NaN rule). */
gln_status_t gln_cpu_grouped_amax(gln_context_t *ctx, const gln_grouped_tensor_t *x, int nan_propagate,
                                  float *amax) {
    const size_t row_bytes = (size_t)x->packed.cols * gln_dtype_size(x->packed.dtype);
    int64_t row = 0;
    for (int32_t i = 0; i < x->num; i++) {
        gln_tensor_t m = gln_tensor_make(x->packed.dtype, x->splits[i], x->packed.cols,
                                         (char *)x->packed.data + (size_t)row * row_bytes);
        GLN_TRY(gln_cpu_amax(ctx, &m, nan_propagate, &amax[i]));
        row += x->splits[i];
    }
    return GLN_STATUS_SUCCESS;
}

/* The batched transpose in TILE x TILE blocks (a block's source rows and destination rows both
 * stay in cache, where the element-by-element reference strides through the destination), the
 * blocks split over the context's threads; each element moves as bits, so the result is the
 * reference's whatever the blocking and thread count (test_transpose). */
#define TILE 64
#define GLN_CPU_TRANSPOSE_MIN 262144 /* elements per thread below which one thread does it all */

typedef struct transpose_job {
    const gln_transpose_t *t;
    int64_t row_tiles, col_tiles;
} transpose_job_t;

/* One block [r0, r1) x [c0, c1) of one matrix, for each element size. */
static void block_u8(const uint8_t *src, int64_t src_ld, uint8_t *dst, int64_t dst_ld, int64_t r0, int64_t r1,
                     int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) dst[c * dst_ld + r] = src[r * src_ld + c];
}

static void block_u32(const uint32_t *src, int64_t src_ld, uint32_t *dst, int64_t dst_ld, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) dst[c * dst_ld + r] = src[r * src_ld + c];
}

static void transpose_range(void *arg, int thread, int64_t begin, int64_t end) {
    (void)thread;
    const transpose_job_t *j = arg;
    const gln_transpose_t *t = j->t;
    const int64_t per_batch = j->row_tiles * j->col_tiles;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / per_batch, rt = k % per_batch / j->col_tiles, ct = k % j->col_tiles;
        const int64_t r0 = rt * TILE, c0 = ct * TILE;
        const int64_t r1 = r0 + TILE < t->rows ? r0 + TILE : t->rows, c1 = c0 + TILE < t->cols ? c0 + TILE : t->cols;
        const char *src = (const char *)t->src + (size_t)(b * t->src_stride) * t->elem_size;
        char *dst = (char *)t->dst + (size_t)(b * t->dst_stride) * t->elem_size;
        if (t->elem_size == 1)
            block_u8((const uint8_t *)src, t->src_ld, (uint8_t *)dst, t->dst_ld, r0, r1, c0, c1);
        else
            block_u32((const uint32_t *)src, t->src_ld, (uint32_t *)dst, t->dst_ld, r0, r1, c0, c1);
    }
}

gln_status_t gln_cpu_transpose_batched(gln_context_t *ctx, const gln_transpose_t *t) {
    (void)ctx;
    if (t->batch <= 0 || t->rows <= 0 || t->cols <= 0) return GLN_STATUS_SUCCESS;
    if (t->elem_size != 1 && t->elem_size != 4) { /* no caller passes one; the reference takes any */
        gln_transpose_batched_ref(t);
        return GLN_STATUS_SUCCESS;
    }
    transpose_job_t j = {t, (t->rows + TILE - 1) / TILE, (t->cols + TILE - 1) / TILE};
    const int64_t blocks = t->batch * j.row_tiles * j.col_tiles;
    const int nt = gln_cpu_threads((size_t)(t->batch * t->rows * t->cols), GLN_CPU_TRANSPOSE_MIN);
    gln_cpu_parallel_for(nt, blocks, transpose_range, &j);
    return GLN_STATUS_SUCCESS;
}
