/* gln_backend_supports: the capability query (docs/design.md, "The backend table").  The
 * answer is derived from the same things the dispatchers use, so it cannot drift from what a call does:
 *   1. the query's fields are checked with the rules of the op's public call (a field of the
 *      wrong kind is INVALID_ARGUMENT there, and here);
 *   2. GEMM operand pairs that no backend multiplies (gln_arg_operand_pair) answer 0;
 *   3. an op whose slot in the backend's table is NULL answers 0 (gln_backend_missing);
 *   4. the backend's own `supports` slot answers for what its code refuses inside. */
#include <stddef.h>

#include "backend/backend.h"
#include "common/error.h"
#include "tensor/tensor.h"

/* What a tensor field of the query must hold for an op. */
typedef enum field_kind {
    FIELD_UNUSED = 0,
    FIELD_HIGH_PRECISION, /* fp32 / bf16 / fp16, scaling none */
    FIELD_QUANTIZED,      /* FP8, a quantized scaling mode */
    FIELD_OPERAND         /* either (GEMM operands) */
} field_kind_t;

typedef struct op_rule {
    const char *name; /* for messages */
    field_kind_t a, b, out;
    int uses_layout;
} op_rule_t;

static const op_rule_t op_rules[GLN_OP_COUNT_] = {
    [GLN_OP_QUANTIZE] = {"quantize", FIELD_HIGH_PRECISION, FIELD_UNUSED, FIELD_QUANTIZED, 0},
    [GLN_OP_DEQUANTIZE] = {"dequantize", FIELD_QUANTIZED, FIELD_UNUSED, FIELD_HIGH_PRECISION, 0},
    [GLN_OP_GROUPED_QUANTIZE] = {"grouped_quantize", FIELD_HIGH_PRECISION, FIELD_UNUSED, FIELD_QUANTIZED, 0},
    [GLN_OP_MXFP8_SWIZZLE] = {"mxfp8_swizzle", FIELD_UNUSED, FIELD_UNUSED, FIELD_UNUSED, 0},
    [GLN_OP_GEMM] = {"gemm", FIELD_OPERAND, FIELD_OPERAND, FIELD_HIGH_PRECISION, 1},
    [GLN_OP_GROUPED_GEMM] = {"grouped_gemm", FIELD_OPERAND, FIELD_OPERAND, FIELD_HIGH_PRECISION, 1},
    [GLN_OP_GROUPED_DBIAS] = {"grouped_dbias", FIELD_HIGH_PRECISION, FIELD_UNUSED, FIELD_HIGH_PRECISION, 0},
    [GLN_OP_AMAX] = {"amax", FIELD_HIGH_PRECISION, FIELD_UNUSED, FIELD_UNUSED, 0},
    [GLN_OP_CAST] = {"cast", FIELD_HIGH_PRECISION, FIELD_UNUSED, FIELD_HIGH_PRECISION, 0},
    [GLN_OP_MOE_ROUTER_FORWARD] = {"moe_router_forward", FIELD_UNUSED, FIELD_UNUSED, FIELD_UNUSED, 0},
    [GLN_OP_MOE_ROUTER_BACKWARD] = {"moe_router_backward", FIELD_UNUSED, FIELD_UNUSED, FIELD_UNUSED, 0},
    [GLN_OP_MOE_PERMUTE_PLAN] = {"moe_permute_plan", FIELD_UNUSED, FIELD_UNUSED, FIELD_UNUSED, 0},
    [GLN_OP_MOE_PERMUTE] = {"moe_permute", FIELD_HIGH_PRECISION, FIELD_UNUSED, FIELD_HIGH_PRECISION, 0},
    [GLN_OP_MOE_PERMUTE_BACKWARD] = {"moe_permute_backward", FIELD_HIGH_PRECISION, FIELD_UNUSED,
                                     FIELD_HIGH_PRECISION, 0},
    [GLN_OP_MOE_UNPERMUTE] = {"moe_unpermute", FIELD_HIGH_PRECISION, FIELD_UNUSED, FIELD_HIGH_PRECISION, 0},
    [GLN_OP_MOE_UNPERMUTE_BACKWARD] = {"moe_unpermute_backward", FIELD_HIGH_PRECISION, FIELD_HIGH_PRECISION,
                                       FIELD_HIGH_PRECISION, 0},
    [GLN_OP_ACTIVATION_FORWARD] = {"activation_forward", FIELD_HIGH_PRECISION, FIELD_UNUSED,
                                   FIELD_HIGH_PRECISION, 0},
    [GLN_OP_ACTIVATION_BACKWARD] = {"activation_backward", FIELD_HIGH_PRECISION, FIELD_HIGH_PRECISION,
                                    FIELD_HIGH_PRECISION, 0},
    [GLN_OP_ACTIVATION_FORWARD_QUANTIZE] = {"activation_forward_quantize", FIELD_HIGH_PRECISION,
                                            FIELD_HIGH_PRECISION, FIELD_QUANTIZED, 0},
};

