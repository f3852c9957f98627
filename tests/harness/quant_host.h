/* Host-side quantized test buffers for the CPU quantizer tests: a tensor sized by
 * gln_quant_layout with guarded, poisoned buffers, and the config / context helpers the tests
 * share. */
#ifndef GLN_TEST_QUANT_HOST_H
#define GLN_TEST_QUANT_HOST_H

#include "grouplin.h"
#include "harness.h"

/* A quantized tensor with guarded, poisoned buffers sized by gln_quant_layout. */
typedef struct qbuf {
    gln_tensor_t t;
    gln_quant_layout_t l;
    float amax, scale;
} qbuf_t;

/* A new CPU context (the caller destroys it). */
gln_context_t *ctx_cpu(void);
void qbuf_init(qbuf_t *q, gln_scaling_mode_t mode, gln_dtype_t fp8, int64_t R, int64_t C);
/* Checks the guards, then frees. */
void qbuf_free(qbuf_t *q);
gln_quant_config_t qcfg(gln_scaling_mode_t mode, gln_dtype_t fp8, int rowwise, int columnwise);
/* n normal values times scale (at least one element allocated; gln_test_free). */
float *random_f32(gln_rng_t *rng, int64_t n, double scale);

#endif
