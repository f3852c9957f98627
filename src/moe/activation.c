/* Expert activations: SwiGLU ([a | b] → silu(a)·b) and GELU (tanh approximation), forward and
 * backward, and the forward with its output quantized in the same pass (the input of an FP8
 * FC2: gln_activation_forward_quantize, the backend's slot or the composition, backend/ops.h).
 * Validate, then dispatch to the backend's slot (the CPU reference is src/backend/cpu/cpu_moe.c;
 * a backend without the slot reports GLN_STATUS_NOT_SUPPORTED, for empty calls too). */
#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"
#include "moe/moe_check.h"
#include "quant/quant_check.h"
#include "tensor/tensor.h"

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
    GLN_TRY(gln_op_require(ctx, fn, GLN_SLOT_ACTIVATION_FORWARD));
    if (in->rows == 0 || h == 0) return GLN_STATUS_SUCCESS;
    return gln_op_activation_forward(ctx, fn, act, in, out);
}

gln_status_t gln_activation_backward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                     const gln_tensor_t *dout, gln_tensor_t *din) {
    static const char *fn = "gln_activation_backward";
    int64_t h = 0;
    GLN_TRY(act_check(fn, ctx, act, in, &h));
    GLN_TRY(gln_moe_check_tensor(fn, "dout", dout, in->rows, h));
    GLN_TRY(gln_moe_check_tensor(fn, "din", din, in->rows, in->cols));
    GLN_TRY(gln_op_require(ctx, fn, GLN_SLOT_ACTIVATION_BACKWARD));
    if (in->rows == 0 || in->cols == 0) return GLN_STATUS_SUCCESS;
    return gln_op_activation_backward(ctx, fn, act, in, dout, din);
}

/* The grouped input [rows, 2H] / [rows, H] and hp_dtype; *h = H. */
static gln_status_t act_quant_input(const char *fn, gln_activation_t act, gln_dtype_t hp_dtype,
                                    const gln_grouped_tensor_t *in, int64_t *h) {
    GLN_REQUIRE_ARG(act == GLN_ACT_SWIGLU || act == GLN_ACT_GELU,
                    "%s: act %d is not an activation (0 = swiglu, 1 = gelu)", fn, (int)act);
    GLN_REQUIRE_ARG(gln_dtype_is_high_precision(hp_dtype),
                    "%s: hp_dtype %s must be fp32, bf16 or fp16 (the dtype the activation's output is "
                    "rounded to before it is quantized)",
                    fn, gln_dtype_name(hp_dtype));
    GLN_TRY(gln_grouped_validate(fn, "in", in));
    GLN_TRY(gln_moe_check_tensor(fn, "in->packed", &in->packed, in->packed.rows, in->packed.cols));
    GLN_REQUIRE_ARG(act != GLN_ACT_SWIGLU || in->packed.cols % 2 == 0,
                    "%s: in->packed.cols %lld must be even for swiglu ([a | b] halves)", fn,
                    (long long)in->packed.cols);
    *h = act == GLN_ACT_SWIGLU ? in->packed.cols / 2 : in->packed.cols;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_activation_forward_quantize(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                             const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                             gln_grouped_tensor_t *out) {
    static const char *fn = "gln_activation_forward_quantize";
    int64_t h = 0;
    gln_quant_config_t c;
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_TRY(act_quant_input(fn, act, hp_dtype, in, &h));
    GLN_REQUIRE_NOT_NULL(fn, out);
    GLN_REQUIRE_ARG(out->packed.cols == h,
                    "%s: out->packed.cols %lld must be the activation's width %lld (in->packed.cols%s)", fn,
                    (long long)out->packed.cols, (long long)h, act == GLN_ACT_SWIGLU ? " / 2 for swiglu" : "");
    /* the rest is gln_grouped_quantize's contract on the activation's output [rows, H] */
    gln_grouped_tensor_t a = *in;
    a.packed = gln_tensor_make(hp_dtype, in->packed.rows, h, in->packed.data);
    GLN_TRY(gln_grouped_quantize_check(fn, cfg, &a, out, &c));
    if (in->splits_on_backend && gln_moe_host_indices(ctx)) { /* backend memory is the host's */
        GLN_TRY(gln_grouped_validate_splits(fn, "in", in));
        for (int32_t i = 0; i < in->num; i++)
            GLN_REQUIRE_ARG(out->splits[i] == in->splits[i],
                            "%s: out->splits[%d] %lld must equal in->splits[%d] %lld", fn, (int)i,
                            (long long)out->splits[i], (int)i, (long long)in->splits[i]);
    }
    /* the funnel reports a missing activation_forward or grouped_quantize slot under fn */
    return gln_op_activation_forward_quantize(ctx, act, hp_dtype, &c, in, out);
}
