/* Sharded weight group: loading, shard access, master -> working refresh, full gathers, and
 * the materialized-memory counters. */
#include <string.h>

#include "backend/context.h"
#include "backend/ops.h"
#include "comm/comm.h"
#include "common/error.h"
#include "weights/sharded.h"

/* working = master rounded to the working dtype (local). */
static gln_status_t cast_working(gln_sharded_weights_t *sw, const char *fn) {
    gln_context_t *ctx = sw->ctx;
    size_t n = (size_t)sw->shard_len;
    if (sw->cfg.working_dtype == GLN_DTYPE_FP32)
        return gln_op_memcpy(ctx, sw->working, sw->master, n * sizeof(float),
                             GLN_COPY_BACKEND_TO_BACKEND);
    GLN_TRY(gln_op_require(ctx, fn, GLN_SLOT_CAST));
    /* One row of shard_len elements: the cast rounds to nearest even, element by element. */
    gln_tensor_t in = {0}, out = {0};
    in.dtype = GLN_DTYPE_FP32;
    in.rows = out.rows = 1;
    in.cols = out.cols = sw->shard_len;
    in.data = sw->master;
    out.dtype = sw->cfg.working_dtype;
    out.data = sw->working;
    return gln_op_cast(ctx, &in, &out);
}

/* With quantized_shard the refresh of the quantized shard follows, collective: this rank's
 * verdict so far (a prefetch outstanding, a failed cast, or a failure of load_full) joins its
 * agreement, so every rank fails together. */
static gln_status_t sync_working(gln_sharded_weights_t *sw, const char *fn, gln_status_t local) {
    if (local == GLN_STATUS_SUCCESS) local = gln_sharded_require_no_prefetch(fn, sw);
    if (local == GLN_STATUS_SUCCESS) local = cast_working(sw, fn);
    return gln_sharded_requantize_after(sw, fn, local, NULL);
}

gln_status_t gln_sharded_weights_sync_working(gln_sharded_weights_t *sw) {
    static const char *fn = "gln_sharded_weights_sync_working";
    GLN_REQUIRE_NOT_NULL(fn, sw);
    return sync_working(sw, fn, GLN_STATUS_SUCCESS);
}

/* The working shard for an optimizer that writes it itself (grouplin.h): without quantized_shard
 * nothing is cached from the working copy across materializations (each one gathers it, or
 * quantizes it into the FP8 shard, anew), so writing it directly is the same as sync_working;
 * only an outstanding prefetch still reads it.  With quantized_shard the writer refreshes the
 * quantized shard itself (gln_sharded_weights_requantize). */
