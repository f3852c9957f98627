/* The CPU optimizer step (backend.h, optimizer_step): one pass over the elements applying
 * numerics/optimizer_rule.h, writing the working copy and the per-segment amax of what it wrote.
 * The reference of the CUDA kernel (cuda_optimizer.cu), which computes the same bits.
 *
 * Each piece of the pass (the elements before the first segment, each segment, the elements after
 * the last) is split over the context's threads in contiguous ranges; a range's amax is its own
 * max, and the max of the ranges' maxima does not depend on how they were cut (max is exact). */
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_threads.h"
#include "numerics/numerics.h"
#include "numerics/optimizer_rule.h"

/* Elements per thread below which a piece stays on one thread (an element costs a few ns). */
#define GLN_CPU_OPTIMIZER_MIN 65536

typedef struct opt_job {
    const gln_optimizer_params_t *p;
    float *master;
    const float *grad;
    float *m, *v;
    void *working;
    gln_dtype_t wdt;
    float part[GLN_CPU_MAX_THREADS]; /* each thread's amax of its range */
} opt_job_t;

/* The value element i of the working copy holds after the step (stored when working is set). */
static float store_working(const opt_job_t *j, int64_t i, float w) {
    if (!j->working) return w;
    if (j->wdt == GLN_DTYPE_BF16) {
        const uint16_t b = gln_f32_to_bf16_bits(w);
        ((uint16_t *)j->working)[i] = b;
        return gln_bf16_bits_to_f32(b);
    }
    if (j->wdt == GLN_DTYPE_FP16) {
        const uint16_t b = gln_f32_to_fp16_bits(w);
        ((uint16_t *)j->working)[i] = b;
        return gln_fp16_bits_to_f32(b);
    }
    ((float *)j->working)[i] = w;
    return w;
}

static void step_range(void *arg, int thread, int64_t i0, int64_t i1) {
    opt_job_t *j = arg;
    float best = 0.0f;
    for (int64_t i = i0; i < i1; i++) {
        float w = j->master[i], m = j->m ? j->m[i] : 0.0f, v = j->v ? j->v[i] : 0.0f;
        gln_optimizer_element(j->p, &w, j->grad[i], &m, &v);
        j->master[i] = w;
        if (j->m) j->m[i] = m;
        if (j->v) j->v[i] = v;
        const float a = gln_f32_abs(store_working(j, i, w));
        if (a > best) best = a; /* a NaN compares false: ignored, as fmaxf */
    }
    j->part[thread] = best;
}

/* Elements [lo, hi) stepped; returns their amax. */
static float step_piece(opt_job_t *j, int64_t lo, int64_t hi) {
    if (hi <= lo) return 0.0f;
    const int64_t len = hi - lo;
    const int nt = gln_cpu_threads((size_t)len, GLN_CPU_OPTIMIZER_MIN);
    opt_job_t sub = *j; /* the range function indexes from 0: shift every pointer to lo */
    sub.master += lo;
    sub.grad += lo;
    if (sub.m) sub.m += lo;
    if (sub.v) sub.v += lo;
    if (sub.working) sub.working = (char *)sub.working + (size_t)lo * gln_dtype_size(sub.wdt);
    for (int t = 0; t < nt; t++) sub.part[t] = 0.0f;
    gln_cpu_parallel_for(nt, len, step_range, &sub);
    float best = 0.0f;
    for (int t = 0; t < nt; t++)
        if (sub.part[t] > best) best = sub.part[t];
    return best;
}

gln_status_t gln_cpu_optimizer_step(gln_context_t *ctx, const gln_optimizer_params_t *p, float *master,
                                    const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n, void *working,
                                    gln_dtype_t working_dtype, int32_t nseg, const int64_t *bounds,
                                    int bounds_on_backend, float *amax) {
    (void)ctx;
    (void)bounds_on_backend; /* host memory either way */
    const gln_optimizer_params_t live = gln_optimizer_params_live(p);
    opt_job_t j = {&live, master, grad, exp_avg, exp_avg_sq, working, working_dtype, {0}};
    if (working == (void *)master) j.working = NULL; /* fp32 aliasing the master: already written */
    if (nseg <= 0) {
        step_piece(&j, 0, n);
        return GLN_STATUS_SUCCESS;
    }
    step_piece(&j, 0, bounds[0]);
    for (int32_t s = 0; s < nseg; s++) amax[s] = step_piece(&j, bounds[s], bounds[s + 1]);
    step_piece(&j, bounds[nseg], n);
    return GLN_STATUS_SUCCESS;
}
