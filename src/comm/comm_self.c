/* The self communicator: one rank, no dependencies.  Every collective over one rank is a copy
 * (a sum or max over a single contribution is the contribution itself). */
#include <stdint.h>
#include <string.h>

#include "comm/comm.h"
#include "common/error.h"

static gln_status_t self_allgather(gln_comm_t *comm, const void *send, void *recv, size_t bytes,
                                   size_t elem_size) {
    (void)comm;
    (void)elem_size;
    if (send != recv) memcpy(recv, send, bytes);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t self_reduce_scatter(gln_comm_t *comm, const void *send, void *recv,
                                        size_t count, gln_dtype_t dtype, gln_reduce_op_t op) {
    (void)comm;
    (void)op;
    memcpy(recv, send, count * gln_dtype_size(dtype));
    return GLN_STATUS_SUCCESS;
}

static gln_status_t self_allreduce(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                   gln_dtype_t dtype, gln_reduce_op_t op) {
    (void)comm;
    (void)op;
    if (send != recv) memcpy(recv, send, count * gln_dtype_size(dtype));
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
    .reduce_scatter_start = NULL, /* a copy completes immediately */
    .wait = NULL,
    .destroy = NULL,
};

gln_status_t gln_comm_create_self(gln_comm_t **comm) {
    GLN_REQUIRE_NOT_NULL("gln_comm_create_self", comm);
    *comm = NULL;
    return gln_comm_new(&self_ops, 0, 1, NULL, comm);
}
