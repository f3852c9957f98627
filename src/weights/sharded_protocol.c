/* Sharded weight group: the gln_dist_weights_t hooks the layer calls.
 *
 * materialize: one all-gather of the working shards (or, forward with fp8_gather, of the FP8
 *              shards quantized with global per-expert scales; with quantized_shard, in both
 *              directions, of the stored FP8 shards, backward adding the columnwise copies by a
 *              transpose, or for MXFP8 gathering the stored columnwise shard instead) into a
 *              gather buffer; the N
 *              returned tensors point into it and release() hands it back to the group's free
 *              list, so steady-state steps allocate nothing.  A gathered group is live (counted)
 *              exactly from materialize (or prefetch) to release.
 * prefetch:    the same gather, started early (asynchronous start); the next materialize of
 *              that direction waits for it instead of gathering.
 * grad_buffer: one full-size FP32 buffer for all N experts (padded like the shards), kept
 *              across steps; the layer's wgrad GEMMs overwrite it.
 * finalize:    one FP32 sum reduce-scatter of that buffer into main_grad (overwrite) or into a
 *              scratch shard that is then added to main_grad on the backend (accumulate).  With
 *              async_finalize the reduce-scatter is started and wait() completes it in stream
 *              order (and adds).
 *
 * materialize, prefetch and finalize are collective: each first agrees (gln_sharded_agree) on
 * its local verdict (arguments, state, allocations) and on the call, then runs the collective
 * without a second agreement. */
#include <stdlib.h>
#include <string.h>

#include "backend/context.h"
#include "backend/ops.h"
#include "comm/comm.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "weights/sharded.h"

#define REQUIRE_IMPL(fn, impl) GLN_REQUIRE_ARG((impl) != NULL, "%s: impl must not be NULL", (fn))

static int hook_requires_grad(void *impl) {
    const gln_sharded_weights_t *sw = impl;
    return sw && sw->cfg.requires_grad;
}

/* ---- gather buffers: a free list of released buffers, and the live ones ------------------- */

static gln_status_t list_push(gln_sharded_live_t **list, int *count, int *cap, void *base,
                              size_t bytes) {
    if (*count == *cap) {
        int grown_cap = *cap ? 2 * *cap : 4;
        gln_sharded_live_t *grown = realloc(*list, (size_t)grown_cap * sizeof *grown);
        GLN_REQUIRE(grown != NULL, GLN_STATUS_OUT_OF_MEMORY, "materialize: out of host memory");
        *list = grown;
        *cap = grown_cap;
    }
    (*list)[(*count)++] = (gln_sharded_live_t){base, bytes};
    return GLN_STATUS_SUCCESS;
}

static gln_status_t buf_acquire(gln_sharded_weights_t *sw, size_t bytes, void **base) {
    for (int i = 0; i < sw->pool_count; i++) {
        if (sw->pool[i].bytes != bytes) continue;
        *base = sw->pool[i].base;
        sw->pool[i] = sw->pool[--sw->pool_count];
        return GLN_STATUS_SUCCESS;
    }
    return gln_ctx_alloc(sw->ctx, bytes, base);
}

/* Back to the free list (stream order makes the reuse safe: later work on the context's stream,
 * and a transport's start event, come after the GEMM that read it). */
static void buf_recycle(gln_sharded_weights_t *sw, void *base, size_t bytes) {
    if (!base) return;
    if (list_push(&sw->pool, &sw->pool_count, &sw->pool_cap, base, bytes) != GLN_STATUS_SUCCESS)
        gln_ctx_free(sw->ctx, base);
}

/* Off the live list and back to the free list (a consumed prefetch whose completion failed). */
static void untrack(gln_sharded_weights_t *sw, void *base) {
    for (int i = 0; i < sw->live_count; i++) {
        if (sw->live[i].base != base) continue;
        gln_sharded_live_t done = sw->live[i];
        sw->live_bytes -= done.bytes;
        sw->live[i] = sw->live[--sw->live_count];
        buf_recycle(sw, done.base, done.bytes);
        return;
    }
}

