/* The MPI communicator (built when MPI is found; comm_mpi_stub.c otherwise).
 *
 * It works on a duplicate of the caller's communicator, so our collectives can never match
 * the caller's own traffic, and sets MPI_ERRORS_RETURN on that duplicate so a failure comes
 * back as GLN_STATUS_COMM_ERROR with MPI's message instead of aborting the job.  MPI counts
 * are ints: messages of more than INT_MAX elements per rank are rejected by the
 * dispatcher (allgather counts in elements of the dtype, so the limit is elements, not bytes).
 *
 * On a device context (comm.h, gln_mpi_path_t) every collective first refuses inside a graph
 * capture of the context's stream (MPI is not stream-ordered: it would have to synchronize the
 * stream there), then either drains the stream and hands the device pointers to a CUDA-aware MPI
 * (DEVICE), or copies its input into a host staging buffer (STAGED: the copy synchronizes the
 * stream), runs the host collective there and copies the result back.  The staging buffer is one
 * allocation of page-locked memory, grown to the largest collective and freed at destroy.  Those
 * steps can fail on one rank only (no memory, a device error, a capture), so their verdict goes
 * through gln_comm_agree before MPI is entered: every rank fails together instead of waiting in a
 * collective that one rank never joins.  The asynchronous forms run synchronously there (the
 * staging synchronizes anyway; one staging buffer serves one collective at a time). */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support */
#endif
#endif

#include "comm/comm.h"
#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"

typedef struct mpi_state {
    MPI_Comm comm;
    gln_mpi_path_t path;
    gln_mpi_mover_t mv; /* device paths only */
    void *stage;        /* STAGED: host staging buffer of stage_bytes (mv.host_alloc) */
    size_t stage_bytes;
} mpi_state_t;

static mpi_state_t *state_of(const gln_comm_t *comm) { return (mpi_state_t *)comm->impl; }
static MPI_Comm mpi_of(const gln_comm_t *comm) { return state_of(comm)->comm; }

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

/* The agreement step's host-memory allreduce (also on a device communicator). */
static gln_status_t mpi_host_allreduce(gln_comm_t *comm, int64_t *v, size_t count, gln_reduce_op_t op) {
    return mpi_allreduce(comm, v, v, count, GLN_DTYPE_INT64, op);
}

/* ---- device memory: DEVICE (CUDA-aware) and STAGED ------------------------------------------ */

/* Grow the staging buffer to `bytes` (its contents need not survive). */
static gln_status_t stage_reserve(gln_comm_t *comm, size_t bytes) {
    mpi_state_t *s = state_of(comm);
    if (bytes <= s->stage_bytes) return GLN_STATUS_SUCCESS;
    s->mv.host_free(comm->ctx, s->stage);
    s->stage = NULL;
    s->stage_bytes = 0;
    GLN_TRY(s->mv.host_alloc(comm->ctx, bytes, &s->stage));
    s->stage_bytes = bytes;
    return GLN_STATUS_SUCCESS;
}

/* This rank's part before MPI: refuse in a capture; then drain the stream (DEVICE) or stage
 * `src_bytes` of src at stage + `offset` in a buffer of `stage_bytes` (STAGED). */
static gln_status_t prepare_local(gln_comm_t *comm, const char *fn, size_t stage_bytes,
                                  size_t offset, const void *src, size_t src_bytes) {
    mpi_state_t *s = state_of(comm);
    int capturing = 0;
    GLN_TRY(s->mv.capturing(comm->ctx, &capturing));
    GLN_REQUIRE(!capturing, GLN_STATUS_NOT_SUPPORTED,
                "%s: the MPI communicator cannot run inside a CUDA graph capture: MPI is not "
                "stream-ordered, so it synchronizes the context's stream before each collective; "
                "run the collectives outside the capture, or capture over NCCL",
                fn);
    if (s->path == GLN_MPI_PATH_DEVICE) return s->mv.synchronize(comm->ctx);
    GLN_TRY(stage_reserve(comm, stage_bytes));
    return s->mv.to_host(comm->ctx, (char *)s->stage + offset, src, src_bytes);
}

