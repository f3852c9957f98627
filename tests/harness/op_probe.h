/* Probing what a backend does with the dtypes, scaling modes and layout of a gln_op_query_t:
 * tests/test_supports.c (CPU) and tests/test_supports_cuda.c (CUDA) run every public call on
 * small tensors built from a query and compare the call's status with gln_backend_supports. */
#ifndef GLN_TEST_OP_PROBE_H
#define GLN_TEST_OP_PROBE_H

#include "grouplin.h"

typedef struct gln_test_probe gln_test_probe_t;

/* Zeroed input and output pools in the backend memory of ctx; NULL on failure (reported). */
gln_test_probe_t *gln_test_probe_create(gln_context_t *ctx);
void gln_test_probe_destroy(gln_test_probe_t *p);

/* The status of the public call of q->op on tensors of q's dtypes / modes (32 x 32 operands, two
 * experts of 16 rows for grouped calls, 4 tokens top-2 for the MoE ops, SwiGLU), every pointer
 * into the pools (zero inputs: any dtype's values are valid). */
gln_status_t gln_test_probe_run(gln_test_probe_t *p, const gln_op_query_t *q);

typedef struct gln_test_probe_counts {
    long supported, unsupported, invalid, disagree;
} gln_test_probe_counts_t;

/* For every op: every valid combination of its fields (layouts included), and every value of
 * each field in turn (all dtypes x scaling modes, plus out-of-range values) with the others
 * valid.  Each query is asked of gln_backend_supports(kind) and run through the probe; a CHECK
 * fails unless INVALID_ARGUMENT <-> INVALID_ARGUMENT, supported <-> SUCCESS and unsupported <->
 * NOT_SUPPORTED.  `visit` (may be NULL) sees every valid query with its answer. */
void gln_test_probe_all(gln_test_probe_t *p, gln_backend_kind_t kind, gln_test_probe_counts_t *counts,
                        void (*visit)(const gln_op_query_t *q, int supported));

#endif