static gln_status_t track_live(gln_sharded_weights_t *sw, void *base, size_t bytes) {
    GLN_TRY(list_push(&sw->live, &sw->live_count, &sw->live_cap, base, bytes));
    sw->live_bytes += bytes;
    if (sw->live_bytes > sw->peak_bytes) sw->peak_bytes = sw->live_bytes;
    return GLN_STATUS_SUCCESS;
}

/* ---- materialize and prefetch ------------------------------------------------------------- */

enum { DIR_FORWARD = 0, DIR_BACKWARD = 1 };

/* FP8 is gathered forward with fp8_gather, and in both directions with quantized_shard. */
static int gathers_fp8(const gln_sharded_weights_t *sw, int dir) {
    return dir == DIR_FORWARD ? sw->cfg.fp8_gather : sw->cfg.quantized_shard;
}

/* 1 when the buffer carries the columnwise copies (backward, quantized shard: besides the
 * rowwise ones, or for MXFP8 alone). */
static int has_columnwise(const gln_sharded_weights_t *sw, int dir) {
    return dir == DIR_BACKWARD && sw->cfg.quantized_shard;
}

static size_t gather_bytes(const gln_sharded_weights_t *sw, int dir) {
    if (has_columnwise(sw, dir)) return gln_sharded_qshard_backward_bytes(sw);
    return gathers_fp8(sw, dir) ? gln_sharded_fp8_bytes(sw) : gln_sharded_full_bytes(sw);
}

/* One all-gather of n elements: synchronous when request is NULL (still stream-ordered on a
 * device), else started. */
static gln_status_t gather(gln_sharded_weights_t *sw, const void *send, void *recv, size_t n,
                           gln_dtype_t dt, void **request) {
    return request ? gln_comm_allgather_start_agreed(sw->comm, send, recv, n, dt, request)
                   : gln_comm_allgather_agreed(sw->comm, send, recv, n, dt);
}

/* Two gathers: the FP8 bytes (n0 elements of dt0) into buf, the scales (n1 of dt1) into
 * scales; a failed second one completes a started first (never left behind). */
static gln_status_t gather_two(gln_sharded_weights_t *sw, const void *data, gln_dtype_t dt0, size_t n0, char *buf,
                               const void *sc, gln_dtype_t dt1, size_t n1, char *scales, void **request) {
    GLN_TRY(gather(sw, data, buf, n0, dt0, request));
    gln_status_t st = gather(sw, sc, scales, n1, dt1, request ? request + 1 : NULL);
    if (st != GLN_STATUS_SUCCESS && request && request[0]) {
        gln_comm_wait(sw->comm, request[0]);
        request[0] = NULL;
    }
    return st;
}

/* MXFP8 scale grids per expert of a gathered buffer (rowwise, or the quantized shard's
 * columnwise in a backward one), and where the gathered compact codes lie behind them. */
static size_t mx_grid_bytes(const gln_sharded_weights_t *sw, int dir) {
    return has_columnwise(sw, dir) ? gln_sharded_mx_col_grid_bytes(sw) : gln_sharded_mx_grid_bytes(sw);
}

static char *mx_codes(const gln_sharded_weights_t *sw, int dir, char *buf) {
    return buf + gln_sharded_fp8_scales_offset(sw) + (size_t)sw->cfg.num_experts * mx_grid_bytes(sw, dir);
}

/* The gathers of a materialization (after the agreement): the working shards, or the FP8
 * shards (+ the MXFP8 block codes or the 128x128 tile grids, a second gather into the tail of
 * the buffer; a backward MXFP8 one of the quantized shard: the columnwise shard and codes). */