/* prepare_local on every rank, then one agreement: every rank enters MPI, or none does. */
static gln_status_t prepare(gln_comm_t *comm, const char *fn, size_t stage_bytes, size_t offset,
                            const void *src, size_t src_bytes) {
    static const gln_agree_t no_shape = {{0, 0, 0, 0, 0, 0}, {"call", "", "", "", "", ""}};
    return gln_comm_agree(comm, fn, prepare_local(comm, fn, stage_bytes, offset, src, src_bytes),
                          &no_shape);
}

static char *stage_at(const gln_comm_t *comm, size_t offset) {
    return (char *)state_of(comm)->stage + offset;
}

static gln_status_t dev_allgather(gln_comm_t *comm, const void *send, void *recv, size_t bytes,
                                  size_t elem_size) {
    static const char *fn = "gln_comm_allgather";
    if (state_of(comm)->path == GLN_MPI_PATH_DEVICE) {
        GLN_TRY(prepare(comm, fn, 0, 0, NULL, 0));
        return mpi_allgather(comm, send, recv, bytes, elem_size);
    }
    /* gathered in place in the staging buffer: this rank's block staged at its offset */
    size_t total = bytes * (size_t)comm->size, own = bytes * (size_t)comm->rank;
    GLN_TRY(prepare(comm, fn, total, own, send, bytes));
    GLN_TRY(mpi_allgather(comm, stage_at(comm, own), stage_at(comm, 0), bytes, elem_size));
    return state_of(comm)->mv.to_backend(comm->ctx, recv, stage_at(comm, 0), total);
}

static gln_status_t dev_reduce_scatter(gln_comm_t *comm, const void *send, void *recv,
                                       size_t count, gln_dtype_t dtype, gln_reduce_op_t op) {
    static const char *fn = "gln_comm_reduce_scatter";
    if (state_of(comm)->path == GLN_MPI_PATH_DEVICE) {
        GLN_TRY(prepare(comm, fn, 0, 0, NULL, 0));
        return mpi_reduce_scatter(comm, send, recv, count, dtype, op);
    }
    /* staged: [size·count] input, then this rank's [count] result behind it */
    size_t bytes = count * gln_dtype_size(dtype), in = bytes * (size_t)comm->size;
    GLN_TRY(prepare(comm, fn, in + bytes, 0, send, in));
    GLN_TRY(mpi_reduce_scatter(comm, stage_at(comm, 0), stage_at(comm, in), count, dtype, op));
    return state_of(comm)->mv.to_backend(comm->ctx, recv, stage_at(comm, in), bytes);
}

static gln_status_t dev_allreduce(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                  gln_dtype_t dtype, gln_reduce_op_t op) {
    static const char *fn = "gln_comm_allreduce";
    if (state_of(comm)->path == GLN_MPI_PATH_DEVICE) {
        GLN_TRY(prepare(comm, fn, 0, 0, NULL, 0));
        return mpi_allreduce(comm, send, recv, count, dtype, op);
    }
    size_t bytes = count * gln_dtype_size(dtype);
    GLN_TRY(prepare(comm, fn, bytes, 0, send, bytes));
    GLN_TRY(mpi_allreduce(comm, stage_at(comm, 0), stage_at(comm, 0), count, dtype, op));
    return state_of(comm)->mv.to_backend(comm->ctx, recv, stage_at(comm, 0), bytes);
}