gln_status_t gln_sharded_weights_working_shard(gln_sharded_weights_t *sw, void **working,
                                               gln_dtype_t *dtype, int64_t *len) {
    static const char *fn = "gln_sharded_weights_working_shard";
    if (working) *working = NULL;
    GLN_REQUIRE_NOT_NULL(fn, sw);
    GLN_REQUIRE_NOT_NULL(fn, working);
    GLN_TRY(gln_sharded_require_no_prefetch(fn, sw));
    *working = sw->working;
    if (dtype) *dtype = sw->cfg.working_dtype;
    if (len) *len = sw->shard_len;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t load_master(gln_sharded_weights_t *sw, const char *fn, const float *full) {
    GLN_REQUIRE_NOT_NULL(fn, full);
    GLN_TRY(gln_sharded_require_no_prefetch(fn, sw));
    gln_context_t *ctx = sw->ctx;
    /* Padding is rewritten as zero so the invariant survives whatever the shard held. */
    GLN_TRY(gln_ctx_zero(ctx, sw->master, (size_t)sw->shard_len * sizeof(float)));
    for (int32_t e = 0; e < sw->cfg.num_experts; e++) {
        int64_t lo, hi;
        gln_sharded_expert_segment(sw, e, &lo, &hi);
        if (lo >= hi) continue;
        const float *src = full + (int64_t)e * sw->expert_elems + (lo - (int64_t)e * sw->expert_stride);
        GLN_TRY(gln_op_memcpy(ctx, sw->master + (lo - sw->shard_offset), src,
                              (size_t)(hi - lo) * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_sharded_weights_load_full(gln_sharded_weights_t *sw, const float *full) {
    static const char *fn = "gln_sharded_weights_load_full";
    GLN_REQUIRE_NOT_NULL(fn, sw);
    return sync_working(sw, fn, load_master(sw, fn, full));
}

gln_status_t gln_sharded_weights_shard(gln_sharded_weights_t *sw, float **master, float **main_grad,
                                       int64_t *shard_len, int64_t *shard_offset) {
    GLN_REQUIRE_NOT_NULL("gln_sharded_weights_shard", sw);
    if (master) *master = sw->master;
    if (main_grad) *main_grad = sw->main_grad;
    if (shard_len) *shard_len = sw->shard_len;
    if (shard_offset) *shard_offset = sw->shard_offset;
    return GLN_STATUS_SUCCESS;
}

/* All-gather FP32 shards into a padded scratch buffer, then copy the real part to `full`.
 * `local` is the caller's verdict on its arguments; it and the scratch allocation are agreed
 * on before the gather, so a failure on one rank fails the call on every rank. */
static gln_status_t gather_fp32(gln_sharded_weights_t *sw, const char *fn, gln_call_t call,
                                gln_status_t local, const float *shard, float *full) {
    gln_context_t *ctx = sw->ctx;
    size_t padded = (size_t)sw->ranks * (size_t)sw->shard_len;
    float *tmp = NULL;
    gln_status_t st = local;
    if (st == GLN_STATUS_SUCCESS) st = gln_ctx_alloc(ctx, padded * sizeof(float), (void **)&tmp);
    gln_agree_t shape = {{call, sw->shard_len, 0, 0, 0, 0}, {"call", "shard_len", "", "", "", ""}};
    GLN_CHECK(st, fail, gln_sharded_agree(sw, fn, st, &shape));
    GLN_CHECK(st, fail, gln_comm_allgather_agreed(sw->comm, shard, tmp, (size_t)sw->shard_len, GLN_DTYPE_FP32));
    if (sw->expert_stride == sw->expert_elems) {
        GLN_CHECK(st, fail, gln_op_memcpy(ctx, full, tmp, (size_t)sw->total * sizeof(float),
                                          GLN_COPY_BACKEND_TO_HOST));
    } else { /* padded experts: the real rows of each */
        for (int32_t e = 0; e < sw->cfg.num_experts; e++)
            GLN_CHECK(st, fail, gln_op_memcpy(ctx, full + (size_t)e * (size_t)sw->expert_elems,
                                              tmp + (size_t)e * (size_t)sw->expert_stride,
                                              (size_t)sw->expert_elems * sizeof(float),
                                              GLN_COPY_BACKEND_TO_HOST));
    }
fail:
    gln_ctx_free(ctx, tmp);
    return st;
}

gln_status_t gln_sharded_weights_gather_master(gln_sharded_weights_t *sw, float *full) {
    static const char *fn = "gln_sharded_weights_gather_master";
    GLN_REQUIRE_NOT_NULL(fn, sw);
    gln_status_t local = full ? GLN_STATUS_SUCCESS
                              : gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: full must not be NULL", fn);
    return gather_fp32(sw, fn, GLN_CALL_GATHER_MASTER, local, sw->master, full);
}

static gln_status_t main_grad_local(const char *fn, const gln_sharded_weights_t *sw,
                                    const float *full) {
    GLN_REQUIRE_NOT_NULL(fn, full);
    GLN_REQUIRE(!sw->pending, GLN_STATUS_INVALID_STATE,
                "%s: a finalize is still in flight; call wait() first", fn);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_sharded_weights_gather_main_grad(gln_sharded_weights_t *sw, float *full) {
    static const char *fn = "gln_sharded_weights_gather_main_grad";
    GLN_REQUIRE_NOT_NULL(fn, sw);
    return gather_fp32(sw, fn, GLN_CALL_GATHER_MAIN_GRAD, main_grad_local(fn, sw, full),
                       sw->main_grad, full);
}

gln_status_t gln_sharded_weights_materialized_bytes(const gln_sharded_weights_t *sw, size_t *live,
                                                    size_t *peak) {
    GLN_REQUIRE_NOT_NULL("gln_sharded_weights_materialized_bytes", sw);
    if (live) *live = sw->live_bytes;
    if (peak) *peak = sw->peak_bytes;
    return GLN_STATUS_SUCCESS;
}

const gln_dist_weights_t *gln_sharded_weights_protocol(gln_sharded_weights_t *sw) {
    return sw ? &sw->protocol : NULL;
}

gln_status_t gln_sharded_weights_wait(gln_sharded_weights_t *sw) {
    GLN_REQUIRE_NOT_NULL("gln_sharded_weights_wait", sw);
    return gln_sharded_complete(sw);
}
