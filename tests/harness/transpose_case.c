/* One case of the transpose_batched backend slot (transpose_case.h). */
#include "transpose_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int gln_transpose_case_new(gln_transpose_case_t *c, const gln_transpose_shape_t *s) {
    memset(c, 0, sizeof *c);
    c->s = s;
    gln_transpose_t t = {s->es, s->batch, s->rows, s->cols, NULL, s->cols + s->src_pad, 0, NULL, s->rows + s->dst_pad, 0};
    t.src_stride = t.rows * t.src_ld + s->src_gap;
    t.dst_stride = t.cols * t.dst_ld + s->dst_gap;
    c->src_bytes = (size_t)(t.batch * t.src_stride) * s->es;
    c->dst_bytes = (size_t)(t.batch * t.dst_stride) * s->es;
    snprintf(c->name, sizeof c->name, "transpose es %zu batch %lld [%lld, %lld] pads %lld/%lld gaps %lld/%lld",
             s->es, (long long)s->batch, (long long)s->rows, (long long)s->cols, (long long)s->src_pad,
             (long long)s->dst_pad, (long long)s->src_gap, (long long)s->dst_gap);
    c->src = malloc(c->src_bytes), c->want = malloc(c->dst_bytes), c->got = malloc(c->dst_bytes);
    if (!c->src || !c->want || !c->got) {
        CHECK_MSG(0, "%s: out of host memory", c->name);
        return 0;
    }
    gln_rng_t r = gln_rng_seed((uint64_t)(s->rows * 131 + s->cols));
    for (size_t i = 0; i < c->src_bytes; i++) c->src[i] = (uint8_t)gln_rng_int(&r, 0, 255);
    memset(c->want, 0xA5, c->dst_bytes);
    memset(c->got, 0xA5, c->dst_bytes);
    t.src = c->src;
    c->t = t;
    return 1;
}

void gln_transpose_case_spot_check(const gln_transpose_case_t *c, const uint8_t *dst) {
    const gln_transpose_t *t = &c->t;
    const size_t es = c->s->es;
    if (t->rows > 1 && t->cols > 2) {
        const int64_t b = t->batch - 1, rr = t->rows - 1, cc = 2;
        CHECK_MSG(memcmp(dst + (size_t)(b * t->dst_stride + cc * t->dst_ld + rr) * es,
                         c->src + (size_t)(b * t->src_stride + rr * t->src_ld + cc) * es, es) == 0,
                  "%s: element (%lld, %lld, %lld) not moved to its transposed place", c->name, (long long)b,
                  (long long)rr, (long long)cc);
    }
    if (c->s->dst_pad)
        CHECK_MSG(dst[(size_t)t->rows * es] == 0xA5, "%s: the destination's padding was written", c->name);
}

void gln_transpose_case_free(gln_transpose_case_t *c) {
    free(c->src);
    free(c->want);
    free(c->got);
}
