/* The batched transpose's reference (transpose.h): plain loops, element by element. */
#include "backend/transpose.h"

#include <string.h>

void gln_transpose_batched_ref(const gln_transpose_t *t) {
    const size_t es = t->elem_size;
    for (int64_t b = 0; b < t->batch; b++) {
        const char *src = (const char *)t->src + (size_t)(b * t->src_stride) * es;
        char *dst = (char *)t->dst + (size_t)(b * t->dst_stride) * es;
        for (int64_t r = 0; r < t->rows; r++)
            for (int64_t c = 0; c < t->cols; c++)
                memcpy(dst + (size_t)(c * t->dst_ld + r) * es, src + (size_t)(r * t->src_ld + c) * es, es);
    }
}
