/* The CUDA optimizer step (backend.h, optimizer_step; cuda_optimizer.cu).  Its CPU twin is
 * src/backend/cpu/cpu_optimizer.c; tests/test_cuda_optimizer.c compares the two bit for bit. */
#ifndef GLN_BACKEND_CUDA_OPTIMIZER_H
#define GLN_BACKEND_CUDA_OPTIMIZER_H

#include "grouplin.h"
#include "numerics/optimizer_rule.h"

#ifdef __cplusplus
extern "C" {
#endif
gln_status_t gln_cuda_optimizer_step(gln_context_t *ctx, const gln_optimizer_params_t *p, float *master,
                                     const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n, void *working,
                                     gln_dtype_t working_dtype, int32_t nseg, const int64_t *bounds,
                                     int bounds_on_backend, float *amax);
#ifdef __cplusplus
}
#endif

#endif
