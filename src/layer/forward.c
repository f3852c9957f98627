/* gln_grouped_linear_forward and the saved context it creates.
 *
 * Order: validate everything → allocate the saved context and y (when requested) → weights from
 * the materialization stage → quantize x (rowwise for fprop, plus the columnwise copy only when
 * the wgrad will need it) → fprop → weights released (or kept by the saved context for dgrad)
 * → wgrad operand saved → delayed-scaling update of the forward slots (training forwards only:
 * an inference forward, saved == NULL, records its amaxes into history row 0 like any
 * quantization but neither rolls the window nor changes a scale — TE updates the forward slots
 * at autocast exit only when gradients are enabled, so the recorded amaxes enter the next
 * training forward's update, as in TE).
 *
 * With args->x_quantized (prequant.c) the quantize step is skipped: fprop reads the caller's
 * rowwise copy and the wgrad operand is a view of the caller's columnwise copy.
 *
 * What the saved context owns: the wgrad operand (the quantized columnwise copy of x with its
 * rowwise half freed, or a copy of the high-precision x for recipe NONE / save_original_input;
 * the caller may reuse x as soon as forward returns — except a caller-quantized input, whose
 * columnwise copy is only referenced and must live until backward), a reference to the cached (or a cast)
 * weight set for dgrad (plain weights; caller parameters are referenced, not copied, and must
 * not change until backward, as with autograd), a copy of the splits, library-allocated y/dx.
 * Distributed weights keep nothing: backward materializes them again. */
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "layer/layer.h"
#include "weights/sharded.h"

static const char *FN = "gln_grouped_linear_forward";

const int64_t *gln_saved_splits(const gln_grouped_linear_saved_t *s) {
    return s->splits_on_backend ? s->splits_dev : s->splits_host;
}

static int weights_need_grad(const gln_grouped_linear_t *L) {
    if (L->dist) return L->dist->requires_grad(L->dist->impl) != 0;
    return L->cfg.weights_require_grad != 0;
}

