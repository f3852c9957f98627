/* Per-pass threads of the CPU backend (see cpu_threads.h). */
#include "backend/cpu/cpu_threads.h"

#include <pthread.h>

/* OpenBLAS's own thread control (no particular cblas header assumed). */
extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int num_threads);

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static int default_threads = 1;

/* Once per process: remember OpenBLAS's default thread count (OPENBLAS_NUM_THREADS or all
 * cores) as our default, then keep OpenBLAS itself at 1 thread.  Every sgemm then runs on the
 * thread that calls it; the parallelism is ours (fixed tiles, see cpu_gemm.c). */
static void blas_setup(void) {
    int n = openblas_get_num_threads();
    default_threads = n > 0 ? n : 1;
    openblas_set_num_threads(1);
}

void gln_cpu_threads_init(void) { pthread_once(&blas_once, blas_setup); }

int gln_cpu_ctx_threads(int requested) {
    gln_cpu_threads_init();
    int n = requested > 0 ? requested : default_threads;
    return n > GLN_CPU_MAX_THREADS ? GLN_CPU_MAX_THREADS : n;
}

/* Thread count of the CPU operation running on this thread (0: none, use the default). */
static _Thread_local int call_threads;

int gln_cpu_call_threads_set(int threads) {
    int old = call_threads;
    call_threads = threads;
    return old;
}

int gln_cpu_threads(size_t elems, size_t min_elems) {
    int n = gln_cpu_ctx_threads(call_threads);
    if (n > GLN_CPU_MAX_THREADS) n = GLN_CPU_MAX_THREADS;
    if (min_elems > 0 && (size_t)n > elems / min_elems) n = (int)(elems / min_elems);
    return n > 1 ? n : 1;
}

typedef struct range_job {
    gln_cpu_range_fn fn;
    void *arg;
    int thread;
    int64_t begin, end;
} range_job_t;

static void *range_main(void *p) {
    range_job_t *j = p;
    if (j->thread > 0) call_threads = 1; /* workers never fan out again */
    j->fn(j->arg, j->thread, j->begin, j->end);
    return NULL;
}

void gln_cpu_parallel_for(int threads, int64_t n, gln_cpu_range_fn fn, void *arg) {
    if (threads > n) threads = (int)n;
    if (threads <= 1) {
        if (n > 0) fn(arg, 0, 0, n);
        return;
    }
    range_job_t jobs[GLN_CPU_MAX_THREADS];
    pthread_t tid[GLN_CPU_MAX_THREADS];
    int started[GLN_CPU_MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        range_job_t j = {fn, arg, t, n * t / threads, n * (t + 1) / threads};
        jobs[t] = j;
    }
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&tid[t], NULL, range_main, &jobs[t]) == 0;
    range_main(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else range_main(&jobs[t]);
    }
}
