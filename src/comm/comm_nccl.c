/* The NCCL communicator (built with GLN_NCCL; comm_nccl_stub.c otherwise).
 *
 * Buffers are device memory of the CUDA context the communicator is bound to.  Blocking-style
 * collectives are enqueued on the context's stream (stream order is the only ordering: the host
 * returns at once).  The asynchronous forms run on a communication stream of our own: start
 * records an event on the context stream and makes the communication stream wait on it, enqueues
 * the collective there and records a completion event (the request); wait makes the context
 * stream wait on that event and frees it.  Neither blocks the host, and both are legal inside a
 * graph capture (the capture forks into the communication stream and joins back).
 *
 * The agreement step (and the group's creation handshake) needs a small int64 allreduce whose
 * result the host reads.  With an MPI side channel (gln_comm_create_nccl_mpi) it runs there, in
 * host memory; without one it runs over NCCL and synchronizes the context stream (world size 1
 * never agrees: nothing to agree with).  Every NCCL call's result, and ncclCommGetAsyncError after
 * each call, map to GLN_STATUS_COMM_ERROR with NCCL's own message. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "backend/context.h"
#include "backend/ops.h"
#include "comm/comm.h"
#include "common/error.h"

_Static_assert(sizeof(ncclUniqueId) == sizeof(((gln_nccl_id_t *)0)->bytes),
               "gln_nccl_id_t must hold an ncclUniqueId");

enum { AGREE_CAP = 64 }; /* int64 elements of the device buffer for host allreduces */

typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t side;  /* the communication stream of started collectives */
    int64_t *agree;     /* [AGREE_CAP] device buffer (no MPI side channel) */
    gln_comm_t *host;   /* optional MPI side channel for host-memory allreduces (owned) */
} nccl_state_t;

static nccl_state_t *state_of(const gln_comm_t *comm) { return (nccl_state_t *)comm->impl; }
static cudaStream_t stream_of(const gln_comm_t *comm) {
    return (cudaStream_t)gln_context_stream(comm->ctx);
}

static gln_status_t cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return GLN_STATUS_SUCCESS;
    return gln_fail(GLN_STATUS_COMM_ERROR, "%s failed: %s (CUDA error %d)", what,
                    cudaGetErrorString(e), (int)e);
}

/* NCCL's result, then the communicator's asynchronous error (a peer failure, a timeout). */
static gln_status_t nccl_ok(const gln_comm_t *c, ncclResult_t r, const char *what) {
    ncclComm_t comm = c ? state_of(c)->comm : NULL;
    if (r == ncclSuccess && comm) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t q = ncclCommGetAsyncError(comm, &async);
        if (q != ncclSuccess) r = q;
        else if (async != ncclSuccess && async != ncclInProgress) r = async;
    }
    if (r == ncclSuccess) return GLN_STATUS_SUCCESS;
    const char *last = ncclGetLastError(comm);
    return gln_fail(GLN_STATUS_COMM_ERROR, "%s failed: %s%s%s (NCCL error %d)", what,
                    ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "", (int)r);
}

static ncclDataType_t nccl_dtype(gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_INT32: return ncclInt32;
    case GLN_DTYPE_INT64: return ncclInt64;
    default: return ncclFloat32; /* the only other reducible dtype */
    }
}

static ncclRedOp_t nccl_op(gln_reduce_op_t op) { return op == GLN_REDUCE_MAX ? ncclMax : ncclSum; }

/* ---- collectives on a stream ----------------------------------------------------------------- */

static gln_status_t run_allgather(gln_comm_t *c, const void *send, void *recv, size_t bytes,
                                  cudaStream_t s) {
    return nccl_ok(c, ncclAllGather(send, recv, bytes, ncclUint8, state_of(c)->comm, s),
                   "gln_comm_allgather: ncclAllGather");
}