static const char *kind_text(field_kind_t k) {
    switch (k) {
    case FIELD_HIGH_PRECISION: return "a high-precision tensor (fp32, bf16 or fp16 with scaling none)";
    case FIELD_QUANTIZED: return "a quantized tensor (fp8_e4m3 or fp8_e5m2 with scaling tensor, mxfp8_1d, "
                                 "block_1d or block_2d)";
    default: return "a high-precision or a quantized operand";
    }
}

static gln_status_t check_field(const char *fn, const op_rule_t *r, const char *field, field_kind_t kind,
                                gln_dtype_t dtype, gln_scaling_mode_t scaling) {
    if (kind == FIELD_UNUSED) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_ARG(gln_dtype_size(dtype) != 0, "%s: query->%s_dtype %d is not a dtype (0..%d)", fn, field,
                    (int)dtype, GLN_DTYPE_COUNT_ - 1);
    GLN_REQUIRE_ARG(gln_scaling_mode_valid(scaling), "%s: query->%s_scaling %d is not a scaling mode (0..4)", fn,
                    field, (int)scaling);
    const int hp = gln_dtype_is_high_precision(dtype) && scaling == GLN_SCALING_NONE;
    const int quant = gln_dtype_is_fp8(dtype) && scaling != GLN_SCALING_NONE;
    const int ok = kind == FIELD_HIGH_PRECISION ? hp : kind == FIELD_QUANTIZED ? quant : hp || quant;
    GLN_REQUIRE_ARG(ok, "%s: query->%s_dtype %s with query->%s_scaling %s: op %s takes %s there", fn, field,
                    gln_dtype_name(dtype), field, gln_scaling_name(scaling), r->name, kind_text(kind));
    return GLN_STATUS_SUCCESS;
}

/* Per-tensor with per-tensor, MXFP8 with MXFP8, block with block, high precision with high
 * precision: the pairs gln_arg_operand_pair lets through to a backend. */
static int operands_meet(const gln_op_query_t *q) {
    const int qa = q->a_scaling != GLN_SCALING_NONE, qb = q->b_scaling != GLN_SCALING_NONE;
    if (qa != qb) return 0;
    if (!qa) return 1;
    const int fa = q->a_scaling == GLN_SCALING_BLOCK_2D ? GLN_SCALING_BLOCK_1D : (int)q->a_scaling;
    const int fb = q->b_scaling == GLN_SCALING_BLOCK_2D ? GLN_SCALING_BLOCK_1D : (int)q->b_scaling;
    return fa == fb;
}

/* Whether the backend's table has the op's slot (a NULL slot: the dispatcher reports
 * NOT_SUPPORTED). */
