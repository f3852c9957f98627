/* Communicators: the internal interface behind gln_comm_t.
 *
 * A communicator is a table of collective operations plus rank/size, so a new transport (NCCL)
 * is one more table.  The public calls in comm.c validate every argument once (pointers, dtypes,
 * size overflow, overlapping buffers) and then dispatch here, so an implementation may assume
 * valid input: counts are in elements, dtypes are reducible for reductions, buffers do not
 * overlap except the exact in-place forms documented below.
 *
 * A communicator is bound to a context (gln_comm_t.ctx; NULL = host memory, like a CPU
 * context): its buffers live in that context's memory and its collectives are stream-ordered on
 * the context's stream.  self moves memory of any context (a stream-ordered copy); MPI moves host
 * memory, and device memory either by handing it to a CUDA-aware MPI after draining the stream
 * or by staging it through host buffers (comm_mpi.c); NCCL moves device memory of a CUDA context
 * and enqueues on its stream.
 *
 * Asynchronous start / wait (allgather_start, reduce_scatter_start, wait): start records the
 * work the operation depends on, lets the transport run it beside the caller's later work and
 * returns a request; wait makes the caller's later work depend on its completion.  On a stream
 * (NCCL) both are events (start: the communication stream waits on an event recorded on the
 * context stream; wait: the context stream waits on the communication's event), so the host never
 * blocks on the GPU; on the CPU (MPI) they are a non-blocking collective and MPI_Wait. */
#ifndef GLN_COMM_COMM_H
#define GLN_COMM_COMM_H

#include "grouplin.h"

typedef struct gln_comm_ops {
    const char *name;
    /* Largest element count per rank one call can move (MPI counts are ints); larger messages
     * are refused by the dispatcher with GLN_STATUS_NOT_SUPPORTED. */
    size_t max_count;
    /* recv[r·bytes .. (r+1)·bytes) = rank r's send.  send may equal recv + rank·bytes (in place).
     * `elem_size` divides `bytes` (lets a transport count in elements, not bytes). */
    gln_status_t (*allgather)(gln_comm_t *comm, const void *send, void *recv, size_t bytes,
                              size_t elem_size);
    /* send [size·count], recv [count]; they do not overlap. */
    gln_status_t (*reduce_scatter)(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                   gln_dtype_t dtype, gln_reduce_op_t op);
    /* send may equal recv (in place). */
    gln_status_t (*allreduce)(gln_comm_t *comm, const void *send, void *recv, size_t count,
                              gln_dtype_t dtype, gln_reduce_op_t op);
    gln_status_t (*barrier)(gln_comm_t *comm);
    /* Optional non-blocking reduce-scatter: starts the operation and returns an opaque request
     * that wait() completes (and frees).  NULL slot: the dispatcher runs it synchronously. */
    gln_status_t (*reduce_scatter_start)(gln_comm_t *comm, const void *send, void *recv,
                                         size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                         void **request);
    gln_status_t (*wait)(gln_comm_t *comm, void *request);
    /* Optional non-blocking all-gather (same contract as allgather); NULL: synchronous. */
    gln_status_t (*allgather_start)(gln_comm_t *comm, const void *send, void *recv, size_t bytes,
                                    size_t elem_size, void **request);
    /* Optional MAX / SUM allreduce of a small vector in HOST memory, for the agreement step and
     * the group's creation handshake (a device transport keeps a host path for them).  NULL: the
     * transport moves host memory, allreduce is used. */
    gln_status_t (*host_allreduce)(gln_comm_t *comm, int64_t *v, size_t count, gln_reduce_op_t op);
    /* Release the transport's state (impl); the dispatcher frees the gln_comm itself. */
    void (*destroy)(gln_comm_t *comm);
} gln_comm_ops_t;

struct gln_comm {
    const gln_comm_ops_t *ops;
    gln_context_t *ctx; /* where the buffers live (not owned); NULL = host memory */
    int rank;
    int size;
    void *impl; /* transport state */
};

/* Allocate a communicator shell for an implementation (rank/size/impl set by the caller). */
gln_status_t gln_comm_new(const gln_comm_ops_t *ops, gln_context_t *ctx, int rank, int size,
                          void *impl, gln_comm_t **comm);

/* 1 when the communicator's buffers are host memory (no context, or a CPU context). */
int gln_comm_on_host(const gln_comm_t *comm);
/* The host-memory int64 allreduce of the agreement step (ops->host_allreduce or allreduce). */
gln_status_t gln_comm_host_allreduce(gln_comm_t *comm, int64_t *v, size_t count, gln_reduce_op_t op);

/* Element types a reduction accepts (fp32, int32, int64); NOT_SUPPORTED names the call. */
gln_status_t gln_comm_check_reducible(const char *fn, gln_dtype_t dtype);

/* The agreement step every collective entry point runs before its collective (docs/distributed.md).
 *
 * One MAX-allreduce of a small int64 vector over the transport itself: a failure code (the
 * lowest failing rank and its status) plus max and -min of GLN_AGREE_FIELDS shape fields, the
 * first of which is the call (gln_call_t).  `local` is this rank's status so far (its message
 * is gln_last_error()).  Returns on every rank: `local` with its own message on a rank that
 * failed; the lowest failing rank's status with "<fn>: rank R failed ..." on the others; else
 * GLN_STATUS_COMM_ERROR naming the first field that differs between ranks; else SUCCESS, and
 * then every rank runs the collective with the same shape. */
