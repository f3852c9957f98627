/* The synthetic training task: random inputs from a seeded generator (the same global batch on
 * every rank; each rank takes its slice of tokens) and the targets a fixed random teacher MoE of
 * the student's shape produces for them. */
#ifndef GLN_TOOLS_TASK_H
#define GLN_TOOLS_TASK_H

#include <stdint.h>

/* splitmix64 stream: reproducible across machines (no libc rand). */
typedef struct tool_rng {
    uint64_t s;
} tool_rng_t;
tool_rng_t tool_rng_seed(uint64_t seed, uint64_t stream);
uint64_t tool_rng_u64(tool_rng_t *r);
double tool_rng_uniform(tool_rng_t *r);   /* [0, 1) */
double tool_rng_normal(tool_rng_t *r);

/* Rows [first, first + count) of step `step`'s global batch [tokens, hidden], row-major into x.
 * exact = 1: values n/16 with |n| <= 32 (exact.h); otherwise N(0, 1). */
void task_inputs(uint64_t seed, int64_t step, int64_t first, int64_t count, int64_t hidden, int exact,
                 float *x);
/* Full FP32 weights [n, rows, cols] ~ N(0, std²) (exact: rounded onto the weight grid). */
void task_weights(uint64_t seed, uint64_t stream, int64_t n, int64_t rows, int64_t cols, double std,
                  int exact, float *w);

#endif