static int slot_present(const gln_backend_ops_t *ops, gln_op_t op) {
    switch (op) {
    case GLN_OP_QUANTIZE: return ops->quantize != NULL;
    case GLN_OP_DEQUANTIZE: return ops->dequantize != NULL;
    case GLN_OP_GROUPED_QUANTIZE: return ops->grouped_quantize != NULL;
    case GLN_OP_MXFP8_SWIZZLE: return ops->mxfp8_swizzle != NULL;
    case GLN_OP_GEMM: return ops->gemm != NULL;
    case GLN_OP_GROUPED_GEMM: return ops->grouped_gemm != NULL;
    case GLN_OP_GROUPED_DBIAS: return ops->grouped_dbias != NULL;
    case GLN_OP_AMAX: return ops->amax != NULL;
    case GLN_OP_CAST: return ops->cast != NULL;
    case GLN_OP_MOE_ROUTER_FORWARD: return ops->moe_router_forward != NULL;
    case GLN_OP_MOE_ROUTER_BACKWARD: return ops->moe_router_backward != NULL;
    case GLN_OP_MOE_PERMUTE_PLAN: return ops->moe_permute_plan != NULL;
    case GLN_OP_MOE_PERMUTE: return ops->moe_permute != NULL;
    case GLN_OP_MOE_PERMUTE_BACKWARD: return ops->moe_permute_backward != NULL;
    case GLN_OP_MOE_UNPERMUTE: return ops->moe_unpermute != NULL;
    case GLN_OP_MOE_UNPERMUTE_BACKWARD: return ops->moe_unpermute_backward != NULL;
    case GLN_OP_ACTIVATION_FORWARD: return ops->activation_forward != NULL;
    case GLN_OP_ACTIVATION_BACKWARD: return ops->activation_backward != NULL;
    case GLN_OP_ACTIVATION_FORWARD_QUANTIZE: /* a NULL slot: the funnel composes these two */
        return ops->activation_forward_quantize != NULL ||
               (ops->activation_forward != NULL && ops->grouped_quantize != NULL);
    default: return 0;
    }
}

gln_status_t gln_backend_supports(gln_backend_kind_t backend, const gln_op_query_t *query, int *supported) {
    static const char *fn = "gln_backend_supports";
    GLN_REQUIRE_ARG(backend == GLN_BACKEND_CPU || backend == GLN_BACKEND_CUDA,
                    "%s: backend %d is not a backend (0 = cpu, 1 = cuda)", fn, (int)backend);
    GLN_REQUIRE_NOT_NULL(fn, query);
    GLN_REQUIRE_NOT_NULL(fn, supported);
    GLN_REQUIRE_ARG(query->size == sizeof(gln_op_query_t),
                    "%s: query->size %zu is not a known version (expected %zu; start from GLN_OP_QUERY_INIT)", fn,
                    query->size, sizeof(gln_op_query_t));
    GLN_REQUIRE_ARG((int)query->op >= 0 && (int)query->op < GLN_OP_COUNT_, "%s: query->op %d is not an op (0..%d)", fn,
                    (int)query->op, GLN_OP_COUNT_ - 1);
    const op_rule_t *r = &op_rules[query->op];
    if (r->uses_layout)
        GLN_REQUIRE_ARG(query->layout == GLN_LAYOUT_TN || query->layout == GLN_LAYOUT_NN ||
                            query->layout == GLN_LAYOUT_NT,
                        "%s: query->layout %d is not a layout (0 = TN, 1 = NN, 2 = NT)", fn, (int)query->layout);
    GLN_TRY(check_field(fn, r, "a", r->a, query->a_dtype, query->a_scaling));
    GLN_TRY(check_field(fn, r, "b", r->b, query->b_dtype, query->b_scaling));
    GLN_TRY(check_field(fn, r, "out", r->out, query->out_dtype, query->out_scaling));

    const gln_backend_ops_t *ops = gln_backend_ops_for(backend);
    int yes = ops != NULL && slot_present(ops, query->op);
    if (yes && r->a == FIELD_OPERAND) yes = operands_meet(query);
    if (yes && ops->supports) yes = ops->supports(query);
    *supported = yes;
    return GLN_STATUS_SUCCESS;
}
