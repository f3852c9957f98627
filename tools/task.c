/* Synthetic data for `grouplin train` (see task.h). */
#include "task.h"

#include <math.h>

#include "exact.h"

tool_rng_t tool_rng_seed(uint64_t seed, uint64_t stream) {
    tool_rng_t r = {seed * 0x9E3779B97F4A7C15ull ^ (stream + 1) * 0xD1B54A32D192ED03ull};
    tool_rng_u64(&r);
    return r;
}

uint64_t tool_rng_u64(tool_rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tool_rng_uniform(tool_rng_t *r) { return (double)(tool_rng_u64(r) >> 11) * 0x1.0p-53; }

double tool_rng_normal(tool_rng_t *r) {
    double u1 = tool_rng_uniform(r), u2 = tool_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void task_inputs(uint64_t seed, int64_t step, int64_t first, int64_t count, int64_t hidden, int exact,
                 float *x) {
    /* One stream per (step, token) so a rank's slice does not depend on how many ranks there are. */
    for (int64_t t = 0; t < count; t++) {
        tool_rng_t r = tool_rng_seed(seed ^ 0x5DEECE66Dull, (uint64_t)step * 0x100000001ull + (uint64_t)(first + t));
        for (int64_t h = 0; h < hidden; h++) {
            float v = exact ? (float)((int)(tool_rng_u64(&r) % 65) - 32) / 16.0f
                            : (float)tool_rng_normal(&r);
            x[t * hidden + h] = v;
        }
    }
}

void task_weights(uint64_t seed, uint64_t stream, int64_t n, int64_t rows, int64_t cols, double std,
                  int exact, float *w) {
    tool_rng_t r = tool_rng_seed(seed, stream);
    const int64_t count = n * rows * cols;
    for (int64_t i = 0; i < count; i++) {
        float v = (float)(std * tool_rng_normal(&r));
        w[i] = exact ? exact_round(v, EXACT_WEIGHT_FRAC) : v;
    }
}