static gln_status_t gather_into(gln_sharded_weights_t *sw, int dir, char *buf, void **request) {
    size_t n = (size_t)sw->shard_len;
    if (!gathers_fp8(sw, dir))
        return gather(sw, sw->working, buf, n, sw->cfg.working_dtype, request);
    gln_dtype_t f8 = sw->cfg.fp8_quant.fp8_dtype;
    const int stored = sw->cfg.quantized_shard; /* the FP8 shard is current: no quantization */
    if (gln_sharded_fp8_2d(sw)) {
        if (!stored) GLN_TRY(gln_sharded_quantize_blocks(sw));
        return gather_two(sw, sw->fp8_shard, f8, n, buf, sw->fp8_sscale, GLN_DTYPE_FP32,
                          sw->sscale_bytes / sizeof(float), buf + gln_sharded_fp8_scales_offset(sw), request);
    }
    if (!gln_sharded_fp8_mx(sw)) { /* per-tensor */
        float *scales = (float *)(buf + gln_sharded_fp8_scales_offset(sw));
        GLN_TRY(stored ? gln_sharded_copy_scales(sw, scales) : gln_sharded_quantize_tensor(sw, scales, NULL));
        return gather(sw, sw->fp8_shard, buf, n, f8, request);
    }
    if (!stored) GLN_TRY(gln_sharded_quantize_blocks(sw));
    const int col = has_columnwise(sw, dir);
    /* the first n/32 codes of either grid: this shard's, compact and in order */
    return gather_two(sw, col ? sw->fp8_col : sw->fp8_shard, f8, n, buf, col ? sw->fp8_col_sscale : sw->fp8_sscale,
                      GLN_DTYPE_E8M0, n / 32, mx_codes(sw, dir, buf), request);
}

/* The MXFP8 scale grid of each expert from the gathered compact codes, in the layout
 * gln_quantize writes: rowwise K_out rows of K_in/32 codes, then zero rows to pad128(K_out);
 * columnwise (quantized shard, backward) ceil(K_out/32) rows of K_in codes, then zero rows to
 * pad4(ceil(K_out/32)).  Expert e's codes start at flat element e·expert_stride, i.e. code
 * e·expert_stride/32 in both orders (a rowwise code per 32 elements; a columnwise row of K_in
 * codes per 32 rows of K_in); the padding rows of the flat layout are never copied. */
static gln_status_t mx_grids(gln_sharded_weights_t *sw, int dir, char *buf) {
    gln_context_t *ctx = sw->ctx;
    const int64_t ko = sw->cfg.out_features, ki = sw->cfg.in_features;
    const size_t grid = mx_grid_bytes(sw, dir);
    const size_t used = has_columnwise(sw, dir) ? (size_t)((ko + 31) / 32 * ki) : (size_t)(ko * (ki / 32));
    char *grids = buf + gln_sharded_fp8_scales_offset(sw);
    const char *codes = mx_codes(sw, dir, buf);
    for (int32_t e = 0; e < sw->cfg.num_experts; e++) {
        char *g = grids + (size_t)e * grid;
        GLN_TRY(gln_op_memcpy(ctx, g, codes + (size_t)e * (size_t)(sw->expert_stride / 32), used,
                              GLN_COPY_BACKEND_TO_BACKEND));
        if (grid > used) GLN_TRY(gln_ctx_zero(ctx, g + used, grid - used));
    }
    return GLN_STATUS_SUCCESS;
}

/* After the gathers completed (in stream order): the columnwise copies of a backward
 * materialization of a per-tensor or 128x128 quantized shard; the MXFP8 scale grids. */
static gln_status_t finish_gather(gln_sharded_weights_t *sw, int dir, char *buf) {
    if (!gathers_fp8(sw, dir)) return GLN_STATUS_SUCCESS;
    if (gln_sharded_fp8_mx(sw)) return mx_grids(sw, dir, buf);
    return has_columnwise(sw, dir) ? gln_sharded_columnwise(sw, buf) : GLN_STATUS_SUCCESS;
}

/* The N weights in a gathered buffer: working dtype, or FP8 rowwise with per-tensor scales,
 * MXFP8 or 128x128 scale grids, and in a backward buffer of the quantized shard also the
 * columnwise copies (per-tensor: sharing the decode scale; MXFP8: the columnwise copy alone,
 * data and scale_inv NULL).  Experts lie expert_stride elements apart: the padding rows of the
 * flat layout follow an expert's K_out rows, never inside them. */
