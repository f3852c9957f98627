/* gln_grouped_linear_backward and gln_grouped_linear_saved_release.
 *
 * Order: validate → complete a finalize of this layer still in flight (distributed weights:
 * the layer keeps the pending flag finalize_grads reported and calls the group's wait() itself
 * before the next backward touches the group) → look up every wgrad output (grad_buffer()) →
 * only then mark the context done and write anything.  Every check that can fail runs before
 * the first write, so a rejected call writes neither dx nor dbias nor any gradient and leaves
 * the saved context usable for another attempt.  Then: quantize dy (rowwise iff dgrad,
 * columnwise iff wgrad) with dbias from the same read of the high-precision dy (quantized
 * recipes; bf16: a row-order sum), accumulated into the layer's bias gradients (always here,
 * also when the wgrad is delayed) → dgrad (plain weights: the set kept by forward; distributed:
 * materialize again, re-quantize columnwise when the copies are high precision, release right after) →
 * wgrad now, or queued with its operands for backward_dw → delayed-scaling update of the
 * backward slots.
 *
 * wgrad outputs: distributed → grad_buffer(i) (FP32, overwrite) then finalize_grads once with
 * accumulate = !(microbatch == FIRST) (when it reports pending, the caller must call the
 * group's wait() before reading main_grad; the layer's next backward does it itself); fused → main_grad (FP32) with accumulate =
 * !(microbatch == FIRST); otherwise accumulated (+=) into the layer's param-dtype buffers. */
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "layer/layer.h"
#include "weights/sharded.h"

static const char *FN = "gln_grouped_linear_backward";

/* dy quantized (when dgrad or wgrad wants it) and the bias gradients accumulated.  A quantized
 * recipe sums dy in the tiled order of quant/dbias_tiled.h, from the quantize's own read of dy
 * (gln_act_quantize_dbias; without a quantize, the same op sums alone); bf16 in row order
 * (grouped_dbias). */
