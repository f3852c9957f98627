/* gln_backend_supports (docs/design.md, "The backend table"): the answers match what the calls
 * do.
 *
 *   - CPU: every public call runs on tensors of every valid combination of its dtypes, scaling
 *     modes and layout, and of every value of each field in turn; the query must say
 *     INVALID_ARGUMENT exactly when the call does, supported exactly when the call succeeds,
 *     unsupported exactly when it returns NOT_SUPPORTED (tests/harness/op_probe.c).  Every valid
 *     combination is supported but the operand pairs no backend multiplies.
 *   - CUDA, without a device (the CUDA side against real calls: test_supports_cuda.c): the
 *     refusals read off src/backend/cuda (cuda_gemm.c gemm_plan: mixed high-precision dtypes,
 *     E5M2 x E5M2 per-tensor) are answered unsupported, and
 *     what the backend runs is answered supported; in a build without CUDA every CUDA answer is
 *     0.
 *   - argument checks: NULLs, versions, enums out of range. */
#include <string.h>

#include "backend/backend.h"
#include "harness.h"
#include "op_probe.h"

/* High precision with high precision, or quantized modes of one family. */
static int pair_meets(const gln_op_query_t *q) {
    const int qa = gln_dtype_is_fp8(q->a_dtype), qb = gln_dtype_is_fp8(q->b_dtype);
    if (qa != qb) return 0;
    if (!qa) return 1;
    const int block_a = q->a_scaling == GLN_SCALING_BLOCK_1D || q->a_scaling == GLN_SCALING_BLOCK_2D;
    const int block_b = q->b_scaling == GLN_SCALING_BLOCK_1D || q->b_scaling == GLN_SCALING_BLOCK_2D;
    return block_a ? block_b : q->a_scaling == q->b_scaling;
}

static long cpu_wrong, gemm_yes, gemm_no;
static void cpu_visit(const gln_op_query_t *q, int supported) {
    const int gemm = q->op == GLN_OP_GEMM || q->op == GLN_OP_GROUPED_GEMM;
    const int want = gemm ? pair_meets(q) : 1;
    if (supported != want) cpu_wrong++;
    if (gemm && q->out_dtype != GLN_DTYPE_FP32) return; /* the sweeps below vary one field only */
    if (gemm && supported) gemm_yes++;
    if (gemm && !supported) gemm_no++;
}

static void test_cpu_matches_calls(void) {
    gln_test_probe_t *p = gln_test_probe_create(gln_test_cpu_context());
    CHECK(p != NULL);
    if (!p) return;
    gln_test_probe_counts_t c;
    cpu_wrong = gemm_yes = gemm_no = 0;
    gln_test_probe_all(p, GLN_BACKEND_CPU, &c, cpu_visit);
    CHECK_MSG(c.disagree == 0, "%ld queries disagree with their calls", c.disagree);
    CHECK_MSG(cpu_wrong == 0, "%ld valid CPU combinations answered other than 'every valid pair'", cpu_wrong);
    /* The enumeration covers every GEMM operand pair: 11 operand kinds (3 high precision, 2 FP8
     * dtypes x 4 modes) each for A and B, of which 33 pairs meet (3 x 3 high precision, 2 x 2
     * per-tensor, 2 x 2 MXFP8, 4 x 4 block), in 3 layouts and 2 ops: with D fp32 (the valid
     * cross product, plus the sweeps of A and B that each vary one operand with D fp32)
     * at least 2 x 3 x 33 supported and 2 x 3 x 88 unsupported queries. */
    CHECK_MSG(gemm_yes >= 2 * 3 * 33 && gemm_no >= 2 * 3 * 88, "GEMM queries: %ld supported, %ld not", gemm_yes,
              gemm_no);
    CHECK(c.invalid > 0);
    printf("cpu: %ld supported, %ld unsupported, %ld invalid queries, each matching its call\n", c.supported,
           c.unsupported, c.invalid);
    gln_test_probe_destroy(p);
}

