/* Public communicator calls: argument validation, the agreement step, then dispatch through
 * the ops table.
 *
 * Every check lives here so the self and MPI communicators reject the same inputs with the
 * same messages (a test on one rank predicts the behaviour on many).  A collective never
 * returns early on one rank only: the local checks' verdict and the call's shape go through
 * gln_comm_agree first, so a bad argument on any rank fails the call on every rank. */
#include "comm/comm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/context.h"
#include "common/error.h"

gln_status_t gln_comm_new(const gln_comm_ops_t *ops, gln_context_t *ctx, int rank, int size,
                          void *impl, gln_comm_t **comm) {
    gln_comm_t *c = calloc(1, sizeof *c);
    if (!c) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "gln_comm: out of host memory");
    c->ops = ops;
    c->ctx = ctx;
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
gln_context_t *gln_comm_context(const gln_comm_t *comm) { return comm ? comm->ctx : NULL; }

int gln_comm_on_host(const gln_comm_t *comm) {
    return !comm->ctx || comm->ctx->kind == GLN_BACKEND_CPU;
}

gln_status_t gln_comm_host_allreduce(gln_comm_t *comm, int64_t *v, size_t count,
                                     gln_reduce_op_t op) {
    if (comm->ops->host_allreduce) return comm->ops->host_allreduce(comm, v, count, op);
    return comm->ops->allreduce(comm, v, v, count, GLN_DTYPE_INT64, op);
}

static const char *const call_names[GLN_CALL_COUNT_] = {
    "(no call)",
    "gln_comm_allgather",
    "gln_comm_reduce_scatter",
    "gln_comm_reduce_scatter_start",
    "gln_comm_allreduce",
    "gln_sharded_weights_gather_master",
    "gln_sharded_weights_gather_main_grad",
    "materialize_forward",
    "materialize_backward",
    "finalize_grads",
    "gln_grouped_linear_forward",
    "gln_grouped_linear_backward",
    "prefetch",
    "requantize",
};

const char *gln_call_name(int64_t call) {
    return call > 0 && call < GLN_CALL_COUNT_ ? call_names[call] : "an unknown call";
}

/* Failure code: (size - rank) << 8 | status, so the MAX over ranks names the lowest failing
 * rank and carries its status (statuses fit in 8 bits). */
static int64_t failure_code(const gln_comm_t *comm, gln_status_t st) {
    return ((int64_t)(comm->size - comm->rank) << 8) | (int64_t)(st & 0xff);
}

gln_status_t gln_comm_agree(gln_comm_t *comm, const char *fn, gln_status_t local,
                            const gln_agree_t *shape) {
    if (!comm || comm->size == 1) return local; /* nobody to agree with */
    enum { F = GLN_AGREE_FIELDS };
    int64_t v[1 + 2 * F] = {0};
    char local_msg[512] = "";
    if (local != GLN_STATUS_SUCCESS) {
        snprintf(local_msg, sizeof local_msg, "%s", gln_last_error());
        v[0] = failure_code(comm, local);
    } else {
        for (int i = 0; i < F; i++) {
            int64_t x = shape->v[i] == INT64_MIN ? INT64_MIN + 1 : shape->v[i];
            v[1 + i] = x;
            v[1 + F + i] = -x;
        }
    }
    gln_status_t st = gln_comm_host_allreduce(comm, v, 1 + 2 * F, GLN_REDUCE_MAX);
    if (local != GLN_STATUS_SUCCESS) return gln_fail(local, "%s", local_msg);
    if (st != GLN_STATUS_SUCCESS) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", gln_last_error());
        return gln_fail(st, "%s: the agreement step before the collective failed: %s", fn, detail);
    }
    if (v[0] != 0) {
        int rank = comm->size - (int)(v[0] >> 8);
        gln_status_t other = (gln_status_t)(v[0] & 0xff);
        return gln_fail(other,
                        "%s: rank %d failed (%s; its own error says why), so no rank ran the "
                        "collective",
                        fn, rank, gln_status_string(other));
    }
    for (int i = 0; i < F; i++) {
        int64_t hi = v[1 + i], lo = -v[1 + F + i];
        if (hi == lo) continue;
        if (i == 0)
            return gln_fail(GLN_STATUS_COMM_ERROR,
                            "%s: ranks are in different calls (%s on one rank, %s on another); "
                            "every rank must make the same collective calls in the same order",
                            fn, gln_call_name(lo), gln_call_name(hi));
        return gln_fail(GLN_STATUS_COMM_ERROR,
                        "%s: ranks disagree on %s (min %lld, max %lld); every rank must pass the "
                        "same %s",
                        fn, shape->name[i], (long long)lo, (long long)hi, shape->name[i]);
    }
    return GLN_STATUS_SUCCESS;
}