static void mpi_destroy(gln_comm_t *comm) {
    mpi_state_t *s = comm->impl;
    if (!s) return;
    /* every staged copy has completed when its collective returned: nothing still reads it */
    if (s->stage) s->mv.host_free(comm->ctx, s->stage);
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

/* Device memory: no asynchronous slots (the dispatcher runs those forms synchronously), the
 * agreement on host memory. */
static const gln_comm_ops_t mpi_device_ops = {
    .name = "mpi",
    .max_count = (size_t)INT_MAX,
    .allgather = dev_allgather,
    .reduce_scatter = dev_reduce_scatter,
    .allreduce = dev_allreduce,
    .barrier = mpi_barrier,
    .reduce_scatter_start = NULL,
    .wait = mpi_wait,
    .allgather_start = NULL,
    .host_allreduce = mpi_host_allreduce,
    .destroy = mpi_destroy,
};

/* The mover's copies name no direction: the backend's memcpy does. */
static gln_status_t backend_to_host(gln_context_t *ctx, void *dst, const void *src, size_t bytes) {
    return gln_op_memcpy(ctx, dst, src, bytes, GLN_COPY_BACKEND_TO_HOST);
}

static gln_status_t host_to_backend(gln_context_t *ctx, void *dst, const void *src, size_t bytes) {
    return gln_op_memcpy(ctx, dst, src, bytes, GLN_COPY_HOST_TO_BACKEND);
}

static const gln_mpi_mover_t backend_mover = {
    .host_alloc = gln_op_host_alloc,
    .host_free = gln_op_host_free,
    .to_host = backend_to_host,
    .to_backend = host_to_backend,
    .synchronize = gln_op_synchronize,
    .capturing = gln_op_stream_capturing,
};

int gln_mpi_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    /* the library's answer at run time (a CUDA build may have it switched off) */
    return MPIX_Query_cuda_support() == 1;
#else
    return 0;
#endif
}

gln_mpi_path_t gln_mpi_choose_path(int on_host, int cuda_context, int cuda_aware) {
    if (on_host) return GLN_MPI_PATH_HOST;
    return cuda_context && cuda_aware ? GLN_MPI_PATH_DEVICE : GLN_MPI_PATH_STAGED;
}

gln_mpi_path_t gln_comm_mpi_path(const gln_comm_t *comm) { return state_of(comm)->path; }
size_t gln_comm_mpi_stage_bytes(const gln_comm_t *comm) { return state_of(comm)->stage_bytes; }

int gln_mpi_available(void) { return 1; }

static int mpi_running(void) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

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

/* This rank's verdict on the arguments (every rank computes one; none returns before the
 * agreement). */
static gln_status_t check_create(const char *fn, const gln_context_t *ctx, gln_mpi_path_t path,
                                 gln_comm_t **comm) {
    GLN_REQUIRE_NOT_NULL(fn, comm);
    int on_host = !ctx || ctx->kind == GLN_BACKEND_CPU;
    GLN_REQUIRE_ARG(path == GLN_MPI_PATH_HOST || path == GLN_MPI_PATH_DEVICE || path == GLN_MPI_PATH_STAGED,
                    "%s: path %d is not an MPI path", fn, (int)path);
    GLN_REQUIRE_ARG(path != GLN_MPI_PATH_HOST || on_host,
                    "%s: ctx uses the %s backend; the host path needs host memory", fn,
                    gln_backend_name(ctx->kind));
    GLN_REQUIRE_ARG(path == GLN_MPI_PATH_HOST || ctx != NULL,
                    "%s: the device-memory paths need a context", fn);
    return GLN_STATUS_SUCCESS;
}

/* The verdicts of every rank of `parent`, before MPI_Comm_dup: each rank computes its own, so one
 * rank's bad argument fails creation on all of them instead of leaving them in the dup.  MAX of
 * (size - rank) << 8 | status names the lowest failing rank (as gln_comm_agree does). */
