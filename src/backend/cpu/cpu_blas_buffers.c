/* Reserving OpenBLAS's GEMM buffers at context creation (see cpu_blas_buffers.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS under -std=c11 */
#include "backend/cpu/cpu_blas_buffers.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "backend/cpu/cpu_threads.h"
#include "common/error.h"

/* OpenBLAS's buffer pool: what sgemm takes a buffer from and gives it back to. */
extern void *blas_memory_alloc(int procpos);
extern void blas_memory_free(void *buffer);

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int pool_buffers;  /* buffers the pool is known to hold (reserved here) */
static int live_threads;  /* threads of the live CPU contexts */

/* 1 when a buffer of the probe's size can be mapped right now (and unmaps it again). */
static int probe_fits(void) {
    void *p = mmap(NULL, GLN_CPU_BLAS_BUFFER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) return 0;
    munmap(p, GLN_CPU_BLAS_BUFFER_BYTES);
    return 1;
}

/* The process's address-space limit in MiB for the message (0 = unlimited). */
static unsigned long long as_limit_mib(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    return (unsigned long long)rl.rlim_cur >> 20;
}

/* Hold `target` pool buffers at once (so the pool has that many), then give them back.  Buffers
 * past the known pool are probed first.  Returns how many were held when one did not fit. */
static int grow_pool(int target, void **held) {
    int n = 0;
    for (; n < target; n++) {
        if (n >= pool_buffers && !probe_fits()) break;
        held[n] = blas_memory_alloc(0);
        if (!held[n]) break;
    }
    for (int i = 0; i < n; i++) blas_memory_free(held[i]);
    return n;
}

gln_status_t gln_cpu_blas_buffers_reserve(int threads, const char *call) {
    void *held[GLN_CPU_MAX_THREADS];
    pthread_mutex_lock(&pool_lock);
    int target = live_threads + threads;
    if (target > GLN_CPU_MAX_THREADS) target = GLN_CPU_MAX_THREADS;
    int got = target <= pool_buffers ? target : grow_pool(target, held);
    if (got > pool_buffers) pool_buffers = got;
    if (got < target) {
        pthread_mutex_unlock(&pool_lock);
        const unsigned long long limit = as_limit_mib();
        char why[96] = "";
        if (limit) snprintf(why, sizeof why, " (the address-space limit, ulimit -v, is %llu MiB)", limit);
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY,
                        "%s: out of address space for OpenBLAS's GEMM buffers: %d of %d buffers of "
                        "%zu MiB fit%s; OpenBLAS would retry the mapping forever at the first GEMM "
                        "(raise the limit, or ask for fewer threads with options->num_threads)",
                        call, got, target, GLN_CPU_BLAS_BUFFER_BYTES >> 20, why);
    }
    live_threads += threads;
    pthread_mutex_unlock(&pool_lock);
    return GLN_STATUS_SUCCESS;
}

void gln_cpu_blas_buffers_release(int threads) {
    pthread_mutex_lock(&pool_lock);
    live_threads -= threads;
    if (live_threads < 0) live_threads = 0;
    pthread_mutex_unlock(&pool_lock);
}
