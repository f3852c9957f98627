/* Public communicator calls: argument validation, then dispatch through the ops table.
 *
 * Every check lives here so the self and MPI communicators reject the same inputs with the
 * same messages (a test on one rank predicts the behaviour on many). */
#include "comm/comm.h"

#include <stdint.h>
#include <stdlib.h>

#include "common/error.h"

gln_status_t gln_comm_new(const gln_comm_ops_t *ops, int rank, int size, void *impl,
                          gln_comm_t **comm) {
    gln_comm_t *c = calloc(1, sizeof *c);
    if (!c) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "gln_comm: out of host memory");
    c->ops = ops;
    c->rank = rank;
    c->size = size;
    c->impl = impl;
    *comm = c;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_comm_destroy(gln_comm_t *comm) {
    if (!comm) return GLN_STATUS_SUCCESS;
    if (comm->ops->destroy) comm->ops->destroy(comm);
    free(comm);
    return GLN_STATUS_SUCCESS;
}

/* -1 / 0 flag a NULL communicator (no valid rank or size is negative or zero). */
int gln_comm_rank(const gln_comm_t *comm) { return comm ? comm->rank : -1; }
int gln_comm_size(const gln_comm_t *comm) { return comm ? comm->size : 0; }

gln_status_t gln_comm_check_reducible(const char *fn, gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_FP32:
    case GLN_DTYPE_INT32:
    case GLN_DTYPE_INT64: return GLN_STATUS_SUCCESS;
    case GLN_DTYPE_BF16:
    case GLN_DTYPE_FP16:
        return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                        "%s: reductions in %s are not supported (sum in fp32: convert first)", fn,
                        gln_dtype_name(dtype));
    default: break;
    }
    if (gln_dtype_size(dtype) == 0)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: dtype %d is not a dtype (0..%d)", fn,
                        (int)dtype, (int)GLN_DTYPE_COUNT_ - 1);
    return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                    "%s: reductions in %s are not supported (reducible: fp32, int32, int64)", fn,
                    gln_dtype_name(dtype));
}

static gln_status_t check_op(const char *fn, gln_reduce_op_t op) {
    GLN_REQUIRE_ARG(op == GLN_REDUCE_SUM || op == GLN_REDUCE_MAX,
                    "%s: op %d is not a reduction (0 = sum, 1 = max)", fn, (int)op);
    return GLN_STATUS_SUCCESS;
}

/* Bytes of `count` elements of `dtype` times `ranks`, refusing size_t overflow. */
static gln_status_t message_bytes(const char *fn, size_t count, gln_dtype_t dtype, size_t ranks,
                                  size_t *bytes) {
    size_t es = gln_dtype_size(dtype);
    GLN_REQUIRE_ARG(es != 0, "%s: dtype %d is not a dtype (0..%d)", fn, (int)dtype,
                    (int)GLN_DTYPE_COUNT_ - 1);
    GLN_REQUIRE_ARG(count <= SIZE_MAX / es / ranks,
                    "%s: count %zu x %zu rank(s) x %zu bytes overflows the address space", fn,
                    count, ranks, es);
    *bytes = count * es * ranks;
    return GLN_STATUS_SUCCESS;
}

static int overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + b_bytes && pb < pa + a_bytes;
}

/* Common checks of a collective: communicator, buffers (NULL allowed only when empty), and
 * the transport's per-call limit. */
