/* CUDA slots of the host staging (backend.h: host_alloc, host_free, stream_capturing), used by
 * the MPI communicator on a CUDA context when MPI is not CUDA-aware (ops.h, gln_op_host_alloc). */
#ifndef GLN_BACKEND_CUDA_HOST_STAGE_H
#define GLN_BACKEND_CUDA_HOST_STAGE_H

#include "grouplin.h"

/* Page-locked host memory (cudaMallocHost); 0 bytes gives NULL. */
gln_status_t gln_cuda_host_alloc(gln_context_t *ctx, size_t bytes, void **ptr);
/* cudaFreeHost (NULL: nothing). */
void gln_cuda_host_free(gln_context_t *ctx, void *ptr);
/* *capturing = 1 while the context's stream is being captured into a CUDA graph. */
gln_status_t gln_cuda_stream_capturing(gln_context_t *ctx, int *capturing);

#endif
