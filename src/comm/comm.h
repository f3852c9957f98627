/* Communicators: the internal interface behind gln_comm_t.
 *
 * A communicator is a table of collective operations plus rank/size, so a new transport (NCCL)
 * is one more table.  The public calls in comm.c validate every argument once (pointers, dtypes,
 * size overflow, overlapping buffers) and then dispatch here, so an implementation may assume
 * valid input: counts are in elements, dtypes are reducible for reductions, buffers do not
 * overlap except the exact in-place forms documented below.
 *
 * Buffers are host memory: the self and MPI communicators move CPU buffers (a device-memory
 * transport would be NCCL). */
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
    /* Release the transport's state (impl); the dispatcher frees the gln_comm itself. */
    void (*destroy)(gln_comm_t *comm);
} gln_comm_ops_t;

struct gln_comm {
    const gln_comm_ops_t *ops;
    int rank;
    int size;
    void *impl; /* transport state */
};

/* Allocate a communicator shell for an implementation (rank/size/impl set by the caller). */
gln_status_t gln_comm_new(const gln_comm_ops_t *ops, int rank, int size, void *impl,
                          gln_comm_t **comm);

/* Element types a reduction accepts (fp32, int32, int64); NOT_SUPPORTED names the call. */
gln_status_t gln_comm_check_reducible(const char *fn, gln_dtype_t dtype);

/* Non-blocking reduce-scatter (same contract as gln_comm_reduce_scatter): *request receives a
 * handle for gln_comm_wait(), or NULL when the transport completed the operation already. */
gln_status_t gln_comm_reduce_scatter_start(gln_comm_t *comm, const void *send, void *recv,
                                           size_t count, gln_dtype_t dtype, gln_reduce_op_t op,
                                           void **request);
/* Complete a request from gln_comm_reduce_scatter_start (NULL: nothing to do). */
gln_status_t gln_comm_wait(gln_comm_t *comm, void *request);

#endif
