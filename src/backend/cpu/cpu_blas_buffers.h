/* OpenBLAS's GEMM buffers, reserved when a CPU context is created.
 *
 * Every thread inside OpenBLAS's sgemm holds one buffer of a process-wide pool (BUFFER_SIZE plus
 * a page: 128 MiB in the x86-64 builds of Debian and Ubuntu); the pool grows when more threads
 * call at once than it has buffers, and keeps them.  When a new buffer cannot be mapped,
 * OpenBLAS retries the mapping forever, so under an address-space limit (ulimit -v) the first
 * sgemm of a process hung.  A context therefore makes sure, at creation, that the pool holds a
 * buffer for each of its threads (and those of the other live contexts, which may run at the
 * same time): every buffer the pool lacks is first mapped by us as a probe — when that fails,
 * creation fails with GLN_STATUS_OUT_OF_MEMORY and nothing hangs — and then, at once, taken by
 * OpenBLAS's own allocator (blas_memory_alloc, the call sgemm makes) and given back to the pool.
 *
 * Limits: another thread that maps memory between the probe and OpenBLAS's mapping can still
 * win the space; the pool is sized for one calling thread per context (several threads sharing
 * one CPU context at once may need more); at most GLN_CPU_MAX_THREADS buffers are reserved; an
 * OpenBLAS whose buffers are larger than GLN_CPU_BLAS_BUFFER_BYTES, or per thread (USE_TLS
 * builds), is covered only in part; and OpenBLAS's own worker threads (OPENBLAS_NUM_THREADS > 1),
 * which map their buffers when the library is loaded, are beyond our reach. */
#ifndef GLN_BACKEND_CPU_BLAS_BUFFERS_H
#define GLN_BACKEND_CPU_BLAS_BUFFERS_H

#include "grouplin.h"

/* The probe's size: OpenBLAS's BUFFER_SIZE (32 << 22) plus room for its guard page. */
#define GLN_CPU_BLAS_BUFFER_BYTES (((size_t)128 << 20) + ((size_t)64 << 10))

/* A context of `threads` threads is being created: grow the pool to the live contexts' total
 * (OUT_OF_MEMORY, with a message under `call`, when it cannot be; nothing is counted then). */
gln_status_t gln_cpu_blas_buffers_reserve(int threads, const char *call);
/* A context of `threads` threads is gone (the pool keeps its buffers for the next). */
void gln_cpu_blas_buffers_release(int threads);

#endif
