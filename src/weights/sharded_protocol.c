/* Sharded weight group: the gln_dist_weights_t hooks the layer calls.
 *
 * materialize: one all-gather of the working shards into a buffer allocated for this call;
 *              the N returned tensors point into it and release() frees it.  Nothing is
 *              cached, so a gathered group lives exactly from materialize to release.
 * grad_buffer: one full-size FP32 buffer for all N experts (padded like the shards), kept
 *              across steps; the layer's wgrad GEMMs overwrite it.
 * finalize:    one FP32 sum reduce-scatter of that buffer into main_grad (overwrite) or into a
 *              scratch shard that is then added to main_grad (accumulate).  With async_finalize
 *              the reduce-scatter is started and wait() completes it.
 *
 * materialize and finalize are collective: each first agrees (gln_sharded_agree) on its local
 * verdict (arguments, state, allocations) and on the call, then runs the collective without a
 * second agreement. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/context.h"
#include "common/error.h"
#include "weights/sharded.h"

#define REQUIRE_IMPL(fn, impl) GLN_REQUIRE_ARG((impl) != NULL, "%s: impl must not be NULL", (fn))

static int hook_requires_grad(void *impl) {
    const gln_sharded_weights_t *sw = impl;
    return sw && sw->cfg.requires_grad;
}

static gln_status_t track_live(gln_sharded_weights_t *sw, void *base, size_t bytes) {
    if (sw->live_count == sw->live_cap) {
        int cap = sw->live_cap ? 2 * sw->live_cap : 4;
        gln_sharded_live_t *grown = realloc(sw->live, (size_t)cap * sizeof *grown);
        GLN_REQUIRE(grown != NULL, GLN_STATUS_OUT_OF_MEMORY, "materialize: out of host memory");
        sw->live = grown;
        sw->live_cap = cap;
    }
    sw->live[sw->live_count++] = (gln_sharded_live_t){base, bytes};
    sw->live_bytes += bytes;
    if (sw->live_bytes > sw->peak_bytes) sw->peak_bytes = sw->live_bytes;
    return GLN_STATUS_SUCCESS;
}

/* The local part of materialize: arguments and the gathered buffer. */
static gln_status_t materialize_local(const char *fn, gln_sharded_weights_t *sw,
                                      gln_tensor_t *weights, char **full) {
    GLN_REQUIRE_NOT_NULL(fn, weights);
    return gln_ctx_alloc(sw->ctx, gln_sharded_full_bytes(sw), (void **)full);
}

static gln_status_t materialize(const char *fn, gln_call_t call, void *impl,
                                gln_tensor_t *weights) {
    REQUIRE_IMPL(fn, impl);
    gln_sharded_weights_t *sw = impl;
    gln_dtype_t dt = sw->cfg.working_dtype;
    size_t bytes = gln_sharded_full_bytes(sw);
    char *full = NULL;
    gln_status_t st = materialize_local(fn, sw, weights, &full);
    gln_agree_t shape = {{call, sw->shard_len, dt, 0, 0, 0},
                         {"call", "shard_len", "working_dtype", "", "", ""}};
    GLN_CHECK(st, fail, gln_sharded_agree(sw, sw->call_fn ? sw->call_fn : fn, st, &shape));
    GLN_CHECK(st, fail, gln_comm_allgather_agreed(sw->comm, sw->working, full, (size_t)sw->shard_len, dt));
    GLN_CHECK(st, fail, track_live(sw, full, bytes));
    size_t expert_bytes = (size_t)sw->expert_elems * gln_dtype_size(dt);
    for (int32_t i = 0; i < sw->cfg.num_experts; i++) {
        gln_tensor_t t;
        memset(&t, 0, sizeof t);
        t.dtype = dt;
        t.rows = sw->cfg.out_features;
        t.cols = sw->cfg.in_features;
        t.data = full + (size_t)i * expert_bytes;
        t.scaling = GLN_SCALING_NONE;
        weights[i] = t;
    }
    return GLN_STATUS_SUCCESS;
fail:
    gln_ctx_free(sw->ctx, full);
    return st;
}

