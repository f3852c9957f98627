/* The self communicator: one rank, no dependencies.  Every collective over one rank is a copy
 * (a sum or max over a single contribution is the contribution itself).  Bound to a context, the
 * copy is the context's stream-ordered backend-to-backend copy (device memory on CUDA); without
 * one (or on a CPU context) it is a memcpy of host memory.  Nothing is asynchronous: a copy on the
 * context's stream is already ordered with the caller's later work, so start needs no request. */
#include <stdint.h>
#include <string.h>

#include "backend/context.h"
#include "backend/ops.h"
#include "comm/comm.h"
#include "common/error.h"

static gln_status_t self_copy(gln_comm_t *comm, void *dst, const void *src, size_t bytes) {
    if (dst == src || bytes == 0) return GLN_STATUS_SUCCESS;
    if (gln_comm_on_host(comm)) {
        memcpy(dst, src, bytes);
        return GLN_STATUS_SUCCESS;
    }
    return gln_op_memcpy(comm->ctx, dst, src, bytes, GLN_COPY_BACKEND_TO_BACKEND);
}

static gln_status_t self_allgather(gln_comm_t *comm, const void *send, void *recv, size_t bytes,
                                   size_t elem_size) {
    (void)elem_size;
    return self_copy(comm, recv, send, bytes);
}

static gln_status_t self_reduce_scatter(gln_comm_t *comm, const void *send, void *recv,
                                        size_t count, gln_dtype_t dtype, gln_reduce_op_t op) {
    (void)op;
    return self_copy(comm, recv, send, count * gln_dtype_size(dtype));
}

static gln_status_t self_allreduce(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                   gln_dtype_t dtype, gln_reduce_op_t op) {
    (void)op;
    return self_copy(comm, recv, send, count * gln_dtype_size(dtype));
}

/* The agreement step never runs over one rank; the creation handshake's vector is host memory. */
static gln_status_t self_host_allreduce(gln_comm_t *comm, int64_t *v, size_t count,
                                        gln_reduce_op_t op) {
    (void)comm;
    (void)v;
    (void)count;
    (void)op;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t self_barrier(gln_comm_t *comm) {
    (void)comm;
    return GLN_STATUS_SUCCESS;
}

static const gln_comm_ops_t self_ops = {
    .name = "self",
    .max_count = SIZE_MAX,
    .allgather = self_allgather,
    .reduce_scatter = self_reduce_scatter,
    .allreduce = self_allreduce,
    .barrier = self_barrier,
    .reduce_scatter_start = NULL, /* a copy in stream order completes "immediately" */
    .wait = NULL,
    .allgather_start = NULL,
    .host_allreduce = self_host_allreduce,
    .destroy = NULL,
};

gln_status_t gln_comm_create_self(gln_context_t *ctx, gln_comm_t **comm) {
    GLN_REQUIRE_NOT_NULL("gln_comm_create_self", comm);
    *comm = NULL;
    return gln_comm_new(&self_ops, ctx, 0, 1, NULL, comm);
}
