/* Per-pass threads of the CPU backend (see cpu_threads.h). */
#include "backend/cpu/cpu_threads.h"

#include <pthread.h>

/* OpenBLAS's own thread control (no particular cblas header assumed). */
extern int openblas_get_num_threads(void);

int gln_cpu_threads(size_t elems, size_t min_elems) {
    int n = openblas_get_num_threads();
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
