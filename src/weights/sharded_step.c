/* The optimizer step on a sharded weight group's own shard (grouplin.h,
 * gln_sharded_weights_optimizer_step): one pass over the FP32 master shard that also writes the
 * working shard and, per expert, the amax of the working values it wrote; then the group's
 * quantized shard (when it keeps one) is rebuilt from the 2-byte working copy with those amaxes
 * (per-tensor; the block modes' scales are local to each block and come from the quantizer),
 * so no second pass over the 4-byte masters is needed for the scales.
 *
 * Segments: expert e's part of this rank's shard is [e·stride, (e+1)·stride) ∩ the shard, the
 * last expert's running to the shard's end.  That takes in the padding after each expert's
 * K_out·K_in elements (the 128x128 layout's 128-row and the MXFP8 quantized shard's 32-row
 * padding) and the tail padding of the last shard; both are zero in
 * the master and the working copy and stay zero under the step (zero gradient, zero moments:
 * m = v = 0, update = 0 / eps = 0), so they never raise an amax, and the segments can be one
 * contiguous run of bounds. */
#include <stdlib.h>

#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"
#include "numerics/optimizer_rule.h"
#include "weights/sharded.h"

/* bounds[e] = where expert e's part starts in the shard (clamped to [0, shard_len]), e < N;
 * bounds[N] = shard_len. */
static void expert_bounds(const gln_sharded_weights_t *sw, int64_t *bounds) {
    const int32_t ne = sw->cfg.num_experts;
    for (int32_t e = 0; e < ne; e++) {
        int64_t b = (int64_t)e * sw->expert_stride - sw->shard_offset;
        bounds[e] = b < 0 ? 0 : b > sw->shard_len ? sw->shard_len : b;
    }
    bounds[ne] = sw->shard_len;
}

static gln_status_t check_step(const char *fn, gln_sharded_weights_t *sw, const gln_optimizer_config_t *cfg,
                               int64_t step, const float *exp_avg, const float *exp_avg_sq,
                               gln_optimizer_params_t *p) {
    GLN_TRY(gln_optimizer_resolve(fn, cfg, step, p));
    GLN_TRY(gln_optimizer_check_moments(fn, p, exp_avg, exp_avg_sq));
    GLN_REQUIRE(sw->cfg.requires_grad, GLN_STATUS_INVALID_STATE,
                "%s: the group was created with requires_grad = 0 (no gradient to step with)", fn);
    return gln_sharded_require_no_prefetch(fn, sw);
}

/* This rank's part: the checks, the pending finalize and the one pass (with the amaxes). */
static gln_status_t step_local(const char *fn, gln_sharded_weights_t *sw, const gln_optimizer_config_t *cfg,
                               int64_t step, float *exp_avg, float *exp_avg_sq, float **amax) {
    gln_optimizer_params_t p;
    GLN_TRY(check_step(fn, sw, cfg, step, exp_avg, exp_avg_sq, &p));
    GLN_TRY(gln_sharded_complete(sw)); /* main_grad final, in stream order */
    gln_context_t *ctx = sw->ctx;
    const int32_t ne = sw->cfg.num_experts;
    int64_t *bounds = malloc((size_t)(ne + 1) * sizeof *bounds);
    GLN_REQUIRE(bounds != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %d expert bounds", fn, (int)ne + 1);
    expert_bounds(sw, bounds);
    gln_status_t st = gln_ctx_alloc(ctx, (size_t)ne * sizeof(float), (void **)amax);
    if (st == GLN_STATUS_SUCCESS)
        st = gln_op_optimizer_step(ctx, fn, &p, sw->master, sw->main_grad, exp_avg, exp_avg_sq, sw->shard_len,
                                   sw->working, sw->cfg.working_dtype, ne, bounds, 0, *amax);
    free(bounds);
    return st;
}

/* The local verdict joins the quantized shard's agreement, so a rank that refused its arguments
 * fails the other ranks there instead of leaving them in the amax all-reduce. */
gln_status_t gln_sharded_weights_optimizer_step(gln_sharded_weights_t *sw, const gln_optimizer_config_t *cfg,
                                                int64_t step, float *exp_avg, float *exp_avg_sq) {
    static const char *fn = "gln_sharded_weights_optimizer_step";
    GLN_REQUIRE_NOT_NULL(fn, sw);
    float *amax = NULL;
    gln_status_t st = step_local(fn, sw, cfg, step, exp_avg, exp_avg_sq, &amax);
    st = gln_sharded_requantize_after(sw, fn, st, st == GLN_STATUS_SUCCESS ? amax : NULL);
    gln_ctx_free(sw->ctx, amax); /* stream-ordered on a device: after the requantize's reads */
    return st;
}
