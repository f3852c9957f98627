/* Contexts: creation from versioned options (the backend's table comes from
 * gln_backend_ops_for, src/backend/select.c), streams, the async error word, and the memory entry
 * points every other module allocates through. */
#include "backend/context.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "common/error.h"

gln_status_t gln_context_create(const gln_context_options_t *options, gln_context_t **ctx) {
    static const char *fn = "gln_context_create";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    *ctx = NULL;
    gln_context_options_t opts = GLN_CONTEXT_OPTIONS_INIT;
    if (options) {
        /* Known versions: the first (up to num_threads) and the current one.  Only the bytes of
         * the caller's version are read; later fields keep their defaults. */
        const size_t v1 = offsetof(gln_context_options_t, stream);
        GLN_REQUIRE_ARG(options->size == v1 || options->size == sizeof opts,
                        "%s: options->size %zu is not a known version (%zu or %zu; start from "
                        "GLN_CONTEXT_OPTIONS_INIT)",
                        fn, options->size, v1, sizeof opts);
        memcpy(&opts, options, options->size);
    }
    GLN_REQUIRE_ARG(opts.backend == GLN_BACKEND_CPU || opts.backend == GLN_BACKEND_CUDA,
                    "%s: options->backend %d is not a backend (0 = cpu, 1 = cuda)", fn,
                    (int)opts.backend);
    GLN_REQUIRE_ARG(opts.num_threads >= 0, "%s: options->num_threads %d must be >= 0", fn,
                    opts.num_threads);
    GLN_REQUIRE_ARG((opts.alloc == NULL) == (opts.free == NULL),
                    "%s: options->alloc and options->free must be set together (both or neither)", fn);
    GLN_REQUIRE_ARG(opts.backend == GLN_BACKEND_CUDA || opts.stream == NULL,
                    "%s: options->stream must be NULL for the cpu backend", fn);
    const gln_backend_ops_t *ops = gln_backend_ops_for(opts.backend);
    GLN_REQUIRE(ops != NULL, GLN_STATUS_NOT_SUPPORTED,
                "%s: the %s backend is not compiled into this build (configure with GLN_CUDA=ON)",
                fn, gln_backend_name(opts.backend));

    gln_context_t *c = calloc(1, sizeof *c);
    GLN_REQUIRE(c != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    c->kind = opts.backend;
    c->ops = ops;
    c->device = opts.device;
    c->num_threads = opts.num_threads;
    c->stream = opts.stream;
    c->alloc = opts.alloc;
    c->free = opts.free;
    c->alloc_user = opts.alloc_user;
    if (ops->init) {
        gln_status_t st = ops->init(c);
        if (st != GLN_STATUS_SUCCESS) {
            free(c);
            return st;
        }
    }
    *ctx = c;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_context_destroy(gln_context_t *ctx) {
    if (!ctx) return GLN_STATUS_SUCCESS;
    if (ctx->ops->fini) ctx->ops->fini(ctx);
    free(ctx);
    return GLN_STATUS_SUCCESS;
}

gln_backend_kind_t gln_context_backend(const gln_context_t *ctx) {
    return ctx ? ctx->kind : GLN_BACKEND_CPU;
}

gln_status_t gln_context_set_stream(gln_context_t *ctx, void *stream) {
    static const char *fn = "gln_context_set_stream";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    if (!ctx->ops->set_stream) {
        GLN_REQUIRE_ARG(stream == NULL, "%s: stream must be NULL for the %s backend", fn, ctx->ops->name);
        return GLN_STATUS_SUCCESS;
    }
    return ctx->ops->set_stream(ctx, stream);
}

void *gln_context_stream(const gln_context_t *ctx) {
    return ctx && ctx->ops->get_stream ? ctx->ops->get_stream(ctx) : NULL;
}

gln_status_t gln_context_async_error(gln_context_t *ctx) {
    GLN_REQUIRE_NOT_NULL("gln_context_async_error", ctx);
    return ctx->ops->async_error ? ctx->ops->async_error(ctx) : GLN_STATUS_SUCCESS;
}

gln_status_t gln_ctx_alloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    if (ctx->ops->scratch_alloc) return ctx->ops->scratch_alloc(ctx, bytes, ptr);
    return ctx->ops->malloc(ctx, bytes, ptr);
}

void gln_ctx_free(gln_context_t *ctx, void *ptr) {
    if (!ptr) return;
    if (ctx->ops->scratch_free)
        ctx->ops->scratch_free(ctx, ptr);
    else
        ctx->ops->free(ctx, ptr);
}

gln_status_t gln_ctx_zero(gln_context_t *ctx, void *ptr, size_t bytes) {
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    return ctx->ops->memset(ctx, ptr, 0, bytes);
}

gln_status_t gln_malloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    static const char *fn = "gln_malloc";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_REQUIRE_NOT_NULL(fn, ptr);
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    return ctx->ops->malloc(ctx, bytes, ptr);
}

gln_status_t gln_free(gln_context_t *ctx, void *ptr) {
    GLN_REQUIRE_NOT_NULL("gln_free", ctx);
    if (ptr) ctx->ops->free(ctx, ptr);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_memcpy(gln_context_t *ctx, void *dst, const void *src, size_t bytes,
                        gln_copy_kind_t kind) {
    static const char *fn = "gln_memcpy";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_NOT_NULL(fn, dst);
    GLN_REQUIRE_NOT_NULL(fn, src);
    GLN_REQUIRE_ARG(kind >= GLN_COPY_HOST_TO_BACKEND && kind <= GLN_COPY_BACKEND_TO_BACKEND,
                    "%s: kind %d is not a copy kind (0..2)", fn, (int)kind);
    return ctx->ops->memcpy(ctx, dst, src, bytes, kind);
}

gln_status_t gln_synchronize(gln_context_t *ctx) {
    GLN_REQUIRE_NOT_NULL("gln_synchronize", ctx);
    return ctx->ops->synchronize ? ctx->ops->synchronize(ctx) : GLN_STATUS_SUCCESS;
}
