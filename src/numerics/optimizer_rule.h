/* The optimizer's per-element rule (gln_optimizer_step, grouplin.h "Optimizer"), one definition
 * for the CPU loop and the CUDA kernel.
 *
 * Every FP32 operation goes through one of the helpers below, so that the host and the device
 * compute the same bits: each is one IEEE operation rounded to nearest (the device's __f*_rn
 * intrinsics, which nvcc never contracts into an FMA; the host's C operators, which GCC does not
 * contract in ISO C mode), and each applies one NaN rule of its own instead of the hardware's
 * (x86 returns its default NaN 0xFFC00000 for Inf - Inf, the device 0x7FFFFFFF, and the device
 * drops NaN payloads): a NaN operand comes back quieted with its sign and payload (the first
 * operand's when both are NaN), a NaN made from non-NaN operands is 0x7FFFFFFF. */
#ifndef GLN_NUMERICS_OPTIMIZER_RULE_H
#define GLN_NUMERICS_OPTIMIZER_RULE_H

#include <stdint.h>

#ifndef __CUDACC__ /* nvcc includes cuda_runtime.h first, which declares sqrtf for the host pass */
#include <math.h>
#endif

#include "common/host_device.h"
#include "grouplin.h"
#include "numerics/numerics.h"

/* The resolved step: gln_optimizer_config_t checked, with the per-step constants the host
 * computes once (so every backend uses the same bits).  kind: GLN_OPTIMIZER_ADAM / _SGD. */
typedef struct gln_optimizer_params {
    int kind;
    int adam_w_mode;  /* Adam: 1 decoupled, 0 L2 */
    int first_step;   /* step == 1 (SGD's momentum buffer starts from the gradient) */
    float lr, beta1, beta2, eps, weight_decay, momentum;
    float one_minus_beta1, one_minus_beta2; /* 1 - beta in FP32 */
    float bc1, bc2;   /* (float)(1 - beta^step), computed in double */
    const float *bc_backend; /* Adam: {bc1, bc2} in backend memory, read when the step runs
                                (cfg->bias_corrections); NULL: bc1, bc2 above */
} gln_optimizer_params_t;

/* The parameters with the bias corrections a step reads when it runs (bc_backend, when set, is
 * memory the caller of the backend can read: the host's on the CPU, the device's in a kernel). */
GLN_HD static inline gln_optimizer_params_t gln_optimizer_params_live(const gln_optimizer_params_t *p) {
    gln_optimizer_params_t q = *p;
    if (q.bc_backend) {
        q.bc1 = q.bc_backend[0];
        q.bc2 = q.bc_backend[1];
    }
    return q;
}

/* Check cfg and step under the name `fn` (the ranges of grouplin.h) and fill *out
 * (optimizer_rule.c). */
gln_status_t gln_optimizer_resolve(const char *fn, const gln_optimizer_config_t *cfg, int64_t step,
                                   gln_optimizer_params_t *out);
/* The moments the kind reads are not NULL: Adam both, SGD with momentum exp_avg. */
gln_status_t gln_optimizer_check_moments(const char *fn, const gln_optimizer_params_t *p, const float *exp_avg,
                                         const float *exp_avg_sq);

GLN_HD static inline float gln_opt_nan_pick(float a, float b) {
    return gln_f32_from_bits(gln_f32_bits(gln_f32_isnan(a) ? a : b) | 0x00400000u);
}

/* r: the IEEE result of an operation whose operands were not NaN. */
GLN_HD static inline float gln_opt_made_nan(float r) {
    return gln_f32_isnan(r) ? gln_f32_from_bits(0x7FFFFFFFu) : r;
}

/* The rounded-to-nearest operation for this compilation pass: the device's intrinsic `dev` in a
 * device pass, the host's C expression `host` otherwise. */
#ifdef __CUDA_ARCH__
#define GLN_OPT_RN(dev, host) (dev)
#else
#define GLN_OPT_RN(dev, host) (host)
#endif

/* Each helper: a NaN operand decides the result (the operation does not run), else the
 * operation's IEEE result with a made NaN replaced. */
GLN_HD static inline float gln_opt_add(float a, float b) {
    if (gln_f32_isnan(a) || gln_f32_isnan(b)) return gln_opt_nan_pick(a, b);
    return gln_opt_made_nan(GLN_OPT_RN(__fadd_rn(a, b), a + b));
}
GLN_HD static inline float gln_opt_sub(float a, float b) {
    if (gln_f32_isnan(a) || gln_f32_isnan(b)) return gln_opt_nan_pick(a, b);
    return gln_opt_made_nan(GLN_OPT_RN(__fsub_rn(a, b), a - b));
}
GLN_HD static inline float gln_opt_mul(float a, float b) {
    if (gln_f32_isnan(a) || gln_f32_isnan(b)) return gln_opt_nan_pick(a, b);
    return gln_opt_made_nan(GLN_OPT_RN(__fmul_rn(a, b), a * b));
}
GLN_HD static inline float gln_opt_div(float a, float b) {
    if (gln_f32_isnan(a) || gln_f32_isnan(b)) return gln_opt_nan_pick(a, b);
    return gln_opt_made_nan(GLN_OPT_RN(__fdiv_rn(a, b), a / b));
}
GLN_HD static inline float gln_opt_sqrt(float a) {
    if (gln_f32_isnan(a)) return gln_opt_nan_pick(a, a);
    return gln_opt_made_nan(GLN_OPT_RN(__fsqrt_rn(a), sqrtf(a)));
}

/* One element: *w (master), g (gradient), *m / *v (moments; only what the kind uses is read or
 * written).  TE FusedAdam's operation order (multi_tensor_adam), without its FMA contraction. */
GLN_HD static inline void gln_optimizer_element(const gln_optimizer_params_t *p, float *w, float g, float *m,
                                                float *v) {
    const float wi = *w;
    if (p->kind == GLN_OPTIMIZER_ADAM) {
        if (!p->adam_w_mode) g = gln_opt_add(g, gln_opt_mul(p->weight_decay, wi));
        const float mi = gln_opt_add(gln_opt_mul(p->beta1, *m), gln_opt_mul(p->one_minus_beta1, g));
        const float vi = gln_opt_add(gln_opt_mul(p->beta2, *v), gln_opt_mul(gln_opt_mul(p->one_minus_beta2, g), g));
        *m = mi;
        *v = vi;
        const float denom = gln_opt_add(gln_opt_sqrt(gln_opt_div(vi, p->bc2)), p->eps);
        float update = gln_opt_div(gln_opt_div(mi, p->bc1), denom);
        if (p->adam_w_mode) update = gln_opt_add(update, gln_opt_mul(p->weight_decay, wi));
        *w = gln_opt_sub(wi, gln_opt_mul(p->lr, update));
        return;
    }
    if (p->weight_decay != 0.0f) g = gln_opt_add(g, gln_opt_mul(p->weight_decay, wi));
    if (p->momentum != 0.0f) {
        g = p->first_step ? g : gln_opt_add(gln_opt_mul(p->momentum, *m), g);
        *m = g;
    }
    *w = gln_opt_sub(wi, gln_opt_mul(p->lr, g));
}

#endif