typedef enum gln_call {
    GLN_CALL_ALLGATHER = 1,
    GLN_CALL_REDUCE_SCATTER,
    GLN_CALL_REDUCE_SCATTER_START,
    GLN_CALL_ALLREDUCE,
    GLN_CALL_GATHER_MASTER,
    GLN_CALL_GATHER_MAIN_GRAD,
    GLN_CALL_MATERIALIZE_FORWARD,
    GLN_CALL_MATERIALIZE_BACKWARD,
    GLN_CALL_FINALIZE_GRADS,
    GLN_CALL_LAYER_FORWARD,
    GLN_CALL_LAYER_BACKWARD,
    GLN_CALL_PREFETCH,
    GLN_CALL_REQUANTIZE,
    GLN_CALL_COUNT_
} gln_call_t;
enum { GLN_AGREE_FIELDS = 6 };
typedef struct gln_agree {
    int64_t v[GLN_AGREE_FIELDS];            /* v[0] = the gln_call_t; unused fields 0 */
    const char *name[GLN_AGREE_FIELDS];     /* for mismatch messages; name[0] unused */
} gln_agree_t;
gln_status_t gln_comm_agree(gln_comm_t *comm, const char *fn, gln_status_t local,
                            const gln_agree_t *shape);
/* The name of a call id ("gln_comm_allreduce", ...). */
const char *gln_call_name(int64_t call);

/* The collectives without their agreement step, for entry points that ran gln_comm_agree over
 * the same shape themselves (the sharded group): same local checks, then the transport. */
gln_status_t gln_comm_allgather_agreed(gln_comm_t *comm, const void *send, void *recv,
                                       size_t count, gln_dtype_t dtype);
gln_status_t gln_comm_reduce_scatter_agreed(gln_comm_t *comm, const void *send, void *recv,
                                            size_t count, gln_dtype_t dtype, gln_reduce_op_t op);
gln_status_t gln_comm_reduce_scatter_start_agreed(gln_comm_t *comm, const void *send, void *recv,
                                                  size_t count, gln_dtype_t dtype,
                                                  gln_reduce_op_t op, void **request);
gln_status_t gln_comm_allreduce_agreed(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                       gln_dtype_t dtype, gln_reduce_op_t op);

/* Non-blocking all-gather after an agreement (same checks as gln_comm_allgather): *request
 * receives a handle for gln_comm_wait(), or NULL when the operation completed already. */
gln_status_t gln_comm_allgather_start_agreed(gln_comm_t *comm, const void *send, void *recv,
                                             size_t count, gln_dtype_t dtype, void **request);

/* Non-blocking reduce-scatter (same contract as gln_comm_reduce_scatter): *request receives a
 * handle for gln_comm_wait(), or NULL when the transport completed the operation already. */
gln_status_t gln_comm_reduce_scatter_start(gln_comm_t *comm, const void *send, void *recv,
                                           size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                           void **request);
/* Complete a request from gln_comm_reduce_scatter_start (NULL: nothing to do). */
gln_status_t gln_comm_wait(gln_comm_t *comm, void *request);

/* ---- the MPI communicator's paths (comm_mpi.c) ------------------------------------------- */

/* How an MPI communicator reaches its buffers: HOST (host memory: ctx NULL or a CPU context),
 * DEVICE (a CUDA context and a CUDA-aware MPI: device pointers go to MPI after the context's
 * stream is drained) or STAGED (any other context: copied through a host staging buffer). */
typedef enum gln_mpi_path { GLN_MPI_PATH_HOST = 0, GLN_MPI_PATH_DEVICE = 1, GLN_MPI_PATH_STAGED = 2 } gln_mpi_path_t;
gln_mpi_path_t gln_mpi_choose_path(int on_host, int cuda_context, int cuda_aware);
/* 1 when the MPI library says it moves CUDA device memory (Open MPI's MPIX_Query_cuda_support;
 * 0 where the build cannot ask). */
int gln_mpi_cuda_aware(void);

/* The device-memory paths' access to the context: the backend's staging functions
 * (backend/ops.h) unless a test substitutes its own (a fake "device" on host memory). */
typedef struct gln_mpi_mover {
    gln_status_t (*host_alloc)(gln_context_t *ctx, size_t bytes, void **ptr);
    void (*host_free)(gln_context_t *ctx, void *ptr);
    gln_status_t (*to_host)(gln_context_t *ctx, void *dst, const void *src, size_t bytes);
    gln_status_t (*to_backend)(gln_context_t *ctx, void *dst, const void *src, size_t bytes);
    gln_status_t (*synchronize)(gln_context_t *ctx);
    gln_status_t (*capturing)(gln_context_t *ctx, int *capturing);
} gln_mpi_mover_t;

/* gln_comm_create_mpi on a chosen path (DEVICE and STAGED need a context; HOST a host one) and
 * mover (NULL: the backend's), so that the device paths run on a CPU context in the tests. */
gln_status_t gln_comm_create_mpi_as(gln_context_t *ctx, const void *mpi_comm, gln_mpi_path_t path,
                                    const gln_mpi_mover_t *mover, gln_comm_t **comm);
/* The path of an MPI communicator, and the bytes its staging buffer holds now (0 before the
 * first staged collective). */
gln_mpi_path_t gln_comm_mpi_path(const gln_comm_t *comm);
size_t gln_comm_mpi_stage_bytes(const gln_comm_t *comm);

#endif
