/* Expert activations: SwiGLU ([a | b] → silu(a)·b) and GELU (tanh approximation), forward and
 * backward.  Validate, then dispatch to the backend's slot (the CPU reference is
 * src/backend/cpu/cpu_moe.c; a backend without the slot reports GLN_STATUS_NOT_SUPPORTED,
 * for empty calls too). */
#include "backend/backend.h"
#include "common/context.h"
#include "common/error.h"
#include "moe/moe_check.h"

/* Shapes: SwiGLU in [R, 2H] / out [R, H]; GELU in [R, H] / out [R, H]. */
static gln_status_t act_check(const char *fn, gln_context_t *ctx, gln_activation_t act,
                              const gln_tensor_t *in, int64_t *width) {
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_REQUIRE_ARG(act == GLN_ACT_SWIGLU || act == GLN_ACT_GELU,
                    "%s: act %d is not an activation (0 = swiglu, 1 = gelu)", fn, (int)act);
    GLN_REQUIRE_NOT_NULL(fn, in);
    GLN_REQUIRE_ARG(act != GLN_ACT_SWIGLU || in->cols % 2 == 0,
                    "%s: in->cols %lld must be even for swiglu ([a | b] halves)", fn,
                    (long long)in->cols);
    GLN_TRY(gln_moe_check_tensor(fn, "in", in, in->rows, in->cols));
    *width = act == GLN_ACT_SWIGLU ? in->cols / 2 : in->cols;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_activation_forward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                    gln_tensor_t *out) {
    static const char *fn = "gln_activation_forward";
    int64_t h = 0;
    GLN_TRY(act_check(fn, ctx, act, in, &h));
    GLN_TRY(gln_moe_check_tensor(fn, "out", out, in->rows, h));
    if (!ctx->ops->activation_forward) return gln_backend_missing(ctx, fn, "activation_forward");
    if (in->rows == 0 || h == 0) return GLN_STATUS_SUCCESS;
    return ctx->ops->activation_forward(ctx, act, in, out);
}

gln_status_t gln_activation_backward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                     const gln_tensor_t *dout, gln_tensor_t *din) {
    static const char *fn = "gln_activation_backward";
    int64_t h = 0;
    GLN_TRY(act_check(fn, ctx, act, in, &h));
    GLN_TRY(gln_moe_check_tensor(fn, "dout", dout, in->rows, h));
    GLN_TRY(gln_moe_check_tensor(fn, "din", din, in->rows, in->cols));
    if (!ctx->ops->activation_backward) return gln_backend_missing(ctx, fn, "activation_backward");
    if (in->rows == 0 || in->cols == 0) return GLN_STATUS_SUCCESS;
    return ctx->ops->activation_backward(ctx, act, in, dout, din);
}
