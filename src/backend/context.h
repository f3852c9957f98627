/* The context: which backend, which device, and the backend's private state. */
#ifndef GLN_BACKEND_CONTEXT_H
#define GLN_BACKEND_CONTEXT_H

#include "grouplin.h"

/* The backend's function table (backend/backend.h): files that call through ctx->ops include
 * that header themselves. */
struct gln_backend_ops;

struct gln_context {
    gln_backend_kind_t kind;
    const struct gln_backend_ops *ops;
    int device;
    int num_threads;
    void *stream;        /* the caller's stream from the options (NULL: the backend makes one) */
    gln_alloc_fn alloc;  /* the caller's scratch allocator, or NULL */
    gln_free_fn free;
    void *alloc_user;
    void *backend_state; /* owned by the backend (init / fini) */
};

/* The library's own backend memory (0 bytes gives NULL and success): the backend's
 * stream-ordered scratch where it has one (CUDA: the context's pool, or the caller's allocator),
 * else its malloc.  Free with gln_ctx_free, never gln_free. */
gln_status_t gln_ctx_alloc(gln_context_t *ctx, size_t bytes, void **ptr);
void gln_ctx_free(gln_context_t *ctx, void *ptr);
gln_status_t gln_ctx_zero(gln_context_t *ctx, void *ptr, size_t bytes);

#endif
