/* The MPI communicator (built when MPI is found; comm_mpi_stub.c otherwise).
 *
 * It works on a duplicate of the caller's communicator, so our collectives can never match
 * the caller's own traffic, and sets MPI_ERRORS_RETURN on that duplicate so a failure comes
 * back as GLN_STATUS_COMM_ERROR with MPI's message instead of aborting the job.  MPI counts
 * are ints: messages of more than INT_MAX elements per rank are rejected by the
 * dispatcher (allgather counts in elements of the dtype, so the limit is elements, not bytes). */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "backend/context.h"
#include "common/error.h"

typedef struct mpi_state {
    MPI_Comm comm;
} mpi_state_t;

static MPI_Comm mpi_of(const gln_comm_t *comm) { return ((const mpi_state_t *)comm->impl)->comm; }

/* Translate an MPI return code into a status carrying MPI's own description. */
static gln_status_t mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return GLN_STATUS_SUCCESS;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    return gln_fail(GLN_STATUS_COMM_ERROR, "%s failed: %s (MPI error %d)", what,
                    len ? text : "unknown error", rc);
}

/* The dispatcher already refused counts above max_count = INT_MAX. */
static int mpi_count(size_t count) { return (int)count; }

static MPI_Datatype mpi_dtype(gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_FP32: return MPI_FLOAT;
    case GLN_DTYPE_INT32: return MPI_INT32_T;
    case GLN_DTYPE_INT64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL; /* excluded by gln_comm_check_reducible */
    }
}

static MPI_Op mpi_op(gln_reduce_op_t op) { return op == GLN_REDUCE_MAX ? MPI_MAX : MPI_SUM; }

/* A contiguous MPI type of `elem_size` bytes, so gathers count elements. */
static gln_status_t elem_type(size_t elem_size, MPI_Datatype *type) {
    if (elem_size == 1) {
        *type = MPI_BYTE;
        return GLN_STATUS_SUCCESS;
    }
    GLN_TRY(mpi_check(MPI_Type_contiguous((int)elem_size, MPI_BYTE, type), "gln_comm_allgather: MPI_Type_contiguous"));
    gln_status_t st = mpi_check(MPI_Type_commit(type), "gln_comm_allgather: MPI_Type_commit");
    if (st != GLN_STATUS_SUCCESS) MPI_Type_free(type);
    return st;
}

static gln_status_t mpi_allgather(gln_comm_t *comm, const void *send, void *recv, size_t bytes,
                                  size_t elem_size) {
    int n = mpi_count(bytes / elem_size);
    MPI_Datatype type;
    GLN_TRY(elem_type(elem_size, &type));
    const char *own = (const char *)recv + (size_t)comm->rank * bytes;
    const void *src = send == own ? MPI_IN_PLACE : send;
    gln_status_t st =
        mpi_check(MPI_Allgather(src, n, type, recv, n, type, mpi_of(comm)), "gln_comm_allgather: MPI_Allgather");
    if (type != MPI_BYTE) MPI_Type_free(&type);
    return st;
}

static gln_status_t mpi_reduce_scatter(gln_comm_t *comm, const void *send, void *recv,
                                       size_t count, gln_dtype_t dtype, gln_reduce_op_t op) {
    int n = mpi_count(count);
    return mpi_check(MPI_Reduce_scatter_block(send, recv, n, mpi_dtype(dtype), mpi_op(op),
                                              mpi_of(comm)),
                     "gln_comm_reduce_scatter: MPI_Reduce_scatter_block");
}