static int64_t count_field(size_t count) {
    return count > (size_t)INT64_MAX ? INT64_MAX : (int64_t)count;
}

/* The shape every rank of a collective must share. */
static gln_agree_t collective_shape(gln_call_t call, size_t count, gln_dtype_t dtype, int op) {
    gln_agree_t a = {{call, count_field(count), (int64_t)dtype, op, 0, 0},
                     {"call", "count", "dtype", "op", "", ""}};
    return a;
}

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

static gln_status_t check_allgather(const char *fn, gln_comm_t *comm, const void *send,
                                    void *recv, size_t count, gln_dtype_t dtype) {
    GLN_TRY(check_buffers(fn, comm, send, recv, count));
    size_t bytes = 0, total = 0; /* set by message_bytes; zeroed for GCC's flow analysis */
    GLN_TRY(message_bytes(fn, count, dtype, 1, &bytes));
    GLN_TRY(message_bytes(fn, count, dtype, (size_t)comm->size, &total));
    if (count == 0) return GLN_STATUS_SUCCESS;
    const char *own = (const char *)recv + (size_t)comm->rank * bytes;
    GLN_REQUIRE_ARG(send == own || !overlap(send, bytes, recv, total),
                    "%s: send overlaps recv other than in place (send == recv + rank*count)", fn);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t run_allgather(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                  gln_dtype_t dtype) {
    if (count == 0) return GLN_STATUS_SUCCESS;
    size_t es = gln_dtype_size(dtype);
    return comm->ops->allgather(comm, send, recv, count * es, es);
}

gln_status_t gln_comm_allgather(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                gln_dtype_t dtype) {
    static const char *fn = "gln_comm_allgather";
    GLN_REQUIRE_NOT_NULL(fn, comm);
    gln_agree_t shape = collective_shape(GLN_CALL_ALLGATHER, count, dtype, 0);
    GLN_TRY(gln_comm_agree(comm, fn, check_allgather(fn, comm, send, recv, count, dtype), &shape));
    return run_allgather(comm, send, recv, count, dtype);
}

gln_status_t gln_comm_allgather_agreed(gln_comm_t *comm, const void *send, void *recv,
                                       size_t count, gln_dtype_t dtype) {
    GLN_TRY(check_allgather("gln_comm_allgather", comm, send, recv, count, dtype));
    return run_allgather(comm, send, recv, count, dtype);
}

static gln_status_t check_reduce_scatter(const char *fn, gln_comm_t *comm, const void *send,
                                         void *recv, size_t count, gln_dtype_t dtype,
                                         gln_reduce_op_t op) {
    GLN_TRY(check_buffers(fn, comm, send, recv, count));
    GLN_TRY(check_op(fn, op));
    GLN_TRY(gln_comm_check_reducible(fn, dtype));
    size_t bytes = 0, total = 0;
    GLN_TRY(message_bytes(fn, count, dtype, 1, &bytes));
    GLN_TRY(message_bytes(fn, count, dtype, (size_t)comm->size, &total));
    GLN_REQUIRE_ARG(count == 0 || !overlap(send, total, recv, bytes),
                    "%s: send and recv must not overlap", fn);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_comm_reduce_scatter(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                     gln_dtype_t dtype, gln_reduce_op_t op) {
    static const char *fn = "gln_comm_reduce_scatter";
    GLN_REQUIRE_NOT_NULL(fn, comm);
    gln_agree_t shape = collective_shape(GLN_CALL_REDUCE_SCATTER, count, dtype, (int)op);
    GLN_TRY(gln_comm_agree(comm, fn, check_reduce_scatter(fn, comm, send, recv, count, dtype, op),
                           &shape));
    if (count == 0) return GLN_STATUS_SUCCESS;
    return comm->ops->reduce_scatter(comm, send, recv, count, dtype, op);
}

gln_status_t gln_comm_reduce_scatter_agreed(gln_comm_t *comm, const void *send, void *recv,
                                            size_t count, gln_dtype_t dtype, gln_reduce_op_t op) {
    GLN_TRY(check_reduce_scatter("gln_comm_reduce_scatter", comm, send, recv, count, dtype, op));
    if (count == 0) return GLN_STATUS_SUCCESS;
    return comm->ops->reduce_scatter(comm, send, recv, count, dtype, op);
}

static gln_status_t run_reduce_scatter_start(gln_comm_t *comm, const void *send, void *recv,
                                             size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                             void **request) {
    if (count == 0) return GLN_STATUS_SUCCESS;
    if (!comm->ops->reduce_scatter_start)
        return comm->ops->reduce_scatter(comm, send, recv, count, dtype, op);
    return comm->ops->reduce_scatter_start(comm, send, recv, count, dtype, op, request);
}

gln_status_t gln_comm_reduce_scatter_start(gln_comm_t *comm, const void *send, void *recv,
                                           size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                           void **request) {
    static const char *fn = "gln_comm_reduce_scatter_start";
    GLN_REQUIRE_NOT_NULL(fn, comm);
    gln_status_t local = request ? GLN_STATUS_SUCCESS
                                 : gln_fail(GLN_STATUS_INVALID_ARGUMENT,
                                            "%s: request must not be NULL", fn);
    if (request) *request = NULL;
    if (local == GLN_STATUS_SUCCESS)
        local = check_reduce_scatter(fn, comm, send, recv, count, dtype, op);
    gln_agree_t shape = collective_shape(GLN_CALL_REDUCE_SCATTER_START, count, dtype, (int)op);
    GLN_TRY(gln_comm_agree(comm, fn, local, &shape));
    return run_reduce_scatter_start(comm, send, recv, count, dtype, op, request);
}

gln_status_t gln_comm_reduce_scatter_start_agreed(gln_comm_t *comm, const void *send, void *recv,
                                                  size_t count, gln_dtype_t dtype,
                                                  gln_reduce_op_t op, void **request) {
    static const char *fn = "gln_comm_reduce_scatter_start";
    GLN_REQUIRE_NOT_NULL(fn, request);
    *request = NULL;
    GLN_TRY(check_reduce_scatter(fn, comm, send, recv, count, dtype, op));
    return run_reduce_scatter_start(comm, send, recv, count, dtype, op, request);
}

gln_status_t gln_comm_allgather_start_agreed(gln_comm_t *comm, const void *send, void *recv,
                                             size_t count, gln_dtype_t dtype, void **request) {
    static const char *fn = "gln_comm_allgather_start";
    GLN_REQUIRE_NOT_NULL(fn, request);
    *request = NULL;
    GLN_TRY(check_allgather(fn, comm, send, recv, count, dtype));
    if (count == 0) return GLN_STATUS_SUCCESS;
    size_t es = gln_dtype_size(dtype);
    if (!comm->ops->allgather_start) return comm->ops->allgather(comm, send, recv, count * es, es);
    return comm->ops->allgather_start(comm, send, recv, count * es, es, request);
}

gln_status_t gln_comm_wait(gln_comm_t *comm, void *request) {
    GLN_REQUIRE_NOT_NULL("gln_comm_wait", comm);
    if (!request) return GLN_STATUS_SUCCESS;
    return comm->ops->wait(comm, request);
}

static gln_status_t check_allreduce(const char *fn, gln_comm_t *comm, const void *send,
                                    void *recv, size_t count, gln_dtype_t dtype,
                                    gln_reduce_op_t op) {
    GLN_TRY(check_buffers(fn, comm, send, recv, count));
    GLN_TRY(check_op(fn, op));
    GLN_TRY(gln_comm_check_reducible(fn, dtype));
    size_t bytes = 0;
    GLN_TRY(message_bytes(fn, count, dtype, 1, &bytes));
    GLN_REQUIRE_ARG(count == 0 || send == recv || !overlap(send, bytes, recv, bytes),
                    "%s: send and recv overlap other than in place (send == recv)", fn);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_comm_allreduce(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                gln_dtype_t dtype, gln_reduce_op_t op) {
    static const char *fn = "gln_comm_allreduce";
    GLN_REQUIRE_NOT_NULL(fn, comm);
    gln_agree_t shape = collective_shape(GLN_CALL_ALLREDUCE, count, dtype, (int)op);
    GLN_TRY(gln_comm_agree(comm, fn, check_allreduce(fn, comm, send, recv, count, dtype, op),
                           &shape));
    if (count == 0) return GLN_STATUS_SUCCESS;
    return comm->ops->allreduce(comm, send, recv, count, dtype, op);
}

gln_status_t gln_comm_allreduce_agreed(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                       gln_dtype_t dtype, gln_reduce_op_t op) {
    GLN_TRY(check_allreduce("gln_comm_allreduce", comm, send, recv, count, dtype, op));
    if (count == 0) return GLN_STATUS_SUCCESS;
    return comm->ops->allreduce(comm, send, recv, count, dtype, op);
}

gln_status_t gln_comm_barrier(gln_comm_t *comm) {
    GLN_REQUIRE_NOT_NULL("gln_comm_barrier", comm);
    return comm->ops->barrier(comm);
}
