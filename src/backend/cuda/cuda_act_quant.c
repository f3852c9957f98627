/* CUDA activation + grouped quantize in one pass (backend slot activation_forward_quantize).
 *
 * Fused: the quantize kernels compute the activation while they load their input (cuda_act.cuh,
 * the same math as the activation kernel, rounded to bf16 as that kernel stores it), so the
 * activation's output is never written and read back:
 *   TENSOR current   amax pass and cast pass each apply the activation on load (two reads of
 *                    the activation's input, no write of its output);
 *   TENSOR delayed   one cast + amax pass;
 *   MXFP8_1D         one pass;
 *   BLOCK_1D / 2D    one pass.
 * The bytes are those of activation_forward into a bf16 tensor followed by grouped_quantize, for
 * the load is the only thing that changes.  The fused path takes what is simple and fast: input
 * and hp_dtype bf16, H % 8 == 0 (16-byte loads of both SwiGLU halves), a 16-byte aligned input,
 * and for TENSOR amax_nan_propagate = 0 (its NaN rule re-reads the quantized input by index).
 * Exactly what the fused kernels cannot take runs the composition
 * (gln_op_activation_forward_quantize_composed), which gives the same bytes by definition. */
#include <stdint.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/ops.h"
#include "common/error.h"

/* Whether the fused kernels take this call (see the file comment). */
static int fusable(gln_activation_t act, gln_dtype_t hp_dtype, const gln_quant_config_t *cfg,
                   const gln_grouped_tensor_t *in) {
    const int64_t h = act == GLN_ACT_SWIGLU ? in->packed.cols / 2 : in->packed.cols;
    if (in->packed.dtype != GLN_DTYPE_BF16 || hp_dtype != GLN_DTYPE_BF16) return 0;
    if (h <= 0 || h % 8 != 0 || ((uintptr_t)in->packed.data & 15u) != 0) return 0;
    return !(cfg->mode == GLN_SCALING_TENSOR && cfg->amax_nan_propagate);
}

gln_status_t gln_cuda_activation_forward_quantize(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                                  const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                                  gln_grouped_tensor_t *out) {
    static const char *fn = "gln_activation_forward_quantize (cuda)";
    if (!fusable(act, hp_dtype, cfg, in))
        return gln_op_activation_forward_quantize_composed(ctx, act, hp_dtype, cfg, in, out);
    if (in->splits_on_backend && out->splits != in->splits)
        GLN_TRY(gln_cuda_check_out_splits(ctx, in->num, in->splits, out->splits, fn));
    /* The quantizer's view of the activation's output: bf16 [rows, H], in's members; its data is
     * the activation's input (ld elements per row).  As in gln_cuda_grouped_quantize, the plan's
     * rows are clamped to out's and the launchers get the unclamped view. */
    const int64_t ld = in->packed.cols, h = act == GLN_ACT_SWIGLU ? ld / 2 : ld;
    gln_grouped_tensor_t v = *in;
    v.packed = gln_tensor_make(GLN_DTYPE_BF16, in->packed.rows, h, in->packed.data);
    gln_grouped_tensor_t g = v;
    if (out->packed.rows < g.packed.rows) g.packed.rows = out->packed.rows;
    const int members = cfg->mode == GLN_SCALING_TENSOR || cfg->mode == GLN_SCALING_MXFP8_1D;
    gln_cuda_plan_t plan; /* gln_cuda_quantize_members_act computes a deferred plan in its setup kernel */
    GLN_TRY(members ? gln_cuda_plan_defer(ctx, &g, cfg->mode, &plan, fn)
                    : gln_cuda_plan_make(ctx, &g, cfg->mode, &plan, fn));
    gln_status_t st;
    if (members)
        st = gln_cuda_quantize_members_act(ctx, cfg, act, ld, &v.packed, &out->packed, in->num, &plan, fn);
    else
        st = gln_cuda_grouped_quantize_block_act(ctx, cfg, act, ld, &v, out, &plan, fn);
    gln_cuda_plan_free(ctx, &plan);
    return st;
}