static gln_status_t check_buffers(const char *fn, const gln_comm_t *comm, const void *send,
                                  const void *recv, size_t count) {
    GLN_REQUIRE_NOT_NULL(fn, comm);
    if (count == 0) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE(count <= comm->ops->max_count, GLN_STATUS_NOT_SUPPORTED,
                "%s: %zu elements per rank exceed the %s communicator's limit of %zu per call "
                "(INT_MAX for MPI); split the message",
                fn, count, comm->ops->name, comm->ops->max_count);
    GLN_REQUIRE_NOT_NULL(fn, send);
    GLN_REQUIRE_NOT_NULL(fn, recv);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_comm_allgather(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                gln_dtype_t dtype) {
    static const char *fn = "gln_comm_allgather";
    GLN_TRY(check_buffers(fn, comm, send, recv, count));
    size_t bytes, total;
    GLN_TRY(message_bytes(fn, count, dtype, 1, &bytes));
    GLN_TRY(message_bytes(fn, count, dtype, (size_t)comm->size, &total));
    if (count == 0) return GLN_STATUS_SUCCESS;
    const char *own = (const char *)recv + (size_t)comm->rank * bytes;
    GLN_REQUIRE_ARG(send == own || !overlap(send, bytes, recv, total),
                    "%s: send overlaps recv other than in place (send == recv + rank*count)", fn);
    return comm->ops->allgather(comm, send, recv, bytes, gln_dtype_size(dtype));
}

static gln_status_t check_reduce_scatter(const char *fn, gln_comm_t *comm, const void *send,
                                         void *recv, size_t count, gln_dtype_t dtype,
                                         gln_reduce_op_t op) {
    GLN_TRY(check_buffers(fn, comm, send, recv, count));
    GLN_TRY(check_op(fn, op));
    GLN_TRY(gln_comm_check_reducible(fn, dtype));
    size_t bytes, total;
    GLN_TRY(message_bytes(fn, count, dtype, 1, &bytes));
    GLN_TRY(message_bytes(fn, count, dtype, (size_t)comm->size, &total));
    GLN_REQUIRE_ARG(count == 0 || !overlap(send, total, recv, bytes),
                    "%s: send and recv must not overlap", fn);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_comm_reduce_scatter(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                     gln_dtype_t dtype, gln_reduce_op_t op) {
    GLN_TRY(check_reduce_scatter("gln_comm_reduce_scatter", comm, send, recv, count, dtype, op));
    if (count == 0) return GLN_STATUS_SUCCESS;
    return comm->ops->reduce_scatter(comm, send, recv, count, dtype, op);
}

gln_status_t gln_comm_reduce_scatter_start(gln_comm_t *comm, const void *send, void *recv,
                                           size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                           void **request) {
    static const char *fn = "gln_comm_reduce_scatter_start";
    GLN_REQUIRE_NOT_NULL(fn, request);
    *request = NULL;
    GLN_TRY(check_reduce_scatter(fn, comm, send, recv, count, dtype, op));
    if (count == 0) return GLN_STATUS_SUCCESS;
    if (!comm->ops->reduce_scatter_start)
        return comm->ops->reduce_scatter(comm, send, recv, count, dtype, op);
    return comm->ops->reduce_scatter_start(comm, send, recv, count, dtype, op, request);
}

gln_status_t gln_comm_wait(gln_comm_t *comm, void *request) {
    GLN_REQUIRE_NOT_NULL("gln_comm_wait", comm);
    if (!request) return GLN_STATUS_SUCCESS;
    return comm->ops->wait(comm, request);
}

gln_status_t gln_comm_allreduce(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                gln_dtype_t dtype, gln_reduce_op_t op) {
    static const char *fn = "gln_comm_allreduce";
    GLN_TRY(check_buffers(fn, comm, send, recv, count));
    GLN_TRY(check_op(fn, op));
    GLN_TRY(gln_comm_check_reducible(fn, dtype));
    size_t bytes;
    GLN_TRY(message_bytes(fn, count, dtype, 1, &bytes));
    if (count == 0) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_ARG(send == recv || !overlap(send, bytes, recv, bytes),
                    "%s: send and recv overlap other than in place (send == recv)", fn);
    return comm->ops->allreduce(comm, send, recv, count, dtype, op);
}

gln_status_t gln_comm_barrier(gln_comm_t *comm) {
    GLN_REQUIRE_NOT_NULL("gln_comm_barrier", comm);
    return comm->ops->barrier(comm);
}