static gln_op_query_t query(gln_op_t op, gln_dtype_t a, gln_scaling_mode_t as, gln_dtype_t b, gln_scaling_mode_t bs,
                            gln_dtype_t out) {
    gln_op_query_t q = GLN_OP_QUERY_INIT;
    q.op = op;
    q.a_dtype = a, q.a_scaling = as;
    q.b_dtype = b, q.b_scaling = bs;
    q.out_dtype = out, q.out_scaling = GLN_SCALING_NONE;
    return q;
}

/* The answer of the public query for CUDA (SUCCESS expected). */
static int cuda_answer(const gln_op_query_t *q) {
    int s = -1;
    CHECK_OK(gln_backend_supports(GLN_BACKEND_CUDA, q, &s));
    return s;
}

static void test_cuda_rules(void) {
    const gln_dtype_t E4 = GLN_DTYPE_FP8_E4M3, E5 = GLN_DTYPE_FP8_E5M2, BF = GLN_DTYPE_BF16;
    const gln_scaling_mode_t N = GLN_SCALING_NONE, T = GLN_SCALING_TENSOR, MX = GLN_SCALING_MXFP8_1D;
    const gln_op_t gemms[2] = {GLN_OP_GEMM, GLN_OP_GROUPED_GEMM};
    for (int i = 0; i < 2; i++) {
        gln_op_query_t q;
        /* refused in cuda_gemm.c gemm_plan */
        q = query(gemms[i], BF, N, GLN_DTYPE_FP16, N, BF);
        CHECK(gln_cuda_supports(&q) == 0);
        q = query(gemms[i], GLN_DTYPE_FP32, N, BF, N, BF);
        CHECK(gln_cuda_supports(&q) == 0);
        q = query(gemms[i], E5, T, E5, T, BF);
        CHECK(gln_cuda_supports(&q) == 0);
        /* run */
        q = query(gemms[i], BF, N, BF, N, GLN_DTYPE_FP32);
        CHECK(gln_cuda_supports(&q) == 1);
        q = query(gemms[i], GLN_DTYPE_FP16, N, GLN_DTYPE_FP16, N, BF);
        CHECK(gln_cuda_supports(&q) == 1);
        q = query(gemms[i], E4, T, E5, T, BF);
        CHECK(gln_cuda_supports(&q) == 1);
        q = query(gemms[i], E5, T, E4, T, BF);
        CHECK(gln_cuda_supports(&q) == 1);
        q = query(gemms[i], E5, MX, E5, MX, BF);
        CHECK(gln_cuda_supports(&q) == 1); /* dequantized */
        q = query(gemms[i], E5, GLN_SCALING_BLOCK_1D, E5, GLN_SCALING_BLOCK_2D, BF);
        CHECK(gln_cuda_supports(&q) == 1); /* widened per K block */
    }
    gln_op_query_t qz = query(GLN_OP_QUANTIZE, BF, N, BF, N, E4);
    for (int m = GLN_SCALING_TENSOR; m <= GLN_SCALING_BLOCK_2D; m++) {
        qz.out_scaling = (gln_scaling_mode_t)m;
        CHECK(gln_cuda_supports(&qz) == 1);
    }

    /* the public query: the table's NULL slots and the build */
    const int built = gln_backend_cuda_ops() != NULL;
    gln_op_query_t q = query(GLN_OP_GEMM, BF, N, BF, N, BF);
    CHECK(cuda_answer(&q) == built);
    q = query(GLN_OP_GEMM, E5, T, E5, T, BF);
    CHECK(cuda_answer(&q) == 0);
    q = query(GLN_OP_GEMM, BF, N, E4, T, BF); /* a pair no backend multiplies */
    CHECK(cuda_answer(&q) == 0);
    q = query(GLN_OP_MXFP8_SWIZZLE, BF, N, BF, N, BF);
    CHECK(cuda_answer(&q) == built);
    if (built) CHECK(gln_backend_cuda_ops()->mxfp8_swizzle != NULL);
    const gln_op_t moe[] = {GLN_OP_MOE_ROUTER_FORWARD,  GLN_OP_MOE_ROUTER_BACKWARD,     GLN_OP_MOE_PERMUTE_PLAN,
                            GLN_OP_MOE_PERMUTE,         GLN_OP_MOE_PERMUTE_BACKWARD,    GLN_OP_MOE_UNPERMUTE,
                            GLN_OP_MOE_UNPERMUTE_BACKWARD, GLN_OP_ACTIVATION_FORWARD, GLN_OP_ACTIVATION_BACKWARD};
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
        q = query(moe[i], BF, N, BF, N, BF);
        CHECK_MSG(cuda_answer(&q) == built, "MoE op %d: cuda answered %d, built %d", (int)moe[i], cuda_answer(&q),
                  built);
        int s = -1;
        CHECK_OK(gln_backend_supports(GLN_BACKEND_CPU, &q, &s));
        CHECK(s == 1);
    }
    q = query(GLN_OP_DEQUANTIZE, E5, GLN_SCALING_BLOCK_2D, BF, N, GLN_DTYPE_FP16);
    CHECK(cuda_answer(&q) == built);
    /* the fused activation + quantize: every valid combination on both backends (CUDA composes
     * what it does not fuse) */
    for (int m = GLN_SCALING_TENSOR; m <= GLN_SCALING_BLOCK_2D; m++) {
        q = query(GLN_OP_ACTIVATION_FORWARD_QUANTIZE, BF, N, GLN_DTYPE_FP32, N, E5);
        q.out_scaling = (gln_scaling_mode_t)m;
        CHECK(cuda_answer(&q) == built);
        int s = -1;
        CHECK_OK(gln_backend_supports(GLN_BACKEND_CPU, &q, &s));
        CHECK(s == 1);
    }
    if (built) CHECK(gln_backend_cuda_ops()->activation_forward_quantize != NULL);
}