static void describe(const gln_sharded_weights_t *sw, int dir, char *buf, gln_tensor_t *weights) {
    int fp8 = gathers_fp8(sw, dir), mx = fp8 && gln_sharded_fp8_mx(sw);
    gln_dtype_t dt = fp8 ? sw->cfg.fp8_quant.fp8_dtype : sw->cfg.working_dtype;
    size_t expert_bytes = (size_t)sw->expert_stride * gln_dtype_size(dt);
    char *scales = fp8 ? buf + gln_sharded_fp8_scales_offset(sw) : NULL;
    for (int32_t i = 0; i < sw->cfg.num_experts; i++) {
        gln_tensor_t t = gln_tensor_make(dt, sw->cfg.out_features, sw->cfg.in_features,
                                         buf + (size_t)i * expert_bytes);
        if (mx && has_columnwise(sw, dir)) {
            t.scaling = GLN_SCALING_MXFP8_1D;
            t.col_data = t.data;
            t.col_scale_inv = scales + (size_t)i * gln_sharded_mx_col_grid_bytes(sw);
            t.data = NULL;
        } else if (fp8 && gln_sharded_fp8_2d(sw)) {
            /* expert i's tile rows start at tile row i·pad128(K_out)/128 of the gathered grids */
            size_t tile_rows = (size_t)(sw->expert_stride / sw->cfg.in_features / 128);
            t.scaling = GLN_SCALING_BLOCK_2D;
            t.scale_inv = (float *)scales + (size_t)i * tile_rows * (size_t)gln_sharded_2d_grid_cols(sw);
        } else if (fp8) {
            t.scaling = mx ? GLN_SCALING_MXFP8_1D : GLN_SCALING_TENSOR;
            t.scale_inv = mx ? (void *)(scales + (size_t)i * gln_sharded_mx_grid_bytes(sw))
                             : (void *)((float *)scales + i);
        }
        if (has_columnwise(sw, dir) && !mx) {
            size_t elems = (size_t)sw->expert_elems;
            t.col_data = buf + gln_sharded_col_offset(sw) + (size_t)i * elems;
            t.col_scale_inv = gln_sharded_fp8_2d(sw)
                                  ? (void *)((float *)(buf + gln_sharded_col_scales_offset(sw)) +
                                             (size_t)i * (size_t)gln_sharded_col_grid_elems(sw))
                                  : t.scale_inv;
        }
        weights[i] = t;
    }
}

static gln_status_t materialize(const char *fn, gln_call_t call, int dir, void *impl,
                                gln_tensor_t *weights) {
    REQUIRE_IMPL(fn, impl);
    gln_sharded_weights_t *sw = impl;
    size_t bytes = gather_bytes(sw, dir);
    int have = sw->prefetched[dir].base != NULL;
    void *full = NULL;
    gln_status_t st = weights ? GLN_STATUS_SUCCESS
                              : gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: weights must not be NULL", fn);
    if (st == GLN_STATUS_SUCCESS && !have) st = buf_acquire(sw, bytes, &full);
    /* "prefetched" is agreed on: a rank waiting for its prefetch while another gathers anew
     * would pair different collectives */
    gln_agree_t shape = {{call, sw->shard_len, sw->cfg.working_dtype, gathers_fp8(sw, dir), have, 0},
                         {"call", "shard_len", "working_dtype", "fp8_gather", "prefetched", ""}};
    GLN_CHECK(st, fail, gln_sharded_agree(sw, sw->call_fn ? sw->call_fn : fn, st, &shape));
    if (have) {
        void *req0 = sw->prefetched[dir].request[0], *req1 = sw->prefetched[dir].request[1];
        full = sw->prefetched[dir].base; /* already on the live list */
        memset(&sw->prefetched[dir], 0, sizeof sw->prefetched[dir]);
        /* stream order: what follows (the grids, the GEMMs) comes after the gathers */
        st = gln_comm_wait(sw->comm, req0);
        gln_status_t st1 = gln_comm_wait(sw->comm, req1);
        if (st == GLN_STATUS_SUCCESS) st = st1;
        if (st == GLN_STATUS_SUCCESS) st = finish_gather(sw, dir, full);
        if (st != GLN_STATUS_SUCCESS) {
            untrack(sw, full); /* the caller gets no weights to release */
            return st;
        }
        describe(sw, dir, full, weights);
        return GLN_STATUS_SUCCESS;
    }
    GLN_CHECK(st, fail, gather_into(sw, dir, full, NULL));
    GLN_CHECK(st, fail, finish_gather(sw, dir, full));
    GLN_CHECK(st, fail, track_live(sw, full, bytes));
    describe(sw, dir, full, weights);
    return GLN_STATUS_SUCCESS;
fail:
    buf_recycle(sw, full, bytes);
    return st;
}

