/* Top-k softmax router: forward (softmax, selection, renormalization) and its backward with the
 * selection held fixed.  Validate, then dispatch to the backend's slot (the CPU reference is
 * src/backend/cpu/cpu_moe.c; a backend without the slot reports GLN_STATUS_NOT_SUPPORTED, for
 * empty calls too).  The contents of `experts` are checked after the slot, on the host when it
 * reads the backend's memory (the CPU), else by the device kernels (moe_check.h). */
#include "backend/context.h"
#include "backend/ops.h"
#include "common/checked.h"
#include "common/error.h"
#include "moe/moe_check.h"

static gln_status_t router_check(const char *fn, gln_context_t *ctx, int64_t tokens,
                                 int32_t num_experts, int32_t k) {
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_REQUIRE_ARG(num_experts >= 1, "%s: num_experts %d must be >= 1", fn, (int)num_experts);
    GLN_REQUIRE_ARG(k >= 1 && k <= num_experts, "%s: k %d must be in [1, num_experts = %d]", fn,
                    (int)k, (int)num_experts);
    GLN_TRY(gln_check_dim(fn, "tokens", tokens));
    return gln_check_elems(fn, "logits [tokens, num_experts]", tokens, num_experts, NULL);
}

gln_status_t gln_moe_router_forward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                    const float *logits, int32_t *experts, float *gates) {
    static const char *fn = "gln_moe_router_forward";
    GLN_TRY(router_check(fn, ctx, tokens, num_experts, k));
    if (tokens > 0) {
        GLN_REQUIRE_NOT_NULL(fn, logits);
        GLN_REQUIRE_NOT_NULL(fn, experts);
        GLN_REQUIRE_NOT_NULL(fn, gates);
    }
    GLN_TRY(gln_op_require(ctx, fn, GLN_SLOT_MOE_ROUTER_FORWARD));
    if (tokens == 0) return GLN_STATUS_SUCCESS;
    return gln_op_moe_router_forward(ctx, fn, tokens, num_experts, k, logits, experts, gates);
}

gln_status_t gln_moe_router_backward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                     const float *logits, const int32_t *experts,
                                     const float *dgates, float *dlogits) {
    static const char *fn = "gln_moe_router_backward";
    GLN_TRY(router_check(fn, ctx, tokens, num_experts, k));
    if (tokens > 0) {
        GLN_REQUIRE_NOT_NULL(fn, logits);
        GLN_REQUIRE_NOT_NULL(fn, experts);
        GLN_REQUIRE_NOT_NULL(fn, dgates);
        GLN_REQUIRE_NOT_NULL(fn, dlogits);
    }
    GLN_TRY(gln_op_require(ctx, fn, GLN_SLOT_MOE_ROUTER_BACKWARD));
    if (tokens == 0) return GLN_STATUS_SUCCESS;
    for (int64_t i = 0; gln_moe_host_indices(ctx) && i < tokens * k; i++)
        GLN_REQUIRE_ARG(experts[i] >= 0 && experts[i] < num_experts,
                        "%s: experts[%lld] = %d must be in [0, %d)", fn, (long long)i,
                        (int)experts[i], (int)num_experts);
    return gln_op_moe_router_backward(ctx, fn, tokens, num_experts, k, logits, experts, dgates, dlogits);
}