static void test_query_errors(void) {
    gln_op_query_t q = GLN_OP_QUERY_INIT;
    int s = 7;
    CHECK_STATUS(gln_backend_supports(GLN_BACKEND_CPU, NULL, &s), GLN_STATUS_INVALID_ARGUMENT, "query");
    CHECK_STATUS(gln_backend_supports(GLN_BACKEND_CPU, &q, NULL), GLN_STATUS_INVALID_ARGUMENT, "supported");
    CHECK_STATUS(gln_backend_supports((gln_backend_kind_t)2, &q, &s), GLN_STATUS_INVALID_ARGUMENT, "backend 2");
    q.size = sizeof q - 4;
    CHECK_STATUS(gln_backend_supports(GLN_BACKEND_CPU, &q, &s), GLN_STATUS_INVALID_ARGUMENT, "GLN_OP_QUERY_INIT");
    q.size = sizeof q;
    q.op = GLN_OP_COUNT_;
    CHECK_STATUS(gln_backend_supports(GLN_BACKEND_CPU, &q, &s), GLN_STATUS_INVALID_ARGUMENT, "query->op 19");
    q.op = (gln_op_t)-1;
    CHECK_STATUS(gln_backend_supports(GLN_BACKEND_CPU, &q, &s), GLN_STATUS_INVALID_ARGUMENT, "query->op -1");
    q.op = GLN_OP_GEMM;
    q.layout = (gln_gemm_layout_t)3;
    CHECK_STATUS(gln_backend_supports(GLN_BACKEND_CPU, &q, &s), GLN_STATUS_INVALID_ARGUMENT, "query->layout 3");
    q.layout = GLN_LAYOUT_NN;
    q.out_dtype = GLN_DTYPE_FP8_E4M3, q.out_scaling = GLN_SCALING_TENSOR;
    CHECK_STATUS(gln_backend_supports(GLN_BACKEND_CPU, &q, &s), GLN_STATUS_INVALID_ARGUMENT,
                 "query->out_dtype fp8_e4m3 with query->out_scaling tensor: op gemm takes a high-precision");
    q = (gln_op_query_t)GLN_OP_QUERY_INIT;
    q.op = GLN_OP_AMAX; /* unused fields are ignored, even when out of range */
    q.b_dtype = (gln_dtype_t)99, q.out_scaling = (gln_scaling_mode_t)99, q.layout = (gln_gemm_layout_t)99;
    CHECK_OK(gln_backend_supports(GLN_BACKEND_CPU, &q, &s));
    CHECK(s == 1);
}

GLN_TEST_MAIN(GLN_CASE(test_cpu_matches_calls), GLN_CASE(test_cuda_rules), GLN_CASE(test_query_errors))
