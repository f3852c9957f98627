/* Host staging of backend memory, for a transport that moves host memory only (the MPI
 * communicator on a device context when MPI is not CUDA-aware): the one way from src/comm into
 * the backend's memory slots, so that src/comm needs no device headers.  On a CPU context these
 * are plain host copies and malloc / free (the same code path runs and is tested on the CPU). */
#ifndef GLN_BACKEND_STAGE_H
#define GLN_BACKEND_STAGE_H

#include "grouplin.h"

/* Host memory for staging (page-locked where the backend has it); 0 bytes gives NULL. */
gln_status_t gln_stage_host_alloc(gln_context_t *ctx, size_t bytes, void **ptr);
void gln_stage_host_free(gln_context_t *ctx, void *ptr);
/* backend -> host on the context's stream; returns once dst may be read (the stream synchronized,
 * so everything enqueued before the copy has run). */
gln_status_t gln_stage_to_host(gln_context_t *ctx, void *dst, const void *src, size_t bytes);
/* host -> backend on the context's stream; returns once src may be reused. */
gln_status_t gln_stage_to_backend(gln_context_t *ctx, void *dst, const void *src, size_t bytes);
/* Wait for everything enqueued on the context's stream. */
gln_status_t gln_stage_synchronize(gln_context_t *ctx);
/* *capturing = 1 while the context's stream is being captured into a graph (never on the CPU). */
gln_status_t gln_stage_capturing(gln_context_t *ctx, int *capturing);

#endif