static gln_status_t hook_materialize_forward(void *impl, gln_tensor_t *weights) {
    return materialize("gln_sharded_weights: materialize_forward", GLN_CALL_MATERIALIZE_FORWARD,
                       DIR_FORWARD, impl, weights);
}

static gln_status_t hook_materialize_backward(void *impl, gln_tensor_t *weights) {
    return materialize("gln_sharded_weights: materialize_backward", GLN_CALL_MATERIALIZE_BACKWARD,
                       DIR_BACKWARD, impl, weights);
}

static gln_status_t prefetch_local(const char *fn, gln_sharded_weights_t *sw, int dir, void **buf) {
    GLN_REQUIRE_ARG(dir == DIR_FORWARD || dir == DIR_BACKWARD,
                    "%s: direction %d must be 0 (forward) or 1 (backward)", fn, dir);
    GLN_REQUIRE(!sw->prefetched[dir].base, GLN_STATUS_INVALID_STATE,
                "%s: the %s weights are prefetched already (the next materialize consumes them)",
                fn, dir ? "backward" : "forward");
    return buf_acquire(sw, gather_bytes(sw, dir), buf);
}

static gln_status_t hook_prefetch(void *impl, int direction) {
    static const char *fn = "gln_sharded_weights: prefetch";
    REQUIRE_IMPL(fn, impl);
    gln_sharded_weights_t *sw = impl;
    int dir = direction == DIR_BACKWARD ? DIR_BACKWARD : DIR_FORWARD;
    void *buf = NULL, *req[2] = {NULL, NULL};
    size_t bytes = gather_bytes(sw, dir);
    gln_status_t st = prefetch_local(fn, sw, direction, &buf);
    gln_agree_t shape = {{GLN_CALL_PREFETCH, sw->shard_len, direction, sw->cfg.fp8_gather != 0,
                          sw->cfg.quantized_shard != 0, 0},
                         {"call", "shard_len", "direction", "fp8_gather", "quantized_shard", ""}};
    GLN_CHECK(st, fail, gln_sharded_agree(sw, fn, st, &shape));
    GLN_CHECK(st, fail, gather_into(sw, dir, buf, req));
    st = track_live(sw, buf, bytes);
    if (st != GLN_STATUS_SUCCESS) {
        gln_comm_wait(sw->comm, req[0]); /* never leave a started gather behind */
        gln_comm_wait(sw->comm, req[1]);
        goto fail;
    }
    sw->prefetched[dir].base = buf;
    sw->prefetched[dir].bytes = bytes;
    sw->prefetched[dir].request[0] = req[0];
    sw->prefetched[dir].request[1] = req[1];
    return GLN_STATUS_SUCCESS;
fail:
    buf_recycle(sw, buf, bytes);
    return st;
}

gln_status_t gln_sharded_weights_prefetch(gln_sharded_weights_t *sw, int direction) {
    GLN_REQUIRE_NOT_NULL("gln_sharded_weights_prefetch", sw);
    return hook_prefetch(sw, direction);
}