static gln_status_t run_reduce_scatter(gln_comm_t *c, const void *send, void *recv, size_t count,
                                       gln_dtype_t dtype, gln_reduce_op_t op, cudaStream_t s) {
    return nccl_ok(c, ncclReduceScatter(send, recv, count, nccl_dtype(dtype), nccl_op(op),
                                        state_of(c)->comm, s),
                   "gln_comm_reduce_scatter: ncclReduceScatter");
}

static gln_status_t nccl_allgather(gln_comm_t *c, const void *send, void *recv, size_t bytes,
                                   size_t elem_size) {
    (void)elem_size;
    return run_allgather(c, send, recv, bytes, stream_of(c));
}

static gln_status_t nccl_reduce_scatter(gln_comm_t *c, const void *send, void *recv, size_t count,
                                        gln_dtype_t dtype, gln_reduce_op_t op) {
    return run_reduce_scatter(c, send, recv, count, dtype, op, stream_of(c));
}

static gln_status_t nccl_allreduce(gln_comm_t *c, const void *send, void *recv, size_t count,
                                   gln_dtype_t dtype, gln_reduce_op_t op) {
    return nccl_ok(c, ncclAllReduce(send, recv, count, nccl_dtype(dtype), nccl_op(op),
                                    state_of(c)->comm, stream_of(c)),
                   "gln_comm_allreduce: ncclAllReduce");
}

/* ---- asynchronous start / wait on events ----------------------------------------------------- */

/* The communication stream waits for everything enqueued on the context stream so far. */
static gln_status_t fork_side(gln_comm_t *c) {
    cudaEvent_t ready = NULL;
    gln_status_t st = cuda_ok(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
                              "gln_comm (nccl): cudaEventCreateWithFlags");
    if (st != GLN_STATUS_SUCCESS) return st;
    st = cuda_ok(cudaEventRecord(ready, stream_of(c)), "gln_comm (nccl): cudaEventRecord");
    if (st == GLN_STATUS_SUCCESS)
        st = cuda_ok(cudaStreamWaitEvent(state_of(c)->side, ready, 0),
                     "gln_comm (nccl): cudaStreamWaitEvent");
    cudaEventDestroy(ready); /* released once the recorded work completes */
    return st;
}

