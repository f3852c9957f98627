/* Host staging through the backend's table (stage.h). */
#include "backend/stage.h"

#include <stdlib.h>

#include "backend/backend.h"
#include "backend/context.h"
#include "common/error.h"

gln_status_t gln_stage_host_alloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    if (ctx->ops->host_alloc) return ctx->ops->host_alloc(ctx, bytes, ptr);
    *ptr = malloc(bytes);
    GLN_REQUIRE(*ptr != NULL, GLN_STATUS_OUT_OF_MEMORY,
                "grouplin: staging buffer: cannot allocate %zu bytes of host memory", bytes);
    return GLN_STATUS_SUCCESS;
}

void gln_stage_host_free(gln_context_t *ctx, void *ptr) {
    if (!ptr) return;
    if (ctx->ops->host_free) ctx->ops->host_free(ctx, ptr);
    else free(ptr);
}

/* The memcpy slot's contract (backend.h): copies that involve host memory return once the host
 * side may be read or reused. */
gln_status_t gln_stage_to_host(gln_context_t *ctx, void *dst, const void *src, size_t bytes) {
    return ctx->ops->memcpy(ctx, dst, src, bytes, GLN_COPY_BACKEND_TO_HOST);
}

gln_status_t gln_stage_to_backend(gln_context_t *ctx, void *dst, const void *src, size_t bytes) {
    return ctx->ops->memcpy(ctx, dst, src, bytes, GLN_COPY_HOST_TO_BACKEND);
}

gln_status_t gln_stage_synchronize(gln_context_t *ctx) { return ctx->ops->synchronize(ctx); }

gln_status_t gln_stage_capturing(gln_context_t *ctx, int *capturing) {
    *capturing = 0;
    return ctx->ops->stream_capturing ? ctx->ops->stream_capturing(ctx, capturing) : GLN_STATUS_SUCCESS;
}