static gln_status_t hook_release(void *impl, gln_tensor_t *weights) {
    static const char *fn = "gln_sharded_weights: release";
    REQUIRE_IMPL(fn, impl);
    GLN_REQUIRE_NOT_NULL(fn, weights);
    gln_sharded_weights_t *sw = impl;
    /* the buffer starts with expert 0's copy: rowwise, or columnwise where the backward of an
     * MXFP8 quantized shard hands only that one */
    const void *base = weights[0].data ? weights[0].data : weights[0].col_data;
    for (int i = 0; i < sw->live_count; i++) {
        if (sw->live[i].base != base) continue;
        if (sw->live[i].base == sw->prefetched[0].base || sw->live[i].base == sw->prefetched[1].base)
            break; /* a prefetch nobody materialized yet is not the caller's to release */
        gln_sharded_live_t done = sw->live[i];
        sw->live_bytes -= done.bytes;
        sw->live[i] = sw->live[--sw->live_count];
        buf_recycle(sw, done.base, done.bytes);
        for (int32_t e = 0; e < sw->cfg.num_experts; e++) weights[e].data = weights[e].col_data = NULL;
        return GLN_STATUS_SUCCESS;
    }
    return gln_fail(GLN_STATUS_INVALID_ARGUMENT,
                    "%s: weights[0].data %p (col_data where data is NULL) is not a live "
                    "materialization of this group (released twice, or not from materialize)",
                    fn, base);
}

void gln_sharded_release_all(gln_sharded_weights_t *sw) {
    for (int i = 0; i < sw->live_count; i++) gln_ctx_free(sw->ctx, sw->live[i].base);
    sw->live_count = 0;
    sw->live_bytes = 0;
}

void gln_sharded_free_gathers(gln_sharded_weights_t *sw) {
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 2; k++)
            if (sw->prefetched[d].request[k]) gln_comm_wait(sw->comm, sw->prefetched[d].request[k]);
        memset(&sw->prefetched[d], 0, sizeof sw->prefetched[d]);
    }
    gln_sharded_release_all(sw); /* prefetched buffers are on the live list */
    for (int i = 0; i < sw->pool_count; i++) gln_ctx_free(sw->ctx, sw->pool[i].base);
    sw->pool_count = 0;
}

/* The full-size gradient buffer, allocated zeroed on first use (its padding stays zero). */
static gln_status_t ensure_grad_full(gln_sharded_weights_t *sw) {
    if (sw->grad_full) return GLN_STATUS_SUCCESS;
    size_t bytes = (size_t)sw->ranks * (size_t)sw->shard_len * sizeof(float);
    GLN_TRY(gln_ctx_alloc(sw->ctx, bytes, (void **)&sw->grad_full));
    return gln_ctx_zero(sw->ctx, sw->grad_full, bytes);
}

