/* The CPU backend's ops table, host memory and initialization.
 *
 * Host memory is 64-byte aligned (one cache line, and what AVX-512 loads like) so that buffers
 * handed to OpenBLAS never straddle lines at their start.  Every copy kind is a plain memcpy:
 * "backend memory" is host memory here. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign under -std=c11 */

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_block_cache.h"
#include "common/context.h"
#include "common/error.h"

/* OpenBLAS's own thread control (declared here so no particular cblas header is needed). */
extern void openblas_set_num_threads(int num_threads);

#define GLN_CPU_ALIGNMENT 64

static gln_status_t cpu_init(gln_context_t *ctx) {
    /* OpenBLAS keeps one process-wide thread count: the last context created with an explicit
     * num_threads wins.  0 leaves OpenBLAS's own default (OPENBLAS_NUM_THREADS or all cores). */
    if (ctx->num_threads > 0) openblas_set_num_threads(ctx->num_threads);
    ctx->backend_state = gln_cpu_block_cache_create(); /* NULL: no reuse, still correct */
    return GLN_STATUS_SUCCESS;
}

static void cpu_fini(gln_context_t *ctx) {
    gln_cpu_block_cache_destroy(ctx->backend_state);
    ctx->backend_state = NULL;
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

static const gln_backend_ops_t cpu_ops = {
    .name = "cpu",
    .init = cpu_init,
    .fini = cpu_fini,
    .malloc = cpu_malloc,
    .free = cpu_free,
    .memcpy = cpu_memcpy,
    .memset = cpu_memset,
    .synchronize = cpu_synchronize,
    .quantize = gln_cpu_quantize,
    .dequantize = gln_cpu_dequantize,
    .grouped_quantize = gln_cpu_grouped_quantize,
    .mxfp8_swizzle = gln_cpu_mxfp8_swizzle,
    .gemm = gln_cpu_gemm,
    .grouped_gemm = gln_cpu_grouped_gemm,
    .grouped_dbias = gln_cpu_grouped_dbias,
    .amax = gln_cpu_amax,
    .cast = gln_cpu_cast,
};

const gln_backend_ops_t *gln_backend_cpu_ops(void) { return &cpu_ops; }
