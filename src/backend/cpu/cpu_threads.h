/* Splitting the CPU backend's element-wise passes (conversions, quantization, dequantization)
 * over as many threads as OpenBLAS uses for the GEMMs: the context's num_threads when set, else
 * OPENBLAS_NUM_THREADS or all cores.
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

/* Threads for a pass over `elems` elements that each thread should have at least `min_elems`
 * of (>= 1; 1 below that). */
int gln_cpu_threads(size_t elems, size_t min_elems);

/* Body of a pass: items [begin, end), run by thread `thread` (0 = the caller). */
typedef void (*gln_cpu_range_fn)(void *arg, int thread, int64_t begin, int64_t end);

/* fn over items [0, n) cut into `threads` contiguous ranges, range 0 on the calling thread.
 * A thread that cannot be started has its range run by the caller (same result). */
void gln_cpu_parallel_for(int threads, int64_t n, gln_cpu_range_fn fn, void *arg);

#endif