static gln_status_t require_grads(const char *fn, const gln_sharded_weights_t *sw) {
    GLN_REQUIRE(sw->cfg.requires_grad, GLN_STATUS_INVALID_STATE,
                "%s: the group was created with requires_grad = 0", fn);
    GLN_REQUIRE(!sw->pending, GLN_STATUS_INVALID_STATE,
                "%s: a finalize is still in flight; call wait() first", fn);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t hook_grad_buffer(void *impl, int32_t expert, float **buffer) {
    static const char *fn = "gln_sharded_weights: grad_buffer";
    REQUIRE_IMPL(fn, impl);
    GLN_REQUIRE_NOT_NULL(fn, buffer);
    gln_sharded_weights_t *sw = impl;
    *buffer = NULL;
    GLN_REQUIRE_ARG(expert >= 0 && expert < sw->cfg.num_experts, "%s: expert %d must be in [0, %d)",
                    fn, (int)expert, (int)sw->cfg.num_experts);
    GLN_TRY(require_grads(fn, sw));
    GLN_TRY(ensure_grad_full(sw));
    *buffer = sw->grad_full + (size_t)expert * (size_t)sw->expert_stride;
    return GLN_STATUS_SUCCESS;
}

/* main_grad += rs_buf after an accumulating reduce-scatter: the backend's add, in stream order. */
static gln_status_t add_into_main_grad(gln_sharded_weights_t *sw) {
    gln_context_t *ctx = sw->ctx;
    return gln_op_add_f32(ctx, "finalize_grads", sw->main_grad, sw->rs_buf, sw->shard_len);
}

gln_status_t gln_sharded_complete(gln_sharded_weights_t *sw) {
    if (!sw->pending) return GLN_STATUS_SUCCESS;
    void *req = sw->request;
    sw->request = NULL;
    sw->pending = 0; /* the request is consumed even if waiting fails */
    GLN_TRY(gln_comm_wait(sw->comm, req)); /* stream order: the add comes after it */
    return sw->pending_accumulate ? add_into_main_grad(sw) : GLN_STATUS_SUCCESS;
}

/* The local part of finalize: arguments, state and the buffers the reduce-scatter uses. */
static gln_status_t finalize_local(const char *fn, gln_sharded_weights_t *sw, int accumulate,
                                   int *pending) {
    GLN_REQUIRE_ARG(pending != NULL || !sw->cfg.async_finalize,
                    "%s: pending must not be NULL for a group with async_finalize", fn);
    if (pending) *pending = 0;
    GLN_TRY(require_grads(fn, sw));
    /* Every rank must enter the collective, even one that never asked for a grad buffer. */
    GLN_TRY(ensure_grad_full(sw));
    if (accumulate && !sw->rs_buf)
        GLN_TRY(gln_ctx_alloc(sw->ctx, (size_t)sw->shard_len * sizeof(float), (void **)&sw->rs_buf));
    return GLN_STATUS_SUCCESS;
}

static gln_status_t hook_finalize_grads(void *impl, int accumulate, int *pending) {
    static const char *fn = "gln_sharded_weights: finalize_grads";
    REQUIRE_IMPL(fn, impl);
    gln_sharded_weights_t *sw = impl;
    gln_agree_t shape = {{GLN_CALL_FINALIZE_GRADS, sw->shard_len, sw->cfg.async_finalize != 0, 0,
                          0, 0},
                         {"call", "shard_len", "async_finalize", "", "", ""}};
    GLN_TRY(gln_sharded_agree(sw, sw->call_fn ? sw->call_fn : fn,
                              finalize_local(fn, sw, accumulate, pending), &shape));
    float *target = accumulate ? sw->rs_buf : sw->main_grad;
    size_t n = (size_t)sw->shard_len;
    if (!sw->cfg.async_finalize) {
        GLN_TRY(gln_comm_reduce_scatter_agreed(sw->comm, sw->grad_full, target, n, GLN_DTYPE_FP32,
                                               GLN_REDUCE_SUM));
        return accumulate ? add_into_main_grad(sw) : GLN_STATUS_SUCCESS;
    }
    /* Async: pending even when the transport finished at once (self), so callers see one
     * behaviour; the accumulation happens in wait(). */
    GLN_TRY(gln_comm_reduce_scatter_start_agreed(sw->comm, sw->grad_full, target, n,
                                                 GLN_DTYPE_FP32, GLN_REDUCE_SUM, &sw->request));
    sw->pending = 1;
    sw->pending_accumulate = accumulate != 0;
    *pending = 1;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t hook_wait(void *impl) {
    REQUIRE_IMPL("gln_sharded_weights: wait", impl);
    return gln_sharded_complete(impl);
}

void gln_sharded_protocol_init(gln_sharded_weights_t *sw) {
    gln_dist_weights_t *p = &sw->protocol;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->impl = sw;
    p->num_experts = sw->cfg.num_experts;
    p->out_features = sw->cfg.out_features;
    p->in_features = sw->cfg.in_features;
    p->requires_grad = hook_requires_grad;
    p->materialize_forward = hook_materialize_forward;
    p->materialize_backward = hook_materialize_backward;
    p->release = hook_release;
    p->grad_buffer = hook_grad_buffer;
    p->finalize_grads = hook_finalize_grads;
    p->wait = hook_wait;
    p->prefetch = hook_prefetch;
}

gln_sharded_weights_t *gln_sharded_of(const gln_dist_weights_t *d) {
    return d && d->materialize_forward == hook_materialize_forward ? d->impl : NULL;
}
