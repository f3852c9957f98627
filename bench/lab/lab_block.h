/* The kernel lab's shapes and its FP8 block-scaling mode (lab_block.c), shared with the driver
 * grouped_tiles.c. */
#ifndef GLN_BENCH_LAB_BLOCK_H
#define GLN_BENCH_LAB_BLOCK_H

#include "../bench_util.h"

typedef struct lab_shape {
    const char *name;
    int32_t experts;
    int64_t tokens, k, n;
} lab_shape_t;

/* `grouped_tiles --recipe block`: the block-scaled variants of one stage ("fprop", "dgrad",
 * "wgrad") on shape s, checked then timed (agree: then compared with the library's kernel on the
 * full shape); exit status 0, 77 without a GPU. */
int lab_block_main(const lab_shape_t *s, const char *stage, bench_splits_t sk, int repeat, int inner, int agree);

/* The elements of two outputs of n elements (FP32 when f32, else bf16) whose bytes differ; *worst
 * gets the largest relative difference among them. */
size_t lab_count_differing(const void *want, const void *got, size_t n, int f32, double *worst);

#endif