static gln_status_t saved_create(gln_grouped_linear_t *L, const gln_grouped_linear_forward_args_t *a,
                                 gln_grouped_linear_saved_t **out) {
    gln_grouped_linear_saved_t *s = calloc(1, sizeof *s);
    GLN_REQUIRE(s != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    *out = s;
    s->layer = L;
    s->microbatch = a->microbatch;
    s->rows = a->x_quantized ? a->x_quantized->packed.rows : a->x->rows;
    s->splits_on_backend = a->splits_on_backend;
    size_t bytes = (size_t)L->n * sizeof(int64_t);
    if (a->splits_on_backend) {
        GLN_TRY(gln_ctx_alloc(L->ctx, bytes, (void **)&s->splits_dev));
        return gln_op_memcpy(L->ctx, s->splits_dev, a->m_splits, bytes,
                             GLN_COPY_BACKEND_TO_BACKEND);
    }
    s->splits_host = malloc(bytes);
    GLN_REQUIRE(s->splits_host != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    memcpy(s->splits_host, a->m_splits, bytes);
    return GLN_STATUS_SUCCESS;
}

/* Free everything a saved context owns (used by saved_release and by failed forwards). */
void gln_saved_free(gln_grouped_linear_saved_t *s) {
    if (!s) return;
    gln_grouped_linear_t *L = s->layer;
    gln_group_buffer_free(L->ctx, &s->x);
    if (s->have_mw) gln_materialize_release(L, &s->mw);
    gln_ctx_free(L->ctx, s->splits_dev);
    free(s->splits_host);
    gln_ctx_free(L->ctx, s->wscales);
    gln_ctx_free(L->ctx, s->owned_y);
    gln_ctx_free(L->ctx, s->owned_dx);
    free(s);
}

/* Delayed scaling with distributed weights: the weight scales this forward quantizes with, so
 * backward re-quantizes the re-materialized weights exactly as the forward did (the forward
 * slots are updated at the end of this forward, before backward).  A backend array gathered in
 * stream order, before the update. */
static gln_status_t save_weight_scales(gln_grouped_linear_t *L, gln_grouped_linear_saved_t *s) {
    GLN_TRY(gln_ctx_alloc(L->ctx, (size_t)L->n * sizeof(float), (void **)&s->wscales));
    return gln_fp8_state_stage(L->ctx, &L->fp8_fwd, 1, 3, L->n, s->wscales, NULL);
}

/* Bias tensors [1, K_out] in the activation dtype (cast from the param dtype when needed).
 * An FP8 recipe with FP32 activations adds a bf16 bias, as TE does (its FP8 GEMM takes a
 * 16-bit bias): the bias is rounded to bf16 (RNE) and widened
 * back to FP32 exactly, so the FP32 add sees the bf16 value. */
static gln_status_t bias_list(gln_grouped_linear_t *L, gln_weight_set_t *b) {
    void *const *src = L->biases;
    gln_dtype_t act = L->cfg.activation_dtype, pd = L->cfg.param_dtype;
    int via_bf16 = L->recipe.quantized && act == GLN_DTYPE_FP32;
    GLN_TRY(gln_weight_set_wrap(L->n, pd, 1, L->kout, src, b));
    if (pd == act && !via_bf16) return GLN_STATUS_SUCCESS;
    gln_weight_set_t params = *b, mid = {0};
    gln_status_t st = gln_weight_set_alloc_high_precision(L->ctx, act, L->n, 1, L->kout, b);
    if (st == GLN_STATUS_SUCCESS && via_bf16 && pd != GLN_DTYPE_BF16)
        st = gln_weight_set_alloc_high_precision(L->ctx, GLN_DTYPE_BF16, L->n, 1, L->kout, &mid);
    for (int32_t i = 0; st == GLN_STATUS_SUCCESS && i < L->n; i++) {
        if (mid.t) {
            st = gln_op_cast(L->ctx, &params.t[i], &mid.t[i]);
            if (st == GLN_STATUS_SUCCESS) st = gln_op_cast(L->ctx, &mid.t[i], &b->t[i]);
        } else {
            st = gln_op_cast(L->ctx, &params.t[i], &b->t[i]);
        }
    }
    gln_weight_set_free(L->ctx, &mid);
    gln_weight_set_free(L->ctx, &params);
    if (st != GLN_STATUS_SUCCESS) gln_weight_set_free(L->ctx, b);
    return st;
}

/* The wgrad operand kept by the saved context.  A caller-quantized input (prequant: xq views
 * the caller's buffers, owning none) is kept by reference: a view of its columnwise copy. */
static gln_status_t save_input(gln_grouped_linear_t *L, gln_grouped_linear_saved_t *s,
                               const gln_group_buffer_t *xw, gln_group_buffer_t *xq, int prequant) {
    if (prequant) {
        s->x = *xq;
        s->x.g.packed.data = NULL;
        s->x.g.packed.scale_inv = NULL;
        memset(xq, 0, sizeof *xq);
    } else if (L->recipe.quantized && !L->cfg.save_original_input) {
        gln_group_buffer_drop_rowwise(L->ctx, xq);
        s->x = *xq;
        memset(xq, 0, sizeof *xq);
    } else {
        const gln_tensor_t *x = &xw->g.packed;
        GLN_TRY(gln_group_buffer_alloc_high_precision(L->ctx, x->dtype, x->rows, x->cols, L->n,
                                                      gln_saved_splits(s), s->splits_on_backend, &s->x));
        size_t bytes;
        GLN_TRY(gln_shape_bytes(FN, "the saved input", x->rows, x->cols, gln_dtype_size(x->dtype), &bytes));
        if (bytes)
            GLN_TRY(gln_op_memcpy(L->ctx, s->x.g.packed.data, x->data, bytes,
                                  GLN_COPY_BACKEND_TO_BACKEND));
        s->x_is_high_precision = 1;
    }
    s->x.g.splits = gln_saved_splits(s);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t forward_impl(gln_grouped_linear_t *layer,
                                 const gln_grouped_linear_forward_args_t *args,
                                 gln_grouped_linear_saved_t **saved) {
    if (saved) *saved = NULL; /* a failed forward hands out no context, as create does */
    GLN_REQUIRE_NOT_NULL(FN, layer);
    GLN_REQUIRE_NOT_NULL(FN, args);
    /* Exactly the sizes of known versions: version 1 (no x_quantized) and the current one; the
     * fields a version lacks keep their defaults. */
    const size_t v1 = GLN_GROUPED_LINEAR_FORWARD_ARGS_V1_SIZE;
    GLN_REQUIRE_ARG(args->size == v1 || args->size == sizeof *args,
                    "%s: args->size %zu is not a known version (%zu or %zu; start from "
                    "GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT)",
                    FN, args->size, v1, sizeof *args);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    memcpy(&a, args, args->size);
    a.size = sizeof a;
    int need_wgrad = saved && weights_need_grad(layer);
    GLN_TRY(gln_validate_forward(layer, &a, need_wgrad));
    GLN_TRY(gln_dist_agree_call(layer, FN, GLN_CALL_LAYER_FORWARD, 0, 0, 1));

    gln_grouped_linear_t *L = layer;
    gln_context_t *ctx = L->ctx;
    gln_status_t st = GLN_STATUS_SUCCESS;
    gln_grouped_linear_saved_t *s = NULL;
    gln_group_buffer_t xw = {0}, xq = {0}, yw = {0};
    gln_materialized_weights_t mw = {0};
    gln_weight_set_t bias = {0};
    void *ybuf = NULL;
    int quant = L->recipe.quantized;
    int prequant = a.x_quantized != NULL; /* xq views the caller's quantized input */
    int need_dgrad = saved && a.input_requires_grad;
    int keep_xcol = need_wgrad && quant && !L->cfg.save_original_input;

    /* Each step's failure is reported as "gln_grouped_linear_forward: <step>: <detail>". */
    if (saved) {
        GLN_STEP(st, fail, FN, "creating the saved context", saved_create(L, &a, &s));
        s->need_dgrad = need_dgrad;
        s->need_wgrad = need_wgrad;
    }
    gln_tensor_t y = *a.y;
    if (!y.data) {
        /* zeroed: rows past Σ splits on the grouped path read as 0 */
        GLN_STEP(st, fail, FN, "allocating args->y", gln_output_alloc(ctx, &y, &ybuf));
        y.data = ybuf;
    }
    if (prequant)
        GLN_STEP(st, fail, FN, "grouping args->x_quantized",
                 gln_group_buffer_wrap(&a.x_quantized->packed, L->n, a.m_splits, a.splits_on_backend, &xq));
    else
        GLN_STEP(st, fail, FN, "grouping args->x",
                 gln_group_buffer_wrap(a.x, L->n, a.m_splits, a.splits_on_backend, &xw));
    GLN_STEP(st, fail, FN, "grouping args->y",
             gln_group_buffer_wrap(&y, L->n, a.m_splits, a.splits_on_backend, &yw));
    if (need_dgrad && L->dist && L->recipe.delayed)
        GLN_STEP(st, fail, FN, "saving the weight scales", save_weight_scales(L, s));
    GLN_STEP(st, fail, FN, "materializing the weights",
                       gln_materialize(L, GLN_MATERIALIZE_STAGE_FORWARD, a.microbatch, 1, need_dgrad && !L->dist, NULL,
                                       &mw));
    if (quant && !prequant)
        GLN_STEP(st, fail, FN, "quantizing args->x", gln_act_quantize(L, GLN_ROLE_INPUT, &xw, 1, keep_xcol, &xq));
    if (L->cfg.bias) GLN_STEP(st, fail, FN, "preparing the biases", bias_list(L, &bias));
    GLN_STEP(st, fail, FN, "fprop GEMM into args->y",
                       gln_stage_fprop(L, mw.w, quant ? &xq : &xw, L->cfg.bias ? bias.t : NULL, &yw));
    if (need_dgrad && !L->dist) {
        s->mw = mw;
        s->have_mw = 1;
        memset(&mw, 0, sizeof mw);
    } else {
        GLN_STEP(st, fail, FN, "releasing the weights", gln_materialize_release(L, &mw));
    }
    if (need_wgrad)
        GLN_STEP(st, fail, FN, "saving args->x for the wgrad", save_input(L, s, &xw, &xq, prequant));
    if (L->recipe.delayed && saved)
        GLN_STEP(st, fail, FN, "updating the delayed scales",
                           gln_fp8_state_update(ctx, &L->fp8_fwd, L->cfg.margin, L->cfg.amax_algo));

    if (ybuf) {
        if (s) {
            s->owned_y = ybuf;
        } else {
            /* Inference: the layer owns y until the next such forward (or destroy). */
            gln_ctx_free(ctx, L->owned_y);
            L->owned_y = ybuf;
        }
        a.y->data = ybuf;
        ybuf = NULL;
    }
    if (s) {
        L->live_saved++;
        *saved = s;
        s = NULL;
    }
fail:
    gln_materialize_release(L, &mw); /* no-op once handed over or released */
    gln_weight_set_free(ctx, &bias);
    gln_group_buffer_free(ctx, &xq);
    gln_group_buffer_free(ctx, &xw);
    gln_group_buffer_free(ctx, &yw);
    gln_ctx_free(ctx, ybuf);
    gln_saved_free(s);
    return st;
}

/* Over a sharded group the call fails on every rank when it fails on one (docs/distributed.md). */
gln_status_t gln_grouped_linear_forward(gln_grouped_linear_t *layer,
                                        const gln_grouped_linear_forward_args_t *args,
                                        gln_grouped_linear_saved_t **saved) {
    gln_sharded_weights_t *sw = layer ? gln_sharded_of(layer->dist) : NULL;
    gln_sharded_call_begin(sw, FN);
    return gln_sharded_call_end(sw, forward_impl(layer, args, saved));
}
