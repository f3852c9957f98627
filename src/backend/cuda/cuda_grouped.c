/* CUDA grouped quantization: per-member quantization of a grouped tensor (per-member amax and
 * scales for TENSOR, per-member scale grids for the block modes; empty members allowed), by
 * looping over the members with the single-tensor kernels of cuda_quant.cu / cuda_block.cu on
 * the context's stream.  The bytes of each member are therefore exactly those of gln_quantize
 * on the member view, which is what the CPU backend produces too.
 *
 * Splits in device memory are copied to the host once per call (gln_cuda_host_splits: one
 * synchronizing copy) — the non-graph-safe fallback until a device-side grouped kernel that
 * reads the splits on the GPU exists. */
#include <stdlib.h>

#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "tensor/tensor.h"

gln_status_t gln_cuda_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                       const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    static const char *fn = "gln_grouped_quantize (cuda)";
    gln_status_t st = GLN_STATUS_SUCCESS;
    int64_t *splits = NULL, *out_splits = NULL;
    GLN_CHECK(gln_cuda_host_splits(ctx, fn, "in", in, &splits));
    /* Host splits were compared at the boundary; device splits only now. */
    if (in->splits_on_backend && out->splits != in->splits) {
        GLN_CHECK(gln_cuda_host_splits(ctx, fn, "out", out, &out_splits));
        for (int32_t i = 0; i < in->num; i++)
            GLN_CHECK_COND(out_splits[i] == splits[i], GLN_STATUS_INVALID_ARGUMENT,
                           "%s: out->splits[%d] %lld must equal in->splits[%d] %lld", fn, (int)i,
                           (long long)out_splits[i], (int)i, (long long)splits[i]);
    }
    gln_grouped_tensor_t gi = *in, go = *out;
    gi.splits = go.splits = splits;
    gi.splits_on_backend = go.splits_on_backend = 0;
    for (int32_t i = 0; i < in->num; i++) {
        gln_tensor_t mi, mo;
        GLN_CHECK(gln_grouped_member(&gi, i, &mi));
        GLN_CHECK(gln_grouped_member(&go, i, &mo));
        GLN_CHECK(gln_cuda_quantize(ctx, cfg, &mi, &mo));
    }
fail:
    free(out_splits);
    free(splits);
    return st;
}