static gln_status_t mpi_reduce_scatter_start(gln_comm_t *comm, const void *send, void *recv,
                                             size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                             void **request) {
    int n = mpi_count(count);
    MPI_Request *req = malloc(sizeof *req);
    GLN_REQUIRE(req != NULL, GLN_STATUS_OUT_OF_MEMORY,
                "gln_comm_reduce_scatter_start: out of host memory");
    gln_status_t st = mpi_check(MPI_Ireduce_scatter_block(send, recv, n, mpi_dtype(dtype),
                                                          mpi_op(op), mpi_of(comm), req),
                                "gln_comm_reduce_scatter_start: MPI_Ireduce_scatter_block");
    if (st != GLN_STATUS_SUCCESS) {
        free(req);
        return st;
    }
    *request = req;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t mpi_wait(gln_comm_t *comm, void *request) {
    (void)comm;
    MPI_Request *req = request;
    gln_status_t st = mpi_check(MPI_Wait(req, MPI_STATUS_IGNORE), "gln_comm_wait: MPI_Wait");
    free(req);
    return st;
}

static gln_status_t mpi_allreduce(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                  gln_dtype_t dtype, gln_reduce_op_t op) {
    int n = mpi_count(count);
    const void *src = send == recv ? MPI_IN_PLACE : send;
    return mpi_check(MPI_Allreduce(src, recv, n, mpi_dtype(dtype), mpi_op(op), mpi_of(comm)),
                     "gln_comm_allreduce: MPI_Allreduce");
}

static gln_status_t mpi_allgather_start(gln_comm_t *comm, const void *send, void *recv,
                                        size_t bytes, size_t elem_size, void **request) {
    int n = mpi_count(bytes / elem_size);
    MPI_Datatype type;
    GLN_TRY(elem_type(elem_size, &type));
    MPI_Request *req = malloc(sizeof *req);
    gln_status_t st = GLN_STATUS_SUCCESS;
    GLN_CHECK_COND(st, fail, req != NULL, GLN_STATUS_OUT_OF_MEMORY,
                   "gln_comm_allgather_start: out of host memory");
    const char *own = (const char *)recv + (size_t)comm->rank * bytes;
    const void *src = send == own ? MPI_IN_PLACE : send;
    GLN_CHECK(st, fail, mpi_check(MPI_Iallgather(src, n, type, recv, n, type, mpi_of(comm), req),
                                  "gln_comm_allgather_start: MPI_Iallgather"));
    *request = req;
    req = NULL;
fail:
    /* A committed type may be freed while a non-blocking operation still uses it (MPI keeps
     * its own reference until the operation completes). */
    if (type != MPI_BYTE) MPI_Type_free(&type);
    free(req);
    return st;
}

static gln_status_t mpi_barrier(gln_comm_t *comm) {
    return mpi_check(MPI_Barrier(mpi_of(comm)), "gln_comm_barrier: MPI_Barrier");
}

static void mpi_destroy(gln_comm_t *comm) {
    mpi_state_t *s = comm->impl;
    if (!s) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* After MPI_Finalize no MPI call is allowed; the duplicate died with MPI itself. */
    if (!finalized && s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
    free(s);
    comm->impl = NULL;
}

static const gln_comm_ops_t mpi_ops = {
    .name = "mpi",
    .max_count = (size_t)INT_MAX,
    .allgather = mpi_allgather,
    .reduce_scatter = mpi_reduce_scatter,
    .allreduce = mpi_allreduce,
    .barrier = mpi_barrier,
    .reduce_scatter_start = mpi_reduce_scatter_start,
    .wait = mpi_wait,
    .allgather_start = mpi_allgather_start,
    .host_allreduce = NULL, /* MPI moves host memory: allreduce serves */
    .destroy = mpi_destroy,
};

int gln_mpi_available(void) { return 1; }

/* MPI must be usable: initialized by the caller and not yet finalized. */
static gln_status_t check_mpi_running(const char *fn) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    GLN_REQUIRE(initialized && !finalized, GLN_STATUS_INVALID_STATE,
                "%s: MPI is %s (call MPI_Init before and MPI_Finalize after using grouplin)", fn,
                finalized ? "already finalized" : "not initialized");
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_comm_create_mpi(gln_context_t *ctx, const void *mpi_comm, gln_comm_t **comm) {
    static const char *fn = "gln_comm_create_mpi";
    GLN_REQUIRE_NOT_NULL(fn, comm);
    *comm = NULL;
    GLN_REQUIRE(!ctx || ctx->kind == GLN_BACKEND_CPU, GLN_STATUS_NOT_SUPPORTED,
                "%s: ctx uses the %s backend; the MPI communicator moves host memory only (pass a "
                "CPU context or NULL; on GPUs use gln_comm_create_nccl)",
                fn, gln_backend_name(ctx->kind));
    GLN_TRY(check_mpi_running(fn));
    MPI_Comm parent = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    GLN_REQUIRE_ARG(parent != MPI_COMM_NULL, "%s: *mpi_comm is MPI_COMM_NULL", fn);

    gln_status_t st = GLN_STATUS_SUCCESS;
    int rank = 0, size = 0;
    mpi_state_t *s = calloc(1, sizeof *s);
    GLN_CHECK_COND(st, fail, s != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    s->comm = MPI_COMM_NULL;
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_dup(parent, &s->comm), "gln_comm_create_mpi: MPI_Comm_dup"));
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN),
                                  "gln_comm_create_mpi: MPI_Comm_set_errhandler"));
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_rank(s->comm, &rank), "gln_comm_create_mpi: MPI_Comm_rank"));
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_size(s->comm, &size), "gln_comm_create_mpi: MPI_Comm_size"));
    GLN_CHECK(st, fail, gln_comm_new(&mpi_ops, ctx, rank, size, s, comm));
    return GLN_STATUS_SUCCESS;
fail:
    if (s && s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
    free(s);
    return st;
}