static gln_status_t agree_create(const char *fn, MPI_Comm parent, gln_status_t local) {
    int rank = 0, size = 1;
    GLN_TRY(mpi_check(MPI_Comm_rank(parent, &rank), "gln_comm_create_mpi: MPI_Comm_rank"));
    GLN_TRY(mpi_check(MPI_Comm_size(parent, &size), "gln_comm_create_mpi: MPI_Comm_size"));
    char local_msg[512] = "";
    if (local != GLN_STATUS_SUCCESS) snprintf(local_msg, sizeof local_msg, "%s", gln_last_error());
    int64_t mine = local == GLN_STATUS_SUCCESS ? 0 : ((int64_t)(size - rank) << 8) | (int64_t)(local & 0xff);
    int64_t worst = 0;
    gln_status_t st = mpi_check(MPI_Allreduce(&mine, &worst, 1, MPI_INT64_T, MPI_MAX, parent),
                                "gln_comm_create_mpi: the agreement's MPI_Allreduce");
    if (local != GLN_STATUS_SUCCESS) return gln_fail(local, "%s", local_msg);
    GLN_TRY(st);
    if (worst == 0) return GLN_STATUS_SUCCESS;
    gln_status_t other = (gln_status_t)(worst & 0xff);
    return gln_fail(other, "%s: rank %d failed (%s; its own error says why), so no rank created the communicator",
                    fn, size - (int)(worst >> 8), gln_status_string(other));
}

gln_status_t gln_comm_create_mpi_as(gln_context_t *ctx, const void *mpi_comm, gln_mpi_path_t path,
                                    const gln_mpi_mover_t *mover, gln_comm_t **comm) {
    static const char *fn = "gln_comm_create_mpi";
    if (comm) *comm = NULL;
    gln_status_t local = check_create(fn, ctx, path, comm);
    /* MPI not running, or no parent communicator: this rank is outside the collective and
     * cannot agree with the others (grouplin.h makes both the caller's duty). */
    if (local == GLN_STATUS_SUCCESS) local = check_mpi_running(fn);
    if (!mpi_running()) return local;
    MPI_Comm parent = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    GLN_REQUIRE_ARG(parent != MPI_COMM_NULL, "%s: *mpi_comm is MPI_COMM_NULL", fn);
    GLN_TRY(agree_create(fn, parent, local));

    gln_status_t st = GLN_STATUS_SUCCESS;
    int rank = 0, size = 0;
    mpi_state_t *s = calloc(1, sizeof *s);
    GLN_CHECK_COND(st, fail, s != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    s->comm = MPI_COMM_NULL;
    s->path = path;
    s->mv = mover ? *mover : backend_mover;
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_dup(parent, &s->comm), "gln_comm_create_mpi: MPI_Comm_dup"));
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN),
                                  "gln_comm_create_mpi: MPI_Comm_set_errhandler"));
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_rank(s->comm, &rank), "gln_comm_create_mpi: MPI_Comm_rank"));
    GLN_CHECK(st, fail, mpi_check(MPI_Comm_size(s->comm, &size), "gln_comm_create_mpi: MPI_Comm_size"));
    GLN_CHECK(st, fail, gln_comm_new(path == GLN_MPI_PATH_HOST ? &mpi_ops : &mpi_device_ops, ctx, rank,
                                     size, s, comm));
    return GLN_STATUS_SUCCESS;
fail:
    if (s && s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
    free(s);
    return st;
}

/* The library is asked only while MPI runs (before MPI_Init, creation fails anyway). */
static int cuda_aware_if_running(void) { return mpi_running() && gln_mpi_cuda_aware(); }

gln_status_t gln_comm_create_mpi(gln_context_t *ctx, const void *mpi_comm, gln_comm_t **comm) {
    int on_host = !ctx || ctx->kind == GLN_BACKEND_CPU;
    int cuda = ctx && ctx->kind == GLN_BACKEND_CUDA;
    gln_mpi_path_t path = gln_mpi_choose_path(on_host, cuda, cuda && cuda_aware_if_running());
    return gln_comm_create_mpi_as(ctx, mpi_comm, path, NULL, comm);
}
