/* The CPU backend's ops table, host memory and initialization.
 *
 * Host memory is 64-byte aligned (one cache line, and what AVX-512 loads like) so that buffers
 * handed to OpenBLAS never straddle lines at their start.  Every copy kind is a plain memcpy:
 * "backend memory" is host memory here. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign under -std=c11 */

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_blas_buffers.h"
#include "backend/cpu/cpu_block_cache.h"
#include "backend/cpu/cpu_dist.h"
#include "backend/context.h"
#include "common/error.h"

#include "backend/cpu/cpu_threads.h"
#include "quant/dbias_tiled.h"

#define GLN_CPU_ALIGNMENT 64

static gln_status_t cpu_init(gln_context_t *ctx) {
    /* OpenBLAS stays at 1 thread; this context's num_threads is applied by the wrappers
     * below to its own calls only (0: OPENBLAS_NUM_THREADS or all cores).  OpenBLAS's GEMM
     * buffers for those threads are mapped now, where failing is clean (cpu_blas_buffers.h). */
    gln_cpu_threads_init();
    GLN_TRY(gln_cpu_blas_buffers_reserve(gln_cpu_ctx_threads(ctx->num_threads), "gln_context_create"));
    ctx->backend_state = gln_cpu_block_cache_create(); /* NULL: no reuse, still correct */
    return GLN_STATUS_SUCCESS;
}

static void cpu_fini(gln_context_t *ctx) {
    gln_cpu_block_cache_destroy(ctx->backend_state);
    ctx->backend_state = NULL;
    gln_cpu_blas_buffers_release(gln_cpu_ctx_threads(ctx->num_threads));
}

static gln_status_t cpu_malloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    void *p = gln_cpu_block_cache_take(ctx->backend_state, bytes);
    if (p) {
        *ptr = p;
        return GLN_STATUS_SUCCESS;
    }
    if (posix_memalign(&p, GLN_CPU_ALIGNMENT, bytes) != 0 || p == NULL)
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "cpu backend: cannot allocate %zu bytes of host memory",
                        bytes);
    gln_cpu_block_cache_note(ctx->backend_state, p, bytes);
    *ptr = p;
    return GLN_STATUS_SUCCESS;
}

static void cpu_free(gln_context_t *ctx, void *ptr) {
    if (!gln_cpu_block_cache_give(ctx->backend_state, ptr)) free(ptr);
}

static gln_status_t cpu_memcpy(gln_context_t *ctx, void *dst, const void *src, size_t bytes,
                               gln_copy_kind_t kind) {
    (void)ctx;
    (void)kind;
    if (bytes) memmove(dst, src, bytes); /* memmove: overlapping backend-to-backend copies are safe */
    return GLN_STATUS_SUCCESS;
}

static gln_status_t cpu_memset(gln_context_t *ctx, void *dst, int value, size_t bytes) {
    (void)ctx;
    if (bytes) memset(dst, value, bytes);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t cpu_synchronize(gln_context_t *ctx) {
    (void)ctx; /* every CPU operation is complete when it returns */
    return GLN_STATUS_SUCCESS;
}

/* Each compute op runs with its context's thread count (thread-local for the call). */
#define GLN_CPU_WITH_THREADS(ctx, call)                                    \
    do {                                                                   \
        const int old_ = gln_cpu_call_threads_set((ctx)->num_threads);     \
        const gln_status_t st_ = (call);                                   \
        gln_cpu_call_threads_set(old_);                                    \
        return st_;                                                        \
    } while (0)

static gln_status_t cpu_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                 const gln_tensor_t *in, gln_tensor_t *out) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_quantize(ctx, cfg, in, out));
}
static gln_status_t cpu_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                                   gln_tensor_t *out) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_dequantize(ctx, in, columnwise, out));
}
static gln_status_t cpu_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                         const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_grouped_quantize(ctx, cfg, in, out));
}
static gln_status_t cpu_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                             const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                             int accumulate) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_gemm(ctx, layout, A, B, D, bias, accumulate));
}
static gln_status_t cpu_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_grouped_gemm(ctx, args));
}
static gln_status_t cpu_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy,
                                      gln_tensor_t *dbias, int accumulate) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_grouped_dbias(ctx, dy, dbias, accumulate));
}
/* The reference of the fused slot: the grouped quantize, then the sums in the tiled order. */
static gln_status_t cpu_grouped_quantize_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                               const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                               gln_tensor_t *dbias, int accumulate) {
    if (cfg) GLN_TRY(cpu_grouped_quantize(ctx, cfg, in, out));
    return gln_grouped_dbias_tiled_ref(in, dbias, accumulate);
}
static gln_status_t cpu_amax(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_amax(ctx, x, nan_propagate, amax));
}
static gln_status_t cpu_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_cast(ctx, in, out));
}
static gln_status_t cpu_transpose_batched(gln_context_t *ctx, const gln_transpose_t *t) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_transpose_batched(ctx, t));
}
static gln_status_t cpu_optimizer_step(gln_context_t *ctx, const gln_optimizer_params_t *p, float *master,
                                       const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n, void *working,
                                       gln_dtype_t working_dtype, int32_t nseg, const int64_t *bounds,
                                       int bounds_on_backend, float *amax) {
    GLN_CPU_WITH_THREADS(ctx, gln_cpu_optimizer_step(ctx, p, master, grad, exp_avg, exp_avg_sq, n, working,
                                                     working_dtype, nseg, bounds, bounds_on_backend, amax));
}

static const gln_backend_ops_t cpu_ops = {
    .name = "cpu",
    .max_gemm_dim = INT_MAX, /* sgemm_ takes int dimensions */
    .init = cpu_init,
    .fini = cpu_fini,
    .malloc = cpu_malloc,
    .free = cpu_free,
    .memcpy = cpu_memcpy,
    .memset = cpu_memset,
    .synchronize = cpu_synchronize,
    .quantize = cpu_quantize,
    .dequantize = cpu_dequantize,
    .grouped_quantize = cpu_grouped_quantize,
    .mxfp8_swizzle = gln_cpu_mxfp8_swizzle,
    .fp8_state_gather = gln_cpu_fp8_state_gather,
    .fp8_state_record = gln_cpu_fp8_state_record,
    .fp8_state_update = gln_cpu_fp8_state_update,
    .gemm = cpu_gemm,
    .grouped_gemm = cpu_grouped_gemm,
    .grouped_dbias = cpu_grouped_dbias,
    .grouped_quantize_dbias = cpu_grouped_quantize_dbias,
    .amax = cpu_amax,
    .grouped_amax = gln_cpu_grouped_amax,
    .cast = cpu_cast,
    .add_f32 = gln_cpu_add_f32,
    .scales_from_amax = gln_cpu_scales_from_amax,
    .transpose_batched = cpu_transpose_batched,
    .optimizer_step = cpu_optimizer_step,
    .moe_router_forward = gln_cpu_moe_router_forward,
    .moe_router_backward = gln_cpu_moe_router_backward,
    .moe_permute_plan = gln_cpu_moe_permute_plan,
    .moe_permute = gln_cpu_moe_permute,
    .moe_permute_backward = gln_cpu_moe_permute_backward,
    .moe_unpermute = gln_cpu_moe_unpermute,
    .moe_unpermute_backward = gln_cpu_moe_unpermute_backward,
    .activation_forward = gln_cpu_activation_forward,
    .activation_backward = gln_cpu_activation_backward,
};

const gln_backend_ops_t *gln_backend_cpu_ops(void) { return &cpu_ops; }