static gln_status_t dy_quantize_and_bias(gln_grouped_linear_t *L, const gln_group_buffer_t *dy, int quantize,
                                         int rowwise, int columnwise, gln_group_buffer_t *dyq) {
    if (!L->cfg.bias) return quantize ? gln_act_quantize(L, GLN_ROLE_GRAD, dy, rowwise, columnwise, dyq)
                                      : GLN_STATUS_SUCCESS;
    gln_tensor_t *db = calloc((size_t)L->n, sizeof *db);
    GLN_REQUIRE(db != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    for (int32_t i = 0; i < L->n; i++) db[i] = gln_tensor_make(L->cfg.param_dtype, 1, L->kout, L->bgrads[i]);
    gln_status_t st;
    if (quantize) st = gln_act_quantize_dbias(L, dy, rowwise, columnwise, dyq, db, 1);
    else if (L->recipe.quantized) st = gln_op_grouped_quantize_dbias(L->ctx, NULL, &dy->g, NULL, db, 1);
    else st = gln_op_grouped_dbias(L->ctx, &dy->g, db, 1);
    free(db);
    return st;
}

static gln_status_t wgrad_outputs(gln_grouped_linear_t *L, const gln_grouped_linear_saved_t *s,
                                  gln_tensor_t *d, int *accumulate) {
    int first = s->microbatch == GLN_MICROBATCH_FIRST;
    for (int32_t i = 0; i < L->n; i++) {
        if (L->dist) {
            float *buf = NULL;
            gln_status_t st;
            GLN_DIST_HOOK(st, "grad_buffer", i, L->dist->grad_buffer(L->dist->impl, i, &buf));
            GLN_TRY(st);
            GLN_REQUIRE(buf != NULL, GLN_STATUS_INVALID_ARGUMENT,
                        "cfg->params.distributed->grad_buffer for expert %d returned a NULL buffer", (int)i);
            d[i] = gln_tensor_make(GLN_DTYPE_FP32, L->kout, L->kin, buf);
        } else if (L->cfg.fuse_wgrad_accumulation) {
            d[i] = gln_tensor_make(GLN_DTYPE_FP32, L->kout, L->kin, L->main_grads[i]);
        } else {
            d[i] = gln_tensor_make(L->cfg.param_dtype, L->kout, L->kin, L->wgrads[i]);
        }
    }
    *accumulate = L->dist ? 0 : L->cfg.fuse_wgrad_accumulation ? !first : 1;
    return GLN_STATUS_SUCCESS;
}

/* A private copy of the saved splits for a queued item. */
static gln_status_t splits_copy(gln_grouped_linear_t *L, const gln_grouped_linear_saved_t *s,
                                gln_wgrad_item_t *it) {
    size_t bytes = (size_t)L->n * sizeof(int64_t);
    if (s->splits_on_backend) {
        GLN_TRY(gln_ctx_alloc(L->ctx, bytes, (void **)&it->splits_dev));
        return gln_op_memcpy(L->ctx, it->splits_dev, s->splits_dev, bytes,
                             GLN_COPY_BACKEND_TO_BACKEND);
    }
    it->splits_host = malloc(bytes);
    GLN_REQUIRE(it->splits_host != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    memcpy(it->splits_host, s->splits_host, bytes);
    return GLN_STATUS_SUCCESS;
}

/* Queue the wgrad: the item takes the operands (x from the saved context or its re-quantized
 * copy, dy's columnwise copy, or a copy of the high-precision dy — the caller's dy need not
 * outlive this call). */
static gln_status_t wgrad_enqueue(gln_grouped_linear_t *L, gln_grouped_linear_saved_t *s,
                                  gln_group_buffer_t *x, const gln_group_buffer_t *dyw,
                                  gln_group_buffer_t *dyq, const gln_tensor_t *d, int accumulate) {
    gln_status_t st;
    gln_wgrad_item_t *it = calloc(1, sizeof *it);
    GLN_REQUIRE(it != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    it->d = malloc((size_t)L->n * sizeof *it->d);
    GLN_CHECK_COND(st, fail, it->d != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    memcpy(it->d, d, (size_t)L->n * sizeof *d);
    it->accumulate = accumulate;
    GLN_CHECK(st, fail, splits_copy(L, s, it));
    const int64_t *splits = s->splits_on_backend ? it->splits_dev : it->splits_host;
    if (L->recipe.quantized) {
        gln_group_buffer_drop_rowwise(L->ctx, dyq);
        it->dy = *dyq;
        memset(dyq, 0, sizeof *dyq);
    } else {
        const gln_tensor_t *t = &dyw->g.packed;
        GLN_CHECK(st, fail, gln_group_buffer_alloc_high_precision(L->ctx, t->dtype, t->rows, t->cols, L->n, splits,
                                                                  s->splits_on_backend, &it->dy));
        size_t bytes;
        GLN_CHECK(st, fail,
                  gln_shape_bytes(FN, "the queued dy", t->rows, t->cols, gln_dtype_size(t->dtype), &bytes));
        if (bytes)
            GLN_CHECK(st, fail, gln_op_memcpy(L->ctx, it->dy.g.packed.data, t->data, bytes,
                                              GLN_COPY_BACKEND_TO_BACKEND));
    }
    it->x = *x;
    memset(x, 0, sizeof *x);
    it->x.g.splits = splits;
    it->dy.g.splits = splits;
    gln_wgrad_queue_push(L, it);
    return GLN_STATUS_SUCCESS;
fail:
    gln_wgrad_item_free(L->ctx, it);
    return st;
}

static gln_status_t wgrad_run(gln_grouped_linear_t *L, gln_grouped_linear_saved_t *s,
                              const gln_group_buffer_t *dyw, gln_group_buffer_t *dyq, gln_tensor_t *d,
                              int accumulate) {
    gln_status_t st;
    gln_context_t *ctx = L->ctx;
    gln_group_buffer_t xq = {0};
    /* save_original_input: quantize the saved input columnwise now (deterministic recipes only,
     * so this reproduces the forward's quantization exactly). */
    if (s->x_is_high_precision && L->recipe.quantized)
        GLN_CHECK(st, fail, gln_act_quantize(L, GLN_ROLE_INPUT, &s->x, 0, 1, &xq));
    gln_group_buffer_t *x = xq.g.num ? &xq : &s->x;
    const gln_group_buffer_t *dy = L->recipe.quantized ? dyq : dyw;
    if (L->cfg.delay_wgrad_compute) {
        GLN_CHECK(st, fail, wgrad_enqueue(L, s, x, dyw, dyq, d, accumulate));
    } else {
        GLN_CHECK(st, fail, gln_stage_wgrad(L, x, dy, d, accumulate));
        if (L->dist) {
            int pending = 0;
            GLN_DIST_HOOK(st, "finalize_grads", -1,
                          L->dist->finalize_grads(L->dist->impl, s->microbatch != GLN_MICROBATCH_FIRST, &pending));
            if (st != GLN_STATUS_SUCCESS) goto fail;
            L->dist_pending = pending != 0;
        }
    }
    st = GLN_STATUS_SUCCESS;
fail:
    gln_group_buffer_free(ctx, &xq);
    return st;
}

/* Distributed weights: a finalize this layer started asynchronously is completed before the
 * next backward uses the group (its grad buffers are still being reduced until then).  The
 * pending flag is consumed even when wait() fails, like the group's own request. */
static gln_status_t complete_pending_finalize(gln_grouped_linear_t *L) {
    if (!L->dist || !L->dist_pending) return GLN_STATUS_SUCCESS;
    L->dist_pending = 0;
    gln_status_t st;
    GLN_DIST_HOOK(st, "wait", -1, L->dist->wait(L->dist->impl));
    return st;
}


static gln_status_t backward_impl(gln_grouped_linear_saved_t *saved, const gln_tensor_t *dy,
                                  gln_tensor_t *dx) {
    GLN_REQUIRE_NOT_NULL(FN, saved);
    GLN_TRY(gln_validate_backward(saved, dy, dx));
    gln_grouped_linear_saved_t *s = saved;
    gln_grouped_linear_t *L = s->layer;
    gln_context_t *ctx = L->ctx;
    gln_status_t st;
    gln_group_buffer_t dyw = {0}, dyq = {0}, dxw = {0};
    void *dxbuf = NULL;
    int quant = L->recipe.quantized, do_dgrad = dx != NULL, do_wgrad = s->need_wgrad;
    const int64_t *splits = gln_saved_splits(s);
    gln_tensor_t *wd = NULL;
    gln_materialized_weights_t dmw = {0}; /* distributed: the weights re-materialized for dgrad */
    int accumulate = 0;

    /* Everything that can refuse the call, before the first write (a failure here leaves dx,
     * the gradients and the saved context untouched). */
    GLN_TRY(gln_dist_agree_call(L, FN, GLN_CALL_LAYER_BACKWARD, do_dgrad, do_wgrad,
                                do_dgrad + do_wgrad));
    /* Each step's failure is reported as "gln_grouped_linear_backward: <step>: <detail>". */
    GLN_STEP(st, fail, FN, "completing the previous finalize_grads", complete_pending_finalize(L));
    if (do_wgrad) {
        wd = calloc((size_t)L->n, sizeof *wd);
        GLN_REQUIRE(wd != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
        GLN_STEP(st, fail, FN, "looking up the wgrad outputs", wgrad_outputs(L, s, wd, &accumulate));
    }
    if (do_dgrad && L->dist)
        GLN_STEP(st, fail, FN, "materializing the weights for dgrad",
                           gln_materialize(L, GLN_MATERIALIZE_STAGE_BACKWARD, s->microbatch, 0, 1, s->wscales, &dmw));
    s->done = 1; /* from here on gradients may be partly written: no second attempt */

    GLN_STEP(st, fail, FN, "grouping dy",
             gln_group_buffer_wrap(dy, L->n, splits, s->splits_on_backend, &dyw));
    GLN_STEP(st, fail, FN, "quantizing dy and the bias gradients",
             dy_quantize_and_bias(L, &dyw, quant && (do_dgrad || do_wgrad), do_dgrad, do_wgrad, &dyq));
    if (do_dgrad) {
        gln_tensor_t dxd = *dx;
        if (!dxd.data) {
            GLN_STEP(st, fail, FN, "allocating dx", gln_output_alloc(ctx, &dxd, &dxbuf));
            dxd.data = dxbuf;
        }
        GLN_STEP(st, fail, FN, "grouping dx",
                 gln_group_buffer_wrap(&dxd, L->n, splits, s->splits_on_backend, &dxw));
        GLN_STEP(st, fail, FN, "dgrad GEMM into dx",
                           gln_stage_dgrad(L, L->dist ? dmw.w : s->mw.w, quant ? &dyq : &dyw, &dxw));
        if (L->dist) GLN_STEP(st, fail, FN, "releasing the dgrad weights", gln_materialize_release(L, &dmw));
    }
    if (s->have_mw) {
        s->have_mw = 0;
        GLN_STEP(st, fail, FN, "releasing the forward's weights", gln_materialize_release(L, &s->mw));
    }
    if (do_wgrad) GLN_STEP(st, fail, FN, "wgrad", wgrad_run(L, s, &dyw, &dyq, wd, accumulate));
    if (L->recipe.delayed)
        GLN_STEP(st, fail, FN, "updating the delayed scales",
                           gln_fp8_state_update(ctx, &L->fp8_bwd, L->cfg.margin, L->cfg.amax_algo));
    if (dxbuf) {
        s->owned_dx = dxbuf;
        dx->data = dxbuf;
        dxbuf = NULL;
    }
fail:
    if (dmw.w) {
        gln_status_t rs = gln_materialize_release(L, &dmw);
        if (st == GLN_STATUS_SUCCESS) st = rs;
    }
    free(wd);
    gln_ctx_free(ctx, dxbuf);
    gln_group_buffer_free(ctx, &dyw);
    gln_group_buffer_free(ctx, &dyq);
    gln_group_buffer_free(ctx, &dxw);
    return st;
}

/* Over a sharded group the call fails on every rank when it fails on one (docs/distributed.md). */
gln_status_t gln_grouped_linear_backward(gln_grouped_linear_saved_t *saved, const gln_tensor_t *dy,
                                         gln_tensor_t *dx) {
    gln_sharded_weights_t *sw = saved ? gln_sharded_of(saved->layer->dist) : NULL;
    gln_sharded_call_begin(sw, FN);
    return gln_sharded_call_end(sw, backward_impl(saved, dy, dx));
}

gln_status_t gln_grouped_linear_saved_release(gln_grouped_linear_saved_t *saved) {
    if (!saved) return GLN_STATUS_SUCCESS;
    saved->layer->live_saved--;
    gln_saved_free(saved);
    return GLN_STATUS_SUCCESS;
}
