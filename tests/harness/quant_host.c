/* Host-side quantized test buffers (quant_host.h). */
#include "quant_host.h"

#include <math.h>
#include <string.h>

gln_context_t *ctx_cpu(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    return ctx;
}

void qbuf_init(qbuf_t *q, gln_scaling_mode_t mode, gln_dtype_t fp8, int64_t R, int64_t C) {
    memset(q, 0, sizeof *q);
    CHECK_OK(gln_quant_layout(mode, fp8, R, C, &q->l));
    q->t.dtype = fp8;
    q->t.rows = R;
    q->t.cols = C;
    q->t.scaling = mode;
    q->t.data = gln_test_alloc(q->l.data_bytes);
    q->t.col_data = gln_test_alloc(q->l.col_data_bytes);
    q->t.scale_inv = gln_test_alloc(q->l.scale_bytes);
    q->t.col_scale_inv = gln_test_alloc(q->l.col_scale_bytes);
    memset(q->t.data, 0xA5, q->l.data_bytes);
    memset(q->t.col_data, 0xA5, q->l.col_data_bytes);
    memset(q->t.scale_inv, 0xA5, q->l.scale_bytes); /* NaN-ish pattern for float scales too */
    memset(q->t.col_scale_inv, 0xA5, q->l.col_scale_bytes);
    q->t.amax = &q->amax;
    q->t.scale = &q->scale;
    q->amax = NAN;
    q->scale = NAN;
}

void qbuf_free(qbuf_t *q) {
    void *bufs[4] = {q->t.data, q->t.col_data, q->t.scale_inv, q->t.col_scale_inv};
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(gln_guard_ok(bufs[i]), "guard of buffer %d overwritten", i);
        gln_test_free(bufs[i]);
    }
}

gln_quant_config_t qcfg(gln_scaling_mode_t mode, gln_dtype_t fp8, int rowwise, int columnwise) {
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.mode = mode;
    c.fp8_dtype = fp8;
    c.rowwise = rowwise;
    c.columnwise = columnwise;
    return c;
}

float *random_f32(gln_rng_t *rng, int64_t n, double scale) {
    float *x = gln_test_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)(gln_rng_normal(rng) * scale);
    return x;
}
