/* Splitting the CPU backend's passes (conversions, quantization, dequantization, GEMM tiles)
 * over the calling context's threads: its num_threads when set, else OpenBLAS's default
 * (OPENBLAS_NUM_THREADS or all cores), read once.  OpenBLAS itself is kept at 1 thread for the
 * whole process, so one context's setting never changes another's (docs/numerics.md).
 *
 * Plain pthreads, created per pass and joined at its end, rather than OpenMP: an OpenMP worker
 * keeps spinning after its loop and then competes with OpenBLAS's threads for the same cores
 * during the next sgemm (measured: libgomp's spin loop took 15% of the MXFP8 bench).  Passes
 * too small to pay for a thread start (tens of µs) run on the calling thread.  Every pass
 * writes disjoint output ranges and combines reductions in range order, so results never
 * depend on the thread count. */
#ifndef GLN_BACKEND_CPU_THREADS_H
#define GLN_BACKEND_CPU_THREADS_H

#include <stddef.h>
#include <stdint.h>

/* At most this many threads per pass (and per-thread scratch slots). */
#define GLN_CPU_MAX_THREADS 64

/* Keep OpenBLAS at 1 thread (once per process; idempotent). */
void gln_cpu_threads_init(void);
/* Threads of a context asking for `requested` (0: the process default). */
int gln_cpu_ctx_threads(int requested);
/* Make `threads` (a context's num_threads, 0 = default) the count of the CPU operation running
 * on this thread; returns the previous value, to be restored when the operation returns. */
int gln_cpu_call_threads_set(int threads);

/* Threads for a pass over `elems` elements that each thread should have at least `min_elems`
 * of (>= 1; 1 below that). */
int gln_cpu_threads(size_t elems, size_t min_elems);

/* Body of a pass: items [begin, end), run by thread `thread` (0 = the caller). */
typedef void (*gln_cpu_range_fn)(void *arg, int thread, int64_t begin, int64_t end);

/* fn over items [0, n) cut into `threads` contiguous ranges, range 0 on the calling thread.
 * A thread that cannot be started has its range run by the caller (same result). */
void gln_cpu_parallel_for(int threads, int64_t n, gln_cpu_range_fn fn, void *arg);

#endif