/* The request: an event recorded on the communication stream after the collective. */
static gln_status_t join_request(gln_comm_t *c, void **request) {
    cudaEvent_t done = NULL;
    GLN_TRY(cuda_ok(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
                    "gln_comm (nccl): cudaEventCreateWithFlags"));
    gln_status_t st = cuda_ok(cudaEventRecord(done, state_of(c)->side),
                              "gln_comm (nccl): cudaEventRecord");
    if (st != GLN_STATUS_SUCCESS) {
        cudaEventDestroy(done);
        return st;
    }
    *request = (void *)done;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t nccl_allgather_start(gln_comm_t *c, const void *send, void *recv,
                                         size_t bytes, size_t elem_size, void **request) {
    (void)elem_size;
    GLN_TRY(fork_side(c));
    GLN_TRY(run_allgather(c, send, recv, bytes, state_of(c)->side));
    return join_request(c, request);
}

static gln_status_t nccl_reduce_scatter_start(gln_comm_t *c, const void *send, void *recv,
                                              size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                              void **request) {
    GLN_TRY(fork_side(c));
    GLN_TRY(run_reduce_scatter(c, send, recv, count, dtype, op, state_of(c)->side));
    return join_request(c, request);
}

/* Stream order, not a host wait: the context stream's later work comes after the collective. */
static gln_status_t nccl_wait(gln_comm_t *c, void *request) {
    cudaEvent_t done = (cudaEvent_t)request;
    gln_status_t st = cuda_ok(cudaStreamWaitEvent(stream_of(c), done, 0),
                              "gln_comm_wait (nccl): cudaStreamWaitEvent");
    cudaEventDestroy(done);
    if (st != GLN_STATUS_SUCCESS) return st;
    return nccl_ok(c, ncclSuccess, "gln_comm_wait (nccl)"); /* a peer's failure shows here */
}

/* ---- host-memory allreduce (agreement, creation handshake), barrier -------------------------- */

static gln_status_t nccl_host_allreduce(gln_comm_t *c, int64_t *v, size_t count,
                                        gln_reduce_op_t op) {
    nccl_state_t *s = state_of(c);
    if (c->size == 1) return GLN_STATUS_SUCCESS;
    if (s->host) return s->host->ops->allreduce(s->host, v, v, count, GLN_DTYPE_INT64, op);
    GLN_REQUIRE(count <= AGREE_CAP, GLN_STATUS_INTERNAL_ERROR, "gln_comm (nccl): %zu > %d agreement fields",
                count, (int)AGREE_CAP);
    cudaStream_t st = stream_of(c);
    size_t bytes = count * sizeof *v;
    GLN_TRY(cuda_ok(cudaMemcpyAsync(s->agree, v, bytes, cudaMemcpyHostToDevice, st),
                    "gln_comm (nccl) agreement: cudaMemcpyAsync"));
    GLN_TRY(nccl_ok(c, ncclAllReduce(s->agree, s->agree, count, ncclInt64, nccl_op(op), s->comm, st),
                    "gln_comm (nccl) agreement: ncclAllReduce"));
    GLN_TRY(cuda_ok(cudaMemcpyAsync(v, s->agree, bytes, cudaMemcpyDeviceToHost, st),
                    "gln_comm (nccl) agreement: cudaMemcpyAsync"));
    GLN_TRY(cuda_ok(cudaStreamSynchronize(st), "gln_comm (nccl) agreement: cudaStreamSynchronize"));
    return nccl_ok(c, ncclSuccess, "gln_comm (nccl) agreement");
}

static gln_status_t nccl_barrier(gln_comm_t *c) {
    int64_t one = 1;
    return nccl_host_allreduce(c, &one, 1, GLN_REDUCE_MAX);
}

static void nccl_destroy(gln_comm_t *c) {
    nccl_state_t *s = state_of(c);
    if (!s) return;
    /* nothing of ours may still be running on the communication stream when NCCL goes */
    if (s->side) cudaStreamSynchronize(s->side);
    if (s->comm) ncclCommDestroy(s->comm);
    if (s->side) cudaStreamDestroy(s->side);
    if (s->agree) cudaFree(s->agree);
    gln_comm_destroy(s->host);
    free(s);
    c->impl = NULL;
}

static const gln_comm_ops_t nccl_ops = {
    .name = "nccl",
    .max_count = SIZE_MAX,
    .allgather = nccl_allgather,
    .reduce_scatter = nccl_reduce_scatter,
    .allreduce = nccl_allreduce,
    .barrier = nccl_barrier,
    .reduce_scatter_start = nccl_reduce_scatter_start,
    .wait = nccl_wait,
    .allgather_start = nccl_allgather_start,
    .host_allreduce = nccl_host_allreduce,
    .destroy = nccl_destroy,
};

/* ---- creation -------------------------------------------------------------------------------- */

int gln_nccl_available(void) { return 1; }

gln_status_t gln_nccl_id_create(gln_nccl_id_t *id) {
    GLN_REQUIRE_NOT_NULL("gln_nccl_id_create", id);
    memset(id, 0, sizeof *id);
    return nccl_ok(NULL, ncclGetUniqueId((ncclUniqueId *)id->bytes),
                   "gln_nccl_id_create: ncclGetUniqueId");
}

static gln_status_t create(gln_context_t *ctx, const gln_nccl_id_t *id, int rank, int size,
                           gln_comm_t *host, gln_comm_t **comm) {
    static const char *fn = "gln_comm_create_nccl";
    gln_status_t st = GLN_STATUS_SUCCESS;
    nccl_state_t *s = calloc(1, sizeof *s);
    GLN_CHECK_COND(st, fail, s != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    GLN_CHECK(st, fail, cuda_ok(cudaSetDevice(ctx->device), "gln_comm_create_nccl: cudaSetDevice"));
    GLN_CHECK(st, fail, cuda_ok(cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking),
                                "gln_comm_create_nccl: cudaStreamCreateWithFlags"));
    if (!host)
        GLN_CHECK(st, fail, cuda_ok(cudaMalloc((void **)&s->agree, AGREE_CAP * sizeof(int64_t)),
                                    "gln_comm_create_nccl: cudaMalloc"));
    ncclUniqueId uid;
    memcpy(&uid, id->bytes, sizeof uid);
    GLN_CHECK(st, fail, nccl_ok(NULL, ncclCommInitRank(&s->comm, size, uid, rank),
                                "gln_comm_create_nccl: ncclCommInitRank"));
    s->host = host;
    host = NULL;
    GLN_CHECK(st, fail, gln_comm_new(&nccl_ops, ctx, rank, size, s, comm));
    return GLN_STATUS_SUCCESS;
fail:
    if (s) {
        gln_comm_t shell = {&nccl_ops, ctx, rank, size, s};
        nccl_destroy(&shell);
    }
    gln_comm_destroy(host);
    return st;
}

static gln_status_t check_ctx(const char *fn, const gln_context_t *ctx) {
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_REQUIRE(ctx->kind == GLN_BACKEND_CUDA && gln_op_has(ctx, GLN_SLOT_GET_STREAM), GLN_STATUS_NOT_SUPPORTED,
                "%s: ctx uses the %s backend; NCCL moves device memory of a CUDA context (use "
                "self or MPI on the CPU)", fn, gln_backend_name(ctx->kind));
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_comm_create_nccl(gln_context_t *ctx, const gln_nccl_id_t *id, int rank, int size,
                                  gln_comm_t **comm) {
    static const char *fn = "gln_comm_create_nccl";
    GLN_REQUIRE_NOT_NULL(fn, comm);
    *comm = NULL;
    GLN_TRY(check_ctx(fn, ctx));
    GLN_REQUIRE_NOT_NULL(fn, id);
    GLN_REQUIRE_ARG(size >= 1, "%s: size %d must be >= 1", fn, size);
    GLN_REQUIRE_ARG(rank >= 0 && rank < size, "%s: rank %d must be in [0, %d)", fn, rank, size);
    return create(ctx, id, rank, size, NULL, comm);
}

/* Rank 0 creates the id; every rank gathers every rank's (verdict, id) over MPI and takes rank
 * 0's, so a failure on rank 0 fails the call everywhere before any rank enters NCCL. */
gln_status_t gln_comm_create_nccl_mpi(gln_context_t *ctx, const void *mpi_comm, gln_comm_t **comm) {
    static const char *fn = "gln_comm_create_nccl_mpi";
    GLN_REQUIRE_NOT_NULL(fn, comm);
    *comm = NULL;
    gln_comm_t *host = NULL;
    GLN_TRY(gln_comm_create_mpi(NULL, mpi_comm, &host));
    gln_status_t st = check_ctx(fn, ctx);
    gln_nccl_id_t id;
    memset(&id, 0, sizeof id);
    if (st == GLN_STATUS_SUCCESS && host->rank == 0) st = gln_nccl_id_create(&id);
    gln_agree_t shape = {{GLN_CALL_ALLGATHER, (int64_t)sizeof id, 0, 0, 0, 0},
                         {"call", "id bytes", "", "", "", ""}};
    unsigned char *all = NULL;
    GLN_CHECK(st, fail, gln_comm_agree(host, fn, st, &shape));
    all = malloc((size_t)host->size * sizeof id);
    GLN_CHECK_COND(st, fail, all != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    GLN_CHECK(st, fail, gln_comm_allgather_agreed(host, &id, all, sizeof id, GLN_DTYPE_FP8_E4M3 /* bytes */));
    memcpy(&id, all, sizeof id); /* rank 0's */
    free(all);
    all = NULL;
    return create(ctx, &id, host->rank, host->size, host, comm);
fail:
    free(all);
    gln_comm_destroy(host);
    return st;
}
