/* --exact-data: a training run whose loss curve is bitwise independent of the rank count.
 *
 * What depends on the rank count R is only the grouping of sums over tokens: the expert
 * wgrads (each rank sums its own tokens, then the sharded group reduce-scatters), the router
 * gradient (all-reduced) and the loss (see train.c: per-token losses are gathered and summed
 * in global token order, so the loss never depends on R).  Everything else is computed per
 * token and is the same on any rank.  So the run is R-independent when every sum over tokens
 * is exact in FP32, which holds when every GEMM operand is an 8-bit fixed-point value:
 *
 *   value = n · 2^-frac with |n| <= 255
 *
 * A product of two such values is an integer multiple of 2^-(f1+f2) below 2^16 in those
 * units, and a sum of up to 256 of them stays below 2^24 units: exact in FP32, in any order.
 * (The CLI parity test keeps every reduction, per expert and over all ranks, within 256 terms.)
 * Such values are also exact in bf16 (8 significant bits), so casting to the working dtype
 * rounds nothing.
 *
 * The program rounds onto these grids what it produces itself: the inputs, the weights after
 * every optimizer step, the activation fed to FC2 and the gradients fed to the layers and to
 * the router's weight gradient.  The library's own outputs (the bf16 GEMM results) need no
 * rounding: they are rounded per element, identically on any rank.  Gradients are those of the
 * summed (not averaged) squared error, so they are O(1) and fit the gradient grid; Adam is
 * invariant to that scale up to its epsilon. */
#ifndef GLN_TOOLS_EXACT_H
#define GLN_TOOLS_EXACT_H

#include <math.h>
#include <stddef.h>

enum {
    EXACT_DATA_FRAC = 4,   /* inputs: n/16, |n| <= 32 */
    EXACT_ACT_FRAC = 4,    /* FC2 input (activation output): |v| < 16 */
    EXACT_GRAD_FRAC = 6,   /* gradients: |v| < 4 */
    EXACT_WEIGHT_FRAC = 8  /* weights: |v| < 1 */
};

/* Nearest n·2^-frac with n clamped to [-255, 255]. */
static inline float exact_round(float v, int frac) {
    float n = rintf(ldexpf(v, frac));
    if (n > 255.0f) n = 255.0f;
    if (n < -255.0f) n = -255.0f;
    return ldexpf(n, -frac);
}

static inline void exact_round_array(float *v, size_t count, int frac) {
    for (size_t i = 0; i < count; i++) v[i] = exact_round(v[i], frac);
}

#endif