static gln_status_t hook_materialize_forward(void *impl, gln_tensor_t *weights) {
    return materialize("gln_sharded_weights: materialize_forward", GLN_CALL_MATERIALIZE_FORWARD,
                       impl, weights);
}

static gln_status_t hook_materialize_backward(void *impl, gln_tensor_t *weights) {
    return materialize("gln_sharded_weights: materialize_backward", GLN_CALL_MATERIALIZE_BACKWARD,
                       impl, weights);
}

static gln_status_t hook_release(void *impl, gln_tensor_t *weights) {
    static const char *fn = "gln_sharded_weights: release";
    REQUIRE_IMPL(fn, impl);
    GLN_REQUIRE_NOT_NULL(fn, weights);
    gln_sharded_weights_t *sw = impl;
    for (int i = 0; i < sw->live_count; i++) {
        if (sw->live[i].base != weights[0].data) continue;
        gln_ctx_free(sw->ctx, sw->live[i].base);
        sw->live_bytes -= sw->live[i].bytes;
        sw->live[i] = sw->live[--sw->live_count];
        for (int32_t e = 0; e < sw->cfg.num_experts; e++) weights[e].data = NULL;
        return GLN_STATUS_SUCCESS;
    }
    return gln_fail(GLN_STATUS_INVALID_ARGUMENT,
                    "%s: weights[0].data %p is not a live materialization of this group (released "
                    "twice, or not from materialize)",
                    fn, weights[0].data);
}

void gln_sharded_release_all(gln_sharded_weights_t *sw) {
    for (int i = 0; i < sw->live_count; i++) gln_ctx_free(sw->ctx, sw->live[i].base);
    sw->live_count = 0;
    sw->live_bytes = 0;
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
    *buffer = sw->grad_full + (size_t)expert * (size_t)sw->expert_elems;
    return GLN_STATUS_SUCCESS;
}

/* main_grad += rs_buf after an accumulating reduce-scatter (FP32, host memory: CPU context). */
static void add_into_main_grad(gln_sharded_weights_t *sw) {
    for (int64_t i = 0; i < sw->shard_len; i++) sw->main_grad[i] += sw->rs_buf[i];
}

gln_status_t gln_sharded_complete(gln_sharded_weights_t *sw) {
    if (!sw->pending) return GLN_STATUS_SUCCESS;
    void *req = sw->request;
    sw->request = NULL;
    sw->pending = 0; /* the request is consumed even if waiting fails */
    GLN_TRY(gln_comm_wait(sw->comm, req));
    if (sw->pending_accumulate) add_into_main_grad(sw);
    return GLN_STATUS_SUCCESS;
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
        if (accumulate) add_into_main_grad(sw);
        return GLN_STATUS_SUCCESS;
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
}

gln_sharded_weights_t *gln_sharded_of(const gln_dist_weights_t *d) {
    return d && d->materialize_forward == hook_materialize_forward ? d->impl : NULL;
}

gln_status_t gln_sharded_agree(gln_sharded_weights_t *sw, const char *fn, gln_status_t local,
                               const gln_agree_t *shape) {
    sw->agreements++;
    return gln_comm_agree(sw->comm, fn, local, shape);
}

void gln_sharded_call_begin(gln_sharded_weights_t *sw, const char *fn) {
    if (!sw) return;
    sw->call_fn = fn;
    sw->call_start = sw->agreements;
    sw->call_planned = 1;
}

void gln_sharded_call_plan(gln_sharded_weights_t *sw, int more) {
    if (sw) sw->call_planned += more;
}

gln_status_t gln_sharded_call_end(gln_sharded_weights_t *sw, gln_status_t st) {
    if (!sw) return st;
    if (st != GLN_STATUS_SUCCESS && sw->agreements - sw->call_start < (uint64_t)sw->call_planned) {
        gln_agree_t none = {{0}, {0}};
        st = gln_sharded_agree(sw, sw->call_fn, st, &none); /* returns st with its message */
    }
    sw->call_fn = NULL;
    return st;
}
